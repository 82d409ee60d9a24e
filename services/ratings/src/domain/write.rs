//! The write path: applying finished games exactly once (from the stream, the reconciler or an
//! import), rating fixed periods, and the SQL that writes rating, history and game rows.

use std::collections::{BTreeMap, HashMap, HashSet};

use draughts_store::StoreError;
use draughts_store::sqlx::{self, Any, AssertSqlSafe, Row, Transaction};

use super::*;
use crate::event::Outcome;
use crate::glicko::{self, Game, Glicko};

/// The pair limit's window.
const DAY_MS: i64 = 86_400_000;
/// Pairs looked up per statement by the pair limit (eight bound values each).
const PAIRS_PER_STATEMENT: usize = 64;
/// Why a game past the pair limit changed no rating.
pub const PAIR_LIMITED: &str = "past the pair limit (--pair-games-per-day)";

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

impl RatingsCore {
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
        let mut fresh: Vec<(&FinishedGame, Accepted)> = accepted
            .into_iter()
            .filter(|(g, _)| !known.contains(&g.game_id))
            .collect();
        report.duplicates += known.len();
        if fresh.is_empty() {
            tx.rollback().await?;
            return Ok(report);
        }
        report.pair_limited = self.limit_pairs(&mut tx, &mut fresh).await?;

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
                Value::Text(game.white.id.to_string()),
                Value::Text(game.black.id.to_string()),
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
        // The BOTs these games show (server data: see `FinishedGame`'s sides), kept for good.
        let mut bots: Vec<&str> = fresh
            .iter()
            .flat_map(|(g, _)| [&g.white, &g.black])
            .filter(|side| side.bot)
            .map(|side| side.id.as_str())
            .collect();
        bots.sort_unstable();
        bots.dedup();
        insert_rows(
            &mut tx,
            "INSERT INTO rating_bots (player_id, marked_at_ms) VALUES ",
            " ON CONFLICT (player_id) DO NOTHING",
            bots.into_iter()
                .map(|id| vec![Value::Text(id.to_owned()), Value::Int(now)])
                .collect(),
        )
        .await?;

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

    /// The pair limit: a game whose two players already have `pair_games_per_day` rated games in its
    /// category that finished within the 24 hours up to it (recorded before, or earlier in this batch) is
    /// kept with neither side rated. `games` are in finish order; returns how many were limited. Runs
    /// under the writer lock, so replicas agree; a game arriving after later games of its pair is judged
    /// by the games before it.
    async fn limit_pairs(
        &self,
        tx: &mut Transaction<'static, Any>,
        games: &mut [(&FinishedGame, Accepted)],
    ) -> RatingsResult<usize> {
        let limit = self.settings.pair_games_per_day as usize;
        if limit == 0 {
            return Ok(0);
        }
        type Pair = (String, String, String);
        let pair = |g: &FinishedGame, a: &Accepted| -> Pair {
            let (x, y) = if g.white.id <= g.black.id {
                (&g.white.id, &g.black.id)
            } else {
                (&g.black.id, &g.white.id)
            };
            (a.category.to_string(), x.to_string(), y.to_string())
        };
        // Each pair's window: from a day before its first game in the batch.
        let mut from: BTreeMap<Pair, i64> = BTreeMap::new();
        for (g, a) in games.iter().filter(|(_, a)| a.rate_white || a.rate_black) {
            let start = ms_i64(g.finished_at_ms).saturating_sub(DAY_MS);
            from.entry(pair(g, a))
                .and_modify(|f| *f = (*f).min(start))
                .or_insert(start);
        }
        let mut rated: HashMap<Pair, Vec<i64>> = HashMap::new();
        let pairs: Vec<(&Pair, &i64)> = from.iter().collect();
        for chunk in pairs.chunks(PAIRS_PER_STATEMENT) {
            // Both colour orders, each its own branch on the (white_id, black_id, finished_at_ms) index.
            let mut branches = Vec::with_capacity(chunk.len() * 2);
            let mut values = Vec::with_capacity(chunk.len() * 8);
            for ((category, x, y), start) in chunk {
                for (white, black) in [(x, y), (y, x)] {
                    let n = values.len();
                    branches.push(format!(
                        "(white_id = ${} AND black_id = ${} AND finished_at_ms >= ${} AND category = ${})",
                        n + 1,
                        n + 2,
                        n + 3,
                        n + 4
                    ));
                    values.push(Value::Text(white.clone()));
                    values.push(Value::Text(black.clone()));
                    values.push(Value::Int(**start));
                    values.push(Value::Text(category.clone()));
                }
            }
            let sql = format!(
                "SELECT category, white_id, black_id, finished_at_ms FROM rating_games \
                 WHERE (rate_white = 1 OR rate_black = 1) AND ({})",
                branches.join(" OR ")
            );
            let rows = bind_all(sqlx::query(AssertSqlSafe(sql)), values)
                .fetch_all(&mut **tx)
                .await?;
            for row in rows {
                let (category, white, black): (String, String, String) =
                    (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
                let (x, y) = if white <= black {
                    (white, black)
                } else {
                    (black, white)
                };
                rated
                    .entry((category, x, y))
                    .or_default()
                    .push(row.try_get(3)?);
            }
        }
        let mut limited = 0;
        for (g, a) in games.iter_mut() {
            if !(a.rate_white || a.rate_black) {
                continue;
            }
            let at = ms_i64(g.finished_at_ms);
            let before = rated.entry(pair(g, a)).or_default();
            let recent = before
                .iter()
                .filter(|&&t| t <= at && t > at.saturating_sub(DAY_MS))
                .count();
            if recent >= limit {
                a.rate_white = false;
                a.rate_black = false;
                limited += 1;
                tracing::debug!(game_id = %g.game_id, recent, "past the pair limit: recorded, not rated");
            } else {
                before.push(at);
            }
        }
        if limited > 0 {
            metrics::counter!("draughts_ratings_games_pair_limited_total")
                .increment(limited as u64);
        }
        Ok(limited)
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
            players.push(game.white.id.to_string());
            players.push(game.black.id.to_string());
        }
        let mut rows = load_rows(tx, wanted).await?;
        let mut touched: Vec<(String, String)> = Vec::new();
        let mut writes = Writes::default();
        for (game, a) in games {
            let category = a.category.to_string();
            let at = ms_i64(game.finished_at_ms);
            let key_w = (category.clone(), game.white.id.to_string());
            let key_b = (category.clone(), game.black.id.to_string());
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

    /// Writes rating rows (with their leaderboard bound) and history rows, and marks every rating row
    /// of the written players that `rating_bots` names (all their categories, older rows too).
    async fn write(&self, tx: &mut Transaction<'static, Any>, writes: Writes) -> RatingsResult<()> {
        let mut players: Vec<String> = writes.rows.iter().map(|(_, p, _)| p.clone()).collect();
        players.sort_unstable();
        players.dedup();
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
        insert_rows(tx, HISTORY_HEAD, "", history).await?;
        for chunk in players.chunks(ROWS_PER_STATEMENT * 4) {
            let sql = format!(
                "UPDATE ratings SET bot = 1 WHERE bot = 0 AND player_id IN \
                 (SELECT player_id FROM rating_bots WHERE player_id IN ({}))",
                list(chunk.len(), 1)
            );
            let values = chunk.iter().map(|p| Value::Text(p.clone())).collect();
            bind_all(sqlx::query(AssertSqlSafe(sql)), values)
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
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

    /// Imports one game (the admin call): applied like a stream entry, then both ratings read back.
    pub async fn record(&self, game: &FinishedGame, now_ms: u64) -> RatingsResult<RecordOutcome> {
        game.check().map_err(RatingsError::InvalidArgument)?;
        if game.outcome == Outcome::Aborted {
            return Err(RatingsError::InvalidArgument(
                "outcome must be a white win, a black win or a draw".into(),
            ));
        }
        let report = self
            .apply(std::slice::from_ref(game), Source::Import, now_ms)
            .await?;
        let skipped_reason = self
            .accept(game)
            .err()
            .or((report.pair_limited > 0).then_some(PAIR_LIMITED));
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

impl RatingsCore {
    /// Moves `guest`'s ratings (rows and history) to `player` in every category where `player` has no
    /// rating; where it has one, the account's rating is kept and the guest's stays under the guest id.
    /// Rated games recorded with the guest id are relabelled. Idempotent; one transaction, taken
    /// behind the writer row like every rating write. Returns the categories moved.
    pub async fn merge_guest(&self, guest: &str, player: &str) -> RatingsResult<Vec<String>> {
        let mut tx = self.begin_write().await?;
        let guest_categories: Vec<(String,)> =
            sqlx::query_as("SELECT category FROM ratings WHERE player_id = $1")
                .bind(guest.to_owned())
                .fetch_all(&mut *tx)
                .await?;
        let player_categories: HashSet<String> =
            sqlx::query_as::<_, (String,)>("SELECT category FROM ratings WHERE player_id = $1")
                .bind(player.to_owned())
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .map(|(c,)| c)
                .collect();
        let mut moved = Vec::new();
        for (category,) in guest_categories {
            if player_categories.contains(&category) {
                continue;
            }
            for table in ["rating_history", "ratings"] {
                sqlx::query(AssertSqlSafe(format!(
                    "UPDATE {table} SET player_id = $1 WHERE player_id = $2 AND category = $3"
                )))
                .bind(player.to_owned())
                .bind(guest.to_owned())
                .bind(category.clone())
                .execute(&mut *tx)
                .await?;
            }
            moved.push(category);
        }
        for side in ["white_id", "black_id"] {
            sqlx::query(AssertSqlSafe(format!(
                "UPDATE rating_games SET {side} = $1 WHERE {side} = $2"
            )))
            .bind(player.to_owned())
            .bind(guest.to_owned())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(moved)
    }
}
