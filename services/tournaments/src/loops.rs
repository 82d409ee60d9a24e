//! The background work of every replica: the scheduler loop (each tournament's steps run on the
//! replica holding its lease; see `service`'s protocol) and the consumer of `games.finished`.
//!
//! The consumer reads with its own consumer group (`tournaments` by default), one consumer per
//! replica: each entry goes to one replica, is applied ([`TournamentsCore::apply_batch`]: a batch's
//! games of one tournament in one write of its record, once per game id whatever the deliveries) and
//! acknowledged only after the write; a batch whose write failed is applied again before anything new
//! is read. Entries left pending by a
//! replica that died are claimed by another after `claim_idle`; a group that disappeared (Redis
//! restarted without persistence: NOGROUP) is created again, and the entries read again are
//! recognised by their game ids. An entry that is not a finished game is acknowledged and logged.

use std::future::Future;
use std::time::{Duration, Instant};

use draughts_proto::contract::finished;
use draughts_store::{Entry, EntryId, ErrorCode, StoreError};

use crate::service::TournamentsCore;

/// Smallest and largest wait between retries after a backend failure.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// The consumer's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerSettings {
    pub stream: String,
    pub group: String,
    pub name: String,
    pub batch: usize,
    pub block: Duration,
    /// Entries pending this long with another consumer are taken over.
    pub claim_idle: Duration,
}

/// Runs the scheduler until `shutdown` resolves.
pub async fn run_scheduler(core: TournamentsCore, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    let tick = core.settings().tick;
    loop {
        if let Err(e) = core.tick().await {
            tracing::warn!(error = %e, "tournaments scheduler turn failed");
        }
        tokio::select! {
            () = &mut shutdown => break,
            () = tokio::time::sleep(tick) => {}
        }
    }
}

async fn sleep_or_stop(
    shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    backoff: &mut Duration,
) -> bool {
    let wait = *backoff;
    *backoff = (*backoff * 2).min(BACKOFF_MAX);
    tokio::select! {
        () = shutdown.as_mut() => true,
        () = tokio::time::sleep(wait) => false,
    }
}

/// Runs the consumer of `games.finished` until `shutdown` resolves.
pub async fn run_consumer(
    core: TournamentsCore,
    live: std::sync::Arc<dyn draughts_store::LiveStore>,
    settings: ConsumerSettings,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let s = &settings;
    let mut backoff = BACKOFF_MIN;
    let mut group_ready = false;
    let mut last_claim: Option<Instant> = None;
    // A batch whose write failed: applied again before anything else is read.
    let mut retry: Vec<Entry> = Vec::new();
    loop {
        if !group_ready {
            match live.ensure_group(&s.stream, &s.group).await {
                Ok(()) => group_ready = true,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot create the tournaments consumer group; retrying");
                    if sleep_or_stop(&mut shutdown, &mut backoff).await {
                        break;
                    }
                    continue;
                }
            }
        }
        let mut entries = std::mem::take(&mut retry);
        if entries.is_empty() && last_claim.is_none_or(|at| at.elapsed() >= s.claim_idle / 2) {
            last_claim = Some(Instant::now());
            match live
                .claim_idle(&s.stream, &s.group, &s.name, s.claim_idle, s.batch)
                .await
            {
                Ok(claimed) => entries = claimed,
                Err(e) => {
                    if failed(e, &mut group_ready)
                        && sleep_or_stop(&mut shutdown, &mut backoff).await
                    {
                        break;
                    }
                    continue;
                }
            }
        }
        if entries.is_empty() {
            let read = tokio::select! {
                biased;
                () = &mut shutdown => break,
                read = live.read_group(&s.stream, &s.group, &s.name, s.batch, s.block) => read,
            };
            match read {
                Ok(read) => entries = read,
                Err(e) => {
                    if failed(e, &mut group_ready)
                        && sleep_or_stop(&mut shutdown, &mut backoff).await
                    {
                        break;
                    }
                    continue;
                }
            }
        }
        if entries.is_empty() {
            continue;
        }
        let (done, error) = apply(&core, &entries).await;
        if !done.is_empty()
            && let Err(e) = live.ack(&s.stream, &s.group, &done).await
        {
            // Left pending: claimed later and found applied.
            tracing::warn!(error = %e, "acknowledging finished games failed");
        }
        match error {
            None => backoff = BACKOFF_MIN,
            Some(e) => {
                tracing::warn!(error = %e, "applying a finished game failed; it stays pending and is retried");
                if sleep_or_stop(&mut shutdown, &mut backoff).await {
                    break;
                }
                retry = entries;
            }
        }
    }
    tracing::info!(consumer = %settings.name, "tournaments consumer stopped");
}

/// Applies a batch (one write per tournament). On a failure nothing is acknowledged: the entries
/// stay pending and are applied again later (those already applied are recognised by their ids).
async fn apply(
    core: &TournamentsCore,
    entries: &[Entry],
) -> (Vec<EntryId>, Option<crate::TournamentsError>) {
    let mut events = Vec::with_capacity(entries.len());
    for entry in entries {
        match finished::decode(&entry.payload) {
            Ok(event) => events.push(event),
            Err(e) => {
                tracing::warn!(entry = %entry.id, error = %e, "not a finished game; skipped");
            }
        }
    }
    match core.apply_batch(&events).await {
        Ok(_) => (entries.iter().map(|e| e.id).collect(), None),
        Err(e) => (Vec::new(), Some(e)),
    }
}

/// Logs a failed read; returns whether to back off (false: the group is recreated at once).
fn failed(e: StoreError, group_ready: &mut bool) -> bool {
    if e.code() == ErrorCode::NotFound {
        tracing::warn!(error = %e, "tournaments consumer group missing; creating it again");
        *group_ready = false;
        return false;
    }
    tracing::warn!(error = %e, "reading games.finished failed; retrying");
    true
}
