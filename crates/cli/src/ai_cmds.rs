//! The AI commands of the `draughts` tool: `analyse`, `bestmove`, `hub` and `search-bench` (`match` is in
//! `ai_match`, `train` in `ai_train`).
//!
//! All search logic is in `draughts-ai`; this module owns the I/O around it: argument parsing, output
//! formats, the Hub command loop (stdin reader + one search thread) and external Hub engine processes.

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use clap::{Args, Subcommand};
use draughts_ai::hub::{self, HubError};
use draughts_ai::level::{MAX_LEVEL, MIN_LEVEL};
use draughts_ai::{
    Info, Level, Limits, Line, Rng, RootState, Score, SearchResult, Searcher, StopHandle,
};
use draughts_engine::{Game, Move, Position, RuleSet, Variant};
use serde::Serialize;

use crate::{CliError, PositionArgs, position};

/// The AI subcommands (flattened into the tool's command list).
#[derive(Subcommand, Debug)]
pub(crate) enum AiCommand {
    /// Search a position: score, best move and principal variation, one line per finished depth.
    Analyse(AnalyseArgs),
    /// The move a playing level (1 = beginner .. 8 = full strength) would play.
    Bestmove(BestmoveArgs),
    /// Speak the Hub protocol (version 2, as Scan 3.1 defines it) on stdin/stdout.
    Hub,
    /// Play a match between two engines (our levels, `greedy`, or an external Hub engine command).
    Match(crate::ai_match::MatchArgs),
    /// Search speed: nodes per second and time to depth on fixed middlegame positions per variant.
    SearchBench(SearchBenchArgs),
    /// Train the learned evaluation: self-play data (`train gen`) and the fit (`train fit`).
    #[command(subcommand)]
    Train(crate::ai_train::TrainCommand),
}

#[derive(Args, Debug)]
pub(crate) struct AnalyseArgs {
    #[command(flatten)]
    position: PositionArgs,
    /// Maximum depth in plies.
    #[arg(long, short = 'd')]
    depth: Option<u32>,
    /// Maximum number of nodes.
    #[arg(long)]
    nodes: Option<u64>,
    /// Maximum time in milliseconds (default 3000 when no limit is given).
    #[arg(long)]
    movetime: Option<u64>,
    /// Number of best lines.
    #[arg(long, default_value_t = 1)]
    multipv: usize,
    /// Transposition table size in MiB.
    #[arg(long, default_value_t = 64)]
    hash: usize,
    /// Search settings as in `draughts match` (`classic`, `threats=0`, ...; default: the shipped ones).
    #[arg(long, default_value = "")]
    search: String,
    /// Evaluation: `default`, `hand`, or a weights file.
    #[arg(long, default_value = "default")]
    eval: String,
    /// Print JSON, one object per line (one per depth and line, then the result).
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct BestmoveArgs {
    #[command(flatten)]
    position: PositionArgs,
    /// Playing level, 1 to 8.
    #[arg(long, short = 'l')]
    level: u8,
    /// Seed of the level's randomness (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct SearchBenchArgs {
    /// Only this variant (default: all eight).
    #[arg(long, short = 'v')]
    variant: Option<String>,
    /// Depth (default: per variant).
    #[arg(long, short = 'd')]
    depth: Option<u32>,
    /// Transposition table size in MiB (the levels' default is 16).
    #[arg(long, default_value_t = 16)]
    hash: usize,
    /// Evaluation: `default` (the shipped weights, else hand-set), `hand`, or a weights file (with one
    /// variant only).
    #[arg(long, default_value = "default")]
    eval: String,
    /// Search settings as in `draughts match` (`classic`, `probcut=0,lmr=1`, ...; default: the shipped ones).
    #[arg(long, default_value = "")]
    search: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(cmd: AiCommand) -> Result<(), CliError> {
    match cmd {
        AiCommand::Analyse(a) => analyse(a),
        AiCommand::Bestmove(a) => bestmove(a),
        AiCommand::Hub => hub_loop(),
        AiCommand::Match(a) => crate::ai_match::run(a),
        AiCommand::SearchBench(a) => search_bench(a),
        AiCommand::Train(a) => crate::ai_train::run(a),
    }
}

/// The moves of a line in the variant's notation.
fn pv_text(pos: &Position, pv: &[Move]) -> Vec<String> {
    let mut p = *pos;
    let mut out = Vec::new();
    for mv in pv {
        if !p.is_legal(mv) {
            break;
        }
        out.push(p.move_to_text(mv));
        p = p.play_unchecked(mv);
    }
    out
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum ScoreJson {
    Men(f64),
    WinInPlies(u32),
    LossInPlies(u32),
}

fn score_json(s: Score) -> ScoreJson {
    match s {
        Score::CentiMen(c) => ScoreJson::Men(f64::from(c) / 100.0),
        Score::WinIn(n) => ScoreJson::WinInPlies(n),
        Score::LossIn(n) => ScoreJson::LossInPlies(n),
    }
}

#[derive(Serialize)]
struct DepthJson {
    depth: u32,
    seldepth: u32,
    multipv: usize,
    score: ScoreJson,
    nodes: u64,
    nps: f64,
    seconds: f64,
    pv: Vec<String>,
}

#[derive(Serialize)]
struct ResultJson {
    bestmove: Option<String>,
    ponder: Option<String>,
    score: Option<ScoreJson>,
    depth: u32,
    nodes: u64,
    nps: f64,
    seconds: f64,
    lines: Vec<Vec<String>>,
}

pub(crate) fn print_line<T: Serialize>(value: &T) {
    if let Ok(text) = serde_json::to_string(value) {
        println!("{text}");
    }
}

fn analyse(a: AnalyseArgs) -> Result<(), CliError> {
    let pos = position(&a.position)?;
    let movetime = match (a.depth, a.nodes, a.movetime) {
        (None, None, None) => Some(3000),
        (_, _, t) => t,
    };
    let limits = Limits {
        depth: a.depth,
        nodes: a.nodes,
        time: movetime.map(Duration::from_millis),
        multipv: a.multipv.max(1),
    };
    let options = draughts_ai::SearchOptions {
        tt_megabytes: a.hash.clamp(1, 4096),
        ..Default::default()
    };
    let mut searcher = Searcher::with_options(pos.rule_set(), &options);
    searcher.set_evaluator(crate::ai_train::evaluator(pos.variant(), &a.eval)?);
    let mut selectivity = draughts_ai::Selectivity::default();
    selectivity.parse_into(&a.search).map_err(CliError)?;
    searcher.set_selectivity(selectivity);
    let json = a.json;
    let on_info = |info: &Info| {
        for (i, line) in info.lines.iter().enumerate() {
            let pv = pv_text(&pos, &line.pv);
            if json {
                print_line(&DepthJson {
                    depth: info.depth,
                    seldepth: info.seldepth,
                    multipv: i + 1,
                    score: score_json(line.score),
                    nodes: info.nodes,
                    nps: info.nps(),
                    seconds: info.elapsed.as_secs_f64(),
                    pv,
                });
            } else {
                let multi = if info.lines.len() > 1 {
                    format!("multipv {} ", i + 1)
                } else {
                    String::new()
                };
                println!(
                    "depth {:>2}/{:<2} {multi}score {:<18} nodes {:>10} nps {:>6.2}M time {:>7.3}s pv {}",
                    info.depth,
                    info.seldepth,
                    line.score.to_string(),
                    info.nodes,
                    info.nps() / 1e6,
                    info.elapsed.as_secs_f64(),
                    pv.join(" ")
                );
            }
        }
        let _ = std::io::stdout().flush();
    };
    let result = searcher.search(&RootState::new(pos), &limits, on_info);
    print_result(&pos, &result, json);
    Ok(())
}

fn print_result(pos: &Position, result: &SearchResult, json: bool) {
    let best = result.best.map(|m| pos.move_to_text(&m));
    let ponder = result
        .best
        .zip(result.ponder)
        .map(|(b, p)| pos.play_unchecked(&b).move_to_text(&p));
    if json {
        print_line(&ResultJson {
            bestmove: best,
            ponder,
            score: result.score().map(score_json),
            depth: result.depth,
            nodes: result.nodes,
            nps: result.nps(),
            seconds: result.elapsed.as_secs_f64(),
            lines: result
                .lines
                .iter()
                .map(|l: &Line| pv_text(pos, &l.pv))
                .collect(),
        });
        return;
    }
    match best {
        None => println!("no legal move"),
        Some(b) => {
            let score = result.score().map(|s| s.to_string()).unwrap_or_default();
            println!(
                "bestmove {b}{} (score {score}, depth {}, {} nodes, {:.2}M nodes/s)",
                ponder.map(|p| format!(" ponder {p}")).unwrap_or_default(),
                result.depth,
                result.nodes,
                result.nps() / 1e6
            );
        }
    }
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

pub(crate) fn level(n: u8) -> Result<Level, CliError> {
    Level::new(n).ok_or_else(|| {
        CliError(format!(
            "level must be from {MIN_LEVEL} to {MAX_LEVEL}, got {n}"
        ))
    })
}

#[derive(Serialize)]
struct BestmoveJson {
    level: u8,
    bestmove: Option<String>,
}

fn bestmove(a: BestmoveArgs) -> Result<(), CliError> {
    let pos = position(&a.position)?;
    let level = level(a.level)?;
    let mut rng = Rng::new(a.seed.unwrap_or_else(clock_seed));
    let mut searcher = Searcher::new(pos.rule_set());
    let mv = level.choose(&mut searcher, &RootState::new(pos), &mut rng);
    let text = mv.map(|m| pos.move_to_text(&m));
    if a.json {
        print_line(&BestmoveJson {
            level: level.level,
            bestmove: text,
        });
    } else {
        match text {
            Some(t) => println!("{t}"),
            None => return Err(CliError("no legal move".into())),
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// Hub protocol loop.

/// Writes one protocol line (stdout is shared by the reader loop and the search thread; `println!` locks).
fn send(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

struct HubSession {
    rules: RuleSet,
    root: Option<RootState>,
    limits: Limits,
    searcher: Arc<Mutex<Searcher>>,
    stop: StopHandle,
    thread: Option<JoinHandle<()>>,
}

impl HubSession {
    fn wait_search(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.stop();
            let _ = t.join();
        }
    }
}

fn hub_loop() -> Result<(), CliError> {
    let rules = RuleSet::new(Variant::International);
    let searcher = Searcher::new(rules);
    let stop = searcher.stop_handle();
    let mut s = HubSession {
        rules,
        root: None,
        limits: Limits::default(),
        searcher: Arc::new(Mutex::new(searcher)),
        stop,
        thread: None,
    };
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Some(cmd) = hub::parse_line(&line) else {
            continue;
        };
        // Joins a finished search thread so that `thread` is `Some` only while searching.
        if s.thread.as_ref().is_some_and(|t| t.is_finished()) {
            s.wait_search();
        }
        let searching = s.thread.is_some();
        match cmd.command.as_str() {
            "ping" => send("pong"),
            "stop" => s.stop.stop(),
            "ponder-hit" => {}
            "quit" => break,
            _ if searching => {
                // Only ping, ponder-hit and stop may come during a search; anything else ends it first.
                s.wait_search();
                hub_command(&mut s, &cmd);
            }
            _ => hub_command(&mut s, &cmd),
        }
    }
    s.wait_search();
    Ok(())
}

fn hub_command(s: &mut HubSession, cmd: &hub::Line) {
    match cmd.command.as_str() {
        "hub" => {
            send(&format!(
                "id name=draughts version={} author=\"draughts platform\" country=\"\"",
                env!("CARGO_PKG_VERSION")
            ));
            let mut names = vec!["normal"];
            names.extend(Variant::ALL.iter().map(|v| v.key()));
            send(&format!(
                "param name=variant value={} type=enum values=\"{}\"",
                hub::variant_name(s.rules.variant()),
                names.join(" ")
            ));
            send("wait");
        }
        "set-param" => {
            if cmd.get("name") == Some("variant")
                && let Some(v) = cmd.get("value").and_then(hub::parse_variant)
            {
                s.rules = RuleSet::new(v);
                s.root = None;
            }
        }
        "init" => send("ready"),
        "new-game" => {
            if let Ok(mut searcher) = s.searcher.lock() {
                searcher.clear();
            }
        }
        "pos" => match hub_position(s.rules, cmd) {
            Ok(root) => s.root = Some(root),
            Err(e) => send(&format!("error message={}", hub::quote(&e.to_string()))),
        },
        "level" => s.limits = hub_limits(cmd),
        "go" => start_search(s, cmd.has("analyze")),
        _ => {}
    }
}

fn hub_position(rules: RuleSet, cmd: &hub::Line) -> Result<RootState, HubError> {
    let text = cmd.get("pos").unwrap_or_default();
    let pos = match text {
        "" => Position::start(rules),
        t => hub::parse_position(rules, t)?,
    };
    let mut game = Game::new(pos);
    for mv_text in cmd.get("moves").unwrap_or_default().split_whitespace() {
        let mv = hub::parse_move(game.position(), mv_text)?;
        if game.play(&mv).is_err() {
            break;
        }
    }
    Ok(RootState::from_game(&game))
}

fn secs(v: Option<&str>) -> Option<Duration> {
    v.and_then(|t| t.parse::<f64>().ok())
        .filter(|t| t.is_finite() && *t >= 0.0)
        .map(|t| Duration::from_secs_f64(t.min(1e6)))
}

fn hub_limits(cmd: &hub::Line) -> Limits {
    let mut limits = Limits::default();
    if cmd.has("infinite") {
        return limits;
    }
    limits.depth = cmd.get("depth").and_then(|d| d.parse().ok());
    limits.nodes = cmd.get("nodes").and_then(|d| d.parse().ok());
    if let Some(t) = secs(cmd.get("move-time")) {
        limits.time = Some(t);
    } else if let Some(total) = secs(cmd.get("time")) {
        let inc = secs(cmd.get("inc")).unwrap_or_default();
        let moves: u32 = cmd
            .get("moves")
            .and_then(|m| m.parse().ok())
            .unwrap_or(30)
            .clamp(1, 60);
        let budget = total / moves + inc.mul_f64(0.8);
        limits.time = Some(budget.min(total.mul_f64(0.5)));
    }
    limits
}

fn start_search(s: &mut HubSession, analyze: bool) {
    let root = s
        .root
        .clone()
        .unwrap_or_else(|| RootState::new(Position::start(s.rules)));
    let limits = s.limits.clone();
    let searcher = Arc::clone(&s.searcher);
    s.stop.reset();
    let _ = analyze;
    s.thread = Some(std::thread::spawn(move || {
        let Ok(mut searcher) = searcher.lock() else {
            return;
        };
        let pos = root.position;
        let result = searcher.search(&root, &limits, |info| {
            if let Some(line) = info.lines.first() {
                let pv: Vec<String> = pv_hub(&pos, &line.pv);
                send(&format!(
                    "info depth={} score={:.2} nodes={} time={:.3} nps={:.2} pv=\"{}\"",
                    info.depth,
                    line.score.men(),
                    info.nodes,
                    info.elapsed.as_secs_f64(),
                    info.nps() / 1e6,
                    pv.join(" ")
                ));
            }
        });
        match result.best {
            Some(best) => {
                let mut line = format!("done move={}", hub::write_move(&pos, &best));
                if let Some(p) = result.ponder {
                    line.push_str(&format!(
                        " ponder={}",
                        hub::write_move(&pos.play_unchecked(&best), &p)
                    ));
                }
                send(&line);
            }
            None => send("done"),
        }
    }));
}

fn pv_hub(pos: &Position, pv: &[Move]) -> Vec<String> {
    let mut p = *pos;
    let mut out = Vec::new();
    for mv in pv {
        out.push(hub::write_move(&p, mv));
        p = p.play_unchecked(mv);
    }
    out
}

// ---------------------------------------------------------------------------------------------------
// Search benchmark.

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

fn search_bench(a: SearchBenchArgs) -> Result<(), CliError> {
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
            let mut selectivity = draughts_ai::Selectivity::default();
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
