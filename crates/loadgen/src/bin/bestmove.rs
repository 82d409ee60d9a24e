//! `draughts-load-bestmove`: the computer opponent's path end to end. Guests ask `Analysis.BestMove` at
//! level 1 (a search of tens of microseconds) through gRPC, one call at a time per task, and the
//! generator reports the answer time, the search's own share (`search_ms`, whole milliseconds) and,
//! measured alternately on the same connections, the answer time of `Diagnostics.Echo`: the gRPC round
//! trip with nothing behind it. BestMove minus Echo is what the analysis service adds to a computer
//! move: authentication, the quota, the queue (submit, a worker's take, the finish, the caller's
//! wake-up) and the search.
//!
//! ```sh
//! draughts-load-bestmove --server http://127.0.0.1:50051 --calls 2000
//! ```
//! Each guest makes at most `--calls-per-guest` calls (the guests' BestMove quota is 2 000 a day).

use std::time::{Duration, Instant};

use clap::Parser;
use draughts_loadgen::Target;
use draughts_loadgen::games::{authed, guest};
use draughts_proto::pb;
use draughts_proto::pb::analysis_client::AnalysisClient;
use draughts_proto::pb::diagnostics_client::DiagnosticsClient;
use hdrhistogram::Histogram;
use tonic::transport::Channel;

#[derive(Parser, Debug)]
#[command(
    name = "draughts-load-bestmove",
    about = "Analysis.BestMove at level 1 against Diagnostics.Echo: what the analysis path adds to a computer move"
)]
struct Args {
    /// Server (loopback only).
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    server: String,
    /// Measured BestMove calls in all (as many Echo calls are measured beside them).
    #[arg(long, default_value_t = 2_000)]
    calls: u64,
    /// Calls before the measurement, not counted (connections, workers and caches warm up).
    #[arg(long, default_value_t = 100)]
    warmup: u64,
    /// Tasks calling at once, each one call at a time (1: nothing queues behind another call).
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// A new guest after this many BestMove calls (under the guests' daily quota).
    #[arg(long, default_value_t = 1_000)]
    calls_per_guest: u64,
    /// Variant of the position searched (proto enum name without the prefix, e.g. international).
    #[arg(long, default_value = "international")]
    variant: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Answer times in microseconds, per kind.
struct Times {
    best_move: Histogram<u64>,
    /// BestMove's answer time minus its search's whole milliseconds.
    best_move_less_search: Histogram<u64>,
    echo: Histogram<u64>,
    searches_of_1_ms_or_more: u64,
}

impl Times {
    fn new() -> Times {
        let hist =
            || Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
        Times {
            best_move: hist(),
            best_move_less_search: hist(),
            echo: hist(),
            searches_of_1_ms_or_more: 0,
        }
    }

    fn add(&mut self, other: &Times) -> anyhow::Result<()> {
        self.best_move.add(&other.best_move)?;
        self.best_move_less_search
            .add(&other.best_move_less_search)?;
        self.echo.add(&other.echo)?;
        self.searches_of_1_ms_or_more += other.searches_of_1_ms_or_more;
        Ok(())
    }
}

fn micros(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}

async fn run_task(
    ch: Channel,
    variant: pb::Variant,
    calls: u64,
    warmup: u64,
    calls_per_guest: u64,
    done: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> anyhow::Result<Times> {
    let mut analysis = AnalysisClient::new(ch.clone());
    let mut diagnostics = DiagnosticsClient::new(ch.clone());
    let mut times = Times::new();
    let mut token = String::new();
    for n in 0..warmup + calls {
        if n % calls_per_guest.max(1) == 0 {
            token = guest(&ch, "load").await?.1;
        }
        let request = pb::BestMoveRequest {
            source: Some(pb::best_move_request::Source::Position(pb::PositionInput {
                rules: Some(pb::RuleSet {
                    variant: variant as i32,
                    options: None,
                }),
                fen: String::new(),
                moves: Vec::new(),
            })),
            strength: Some(pb::best_move_request::Strength::Level(1)),
            clock: None,
            seed: n + 1,
        };
        let started = Instant::now();
        let answer = analysis
            .best_move(authed(&token, request))
            .await?
            .into_inner();
        let best_move = started.elapsed();
        let started = Instant::now();
        diagnostics
            .echo(pb::EchoRequest {
                payload: Vec::new(),
            })
            .await?;
        let echo = started.elapsed();
        if n < warmup {
            continue;
        }
        times.best_move.record(micros(best_move))?;
        let search = Duration::from_millis(answer.search_ms);
        times
            .best_move_less_search
            .record(micros(best_move.saturating_sub(search)))?;
        times.echo.record(micros(echo))?;
        times.searches_of_1_ms_or_more += u64::from(answer.search_ms > 0);
        done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(times)
}

fn quantiles(h: &Histogram<u64>) -> serde_json::Value {
    serde_json::json!({
        "p50_us": h.value_at_quantile(0.5),
        "p99_us": h.value_at_quantile(0.99),
        "max_us": h.max(),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let target = Target::parse(&args.server).await?;
    let variant =
        pb::Variant::from_str_name(&format!("VARIANT_{}", args.variant.to_ascii_uppercase()))
            .ok_or_else(|| anyhow::anyhow!("unknown variant {:?}", args.variant))?;
    let ch = Channel::from_shared(target.uri())?.connect().await?;
    let tasks = args.concurrency.max(1);
    let per_task = args.calls.div_ceil(tasks as u64);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..tasks {
        handles.push(tokio::spawn(run_task(
            ch.clone(),
            variant,
            per_task,
            args.warmup,
            args.calls_per_guest,
            done.clone(),
        )));
    }
    // Progress once a second on stderr while the calls run.
    let progress = {
        let done = done.clone();
        let total = per_task * tasks as u64;
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_secs(1));
            ticks.tick().await;
            loop {
                ticks.tick().await;
                eprintln!(
                    "bestmove: {} of {total} measured calls",
                    done.load(std::sync::atomic::Ordering::Relaxed)
                );
            }
        })
    };
    let mut times = Times::new();
    for handle in handles {
        times.add(&handle.await??)?;
    }
    progress.abort();
    let wall = started.elapsed().as_secs_f64();
    let added = times
        .best_move
        .value_at_quantile(0.5)
        .saturating_sub(times.echo.value_at_quantile(0.5));
    if args.json {
        let report = serde_json::json!({
            "calls": times.best_move.len(),
            "concurrency": tasks,
            "seconds": wall,
            "best_move": quantiles(&times.best_move),
            "best_move_less_search": quantiles(&times.best_move_less_search),
            "echo": quantiles(&times.echo),
            "added_by_analysis_p50_us": added,
            "searches_of_1_ms_or_more": times.searches_of_1_ms_or_more,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let line = |name: &str, h: &Histogram<u64>| {
            println!(
                "{name:<28} p50 {:>6} us   p99 {:>6} us   max {:>7} us",
                h.value_at_quantile(0.5),
                h.value_at_quantile(0.99),
                h.max()
            );
        };
        println!(
            "{} BestMove calls at level 1 and as many Echo calls, {tasks} at a time, in {wall:.1} s",
            times.best_move.len()
        );
        line("BestMove", &times.best_move);
        line("BestMove less its search", &times.best_move_less_search);
        line("Echo (the gRPC round trip)", &times.echo);
        println!(
            "added by the analysis path (BestMove p50 - Echo p50): {added} us; searches of 1 ms or more: {}",
            times.searches_of_1_ms_or_more
        );
    }
    Ok(())
}
