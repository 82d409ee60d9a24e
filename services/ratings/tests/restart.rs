//! Nothing lost and nothing counted twice across restarts: the whole service (`draughts_ratings::run`:
//! gRPC server and stream consumer) on a real PostgreSQL and a real `redis-server` with an append-only
//! file, stopped gracefully, killed mid-stream, and Redis itself stopped and started again while the
//! service runs.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use draughts_ratings::Config;
use draughts_ratings::event::FINISHED_STREAM;
use draughts_store::sqlx::{self, Row};
use draughts_store::{Database, LiveStore, RedisStore};

/// A `redis-server` with an append-only file (fsync on every write) that can be stopped and started
/// again on the same port and data directory. Killed and removed on drop.
struct PersistentRedis {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
}

fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}

impl PersistentRedis {
    fn start() -> PersistentRedis {
        let dir = tempfile::Builder::new()
            .prefix("draughts-ratings-redis-")
            .tempdir()
            .unwrap();
        let mut redis = PersistentRedis {
            dir,
            port: draughts_testkit::free_port().unwrap(),
            child: None,
        };
        redis.spawn();
        redis
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "yes", "--appendfsync", "always"])
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (install: redis-server)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ping(self.port) {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM (Redis flushes the append-only file and exits), then waits for the exit.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let _ = child.wait();
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for PersistentRedis {
    /// The server writes into the directory: killed here, before the directory (a field) is removed.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn event(i: usize) -> Bytes {
    let white = format!("player:{}", i % 17);
    let black = format!("player:{}", (i * 7 + 3) % 17);
    let black = if black == white {
        "player:x".to_owned()
    } else {
        black
    };
    let outcome = ["white", "black", "draw"][i % 3];
    Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "v": 1, "game_id": format!("g{i}"), "variant": "russian", "options": "", "rated": true,
            "white": {"id": white, "name": "w"}, "black": {"id": black, "name": "b"},
            "outcome": outcome, "reason": "resignation", "result": "1-0",
            "time_control": {"kind": "fischer", "base_ms": 300000, "increment_ms": 0},
            "plies": 30, "finished_at_ms": 1_700_000_000_000u64 + i as u64 * 1000, "pdn": ""
        }))
        .unwrap(),
    )
}

async fn count(db: &Database, sql: &'static str) -> i64 {
    sqlx::query(sql)
        .fetch_one(db.pool())
        .await
        .unwrap()
        .try_get::<i64, _>(0)
        .unwrap()
}

async fn recorded(db: &Database) -> i64 {
    count(db, "SELECT COUNT(*) FROM rating_games").await
}

/// Waits until `predicate(recorded games)` holds.
async fn wait_for(db: &Database, what: &str, predicate: impl Fn(i64) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // The table appears when the first service instance has migrated.
        let n = sqlx::query("SELECT COUNT(*) FROM rating_games")
            .fetch_one(db.pool())
            .await
            .map(|row| row.try_get::<i64, _>(0).unwrap())
            .unwrap_or(0);
        if predicate(n) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what} ({n} recorded)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Service {
    stop: tokio::sync::oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<()>,
}

async fn start(redis_url: &str, database_url: &str, consumer: &str) -> Service {
    let mut config = Config::for_tests();
    config.backends.redis_url = redis_url.to_owned();
    config.backends.key_prefix = "restart:".into();
    config.backends.database_url = database_url.to_owned();
    config.ratings.consumer_name = consumer.to_owned();
    config.ratings.batch_size = 5;
    config.ratings.block_ms = 50;
    config.ratings.claim_idle_ms = 300;
    config.ratings.claim_interval_ms = 100;
    // 400 games among 17 players within seconds: every game is to change ratings here.
    config.ratings.pair_games_per_day = 0;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        draughts_ratings::run(config, listener, async {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    Service { stop, handle }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_lost_or_doubled_across_service_and_redis_restarts() {
    let mut redis = PersistentRedis::start();
    let pg = draughts_testkit::PostgresServer::start().expect("postgres (install: postgresql)");
    let database_url = pg.create_database("ratings_restart").unwrap();
    let db = Database::connect(&database_url).await.unwrap();
    let producer: Arc<dyn LiveStore> =
        Arc::new(RedisStore::connect(&redis.url(), "restart:").await.unwrap());
    for i in 0..300 {
        producer.append(FINISHED_STREAM, event(i)).await.unwrap();
    }

    // 1. Stopped gracefully part-way: finishes its batch, acknowledges, exits.
    let first = start(&redis.url(), &database_url, "first").await;
    wait_for(&db, "the first games", |n| n >= 20).await;
    first.stop.send(()).unwrap();
    first.handle.await.unwrap();
    let after_first = recorded(&db).await;
    assert!(
        after_first < 300,
        "the test needs the stream not finished yet"
    );

    // 2. Killed part-way (task aborted: no drain, no final ack).
    let second = start(&redis.url(), &database_url, "second").await;
    wait_for(&db, "more games", |n| n >= after_first + 20).await;
    second.handle.abort();
    let _ = second.handle.await;
    drop(second.stop);
    assert!(recorded(&db).await < 300);

    // 3. A third instance takes over (claiming what the killed one held); Redis is stopped and started
    //    again while it works, and more games are published after the restart.
    let third = start(&redis.url(), &database_url, "third").await;
    wait_for(&db, "progress", |n| n >= after_first + 60).await;
    redis.stop();
    tokio::time::sleep(Duration::from_millis(300)).await;
    redis.spawn();
    for i in 300..400 {
        // The producer's connection reconnects by itself; retry the first appends until it has.
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Err(e) = producer.append(FINISHED_STREAM, event(i)).await {
            assert!(Instant::now() < deadline, "append after restart: {e}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    wait_for(&db, "every game", |n| n == 400).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while producer
        .pending_count(FINISHED_STREAM, "ratings")
        .await
        .unwrap()
        > 0
    {
        assert!(Instant::now() < deadline, "entries left pending");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    third.stop.send(()).unwrap();
    third.handle.await.unwrap();

    assert_eq!(recorded(&db).await, 400);
    let sides = count(&db, "SELECT CAST(SUM(games) AS BIGINT) FROM ratings").await;
    let history = count(&db, "SELECT COUNT(*) FROM rating_history").await;
    assert_eq!(
        (sides, history),
        (800, 800),
        "every game counted once per player"
    );
}
