//! `draughts-load-signin`: concurrent sign-ins (`Auth.SignIn`, each an Argon2id verification), to be
//! run beside `draughts-load-games` so that the games' move latency with and without sign-ins can be
//! compared. It first signs up `--accounts` accounts (with one password each), then `--concurrency`
//! clients sign in over and over, each attempt as a different client address (`x-forwarded-for`:
//! start the server with `--trust-forwarded-for`), round-robin over the accounts, so that the
//! per-address and per-account throttles (which are what they are for abuse, not for load) stay out
//! of the measurement. Records `SignIn` latencies.
//!
//! Two shapes: a closed loop (default: every client signs in again as soon as it is answered, so
//! `--concurrency` sign-ins are in flight at every moment and the hashing cores are saturated), or
//! bursts (`--burst-every 1s`: at each tick every client starts one sign-in, so `--concurrency`
//! sign-ins arrive at once; with answers faster than the tick, each burst is over before the next).
//!
//! ```sh
//! draughtsd --trust-forwarded-for --rate-limit-anonymous-per-minute 100000000 \
//!     --signups-per-address-per-hour 100000 &
//! draughts-load-signin --server http://127.0.0.1:50051 --concurrency 20 --duration 30s
//! draughts-load-signin --server http://127.0.0.1:50051 --concurrency 20 --burst-every 1s
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use draughts_loadgen::{Target, parse_duration};
use draughts_proto::pb;
use draughts_proto::pb::auth_client::AuthClient;
use hdrhistogram::Histogram;
use tonic::transport::Channel;

#[derive(Parser, Debug)]
#[command(
    name = "draughts-load-signin",
    about = "Concurrent sign-ins: SignIn latency and throughput"
)]
struct Args {
    /// Server (loopback only).
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    server: String,
    /// Clients signing in at once (each waits for its answer, then signs in again).
    #[arg(long, default_value_t = 20)]
    concurrency: usize,
    /// Accounts signed up first and signed in to, round-robin.
    #[arg(long, default_value_t = 400)]
    accounts: usize,
    /// Stop after this long.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    duration: Duration,
    /// Bursts instead of a closed loop: every this long, each client signs in once, all at once.
    #[arg(long, value_parser = parse_duration)]
    burst_every: Option<Duration>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

const PASSWORD: &str = "load-test password";

fn from<T>(addr: u64, message: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    // 10.0.0.0/8: one address per attempt.
    let ip = format!(
        "10.{}.{}.{}",
        (addr >> 16) & 255,
        (addr >> 8) & 255,
        addr & 255
    );
    if let Ok(v) = ip.parse() {
        req.metadata_mut().insert("x-forwarded-for", v);
    }
    req
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let target = Target::parse(&args.server).await?;
    let channel = Channel::from_shared(target.uri())?.connect().await?;
    let run = format!("{:x}", std::process::id() % 0xffff);
    let mut auth = AuthClient::new(channel.clone());
    let addresses = Arc::new(AtomicU64::new(1));
    let started = Instant::now();
    let mut names = Vec::with_capacity(args.accounts);
    for i in 0..args.accounts {
        let name = format!("load{run}x{i}");
        auth.sign_up(from(
            addresses.fetch_add(1, Ordering::Relaxed),
            pb::SignUpRequest {
                username: name.clone(),
                password: PASSWORD.into(),
                display_name: String::new(),
            },
        ))
        .await?;
        names.push(name);
        if (i + 1) % 100 == 0 {
            eprintln!("signed up {} accounts", i + 1);
        }
    }
    eprintln!(
        "{} accounts signed up in {:.1} s",
        args.accounts,
        started.elapsed().as_secs_f64()
    );
    let names = Arc::new(names);
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    let first_burst = tokio::time::Instant::now();
    for worker in 0..args.concurrency {
        let (stop, total, errors) = (stop.clone(), total.clone(), errors.clone());
        let (names, addresses) = (names.clone(), addresses.clone());
        let burst_every = args.burst_every;
        let mut auth = AuthClient::new(channel.clone());
        tasks.push(tokio::spawn(async move {
            let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
            let mut i = worker;
            let mut burst = 0u32;
            while !stop.load(Ordering::Relaxed) {
                if let Some(every) = burst_every {
                    // Every client starts at the tick: the burst's sign-ins arrive together (a
                    // tick that passed while a burst was still answered starts the next at once).
                    tokio::time::sleep_until(first_burst + every * burst).await;
                    burst += 1;
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
                let req = from(
                    addresses.fetch_add(1, Ordering::Relaxed),
                    pb::SignInRequest {
                        username: names[i % names.len()].clone(),
                        password: PASSWORD.into(),
                    },
                );
                i += args.concurrency;
                let t = Instant::now();
                let r = auth.sign_in(req).await;
                hist.saturating_record((t.elapsed().as_micros() as u64).max(1));
                total.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = r {
                    errors.fetch_add(1, Ordering::Relaxed);
                    eprintln!("SignIn: {:?} {}", e.code(), e.message());
                }
            }
            Ok::<_, anyhow::Error>(hist)
        }));
    }
    let start = Instant::now();
    let mut last = 0;
    while start.elapsed() < args.duration {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = total.load(Ordering::Relaxed);
        eprintln!(
            "[{:>3.0}s] {} sign-ins/s, {} sign-ins, {} errors",
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
        hist.add(&t.await??)?;
    }
    let n = hist.len();
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "concurrency": args.concurrency, "sign_ins": n, "errors": errors.load(Ordering::Relaxed),
                "seconds": elapsed, "per_second": n as f64 / elapsed,
                "p50_ms": ms(0.5), "p90_ms": ms(0.9), "p99_ms": ms(0.99), "max_ms": hist.max() as f64 / 1000.0,
            })
        );
    } else {
        println!(
            "SignIn: {} at once, {} in {:.1} s = {:.1}/s, errors {}; latency p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            args.concurrency,
            n,
            elapsed,
            n as f64 / elapsed,
            errors.load(Ordering::Relaxed),
            ms(0.5),
            ms(0.9),
            ms(0.99),
            hist.max() as f64 / 1000.0
        );
    }
    Ok(())
}
