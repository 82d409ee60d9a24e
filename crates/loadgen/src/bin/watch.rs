//! `draughts-load-watch`: many concurrent `WatchGame` streams of ONE game on one replica.
//!
//! Opens `--watchers` streams (anonymous, so the server needs `--max-watchers-per-caller` and the
//! anonymous rate limit above them) over `--connections` HTTP/2 connections, waits until each has
//! received the game's history, then plays `--moves` moves (a king shuffle, one every `--interval`)
//! and measures, for every watcher and move, the time from sending `PlayMove` to receiving the move's
//! event (the fan-out latency, PlayMove's own answer time included). With `--server-pid` it reads the
//! server's resident memory (/proc/PID/status VmRSS) before the watchers connect and once they all
//! are; with `--redis-port` it counts the Redis server's clients (`INFO clients`, and pub/sub clients
//! with `CLIENT LIST TYPE pubsub`) while every watcher is open.
//!
//! ```sh
//! draughts-load-watch --server http://127.0.0.1:50051 --watchers 10000 --connections 200 \
//!     --server-pid "$SERVER_PID" --redis-port 6379 --json
//! ```

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use draughts_loadgen::parse_duration;
use draughts_proto::pb;
use draughts_proto::pb::games_client::GamesClient;
use hdrhistogram::Histogram;
use tonic::transport::{Channel, Endpoint};

#[derive(Parser, Debug)]
#[command(
    name = "draughts-load-watch",
    about = "Many WatchGame streams of one game: memory, Redis connections, fan-out latency"
)]
struct Args {
    /// Server (loopback only).
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    server: String,
    /// Concurrent WatchGame streams of the one game.
    #[arg(long, default_value_t = 10_000)]
    watchers: usize,
    /// HTTP/2 connections the streams are spread over.
    #[arg(long, default_value_t = 200)]
    connections: usize,
    /// Moves played once every watcher is open.
    #[arg(long, default_value_t = 20)]
    moves: usize,
    /// Pause between moves.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    interval: Duration,
    /// The server's process id, to read its memory.
    #[arg(long)]
    server_pid: Option<u32>,
    /// The Redis server's port on 127.0.0.1, to count its clients.
    #[arg(long)]
    redis_port: Option<u16>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

use draughts_loadgen::games::{CYCLE, authed, new_game};

async fn guest(ch: &Channel) -> Result<(String, String), tonic::Status> {
    draughts_loadgen::games::guest(ch, "watch-load").await
}

/// VmRSS of `pid` in kB.
fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Sends one inline command to Redis and returns the reply's text (bulk strings only).
fn redis_text(port: u16, command: &str) -> Option<String> {
    let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    socket.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    socket
        .write_all(format!("{command}\r\nQUIT\r\n").as_bytes())
        .ok()?;
    let mut reply = String::new();
    socket.read_to_string(&mut reply).ok()?;
    Some(reply)
}

fn redis_clients(port: u16) -> (Option<u64>, Option<usize>) {
    let connected = redis_text(port, "INFO clients").and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("connected_clients:"))
            .and_then(|v| v.trim().parse().ok())
    });
    let pubsub = redis_text(port, "CLIENT LIST TYPE pubsub")
        .map(|t| t.lines().filter(|l| l.starts_with("id=")).count());
    (connected, pubsub)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let setup = Endpoint::from_shared(args.server.clone())?
        .connect()
        .await?;
    let (w, b) = (guest(&setup).await?, guest(&setup).await?);
    let id = new_game(&setup, &w, &b).await?;
    let rss_before = args.server_pid.and_then(rss_kb);
    let (redis_before, _) = args.redis_port.map_or((None, None), redis_clients);

    let mut channels = Vec::with_capacity(args.connections);
    for _ in 0..args.connections.max(1) {
        channels.push(
            Endpoint::from_shared(args.server.clone())?
                .connect()
                .await?,
        );
    }
    let ready = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(args.watchers);
    for n in 0..args.watchers {
        let channel = channels[n % channels.len()].clone();
        let (id, ready, failed) = (id.clone(), ready.clone(), failed.clone());
        tasks.push(tokio::spawn(async move {
            let mut received: Vec<(u32, Instant)> = Vec::new();
            let stream = GamesClient::new(channel)
                .watch_game(pb::WatchGameRequest { game_id: id })
                .await;
            let mut stream = match stream {
                Ok(s) => s.into_inner(),
                Err(e) => {
                    if failed.fetch_add(1, Ordering::Relaxed) < 3 {
                        eprintln!("watch refused: {e}");
                    }
                    return received;
                }
            };
            let mut counted = false;
            loop {
                match stream.message().await {
                    Ok(Some(event)) => {
                        let at = Instant::now();
                        if !counted {
                            counted = true;
                            ready.fetch_add(1, Ordering::Relaxed);
                        }
                        if let Some(pb::game_event::Kind::MovePlayed(m)) = event.kind {
                            received.push((m.ply, at));
                        }
                    }
                    Ok(None) => return received,
                    Err(e) => {
                        if failed.fetch_add(1, Ordering::Relaxed) < 3 {
                            eprintln!("watch failed: {e}");
                        }
                        return received;
                    }
                }
            }
        }));
    }
    // Every stream open and past the history.
    let open_deadline = Instant::now() + Duration::from_secs(120);
    while ready.load(Ordering::Relaxed) + failed.load(Ordering::Relaxed) < args.watchers
        && Instant::now() < open_deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let open_s = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_after = args.server_pid.and_then(rss_kb);
    let (redis_during, pubsub_during) = args.redis_port.map_or((None, None), redis_clients);

    let mut sent_at = Vec::with_capacity(args.moves);
    for ply in 0..args.moves {
        let who = if ply % 2 == 0 { &w } else { &b };
        let at = Instant::now();
        GamesClient::new(setup.clone())
            .play_move(authed(
                &who.1,
                pb::PlayMoveRequest {
                    game_id: id.clone(),
                    r#move: Some(pb::MoveInput {
                        r#move: Some(pb::move_input::Move::Text(CYCLE[ply % 4].into())),
                    }),
                    expected_ply: None,
                },
            ))
            .await?;
        sent_at.push(at);
        tokio::time::sleep(args.interval).await;
    }
    // The last move's events, then end the game so every stream ends.
    tokio::time::sleep(Duration::from_secs(2)).await;
    GamesClient::new(setup.clone())
        .resign(authed(
            &w.1,
            pb::GameActionRequest {
                game_id: id.clone(),
            },
        ))
        .await?;
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)?;
    let mut missing = 0usize;
    for task in tasks {
        let received = tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let mut seen = vec![false; args.moves];
        for (ply, at) in received {
            let i = ply as usize - 1;
            if i < args.moves && !seen[i] {
                seen[i] = true;
                let micros = at.saturating_duration_since(sent_at[i]).as_micros();
                histogram.record(u64::try_from(micros).unwrap_or(u64::MAX).max(1))?;
            }
        }
        missing += seen.iter().filter(|s| !**s).count();
    }
    let ms = |q: f64| histogram.value_at_quantile(q) as f64 / 1000.0;
    let per_watcher_kb = match (rss_before, rss_after) {
        (Some(a), Some(b)) => Some((b.saturating_sub(a)) as f64 / args.watchers.max(1) as f64),
        _ => None,
    };
    let report = serde_json::json!({
        "watchers": args.watchers,
        "connections": channels.len(),
        "open": ready.load(Ordering::Relaxed),
        "failed": failed.load(Ordering::Relaxed),
        "open_seconds": open_s,
        "moves": args.moves,
        "events": histogram.len(),
        "missing_events": missing,
        "fanout_p50_ms": ms(0.5),
        "fanout_p90_ms": ms(0.9),
        "fanout_p99_ms": ms(0.99),
        "fanout_max_ms": histogram.max() as f64 / 1000.0,
        "server_rss_before_kb": rss_before,
        "server_rss_after_kb": rss_after,
        "server_kb_per_watcher": per_watcher_kb,
        "redis_clients_before": redis_before,
        "redis_clients_during": redis_during,
        "redis_pubsub_clients_during": pubsub_during,
    });
    if args.json {
        println!("{report}");
    } else {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(())
}
