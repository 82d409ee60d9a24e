//! The reconciler: finished games that the `games.finished` stream did not deliver (an entry lost with
//! a Redis that restarted without its append-only file, trimmed, or dead-lettered by a bug since fixed)
//! are found in what the games service publishes and rated exactly once.
//!
//! The games service owns its storage; it archives every finished game durably BEFORE it appends the
//! stream entry, and lists the archived games, each as its stream entry, through
//! `Games.ListFinishedGames` (for the platform's services only: [`FinishedFeed`]). The reconciler asks
//! for them in pages ordered by (`finished_at_ms`, `game_id`), from the stored watermark minus a safety
//! margin (`--reconcile-margin-ms`: games archived late, for example by an archive job retried after a
//! replica died, still fall inside it) up to `now - --reconcile-delay-ms` (newer games are left to the
//! stream, the normal path), and leaves out the games it already has a `rating_games` row for (its own
//! table). The rest of each page goes through [`RatingsCore::apply`], the same idempotent transaction
//! as the stream path, so a game the stream delivers too, or that two replicas reconcile at once, is
//! still rated once. When a sweep reaches its end the watermark moves to it (`rating_reconcile`); a
//! restart mid-sweep starts the sweep again, which only costs reads.
//!
//! Casual games are not asked for unless casual games are rated (`--casual-games rate`): on a
//! platform where most games are casual, every sweep re-read an hour of them. Other games the
//! policies do not rate (aborted, against the computer, ...) have no `rating_games` row and are looked
//! at again by every sweep whose margin covers them; they are never rated.
//!
//! Without a feed (a `draughts-ratings` started without `--ratings-games-url`) the reconciler is off.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use draughts_store::sqlx::{self, Row};

use crate::config::RatingsConfig;
use crate::domain::{ApplyReport, RatingsCore};
use crate::error::RatingsResult;
use crate::event::{FinishedGame, Source};
use crate::games_feed::{FeedQuery, FinishedFeed};

/// Games per page (the games service's largest page).
pub const PAGE_ROWS: usize = 500;

/// What one page did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Finished games in the page that have no rating record yet.
    pub scanned: usize,
    /// Entries that could not be read as a finished game (logged, skipped).
    pub undecodable: usize,
    /// What the domain did with the rest (`recorded`: games the stream had not delivered).
    pub applied: ApplyReport,
    /// The sweep reached its end (and the watermark moved) with this page.
    pub sweep_done: bool,
}

/// Where a sweep is: games after (`after_ms`, `after_id`) and before `end_ms` are left.
#[derive(Clone, Debug)]
struct Sweep {
    after_ms: u64,
    after_id: String,
    end_ms: u64,
}

/// The reconciler of one replica (cheap to clone; clones share the sweep).
#[derive(Clone, Debug)]
pub struct Reconciler {
    core: RatingsCore,
    /// What the games service publishes; `None`: the reconciler is off.
    feed: Option<Arc<dyn FinishedFeed>>,
    interval: Duration,
    delay_ms: u64,
    margin_ms: u64,
    page_rows: usize,
    /// Whether casual games are rated (`--casual-games rate`): else the sweep does not read them.
    casual_rated: bool,
    sweep: Arc<Mutex<Option<Sweep>>>,
}

fn ms_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

impl Reconciler {
    /// A reconciler with the configuration's interval, delay and margin; off until it is given a
    /// feed ([`Reconciler::with_feed`]).
    pub fn new(core: RatingsCore, config: &RatingsConfig) -> Reconciler {
        Reconciler {
            core,
            feed: None,
            interval: Duration::from_millis(config.reconcile_interval_ms),
            delay_ms: config.reconcile_delay_ms,
            margin_ms: config.reconcile_margin_ms,
            page_rows: PAGE_ROWS,
            casual_rated: config.casual_games == crate::config::Policy::Rate,
            sweep: Arc::new(Mutex::new(None)),
        }
    }

    /// The same reconciler reading `feed`.
    pub fn with_feed(mut self, feed: Arc<dyn FinishedFeed>) -> Reconciler {
        self.feed = Some(feed);
        self
    }

    /// The same reconciler with another page size (tests).
    pub fn with_page_rows(mut self, rows: usize) -> Reconciler {
        self.page_rows = rows.max(1);
        self
    }

    /// Time between sweeps (zero: the reconciler is off, also when it has no feed).
    pub fn interval(&self) -> Duration {
        if self.feed.is_some() {
            self.interval
        } else {
            Duration::ZERO
        }
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

    /// Reconciles one page of the current sweep (starting a sweep if none is under way). Without a
    /// feed, a page does nothing and ends its sweep.
    pub async fn page(&self, now_ms: u64) -> RatingsResult<ReconcileReport> {
        let Some(feed) = &self.feed else {
            return Ok(ReconcileReport {
                sweep_done: true,
                ..ReconcileReport::default()
            });
        };
        let current = self.sweep.lock().map(|s| s.clone()).unwrap_or(None);
        let sweep = match current {
            Some(sweep) => sweep,
            None => {
                let watermark = self.watermark().await?;
                Sweep {
                    after_ms: watermark.saturating_sub(self.margin_ms),
                    after_id: String::new(),
                    end_ms: now_ms.saturating_sub(self.delay_ms),
                }
            }
        };
        let entries = feed
            .page(&FeedQuery {
                after_ms: sweep.after_ms,
                after_game_id: sweep.after_id.clone(),
                before_ms: sweep.end_ms,
                limit: self.page_rows,
                rated_only: !self.casual_rated,
            })
            .await?;
        let known = self
            .known(entries.iter().map(|e| e.game_id.as_str()))
            .await?;
        let mut report = ReconcileReport::default();
        let mut games = Vec::with_capacity(entries.len());
        for entry in entries.iter().filter(|e| !known.contains(&e.game_id)) {
            report.scanned += 1;
            match FinishedGame::from_event(&entry.event) {
                Ok(game) => games.push(game),
                Err(e) => {
                    report.undecodable += 1;
                    tracing::warn!(
                        game_id = entry.game_id,
                        reason = %e,
                        "finished game cannot be rated; skipped"
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
        let next = match entries.last() {
            Some(last) if entries.len() >= self.page_rows => Some(Sweep {
                after_ms: last.finished_at_ms,
                after_id: last.game_id.clone(),
                end_ms: sweep.end_ms,
            }),
            _ => None,
        };
        if next.is_none() {
            sqlx::query(
                "UPDATE rating_reconcile SET watermark_ms = $1 WHERE id = 1 AND watermark_ms < $1",
            )
            .bind(ms_i64(sweep.end_ms))
            .execute(self.core.database().pool())
            .await?;
            report.sweep_done = true;
        }
        if let Ok(mut slot) = self.sweep.lock() {
            *slot = next;
        }
        Ok(report)
    }

    /// Which of `ids` already have a rating record (this service's `rating_games`).
    async fn known<'a>(
        &self,
        ids: impl Iterator<Item = &'a str>,
    ) -> RatingsResult<HashSet<String>> {
        let ids: Vec<&str> = ids.collect();
        let mut known = HashSet::new();
        for chunk in ids.chunks(100) {
            let placeholders = (1..=chunk.len())
                .map(|i| format!("${i}"))
                .collect::<Vec<_>>()
                .join(", ");
            // Only numbered placeholders are formatted in; the ids are bound.
            let sql = format!("SELECT game_id FROM rating_games WHERE game_id IN ({placeholders})");
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for id in chunk {
                query = query.bind(id.to_string());
            }
            for row in query.fetch_all(self.core.database().pool()).await? {
                known.insert(row.try_get::<String, _>(0)?);
            }
        }
        Ok(known)
    }
}
