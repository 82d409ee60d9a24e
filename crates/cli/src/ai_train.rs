//! `draughts train`: self-play data generation (`train gen`) and the logistic fit of the learned evaluation
//! (`train fit`). The logic is in `draughts_ai::train`; this module owns files, threads and progress lines.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use draughts_ai::Evaluator;
use draughts_ai::learned::{DENSE_NAMES, LearnedWeights, Phase, WeightsError};
use draughts_ai::train::{
    FitConfig, GameRecord, Sample, SelfPlay, Split, WIDE_SAMPLE_BYTES, fit, sample_bytes,
    self_play_game,
};
use draughts_engine::Variant;

use crate::CliError;

#[derive(Subcommand, Debug)]
pub(crate) enum TrainCommand {
    /// Play self-play games and write their quiet positions, labelled, to a data file.
    Gen(GenArgs),
    /// Fit the learned evaluation to data files and write a weights file.
    Fit(FitArgs),
}

#[derive(Args, Debug)]
pub(crate) struct GenArgs {
    #[arg(long, short = 'v')]
    variant: String,
    /// Number of games.
    #[arg(long, default_value_t = 1000)]
    games: u64,
    /// Nodes per move.
    #[arg(long, default_value_t = 5000)]
    nodes: u64,
    /// Evaluation that plays: `hand`, `default` (the shipped weights, else hand) or a weights file.
    #[arg(long, default_value = "default")]
    eval: String,
    /// Seed: game `i` is played from seed `seed * 1_000_003 + i`.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Games played at once.
    #[arg(long, default_value_t = 2)]
    threads: u32,
    /// Random plies at the start, at least.
    #[arg(long, default_value_t = 4)]
    random_min: u32,
    /// Random plies at the start, at most.
    #[arg(long, default_value_t = 10)]
    random_max: u32,
    /// Output data file (written in game order, so the same seed gives the same file).
    #[arg(long, short = 'o')]
    out: PathBuf,
}

#[derive(Args, Debug)]
pub(crate) struct FitArgs {
    #[arg(long, short = 'v')]
    variant: String,
    /// Data files from `train gen`.
    #[arg(long = "data", required = true)]
    data: Vec<PathBuf>,
    /// Start from these weights (default: material only).
    #[arg(long)]
    init: Option<PathBuf>,
    /// Passes over the data (see `draughts_ai::train::FitConfig::epochs` for why so few).
    #[arg(long, default_value_t = FitConfig::default().epochs)]
    epochs: u32,
    #[arg(long, default_value_t = FitConfig::default().batch)]
    batch: usize,
    /// Adam step size in centi-men.
    #[arg(long, default_value_t = FitConfig::default().learning_rate)]
    lr: f32,
    /// L2 penalty per pattern weight (default 0: with Adam it empties the tables, see
    /// `draughts_ai::train::FitConfig::l2`).
    #[arg(long, default_value_t = FitConfig::default().l2)]
    l2: f32,
    /// Share of the game result in the target (the rest: the search's score).
    #[arg(long, default_value_t = FitConfig::default().result_weight)]
    result_weight: f32,
    /// Validation samples: whole games (`game`; data written before game starts were marked is split by
    /// position) or single positions (`position`, how every fit before the marks split).
    #[arg(long, value_enum, default_value_t = SplitArg::Game)]
    split: SplitArg,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Global features kept at their starting values (names as `train fit` prints them, comma separated:
    /// `king-mobility,king-diagonal` fits the layout without the king features).
    #[arg(long, value_delimiter = ',')]
    fixed: Vec<String>,
    /// How the phases are blended: `men` (the men on the board) or `pip` (their rows still to go);
    /// default: as the starting weights do (`men` without `--init`).
    #[arg(long)]
    phase: Option<String>,
    /// Add the big windows (the 4x6 rectangles of each side's half, 3^12 entries a table) to the
    /// starting weights, at zero (diagonal boards of 8x8 and 10x10; weights that have them keep them).
    #[arg(long)]
    big: bool,
    /// Output weights file.
    #[arg(long, short = 'o')]
    out: PathBuf,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum SplitArg {
    Game,
    Position,
}

pub(crate) fn run(cmd: TrainCommand) -> Result<(), CliError> {
    match cmd {
        TrainCommand::Gen(a) => generate(a),
        TrainCommand::Fit(a) => fit_cmd(a),
    }
}

/// The evaluation named on the command line: `hand`, `default`, or a weights file of the variant.
pub(crate) fn evaluator(variant: Variant, spec: &str) -> Result<Evaluator, CliError> {
    match spec {
        "hand" => Ok(Evaluator::hand(variant)),
        "default" => Ok(Evaluator::new(variant)),
        path => Ok(Evaluator::learned(Arc::new(read_weights(
            variant,
            Path::new(path),
        )?))),
    }
}

pub(crate) fn read_weights(variant: Variant, path: &Path) -> Result<LearnedWeights, CliError> {
    let variant: Variant = variant.key().parse()?;
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| CliError(format!("cannot read '{}': {e}", path.display())))?;
    match LearnedWeights::from_bytes(variant, &bytes) {
        Err(WeightsError::Variant(key)) => {
            // Weights of another variant on the same board (international's for killer) are taken.
            let other: Variant = key
                .parse()
                .map_err(|_| CliError(format!("'{}': weights of '{key}'", path.display())))?;
            let weights = LearnedWeights::from_bytes(other, &bytes)
                .map_err(|e| CliError(format!("'{}': {e}", path.display())))?;
            let moved = weights.for_variant(variant).ok_or_else(|| {
                CliError(format!(
                    "'{}' holds {other}'s weights, which do not fit {variant}'s board",
                    path.display()
                ))
            })?;
            eprintln!(
                "note: '{}' holds {other}'s weights; used for {variant}",
                path.display()
            );
            Ok(moved)
        }
        r => r.map_err(|e| CliError(format!("'{}': {e}", path.display()))),
    }
}

fn generate(a: GenArgs) -> Result<(), CliError> {
    let variant: Variant = a.variant.parse()?;
    let wide = sample_bytes(variant) == WIDE_SAMPLE_BYTES;
    let eval = evaluator(variant, &a.eval)?;
    let mut cfg = SelfPlay::new(variant);
    cfg.nodes = a.nodes.max(1);
    cfg.random_plies = (a.random_min, a.random_max.max(a.random_min));
    let file = File::create(&a.out)
        .map_err(|e| CliError(format!("cannot create '{}': {e}", a.out.display())))?;
    let mut out = BufWriter::new(file);
    let next = AtomicU64::new(0);
    let (tx, rx) = mpsc::channel::<(u64, GameRecord)>();
    let start = Instant::now();
    let games = a.games;
    let mut written_games = 0u64;
    let mut written = 0u64;
    let mut results = [0u64; 3];
    let mut plies = 0u64;
    std::thread::scope(|scope| -> Result<(), CliError> {
        for _ in 0..a.threads.max(1) {
            let tx = tx.clone();
            let (cfg, eval, next) = (&cfg, &eval, &next);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= games {
                        break;
                    }
                    let seed = a.seed.wrapping_mul(1_000_003).wrapping_add(i);
                    if tx.send((i, self_play_game(cfg, eval, seed))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Write in game order.
        let mut waiting: BTreeMap<u64, GameRecord> = BTreeMap::new();
        let mut last_report = Instant::now();
        for (i, record) in rx {
            waiting.insert(i, record);
            while let Some(record) = waiting.remove(&written_games) {
                for s in &record.samples {
                    out.write_all(&s.to_bytes(wide))?;
                }
                if let Some(s) = record.samples.first() {
                    results[usize::from(s.result)] += 1;
                }
                written += record.samples.len() as u64;
                plies += u64::from(record.plies);
                written_games += 1;
            }
            if last_report.elapsed() >= Duration::from_secs(15) || written_games == games {
                last_report = Instant::now();
                let secs = start.elapsed().as_secs_f64();
                eprintln!(
                    "gen {written_games}/{games} games, {written} positions, white +{} ={} -{}, {:.0} plies/game, {:.1} games/s, {:.0} s",
                    results[2],
                    results[1],
                    results[0],
                    plies as f64 / written_games.max(1) as f64,
                    written_games as f64 / secs,
                    secs
                );
            }
        }
        Ok(())
    })?;
    out.flush()?;
    println!(
        "wrote {written} positions from {written_games} games to {}",
        a.out.display()
    );
    Ok(())
}

/// The samples of every file, in order. A file written before the game marks (`Sample::game_start`) has
/// none: then no sample is marked, so that the fit splits by position rather than take that file for one
/// game.
fn read_samples(variant: Variant, paths: &[PathBuf]) -> Result<Vec<Sample>, CliError> {
    let size = sample_bytes(variant);
    let wide = size == WIDE_SAMPLE_BYTES;
    let mut samples = Vec::new();
    let mut unmarked = Vec::new();
    for path in paths {
        let first = samples.len();
        let mut bytes = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| CliError(format!("cannot read '{}': {e}", path.display())))?;
        if !bytes.len().is_multiple_of(size) {
            return Err(CliError(format!(
                "'{}' is not a {variant} data file ({} bytes is not a multiple of {size})",
                path.display(),
                bytes.len()
            )));
        }
        for chunk in bytes.chunks_exact(size) {
            samples.push(Sample::from_bytes(chunk, wide).ok_or_else(|| {
                CliError(format!("'{}' holds a malformed sample", path.display()))
            })?);
        }
        if samples.len() > first && !samples[first].game_start {
            unmarked.push(path.display().to_string());
        }
    }
    if !unmarked.is_empty() {
        eprintln!(
            "note: {} marks no game starts (written before the marks): the validation split is by position",
            unmarked.join(", ")
        );
        samples.iter_mut().for_each(|s| s.game_start = false);
    }
    Ok(samples)
}

fn fit_cmd(a: FitArgs) -> Result<(), CliError> {
    let variant: Variant = a.variant.parse()?;
    let samples = read_samples(variant, &a.data)?;
    if samples.is_empty() {
        return Err(CliError("no samples".into()));
    }
    let init = a
        .init
        .as_deref()
        .map(|p| read_weights(variant, p))
        .transpose()?;
    let fixed = a
        .fixed
        .iter()
        .map(|name| {
            DENSE_NAMES.iter().position(|n| n == name).ok_or_else(|| {
                CliError(format!(
                    "unknown global feature '{name}' (one of: {})",
                    DENSE_NAMES.join(", ")
                ))
            })
        })
        .collect::<Result<Vec<usize>, CliError>>()?;
    let phase = a
        .phase
        .as_deref()
        .map(|name| {
            Phase::from_name(name).ok_or_else(|| {
                let names: Vec<&str> = Phase::ALL.iter().map(|p| p.name()).collect();
                CliError(format!(
                    "unknown phase '{name}' (one of: {})",
                    names.join(", ")
                ))
            })
        })
        .transpose()?;
    if a.big
        && draughts_ai::learned::Layout::new(variant)
            .with_big(true)
            .is_none()
    {
        return Err(CliError(format!("{variant}'s board has no big windows")));
    }
    let cfg = FitConfig {
        fixed,
        phase,
        big: a.big,
        epochs: a.epochs,
        batch: a.batch.max(1),
        learning_rate: a.lr,
        l2: a.l2,
        result_weight: a.result_weight.clamp(0.0, 1.0),
        split: match a.split {
            SplitArg::Game => Split::Game,
            SplitArg::Position => Split::Position,
        },
        seed: a.seed,
        ..FitConfig::default()
    };
    eprintln!("fit: {} samples, {} epochs", samples.len(), cfg.epochs);
    let start = Instant::now();
    let (weights, report) = fit(variant, &samples, init.as_ref(), &cfg, |p| {
        eprintln!(
            "epoch {}: train loss {:.5}, validation loss {:.5} ({:.0} s)",
            p.epoch,
            p.train_loss,
            p.validation_loss,
            start.elapsed().as_secs_f64()
        );
    });
    std::fs::write(&a.out, weights.to_bytes())
        .map_err(|e| CliError(format!("cannot write '{}': {e}", a.out.display())))?;
    let split = match report.validation_games {
        Some(n) => format!("{n} whole games"),
        None => "by position".to_owned(),
    };
    println!(
        "k {:.5}; {} train / {} validation samples ({split}); validation loss {:.5} (the search scores' own: {:.5})",
        report.k,
        report.train_samples,
        report.validation_samples,
        report.final_validation_loss,
        report.search_loss
    );
    for (i, name) in DENSE_NAMES.iter().enumerate() {
        let (mg, eg) = weights.dense_weight(i);
        println!("  {name}: middlegame {mg:.1}, endgame {eg:.1} centi-men");
    }
    println!("wrote {}", a.out.display());
    Ok(())
}
