//! The whole flow on a real `redis-server` with several `draughts-analysis-worker` processes: jobs queued
//! by this test are run by the worker processes; one is killed (SIGKILL) in the middle of a job, the job
//! is still finished, once, by the other; SIGTERM stops a worker cleanly.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use draughts_analysis::contract::{Class, JobLimits, JobSpec, JobState, Line, Rules};
use draughts_analysis::queue::{NewJob, Queue, QueueConfig};
use draughts_store::RedisStore;
use draughts_testkit::RedisServer;

const PREFIX: &str = "processes:";

fn worker(redis_url: &str, name: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_draughts-analysis-worker"))
        .env("DRAUGHTS_REDIS_URL", redis_url)
        .env("DRAUGHTS_KEY_PREFIX", PREFIX)
        .env("DRAUGHTS_ANALYSIS_VISIBILITY_TIMEOUT_MS", "600")
        .env("DRAUGHTS_ANALYSIS_SLOTS", "1")
        .env("DRAUGHTS_ANALYSIS_HASH_MB", "1")
        .env("DRAUGHTS_ANALYSIS_WORKER_NAME", name)
        .env("DRAUGHTS_ANALYSIS_SHUTDOWN_GRACE_MS", "200")
        .env("DRAUGHTS_METRICS_LISTEN", "off")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start draughts-analysis-worker")
}

fn spec(first: &str, ms: u64) -> JobSpec {
    JobSpec::Position {
        line: Line {
            rules: Rules {
                variant: "international".into(),
                options: String::new(),
            },
            fen: draughts_engine::Variant::International.start_fen().into(),
            moves: vec![first.into()],
        },
        limits: JobLimits {
            movetime_ms: Some(ms),
            multi_pv: 1,
            ..JobLimits::default()
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_processes_share_the_queue_and_survive_a_kill() {
    let redis = RedisServer::start().expect("redis-server");
    let live = Arc::new(RedisStore::connect(&redis.url(), PREFIX).await.unwrap());
    let config = QueueConfig {
        visibility_timeout: Duration::from_millis(600),
        ..QueueConfig::for_tests()
    };
    let queue = Queue::new(live, config).await.unwrap();
    let mut a = worker(&redis.url(), "wa");
    let mut b = worker(&redis.url(), "wb");
    // A long job first (one of the workers takes it), then short ones.
    let submit = |spec: JobSpec| {
        let queue = queue.clone();
        async move {
            queue
                .submit(NewJob {
                    job_id: Queue::new_job_id(),
                    class: Class::Interactive,
                    spec,
                    owner: None,
                    mergeable: false,
                    trace: Default::default(),
                })
                .await
                .unwrap()
                .record()
                .job_id
                .clone()
        }
    };
    let long = submit(spec("32-28", 2_500)).await;
    let mut short = Vec::new();
    for first in ["31-27", "31-26", "33-28", "33-29", "34-29", "34-30"] {
        short.push(submit(spec(first, 100)).await);
    }
    let started = Instant::now();
    let runner = loop {
        let (record, _) = queue.load(&long).await.unwrap().unwrap();
        if record.state == JobState::Running {
            break record.worker.unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no worker took the job"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    // Kill the process running the long job, mid-search.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (victim, survivor) = if runner.starts_with("wa") {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    victim.kill().unwrap();
    victim.wait().unwrap();
    let wait_done = |id: String| {
        let queue = queue.clone();
        async move {
            let start = Instant::now();
            loop {
                let (record, _) = queue.load(&id).await.unwrap().unwrap();
                if record.state.is_final() {
                    return record;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "job {id} not done"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let done = wait_done(long.clone()).await;
    assert_eq!(done.state, JobState::Done);
    assert_eq!(done.attempts, 2, "taken over after the kill");
    assert!(done.result.is_some());
    for id in short {
        let record = wait_done(id).await;
        assert_eq!(record.state, JobState::Done);
    }
    // Exactly once: nothing touches the finished job afterwards.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(queue.load(&long).await.unwrap().unwrap().0, done);
    let status = queue.status().await.unwrap();
    assert_eq!(status.classes[1].1.queued + status.classes[1].1.running, 0);
    // SIGTERM: the survivor stops cleanly and promptly.
    let term = Command::new("kill")
        .arg("-TERM")
        .arg(survivor.id().to_string())
        .status()
        .unwrap();
    assert!(term.success());
    let stopping = Instant::now();
    let exit = loop {
        if let Some(status) = survivor.try_wait().unwrap() {
            break status;
        }
        assert!(
            stopping.elapsed() < Duration::from_secs(10),
            "the worker did not stop"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(exit.success(), "{exit:?}");
}
