//! `draughts-load-games`: the live-games load scenario. `PlayMove` can't be replayed with the same bytes
//! (every move changes the game), so this driver runs many concurrent games, each between two guests,
//! and plays a king shuffle (English, kings only: no capture, no repetition rule, so each game lasts the 80
//! plies of the 40-move rule and then a new one starts). Only `PlayMove` latencies are recorded.
//!
//! ```sh
//! draughts-load-games --server http://127.0.0.1:50051 --games 64 --duration 20s
//! draughts-load-games --server http://127.0.0.1:50051 --games 1000 --rate 2000 --duration 20s
//! ```
//! Without `--rate` every game plays its next move as soon as the last is answered (a closed loop: the
//! latency is mostly the generator's own queue, games / throughput). With `--rate R` the games are paced
//! so that together they send R moves per second, as players who think between moves do: the latency is
//! then the server's answer time under that load.
//! The server needs rate limits above the load (e.g. `--rate-limit-guest-per-minute 100000000`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use draughts_loadgen::{Target, parse_duration};
use draughts_proto::pb;
use draughts_proto::pb::games_client::GamesClient;
use hdrhistogram::Histogram;
use tonic::transport::Channel;

#[derive(Parser, Debug)]
#[command(
    name = "draughts-load-games",
    about = "Concurrent live games: PlayMove latency and throughput"
)]
struct Args {
    /// Server (loopback only).
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    server: String,
    /// Concurrent games.
    #[arg(long, default_value_t = 64)]
    games: usize,
    /// Stop after this long (measurement, after the warm-up).
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    duration: Duration,
    /// Moves before the measurement starts are not counted (game set-up, connection warm-up).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    warmup: Duration,
    /// Stop after this many moves in all.
    #[arg(long, default_value_t = 5_000_000)]
    moves: u64,
    /// HTTP/2 connections shared by the games.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Aggregate target rate in moves per second, spread evenly over the games (each game waits
    /// `games / rate` seconds between its moves, as players think between moves). 0 = no pacing: every
    /// game sends its next move as soon as the last one is answered (a closed loop, where latency is
    /// mostly the queue the generator itself builds: about games / throughput).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

use draughts_loadgen::games::{CYCLE, authed, new_game};

async fn guest(ch: &Channel) -> Result<(String, String), tonic::Status> {
    draughts_loadgen::games::guest(ch, "load").await
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let target = Target::parse(&args.server).await?;
    let mut channels = Vec::new();
    for _ in 0..args.connections.max(1) {
        channels.push(Channel::from_shared(target.uri())?.connect().await?);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for i in 0..args.games {
        let ch = channels[i % channels.len()].clone();
        let (stop, total, errors) = (stop.clone(), total.clone(), errors.clone());
        let measuring = measuring.clone();
        let limit = args.moves;
        // Paced games start spread over one interval, so the load is even from the first second.
        let interval =
            (args.rate > 0.0).then(|| Duration::from_secs_f64(args.games as f64 / args.rate));
        let offset = interval.map(|iv| iv.mul_f64(i as f64 / args.games as f64));
        tasks.push(tokio::spawn(async move {
            let mut hist =
                Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
            let w = guest(&ch).await?;
            let b = guest(&ch).await?;
            let mut games = GamesClient::new(ch.clone());
            if let Some(o) = offset {
                tokio::time::sleep(o).await;
            }
            let mut next = tokio::time::Instant::now();
            'games: while !stop.load(Ordering::Relaxed) {
                let id = new_game(&ch, &w, &b).await?;
                for ply in 0..80usize {
                    if stop.load(Ordering::Relaxed) || total.load(Ordering::Relaxed) >= limit {
                        break 'games;
                    }
                    if let Some(iv) = interval {
                        // The next move is due one interval after the last was due; a game that fell
                        // behind (a slow answer) moves at once rather than in a burst of catch-up moves.
                        next = (next + iv).max(tokio::time::Instant::now());
                        tokio::time::sleep_until(next).await;
                        if stop.load(Ordering::Relaxed) {
                            break 'games;
                        }
                    }
                    let token = if ply % 2 == 0 { &w.1 } else { &b.1 };
                    let req = pb::PlayMoveRequest {
                        game_id: id.clone(),
                        r#move: Some(pb::MoveInput {
                            r#move: Some(pb::move_input::Move::Text(CYCLE[ply % 4].into())),
                        }),
                        expected_ply: None,
                    };
                    let t = Instant::now();
                    let r = games.play_move(authed(token, req)).await;
                    let us = t.elapsed().as_micros() as u64;
                    if measuring.load(Ordering::Relaxed) {
                        hist.saturating_record(us.max(1));
                        total.fetch_add(1, Ordering::Relaxed);
                    }
                    if let Err(e) = r {
                        errors.fetch_add(1, Ordering::Relaxed);
                        eprintln!("PlayMove: {:?} {}", e.code(), e.message());
                        continue 'games;
                    }
                }
            }
            Ok::<_, tonic::Status>(hist)
        }));
    }
    tokio::time::sleep(args.warmup).await;
    measuring.store(true, Ordering::Relaxed);
    let start = Instant::now();
    let mut last = 0;
    while start.elapsed() < args.duration && total.load(Ordering::Relaxed) < args.moves {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = total.load(Ordering::Relaxed);
        eprintln!(
            "[{:>3.0}s] {} moves/s, {} moves, {} errors",
            start.elapsed().as_secs_f64(),
            now - last,
            now,
            errors.load(Ordering::Relaxed)
        );
        last = now;
    }
    stop.store(true, Ordering::Relaxed);
    let elapsed = start.elapsed().as_secs_f64();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for t in tasks {
        match t.await? {
            Ok(h) => hist.add(&h)?,
            Err(e) => eprintln!("a game task failed: {:?} {}", e.code(), e.message()),
        }
    }
    let moves = hist.len();
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "games": args.games, "target_rate": args.rate, "moves": moves, "errors": errors.load(Ordering::Relaxed),
                "seconds": elapsed, "moves_per_second": moves as f64 / elapsed,
                "p50_ms": ms(0.5), "p90_ms": ms(0.9), "p99_ms": ms(0.99), "max_ms": hist.max() as f64 / 1000.0,
            })
        );
    } else {
        println!(
            "PlayMove: {} games{}, {} moves in {:.1} s = {:.0} moves/s, errors {}; latency p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            args.games,
            if args.rate > 0.0 {
                format!(" paced at {} moves/s", args.rate)
            } else {
                String::new()
            },
            moves,
            elapsed,
            moves as f64 / elapsed,
            errors.load(Ordering::Relaxed),
            ms(0.5),
            ms(0.9),
            ms(0.99),
            hist.max() as f64 / 1000.0
        );
    }
    Ok(())
}
