//! The AI commands of the `draughts` tool: `analyse`, `bestmove`, `hub`, `match` and `search-bench`.
//!
//! All search logic is in `draughts-ai`; this module owns the I/O around it: argument parsing, output
//! formats, the Hub command loop (stdin reader + one search thread) and external Hub engine processes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command as Process, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use draughts_ai::hub::{self, HubError};
use draughts_ai::level::{MAX_LEVEL, MIN_LEVEL};
use draughts_ai::openings::balanced_openings;
use draughts_ai::{
    Info, Level, Limits, Line, Rng, RootState, Score, SearchResult, Searcher, StopHandle, Tally,
    greedy_move,
};
use draughts_engine::{
    Color, Game, GameResult, GameStatus, Move, Position, RuleOptions, RuleSet, Variant,
};
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
    Match(MatchArgs),
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
pub(crate) struct MatchArgs {
    /// Rule set.
    #[arg(long, short = 'v')]
    variant: String,
    /// House-rule options.
    #[arg(long, short = 'o', default_value = "")]
    options: String,
    /// First engine: a level `1`..`8` (or `level:N`), `greedy`, or a Hub engine command (`hub:CMD` or CMD).
    /// A level may name its evaluation after a colon: `8:hand` (the hand-set one), `8:default`, or
    /// `8:FILE` (a weights file from `draughts train fit`).
    #[arg(long)]
    a: String,
    /// Second engine, same forms.
    #[arg(long)]
    b: String,
    /// Number of games (each opening is played twice, colours swapped).
    #[arg(long, default_value_t = 20)]
    games: u32,
    /// Time per move in milliseconds for Hub engines (default 100); with it, our levels also get this
    /// time cap. Without it our levels stop on their node or depth limits only, so the games do not
    /// depend on the machine's load.
    #[arg(long)]
    movetime: Option<u64>,
    /// Games played at the same time, one thread (and one pair of engines) each.
    #[arg(long, default_value_t = 1)]
    concurrency: u32,
    /// Seed for the levels' randomness.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A game still going after this many plies is scored a draw.
    #[arg(long, default_value_t = 400)]
    max_plies: u32,
    /// Adjudicate a game as won once both engines' own searches agree, on four consecutive moves (two
    /// each), that one side is at least this many centi-men ahead (or has a forced win). Only engines that
    /// report scores (our levels) take part; off by default.
    #[arg(long)]
    adjudicate: Option<i32>,
    /// Print the final report as JSON.
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
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(cmd: AiCommand) -> Result<(), CliError> {
    match cmd {
        AiCommand::Analyse(a) => analyse(a),
        AiCommand::Bestmove(a) => bestmove(a),
        AiCommand::Hub => hub_loop(),
        AiCommand::Match(a) => run_match(a),
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

fn print_line<T: Serialize>(value: &T) {
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

fn level(n: u8) -> Result<Level, CliError> {
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
// Matches.

/// An engine taking part in a match.
enum Engine {
    Level {
        level: Level,
        searcher: Box<Searcher>,
        rng: Rng,
    },
    Greedy(Rng),
    Hub(HubProcess),
}

/// An external engine speaking the Hub protocol on its stdin/stdout.
struct HubProcess {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    name: String,
}

impl HubProcess {
    fn start(command: &str, variant: Variant) -> Result<HubProcess, CliError> {
        let mut child = Process::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| CliError(format!("cannot start '{command}': {e}")))?;
        let stdin = child.stdin.take().ok_or(CliError("no stdin".into()))?;
        let stdout = child.stdout.take().ok_or(CliError("no stdout".into()))?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut p = HubProcess {
            child,
            stdin,
            lines: rx,
            name: command.to_string(),
        };
        p.send("hub")?;
        p.wait_for("wait", Duration::from_secs(30))?;
        p.send(&format!(
            "set-param name=variant value={}",
            hub::variant_name(variant)
        ))?;
        p.send("init")?;
        p.wait_for("ready", Duration::from_secs(120))?;
        Ok(p)
    }

    fn send(&mut self, line: &str) -> Result<(), CliError> {
        writeln!(self.stdin, "{line}")
            .and_then(|_| self.stdin.flush())
            .map_err(|e| CliError(format!("engine '{}': {e}", self.name)))
    }

    /// Waits for a line whose command is `command`; returns it.
    fn wait_for(&mut self, command: &str, timeout: Duration) -> Result<hub::Line, CliError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(text) => {
                    if let Some(l) = hub::parse_line(&text) {
                        if l.command == command {
                            return Ok(l);
                        }
                        // A protocol error ends the match rather than passing unnoticed.
                        if l.command == "error" {
                            return Err(CliError(format!(
                                "engine '{}' reported a protocol error: {text}",
                                self.name
                            )));
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(CliError(format!(
                        "engine '{}' did not answer '{command}' in time",
                        self.name
                    )));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(CliError(format!("engine '{}' exited", self.name)));
                }
            }
        }
    }

    fn choose(&mut self, game: &Game, movetime: Duration) -> Result<Move, CliError> {
        let moves: Vec<String> = {
            let mut p = *game.start_position();
            game.moves()
                .iter()
                .map(|m| {
                    let t = hub::write_move(&p, m);
                    p = p.play_unchecked(m);
                    t
                })
                .collect()
        };
        self.send(&format!(
            "pos pos={} moves=\"{}\"",
            hub::write_position(game.start_position()),
            moves.join(" ")
        ))?;
        self.send(&format!("level move-time={:.3}", movetime.as_secs_f64()))?;
        self.send("go think")?;
        let done = self.wait_for("done", movetime * 20 + Duration::from_secs(10))?;
        let text = done.get("move").unwrap_or_default();
        hub::parse_move(game.position(), text)
            .map_err(|e| CliError(format!("engine '{}' played '{text}': {e}", self.name)))
    }
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ = self.send("quit");
        std::thread::sleep(Duration::from_millis(50));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Engine {
    fn start(
        spec: &str,
        rules: RuleSet,
        movetime: Option<Duration>,
        seed: u64,
    ) -> Result<Engine, CliError> {
        let trimmed = spec.trim();
        let level_text = trimmed.strip_prefix("level:").unwrap_or(trimmed);
        let (number, eval) = level_text
            .split_once(':')
            .unwrap_or((level_text, "default"));
        if let Ok(n) = number.parse::<u8>() {
            let mut level = level(n)?;
            // Deterministic by default: no time cap unless the match sets one.
            level.time = movetime;
            let mut searcher = Box::new(Searcher::new(rules));
            searcher.set_evaluator(crate::ai_train::evaluator(rules.variant(), eval)?);
            return Ok(Engine::Level {
                level,
                searcher,
                rng: Rng::new(seed),
            });
        }
        let lower = trimmed.to_ascii_lowercase();
        if lower == "greedy" {
            return Ok(Engine::Greedy(Rng::new(seed)));
        }
        let command = spec.strip_prefix("hub:").unwrap_or(spec);
        Ok(Engine::Hub(HubProcess::start(command, rules.variant())?))
    }

    fn new_game(&mut self, seed: u64) -> Result<(), CliError> {
        match self {
            Engine::Level { searcher, rng, .. } => {
                searcher.clear();
                *rng = Rng::new(seed);
            }
            Engine::Greedy(rng) => *rng = Rng::new(seed),
            Engine::Hub(p) => p.send("new-game")?,
        }
        Ok(())
    }

    /// The engine's move, and its score of the position for the side to move (centi-men or the search's
    /// win/loss scores) when it searched and says so (our levels do).
    fn choose(&mut self, game: &Game, movetime: Duration) -> Result<(Move, Option<i32>), CliError> {
        let pos = game.position();
        let (mv, score) = match self {
            Engine::Level {
                level,
                searcher,
                rng,
            } => level.choose_scored(searcher, &RootState::from_game(game), rng),
            Engine::Greedy(rng) => (greedy_move(pos, rng), None),
            Engine::Hub(p) => (Some(p.choose(game, movetime)?), None),
        };
        Ok((
            mv.ok_or_else(|| CliError("engine found no move".into()))?,
            score,
        ))
    }
}

#[derive(Serialize)]
struct MatchJson {
    variant: &'static str,
    a: String,
    b: String,
    games: u32,
    wins: u32,
    draws: u32,
    losses: u32,
    score: f64,
    /// `null` when one side scored everything (then see `elo_lower`/`elo_upper`).
    elo: f64,
    elo_error: f64,
    /// The 95% interval (finite even for a clean sweep).
    elo_lower: f64,
    elo_upper: f64,
    /// Games the runner ended, not the rules: draws at `--max-plies` and wins by `--adjudicate`.
    adjudicated: u32,
    seconds: f64,
}

/// What a match needs to play any one of its games (shared by the worker threads).
struct MatchPlan {
    rules: RuleSet,
    openings: Vec<Vec<Move>>,
    seed: u64,
    max_plies: u32,
    hub_time: Duration,
    /// See `MatchArgs::adjudicate`.
    adjudicate: Option<i32>,
}

/// One finished game, from engine A's point of view.
struct GameOutcome {
    index: u32,
    a_white: bool,
    plies: usize,
    /// `None`: adjudicated a draw after `max_plies`.
    result: Option<GameResult>,
    /// Won by adjudication (`--adjudicate`): the winner.
    adjudicated_winner: Option<Color>,
}

/// Plays game number `index` of the match (its opening, colours and seeds depend on the index only, so a
/// match of node-limited levels gives the same games whatever the concurrency).
fn play_game(
    plan: &MatchPlan,
    index: u32,
    engine_a: &mut Engine,
    engine_b: &mut Engine,
) -> Result<GameOutcome, CliError> {
    let opening = &plan.openings[(index / 2) as usize % plan.openings.len()];
    let a_white = index.is_multiple_of(2);
    let mut game = Game::new(Position::start(plan.rules));
    for mv in opening {
        if game.play(mv).is_err() {
            break;
        }
    }
    let game_seed = plan
        .seed
        .wrapping_mul(1_000_003)
        .wrapping_add(u64::from(index));
    engine_a.new_game(game_seed)?;
    engine_b.new_game(game_seed ^ 0xABCD)?;
    // The last scores, from White's point of view (adjudication).
    let mut white_scores: Vec<Option<i32>> = Vec::new();
    while game.status() == GameStatus::Ongoing {
        if game.moves().len() as u32 >= plan.max_plies {
            return Ok(GameOutcome {
                index,
                a_white,
                plies: game.moves().len(),
                result: None,
                adjudicated_winner: None,
            });
        }
        let white_to_move = game.position().side_to_move() == Color::White;
        let engine = if white_to_move == a_white {
            &mut *engine_a
        } else {
            &mut *engine_b
        };
        let (mv, score) = engine.choose(&game, plan.hub_time)?;
        game.play(&mv)
            .map_err(|e| CliError(format!("illegal move from an engine: {e}")))?;
        if let Some(threshold) = plan.adjudicate {
            white_scores.push(score.map(|s| if white_to_move { s } else { -s }));
            if let Some(winner) = adjudicated_winner(&white_scores, threshold) {
                return Ok(GameOutcome {
                    index,
                    a_white,
                    plies: game.moves().len(),
                    result: None,
                    adjudicated_winner: Some(winner),
                });
            }
        }
    }
    let result = match game.status() {
        GameStatus::Finished(r) => Some(r),
        GameStatus::Ongoing => None,
    };
    Ok(GameOutcome {
        index,
        a_white,
        plies: game.moves().len(),
        result,
        adjudicated_winner: None,
    })
}

/// The side both engines agree is winning: the last four scores (White's point of view, two from each
/// engine) all at least `threshold` for the same side. A move without a score (forced, or an engine that
/// reports none) breaks the run.
fn adjudicated_winner(white_scores: &[Option<i32>], threshold: i32) -> Option<Color> {
    let last = white_scores.get(white_scores.len().checked_sub(4)?..)?;
    if last.iter().all(|s| s.is_some_and(|s| s >= threshold)) {
        Some(Color::White)
    } else if last.iter().all(|s| s.is_some_and(|s| s <= -threshold)) {
        Some(Color::Black)
    } else {
        None
    }
}

/// "Elo +191 ± 160 (95%)", or the interval's finite side after a clean sweep.
fn elo_text(e: &draughts_ai::EloEstimate) -> String {
    if e.elo.is_finite() && e.error.is_finite() {
        format!("Elo {:+.0} ± {:.0} (95%)", e.elo, e.error)
    } else if e.elo > 0.0 {
        format!("Elo > {:+.0} (95%)", e.lower)
    } else {
        format!("Elo < {:+.0} (95%)", e.upper)
    }
}

fn run_match(a: MatchArgs) -> Result<(), CliError> {
    let variant: Variant = a.variant.parse()?;
    let rules = RuleSet::with_options(variant, RuleOptions::parse(&a.options)?)?;
    let movetime = a.movetime.map(Duration::from_millis);
    let games = a.games.max(1);
    let concurrency = a.concurrency.clamp(1, games);
    // Fail fast on bad engine specs before choosing openings.
    let specs = [a.a.clone(), a.b.clone()];
    let start_pair = |worker: u64| -> Result<(Engine, Engine), CliError> {
        let seed = a.seed.wrapping_add(worker);
        Ok((
            Engine::start(&specs[0], rules, movetime, seed)?,
            Engine::start(&specs[1], rules, movetime, seed ^ 1)?,
        ))
    };
    let first_pair = start_pair(0)?;
    let plies = match variant {
        Variant::International | Variant::Turkish => 2,
        _ => 3,
    };
    eprintln!("choosing balanced openings ({plies} plies)...");
    let plan = MatchPlan {
        rules,
        openings: balanced_openings(rules, plies, games.div_ceil(2) as usize),
        seed: a.seed,
        max_plies: a.max_plies,
        hub_time: movetime.unwrap_or(Duration::from_millis(100)),
        adjudicate: a.adjudicate,
    };
    eprintln!(
        "{} openings; {games} games, {} vs {}, {concurrency} at a time",
        plan.openings.len(),
        a.a,
        a.b
    );
    let start = Instant::now();
    let next_game = std::sync::atomic::AtomicU32::new(0);
    let (tx, rx) = mpsc::channel::<Result<GameOutcome, CliError>>();
    let mut tally = Tally::default();
    let mut adjudicated = 0;
    let mut first_error = None;
    std::thread::scope(|scope| {
        let mut first_pair = Some(first_pair);
        for worker in 0..concurrency {
            let tx = tx.clone();
            let plan = &plan;
            let next_game = &next_game;
            let pair = match first_pair.take() {
                Some(p) => Ok(p),
                None => start_pair(u64::from(worker)),
            };
            scope.spawn(move || {
                let (mut engine_a, mut engine_b) = match pair {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                loop {
                    let index = next_game.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if index >= games {
                        break;
                    }
                    let outcome = play_game(plan, index, &mut engine_a, &mut engine_b);
                    let failed = outcome.is_err();
                    if tx.send(outcome).is_err() || failed {
                        // Stop the other workers too.
                        next_game.store(games, std::sync::atomic::Ordering::Relaxed);
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut finished = 0;
        for outcome in rx {
            let o = match outcome {
                Ok(o) => o,
                Err(e) => {
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            finished += 1;
            let a_color = if o.a_white {
                Color::White
            } else {
                Color::Black
            };
            let winner = match (o.result, o.adjudicated_winner) {
                (Some(GameResult::Win { winner, .. }), _) => Some(winner),
                (_, Some(winner)) => Some(winner),
                _ => None,
            };
            let text = match winner {
                Some(w) if w == a_color => {
                    tally.wins += 1;
                    "A wins"
                }
                Some(_) => {
                    tally.losses += 1;
                    "B wins"
                }
                None => {
                    tally.draws += 1;
                    "draw"
                }
            };
            if o.result.is_none() {
                adjudicated += 1;
            }
            let how = match (o.result, o.adjudicated_winner) {
                (Some(r), _) => r.describe(),
                (None, Some(w)) => format!(
                    "adjudicated: both engines see {} at least {} centi-men ahead",
                    if w == Color::White { "white" } else { "black" },
                    plan.adjudicate.unwrap_or_default()
                ),
                (None, None) => format!("adjudicated a draw after {} plies", plan.max_plies),
            };
            let e = tally.elo();
            eprintln!(
                "game {} ({finished}/{games} done; A {}, {} plies): {text} ({}) | A +{} ={} -{} | {:.1}% | {}",
                o.index + 1,
                if o.a_white { "white" } else { "black" },
                o.plies,
                how,
                tally.wins,
                tally.draws,
                tally.losses,
                100.0 * e.score,
                elo_text(&e)
            );
        }
    });
    if let Some(e) = first_error {
        return Err(e);
    }
    let e = tally.elo();
    let report = MatchJson {
        variant: variant.key(),
        a: a.a.clone(),
        b: a.b.clone(),
        games: tally.games(),
        wins: tally.wins,
        draws: tally.draws,
        losses: tally.losses,
        score: e.score,
        elo: e.elo,
        elo_error: e.error,
        elo_lower: e.lower,
        elo_upper: e.upper,
        adjudicated,
        seconds: start.elapsed().as_secs_f64(),
    };
    if a.json {
        print_line(&report);
    } else {
        println!(
            "{} {} vs {}: {} games, A +{} ={} -{} ({:.1}%), {}, {:.0} s",
            report.variant,
            report.a,
            report.b,
            report.games,
            report.wins,
            report.draws,
            report.losses,
            100.0 * report.score,
            elo_text(&e),
            report.seconds
        );
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjudication_needs_four_agreeing_scores() {
        let w = |v: &[Option<i32>]| adjudicated_winner(v, 500);
        assert_eq!(w(&[Some(600), Some(700), Some(800)]), None);
        assert_eq!(
            w(&[Some(0), Some(600), Some(700), Some(500), Some(900)]),
            Some(Color::White)
        );
        assert_eq!(
            w(&[Some(-600), Some(-29_990), Some(-700), Some(-500)]),
            Some(Color::Black)
        );
        assert_eq!(w(&[Some(600), None, Some(700), Some(800)]), None);
        assert_eq!(w(&[Some(600), Some(-700), Some(700), Some(800)]), None);
    }
}
