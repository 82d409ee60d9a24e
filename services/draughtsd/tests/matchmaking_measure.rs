//! Opt-in measurement (`DRAUGHTS_MEASURE=1`): seek-to-game latency with concurrent clients on one
//! draughtsd (memory, or Redis + PostgreSQL with `DRAUGHTS_MEASURE_REDIS=1`, or a 3-primary Redis
//! Cluster + PostgreSQL with `DRAUGHTS_MEASURE_CLUSTER=1`; with Redis it also prints Redis's commands
//! and CPU per pairing, and each node's share). `PAIRS` pairs of guests
//! (default 200); in each pair the first seeks, the second seeks 0-500 ms later (a compatible opponent
//! is waiting), all pairs at once in one pool. Prints the latency of the second seeker of each pair
//! (Seek sent -> Paired received) and of everyone.
//!
//! `DRAUGHTS_MEASURE=1 cargo test --release -p draughtsd --test matchmaking_measure -- --nocapture`

use std::time::{Duration, Instant};

use draughts_proto::pb;
use draughts_testkit::ServiceUnderTest;
use draughts_testkit::games::authed;

const POOL: &str = "international-5+3-casual";

async fn seek_to_game(channel: tonic::transport::Channel, token: String) -> Duration {
    let started = Instant::now();
    let mut stream = pb::matchmaking_client::MatchmakingClient::new(channel)
        .seek(authed(
            &token,
            pb::SeekRequest {
                pool_ids: vec![POOL.into()],
                rating_range: None,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    while let Some(event) = stream.message().await.unwrap() {
        if let Some(pb::seek_event::Kind::Paired(_)) = event.kind {
            return started.elapsed();
        }
    }
    panic!("seek ended without a game");
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread")]
async fn seek_to_game_latency() {
    if std::env::var("DRAUGHTS_MEASURE").is_err() {
        eprintln!("skipped: set DRAUGHTS_MEASURE=1");
        return;
    }
    let pairs: usize = std::env::var("PAIRS")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(200);
    // Redis and PostgreSQL when asked (a 3-primary cluster with DRAUGHTS_MEASURE_CLUSTER=1): the
    // servers, the live store's URL and its nodes' ports.
    let cluster = std::env::var("DRAUGHTS_MEASURE_CLUSTER").is_ok();
    let servers = if cluster {
        let redis = draughts_testkit::RedisCluster::start().unwrap();
        let pg = draughts_testkit::PostgresServer::start().unwrap();
        let (url, ports) = (redis.url(), redis.ports());
        Some((Box::new(redis) as Box<dyn std::any::Any>, pg, url, ports))
    } else if std::env::var("DRAUGHTS_MEASURE_REDIS").is_ok() {
        let redis = draughts_testkit::RedisServer::start().unwrap();
        let pg = draughts_testkit::PostgresServer::start().unwrap();
        let (url, ports) = (redis.url(), vec![redis.port()]);
        Some((Box::new(redis) as Box<dyn std::any::Any>, pg, url, ports))
    } else {
        None
    };
    let (redis_url, pg_url) = match &servers {
        Some((_, p, url, _)) => (url.clone(), p.url()),
        None => ("memory://".to_owned(), "sqlite::memory:".to_owned()),
    };
    let mut config = draughtsd::Config::for_tests(&redis_url, &pg_url);
    config.matchmaking.matchmaking_wave_ms = 2000;
    for limit in [
        &mut config.auth.rate_limit_anonymous_per_minute,
        &mut config.auth.rate_limit_guest_per_minute,
        &mut config.auth.rate_limit_api_key_per_minute,
    ] {
        *limit = 1_000_000;
    }
    config.games.max_open_games_per_player = 1000;
    let server = ServiceUnderTest::start(move |l, s| draughtsd::run(config, l, s)).await;
    let channel = server.channel().await;
    let mut auth = pb::auth_client::AuthClient::new(channel.clone());
    let mut tokens = Vec::new();
    for i in 0..pairs * 2 {
        tokens.push(
            auth.create_guest(pb::CreateGuestRequest {
                display_name: format!("g{i}"),
            })
            .await
            .unwrap()
            .into_inner()
            .token,
        );
    }
    // With Redis: what it does idle (every service's timers and consumers polling) for 2 s, then
    // during the pairings, to give Redis commands and CPU per pairing (seek to game for both players,
    // the game's creation included).
    let redis_ports = servers.as_ref().map(|(_, _, _, ports)| ports.clone());
    let read_all = |ports: &[u16]| -> Vec<draughts_testkit::RedisStats> {
        ports
            .iter()
            .map(|&port| draughts_testkit::RedisStats::read(port))
            .collect()
    };
    let idle = redis_ports.as_ref().map(|ports| {
        let before = draughts_testkit::RedisStats::sum(&read_all(ports));
        std::thread::sleep(Duration::from_secs(2));
        draughts_testkit::RedisStats::sum(&read_all(ports)).since(&before)
    });
    let stats_before = redis_ports.as_ref().map(|ports| read_all(ports));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for pair in tokens.chunks(2) {
        let (first, second) = (pair[0].clone(), pair[1].clone());
        let channel = channel.clone();
        let delay = Duration::from_millis(rand_ms(500));
        tasks.push(tokio::spawn(async move {
            let a = tokio::spawn(seek_to_game(channel.clone(), first));
            tokio::time::sleep(delay).await;
            let b = seek_to_game(channel, second).await;
            (a.await.unwrap(), b)
        }));
    }
    let mut seconds = Vec::new();
    let mut everyone = Vec::new();
    for t in tasks {
        let (a, b) = t.await.unwrap();
        seconds.push(b);
        everyone.extend([a, b]);
    }
    let elapsed = started.elapsed();
    if let (Some(ports), Some(before), Some(idle)) = (&redis_ports, &stats_before, &idle) {
        let per_node: Vec<draughts_testkit::RedisStats> = read_all(ports)
            .iter()
            .zip(before)
            .map(|(after, before)| after.since(before))
            .collect();
        let during = draughts_testkit::RedisStats::sum(&per_node);
        let shares: Vec<String> = per_node
            .iter()
            .map(|node| {
                format!(
                    "{:.0}% of the commands, {:.0}% of the CPU",
                    100.0 * node.total_calls() as f64 / during.total_calls().max(1) as f64,
                    100.0 * node.cpu_us as f64 / during.cpu_us.max(1) as f64
                )
            })
            .collect();
        println!("Redis nodes: {}", shares.join(" / "));
        let n = pairs as f64;
        let idle_share = elapsed.as_secs_f64() / 2.0;
        println!(
            "Redis per pairing: {:.1} commands in all ({:.1} over idle), {:.0} us of Redis CPU ({:.0} us over idle); idle: {:.0} commands/s; {}",
            during.total_calls() as f64 / n,
            (during.total_calls() as f64 - idle.total_calls() as f64 * idle_share) / n,
            during.cpu_us as f64 / n,
            (during.cpu_us as f64 - idle.cpu_us as f64 * idle_share) / n,
            idle.total_calls() as f64 / 2.0,
            during.per(n),
        );
    }
    seconds.sort();
    everyone.sort();
    println!(
        "{pairs} pairs ({} clients) on {}, all paired in {:?}",
        pairs * 2,
        match (&servers, cluster) {
            (Some(_), true) => "a 3-primary Redis Cluster + PostgreSQL",
            (Some(_), false) => "Redis + PostgreSQL",
            (None, _) => "memory + SQLite",
        },
        started.elapsed()
    );
    for (name, d) in [
        ("second seeker of each pair", &seconds),
        ("every seeker", &everyone),
    ] {
        println!(
            "{name}: p50 {:?}, p90 {:?}, p99 {:?}, max {:?}",
            percentile(d, 0.5),
            percentile(d, 0.9),
            percentile(d, 0.99),
            d[d.len() - 1]
        );
    }
    server.stop().await;
}

fn rand_ms(max: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(max);
    h.finish() % max
}
