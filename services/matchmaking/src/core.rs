//! The domain of quick pairing over the live store: seeks (tickets), pools, waves with a fenced lease,
//! pairings committed in two steps and finished by anyone after a crash. No tonic types here; the
//! names and payloads are `draughts_proto::contract::matchmaking`.
//!
//! A seek is one ticket record (`mm-ticket:{mm}<id>`) and one member in each of its pools' schedules
//! (`mm-pool:{mm}<pool>`; `{mm}` is the hash tag that keeps them in one slot of a Redis Cluster),
//! timed to lapse `seek_ttl` after the last renewal by a stream holding it. A wave
//! of a pool, run by the replica holding the pool's lease, removes lapsed members (their tickets end
//! `expired`), reads the pool's members in one round trip, pairs them ([`crate::pairing`]) and commits
//! each pair:
//! 1. claim: each ticket goes from `waiting` to `matching` by compare-and-set, refused when a newer
//!    lease (a higher fencing token) has written the ticket; the first claim also schedules the pairing
//!    in `mm-commits:{mm}` 10 s ahead (in the same atomic write);
//! 2. finish: both identities still known to Auth, neither player in a live game, then the game is
//!    created through Games under an id derived from the two tickets (a retry finds the same game), and
//!    both tickets become `paired`, their members leave every pool and the commit leaves `mm-commits:{mm}`.
//!    A failed check ends the offending ticket and puts the other back to `waiting`.
//!
//! A replica that dies between the steps leaves the commit due in `mm-commits:{mm}`, which every replica's
//! loop claims (each due member goes to one of them) and finishes the same way. A ticket is paired at
//! most once: every step is a compare-and-set on its version.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use draughts_auth::Identities;
use draughts_proto::contract::matchmaking::{
    self as mm, Commit, Member, Seat, Ticket, TicketState, WaveLease, Who,
};
use draughts_proto::ids::{GameId, PlayerId, TicketId};
use draughts_store::cas::{self, Change, Retry};
use draughts_store::{Effect, LiveStore, Version, now_unix_ms};
use sha2::{Digest, Sha256};

use crate::error::{MatchmakingError, MatchmakingResult};
use crate::pairing::{self, Candidate};
use crate::pools::Pool;
use crate::ports::{AgreedGame, GamesPort, RatingsPort};

/// How long a ticket record is kept after its last change.
const TICKET_TTL: Duration = Duration::from_secs(3600);
/// Most members one wave reads from a pool.
pub const MAX_POOL_READ: usize = 200_000;
/// Most pairs one wave commits at once.
const COMMIT_PARALLELISM: usize = 32;
/// Most attempts of a compare-and-set loop before the caller gets ABORTED.
const CAS_ATTEMPTS: u32 = 8;
/// Most refused pairs a wave reads (see [`mm::AVOID`]).
pub const MAX_AVOIDED: usize = 10_000;
/// How long a pair Games refused is not made again.
pub const AVOID_FOR: Duration = Duration::from_secs(600);
/// Aborted games among the last 5 that make a player an aborter.
pub const ABORTER_THRESHOLD: u32 = 3;

/// The settings of quick pairing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub wave_interval: Duration,
    /// A seek lapses this long after the last renewal by a stream.
    pub seek_ttl: Duration,
    /// A wave lease lasts this long unless renewed.
    pub lease_ttl: Duration,
    pub rules: pairing::Rules,
    pub max_pools_per_seek: usize,
    /// How long a claimed pairing waits before another replica may finish it (10 s in service).
    pub commit_retry: Duration,
    /// Most lobby seeks standing at once from one client address; 0 = no bound.
    pub lobby_seeks_per_address: u64,
    /// A real-time lobby seek lapses this long after its owner was last heard from
    /// ([`crate::service::LOBBY_SEEK_LIVES_FOR`] in service).
    pub lobby_seek_lives_for: Duration,
}

/// A signed-in caller, as the auth layer established them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub player: PlayerId,
    pub name: String,
    pub guest: bool,
}

impl Caller {
    fn who(&self) -> Who {
        Who {
            id: self.player.clone(),
            name: self.name.clone(),
            guest: self.guest,
        }
    }
}

/// Quick pairing over a live store. Cheap to clone.
#[derive(Clone)]
pub struct Matchmaker {
    pub live: Arc<dyn LiveStore>,
    pub pools: Arc<Vec<Pool>>,
    pub settings: Settings,
    pub games: Arc<dyn GamesPort>,
    pub ratings: Arc<dyn RatingsPort>,
    pub identities: Identities,
    /// This replica's name (lease owner).
    pub replica: String,
}

impl fmt::Debug for Matchmaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Matchmaker")
            .field("replica", &self.replica)
            .field("pools", &self.pools.len())
            .finish_non_exhaustive()
    }
}

/// What a wave did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaveReport {
    /// Whether this replica held the lease (else nothing was done).
    pub ran: bool,
    pub waiting: usize,
    pub paired: usize,
    pub lapsed: usize,
}

fn ticket_id() -> MatchmakingResult<TicketId> {
    TicketId::parse(&format!("t{}", hex::encode(rand::random::<[u8; 12]>())))
        .map_err(|e| MatchmakingError::Corrupt(e.to_string()))
}

/// The game id of a pairing: derived from the two tickets, so every retry names the same game.
pub fn game_id_of(white: &str, black: &str) -> MatchmakingResult<GameId> {
    let digest = Sha256::digest(format!("{white}|{black}").as_bytes());
    GameId::parse(&format!("m{}", hex::encode(&digest[..12])))
        .map_err(|e| MatchmakingError::Corrupt(e.to_string()))
}

/// White of a pair: a coin from the two tickets (fair, and the same for every retry).
fn white_first(a: &str, b: &str) -> bool {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    let digest = Sha256::digest(format!("{lo}|{hi}|colour").as_bytes());
    (digest[0] & 1 == 0) == (a == lo)
}

fn fence_of(ticket: &Ticket, pool: &str) -> u64 {
    ticket
        .fences
        .iter()
        .find(|(p, _)| p == pool)
        .map_or(0, |(_, t)| *t)
}

fn set_fence(ticket: &mut Ticket, pool: &str, token: u64) {
    match ticket.fences.iter_mut().find(|(p, _)| p == pool) {
        Some(entry) => entry.1 = entry.1.max(token),
        None => ticket.fences.push((pool.to_owned(), token)),
    }
}

/// Effects that take a ticket out of every pool and wake its streams.
fn leave_pools(ticket: &Ticket) -> Vec<Effect> {
    let mut effects: Vec<Effect> = ticket
        .seats
        .iter()
        .map(|seat| Effect::Cancel {
            set: mm::pool_set(&seat.pool),
            member: seat.member.clone(),
        })
        .collect();
    effects.push(wake(&ticket.id));
    effects
}

fn wake(ticket: &str) -> Effect {
    Effect::Publish {
        channel: mm::ticket_channel(ticket),
        payload: Bytes::from_static(mm::SIGNAL),
    }
}

/// Whether `ticket` is claimed for `commit` (step 1 of its pairing).
fn claimed_for(ticket: &Ticket, commit: &Commit) -> bool {
    matches!(&ticket.state, TicketState::Matching { game_id, .. } if *game_id == commit.game_id)
}

/// Stores `ticket` (for [`TICKET_TTL`]) with `effects`, then gives `then`.
fn write_ticket<R>(ticket: Ticket, effects: Vec<Effect>, then: R) -> Change<Ticket, R> {
    Change::Write {
        value: ticket,
        ttl: Some(TICKET_TTL),
        effects,
        then,
    }
}

impl Matchmaker {
    pub fn pool(&self, id: &str) -> MatchmakingResult<&Pool> {
        self.pools
            .iter()
            .find(|p| p.id == id)
            .ok_or_else(|| MatchmakingError::Invalid(format!("no pool {id:?} (see ListPools)")))
    }

    pub async fn load(&self, id: &str) -> MatchmakingResult<Option<(Ticket, Version)>> {
        match self.live.get(&mm::ticket_key(id)).await? {
            Some((bytes, version)) => Ok(Some((mm::decode_ticket(&bytes)?, version))),
            None => Ok(None),
        }
    }

    async fn store(
        &self,
        ticket: &Ticket,
        expected: Option<Version>,
        effects: &[Effect],
    ) -> MatchmakingResult<Version> {
        Ok(self
            .live
            .put_with(
                &mm::ticket_key(&ticket.id),
                Bytes::from(mm::encode_ticket(ticket)),
                expected,
                Some(TICKET_TTL),
                effects,
            )
            .await?)
    }

    /// Changes ticket `id` by compare-and-set ([`cas::update`]; `None`: no such ticket), tried
    /// again from a fresh read when another writer wins.
    async fn change_ticket<R>(
        &self,
        id: &str,
        change: impl FnMut(Option<Ticket>) -> MatchmakingResult<Change<Ticket, R>>,
    ) -> MatchmakingResult<R> {
        let codec = (
            |bytes: &[u8]| -> MatchmakingResult<Ticket> { Ok(mm::decode_ticket(bytes)?) },
            |ticket: &Ticket| -> MatchmakingResult<Bytes> {
                Ok(Bytes::from(mm::encode_ticket(ticket)))
            },
        );
        cas::update(
            self.live.as_ref(),
            &mm::ticket_key(id),
            &codec,
            Retry::times(CAS_ATTEMPTS),
            change,
        )
        .await
    }

    /// The caller's waiting seek in `pools`, joined; or a new one (ending a waiting seek of the caller
    /// in other pools). Refused while the caller is in a live game (unless every pool is correspondence).
    pub async fn seek(
        &self,
        caller: &Caller,
        pool_ids: &[String],
        range: Option<(i32, i32)>,
    ) -> MatchmakingResult<Ticket> {
        if pool_ids.is_empty() || pool_ids.len() > self.settings.max_pools_per_seek {
            return Err(MatchmakingError::Invalid(format!(
                "pool_ids: 1 to {} pools",
                self.settings.max_pools_per_seek
            )));
        }
        let mut pools = Vec::with_capacity(pool_ids.len());
        for id in pool_ids {
            let pool = self.pool(id)?.clone();
            if pools.iter().any(|p: &Pool| p.id == pool.id) {
                return Err(MatchmakingError::Invalid(format!(
                    "pool {id:?} is listed twice"
                )));
            }
            pools.push(pool);
        }
        if let Some((lo, hi)) = range
            && (lo > hi || lo < 0 || hi > 4000)
        {
            return Err(MatchmakingError::Invalid(
                "rating_range: 0 <= min <= max <= 4000".into(),
            ));
        }
        let mut wanted: Vec<&str> = pools.iter().map(|p| p.id.as_str()).collect();
        wanted.sort_unstable();
        // A waiting seek of the caller in the same pools is joined (a reconnect); in others, replaced.
        let pointer = self.live.get(&mm::player_key(&caller.player)).await?;
        if let Some((id, _)) = &pointer {
            let id = String::from_utf8_lossy(id).into_owned();
            if let Some((ticket, _)) = self.load(&id).await? {
                let mut held: Vec<&str> = ticket.seats.iter().map(|s| s.pool.as_str()).collect();
                held.sort_unstable();
                match ticket.state {
                    TicketState::Waiting | TicketState::Matching { .. }
                        if held == wanted && ticket.range == range =>
                    {
                        self.renew(&ticket).await?;
                        return Ok(ticket);
                    }
                    TicketState::Waiting => {
                        self.end(&id, "cancelled").await?;
                    }
                    // A stream that broke as its seek was paired, opened again soon after: the
                    // pairing is reported again (while its game is on), not refused as "playing a
                    // game" or made a second seek.
                    TicketState::Paired {
                        ref game_id,
                        ref pool,
                        at_ms,
                        ..
                    } if held == wanted
                        && ticket.range == range
                        && now_unix_ms().saturating_sub(at_ms) <= ms(self.settings.seek_ttl) =>
                    {
                        let correspondence = pools
                            .iter()
                            .any(|p| p.id == *pool && p.time.is_correspondence());
                        if correspondence
                            || self
                                .games
                                .player_state(&caller.player)
                                .await?
                                .live_games
                                .iter()
                                .any(|g| g == game_id.as_str())
                        {
                            return Ok(ticket);
                        }
                    }
                    _ => {}
                }
            }
        }
        let state = self.games.player_state(&caller.player).await?;
        if !state.live_games.is_empty() && pools.iter().any(|p| !p.time.is_correspondence()) {
            return Err(MatchmakingError::Precondition(
                "you are playing a game: finish it before seeking another".into(),
            ));
        }
        let aborter = state.recent_aborts >= ABORTER_THRESHOLD;
        let now = now_unix_ms();
        let id = ticket_id()?;
        let mut seats = Vec::with_capacity(pools.len());
        for pool in &pools {
            let rating = if caller.guest {
                crate::ports::START_RATING
            } else {
                self.ratings.rating(&caller.player, pool).await?
            };
            let member = Member {
                ticket: id.clone(),
                player: caller.player.clone(),
                rating: rating.rating,
                provisional: rating.provisional,
                guest: caller.guest,
                aborter,
                range,
                since_ms: now,
            };
            seats.push(Seat {
                pool: pool.id.clone(),
                member: mm::encode_member(&member),
                rating: rating.rating,
            });
        }
        let ticket = Ticket {
            id: id.clone(),
            player: caller.who(),
            seats,
            range,
            aborter,
            created_ms: now,
            fences: Vec::new(),
            state: TicketState::Waiting,
        };
        let lapse = now + ms(self.settings.seek_ttl);
        let effects: Vec<Effect> = ticket
            .seats
            .iter()
            .map(|seat| Effect::Schedule {
                set: mm::pool_set(&seat.pool),
                member: seat.member.clone(),
                at_unix_ms: lapse,
            })
            .collect();
        // The pointer is written first: a ticket never stands in a pool without the pointer a
        // reconnect joins it by. (Written after, a process killed between the two writes left a
        // seek nobody followed: paired later, its player never heard, and the reconnect made a
        // second seek.) A pointer to a ticket never stored is harmless: it loads as nothing.
        // Another seek of the caller racing this one wins or loses the pointer as a whole.
        // (Read again: ending a waiting seek above removed the pointer to it.)
        let key = mm::player_key(&caller.player);
        let current = self.live.get(&key).await?.map(|(_, v)| v);
        self.live
            .put(
                &key,
                Bytes::from(id.clone().into_string().into_bytes()),
                current,
                Some(TICKET_TTL),
            )
            .await?;
        self.store(&ticket, None, &effects).await?;
        Ok(ticket)
    }

    /// Keeps a waiting ticket in its pools for another `seek_ttl`.
    pub async fn renew(&self, ticket: &Ticket) -> MatchmakingResult<()> {
        let lapse = now_unix_ms() + ms(self.settings.seek_ttl);
        for seat in &ticket.seats {
            self.live
                .schedule(&mm::pool_set(&seat.pool), &seat.member, lapse)
                .await?;
        }
        Ok(())
    }

    /// Ends a waiting ticket with `reason` (`cancelled`, `expired`, `in_game`, `unknown_player`);
    /// returns whether it was waiting. A ticket being paired is left to its pairing.
    pub async fn end(&self, id: &str, reason: &str) -> MatchmakingResult<bool> {
        self.end_when(id, reason, |ticket| ticket.state == TicketState::Waiting)
            .await
    }

    /// Ends ticket `id` with `reason` if `may_end` says so, and drops its player's pointer to it;
    /// returns whether it ended.
    async fn end_when(
        &self,
        id: &str,
        reason: &str,
        may_end: impl Fn(&Ticket) -> bool,
    ) -> MatchmakingResult<bool> {
        let ended = self
            .change_ticket(id, |ticket| match ticket {
                Some(mut ticket) if may_end(&ticket) => {
                    ticket.state = TicketState::Ended {
                        reason: reason.to_owned(),
                        at_ms: now_unix_ms(),
                    };
                    let effects = leave_pools(&ticket);
                    let player = ticket.player.id.clone();
                    Ok(write_ticket(ticket, effects, Some(player)))
                }
                _ => Ok(Change::Keep(None)),
            })
            .await?;
        match ended {
            Some(player) => {
                self.drop_pointer(&player, id).await;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Ends the caller's waiting seek, if any.
    pub async fn cancel_player(&self, player: &str, reason: &str) -> MatchmakingResult<bool> {
        match self.live.get(&mm::player_key(player)).await? {
            Some((id, _)) => self.end(&String::from_utf8_lossy(&id), reason).await,
            None => Ok(false),
        }
    }

    async fn drop_pointer(&self, player: &str, ticket: &str) {
        if let Ok(Some((id, _))) = self.live.get(&mm::player_key(player)).await
            && id.as_ref() == ticket.as_bytes()
        {
            let _ = self.live.delete(&mm::player_key(player)).await;
        }
    }

    /// Takes or renews the wave lease of `pool`: its fencing token, or `None` when another replica
    /// holds it. The lease key never expires, so its version (the token) only grows.
    pub async fn lease(&self, pool: &str) -> MatchmakingResult<Option<u64>> {
        let now = now_unix_ms();
        let key = mm::wave_key(pool);
        let expected = match self.live.get(&key).await? {
            Some((bytes, version)) => {
                let lease = mm::decode_lease(&bytes)?;
                if lease.owner != self.replica && lease.until_ms > now {
                    return Ok(None);
                }
                Some(version)
            }
            None => None,
        };
        let lease = WaveLease {
            owner: self.replica.clone(),
            until_ms: now + ms(self.settings.lease_ttl),
        };
        match self
            .live
            .put(&key, Bytes::from(mm::encode_lease(&lease)), expected, None)
            .await
        {
            Ok(version) => Ok(Some(version)),
            Err(draughts_store::StoreError::Conflict { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Gives the lease of `pool` up (at shutdown), if this replica holds it.
    pub async fn release(&self, pool: &str) -> MatchmakingResult<()> {
        let key = mm::wave_key(pool);
        if let Some((bytes, version)) = self.live.get(&key).await? {
            let mut lease = mm::decode_lease(&bytes)?;
            if lease.owner == self.replica {
                lease.until_ms = 0;
                let _ = self
                    .live
                    .put(
                        &key,
                        Bytes::from(mm::encode_lease(&lease)),
                        Some(version),
                        None,
                    )
                    .await;
            }
        }
        Ok(())
    }

    /// The pairs waves must not make (Games refused them), by player: one read of at most
    /// [`MAX_AVOIDED`] pairs (best effort: without it, a refused pair is refused again).
    async fn avoided(&self, now: u64) -> HashMap<String, Vec<String>> {
        let mut by_player: HashMap<String, Vec<String>> = HashMap::new();
        let _ = self.live.take_due(mm::AVOID, now, MAX_AVOIDED).await;
        let Ok(pairs) = self.live.scheduled(mm::AVOID, MAX_AVOIDED).await else {
            return by_player;
        };
        for (member, _) in &pairs {
            if let Some((a, b)) = mm::avoid_pair(member) {
                by_player
                    .entry(a.to_owned())
                    .or_default()
                    .push(b.to_owned());
                by_player
                    .entry(b.to_owned())
                    .or_default()
                    .push(a.to_owned());
            }
        }
        by_player
    }

    /// One wave of `pool`, if this replica holds (or takes) its lease.
    pub async fn wave(&self, pool: &Pool) -> MatchmakingResult<WaveReport> {
        let Some(token) = self.lease(&pool.id).await? else {
            return Ok(WaveReport::default());
        };
        let set = mm::pool_set(&pool.id);
        let now = now_unix_ms();
        let lapsed = self.live.take_due(&set, now, MAX_POOL_READ).await?;
        for text in &lapsed {
            if let Ok(member) = mm::decode_member(text) {
                self.end(&member.ticket, "expired").await?;
            }
        }
        let listed = self.live.scheduled(&set, MAX_POOL_READ).await?;
        let members: Vec<Member> = listed
            .iter()
            .filter_map(|(text, _)| mm::decode_member(text).ok())
            .collect();
        let interval = ms(self.settings.wave_interval).max(1);
        let avoid = if members.len() < 2 {
            HashMap::new()
        } else {
            self.avoided(now).await
        };
        let candidates: Vec<Candidate> = members
            .iter()
            .map(|m| Candidate {
                avoid: avoid.get(m.player.as_str()).cloned().unwrap_or_default(),
                player: m.player.to_string(),
                rating: m.rating,
                provisional: m.provisional,
                guest: m.guest,
                aborter: m.aborter,
                range: m.range,
                missed_waves: u32::try_from(now.saturating_sub(m.since_ms) / interval)
                    .unwrap_or(u32::MAX),
            })
            .collect();
        let rules = self.settings.rules;
        let pairs = if candidates.len() < 2 {
            Vec::new()
        } else {
            tokio::task::spawn_blocking(move || pairing::pair(&candidates, &rules))
                .await
                .map_err(|e| MatchmakingError::Corrupt(format!("pairing task: {e}")))?
        };
        use futures_util::StreamExt;
        let jobs: Vec<(Member, Member)> = pairs
            .iter()
            .map(|&(a, b)| (members[a].clone(), members[b].clone()))
            .collect();
        let results: Vec<bool> = futures_util::stream::iter(jobs)
            .map(|(a, b)| {
                let (this, pool) = (self.clone(), pool.clone());
                async move { this.pair_tickets(&pool, token, &a, &b).await }
            })
            .buffer_unordered(COMMIT_PARALLELISM)
            .map(|r| match r {
                Ok(paired) => paired,
                Err(e) => {
                    tracing::warn!(pool = %pool.id, error = %e, "a pairing failed; its seeks wait for the next wave");
                    false
                }
            })
            .collect()
            .await;
        Ok(WaveReport {
            ran: true,
            waiting: members.len(),
            paired: results.iter().filter(|p| **p).count(),
            lapsed: lapsed.len(),
        })
    }

    /// Claims two tickets for one game and finishes the pairing; `false` when a claim lost (the ticket
    /// changed, or a newer lease wrote it).
    async fn pair_tickets(
        &self,
        pool: &Pool,
        token: u64,
        a: &Member,
        b: &Member,
    ) -> MatchmakingResult<bool> {
        let (white, black) = if white_first(&a.ticket, &b.ticket) {
            (a, b)
        } else {
            (b, a)
        };
        let commit = Commit {
            pool: pool.id.clone(),
            white: white.ticket.clone(),
            black: black.ticket.clone(),
            game_id: game_id_of(&white.ticket, &black.ticket)?,
            token,
        };
        let commit_text = mm::encode_commit(&commit);
        let schedule = Effect::Schedule {
            set: mm::COMMITS.into(),
            member: commit_text.clone(),
            at_unix_ms: now_unix_ms() + ms(self.settings.commit_retry),
        };
        if !self
            .claim(&commit, &commit.white, &commit.black, &[schedule])
            .await?
        {
            return Ok(false);
        }
        if !self
            .claim(&commit, &commit.black, &commit.white, &[])
            .await?
        {
            self.unclaim(&commit, &commit.white).await?;
            self.live.cancel(mm::COMMITS, &commit_text).await?;
            return Ok(false);
        }
        self.finish(&commit).await
    }

    async fn claim(
        &self,
        commit: &Commit,
        id: &str,
        partner: &TicketId,
        effects: &[Effect],
    ) -> MatchmakingResult<bool> {
        let Some((mut ticket, version)) = self.load(id).await? else {
            return Ok(false);
        };
        if ticket.state != TicketState::Waiting || fence_of(&ticket, &commit.pool) > commit.token {
            return Ok(false);
        }
        set_fence(&mut ticket, &commit.pool, commit.token);
        ticket.state = TicketState::Matching {
            pool: commit.pool.clone(),
            partner: partner.clone(),
            game_id: commit.game_id.clone(),
            token: commit.token,
            at_ms: now_unix_ms(),
        };
        match self.store(&ticket, Some(version), effects).await {
            Ok(_) => Ok(true),
            Err(MatchmakingError::Conflict) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Puts a ticket claimed for `commit` back to waiting (its partner could not be paired).
    async fn unclaim(&self, commit: &Commit, id: &str) -> MatchmakingResult<()> {
        self.change_ticket(id, |ticket| match ticket {
            Some(mut ticket) if claimed_for(&ticket, commit) => {
                ticket.state = TicketState::Waiting;
                Ok(write_ticket(ticket, vec![wake(id)], ()))
            }
            _ => Ok(Change::Keep(())),
        })
        .await
    }

    /// Ends a ticket claimed for `commit` with `reason`.
    async fn end_claimed(&self, commit: &Commit, id: &str, reason: &str) -> MatchmakingResult<()> {
        self.end_when(id, reason, |ticket| claimed_for(ticket, commit))
            .await
            .map(drop)
    }

    /// Step 2 of a pairing (see the module docs): checks, the game, both tickets paired. Idempotent:
    /// run again by whoever takes the commit after a crash.
    pub async fn finish(&self, commit: &Commit) -> MatchmakingResult<bool> {
        let commit_text = mm::encode_commit(commit);
        let (Some((white, _)), Some((black, _))) = (
            self.load(&commit.white).await?,
            self.load(&commit.black).await?,
        ) else {
            self.live.cancel(mm::COMMITS, &commit_text).await?;
            return Ok(false);
        };
        let claimed = |t: &Ticket| match &t.state {
            TicketState::Matching { game_id, .. } | TicketState::Paired { game_id, .. } => {
                *game_id == commit.game_id
            }
            _ => false,
        };
        if !claimed(&white) || !claimed(&black) {
            // One side never got (or lost) its claim: the other goes back to waiting.
            self.unclaim(commit, &commit.white).await?;
            self.unclaim(commit, &commit.black).await?;
            self.live.cancel(mm::COMMITS, &commit_text).await?;
            return Ok(false);
        }
        let pool = self.pool(&commit.pool)?.clone();
        // Fair play, checked at the last moment: both identities known to Auth, nobody in a live game.
        for (ticket, other) in [(&white, &black), (&black, &white)] {
            if matches!(ticket.state, TicketState::Paired { .. }) {
                continue;
            }
            let known = match PlayerId::parse(&ticket.player.id) {
                Ok(id) => self.identities.lookup(&id).await?.is_some(),
                Err(_) => false,
            };
            let reason = if !known {
                Some("unknown_player")
            } else if !pool.time.is_correspondence()
                && self
                    .games
                    .player_state(&ticket.player.id)
                    .await?
                    .live_games
                    .iter()
                    .any(|g| g != commit.game_id.as_str())
            {
                Some("in_game")
            } else {
                None
            };
            if let Some(reason) = reason {
                self.end_claimed(commit, &ticket.id, reason).await?;
                self.unclaim(commit, &other.id).await?;
                self.live.cancel(mm::COMMITS, &commit_text).await?;
                return Ok(false);
            }
        }
        let created = self
            .games
            .create_game(&AgreedGame {
                game_id: commit.game_id.to_string(),
                pool: pool.clone(),
                white: white.player.id.to_string(),
                black: black.player.id.to_string(),
            })
            .await;
        if let Err(MatchmakingError::Upstream(refused)) = &created
            && refused.kind() == draughts_proto::ErrorKind::FailedPrecondition
        {
            // Games will not seat these two together (one blocks the other): both wait on, and
            // waves pair them with others for a while. Neither is told why.
            let until = now_unix_ms() + AVOID_FOR.as_millis() as u64;
            self.live
                .schedule(
                    mm::AVOID,
                    &mm::avoid_member(&white.player.id, &black.player.id),
                    until,
                )
                .await?;
            self.unclaim(commit, &commit.white).await?;
            self.unclaim(commit, &commit.black).await?;
            self.live.cancel(mm::COMMITS, &commit_text).await?;
            return Ok(false);
        }
        created?;
        let now = now_unix_ms();
        for (id, color, opponent) in [
            (&commit.white, "white", &black.player),
            (&commit.black, "black", &white.player),
        ] {
            self.mark_paired(commit, id, color, opponent, now).await?;
        }
        self.live.cancel(mm::COMMITS, &commit_text).await?;
        self.record_wait(&pool.id, now.saturating_sub(white.created_ms))
            .await;
        self.record_wait(&pool.id, now.saturating_sub(black.created_ms))
            .await;
        Ok(true)
    }

    async fn mark_paired(
        &self,
        commit: &Commit,
        id: &str,
        color: &str,
        opponent: &Who,
        now: u64,
    ) -> MatchmakingResult<()> {
        // The player's pointer stays: a seek opened again in the same pools (a stream that broke at
        // the moment of the pairing) finds the pairing (see `seek`).
        self.change_ticket(id, |ticket| match ticket {
            Some(mut ticket) if claimed_for(&ticket, commit) => {
                ticket.state = TicketState::Paired {
                    pool: commit.pool.clone(),
                    game_id: commit.game_id.clone(),
                    color: color.to_owned(),
                    opponent: opponent.clone(),
                    at_ms: now,
                };
                let effects = leave_pools(&ticket);
                Ok(write_ticket(ticket, effects, ()))
            }
            _ => Ok(Change::Keep(())),
        })
        .await
    }

    /// Folds one pairing's wait into the pool's typical wait (best effort: a lost race skips it).
    async fn record_wait(&self, pool: &str, waited_ms: u64) {
        let key = mm::stats_key(pool);
        let (mut stats, version) = match self.live.get(&key).await {
            Ok(Some((bytes, v))) => (mm::decode_stats(&bytes).unwrap_or_default(), Some(v)),
            Ok(None) => (mm::PoolStats::default(), None),
            Err(_) => return,
        };
        stats.typical_wait_ms = if stats.pairings == 0 {
            waited_ms
        } else {
            (stats.typical_wait_ms * 7 + waited_ms) / 8
        };
        stats.pairings += 1;
        let _ = self
            .live
            .put(&key, Bytes::from(mm::encode_stats(&stats)), version, None)
            .await;
    }

    /// Finishes pairings whose wave runner died between claim and finish (any replica may call it).
    pub async fn recover(&self) -> MatchmakingResult<usize> {
        let due = self
            .live
            .claim_due(mm::COMMITS, now_unix_ms(), 16, self.settings.commit_retry)
            .await?;
        let mut finished = 0;
        for text in due {
            match mm::decode_commit(&text) {
                Ok(commit) => {
                    if self.finish(&commit).await? {
                        finished += 1;
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "a pending pairing does not decode; dropped");
                    self.live.cancel(mm::COMMITS, &text).await?;
                }
            }
        }
        Ok(finished)
    }

    /// How many seeks wait in each pool (in `pools` order).
    pub async fn seeking(&self) -> MatchmakingResult<HashMap<String, u64>> {
        let mut out = HashMap::new();
        for pool in self.pools.iter() {
            out.insert(
                pool.id.clone(),
                self.live.schedule_len(&mm::pool_set(&pool.id)).await?,
            );
        }
        Ok(out)
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_fair_and_stable() {
        let mut whites = 0;
        for i in 0..1000 {
            let (a, b) = (format!("t{i}"), format!("u{i}"));
            assert_eq!(
                white_first(&a, &b),
                !white_first(&b, &a),
                "one white per pair"
            );
            if white_first(&a, &b) {
                whites += 1;
            }
        }
        assert!((400..600).contains(&whites), "{whites} of 1000");
        assert_eq!(game_id_of("a", "b").unwrap(), game_id_of("a", "b").unwrap());
        assert_ne!(game_id_of("a", "b").unwrap(), game_id_of("b", "a").unwrap());
    }
}
