//! The tournaments domain over the live store: creation, entries, the scheduler of each event and the
//! results from `games.finished`. No tonic types here.
//!
//! Concurrency protocol:
//! 1. Every change of a tournament is one compare-and-set of its record ([`crate::store::Record`]),
//!    retried from a fresh read when another writer won; index moves (upcoming, running) and the
//!    events for watchers are effects of that same atomic write.
//! 2. Every replica runs the scheduler loop; a tournament's scheduling steps (start, waves, rounds,
//!    game creation, finish) run on the replica holding its lease (`tour-lease:<id>`), whose version is
//!    a fencing token: each step's write stores the token in the record and is refused when the record
//!    carries a higher one, so a replica that lost the lease while paused cannot write a stale wave.
//! 3. A pairing is recorded (`created: false`) before its game is created through Games under the
//!    pairing's game id; creation is idempotent on that id, and whoever holds the lease next creates
//!    whatever is still marked uncreated. No player is in two games of the event: waves and rounds
//!    pair only players without a game in `ongoing`.
//! 4. Results: [`TournamentsCore::apply_finished`] removes the game from `ongoing` and applies it to
//!    the standings in the same write; the standings remember applied game ids, so a duplicated or
//!    replayed entry changes nothing. The consumer acknowledges only after that write.
//! 5. Finishing: the record becomes FINISHED (still indexed as running), is archived in the database,
//!    then marked archived and dropped from the index (its key expires a day later). A crash between
//!    the steps is resumed by the next scheduler.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use draughts_proto::contract::finished::{self, FinishedV1};
use draughts_proto::contract::tournaments::{self as contract, CreatorOpen, Event, ResultKind};
use draughts_proto::ids::{GameId, TournamentId};
use draughts_proto::pb::ErrorReason;
use draughts_proto::vocab::player::Player;
use draughts_store::cas::{self, Retry};
use draughts_store::{Effect, LiveStore, StoreError, Subscription, now_unix_ms};
use futures_util::StreamExt;

use crate::error::{TournamentsError, TournamentsResult};
use crate::ports::{GamesPort, NewGame, RatingsPort};
use crate::standings::{self, Format, GameResult, Outcome, Standings, SwissRules};
use crate::store::{Archive, Entrant, Pairing, Record, State};
use crate::terms::{self, Kind, RoundStart};
use crate::{Colour, PlayerRef, arena, swiss};

/// Most attempts of a compare-and-set loop before the caller gets ABORTED.
const CAS_ATTEMPTS: u32 = 10;
/// Games created at once by one scheduler step.
const CREATE_PARALLELISM: usize = 16;
/// A reservation of a creator's slot whose record is still missing after this long is dropped.
const RESERVATION_GRACE_MS: u64 = 10_000;

/// The service's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Time between two arena waves.
    pub wave_interval: Duration,
    /// Time between two turns of the scheduler loop.
    pub tick: Duration,
    /// A scheduler lease lasts this long unless renewed.
    pub lease_ttl: Duration,
    /// Open (upcoming or running) tournaments per creator (admins are not bounded).
    pub max_open_per_creator: usize,
    /// Open tournaments in all.
    pub max_open_total: usize,
    pub limits: terms::Limits,
    /// How long a finished tournament's record stays in the live store after it was archived.
    pub finished_ttl: Duration,
}

/// Who calls, as the authentication layer says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub player: Player,
    /// A signed-in account of this server.
    pub account: bool,
    /// The `admin` scope.
    pub admin: bool,
}

/// Which list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListState {
    Upcoming,
    Running,
    Finished,
}

/// A change made by an update closure: events to publish and index effects, in the same write.
#[derive(Debug, Default)]
struct Change {
    events: Vec<Event>,
    effects: Vec<Effect>,
    ttl: Option<Duration>,
}

impl Change {
    fn events(events: Vec<Event>) -> Option<Change> {
        Some(Change {
            events,
            ..Change::default()
        })
    }
}

/// The tournaments core, shared by the gRPC edge and the background loops. Cheap to clone.
#[derive(Clone, Debug)]
pub struct TournamentsCore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    live: Arc<dyn LiveStore>,
    archive: Archive,
    games: Arc<dyn GamesPort>,
    ratings: Arc<dyn RatingsPort>,
    settings: Settings,
    replica: String,
}

fn stale() -> TournamentsError {
    TournamentsError::Precondition("a newer scheduler holds this tournament".into())
}

fn not_found() -> TournamentsError {
    TournamentsError::Refused(ErrorReason::NoSuchTournament)
}

fn check_id(id: &str) -> TournamentsResult<()> {
    if contract::is_tournament_id(id) {
        Ok(())
    } else {
        Err(TournamentsError::Invalid(
            "tournament_id must be `t` and 16 hex digits".into(),
        ))
    }
}

fn format_of(kind: &Kind) -> Format {
    match kind {
        Kind::Arena { .. } => Format::Arena(arena::ArenaRules::default()),
        Kind::Swiss { .. } => Format::Swiss(SwissRules::default()),
    }
}

impl TournamentsCore {
    pub fn new(
        live: Arc<dyn LiveStore>,
        archive: Archive,
        games: Arc<dyn GamesPort>,
        ratings: Arc<dyn RatingsPort>,
        settings: Settings,
        replica: String,
    ) -> TournamentsCore {
        TournamentsCore {
            inner: Arc::new(Inner {
                live,
                archive,
                games,
                ratings,
                settings,
                replica,
            }),
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    fn live(&self) -> &dyn LiveStore {
        self.inner.live.as_ref()
    }

    /// The live record of `id` with its version.
    pub async fn load(&self, id: &str) -> TournamentsResult<Option<(Record, u64)>> {
        match self.live().get(&contract::record_key(id)).await? {
            Some((bytes, version)) => Ok(Some((Record::decode(&bytes)?, version))),
            None => Ok(None),
        }
    }

    /// Reads, changes and writes the record of `id` by compare-and-set until it wins; `change`
    /// returns `None` to leave the record as it is. Returns the record as it stands after.
    async fn update(
        &self,
        id: &str,
        mut change: impl FnMut(&mut Record) -> TournamentsResult<Option<Change>>,
    ) -> TournamentsResult<Record> {
        let channel = contract::events_channel(id);
        let codec = (
            |bytes: &[u8]| Record::decode(bytes),
            |record: &Record| -> TournamentsResult<Bytes> { Ok(Bytes::from(record.encode())) },
        );
        // Many replicas' ticks and players' calls change one record: a lost race pauses a little.
        let retry = Retry::times(CAS_ATTEMPTS).jittered(5, 5 * CAS_ATTEMPTS as u64);
        cas::update(
            self.live(),
            &contract::record_key(id),
            &codec,
            retry,
            |record| {
                let Some(mut record) = record else {
                    return Err(not_found());
                };
                let Some(change) = change(&mut record)? else {
                    return Ok(cas::Change::Keep(record));
                };
                let mut effects = change.effects;
                effects.extend(change.events.iter().map(|e| Effect::Publish {
                    channel: channel.clone(),
                    payload: Bytes::from(contract::encode_event(e)),
                }));
                Ok(cas::Change::Write {
                    value: record.clone(),
                    ttl: change.ttl,
                    effects,
                    then: record,
                })
            },
        )
        .await
    }

    // ---- the API ----

    /// Creates a tournament for `caller` (an account or an admin).
    pub async fn create(
        &self,
        caller: &Caller,
        wire: Option<&draughts_proto::pb::TournamentTerms>,
    ) -> TournamentsResult<Record> {
        if !caller.admin && (!caller.account || caller.player.guest) {
            return Err(TournamentsError::Denied(
                "only signed-in accounts (not guests) and admins may create tournaments".into(),
            ));
        }
        let now = now_unix_ms();
        let (terms, starts_at_ms) = terms::validate(wire, now, self.settings().limits)?;
        let open = self.live().schedule_len(contract::UPCOMING).await?
            + self.live().schedule_len(contract::RUNNING).await?;
        if open >= self.settings().max_open_total as u64 {
            return Err(TournamentsError::Exhausted(format!(
                "the server holds {open} open tournaments, its most; try later"
            )));
        }
        let id = TournamentId::from_number(rand::random::<u64>());
        if !caller.admin {
            self.reserve(&caller.player.id, &id, now).await?;
        }
        let rounds = match terms.kind {
            Kind::Swiss { rounds, .. } => rounds,
            Kind::Arena { .. } => 0,
        };
        let record = Record {
            id: id.clone(),
            standings: Standings::new(format_of(&terms.kind)),
            terms,
            creator: caller.player.clone(),
            state: State::Upcoming,
            created_at_ms: now,
            starts_at_ms,
            ends_at_ms: 0,
            finished_at_ms: 0,
            entrants: Vec::new(),
            ongoing: Vec::new(),
            next_game: 1,
            rounds,
            round_started_at_ms: 0,
            bye: None,
            last_wave_ms: 0,
            fence: 0,
        };
        self.live()
            .put_with(
                &contract::record_key(&id),
                Bytes::from(record.encode()),
                None,
                None,
                &[Effect::Schedule {
                    set: contract::UPCOMING.into(),
                    member: id.to_string(),
                    at_unix_ms: starts_at_ms,
                }],
            )
            .await?;
        tracing::info!(tournament = %id, creator = %caller.player.id, "tournament created");
        Ok(record)
    }

    /// Takes one of the creator's open slots for `id` (compare-and-set on the creator's list).
    async fn reserve(&self, creator: &str, id: &TournamentId, now: u64) -> TournamentsResult<()> {
        let max = self.settings().max_open_per_creator;
        let codec = (
            |bytes: &[u8]| -> TournamentsResult<CreatorOpen> { Ok(contract::decode(bytes)?) },
            |list: &CreatorOpen| -> TournamentsResult<Bytes> {
                Ok(Bytes::from(contract::encode(list)))
            },
        );
        cas::update_async(
            self.live(),
            &contract::creator_key(creator),
            &codec,
            Retry::times(CAS_ATTEMPTS),
            |list| async move {
                let mut list = list.unwrap_or_default();
                let mut kept = Vec::new();
                for (open_id, at) in list.open.drain(..) {
                    let keep = match self.load(&open_id).await? {
                        Some((record, _)) => !record.state.is_over(),
                        None => now.saturating_sub(at) < RESERVATION_GRACE_MS,
                    };
                    if keep {
                        kept.push((open_id, at));
                    }
                }
                if kept.len() >= max {
                    return Err(TournamentsError::Exhausted(format!(
                        "at most {max} open tournaments per creator"
                    )));
                }
                kept.push((id.clone(), now));
                list.open = kept;
                Ok(cas::Change::Write {
                    value: list,
                    ttl: None,
                    effects: Vec::new(),
                    then: (),
                })
            },
        )
        .await
    }

    /// A tournament, live or archived.
    pub async fn get(&self, id: &str) -> TournamentsResult<Record> {
        check_id(id)?;
        if let Some((record, _)) = self.load(id).await? {
            return Ok(record);
        }
        self.inner.archive.get(id).await?.ok_or_else(not_found)
    }

    /// A page of tournaments in `state`; the next page's token (empty: none).
    pub async fn list(
        &self,
        state: ListState,
        page_size: usize,
        token: &str,
    ) -> TournamentsResult<(Vec<Record>, String)> {
        let bad_token = || TournamentsError::Invalid("page_token is not one of ours".into());
        let after = if token.is_empty() {
            None
        } else {
            let (at, id) = token.split_once(':').ok_or_else(bad_token)?;
            let at: u64 = at.parse().map_err(|_| bad_token())?;
            check_id(id).map_err(|_| bad_token())?;
            Some((at, id.to_owned()))
        };
        let set = match state {
            ListState::Finished => {
                let mut records = self.inner.archive.list(after, page_size + 1).await?;
                let more = records.len() > page_size;
                records.truncate(page_size);
                let next = match records.last() {
                    Some(r) if more => format!("{}:{}", r.finished_at_ms, r.id),
                    _ => String::new(),
                };
                return Ok((records, next));
            }
            ListState::Upcoming => contract::UPCOMING,
            ListState::Running => contract::RUNNING,
        };
        let mut members = self
            .live()
            .scheduled(set, self.settings().max_open_total)
            .await?;
        members.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
        let wanted = match state {
            ListState::Upcoming => State::Upcoming,
            _ => State::Running,
        };
        let mut records = Vec::new();
        let mut next = String::new();
        for (id, at) in members {
            if let Some((a, i)) = &after
                && (at, &id) <= (*a, i)
            {
                continue;
            }
            if records.len() == page_size {
                if let Some(last) = records.last() {
                    let last: &Record = last;
                    next = format!("{}:{}", last.starts_at_ms, last.id);
                }
                break;
            }
            if let Some((record, _)) = self.load(&id).await?
                && record.state == wanted
            {
                records.push(record);
            }
        }
        Ok((records, next))
    }

    /// Enters `caller` (or brings them back).
    pub async fn join(
        &self,
        caller: &Caller,
        id: &str,
        password: &str,
    ) -> TournamentsResult<Record> {
        check_id(id)?;
        let (record, _) = self.load(id).await?.ok_or_else(not_found)?;
        if record.state.is_over() {
            return Err(TournamentsError::Refused(ErrorReason::TournamentOver));
        }
        if !terms::password_matches(&record.terms.conditions, password) {
            return Err(TournamentsError::Refused(ErrorReason::TournamentPassword));
        }
        let conditions = &record.terms.conditions;
        if conditions.accounts_only && (caller.player.guest || !caller.account) {
            return Err(TournamentsError::Refused(
                ErrorReason::TournamentAccountsOnly,
            ));
        }
        let rating = match record.entrant_of(&caller.player.id) {
            Some(p) => record.entrants[p.0 as usize].rating,
            None => {
                let rating = self
                    .inner
                    .ratings
                    .rating(&caller.player.id, &record.terms)
                    .await?;
                let r = u32::try_from(rating).unwrap_or(0);
                if (conditions.min_rating != 0 && r < conditions.min_rating)
                    || (conditions.max_rating != 0 && r > conditions.max_rating)
                {
                    return Err(TournamentsError::Refused(
                        ErrorReason::TournamentRatingRange,
                    ));
                }
                rating
            }
        };
        let player = caller.player.clone();
        self.update(id, |record| {
            if record.state.is_over() {
                return Err(TournamentsError::Refused(ErrorReason::TournamentOver));
            }
            let me = match record.entrant_of(&player.id) {
                Some(me) => {
                    let e = &record.standings.entries.get(&me);
                    if e.is_some_and(|e| !e.paused && !e.withdrawn) {
                        return Ok(None);
                    }
                    me
                }
                None => {
                    if record.entrants.len() >= record.terms.conditions.max_players as usize {
                        return Err(TournamentsError::Refused(ErrorReason::TournamentFull));
                    }
                    record.entrants.push(Entrant {
                        player: player.clone(),
                        rating,
                    });
                    PlayerRef(record.entrants.len() as u32 - 1)
                }
            };
            let standings = std::mem::replace(
                &mut record.standings,
                Standings::new(format_of(&record.terms.kind)),
            );
            record.standings = standings::join(standings, me, rating);
            Ok(Change::events(vec![
                Event::Joined {
                    player: player.clone(),
                },
                Event::Standings,
            ]))
        })
        .await
    }

    /// Pauses (arena) or withdraws (Swiss) `caller`.
    pub async fn leave(&self, caller: &Caller, id: &str) -> TournamentsResult<Record> {
        check_id(id)?;
        let player = caller.player.clone();
        self.update(id, |record| {
            let Some(me) = record.entrant_of(&player.id) else {
                return Err(TournamentsError::Refused(ErrorReason::NotAnEntrant));
            };
            if record.state.is_over() {
                return Ok(None);
            }
            let e = record.standings.entries.get(&me);
            let gone = if record.terms.is_arena() {
                e.is_none_or(|e| e.paused)
            } else {
                e.is_none_or(|e| e.withdrawn)
            };
            if gone {
                return Ok(None);
            }
            let standings = std::mem::replace(
                &mut record.standings,
                Standings::new(format_of(&record.terms.kind)),
            );
            record.standings = standings::leave(standings, me);
            Ok(Change::events(vec![
                Event::Left {
                    player: player.clone(),
                },
                Event::Standings,
            ]))
        })
        .await
    }

    /// Starts an upcoming Swiss event now (its creator or an admin): the scheduler starts it at its
    /// next turn.
    pub async fn start(&self, caller: &Caller, id: &str) -> TournamentsResult<Record> {
        check_id(id)?;
        let player = caller.player.id.clone();
        let admin = caller.admin;
        let now = now_unix_ms();
        self.update(id, |record| {
            if record.creator.id != player && !admin {
                return Err(TournamentsError::Refused(ErrorReason::NotTheCreator));
            }
            let Kind::Swiss { rounds, .. } = record.terms.kind else {
                return Err(TournamentsError::Precondition(
                    "only Swiss events are started early; an arena starts at its time".into(),
                ));
            };
            if record.state != State::Upcoming {
                return Err(TournamentsError::Refused(ErrorReason::TournamentStarted));
            }
            let n = active(&record.standings);
            if n < 2 {
                return Err(TournamentsError::Precondition(
                    "a Swiss event needs at least 2 entrants to start".into(),
                ));
            }
            if rounds > terms::rounds_allowed(n as u32) {
                return Err(TournamentsError::Precondition(format!(
                    "{n} entrants cannot play {rounds} rounds without meeting twice (at most {})",
                    terms::rounds_allowed(n as u32)
                )));
            }
            if record.starts_at_ms <= now {
                return Ok(None);
            }
            record.starts_at_ms = now;
            Ok(Some(Change {
                effects: vec![Effect::Schedule {
                    set: contract::UPCOMING.into(),
                    member: record.id.to_string(),
                    at_unix_ms: now,
                }],
                ..Change::default()
            }))
        })
        .await
    }

    /// The tournament's events (see `draughts_proto::contract::tournaments::Event`).
    pub async fn subscribe(&self, id: &str) -> TournamentsResult<Subscription> {
        Ok(self.live().subscribe(&contract::events_channel(id)).await?)
    }

    // ---- results ----

    /// Applies one `games.finished` entry; returns whether it changed a tournament. Games of no
    /// tournament, and games already applied, change nothing.
    pub async fn apply_finished(&self, event: &FinishedV1) -> TournamentsResult<bool> {
        Ok(self.apply_batch(std::slice::from_ref(event)).await? > 0)
    }

    /// Applies `games.finished` entries: those of one tournament in ONE write of its record (a
    /// consumer's batch costs one compare-and-set per tournament, not one per game). Returns how many
    /// games were applied; games of no tournament and games already applied change nothing.
    pub async fn apply_batch(&self, events: &[FinishedV1]) -> TournamentsResult<usize> {
        let mut by_tournament: Vec<(&str, Vec<&FinishedV1>)> = Vec::new();
        for event in events {
            let Some(id) = contract::tournament_of_game(&event.game_id) else {
                continue;
            };
            match by_tournament.iter_mut().find(|(t, _)| *t == id) {
                Some((_, list)) => list.push(event),
                None => by_tournament.push((id, vec![event])),
            }
        }
        let mut applied = 0;
        for (id, list) in by_tournament {
            applied += self.apply_results(id, &list).await?;
        }
        Ok(applied)
    }

    async fn apply_results(&self, id: &str, events: &[&FinishedV1]) -> TournamentsResult<usize> {
        let mut changed = 0;
        let result = self
            .update(id, |record| {
                changed = 0;
                let mut out = Vec::new();
                for event in events {
                    if let Some(mut e) = apply_one(record, event) {
                        changed += 1;
                        out.append(&mut e);
                    }
                }
                if changed == 0 {
                    return Ok(None);
                }
                out.push(Event::Standings);
                Ok(Change::events(out))
            })
            .await;
        match result {
            Ok(_) => Ok(changed),
            // A tournament gone from the live store (finished and expired): nothing to apply.
            Err(TournamentsError::Refused(ErrorReason::NoSuchTournament)) => Ok(0),
            Err(e) => Err(e),
        }
    }

    // ---- the scheduler ----

    /// Takes or renews the scheduler lease of `id`: its fencing token, or `None` when another replica
    /// holds it. The lease key never expires, so its version (the token) only grows.
    pub async fn lease(&self, id: &str) -> TournamentsResult<Option<u64>> {
        let now = now_unix_ms();
        let key = contract::lease_key(id);
        let expected = match self.live().get(&key).await? {
            Some((bytes, version)) => {
                let lease = contract::decode_lease(&bytes)?;
                if lease.owner != self.inner.replica && lease.until_ms > now {
                    return Ok(None);
                }
                Some(version)
            }
            None => None,
        };
        let lease = contract::SchedulerLease {
            owner: self.inner.replica.clone(),
            until_ms: now + self.settings().lease_ttl.as_millis() as u64,
        };
        match self
            .live()
            .put(
                &key,
                Bytes::from(contract::encode_lease(&lease)),
                expected,
                None,
            )
            .await
        {
            Ok(version) => Ok(Some(version)),
            Err(StoreError::Conflict { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// One turn of the scheduler over every tournament that has work now; returns how many steps
    /// this replica ran (it holds their leases).
    pub async fn tick(&self) -> TournamentsResult<usize> {
        let now = now_unix_ms();
        let max = self.settings().max_open_total;
        let mut ids: Vec<String> = self
            .live()
            .scheduled(contract::UPCOMING, max)
            .await?
            .into_iter()
            .filter(|(_, at)| *at <= now)
            .map(|(id, _)| id)
            .collect();
        ids.extend(
            self.live()
                .scheduled(contract::RUNNING, max)
                .await?
                .into_iter()
                .map(|(id, _)| id),
        );
        let ran = futures_util::stream::iter(ids)
            .map(|id| async move {
                match self.lease(&id).await {
                    Ok(Some(token)) => match self.step(&id, token).await {
                        Ok(()) => 1,
                        Err(e) => {
                            tracing::warn!(tournament = %id, error = %e, "scheduler step failed; retried next turn");
                            1
                        }
                    },
                    Ok(None) => 0,
                    Err(e) => {
                        tracing::warn!(tournament = %id, error = %e, "scheduler lease failed");
                        0
                    }
                }
            })
            .buffer_unordered(CREATE_PARALLELISM)
            .fold(0usize, |n, ran| async move { n + ran })
            .await;
        Ok(ran)
    }

    /// Everything due for tournament `id`, under fencing token `token`.
    pub async fn step(&self, id: &str, token: u64) -> TournamentsResult<()> {
        let now = now_unix_ms();
        let Some((record, _)) = self.load(id).await? else {
            // Gone (expired): drop it from the indexes.
            self.live().cancel(contract::UPCOMING, id).await?;
            self.live().cancel(contract::RUNNING, id).await?;
            return Ok(());
        };
        if record.fence > token {
            return Err(stale());
        }
        match record.state {
            State::Upcoming => {
                if now >= record.starts_at_ms {
                    self.begin(id, token).await?;
                }
            }
            State::Running => {
                if record.ongoing.iter().any(|p| !p.created) {
                    self.create_games(id, token, &record).await?;
                }
                match record.terms.kind {
                    Kind::Arena { .. } => {
                        if now < record.ends_at_ms {
                            let interval = self.settings().wave_interval.as_millis() as u64;
                            if now >= record.last_wave_ms + interval {
                                self.wave(id, token).await?;
                            }
                        } else if record.ongoing.is_empty() {
                            self.finish(id, token).await?;
                        }
                    }
                    Kind::Swiss { round_start, .. } => {
                        if record.ongoing.is_empty() {
                            let due = match round_start {
                                RoundStart::AfterPrevious => true,
                                RoundStart::Interval { secs } => {
                                    now >= record.round_started_at_ms + u64::from(secs) * 1000
                                }
                            };
                            if record.standings.round >= record.rounds {
                                self.finish(id, token).await?;
                            } else if due {
                                self.next_round(id, token).await?;
                            }
                        }
                    }
                }
            }
            State::Finished | State::Cancelled => self.archive(id, token).await?,
        }
        Ok(())
    }

    /// Starts an event whose time has come.
    async fn begin(&self, id: &str, token: u64) -> TournamentsResult<()> {
        let now = now_unix_ms();
        let record = self
            .update(id, |record| {
                if record.fence > token {
                    return Err(stale());
                }
                if record.state != State::Upcoming {
                    return Ok(None);
                }
                record.fence = token;
                let mut change = Change {
                    effects: vec![Effect::Cancel {
                        set: contract::UPCOMING.into(),
                        member: record.id.to_string(),
                    }],
                    ..Change::default()
                };
                match record.terms.kind {
                    Kind::Arena { duration_secs, .. } => {
                        record.ends_at_ms = now + u64::from(duration_secs) * 1000;
                        change.events.push(Event::RoundStarted {
                            round: 0,
                            bye: None,
                        });
                    }
                    Kind::Swiss { rounds, .. } => {
                        let n = active(&record.standings) as u32;
                        if n < 2 {
                            record.state = State::Cancelled;
                            record.finished_at_ms = now;
                            change.events.push(Event::Finished);
                            // Kept in the running index until archived (step 5 of the protocol).
                            change.effects.push(Effect::Schedule {
                                set: contract::RUNNING.into(),
                                member: record.id.to_string(),
                                at_unix_ms: record.starts_at_ms,
                            });
                            return Ok(Some(change));
                        }
                        record.rounds = rounds.min(terms::rounds_allowed(n));
                    }
                }
                record.state = State::Running;
                change.effects.push(Effect::Schedule {
                    set: contract::RUNNING.into(),
                    member: record.id.to_string(),
                    at_unix_ms: record.starts_at_ms,
                });
                Ok(Some(change))
            })
            .await?;
        tracing::info!(tournament = %id, state = record.state.key(), players = record.entrants.len(), "tournament started");
        Ok(())
    }

    /// One arena wave: pairs the waiting players, records the pairings, creates the games.
    async fn wave(&self, id: &str, token: u64) -> TournamentsResult<()> {
        let now = now_unix_ms();
        let record = self
            .update(id, |record| {
                if record.fence > token {
                    return Err(stale());
                }
                if record.state != State::Running || now >= record.ends_at_ms {
                    return Ok(None);
                }
                let busy = record.busy();
                let waiting: Vec<PlayerRef> = (0..record.entrants.len() as u32)
                    .map(PlayerRef)
                    .filter(|p| !busy.contains(p))
                    .collect();
                let players = record.standings.arena_waiting(&waiting);
                let pairs = arena::pair_wave(&players, &record.standings.last_opponents());
                if pairs.is_empty() {
                    return Ok(None);
                }
                record.fence = token;
                record.last_wave_ms = now;
                add_pairings(record, &pairs, 0)?;
                Ok(Some(Change::default()))
            })
            .await?;
        if record.ongoing.iter().any(|p| !p.created) {
            self.create_games(id, token, &record).await?;
        }
        Ok(())
    }

    /// Pairs and starts the next Swiss round.
    async fn next_round(&self, id: &str, token: u64) -> TournamentsResult<()> {
        let Some((record, _)) = self.load(id).await? else {
            return Ok(());
        };
        let players = record.standings.swiss_players();
        let expected_round = record.standings.round;
        if players.len() < 2 {
            return self.finish(id, token).await;
        }
        // Up to 10,000 players: up to about a second of CPU, off the async threads.
        let pairing = tokio::task::spawn_blocking(move || swiss::pair_round(&players))
            .await
            .map_err(|e| TournamentsError::Corrupt(format!("pairing task: {e}")))?;
        let now = now_unix_ms();
        let record = self
            .update(id, |record| {
                if record.fence > token {
                    return Err(stale());
                }
                if record.state != State::Running
                    || record.standings.round != expected_round
                    || !record.ongoing.is_empty()
                {
                    return Ok(None);
                }
                record.fence = token;
                let n = expected_round + 1;
                // A player who withdrew while the round was being paired plays no game in it.
                let withdrawn: HashSet<PlayerRef> = record
                    .standings
                    .entries
                    .values()
                    .filter(|e| e.withdrawn || e.paused)
                    .map(|e| e.player)
                    .collect();
                let pairs: Vec<(PlayerRef, PlayerRef)> = pairing
                    .pairs
                    .iter()
                    .copied()
                    .filter(|(w, b)| !withdrawn.contains(w) && !withdrawn.contains(b))
                    .collect();
                let standings = std::mem::replace(
                    &mut record.standings,
                    Standings::new(format_of(&record.terms.kind)),
                );
                record.standings = standings::start_round(standings, n, &pairing);
                record.bye = pairing.bye;
                record.round_started_at_ms = now;
                add_pairings(record, &pairs, n)?;
                Ok(Change::events(vec![
                    Event::RoundStarted {
                        round: n,
                        bye: pairing.bye.and_then(|p| record.player(p)),
                    },
                    Event::Standings,
                ]))
            })
            .await?;
        tracing::info!(tournament = %id, round = record.standings.round, games = record.ongoing.len(), "Swiss round started");
        self.create_games(id, token, &record).await
    }

    /// Creates through Games every game recorded and not created yet, then marks them created.
    /// A game Games refuses for good (a player unknown to it now) is dropped from the event.
    async fn create_games(&self, id: &str, token: u64, record: &Record) -> TournamentsResult<()> {
        let pending: Vec<(GameId, NewGame)> = record
            .ongoing
            .iter()
            .filter(|p| !p.created)
            .filter_map(|p| {
                let game = NewGame {
                    game_id: p.game_id.to_string(),
                    white: record.player(p.white)?.id.into_string(),
                    black: record.player(p.black)?.id.into_string(),
                };
                Some((p.game_id.clone(), game))
            })
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        let terms = &record.terms;
        let results: Vec<(GameId, TournamentsResult<()>)> = futures_util::stream::iter(pending)
            .map(|(game_id, game)| async move {
                let result = self.inner.games.create_game(terms, &game).await;
                (game_id, result)
            })
            .buffer_unordered(CREATE_PARALLELISM)
            .collect()
            .await;
        let mut created = HashSet::new();
        let mut refused = HashSet::new();
        let mut failure = None;
        for (game_id, result) in results {
            match result {
                Ok(()) => {
                    created.insert(game_id);
                }
                // Worth another try at the next tick: Games unreachable, busy, or racing.
                Err(e @ TournamentsError::Conflict) => {
                    failure = Some(e);
                }
                Err(TournamentsError::Upstream(e))
                    if matches!(
                        e.kind(),
                        draughts_proto::ErrorKind::Unavailable
                            | draughts_proto::ErrorKind::ResourceExhausted
                            | draughts_proto::ErrorKind::Conflict
                    ) =>
                {
                    failure = Some(e.into());
                }
                Err(e) => {
                    tracing::warn!(tournament = %id, game = %game_id, error = %e, "Games refused a tournament game; dropped");
                    refused.insert(game_id);
                }
            }
        }
        self.update(id, |record| {
            if record.fence > token {
                return Err(stale());
            }
            let mut events = Vec::new();
            let before = record.ongoing.len();
            record.ongoing.retain(|p| !refused.contains(&p.game_id));
            let mut changed = before != record.ongoing.len();
            for i in 0..record.ongoing.len() {
                let p = &record.ongoing[i];
                if !p.created && created.contains(&p.game_id) {
                    if let (Some(white), Some(black)) =
                        (record.player(p.white), record.player(p.black))
                    {
                        events.push(Event::Paired {
                            game_id: p.game_id.to_string(),
                            white,
                            black,
                            round: p.round,
                        });
                    }
                    record.ongoing[i].created = true;
                    changed = true;
                }
            }
            if !changed {
                return Ok(None);
            }
            record.fence = token;
            Ok(Change::events(events))
        })
        .await?;
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Ends a running event whose last game is over.
    async fn finish(&self, id: &str, token: u64) -> TournamentsResult<()> {
        let now = now_unix_ms();
        self.update(id, |record| {
            if record.fence > token {
                return Err(stale());
            }
            if record.state != State::Running || !record.ongoing.is_empty() {
                return Ok(None);
            }
            record.fence = token;
            record.state = State::Finished;
            record.finished_at_ms = now;
            Ok(Change::events(vec![Event::Standings, Event::Finished]))
        })
        .await?;
        tracing::info!(tournament = %id, "tournament finished");
        self.archive(id, token).await
    }

    /// Archives an event that is over, then drops it from the index; its record expires later.
    async fn archive(&self, id: &str, token: u64) -> TournamentsResult<()> {
        let Some((record, _)) = self.load(id).await? else {
            return Ok(());
        };
        if !record.state.is_over() {
            return Ok(());
        }
        self.inner.archive.put(&record).await?;
        let ttl = self.settings().finished_ttl;
        self.update(id, |record| {
            if record.fence > token {
                return Err(stale());
            }
            record.fence = token;
            Ok(Some(Change {
                effects: vec![
                    Effect::Cancel {
                        set: contract::RUNNING.into(),
                        member: record.id.to_string(),
                    },
                    Effect::Cancel {
                        set: contract::UPCOMING.into(),
                        member: record.id.to_string(),
                    },
                ],
                ttl: Some(ttl),
                ..Change::default()
            }))
        })
        .await?;
        // Unindexed: no scheduler steps it again, so its lease key (which never expires while the
        // tournament runs, so that its fencing tokens only grow) can go.
        self.live().delete(&contract::lease_key(id)).await?;
        Ok(())
    }
}

/// Applies one finished game to the record: the events it makes, or `None` when it changes nothing
/// (already applied, not a game in progress of the event, other players).
fn apply_one(record: &mut Record, event: &FinishedV1) -> Option<Vec<Event>> {
    if record.standings.applied.contains(event.game_id.as_str()) {
        return None;
    }
    let at = record
        .ongoing
        .iter()
        .position(|p| p.game_id == event.game_id.as_str())?;
    let pairing = record.ongoing[at].clone();
    if record
        .player(pairing.white)
        .is_none_or(|p| p.id != event.white.id)
        || record
            .player(pairing.black)
            .is_none_or(|p| p.id != event.black.id)
    {
        tracing::warn!(game = %event.game_id, "finished game's players are not the pairing's; ignored");
        return None;
    }
    record.ongoing.remove(at);
    let outcome = match event.outcome {
        finished::Outcome::WhiteWins => Outcome::WhiteWins,
        finished::Outcome::BlackWins => Outcome::BlackWins,
        finished::Outcome::Draw => Outcome::Draw,
        // Games aborts a game whose side to move made no first move in time: a forfeit of that side
        // (an abort by agreement before the first moves counts the same).
        finished::Outcome::Aborted if event.plies == 0 => Outcome::NoFirstMove(Colour::White),
        finished::Outcome::Aborted if event.plies == 1 => Outcome::NoFirstMove(Colour::Black),
        // Not an outcome Games gives after both first moves: the game is dropped, not scored.
        finished::Outcome::Aborted => return Some(Vec::new()),
    };
    let standings = std::mem::replace(
        &mut record.standings,
        Standings::new(format_of(&record.terms.kind)),
    );
    record.standings = standings::apply_result(
        standings,
        &GameResult {
            game_id: event.game_id.clone(),
            white: pairing.white,
            black: pairing.black,
            outcome,
            plies: event.plies,
            // Games' word (it keeps the clocks): the scoring adds the berserk point on a long
            // enough win (arena rules; a Swiss event's games never allow berserk).
            white_berserk: event.white.berserk,
            black_berserk: event.black.berserk,
            round: pairing.round,
        },
    );
    let (result, forfeit) = match outcome {
        Outcome::WhiteWins => (ResultKind::WhiteWins, false),
        Outcome::BlackWins => (ResultKind::BlackWins, false),
        Outcome::Draw => (ResultKind::Draw, false),
        Outcome::NoFirstMove(Colour::White) => (ResultKind::BlackWins, true),
        Outcome::NoFirstMove(Colour::Black) => (ResultKind::WhiteWins, true),
    };
    let mut white = record.player(pairing.white)?;
    white.berserk = event.white.berserk;
    let mut black = record.player(pairing.black)?;
    black.berserk = event.black.berserk;
    Some(vec![Event::Result {
        game_id: event.game_id.to_string(),
        white,
        black,
        result,
        forfeit,
        round: pairing.round,
    }])
}

/// Entrants neither paused nor withdrawn.
fn active(standings: &Standings) -> usize {
    standings
        .entries
        .values()
        .filter(|e| !e.paused && !e.withdrawn)
        .count()
}

/// Records `pairs` (white, black) as games not created yet (game ids `<tournament id>-<n>`; a record
/// whose id makes no game id is corrupt).
fn add_pairings(
    record: &mut Record,
    pairs: &[(PlayerRef, PlayerRef)],
    round: u32,
) -> TournamentsResult<()> {
    for &(white, black) in pairs {
        let text = contract::game_id(&record.id, record.next_game);
        let game_id = GameId::parse(&text)
            .map_err(|e| TournamentsError::Corrupt(format!("tournament {}: {e}", record.id)))?;
        record.next_game += 1;
        record.ongoing.push(Pairing {
            game_id,
            white,
            black,
            round,
            created: false,
        });
    }
    Ok(())
}
