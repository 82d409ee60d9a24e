//! Live games on the shared backends: the state of each game in the live store (compare-and-set on its
//! version, so a move raced by two replicas is applied once), watchers woken through pub/sub, clocks
//! driven by a deadline schedule every replica polls, and finished games archived durably and published.
//!
//! Names (all built in [`keys`]):
//! - `game:{<id>}` (the braces are a hash tag: the game's group, see `draughts_store::keys`): the
//!   [`GameRecord`] as JSON, versioned.
//! - `game-events:{id}` (pub/sub channel): payload = the record's last event seq, a wake-up only; watchers
//!   re-read the record, which is the source of truth, so a lost message costs latency, never an event.
//! - `player-games:{player}`: JSON list of the player's ongoing game ids, versioned.
//! - `game-deadlines` (spread schedule: each game id in its game's group): game id -> when the side to
//!   move's flag falls.
//! - `game-archive` (schedule): game id -> finished game to archive (set BEFORE the finishing write, so a
//!   crash right after it still archives: at-least-once, made idempotent by the game id).
//! - `games.finished` (stream): one entry per finished game, the event ratings and analysis consume.
//!
//! `games.finished` entry payload: [`draughts_proto::contract::finished::FinishedV1`] (JSON, schema
//! version 1, documented there; consumers treat `game_id` as the idempotency key, since an entry may be
//! delivered more than once).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use draughts_engine::{Color, Game, Move, Position, RuleSet};
use draughts_proto::contract::finished;
use draughts_proto::ids::GameId;
use draughts_proto::pb::ErrorReason;
use draughts_proto::vocab::player::Player;
use draughts_proto::{ErrorKind, ServiceError};
use draughts_store::cas::{self, Change, Retry};
use draughts_store::{Database, Effect, LiveStore, Migration, StoreError};

use super::computer::{self, ComputerPlayer};
use super::consent::{self, SignalKind};
use super::limits::GamesLimits;
use super::pdn;
use super::record::{GameRecord, PlayError, TimeControlRec};
use super::watch::Watchers;

/// Key and stream names used by the games service.
pub mod keys {
    /// In the game's own group (hash tag `{id}`), with its entries in the spread schedules
    /// (members: the game id), so that a move, its deadline and its computer turn are one atomic
    /// write in one slot of a Redis Cluster.
    pub fn game(id: &str) -> String {
        format!("game:{{{id}}}")
    }
    pub fn events(id: &str) -> String {
        format!("game-events:{id}")
    }
    /// The game's spectators, per replica: a pinned schedule in the game's group, members
    /// `<replica>=<count>` (its count of open spectator streams), time = when it lapses unless the
    /// replica renews it.
    pub fn spectators(id: &str) -> String {
        format!("game-spectators:{{{id}}}")
    }
    pub fn player_games(player: &str) -> String {
        format!("player-games:{player}")
    }
    pub const DEADLINES: &str = "game-deadlines";
    /// Games where it is a computer's turn (see `computer`).
    pub const COMPUTER: &str = "game-computer";
    pub const ARCHIVE: &str = "game-archive";
    /// The finished-games stream: name, payload and encoding are the one contract,
    /// [`draughts_proto::contract::finished`].
    pub const FINISHED: &str = draughts_proto::contract::finished::STREAM;
}

/// How long a deadline or archive job claimed by a replica's timer stays away before another replica
/// may claim it (only if the first died before dealing with it).
pub const CLAIM_RETRY: Duration = Duration::from_secs(10);

/// How often the timers sample the gauges (games in progress, stream lags).
pub const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// How often the timers trim `games.finished`.
pub const TRIM_EVERY: Duration = Duration::from_secs(60);
/// The consumer group on `games.finished` made at start (its pending entries and lag are sampled);
/// made again by the samples should the store lose its data.
pub const ARCHIVE_CHECK_GROUP: &str = "archive-check";
/// The most ongoing games [`GamesCore::ongoing`] returns (ListGames, player event snapshots).
pub const ONGOING_LISTED_MAX: usize = 100;

/// Where a page of finished games ends: the last game shown (see [`GamesCore::recent`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageKey {
    pub finished_at_ms: u64,
    pub game_id: String,
}

impl PageKey {
    /// The page token clients send back: opaque to them (`f1.<finished_at_ms>.<game_id>`).
    pub fn token(&self) -> String {
        format!("f1.{}.{}", self.finished_at_ms, self.game_id)
    }

    /// Reads a token made by [`token`](PageKey::token); INVALID_ARGUMENT otherwise.
    pub fn parse(token: &str) -> GamesResult<PageKey> {
        let bad = || GamesError::Invalid("page_token is not a token this server issued".into());
        let rest = token.strip_prefix("f1.").ok_or_else(bad)?;
        let (ms, id) = rest.split_once('.').ok_or_else(bad)?;
        let finished_at_ms = ms.parse().map_err(|_| bad())?;
        draughts_proto::ids::GameId::parse(id).map_err(|_| bad())?;
        Ok(PageKey {
            finished_at_ms,
            game_id: id.to_owned(),
        })
    }
}

/// Durable schema of finished games.
pub const MIGRATIONS: &[Migration<'static>] = &[Migration {
    version: 1,
    name: "finished_games",
    sql: "CREATE TABLE IF NOT EXISTS finished_games (
            game_id TEXT PRIMARY KEY,
            variant TEXT NOT NULL,
            white_id TEXT NOT NULL,
            black_id TEXT NOT NULL,
            outcome TEXT NOT NULL,
            reason TEXT NOT NULL,
            result TEXT NOT NULL,
            rated BIGINT NOT NULL,
            plies BIGINT NOT NULL,
            finished_at_ms BIGINT NOT NULL,
            pdn TEXT NOT NULL,
            record TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS finished_games_white ON finished_games (white_id, finished_at_ms);
        CREATE INDEX IF NOT EXISTS finished_games_black ON finished_games (black_id, finished_at_ms);",
}, Migration {
    version: 2,
    name: "finished_games_event",
    // The `games.finished` payload of the game (the contract's encoding), so that a reader of the
    // database (the ratings reconciler) decodes exactly what the stream carried; NULL in rows
    // archived before. The index serves readers that page by finish time.
    sql: "ALTER TABLE finished_games ADD COLUMN event TEXT;
        CREATE INDEX IF NOT EXISTS finished_games_finished_at ON finished_games (finished_at_ms, game_id);",
}, Migration {
    version: 3,
    name: "finished_games_pair",
    // Whether two players have played (an invitation from a stranger: `consent`), one index lookup
    // per colour.
    sql: "CREATE INDEX IF NOT EXISTS finished_games_pair ON finished_games (white_id, black_id);",
}];

/// Time source (Unix ms). Tests use [`TokioClock`] so that paused tokio time drives the clocks.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// Wall time that advances with tokio's clock (so `tokio::time::pause`/`advance` move it).
#[derive(Debug)]
pub struct TokioClock {
    base_ms: u64,
    base: tokio::time::Instant,
}

impl Default for TokioClock {
    fn default() -> Self {
        TokioClock {
            base_ms: SystemClock.now_ms(),
            base: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        self.base_ms + self.base.elapsed().as_millis() as u64
    }
}

/// What a NOT_FOUND answer did not find: its message names the kind of thing asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Missing {
    #[error("no game with id '{0}'")]
    Game(String),
    #[error("no invitation with id '{0}'")]
    Invitation(String),
    /// A player id the server does not know, and the request field that named it.
    #[error("no player with id '{id}' ({field})")]
    Player { id: String, field: String },
}

/// Why a games operation failed.
#[derive(Debug, thiserror::Error)]
pub enum GamesError {
    #[error(transparent)]
    NotFound(Missing),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Refused(String),
    /// A refusal the API names (`ErrorReason`, sent as a trailer), in its one English text.
    #[error("{}", draughts_proto::reason_text(*.0))]
    Denied(ErrorReason),
    /// The call's expected ply is not the game's.
    #[error("expected ply {expected} but the game is at ply {at}: your view is stale")]
    Stale { expected: u32, at: u32 },
    #[error("only the game's players may do that")]
    NotAPlayer,
    #[error("the game changed at the same moment (another request won); re-read it and try again")]
    Conflict,
    #[error(transparent)]
    Move(#[from] draughts_engine::ResolveError),
    #[error("state backend: {0}")]
    Store(StoreError),
    #[error("{0}")]
    Corrupt(String),
    /// The replica is stopping (kind Unavailable: retry on another).
    #[error("the server is shutting down")]
    ShuttingDown,
    /// A per-player bound is reached (pending invitations, open games).
    #[error("{0}")]
    Exhausted(String),
    /// A quota over time is spent (games against the computer): RESOURCE_EXHAUSTED with
    /// `retry-after` (whole seconds until the window that counts it ends).
    #[error("{what}: retry in {retry_after_secs} s")]
    Quota { what: String, retry_after_secs: u64 },
}

impl From<StoreError> for GamesError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict { .. } => GamesError::Conflict,
            e => GamesError::Store(e),
        }
    }
}

impl From<PlayError> for GamesError {
    fn from(e: PlayError) -> Self {
        match e {
            PlayError::Invalid(m) => GamesError::Invalid(m),
            PlayError::Refused(m) => GamesError::Refused(m),
            PlayError::Denied(reason) => GamesError::Denied(reason),
            PlayError::NotAPlayer => GamesError::NotAPlayer,
        }
    }
}

impl ServiceError for GamesError {
    fn kind(&self) -> ErrorKind {
        match self {
            GamesError::NotFound(_) => ErrorKind::NotFound,
            GamesError::Invalid(_) => ErrorKind::InvalidArgument,
            GamesError::Refused(_) | GamesError::Stale { .. } => ErrorKind::FailedPrecondition,
            GamesError::Denied(reason) => match reason {
                ErrorReason::InviteSelf => ErrorKind::InvalidArgument,
                ErrorReason::NotAPlayer => ErrorKind::PermissionDenied,
                ErrorReason::NoSuchGame => ErrorKind::NotFound,
                _ => ErrorKind::FailedPrecondition,
            },
            GamesError::NotAPlayer => ErrorKind::PermissionDenied,
            GamesError::Conflict => ErrorKind::Conflict,
            GamesError::Move(draughts_engine::ResolveError::Malformed(_)) => {
                ErrorKind::InvalidArgument
            }
            GamesError::Move(_) => ErrorKind::FailedPrecondition,
            GamesError::Corrupt(_) => ErrorKind::Internal,
            GamesError::Exhausted(_) | GamesError::Quota { .. } => ErrorKind::ResourceExhausted,
            GamesError::ShuttingDown => ErrorKind::Unavailable,
            GamesError::Store(e) => e.code().into(),
        }
    }

    fn reason(&self) -> Option<ErrorReason> {
        match self {
            GamesError::Denied(reason) => Some(*reason),
            GamesError::Stale { .. } => Some(ErrorReason::StalePly),
            GamesError::NotAPlayer => Some(ErrorReason::NotAPlayer),
            GamesError::NotFound(Missing::Game(_)) => Some(ErrorReason::NoSuchGame),
            _ => None,
        }
    }
}

pub type GamesResult<T> = Result<T, GamesError>;

/// What a new game needs.
#[derive(Clone, Debug)]
pub struct NewGame {
    pub rules: RuleSet,
    pub time: TimeControlRec,
    pub white: Player,
    pub black: Player,
    pub rated: bool,
    pub start: Position,
    /// Each player may go berserk before their first move (arena games; a tournament service sets
    /// it, never a player). Needs a Fischer clock.
    pub berserk_allowed: bool,
}

/// A finished game as stored durably (for listings).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedSummary {
    pub game_id: String,
    pub variant: String,
    pub white_id: String,
    pub black_id: String,
    pub record: GameRecord,
    pub finished_at_ms: u64,
}

/// The `games.finished` event of a finished game, in the one contract's types.
pub(crate) fn finished_event(
    record: &GameRecord,
    result: &super::record::ResultRec,
    result_text: &str,
    finished_at_ms: u64,
    pdn_text: &str,
) -> GamesResult<finished::FinishedV1> {
    let unknown = |what: &str, value: &str| {
        GamesError::Invalid(format!("{what} {value:?} in game {}", record.id))
    };
    // The record's sides never carry berserk; its per-colour flags are the truth (`vocab::player`).
    let side = |p: &Player, berserk: bool| Player {
        berserk,
        ..p.clone()
    };
    let white = side(&record.white, record.white_berserk);
    let black = side(&record.black, record.black_berserk);
    Ok(finished::FinishedV1 {
        game_id: record.id.clone(),
        variant: draughts_engine::Variant::from_key(&record.variant)
            .map_err(|_| unknown("variant", &record.variant))?,
        options: record.options.clone(),
        rated: record.counts_for_rating(),
        white,
        black,
        outcome: result.outcome,
        reason: result.reason,
        result: result_text.to_owned(),
        // The one type: the record's is the contract's.
        time_control: Some(record.time),
        plies: record.ply(),
        finished_at_ms,
        pdn: pdn_text.to_owned(),
        traceparent: draughts_runtime::propagation::inject_map()
            .get("traceparent")
            .cloned(),
    })
}

/// The games domain over the shared backends. Cheap to clone; any number of replicas may run it.
#[derive(Clone, Debug)]
pub struct GamesCore {
    live: Arc<dyn LiveStore>,
    db: Database,
    clock: Arc<dyn Clock>,
    /// Time each side has for its first move in Fischer games, ms.
    first_move_ms: u64,
    /// Bounds (watchers, open games, archived records, the finished-games stream).
    limits: Arc<GamesLimits>,
    /// This replica's watchers and game feeds.
    watchers: Arc<Watchers>,
    /// Who plays the `ai:<level>` players, if this replica does.
    computer: Option<Arc<dyn ComputerPlayer>>,
}

fn encode(record: &GameRecord) -> GamesResult<Bytes> {
    serde_json::to_vec(record)
        .map(Bytes::from)
        .map_err(|e| GamesError::Invalid(format!("cannot encode game: {e}")))
}

pub(crate) fn decode(id: &str, bytes: &[u8]) -> GamesResult<GameRecord> {
    serde_json::from_slice(bytes).map_err(|e| {
        tracing::error!(game_id = id, error = %e, "stored game does not decode");
        GamesError::Corrupt(format!("stored game {id} does not decode"))
    })
}

/// The signal watchers of a game wait for: the game's latest event number on its events channel.
fn notification(record: &GameRecord) -> Effect {
    Effect::Publish {
        channel: keys::events(&record.id),
        payload: Bytes::from(record.last_seq().to_string()),
    }
}

/// A new game id: `g`, the creation time in hex, and 48 random bits (unique across replicas).
pub(crate) fn new_game_id() -> GameId {
    use rand::Rng;
    let text = format!(
        "g{:x}{:012x}",
        SystemClock.now_ms(),
        rand::rng().random::<u64>() & 0xFFFF_FFFF_FFFF
    );
    // `g` and hex digits, at most 29 bytes: always a game id.
    GameId::parse(&text).expect("a generated game id is well formed")
}

impl GamesCore {
    /// Connects the domain to its backends and applies the durable schema.
    pub async fn new(
        live: Arc<dyn LiveStore>,
        db: Database,
        clock: Arc<dyn Clock>,
    ) -> GamesResult<Self> {
        db.migrate(MIGRATIONS).await?;
        live.ensure_group(keys::FINISHED, ARCHIVE_CHECK_GROUP)
            .await
            .ok();
        Ok(GamesCore {
            live,
            db,
            clock,
            first_move_ms: super::record::DEFAULT_FIRST_MOVE_MS,
            watchers: Arc::new(Watchers::new(&GamesLimits::defaults())),
            computer: None,
            limits: Arc::new(GamesLimits::defaults()),
        })
    }

    /// Sets the bounds (the defaults are [`GamesLimits::defaults`]). Call before serving: the
    /// watchers' registry is made anew.
    /// Plays the computer's moves on this replica with `player`.
    pub fn with_computer(mut self, player: Arc<dyn ComputerPlayer>) -> Self {
        self.computer = Some(player);
        self
    }

    pub fn computer(&self) -> Option<&Arc<dyn ComputerPlayer>> {
        self.computer.as_ref()
    }

    /// The schedule effect for a game where it is (or is not) a computer's turn after a write: due at
    /// once when no local computer player will move at once, else a safety net [`CLAIM_RETRY`] later.
    fn computer_effect(&self, record: &GameRecord) -> Option<Effect> {
        if !computer::has_computer(record) {
            return None;
        }
        Some(match computer::computer_to_move(record) {
            Some(_) => Effect::Schedule {
                set: keys::COMPUTER.into(),
                member: record.id.to_string(),
                at_unix_ms: self.now()
                    + if self.computer.is_some() {
                        CLAIM_RETRY.as_millis() as u64
                    } else {
                        0
                    },
            },
            None => Effect::Cancel {
                set: keys::COMPUTER.into(),
                member: record.id.to_string(),
            },
        })
    }

    /// After a write that made it the computer's turn: this replica's computer moves at once.
    fn computer_now(&self, record: &GameRecord) {
        if let Some(player) = &self.computer
            && computer::computer_to_move(record).is_some()
        {
            let core = self.clone();
            let player = player.clone();
            let id = record.id.clone();
            tokio::spawn(async move {
                if let Err(e) = core.computer_move(&id, player.as_ref()).await {
                    tracing::warn!(game_id = %id, error = %e, "computer move failed; the schedule retries it");
                    let _ = core
                        .live()
                        .schedule(keys::COMPUTER, &id, core.now() + 1_000)
                        .await;
                }
            });
        }
    }

    pub fn with_limits(mut self, limits: GamesLimits) -> Self {
        self.first_move_ms = limits.first_move_secs * 1000;
        self.watchers = Arc::new(Watchers::new(&limits));
        self.limits = Arc::new(limits);
        self
    }

    pub fn limits(&self) -> &GamesLimits {
        &self.limits
    }

    /// This replica's watchers (see [`super::watch`]).
    pub fn watchers(&self) -> &Arc<Watchers> {
        &self.watchers
    }

    pub fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    pub fn db(&self) -> &Database {
        &self.db
    }

    pub fn live(&self) -> &Arc<dyn LiveStore> {
        &self.live
    }

    /// Loads a game and its version: from the live store, else (a finished game whose live record
    /// has expired after archiving, or any finished game after a restart of the embedded mode) from
    /// `finished_games`, as an archived record with version 0 (it is over: no action applies to it).
    pub async fn load(&self, id: &str) -> GamesResult<(GameRecord, u64)> {
        // The one check of a game id (as writes make it): the message never echoes control bytes.
        draughts_proto::ids::GameId::parse(id).map_err(|e| GamesError::Invalid(e.to_string()))?;
        if let Some((bytes, version)) = self.live.get(&keys::game(id)).await? {
            return Ok((decode(id, &bytes)?, version));
        }
        let row: Option<(String,)> =
            draughts_store::sqlx::query_as("SELECT record FROM finished_games WHERE game_id = $1")
                .bind(id)
                .fetch_optional(self.db.pool())
                .await
                .map_err(StoreError::from)?;
        match row {
            Some((json,)) => {
                let mut record = decode(id, json.as_bytes())?;
                record.archived = true;
                Ok((record, 0))
            }
            None => {
                // An accepted invitation whose game is not stored yet gets it now.
                if self.materialize_accepted(id).await?.is_some()
                    && let Some((bytes, version)) = self.live.get(&keys::game(id)).await?
                {
                    return Ok((decode(id, &bytes)?, version));
                }
                Err(GamesError::NotFound(Missing::Game(id.to_string())))
            }
        }
    }

    /// Refuses a new game for `player` when it already has the most ongoing games allowed
    /// ([`GamesLimits::max_open_games_per_player`]; for a bot, also its own bound set by an
    /// administrator (`Auth.SetBotLimits`, [`draughts_auth::bot_limits`]), else
    /// [`GamesLimits::max_open_games_per_bot`]) with RESOURCE_EXHAUSTED. Computer players
    /// (`ai:<level>`) play any number. Call it for both players before creating a game (the count is
    /// the player's list of ongoing games, one read; two creations racing may both pass, so the bound
    /// can be passed by the number of concurrent creations, never more).
    pub async fn check_open_games(&self, player: &str, bot: bool) -> GamesResult<()> {
        if player.starts_with("ai:") {
            return Ok(());
        }
        let open = self.ongoing_ids(player).await?.len();
        let mut max = self.limits.max_open_games_per_player as usize;
        if bot {
            let own = draughts_auth::bot_limits::read(&*self.live, player)
                .await?
                .map_or(0, |limits| limits.max_games);
            let (bot_max, whose) = match own {
                0 => (
                    self.limits.max_open_games_per_bot,
                    "the server's bound for bots",
                ),
                own => (own, "this bot's own bound, set by the operator"),
            };
            if open >= max.min(bot_max as usize) && (bot_max as usize) < max {
                return Err(GamesError::Exhausted(format!(
                    "bot {player} already has {open} ongoing games, the most allowed ({bot_max}: {whose}); finish one first"
                )));
            }
            max = max.min(bot_max as usize);
        }
        if open >= max {
            return Err(GamesError::Exhausted(format!(
                "player {player} already has {open} ongoing games, the most allowed ({max}); finish one first"
            )));
        }
        Ok(())
    }

    /// Creates a game (with a new id).
    pub async fn create(&self, new: NewGame) -> GamesResult<GameRecord> {
        self.create_with_id(new, new_game_id()).await
    }

    /// Creates a game with id `id`: [`GamesError::Conflict`] if that game exists (an accepted
    /// invitation makes its game under its own id, once).
    pub async fn create_with_id(&self, new: NewGame, id: GameId) -> GamesResult<GameRecord> {
        self.check_open_games(&new.white.id, new.white.bot).await?;
        self.check_open_games(&new.black.id, new.black.bot).await?;
        let now = self.now();
        // Games against the computer are casual, whatever was asked: ratings never rate them, so the
        // game must not say it is rated.
        let rated = new.rated && !new.white.computer && !new.black.computer;
        if new.berserk_allowed && !matches!(new.time, TimeControlRec::Fischer { .. }) {
            return Err(GamesError::Invalid(
                "berserk_allowed needs a Fischer clock".into(),
            ));
        }
        let mut record = GameRecord::new(
            id, new.rules, new.time, new.white, new.black, rated, &new.start, now,
        )?;
        record.first_move_ms = self.first_move_ms;
        record.berserk_allowed = new.berserk_allowed;
        let side = new.start.side_to_move();
        let effects = [
            Effect::Schedule {
                set: keys::DEADLINES.into(),
                member: record.id.to_string(),
                at_unix_ms: record.deadline(side),
            },
            notification(&record),
            consent::signal(&record.white.id, SignalKind::GameStarted, &record.id),
            consent::signal(&record.black.id, SignalKind::GameStarted, &record.id),
        ]
        .into_iter()
        .chain(self.computer_effect(&record))
        .collect::<Vec<_>>();
        self.live
            .put_with(
                &keys::game(&record.id),
                encode(&record)?,
                None,
                None,
                &effects,
            )
            .await?;
        for p in [&record.white.id, &record.black.id] {
            self.update_player_games(p, &record.id, true).await?;
        }
        self.computer_now(&record);
        Ok(record)
    }

    /// Applies an action to a game with compare-and-set. `f` gets the record and the replayed engine game.
    /// On a lost race the caller gets [`GamesError::Conflict`] and nothing was applied.
    pub async fn act<F>(&self, id: &str, f: F) -> GamesResult<GameRecord>
    where
        F: FnOnce(&mut GameRecord, &mut Game, u64) -> GamesResult<()>,
    {
        let (mut record, version) = self.load(id).await?;
        let now = self.now();
        let mut game = record.replay()?;
        let was_over = record.is_over();
        f(&mut record, &mut game, now)?;
        self.save(record, version, was_over).await
    }

    async fn save(
        &self,
        record: GameRecord,
        version: u64,
        was_over: bool,
    ) -> GamesResult<GameRecord> {
        let finished_now = !was_over && record.is_over();
        // The write, the clock schedule and the watchers' signal go to the live store as one atomic
        // step (one round trip on Redis): no replica ever sees the move without its deadline.
        let mut effects = Vec::with_capacity(3);
        if finished_now {
            // With the write: a crash right after it still gets the game archived by the schedule.
            effects.push(Effect::Schedule {
                set: keys::ARCHIVE.into(),
                member: record.id.to_string(),
                at_unix_ms: self.now(),
            });
            effects.push(Effect::Cancel {
                set: keys::DEADLINES.into(),
                member: record.id.to_string(),
            });
            for p in [&record.white.id, &record.black.id] {
                effects.push(consent::signal(p, SignalKind::GameFinished, &record.id));
            }
        } else if !record.is_over() {
            let side = record.side_to_move()?;
            effects.push(Effect::Schedule {
                set: keys::DEADLINES.into(),
                member: record.id.to_string(),
                at_unix_ms: record.deadline(side),
            });
        }
        effects.extend(self.computer_effect(&record));
        effects.push(notification(&record));
        self.live
            .put_with(
                &keys::game(&record.id),
                encode(&record)?,
                Some(version),
                None,
                &effects,
            )
            .await?;
        self.computer_now(&record);
        if finished_now && let Err(e) = self.archive(&record).await {
            tracing::warn!(game_id = %record.id, error = %e, "archiving deferred to the schedule");
        }
        Ok(record)
    }

    /// Plays the move of `player_id`.
    pub async fn play_move(
        &self,
        id: &str,
        player_id: &str,
        resolve: impl FnOnce(&Position) -> Result<Move, draughts_engine::ResolveError>,
        expected_ply: Option<u32>,
    ) -> GamesResult<GameRecord> {
        self.act(id, |record, game, now| {
            let color = record.color_of(player_id).ok_or(GamesError::NotAPlayer)?;
            if let Some(p) = expected_ply
                && p != record.ply()
            {
                return Err(GamesError::Stale {
                    expected: p,
                    at: record.ply(),
                });
            }
            if record.is_over() {
                return Err(GamesError::Denied(ErrorReason::GameOver));
            }
            if game.position().side_to_move() != color {
                return Err(GamesError::Denied(ErrorReason::NotYourTurn));
            }
            let mv = resolve(game.position())?;
            record.play(color, game, &mv, now)?;
            Ok(())
        })
        .await
        .inspect(|_| metrics::counter!("draughts_games_moves_total").increment(1))
    }

    /// A player action (resign, draw offers, abort, timeout claim).
    pub async fn player_action(
        &self,
        id: &str,
        player_id: &str,
        action: fn(&mut GameRecord, Color, u64) -> Result<(), PlayError>,
    ) -> GamesResult<GameRecord> {
        self.act(id, |record, _game, now| {
            let color = record.color_of(player_id).ok_or(GamesError::NotAPlayer)?;
            action(record, color, now)?;
            Ok(())
        })
        .await
    }

    /// `player_id` goes berserk in game `id` ([`GameRecord::berserk`]): half their own clock, no
    /// increment. A repeat answers the game as it is, with no write.
    pub async fn berserk(&self, id: &str, player_id: &str) -> GamesResult<GameRecord> {
        let (record, _) = self.load(id).await?;
        let color = record.color_of(player_id).ok_or(GamesError::NotAPlayer)?;
        if record.is_berserk(color) {
            return Ok(record);
        }
        self.act(id, |record, _game, now| {
            record.berserk(color, now)?;
            Ok(())
        })
        .await
    }

    /// Ends the game on time if its flag has fallen; retried on conflicts. Used by the timer loop.
    pub async fn enforce_clock(&self, id: &str) -> GamesResult<()> {
        cas::retry(
            Retry::times(5),
            |e| matches!(e, GamesError::Conflict),
            || async {
                let (mut record, version) = match self.load(id).await {
                    Ok(x) => x,
                    Err(GamesError::NotFound(_)) => {
                        self.live.cancel(keys::DEADLINES, id).await?;
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                };
                if record.is_over() {
                    // Claimed deadlines stay scheduled until dealt with (see `run_timers`).
                    self.live.cancel(keys::DEADLINES, id).await?;
                    return Ok(());
                }
                let now = self.now();
                if !record.check_flag(now)? {
                    // Not due (a move was played since): schedule its real deadline.
                    let side = record.side_to_move()?;
                    self.live
                        .schedule(keys::DEADLINES, id, record.deadline(side))
                        .await?;
                    return Ok(());
                }
                self.save(record, version, false).await.map(|_| ())
            },
        )
        .await
    }

    /// Stores a finished game durably, publishes it on `games.finished`, and marks it archived.
    /// Idempotent: the database row is keyed by the game id.
    pub async fn archive(&self, record: &GameRecord) -> GamesResult<()> {
        let Some(result) = &record.result else {
            return Ok(());
        };
        if record.archived {
            self.live.cancel(keys::ARCHIVE, &record.id).await?;
            return Ok(());
        }
        let pdn_text = pdn::export(record)?;
        let result_text = pdn::result_text(record);
        let finished_at = record.finished_ms.unwrap_or(record.created_ms);
        let json = serde_json::to_string(record).map_err(|e| GamesError::Invalid(e.to_string()))?;
        let event = finished_event(record, result, &result_text, finished_at, &pdn_text)?;
        let payload = finished::encode(&event);
        // The row is keyed by game id: a repeat inserts nothing.
        sqlx_insert(
            &self.db,
            record,
            result,
            &result_text,
            finished_at,
            &pdn_text,
            &json,
            &String::from_utf8_lossy(&payload),
        )
        .await?;
        // Published whenever the game is not yet marked archived, not only when this call inserted
        // the row: a crash between the insert and the append must not lose the event. A repeat is
        // possible and allowed (consumers deduplicate by game id; see the module docs).
        {
            self.live
                .append(keys::FINISHED, Bytes::from(payload))
                .await?;
        }
        for p in [&record.white.id, &record.black.id] {
            self.update_player_games(p, &record.id, false).await?;
        }
        // Mark archived, and let the live record expire: the database holds the game now, and
        // `load` reads it from there once the record is gone. Retried on a lost race; if it still
        // fails, the archive schedule brings the game back here.
        let marking = cas::update(
            self.live.as_ref(),
            &keys::game(&record.id),
            &(|bytes: &[u8]| decode(&record.id, bytes), encode),
            Retry::times(5),
            |current| match current {
                Some(mut current) if !current.archived => {
                    current.archived = true;
                    Ok(Change::Write {
                        value: current,
                        ttl: Some(self.limits.archived_game_ttl()),
                        effects: Vec::new(),
                        then: (),
                    })
                }
                _ => Ok(Change::Keep(())),
            },
        )
        .await;
        match marking {
            Ok(()) | Err(GamesError::Conflict) => {}
            Err(e) => return Err(e),
        }
        self.live.cancel(keys::ARCHIVE, &record.id).await?;
        Ok(())
    }

    pub(crate) async fn update_player_games(
        &self,
        player: &str,
        game: &str,
        add: bool,
    ) -> GamesResult<()> {
        // A list that does not decode is written again.
        let codec = (
            |bytes: &[u8]| -> GamesResult<Vec<String>> {
                Ok(serde_json::from_slice(bytes).unwrap_or_default())
            },
            |ids: &Vec<String>| -> GamesResult<Bytes> {
                serde_json::to_vec(ids)
                    .map(Bytes::from)
                    .map_err(|e| GamesError::Invalid(e.to_string()))
            },
        );
        cas::update(
            self.live.as_ref(),
            &keys::player_games(player),
            &codec,
            Retry::times(10),
            |ids| {
                let mut ids = ids.unwrap_or_default();
                if add == ids.iter().any(|g| g == game) {
                    return Ok(Change::Keep(()));
                }
                if add {
                    ids.push(game.to_string());
                } else {
                    ids.retain(|g| g != game);
                }
                Ok(Change::Write {
                    value: ids,
                    ttl: None,
                    effects: Vec::new(),
                    then: (),
                })
            },
        )
        .await
    }

    /// A player's ongoing games.
    /// The ids on a player's list of ongoing games (`player-games:{player}`).
    pub(crate) async fn ongoing_ids(&self, player: &str) -> GamesResult<Vec<String>> {
        Ok(match self.live.get(&keys::player_games(player)).await? {
            Some((b, _)) => serde_json::from_slice(&b).unwrap_or_default(),
            None => Vec::new(),
        })
    }

    /// A player's ongoing games, at most [`ONGOING_LISTED_MAX`] (the most recently created).
    pub async fn ongoing(&self, player: &str) -> GamesResult<Vec<GameRecord>> {
        let ids = self.ongoing_ids(player).await?;
        let skip = ids.len().saturating_sub(ONGOING_LISTED_MAX);
        let mut out = Vec::new();
        for id in ids.into_iter().skip(skip) {
            if let Ok((r, _)) = self.load(&id).await
                && !r.is_over()
            {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// A player's finished games, newest first: up to `limit` of them after `after` (the last game
    /// of the previous page; `None`: from the newest), keyset-paged by (finished_at_ms, game_id) so
    /// that pages neither repeat nor skip games while new ones finish. Also says whether more follow.
    pub async fn recent(
        &self,
        player: &str,
        limit: u32,
        after: Option<&PageKey>,
    ) -> GamesResult<(Vec<GameRecord>, bool)> {
        let (after_ms, after_id) = match after {
            Some(key) => (
                i64::try_from(key.finished_at_ms).unwrap_or(i64::MAX),
                key.game_id.clone(),
            ),
            // Past every real key: finished_at_ms is a Unix time in ms.
            None => (i64::MAX, String::new()),
        };
        let rows: Vec<(String,)> = draughts_store::sqlx::query_as(
            "SELECT record FROM finished_games
             WHERE (white_id = $1 OR black_id = $2)
               AND (finished_at_ms < $3 OR (finished_at_ms = $4 AND game_id < $5))
             ORDER BY finished_at_ms DESC, game_id DESC LIMIT $6",
        )
        .bind(player)
        .bind(player)
        .bind(after_ms)
        .bind(after_ms)
        .bind(after_id)
        .bind(i64::from(limit) + 1)
        .fetch_all(self.db.pool())
        .await
        .map_err(StoreError::from)?;
        let more = rows.len() > limit as usize;
        let records = rows
            .into_iter()
            .take(limit as usize)
            .map(|(json,)| decode("finished", json.as_bytes()))
            .collect::<GamesResult<Vec<_>>>()?;
        Ok((records, more))
    }

    /// Trims `games.finished` (what every consumer group has acknowledged, and beyond the caps) and
    /// samples the gauges of games in progress and of the stream's groups. Run by the timers.
    async fn housekeeping(&self, trim: bool) {
        match self.live.schedule_len(keys::DEADLINES).await {
            Ok(n) => metrics::gauge!("draughts_games_in_progress").set(n as f64),
            Err(e) => tracing::warn!(error = %e, "games in progress not sampled"),
        }
        if trim {
            match self
                .live
                .trim_consumed(keys::FINISHED, self.limits.finished_stream_caps())
                .await
            {
                Ok(trimmed) => {
                    metrics::counter!("draughts_stream_trimmed_total", "stream" => keys::FINISHED, "why" => "consumed")
                        .increment(trimmed.consumed);
                    metrics::counter!("draughts_stream_trimmed_total", "stream" => keys::FINISHED, "why" => "capped")
                        .increment(trimmed.capped);
                    if trimmed.capped > 0 {
                        tracing::warn!(
                            removed = trimmed.capped,
                            "games.finished: entries a consumer group had not acknowledged were trimmed by the length/age caps"
                        );
                    }
                }
                Err(e) => tracing::warn!(error = %e, "games.finished not trimmed"),
            }
        }
        match self.live.len(keys::FINISHED).await {
            Ok(n) => {
                metrics::gauge!("draughts_stream_length", "stream" => keys::FINISHED).set(n as f64)
            }
            Err(e) => tracing::warn!(error = %e, "games.finished length not sampled"),
        }
        if let Ok(groups) = self.live.groups(keys::FINISHED).await {
            // The group made at start is gone only if the store lost its data: make it again (the
            // check rides on this read; the ratings and bulk-analysis consumers recreate their own).
            if !groups.iter().any(|g| g.name == ARCHIVE_CHECK_GROUP) {
                match self
                    .live
                    .ensure_group(keys::FINISHED, ARCHIVE_CHECK_GROUP)
                    .await
                {
                    Ok(()) => tracing::warn!(
                        group = ARCHIVE_CHECK_GROUP,
                        "games.finished: consumer group missing (the live store lost its data?); created again"
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e, "games.finished: consumer group not created")
                    }
                }
            }
            for group in groups {
                metrics::gauge!("draughts_stream_pending", "stream" => keys::FINISHED, "group" => group.name.clone())
                    .set(group.pending as f64);
                if let Some(lag) = group.lag {
                    metrics::gauge!("draughts_stream_lag", "stream" => keys::FINISHED, "group" => group.name)
                        .set(lag as f64);
                }
            }
        }
    }

    /// Runs the clock and archive schedules until `shutdown` resolves. Every replica runs one; each due
    /// game is handed to exactly one of them.
    ///
    /// Every [`SAMPLE_EVERY`] they also sample the gauges (games in progress, `games.finished` length,
    /// pending entries and lag per consumer group), and every [`TRIM_EVERY`] they trim
    /// `games.finished` (see [`LiveStore::trim_consumed`] and [`GamesLimits`]).
    pub async fn run_timers(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        // This replica's name in the consumer groups it reads.
        let consumer = format!("games-{}", new_game_id());
        let mut links_checked: Option<std::time::Instant> = None;
        let mut next_sample = tokio::time::Instant::now();
        let mut next_trim = tokio::time::Instant::now();
        let computer_slots = Arc::new(tokio::sync::Semaphore::new(computer::MAX_IN_FLIGHT));
        loop {
            // One round of timer work; shutdown cuts it after ROUND_GRACE (with the store down each of
            // its calls waits for its error, and the exit used to wait for the whole round).
            let round = async {
                let started = tokio::time::Instant::now();
                // Computer turns left by a replica that died mid-search, or made where no computer plays.
                self.run_computer_turns(&computer_slots).await;
                if started >= next_sample {
                    let trim = started >= next_trim;
                    self.housekeeping(trim).await;
                    next_sample = started + SAMPLE_EVERY;
                    if trim {
                        next_trim = started + TRIM_EVERY;
                    }
                }
                let now = self.now();
                // Guests taken over by accounts, once a second (see `links`).
                if links_checked.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                    links_checked = Some(std::time::Instant::now());
                    if let Err(e) = self.apply_links(&consumer).await {
                        tracing::warn!(error = %e, "moving linked guests' games failed; retrying");
                    }
                    if let Err(e) = self.apply_erasures(&consumer).await {
                        tracing::warn!(error = %e, "renaming deleted accounts' games failed; retrying");
                    }
                }
                // Claimed, not taken: a due game stays scheduled (moved CLAIM_RETRY ahead) until this
                // replica has dealt with it, so a replica killed in between loses nothing; another one
                // picks the game up when the claim runs out.
                match self
                    .live
                    .claim_due(keys::DEADLINES, now, 100, CLAIM_RETRY)
                    .await
                {
                    Ok(ids) => {
                        for id in ids {
                            if let Err(e) = self.enforce_clock(&id).await {
                                tracing::warn!(game_id = %id, error = %e, "clock check failed; retrying soon");
                                let _ = self.live.schedule(keys::DEADLINES, &id, now + 500).await;
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "deadline schedule unavailable"),
                }
                if let Ok(ids) = self
                    .live
                    .claim_due(keys::ARCHIVE, now, 100, CLAIM_RETRY)
                    .await
                {
                    for id in ids {
                        let r = match self.load(&id).await {
                            Ok((r, _)) => self.archive(&r).await,
                            Err(GamesError::NotFound(_)) => self
                                .live
                                .cancel(keys::ARCHIVE, &id)
                                .await
                                .map(drop)
                                .map_err(GamesError::from),
                            Err(e) => Err(e),
                        };
                        if let Err(e) = r {
                            tracing::warn!(game_id = %id, error = %e, "archiving failed; retrying soon");
                            let _ = self.live.schedule(keys::ARCHIVE, &id, now + 1000).await;
                        }
                    }
                }
                // Sleep until the next deadline, at most 250 ms (another replica may add an earlier one).
                match self.live.next_due(keys::DEADLINES).await {
                    Ok(Some((_, at))) => at.saturating_sub(self.now()).clamp(1, 250),
                    _ => 250,
                }
            };
            let Some(wait) = draughts_runtime::round_or_shutdown(
                round,
                &mut shutdown,
                draughts_runtime::ROUND_GRACE,
            )
            .await
            else {
                return;
            };
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn sqlx_insert(
    db: &Database,
    record: &GameRecord,
    result: &super::record::ResultRec,
    result_text: &str,
    finished_at: u64,
    pdn_text: &str,
    json: &str,
    event: &str,
) -> GamesResult<bool> {
    let done = draughts_store::sqlx::query(
        "INSERT INTO finished_games (game_id, variant, white_id, black_id, outcome, reason, result, rated, plies, finished_at_ms, pdn, record, event)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (game_id) DO NOTHING",
    )
    .bind(record.id.to_string())
    .bind(record.variant.clone())
    .bind(record.white.id.to_string())
    .bind(record.black.id.to_string())
    .bind(result.outcome.key())
    .bind(result.reason.key())
    .bind(result_text.to_string())
    .bind(i64::from(record.rated))
    .bind(i64::from(record.ply()))
    .bind(finished_at as i64)
    .bind(pdn_text.to_string())
    .bind(json.to_string())
    .bind(event.to_string())
    .execute(db.pool())
    .await
    .map_err(StoreError::from)?;
    Ok(done.rows_affected() > 0)
}
