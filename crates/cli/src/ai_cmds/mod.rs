//! The AI commands of the `draughts` tool, one module per command: `analyse`, `bestmove`, `hub` and
//! `search-bench` (`match` is in `ai_match`, `train` in `ai_train`).
//!
//! All search logic is in `draughts-ai`; these modules own the I/O around it: argument parsing, output
//! formats, the Hub command loop (stdin reader + one search thread).

mod analyse;
mod bestmove;
mod hub;
mod search_bench;

use clap::Subcommand;
use draughts_ai::Level;
use draughts_ai::level::{MAX_LEVEL, MIN_LEVEL};
use draughts_engine::Variant;
use serde::Serialize;

use crate::CliError;

/// The AI subcommands (flattened into the tool's command list).
#[derive(Subcommand, Debug)]
pub(crate) enum AiCommand {
    /// Search a position: score, best move and principal variation, one line per finished depth.
    Analyse(analyse::AnalyseArgs),
    /// The move a playing level (1 = beginner .. 8 = full strength) would play.
    Bestmove(bestmove::BestmoveArgs),
    /// Speak the Hub protocol (version 2, as Scan 3.1 defines it) on stdin/stdout.
    Hub(hub::HubArgs),
    /// Play a match between two engines (our levels, `greedy`, or an external Hub engine command).
    Match(crate::ai_match::MatchArgs),
    /// Search speed: nodes per second and time to depth on fixed middlegame positions per variant.
    SearchBench(search_bench::SearchBenchArgs),
    /// Train the learned evaluation: self-play data (`train gen`) and the fit (`train fit`).
    #[command(subcommand)]
    Train(crate::ai_train::TrainCommand),
    /// Endgame tables: build them (`bitbase build`) or read a position's value (`bitbase probe`).
    #[command(subcommand)]
    Bitbase(crate::ai_bitbase::BitbaseCommand),
}

pub(crate) fn run(cmd: AiCommand) -> Result<(), CliError> {
    match cmd {
        AiCommand::Analyse(a) => analyse::run(a),
        AiCommand::Bestmove(a) => bestmove::run(a),
        AiCommand::Hub(a) => hub::run(a),
        AiCommand::Match(a) => crate::ai_match::run(a),
        AiCommand::SearchBench(a) => search_bench::run(a),
        AiCommand::Train(a) => crate::ai_train::run(a),
        AiCommand::Bitbase(a) => crate::ai_bitbase::run(a),
    }
}

pub(crate) fn print_line<T: Serialize>(value: &T) {
    if let Ok(text) = serde_json::to_string(value) {
        println!("{text}");
    }
}

/// Level `n` as played in `variant`.
pub(crate) fn level(n: u8, variant: Variant) -> Result<Level, CliError> {
    Level::for_variant(n, variant).ok_or_else(|| {
        CliError(format!(
            "level must be from {MIN_LEVEL} to {MAX_LEVEL}, got {n}"
        ))
    })
}
