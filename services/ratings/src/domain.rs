//! The ratings domain over the durable [`Database`]: applying finished games exactly once, rating
//! fixed periods, and reading ratings, leaderboards, history and predictions. No tonic types; the clock
//! is a parameter (`now_ms`), so tests choose time.
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
//! - `rating_periods`: the fixed periods already rated.
//! - `rating_writer`: one row that every writing transaction updates first. It serialises rating writers
//!   (replicas, the admin import, the period closer): two games of one player can never be computed from
//!   the same old rating. On SQLite the transaction takes the database write lock at `BEGIN IMMEDIATE`
//!   anyway. Throughput comes from batching many games per transaction, not from parallel writers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use draughts_engine::Variant;
use draughts_store::Database;
use draughts_store::sqlx::any::{AnyArguments, AnyRow};
use draughts_store::sqlx::query::Query;
use draughts_store::sqlx::{self, Any, AssertSqlSafe, Row, Transaction};
use draughts_store::{Migration, StoreError};

use crate::category::Category;
use crate::config::{ComputerPolicy, PeriodMode, Policy, RatingsConfig};
use crate::error::{RatingsError, RatingsResult};
use crate::event::{FinishedGame, Outcome, Source, check_id};
use crate::glicko::{self, Game, Glicko, Params};

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
    guest: Policy,
    house_rules: Policy,
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

/// What a rating computation writes: final rows, and one history row per update.
#[derive(Default)]
struct Writes {
    /// (category, player, row after every update of this transaction).
    rows: Vec<(String, String, Stored)>,
    /// (category, player, games after the update, the update).
    history: Vec<(String, String, i64, HistoryRow)>,
}

struct HistoryRow {
    at_ms: i64,
    glicko: Glicko,
    rating_change: f64,
    game_id: String,
    games: i64,
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

const ROW_COLUMNS: &str = "player_id, rating, deviation, volatility, games, wins, draws, losses, rated_at_ms, last_game_at_ms";

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

/// Page tokens: hex of `L1|category|rating bits|player` (leaderboards) and `H1|category|player|games`
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
    check_id("player id", player_id).map_err(RatingsError::InvalidArgument)
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
            guest: config.guest_games,
            house_rules: config.house_rule_games,
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
            games: count_u32(row.games),
            wins: count_u32(row.wins),
            draws: count_u32(row.draws),
            losses: count_u32(row.losses),
            last_game_at_ms: ms_u64(row.last_game_at_ms),
        }
    }

    // ---------------------------------------------------------------- writing

    /// Starts a writing transaction: takes the writer row first (see the module docs).
    async fn begin_write(&self) -> RatingsResult<Transaction<'static, Any>> {
        let mut tx = self.db.begin().await?;
        sqlx::query("UPDATE rating_writer SET writes = writes + 1 WHERE id = 1")
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    /// Applies finished games in one transaction: each game id not recorded before is recorded and
    /// (one game per period) rated; a game id recorded before changes nothing. Either the whole batch
    /// commits or nothing does, so the caller acknowledges the entries only after this returns `Ok`.
    ///
    /// Within a batch, games are rated in the order they finished (ties by game id), whatever order
    /// they arrived in.
    pub async fn apply(
        &self,
        games: &[FinishedGame],
        source: Source,
        now_ms: u64,
    ) -> RatingsResult<ApplyReport> {
        let mut report = ApplyReport::default();
        let mut seen = HashSet::new();
        let mut accepted = Vec::new();
        for game in games {
            match self.accept(game) {
                Err(reason) => {
                    report.skipped += 1;
                    tracing::debug!(game_id = %game.game_id, reason, "game not rated");
                }
                Ok(a) => {
                    if seen.insert(game.game_id.as_str()) {
                        accepted.push((game, a));
                    } else {
                        report.duplicates += 1;
                    }
                }
            }
        }
        if accepted.is_empty() {
            return Ok(report);
        }
        accepted.sort_by(|(a, _), (b, _)| {
            (a.finished_at_ms, &a.game_id).cmp(&(b.finished_at_ms, &b.game_id))
        });
        let now = ms_i64(now_ms);
        let mut tx = self.begin_write().await?;

        // The idempotency check, under the writer lock.
        let mut known: HashSet<String> = HashSet::new();
        for chunk in accepted.chunks(ROWS_PER_STATEMENT * 4) {
            let sql = format!(
                "SELECT game_id FROM rating_games WHERE game_id IN ({})",
                list(chunk.len(), 1)
            );
            let values = chunk
                .iter()
                .map(|(g, _)| Value::Text(g.game_id.clone()))
                .collect();
            let rows = bind_all(sqlx::query(AssertSqlSafe(sql)), values)
                .fetch_all(&mut *tx)
                .await?;
            for row in rows {
                known.insert(row.try_get::<String, _>(0)?);
            }
        }
        let fresh: Vec<(&FinishedGame, Accepted)> = accepted
            .into_iter()
            .filter(|(g, _)| !known.contains(&g.game_id))
            .collect();
        report.duplicates += known.len();
        if fresh.is_empty() {
            tx.rollback().await?;
            return Ok(report);
        }

        // Fixed periods: the game waits for its period (a late game for a rated period joins the next).
        let first_open_period = match self.settings.mode {
            PeriodMode::PerGame => None,
            PeriodMode::Fixed => {
                let last: Option<i64> = sqlx::query("SELECT MAX(period) FROM rating_periods")
                    .fetch_one(&mut *tx)
                    .await?
                    .try_get(0)?;
                Some(last.map_or(i64::MIN, |p| p + 1))
            }
        };
        let mut game_rows = Vec::with_capacity(fresh.len() * 12);
        for (game, a) in &fresh {
            let finished = ms_i64(game.finished_at_ms);
            let (period, pending) = match first_open_period {
                None => (-1, 0),
                Some(open) => ((finished / self.settings.period_ms).max(open), 1),
            };
            game_rows.push(vec![
                Value::Text(game.game_id.clone()),
                Value::Text(a.category.to_string()),
                Value::Text(game.white.id.clone()),
                Value::Text(game.black.id.clone()),
                Value::Float(a.white_score),
                Value::Int(i64::from(a.rate_white)),
                Value::Int(i64::from(a.rate_black)),
                Value::Int(finished),
                Value::Int(period),
                Value::Int(pending),
                Value::Text(source.key().to_owned()),
                Value::Int(now),
            ]);
        }
        insert_rows(
            &mut tx,
            "INSERT INTO rating_games (game_id, category, white_id, black_id, white_score, rate_white, rate_black, finished_at_ms, period, pending, source, recorded_at_ms) VALUES ",
            "",
            game_rows,
        )
        .await?;
        report.recorded = fresh.len();

        if first_open_period.is_some() {
            report.pending = fresh.len();
        } else {
            let writes = self.rate_each(&mut tx, &fresh).await?;
            self.write(&mut tx, writes).await?;
        }
        tx.commit().await?;
        metrics::counter!("draughts_ratings_games_recorded_total", "source" => source.key())
            .increment(report.recorded as u64);
        Ok(report)
    }

    /// One game per period: rates each game in order against the players' ratings at that moment.
    async fn rate_each(
        &self,
        tx: &mut Transaction<'static, Any>,
        games: &[(&FinishedGame, Accepted)],
    ) -> RatingsResult<Writes> {
        let params = &self.settings.params;
        let mut wanted: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (game, a) in games {
            let players = wanted.entry(a.category.to_string()).or_default();
            players.push(game.white.id.clone());
            players.push(game.black.id.clone());
        }
        let mut rows = load_rows(tx, wanted).await?;
        let mut touched: Vec<(String, String)> = Vec::new();
        let mut writes = Writes::default();
        for (game, a) in games {
            let category = a.category.to_string();
            let at = ms_i64(game.finished_at_ms);
            let key_w = (category.clone(), game.white.id.clone());
            let key_b = (category.clone(), game.black.id.clone());
            let white = rows
                .get(&key_w)
                .cloned()
                .unwrap_or_else(|| Stored::new(params));
            let black = rows
                .get(&key_b)
                .cloned()
                .unwrap_or_else(|| Stored::new(params));
            let elapsed_w = if white.games == 0 {
                0.0
            } else {
                self.elapsed_periods(white.rated_at_ms, at)
            };
            let elapsed_b = if black.games == 0 {
                0.0
            } else {
                self.elapsed_periods(black.rated_at_ms, at)
            };
            // Each side meets the other's rating as it stands at the game (deviation grown).
            let white_now = glicko::inflate(white.glicko, elapsed_w, params);
            let black_now = glicko::inflate(black.glicko, elapsed_b, params);
            for (key, mut row, elapsed, opponent, score, rate) in [
                (
                    key_w,
                    white,
                    elapsed_w,
                    black_now,
                    a.white_score,
                    a.rate_white,
                ),
                (
                    key_b,
                    black,
                    elapsed_b,
                    white_now,
                    1.0 - a.white_score,
                    a.rate_black,
                ),
            ] {
                if !rate {
                    continue;
                }
                let before = row.glicko.rating;
                row.glicko = glicko::rate(row.glicko, &[Game { opponent, score }], elapsed, params);
                row.count(score);
                row.rated_at_ms = row.rated_at_ms.max(at);
                row.last_game_at_ms = row.last_game_at_ms.max(at);
                writes.history.push((
                    key.0.clone(),
                    key.1.clone(),
                    row.games,
                    HistoryRow {
                        at_ms: at,
                        glicko: row.glicko,
                        rating_change: row.glicko.rating - before,
                        game_id: game.game_id.clone(),
                        games: 1,
                    },
                ));
                if !touched.contains(&key) {
                    touched.push(key.clone());
                }
                rows.insert(key, row);
            }
        }
        for key in touched {
            if let Some(row) = rows.remove(&key) {
                writes.rows.push((key.0, key.1, row));
            }
        }
        Ok(writes)
    }

    /// Writes rating rows (with their leaderboard bound) and history rows.
    async fn write(&self, tx: &mut Transaction<'static, Any>, writes: Writes) -> RatingsResult<()> {
        let rows = writes
            .rows
            .into_iter()
            .map(|(category, player_id, row)| {
                vec![
                    Value::Text(category),
                    Value::Text(player_id),
                    Value::Float(row.glicko.rating),
                    Value::Float(row.glicko.deviation),
                    Value::Float(row.glicko.volatility),
                    Value::Int(row.games),
                    Value::Int(row.wins),
                    Value::Int(row.draws),
                    Value::Int(row.losses),
                    Value::Int(row.rated_at_ms),
                    Value::Int(row.last_game_at_ms),
                    Value::Int(self.established_until(&row)),
                ]
            })
            .collect();
        insert_rows(tx, UPSERT_HEAD, UPSERT_TAIL, rows).await?;
        let history = writes
            .history
            .into_iter()
            .map(|(category, player_id, games_total, h)| {
                history_values(&category, &player_id, games_total, h)
            })
            .collect();
        insert_rows(tx, HISTORY_HEAD, "", history).await
    }

    /// Fixed periods: rates every period that has ended (plus the grace time) and has games waiting,
    /// oldest first, each in its own transaction; returns how many were rated. Idempotent, and safe to
    /// call from every replica at once (the writer lock orders them; a period is rated once).
    pub async fn close_due_periods(&self, now_ms: u64) -> RatingsResult<usize> {
        let now = ms_i64(now_ms);
        let mut closed = 0;
        loop {
            let mut tx = self.begin_write().await?;
            let oldest: Option<i64> =
                sqlx::query("SELECT MIN(period) FROM rating_games WHERE pending = 1")
                    .fetch_one(&mut *tx)
                    .await?
                    .try_get(0)?;
            let Some(period) = oldest else {
                tx.rollback().await?;
                return Ok(closed);
            };
            let period_end = period
                .saturating_add(1)
                .saturating_mul(self.settings.period_ms);
            if now < period_end.saturating_add(self.settings.grace_ms) {
                tx.rollback().await?;
                return Ok(closed);
            }
            let games = self.rate_period(&mut tx, period, period_end).await?;
            sqlx::query("UPDATE rating_games SET pending = 0 WHERE pending = 1 AND period = $1")
                .bind(period)
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                "INSERT INTO rating_periods (period, rated_at_ms, games) VALUES ($1, $2, $3) ON CONFLICT (period) DO NOTHING",
            )
            .bind(period)
            .bind(now)
            .bind(games)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            tracing::info!(period, games, "rating period rated");
            closed += 1;
        }
    }

    /// Glickman's scheme for one period: every player's games of the period rated together against the
    /// opponents' ratings at the start of the period. Returns the number of games.
    async fn rate_period(
        &self,
        tx: &mut Transaction<'static, Any>,
        period: i64,
        period_end: i64,
    ) -> RatingsResult<i64> {
        let params = &self.settings.params;
        let rows = sqlx::query(
            "SELECT game_id, category, white_id, black_id, white_score, rate_white, rate_black, finished_at_ms \
             FROM rating_games WHERE pending = 1 AND period = $1 ORDER BY finished_at_ms, game_id",
        )
        .bind(period)
        .fetch_all(&mut **tx)
        .await?;
        struct PeriodGame {
            category: String,
            white: String,
            black: String,
            white_score: f64,
            rate_white: bool,
            rate_black: bool,
            finished_at_ms: i64,
        }
        let mut games = Vec::with_capacity(rows.len());
        let mut wanted: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for row in &rows {
            let game = PeriodGame {
                category: row.try_get(1)?,
                white: row.try_get(2)?,
                black: row.try_get(3)?,
                white_score: row.try_get(4)?,
                rate_white: row.try_get::<i64, _>(5)? != 0,
                rate_black: row.try_get::<i64, _>(6)? != 0,
                finished_at_ms: row.try_get(7)?,
            };
            let players = wanted.entry(game.category.clone()).or_default();
            players.push(game.white.clone());
            players.push(game.black.clone());
            games.push(game);
        }
        let stored = load_rows(tx, wanted).await?;
        // Ratings at the start of the period: grown by the whole periods each player sat out.
        let start = |key: &(String, String)| -> Stored {
            match stored.get(key) {
                Some(row) if row.games > 0 => {
                    let last_rated_period_end = row.rated_at_ms.div_euclid(self.settings.period_ms);
                    let skipped = (period - last_rated_period_end).max(0) as f64;
                    Stored {
                        glicko: glicko::inflate(row.glicko, skipped, params),
                        ..row.clone()
                    }
                }
                Some(row) => row.clone(),
                None => Stored::new(params),
            }
        };
        /// A player's period: the rating at its start, the games, the scores, the last finish time.
        type PeriodOf = (Stored, Vec<Game>, Vec<f64>, i64);
        let mut results: BTreeMap<(String, String), PeriodOf> = BTreeMap::new();
        for game in &games {
            let key_w = (game.category.clone(), game.white.clone());
            let key_b = (game.category.clone(), game.black.clone());
            let white_start = start(&key_w);
            let black_start = start(&key_b);
            for (key, own, opponent, score, rate) in [
                (
                    key_w,
                    white_start.clone(),
                    black_start.glicko,
                    game.white_score,
                    game.rate_white,
                ),
                (
                    key_b,
                    black_start,
                    white_start.glicko,
                    1.0 - game.white_score,
                    game.rate_black,
                ),
            ] {
                if !rate {
                    continue;
                }
                let entry = results
                    .entry(key)
                    .or_insert_with(|| (own, Vec::new(), Vec::new(), 0));
                entry.1.push(Game { opponent, score });
                entry.2.push(score);
                entry.3 = entry.3.max(game.finished_at_ms);
            }
        }
        let mut writes = Writes::default();
        for ((category, player_id), (mut row, period_games, scores, last_game)) in results {
            let before = row.glicko.rating;
            row.glicko = glicko::rate(row.glicko, &period_games, 1.0, params);
            for score in scores {
                row.count(score);
            }
            row.rated_at_ms = period_end;
            row.last_game_at_ms = row.last_game_at_ms.max(last_game);
            writes.history.push((
                category.clone(),
                player_id.clone(),
                row.games,
                HistoryRow {
                    at_ms: period_end,
                    glicko: row.glicko,
                    rating_change: row.glicko.rating - before,
                    game_id: String::new(),
                    games: period_games.len() as i64,
                },
            ));
            writes.rows.push((category, player_id, row));
        }
        self.write(tx, writes).await?;
        Ok(games.len() as i64)
    }

    // ---------------------------------------------------------------- reading

    async fn load_one(&self, player_id: &str, category: Category) -> RatingsResult<Option<Stored>> {
        let sql =
            format!("SELECT {ROW_COLUMNS} FROM ratings WHERE category = $1 AND player_id = $2");
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(category.to_string())
            .bind(player_id.to_owned())
            .fetch_optional(self.db.pool())
            .await?;
        match row {
            Some(row) => Ok(Some(decode_row(&row)?.1)),
            None => Ok(None),
        }
    }

    /// A player's rating in a category (the starting rating if the player has none there).
    pub async fn rating(
        &self,
        player_id: &str,
        category: Category,
        now_ms: u64,
    ) -> RatingsResult<RatingView> {
        check_player(player_id)?;
        self.check_category(category)?;
        let row = self
            .load_one(player_id, category)
            .await?
            .unwrap_or_else(|| Stored::new(&self.settings.params));
        Ok(self.view(player_id, category, &row, ms_i64(now_ms)))
    }

    /// Every rating of a player with at least one rated game, by variant then speed class.
    pub async fn ratings(&self, player_id: &str, now_ms: u64) -> RatingsResult<Vec<RatingView>> {
        check_player(player_id)?;
        let sql = format!(
            "SELECT {ROW_COLUMNS}, category FROM ratings WHERE player_id = $1 AND games > 0"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(player_id.to_owned())
            .fetch_all(self.db.pool())
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let (player, decoded) = decode_row(row)?;
            let key: String = row.try_get(10)?;
            let category: Category = key
                .parse()
                .map_err(|e: crate::category::BadCategory| RatingsError::Corrupt(e.to_string()))?;
            out.push(self.view(&player, category, &decoded, ms_i64(now_ms)));
        }
        out.sort_by_key(|view| view.category);
        Ok(out)
    }

    /// A page of the leaderboard of `category`: established players, best first; ties by player id.
    pub async fn leaderboard(
        &self,
        category: Category,
        page_size_requested: u32,
        page_token: &str,
        now_ms: u64,
    ) -> RatingsResult<Page<(u64, RatingView)>> {
        self.check_category(category)?;
        let limit = page_size(page_size_requested)?;
        let key = category.to_string();
        let now = ms_i64(now_ms);
        let after = if page_token.is_empty() {
            None
        } else {
            let text = decode_token(page_token)?;
            let bad = || RatingsError::InvalidArgument("bad page token".into());
            let mut parts = text.splitn(4, '|');
            let (Some("L1"), Some(token_category), Some(bits), Some(player)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(bad());
            };
            if token_category != key {
                return Err(RatingsError::InvalidArgument(
                    "the page token belongs to another leaderboard".into(),
                ));
            }
            let bits = u64::from_str_radix(bits, 16).map_err(|_| bad())?;
            Some((f64::from_bits(bits), player.to_owned()))
        };
        let mut sql = format!(
            "SELECT {ROW_COLUMNS} FROM ratings WHERE category = $1 AND established_until_ms > $2"
        );
        if after.is_some() {
            sql.push_str(" AND (rating < $3 OR (rating = $3 AND player_id > $4))");
        }
        sql.push_str(&format!(
            " ORDER BY rating DESC, player_id ASC LIMIT {}",
            limit + 1
        ));
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(key.clone()).bind(now);
        if let Some((rating, player)) = &after {
            query = query.bind(*rating).bind(player.clone());
        }
        // The rows and the rank of the first one are read in one snapshot (SQLite: a read transaction
        // is one; PostgreSQL needs REPEATABLE READ for that, its default is per statement).
        let mut tx = self.db.pool().begin().await?;
        if self.db.backend() == draughts_store::DbBackend::Postgres {
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .execute(&mut *tx)
                .await?;
        }
        let rows = query.fetch_all(&mut *tx).await?;
        let mut decoded = Vec::with_capacity(rows.len());
        for row in &rows {
            decoded.push(decode_row(row)?);
        }
        let first_rank = match decoded.first() {
            None => 0,
            Some((player, row)) => {
                let above: i64 = sqlx::query(
                    "SELECT COUNT(*) FROM ratings WHERE category = $1 AND established_until_ms > $2 \
                     AND (rating > $3 OR (rating = $3 AND player_id < $4))",
                )
                .bind(key.clone())
                .bind(now)
                .bind(row.glicko.rating)
                .bind(player.clone())
                .fetch_one(&mut *tx)
                .await?
                .try_get(0)?;
                ms_u64(above) + 1
            }
        };
        tx.commit().await?;
        let more = decoded.len() > limit;
        decoded.truncate(limit);
        let next_page_token = if more {
            decoded.last().map(|(player, row)| {
                encode_token(&format!(
                    "L1|{key}|{:016x}|{player}",
                    row.glicko.rating.to_bits()
                ))
            })
        } else {
            None
        };
        let entries = decoded
            .iter()
            .enumerate()
            .map(|(i, (player, row))| {
                (first_rank + i as u64, self.view(player, category, row, now))
            })
            .collect();
        Ok(Page {
            entries,
            next_page_token,
        })
    }

    /// A page of a player's rating history in a category, newest first.
    pub async fn history(
        &self,
        player_id: &str,
        category: Category,
        page_size_requested: u32,
        page_token: &str,
    ) -> RatingsResult<Page<HistoryEntry>> {
        check_player(player_id)?;
        self.check_category(category)?;
        let limit = page_size(page_size_requested)?;
        let key = category.to_string();
        let before = if page_token.is_empty() {
            None
        } else {
            let text = decode_token(page_token)?;
            let bad = || RatingsError::InvalidArgument("bad page token".into());
            let mut parts = text.splitn(4, '|');
            let (Some("H1"), Some(token_category), Some(games), Some(player)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(bad());
            };
            if token_category != key || player != player_id {
                return Err(RatingsError::InvalidArgument(
                    "the page token belongs to another history".into(),
                ));
            }
            Some(games.parse::<i64>().map_err(|_| bad())?)
        };
        let mut sql = "SELECT games_total, at_ms, rating, deviation, volatility, rating_change, game_id, games \
                       FROM rating_history WHERE category = $1 AND player_id = $2"
            .to_owned();
        if before.is_some() {
            sql.push_str(" AND games_total < $3");
        }
        sql.push_str(&format!(" ORDER BY games_total DESC LIMIT {}", limit + 1));
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .bind(key.clone())
            .bind(player_id.to_owned());
        if let Some(games) = before {
            query = query.bind(games);
        }
        let rows = query.fetch_all(self.db.pool()).await?;
        let mut entries = Vec::with_capacity(rows.len());
        for row in &rows {
            entries.push(HistoryEntry {
                games_total: count_u32(row.try_get(0)?),
                at_ms: ms_u64(row.try_get(1)?),
                glicko: Glicko {
                    rating: row.try_get(2)?,
                    deviation: row.try_get(3)?,
                    volatility: row.try_get(4)?,
                },
                rating_change: row.try_get(5)?,
                game_id: row.try_get(6)?,
                games: count_u32(row.try_get(7)?),
            });
        }
        let more = entries.len() > limit;
        entries.truncate(limit);
        let next_page_token = if more {
            entries
                .last()
                .map(|e| encode_token(&format!("H1|{key}|{}|{player_id}", e.games_total)))
        } else {
            None
        };
        Ok(Page {
            entries,
            next_page_token,
        })
    }

    /// The expected score of `a` against `b` in `category`.
    pub async fn predict(
        &self,
        a: &str,
        b: &str,
        category: Category,
        now_ms: u64,
    ) -> RatingsResult<Prediction> {
        let a = self.rating(a, category, now_ms).await?;
        let b = self.rating(b, category, now_ms).await?;
        Ok(Prediction {
            expected_a: glicko::expected_score(a.glicko, b.glicko),
            a,
            b,
        })
    }

    /// Imports one game (the admin call): applied like a stream entry, then both ratings read back.
    pub async fn record(&self, game: &FinishedGame, now_ms: u64) -> RatingsResult<RecordOutcome> {
        game.check().map_err(RatingsError::InvalidArgument)?;
        if game.outcome == Outcome::Aborted {
            return Err(RatingsError::InvalidArgument(
                "outcome must be a white win, a black win or a draw".into(),
            ));
        }
        let skipped_reason = self.accept(game).err();
        let report = self
            .apply(std::slice::from_ref(game), Source::Import, now_ms)
            .await?;
        let category = self.category_of(game.variant, game.time_control.as_ref());
        Ok(RecordOutcome {
            recorded: report.recorded == 1,
            pending: report.pending == 1,
            skipped_reason,
            white: self.rating(&game.white.id, category, now_ms).await?,
            black: self.rating(&game.black.id, category, now_ms).await?,
        })
    }
}

/// Loads the stored rows of the wanted players (by category), keyed by (category, player).
async fn load_rows(
    tx: &mut Transaction<'static, Any>,
    wanted: BTreeMap<String, Vec<String>>,
) -> RatingsResult<HashMap<(String, String), Stored>> {
    let mut rows = HashMap::new();
    for (category, mut players) in wanted {
        players.sort_unstable();
        players.dedup();
        for chunk in players.chunks(ROWS_PER_STATEMENT * 4) {
            let sql = format!(
                "SELECT {ROW_COLUMNS} FROM ratings WHERE category = $1 AND player_id IN ({})",
                list(chunk.len(), 2)
            );
            let mut values = vec![Value::Text(category.clone())];
            values.extend(chunk.iter().map(|p| Value::Text(p.clone())));
            let found = bind_all(sqlx::query(AssertSqlSafe(sql)), values)
                .fetch_all(&mut **tx)
                .await?;
            for row in &found {
                let (player, decoded) = decode_row(row)?;
                rows.insert((category.clone(), player), decoded);
            }
        }
    }
    Ok(rows)
}

/// Multi-row INSERT of `rows` (all of the same width) in chunks.
async fn insert_rows(
    tx: &mut Transaction<'static, Any>,
    head: &str,
    tail: &str,
    rows: Vec<Vec<Value>>,
) -> RatingsResult<()> {
    let Some(width) = rows.first().map(Vec::len) else {
        return Ok(());
    };
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let chunk: Vec<Vec<Value>> = rows.by_ref().take(ROWS_PER_STATEMENT).collect();
        let sql = format!("{head}{}{tail}", placeholders(chunk.len(), width, 1));
        let values = chunk.into_iter().flatten().collect();
        bind_all(sqlx::query(AssertSqlSafe(sql)), values)
            .execute(&mut **tx)
            .await
            .map_err(StoreError::from)?;
    }
    Ok(())
}

const UPSERT_HEAD: &str = "INSERT INTO ratings (category, player_id, rating, deviation, volatility, games, wins, draws, losses, rated_at_ms, last_game_at_ms, established_until_ms) VALUES ";
const UPSERT_TAIL: &str = " ON CONFLICT (category, player_id) DO UPDATE SET rating = excluded.rating, deviation = excluded.deviation, volatility = excluded.volatility, games = excluded.games, wins = excluded.wins, draws = excluded.draws, losses = excluded.losses, rated_at_ms = excluded.rated_at_ms, last_game_at_ms = excluded.last_game_at_ms, established_until_ms = excluded.established_until_ms";
const HISTORY_HEAD: &str = "INSERT INTO rating_history (category, player_id, games_total, at_ms, rating, deviation, volatility, rating_change, game_id, games) VALUES ";

fn history_values(category: &str, player_id: &str, games_total: i64, h: HistoryRow) -> Vec<Value> {
    vec![
        Value::Text(category.to_owned()),
        Value::Text(player_id.to_owned()),
        Value::Int(games_total),
        Value::Int(h.at_ms),
        Value::Float(h.glicko.rating),
        Value::Float(h.glicko.deviation),
        Value::Float(h.glicko.volatility),
        Value::Float(h.rating_change),
        Value::Text(h.game_id),
        Value::Int(h.games),
    ]
}
