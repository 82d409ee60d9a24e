//! The ratings domain over the durable [`Database`]: applying finished games exactly once, rating
//! fixed periods, and reading ratings, leaderboards, history and predictions. No tonic types; the clock
//! is a parameter (`now_ms`), so tests choose time.
//!
//! Split along the two paths: `write` (apply, fixed periods, import: everything that takes the writer
//! row) and `read` (ratings, leaderboards, history, predictions: plain reads, no lock). This module
//! holds what both share: the schema, the settings, the policies, the row codec.
//!
//! # Tables (PostgreSQL, or SQLite in the embedded mode; migrations numbered from 1001 so that they never
//! collide with another service's migrations in a shared database)
//!
//! - `ratings`: one row per (category, player): the Glicko-2 rating, deviation and volatility as of
//!   `rated_at_ms` (the finish time of the last game for one game per period, the end of the last rated
//!   period for fixed periods), game counts, and `established_until_ms`: until when the deviation,
//!   growing with inactivity, stays at or under the provisional threshold (0: provisional now). The
//!   leaderboard reads `established_until_ms > now` on an index ordered by (rating desc, player id).
//! - `rating_history`: one row per rating update of a player, keyed by the player's game count after it.
//! - `rating_games`: every game accepted for rating, keyed by game id: THE idempotency record. It is
//!   written in the same transaction as the rating rows the game changes, so a game is either fully
//!   applied (both players, its history rows, its record) or not at all, and a game id seen again
//!   changes nothing. For fixed periods it also holds the games waiting for their period.
//!   Its index on (white_id, black_id, finished_at_ms) finds a pair's recent games for the pair limit: a
//!   game past `--pair-games-per-day` is recorded with neither side rated.
//! - `rating_periods`: the fixed periods already rated.
//! - `rating_reconcile`: one row, the reconciler's watermark: every finished game the games service
//!   lists that finished before it has been looked at (see [`crate::reconcile`]).
//! - `rating_bots`: the players known to be BOTs, from the server's data (a `games.finished` entry's
//!   `bot` mark, or the identity registry for an import), written with the first recorded game that
//!   shows it. Every rating row of such a player carries `bot = 1` (set in the transaction that writes
//!   it), and leaderboards read one kind: (category, bot, rating desc, player id) is their index. Rows
//!   written before the mark existed read as people's (`bot` defaults to 0) until the bot's next game.
//! - `rating_writer`: one row that every writing transaction updates first. It serialises rating writers
//!   (replicas, the admin import, the period closer): two games of one player can never be computed from
//!   the same old rating. On SQLite the transaction takes the database write lock at `BEGIN IMMEDIATE`
//!   anyway. Throughput comes from batching many games per transaction, not from parallel writers.

mod read;
mod write;

pub use write::PAIR_LIMITED;

use std::sync::Arc;

use draughts_engine::Variant;
use draughts_store::Database;
use draughts_store::Migration;
use draughts_store::sqlx::any::{AnyArguments, AnyRow};
use draughts_store::sqlx::query::Query;
use draughts_store::sqlx::{Any, Row};

use crate::category::Category;
use crate::config::{BotPolicy, ComputerPolicy, PeriodMode, Policy, RatingsConfig};
use crate::error::{RatingsError, RatingsResult};
use crate::event::{FinishedGame, Source, check_id};
use crate::glicko::{self, Glicko, Params};

/// The durable schema. Versions start at 1001: `schema_migrations` is shared by every service using the
/// same database (the games archive uses 1, ...).
pub const MIGRATIONS: &[Migration<'static>] = &[Migration {
    version: 1001,
    name: "ratings",
    sql: "CREATE TABLE IF NOT EXISTS ratings (
            category TEXT NOT NULL,
            player_id TEXT NOT NULL,
            rating DOUBLE PRECISION NOT NULL,
            deviation DOUBLE PRECISION NOT NULL,
            volatility DOUBLE PRECISION NOT NULL,
            games BIGINT NOT NULL,
            wins BIGINT NOT NULL,
            draws BIGINT NOT NULL,
            losses BIGINT NOT NULL,
            rated_at_ms BIGINT NOT NULL,
            last_game_at_ms BIGINT NOT NULL,
            established_until_ms BIGINT NOT NULL,
            PRIMARY KEY (category, player_id)
        );
        CREATE INDEX IF NOT EXISTS ratings_leaderboard ON ratings (category, rating DESC, player_id);
        CREATE INDEX IF NOT EXISTS ratings_player ON ratings (player_id);
        CREATE TABLE IF NOT EXISTS rating_history (
            category TEXT NOT NULL,
            player_id TEXT NOT NULL,
            games_total BIGINT NOT NULL,
            at_ms BIGINT NOT NULL,
            rating DOUBLE PRECISION NOT NULL,
            deviation DOUBLE PRECISION NOT NULL,
            volatility DOUBLE PRECISION NOT NULL,
            rating_change DOUBLE PRECISION NOT NULL,
            game_id TEXT NOT NULL,
            games BIGINT NOT NULL,
            PRIMARY KEY (category, player_id, games_total)
        );
        CREATE TABLE IF NOT EXISTS rating_games (
            game_id TEXT PRIMARY KEY,
            category TEXT NOT NULL,
            white_id TEXT NOT NULL,
            black_id TEXT NOT NULL,
            white_score DOUBLE PRECISION NOT NULL,
            rate_white BIGINT NOT NULL,
            rate_black BIGINT NOT NULL,
            finished_at_ms BIGINT NOT NULL,
            period BIGINT NOT NULL,
            pending BIGINT NOT NULL,
            source TEXT NOT NULL,
            recorded_at_ms BIGINT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS rating_games_pending ON rating_games (pending, period);
        CREATE TABLE IF NOT EXISTS rating_periods (
            period BIGINT PRIMARY KEY,
            rated_at_ms BIGINT NOT NULL,
            games BIGINT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS rating_writer (
            id BIGINT PRIMARY KEY,
            writes BIGINT NOT NULL
        );
        INSERT INTO rating_writer (id, writes) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;",
}, Migration {
    version: 1002,
    name: "rating_reconcile",
    sql: "CREATE TABLE IF NOT EXISTS rating_reconcile (
            id BIGINT PRIMARY KEY,
            watermark_ms BIGINT NOT NULL
        );
        INSERT INTO rating_reconcile (id, watermark_ms) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;",
}, Migration {
    version: 1003,
    name: "rating_games_pair",
    sql: "CREATE INDEX IF NOT EXISTS rating_games_pair ON rating_games (white_id, black_id, finished_at_ms);",
}, Migration {
    version: 1004,
    name: "rating_history_player",
    // A profile's recent rated games, over every category.
    sql: "CREATE INDEX IF NOT EXISTS rating_history_player ON rating_history (player_id, at_ms);",
}, Migration {
    version: 1005,
    name: "rating_bots",
    // BOTs' ratings apart: the mark per player, copied on each of its rating rows for the leaderboards.
    sql: "ALTER TABLE ratings ADD COLUMN bot BIGINT NOT NULL DEFAULT 0;
        CREATE TABLE IF NOT EXISTS rating_bots (
            player_id TEXT PRIMARY KEY,
            marked_at_ms BIGINT NOT NULL
        );
        DROP INDEX IF EXISTS ratings_leaderboard;
        CREATE INDEX IF NOT EXISTS ratings_leaderboard_kind ON ratings (category, bot, rating DESC, player_id);",
}];

/// Entries per page when the request says 0.
pub const DEFAULT_PAGE_SIZE: u32 = 50;
/// Most entries per page.
pub const MAX_PAGE_SIZE: u32 = 200;

/// Rows per multi-row statement (12 columns: far under both backends' bind limits).
const ROWS_PER_STATEMENT: usize = 200;

/// A rating as shown: the deviation grown to `now`.
#[derive(Clone, Debug, PartialEq)]
pub struct RatingView {
    pub player_id: String,
    pub category: Category,
    /// Rating, deviation now, volatility.
    pub glicko: Glicko,
    pub provisional: bool,
    /// A BOT's rating (on the bots' leaderboard).
    pub bot: bool,
    pub games: u32,
    pub wins: u32,
    pub draws: u32,
    pub losses: u32,
    /// Unix ms; 0 = never.
    pub last_game_at_ms: u64,
}

/// One rating update of a player.
#[derive(Clone, Debug, PartialEq)]
pub struct HistoryEntry {
    pub at_ms: u64,
    pub glicko: Glicko,
    pub rating_change: f64,
    /// Empty for a fixed period.
    pub game_id: String,
    pub games: u32,
    pub games_total: u32,
}

/// A page of a list and the token of the next one.
#[derive(Clone, Debug, PartialEq)]
pub struct Page<T> {
    pub entries: Vec<T>,
    /// `None` on the last page.
    pub next_page_token: Option<String>,
}

/// An expected score.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// Player A's expected score against B, 0 to 1.
    pub expected_a: f64,
    pub a: RatingView,
    pub b: RatingView,
}

/// What applying a batch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// Games recorded now (rated at once, or waiting for their fixed period).
    pub recorded: usize,
    /// Of those, waiting for their fixed period.
    pub pending: usize,
    /// Games whose id was recorded before (or seen twice in the batch): nothing changed.
    pub duplicates: usize,
    /// Games the policies leave unrated.
    pub skipped: usize,
    /// Of the games recorded, those past the pair limit (`--pair-games-per-day`): recorded, no rating
    /// changed.
    pub pair_limited: usize,
}

/// What an admin import did.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordOutcome {
    pub recorded: bool,
    pub pending: bool,
    pub skipped_reason: Option<&'static str>,
    pub white: RatingView,
    pub black: RatingView,
}

/// How a game is rated, once the policies have accepted it.
#[derive(Clone, Debug, PartialEq)]
struct Accepted {
    category: Category,
    rate_white: bool,
    rate_black: bool,
    white_score: f64,
}

/// The validated settings the domain uses.
#[derive(Debug)]
struct Settings {
    params: Params,
    provisional_deviation: f64,
    mode: PeriodMode,
    period_ms: i64,
    grace_ms: i64,
    per_speed: Vec<Variant>,
    casual: Policy,
    computer: ComputerPolicy,
    bot: BotPolicy,
    guest: Policy,
    house_rules: Policy,
    /// Rated games of one pair in one category within 24 hours (0: no limit).
    pair_games_per_day: u32,
}

/// A stored rating row (or a new player's).
#[derive(Clone, Debug, PartialEq)]
struct Stored {
    glicko: Glicko,
    games: i64,
    wins: i64,
    draws: i64,
    losses: i64,
    rated_at_ms: i64,
    last_game_at_ms: i64,
    /// A BOT's row (read only: the mark is written from `rating_bots`, see the module docs).
    bot: bool,
}

impl Stored {
    fn new(params: &Params) -> Stored {
        Stored {
            glicko: params.initial(),
            games: 0,
            wins: 0,
            draws: 0,
            losses: 0,
            rated_at_ms: 0,
            last_game_at_ms: 0,
            bot: false,
        }
    }

    fn count(&mut self, score: f64) {
        self.games += 1;
        if score > 0.75 {
            self.wins += 1;
        } else if score < 0.25 {
            self.losses += 1;
        } else {
            self.draws += 1;
        }
    }
}

/// A value bound into a dynamically built statement.
enum Value {
    Int(i64),
    Float(f64),
    Text(String),
}

fn bind_all<'q>(
    mut query: Query<'q, Any, AnyArguments>,
    values: Vec<Value>,
) -> Query<'q, Any, AnyArguments> {
    for value in values {
        query = match value {
            Value::Int(v) => query.bind(v),
            Value::Float(v) => query.bind(v),
            Value::Text(v) => query.bind(v),
        };
    }
    query
}

/// `($1, $2), ($3, $4)` for 2 rows of 2 columns, numbering from `first`.
fn placeholders(rows: usize, columns: usize, first: usize) -> String {
    let mut out = String::with_capacity(rows * columns * 5);
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        out.push('(');
        for c in 0..columns {
            if c > 0 {
                out.push_str(", ");
            }
            out.push('$');
            out.push_str(&(first + r * columns + c).to_string());
        }
        out.push(')');
    }
    out
}

/// `$2, $3, $4` for a list of 3 numbered from 2.
fn list(count: usize, first: usize) -> String {
    (first..first + count)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn ms_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

fn ms_u64(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

fn count_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

const ROW_COLUMNS: &str = "player_id, rating, deviation, volatility, games, wins, draws, losses, rated_at_ms, last_game_at_ms, bot";

fn decode_row(row: &AnyRow) -> RatingsResult<(String, Stored)> {
    let player_id: String = row.try_get(0)?;
    let decoded = Stored {
        glicko: Glicko {
            rating: row.try_get(1)?,
            deviation: row.try_get(2)?,
            volatility: row.try_get(3)?,
        },
        games: row.try_get(4)?,
        wins: row.try_get(5)?,
        draws: row.try_get(6)?,
        losses: row.try_get(7)?,
        rated_at_ms: row.try_get(8)?,
        last_game_at_ms: row.try_get(9)?,
        bot: row.try_get::<i64, _>(10)? != 0,
    };
    let g = decoded.glicko;
    if !(g.rating.is_finite()
        && g.deviation.is_finite()
        && g.deviation > 0.0
        && g.volatility.is_finite()
        && g.volatility > 0.0)
    {
        return Err(RatingsError::Corrupt(format!(
            "rating row of {player_id} holds non-finite or non-positive values"
        )));
    }
    Ok((player_id, decoded))
}

/// Page tokens: hex of `L1|category|rating bits|player` (people's leaderboards; `B1|...` bots') and `H1|category|player|games`
/// (history), so a token is only accepted for the list it came from.
fn encode_token(text: &str) -> String {
    hex::encode(text.as_bytes())
}

fn decode_token(token: &str) -> RatingsResult<String> {
    let bad = || RatingsError::InvalidArgument("bad page token".into());
    if token.len() > 1024 {
        return Err(bad());
    }
    let bytes = hex::decode(token).map_err(|_| bad())?;
    String::from_utf8(bytes).map_err(|_| bad())
}

fn page_size(requested: u32) -> RatingsResult<usize> {
    match requested {
        0 => Ok(DEFAULT_PAGE_SIZE as usize),
        n if n <= MAX_PAGE_SIZE => Ok(n as usize),
        n => Err(RatingsError::InvalidArgument(format!(
            "page size must be at most {MAX_PAGE_SIZE}, got {n}"
        ))),
    }
}

fn check_player(player_id: &str) -> RatingsResult<()> {
    check_id("player id", player_id, crate::event::MAX_PLAYER_ID_BYTES)
        .map_err(RatingsError::InvalidArgument)
}

/// The ratings domain. Cheap to clone; any number of replicas may run it on one database.
#[derive(Clone, Debug)]
pub struct RatingsCore {
    db: Database,
    settings: Arc<Settings>,
}

impl RatingsCore {
    /// Connects the domain to its database and applies the schema. `config` must have been validated.
    pub async fn new(db: Database, config: &RatingsConfig) -> RatingsResult<RatingsCore> {
        config
            .validate()
            .map_err(|e| RatingsError::InvalidArgument(e.to_string()))?;
        db.migrate(MIGRATIONS).await?;
        let settings = Settings {
            params: config.params(),
            provisional_deviation: config.provisional_deviation,
            mode: config.periods,
            period_ms: ms_i64(u64::try_from(config.period().as_millis()).unwrap_or(u64::MAX)),
            grace_ms: ms_i64(config.period_grace_secs.saturating_mul(1000)),
            per_speed: config
                .speed_class_variants()
                .map_err(|e| RatingsError::InvalidArgument(e.to_string()))?,
            casual: config.casual_games,
            computer: config.computer_games,
            bot: config.bot_games,
            guest: config.guest_games,
            house_rules: config.house_rule_games,
            pair_games_per_day: config.pair_games_per_day,
        };
        Ok(RatingsCore {
            db,
            settings: Arc::new(settings),
        })
    }

    /// The database.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// The rating period mode.
    pub fn period_mode(&self) -> PeriodMode {
        self.settings.mode
    }

    /// The category of a game, for a variant and an optional time control.
    pub fn category_of(
        &self,
        variant: Variant,
        time_control: Option<&crate::category::TimeControl>,
    ) -> Category {
        Category::of_game(variant, time_control, &self.settings.per_speed)
    }

    /// Checks that a category is one this server rates (a speed class only for variants rated per speed).
    pub fn check_category(&self, category: Category) -> RatingsResult<()> {
        if category.speed.is_some() && !self.settings.per_speed.contains(&category.variant) {
            return Err(RatingsError::InvalidArgument(format!(
                "{} is not rated per speed class on this server",
                category.variant.key()
            )));
        }
        Ok(())
    }

    /// Whether and how the policies rate `game`; the reason when they do not.
    fn accept(&self, game: &FinishedGame) -> Result<Accepted, &'static str> {
        let s = &self.settings;
        let Some(white_score) = game.outcome.white_score() else {
            return Err("aborted");
        };
        if game.white.id == game.black.id {
            return Err("the same player on both sides");
        }
        if !game.rated && s.casual == Policy::Skip {
            return Err("a casual game");
        }
        if !game.options.is_empty() && s.house_rules == Policy::Skip {
            return Err("house-rule options");
        }
        if (game.white.guest || game.black.guest) && s.guest == Policy::Skip {
            return Err("a guest player");
        }
        let (mut rate_white, mut rate_black) = (true, true);
        // A bot against a person (a bot against the computer follows the computer policy).
        if game.white.bot != game.black.bot && !game.white.computer && !game.black.computer {
            match s.bot {
                BotPolicy::Skip => return Err("a bot against a person"),
                BotPolicy::Rate => {}
                BotPolicy::BotOnly => {
                    rate_white = game.white.bot;
                    rate_black = game.black.bot;
                }
            }
        }
        if game.white.computer || game.black.computer {
            match s.computer {
                ComputerPolicy::Skip => return Err("a computer player"),
                ComputerPolicy::Rate => {}
                ComputerPolicy::HumanOnly => {
                    rate_white = !game.white.computer;
                    rate_black = !game.black.computer;
                    if !rate_white && !rate_black {
                        return Err("computers on both sides");
                    }
                }
            }
        }
        Ok(Accepted {
            category: self.category_of(game.variant, game.time_control.as_ref()),
            rate_white,
            rate_black,
            white_score,
        })
    }

    /// Rating periods elapsed from `from_ms` to `to_ms` (never negative): fractional for one game per
    /// period, whole periods for fixed periods.
    fn elapsed_periods(&self, from_ms: i64, to_ms: i64) -> f64 {
        let elapsed = to_ms.saturating_sub(from_ms).max(0);
        match self.settings.mode {
            PeriodMode::PerGame => elapsed as f64 / self.settings.period_ms as f64,
            PeriodMode::Fixed => (elapsed / self.settings.period_ms) as f64,
        }
    }

    /// The rating of `row` at `now_ms`: its deviation grown with the time since it was rated.
    fn current(&self, row: &Stored, now_ms: i64) -> Glicko {
        if row.games == 0 {
            return row.glicko;
        }
        glicko::inflate(
            row.glicko,
            self.elapsed_periods(row.rated_at_ms, now_ms),
            &self.settings.params,
        )
    }

    /// Until when `row` stays established (deviation at or under the provisional threshold); 0 when it
    /// is provisional already.
    fn established_until(&self, row: &Stored) -> i64 {
        let s = &self.settings;
        if row.games == 0 {
            return 0;
        }
        if s.params.max_deviation <= s.provisional_deviation {
            return i64::MAX;
        }
        match glicko::periods_until_deviation_exceeds(row.glicko, s.provisional_deviation) {
            None => 0,
            Some(periods) => {
                let periods = match s.mode {
                    PeriodMode::PerGame => periods,
                    PeriodMode::Fixed => periods.floor() + 1.0,
                };
                let until = row.rated_at_ms as f64 + periods * s.period_ms as f64;
                if until >= i64::MAX as f64 {
                    i64::MAX
                } else {
                    until as i64
                }
            }
        }
    }

    fn view(&self, player_id: &str, category: Category, row: &Stored, now_ms: i64) -> RatingView {
        let glicko = self.current(row, now_ms);
        RatingView {
            player_id: player_id.to_owned(),
            category,
            glicko,
            provisional: row.games == 0 || glicko.deviation > self.settings.provisional_deviation,
            bot: row.bot,
            games: count_u32(row.games),
            wins: count_u32(row.wins),
            draws: count_u32(row.draws),
            losses: count_u32(row.losses),
            last_game_at_ms: ms_u64(row.last_game_at_ms),
        }
    }
}
