//! The stream loop: finished games from the `games.finished` stream, through a consumer group, into
//! [`RatingsCore::apply`].
//!
//! Delivery is at least once; the effect is exactly once:
//! - every replica reads batches with `read_group` as one consumer of the group `ratings`, so each entry
//!   goes to one of them;
//! - a batch is applied in ONE database transaction, which records each game id in `rating_games`
//!   together with the rating rows it changes; an id recorded before changes nothing;
//! - entries are acknowledged only after that transaction commits. A consumer that dies before the
//!   commit leaves its entries pending (nothing was written); one that dies between commit and ack leaves
//!   them pending too (they were written once). Either way another consumer takes them over with
//!   `claim_idle` once they have been idle for `--claim-idle-ms`, and applying them again is a no-op;
//! - an entry that can never be applied (not JSON, unknown schema version or variant) is copied to
//!   [`DEAD_LETTER_STREAM`] and acknowledged, so it cannot block the
//!   group;
//! - backend failures (database or Redis down, Redis restarted) are retried with capped backoff; a batch
//!   whose transaction failed is retried as it is, and acknowledgements that failed are sent again.
//!
//! The same loop runs the [`Reconciler`](crate::reconcile) every `--reconcile-interval-ms` (one page
//! per turn of the loop while a sweep is under way): games the stream lost are rated from the database.
//!
//! Shutdown: the loop stops pulling, finishes the batch in hand (apply and ack), and returns.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use draughts_store::{Entry, EntryId, ErrorCode, LiveStore, StoreError};

use crate::config::{PeriodMode, RatingsConfig};
use crate::domain::{ApplyReport, RatingsCore};
use crate::event::{DEAD_LETTER_STREAM, FINISHED_STREAM, FinishedGame, Source};
use crate::reconcile::Reconciler;

/// Smallest and largest wait between retries after a backend failure.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How often fixed rating periods are checked for closing.
const CLOSE_INTERVAL: Duration = Duration::from_secs(1);
/// How often the loop looks for guests taken over by accounts.
const LINKS_INTERVAL: Duration = Duration::from_secs(1);

/// One consumer of the finished-games stream.
#[derive(Clone, Debug)]
pub struct Consumer {
    live: Arc<dyn LiveStore>,
    core: RatingsCore,
    stream: String,
    group: String,
    name: String,
    batch_size: usize,
    block: Duration,
    claim_idle: Duration,
    claim_interval: Duration,
    reconciler: Reconciler,
}

/// A consumer name unique to this process: `ratings-<host>-<random>`.
pub fn default_consumer_name() -> String {
    use rand::Rng;
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "local".to_owned());
    let host: String = host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
        .take(64)
        .collect();
    format!("ratings-{host}-{:08x}", rand::rng().random::<u32>())
}

/// What one pass of the loop did (for tests and metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Entries in the batch.
    pub entries: usize,
    /// Entries copied to the dead-letter stream.
    pub rejected: usize,
    /// What the domain did with the rest.
    pub applied: ApplyReport,
}

impl Consumer {
    /// A consumer of `games.finished` named by the configuration (or [`default_consumer_name`]).
    pub fn new(live: Arc<dyn LiveStore>, core: RatingsCore, config: &RatingsConfig) -> Consumer {
        let name = if config.consumer_name.is_empty() {
            default_consumer_name()
        } else {
            config.consumer_name.clone()
        };
        Consumer {
            live,
            core: core.clone(),
            stream: FINISHED_STREAM.to_owned(),
            group: config.consumer_group.clone(),
            name,
            batch_size: config.batch_size,
            block: Duration::from_millis(config.block_ms),
            claim_idle: Duration::from_millis(config.claim_idle_ms),
            claim_interval: Duration::from_millis(config.claim_interval_ms),
            reconciler: Reconciler::new(core.clone(), config),
        }
    }

    /// The same consumer reading another stream (tests and load measurements use their own).
    pub fn with_stream(mut self, stream: impl Into<String>) -> Consumer {
        self.stream = stream.into();
        self
    }

    /// The same consumer under another name.
    pub fn with_name(mut self, name: impl Into<String>) -> Consumer {
        self.name = name.into();
        self
    }

    /// The same consumer, its reconciler reading `feed` (what the games service publishes).
    pub fn with_feed(mut self, feed: Arc<dyn crate::games_feed::FinishedFeed>) -> Consumer {
        self.reconciler = self.reconciler.with_feed(feed);
        self
    }

    /// This consumer's name in the group.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Creates the consumer group (from the start of the stream) if it does not exist.
    pub async fn ensure_group(&self) -> Result<(), StoreError> {
        self.live.ensure_group(&self.stream, &self.group).await
    }

    /// Runs until `shutdown` resolves: reads, claims, applies, acknowledges, and (fixed periods) rates
    /// the periods that have ended.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        tracing::info!(consumer = %self.name, group = %self.group, stream = %self.stream, "ratings consumer started");
        let mut backoff = BACKOFF_MIN;
        let mut group_ready = false;
        let mut last_claim: Option<Instant> = None;
        let mut last_close: Option<Instant> = None;
        let mut last_reconcile: Option<Instant> = None;
        let mut reconcile_busy = false;
        let mut last_links: Option<Instant> = None;
        let mut unacked: Vec<EntryId> = Vec::new();
        loop {
            if !group_ready {
                match self.ensure_group().await {
                    Ok(()) => group_ready = true,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot create the consumer group; retrying");
                        if sleep_or_stop(&mut shutdown, &mut backoff).await {
                            break;
                        }
                        continue;
                    }
                }
            }
            if !unacked.is_empty() {
                match self.live.ack(&self.stream, &self.group, &unacked).await {
                    Ok(_) => unacked.clear(),
                    Err(e) => {
                        tracing::warn!(error = %e, pending = unacked.len(), "acknowledgement failed; retrying")
                    }
                }
            }
            if self.core.period_mode() == PeriodMode::Fixed
                && last_close.is_none_or(|at| at.elapsed() >= CLOSE_INTERVAL)
            {
                last_close = Some(Instant::now());
                if let Err(e) = self
                    .core
                    .close_due_periods(draughts_store::now_unix_ms())
                    .await
                {
                    tracing::warn!(error = %e, "rating a finished period failed; retrying");
                }
            }
            // The reconciler, one page per turn of the loop so that the stream is never starved.
            let interval = self.reconciler.interval();
            if !interval.is_zero()
                && (reconcile_busy || last_reconcile.is_none_or(|at| at.elapsed() >= interval))
            {
                match self.reconciler.page(draughts_store::now_unix_ms()).await {
                    Ok(page) => {
                        reconcile_busy = !page.sweep_done;
                        if page.sweep_done {
                            last_reconcile = Some(Instant::now());
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "reconciling finished games from the database failed; retrying at the next interval");
                        reconcile_busy = false;
                        last_reconcile = Some(Instant::now());
                    }
                }
            }
            // Guests taken over by accounts (see `links`), once a second.
            if last_links.is_none_or(|at| at.elapsed() >= LINKS_INTERVAL) {
                last_links = Some(Instant::now());
                if let Err(e) =
                    crate::links::apply(self.live.as_ref(), &self.core, &self.name).await
                {
                    tracing::warn!(error = %e, "merging linked guests' ratings failed; retrying");
                }
            }
            // Entries of consumers that died (or hang) first, then new ones.
            let mut claimed = Vec::new();
            if last_claim.is_none_or(|at| at.elapsed() >= self.claim_interval) {
                match self
                    .live
                    .claim_idle(
                        &self.stream,
                        &self.group,
                        &self.name,
                        self.claim_idle,
                        self.batch_size,
                    )
                    .await
                {
                    Ok(entries) => {
                        // A full batch: there may be more; look again at once.
                        if entries.len() < self.batch_size {
                            last_claim = Some(Instant::now());
                        }
                        claimed = entries;
                    }
                    Err(e) => {
                        last_claim = Some(Instant::now());
                        if self.read_failed(e, &mut group_ready) {
                            if sleep_or_stop(&mut shutdown, &mut backoff).await {
                                break;
                            }
                            continue;
                        }
                    }
                }
            }
            let n_claimed = claimed.len();
            let entries = if claimed.is_empty() {
                let read = tokio::select! {
                    biased;
                    () = &mut shutdown => break,
                    read = self.live.read_group(&self.stream, &self.group, &self.name, self.batch_size, self.block) => read,
                };
                match read {
                    Ok(entries) => entries,
                    Err(e) => {
                        if self.read_failed(e, &mut group_ready)
                            && sleep_or_stop(&mut shutdown, &mut backoff).await
                        {
                            break;
                        }
                        continue;
                    }
                }
            } else {
                claimed
            };
            backoff = BACKOFF_MIN;
            if entries.is_empty() {
                continue;
            }
            if n_claimed > 0 {
                tracing::info!(
                    claimed = n_claimed,
                    consumer = %self.name,
                    "took over entries pending with another consumer"
                );
            }
            // Apply until it commits: the entries are ours (pending) until acknowledged, and
            // acknowledging before the commit could lose them.
            let mut stopped = false;
            let ids = loop {
                match self.process(&entries).await {
                    Ok((ids, report)) => {
                        tracing::debug!(?report, claimed = n_claimed, "batch applied");
                        break ids;
                    }
                    Err(e) => {
                        tracing::error!(error = %e, entries = entries.len(), "applying a batch failed; retrying");
                        if sleep_or_stop(&mut shutdown, &mut backoff).await {
                            // Left pending: another consumer (or this one after a restart) claims them.
                            stopped = true;
                            break Vec::new();
                        }
                    }
                }
            };
            if stopped {
                break;
            }
            backoff = BACKOFF_MIN;
            unacked.extend(ids);
            match self.live.ack(&self.stream, &self.group, &unacked).await {
                Ok(_) => unacked.clear(),
                Err(e) => {
                    tracing::warn!(error = %e, pending = unacked.len(), "acknowledgement failed; retrying")
                }
            }
        }
        if !unacked.is_empty()
            && let Err(e) = self.live.ack(&self.stream, &self.group, &unacked).await
        {
            tracing::warn!(error = %e, "final acknowledgement failed; the entries will be claimed and found applied");
        }
        tracing::info!(consumer = %self.name, "ratings consumer stopped");
    }

    /// Logs a failed read; returns whether to back off (false: retry at once, e.g. group recreated).
    fn read_failed(&self, e: StoreError, group_ready: &mut bool) -> bool {
        if e.code() == ErrorCode::NotFound {
            // The group is gone (e.g. Redis restarted without persistence): create it again. Entries
            // read again from the start are recognised by their game ids.
            tracing::warn!(error = %e, "consumer group missing; creating it again");
            *group_ready = false;
            return false;
        }
        tracing::warn!(error = %e, "reading the finished-games stream failed; retrying");
        true
    }

    /// Decodes and applies one batch; returns the ids to acknowledge and what was done. Fails (and
    /// nothing may be acknowledged) when the database or the dead-letter append failed.
    pub async fn process(
        &self,
        entries: &[Entry],
    ) -> Result<(Vec<EntryId>, PassReport), crate::RatingsError> {
        let started = Instant::now();
        let span = tracing::info_span!("ratings_batch", entries = entries.len());
        let entered = span.enter();
        let mut games = Vec::with_capacity(entries.len());
        let mut rejected = Vec::new();
        for entry in entries {
            match FinishedGame::from_event(&entry.payload) {
                Ok(game) => {
                    if let Some(parent) = &game.traceparent {
                        let game_span = tracing::debug_span!("rate_game", game_id = %game.game_id);
                        if !game_span.is_disabled() {
                            let carrier = std::collections::HashMap::from([(
                                "traceparent".to_owned(),
                                parent.clone(),
                            )]);
                            draughts_runtime::propagation::set_parent_from_map(
                                &game_span, &carrier,
                            );
                            game_span.in_scope(|| tracing::debug!("received"));
                        }
                    }
                    games.push(game);
                }
                Err(e) => {
                    tracing::error!(entry = %entry.id, error = %e, "finished-game entry cannot be applied; moved to the dead-letter stream");
                    rejected.push(entry);
                }
            }
        }
        drop(entered);
        for entry in &rejected {
            self.live
                .append(DEAD_LETTER_STREAM, Bytes::clone(&entry.payload))
                .await?;
        }
        let applied = self
            .core
            .apply(&games, Source::Stream, draughts_store::now_unix_ms())
            .await?;
        metrics::counter!("draughts_ratings_entries_total", "result" => "recorded")
            .increment(applied.recorded as u64);
        metrics::counter!("draughts_ratings_entries_total", "result" => "duplicate")
            .increment(applied.duplicates as u64);
        metrics::counter!("draughts_ratings_entries_total", "result" => "skipped")
            .increment(applied.skipped as u64);
        metrics::counter!("draughts_ratings_entries_total", "result" => "rejected")
            .increment(rejected.len() as u64);
        metrics::histogram!("draughts_ratings_batch_seconds")
            .record(started.elapsed().as_secs_f64());
        Ok((
            entries.iter().map(|e| e.id).collect(),
            PassReport {
                entries: entries.len(),
                rejected: rejected.len(),
                applied,
            },
        ))
    }
}

/// Sleeps for the backoff (doubling it, capped); returns true if `shutdown` came first.
async fn sleep_or_stop<F: Future<Output = ()>>(
    shutdown: &mut std::pin::Pin<&mut F>,
    backoff: &mut Duration,
) -> bool {
    let wait = *backoff;
    *backoff = (*backoff * 2).min(BACKOFF_MAX);
    tokio::select! {
        biased;
        () = shutdown.as_mut() => true,
        () = tokio::time::sleep(wait) => false,
    }
}
