//! The reconciler: finished games that the `games.finished` stream did not deliver (an entry lost with
//! a Redis that restarted without its append-only file, trimmed, or dead-lettered by a bug since fixed)
//! are found in the games service's durable table and rated exactly once.
//!
//! The games service writes every finished game to `finished_games` (same database) BEFORE it appends
//! the stream entry, and since its migration 2 the row carries the entry's payload (column `event`, the
//! [`draughts_proto::contract::finished`] encoding). The reconciler sweeps that table in pages ordered
//! by (`finished_at_ms`, `game_id`), keeping only rows without a `rating_games` row, from the stored
//! watermark minus a safety margin (`--reconcile-margin-ms`: rows archived late, for example by an
//! archive job retried after a replica died, still fall inside it) up to `now - --reconcile-delay-ms`
//! (newer games are left to the stream, the normal path). Each page goes through
//! [`RatingsCore::apply`], the same idempotent transaction as the stream path, so a game the stream
//! delivers too, or that two replicas reconcile at once, is still rated once. When a sweep reaches its
//! end the watermark moves to it (`rating_reconcile`); a restart mid-sweep starts the sweep again,
//! which only costs reads.
//!
//! Rows written before the `event` column existed (NULL) are read from their columns and from the
//! stored game (`record`): options, players' guest/computer flags and the time control, each with a
//! default when absent.
//!
//! Casual games are not read at all unless casual games are rated (`--casual-games rate`): on a
//! platform where most games are casual, every sweep re-read an hour of them. Other games the
//! policies do not rate (aborted, against the computer, ...) have no `rating_games` row and are looked
//! at again by every sweep whose margin covers them; they are never rated.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use draughts_proto::contract::finished::{self, Outcome, TimeControl};
use draughts_store::sqlx::{self, Row};
use serde::Deserialize;

use crate::config::RatingsConfig;
use crate::domain::{ApplyReport, RatingsCore};
use crate::error::RatingsResult;
use crate::event::{FinishedGame, Side, Source};

/// Rows per page.
pub const PAGE_ROWS: usize = 500;

/// What one page did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Rows of `finished_games` without a rating record in the page.
    pub scanned: usize,
    /// Rows that could not be read as a finished game (logged, skipped).
    pub undecodable: usize,
    /// What the domain did with the rest (`recorded`: games the stream had not delivered).
    pub applied: ApplyReport,
    /// The sweep reached its end (and the watermark moved) with this page.
    pub sweep_done: bool,
}

/// Where a sweep is: rows after (`after_ms`, `after_id`) and before `end_ms` are left.
#[derive(Clone, Debug)]
struct Sweep {
    after_ms: i64,
    after_id: String,
    end_ms: i64,
}

/// The reconciler of one replica (cheap to clone; clones share the sweep).
#[derive(Clone, Debug)]
pub struct Reconciler {
    core: RatingsCore,
    interval: Duration,
    delay_ms: u64,
    margin_ms: u64,
    page_rows: usize,
    /// Whether casual games are rated (`--casual-games rate`): else the sweep does not read them.
    casual_rated: bool,
    sweep: Arc<Mutex<Option<Sweep>>>,
}

/// The fields of a stored game (the games service's `record` column) a pre-`event` row is completed
/// from; everything else is ignored, every field has a default.
#[derive(Deserialize, Default)]
struct LegacyRecord {
    #[serde(default)]
    options: String,
    #[serde(default)]
    white: Option<finished::Player>,
    #[serde(default)]
    black: Option<finished::Player>,
    #[serde(default)]
    time: Option<TimeControl>,
}

fn ms_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

impl Reconciler {
    /// A reconciler with the configuration's interval, delay and margin.
    pub fn new(core: RatingsCore, config: &RatingsConfig) -> Reconciler {
        Reconciler {
            core,
            interval: Duration::from_millis(config.reconcile_interval_ms),
            delay_ms: config.reconcile_delay_ms,
            margin_ms: config.reconcile_margin_ms,
            page_rows: PAGE_ROWS,
            casual_rated: config.casual_games == crate::config::Policy::Rate,
            sweep: Arc::new(Mutex::new(None)),
        }
    }

    /// The same reconciler with another page size (tests).
    pub fn with_page_rows(mut self, rows: usize) -> Reconciler {
        self.page_rows = rows.max(1);
        self
    }

    /// Time between sweeps (zero: the reconciler is off).
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The stored watermark, Unix ms: every game that finished before it has been looked at.
    pub async fn watermark(&self) -> RatingsResult<u64> {
        let row = sqlx::query("SELECT watermark_ms FROM rating_reconcile WHERE id = 1")
            .fetch_optional(self.core.database().pool())
            .await?;
        Ok(match row {
            Some(row) => u64::try_from(row.try_get::<i64, _>(0)?).unwrap_or(0),
            None => 0,
        })
    }

    /// Runs a whole sweep (every page) at `now_ms`; returns the sum of the pages.
    pub async fn sweep(&self, now_ms: u64) -> RatingsResult<ReconcileReport> {
        let mut total = ReconcileReport::default();
        loop {
            let page = self.page(now_ms).await?;
            total.scanned += page.scanned;
            total.undecodable += page.undecodable;
            total.applied.recorded += page.applied.recorded;
            total.applied.pending += page.applied.pending;
            total.applied.duplicates += page.applied.duplicates;
            total.applied.skipped += page.applied.skipped;
            if page.sweep_done {
                total.sweep_done = true;
                return Ok(total);
            }
        }
    }

    /// Reconciles one page of the current sweep (starting a sweep if none is under way).
    pub async fn page(&self, now_ms: u64) -> RatingsResult<ReconcileReport> {
        let current = self.sweep.lock().map(|s| s.clone()).unwrap_or(None);
        let sweep = match current {
            Some(sweep) => sweep,
            None => {
                let watermark = self.watermark().await?;
                Sweep {
                    after_ms: ms_i64(watermark.saturating_sub(self.margin_ms)),
                    after_id: String::new(),
                    end_ms: ms_i64(now_ms.saturating_sub(self.delay_ms)),
                }
            }
        };
        let rows = sqlx::query(
            // The stored game (`record`, its whole move list) only for rows without an `event`: a
            // page of 500 whole games was most of the reconciler's memory.
            "SELECT f.game_id, f.finished_at_ms, f.event, f.variant, f.white_id, f.black_id, f.outcome, f.rated, \
                    CASE WHEN f.event IS NULL THEN f.record ELSE NULL END AS record \
             FROM finished_games f \
             WHERE (f.finished_at_ms > $1 OR (f.finished_at_ms = $1 AND f.game_id > $2)) AND f.finished_at_ms < $3 \
               AND (f.rated <> 0 OR $5 <> 0) \
               AND NOT EXISTS (SELECT 1 FROM rating_games r WHERE r.game_id = f.game_id) \
             ORDER BY f.finished_at_ms, f.game_id LIMIT $4",
        )
        .bind(sweep.after_ms)
        .bind(sweep.after_id.clone())
        .bind(sweep.end_ms)
        .bind(i64::try_from(self.page_rows).unwrap_or(i64::MAX))
        .bind(i64::from(self.casual_rated))
        .fetch_all(self.core.database().pool())
        .await?;
        let mut report = ReconcileReport {
            scanned: rows.len(),
            ..ReconcileReport::default()
        };
        let mut games = Vec::with_capacity(rows.len());
        let mut last: Option<(i64, String)> = None;
        for row in &rows {
            let game_id: String = row.try_get(0)?;
            let finished_at_ms: i64 = row.try_get(1)?;
            last = Some((finished_at_ms, game_id.clone()));
            match game_of_row(row) {
                Ok(game) => games.push(game),
                Err(reason) => {
                    report.undecodable += 1;
                    tracing::warn!(
                        game_id,
                        reason,
                        "finished game row cannot be rated; skipped"
                    );
                }
            }
        }
        report.applied = self.core.apply(&games, Source::Reconcile, now_ms).await?;
        if report.applied.recorded > 0 {
            tracing::info!(
                recorded = report.applied.recorded,
                "rated finished games the stream had not delivered"
            );
        }
        let next = match last {
            Some((after_ms, after_id)) if rows.len() >= self.page_rows => Some(Sweep {
                after_ms,
                after_id,
                end_ms: sweep.end_ms,
            }),
            _ => None,
        };
        if next.is_none() {
            sqlx::query(
                "UPDATE rating_reconcile SET watermark_ms = $1 WHERE id = 1 AND watermark_ms < $1",
            )
            .bind(sweep.end_ms)
            .execute(self.core.database().pool())
            .await?;
            report.sweep_done = true;
        }
        if let Ok(mut slot) = self.sweep.lock() {
            *slot = next;
        }
        Ok(report)
    }
}

/// The finished game of a `finished_games` row: its `event` payload, else (rows archived before that
/// column) its columns and stored game.
fn game_of_row(row: &draughts_store::sqlx::any::AnyRow) -> Result<FinishedGame, String> {
    let text = |i: usize| row.try_get::<String, _>(i).map_err(|e| e.to_string());
    if let Ok(Some(event)) = row.try_get::<Option<String>, _>(2) {
        return FinishedGame::from_event(event.as_bytes()).map_err(|e| e.to_string());
    }
    let variant_key = text(3)?;
    let variant = draughts_engine::Variant::from_key(&variant_key)
        .map_err(|_| format!("unknown variant {variant_key:?}"))?;
    let outcome_key = text(6)?;
    let outcome = Outcome::from_key(&outcome_key)
        .ok_or_else(|| format!("unknown outcome {outcome_key:?}"))?;
    let record: LegacyRecord = serde_json::from_str(&text(8)?).unwrap_or_default();
    let side = |id: String, stored: Option<finished::Player>| {
        let stored = stored.filter(|p| p.id == id).unwrap_or_default();
        Side {
            guest: stored.guest || id.starts_with("guest:"),
            computer: stored.computer || id.starts_with("ai:"),
            id,
        }
    };
    let game = FinishedGame {
        game_id: text(0)?,
        variant,
        options: record.options,
        rated: row.try_get::<i64, _>(7).map_err(|e| e.to_string())? != 0,
        white: side(text(4)?, record.white),
        black: side(text(5)?, record.black),
        outcome,
        time_control: record.time,
        finished_at_ms: u64::try_from(row.try_get::<i64, _>(1).map_err(|e| e.to_string())?)
            .unwrap_or(0),
        traceparent: None,
    };
    game.check()?;
    Ok(game)
}
