//! The must-reach measurements, opt-in (`DRAUGHTS_MEASURE=1`; each prints its numbers), on a private
//! `redis-server` started by the test:
//!
//! - `queue_overhead`: a load generator sends `DRAUGHTS_MEASURE_JOBS` (default 2000) BestMove jobs one
//!   after the other to one idle worker slot, at level 1 on the start position (a depth-1 search of a
//!   few microseconds), and records the whole time from submit to the caller seeing the answer: the
//!   queue's overhead per job (p50/p99/max), plus the enqueue-to-start part.
//!   `DRAUGHTS_MEASURE_GAP_MS=G` waits G ms between jobs (as a human's think time does: the worker is
//!   idle, blocked on its read, when each job comes; back to back, a job may arrive while the worker
//!   still acknowledges the last one); `DRAUGHTS_MEASURE_BACKEND=memory` runs them on the in-memory
//!   store (the process's own share: tasks, the search thread, encoding).
//! - `throughput_one_and_two_workers`: 24 position jobs of 300 000 nodes each, submitted at once, run by
//!   one and then by two worker slots (each its own search thread); jobs per second, beside the same 24
//!   searches on one and two plain threads without the queue (what the machine's cores deliver).
//! - `a_100_ply_game_streams_ply_by_ply`: AnalyzeGame of a 100-ply international game at 20 000 nodes
//!   per ply; when each ply's progress arrived, and the time of the first and the second half.
//!
//! `DRAUGHTS_MEASURE=1 cargo test -p draughts-analysis --test measure -- --nocapture --test-threads 1`

use std::sync::Arc;
use std::time::{Duration, Instant};

use draughts_analysis::contract::{Class, JobLimits, JobResult, JobSpec, JobState, Line, Rules};
use draughts_analysis::queue::{NewJob, Queue, QueueConfig};
use draughts_analysis::worker::{self, WorkerConfig};
use draughts_analysis::{AnalysisConfig, AnalysisCore, quota};
use draughts_store::{LiveStore, RedisStore};
use draughts_testkit::RedisServer;
use futures_util::StreamExt;

fn enabled() -> bool {
    std::env::var("DRAUGHTS_MEASURE").is_ok_and(|v| v == "1")
}

async fn redis() -> (RedisServer, Arc<dyn LiveStore>) {
    let server = RedisServer::start().expect("redis-server");
    let store = RedisStore::connect(&server.url(), "measure:")
        .await
        .unwrap();
    (server, Arc::new(store))
}

fn start_workers(
    queue: &Queue,
    name: &str,
    slots: usize,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let config = WorkerConfig {
        name: name.into(),
        slots,
        reserved_computer_slots: 0,
        hash_mb: 16,
        max_search: Duration::from_secs(60),
        shutdown_grace: Duration::from_secs(5),
        bitbases: Default::default(),
    };
    let handle = tokio::spawn(worker::run(queue.clone(), config, async move {
        let _ = rx.await;
    }));
    (tx, handle)
}

/// Calls per command the test server has processed so far (`INFO commandstats`, through
/// redis-cli; commands run inside scripts are counted too).
fn redis_commands(server: &RedisServer) -> std::collections::BTreeMap<String, u64> {
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &server.port().to_string(), "info", "commandstats"])
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

fn line(variant: &str, fen: &str, moves: Vec<String>) -> Line {
    Line {
        rules: Rules {
            variant: variant.into(),
            options: String::new(),
        },
        fen: fen.into(),
        moves,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_overhead() {
    if !enabled() {
        return;
    }
    let n: usize = std::env::var("DRAUGHTS_MEASURE_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let (_server, live) = redis().await;
    // DRAUGHTS_MEASURE_BACKEND=memory: the same jobs on the in-memory store (what the process itself
    // costs: tasks, the search thread, encoding; no network).
    let live: Arc<dyn LiveStore> = match std::env::var("DRAUGHTS_MEASURE_BACKEND").as_deref() {
        Ok("memory") => Arc::new(draughts_store::MemoryStore::new()),
        _ => live,
    };
    let queue = Queue::new(live.clone(), QueueConfig::for_tests())
        .await
        .unwrap();
    let core = AnalysisCore {
        queue: queue.clone(),
        quotas: quota::Quotas::new(live.clone(), AnalysisConfig::defaults().quotas),
        games: Arc::new(draughts_analysis::games::GrpcGames::new(None).unwrap()),
        best_move_timeout: Duration::from_secs(10),
        waiter: draughts_analysis::service::Waiter::start(live),
        watches: draughts_runtime::admission::Admission::new(16, 100, None),
        guests: quota::GuestLimits::new(&AnalysisConfig::defaults().quotas),
    };
    let (stop, handle) = start_workers(&queue, "overhead", 1);
    let commands_before = redis_commands(&_server);
    let stats_before = draughts_testkit::RedisStats::read(_server.port());
    let wall = Instant::now();
    let fen = draughts_engine::Variant::International.start_fen();
    let mut total = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    let mut to_start = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    let mut slow_searches = 0u64;
    let gap = Duration::from_millis(
        std::env::var("DRAUGHTS_MEASURE_GAP_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    );
    for i in 0..n + 100 {
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
        let spec = JobSpec::BestMove {
            line: line("international", fen, vec![]),
            level: Some(1),
            limits: None,
            clock_cap_ms: None,
            seed: 1 + i as u64,
        };
        let started = Instant::now();
        let (record, result) = core
            .run_best_move(Queue::new_job_id(), spec, None)
            .await
            .unwrap();
        let elapsed = started.elapsed();
        if i >= 100 {
            // The search's own time (whole milliseconds) is not queue overhead.
            let overhead = (elapsed.as_micros() as u64).saturating_sub(result.search_ms * 1000);
            total.record(overhead.max(1)).unwrap();
            slow_searches += u64::from(result.search_ms > 0);
            to_start
                .record(record.started_ms.saturating_sub(record.created_ms))
                .unwrap();
        }
    }
    let jobs = (n + 100) as f64;
    let per_job: Vec<String> = redis_commands(&_server)
        .into_iter()
        .map(|(name, calls)| {
            let before = commands_before.get(&name).copied().unwrap_or(0);
            (name, calls.saturating_sub(before))
        })
        .filter(|(_, calls)| *calls > 0)
        .map(|(name, calls)| format!("{name} {:.2}", calls as f64 / jobs))
        .collect();
    println!(
        "Redis commands per BestMove job (submit, worker, waiter, heartbeats and idle polls; commands inside scripts counted too): {}",
        per_job.join(", ")
    );
    let stats = draughts_testkit::RedisStats::read(_server.port()).since(&stats_before);
    println!(
        "Redis per BestMove job: {:.1} commands in all, {:.1} us of Redis CPU ({} jobs in {:.1} s, {:.0} jobs/s on one worker slot)",
        stats.total_calls() as f64 / jobs,
        stats.cpu_us as f64 / jobs,
        n + 100,
        wall.elapsed().as_secs_f64(),
        jobs / wall.elapsed().as_secs_f64(),
    );
    println!(
        "queue overhead per BestMove job over {n} jobs (submit -> answer seen by the caller, minus the search's own whole milliseconds; {slow_searches} searches took 1 ms or more): p50 {} us, p99 {} us, max {} us; enqueue -> search start: p50 {} ms, p99 {} ms",
        total.value_at_quantile(0.5),
        total.value_at_quantile(0.99),
        total.max(),
        to_start.value_at_quantile(0.5),
        to_start.value_at_quantile(0.99),
    );
    let _ = stop.send(());
    handle.await.unwrap();
}

/// The throughput batch: 24 different positions (first move i % 9, then a reply: no merging, no
/// cache), 300 000 nodes each.
fn batch_specs() -> Vec<JobSpec> {
    specs_with(JobLimits {
        nodes: Some(300_000),
        movetime_ms: Some(60_000),
        multi_pv: 1,
        ..JobLimits::default()
    })
}

/// The batch's 24 positions at a fixed move time (no node or depth limit): a level 8 analysis.
fn timed_specs(movetime_ms: u64) -> Vec<JobSpec> {
    specs_with(JobLimits {
        movetime_ms: Some(movetime_ms),
        multi_pv: 1,
        ..JobLimits::default()
    })
}

fn specs_with(limits: JobLimits) -> Vec<JobSpec> {
    let fen = draughts_engine::Variant::International.start_fen();
    let start_pos = draughts_engine::Position::start(draughts_engine::Variant::International);
    let openings: Vec<String> = start_pos
        .legal_moves()
        .iter()
        .map(|m| start_pos.move_to_text(m))
        .collect();
    (0..24)
        .map(|i| {
            let first = &openings[i % openings.len()];
            let after = start_pos.parse_move(first).unwrap();
            let next = start_pos.play_unchecked(&after);
            let replies = next.legal_moves();
            let reply = next.move_to_text(&replies[(i / openings.len()) % replies.len()]);
            JobSpec::Position {
                line: line("international", fen, vec![first.clone(), reply]),
                limits: limits.clone(),
            }
        })
        .collect()
}

/// The same batch searched by `threads` plain threads (no queue, no Redis): what the machine's cores
/// deliver, the ceiling for the workers' scaling.
fn raw_batch(threads: usize) -> f64 {
    raw_run(threads, &batch_specs(), None).jobs_per_second
}

/// What a plain-thread run of a batch gave.
struct RawRun {
    jobs_per_second: f64,
    /// The mean depth the searches completed.
    depth: f64,
    /// Nodes per second, all threads together.
    nodes_per_second: f64,
}

/// `specs` searched by `threads` plain threads with `eval` (the variant's default when `None`).
fn raw_run(threads: usize, specs: &[JobSpec], eval: Option<draughts_ai::Evaluator>) -> RawRun {
    let n_jobs = specs.len();
    let depth = std::sync::atomic::AtomicU64::new(0);
    let nodes = std::sync::atomic::AtomicU64::new(0);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut searcher = draughts_ai::Searcher::with_options(
                    draughts_engine::Variant::International,
                    &draughts_ai::SearchOptions {
                        tt_megabytes: 16,
                        ..draughts_ai::SearchOptions::default()
                    },
                );
                if let Some(eval) = &eval {
                    searcher.set_evaluator(eval.clone());
                }
                let stop = searcher.stop_handle();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(spec) = specs.get(i) else { break };
                    stop.reset();
                    let result = draughts_analysis::engine::run(
                        spec,
                        &mut searcher,
                        &stop,
                        Duration::from_secs(60),
                        |_| {},
                    )
                    .unwrap();
                    let JobResult::Position(result) = result else {
                        panic!("a position job gives a position result")
                    };
                    depth.fetch_add(
                        u64::from(result.depth),
                        std::sync::atomic::Ordering::Relaxed,
                    );
                    nodes.fetch_add(result.nodes, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    let elapsed = started.elapsed().as_secs_f64();
    RawRun {
        jobs_per_second: n_jobs as f64 / elapsed,
        depth: depth.into_inner() as f64 / n_jobs as f64,
        nodes_per_second: nodes.into_inner() as f64 / elapsed,
    }
}

async fn run_batch(workers: usize) -> f64 {
    run_specs(workers, batch_specs()).await
}

/// `specs` through the queue with `workers` workers of one slot each: jobs per second.
async fn run_specs(workers: usize, specs: Vec<JobSpec>) -> f64 {
    let (_server, live) = redis().await;
    let queue = Queue::new(live, QueueConfig::for_tests()).await.unwrap();
    let n_jobs = specs.len();
    let mut ids = Vec::new();
    for spec in specs {
        let submitted = queue
            .submit(NewJob {
                job_id: Queue::new_job_id(),
                class: Class::Interactive,
                spec,
                owner: None,
                mergeable: false,
                trace: Default::default(),
            })
            .await
            .unwrap();
        ids.push(submitted.record().job_id.clone());
    }
    let started = Instant::now();
    let mut handles = Vec::new();
    for w in 0..workers {
        handles.push(start_workers(&queue, &format!("w{w}"), 1));
    }
    for id in &ids {
        loop {
            let (record, _) = queue.load(id).await.unwrap().unwrap();
            if record.state == JobState::Done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    for (stop, handle) in handles {
        let _ = stop.send(());
        handle.await.unwrap();
    }
    n_jobs as f64 / elapsed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn throughput_one_and_two_workers() {
    if !enabled() {
        return;
    }
    let raw_one = tokio::task::spawn_blocking(|| raw_batch(1)).await.unwrap();
    let raw_two = tokio::task::spawn_blocking(|| raw_batch(2)).await.unwrap();
    let one = run_batch(1).await;
    let two = run_batch(2).await;
    println!(
        "throughput, 24 jobs of 300 000 nodes: 1 worker {one:.2} jobs/s, 2 workers {two:.2} jobs/s ({:.2}x); \
         the same searches on plain threads (no queue): 1 thread {raw_one:.2}/s, 2 threads {raw_two:.2}/s ({:.2}x); \
         queue at 1 worker {:.0}% of 1 thread, at 2 workers {:.0}% of 2 threads",
        two / one,
        raw_two / raw_one,
        100.0 * one / raw_one,
        100.0 * two / raw_two
    );
}

/// Jobs per second at a fixed move time (100 ms, one worker slot, as a level 8 analysis is asked), and
/// the depth that time buys with the default evaluation (international's network) and the learned
/// weights it replaced, on one plain thread each.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn fixed_time_jobs_with_each_evaluation() {
    if !enabled() {
        return;
    }
    let variant = draughts_engine::Variant::International;
    let specs = timed_specs(100);
    let queued = run_specs(1, specs.clone()).await;
    let raw = {
        let specs = specs.clone();
        tokio::task::spawn_blocking(move || {
            let network = raw_run(1, &specs, None);
            let learned = raw_run(
                1,
                &specs,
                Some(draughts_ai::Evaluator::shipped_learned(variant)),
            );
            (network, learned)
        })
        .await
        .unwrap()
    };
    let (network, learned) = raw;
    println!(
        "fixed time, 24 jobs of 100 ms: 1 worker {queued:.2} jobs/s (default evaluation); plain thread, \
         default (network) {:.2} jobs/s, mean depth {:.2}, {:.2} M nodes/s; learned weights {:.2} jobs/s, \
         mean depth {:.2}, {:.2} M nodes/s",
        network.jobs_per_second,
        network.depth,
        network.nodes_per_second / 1e6,
        learned.jobs_per_second,
        learned.depth,
        learned.nodes_per_second / 1e6,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_ply_game_streams_ply_by_ply() {
    if !enabled() {
        return;
    }
    // A 100-ply game: level 2 against itself from the start, seeds tried until a game lasts 100 plies.
    let variant = draughts_engine::Variant::International;
    let mut moves = Vec::new();
    'seeds: for seed in 1..100u64 {
        moves.clear();
        let mut game = draughts_engine::Game::new(draughts_engine::Position::start(variant));
        let mut searcher = draughts_ai::Searcher::new(variant);
        let mut rng = draughts_ai::Rng::new(seed);
        let level = draughts_ai::Level::new(2).unwrap();
        while moves.len() < 100 {
            let root = draughts_ai::RootState::from_game(&game);
            let Some(mv) = level.choose(&mut searcher, &root, &mut rng) else {
                continue 'seeds;
            };
            moves.push(game.position().move_to_text(&mv));
            if game.play(&mv).is_err() || game.status() != draughts_engine::GameStatus::Ongoing {
                if moves.len() == 100 {
                    break;
                }
                continue 'seeds;
            }
        }
        break;
    }
    assert_eq!(moves.len(), 100);
    let (_server, live) = redis().await;
    let queue = Queue::new(live.clone(), QueueConfig::for_tests())
        .await
        .unwrap();
    let (stop, handle) = start_workers(&queue, "game", 1);
    let job_id = Queue::new_job_id();
    let mut events = live
        .subscribe(&draughts_analysis::contract::events_channel(&job_id))
        .await
        .unwrap();
    let started = Instant::now();
    queue
        .submit(NewJob {
            job_id: job_id.clone(),
            class: Class::Interactive,
            spec: JobSpec::Game {
                line: line("international", variant.start_fen(), moves),
                limits: JobLimits {
                    nodes: Some(20_000),
                    movetime_ms: Some(10_000),
                    multi_pv: 1,
                    ..JobLimits::default()
                },
                game_id: None,
            },
            owner: None,
            mergeable: false,
            trace: Default::default(),
        })
        .await
        .unwrap();
    let mut seen_at: Vec<f64> = Vec::new();
    loop {
        let _ = tokio::time::timeout(Duration::from_millis(200), events.next()).await;
        let (record, _) = queue.load(&job_id).await.unwrap().unwrap();
        if let Some(p) = &record.progress {
            while seen_at.len() < p.plies.len() {
                seen_at.push(started.elapsed().as_secs_f64());
            }
        }
        if record.state == JobState::Done {
            break;
        }
    }
    let total = started.elapsed().as_secs_f64();
    let updates = seen_at.len();
    let half = seen_at.get(49).copied().unwrap_or(0.0);
    println!(
        "100-ply international AnalyzeGame at 20 000 nodes/ply: {total:.2} s total, {:.1} ms per ply; plies seen while running: {updates}; first 50 plies by {half:.2} s, last 50 in {:.2} s; first ply at {:.3} s",
        total * 1000.0 / 100.0,
        seen_at.last().copied().unwrap_or(total) - half,
        seen_at.first().copied().unwrap_or(0.0),
    );
    let _ = stop.send(());
    handle.await.unwrap();
}
