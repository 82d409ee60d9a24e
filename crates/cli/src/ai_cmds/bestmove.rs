//! `draughts bestmove`: the move a playing level would play.

use clap::Args;
use draughts_ai::{Rng, RootState, Searcher};
use serde::Serialize;

use super::{level, print_line};
use crate::{CliError, PositionArgs, position};

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
    /// Endgame tables from `draughts bitbase build`, probed where present.
    #[arg(long, env = crate::ai_bitbase::BITBASES_ENV)]
    bitbases: Option<std::path::PathBuf>,
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[derive(Serialize)]
struct BestmoveJson {
    level: u8,
    bestmove: Option<String>,
}

pub(super) fn run(a: BestmoveArgs) -> Result<(), CliError> {
    let pos = position(&a.position)?;
    let level = level(a.level, pos.variant())?;
    let mut rng = Rng::new(a.seed.unwrap_or_else(clock_seed));
    let mut searcher = Searcher::new(pos.rule_set());
    searcher.set_bitbases(crate::ai_bitbase::load_for_search(
        a.bitbases.as_deref(),
        pos.variant(),
    )?);
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
