//! `draughts bitbase`: build endgame tables (`bitbase build`) and read one position's value from them
//! (`bitbase probe`). The generator is `draughts_ai::bitbase`; this module owns files and progress lines.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, Subcommand};
use draughts_ai::bitbase::{self, Bitbases};
use draughts_engine::Variant;

use crate::{CliError, PositionArgs, position};

/// The environment variable naming the bitbase directory of the commands that search.
pub(crate) const BITBASES_ENV: &str = "DRAUGHTS_BITBASES";

#[derive(Subcommand, Debug)]
pub(crate) enum BitbaseCommand {
    /// Solve every position of up to N pieces (retrograde analysis) and write one file per material.
    Build(BuildArgs),
    /// The value of a position from tables on disk.
    Probe(ProbeArgs),
}

#[derive(Args, Debug)]
pub(crate) struct BuildArgs {
    /// Rule set (international, english, russian, brazilian, ...: diagonal 8x8 and 10x10 variants).
    #[arg(long, short = 'v')]
    variant: String,
    /// Most pieces on the board (2 to 7).
    #[arg(long)]
    pieces: u32,
    /// Output directory.
    #[arg(long, short = 'o')]
    out: PathBuf,
}

#[derive(Args, Debug)]
pub(crate) struct ProbeArgs {
    #[command(flatten)]
    position: PositionArgs,
    /// Directory of the tables.
    #[arg(long, env = BITBASES_ENV)]
    bitbases: PathBuf,
}

pub(crate) fn run(cmd: BitbaseCommand) -> Result<(), CliError> {
    match cmd {
        BitbaseCommand::Build(a) => build(a),
        BitbaseCommand::Probe(a) => probe(a),
    }
}

fn build(a: BuildArgs) -> Result<(), CliError> {
    let variant: Variant = a.variant.parse()?;
    let start = Instant::now();
    let mut positions = 0u64;
    let tables = bitbase::build(variant, a.pieces, |r| {
        positions += r.size;
        println!(
            "[{}/{}] {} ({}): {} indices, {} wins {} draws {} losses, {:.2} s (total {:.1} s)",
            r.done,
            r.total,
            r.material.digits(),
            r.material,
            r.size,
            r.wins,
            r.draws,
            r.losses,
            r.elapsed.as_secs_f64(),
            start.elapsed().as_secs_f64()
        );
    })?;
    let bytes = tables.write_dir(&a.out)?;
    println!(
        "{variant} up to {} pieces: {} slices, {positions} indices, {bytes} bytes in {}, built in {:.1} s",
        a.pieces,
        tables.slices().count(),
        a.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn probe(a: ProbeArgs) -> Result<(), CliError> {
    let pos = position(&a.position)?;
    let tables = Bitbases::load(&a.bitbases, pos.variant())?;
    match tables.probe(&pos) {
        Some(v) => println!("{v:?}"),
        None => println!(
            "not in the tables (they cover up to {} pieces)",
            tables.pieces()
        ),
    }
    Ok(())
}

/// Loads the tables of `variant` from `dir` for a search: `None` when no directory is given or it holds
/// no complete piece count; a bad file is an error.
pub(crate) fn load_for_search(
    dir: Option<&Path>,
    variant: Variant,
) -> Result<Option<Arc<Bitbases>>, CliError> {
    let Some(dir) = dir else { return Ok(None) };
    if !bitbase::supports(variant) {
        return Ok(None);
    }
    let tables = Bitbases::load(dir, variant)?;
    Ok((tables.pieces() > 0).then(|| Arc::new(tables)))
}
