//! Training data and the fit of the learned evaluation ([`crate::learned`]).
//!
//! - [`self_play_game`]: one game of the engine against itself from a randomised opening (a few random
//!   plies, kept only if a short search finds it roughly level), every move searched to a node limit.
//!   The positions after the opening that [`Keep`] names (by default the quiet ones: no capture for
//!   either side) are kept with the search's score; the game's result labels them. The result is the variant's own: the engine's game status (antidraughts:
//!   the side that loses every piece or is blocked wins; breakthrough: the first to crown wins), or an
//!   adjudication on the search's score, which is that variant's evaluation (in antidraughts, fewer pieces
//!   is ahead). A game depends only on its seed and the configuration.
//! - [`Sample`]: one labelled position, 28 bytes on disk (34 on the 12x12 board).
//! - [`fit`]: logistic regression (Texel's method) of the label on the model's score: minimise the log
//!   loss between `sigmoid(k * score)` and the target (the game result, optionally blended with the
//!   search's own score), by Adam over shuffled mini-batches (an L2 penalty on the pattern tables is optional
//!   and off by default: see [`FitConfig::l2`]).
//!   Reproducible from its seed. `k` is fitted first, on the search scores. One constraint: a king's weight
//!   is kept at least a man's (the self-play games are adjudicated before positions with several kings
//!   are common, so the data alone undervalues extra kings); in antidraughts, where material counts against
//!   its owner, the fit starts from negative material and a king is kept at most a man.

use draughts_engine::{
    Bitboard, BoardKind, Color, Game, GameResult, GameStatus, Position, PositionError, RuleSet,
    Variant,
};

use crate::eval::Evaluator;
use crate::learned::{Features, Layout, LearnedWeights, N_DENSE, Phase};
use crate::level::Rng;
use crate::search::{Limits, RootState, Searcher};

/// One labelled position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// White's pieces, Black's and the kings, as the position's sets (bits 64 and up only on the 12x12
    /// board).
    pub white: u128,
    pub black: u128,
    pub kings: u128,
    pub white_to_move: bool,
    /// The game's result for White: 0 loss, 1 draw, 2 win.
    pub result: u8,
    /// The search's score for White in centi-men (clamped to +-3000; forced wins are 3000).
    pub score: i16,
    /// The first sample of its game (files written before this flag have none: see [`Split`]).
    pub game_start: bool,
}

/// Bytes per sample on disk: the three sets' bits 0-63, the side to move and the game-start mark, the
/// result, the score.
pub const SAMPLE_BYTES: usize = 28;
/// Bytes per sample of the 12x12 board: bits 64-79 of the three sets follow the 28 bytes.
pub const WIDE_SAMPLE_BYTES: usize = 34;

/// Bytes per sample of a variant's data files.
pub fn sample_bytes(variant: Variant) -> usize {
    if variant.rules().board == BoardKind::Twelve {
        WIDE_SAMPLE_BYTES
    } else {
        SAMPLE_BYTES
    }
}

impl Sample {
    /// The sample on disk: [`SAMPLE_BYTES`], or [`WIDE_SAMPLE_BYTES`] when `wide` (the 12x12 board).
    pub fn to_bytes(&self, wide: bool) -> Vec<u8> {
        debug_assert!(wide || (self.white | self.black | self.kings) >> 64 == 0);
        let mut b = Vec::with_capacity(WIDE_SAMPLE_BYTES);
        for set in [self.white, self.black, self.kings] {
            b.extend_from_slice(&(set as u64).to_le_bytes());
        }
        b.push(u8::from(self.white_to_move) | (u8::from(self.game_start) << 1));
        b.push(self.result);
        b.extend_from_slice(&self.score.to_le_bytes());
        if wide {
            for set in [self.white, self.black, self.kings] {
                b.extend_from_slice(&((set >> 64) as u16).to_le_bytes());
            }
        }
        b
    }

    /// A sample read back ([`Sample::to_bytes`] with the same `wide`); `None` if malformed.
    pub fn from_bytes(b: &[u8], wide: bool) -> Option<Sample> {
        let len = if wide {
            WIDE_SAMPLE_BYTES
        } else {
            SAMPLE_BYTES
        };
        if b.len() < len || b[24] > 3 || b[25] > 2 {
            return None;
        }
        let set = |i: usize| {
            let lo = u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"));
            let hi = if wide {
                u16::from_le_bytes([b[28 + 2 * i], b[29 + 2 * i]])
            } else {
                0
            };
            u128::from(lo) | (u128::from(hi) << 64)
        };
        Some(Sample {
            white: set(0),
            black: set(1),
            kings: set(2),
            white_to_move: b[24] & 1 == 1,
            result: b[25],
            score: i16::from_le_bytes([b[26], b[27]]),
            game_start: b[24] & 2 != 0,
        })
    }

    /// The position this sample holds, under `rules`.
    pub fn position(&self, rules: impl Into<RuleSet>) -> Result<Position, PositionError> {
        let side = if self.white_to_move {
            Color::White
        } else {
            Color::Black
        };
        Position::from_bitboards(
            rules,
            side,
            Bitboard(self.white & !self.kings),
            Bitboard(self.white & self.kings),
            Bitboard(self.black & !self.kings),
            Bitboard(self.black & self.kings),
        )
    }

    /// The trainer's view of this sample under `layout` (the sets read in the board's word).
    pub fn features(&self, layout: &Layout) -> Features {
        if layout.variant().rules().board == BoardKind::Twelve {
            layout.features(self.white, self.black, self.kings, self.white_to_move)
        } else {
            layout.features(
                self.white as u64,
                self.black as u64,
                self.kings as u64,
                self.white_to_move,
            )
        }
    }
}

/// How self-play games are played.
#[derive(Clone, Debug)]
pub struct SelfPlay {
    pub variant: Variant,
    /// Nodes per move.
    pub nodes: u64,
    /// Random plies at the start: uniformly between these two.
    pub random_plies: (u32, u32),
    /// An opening whose short search is further than this from level (centi-men) is replaced.
    pub opening_margin: i32,
    /// A game still going after this many plies is a draw.
    pub max_plies: u32,
    /// A game is won once the mover's search sees at least this many centi-men on four consecutive moves.
    pub adjudicate: i32,
    /// Which of the game's positions are kept.
    pub keep: Keep,
    /// After the opening, the chance (per thousand plies) that a ply plays a uniformly random legal
    /// move instead of the search's: the games then reach the unbalanced positions a search tree is
    /// full of and play them on. The position before such a move keeps its search score; its result
    /// is the game's, as for every other position.
    pub random_rate: u32,
}

/// Which self-play positions become samples. The search evaluates no position where the side to move
/// has a capture (captures are forced, so quiescence plays them out), but it does evaluate positions
/// where the opponent threatens one; [`Keep::Quiet`] leaves those out of the data, [`Keep::NoCapture`]
/// keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Keep {
    /// No capture for either side.
    #[default]
    Quiet,
    /// No capture for the side to move (the opponent may threaten one).
    NoCapture,
}

impl Keep {
    /// Whether `pos` is kept.
    pub fn keeps(self, pos: &Position) -> bool {
        !pos.has_capture()
            && (self == Keep::NoCapture
                || !pos.with_side_to_move(!pos.side_to_move()).has_capture())
    }
}

impl SelfPlay {
    pub fn new(variant: Variant) -> SelfPlay {
        SelfPlay {
            variant,
            nodes: 5_000,
            random_plies: (4, 10),
            opening_margin: 60,
            max_plies: 300,
            adjudicate: 700,
            keep: Keep::Quiet,
            random_rate: 0,
        }
    }
}

/// One self-play game's samples and result.
#[derive(Clone, Debug, Default)]
pub struct GameRecord {
    pub samples: Vec<Sample>,
    pub plies: u32,
}

fn clamp_score(raw: i32) -> i16 {
    raw.clamp(-3000, 3000) as i16
}

/// Plays one self-play game with `eval` (see the module docs).
pub fn self_play_game(cfg: &SelfPlay, eval: &Evaluator, seed: u64) -> GameRecord {
    let mut rng = Rng::new(seed);
    let mut searcher = Searcher::new(cfg.variant);
    searcher.set_evaluator(eval.clone());
    // The opening: random plies, retried until a short search calls it level.
    let mut game;
    let mut tries = 0;
    loop {
        tries += 1;
        game = Game::new(Position::start(cfg.variant));
        let (lo, hi) = cfg.random_plies;
        let n = lo + rng.below(u64::from(hi.saturating_sub(lo)) + 1) as u32;
        for _ in 0..n {
            let moves = game.position().legal_moves();
            if moves.is_empty() || game.status() != GameStatus::Ongoing {
                break;
            }
            let mv = moves[rng.below(moves.len() as u64) as usize];
            let _ = game.play(&mv);
        }
        if game.status() != GameStatus::Ongoing {
            continue;
        }
        searcher.clear();
        let r = searcher.search(
            &RootState::from_game(&game),
            &Limits::nodes(cfg.nodes),
            |_| {},
        );
        let level = r
            .lines
            .first()
            .is_some_and(|l| l.raw.abs() <= cfg.opening_margin);
        if level || tries >= 20 {
            break;
        }
    }
    searcher.clear();
    let mut pending: Vec<(Sample, bool)> = Vec::new();
    let mut streak: (i32, u32) = (0, 0);
    let mut adjudicated: Option<Color> = None;
    while game.status() == GameStatus::Ongoing && (game.moves().len() as u32) < cfg.max_plies {
        let pos = *game.position();
        let root = RootState::from_game(&game);
        let moves = pos.legal_moves();
        let (mv, score) = if moves.len() == 1 {
            (moves[0], None)
        } else {
            let r = searcher.search(&root, &Limits::nodes(cfg.nodes), |_| {});
            let Some(best) = r.best else { break };
            (best, r.lines.first().map(|l| l.raw))
        };
        let white_to_move = pos.side_to_move() == Color::White;
        if let Some(s) = score {
            let white_score = if white_to_move { s } else { -s };
            if cfg.keep.keeps(&pos) {
                pending.push((
                    Sample {
                        white: pos.pieces(Color::White).0,
                        black: pos.pieces(Color::Black).0,
                        kings: pos.kings().0,
                        white_to_move,
                        result: 1,
                        score: clamp_score(white_score),
                        game_start: pending.is_empty(),
                    },
                    true,
                ));
            }
            let side = white_score.signum();
            if white_score.abs() >= cfg.adjudicate {
                streak = if streak.0 == side {
                    (side, streak.1 + 1)
                } else {
                    (side, 1)
                };
            } else {
                streak = (0, 0);
            }
            if streak.1 >= 4 {
                adjudicated = Some(if side > 0 { Color::White } else { Color::Black });
                break;
            }
        }
        // One draw of the generator a searched ply when the rate is on (none when off, so the games
        // of a rate of 0 are those of before the setting).
        let mv = if cfg.random_rate > 0
            && moves.len() > 1
            && rng.below(1000) < u64::from(cfg.random_rate)
        {
            moves[rng.below(moves.len() as u64) as usize]
        } else {
            mv
        };
        if game.play(&mv).is_err() {
            break;
        }
    }
    let winner = adjudicated.or(match game.status() {
        GameStatus::Finished(GameResult::Win { winner, .. }) => Some(winner),
        _ => None,
    });
    let result = match winner {
        Some(Color::White) => 2,
        Some(Color::Black) => 0,
        None => 1,
    };
    GameRecord {
        samples: pending
            .into_iter()
            .map(|(mut s, _)| {
                s.result = result;
                s
            })
            .collect(),
        plies: game.moves().len() as u32,
    }
}

/// A sample that is not a position of its variant (what [`relabel_game`] cannot search).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("sample {index} of the game is not a position: {error}")]
pub struct RelabelError {
    pub index: usize,
    pub error: draughts_engine::PositionError,
}

/// The games of a data file: the sample ranges from each game-start mark to the next (the file's first
/// sample opens its first game). `None` when no sample is marked (files written before the marks).
pub fn games_of(samples: &[Sample]) -> Option<Vec<std::ops::Range<usize>>> {
    let bounds = GameBounds::of(samples);
    bounds.marked().then(|| bounds.ranges())
}

/// The games of a run of samples told one at a time (a file read in one pass, `train relabel`): the
/// one definition of where games start, which [`games_of`] and the fit's split by game also use.
#[derive(Clone, Debug, Default)]
pub struct GameBounds {
    ended: Vec<std::ops::Range<u64>>,
    start: u64,
    seen: u64,
    marked: bool,
}

impl GameBounds {
    fn of(samples: &[Sample]) -> GameBounds {
        let mut bounds = GameBounds::default();
        samples.iter().for_each(|s| bounds.push(s.game_start));
        bounds
    }

    /// The next sample, marked as a game's first or not.
    pub fn push(&mut self, game_start: bool) {
        if game_start && self.seen > self.start {
            self.ended.push(self.start..self.seen);
            self.start = self.seen;
        }
        self.marked |= game_start;
        self.seen += 1;
    }

    /// Whether any sample was marked (a file written before the marks has none).
    pub fn marked(&self) -> bool {
        self.marked
    }

    /// Every game's samples by index, the last one included; none when no sample was told.
    pub fn into_ranges(mut self) -> Vec<std::ops::Range<u64>> {
        if self.seen > self.start {
            self.ended.push(self.start..self.seen);
        }
        self.ended
    }

    fn ranges(self) -> Vec<std::ops::Range<usize>> {
        self.into_ranges()
            .into_iter()
            .map(|r| r.start as usize..r.end as usize)
            .collect()
    }
}

/// One game's samples scored again: each position searched by `searcher` (its evaluation and
/// selectivity as set) to `nodes` nodes, in the game's order, the table cleared first, so the new scores
/// depend only on the samples, the searcher's settings and `nodes`. Results and marks are kept; a
/// position with no legal move keeps its score. What a data file's other search (deeper, or another
/// evaluation) thinks of the same positions, for the fit's search-score target.
pub fn relabel_game(
    searcher: &mut Searcher,
    nodes: u64,
    samples: &[Sample],
) -> Result<Vec<Sample>, RelabelError> {
    let rules = searcher.rules();
    searcher.clear();
    samples
        .iter()
        .enumerate()
        .map(|(index, s)| {
            let pos = s
                .position(rules)
                .map_err(|error| RelabelError { index, error })?;
            let r = searcher.search(&RootState::new(pos), &Limits::nodes(nodes.max(1)), |_| {});
            let mut out = *s;
            if let Some(line) = r.lines.first() {
                out.score = clamp_score(if s.white_to_move { line.raw } else { -line.raw });
            }
            Ok(out)
        })
        .collect()
}

/// How the fit runs.
#[derive(Clone, Debug)]
pub struct FitConfig {
    /// Passes over the training data. Default 2: held out by game, the validation loss is lowest after
    /// one or two, and in matches the later epochs lose strength (turkish, one data file: 2 epochs +31 ±
    /// 62 against the hand-set evaluation, 12 epochs -235 ± 56; docs/ai.md, "Round seven").
    pub epochs: u32,
    pub batch: usize,
    /// Adam step size in centi-men at the start (falls linearly to a tenth).
    pub learning_rate: f32,
    /// L2 penalty per pattern weight (centi-men squared), added to the mean log loss. Default 0: the
    /// penalty's gradient goes through Adam with the data's, so for an entry absent from a batch Adam
    /// normalises the penalty alone into a step of about the full learning rate toward zero: the tables
    /// empty, and even 1e-8 costs (russian, 232,259 positions: validation loss 0.64636 at 0, 0.65179 at
    /// 1e-8, 0.65546 at 5e-7, where 2,592 of 118,114 values stay non-zero).
    pub l2: f32,
    /// Share of the game result in the target; the rest is `sigmoid(k * search score)`.
    pub result_weight: f32,
    /// Share of samples kept out for validation.
    pub validation: f32,
    /// How the validation samples are chosen.
    pub split: Split,
    pub seed: u64,
    /// Global features (indices into [`crate::learned::DENSE_NAMES`]) whose weights stay as they start:
    /// a fit of the layout without them, when they start at zero.
    pub fixed: Vec<usize>,
    /// How the fitted weights blend their phases; `None`: as the starting weights do.
    pub phase: Option<Phase>,
    /// Add the big windows to the starting weights, at zero ([`LearnedWeights::with_big_tables`]; where
    /// the board has none, the fit goes on without them).
    pub big: bool,
}

/// How a fit chooses its validation samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Split {
    /// Whole games, where the data marks where each game starts ([`Sample::game_start`]; data without
    /// the marks is split by position). A game's positions are alike: split by position, one game's
    /// positions fall on both sides, and the validation loss flatters a fit that learns games by heart.
    #[default]
    Game,
    /// Single positions (a seeded shuffle of the samples): how every fit before the marks split.
    Position,
}

impl Default for FitConfig {
    fn default() -> Self {
        FitConfig {
            epochs: 2,
            batch: 4096,
            learning_rate: 2.0,
            l2: 0.0,
            result_weight: 0.5,
            validation: 0.05,
            split: Split::Game,
            seed: 1,
            fixed: Vec::new(),
            phase: None,
            big: false,
        }
    }
}

/// Progress of a fit: after the `k` fit, and after every epoch.
#[derive(Clone, Debug)]
pub struct FitProgress {
    pub epoch: u32,
    pub train_loss: f64,
    pub validation_loss: f64,
}

/// The result of a fit.
#[derive(Clone, Debug)]
pub struct FitReport {
    pub k: f64,
    pub train_samples: usize,
    pub validation_samples: usize,
    /// Whole games kept out for validation (`None`: split by position).
    pub validation_games: Option<usize>,
    /// Validation loss of the search scores themselves (`sigmoid(k * score)` against the target).
    pub search_loss: f64,
    pub final_validation_loss: f64,
}

/// Compact features of one sample for the fit.
struct Row {
    entries: Vec<u32>,
    dense: [f32; N_DENSE],
    phase: f32,
    target: f32,
}

const NEG: u32 = 1 << 31;

pub(crate) fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

pub(crate) fn log_loss(p: f64, y: f64) -> f64 {
    let p = p.clamp(1e-9, 1.0 - 1e-9);
    -(y * p.ln() + (1.0 - y) * (1.0 - p).ln())
}

/// The `k` that best fits `sigmoid(k * score)` to the results (golden-section search on the log loss).
pub fn fit_k(samples: &[Sample]) -> f64 {
    let loss = |k: f64| -> f64 {
        samples
            .iter()
            .map(|s| log_loss(sigmoid(k * f64::from(s.score)), f64::from(s.result) / 2.0))
            .sum::<f64>()
            / samples.len().max(1) as f64
    };
    let (mut a, mut b) = (1e-4f64, 0.05f64);
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..60 {
        let c = b - g * (b - a);
        let d = a + g * (b - a);
        if loss(c) < loss(d) {
            b = d;
        } else {
            a = c;
        }
    }
    (a + b) / 2.0
}

/// Fits learned weights to the samples, starting from `init` (material only if `None`).
pub fn fit(
    variant: Variant,
    samples: &[Sample],
    init: Option<&LearnedWeights>,
    cfg: &FitConfig,
    mut progress: impl FnMut(&FitProgress),
) -> (LearnedWeights, FitReport) {
    let hand = crate::eval::Weights::of(variant);
    // Antidraughts: material counts against its owner, and a king (hard to lose) is the worst piece to keep.
    let sign = if hand.give_away { -1 } else { 1 };
    let start = init.cloned().unwrap_or_else(|| {
        LearnedWeights::material_only(variant, sign * hand.man, sign * hand.king)
    });
    let start = match cfg.phase {
        Some(phase) => start.with_phase(phase),
        None => start,
    };
    let start = if cfg.big {
        start.with_big_tables().unwrap_or(start)
    } else {
        start
    };
    let layout = start.layout().clone();
    let n = layout.n_weights();
    let base = layout.dense_base();
    let k = fit_k(samples);
    let target_of = |s: &Sample| -> f32 {
        let result = f64::from(s.result) / 2.0;
        let search = sigmoid(k * f64::from(s.score));
        (f64::from(cfg.result_weight) * result + (1.0 - f64::from(cfg.result_weight)) * search)
            as f32
    };
    let mut rng = Rng::new(cfg.seed);
    let (order, n_valid, validation_games) = validation_split(samples, cfg, &mut rng);
    let rows: Vec<Row> = order
        .iter()
        .map(|&i| {
            let s = &samples[i];
            let f: Features = s.features(&layout);
            Row {
                entries: f
                    .entries
                    .iter()
                    .map(|&(e, sign)| if sign < 0 { e | NEG } else { e })
                    .collect(),
                dense: f.dense.map(|x| x as f32),
                phase: f.phase,
                target: target_of(s),
            }
        })
        .collect();
    let (valid, train) = rows.split_at(n_valid);
    let search_loss = order[..n_valid]
        .iter()
        .zip(valid)
        .map(|(&i, r)| {
            log_loss(
                sigmoid(k * f64::from(samples[i].score)),
                f64::from(r.target),
            )
        })
        .sum::<f64>()
        / n_valid.max(1) as f64;

    let mut w: Vec<[f32; 2]> = start.to_centi_men();
    let mut m = vec![[0f32; 2]; n];
    let mut v = vec![[0f32; 2]; n];
    let mut grad = vec![[0f32; 2]; n];
    let (b1, b2, eps) = (0.9f32, 0.999f32, 1e-8f32);
    let mut t = 0i32;
    let kf = k as f32;
    let predict = |w: &[[f32; 2]], r: &Row| -> f32 {
        let (mut mg, mut eg) = (0f32, 0f32);
        for &e in &r.entries {
            let i = (e & !NEG) as usize;
            if e & NEG != 0 {
                mg -= w[i][0];
                eg -= w[i][1];
            } else {
                mg += w[i][0];
                eg += w[i][1];
            }
        }
        for (d, x) in r.dense.iter().enumerate() {
            mg += x * w[base + d][0];
            eg += x * w[base + d][1];
        }
        mg * r.phase + eg * (1.0 - r.phase)
    };
    let mean_loss = |w: &[[f32; 2]], rows: &[Row]| -> f64 {
        rows.iter()
            .map(|r| log_loss(sigmoid(f64::from(kf * predict(w, r))), f64::from(r.target)))
            .sum::<f64>()
            / rows.len().max(1) as f64
    };
    let mut train_idx: Vec<usize> = (0..train.len()).collect();
    let total_steps = (cfg.epochs as usize * train.len().div_ceil(cfg.batch.max(1))).max(1);
    for epoch in 1..=cfg.epochs {
        shuffle(&mut train_idx, &mut rng);
        let mut loss_sum = 0f64;
        for batch in train_idx.chunks(cfg.batch.max(1)) {
            grad.iter_mut().for_each(|g| *g = [0.0; 2]);
            let scale = 1.0 / batch.len() as f32;
            for &bi in batch {
                let r = &train[bi];
                let z = predict(&w, r);
                let p = sigmoid(f64::from(kf * z)) as f32;
                loss_sum += log_loss(f64::from(p), f64::from(r.target));
                let dz = kf * (p - r.target) * scale;
                let (gm, ge) = (dz * r.phase, dz * (1.0 - r.phase));
                for &e in &r.entries {
                    let i = (e & !NEG) as usize;
                    let s = if e & NEG != 0 { -1.0 } else { 1.0 };
                    grad[i][0] += s * gm;
                    grad[i][1] += s * ge;
                }
                for (d, x) in r.dense.iter().enumerate() {
                    grad[base + d][0] += x * gm;
                    grad[base + d][1] += x * ge;
                }
            }
            t += 1;
            let lr = cfg.learning_rate * (1.0 - 0.9 * (t as f32 / total_steps as f32).min(1.0));
            let c1 = 1.0 - b1.powi(t);
            let c2 = 1.0 - b2.powi(t);
            for i in 0..n {
                if i >= base && cfg.fixed.contains(&(i - base)) {
                    continue;
                }
                for ph in 0..2 {
                    let mut g = grad[i][ph];
                    if i < base {
                        g += 2.0 * cfg.l2 * w[i][ph];
                    }
                    m[i][ph] = b1 * m[i][ph] + (1.0 - b1) * g;
                    v[i][ph] = b2 * v[i][ph] + (1.0 - b2) * g * g;
                    let step = lr * (m[i][ph] / c1) / ((v[i][ph] / c2).sqrt() + eps);
                    w[i][ph] -= step;
                }
            }
            // Prior knowledge the data hardly holds (games end before several kings appear): a king is
            // worth at least a man in both phases (in antidraughts, where pieces count against their
            // owner, at most a man: a king is the harder piece to lose).
            let man = w[base];
            let king_fixed = cfg.fixed.contains(&1);
            for (king, man) in w[base + 1].iter_mut().zip(man).filter(|_| !king_fixed) {
                *king = if hand.give_away {
                    king.min(man)
                } else {
                    king.max(man)
                };
            }
        }
        progress(&FitProgress {
            epoch,
            train_loss: loss_sum / train.len().max(1) as f64,
            validation_loss: mean_loss(&w, valid),
        });
    }
    let final_validation_loss = mean_loss(&w, valid);
    (
        LearnedWeights::from_centi_men(layout, &w),
        FitReport {
            k,
            train_samples: train.len(),
            validation_samples: valid.len(),
            validation_games,
            search_loss,
            final_validation_loss,
        },
    )
}

/// The samples in a seeded order whose first `n` are the validation set: `(order, n, whole games kept
/// out)` (see [`Split`]).
pub(crate) fn validation_split(
    samples: &[Sample],
    cfg: &FitConfig,
    rng: &mut Rng,
) -> (Vec<usize>, usize, Option<usize>) {
    let wanted = ((samples.len() as f64) * f64::from(cfg.validation)) as usize;
    let games = game_ranges(samples);
    if cfg.split == Split::Game && games.len() > 1 {
        // Whole games in a seeded order; validation takes games until it holds its share.
        let mut game_order: Vec<usize> = (0..games.len()).collect();
        shuffle(&mut game_order, rng);
        let (mut n_valid, mut n_games) = (0, 0);
        for &g in &game_order {
            if n_valid >= wanted {
                break;
            }
            n_valid += games[g].len();
            n_games += 1;
        }
        let order: Vec<usize> = game_order.iter().flat_map(|&g| games[g].clone()).collect();
        (order, n_valid, Some(n_games))
    } else {
        // A seeded shuffle of the samples.
        let mut order: Vec<usize> = (0..samples.len()).collect();
        shuffle(&mut order, rng);
        (order, wanted, None)
    }
}

/// The samples of each game, by the [`Sample::game_start`] marks (the first sample always starts one).
fn game_ranges(samples: &[Sample]) -> Vec<std::ops::Range<usize>> {
    GameBounds::of(samples).ranges()
}

pub(crate) fn shuffle<T>(v: &mut [T], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_round_trip_through_bytes() {
        let s = Sample {
            white: 0x0123_4567_89AB_CDEF,
            black: 42,
            kings: 1 << 40,
            white_to_move: false,
            result: 2,
            score: -1234,
            game_start: false,
        };
        assert_eq!(s.to_bytes(false).len(), SAMPLE_BYTES);
        assert_eq!(Sample::from_bytes(&s.to_bytes(false), false), Some(s));
        let first = Sample {
            game_start: true,
            white_to_move: true,
            ..s
        };
        assert_eq!(
            Sample::from_bytes(&first.to_bytes(false), false),
            Some(first)
        );
        // A file written before the game marks reads as it did: no sample starts a game.
        let mut old = s.to_bytes(false);
        old[24] = 1;
        assert_eq!(
            Sample::from_bytes(&old, false).map(|s| (s.white_to_move, s.game_start)),
            Some((true, false))
        );
        let mut bad = s.to_bytes(false);
        bad[25] = 3;
        assert_eq!(Sample::from_bytes(&bad, false), None);
        // The 12x12 board's sets keep their bits above 63 in the six bytes that follow.
        let wide = Sample {
            white: s.white | 1 << 76,
            black: s.black | 1 << 64,
            kings: s.kings | 1 << 70,
            ..s
        };
        assert_eq!(wide.to_bytes(true).len(), WIDE_SAMPLE_BYTES);
        assert_eq!(Sample::from_bytes(&wide.to_bytes(true), true), Some(wide));
        assert_eq!(Sample::from_bytes(&wide.to_bytes(true)[..30], true), None);
        assert_eq!(sample_bytes(Variant::Canadian), WIDE_SAMPLE_BYTES);
        assert_eq!(sample_bytes(Variant::Turkish), SAMPLE_BYTES);
    }

    /// The trainer is reproducible: the same data and seed give the same weights, byte for byte, and the
    /// same validation loss; another seed shuffles otherwise.
    #[test]
    fn the_same_data_and_seed_fit_the_same_weights() {
        let mut cfg = SelfPlay::new(Variant::English);
        cfg.nodes = 200;
        cfg.max_plies = 80;
        let eval = Evaluator::hand(Variant::English);
        let samples: Vec<Sample> = (0..6)
            .flat_map(|seed| self_play_game(&cfg, &eval, seed).samples)
            .collect();
        let fit_with = |seed: u64| {
            let cfg = FitConfig {
                epochs: 2,
                batch: 64,
                seed,
                ..FitConfig::default()
            };
            let (w, report) = fit(Variant::English, &samples, None, &cfg, |_| {});
            (w.to_bytes(), report.final_validation_loss)
        };
        let (a, loss_a) = fit_with(3);
        let (b, loss_b) = fit_with(3);
        assert!(a == b, "same seed, same weights");
        assert_eq!(loss_a.to_bits(), loss_b.to_bits());
        let (c, _) = fit_with(4);
        assert!(a != c, "another seed, another shuffle");
    }

    /// Split by game, every game's samples fall on one side; data without game marks splits by position,
    /// as `Split::Position` does, in the same order.
    #[test]
    fn validation_takes_whole_games() {
        let mut cfg = SelfPlay::new(Variant::English);
        cfg.nodes = 200;
        cfg.max_plies = 80;
        let eval = Evaluator::hand(Variant::English);
        let mut samples = Vec::new();
        for seed in 0..8 {
            let game = self_play_game(&cfg, &eval, seed).samples;
            assert!(game[0].game_start && game[1..].iter().all(|s| !s.game_start));
            samples.extend(game);
        }
        let games = game_ranges(&samples);
        assert_eq!(games.len(), 8);
        let fit_cfg = FitConfig {
            validation: 0.3,
            ..FitConfig::default()
        };
        let (order, n_valid, n_games) = validation_split(&samples, &fit_cfg, &mut Rng::new(1));
        assert!(n_valid >= samples.len() * 3 / 10 && n_valid < samples.len());
        let valid: std::collections::HashSet<usize> = order[..n_valid].iter().copied().collect();
        let mut kept_out = 0;
        for g in &games {
            let inside = g.clone().filter(|i| valid.contains(i)).count();
            assert!(inside == 0 || inside == g.len(), "a game split in two");
            kept_out += usize::from(inside > 0);
        }
        assert_eq!(n_games, Some(kept_out));
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..samples.len()).collect::<Vec<_>>());
        // Without the marks: by position, exactly as asked for by `Split::Position`.
        let unmarked: Vec<Sample> = samples
            .iter()
            .map(|s| Sample {
                game_start: false,
                ..*s
            })
            .collect();
        let by_position = FitConfig {
            split: Split::Position,
            ..fit_cfg.clone()
        };
        let (a, na, ga) = validation_split(&unmarked, &fit_cfg, &mut Rng::new(1));
        let (b, nb, gb) = validation_split(&samples, &by_position, &mut Rng::new(1));
        assert_eq!((a, na, ga), (b, nb, gb));
        assert_eq!(ga, None);
    }

    /// Relabelling keeps every position, mark and result, scores each position again (a deeper search
    /// disagrees somewhere), does not depend on what the searcher did before, and names a sample that
    /// is not a position.
    #[test]
    fn relabelling_scores_again_and_keeps_the_rest() {
        let mut cfg = SelfPlay::new(Variant::English);
        cfg.nodes = 60;
        let eval = Evaluator::new(Variant::English);
        let mut games: Vec<Vec<Sample>> = (1..=3)
            .map(|seed| self_play_game(&cfg, &eval, seed).samples)
            .collect();
        games.retain(|g| !g.is_empty());
        assert!(!games.is_empty());
        let mut searcher = Searcher::new(Variant::English);
        let fresh: Vec<Vec<Sample>> = games
            .iter()
            .map(|g| relabel_game(&mut searcher, 2_000, g).unwrap())
            .collect();
        let mut changed = 0;
        for (old, new) in games.iter().zip(&fresh) {
            assert_eq!(old.len(), new.len());
            for (o, n) in old.iter().zip(new) {
                assert_eq!(Sample { score: 0, ..*o }, Sample { score: 0, ..*n });
                changed += usize::from(o.score != n.score);
            }
        }
        assert!(changed > 0, "2,000 nodes score some position unlike 60");
        // The same games in another order, after other searches: the same scores.
        let mut other = Searcher::new(Variant::English);
        other.search(
            &RootState::new(Position::start(Variant::English)),
            &Limits::nodes(5_000),
            |_| {},
        );
        for (g, want) in games.iter().zip(&fresh).rev() {
            assert_eq!(&relabel_game(&mut other, 2_000, g).unwrap(), want);
        }
        // A square held by both sides is no position: the sample is named.
        let mut bad = games[0].clone();
        bad.push(Sample {
            white: bad[0].white | bad[0].black,
            ..bad[0]
        });
        let err = relabel_game(&mut searcher, 100, &bad).unwrap_err();
        assert_eq!(err.index, bad.len() - 1);
        assert!(games_of(&bad).is_some());
        let unmarked: Vec<Sample> = bad
            .iter()
            .map(|s| Sample {
                game_start: false,
                ..*s
            })
            .collect();
        assert_eq!(games_of(&unmarked), None);
    }

    #[test]
    fn games_start_at_each_mark_and_the_first_sample_opens_one() {
        let bounds = |marks: &[bool]| {
            let mut b = GameBounds::default();
            marks.iter().for_each(|m| b.push(*m));
            (b.marked(), b.into_ranges())
        };
        let (t, f) = (true, false);
        assert_eq!(
            bounds(&[t, f, f, t, f, t, f]),
            (true, vec![0..3, 3..5, 5..7])
        );
        assert_eq!(bounds(&[f, f, t, t]), (true, vec![0..2, 2..3, 3..4]));
        let unmarked = bounds(&[f, f]);
        assert!(!unmarked.0 && unmarked.1.len() == 1 && unmarked.1[0] == (0..2));
        assert_eq!(bounds(&[]), (false, vec![]));
    }

    /// Self-play is reproducible from the seed and keeps only quiet positions, labelled with one result.
    #[test]
    fn self_play_is_reproducible_and_quiet() {
        let mut cfg = SelfPlay::new(Variant::English);
        cfg.nodes = 300;
        cfg.max_plies = 120;
        let eval = Evaluator::hand(Variant::English);
        let a = self_play_game(&cfg, &eval, 5);
        let b = self_play_game(&cfg, &eval, 5);
        assert_eq!(a.samples, b.samples);
        assert!(!a.samples.is_empty());
        let result = a.samples[0].result;
        for s in &a.samples {
            assert_eq!(s.result, result);
            let pos = s.position(Variant::English).unwrap();
            assert!(!pos.has_capture(), "{}", pos.to_fen());
            assert!(
                !pos.with_side_to_move(!pos.side_to_move()).has_capture(),
                "{}",
                pos.to_fen()
            );
        }
    }

    /// The games of seeds `0..seeds` under two settings of one variant, side by side: 300 nodes a move,
    /// the hand-set evaluation.
    fn games_of_both(a: &SelfPlay, b: &SelfPlay, seeds: u64) -> Vec<(GameRecord, GameRecord)> {
        let eval = Evaluator::hand(a.variant);
        let (a, b) = (
            SelfPlay {
                nodes: 300,
                ..a.clone()
            },
            SelfPlay {
                nodes: 300,
                ..b.clone()
            },
        );
        (0..seeds)
            .map(|seed| {
                (
                    self_play_game(&a, &eval, seed),
                    self_play_game(&b, &eval, seed),
                )
            })
            .collect()
    }

    /// `Keep::NoCapture` plays the same games and keeps, besides the quiet positions, those where only
    /// the opponent has a capture; the side to move never has one.
    #[test]
    fn keeping_threatened_positions_adds_them_to_the_same_game() {
        let variant = Variant::International;
        let mut quiet = SelfPlay::new(variant);
        quiet.max_plies = 100;
        let all = SelfPlay {
            keep: Keep::NoCapture,
            ..quiet.clone()
        };
        let mut threatened = 0;
        for (q, n) in games_of_both(&quiet, &all, 3) {
            assert_eq!(q.plies, n.plies);
            assert!(n.samples[0].game_start);
            assert_eq!(n.samples.iter().filter(|s| s.game_start).count(), 1);
            let mut kept_quiet = Vec::new();
            for s in &n.samples {
                let pos = s.position(variant).unwrap();
                assert!(!pos.has_capture(), "{}", pos.to_fen());
                if Keep::Quiet.keeps(&pos) {
                    kept_quiet.push(Sample {
                        game_start: kept_quiet.is_empty(),
                        ..*s
                    });
                } else {
                    threatened += 1;
                }
            }
            assert_eq!(kept_quiet, q.samples);
        }
        assert!(threatened > 0);
    }

    /// Adjudication only cuts a game short: the same seed plays the same moves, and with the threshold
    /// out of reach the game goes on to its end.
    #[test]
    fn adjudication_cuts_the_same_game_short() {
        let mut early = SelfPlay::new(Variant::English);
        early.adjudicate = 150;
        let never = SelfPlay {
            adjudicate: i32::MAX,
            ..early.clone()
        };
        let mut cut = 0;
        for (a, b) in games_of_both(&early, &never, 6) {
            assert!(a.plies <= b.plies, "{} > {}", a.plies, b.plies);
            let positions = |r: &GameRecord| -> Vec<(u128, u128, u128, bool, i16)> {
                r.samples
                    .iter()
                    .map(|s| (s.white, s.black, s.kings, s.white_to_move, s.score))
                    .collect()
            };
            assert_eq!(positions(&a), positions(&b)[..a.samples.len()]);
            cut += usize::from(a.plies < b.plies);
        }
        assert!(cut > 0);
    }

    /// Random moves during the game (`random_rate`): the same seed gives the same game again, and the
    /// games leave those played without them.
    #[test]
    fn random_moves_leave_the_searched_game_and_repeat_by_seed() {
        let mut plain = SelfPlay::new(Variant::International);
        plain.max_plies = 60;
        let random = SelfPlay {
            random_rate: 200,
            ..plain.clone()
        };
        let mut left = 0;
        for (p, r) in games_of_both(&plain, &random, 3) {
            left += usize::from(p.samples != r.samples);
        }
        assert!(left > 0, "no game left the searched one");
        let again = games_of_both(&random, &random, 2);
        for (a, b) in again {
            assert_eq!(a.samples, b.samples);
            assert_eq!(a.plies, b.plies);
        }
    }

    /// On data where more men means winning, the fit learns a positive man weight and lowers the loss.
    #[test]
    fn the_fit_learns_material_from_labels() {
        let variant = Variant::English;
        let mut cfg = SelfPlay::new(variant);
        cfg.nodes = 200;
        cfg.max_plies = 100;
        let eval = Evaluator::hand(variant);
        let mut samples = Vec::new();
        for seed in 0..12 {
            samples.extend(self_play_game(&cfg, &eval, seed).samples);
        }
        let init = LearnedWeights::material_only(variant, 0, 0);
        let fit_cfg = FitConfig {
            epochs: 30,
            batch: 256,
            learning_rate: 5.0,
            result_weight: 0.0,
            validation: 0.0,
            ..FitConfig::default()
        };
        let mut losses = Vec::new();
        let (w, _) = fit(variant, &samples, Some(&init), &fit_cfg, |p| {
            losses.push(p.train_loss)
        });
        assert!(
            losses.last().unwrap() < losses.first().unwrap(),
            "{losses:?}"
        );
        let (man_mg, man_eg) = w.dense_weight(0);
        assert!(man_mg + man_eg > 20.0, "man weight {man_mg} {man_eg}");

        // Fixed features keep their starting weights; the rest still learn.
        let fixed_cfg = FitConfig {
            fixed: vec![0, 2],
            ..fit_cfg
        };
        let (f, _) = fit(variant, &samples, Some(&init), &fixed_cfg, |_| {});
        assert_eq!(f.dense_weight(0), (0.0, 0.0));
        assert_eq!(f.dense_weight(2), (0.0, 0.0));
        assert_ne!(f.dense_weight(3), (0.0, 0.0));
    }

    /// Labels follow each variant's own goal: the winner of a decided game is the side ahead by that
    /// variant's measure at its last kept position: more pieces in international, fewer in antidraughts
    /// (whose winner is the side that gets rid of its pieces).
    #[test]
    fn results_follow_the_variants_goal() {
        // Enough games that one unusual game does not decide the share; inverted labels would agree in
        // about a third or fewer. (10 games and 3/4 failed, 7 of 10, when round sixteen changed the
        // search's table; 24 games: antidraughts 17 agree.)
        const GAMES: u64 = 24;
        for (variant, fewer_wins) in [
            (Variant::International, false),
            (Variant::Antidraughts, true),
        ] {
            let mut cfg = SelfPlay::new(variant);
            cfg.nodes = 200;
            cfg.max_plies = 200;
            let eval = Evaluator::hand(variant);
            let (mut decided, mut agree) = (0, 0);
            for seed in 0..GAMES {
                let game = self_play_game(&cfg, &eval, seed);
                let Some(last) = game.samples.last() else {
                    continue;
                };
                if last.result == 1 {
                    continue;
                }
                decided += 1;
                let white = last.white.count_ones() as i32;
                let black = last.black.count_ones() as i32;
                let winner_minus_loser = if last.result == 2 {
                    white - black
                } else {
                    black - white
                };
                agree += i32::from(if fewer_wins {
                    winner_minus_loser < 0
                } else {
                    winner_minus_loser > 0
                });
            }
            assert!(
                decided >= GAMES as i32 / 2,
                "{variant}: only {decided} of {GAMES} games decided"
            );
            assert!(agree * 3 >= decided * 2, "{variant}: {agree} of {decided}");
        }
    }
}
