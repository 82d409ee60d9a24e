//! `draughts search-bench`: nodes per second and time to depth on the frozen middlegame positions of
//! `crates/ai/data/bench.txt`.

use clap::Args;
use draughts_ai::{Limits, RootState, Searcher};
use draughts_engine::{Position, Variant};
use serde::Serialize;

use crate::CliError;

#[derive(Args, Debug)]
pub(crate) struct SearchBenchArgs {
    /// Only this variant (default: every variant).
    #[arg(long, short = 'v')]
    variant: Option<String>,
    /// Depth (default: per variant).
    #[arg(long, short = 'd')]
    depth: Option<u32>,
    /// Transposition table size in MiB (the levels' default is 16).
    #[arg(long, default_value_t = 16)]
    hash: usize,
    /// Evaluation: `default` (the shipped network, else the shipped learned weights, else hand-set),
    /// `learned` (the shipped learned weights, else hand-set), `hand`, or a weights or network file (from
    /// `draughts train fit` or `fit-nnue`; with one variant only).
    #[arg(long, default_value = "default")]
    eval: String,
    /// Search settings as in `draughts match` (`classic`, `probcut=0,lmr=1`, ...; default: the shipped ones).
    #[arg(long, default_value = "")]
    search: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct BenchJson {
    variant: &'static str,
    positions: usize,
    depth: u32,
    nodes: u64,
    seconds: f64,
    nodes_per_second: f64,
    /// Mean time to reach the depth, per position.
    mean_seconds_to_depth: f64,
    /// CPU time of the searching thread (Linux; the wall time counts time lost to other processes).
    cpu_seconds: Option<f64>,
    cpu_nodes_per_second: Option<f64>,
}

/// Run time of the calling thread in seconds (Linux `/proc/thread-self/schedstat`), if available.
fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

pub(super) fn run(a: SearchBenchArgs) -> Result<(), CliError> {
    let variants: Vec<Variant> = match &a.variant {
        Some(v) => vec![v.parse()?],
        None => Variant::ALL.to_vec(),
    };
    let mut out = Vec::new();
    for v in variants {
        let fens = draughts_ai::bench::positions(v);
        let depth = a.depth.unwrap_or_else(|| draughts_ai::bench::depth(v));
        let mut nodes = 0;
        let mut seconds = 0.0;
        // CPU time of the searches only (not of making the searchers and their tables).
        let mut cpu_seconds = Some(0.0);
        for fen in &fens {
            let pos = Position::from_fen(v, fen)?;
            let options = draughts_ai::SearchOptions {
                tt_megabytes: a.hash.clamp(1, 4096),
                ..Default::default()
            };
            let mut searcher = Searcher::with_options(v, &options);
            searcher.set_evaluator(crate::ai_train::evaluator(v, &a.eval)?);
            let mut selectivity = draughts_ai::Selectivity::for_variant(v);
            selectivity.parse_into(&a.search).map_err(CliError)?;
            searcher.set_selectivity(selectivity);
            let cpu_start = thread_cpu_seconds();
            let r = searcher.search(&RootState::new(pos), &Limits::depth(depth), |_| {});
            let cpu = cpu_start.zip(thread_cpu_seconds()).map(|(a, b)| b - a);
            cpu_seconds = cpu_seconds.zip(cpu).map(|(sum, c)| sum + c);
            nodes += r.nodes;
            seconds += r.elapsed.as_secs_f64();
        }
        let e = BenchJson {
            cpu_seconds,
            cpu_nodes_per_second: cpu_seconds.map(|c| nodes as f64 / c.max(1e-9)),
            variant: v.key(),
            positions: fens.len(),
            depth,
            nodes,
            seconds,
            nodes_per_second: nodes as f64 / f64::max(seconds, 1e-9),
            mean_seconds_to_depth: seconds / fens.len().max(1) as f64,
        };
        if !a.json {
            println!(
                "{:<14} {:>2} positions, depth {:>2}: {:>11} nodes in {:>7.3} s  {:>6.2} M nodes/s  {:>6.3} s to depth (mean){}",
                e.variant,
                e.positions,
                e.depth,
                e.nodes,
                e.seconds,
                e.nodes_per_second / 1e6,
                e.mean_seconds_to_depth,
                e.cpu_nodes_per_second
                    .map(|n| format!("  [{:.2} M nodes per CPU-second]", n / 1e6))
                    .unwrap_or_default()
            );
        }
        out.push(e);
    }
    if a.json {
        crate::print_json(&out)?;
    }
    Ok(())
}
