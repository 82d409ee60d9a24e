//! The ONE behavioural suite of the analysis queue and its workers: every check is written once, generic
//! over the live store, and run on the in-memory backend, on a real `redis-server` and on a 3-primary
//! Redis Cluster (started by the test on free ports through `draughts-testkit`; one cluster for the
//! test binary, a key prefix per check).

use std::sync::Arc;
use std::time::{Duration, Instant};

use draughts_analysis::contract::{Class, JobLimits, JobRecord, JobSpec, JobState, Line, Rules};
use draughts_analysis::queue::{NewJob, Queue, QueueConfig, Submitted};
use draughts_analysis::worker::{self, WorkerConfig};
use draughts_store::{LiveStore, MemoryStore, RedisStore};
use draughts_testkit::{RedisCluster, RedisServer};

#[derive(Debug)]
pub struct Opened {
    pub store: Arc<dyn LiveStore>,
    _server: Option<RedisServer>,
}

async fn open_memory() -> Opened {
    Opened {
        store: Arc::new(MemoryStore::new()),
        _server: None,
    }
}

async fn open_redis() -> Opened {
    let server = RedisServer::start().expect("start redis-server");
    let store = RedisStore::connect(&server.url(), "queue-suite:")
        .await
        .expect("connect to the test redis-server");
    Opened {
        store: Arc::new(store),
        _server: Some(server),
    }
}

async fn open_cluster() -> Opened {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let cluster = RedisCluster::shared().expect("start a redis cluster");
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let store = RedisStore::connect_cluster(&cluster.node_urls(), &format!("queue-suite-{n}:"))
        .await
        .expect("connect to the test redis cluster");
    Opened {
        store: Arc::new(store),
        _server: None,
    }
}

macro_rules! queue_suite {
    ($($backend:ident => $open:path),* $(,)?) => {$(
        mod $backend {
            queue_suite!(@checks $open;
                classes_are_served_in_priority_order,
                identical_requests_merge_and_cancel_needs_every_owner,
                a_repeated_request_is_answered_from_the_cache,
                a_killed_worker_s_job_is_taken_over_and_finished_once,
                a_long_game_analysis_keeps_its_lease_through_its_progress,
                a_job_whose_workers_keep_dying_fails_with_its_reason,
                results_expire,
                cancel_stops_a_running_search,
                shutdown_hands_the_running_job_back,
                status_counts_waiting_jobs_and_live_workers,
                the_queue_refuses_jobs_when_a_class_is_full,
                finished_rated_games_feed_the_bulk_class_once,
                computer_moves_are_answered_while_bulk_work_is_queued,
                a_reserved_slot_answers_computer_moves_while_guests_fill_the_rest,
                a_job_changed_after_queueing_runs_from_its_current_record,
                a_computer_move_s_finished_notice_carries_its_record,
                a_job_cancelled_before_its_start_is_searched_by_nobody,
                an_entry_that_comes_before_its_record_runs_from_its_copy,
                a_refused_gate_withdraws_the_job,
                a_short_search_never_commits_a_job_another_slot_runs,
            );
        }
    )*};
    (@checks $open:path; $($check:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $check() {
            let opened = $open().await;
            super::checks::$check(opened.store.clone()).await;
        }
    )*};
}

queue_suite! {
    memory => super::open_memory,
    redis => super::open_redis,
    cluster => super::open_cluster,
}

mod checks {
    use super::*;

    pub fn line(moves: &[&str]) -> Line {
        Line {
            rules: Rules {
                variant: "english".into(),
                options: String::new(),
            },
            fen: draughts_engine::Variant::English.start_fen().into(),
            moves: moves.iter().map(|m| m.to_string()).collect(),
        }
    }

    pub fn position(moves: &[&str], limits: JobLimits) -> JobSpec {
        JobSpec::Position {
            line: line(moves),
            limits,
        }
    }

    /// A level-1 BestMove (a search of microseconds).
    pub fn best_move(moves: &[&str]) -> JobSpec {
        JobSpec::BestMove {
            line: line(moves),
            level: Some(1),
            limits: None,
            clock_cap_ms: None,
            seed: 7,
        }
    }

    pub fn depth(d: u32) -> JobLimits {
        JobLimits {
            depth: Some(d),
            movetime_ms: Some(10_000),
            multi_pv: 1,
            ..JobLimits::default()
        }
    }

    /// A search that runs for `ms` (no depth limit: stops on time).
    pub fn timed(ms: u64) -> JobLimits {
        JobLimits {
            movetime_ms: Some(ms),
            multi_pv: 1,
            ..JobLimits::default()
        }
    }

    pub fn job(class: Class, spec: JobSpec, owner: &str, mergeable: bool) -> NewJob {
        NewJob {
            job_id: Queue::new_job_id(),
            class,
            spec,
            owner: Some(owner.parse().unwrap()),
            mergeable,
            trace: [(
                "traceparent".to_string(),
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_string(),
            )]
            .into_iter()
            .collect(),
        }
    }

    pub async fn queue(store: Arc<dyn LiveStore>, config: QueueConfig) -> Queue {
        Queue::new(store, config).await.unwrap()
    }

    /// A worker process: `slots` slots until the sender is dropped or sent to.
    #[derive(Debug)]
    pub struct TestWorker {
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        handle: tokio::task::JoinHandle<()>,
    }

    impl TestWorker {
        pub fn start(queue: &Queue, name: &str, slots: usize, grace: Duration) -> TestWorker {
            TestWorker::start_reserved(queue, name, slots, 0, grace)
        }

        /// [`start`](TestWorker::start) with `reserved` of the slots taking computer moves only.
        pub fn start_reserved(
            queue: &Queue,
            name: &str,
            slots: usize,
            reserved: usize,
            grace: Duration,
        ) -> TestWorker {
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let config = WorkerConfig {
                name: name.into(),
                slots,
                reserved_computer_slots: reserved,
                hash_mb: 1,
                max_search: Duration::from_secs(30),
                shutdown_grace: grace,
                bitbases: Default::default(),
            };
            let handle = tokio::spawn(worker::run(queue.clone(), config, async move {
                let _ = stopped.await;
            }));
            TestWorker {
                stop: Some(stop),
                handle,
            }
        }

        pub async fn stop(mut self) {
            if let Some(stop) = self.stop.take() {
                let _ = stop.send(());
            }
            tokio::time::timeout(Duration::from_secs(30), &mut self.handle)
                .await
                .expect("the worker stops")
                .unwrap();
        }

        /// A crash: the worker's tasks vanish without any clean-up.
        pub async fn kill(self) {
            self.handle.abort();
            let _ = self.handle.await;
        }
    }

    pub async fn wait_for(
        queue: &Queue,
        job_id: &str,
        what: &str,
        done: impl Fn(&JobRecord) -> bool,
    ) -> JobRecord {
        let start = Instant::now();
        loop {
            if let Some((record, _)) = queue.load(job_id).await.unwrap()
                && done(&record)
            {
                return record;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "timed out waiting for {what}: {:?}",
                queue.load(job_id).await.unwrap().map(|r| r.0.state)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub async fn classes_are_served_in_priority_order(store: Arc<dyn LiveStore>) {
        let q = queue(store, QueueConfig::for_tests()).await;
        // Queued before any worker runs: bulk first, the computer move last.
        let mut ids = Vec::new();
        for (class, n) in [
            (Class::Bulk, 0),
            (Class::Bulk, 1),
            (Class::Interactive, 2),
            (Class::Interactive, 3),
            (Class::ComputerMove, 4),
        ] {
            // Distinct positions (no merging), each a 40 ms search.
            let moves: &[&str] = match n {
                0 => &["9-13"],
                1 => &["9-14"],
                2 => &["10-14"],
                3 => &["10-15"],
                _ => &["11-15"],
            };
            let submitted = q
                .submit(job(class, position(moves, timed(40)), "player:ann", false))
                .await
                .unwrap();
            ids.push(submitted.record().job_id.clone());
        }
        let record = q.load(&ids[4]).await.unwrap().unwrap().0;
        assert_eq!(q.queue_position(&record).await.unwrap(), 0);
        let last_bulk = q.load(&ids[1]).await.unwrap().unwrap().0;
        assert_eq!(
            q.queue_position(&last_bulk).await.unwrap(),
            4,
            "everything else is ahead"
        );
        let w = TestWorker::start(&q, "prio", 1, Duration::from_secs(5));
        let mut finished = Vec::new();
        for id in &ids {
            finished.push(wait_for(&q, id, "done", |r| r.state == JobState::Done).await);
        }
        w.stop().await;
        let started: Vec<u64> = finished.iter().map(|r| r.started_ms).collect();
        // Expected order: computer (4), interactive oldest first (2, 3), bulk oldest first (0, 1).
        let order = [4, 2, 3, 0, 1];
        for pair in order.windows(2) {
            assert!(
                started[pair[0]] < started[pair[1]],
                "job {} started before job {}: {started:?}",
                pair[0],
                pair[1]
            );
        }
        assert!(finished.iter().all(|r| r.attempts == 1));
        assert_eq!(
            finished[0].trace.get("traceparent").map(String::len),
            Some(55),
            "trace context travels in the job"
        );
    }

    pub async fn identical_requests_merge_and_cancel_needs_every_owner(store: Arc<dyn LiveStore>) {
        let q = queue(store, QueueConfig::for_tests()).await;
        let spec = position(&["11-15"], depth(3));
        let first = q
            .submit(job(Class::Interactive, spec.clone(), "player:ann", true))
            .await
            .unwrap();
        let second = q
            .submit(job(Class::Interactive, spec.clone(), "player:bob", true))
            .await
            .unwrap();
        let Submitted::Merged(merged) = &second else {
            panic!("expected a merge, got {second:?}");
        };
        assert_eq!(merged.job_id, first.record().job_id);
        assert_eq!(merged.owners, ["player:ann", "player:bob"]);
        // One entry only.
        let status = q.status().await.unwrap();
        assert_eq!(status.classes[1].1.queued, 1);
        // Different limits are a different job.
        let other = q
            .submit(job(
                Class::Interactive,
                position(&["11-15"], depth(4)),
                "player:ann",
                true,
            ))
            .await
            .unwrap();
        assert!(matches!(other, Submitted::Queued(_)));
        let id = first.record().job_id.clone();
        let after_ann = q.cancel(&id, Some("player:ann")).await.unwrap();
        assert_eq!(after_ann.state, JobState::Queued, "bob still wants it");
        let after_bob = q.cancel(&id, Some("player:bob")).await.unwrap();
        assert_eq!(after_bob.state, JobState::Cancelled);
        // A cancelled job is not merged into: the next identical request queues anew.
        let again = q
            .submit(job(Class::Interactive, spec, "player:cid", true))
            .await
            .unwrap();
        assert!(matches!(again, Submitted::Queued(_)));
        assert_ne!(again.record().job_id, id);
        // A cancelled job never runs.
        let w = TestWorker::start(&q, "merge", 1, Duration::from_secs(5));
        wait_for(&q, &again.record().job_id, "done", |r| {
            r.state == JobState::Done
        })
        .await;
        let cancelled = q.load(&id).await.unwrap().unwrap().0;
        assert_eq!(
            (cancelled.state, cancelled.attempts),
            (JobState::Cancelled, 0)
        );
        w.stop().await;
    }

    /// A new job's entry carries its first record, and a worker starts it by a compare-and-set
    /// against that version without reading it: a change made in between (here a second owner
    /// joining) must survive, and the job runs once.
    pub async fn a_job_changed_after_queueing_runs_from_its_current_record(
        store: Arc<dyn LiveStore>,
    ) {
        let q = queue(store, QueueConfig::for_tests()).await;
        let spec = position(&["9-13"], depth(3));
        let first = q
            .submit(job(Class::Interactive, spec.clone(), "player:ann", true))
            .await
            .unwrap();
        let second = q
            .submit(job(Class::Interactive, spec, "player:bob", true))
            .await
            .unwrap();
        assert!(matches!(second, Submitted::Merged(_)), "{second:?}");
        let w = TestWorker::start(&q, "fresh", 1, Duration::from_secs(5));
        let done = wait_for(&q, &first.record().job_id, "done", |r| {
            r.state == JobState::Done
        })
        .await;
        assert_eq!(done.owners, ["player:ann", "player:bob"]);
        assert_eq!(done.attempts, 1);
        assert!(done.result.is_some());
        // With nothing in between, the first record is the one a worker starts from.
        let plain = q
            .submit(job(
                Class::Interactive,
                position(&["10-14"], depth(2)),
                "player:cid",
                false,
            ))
            .await
            .unwrap();
        let done = wait_for(&q, &plain.record().job_id, "done", |r| {
            r.state == JobState::Done
        })
        .await;
        assert_eq!(
            (done.owners.as_slice(), done.attempts),
            (&["player:cid".parse().unwrap()][..], 1)
        );
        assert_eq!(
            done.trace,
            plain.record().trace,
            "the trace context travels"
        );
        w.stop().await;
    }

    /// A BestMove caller answers from the finished notice: it carries a computer move's final
    /// record (and only a computer move's: other results can be large).
    pub async fn a_computer_move_s_finished_notice_carries_its_record(store: Arc<dyn LiveStore>) {
        let q = queue(store.clone(), QueueConfig::for_tests()).await;
        let mut notices = store
            .subscribe(draughts_analysis::contract::FINISHED_CHANNEL)
            .await
            .unwrap();
        let w = TestWorker::start(&q, "notice", 1, Duration::from_secs(5));
        let best = JobSpec::BestMove {
            line: line(&["11-15"]),
            level: Some(1),
            limits: None,
            clock_cap_ms: None,
            seed: 7,
        };
        let computer = q
            .submit(job(Class::ComputerMove, best, "player:ann", false))
            .await
            .unwrap();
        let interactive = q
            .submit(job(
                Class::Interactive,
                position(&["11-16"], depth(2)),
                "player:ann",
                false,
            ))
            .await
            .unwrap();
        let mut seen = std::collections::HashMap::new();
        while seen.len() < 2 {
            let notice = tokio::time::timeout(
                Duration::from_secs(30),
                futures_util::StreamExt::next(&mut notices),
            )
            .await
            .expect("a finished notice")
            .expect("the subscription stays open");
            if let draughts_store::Notice::Message(payload) = notice {
                let notice = draughts_analysis::contract::Finished::read(&payload);
                seen.insert(notice.job_id.clone(), notice);
            }
        }
        let carried = seen[&computer.record().job_id]
            .record
            .as_deref()
            .expect("a computer move's notice carries its record");
        let stored = q.load(&computer.record().job_id).await.unwrap().unwrap().0;
        assert_eq!(carried, &stored);
        assert_eq!(carried.state, JobState::Done);
        assert!(carried.result.is_some());
        assert_eq!(seen[&interactive.record().job_id].record, None);
        w.stop().await;
    }

    pub async fn a_repeated_request_is_answered_from_the_cache(store: Arc<dyn LiveStore>) {
        let q = queue(store, QueueConfig::for_tests()).await;
        let w = TestWorker::start(&q, "cache", 1, Duration::from_secs(5));
        let spec = position(&["11-15", "23-19"], depth(5));
        let first = q
            .submit(job(Class::Interactive, spec.clone(), "player:ann", true))
            .await
            .unwrap();
        let done = wait_for(&q, &first.record().job_id, "done", |r| {
            r.state == JobState::Done
        })
        .await;
        w.stop().await;
        // No worker runs now: only the cache can answer.
        let again = q
            .submit(job(Class::Interactive, spec, "player:bob", true))
            .await
            .unwrap();
        let Submitted::Cached(cached) = &again else {
            panic!("expected a cache hit, got {again:?}");
        };
        assert_eq!(cached.state, JobState::Done);
        assert_eq!(cached.result, done.result);
        assert_eq!(cached.owners, ["player:bob"]);
        assert_eq!(
            q.status().await.unwrap().classes[1].1.queued,
            0,
            "nothing queued"
        );
    }

    pub async fn a_killed_worker_s_job_is_taken_over_and_finished_once(store: Arc<dyn LiveStore>) {
        let q = queue(store, QueueConfig::for_tests()).await;
        let doomed = TestWorker::start(&q, "doomed", 1, Duration::from_secs(5));
        let submitted = q
            .submit(job(
                Class::Interactive,
                position(&["11-15"], timed(1_500)),
                "player:ann",
                false,
            ))
            .await
            .unwrap();
        let id = submitted.record().job_id.clone();
        let running = wait_for(&q, &id, "running", |r| r.state == JobState::Running).await;
        assert_eq!(running.worker.as_deref(), Some("doomed-0"));
        doomed.kill().await;
        let rescuer = TestWorker::start(&q, "rescuer", 1, Duration::from_secs(5));
        let done = wait_for(&q, &id, "done", |r| r.state == JobState::Done).await;
        assert_eq!(done.attempts, 2, "the second attempt finished it");
        assert!(done.result.is_some());
        // Nothing changes it afterwards (the first attempt's search ends on its own; it may not finish
        // the job a second time).
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let (later, _) = q.load(&id).await.unwrap().unwrap();
        assert_eq!(later, done, "finished exactly once");
        let status = q.status().await.unwrap();
        assert_eq!(status.classes[1].1.running, 0, "its entry was acknowledged");
        rescuer.stop().await;
    }

    /// A game analysis publishes progress after every ply, far more often than its worker renews
    /// the run lease: the renewals must still happen, or the lease lapses mid-search and another
    /// worker takes the job over (attempts counted, the job failing after three). Found by the system
    /// test (`crates/systest`).
    pub async fn a_long_game_analysis_keeps_its_lease_through_its_progress(
        store: Arc<dyn LiveStore>,
    ) {
        // The lease is 200 ms (renewed every 66 ms); the job runs for well over a second.
        let config = QueueConfig {
            visibility_timeout: Duration::from_millis(400),
            ..QueueConfig::for_tests()
        };
        let q = queue(store, config).await;
        let a = TestWorker::start(&q, "a", 1, Duration::from_secs(5));
        let b = TestWorker::start(&q, "b", 1, Duration::from_secs(5));
        // A long international game (legal moves picked by a fixed rule), a few ms of search a ply:
        // a progress event every few ms, for well over a second.
        let variant = draughts_engine::Variant::International;
        let mut game = draughts_engine::Game::new(draughts_engine::Position::start(variant));
        let mut played = Vec::new();
        while played.len() < 160 && game.status() == draughts_engine::GameStatus::Ongoing {
            let moves = game.position().legal_moves();
            let mv = moves[(played.len() * 7) % moves.len()];
            played.push(game.position().move_to_text(&mv));
            game.play(&mv).unwrap();
        }
        let submitted = q
            .submit(job(
                Class::Interactive,
                JobSpec::Game {
                    line: Line {
                        rules: Rules {
                            variant: "international".into(),
                            options: String::new(),
                        },
                        fen: variant.start_fen().into(),
                        moves: played,
                    },
                    limits: JobLimits {
                        nodes: Some(40_000),
                        movetime_ms: Some(10_000),
                        multi_pv: 1,
                        ..JobLimits::default()
                    },
                    game_id: None,
                },
                "player:ann",
                false,
            ))
            .await
            .unwrap();
        let id = submitted.record().job_id.clone();
        let done = wait_for(&q, &id, "done", |r| r.state.is_final()).await;
        assert_eq!(done.state, JobState::Done, "{:?}", done.error);
        assert_eq!(done.attempts, 1, "one worker ran it from start to end");
        a.stop().await;
        b.stop().await;
    }

    pub async fn a_job_whose_workers_keep_dying_fails_with_its_reason(store: Arc<dyn LiveStore>) {
        let config = QueueConfig {
            max_attempts: 1,
            ..QueueConfig::for_tests()
        };
        let q = queue(store, config).await;
        let doomed = TestWorker::start(&q, "doomed", 1, Duration::from_secs(5));
        let submitted = q
            .submit(job(
                Class::Interactive,
                position(&["11-15"], timed(2_000)),
                "player:ann",
                false,
            ))
            .await
            .unwrap();
        let id = submitted.record().job_id.clone();
        wait_for(&q, &id, "running", |r| r.state == JobState::Running).await;
        doomed.kill().await;
        let next = TestWorker::start(&q, "next", 1, Duration::from_secs(5));
        let failed = wait_for(&q, &id, "failed", |r| r.state == JobState::Failed).await;
        assert_eq!(failed.attempts, 1);
        let reason = failed.error.unwrap();
        assert!(
            reason.contains("gave up after 1 attempts") && reason.contains("worker was lost"),
            "{reason}"
        );
        next.stop().await;
    }

    pub async fn results_expire(store: Arc<dyn LiveStore>) {
        let config = QueueConfig {
            result_ttl: Duration::from_millis(800),
            ..QueueConfig::for_tests()
        };
        let q = queue(store, config).await;
        let w = TestWorker::start(&q, "ttl", 1, Duration::from_secs(5));
        let spec = position(&[], depth(2));
        let submitted = q
            .submit(job(Class::Interactive, spec.clone(), "player:ann", true))
            .await
            .unwrap();
        let id = submitted.record().job_id.clone();
        wait_for(&q, &id, "done", |r| r.state == JobState::Done).await;
        w.stop().await;
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        assert!(q.load(&id).await.unwrap().is_none(), "the job expired");
        // So did the cache entry: the same request queues again.
        let again = q
            .submit(job(Class::Interactive, spec, "player:ann", true))
            .await
            .unwrap();
        assert!(matches!(again, Submitted::Queued(_)), "{again:?}");
    }

    pub async fn cancel_stops_a_running_search(store: Arc<dyn LiveStore>) {
        let q = queue(store, QueueConfig::for_tests()).await;
        let w = TestWorker::start(&q, "cancel", 1, Duration::from_secs(5));
        let id = submit_long_search(&q).await;
        wait_for(&q, &id, "running", |r| r.state == JobState::Running).await;
        let cancelled_at = Instant::now();
        let record = q.cancel(&id, Some("player:ann")).await.unwrap();
        assert_eq!(record.state, JobState::Cancelled);
        // The slot is free again at once: a small job behind it finishes long before the 20 s search.
        a_small_job_finishes(&q).await;
        assert!(
            cancelled_at.elapsed() < Duration::from_secs(3),
            "{:?}",
            cancelled_at.elapsed()
        );
        let (after, _) = q.load(&id).await.unwrap().unwrap();
        assert_eq!(after.state, JobState::Cancelled);
        assert!(after.result.is_none());
        w.stop().await;
    }

    /// Submits a 20 s search for `player:ann`; returns its job id.
    async fn submit_long_search(q: &Queue) -> String {
        let long = q
            .submit(job(
                Class::Interactive,
                position(&[], timed(20_000)),
                "player:ann",
                false,
            ))
            .await
            .unwrap();
        long.record().job_id.clone()
    }

    /// Submits a depth-2 search and waits until it is done.
    async fn a_small_job_finishes(q: &Queue) {
        let next = q
            .submit(job(
                Class::Interactive,
                position(&["9-13"], depth(2)),
                "player:ann",
                false,
            ))
            .await
            .unwrap();
        wait_for(q, &next.record().job_id, "done", |r| {
            r.state == JobState::Done
        })
        .await;
    }

    /// A worker starts a new job's search while its start is in flight; a job cancelled before
    /// that start must cost nothing: its start loses, the search is stopped unseen (the slot is free
    /// at once, not after the 20 s search), and the record stays as the cancel left it.
    pub async fn a_job_cancelled_before_its_start_is_searched_by_nobody(store: Arc<dyn LiveStore>) {
        let q = queue(store, QueueConfig::for_tests()).await;
        let id = submit_long_search(&q).await;
        let cancelled = q.cancel(&id, Some("player:ann")).await.unwrap();
        assert_eq!(cancelled.state, JobState::Cancelled);
        let (_, cancelled_version) = q.load(&id).await.unwrap().unwrap();
        let started_at = Instant::now();
        let w = TestWorker::start(&q, "early", 1, Duration::from_secs(5));
        a_small_job_finishes(&q).await;
        assert!(
            started_at.elapsed() < Duration::from_secs(10),
            "the slot waited for a cancelled job's search: {:?}",
            started_at.elapsed()
        );
        let (after, version) = q.load(&id).await.unwrap().unwrap();
        assert_eq!(
            version, cancelled_version,
            "nothing wrote the cancelled record"
        );
        assert_eq!(
            (after.state, after.attempts, after.worker.as_deref()),
            (JobState::Cancelled, 0, None)
        );
        assert!(after.result.is_none() && after.progress.is_none());
        w.stop().await;
    }

    /// A new job's record and entry go out together; on a Redis Cluster nothing orders them, so a
    /// worker may take the entry first. It writes the record from the entry's copy and runs it.
    pub async fn an_entry_that_comes_before_its_record_runs_from_its_copy(
        store: Arc<dyn LiveStore>,
    ) {
        let q = queue(store.clone(), QueueConfig::for_tests()).await;
        let submitted = q
            .submit(job(
                Class::ComputerMove,
                best_move(&["11-15"]),
                "player:ann",
                false,
            ))
            .await
            .unwrap();
        let id = submitted.record().job_id.clone();
        // As if the record's write had not landed when the worker reads the entry.
        assert!(
            store
                .delete(&draughts_analysis::contract::job_key(&id))
                .await
                .unwrap()
        );
        let w = TestWorker::start(&q, "first", 1, Duration::from_secs(5));
        let done = wait_for(&q, &id, "done", |r| r.state == JobState::Done).await;
        assert_eq!(
            (done.attempts, done.owners.clone(), done.created_ms),
            (
                1,
                vec!["player:ann".parse().unwrap()],
                submitted.record().created_ms
            )
        );
        assert!(done.result.is_some());
        w.stop().await;
    }

    /// A search of microseconds is committed in one write from the entry's copy (QUEUED straight to
    /// DONE), and only from QUEUED: a job another live slot has marked RUNNING (it took the entry
    /// over) is left to that slot, its record untouched and its entry not acknowledged.
    pub async fn a_short_search_never_commits_a_job_another_slot_runs(store: Arc<dyn LiveStore>) {
        let q = queue(store.clone(), QueueConfig::for_tests()).await;
        // The ordinary case first: one write, attempt 1, no worker left in the record.
        let w = TestWorker::start(&q, "quick", 1, Duration::from_secs(5));
        let quick = q
            .submit(job(
                Class::ComputerMove,
                best_move(&["11-15"]),
                "player:ann",
                false,
            ))
            .await
            .unwrap();
        let quick_id = quick.record().job_id.clone();
        let done = wait_for(&q, &quick_id, "done", |r| r.state == JobState::Done).await;
        assert_eq!((done.attempts, done.worker.as_deref()), (1, None));
        assert!(done.created_ms <= done.started_ms && done.started_ms <= done.finished_ms);
        w.stop().await;
        // Another slot holds the job: its lease and its RUNNING mark.
        let submitted = q
            .submit(job(
                Class::ComputerMove,
                best_move(&["11-16"]),
                "player:ann",
                false,
            ))
            .await
            .unwrap();
        let id = submitted.record().job_id.clone();
        assert!(
            store
                .lease(
                    &draughts_analysis::contract::run_lease(&id),
                    "other-0",
                    Duration::from_secs(60),
                )
                .await
                .unwrap()
        );
        q.update(&id, |r| {
            r.state = JobState::Running;
            r.attempts = 1;
            r.worker = Some("other-0".into());
            true
        })
        .await
        .unwrap();
        let (marked, marked_version) = q.load(&id).await.unwrap().unwrap();
        let w = TestWorker::start(&q, "second", 1, Duration::from_secs(5));
        a_small_job_finishes(&q).await;
        let (after, version) = q.load(&id).await.unwrap().unwrap();
        assert_eq!(version, marked_version, "nothing wrote the record");
        assert_eq!(after, marked);
        assert_eq!(
            store
                .pending_count(
                    Class::ComputerMove.stream(),
                    draughts_analysis::contract::GROUP
                )
                .await
                .unwrap(),
            1,
            "its entry stays pending for the slot that runs it"
        );
        w.stop().await;
    }

    /// A gate (the caller's quota) runs alongside a BestMove's submission: when it refuses, its
    /// error is the answer and the job is cancelled before any worker runs it. (With a worker
    /// already waiting, a search of microseconds may finish before the cancel lands: the caller
    /// still gets only the error, and never learns the job's id.)
    pub async fn a_refused_gate_withdraws_the_job(store: Arc<dyn LiveStore>) {
        let q = queue(store, QueueConfig::for_tests()).await;
        let refused = job(
            Class::ComputerMove,
            best_move(&["11-15"]),
            "player:ann",
            false,
        );
        let id = refused.job_id.clone();
        let err = q
            .submit_gated(refused, async {
                Err(draughts_analysis::AnalysisError::Exhausted {
                    what: "daily quota".into(),
                    retry_after_secs: 60,
                })
            })
            .await
            .unwrap_err();
        assert!(
            matches!(err, draughts_analysis::AnalysisError::Exhausted { .. }),
            "{err:?}"
        );
        let (after, _) = q.load(&id).await.unwrap().unwrap();
        assert_eq!((after.state, after.owners.len()), (JobState::Cancelled, 0));
        // A worker drops its entry: nothing runs it.
        let w = TestWorker::start(&q, "gated", 1, Duration::from_secs(5));
        a_small_job_finishes(&q).await;
        let (after, _) = q.load(&id).await.unwrap().unwrap();
        assert_eq!(
            (after.state, after.attempts, after.worker.as_deref()),
            (JobState::Cancelled, 0, None)
        );
        assert!(after.result.is_none());
        // A gate that lets it through changes nothing.
        let allowed = q
            .submit_gated(
                job(
                    Class::ComputerMove,
                    best_move(&["11-16"]),
                    "player:ann",
                    false,
                ),
                async { Ok(()) },
            )
            .await
            .unwrap();
        let id = allowed.record().job_id.clone();
        wait_for(&q, &id, "done", |r| r.state == JobState::Done).await;
        w.stop().await;
    }

    pub async fn shutdown_hands_the_running_job_back(store: Arc<dyn LiveStore>) {
        let q = queue(store, QueueConfig::for_tests()).await;
        let leaving = TestWorker::start(&q, "leaving", 1, Duration::ZERO);
        let submitted = q
            .submit(job(
                Class::Interactive,
                position(&[], timed(20_000)),
                "player:ann",
                false,
            ))
            .await
            .unwrap();
        let id = submitted.record().job_id.clone();
        wait_for(&q, &id, "running", |r| r.state == JobState::Running).await;
        let stopping = Instant::now();
        leaving.stop().await;
        assert!(
            stopping.elapsed() < Duration::from_secs(3),
            "stopped promptly"
        );
        let (back, _) = q.load(&id).await.unwrap().unwrap();
        assert_eq!(
            (back.state, back.attempts),
            (JobState::Queued, 0),
            "handed back, attempt not counted"
        );
        assert_eq!(
            q.status().await.unwrap().classes[1].1.queued,
            1,
            "a fresh entry waits"
        );
        // Another worker takes it at once (no visibility timeout to wait for). Shorten the job: cancel
        // and check the second worker starts it, then cancels cleanly.
        let next = TestWorker::start(&q, "next", 1, Duration::from_secs(5));
        let running = wait_for(&q, &id, "running again", |r| r.state == JobState::Running).await;
        assert_eq!(
            (running.worker.as_deref(), running.attempts),
            (Some("next-0"), 1)
        );
        q.cancel(&id, None).await.unwrap();
        next.stop().await;
    }

    /// Under load: a backlog of bulk work keeps every slot busy, and computer moves submitted one
    /// after another while it runs are each taken by the next free slot, ahead of every waiting bulk
    /// job; the bulk backlog is still there when the last computer move is answered.
    /// Guests' BestMoves fill every slot that is not reserved: a computer move waits for one of their
    /// searches to end without a reserved slot (the contrast), and starts at once with one; the
    /// reserved slot never runs a guest's job.
    pub async fn a_reserved_slot_answers_computer_moves_while_guests_fill_the_rest(
        store: Arc<dyn LiveStore>,
    ) {
        const SLOTS: usize = 2;
        const GUEST_MS: u64 = 1_500;
        let q = queue(store, QueueConfig::for_tests()).await;
        for reserved in [0, 1] {
            let name = format!("reserved{reserved}");
            let w = TestWorker::start_reserved(&q, &name, SLOTS, reserved, Duration::from_secs(5));
            let mut guests = Vec::new();
            for n in 0..6 {
                let moves: &[&str] = if n % 2 == 0 { &["9-13"] } else { &["10-14"] };
                let submitted = q
                    .submit(job(
                        Class::Guest,
                        position(moves, timed(GUEST_MS)),
                        &format!("guest:g{n}"),
                        false,
                    ))
                    .await
                    .unwrap();
                guests.push(submitted.record().job_id.clone());
            }
            // Every slot that takes guests is searching for one.
            let started = Instant::now();
            loop {
                let mut running = 0;
                for id in &guests {
                    if q.load(id).await.unwrap().unwrap().0.state == JobState::Running {
                        running += 1;
                    }
                }
                if running == SLOTS - reserved {
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "guests not running"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let submitted = q
                .submit(job(
                    Class::ComputerMove,
                    best_move(&["11-15"]),
                    "player:bob",
                    false,
                ))
                .await
                .unwrap();
            let id = submitted.record().job_id.clone();
            let done = wait_for(&q, &id, "computer move done", |r| r.state == JobState::Done).await;
            let mut running_on = Vec::new();
            for id in &guests {
                let (record, _) = q.load(id).await.unwrap().unwrap();
                if record.state == JobState::Running {
                    running_on.extend(record.worker);
                }
            }
            for id in &guests {
                q.cancel(id, None).await.unwrap();
            }
            w.stop().await;
            let waited = done.started_ms.saturating_sub(done.created_ms);
            println!(
                "{reserved} reserved slot(s) of {SLOTS}: the computer move waited {waited} ms"
            );
            if reserved == 0 {
                assert!(
                    waited >= 300,
                    "without a reserved slot the move waits for a guest's search, waited {waited} ms"
                );
            } else {
                assert!(
                    waited < 300,
                    "the reserved slot starts the computer move at once, waited {waited} ms"
                );
                assert!(
                    !running_on.contains(&format!("{name}-0")),
                    "the reserved slot ran a guest's job: {running_on:?}"
                );
                assert_eq!(running_on.len(), SLOTS - reserved, "{running_on:?}");
            }
        }
    }

    pub async fn computer_moves_are_answered_while_bulk_work_is_queued(store: Arc<dyn LiveStore>) {
        const BULK: usize = 60;
        const BULK_MS: u64 = 60;
        const MOVES: usize = 6;
        const SLOTS: usize = 2;
        let q = queue(store, QueueConfig::for_tests()).await;
        let w = TestWorker::start(&q, "loaded", SLOTS, Duration::from_secs(5));
        let mut bulk = Vec::new();
        for _ in 0..BULK {
            let submitted = q
                .submit(job(
                    Class::Bulk,
                    position(&["9-13"], timed(BULK_MS)),
                    "player:ann",
                    false,
                ))
                .await
                .unwrap();
            bulk.push(submitted.record().job_id.clone());
        }
        // Both slots are busy with bulk work before the first computer move arrives.
        wait_for(&q, &bulk[1], "bulk running", |r| {
            r.state != JobState::Queued
        })
        .await;
        let mut moves_done = Vec::new();
        for n in 0..MOVES {
            let moves: &[&str] = if n % 2 == 0 { &["11-15"] } else { &["10-14"] };
            let submitted = q
                .submit(job(
                    Class::ComputerMove,
                    position(moves, timed(20)),
                    "player:bob",
                    false,
                ))
                .await
                .unwrap();
            let id = submitted.record().job_id.clone();
            moves_done
                .push(wait_for(&q, &id, "computer move done", |r| r.state == JobState::Done).await);
        }
        let mut bulk_records = Vec::new();
        for id in &bulk {
            bulk_records.push(q.load(id).await.unwrap().unwrap().0);
        }
        for id in &bulk {
            q.cancel(id, None).await.unwrap();
        }
        w.stop().await;
        // Strict priority: while a computer move waited, no bulk job started, except one per slot
        // that the slot had already taken from its stream when the move was queued.
        for m in &moves_done {
            let overtaken = bulk_records
                .iter()
                .filter(|b| b.started_ms > m.created_ms && b.started_ms < m.started_ms)
                .count();
            assert!(
                overtaken <= SLOTS,
                "{overtaken} bulk jobs started while a computer move waited {} ms",
                m.started_ms - m.created_ms
            );
        }
        let waiting = bulk_records
            .iter()
            .filter(|b| b.state == JobState::Queued)
            .count();
        assert!(waiting > 0, "the bulk backlog drained first");
        // A computer move waits for one running bulk search at most (plus scheduling), never for the
        // backlog (a second of work per slot).
        let longest = moves_done
            .iter()
            .map(|m| m.started_ms - m.created_ms)
            .max()
            .unwrap_or(0);
        assert!(
            longest < BULK_MS * (BULK as u64) / 4,
            "a computer move waited {longest} ms"
        );
    }

    pub async fn status_counts_waiting_jobs_and_live_workers(store: Arc<dyn LiveStore>) {
        let q = queue(store, QueueConfig::for_tests()).await;
        for moves in [&["9-13"][..], &["9-14"][..]] {
            q.submit(job(
                Class::Bulk,
                position(moves, depth(2)),
                "player:ann",
                false,
            ))
            .await
            .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let status = q.status().await.unwrap();
        assert_eq!(status.classes.len(), 4);
        assert_eq!(status.classes[3].0, Class::Bulk);
        assert_eq!(status.classes[3].1.queued, 2);
        assert!(status.classes[3].1.oldest_wait_ms >= 40, "{status:?}");
        assert_eq!(status.classes[0].1.queued, 0);
        assert_eq!(status.live_workers, 0);
        let w = TestWorker::start(&q, "counted", 2, Duration::from_secs(5));
        let start = Instant::now();
        loop {
            let status = q.status().await.unwrap();
            if status.classes[3].1.queued == 0 && status.live_workers == 1 {
                assert_eq!(status.worker_slots, 2);
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "{status:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        w.stop().await;
    }

    pub async fn the_queue_refuses_jobs_when_a_class_is_full(store: Arc<dyn LiveStore>) {
        let config = QueueConfig {
            max_queued: 2,
            ..QueueConfig::for_tests()
        };
        let q = queue(store, config).await;
        for moves in [&["9-13"][..], &["9-14"][..]] {
            q.submit(job(
                Class::Bulk,
                position(moves, depth(2)),
                "player:ann",
                true,
            ))
            .await
            .unwrap();
        }
        for mergeable in [true, false] {
            let refused = job(
                Class::Bulk,
                position(&["10-14"], depth(2)),
                "player:ann",
                mergeable,
            );
            let refused_id = refused.job_id.clone();
            let err = q.submit(refused).await.unwrap_err();
            assert_eq!(
                draughts_proto::ServiceError::kind(&err),
                draughts_proto::ErrorKind::ResourceExhausted
            );
            assert!(
                q.load(&refused_id).await.unwrap().is_none(),
                "a refused job leaves no record"
            );
        }
        assert_eq!(
            q.live().len(Class::Bulk.stream()).await.unwrap(),
            2,
            "nothing appended"
        );
        // Another class still has room.
        q.submit(job(
            Class::ComputerMove,
            position(&["10-14"], depth(2)),
            "player:ann",
            false,
        ))
        .await
        .unwrap();
    }

    pub async fn finished_rated_games_feed_the_bulk_class_once(store: Arc<dyn LiveStore>) {
        use draughts_proto::contract::finished;
        let q = queue(store.clone(), QueueConfig::for_tests()).await;
        let entry = |game_id: &str, rated: bool| {
            format!(
                r#"{{"v":1,"game_id":"{game_id}","variant":"english","options":"","rated":{rated},
                 "white":{{"id":"player:1"}},"black":{{"id":"player:2"}},"outcome":"white","reason":"resignation",
                 "plies":2,"finished_at_ms":1,"pdn":"[GameType \"21\"] 1. 11-15 23-19 1-0"}}"#
            )
        };
        // The same game twice (a redelivery), a casual game, an unreadable entry.
        for payload in [
            entry("g1", true),
            entry("g1", true),
            entry("g2", false),
            "junk".into(),
        ] {
            store
                .append(finished::STREAM, payload.into_bytes().into())
                .await
                .unwrap();
        }
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let feed = tokio::spawn(draughts_analysis::bulk::run(
            q.clone(),
            "bulk-test".into(),
            depth(2),
            async move {
                let _ = stopped.await;
            },
        ));
        let start = Instant::now();
        while store
            .backlog(finished::STREAM, draughts_analysis::bulk::GROUP)
            .await
            .map_or(true, |b| b.waiting > 0)
        {
            assert!(start.elapsed() < Duration::from_secs(10));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = stop.send(());
        feed.await.unwrap();
        let status = q.status().await.unwrap();
        assert_eq!(
            status.classes[3].1.queued, 1,
            "one bulk job for g1, merged on redelivery: {status:?}"
        );
        assert_eq!(
            store
                .pending_count(finished::STREAM, draughts_analysis::bulk::GROUP)
                .await
                .unwrap(),
            0,
            "every entry acknowledged"
        );
    }
}
