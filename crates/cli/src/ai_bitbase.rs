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
    /// Output directory. Each slice is written as soon as it is solved, and the slices already there
    /// are kept and not solved again, so a stopped build goes on where it stopped.
    #[arg(long, short = 'o')]
    out: PathBuf,
    /// Threads for each slice's forward pass, 1 to 256 (default: the machine's cores). The tables do
    /// not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: Option<u16>,
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
    let threads = a.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get().min(256)),
        usize::from,
    );
    let start = Instant::now();
    let mut tables = Bitbases::load(&a.out, variant)?;
    let kept = tables.slices().count();
    if kept > 0 {
        out!(
            "{kept} slices already in {} (complete up to {} pieces): kept, not solved again",
            a.out.display(),
            tables.pieces()
        );
    }
    let (mut solved, mut positions, mut bytes) = (0usize, 0u64, 0u64);
    let out = a.out.clone();
    // The callback returns the tables' error type, so a failed progress line (a full disk behind a
    // redirect; a closed pipe has already ended the process in `write_line`) is kept here: the build
    // goes on writing its tables silently and the command fails with it at the end.
    let mut progress: Result<(), CliError> = Ok(());
    bitbase::extend(&mut tables, a.pieces, threads, |r, slice| {
        let written = Bitbases::write_slice(&out, variant, slice)?;
        solved += 1;
        positions += r.size;
        bytes += written;
        if progress.is_err() {
            return Ok(());
        }
        progress = crate::write_line(format_args!(
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
        ));
        Ok(())
    })?;
    progress?;
    out!(
        "{variant} up to {} pieces: {solved} slices solved ({positions} indices, {bytes} bytes) and {kept} kept, in {}, {threads} threads, built in {:.1} s",
        a.pieces,
        a.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn probe(a: ProbeArgs) -> Result<(), CliError> {
    let pos = position(&a.position)?;
    let tables = Bitbases::load(&a.bitbases, pos.variant())?;
    match tables.probe(&pos) {
        Some(v) => out!("{v:?}"),
        None => out!(
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
