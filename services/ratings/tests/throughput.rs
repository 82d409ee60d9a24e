//! Opt-in measurement: results per second applied from the stream. Appends N synthetic finished-game
//! entries to a `redis-server` started on a free port, then times consumers applying them into a
//! PostgreSQL started the same way (and, for comparison, memory + an SQLite file).
//!
//! ```sh
//! DRAUGHTS_RATINGS_BENCH=20000 cargo test --release -p draughts-ratings --test throughput -- --nocapture
//! ```
//! Optional: `DRAUGHTS_RATINGS_BENCH_CONSUMERS` (default 1), `DRAUGHTS_RATINGS_BENCH_BATCH` (default 256),
//! `DRAUGHTS_RATINGS_BENCH_PLAYERS` (default 2000), `DRAUGHTS_RATINGS_BENCH_PAIR_LIMIT` (the pair limit,
//! default the service's 10; 0 turns it off).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use draughts_ratings::event::FINISHED_STREAM;
use draughts_ratings::{Consumer, RatingsConfig, RatingsCore};
use draughts_store::sqlx::{self, Row};
use draughts_store::{Database, LiveStore, MemoryStore, RedisStore};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn event(i: usize, players: usize) -> Bytes {
    let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    let white = (x % players as u64) as usize;
    let black = (white + 1 + (x >> 20) as usize % (players - 1)) % players;
    let outcome = ["white", "black", "draw"][(x >> 40) as usize % 3];
    Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "v": 1, "game_id": format!("bench-{i}"), "variant": "international", "options": "",
            "rated": true,
            "white": {"id": format!("player:{white}"), "name": "w", "guest": false, "computer": false},
            "black": {"id": format!("player:{black}"), "name": "b", "guest": false, "computer": false},
            "outcome": outcome, "reason": "resignation", "result": "2-0",
            "time_control": {"kind": "fischer", "base_ms": 300000, "increment_ms": 3000},
            "plies": 61, "finished_at_ms": 1_700_000_000_000u64 + i as u64 * 100,
            "pdn": "[Event \"bench\"]\n1. 32-28 19-23 2-0",
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        }))
        .unwrap(),
    )
}

async fn measure(label: &str, live: Arc<dyn LiveStore>, db: Database, n: usize) {
    let consumers = env("DRAUGHTS_RATINGS_BENCH_CONSUMERS", 1).max(1);
    let players = env("DRAUGHTS_RATINGS_BENCH_PLAYERS", 2000).max(2);
    let mut config = RatingsConfig::defaults();
    config.batch_size = env("DRAUGHTS_RATINGS_BENCH_BATCH", 256);
    config.block_ms = 20;
    config.pair_games_per_day = env(
        "DRAUGHTS_RATINGS_BENCH_PAIR_LIMIT",
        config.pair_games_per_day as usize,
    ) as u32;
    let core = RatingsCore::new(db.clone(), &config).await.unwrap();
    live.ensure_group(FINISHED_STREAM, &config.consumer_group)
        .await
        .unwrap();

    let appended = Instant::now();
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let live = live.clone();
            tokio::spawn(async move {
                for i in (w..n).step_by(8) {
                    live.append(FINISHED_STREAM, event(i, players))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    eprintln!(
        "{label}: appended {n} entries in {:.2} s",
        appended.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    let mut stops = Vec::new();
    let mut handles = Vec::new();
    for c in 0..consumers {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let consumer =
            Consumer::new(live.clone(), core.clone(), &config).with_name(format!("bench-{c}"));
        handles.push(tokio::spawn(consumer.run(async {
            let _ = rx.await;
        })));
        stops.push(tx);
    }
    loop {
        let recorded: i64 = sqlx::query("SELECT COUNT(*) FROM rating_games")
            .fetch_one(db.pool())
            .await
            .unwrap()
            .try_get(0)
            .unwrap();
        let pending = live
            .pending_count(FINISHED_STREAM, &config.consumer_group)
            .await
            .unwrap();
        if recorded as usize == n && pending == 0 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(600), "too slow");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    for stop in stops {
        let _ = stop.send(());
    }
    for handle in handles {
        handle.await.unwrap();
    }
    eprintln!(
        "{label}: applied {n} results with {consumers} consumer(s), batch {}, pair limit {}: {seconds:.2} s = {:.0} results/s",
        config.batch_size,
        config.pair_games_per_day,
        n as f64 / seconds
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_per_second_from_the_stream() {
    let n = env("DRAUGHTS_RATINGS_BENCH", 0);
    if n == 0 {
        eprintln!("skipped: set DRAUGHTS_RATINGS_BENCH=N to measure");
        return;
    }
    let redis = draughts_testkit::RedisServer::start().expect("redis-server");
    let pg = draughts_testkit::PostgresServer::start().expect("postgresql");
    let live: Arc<dyn LiveStore> =
        Arc::new(RedisStore::connect(&redis.url(), "bench:").await.unwrap());
    let db = Database::connect(&pg.create_database("bench").unwrap())
        .await
        .unwrap();
    measure("redis+postgres", live, db, n).await;

    let tmp = tempfile::Builder::new()
        .prefix("draughts-ratings-bench-")
        .tempdir()
        .unwrap();
    let db = Database::connect(&format!(
        "sqlite://{}/bench.db?mode=rwc",
        tmp.path().display()
    ))
    .await
    .unwrap();
    measure("memory+sqlite", Arc::new(MemoryStore::new()), db, n).await;
}
