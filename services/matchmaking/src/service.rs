//! The API's domain (no tonic types): following a seek, the wave loop, lobby seeks, challenges and
//! rematches through Games' invitations, the lobby's numbers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use draughts_proto::contract::matchmaking::{self as mm, LobbySeek, Ticket, TicketState, Who};
use draughts_proto::ids::{GameId, TicketId};
use draughts_proto::pb;
use draughts_store::cas::{self, Change, Raw, Retry};
use draughts_store::{Effect, Notice, now_unix_ms};
use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::core::{Caller, Matchmaker};
use crate::error::{MatchmakingError, MatchmakingResult};
use crate::pools::{Pool, TimeControl};

/// Most lobby seeks of one player.
pub const MAX_LOBBY_SEEKS_PER_PLAYER: u64 = 3;
/// Most lobby seeks made from one client address (IPv6: one network), whoever the players.
pub const MAX_LOBBY_SEEKS_PER_ADDRESS: u64 = 10;
/// Most lobby seeks in all.
pub const MAX_LOBBY_SEEKS: u64 = 10_000;
/// A real-time lobby seek lapses this long after its owner was last heard from (any call of theirs to
/// Matchmaking, or the heartbeat of their open WatchLobby stream).
pub const LOBBY_SEEK_LIVES_FOR: Duration = Duration::from_secs(60);
/// How often an open WatchLobby stream of a signed-in player keeps their real-time seeks alive.
pub const LOBBY_HEARTBEAT: Duration = Duration::from_secs(20);
/// Longest a guest's correspondence seek stands (a guest is a browser's session, not an account).
pub const GUEST_SEEK_MAX: Duration = Duration::from_secs(24 * 3600);
/// A reserved per-player or per-address slot is ignored after this unless the seek is made.
const SLOT_RESERVED_FOR: Duration = Duration::from_secs(60);
/// Compare-and-set rounds of one reservation before it gives up (UNAVAILABLE).
const RESERVE_ATTEMPTS: u32 = 32;
/// How long a lobby gate key (whose version is all that matters) lives after its last write.
const GATE_TTL: Duration = Duration::from_secs(24 * 3600);
/// Lapsed lobby seeks removed per round of the background prune.
const PRUNE_BATCH: usize = 500;
/// How long a player counts as online after their last call.
pub const ONLINE_FOR: Duration = Duration::from_secs(60);
/// How often the lobby's numbers are read again.
pub const LOBBY_REFRESH: Duration = Duration::from_secs(2);
/// Waves of one pool are at least this far apart, pokes or not.
const MIN_WAVE_GAP: Duration = Duration::from_millis(100);
/// How long shutdown waits for the wave leases to be handed back.
const RELEASE_TIME: Duration = Duration::from_secs(2);

/// What a seek's follower sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeekUpdate {
    Waiting {
        seek_id: TicketId,
        waited_ms: u64,
        missed_waves: u32,
        ratings: Vec<i32>,
    },
    Paired {
        seek_id: TicketId,
        game_id: String,
        pool_id: String,
        white: bool,
        opponent: Who,
        waited_ms: u64,
    },
    Ended {
        seek_id: TicketId,
        reason: String,
    },
}

/// The lobby's numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LobbyStats {
    pub at_ms: u64,
    pub players_online: u64,
    pub games_in_progress: u64,
    /// (pool id, seeking, typical wait ms), in pool order.
    pub pools: Vec<(String, u64, u64)>,
    pub lobby_seeks: u64,
}

/// The service's domain. Cheap to clone.
#[derive(Clone, Debug)]
pub struct MatchmakingCore {
    pub mm: Matchmaker,
    /// When each pool's last wave ran on this replica (for pokes).
    last_wave: Arc<Mutex<HashMap<String, Instant>>>,
    /// The lobby's numbers, shared by every WatchLobby stream of this replica.
    lobby: Arc<tokio::sync::watch::Sender<LobbyStats>>,
    /// The last count of games in progress Games gave, and when.
    in_progress: Arc<Mutex<Option<(Instant, u64)>>>,
}

/// How long a count of games in progress is used before Games is asked again (every WatchLobby
/// start and lobby refresh of a replica share it, so a crowd of watchers costs Games nothing more).
pub const IN_PROGRESS_FRESH: Duration = Duration::from_millis(250);

impl MatchmakingCore {
    pub fn new(mm: Matchmaker) -> MatchmakingCore {
        MatchmakingCore {
            mm,
            last_wave: Arc::default(),
            lobby: Arc::new(tokio::sync::watch::channel(LobbyStats::default()).0),
            in_progress: Arc::default(),
        }
    }

    /// Marks `player` online for [`ONLINE_FOR`] and keeps their real-time lobby seeks alive for
    /// [`LOBBY_SEEK_LIVES_FOR`] (best effort).
    pub async fn seen(&self, player: &str) {
        let now = now_unix_ms();
        let until = now + ONLINE_FOR.as_millis() as u64;
        let _ = self.mm.live.schedule(mm::ONLINE, player, until).await;
        if let Err(e) = self.keep_seeks_alive(player, now).await {
            tracing::debug!(error = %e, "keeping lobby seeks alive failed");
        }
    }

    /// Pushes back the lapse of `player`'s real-time lobby seeks (at most
    /// [`MAX_LOBBY_SEEKS_PER_PLAYER`] of them: O(1) commands).
    async fn keep_seeks_alive(&self, player: &str, now: u64) -> MatchmakingResult<()> {
        let live = &self.mm.live;
        let mine = live
            .scheduled(
                &mm::lobby_of(player),
                MAX_LOBBY_SEEKS_PER_PLAYER as usize + 2,
            )
            .await?;
        for (id, _) in mine.iter().filter(|(id, _)| !id.starts_with("r:")) {
            if let Some(seek) = self.lobby_seek(id).await?
                && seek.real_time()
                && seek.expires_ms > now
            {
                live.schedule(mm::LOBBY, id, self.lapse_of(&seek, now))
                    .await?;
            }
        }
        Ok(())
    }

    /// Starts (or joins) the caller's seek and follows it: updates on the receiver until it is paired
    /// or ended. Dropping the receiver (the client went away) withdraws a seek still waiting.
    pub async fn seek(
        &self,
        caller: &Caller,
        pool_ids: &[String],
        range: Option<(i32, i32)>,
    ) -> MatchmakingResult<mpsc::Receiver<SeekUpdate>> {
        self.seen(&caller.player).await;
        let ticket = self.mm.seek(caller, pool_ids, range).await?;
        for seat in &ticket.seats {
            let _ = self
                .mm
                .live
                .publish(mm::POKES, Bytes::from(mm::encode_poke(&seat.pool)))
                .await;
        }
        let (tx, rx) = mpsc::channel(8);
        tokio::spawn(self.clone().follow(ticket, tx));
        Ok(rx)
    }

    async fn follow(self, ticket: Ticket, tx: mpsc::Sender<SeekUpdate>) {
        let id = ticket.id.clone();
        let mut wakes = match self.mm.live.subscribe(&mm::ticket_channel(&id)).await {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "no ticket wake-ups: polling");
                None
            }
        };
        let ratings: Vec<i32> = ticket.seats.iter().map(|s| s.rating).collect();
        let interval = self.mm.settings.wave_interval;
        let renew_every = self.mm.settings.seek_ttl / 3;
        let mut last_renew = Instant::now();
        let mut last_missed = None;
        loop {
            let current = match self.mm.load(&id).await {
                Ok(Some((t, _))) => Some(t),
                Ok(None) => None,
                Err(e) => {
                    tracing::warn!(error = %e, "reading a seek failed");
                    Some(ticket.clone())
                }
            };
            let now = now_unix_ms();
            let update = match current.as_ref().map(|t| &t.state) {
                None => Some(SeekUpdate::Ended {
                    seek_id: id.clone(),
                    reason: "expired".into(),
                }),
                Some(TicketState::Paired {
                    pool,
                    game_id,
                    color,
                    opponent,
                    at_ms,
                }) => Some(SeekUpdate::Paired {
                    seek_id: id.clone(),
                    game_id: game_id.to_string(),
                    pool_id: pool.clone(),
                    white: color == "white",
                    opponent: opponent.clone(),
                    waited_ms: at_ms.saturating_sub(ticket.created_ms),
                }),
                Some(TicketState::Ended { reason, .. }) => Some(SeekUpdate::Ended {
                    seek_id: id.clone(),
                    reason: reason.clone(),
                }),
                Some(TicketState::Waiting | TicketState::Matching { .. }) => {
                    let missed = u32::try_from(
                        now.saturating_sub(ticket.created_ms)
                            / (interval.as_millis() as u64).max(1),
                    )
                    .unwrap_or(u32::MAX);
                    if last_missed != Some(missed) {
                        last_missed = Some(missed);
                        if tx
                            .send(SeekUpdate::Waiting {
                                seek_id: id.clone(),
                                waited_ms: now.saturating_sub(ticket.created_ms),
                                missed_waves: missed,
                                ratings: ratings.clone(),
                            })
                            .await
                            .is_err()
                        {
                            break;
                        }
                    }
                    if last_renew.elapsed() >= renew_every {
                        last_renew = Instant::now();
                        if let Some(t) = &current {
                            let _ = self.mm.renew(t).await;
                        }
                        self.seen(&ticket.player.id).await;
                    }
                    None
                }
            };
            if let Some(update) = update {
                let _ = tx.send(update).await;
                return;
            }
            tokio::select! {
                _ = tx.closed() => break,
                _ = tokio::time::sleep(interval.min(renew_every)) => {}
                notice = async {
                    match wakes.as_mut() {
                        Some(s) => s.next().await,
                        None => std::future::pending().await,
                    }
                } => {
                    if matches!(notice, None | Some(Notice::Gap)) && wakes.is_some() {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }
        // The client went away: the seek leaves its pools at once.
        if let Err(e) = self.mm.end(&id, "cancelled").await {
            tracing::warn!(error = %e, seek = %id, "withdrawing a seek failed; it lapses by itself");
        }
    }

    /// Runs waves (every `wave_interval`, and at once on a poke for a pool whose lease this replica
    /// holds), finishes pairings left by dead replicas, and refreshes the lobby's numbers, until
    /// `shutdown` resolves; then gives the leases up.
    pub async fn run_waves(self, shutdown: impl std::future::Future<Output = ()>) {
        let mut pokes = self.mm.live.subscribe(mm::POKES).await.ok();
        let mut tick = tokio::time::interval(self.mm.settings.wave_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut lobby_tick = tokio::time::interval(LOBBY_REFRESH);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                _ = tick.tick() => {
                    // A tick reads every pool: with the store down each read waits for its error, so
                    // shutdown must not wait for the whole round (it took minutes with hundreds of pools).
                    let round = async {
                        for pool in self.mm.pools.iter() {
                            if !self.wave_if_waiting(pool).await {
                                // The store is unreachable: the other pools would fail alike.
                                return;
                            }
                        }
                        if let Err(e) = self.mm.recover().await {
                            tracing::warn!(error = %e, "finishing pending pairings failed");
                        }
                    };
                    tokio::select! {
                        _ = &mut shutdown => break,
                        _ = round => {}
                    }
                }
                _ = lobby_tick.tick() => {
                    if let Err(e) = self.prune_lobby().await {
                        tracing::warn!(error = %e, "removing lapsed lobby seeks failed");
                    }
                    if self.lobby.receiver_count() > 0 {
                        match self.read_lobby_stats().await {
                            Ok(stats) => { self.lobby.send_if_modified(|old| {
                                let changed = (old.players_online, old.games_in_progress, &old.pools, old.lobby_seeks)
                                    != (stats.players_online, stats.games_in_progress, &stats.pools, stats.lobby_seeks);
                                if changed { *old = stats; }
                                changed
                            }); }
                            Err(e) => tracing::warn!(error = %e, "reading the lobby's numbers failed"),
                        }
                    }
                }
                notice = async {
                    match pokes.as_mut() {
                        Some(s) => s.next().await,
                        None => std::future::pending().await,
                    }
                } => {
                    if let Some(Notice::Message(payload)) = notice
                        && let Some(pool_id) = mm::decode_poke(&payload)
                        && let Ok(pool) = self.mm.pool(&pool_id)
                    {
                        let pool = pool.clone();
                        let recent = self.last_wave.lock().ok()
                            .and_then(|w| w.get(&pool.id).copied())
                            .is_some_and(|at| at.elapsed() < MIN_WAVE_GAP);
                        if !recent {
                            self.wave_if_waiting(&pool).await;
                        }
                    }
                }
            }
        }
        // Hands back the leases this replica may hold (only pools it ran a wave in), all at once and for
        // at most RELEASE_TIME: another replica takes an unreleased lease when it runs out anyway.
        let waved: Vec<String> = self
            .last_wave
            .lock()
            .map(|w| w.keys().cloned().collect())
            .unwrap_or_default();
        let releases = futures_util::future::join_all(waved.iter().map(|id| self.mm.release(id)));
        if tokio::time::timeout(RELEASE_TIME, releases).await.is_err() {
            tracing::warn!("releasing the wave leases timed out; they run out on their own");
        }
    }

    /// Runs a wave in `pool` if anyone waits there; false when the pool could not be read (the store is
    /// unreachable).
    async fn wave_if_waiting(&self, pool: &Pool) -> bool {
        match self.mm.live.schedule_len(&mm::pool_set(&pool.id)).await {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(pool = %pool.id, error = %e, "reading a pool failed; the next wave tick retries");
                return false;
            }
        }
        if let Ok(mut w) = self.last_wave.lock() {
            w.insert(pool.id.clone(), Instant::now());
        }
        match self.mm.wave(pool).await {
            Ok(report) if report.paired > 0 => {
                tracing::info!(pool = %pool.id, waiting = report.waiting, paired = report.paired, "wave")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(pool = %pool.id, error = %e, "wave failed"),
        }
        true
    }

    /// The lobby's numbers now (shared by every WatchLobby stream of the replica).
    pub fn lobby_feed(&self) -> tokio::sync::watch::Receiver<LobbyStats> {
        self.lobby.subscribe()
    }

    pub async fn read_lobby_stats(&self) -> MatchmakingResult<LobbyStats> {
        let live = &self.mm.live;
        let now = now_unix_ms();
        live.take_due(mm::ONLINE, now, 10_000).await?;
        let mut pools = Vec::with_capacity(self.mm.pools.len());
        for pool in self.mm.pools.iter() {
            let seeking = live.schedule_len(&mm::pool_set(&pool.id)).await?;
            let wait = match live.get(&mm::stats_key(&pool.id)).await? {
                Some((bytes, _)) => mm::decode_stats(&bytes)?.typical_wait_ms,
                None => 0,
            };
            pools.push((pool.id.clone(), seeking, wait));
        }
        Ok(LobbyStats {
            at_ms: now,
            players_online: live.schedule_len(mm::ONLINE).await?,
            games_in_progress: self.games_in_progress().await,
            pools,
            lobby_seeks: live.schedule_len(mm::LOBBY).await?,
        })
    }

    /// When `seek` lapses if nothing keeps it alive from `now`: its expiry, or for a real-time seek
    /// [`LOBBY_SEEK_LIVES_FOR`] (the setting) from now if sooner.
    fn lapse_of(&self, seek: &LobbySeek, now: u64) -> u64 {
        if seek.real_time() {
            seek.expires_ms
                .min(now + self.mm.settings.lobby_seek_lives_for.as_millis() as u64)
        } else {
            seek.expires_ms
        }
    }

    /// Games in progress, as Games counts them (`Games.CountGamesInProgress`: Games owns its
    /// schedules), at most one call per [`IN_PROGRESS_FRESH`] on this replica; when Games does not
    /// answer, the last count (the lobby's numbers are a view, not a promise).
    async fn games_in_progress(&self) -> u64 {
        let last = self.in_progress.lock().ok().and_then(|last| *last);
        if let Some((at, count)) = last
            && at.elapsed() < IN_PROGRESS_FRESH
        {
            return count;
        }
        match self.mm.games.games_in_progress().await {
            Ok(count) => {
                if let Ok(mut slot) = self.in_progress.lock() {
                    *slot = Some((Instant::now(), count));
                }
                count
            }
            Err(e) => {
                tracing::warn!(error = %e, "games in progress not counted; the last count is shown");
                last.map_or(0, |(_, count)| count)
            }
        }
    }

    /// Removes lapsed lobby seeks (expired, or real-time ones whose owner went away): run in the
    /// background by every replica (each lapsed seek is taken by one), never on a caller's read.
    pub async fn prune_lobby(&self) -> MatchmakingResult<()> {
        let live = &self.mm.live;
        for id in live.take_due(mm::LOBBY, now_unix_ms(), PRUNE_BATCH).await? {
            match self.lobby_seek(&id).await? {
                Some(seek) => self.unlist(&seek).await?,
                None => {
                    // The record is gone (a crash between writes): clear every index it may be in.
                    live.cancel(&mm::lobby_index(None), &id).await?;
                    for variant in draughts_engine::Variant::ALL {
                        live.cancel(&mm::lobby_index(Some(variant.key())), &id)
                            .await?;
                    }
                }
            }
        }
        Ok(())
    }

    async fn lobby_seek(&self, id: &str) -> MatchmakingResult<Option<LobbySeek>> {
        match self.mm.live.get(&mm::lobby_seek_key(id)).await? {
            Some((bytes, _)) => Ok(Some(mm::decode_lobby_seek(&bytes)?)),
            None => Ok(None),
        }
    }

    async fn unlist(&self, seek: &LobbySeek) -> MatchmakingResult<()> {
        let live = &self.mm.live;
        live.cancel(mm::LOBBY, &seek.id).await?;
        live.cancel(&mm::lobby_index(None), &seek.id).await?;
        live.cancel(&mm::lobby_index(Some(&seek.variant)), &seek.id)
            .await?;
        live.cancel(&mm::lobby_of(&seek.seeker.id), &seek.id)
            .await?;
        if !seek.address.is_empty() {
            live.cancel(&mm::lobby_at(&seek.address), &seek.id).await?;
        }
        live.delete(&mm::lobby_seek_key(&seek.id)).await?;
        Ok(())
    }

    /// Reserves one of `bound` places in `set` (a per-player or per-address schedule of seeks) for
    /// [`SLOT_RESERVED_FOR`], or refuses with `refusal`. Atomic: the count is read, then the place
    /// taken in one compare-and-set of the set's gate key (whose version every reservation bumps), so
    /// of racing calls, one whose count is stale loses its write and counts again.
    async fn reserve(
        &self,
        set: &str,
        slot: &str,
        bound: u64,
        now: u64,
        refusal: impl FnOnce() -> String,
    ) -> MatchmakingResult<()> {
        let live = &self.mm.live;
        let gate = mm::lobby_gate(set);
        live.take_due(set, now, 100).await?;
        let taken = Effect::Schedule {
            set: set.to_owned(),
            member: slot.to_owned(),
            at_unix_ms: now + SLOT_RESERVED_FOR.as_millis() as u64,
        };
        let reserved = cas::update_async(
            live.as_ref(),
            &gate,
            &Raw,
            Retry::times(RESERVE_ATTEMPTS),
            |_| {
                let taken = taken.clone();
                async move {
                    if live.schedule_len(set).await? >= bound {
                        return Ok(Change::Keep(false));
                    }
                    Ok(Change::Write {
                        value: Bytes::from_static(b"1"),
                        ttl: Some(GATE_TTL),
                        effects: vec![taken],
                        then: true,
                    })
                }
            },
        )
        .await;
        match reserved {
            Ok(true) => Ok(()),
            Ok(false) => Err(MatchmakingError::Exhausted(refusal())),
            Err(MatchmakingError::Conflict) => Err(MatchmakingError::Exhausted(
                "too many lobby seeks being made at once: try again".into(),
            )),
            Err(e) => Err(e),
        }
    }

    /// Offers a custom game in the lobby: an open invitation of Games (made for the caller), listed.
    pub async fn create_lobby_seek(
        &self,
        caller: &Caller,
        address: &str,
        authorization: &str,
        mut request: pb::CreateLobbySeekRequest,
    ) -> MatchmakingResult<LobbySeek> {
        self.seen(&caller.player).await;
        let range = range_of(request.rating_range.as_ref())?;
        let rules = draughts_proto::convert::rule_set(request.rules.as_ref())?;
        let time = time_of(request.time_control.as_ref())?;
        if caller.guest && time.is_correspondence() {
            let most = GUEST_SEEK_MAX.as_millis() as u64;
            if request.expires_in_ms == 0 || request.expires_in_ms > most {
                request.expires_in_ms = most;
            }
        }
        let live = &self.mm.live;
        let now = now_unix_ms();
        if live.schedule_len(mm::LOBBY).await? >= MAX_LOBBY_SEEKS {
            return Err(MatchmakingError::Exhausted(
                "the lobby is full; try again later".into(),
            ));
        }
        let slot = format!("r:{:016x}", rand::random::<u64>());
        let mine = mm::lobby_of(&caller.player);
        self.reserve(&mine, &slot, MAX_LOBBY_SEEKS_PER_PLAYER, now, || {
            format!("at most {MAX_LOBBY_SEEKS_PER_PLAYER} lobby seeks per player: cancel one first")
        })
        .await?;
        // An unknown address (no edge in front) is nobody's: no per-address bound.
        let per_address = self.mm.settings.lobby_seeks_per_address;
        let address = if per_address == 0 || address == "addr:unknown" {
            ""
        } else {
            address
        };
        let at = mm::lobby_at(address);
        let reserved_at = if address.is_empty() {
            Ok(())
        } else {
            self.reserve(&at, &slot, per_address, now, || {
                format!(
                    "at most {per_address} lobby seeks from one address: try again when one ends"
                )
            })
            .await
        };
        let made = match reserved_at {
            Ok(()) => {
                self.make_lobby_seek(
                    caller,
                    address,
                    authorization,
                    request,
                    rules,
                    time,
                    range,
                    now,
                )
                .await
            }
            Err(e) => Err(e),
        };
        // The reservations give way to the seek itself (or to nothing), each in one atomic step so
        // that no moment counts both.
        let seek = made.as_ref().ok().map(|s| (s.id.as_str(), s.expires_ms));
        self.settle(&mine, &slot, seek).await?;
        if !address.is_empty() {
            self.settle(&at, &slot, seek).await?;
        }
        made
    }

    /// Replaces the reservation `slot` in `set` by `seek` (its id and expiry), or removes it, in one
    /// compare-and-set of the set's gate (never two places for one seek, never a moment without one).
    async fn settle(
        &self,
        set: &str,
        slot: &str,
        seek: Option<(&str, u64)>,
    ) -> MatchmakingResult<()> {
        let live = &self.mm.live;
        let gate = mm::lobby_gate(set);
        let mut effects = Vec::with_capacity(2);
        if let Some((id, expires_ms)) = seek {
            effects.push(Effect::Schedule {
                set: set.to_owned(),
                member: id.to_owned(),
                at_unix_ms: expires_ms,
            });
        }
        effects.push(Effect::Cancel {
            set: set.to_owned(),
            member: slot.to_owned(),
        });
        let settled = cas::update(
            live.as_ref(),
            &gate,
            &Raw,
            Retry::times(RESERVE_ATTEMPTS),
            |_| {
                Ok(Change::Write {
                    value: Bytes::from_static(b"1"),
                    ttl: Some(GATE_TTL),
                    effects: effects.clone(),
                    then: (),
                })
            },
        )
        .await;
        match settled {
            Ok(()) => return Ok(()),
            Err(MatchmakingError::Conflict) => {}
            Err(e) => return Err(e),
        }
        // Contended beyond reason: the same effects one by one (a moment may count both).
        if let Some((id, expires_ms)) = seek {
            live.schedule(set, id, expires_ms).await?;
        }
        live.cancel(set, slot).await?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    async fn make_lobby_seek(
        &self,
        caller: &Caller,
        address: &str,
        authorization: &str,
        request: pb::CreateLobbySeekRequest,
        rules: draughts_engine::RuleSet,
        time: TimeControl,
        range: Option<(i32, i32)>,
        now: u64,
    ) -> MatchmakingResult<LobbySeek> {
        let live = &self.mm.live;
        let pool = Pool {
            id: String::new(),
            variant: rules.variant(),
            time,
            rated: request.rated,
        };
        let rating = if caller.guest {
            crate::ports::START_RATING
        } else {
            self.mm.ratings.rating(&caller.player, &pool).await?
        };
        // Acceptances go through `accept` below (range, guests): Games refuses any without this key.
        let accept_key = format!("{:032x}", rand::random::<u128>());
        let invitation = self
            .mm
            .games
            .invite(
                authorization,
                pb::CreateInvitationRequest {
                    rules: request.rules,
                    time_control: request.time_control,
                    invitee_id: String::new(),
                    color: request.color,
                    rated: request.rated,
                    fen: String::new(),
                    expires_in_ms: request.expires_in_ms,
                    accept_key: accept_key.clone(),
                },
            )
            .await?;
        let (base_ms, increment_ms, days_per_move) = match time {
            TimeControl::Fischer {
                base_ms,
                increment_ms,
            } => (base_ms, increment_ms, 0),
            TimeControl::Correspondence { days_per_move } => (0, 0, days_per_move),
        };
        let seek = LobbySeek {
            id: GameId::parse(&invitation.invitation_id)
                .map_err(|e| MatchmakingError::Corrupt(format!("Games' invitation id: {e}")))?,
            seeker: caller_who(caller),
            variant: rules.variant().key().to_owned(),
            options: rules.options().to_string(),
            base_ms,
            increment_ms,
            days_per_move,
            color: match pb::Color::try_from(request.color) {
                Ok(pb::Color::White) => "white".into(),
                Ok(pb::Color::Black) => "black".into(),
                _ => String::new(),
            },
            rated: request.rated,
            range,
            rating: rating.rating,
            created_ms: now,
            expires_ms: invitation.expires_at_ms.max(now + 1000),
            accept_key,
            address: address.to_owned(),
        };
        // The record outlives the lapse by a margin, so that the background prune can read what to unlist.
        let ttl = Duration::from_millis(seek.expires_ms.saturating_sub(now).max(1000))
            + Duration::from_secs(600);
        // The lapse first: whatever a crash leaves behind is pruned from it.
        live.schedule(mm::LOBBY, &seek.id, self.lapse_of(&seek, now))
            .await?;
        live.put(
            &mm::lobby_seek_key(&seek.id),
            Bytes::from(mm::encode_lobby_seek(&seek)),
            None,
            Some(ttl),
        )
        .await?;
        let listed_at = mm::LISTING_EPOCH_MS.saturating_sub(now);
        live.schedule(&mm::lobby_index(None), &seek.id, listed_at)
            .await?;
        live.schedule(&mm::lobby_index(Some(&seek.variant)), &seek.id, listed_at)
            .await?;
        Ok(seek)
    }

    /// A page of the lobby's open seeks, newest first (optionally of one variant): one read of the
    /// listing index and one read per seek, whatever the lobby holds.
    pub async fn list_lobby_seeks(
        &self,
        variant: Option<draughts_engine::Variant>,
        limit: usize,
    ) -> MatchmakingResult<Vec<LobbySeek>> {
        let now = now_unix_ms();
        let index = mm::lobby_index(variant.map(|v| v.key()));
        let listed = self.mm.live.scheduled(&index, limit.max(1)).await?;
        let seeks =
            futures_util::future::try_join_all(listed.iter().map(|(id, _)| self.lobby_seek(id)))
                .await?;
        // A seek lapsed moments ago and not pruned yet is left out.
        Ok(seeks
            .into_iter()
            .flatten()
            .filter(|s| s.expires_ms > now)
            .collect())
    }

    /// Accepts a challenge, rematch or lobby seek: Games starts the game; the quick-pairing seeks of
    /// both players end (they are in a game now).
    pub async fn accept(
        &self,
        caller: &Caller,
        authorization: &str,
        id: &str,
    ) -> MatchmakingResult<pb::GameView> {
        self.seen(&caller.player).await;
        let listed = self.lobby_seek(id).await?;
        if let Some(seek) = &listed {
            if seek.seeker.id == caller.player {
                return Err(MatchmakingError::Precondition(
                    "this is your own lobby seek".into(),
                ));
            }
            if seek.guest_only_mismatch(caller) {
                return Err(MatchmakingError::Precondition(
                    "a rated lobby seek is not open to guests".into(),
                ));
            }
            if let Some((lo, hi)) = seek.range {
                let pool = seek_pool(seek)?;
                let mine = if caller.guest {
                    crate::ports::START_RATING
                } else {
                    self.mm.ratings.rating(&caller.player, &pool).await?
                };
                if !(lo..=hi).contains(&mine.rating) {
                    return Err(MatchmakingError::Precondition(format!(
                        "this seek is for ratings {lo} to {hi}; yours is {}",
                        mine.rating
                    )));
                }
            }
        }
        let accept_key = listed.as_ref().map_or("", |s| s.accept_key.as_str());
        let result = self.mm.games.accept(authorization, id, accept_key).await;
        if let Some(seek) = &listed
            && (result.is_ok()
                || matches!(&result, Err(MatchmakingError::Upstream(e)) if e.kind() == draughts_proto::ErrorKind::FailedPrecondition))
        {
            self.unlist(seek).await?;
        }
        let game = result?;
        for player in [&game.white, &game.black].into_iter().flatten() {
            self.mm.cancel_player(&player.id, "in_game").await?;
        }
        Ok(game)
    }

    pub async fn challenge(
        &self,
        caller: &Caller,
        authorization: &str,
        request: pb::ChallengeRequest,
    ) -> MatchmakingResult<pb::Invitation> {
        self.seen(&caller.player).await;
        self.mm
            .games
            .invite(
                authorization,
                pb::CreateInvitationRequest {
                    rules: request.rules,
                    time_control: request.time_control,
                    invitee_id: request.invitee_id,
                    color: request.color,
                    rated: request.rated,
                    fen: request.fen,
                    expires_in_ms: request.expires_in_ms,
                    accept_key: String::new(),
                },
            )
            .await
    }

    pub async fn rematch(
        &self,
        caller: &Caller,
        authorization: &str,
        game_id: &str,
    ) -> MatchmakingResult<pb::Invitation> {
        self.seen(&caller.player).await;
        self.mm.games.rematch(authorization, game_id).await
    }

    pub async fn decline(
        &self,
        caller: &Caller,
        authorization: &str,
        id: &str,
        reason: i32,
    ) -> MatchmakingResult<pb::Invitation> {
        self.seen(&caller.player).await;
        self.mm.games.decline(authorization, id, reason).await
    }

    /// Withdraws the caller's challenge, rematch offer or lobby seek.
    pub async fn cancel(
        &self,
        caller: &Caller,
        authorization: &str,
        id: &str,
    ) -> MatchmakingResult<pb::Invitation> {
        self.seen(&caller.player).await;
        let invitation = self.mm.games.cancel(authorization, id).await?;
        if let Some(seek) = self.lobby_seek(id).await?
            && seek.seeker.id == caller.player
        {
            self.unlist(&seek).await?;
        }
        Ok(invitation)
    }
}

trait GuestRule {
    fn guest_only_mismatch(&self, caller: &Caller) -> bool;
}

impl GuestRule for LobbySeek {
    /// Guests are paired with guests: a rated seek of a registered player is not for guests.
    fn guest_only_mismatch(&self, caller: &Caller) -> bool {
        self.rated && caller.guest != self.seeker.guest
    }
}

fn caller_who(caller: &Caller) -> Who {
    Who {
        id: caller.player.clone(),
        name: caller.name.clone(),
        guest: caller.guest,
    }
}

fn seek_pool(seek: &LobbySeek) -> MatchmakingResult<Pool> {
    let variant: draughts_engine::Variant = seek
        .variant
        .parse()
        .map_err(|_| MatchmakingError::Corrupt("lobby seek variant".into()))?;
    Ok(Pool {
        id: String::new(),
        variant,
        time: if seek.days_per_move > 0 {
            TimeControl::Correspondence {
                days_per_move: seek.days_per_move,
            }
        } else {
            TimeControl::Fischer {
                base_ms: seek.base_ms,
                increment_ms: seek.increment_ms,
            }
        },
        rated: seek.rated,
    })
}

/// A rating range from the wire (unset: none).
pub fn range_of(range: Option<&pb::RatingRange>) -> MatchmakingResult<Option<(i32, i32)>> {
    match range {
        None => Ok(None),
        Some(r) if 0 <= r.min && r.min <= r.max && r.max <= 4000 => Ok(Some((r.min, r.max))),
        Some(_) => Err(MatchmakingError::Invalid(
            "rating_range: 0 <= min <= max <= 4000".into(),
        )),
    }
}

fn time_of(tc: Option<&pb::TimeControl>) -> MatchmakingResult<TimeControl> {
    TimeControl::from_wire(tc).map_err(|e| MatchmakingError::Invalid(e.to_string()))
}
