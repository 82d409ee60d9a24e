//! The worker loop: pull jobs in priority order, run the search on a blocking thread, write progress,
//! finish exactly once, shut down cleanly. Used by the `draughts-analysis-worker` binary and, on the
//! embedded backend, inside `draughtsd`. Workers scale out with no coordination but the queue.
//!
//! A worker process runs `slots` searches at once (default: one per core), each slot a task with its
//! own consumer name (`<worker>-<n>`) and its own `Searcher` (transposition table kept between jobs).
//!
//! A slot's cycle:
//! 1. For each class, highest first: a fresh entry (`read_group`), else, at most every half visibility
//!    timeout, an entry idle for the visibility timeout (`claim_idle`: its worker may be dead). Nothing:
//!    one blocking read of every class stream at once (`read_groups`, at most [`IDLE_POLL`]), which
//!    the next append ends with its entry, no wake-up message in between. Should it deliver entries
//!    of several classes at once (appends in the same instant), the highest runs first and the others
//!    wait in the slot's hand, each taken before the fresh entries of lower classes.
//! 2. The record decides: final or gone -> ack; its run lease (`analysis-run:<id>`) held by another
//!    slot -> that slot is alive, leave the entry; attempts used up -> FAILED with the reason.
//! 3. Take the lease, mark RUNNING (attempt n), search on a blocking thread with the stop flag shared
//!    with a guard task that renews the lease and stops the search when the job is cancelled (a wake-up
//!    on the job's channel, or the record read at each renewal) or the lease is lost. A new job's entry
//!    carries its record, so its search starts at once; if it ends within 2 ms (`QUICK_COMMIT`: a
//!    computer move at levels 1-5), the job goes from QUEUED to DONE in one compare-and-set from
//!    that copy, with no lease and no RUNNING mark (a job another slot has marked RUNNING is left to
//!    it). Otherwise the lease and the mark go out while the search runs: the search writes nothing
//!    before they have won, and is stopped unseen when they lose.
//! 4. Progress goes through a `watch` channel (the search never waits for the store; updates coalesce)
//!    into the record.
//! 5. Finish with a compare-and-set that only succeeds for the running attempt: a slot that lost its
//!    lease (paused, partitioned) and was replaced cannot finish the job a second time. Then ack, cache
//!    the result, free the fingerprint.
//!
//! The first `reserved_computer_slots` slots (default one, when there are two or more) read only the
//! computer-move class: a live game's move finds a free slot even while guests' BestMoves and analyses
//! fill every other slot. The others read every class, highest first.
//!
//! A read that finds the group gone (the store lost its data: NOGROUP) creates the groups again and
//! reads once more ([`Queue::ensure_groups`]), so workers go on without a restart.
//!
//! Shutdown: slots stop pulling; a running job gets `shutdown_grace` to finish, then its search is
//! stopped and the job handed back (QUEUED again, a fresh entry, the attempt not counted).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use draughts_ai::bitbase::ShelfCell;
use draughts_ai::{SearchOptions, Searcher, StopHandle};
use draughts_engine::Variant;
use draughts_store::{Entry, Version, now_unix_ms};
use futures_util::StreamExt;
use tokio::sync::watch;

use crate::contract::{
    self, CachedResult, Class, Heartbeat, JobEntry, JobRecord, JobResult, JobSpec, JobState,
    ProgressRec, VERSION, decode, encode,
};
use crate::engine;
use crate::error::AnalysisResult;
use crate::queue::Queue;

/// Longest blocking read of an idle slot (then it looks for jobs to take over).
pub const IDLE_POLL: Duration = Duration::from_millis(500);
/// A worker counts as live this long after its last heartbeat, milliseconds.
pub const LIVE_WINDOW_MS: u64 = 3_000;
/// A job that ends within this long (a computer move) costs no cancel subscription and no progress
/// write: its guard subscribes to its wake-ups, and its progress is written, only after it.
const SHORT_JOB: Duration = Duration::from_millis(50);
/// Heartbeat period.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Settings of a worker process.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// This process's name (unique among workers; consumers are `<name>-<slot>`).
    pub name: String,
    /// Searches at once.
    pub slots: usize,
    /// Of those, slots that take only computer moves ([`Class::ComputerMove`]): a live game's move
    /// never waits for a slot that guests' or analysis work holds.
    pub reserved_computer_slots: usize,
    /// Transposition table per slot, MiB.
    pub hash_mb: usize,
    /// Wall-time cap of any one search (whatever the job asks).
    pub max_search: Duration,
    /// How long a running job may still finish after shutdown is asked.
    pub shutdown_grace: Duration,
    /// Endgame tables probed by every slot's searches (of the variants they cover); a background
    /// build may replace them while the workers run (each search takes the tables of its start).
    pub bitbases: ShelfCell,
}

impl WorkerConfig {
    /// A unique name, one slot per core.
    pub fn defaults() -> WorkerConfig {
        let slots = default_slots();
        WorkerConfig {
            name: format!("worker-{}", hex::encode(rand::random::<[u8; 4]>())),
            slots,
            reserved_computer_slots: WorkerConfig::default_reserved(slots),
            hash_mb: 16,
            max_search: Duration::from_secs(600),
            shutdown_grace: Duration::from_secs(10),
            bitbases: ShelfCell::default(),
        }
    }
}

impl WorkerConfig {
    /// The reserved computer-move slots of `slots`: one when there are two or more, else none (a
    /// single slot serves every class).
    pub fn default_reserved(slots: usize) -> usize {
        usize::from(slots >= 2)
    }
}

/// One search per core.
pub fn default_slots() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `config.slots` slots and the heartbeat until `shutdown` resolves, then drains (see the module
/// docs) and returns.
pub async fn run(queue: Queue, config: WorkerConfig, shutdown: impl Future<Output = ()>) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let running = Arc::new(AtomicU32::new(0));
    // A JoinSet: when this future is dropped (the process dies or the task is aborted), every slot
    // goes with it.
    let mut tasks = tokio::task::JoinSet::new();
    let reserved = config.reserved_computer_slots.min(config.slots.max(1) - 1);
    for slot in 0..config.slots.max(1) {
        // The first `reserved` slots take only computer moves.
        let classes: &'static [Class] = if slot < reserved {
            &[Class::ComputerMove]
        } else {
            &Class::ALL
        };
        let slot = Slot {
            queue: queue.clone(),
            classes,
            consumer: format!("{}-{slot}", config.name),
            config: config.clone(),
            running: running.clone(),
            stopping: stop_rx.clone(),
            next_reclaim: Instant::now(),
            jobs_done: 0,
        };
        tasks.spawn(slot.run());
    }
    tasks.spawn(heartbeat(
        queue.clone(),
        config.clone(),
        running.clone(),
        stop_rx.clone(),
    ));
    tracing::info!(worker = %config.name, slots = config.slots, reserved_computer_slots = reserved, "analysis worker started");
    shutdown.await;
    let _ = stop_tx.send(true);
    while tasks.join_next().await.is_some() {}
    tracing::info!(worker = %config.name, "analysis worker stopped");
}

async fn heartbeat(
    queue: Queue,
    config: WorkerConfig,
    running: Arc<AtomicU32>,
    mut stopping: watch::Receiver<bool>,
) {
    let mut beats = 0u64;
    loop {
        let beat = Heartbeat {
            v: VERSION,
            worker: config.name.clone(),
            slots: config.slots as u32,
            running: running.load(Ordering::Relaxed),
        };
        if let Err(e) = queue
            .live()
            .append(contract::WORKERS_STREAM, encode(&beat).into())
            .await
        {
            tracing::warn!(error = %e, "worker heartbeat failed");
        }
        beats += 1;
        if beats.is_multiple_of(30) {
            let _ = queue.live().trim(contract::WORKERS_STREAM, 2_000).await;
        }
        tokio::select! {
            _ = tokio::time::sleep(HEARTBEAT) => {}
            _ = async { let _ = stopping.wait_for(|s| *s).await; } => return,
        }
    }
}

/// How one attempt ended.
enum Outcome {
    Finished(JobResult),
    /// The input does not replay: never retried.
    BadInput(String),
    /// The search panicked.
    Crashed(String),
    /// Stopped: cancelled, lease lost, or shutdown.
    Stopped,
}

struct Slot {
    queue: Queue,
    /// The classes this slot takes, highest first (a reserved slot: computer moves only).
    classes: &'static [Class],
    consumer: String,
    config: WorkerConfig,
    running: Arc<AtomicU32>,
    stopping: watch::Receiver<bool>,
    next_reclaim: Instant,
    jobs_done: u64,
}

impl Slot {
    async fn run(mut self) {
        let mut searcher: Option<Searcher> = None;
        // Entries a blocking read delivered along with the one run first (this slot's to run).
        let mut hand: Vec<(Class, Entry)> = Vec::new();
        loop {
            let next = if *self.stopping.borrow() {
                // Stopping: only what is already this slot's is still run (and handed back).
                if hand.is_empty() {
                    break;
                }
                Ok(Some(hand.remove(0)))
            } else {
                self.next(&mut hand).await
            };
            match next {
                Ok(Some((class, entry))) => {
                    searcher = self.handle(class, entry, searcher).await;
                }
                // Not cut short at shutdown: an entry the read delivers must not be dropped (the
                // read ends within IDLE_POLL, and what it brings is run or handed back).
                Ok(None) => match self.wait_for_entries().await {
                    Ok(delivered) => hand.extend(delivered),
                    Err(e) => {
                        tracing::warn!(error = %e, slot = %self.consumer, "queue read failed; retrying");
                        tokio::time::sleep(IDLE_POLL).await;
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, slot = %self.consumer, "queue read failed; retrying");
                    tokio::time::sleep(IDLE_POLL).await;
                }
            }
        }
    }

    /// Waits up to [`IDLE_POLL`] for an entry of any class (one blocking read of every stream).
    async fn wait_for_entries(&self) -> AnalysisResult<Vec<(Class, Entry)>> {
        let live = self.queue.live();
        let streams: Vec<&str> = self.classes.iter().map(|class| class.stream()).collect();
        let delivered = self
            .queue
            .regrouped(|| live.read_groups(&streams, contract::GROUP, &self.consumer, 1, IDLE_POLL))
            .await?;
        let mut delivered: Vec<(Class, Entry)> = delivered
            .into_iter()
            .filter_map(|(index, entry)| self.classes.get(index).map(|class| (*class, entry)))
            .collect();
        delivered.sort_by_key(|(class, entry)| (*class, entry.id));
        Ok(delivered)
    }

    /// The next entry to look at, in priority order: per class, one already in the slot's hand,
    /// else a fresh one, else (when due) one to take over.
    async fn next(
        &mut self,
        hand: &mut Vec<(Class, Entry)>,
    ) -> AnalysisResult<Option<(Class, Entry)>> {
        let live = self.queue.live().clone();
        let reclaim = Instant::now() >= self.next_reclaim;
        if reclaim {
            self.next_reclaim = Instant::now() + self.queue.config().visibility_timeout / 2;
        }
        for &class in self.classes {
            if let Some(at) = hand.iter().position(|(held, _)| *held == class) {
                return Ok(Some(hand.remove(at)));
            }
            let fresh = self
                .queue
                .regrouped(|| {
                    live.read_group(
                        class.stream(),
                        contract::GROUP,
                        &self.consumer,
                        1,
                        Duration::ZERO,
                    )
                })
                .await?;
            if let Some(entry) = fresh.into_iter().next() {
                return Ok(Some((class, entry)));
            }
            if reclaim {
                let idle = self
                    .queue
                    .regrouped(|| {
                        live.claim_idle(
                            class.stream(),
                            contract::GROUP,
                            &self.consumer,
                            self.queue.config().visibility_timeout,
                            1,
                        )
                    })
                    .await?;
                if let Some(entry) = idle.into_iter().next() {
                    return Ok(Some((class, entry)));
                }
            }
        }
        Ok(None)
    }

    async fn ack(&self, class: Class, entry: &Entry) {
        if let Err(e) = self
            .queue
            .live()
            .ack(class.stream(), contract::GROUP, &[entry.id])
            .await
        {
            tracing::warn!(error = %e, "ack failed (the entry will be looked at again)");
        }
    }

    /// Looks at one entry; runs its job if it is this slot's to run. Returns the searcher for reuse.
    async fn handle(
        &mut self,
        class: Class,
        entry: Entry,
        mut searcher: Option<Searcher>,
    ) -> Option<Searcher> {
        let (job_id, first) = match decode::<JobEntry>(&entry.payload) {
            Ok(job) => (job.job_id, job.record.map(|record| *record)),
            Err(e) => {
                tracing::warn!(error = %e, id = %entry.id, "unreadable job entry dropped");
                self.ack(class, &entry).await;
                return searcher;
            }
        };
        // A new job's entry carries its spec: its search starts now. A search that ends within
        // QUICK_COMMIT (levels 1-5 of a computer move) is committed in one write from the entry's
        // copy; a longer one goes on while the start's round trip is in flight. Nothing of it is
        // written before the start (or the quick commit) has won; if that loses, it is stopped unseen.
        let mut early = first
            .as_ref()
            .map(|record| self.spawn_search(&record.spec, searcher.take()));
        if let (Some(carried), Some(search)) = (&first, early.as_mut())
            && let Ok(joined) = tokio::time::timeout(QUICK_COMMIT, &mut search.handle).await
        {
            let searched = search.started.elapsed();
            metrics::histogram!("analysis_job_seconds", "class" => class.name())
                .record(searched.as_secs_f64());
            let started_ms =
                now_unix_ms().saturating_sub(u64::try_from(searched.as_millis()).unwrap_or(0));
            let (searcher, settled) = self
                .quick_commit(class, &entry, carried.clone(), started_ms, joined)
                .await;
            if settled {
                return searcher;
            }
            // Not this slot's to commit so (another slot runs it, or the search failed): the
            // ordinary start decides, with a fresh search if it runs the job.
            return self
                .run_entry(class, entry, &job_id, first, None, searcher)
                .await;
        }
        self.run_entry(class, entry, &job_id, first, early, searcher)
            .await
    }

    /// Commits a new job whose search ended before it was started, from the record its entry
    /// carries: QUEUED (or, if the entry came before the record's write, nothing) straight to DONE
    /// in one compare-and-set, with no lease and no RUNNING mark (a slot that took the job over
    /// meanwhile has marked it RUNNING, and then this commit changes nothing). Returns the searcher
    /// and whether the entry is settled (committed, or the job already final).
    #[tracing::instrument(skip_all, fields(job_id = %carried.job_id, class = class.name(), quick = true))]
    async fn quick_commit(
        &mut self,
        class: Class,
        entry: &Entry,
        carried: JobRecord,
        started_ms: u64,
        joined: Result<
            (Result<JobResult, engine::JobInputError>, Searcher),
            tokio::task::JoinError,
        >,
    ) -> (Option<Searcher>, bool) {
        draughts_runtime::propagation::set_parent_from_map(
            &tracing::Span::current(),
            &carried.trace,
        );
        let (outcome, searcher) = match joined {
            Ok((Ok(result), searcher)) => (Ok(result), searcher),
            Ok((Err(bad), searcher)) => (Err(bad.to_string()), searcher),
            // The search thread failed: the ordinary start runs it again (and counts attempts).
            Err(_) => return (None, false),
        };
        let job_id = carried.job_id.clone();
        let now = now_unix_ms();
        let mut change = |r: &mut JobRecord| {
            if r.state != JobState::Queued {
                return false;
            }
            r.attempts += 1;
            r.started_ms = started_ms;
            r.finished_ms = now;
            r.worker = None;
            r.progress = None;
            match &outcome {
                Ok(result) => {
                    r.state = JobState::Done;
                    r.result = Some(result.clone());
                }
                Err(reason) => {
                    r.state = JobState::Failed;
                    r.error = Some(reason.clone());
                }
            }
            true
        };
        let expires_ms = carried.expires_ms;
        let mut updated = self
            .queue
            .update_versioned(&job_id, Some((carried.clone(), FIRST_VERSION)), &mut change)
            .await;
        if matches!(updated, Ok(None)) && expires_ms > now {
            // The entry came before the record's write: the entry's copy is the record.
            updated = match self.queue.create_or_load(&job_id, carried).await {
                Ok(Some(loaded)) => {
                    self.queue
                        .update_versioned(&job_id, Some(loaded), &mut change)
                        .await
                }
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
        }
        let settled = match updated {
            Ok(Some((after, true, _))) => {
                let result = outcome.ok();
                self.settle(class, entry, &after, result, false).await;
                self.job_done(class).await;
                true
            }
            Ok(Some((after, false, _))) if after.state.is_final() => {
                self.ack(class, entry).await;
                true
            }
            // Gone, or another slot runs it now.
            Ok(Some(_)) => false,
            Ok(None) => {
                self.ack(class, entry).await;
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, job_id, "could not commit a job; it will be retried");
                true
            }
        };
        (Some(searcher), settled)
    }

    /// The ordinary path of an entry: start the job (lease and RUNNING), run it, finish it.
    async fn run_entry(
        &mut self,
        class: Class,
        entry: Entry,
        job_id: &str,
        first: Option<JobRecord>,
        early: Option<Search>,
        searcher: Option<Searcher>,
    ) -> Option<Searcher> {
        let job_id = job_id.to_owned();
        match self.start(&job_id, first).await {
            Ok(Start::Run(started)) => {
                self.running.fetch_add(1, Ordering::Relaxed);
                let (record, version) = *started;
                let search = match early {
                    Some(search) => search,
                    None => self.spawn_search(&record.spec, searcher),
                };
                let searcher = self.execute(class, &entry, record, version, search).await;
                self.running.fetch_sub(1, Ordering::Relaxed);
                self.job_done(class).await;
                searcher
            }
            Ok(Start::Done) => {
                let searcher = abandon(early, searcher).await;
                self.ack(class, &entry).await;
                searcher
            }
            Ok(Start::Busy) => abandon(early, searcher).await,
            Err(e) => {
                tracing::warn!(error = %e, job_id, "could not start a job; it will be retried");
                abandon(early, searcher).await
            }
        }
    }

    /// Starts a job's search on a blocking thread (with this slot's searcher, or a new one).
    fn spawn_search(&self, spec: &JobSpec, searcher: Option<Searcher>) -> Search {
        let mut searcher = searcher.unwrap_or_else(|| {
            Searcher::with_options(
                Variant::International,
                &SearchOptions {
                    tt_megabytes: self.config.hash_mb,
                    ..SearchOptions::default()
                },
            )
        });
        let tables = self.config.bitbases.current();
        let same = match (searcher.shelf(), &tables) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            searcher.set_shelf(tables);
        }
        let stop = searcher.stop_handle();
        stop.reset();
        let (progress_tx, progress) = watch::channel(None::<ProgressRec>);
        let spec = spec.clone();
        let cap = self.config.max_search;
        let stop_in_search = stop.clone();
        let handle = tokio::task::spawn_blocking(move || {
            let outcome = engine::run(&spec, &mut searcher, &stop_in_search, cap, |p| {
                progress_tx.send_replace(Some(p));
            });
            (outcome, searcher)
        });
        Search {
            handle,
            stop,
            progress,
            started: Instant::now(),
        }
    }

    /// Decides whether this slot runs the job, and marks it RUNNING if so. `first`: the record as
    /// first written, carried by a new job's entry.
    async fn start(&self, job_id: &str, first: Option<JobRecord>) -> AnalysisResult<Start> {
        let live = self.queue.live();
        let lease = contract::run_lease(job_id);
        let lease_time = self.queue.config().run_lease();
        let max_attempts = self.queue.config().max_attempts;
        let me = self.consumer.clone();
        let now = now_unix_ms();
        if let Some(first) = first.clone() {
            // A new job: the lease and the compare-and-set against the first version go out together
            // (one round trip of latency, no read). The set fails if anything changed the record
            // since (a merge, a cancel, another slot starting it), or if the submitter's write of it
            // has not landed yet: then the record is read below.
            let (leased, marked) = tokio::join!(
                live.lease(&lease, &self.consumer, lease_time),
                self.queue.update_once(job_id, (first, FIRST_VERSION), |r| {
                    mark_running(r, &me, now, max_attempts)
                })
            );
            match (leased, marked) {
                (Ok(true), Ok(Some((record, version)))) => {
                    return self.started(job_id, record, version).await;
                }
                // Another slot holds the lease (it took the entry over while this one was paused):
                // it will find the record changed and start the next attempt itself.
                (Ok(false), Ok(Some(_))) => return Ok(Start::Busy),
                // The record changed, or a call failed: decide from the record.
                _ => {}
            }
        }
        // The record's read and the run lease go out together (one round trip of latency): a lease
        // taken for a job with nothing left to run is released again.
        let (loaded, leased) = tokio::join!(
            self.queue.load(job_id),
            live.lease(&lease, &self.consumer, lease_time)
        );
        let leased = leased?;
        let loaded = match (loaded, first) {
            // The entry came before the record's write (the submitter sends both at once; on a
            // Redis Cluster they go to different primaries): the entry's copy is the record.
            (Ok(None), Some(first)) if first.expires_ms > now_unix_ms() => {
                self.queue.create_or_load(job_id, first).await
            }
            (loaded, _) => loaded,
        };
        let loaded = match loaded {
            Ok(Some((record, version))) if !record.state.is_final() => (record, version),
            other => {
                if leased {
                    let _ = live.release(&lease, &self.consumer).await;
                }
                return other.map(|_| Start::Done);
            }
        };
        if !leased {
            return Ok(Start::Busy);
        }
        let updated = self
            .queue
            .update_versioned(job_id, Some(loaded), |r| {
                mark_running(r, &me, now, max_attempts)
            })
            .await?;
        match updated {
            Some((record, true, version)) => self.started(job_id, record, version).await,
            Some((record, false, _)) => self.not_started(job_id, &record).await,
            None => {
                let _ = live.release(&lease, &self.consumer).await;
                Ok(Start::Done)
            }
        }
    }

    /// After this slot's compare-and-set of [`mark_running`] won: run it, or (out of attempts) it
    /// is FAILED now.
    async fn started(
        &self,
        job_id: &str,
        record: JobRecord,
        version: Version,
    ) -> AnalysisResult<Start> {
        if record.state == JobState::Running {
            return Ok(Start::Run(Box::new((record, version))));
        }
        self.not_started(job_id, &record).await
    }

    /// The job is not this slot's to run (final, or just marked FAILED): release its lease.
    async fn not_started(&self, job_id: &str, record: &JobRecord) -> AnalysisResult<Start> {
        let _ = self
            .queue
            .live()
            .release(&contract::run_lease(job_id), &self.consumer)
            .await;
        if record.state == JobState::Failed {
            metrics::counter!("analysis_jobs_failed_total").increment(1);
            self.queue
                .release_fingerprint(&record.fingerprint, job_id)
                .await;
        }
        Ok(Start::Done)
    }

    /// Runs a job this slot has marked RUNNING, to its end.
    #[tracing::instrument(skip_all, fields(job_id = %record.job_id, class = class.name(), attempt = record.attempts))]
    async fn execute(
        &mut self,
        class: Class,
        entry: &Entry,
        record: JobRecord,
        version: Version,
        search: Search,
    ) -> Option<Searcher> {
        draughts_runtime::propagation::set_parent_from_map(
            &tracing::Span::current(),
            &record.trace,
        );
        let job_id = record.job_id.clone();
        let attempt = record.attempts;
        let Search {
            handle,
            stop,
            progress: progress_rx,
            started,
        } = search;
        // The record as this slot last wrote it: the finish starts from it without a read (this
        // slot is the record's only writer while it runs the job, unless the job is cancelled or
        // joined, which the compare-and-set notices).
        let latest = Arc::new(Mutex::new(Some((record.clone(), version))));
        let writer = tokio::spawn(write_progress(
            self.queue.clone(),
            job_id.clone(),
            self.consumer.clone(),
            attempt,
            progress_rx,
            latest.clone(),
        ));
        let (done_tx, done_rx) = watch::channel(false);
        let guard = tokio::spawn(guard(
            self.queue.clone(),
            job_id.clone(),
            self.consumer.clone(),
            stop.clone(),
            self.stopping.clone(),
            self.config.shutdown_grace,
            done_rx,
        ));
        let joined = handle.await;
        let _ = done_tx.send(true);
        let (outcome, searcher) = match joined {
            Ok((Ok(_), searcher)) if stop.is_stopped() => (Outcome::Stopped, Some(searcher)),
            Ok((Ok(result), searcher)) => (Outcome::Finished(result), Some(searcher)),
            Ok((Err(e), searcher)) => (Outcome::BadInput(e.to_string()), Some(searcher)),
            Err(e) => (Outcome::Crashed(format!("the search failed: {e}")), None),
        };
        // Progress not yet written is superseded by the result: the finish does not wait for it.
        writer.abort();
        let _ = writer.await;
        let shutting_down = guard.await.unwrap_or(false);
        let latest = latest.lock().expect("latest record lock").take();
        metrics::histogram!("analysis_job_seconds", "class" => class.name())
            .record(started.elapsed().as_secs_f64());
        if let Err(e) = self
            .finish(class, entry, &record, latest, outcome, shutting_down)
            .await
        {
            tracing::warn!(error = %e, "finishing a job failed; it will be taken over");
        }
        searcher
    }

    async fn finish(
        &self,
        class: Class,
        entry: &Entry,
        record: &JobRecord,
        latest: Option<(JobRecord, Version)>,
        outcome: Outcome,
        shutting_down: bool,
    ) -> AnalysisResult<()> {
        // The attempt this slot started (the record as it marked it RUNNING).
        let attempt = record.attempts;
        let job_id = &record.job_id;
        let me = self.consumer.clone();
        let now = now_unix_ms();
        let live = self.queue.live();
        let lease = contract::run_lease(job_id);
        let mine = |r: &JobRecord| {
            r.state == JobState::Running
                && r.attempts == attempt
                && r.worker.as_deref() == Some(me.as_str())
        };
        let mut retry = false;
        let result = match &outcome {
            Outcome::Finished(result) => Some(result.clone()),
            _ => None,
        };
        let updated = self
            .queue
            .update_from(job_id, latest, |r| {
                if !mine(r) {
                    return false;
                }
                r.progress = None;
                r.worker = None;
                match &outcome {
                    Outcome::Finished(result) => {
                        r.state = JobState::Done;
                        r.result = Some(result.clone());
                        r.finished_ms = now;
                    }
                    Outcome::BadInput(reason) => {
                        r.state = JobState::Failed;
                        r.error = Some(reason.clone());
                        r.finished_ms = now;
                    }
                    Outcome::Crashed(reason) => {
                        r.state = JobState::Queued;
                        r.error = Some(reason.clone());
                        retry = true;
                    }
                    Outcome::Stopped => {
                        // Handed back at shutdown (the attempt does not count), or the lease was lost.
                        r.state = JobState::Queued;
                        r.attempts = r.attempts.saturating_sub(u32::from(shutting_down));
                        retry = true;
                    }
                }
                true
            })
            .await?;
        match updated {
            Some((after, true)) => {
                if retry {
                    // A fresh entry hands the job to the next free slot at once.
                    self.queue.requeue_entry(class, job_id).await?;
                }
                self.settle(class, entry, &after, result, retry).await;
            }
            Some((after, false)) if after.state.is_final() => {
                // Cancelled meanwhile (or finished by a slot that took over): nothing more to do.
                self.ack(class, entry).await;
                let _ = live.release(&lease, &self.consumer).await;
            }
            // Another slot runs this job now: leave its entry alone.
            Some(_) | None => {}
        }
        Ok(())
    }
}

impl Slot {
    /// Counts a job this slot ran; every 256th, the entries every group has been given and has
    /// acknowledged go (the caps only bite when a stream grows far past the queue's capacity).
    async fn job_done(&mut self, class: Class) {
        self.jobs_done += 1;
        if self.jobs_done.is_multiple_of(256) {
            let caps = draughts_store::StreamCaps {
                max_len: self
                    .queue
                    .config()
                    .capacity(class)
                    .saturating_mul(4)
                    .max(1024),
                max_age: self.queue.config().result_ttl,
            };
            let _ = self.queue.live().trim_consumed(class.stream(), caps).await;
        }
    }

    /// After a job's final (or handed-back) record is written: the acknowledgement, the run lease
    /// (released when the job goes back to the queue; a finished job's lease just expires, since its
    /// entry is acknowledged and nobody looks at it again), the fingerprint and the cache are
    /// independent of each other, so they go out together (one round trip of latency before this
    /// slot reads the queue again).
    async fn settle(
        &self,
        class: Class,
        entry: &Entry,
        after: &JobRecord,
        result: Option<JobResult>,
        handed_back: bool,
    ) {
        let live = self.queue.live();
        let job_id = &after.job_id;
        let release_lease = async {
            if handed_back {
                let _ = live
                    .release(&contract::run_lease(job_id), &self.consumer)
                    .await;
            }
        };
        let release_fingerprint = async {
            if after.state.is_final() {
                self.queue
                    .release_fingerprint(&after.fingerprint, job_id)
                    .await;
            }
        };
        let cache = async {
            if let (JobState::Done, Some(result)) = (after.state, result)
                && !after.fingerprint.is_empty()
            {
                let cached = CachedResult { v: VERSION, result };
                let key = contract::cache_key(&after.fingerprint);
                let _ = live
                    .put(
                        &key,
                        encode(&cached).into(),
                        None,
                        Some(self.queue.config().result_ttl),
                    )
                    .await;
            }
        };
        tokio::join!(
            self.ack(class, entry),
            release_lease,
            release_fingerprint,
            cache
        );
        metrics::counter!("analysis_jobs_finished_total", "class" => class.name(), "state" => state_name(after.state)).increment(1);
    }
}

fn state_name(state: JobState) -> &'static str {
    match state {
        JobState::Queued => "queued",
        JobState::Running => "running",
        JobState::Done => "done",
        JobState::Failed => "failed",
        JobState::Cancelled => "cancelled",
    }
}

/// The version of a record as first written (a create-only put starts at 1).
const FIRST_VERSION: Version = 1;
/// A new job whose search ends within this long of its entry's arrival is committed in one write
/// ([`Slot::quick_commit`]): levels 1-5 of a computer move (depth 1-5) take microseconds to about
/// a millisecond here. A longer job's start (lease, RUNNING) goes out this much later, while its
/// search runs.
const QUICK_COMMIT: Duration = Duration::from_millis(2);

/// The change that starts attempt n+1 of a job for slot `me`, or marks it FAILED when its attempts
/// are used up. `false`: the job is final, nothing to change.
fn mark_running(r: &mut JobRecord, me: &str, now: u64, max_attempts: u32) -> bool {
    if r.state.is_final() {
        return false;
    }
    if r.attempts >= max_attempts {
        let reason = r
            .error
            .clone()
            .unwrap_or_else(|| format!("its worker was lost {} times", r.attempts));
        r.state = JobState::Failed;
        r.error = Some(format!("gave up after {} attempts: {reason}", r.attempts));
        r.finished_ms = now;
        r.progress = None;
        return true;
    }
    r.state = JobState::Running;
    r.attempts += 1;
    r.worker = Some(me.to_owned());
    r.started_ms = now;
    r.progress = None;
    true
}

enum Start {
    /// This slot runs the job: the record as it marked it RUNNING, and its version.
    Run(Box<(JobRecord, Version)>),
    /// Nothing to run: ack the entry.
    Done,
    /// Another slot holds the run lease: leave the entry.
    Busy,
}

/// A search running on a blocking thread: its result and the searcher come back from `handle`.
struct Search {
    handle: tokio::task::JoinHandle<(Result<JobResult, engine::JobInputError>, Searcher)>,
    stop: StopHandle,
    progress: watch::Receiver<Option<ProgressRec>>,
    started: Instant,
}

/// Stops an early search whose job this slot does not run, and takes its searcher back.
async fn abandon(early: Option<Search>, searcher: Option<Searcher>) -> Option<Searcher> {
    let Some(search) = early else {
        return searcher;
    };
    search.stop.stop();
    search.handle.await.ok().map(|(_, searcher)| searcher)
}

/// Writes each progress update into the record while the attempt is this slot's.
async fn write_progress(
    queue: Queue,
    job_id: String,
    consumer: String,
    attempt: u32,
    mut rx: watch::Receiver<Option<ProgressRec>>,
    latest: Arc<Mutex<Option<(JobRecord, Version)>>>,
) {
    // A short job's progress is superseded by its result before anyone could read it: writing it
    // would only cost a round trip (and make the finish's compare-and-set race with it).
    tokio::time::sleep(SHORT_JOB).await;
    while rx.changed().await.is_ok() {
        let Some(progress) = rx.borrow_and_update().clone() else {
            continue;
        };
        let from = latest.lock().expect("latest record lock").take();
        let result = queue
            .update_versioned(&job_id, from, |r| {
                if r.state != JobState::Running
                    || r.attempts != attempt
                    || r.worker.as_deref() != Some(consumer.as_str())
                {
                    return false;
                }
                r.progress = Some(progress.clone());
                true
            })
            .await;
        match result {
            Ok(Some((record, _, version))) => {
                *latest.lock().expect("latest record lock") = Some((record, version));
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(error = %e, "progress write failed"),
        }
    }
}

/// Keeps the run lease while the search runs; stops the search on cancel, on a lost lease, or when
/// the shutdown grace has passed. Returns whether it stopped the search for shutdown.
async fn guard(
    queue: Queue,
    job_id: String,
    consumer: String,
    stop: StopHandle,
    mut stopping: watch::Receiver<bool>,
    grace: Duration,
    mut done: watch::Receiver<bool>,
) -> bool {
    let lease_time = queue.config().run_lease();
    let renew_every = lease_time / 3;
    // Short jobs (computer moves) end before a subscription would pay off: subscribe to the job's
    // wake-ups only once it has run for a while (a subscription is a connection on Redis).
    tokio::select! {
        _ = async { let _ = done.wait_for(|d| *d).await; } => return false,
        _ = tokio::time::sleep(SHORT_JOB) => {}
    }
    let mut events = queue
        .live()
        .subscribe(&contract::events_channel(&job_id))
        .await
        .ok();
    let mut shutdown_at: Option<Instant> = None;
    // Renewals keep their own schedule: the job's events (a game analysis publishes one per ply)
    // must not push them back, or the lease lapses while the search runs.
    let mut renew_at = Instant::now() + renew_every;
    // A game analysis's record grows with every ply: it is read again at most once per renewal
    // period (a cancel is still seen within that), not on every progress event.
    let mut checked_at = Instant::now();
    loop {
        let event = async {
            match events.as_mut() {
                Some(sub) => {
                    if sub.next().await.is_none() {
                        // The subscription ended: renewals still read the record.
                        std::future::pending::<()>().await
                    }
                }
                None => std::future::pending::<()>().await,
            }
        };
        let shutdown_timer = async {
            match shutdown_at {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = async { let _ = done.wait_for(|d| *d).await; } => return false,
            _ = event => {}
            _ = tokio::time::sleep_until(renew_at.into()) => {
                renew_at = Instant::now() + renew_every;
                match queue.live().lease(&contract::run_lease(&job_id), &consumer, lease_time).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(job_id, "run lease lost: stopping the search");
                        stop.stop();
                        return false;
                    }
                    Err(e) => tracing::warn!(error = %e, "lease renewal failed"),
                }
            }
            _ = async { let _ = stopping.wait_for(|s| *s).await; }, if shutdown_at.is_none() => {
                shutdown_at = Some(Instant::now() + grace);
                continue;
            }
            _ = shutdown_timer => {
                stop.stop();
                return true;
            }
        }
        // A wake-up or a renewal: is the job still wanted?
        if checked_at.elapsed() < renew_every {
            continue;
        }
        checked_at = Instant::now();
        if let Ok(Some((record, _))) = queue.load(&job_id).await
            && record.state.is_final()
        {
            stop.stop();
            return false;
        }
    }
}
