//! `draughts train`: self-play data generation (`train gen`), the logistic fit of the learned evaluation
//! (`train fit`) and the fit of a network (`train fit-nnue`). The logic is in `draughts_ai::train`; this module owns files, threads and progress lines.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use draughts_ai::learned::{DENSE_NAMES, LearnedWeights, Phase, WeightsError};
use draughts_ai::nnue::{self, Network, NnueError, fit::NnueFitConfig};
use draughts_ai::train::{
    FitConfig, GameBounds, GameRecord, Keep, Sample, SelfPlay, Split, WIDE_SAMPLE_BYTES, fit,
    relabel_game, sample_bytes, self_play_game,
};
use draughts_ai::{Evaluator, Searcher, Selectivity};
use draughts_engine::Variant;

use crate::CliError;

#[derive(Subcommand, Debug)]
pub(crate) enum TrainCommand {
    /// Play self-play games and write their quiet positions, labelled, to a data file.
    Gen(GenArgs),
    /// Fit the learned evaluation to data files and write a weights file.
    Fit(FitArgs),
    /// Fit a network (NNUE-style, `draughts_ai::nnue`) from scratch to data files and write its file.
    FitNnue(FitNnueArgs),
    /// Score a data file's positions again with another search (deeper, or another evaluation) and
    /// write them, results kept, to a new data file.
    Relabel(RelabelArgs),
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
    /// Evaluation that plays: `hand`, `learned` (the shipped learned weights, else hand), `default` (the
    /// shipped network, else `learned`), or a weights or network file.
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
    /// Which positions are kept: `quiet` (no capture for either side) or `no-capture` (none for the
    /// side to move; also the positions where the opponent threatens one, which the search evaluates).
    #[arg(long, value_enum, default_value_t = KeepArg::Quiet)]
    keep: KeepArg,
    /// A game is won once the mover's search sees at least this many centi-men ahead on four consecutive
    /// moves; 0 plays every game to its end (the data then holds the endings with kings).
    #[arg(long, default_value_t = SelfPlay::new(Variant::International).adjudicate.unsigned_abs())]
    adjudicate: u32,
    /// After the opening, the chance per thousand plies of a uniformly random move instead of the
    /// search's (0: none): the data then holds the unbalanced positions a search tree meets.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    random_rate: u32,
    /// Output data file (written in game order, so the same seed gives the same file).
    #[arg(long, short = 'o')]
    out: PathBuf,
    /// The index of the first game: a shard of a larger run (games `first-game .. first-game + games`,
    /// each from its own seed), so shards made apart, concatenated in order, are byte for byte the
    /// file of one run of them all.
    #[arg(long, default_value_t = 0)]
    first_game: u64,
    /// Go on with an interrupted run into the same `--out` (same settings): its `OUT.progress` says
    /// how many games are whole there; what follows them is cut, and the file ends as one uninterrupted
    /// run would have written it.
    #[arg(long)]
    resume: bool,
}

/// `OUT.progress`, kept while `train gen` or `train relabel` runs (removed at its end): the run's settings
/// and how much of the data file is whole (`v1`, the settings line, then `GAMES BYTES`).
struct RunProgress {
    path: PathBuf,
    settings: String,
}

impl RunProgress {
    fn new(out: &Path, settings: String) -> RunProgress {
        let mut path = out.to_path_buf().into_os_string();
        path.push(".progress");
        RunProgress {
            path: PathBuf::from(path),
            settings,
        }
    }

    fn of_gen(a: &GenArgs) -> RunProgress {
        RunProgress::new(
            &a.out,
            format!(
                "variant={} games={} first-game={} nodes={} eval={} seed={} random={}-{} keep={} adjudicate={} random-rate={}",
                a.variant,
                a.games,
                a.first_game,
                a.nodes,
                a.eval,
                a.seed,
                a.random_min,
                a.random_max,
                clap::ValueEnum::to_possible_value(&a.keep)
                    .map_or_else(String::new, |v| v.get_name().to_owned()),
                a.adjudicate,
                a.random_rate
            ),
        )
    }

    /// Games and bytes whole in the data file, if an interrupted run left this file.
    fn read(&self) -> Result<Option<(u64, u64)>, CliError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(CliError(format!("'{}': {e}", self.path.display()))),
        };
        let bad = || CliError(format!("'{}' is not a progress file", self.path.display()));
        let mut lines = text.lines();
        if lines.next() != Some("v1") {
            return Err(bad());
        }
        let settings = lines.next().ok_or_else(bad)?;
        if settings != self.settings {
            return Err(CliError(format!(
                "'{}' is of a run with other settings ({settings}), not {}",
                self.path.display(),
                self.settings
            )));
        }
        let (games, bytes) = lines
            .next()
            .and_then(|l| l.split_once(' '))
            .and_then(|(g, b)| Some((g.parse().ok()?, b.parse().ok()?)))
            .ok_or_else(bad)?;
        Ok(Some((games, bytes)))
    }

    /// Records that the first `games` games (`bytes` bytes, already flushed) are whole.
    fn save(&self, games: u64, bytes: u64) -> Result<(), CliError> {
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, format!("v1\n{}\n{games} {bytes}\n", self.settings))
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .map_err(|e| CliError(format!("'{}': {e}", self.path.display())))
    }
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

#[derive(Args, Debug)]
pub(crate) struct RelabelArgs {
    #[arg(long, short = 'v')]
    variant: String,
    /// The data file whose positions are scored again (from `train gen`, with its game marks).
    #[arg(long)]
    data: PathBuf,
    /// Nodes searched per position.
    #[arg(long, default_value_t = 20_000)]
    nodes: u64,
    /// Evaluation that searches: `hand`, `learned`, `default`, a weights file or a network.
    #[arg(long, default_value = "default")]
    eval: String,
    /// Search settings as in `draughts match` (`probcut=0,lmr=1`, ...; default: the variant's own).
    #[arg(long, default_value = "")]
    search: String,
    /// Games scored at once.
    #[arg(long, default_value_t = 2)]
    threads: u32,
    /// The index of the data file's first game to score: a shard (with `--games`), so shards scored
    /// apart, concatenated in order, are byte for byte the file of one run over them all.
    #[arg(long, default_value_t = 0)]
    first_game: u64,
    /// Games to score from `--first-game` (default: to the file's end).
    #[arg(long)]
    games: Option<u64>,
    /// Output data file (the same positions, marks and results, in the same order; new scores).
    #[arg(long, short = 'o')]
    out: PathBuf,
    /// Go on with an interrupted run into the same `--out` (same settings), as `train gen --resume`.
    #[arg(long)]
    resume: bool,
}

#[derive(Args, Debug)]
pub(crate) struct FitNnueArgs {
    #[arg(long, short = 'v')]
    variant: String,
    /// Data files from `train gen`.
    #[arg(long = "data", required = true)]
    data: Vec<PathBuf>,
    /// First-layer units per perspective (a multiple of 16, at most 256).
    #[arg(long, default_value_t = NnueFitConfig::default().hidden)]
    hidden: usize,
    /// Second-layer units (a multiple of 8, at most 64).
    #[arg(long, default_value_t = NnueFitConfig::default().layer2)]
    layer2: usize,
    #[arg(long, default_value_t = NnueFitConfig::default().epochs)]
    epochs: u32,
    #[arg(long, default_value_t = NnueFitConfig::default().batch)]
    batch: usize,
    /// Adam's step at the start (falls linearly to a tenth).
    #[arg(long, default_value_t = NnueFitConfig::default().learning_rate)]
    lr: f32,
    /// Share of the game result in the target (the rest: the search's score).
    #[arg(long, default_value_t = NnueFitConfig::default().result_weight)]
    result_weight: f32,
    /// Decoupled weight decay (AdamW): each step shrinks every weight by `step * decay` of itself.
    #[arg(long, default_value_t = NnueFitConfig::default().weight_decay)]
    weight_decay: f32,
    #[arg(long, value_enum, default_value_t = SplitArg::Game)]
    split: SplitArg,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Threads computing the gradients (the result does not depend on it).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Start from this network file (same variant and shape) instead of a seeded draw: go on fitting a
    /// shipped network on new data.
    #[arg(long)]
    init: Option<PathBuf>,
    /// Output network file.
    #[arg(long, short = 'o')]
    out: PathBuf,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum KeepArg {
    Quiet,
    NoCapture,
}

impl From<KeepArg> for Keep {
    fn from(k: KeepArg) -> Keep {
        match k {
            KeepArg::Quiet => Keep::Quiet,
            KeepArg::NoCapture => Keep::NoCapture,
        }
    }
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
        TrainCommand::FitNnue(a) => fit_nnue_cmd(a),
        TrainCommand::Relabel(a) => relabel(a),
    }
}

/// The evaluation named on the command line: `hand`, `learned` (the shipped learned weights), `default`
/// (the shipped network where the variant has one, else `learned`), or a file of the variant: a network
/// (`draughts_ai::nnue`, known by its magic) or learned weights.
pub(crate) fn evaluator(variant: Variant, spec: &str) -> Result<Evaluator, CliError> {
    match spec {
        "hand" => Ok(Evaluator::hand(variant)),
        "default" => Ok(Evaluator::new(variant)),
        "learned" => Ok(Evaluator::shipped_learned(variant)),
        path if is_network(Path::new(path))? => Ok(Evaluator::network(Arc::new(read_network(
            variant,
            Path::new(path),
        )?))),
        path => Ok(Evaluator::learned(Arc::new(read_weights(
            variant,
            Path::new(path),
        )?))),
    }
}

/// Whether a file starts with a network's magic.
fn is_network(path: &Path) -> Result<bool, CliError> {
    let mut head = [0u8; 4];
    let mut file =
        File::open(path).map_err(|e| CliError(format!("cannot read '{}': {e}", path.display())))?;
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => return Err(CliError(format!("cannot read '{}': {e}", path.display()))),
        }
    }
    Ok(got == head.len() && &head == nnue::MAGIC)
}

/// A network file for `variant` (one of another variant on the same board is taken, with a note).
pub(crate) fn read_network(variant: Variant, path: &Path) -> Result<Network, CliError> {
    let bytes = std::fs::read(path)
        .map_err(|e| CliError(format!("cannot read '{}': {e}", path.display())))?;
    match Network::from_bytes(variant, &bytes) {
        Err(NnueError::Variant(key)) => {
            let other: Variant = key
                .parse()
                .map_err(|_| CliError(format!("'{}': a network of '{key}'", path.display())))?;
            let net = Network::from_bytes(other, &bytes)
                .map_err(|e| CliError(format!("'{}': {e}", path.display())))?;
            let moved = net.for_variant(variant).ok_or_else(|| {
                CliError(format!(
                    "'{}' holds {other}'s network, which does not fit {variant}'s board",
                    path.display()
                ))
            })?;
            eprintln!(
                "note: '{}' holds {other}'s network; used for {variant}",
                path.display()
            );
            Ok(moved)
        }
        r => r.map_err(|e| CliError(format!("'{}': {e}", path.display()))),
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

/// A run that writes games' samples to `out` in game order, games made by worker threads, with
/// `OUT.progress` saved after each whole game: `train gen` and `train relabel`.
struct GameRun<'a> {
    out: &'a Path,
    progress: RunProgress,
    /// Games of the run (its indices `0..games`).
    games: u64,
    threads: u32,
    resume: bool,
    wide: bool,
    /// The progress line's first word.
    label: &'static str,
}

/// What a [`GameRun`] wrote.
#[derive(Default)]
struct RunTotals {
    /// Games whole on disk before this run (resumed).
    resumed: u64,
    games: u64,
    positions: u64,
    bytes: u64,
    /// Games by result for White: loss, draw, win.
    results: [u64; 3],
    plies: u64,
}

impl RunTotals {
    /// The run's closing line.
    fn print(&self, done: &str, out: &Path) -> Result<(), CliError> {
        out!(
            "{done} {} positions of {} games into {} ({} games, {} bytes in all)",
            self.positions,
            self.games - self.resumed,
            out.display(),
            self.games,
            self.bytes
        );
        Ok(())
    }
}

/// Runs `run`: each worker thread builds its state with `worker` and turns game indices into games; the
/// games are written in order whatever thread finished them, so the file depends on the indices only.
fn run_games<W>(run: GameRun<'_>, worker: impl Fn() -> W + Sync) -> Result<RunTotals, CliError>
where
    W: FnMut(u64) -> Result<GameRecord, CliError>,
{
    let out_path = run.out;
    let cannot = |e: std::io::Error| CliError(format!("'{}': {e}", out_path.display()));
    let (done, done_bytes) = match (run.progress.read()?, run.resume) {
        (Some(p), true) => p,
        (Some(_), false) => {
            return Err(CliError(format!(
                "'{}' holds an interrupted run: --resume to go on with it, or remove it and '{}' to start again",
                run.progress.path.display(),
                out_path.display()
            )));
        }
        (None, true) if out_path.exists() => {
            return Err(CliError(format!(
                "nothing to resume: '{}' has no progress file (its run ended)",
                out_path.display()
            )));
        }
        (None, _) => (0, 0),
    };
    let file = if done > 0 || done_bytes > 0 {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(out_path)
            .map_err(cannot)?;
        // What an interrupted run wrote after its last whole game goes.
        f.set_len(done_bytes).map_err(cannot)?;
        std::io::Seek::seek(&mut f, std::io::SeekFrom::End(0)).map_err(cannot)?;
        eprintln!(
            "resuming: {done} of {} games whole in '{}' ({done_bytes} bytes)",
            run.games,
            out_path.display()
        );
        f
    } else {
        File::create(out_path)
            .map_err(|e| CliError(format!("cannot create '{}': {e}", out_path.display())))?
    };
    run.progress.save(done, done_bytes)?;
    let mut out = BufWriter::new(file);
    let next = AtomicU64::new(done);
    let (tx, rx) = mpsc::channel::<(u64, Result<GameRecord, CliError>)>();
    let start = Instant::now();
    let games = run.games;
    let mut t = RunTotals {
        resumed: done,
        games: done,
        bytes: done_bytes,
        ..RunTotals::default()
    };
    std::thread::scope(|scope| -> Result<(), CliError> {
        for _ in 0..run.threads.max(1) {
            let tx = tx.clone();
            let (next, worker) = (&next, &worker);
            scope.spawn(move || {
                let mut work = worker();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= games {
                        break;
                    }
                    let game = work(i);
                    let failed = game.is_err();
                    if tx.send((i, game)).is_err() || failed {
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
            match record {
                Ok(record) => waiting.insert(i, record),
                Err(e) => {
                    // The other threads stop at their next game; what is whole stays resumable.
                    next.store(games, Ordering::Relaxed);
                    return Err(e);
                }
            };
            let before = t.games;
            while let Some(record) = waiting.remove(&t.games) {
                for s in &record.samples {
                    let sample = s.to_bytes(run.wide);
                    out.write_all(&sample)?;
                    t.bytes += sample.len() as u64;
                }
                if let Some(s) = record.samples.first() {
                    t.results[usize::from(s.result)] += 1;
                }
                t.positions += record.samples.len() as u64;
                t.plies += u64::from(record.plies);
                t.games += 1;
            }
            if t.games > before {
                // Whole games on disk first, then the progress that names them.
                out.flush()?;
                run.progress.save(t.games, t.bytes)?;
            }
            if last_report.elapsed() >= Duration::from_secs(15) || t.games == games {
                last_report = Instant::now();
                let secs = start.elapsed().as_secs_f64();
                let made = (t.games - done).max(1) as f64;
                let plies = if t.plies > 0 {
                    format!(", {:.0} plies/game", t.plies as f64 / made)
                } else {
                    String::new()
                };
                eprintln!(
                    "{} {}/{games} games, {} positions, white +{} ={} -{}{plies}, {:.1} games/s, {:.0} s",
                    run.label,
                    t.games,
                    t.positions,
                    t.results[2],
                    t.results[1],
                    t.results[0],
                    made / secs,
                    secs
                );
            }
        }
        Ok(())
    })?;
    out.flush()?;
    out.get_ref().sync_all().map_err(cannot)?;
    std::fs::remove_file(&run.progress.path)
        .map_err(|e| CliError(format!("'{}': {e}", run.progress.path.display())))?;
    Ok(t)
}

fn generate(a: GenArgs) -> Result<(), CliError> {
    let variant: Variant = a.variant.parse()?;
    let eval = evaluator(variant, &a.eval)?;
    let mut cfg = SelfPlay::new(variant);
    cfg.nodes = a.nodes.max(1);
    cfg.random_plies = (a.random_min, a.random_max.max(a.random_min));
    cfg.keep = a.keep.into();
    cfg.random_rate = a.random_rate;
    cfg.adjudicate = match a.adjudicate {
        0 => i32::MAX,
        n => i32::try_from(n).unwrap_or(i32::MAX),
    };
    let run = GameRun {
        out: &a.out,
        progress: RunProgress::of_gen(&a),
        games: a.games,
        threads: a.threads,
        resume: a.resume,
        wide: sample_bytes(variant) == WIDE_SAMPLE_BYTES,
        label: "gen",
    };
    let (cfg, eval) = (&cfg, &eval);
    let t = run_games(run, || {
        move |i: u64| {
            let seed = a
                .seed
                .wrapping_mul(1_000_003)
                .wrapping_add(a.first_game + i);
            Ok(self_play_game(cfg, eval, seed))
        }
    })?;
    t.print("wrote", &a.out)?;
    Ok(())
}

fn relabel(a: RelabelArgs) -> Result<(), CliError> {
    let variant: Variant = a.variant.parse()?;
    let eval = evaluator(variant, &a.eval)?;
    let mut selectivity = Selectivity::for_variant(variant);
    selectivity
        .parse_into(&a.search)
        .map_err(|e| CliError(format!("--search: {e}")))?;
    let data = GameFile::open(variant, &a.data)?;
    let all = data.games.len();
    let first = usize::try_from(a.first_game).unwrap_or(usize::MAX);
    if first > all {
        return Err(CliError(format!(
            "--first-game {first}: '{}' holds {all} games",
            a.data.display()
        )));
    }
    let count = a.games.map_or(all - first, |g| {
        usize::try_from(g).unwrap_or(usize::MAX).min(all - first)
    });
    let run = GameRun {
        out: &a.out,
        progress: RunProgress::new(
            &a.out,
            format!(
                "relabel variant={} data={} first-game={first} games={count} nodes={} eval={} search={}",
                a.variant,
                a.data.display(),
                a.nodes,
                a.eval,
                a.search
            ),
        ),
        games: count as u64,
        threads: a.threads,
        resume: a.resume,
        wide: sample_bytes(variant) == WIDE_SAMPLE_BYTES,
        label: "relabel",
    };
    let (data, eval, selectivity, nodes) = (&data, &eval, &selectivity, a.nodes);
    let t = run_games(run, || {
        let mut searcher = Searcher::new(variant);
        searcher.set_evaluator(eval.clone());
        searcher.set_selectivity(*selectivity);
        let mut file = None;
        move |i: u64| {
            let game = first + i as usize;
            let (start, samples) = data.game(&mut file, game)?;
            let samples = relabel_game(&mut searcher, nodes, &samples).map_err(|e| {
                CliError(format!(
                    "'{}', game {game} (sample {}): {e}",
                    data.path.display(),
                    start + e.index as u64
                ))
            })?;
            Ok(GameRecord { samples, plies: 0 })
        }
    })?;
    t.print("relabelled", &a.out)?;
    Ok(())
}

/// A data file read game by game (`train relabel`): one streaming pass finds the games' bounds (and
/// decodes every sample, so that a malformed file is refused before any search), then each game is read
/// again from the file when a worker takes it. The run holds the games' bounds, not the file.
struct GameFile {
    path: PathBuf,
    size: usize,
    wide: bool,
    /// Each game's samples, as indices into the file.
    games: Vec<std::ops::Range<u64>>,
}

impl GameFile {
    fn open(variant: Variant, path: &Path) -> Result<GameFile, CliError> {
        let size = sample_bytes(variant);
        let mut bounds = GameBounds::default();
        for_each_sample(variant, path, |sample| bounds.push(sample.game_start))?;
        if !bounds.marked() {
            return Err(CliError(format!(
                "'{}' marks no game starts (written before the marks): relabel needs its games",
                path.display()
            )));
        }
        Ok(GameFile {
            path: path.to_owned(),
            size,
            wide: size == WIDE_SAMPLE_BYTES,
            games: bounds.into_ranges(),
        })
    }

    /// Game `index`: its first sample's index in the file and its samples (`file`: the worker's own
    /// handle, opened at its first read).
    fn game(&self, file: &mut Option<File>, index: usize) -> Result<(u64, Vec<Sample>), CliError> {
        use std::io::{Seek, SeekFrom};
        let cannot =
            |e: std::io::Error| CliError(format!("cannot read '{}': {e}", self.path.display()));
        let range = self.games[index].clone();
        let file = match file {
            Some(f) => f,
            None => file.insert(File::open(&self.path).map_err(cannot)?),
        };
        let mut bytes = vec![0; (range.end - range.start) as usize * self.size];
        file.seek(SeekFrom::Start(range.start * self.size as u64))
            .and_then(|_| file.read_exact(&mut bytes))
            .map_err(cannot)?;
        let samples = bytes
            .chunks_exact(self.size)
            .map(|chunk| Sample::from_bytes(chunk, self.wide))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                CliError(format!(
                    "'{}' changed while it was read: a malformed sample in game {index}",
                    self.path.display()
                ))
            })?;
        Ok((range.start, samples))
    }
}

/// Reads the data file `path` of `variant` in one buffered pass, handing each sample to `each`: the one
/// reader of the format (a whole number of samples, each one well formed, or an error naming the file).
fn for_each_sample(
    variant: Variant,
    path: &Path,
    mut each: impl FnMut(Sample),
) -> Result<(), CliError> {
    let size = sample_bytes(variant);
    let wide = size == WIDE_SAMPLE_BYTES;
    let cannot = |e: std::io::Error| CliError(format!("cannot read '{}': {e}", path.display()));
    let file = File::open(path).map_err(cannot)?;
    let len = file.metadata().map_err(cannot)?.len();
    if !len.is_multiple_of(size as u64) {
        return Err(CliError(format!(
            "'{}' is not a {variant} data file ({len} bytes is not a multiple of {size})",
            path.display()
        )));
    }
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut bytes = vec![0; size];
    for _ in 0..len / size as u64 {
        reader.read_exact(&mut bytes).map_err(cannot)?;
        each(
            Sample::from_bytes(&bytes, wide).ok_or_else(|| {
                CliError(format!("'{}' holds a malformed sample", path.display()))
            })?,
        );
    }
    Ok(())
}

/// The samples of every file, in order. A file written before the game marks (`Sample::game_start`) has
/// none: then no sample is marked, so that the fit splits by position rather than take that file for one
/// game.
fn read_samples(variant: Variant, paths: &[PathBuf]) -> Result<Vec<Sample>, CliError> {
    let mut samples = Vec::new();
    let mut unmarked = Vec::new();
    for path in paths {
        let first = samples.len();
        for_each_sample(variant, path, |sample| samples.push(sample))?;
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

fn fit_nnue_cmd(a: FitNnueArgs) -> Result<(), CliError> {
    let variant: Variant = a.variant.parse()?;
    if !(a.weight_decay >= 0.0 && a.weight_decay * a.lr < 1.0) {
        return Err(CliError(format!(
            "--weight-decay {}: at least 0, and below 1 / --lr",
            a.weight_decay
        )));
    }
    let init = match &a.init {
        Some(path) => Some(read_network(variant, path)?.to_float()),
        None => None,
    };
    let samples = read_samples(variant, &a.data)?;
    if samples.is_empty() {
        return Err(CliError("no samples".into()));
    }
    let cfg = NnueFitConfig {
        init,
        hidden: a.hidden,
        layer2: a.layer2,
        epochs: a.epochs,
        batch: a.batch.max(1),
        learning_rate: a.lr,
        result_weight: a.result_weight.clamp(0.0, 1.0),
        weight_decay: a.weight_decay,
        split: match a.split {
            SplitArg::Game => Split::Game,
            SplitArg::Position => Split::Position,
        },
        seed: a.seed,
        threads: a.threads.clamp(1, 256),
        ..NnueFitConfig::default()
    };
    eprintln!(
        "fit-nnue: {} samples, network 4x{}x{} -> {} -> {} -> 1, {} epochs, {} threads",
        samples.len(),
        variant.rules().board.board().squares().count(),
        cfg.hidden,
        2 * cfg.hidden,
        cfg.layer2,
        cfg.epochs,
        cfg.threads
    );
    let start = Instant::now();
    let (net, report) = nnue::fit::fit(variant, &samples, &cfg, |p| match p.validation_loss {
        Some(v) => eprintln!(
            "epoch {}/{}: train loss {:.5}, validation loss {:.5} ({:.0} s)",
            p.epoch,
            p.epochs,
            p.train_loss,
            v,
            start.elapsed().as_secs_f64()
        ),
        None => eprintln!(
            "epoch {}/{}: batch {}/{}, train loss {:.5} ({:.0} s)",
            p.epoch,
            p.epochs,
            p.batch,
            p.batches,
            p.train_loss,
            start.elapsed().as_secs_f64()
        ),
    })
    .map_err(|e| CliError(format!("fit-nnue: {e}")))?;
    let bytes = net.to_bytes();
    std::fs::write(&a.out, &bytes)
        .map_err(|e| CliError(format!("cannot write '{}': {e}", a.out.display())))?;
    let quantised = report.quantised_validation_loss;
    let report = report.fit;
    let split = match report.validation_games {
        Some(n) => format!("{n} whole games"),
        None => "by position".to_owned(),
    };
    out!(
        "k {:.5}; {} train / {} validation samples ({split}); validation loss {:.5}, quantised {:.5} (the search scores' own: {:.5}); {:.0} s",
        report.k,
        report.train_samples,
        report.validation_samples,
        report.final_validation_loss,
        quantised,
        report.search_loss,
        start.elapsed().as_secs_f64()
    );
    out!("wrote {} ({} bytes)", a.out.display(), bytes.len());
    Ok(())
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
    out!(
        "k {:.5}; {} train / {} validation samples ({split}); validation loss {:.5} (the search scores' own: {:.5})",
        report.k,
        report.train_samples,
        report.validation_samples,
        report.final_validation_loss,
        report.search_loss
    );
    for (i, name) in DENSE_NAMES.iter().enumerate() {
        let (mg, eg) = weights.dense_weight(i);
        out!("  {name}: middlegame {mg:.1}, endgame {eg:.1} centi-men");
    }
    out!("wrote {}", a.out.display());
    Ok(())
}
