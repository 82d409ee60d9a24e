//! The job queue over [`LiveStore`]: submission (with merging of identical pending requests and the
//! evaluation cache), job records, cancellation, places in the queue and the queue's status. The worker
//! side (pulling in priority order, taking over a dead worker's job, finishing exactly once) is in
//! [`crate::worker`]; both sides read and write only the types of [`crate::contract`].
//!
//! - One stream per class, one consumer group ([`contract::GROUP`]) shared by every worker: each entry
//!   is delivered to one worker; workers read the classes in priority order, so a computer move is
//!   always taken before any interactive or bulk job, and within a class the oldest entry first.
//! - The record (`analysis-job:{id}`) is the truth: every state change is a compare-and-set on its
//!   version, followed by a wake-up on `analysis-events:<id>`; a lost wake-up costs latency, not state.
//! - Merging: a request with a fingerprint (rules, position, moves, limits) first takes the key
//!   `analysis-dedup:<fingerprint>` (create-only); a second identical request finds it, and joins the
//!   job as another owner while it is not final.
//! - Cache: a finished job with a fingerprint leaves its result under `analysis-cache:<fingerprint>`
//!   for the result TTL; an identical request is answered from it at once, without a search.
//! - Capacity: a class with `max_queued` jobs waiting (the guest class: `max_queued_guest`) refuses
//!   more (RESOURCE_EXHAUSTED): the streams
//!   never grow without bound; workers remove the entries every group has acknowledged
//!   (`trim_consumed`, capped at `4 * max_queued` entries and the result TTL).
//! - Data loss: should the live store lose its data (Redis restarted without its append-only file, or
//!   flushed), the consumer groups are gone and every group command fails with NOGROUP. Whoever meets
//!   that (a submission, QueueStatus, a worker's read) creates the groups again
//!   ([`Queue::ensure_groups`]) and retries once, so the queue goes on without a restart; jobs that were
//!   queued or running when the data went are lost with it (their callers time out).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use draughts_proto::ids::PlayerId;
use draughts_store::cas::{self, Change, Retry};
use draughts_store::{EntryId, ErrorCode, LiveStore, StoreError, Version, now_unix_ms};
use sha2::Digest;

use crate::contract::{
    self, CachedResult, Class, Finished, JobEntry, JobEvent, JobRecord, JobSpec, JobState, VERSION,
    decode, encode,
};
use crate::error::{AnalysisError, AnalysisResult};

/// How many compare-and-set tries an update makes before giving up ([`AnalysisError::Contended`]).
const CAS_TRIES: Retry = Retry::times(32);
/// The longest scan for a job's place in its class (further back it reports this many).
const MAX_POSITION_SCAN: usize = 1000;

/// Why one try at a fingerprint ([`Queue::take_or_join`]) did not settle it.
enum TakeOrJoin {
    /// Its holder went or finished between the tries' steps: try again.
    Lost,
    Failed(AnalysisError),
}

/// Settings of the queue, shared by the edge and the workers.
#[derive(Clone, Debug)]
pub struct QueueConfig {
    /// How long jobs, results and cache entries are kept.
    pub result_ttl: Duration,
    /// How long a delivered job's entry stays with its worker before another worker checks whether
    /// that worker is still alive (its run lease) and takes the job over if not.
    pub visibility_timeout: Duration,
    /// Attempts before a job is marked failed.
    pub max_attempts: u32,
    /// Jobs waiting per class before new ones are refused.
    pub max_queued: u64,
    /// Jobs waiting in the guest class before new ones are refused (the class as a whole is bounded
    /// well below the others: guests cost nothing to make).
    pub max_queued_guest: u64,
}

impl QueueConfig {
    /// Short timeouts for tests.
    pub fn for_tests() -> QueueConfig {
        QueueConfig {
            result_ttl: Duration::from_secs(600),
            visibility_timeout: Duration::from_millis(600),
            max_attempts: 3,
            max_queued: 1000,
            max_queued_guest: 1000,
        }
    }

    /// Jobs `class` may have waiting.
    pub fn capacity(&self, class: Class) -> u64 {
        match class {
            Class::Guest => self.max_queued_guest,
            _ => self.max_queued,
        }
    }

    /// The lease a running job's worker keeps renewing: half the visibility timeout, at least 200 ms.
    pub fn run_lease(&self) -> Duration {
        (self.visibility_timeout / 2).max(Duration::from_millis(200))
    }
}

/// A job to submit.
#[derive(Clone, Debug)]
pub struct NewJob {
    /// Chosen by the caller (see [`Queue::new_job_id`]) so it can subscribe before submitting.
    pub job_id: String,
    pub class: Class,
    pub spec: JobSpec,
    /// The caller's player id (`None`: a server job without owner).
    pub owner: Option<PlayerId>,
    /// Merge identical pending requests and answer from the cache.
    pub mergeable: bool,
    pub trace: HashMap<String, String>,
}

/// How a submission was answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Submitted {
    /// A new job, queued.
    Queued(JobRecord),
    /// Joined an identical queued or running job.
    Merged(JobRecord),
    /// Answered from the evaluation cache (the record is DONE).
    Cached(JobRecord),
}

impl Submitted {
    pub fn record(&self) -> &JobRecord {
        match self {
            Submitted::Queued(r) | Submitted::Merged(r) | Submitted::Cached(r) => r,
        }
    }
}

/// Counts of one class.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassStatus {
    pub queued: u64,
    pub oldest_wait_ms: u64,
    pub running: u64,
}

/// What QueueStatus reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueReport {
    pub classes: Vec<(Class, ClassStatus)>,
    pub live_workers: u32,
    pub worker_slots: u32,
    pub running_jobs: u32,
}

/// The fingerprint of a request: what makes two requests identical (rules, position and moves,
/// limits, kind). 32 hex digits of SHA-256 over the spec's JSON.
pub fn fingerprint(spec: &JobSpec) -> String {
    let digest = sha2::Sha256::digest(encode(spec));
    hex::encode(&digest[..16])
}

/// The queue on a live store. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Queue {
    live: Arc<dyn LiveStore>,
    config: QueueConfig,
}

impl Queue {
    /// The queue on `live`; creates the consumer groups (idempotent).
    pub async fn new(live: Arc<dyn LiveStore>, config: QueueConfig) -> AnalysisResult<Queue> {
        let queue = Queue { live, config };
        queue.ensure_groups().await?;
        Ok(queue)
    }

    /// Creates every class's consumer group where it is missing (an existing group is left as it is).
    pub async fn ensure_groups(&self) -> Result<(), StoreError> {
        for class in Class::ALL {
            self.live
                .ensure_group(class.stream(), contract::GROUP)
                .await?;
        }
        Ok(())
    }

    /// Runs `op` (a command on the class streams' group); when it fails because the group is missing
    /// (the store lost its data), creates the groups again and runs it once more.
    pub(crate) async fn regrouped<T, Fut>(
        &self,
        mut op: impl FnMut() -> Fut,
    ) -> Result<T, StoreError>
    where
        Fut: Future<Output = Result<T, StoreError>>,
    {
        match op().await {
            Err(e) if group_missing(&e) => {
                tracing::warn!(error = %e, "analysis queue: consumer group missing (the live store lost its data?); creating the groups again");
                metrics::counter!("analysis_groups_recreated_total").increment(1);
                self.ensure_groups().await?;
                op().await
            }
            other => other,
        }
    }

    pub fn live(&self) -> &Arc<dyn LiveStore> {
        &self.live
    }

    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// A fresh job id: 32 hex digits (128 random bits, so ids are not guessable).
    pub fn new_job_id() -> String {
        hex::encode(rand::random::<[u8; 16]>())
    }

    fn ttl(&self) -> Duration {
        self.config.result_ttl
    }

    fn expires_ms(&self) -> u64 {
        now_unix_ms().saturating_add(u64::try_from(self.ttl().as_millis()).unwrap_or(u64::MAX))
    }

    /// The record of a job and its version (`None`: unknown or expired).
    pub async fn load(&self, job_id: &str) -> AnalysisResult<Option<(JobRecord, Version)>> {
        match self.live.get(&contract::job_key(job_id)).await? {
            Some((bytes, version)) => Ok(Some((decode(&bytes)?, version))),
            None => Ok(None),
        }
    }

    /// Writes a new job's first record (carried in its entry) unless it exists: the record and its
    /// version as they are now (`None`: it was there and has gone since).
    pub(crate) async fn create_or_load(
        &self,
        job_id: &str,
        first: JobRecord,
    ) -> AnalysisResult<Option<(JobRecord, Version)>> {
        match self
            .live
            .put(
                &contract::job_key(job_id),
                encode(&first).into(),
                None,
                Some(self.ttl()),
            )
            .await
        {
            Ok(version) => Ok(Some((first, version))),
            Err(StoreError::Conflict { .. }) => self.load(job_id).await,
            Err(e) => Err(e.into()),
        }
    }

    /// Applies `change` to the record with compare-and-set, retrying on a lost race. `change` returns
    /// whether it changed anything (`false`: nothing is written). Returns the record after the call
    /// and whether this call changed it; `None` when the record does not exist.
    pub async fn update(
        &self,
        job_id: &str,
        change: impl FnMut(&mut JobRecord) -> bool,
    ) -> AnalysisResult<Option<(JobRecord, bool)>> {
        self.update_from(job_id, None, change).await
    }

    /// [`update`](Queue::update) starting from a record just read (saves a read when it is current).
    pub async fn update_from(
        &self,
        job_id: &str,
        loaded: Option<(JobRecord, Version)>,
        change: impl FnMut(&mut JobRecord) -> bool,
    ) -> AnalysisResult<Option<(JobRecord, bool)>> {
        Ok(self
            .update_versioned(job_id, loaded, change)
            .await?
            .map(|(record, changed, _)| (record, changed)))
    }

    /// [`update_from`](Queue::update_from) that also returns the record's version after the call,
    /// so that a writer that is the record's only writer (a worker running its job) can make its
    /// next change without reading the record first.
    pub async fn update_versioned(
        &self,
        job_id: &str,
        loaded: Option<(JobRecord, Version)>,
        mut change: impl FnMut(&mut JobRecord) -> bool,
    ) -> AnalysisResult<Option<(JobRecord, bool, Version)>> {
        let codec = (
            |bytes: &[u8]| decode::<JobRecord>(bytes).map_err(AnalysisError::from),
            |record: &JobRecord| Ok::<_, AnalysisError>(Bytes::from(encode(record))),
        );
        let updated = cas::update_versioned(
            self.live.as_ref(),
            &contract::job_key(job_id),
            &codec,
            CAS_TRIES,
            loaded,
            |current| {
                let Some(mut record) = current else {
                    return Ok(Change::Keep(None));
                };
                if !change(&mut record) {
                    return Ok(Change::Keep(Some((record, false))));
                }
                record.expires_ms = self.expires_ms();
                Ok(Change::Write {
                    effects: self.wake_ups(job_id, &record),
                    ttl: Some(self.ttl()),
                    value: record.clone(),
                    then: Some((record, true)),
                })
            },
        )
        .await;
        match updated {
            Ok((Some((record, changed)), Some(version))) => Ok(Some((record, changed, version))),
            // A record is only ever given with its version.
            Ok(_) => Ok(None),
            Err(AnalysisError::Store(StoreError::Conflict { .. })) => Err(AnalysisError::Contended),
            Err(e) => Err(e),
        }
    }

    /// One compare-and-set of a record already read at `version` (no read, no retry): the record
    /// after `change` and its new version, or `None` when it changed meanwhile (or `change` changed
    /// nothing).
    pub async fn update_once(
        &self,
        job_id: &str,
        (mut record, version): (JobRecord, Version),
        change: impl FnOnce(&mut JobRecord) -> bool,
    ) -> AnalysisResult<Option<(JobRecord, Version)>> {
        if !change(&mut record) {
            return Ok(None);
        }
        Ok(self
            .write(job_id, &mut record, version)
            .await?
            .map(|version| (record, version)))
    }

    /// Writes a changed record over `version` with its wake-ups (the job's event; when it is final,
    /// the finished notice). `None`: the record is no longer at `version`.
    async fn write(
        &self,
        job_id: &str,
        record: &mut JobRecord,
        version: Version,
    ) -> AnalysisResult<Option<Version>> {
        record.expires_ms = self.expires_ms();
        let effects = self.wake_ups(job_id, record);
        match self
            .live
            .put_with(
                &contract::job_key(job_id),
                encode(&*record).into(),
                Some(version),
                Some(self.ttl()),
                &effects,
            )
            .await
        {
            Ok(version) => Ok(Some(version)),
            Err(StoreError::Conflict { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The wake-ups of a record's write: the job's event; when it is final, the finished notice.
    fn wake_ups(&self, job_id: &str, record: &JobRecord) -> Vec<draughts_store::Effect> {
        let mut effects = vec![draughts_store::Effect::Publish {
            channel: contract::events_channel(job_id),
            payload: encode(&JobEvent {
                v: VERSION,
                state: record.state,
            })
            .into(),
        }];
        if record.state.is_final() {
            // A computer move's caller answers from the notice: no read after the wake-up.
            let carried =
                matches!(record.spec, JobSpec::BestMove { .. }).then(|| Box::new(record.clone()));
            effects.push(draughts_store::Effect::Publish {
                channel: contract::FINISHED_CHANNEL.into(),
                payload: encode(&Finished {
                    v: VERSION,
                    job_id: job_id.to_owned(),
                    record: carried,
                })
                .into(),
            });
        }
        effects
    }

    /// Submits a job: from the cache, merged into an identical pending job, or queued.
    pub async fn submit(&self, job: NewJob) -> AnalysisResult<Submitted> {
        self.submit_gated(job, async { Ok(()) }).await
    }

    /// [`submit`](Queue::submit) after `gate` (a quota count) has let it through. For a job that is
    /// not mergeable (a BestMove) the gate runs alongside the job's one round trip to the store
    /// instead of before it: if it refuses, the job is withdrawn (cancelled if it was queued, so a
    /// worker drops it or stops it at once) and the gate's error returned.
    pub async fn submit_gated(
        &self,
        job: NewJob,
        gate: impl Future<Output = AnalysisResult<()>>,
    ) -> AnalysisResult<Submitted> {
        if job.mergeable {
            gate.await?;
            return self.submit_mergeable(job).await;
        }
        let record = self.new_record(
            job.job_id,
            job.class,
            job.spec,
            job.owner.clone(),
            String::new(),
            job.trace,
        );
        self.enqueue_new(record, job.owner.as_deref(), false, gate)
            .await
    }

    /// The first record of a new job.
    fn new_record(
        &self,
        job_id: String,
        class: Class,
        spec: JobSpec,
        owner: Option<PlayerId>,
        fingerprint: String,
        trace: HashMap<String, String>,
    ) -> JobRecord {
        JobRecord {
            v: VERSION,
            job_id,
            class,
            spec,
            state: JobState::Queued,
            owners: owner.into_iter().collect(),
            fingerprint,
            created_ms: now_unix_ms(),
            started_ms: 0,
            finished_ms: 0,
            attempts: 0,
            worker: None,
            entry_id: None,
            error: None,
            progress: None,
            result: None,
            trace,
            expires_ms: self.expires_ms(),
        }
    }

    /// A mergeable job: from the cache, merged into an identical pending job, or queued.
    async fn submit_mergeable(&self, job: NewJob) -> AnalysisResult<Submitted> {
        let fingerprint = fingerprint(&job.spec);
        let now = now_unix_ms();
        let mut record = self.new_record(
            job.job_id,
            job.class,
            job.spec,
            job.owner.clone(),
            fingerprint.clone(),
            job.trace,
        );
        if let Some((bytes, _)) = self.live.get(&contract::cache_key(&fingerprint)).await? {
            match decode::<CachedResult>(&bytes) {
                Ok(cached) => {
                    record.state = JobState::Done;
                    record.result = Some(cached.result);
                    record.finished_ms = now;
                    self.live
                        .put(
                            &contract::job_key(&record.job_id),
                            encode(&record).into(),
                            None,
                            Some(self.ttl()),
                        )
                        .await?;
                    metrics::counter!("analysis_cache_hits_total").increment(1);
                    return Ok(Submitted::Cached(record));
                }
                Err(e) => tracing::warn!(error = %e, "unreadable cache entry ignored"),
            }
        }
        // Take the fingerprint, or join whoever holds it (a holder gone or finished meanwhile is a
        // lost race: its key is freed and taken again). After the last try the job queues unmerged.
        let key = contract::dedup_key(&fingerprint);
        let owner = job.owner.as_ref();
        let taken = cas::retry(
            CAS_TRIES,
            |e| matches!(e, TakeOrJoin::Lost),
            || self.take_or_join(&key, &record.job_id, owner),
        )
        .await;
        match taken {
            Ok(Some(merged)) => {
                metrics::counter!("analysis_merged_total").increment(1);
                return Ok(Submitted::Merged(merged));
            }
            Ok(None) | Err(TakeOrJoin::Lost) => {}
            Err(TakeOrJoin::Failed(e)) => return Err(e),
        }
        self.enqueue_new(record, job.owner.as_deref(), true, async { Ok(()) })
            .await
    }

    /// One try at the fingerprint `key`: taken for `job_id` (`None`), or the pending job that holds
    /// it, joined by `owner`; [`TakeOrJoin::Lost`] when the holder is gone or finished (its key is
    /// freed for the next try).
    async fn take_or_join(
        &self,
        key: &str,
        job_id: &str,
        owner: Option<&PlayerId>,
    ) -> Result<Option<JobRecord>, TakeOrJoin> {
        match self
            .live
            .put(key, job_id.to_owned().into(), None, Some(self.ttl()))
            .await
        {
            Ok(_) => return Ok(None),
            Err(StoreError::Conflict { .. }) => {}
            Err(e) => return Err(TakeOrJoin::Failed(e.into())),
        }
        let holder = self
            .live
            .get(key)
            .await
            .map_err(|e| TakeOrJoin::Failed(e.into()))?;
        let Some((holder, _)) = holder else {
            return Err(TakeOrJoin::Lost);
        };
        let holder = String::from_utf8_lossy(&holder).into_owned();
        let joined = self
            .update(&holder, |r| {
                if r.state.is_final() {
                    return false;
                }
                match owner {
                    Some(o) if !r.owners.contains(o) => {
                        r.owners.push(o.clone());
                        true
                    }
                    _ => false,
                }
            })
            .await
            .map_err(TakeOrJoin::Failed)?;
        match joined {
            Some((r, _)) if !r.state.is_final() => Ok(Some(r)),
            // The holder is finished or gone: free the fingerprint and try again.
            _ => {
                let _ = self.live.delete(key).await;
                Err(TakeOrJoin::Lost)
            }
        }
    }

    /// A new job's record and its entry go out together (one round trip of latency), with `gate`
    /// alongside. The entry carries the record, and the append checks the class's capacity in the
    /// same atomic step ([`LiveStore::append_bounded`]). Should a worker take the entry before the
    /// record's write has landed (different Redis Cluster slots, no order between them), it writes
    /// the record from the entry itself ([`crate::worker`]), and whichever write comes second finds
    /// it there. A refused gate withdraws the owner (the job is cancelled before it runs, or stopped).
    async fn enqueue_new(
        &self,
        record: JobRecord,
        owner: Option<&str>,
        mergeable: bool,
        gate: impl Future<Output = AnalysisResult<()>>,
    ) -> AnalysisResult<Submitted> {
        let key = contract::job_key(&record.job_id);
        let entry = JobEntry {
            v: VERSION,
            job_id: record.job_id.clone(),
            record: Some(Box::new(record.clone())),
        };
        let payload: draughts_store::Bytes = encode(&entry).into();
        let (gate, written, appended) = tokio::join!(
            gate,
            self.live
                .put(&key, encode(&record).into(), None, Some(self.ttl())),
            self.regrouped(|| self.live.append_bounded(
                record.class.stream(),
                contract::GROUP,
                self.config.capacity(record.class),
                payload.clone(),
            ))
        );
        let queued = match appended {
            Ok(Some(_)) => true,
            Ok(None) => false,
            Err(e) => {
                self.withdraw(&record, written.is_ok(), mergeable).await;
                return Err(e.into());
            }
        };
        if !queued {
            self.withdraw(&record, written.is_ok(), mergeable).await;
            gate?;
            return Err(AnalysisError::Exhausted {
                what: format!("the {} queue is full", record.class.name()),
                retry_after_secs: 5,
            });
        }
        match written {
            // Conflict: the worker that took the entry wrote the record first.
            Ok(_) | Err(StoreError::Conflict { .. }) => {}
            Err(e) => {
                // One more try; failing that, the worker writes it from the entry.
                match self
                    .live
                    .put(&key, encode(&record).into(), None, Some(self.ttl()))
                    .await
                {
                    Ok(_) | Err(StoreError::Conflict { .. }) => {}
                    Err(_) => return Err(e.into()),
                }
            }
        }
        metrics::counter!("analysis_jobs_submitted_total", "class" => record.class.name())
            .increment(1);
        if let Err(refused) = gate {
            let _ = self.cancel(&record.job_id, owner).await;
            return Err(refused);
        }
        Ok(Submitted::Queued(record))
    }

    /// Undoes a submission that was not queued: its record (if written) and its fingerprint.
    async fn withdraw(&self, record: &JobRecord, written: bool, mergeable: bool) {
        if written {
            let _ = self.live.delete(&contract::job_key(&record.job_id)).await;
        }
        if mergeable {
            self.release_fingerprint(&record.fingerprint, &record.job_id)
                .await;
        }
    }

    /// Appends an entry for a job handed back at shutdown to its class stream, whatever its
    /// capacity (the job was queued once already). The append itself wakes an idle worker.
    pub(crate) async fn requeue_entry(&self, class: Class, job_id: &str) -> AnalysisResult<()> {
        let entry = JobEntry {
            v: VERSION,
            job_id: job_id.to_owned(),
            record: None,
        };
        self.live
            .append(class.stream(), encode(&entry).into())
            .await?;
        Ok(())
    }

    /// Deletes the fingerprint's dedup key if it still names `job_id`.
    pub(crate) async fn release_fingerprint(&self, fingerprint: &str, job_id: &str) {
        if fingerprint.is_empty() {
            return;
        }
        let key = contract::dedup_key(fingerprint);
        if let Ok(Some((holder, _))) = self.live.get(&key).await
            && holder.as_ref() == job_id.as_bytes()
        {
            let _ = self.live.delete(&key).await;
        }
    }

    /// Withdraws `owner`'s interest (`None`: the server cancels it outright). When no owner is left
    /// the job is cancelled (a running worker sees it and stops). Returns the record after the call.
    pub async fn cancel(&self, job_id: &str, owner: Option<&str>) -> AnalysisResult<JobRecord> {
        let updated = self
            .update(job_id, |r| {
                if r.state.is_final() {
                    return false;
                }
                if let Some(o) = owner {
                    r.owners.retain(|x| x != o);
                } else {
                    r.owners.clear();
                }
                if r.owners.is_empty() {
                    r.state = JobState::Cancelled;
                    r.finished_ms = now_unix_ms();
                    r.progress = None;
                }
                true
            })
            .await?;
        let (record, _) = updated.ok_or_else(|| AnalysisError::NoJob(job_id.to_owned()))?;
        if record.state == JobState::Cancelled {
            self.release_fingerprint(&record.fingerprint, job_id).await;
            metrics::counter!("analysis_jobs_cancelled_total").increment(1);
        }
        Ok(record)
    }

    /// Jobs ahead of a queued job: every job waiting in a higher class, and those before it in its own
    /// (scanned up to `MAX_POSITION_SCAN`). 0 for a job that is not queued.
    pub async fn queue_position(&self, record: &JobRecord) -> AnalysisResult<u64> {
        if record.state != JobState::Queued {
            return Ok(0);
        }
        let mut ahead = 0;
        for class in Class::ALL {
            let backlog = self
                .regrouped(|| self.live.backlog(class.stream(), contract::GROUP))
                .await?;
            if class < record.class {
                ahead += backlog.waiting;
                continue;
            }
            if class > record.class {
                break;
            }
            let Some(oldest) = backlog.oldest else {
                break;
            };
            let entries = self
                .live
                .range(class.stream(), predecessor(oldest), MAX_POSITION_SCAN)
                .await?;
            let mine = entries.iter().position(|e| {
                decode::<JobEntry>(&e.payload).is_ok_and(|entry| entry.job_id == record.job_id)
            });
            ahead += mine.unwrap_or(entries.len()) as u64;
        }
        Ok(ahead)
    }

    /// Queue depth and oldest wait per class, running jobs and live workers.
    pub async fn status(&self) -> AnalysisResult<QueueReport> {
        let now = now_unix_ms();
        let mut status = QueueReport::default();
        for class in Class::ALL {
            let backlog = self
                .regrouped(|| self.live.backlog(class.stream(), contract::GROUP))
                .await?;
            let running = self
                .regrouped(|| self.live.pending_count(class.stream(), contract::GROUP))
                .await?;
            status.classes.push((
                class,
                ClassStatus {
                    queued: backlog.waiting,
                    oldest_wait_ms: backlog.oldest.map_or(0, |id| now.saturating_sub(id.ms)),
                    running,
                },
            ));
        }
        let since = EntryId::new(now.saturating_sub(crate::worker::LIVE_WINDOW_MS), 0);
        let beats = self
            .live
            .range(contract::WORKERS_STREAM, Some(since), 10_000)
            .await?;
        let mut latest: HashMap<String, contract::Heartbeat> = HashMap::new();
        for entry in beats {
            if let Ok(beat) = decode::<contract::Heartbeat>(&entry.payload) {
                latest.insert(beat.worker.clone(), beat);
            }
        }
        status.live_workers = latest.len() as u32;
        status.worker_slots = latest.values().map(|b| b.slots).sum();
        status.running_jobs = latest.values().map(|b| b.running).sum();
        Ok(status)
    }
}

/// Whether a group command failed because its consumer group (or its stream) does not exist: the only
/// NotFound a stream command of the live store answers (NOGROUP on Redis).
pub(crate) fn group_missing(e: &StoreError) -> bool {
    e.code() == ErrorCode::NotFound
}

/// The id just before `id`, so that a range "after" it starts at `id`.
fn predecessor(id: EntryId) -> Option<EntryId> {
    if id.seq > 0 {
        Some(EntryId::new(id.ms, id.seq - 1))
    } else if id.ms > 0 {
        Some(EntryId::new(id.ms - 1, u64::MAX))
    } else {
        None
    }
}
