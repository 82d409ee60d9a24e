//! Iterative deepening principal variation search.
//!
//! - Negamax alpha-beta with a null window for every move after the first (PVS), aspiration windows at the
//!   root, late move reductions for quiet moves, and a one-ply extension when a side has a single legal
//!   move (forced captures).
//! - Quiescence: at depth 0 a position where the side to move can capture is searched on, capture by
//!   capture, so the search never stops in the middle of an exchange; captures are forced, so there is no
//!   "stand pat" unless the `no-mandatory-capture` option is on.
//! - Move ordering: the transposition-table move, captures (most pieces first), promotions, two killers
//!   per ply, then the history table.
//! - Draw rules: a position repeated since the last capture or man move is a draw (one repetition is
//!   enough inside the search), and so is the variant's no-progress count running out; the evaluation
//!   knows the lone-king endings.
//! - Selectivity ([`Selectivity`]): the threat search (a quiet position at the horizon where the opponent
//!   threatens a capture is searched one ply further), deeper late move reductions and ProbCut-style
//!   pruning at non-PV nodes (a shallow null-window search that fails high far above beta ends the node),
//!   each on by default after winning its match.
//! - Limits: depth, nodes, time, any combination, plus a cancel flag read every 1024 nodes. A time limit is
//!   used to its end: a depth cut short by a limit still gives its result once its first move (the previous
//!   depth's best) has been searched, since every move it then prefers was searched in full. With a depth
//!   or node limit only, the result is deterministic (same position, same fresh [`Searcher`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use draughts_engine::{Color, Count, Game, Goal, Move, Position, ProgressReset, RuleSet, Variant};

use crate::bitbase::{Bitbases, Shelf, Value};
use crate::eval::Evaluator;
use crate::nnue::AccumulatorStack;
use crate::tt::{Bound, Tt, signature};

/// A won position scores `WIN - plies to the win`; a lost one the negation.
pub const WIN: i32 = 30_000;
/// Scores beyond this (in absolute value) are wins or losses in a known number of plies.
pub const WIN_THRESHOLD: i32 = WIN - 1_000;
const INF: i32 = 31_000;
/// The least depth at which a PV node tests its table move for a singular extension.
const SINGULAR_DEPTH: i32 = 8;
/// A position the bitbases call won scores `BITBASE_WIN` plus its evaluation (clamped to
/// `±BITBASE_SPREAD`), so the search still heads for captures and promotions inside a won ending; a
/// lost one the negation; both below the forced wins the search finds itself (`WIN_THRESHOLD`).
pub const BITBASE_WIN: i32 = 20_000;
const BITBASE_SPREAD: i32 = 2_000;
/// The deepest ply the search goes (extensions and quiescence included).
pub const MAX_PLY: usize = 120;
const MAX_DEPTH: u32 = 100;
const CHECK_EVERY: u64 = 1024;

/// A search score as users read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Score {
    /// An evaluation in centi-men (100 = one man), for the side to move.
    CentiMen(i32),
    /// The side to move wins in this many plies.
    WinIn(u32),
    /// The side to move loses in this many plies.
    LossIn(u32),
}

impl Score {
    /// Converts an internal score.
    pub fn from_internal(score: i32) -> Score {
        if score > WIN_THRESHOLD {
            Score::WinIn((WIN - score) as u32)
        } else if score < -WIN_THRESHOLD {
            Score::LossIn((WIN + score) as u32)
        } else {
            Score::CentiMen(score)
        }
    }

    /// In men, as the Hub protocol wants it (wins as +/- 100 minus a little per ply).
    pub fn men(&self) -> f64 {
        match *self {
            Score::CentiMen(c) => f64::from(c) / 100.0,
            Score::WinIn(n) => 100.0 - f64::from(n) / 100.0,
            Score::LossIn(n) => -100.0 + f64::from(n) / 100.0,
        }
    }
}

impl std::fmt::Display for Score {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Score::CentiMen(c) => write!(f, "{:+.2}", f64::from(*c) / 100.0),
            Score::WinIn(n) => write!(f, "win in {n} plies"),
            Score::LossIn(n) => write!(f, "loss in {n} plies"),
        }
    }
}

/// When to stop searching. Unset limits do not apply; with none at all the search runs to
/// the maximum depth or until cancelled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub depth: Option<u32>,
    pub nodes: Option<u64>,
    pub time: Option<Duration>,
    /// Number of best lines to report (at least 1).
    pub multipv: usize,
}

impl Limits {
    pub fn depth(depth: u32) -> Limits {
        Limits {
            depth: Some(depth),
            ..Limits::default()
        }
    }
    pub fn nodes(nodes: u64) -> Limits {
        Limits {
            nodes: Some(nodes),
            ..Limits::default()
        }
    }
    pub fn time(time: Duration) -> Limits {
        Limits {
            time: Some(time),
            ..Limits::default()
        }
    }
}

/// What the search starts from: the position plus what the draw rules need from the game so far.
#[derive(Clone, Debug)]
pub struct RootState {
    pub position: Position,
    /// Hashes of the earlier positions since the last capture or man move, oldest first.
    pub history: Vec<u64>,
    /// Plies already counted toward the variant's no-progress draw.
    pub no_progress_plies: u32,
}

impl RootState {
    /// A position with no history.
    pub fn new(position: Position) -> RootState {
        RootState {
            position,
            history: Vec::new(),
            no_progress_plies: 0,
        }
    }

    /// The current position of a game, with its repetition history and no-progress count.
    pub fn from_game(game: &Game) -> RootState {
        let mut pos = *game.start_position();
        let mut history = Vec::new();
        for mv in game.moves() {
            history.push(pos.hash());
            if mv.is_capture() || !mv.is_king_move() {
                history.clear();
            }
            pos = pos.play_unchecked(mv);
        }
        RootState {
            position: pos,
            history,
            no_progress_plies: game.no_progress_plies(),
        }
    }
}

/// One finished line of one depth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub score: Score,
    /// The internal score (centi-men, or `±(WIN - plies)`).
    pub raw: i32,
    pub pv: Vec<Move>,
}

/// Progress after each finished depth (sent to the caller's callback).
#[derive(Clone, Debug)]
pub struct Info {
    pub depth: u32,
    /// The deepest ply reached.
    pub seldepth: u32,
    /// Best first; `multipv` lines at most.
    pub lines: Vec<Line>,
    pub nodes: u64,
    pub elapsed: Duration,
}

impl Info {
    /// Nodes per second.
    pub fn nps(&self) -> f64 {
        self.nodes as f64 / self.elapsed.as_secs_f64().max(1e-6)
    }
}

/// The outcome of a search.
#[derive(Clone, Debug)]
pub struct SearchResult {
    /// The best move; `None` only when the side to move has no legal move.
    pub best: Option<Move>,
    /// The expected answer, if known.
    pub ponder: Option<Move>,
    /// The lines of the last finished depth (empty if none finished, or no move).
    pub lines: Vec<Line>,
    pub depth: u32,
    pub seldepth: u32,
    pub nodes: u64,
    pub elapsed: Duration,
    /// Whether the search stopped on a limit or cancel before its maximum depth.
    pub stopped: bool,
}

impl SearchResult {
    pub fn score(&self) -> Option<Score> {
        self.lines.first().map(|l| l.score)
    }
    pub fn nps(&self) -> f64 {
        self.nodes as f64 / self.elapsed.as_secs_f64().max(1e-6)
    }
}

/// Options of a searcher.
#[derive(Clone, Debug)]
pub struct SearchOptions {
    /// Transposition table size in MiB.
    pub tt_megabytes: usize,
    /// Keep only these bits of the position hash as the table key (tests: force collisions).
    pub tt_key_mask: u64,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            tt_megabytes: 16,
            tt_key_mask: !0,
        }
    }
}

/// The selective parts of the search, each a number so that a match can compare settings (`draughts match
/// --a 8::probcut=0`). [`Selectivity::default`] is the measured best; [`Selectivity::classic`] is the search
/// of round one (no ProbCut, the old reductions, no threat search), kept for comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selectivity {
    /// ProbCut-style pruning at non-PV nodes of at least `probcut_min_depth` plies: a null-window search of
    /// the same position to `depth * probcut_percent / 100` plies (at least one) against `beta +
    /// probcut_margin * depth` that fails high ends the node with its score less the margin (fail-soft).
    /// Nothing is pruned this way inside that shallow search itself. Round two's form also tested
    /// `alpha - margin` and pruned inside its shallow searches; it showed no gain and is gone.
    /// 0 turns it off (breakthrough's and frysk's defaults, [`Selectivity::for_variant`]).
    pub probcut_margin: i32,
    pub probcut_min_depth: i32,
    pub probcut_percent: i32,
    /// Late move reductions: 0 none; 1 round one's (one ply from the fourth quiet move at depth 3+, two from
    /// the ninth at depth 5+); 2 deeper (one ply from the third move, two at non-PV nodes from the fifth
    /// at depth 4+); 3 Scan 2.0's numbers (at non-PV nodes one ply from the second move, two from the
    /// seventh; at PV nodes one from the fourth).
    pub lmr: u8,
    /// Singular extensions at PV nodes of at least 8 plies (`singular=M`, 0 off): when the table holds a
    /// lower bound (or exact score) S for its move from at least 4 plies less deep, and every other move
    /// fails low against `S - M` at 4 plies less, the table's move is searched one ply deeper.
    pub singular: i32,
    /// Move-ordering history: 0 adds depth² to a quiet move that cuts off; 1 also takes depth² from the
    /// quiet moves searched before it, each update pulled toward zero by the value it already has; 2 is
    /// Scan 2.0's kind, no killers and one "probability" per move: a quiet move that raised alpha moves
    /// 1/64 of the way toward 1, each quiet move searched before it 1/64 toward 0 (`history=0|1|2`).
    pub history: u8,
    /// Quiescence looks one quiet ply further where the opponent threatens a capture (`threats=0|1`).
    pub threats: bool,
    /// Aspiration windows at the root from depth 5 (`asp`): the search starts `asp` centi-men either side of
    /// the previous depth's score and widens (doubling) on a fail; 0 searches every depth with a full window.
    /// Off in turkish's defaults ([`Selectivity::for_variant`]).
    pub aspiration: i32,
    /// Quiescence, at its first quiet node when no kings are on the board, also tries the quiet moves
    /// that offer the opponent a capture (exchanges and shots), each answered by captures only, against
    /// the evaluation as a floor (`exchanges=0|1`).
    pub exchanges: bool,
    /// The evaluation scales down leads that material says are hard to convert (`drawish=0|1`, see
    /// [`Evaluator::set_drawish`]); on in international's defaults ([`Selectivity::for_variant`]).
    pub drawish: bool,
    /// The table also stores the best move of a node that failed low (every move an upper bound), as
    /// every search did until round sixteen (`fail_low_move=0|1`). Off by default since then: that move is
    /// the least bad of upper bounds, and trying it first next time cost about a fifth more nodes to a
    /// depth and +55 ± 31 Elo at 100,000 nodes (docs/ai.md "Round sixteen"); on in [`Selectivity::classic`].
    pub fail_low_move: bool,
    /// Orders the captures of a node that must capture (after the table's move and by size, as always)
    /// by a history of their own: depth² to a capture that cut off (`capture_history=0|1`). Captures of
    /// the same size are otherwise tried in generation order.
    pub capture_history: bool,
}

impl Default for Selectivity {
    fn default() -> Self {
        Selectivity {
            probcut_margin: 5,
            probcut_min_depth: 3,
            probcut_percent: 40,
            lmr: 2,
            singular: 0,
            history: 0,
            threats: true,
            aspiration: 10,
            drawish: false,
            exchanges: false,
            fail_low_move: false,
            capture_history: false,
        }
    }
}

impl Selectivity {
    /// The measured best for a variant: [`Selectivity::default`], except turkish, which searches without
    /// aspiration windows (they lost there: -45 ± 45 over 200 games at 30,000 nodes, docs/ai.md "Round
    /// eight"; why was not measured), international, which scales drawish material (+16 ± 13 over
    /// 1,014 games at 30,000 nodes, docs/ai.md "Round nine"; not measured in the other variants), and
    /// breakthrough and frysk, which search without ProbCut (breakthrough +131 ± 52 over 200 games at 30,000
    /// nodes and +115 ± 51 over 200 others at 100,000; frysk +56 ± 24 over 400 at 30,000; docs/ai.md "Round
    /// twelve": a race to the first king, and frysk's five men a side, are decided by quiet moves that a
    /// reduced-depth search does not see through).
    pub fn for_variant(variant: Variant) -> Selectivity {
        let mut s = Selectivity::default();
        match variant {
            Variant::Turkish => s.aspiration = 0,
            Variant::International => s.drawish = true,
            Variant::Breakthrough | Variant::Frysk => s.probcut_margin = 0,
            _ => {}
        }
        s
    }

    /// Round one's search: no ProbCut, the old reductions, no threat search.
    pub fn classic() -> Selectivity {
        Selectivity {
            probcut_margin: 0,
            probcut_min_depth: 3,
            probcut_percent: 40,
            lmr: 1,
            singular: 0,
            history: 0,
            threats: false,
            aspiration: 0,
            drawish: false,
            exchanges: false,
            fail_low_move: true,
            capture_history: false,
        }
    }

    /// Applies `key=value` settings separated by commas (`probcut=0,lmr=1`; `classic` resets to
    /// [`Selectivity::classic`]). Keys: `probcut` (margin per ply), `probcut_depth`, `probcut_percent`, `lmr`
    /// (0-3), `singular` (margin), `history` (0-2), `threats`, `asp` (window), `exchanges`, `drawish`,
    /// `fail_low_move`, `capture_history` (0/1);
    /// each field's documentation says what it does.
    pub fn parse_into(&mut self, text: &str) -> Result<(), String> {
        for item in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            if item == "classic" {
                *self = Selectivity::classic();
                continue;
            }
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("'{item}' is not key=value"))?;
            let v: i32 = value
                .trim()
                .parse()
                .map_err(|_| format!("'{value}' is not a number"))?;
            match key.trim() {
                "probcut" => self.probcut_margin = v.max(0),
                "probcut_depth" => self.probcut_min_depth = v.max(1),
                "probcut_percent" => self.probcut_percent = v.clamp(0, 90),
                "lmr" => self.lmr = v.clamp(0, 3) as u8,
                "singular" => self.singular = v.max(0),
                "history" => self.history = v.clamp(0, 2) as u8,
                "threats" => self.threats = v != 0,
                "asp" => self.aspiration = v.max(0),
                "drawish" => self.drawish = v != 0,
                "exchanges" => self.exchanges = v != 0,
                "fail_low_move" => self.fail_low_move = v != 0,
                "capture_history" => self.capture_history = v != 0,
                other => return Err(format!("unknown search setting '{other}'")),
            }
        }
        Ok(())
    }
}

/// A cancel flag shared with other threads: `stop()` ends the running search within a few milliseconds.
#[derive(Clone, Debug, Default)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    pub fn reset(&self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// Killer moves, history and move lists: the searcher's scratch state.
#[derive(Debug)]
pub struct Searcher {
    tt: Tt,
    eval: Evaluator,
    /// The network's accumulators by ply (unused unless the evaluator plays a network).
    nnue_stack: AccumulatorStack,
    stop: StopHandle,
    /// Two quiet moves per ply that caused a cutoff, as move signatures (0: none).
    killers: Vec<[u32; 2]>,
    history: Vec<i32>,
    /// `capture_history=1`: depth² for each capture (origin, destination) that cut off.
    capture_history: Vec<i32>,
    lists: Vec<Vec<Move>>,
    scores: Vec<Vec<i32>>,
    /// Hashes of the root history and the current path (the position at `ply` is at `base + ply`).
    stack: Vec<u64>,
    /// For each ply: plies since the last capture or man move (repetition window).
    reversible: Vec<u32>,
    /// For each ply: plies toward the no-progress draw.
    no_progress: Vec<u32>,
    pv: Vec<Vec<Move>>,
    base: usize,
    nodes: u64,
    seldepth: u32,
    node_limit: u64,
    deadline: Option<Instant>,
    aborted: bool,
    rules: RuleSet,
    /// Plies of the no-progress draw (0: none), and what resets the count.
    no_progress_limit: u32,
    reset_on_man_move: bool,
    repetition: bool,
    mandatory: bool,
    /// Antidraughts: a side without a legal move has WON (docs/rules.md §9.2).
    no_move_wins: bool,
    root_excluded: Vec<Move>,
    selectivity: Selectivity,
    /// Settings given by [`Searcher::set_selectivity`]; without them each root's variant takes its own
    /// defaults ([`Selectivity::for_variant`]).
    selectivity_set: bool,
    /// Inside a ProbCut shallow search (no ProbCut there).
    in_probcut: bool,
    /// Endgame tables, probed at nodes of at most `bitbase_pieces` pieces (0: none loaded, or the root
    /// itself is in the tables); `table_pieces` is what the loaded tables cover for the root's rules.
    bitbases: Option<Arc<Bitbases>>,
    /// Tables of every variant: each root's variant takes its own (see [`Searcher::set_shelf`]).
    shelf: Option<Arc<Shelf>>,
    bitbase_pieces: u32,
    table_pieces: u32,
    bitbase_hits: u64,
}

impl Searcher {
    /// The rules it searches under.
    pub fn rules(&self) -> RuleSet {
        self.rules
    }

    pub fn new(rules: impl Into<RuleSet>) -> Searcher {
        Searcher::with_options(rules, &SearchOptions::default())
    }

    pub fn with_options(rules: impl Into<RuleSet>, options: &SearchOptions) -> Searcher {
        let rules = rules.into();
        let mut s = Searcher {
            tt: Tt::with_key_mask(options.tt_megabytes, options.tt_key_mask),
            eval: Evaluator::new(rules.variant()),
            nnue_stack: AccumulatorStack::default(),
            stop: StopHandle::default(),
            killers: vec![[0; 2]; MAX_PLY + 2],
            history: vec![0; 64 * 64],
            capture_history: vec![0; 64 * 64],
            lists: (0..MAX_PLY + 2).map(|_| Vec::with_capacity(64)).collect(),
            scores: (0..MAX_PLY + 2).map(|_| Vec::with_capacity(64)).collect(),
            stack: Vec::with_capacity(512),
            reversible: vec![0; MAX_PLY + 2],
            no_progress: vec![0; MAX_PLY + 2],
            pv: (0..MAX_PLY + 2)
                .map(|_| Vec::with_capacity(MAX_PLY))
                .collect(),
            base: 0,
            nodes: 0,
            seldepth: 0,
            node_limit: u64::MAX,
            deadline: None,
            aborted: false,
            rules,
            no_progress_limit: 0,
            reset_on_man_move: true,
            repetition: true,
            mandatory: true,
            no_move_wins: false,
            root_excluded: Vec::new(),
            selectivity: Selectivity::for_variant(rules.variant()),
            selectivity_set: false,
            in_probcut: false,
            bitbases: None,
            shelf: None,
            bitbase_pieces: 0,
            table_pieces: 0,
            bitbase_hits: 0,
        };
        s.eval.set_drawish(s.selectivity.drawish);
        s.set_rules(rules);
        s
    }

    fn set_rules(&mut self, rules: RuleSet) {
        if self.eval.variant() != rules.variant() {
            if !self.selectivity_set {
                self.selectivity = Selectivity::for_variant(rules.variant());
            }
            self.eval = Evaluator::new(rules.variant());
            self.eval.set_drawish(self.selectivity.drawish);
            self.nnue_stack.clear();
            self.tt.clear();
        }
        if let Some(shelf) = &self.shelf
            && self.bitbases.as_ref().map(|b| b.variant()) != Some(rules.variant())
        {
            self.bitbases = shelf.get(rules.variant());
        }
        self.rules = rules;
        self.table_pieces = match &self.bitbases {
            // Tables are per variant and assume the variant's own rules (no house options).
            Some(b) if rules == RuleSet::new(b.variant()) => b.pieces(),
            _ => 0,
        };
        self.bitbase_pieces = self.table_pieces;
        let draw = rules.draw_rules();
        self.no_progress_limit = draw.no_progress.map_or(0, |np| 2 * u32::from(np.moves));
        self.reset_on_man_move = draw
            .no_progress
            .is_none_or(|np| np.reset == ProgressReset::CaptureOrManMove);
        self.repetition = true;
        self.mandatory = rules.mandatory_capture();
        self.no_move_wins = rules.rules().goal == Goal::Lose;
    }

    /// The flag that cancels this searcher's searches (clone it to another thread).
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// Searches with another evaluation from now on (for its variant; a root of another variant brings
    /// back that variant's default). Forgets the transposition table.
    pub fn set_evaluator(&mut self, eval: Evaluator) {
        self.eval = eval;
        self.eval.set_drawish(self.selectivity.drawish);
        self.nnue_stack.clear();
        self.tt.clear();
    }

    /// Probes these endgame tables from now on (`None`: none). Tables of another variant than the root's,
    /// or a root with house-rule options, are not probed.
    pub fn set_bitbases(&mut self, bitbases: Option<Arc<Bitbases>>) {
        self.bitbases = bitbases;
        self.tt.clear();
        self.set_rules(self.rules);
    }

    /// Probes the tables of each root's variant from this shelf from now on (`None`: none).
    pub fn set_shelf(&mut self, shelf: Option<Arc<Shelf>>) {
        let tables = shelf.as_ref().and_then(|s| s.get(self.rules.variant()));
        self.shelf = shelf;
        self.set_bitbases(tables);
    }

    /// The shelf given by [`Searcher::set_shelf`], if any.
    pub fn shelf(&self) -> Option<&Arc<Shelf>> {
        self.shelf.as_ref()
    }

    /// Nodes answered by the endgame tables in the last search.
    pub fn bitbase_hits(&self) -> u64 {
        self.bitbase_hits
    }

    /// Keeps the root moves whose child has the best value in the tables for the mover.
    fn keep_best_by_tables(&mut self, pos: &Position, moves: &mut Vec<Move>) {
        let Some(tables) = self.bitbases.clone() else {
            return;
        };
        let rank = |v: Option<Value>| match v.map(Value::flip) {
            Some(Value::Win) => 2,
            Some(Value::Draw) => 1,
            _ => 0,
        };
        let ranks: Vec<u8> = moves
            .iter()
            .map(|m| rank(tables.probe(&pos.play_unchecked(m))))
            .collect();
        if let Some(&best) = ranks.iter().max() {
            let mut i = 0;
            moves.retain(|_| {
                i += 1;
                ranks[i - 1] == best
            });
            self.bitbase_hits += ranks.len() as u64;
        }
    }

    /// The bitbase score of a position of few enough pieces (see [`BITBASE_WIN`]).
    #[inline]
    fn probe_bitbase(&mut self, pos: &Position) -> Option<i32> {
        if pieces_of(pos) > self.bitbase_pieces {
            return None;
        }
        let value = self.bitbases.as_ref()?.probe(pos)?;
        self.bitbase_hits += 1;
        let eval = || {
            self.eval
                .evaluate(pos)
                .clamp(-BITBASE_SPREAD, BITBASE_SPREAD)
        };
        Some(match value {
            Value::Draw => 0,
            Value::Win => BITBASE_WIN + eval(),
            Value::Loss => -BITBASE_WIN + eval(),
        })
    }

    /// Searches with these selectivity settings from now on, whatever the variant (start from
    /// [`Selectivity::for_variant`] to change one setting of a variant's defaults).
    pub fn set_selectivity(&mut self, selectivity: Selectivity) {
        self.selectivity = selectivity;
        self.selectivity_set = true;
        self.eval.set_drawish(selectivity.drawish);
    }

    /// The selectivity settings in use.
    pub fn selectivity(&self) -> Selectivity {
        self.selectivity
    }

    /// The evaluation in use.
    pub fn evaluator(&self) -> &Evaluator {
        &self.eval
    }

    /// Forgets the transposition table, killers and history (a new game; makes searches reproducible).
    pub fn clear(&mut self) {
        self.tt.clear();
        self.history.iter_mut().for_each(|h| *h = 0);
        self.capture_history.iter_mut().for_each(|h| *h = 0);
        self.killers.iter_mut().for_each(|k| *k = [0; 2]);
    }

    /// Searches a root until a limit; `on_info` is called after every finished depth.
    pub fn search(
        &mut self,
        root: &RootState,
        limits: &Limits,
        mut on_info: impl FnMut(&Info),
    ) -> SearchResult {
        let start = Instant::now();
        self.set_rules(root.position.rule_set());
        self.tt.new_search();
        self.history.iter_mut().for_each(|h| *h /= 8);
        self.capture_history.iter_mut().for_each(|h| *h /= 8);
        self.killers.iter_mut().for_each(|k| *k = [0; 2]);
        self.nodes = 0;
        self.bitbase_hits = 0;
        self.seldepth = 0;
        self.aborted = false;
        self.node_limit = limits.nodes.unwrap_or(u64::MAX).max(1);
        self.deadline = limits.time.map(|t| start + t);
        self.stack.clear();
        self.stack.extend_from_slice(&root.history);
        self.base = self.stack.len();
        self.stack.push(root.position.hash());
        self.reversible[0] = root.history.len() as u32;
        self.no_progress[0] = root.no_progress_plies;

        let pos = root.position;
        let mut root_moves = Vec::new();
        pos.legal_moves_into(&mut root_moves, Count::Unique);
        self.bitbase_pieces = self.table_pieces;
        if self.table_pieces > 0 && pieces_of(&pos) <= self.table_pieces {
            // The root is in the tables: keep the moves that keep its value and let the plain search
            // choose among them. Probing inside would cut every node at once and leave only the static
            // evaluation to make progress (won endings then ran into the no-progress draw).
            self.bitbase_pieces = 0;
            self.keep_best_by_tables(&pos, &mut root_moves);
        }
        let mut result = SearchResult {
            best: root_moves.first().copied(),
            ponder: None,
            lines: Vec::new(),
            depth: 0,
            seldepth: 0,
            nodes: 0,
            elapsed: Duration::ZERO,
            stopped: false,
        };
        if root_moves.is_empty() {
            let (score, raw) = if self.no_move_wins {
                (Score::WinIn(0), WIN)
            } else {
                (Score::LossIn(0), -WIN)
            };
            result.lines.push(Line {
                score,
                raw,
                pv: Vec::new(),
            });
            return result;
        }
        let multipv = limits.multipv.clamp(1, root_moves.len());
        let max_depth = limits.depth.unwrap_or(MAX_DEPTH).clamp(1, MAX_DEPTH);
        // Root moves in the order of the previous depth's scores.
        let mut order: Vec<(Move, i32)> = root_moves.iter().map(|m| (*m, 0)).collect();

        for depth in 1..=max_depth {
            let mut lines: Vec<Line> = Vec::new();
            self.root_excluded.clear();
            for _ in 0..multipv {
                let score = if multipv == 1
                    && self.selectivity.aspiration > 0
                    && depth >= 5
                    && order[0].1.abs() < BITBASE_WIN
                {
                    self.root_aspiration(&pos, depth as i32, &mut order)
                } else {
                    self.root(&pos, depth as i32, &order, -INF, INF)
                };
                // A depth cut short by a limit still counts with one line when its first move (the
                // previous depth's best) finished: every move it then prefers was searched in full.
                let partial = self.aborted && multipv == 1 && !self.pv[0].is_empty();
                if self.aborted && !partial {
                    break;
                }
                let pv = self.pv[0].clone();
                let Some(first) = pv.first().copied() else {
                    break;
                };
                self.root_excluded.push(first);
                lines.push(Line {
                    score: Score::from_internal(score),
                    raw: score,
                    pv,
                });
            }
            if self.aborted {
                // A partial depth counts only for lines that finished (multi-PV keeps earlier lines).
                if lines.is_empty() || lines.len() < multipv {
                    break;
                }
            }
            // Best first: with pruning, a later line's search (its better moves excluded) can come out
            // higher than an earlier one's.
            lines.sort_by_key(|l| std::cmp::Reverse(l.raw));
            // Next depth: the lines first, in their order, then the rest as before.
            let mut next: Vec<(Move, i32)> = lines.iter().map(|l| (l.pv[0], l.raw)).collect();
            let rest: Vec<(Move, i32)> = order
                .iter()
                .filter(|(m, _)| !lines.iter().any(|l| l.pv[0] == *m))
                .copied()
                .collect();
            next.extend(rest);
            order = next;
            result.best = Some(lines[0].pv[0]);
            result.ponder = lines[0].pv.get(1).copied();
            result.lines = lines;
            result.depth = depth;
            result.seldepth = self.seldepth;
            let info = Info {
                depth,
                seldepth: self.seldepth,
                lines: result.lines.clone(),
                nodes: self.nodes,
                elapsed: start.elapsed(),
            };
            on_info(&info);
            if self.aborted {
                break;
            }
            // A forced win or loss found at full width needs no deeper search.
            if multipv == 1 && result.lines[0].raw.abs() > WIN_THRESHOLD {
                let plies = (WIN - result.lines[0].raw.abs()) as u32;
                if plies < depth {
                    break;
                }
            }
            if root_moves.len() == 1 && limits.depth.is_none() && limits.nodes.is_none() {
                break;
            }
            // Time: the search uses all of it (a depth cut short still counts, see above).
            if let Some(deadline) = self.deadline
                && Instant::now() >= deadline
            {
                self.aborted = true;
                break;
            }
        }
        result.stopped = self.aborted;
        result.nodes = self.nodes;
        result.elapsed = start.elapsed();
        result
    }

    /// Root searches in a window around the previous depth's score (`order[0]`), widened on each fail
    /// (the failing side by a doubling margin) until the score falls inside; a fail high moves its move
    /// to the front first.
    fn root_aspiration(&mut self, pos: &Position, depth: i32, order: &mut [(Move, i32)]) -> i32 {
        let mut delta = self.selectivity.aspiration;
        let previous = order[0].1;
        let (mut low, mut high) = (previous - delta, previous + delta);
        loop {
            let score = self.root(pos, depth, order, low, high);
            if self.aborted {
                return score;
            }
            delta = delta.saturating_mul(2);
            if score <= low {
                low = if delta > 500 {
                    -INF
                } else {
                    (score - delta).max(-INF)
                };
            } else if score >= high {
                if let Some(first) = self.pv[0].first()
                    && let Some(i) = order.iter().position(|(m, _)| m == first)
                {
                    order[..=i].rotate_right(1);
                }
                high = if delta > 500 {
                    INF
                } else {
                    (score + delta).min(INF)
                };
            } else {
                return score;
            }
        }
    }

    /// One root search at `depth` in the window `(alpha, beta)` (excluding `root_excluded`), leaving the
    /// PV in `pv[0]`.
    fn root(
        &mut self,
        pos: &Position,
        depth: i32,
        order: &[(Move, i32)],
        alpha: i32,
        beta: i32,
    ) -> i32 {
        let original_alpha = alpha;
        let mut alpha = alpha;
        self.pv[0].clear();
        let moves: Vec<Move> = order
            .iter()
            .map(|(m, _)| *m)
            .filter(|m| !self.root_excluded.contains(m))
            .collect();
        let single = order.len() == 1;
        let hash = pos.hash();
        let mut best = -INF;
        let mut best_move = None;
        for (i, mv) in moves.iter().enumerate() {
            let child = pos.play_unchecked(mv);
            self.push(mv, &child, 0, true);
            let ext = i32::from(single);
            let score = if i == 0 {
                -self.alpha_beta(&child, depth - 1 + ext, -beta, -alpha, 1, true)
            } else {
                let s = -self.alpha_beta(&child, depth - 1 + ext, -alpha - 1, -alpha, 1, false);
                if s > alpha && !self.aborted {
                    -self.alpha_beta(&child, depth - 1 + ext, -beta, -alpha, 1, true)
                } else {
                    s
                }
            };
            self.stack.pop();
            if self.aborted {
                break;
            }
            if score > best {
                best = score;
                best_move = Some(*mv);
                if score > alpha {
                    alpha = score;
                    self.set_pv(0, *mv);
                    if score >= beta {
                        break;
                    }
                }
            }
        }
        if !self.aborted && self.root_excluded.is_empty() {
            let sig = best_move.map_or(0, |m| signature(&m));
            let bound = Bound::of(best, original_alpha, beta);
            self.tt.store(hash, sig, to_tt(best, 0), depth, bound);
        }
        best
    }

    #[inline]
    fn set_pv(&mut self, ply: usize, mv: Move) {
        let (head, tail) = self.pv.split_at_mut(ply + 1);
        let line = &mut head[ply];
        line.clear();
        line.push(mv);
        line.extend_from_slice(&tail[0]);
    }

    /// Records the move from ply `ply` to `ply + 1` for the draw rules (and the child's hash, if its
    /// search will read it).
    #[inline]
    fn push(&mut self, mv: &Move, child: &Position, ply: usize, needs_hash: bool) {
        self.stack.push(if needs_hash { child.hash() } else { 0 });
        let irreversible = mv.is_capture() || !mv.is_king_move();
        self.reversible[ply + 1] = if irreversible {
            0
        } else {
            self.reversible[ply] + 1
        };
        let reset = if self.reset_on_man_move {
            irreversible
        } else {
            mv.is_capture() || mv.promotes()
        };
        self.no_progress[ply + 1] = if reset { 0 } else { self.no_progress[ply] + 1 };
    }

    /// Whether the position at `ply` is drawn by the rules (repetition or no progress).
    #[inline]
    fn is_rule_draw(&self, ply: usize) -> bool {
        if self.no_progress_limit > 0 && self.no_progress[ply] >= self.no_progress_limit {
            return true;
        }
        if self.repetition {
            let top = self.base + ply;
            let hash = self.stack[top];
            let window = self.reversible[ply] as usize;
            let mut back = 4;
            while back <= window && back <= top {
                if self.stack[top - back] == hash {
                    return true;
                }
                back += 2;
            }
        }
        false
    }

    #[inline]
    fn check_limits(&mut self) {
        if self.nodes >= self.node_limit {
            self.aborted = true;
            return;
        }
        if self.nodes.is_multiple_of(CHECK_EVERY) {
            if self.stop.is_stopped() {
                self.aborted = true;
            } else if let Some(d) = self.deadline
                && Instant::now() >= d
            {
                self.aborted = true;
            }
        }
    }

    fn alpha_beta(
        &mut self,
        pos: &Position,
        depth: i32,
        mut alpha: i32,
        mut beta: i32,
        ply: usize,
        pv_node: bool,
    ) -> i32 {
        self.pv[ply].clear();
        if depth <= 0 || ply >= MAX_PLY {
            return self.quiesce(pos, alpha, beta, ply, self.selectivity.threats);
        }
        self.nodes += 1;
        self.check_limits();
        if self.aborted {
            return 0;
        }
        if ply as u32 > self.seldepth {
            self.seldepth = ply as u32;
        }
        if self.is_rule_draw(ply) {
            return 0;
        }
        // Mate distance pruning.
        alpha = alpha.max(-WIN + ply as i32);
        beta = beta.min(WIN - ply as i32 - 1);
        if alpha >= beta {
            return alpha;
        }
        if self.bitbase_pieces > 0
            && let Some(score) = self.probe_bitbase(pos)
        {
            return score;
        }

        let hash = self.stack[self.base + ply];
        let mut tt_move = 0;
        // The table's lower bound that may make its move singular (PV nodes only).
        let mut singular_score = None;
        if let Some(e) = self.tt.probe(hash) {
            tt_move = e.mv;
            if pv_node
                && self.selectivity.singular > 0
                && depth >= SINGULAR_DEPTH
                && i32::from(e.depth) >= depth - 4
                && e.bound != Bound::Upper
                && i32::from(e.score).abs() < WIN_THRESHOLD
            {
                singular_score = Some(from_tt(i32::from(e.score), ply));
            }
            if !pv_node && i32::from(e.depth) >= depth {
                let s = from_tt(i32::from(e.score), ply);
                let cut = match e.bound {
                    Bound::Exact => true,
                    Bound::Lower => s >= beta,
                    Bound::Upper => s <= alpha,
                };
                if cut {
                    return s;
                }
            }
        }

        // ProbCut: a shallow null-window search far outside the window predicts the full one.
        let sel = self.selectivity;
        if !pv_node
            && !self.in_probcut
            && sel.probcut_margin > 0
            && depth >= sel.probcut_min_depth
            && beta.abs() < WIN_THRESHOLD
        {
            let margin = sel.probcut_margin * depth;
            let shallow = (depth * sel.probcut_percent / 100).max(1);
            let high = beta + margin;
            if high < WIN_THRESHOLD {
                self.in_probcut = true;
                let s = self.alpha_beta(pos, shallow, high - 1, high, ply, false);
                self.in_probcut = false;
                if self.aborted {
                    return 0;
                }
                if s >= high {
                    // A forced win it found stands as it is.
                    return if s > WIN_THRESHOLD { s } else { s - margin };
                }
            }
        }

        let mut list = std::mem::take(&mut self.lists[ply]);
        let mut scores = std::mem::take(&mut self.scores[ply]);
        pos.legal_moves_into(&mut list, Count::Unique);
        if list.is_empty() {
            self.lists[ply] = list;
            self.scores[ply] = scores;
            return self.no_move_score(ply);
        }
        self.score_moves(&list, &mut scores, tt_move, ply);
        let quiet_node = !list[0].is_capture();
        let ext = i32::from(list.len() == 1 && ply < MAX_PLY / 2);
        // Singular extension: the table's move (ordered first) one ply deeper when every other move
        // fails low well below its score.
        let mut first_ext = ext;
        if let Some(s) = singular_score
            && ext == 0
            && ply < MAX_PLY / 2
            && tt_move != 0
        {
            pick(&mut list, &mut scores, 0);
            if signature(&list[0]) == tt_move
                && self.only_move_holds(pos, &list[1..], depth - 4, s - sel.singular, ply)
            {
                first_ext = 1;
            }
            if self.aborted {
                self.lists[ply] = list;
                self.scores[ply] = scores;
                return 0;
            }
        }

        let original_alpha = alpha;
        let mut best = -INF;
        let mut best_move = None;
        let mut best_index = 0;
        let n = list.len();
        for i in 0..n {
            pick(&mut list, &mut scores, i);
            let mv = list[i];
            let child = pos.play_unchecked(&mv);
            let new_depth = depth - 1 + if i == 0 { first_ext } else { ext };
            // A child searched at depth 0 goes straight to quiescence, which reads no hash (no table,
            // no repetition) and pushes no children: it gets a placeholder instead of a computed hash.
            self.push(&mv, &child, ply, new_depth > 0 && ply + 1 < MAX_PLY);
            let mut score;
            if i == 0 {
                score = -self.alpha_beta(&child, new_depth, -beta, -alpha, ply + 1, pv_node);
            } else {
                // Late quiet moves are searched shallower first.
                let mut reduction = 0;
                if quiet_node && depth >= 3 && !mv.promotes() && scores[i] < KILLER_2 {
                    reduction = match sel.lmr {
                        3 if !pv_node && i >= 1 => 1 + i32::from(i >= 6),
                        3 if pv_node && i >= 3 => 1,
                        1 if i >= 3 => 1 + i32::from(i >= 8 && depth >= 5),
                        2 if i >= 2 => {
                            1 + i32::from(if pv_node {
                                i >= 8 && depth >= 5
                            } else {
                                i >= 4 && depth >= 4
                            })
                        }
                        _ => 0,
                    };
                }
                score = -self.alpha_beta(
                    &child,
                    new_depth - reduction,
                    -alpha - 1,
                    -alpha,
                    ply + 1,
                    false,
                );
                if score > alpha && reduction > 0 && !self.aborted {
                    score = -self.alpha_beta(&child, new_depth, -alpha - 1, -alpha, ply + 1, false);
                }
                if score > alpha && score < beta && pv_node && !self.aborted {
                    score = -self.alpha_beta(&child, new_depth, -beta, -alpha, ply + 1, true);
                }
            }
            self.stack.pop();
            if self.aborted {
                break;
            }
            if score > best {
                best = score;
                best_move = Some(mv);
                best_index = i;
                if score > alpha {
                    alpha = score;
                    if pv_node {
                        self.set_pv(ply, mv);
                    }
                    if score >= beta {
                        if mv.is_capture() {
                            if sel.capture_history {
                                let h = &mut self.capture_history[history_index(&mv)];
                                *h = (*h + depth * depth).min(1 << 20);
                            }
                        } else {
                            self.reward(&mv, depth, ply);
                            if sel.history == 1 {
                                // The quiet moves tried before it (a capture node has none).
                                for earlier in &list[..i] {
                                    history_update(
                                        &mut self.history[history_index(earlier)],
                                        -depth * depth,
                                    );
                                }
                            }
                        }
                        break;
                    }
                }
            }
        }
        if sel.history == 2 && quiet_node && best > original_alpha && !self.aborted {
            // The moves before the best were searched in this order (each picked in turn).
            for (i, mv) in list[..=best_index].iter().enumerate() {
                let h = &mut self.history[history_index(mv)];
                if i == best_index {
                    *h += (PROB_HALF - *h) >> PROB_SHIFT;
                } else {
                    *h -= (*h + PROB_HALF) >> PROB_SHIFT;
                }
            }
        }
        self.lists[ply] = list;
        self.scores[ply] = scores;
        if self.aborted {
            return 0;
        }
        let bound = Bound::of(best, original_alpha, beta);
        // A node that failed low has no best move worth trying first next time (its "best" is the least
        // bad of scores that are all upper bounds): unless `fail_low_move`, the table keeps what it had.
        let sig = if best > original_alpha || sel.fail_low_move {
            best_move.map_or(0, |m| signature(&m))
        } else {
            0
        };
        self.tt.store(hash, sig, to_tt(best, ply), depth, bound);
        best
    }

    /// Whether every move of `others` fails low against `bound` when searched `depth` plies deep at a
    /// null window (the singular test: the moves other than the table's).
    fn only_move_holds(
        &mut self,
        pos: &Position,
        others: &[Move],
        depth: i32,
        bound: i32,
        ply: usize,
    ) -> bool {
        for mv in others {
            let child = pos.play_unchecked(mv);
            self.push(mv, &child, ply, depth > 1 && ply + 1 < MAX_PLY);
            let s = -self.alpha_beta(&child, depth - 1, -bound - 1, -bound, ply + 1, false);
            self.stack.pop();
            if self.aborted || s > bound {
                return false;
            }
        }
        true
    }

    fn reward(&mut self, mv: &Move, depth: i32, ply: usize) {
        if self.selectivity.history == 2 {
            // Updated once the node is done (see `alpha_beta`); no killers.
            return;
        }
        let sig = signature(mv);
        let k = &mut self.killers[ply];
        if k[0] != sig {
            k[1] = k[0];
            k[0] = sig;
        }
        let h = &mut self.history[history_index(mv)];
        if self.selectivity.history == 1 {
            history_update(h, depth * depth);
        } else {
            *h = (*h + depth * depth).min(1 << 20);
        }
    }

    fn score_moves(&self, list: &[Move], scores: &mut Vec<i32>, tt_move: u32, ply: usize) {
        scores.clear();
        let killers = self.killers[ply];
        for mv in list {
            // Signatures are never 0, so an empty table move or killer matches nothing.
            let sig = signature(mv);
            let s = if sig == tt_move {
                TT_MOVE
            } else if mv.is_capture() {
                if self.selectivity.capture_history {
                    // Size first, then promotion, then this history (at most 2^20).
                    CAPTURE
                        + ((mv.n_captured() as i32).min(63) << 22)
                        + (i32::from(mv.promotes()) << 21)
                        + self.capture_history[history_index(mv)]
                } else {
                    CAPTURE + mv.n_captured() as i32 * 1000 + i32::from(mv.promotes()) * 500
                }
            } else if mv.promotes() {
                PROMOTION
            } else if sig == killers[0] {
                KILLER_1
            } else if sig == killers[1] {
                KILLER_2
            } else {
                self.history[history_index(mv)]
            };
            scores.push(s);
        }
    }

    /// The score of a side to move without a legal move, `ply` plies from the root: a loss, or in
    /// antidraughts a win.
    #[inline]
    fn no_move_score(&self, ply: usize) -> i32 {
        if self.no_move_wins {
            WIN - ply as i32
        } else {
            -WIN + ply as i32
        }
    }

    /// Plays out captures. With `threats`, a quiet position where the opponent could capture if it were
    /// their move is searched one ply further (every move, then captures only), so a piece left hanging
    /// at the horizon is seen.
    fn quiesce(
        &mut self,
        pos: &Position,
        mut alpha: i32,
        beta: i32,
        ply: usize,
        threats: bool,
    ) -> i32 {
        self.nodes += 1;
        self.check_limits();
        if self.aborted {
            return 0;
        }
        if ply as u32 > self.seldepth {
            self.seldepth = ply as u32;
        }
        if ply >= MAX_PLY {
            return self.eval.evaluate_at(pos, &mut self.nnue_stack, ply);
        }
        if self.bitbase_pieces > 0
            && let Some(score) = self.probe_bitbase(pos)
        {
            return score;
        }
        if !pos.has_capture() {
            // A side with no capture and no move (every piece blocked) has lost (in antidraughts: won).
            if pos.count_quiet_moves() == 0 {
                return self.no_move_score(ply);
            }
            if threats
                && self.mandatory
                && ply + 1 < MAX_PLY
                && pos.with_side_to_move(!pos.side_to_move()).has_capture()
            {
                return self.quiet_threat(pos, alpha, beta, ply);
            }
            if threats
                && self.selectivity.exchanges
                && self.mandatory
                && ply + 2 < MAX_PLY
                && pos.kings().is_empty()
            {
                return self.exchanges(pos, alpha, beta, ply);
            }
            return self.eval.evaluate_at(pos, &mut self.nnue_stack, ply);
        }
        let mut best = -INF;
        if !self.mandatory {
            best = self.eval.evaluate_at(pos, &mut self.nnue_stack, ply);
            if best >= beta {
                return best;
            }
            alpha = alpha.max(best);
        }
        let mut list = std::mem::take(&mut self.lists[ply]);
        let mut scores = std::mem::take(&mut self.scores[ply]);
        pos.legal_moves_into(&mut list, Count::Unique);
        scores.clear();
        scores.extend(
            list.iter()
                .map(|m| m.n_captured() as i32 * 16 + i32::from(m.promotes())),
        );
        for i in 0..list.len() {
            pick(&mut list, &mut scores, i);
            let mv = list[i];
            if !mv.is_capture() {
                continue;
            }
            let child = pos.play_unchecked(&mv);
            let score = -self.quiesce(&child, -beta, -alpha, ply + 1, false);
            if self.aborted {
                break;
            }
            if score > best {
                best = score;
                if score > alpha {
                    alpha = score;
                    if score >= beta {
                        break;
                    }
                }
            }
        }
        self.lists[ply] = list;
        self.scores[ply] = scores;
        best
    }
}

impl Searcher {
    /// A quiet position's evaluation, or better: a quiet move that gives the opponent a capture, answered
    /// by captures only (the exchange played out).
    fn exchanges(&mut self, pos: &Position, alpha: i32, beta: i32, ply: usize) -> i32 {
        let floor = self.eval.evaluate_at(pos, &mut self.nnue_stack, ply);
        if floor >= beta {
            return floor;
        }
        self.one_quiet_ply(pos, floor, alpha, beta, ply, true)
    }

    /// One ply of every quiet move from a threatened position, each answered by quiescence.
    fn quiet_threat(&mut self, pos: &Position, alpha: i32, beta: i32, ply: usize) -> i32 {
        self.one_quiet_ply(pos, -INF, alpha, beta, ply, false)
    }

    /// The best of `floor` and the moves of `pos` (with `offering`, only those after which the opponent
    /// can capture), each answered by quiescence without further quiet plies.
    fn one_quiet_ply(
        &mut self,
        pos: &Position,
        floor: i32,
        mut alpha: i32,
        beta: i32,
        ply: usize,
        offering: bool,
    ) -> i32 {
        let mut best = floor;
        alpha = alpha.max(best);
        let mut list = std::mem::take(&mut self.lists[ply]);
        pos.legal_moves_into(&mut list, Count::Unique);
        for mv in &list {
            let child = pos.play_unchecked(mv);
            if offering && !child.has_capture() {
                continue;
            }
            let score = -self.quiesce(&child, -beta, -alpha, ply + 1, false);
            if self.aborted {
                break;
            }
            if score > best {
                best = score;
                if score > alpha {
                    alpha = score;
                    if score >= beta {
                        break;
                    }
                }
            }
        }
        self.lists[ply] = list;
        best
    }
}

const TT_MOVE: i32 = 1 << 30;
const CAPTURE: i32 = 1 << 29;
const PROMOTION: i32 = 1 << 28;
const KILLER_1: i32 = (1 << 27) + 1;
const KILLER_2: i32 = 1 << 27;

/// `history=2`: a probability of 1/2 is stored as 0, 1 as `PROB_HALF`, 0 as `-PROB_HALF` (so that a
/// zeroed table is all halves); each update moves 1/2^`PROB_SHIFT` of the way.
const PROB_HALF: i32 = 1 << 11;
const PROB_SHIFT: i32 = 6;

/// The bound of the history values of `history=1`, far below [`KILLER_2`].
const HISTORY_MAX: i32 = 1 << 14;

/// Adds `bonus` (either sign) to a history value of `history=1`, less the share of it the value already
/// holds, so values stay within ±[`HISTORY_MAX`] and recent results weigh more.
#[inline]
fn history_update(h: &mut i32, bonus: i32) {
    let b = bonus.clamp(-HISTORY_MAX, HISTORY_MAX);
    *h += b - *h * b.abs() / HISTORY_MAX;
}

#[inline]
fn history_index(mv: &Move) -> usize {
    (mv.from().bit() as usize & 63) * 64 + (mv.to().bit() as usize & 63)
}

/// Moves the best-scored move of `i..` to `i`.
#[inline]
fn pick(list: &mut [Move], scores: &mut [i32], i: usize) {
    let mut best = i;
    for j in i + 1..list.len() {
        if scores[j] > scores[best] {
            best = j;
        }
    }
    list.swap(i, best);
    scores.swap(i, best);
}

/// Pieces on the board.
#[inline]
fn pieces_of(pos: &Position) -> u32 {
    (pos.pieces(Color::White).0 | pos.pieces(Color::Black).0).count_ones()
}

fn to_tt(score: i32, ply: usize) -> i32 {
    if score > WIN_THRESHOLD {
        score + ply as i32
    } else if score < -WIN_THRESHOLD {
        score - ply as i32
    } else {
        score
    }
}

fn from_tt(score: i32, ply: usize) -> i32 {
    if score > WIN_THRESHOLD {
        score - ply as i32
    } else if score < -WIN_THRESHOLD {
        score + ply as i32
    } else {
        score
    }
}

/// Searches one position with a fresh searcher (convenience for tools and tests).
pub fn search_position(root: &RootState, limits: &Limits) -> SearchResult {
    let mut s = Searcher::new(root.position.rule_set());
    s.search(root, limits, |_| {})
}
