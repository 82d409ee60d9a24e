//! The domain of the Analysis API, with no tonic types: who may submit what (quotas, caps), building
//! jobs, reading them for their owners, cancelling, BestMove's wait for its answer, the queue status.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use draughts_proto::ids::PlayerId;

use draughts_store::now_unix_ms;
use futures_util::StreamExt;

use crate::contract::{
    self, BestMoveResult, Class, JobLimits, JobRecord, JobResult, JobSpec, JobState, Line,
};
use crate::error::{AnalysisError, AnalysisResult};
use crate::games::GameSource;
use crate::queue::{NewJob, Queue, QueueReport, Submitted};
use crate::quota::{Caller, Counter, Quotas};

/// How long BestMove polls the record between wake-ups (a lost wake-up costs at most this).
const BEST_MOVE_POLL: Duration = Duration::from_millis(200);

/// Wakes the BestMove callers of this process when their job is final: ONE subscription to
/// [`contract::FINISHED_CHANNEL`] per process (a subscription per call would be a Redis connection
/// per call), dispatched to the waiting calls by job id. A lost wake-up costs a poll interval.
#[derive(Clone, Debug)]
pub struct Waiter {
    waiting: Arc<Mutex<HashMap<String, tokio::sync::oneshot::Sender<Option<JobRecord>>>>>,
}

impl Waiter {
    /// Starts the subscription task (it resubscribes when the connection is lost).
    pub fn start(live: Arc<dyn draughts_store::LiveStore>) -> Waiter {
        let waiter = Waiter {
            waiting: Arc::new(Mutex::new(HashMap::new())),
        };
        let waiting = Arc::downgrade(&waiter.waiting);
        tokio::spawn(async move {
            loop {
                let Ok(mut sub) = live.subscribe(contract::FINISHED_CHANNEL).await else {
                    tokio::time::sleep(BEST_MOVE_POLL).await;
                    continue;
                };
                while let Some(notice) = sub.next().await {
                    let Some(waiting) = waiting.upgrade() else {
                        return;
                    };
                    match notice {
                        draughts_store::Notice::Message(payload) => {
                            let notice = contract::Finished::read(&payload);
                            let sender =
                                waiting.lock().expect("waiter lock").remove(&notice.job_id);
                            if let Some(sender) = sender {
                                let _ = sender.send(notice.record.map(|record| *record));
                            }
                        }
                        // Wake-ups may have been lost: every caller re-reads its record.
                        draughts_store::Notice::Gap => {
                            let senders: Vec<_> = waiting
                                .lock()
                                .expect("waiter lock")
                                .drain()
                                .map(|(_, sender)| sender)
                                .collect();
                            for sender in senders {
                                let _ = sender.send(None);
                            }
                        }
                    }
                }
                if waiting.strong_count() == 0 {
                    return;
                }
            }
        });
        waiter
    }

    /// The caller's wake-up: the final record when the notice carries it.
    fn register(&self, job_id: &str) -> tokio::sync::oneshot::Receiver<Option<JobRecord>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.waiting
            .lock()
            .expect("waiter lock")
            .insert(job_id.to_owned(), tx);
        rx
    }

    fn forget(&self, job_id: &str) {
        self.waiting.lock().expect("waiter lock").remove(job_id);
    }
}

/// What BestMove should play at.
#[derive(Clone, Debug)]
pub enum Strength {
    Level(u8),
    Limits {
        depth: u32,
        nodes: u64,
        movetime_ms: u64,
    },
}

/// The Analysis API's domain.
#[derive(Clone, Debug)]
pub struct AnalysisCore {
    pub queue: Queue,
    pub quotas: Quotas,
    pub games: Arc<dyn GameSource>,
    /// Longest wait of a BestMove call for its answer.
    pub best_move_timeout: Duration,
    pub waiter: Waiter,
    /// Open WatchAnalysis streams on this replica, per caller and in all.
    pub watches: Arc<draughts_runtime::admission::Admission>,
    /// Guests' BestMove calls in flight on this replica.
    pub guests: crate::quota::GuestLimits,
}

impl AnalysisCore {
    /// The line of a game, after `ply` plies (`None`: all of it).
    pub async fn game_line(
        &self,
        caller: &Caller,
        game_id: &str,
        ply: Option<u32>,
    ) -> AnalysisResult<Line> {
        // Checked here as Games checks it: a malformed id is INVALID_ARGUMENT without a call.
        draughts_proto::ids::GameId::parse(game_id)
            .map_err(|e| AnalysisError::Invalid(format!("game_id: {e}")))?;
        let mut line = self
            .games
            .game(game_id, caller.authorization.as_deref())
            .await?;
        if let Some(ply) = ply {
            let ply = ply as usize;
            if ply > line.moves.len() {
                return Err(AnalysisError::Invalid(format!(
                    "ply {ply} is beyond the game's {} plies",
                    line.moves.len()
                )));
            }
            line.moves.truncate(ply);
        }
        Ok(line)
    }

    async fn submit_interactive(
        &self,
        caller: &Caller,
        spec: JobSpec,
    ) -> AnalysisResult<Submitted> {
        caller.require_analysis()?;
        let job_id = Queue::new_job_id();
        self.quotas.count(caller, Counter::Jobs).await?;
        self.quotas
            .reserve_active(caller, &job_id, &self.queue)
            .await?;
        self.queue
            .submit(NewJob {
                job_id,
                class: Class::Interactive,
                spec,
                owner: Some(owner_of(caller)?),
                mergeable: true,
                trace: draughts_runtime::propagation::inject_map(),
            })
            .await
    }

    /// Queues the analysis of the position after `line`.
    pub async fn analyze_position(
        &self,
        caller: &Caller,
        line: Line,
        limits: JobLimits,
    ) -> AnalysisResult<Submitted> {
        self.submit_interactive(caller, JobSpec::Position { line, limits })
            .await
    }

    /// Queues the analysis of every ply of `line`.
    pub async fn analyze_game(
        &self,
        caller: &Caller,
        line: Line,
        limits: JobLimits,
        game_id: Option<String>,
    ) -> AnalysisResult<Submitted> {
        if line.moves.is_empty() {
            return Err(AnalysisError::Precondition(
                "the game has no moves to analyse".into(),
            ));
        }
        self.submit_interactive(
            caller,
            JobSpec::Game {
                line,
                limits,
                game_id,
            },
        )
        .await
    }

    /// A job of the caller's, with its place in the queue.
    pub async fn get(&self, caller: &Caller, job_id: &str) -> AnalysisResult<(JobRecord, u64)> {
        let record = self.owned(caller, job_id).await?;
        let position = self.queue.queue_position(&record).await?;
        Ok((record, position))
    }

    /// The record if the caller owns it (admins see every job); NOT_FOUND otherwise.
    pub async fn owned(&self, caller: &Caller, job_id: &str) -> AnalysisResult<JobRecord> {
        let valid = job_id.len() == 32 && job_id.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid {
            return Err(AnalysisError::Invalid(
                "job_id must be 32 hexadecimal digits".into(),
            ));
        }
        match self.queue.load(job_id).await? {
            Some((record, _))
                if record.owners.iter().any(|o| *o == caller.player_id)
                    || caller.tier == crate::quota::Tier::Admin =>
            {
                Ok(record)
            }
            _ => Err(AnalysisError::NoJob(job_id.to_owned())),
        }
    }

    /// Withdraws the caller's interest in the job.
    pub async fn cancel(&self, caller: &Caller, job_id: &str) -> AnalysisResult<JobRecord> {
        self.owned(caller, job_id).await?;
        self.queue.cancel(job_id, Some(&caller.player_id)).await
    }

    /// Chooses a move for the side to move after `line`: queued in the caller's class
    /// ([`Caller::best_move_class`]: services' keys in the computer-move class, players with the
    /// analysis scope in the interactive one, guests in theirs, bounded in flight per guest, per
    /// address and in all), answered when a worker has searched it (or DEADLINE_EXCEEDED, and the job
    /// is cancelled).
    pub async fn best_move(
        &self,
        caller: &Caller,
        line: Line,
        strength: Strength,
        clock_cap_ms: Option<u64>,
        seed: u64,
    ) -> AnalysisResult<(JobRecord, BestMoveResult)> {
        let (level, limits) = match strength {
            Strength::Level(level) => {
                let max = self.quotas.max_level(caller);
                if !(1..=max).contains(&level) {
                    return Err(AnalysisError::Invalid(format!(
                        "level must be from 1 to {max} for this caller"
                    )));
                }
                (Some(level), None)
            }
            Strength::Limits {
                depth,
                nodes,
                movetime_ms,
            } => {
                let caps = self.quotas.caps(caller, false);
                let limits = self.quotas.limits(depth, nodes, movetime_ms, 1, caps)?;
                (None, Some(limits))
            }
        };
        let spec = JobSpec::BestMove {
            line,
            level,
            limits,
            clock_cap_ms,
            seed,
        };
        let class = caller.best_move_class();
        // Held until the call is answered.
        let _in_flight = match class {
            Class::Guest => Some(self.guests.admit(caller)?),
            _ => None,
        };
        let job_id = Queue::new_job_id();
        // The quota is counted alongside the job's submission (a refused count cancels the job).
        let quota = self.quotas.count(caller, Counter::BestMoves);
        self.run_best_move_gated(job_id, spec, class, Some(owner_of(caller)?), quota)
            .await
    }

    /// Queues a BestMove job and waits for its result: the path of the server's own computer
    /// players, which have no quota.
    pub async fn run_best_move(
        &self,
        job_id: String,
        spec: JobSpec,
        owner: Option<PlayerId>,
    ) -> AnalysisResult<(JobRecord, BestMoveResult)> {
        self.run_best_move_gated(job_id, spec, Class::ComputerMove, owner, async { Ok(()) })
            .await
    }

    /// [`run_best_move`](AnalysisCore::run_best_move) once `gate` (the caller's quota) lets it through;
    /// the gate runs alongside the submission ([`Queue::submit_gated`]).
    async fn run_best_move_gated(
        &self,
        job_id: String,
        spec: JobSpec,
        class: Class,
        owner: Option<PlayerId>,
        gate: impl Future<Output = AnalysisResult<()>>,
    ) -> AnalysisResult<(JobRecord, BestMoveResult)> {
        let finished = self.waiter.register(&job_id);
        let submitted = self
            .queue
            .submit_gated(
                NewJob {
                    job_id: job_id.clone(),
                    class,
                    spec,
                    owner,
                    mergeable: false,
                    trace: draughts_runtime::propagation::inject_map(),
                },
                gate,
            )
            .await;
        let submitted = match submitted {
            Ok(s) => s,
            Err(e) => {
                self.waiter.forget(&job_id);
                return Err(e);
            }
        };
        let deadline = tokio::time::Instant::now() + self.best_move_timeout;
        let mut record = submitted.record().clone();
        let mut finished = Some(finished);
        while !record.state.is_final() {
            let now = tokio::time::Instant::now();
            if now >= deadline {
                self.waiter.forget(&job_id);
                let _ = self.queue.cancel(&job_id, None).await;
                return Err(AnalysisError::Timeout(
                    u64::try_from(self.best_move_timeout.as_millis()).unwrap_or(u64::MAX),
                ));
            }
            // The wake-up, or a poll in case it was lost.
            let step = BEST_MOVE_POLL.min(deadline - now);
            match finished.as_mut() {
                Some(rx) => {
                    if let Ok(woken) = tokio::time::timeout(step, rx).await {
                        finished = None;
                        // The notice of a computer move carries its final record: no read.
                        if let Ok(Some(last)) = woken
                            && last.job_id == job_id
                            && last.state.is_final()
                        {
                            record = last;
                            continue;
                        }
                    }
                }
                None => tokio::time::sleep(step).await,
            }
            record = match self.queue.load(&job_id).await? {
                Some((r, _)) => r,
                None => {
                    self.waiter.forget(&job_id);
                    return Err(AnalysisError::NoJob(job_id));
                }
            };
        }
        self.waiter.forget(&job_id);
        match (&record.state, &record.result) {
            (JobState::Done, Some(JobResult::BestMove(result))) => {
                let result = result.clone();
                Ok((record, result))
            }
            (JobState::Failed, _) => Err(AnalysisError::Precondition(
                record
                    .error
                    .clone()
                    .unwrap_or_else(|| "the search failed".into()),
            )),
            _ => Err(AnalysisError::NoJob(job_id)),
        }
    }

    pub async fn status(&self) -> AnalysisResult<QueueReport> {
        self.queue.status().await
    }

    /// Milliseconds from the job's creation to its start (0 if not started).
    pub fn queued_ms(record: &JobRecord) -> u64 {
        if record.started_ms == 0 {
            return now_unix_ms().saturating_sub(record.created_ms);
        }
        record.started_ms.saturating_sub(record.created_ms)
    }
}

/// The caller as a job's owner.
fn owner_of(caller: &crate::quota::Caller) -> AnalysisResult<PlayerId> {
    PlayerId::parse(&caller.player_id).map_err(|e| AnalysisError::Invalid(format!("caller: {e}")))
}
