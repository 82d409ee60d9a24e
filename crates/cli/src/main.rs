//! `draughts`: a thin command-line tool over the engine crate, and a client of the platform's API.

/// Writes one line to standard output, like `println!`, from a function that returns `Result<_, CliError>`.
/// A reader that went away (`draughts moves | head -3`) ends the command quietly with success, as a
/// closed pipe ends any Unix filter; another write error is the command's error. (`println!` panics on
/// both.)
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::write_line(format_args!($($arg)*))?
    };
}

mod ai_bitbase;
mod ai_cmds;
mod ai_match;
mod ai_train;
mod analysis_cli;
mod bot;
mod client;
mod games_cli;
mod matchmaking_cli;
mod session;
mod tournament_cli;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand, ValueEnum};
use draughts_engine::{Count, Game, GameStatus, Move, Position, RuleOptions, RuleSet, Variant};
use serde::Serialize;

#[derive(Parser, Debug)]
#[command(
    name = "draughts",
    version,
    about = "Draughts tools: the rules engine, a client of the platform's API, and the AI",
    after_help = COMMAND_GROUPS
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The command groups `draughts --help` shows (a test checks that every command is in one).
const COMMAND_GROUPS: &str = "Command groups:
  Engine tools:  perft, moves, play, bench
  API client:    client (moves, validate, apply, start, parse, health, guest, create, accept, play, bot,
                 watch, pdn, ...: `draughts client --help`; --server HOST:PORT, --token)
  AI:            analyse, bestmove, bitbase, hub, match, search-bench, train
  Bots:          bot (a Hub engine plays as a BOT account: `draughts bot --engine CMD --token KEY`)";

#[derive(Subcommand, Debug)]
enum Command {
    /// Count the leaf positions of the legal move tree (perft).
    Perft(PerftArgs),
    /// List every legal move of a position.
    Moves(MovesArgs),
    /// Play moves from a position and print the resulting FEN and game status.
    Play(PlayArgs),
    /// Measure move generation speed: perft from each variant's start position.
    Bench(BenchArgs),
    /// Call the platform's gRPC API (a running `draughtsd` or service).
    Client(client::ClientArgs),
    /// Play on the platform as a BOT: a Hub-protocol engine accepts challenges and plays them.
    Bot(bot::BotArgs),
    #[command(flatten)]
    Ai(ai_cmds::AiCommand),
}

#[derive(Args, Debug)]
struct PositionArgs {
    /// Rule set: international, english, italian, russian, brazilian, spanish, czech, turkish,
    /// antidraughts, breakthrough, killer, pool, portuguese, frisian, frysk or canadian.
    #[arg(long, short = 'v')]
    variant: String,
    /// Position in PDN FEN (default: the variant's start position).
    #[arg(long, short = 'f')]
    fen: Option<String>,
    /// House-rule options, comma separated: no-mandatory-capture, promote-mid-capture, move-limit=N,
    /// kings-only=N, repetition=on|off, endgame-counts=on|off (docs/rules.md §7).
    #[arg(long, short = 'o', default_value = "")]
    options: String,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum CountArg {
    /// Same start, end and captured set counted once (FMJD convention).
    Unique,
    /// Every capture order counted.
    AllOrders,
    /// Every capture order and every landing square of a straight-on king continuation.
    AllPaths,
}

impl From<CountArg> for Count {
    fn from(c: CountArg) -> Count {
        match c {
            CountArg::Unique => Count::Unique,
            CountArg::AllOrders => Count::AllOrders,
            CountArg::AllPaths => Count::AllPaths,
        }
    }
}

const MAX_DEPTH: u32 = 20;

#[derive(Args, Debug)]
struct PerftArgs {
    #[command(flatten)]
    position: PositionArgs,
    /// Depth in plies (1 to 20).
    #[arg(long, short = 'd')]
    depth: u32,
    /// Duplicate convention.
    #[arg(long, value_enum, default_value = "unique")]
    count: CountArg,
    /// Also print each first move with its subtree count.
    #[arg(long)]
    divide: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct MovesArgs {
    #[command(flatten)]
    position: PositionArgs,
    /// Print JSON: notation, from, to, path and captured (squares written algebraically).
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct PlayArgs {
    #[command(flatten)]
    position: PositionArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Moves in the variant's notation (`32-28`, `28x19`, `c3:e5`, or a full path).
    moves: Vec<String>,
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// Only this variant (default: every variant).
    #[arg(long, short = 'v')]
    variant: Option<String>,
    /// Depth (default: per variant, a few seconds on one core).
    #[arg(long, short = 'd')]
    depth: Option<u32>,
    /// Repetitions; the best time is reported.
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn write_line(args: std::fmt::Arguments<'_>) -> Result<(), CliError> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"))
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => Err(CliError(format!("writing the output: {e}"))),
    }
}

/// A one-line user-facing error.
#[derive(Debug)]
pub(crate) struct CliError(pub(crate) String);

impl<E: std::fmt::Display> From<E> for CliError {
    fn from(e: E) -> Self {
        CliError(e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    ExitCode::from(2)
                } else {
                    ExitCode::SUCCESS
                };
            }
            // One line: the message without clap's usage and help hints.
            let text = e.to_string();
            let line = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            eprintln!("{line}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Perft(a) => perft(a),
        Command::Moves(a) => moves(a),
        Command::Play(a) => play(a),
        Command::Bench(a) => bench(a),
        Command::Client(a) => client::run(a),
        Command::Bot(a) => bot::run(a),
        Command::Ai(a) => ai_cmds::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError(msg)) => {
            eprintln!("error: {}", msg.replace('\n', " "));
            ExitCode::from(1)
        }
    }
}

fn position(args: &PositionArgs) -> Result<Position, CliError> {
    let variant: Variant = args.variant.parse()?;
    let options = RuleOptions::parse(&args.options)?;
    let rules = RuleSet::with_options(variant, options)?;
    Ok(match &args.fen {
        Some(fen) => Position::from_fen(rules, fen)?,
        None => Position::start(rules),
    })
}

fn print_json<T: Serialize>(value: &T) -> Result<(), CliError> {
    out!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

#[derive(Serialize)]
struct DivideEntry {
    #[serde(rename = "move")]
    mv: String,
    nodes: u64,
}

#[derive(Serialize)]
struct PerftReport {
    variant: String,
    fen: String,
    depth: u32,
    count: &'static str,
    nodes: u64,
    seconds: f64,
    nodes_per_second: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    divide: Option<Vec<DivideEntry>>,
}

fn count_name(c: Count) -> &'static str {
    match c {
        Count::Unique => "unique",
        Count::AllOrders => "all-orders",
        Count::AllPaths => "all-paths",
    }
}

fn perft(a: PerftArgs) -> Result<(), CliError> {
    let pos = position(&a.position)?;
    if a.depth == 0 || a.depth > MAX_DEPTH {
        return Err(CliError(format!(
            "depth must be from 1 to {MAX_DEPTH}, got {}",
            a.depth
        )));
    }
    let count: Count = a.count.into();
    let progress = std::io::stderr().is_terminal() && a.depth >= 6;
    let t = Instant::now();
    let (nodes, divide) = if a.divide || progress {
        let mut list = Vec::new();
        pos.legal_moves_into(&mut list, count);
        let mut entries = Vec::new();
        let mut total = 0;
        for (i, mv) in list.iter().enumerate() {
            let n = if a.depth == 1 {
                1
            } else {
                pos.play_unchecked(mv).perft(a.depth - 1, count)
            };
            total += n;
            let text = pos.move_to_text(mv);
            if progress {
                eprint!("\r[{}/{}] {text}: {n}        ", i + 1, list.len());
            }
            entries.push(DivideEntry { mv: text, nodes: n });
        }
        if progress {
            eprint!("\r{}\r", " ".repeat(60));
        }
        (total, a.divide.then_some(entries))
    } else {
        (pos.perft(a.depth, count), None)
    };
    let seconds = t.elapsed().as_secs_f64();
    let report = PerftReport {
        variant: pos.variant().key().to_string(),
        fen: pos.to_fen(),
        depth: a.depth,
        count: count_name(count),
        nodes,
        seconds,
        nodes_per_second: nodes as f64 / seconds.max(1e-9),
        divide,
    };
    if a.json {
        return print_json(&report);
    }
    if let Some(divide) = &report.divide {
        for e in divide {
            out!("{} {}", e.mv, e.nodes);
        }
    }
    out!(
        "perft({}) {} = {} ({:.3} s, {:.1} M nodes/s)",
        report.depth,
        report.count,
        report.nodes,
        report.seconds,
        report.nodes_per_second / 1e6
    );
    Ok(())
}

#[derive(Serialize)]
struct MoveJson {
    notation: String,
    from: String,
    to: String,
    /// Every square the piece stands on, origin first.
    path: Vec<String>,
    /// Captured pieces in capture order.
    captured: Vec<String>,
}

fn move_json(pos: &Position, mv: &Move) -> MoveJson {
    let board = pos.board();
    let name = |sq| board.algebraic(sq).to_string();
    let path = pos.move_path(mv);
    MoveJson {
        notation: pos.move_to_text(mv),
        from: name(mv.from()),
        to: name(mv.to()),
        path: path
            .as_ref()
            .map(|p| p.path.iter().map(|s| name(*s)).collect())
            .unwrap_or_default(),
        captured: path
            .as_ref()
            .map(|p| p.captured.iter().map(|s| name(*s)).collect())
            .unwrap_or_default(),
    }
}

fn moves(a: MovesArgs) -> Result<(), CliError> {
    let pos = position(&a.position)?;
    let list = pos.legal_moves();
    if a.json {
        let out: Vec<MoveJson> = list.iter().map(|m| move_json(&pos, m)).collect();
        return print_json(&out);
    }
    for mv in &list {
        out!("{}", pos.move_to_text(mv));
    }
    Ok(())
}

#[derive(Serialize)]
struct PlayReport {
    fen: String,
    status: String,
    result: Option<&'static str>,
    moves: Vec<String>,
}

fn play(a: PlayArgs) -> Result<(), CliError> {
    let pos = position(&a.position)?;
    let mut game = Game::new(pos);
    let mut played = Vec::new();
    for (i, text) in a.moves.iter().enumerate() {
        let before = *game.position();
        let mv = match before.parse_move(text) {
            Ok(mv) => mv,
            Err(e) => return Err(CliError(format!("move {} ({text}): {e}", i + 1))),
        };
        if let Err(e) = game.play(&mv) {
            return Err(CliError(format!("move {} ({text}): {e}", i + 1)));
        }
        played.push(before.move_to_text(&mv));
    }
    let (status, result) = match game.status() {
        GameStatus::Ongoing => (
            format!("ongoing, {} to move", game.position().side_to_move().name()),
            None,
        ),
        GameStatus::Finished(r) => (r.describe(), Some(r.result_text(game.position().variant()))),
    };
    let report = PlayReport {
        fen: game.position().to_fen(),
        status,
        result,
        moves: played,
    };
    if a.json {
        return print_json(&report);
    }
    out!("{}", report.fen);
    out!("{}", report.status);
    Ok(())
}

/// Default benchmark depths: a few seconds per variant on one core of the reference machine.
fn bench_depth(v: Variant) -> u32 {
    match v {
        Variant::International
        | Variant::Killer
        | Variant::Antidraughts
        | Variant::Breakthrough
        | Variant::Frisian => 10,
        Variant::Canadian | Variant::Frysk => 9,
        Variant::Turkish => 8,
        _ => 12,
    }
}

#[derive(Serialize)]
struct BenchEntry {
    variant: &'static str,
    depth: u32,
    nodes: u64,
    seconds: f64,
    nodes_per_second: f64,
}

fn bench(a: BenchArgs) -> Result<(), CliError> {
    let variants: Vec<Variant> = match &a.variant {
        Some(v) => vec![v.parse()?],
        None => Variant::ALL.to_vec(),
    };
    if let Some(d) = a.depth
        && (d == 0 || d > MAX_DEPTH)
    {
        return Err(CliError(format!(
            "depth must be from 1 to {MAX_DEPTH}, got {d}"
        )));
    }
    let repeat = a.repeat.clamp(1, 100);
    let mut entries = Vec::new();
    for v in variants {
        let depth = a.depth.unwrap_or_else(|| bench_depth(v));
        let pos = Position::start(v);
        eprintln!("{v}: perft({depth}) from the start position, best of {repeat}...");
        let mut best = f64::INFINITY;
        let mut nodes = 0;
        for _ in 0..repeat {
            let t = Instant::now();
            nodes = pos.perft(depth, Count::Unique);
            best = best.min(t.elapsed().as_secs_f64());
        }
        let e = BenchEntry {
            variant: v.key(),
            depth,
            nodes,
            seconds: best,
            nodes_per_second: nodes as f64 / best.max(1e-9),
        };
        if !a.json {
            out!(
                "{:<14} perft({:>2}) = {:>13} in {:>7.3} s  {:>7.1} M nodes/s",
                e.variant,
                e.depth,
                e.nodes,
                e.seconds,
                e.nodes_per_second / 1e6
            );
        }
        entries.push(e);
    }
    if a.json {
        print_json(&entries)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `draughts --help` names every command, in its group.
    #[test]
    fn help_lists_every_command_group() {
        let help = Cli::command().render_long_help().to_string();
        for group in ["Engine tools:", "API client:", "AI:"] {
            assert!(help.contains(group), "{help}");
        }
        let groups = COMMAND_GROUPS.replace([',', ':', '(', ')'], " ");
        let listed: Vec<&str> = groups.split_whitespace().collect();
        for command in Cli::command().get_subcommands() {
            let name = command.get_name();
            assert!(
                listed.contains(&name),
                "`{name}` is in no command group of --help"
            );
        }
    }
}
