//! Running one job's search: plain synchronous code over `draughts_ai` (the worker calls it on a blocking
//! thread), no tokio and no store. Also the judgement of played moves, a pure function.
//!
//! Game analysis searches every position of the game once, the start position to the last: the score
//! before ply `i` is the search of position `i` for its mover, the score after it is the negated search
//! of position `i + 1` (the opponent's view), so `n` plies cost `n + 1` searches at the job's per-ply
//! limits and the time is proportional to the plies. When the move played is the engine's best move the
//! loss is 0 by definition (two searches of neighbouring positions may disagree by a few centi-men).
//!
//! Judgement by loss (centi-men, for the mover; a forced win counts 10 000, a forced loss -10 000):
//! below [`INACCURACY_CENTI_MEN`] good, then inaccuracy, from [`MISTAKE_CENTI_MEN`] mistake, from
//! [`BLUNDER_CENTI_MEN`] blunder. A forced move (the only legal one) is good.

use std::time::Duration;

use draughts_ai::{Level, Limits, Rng, RootState, Score, SearchResult, Searcher, StopHandle};
use draughts_engine::{
    Color, Game, GameResult, GameStatus, Move, Position, RuleOptions, RuleSet, Variant,
};
use draughts_proto::convert;

use crate::contract::{
    BestMoveResult, GameResult as GameAnalysis, JobLimits, JobResult, JobSpec, Judgement, Line,
    LineOut, MoveOut, PlyOut, PositionResult, ProgressRec, Rules, ScoreOut, SideSummaryOut,
};

/// Loss from which a move is an inaccuracy, centi-men.
pub const INACCURACY_CENTI_MEN: u32 = 30;
/// Loss from which a move is a mistake, centi-men.
pub const MISTAKE_CENTI_MEN: u32 = 90;
/// Loss from which a move is a blunder, centi-men.
pub const BLUNDER_CENTI_MEN: u32 = 250;
/// What a forced win is worth in a loss computation, centi-men.
pub const WIN_CENTI_MEN: i32 = 10_000;
/// Longest principal variation kept, moves.
pub const MAX_PV: usize = 64;

/// A job that cannot run: its input does not replay (never retried).
#[derive(Debug, thiserror::Error)]
pub enum JobInputError {
    #[error("{0}")]
    Rules(String),
    #[error("bad start position: {0}")]
    Fen(String),
    #[error("move {index} ({text}): {reason}")]
    Move {
        index: usize,
        text: String,
        reason: String,
    },
}

/// The stable text form of a rule set.
pub fn rules_to_contract(rules: RuleSet) -> Rules {
    Rules {
        variant: rules.variant().key().to_owned(),
        options: rules.options().to_string(),
    }
}

/// The rule set of a stable text form.
pub fn rules_from_contract(rules: &Rules) -> Result<RuleSet, JobInputError> {
    let variant: Variant = rules
        .variant
        .parse()
        .map_err(|_| JobInputError::Rules(format!("unknown variant {}", rules.variant)))?;
    let options =
        RuleOptions::parse(&rules.options).map_err(|e| JobInputError::Rules(e.to_string()))?;
    RuleSet::with_options(variant, options).map_err(|e| JobInputError::Rules(e.to_string()))
}

/// Replays a line into a game.
pub fn replay(line: &Line) -> Result<Game, JobInputError> {
    let rules = rules_from_contract(&line.rules)?;
    let start =
        convert::position(rules, &line.fen).map_err(|e| JobInputError::Fen(e.to_string()))?;
    let mut game = Game::new(start);
    for (index, text) in line.moves.iter().enumerate() {
        game.play_text(text).map_err(|e| JobInputError::Move {
            index,
            text: text.clone(),
            reason: e.to_string(),
        })?;
    }
    Ok(game)
}

pub fn move_out(pos: &Position, mv: &Move) -> MoveOut {
    let wire = convert::move_to_wire(pos, mv);
    MoveOut {
        notation: wire.notation,
        from: wire.from,
        to: wire.to,
        path: wire.path,
        captured: wire.captured,
        promotes: wire.promotes,
    }
}

pub fn score_out(score: Score) -> ScoreOut {
    match score {
        Score::CentiMen(c) => ScoreOut::CentiMen(c),
        Score::WinIn(n) => ScoreOut::WinIn(n),
        Score::LossIn(n) => ScoreOut::LossIn(n),
    }
}

/// The same score seen by the other side one ply earlier.
pub fn negate(score: ScoreOut) -> ScoreOut {
    match score {
        ScoreOut::CentiMen(c) => ScoreOut::CentiMen(-c),
        ScoreOut::WinIn(n) => ScoreOut::LossIn(n.saturating_add(1)),
        ScoreOut::LossIn(n) => ScoreOut::WinIn(n.saturating_add(1)),
    }
}

/// A score as centi-men for loss computations (wins and losses at ±[`WIN_CENTI_MEN`]).
pub fn centi_men(score: ScoreOut) -> i32 {
    match score {
        ScoreOut::CentiMen(c) => c.clamp(-WIN_CENTI_MEN, WIN_CENTI_MEN),
        ScoreOut::WinIn(_) => WIN_CENTI_MEN,
        ScoreOut::LossIn(_) => -WIN_CENTI_MEN,
    }
}

/// The judgement of a move that lost `loss` centi-men.
pub fn judge(loss: u32, forced: bool) -> Judgement {
    if forced || loss < INACCURACY_CENTI_MEN {
        Judgement::Good
    } else if loss < MISTAKE_CENTI_MEN {
        Judgement::Inaccuracy
    } else if loss < BLUNDER_CENTI_MEN {
        Judgement::Mistake
    } else {
        Judgement::Blunder
    }
}

fn pv_out(pos: &Position, pv: &[Move]) -> Vec<MoveOut> {
    let mut out = Vec::with_capacity(pv.len().min(MAX_PV));
    let mut at = *pos;
    for mv in pv.iter().take(MAX_PV) {
        if !at.legal_moves().contains(mv) {
            break;
        }
        out.push(move_out(&at, mv));
        at = at.play_unchecked(mv);
    }
    out
}

fn lines_out(pos: &Position, lines: &[draughts_ai::Line]) -> Vec<LineOut> {
    lines
        .iter()
        .map(|l| LineOut {
            score: score_out(l.score),
            pv: pv_out(pos, &l.pv),
        })
        .collect()
}

/// The engine limits of a job, capped at `cap` of wall time.
pub fn limits(job: &JobLimits, cap: Duration) -> Limits {
    let time = job
        .movetime_ms
        .map(Duration::from_millis)
        .map_or(cap, |t| t.min(cap));
    Limits {
        depth: job.depth,
        nodes: job.nodes,
        time: Some(time),
        multipv: job.multi_pv.max(1) as usize,
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Runs one job to its result. `on_progress` is called after every finished depth (position) or ply
/// (game); `time_cap` bounds each search. A stopped search (cancel, shutdown) returns what it had;
/// the caller checks the stop flag to know the result is not to be kept.
pub fn run(
    spec: &JobSpec,
    searcher: &mut Searcher,
    stop: &StopHandle,
    time_cap: Duration,
    mut on_progress: impl FnMut(ProgressRec),
) -> Result<JobResult, JobInputError> {
    match spec {
        JobSpec::Position { line, limits: l } => {
            let game = replay(line)?;
            let root = RootState::from_game(&game);
            let pos = root.position;
            let mut seq = 0;
            let result = searcher.search(&root, &limits(l, time_cap), |info| {
                seq += 1;
                on_progress(ProgressRec {
                    seq,
                    depth: info.depth,
                    nodes: info.nodes,
                    lines: lines_out(&pos, &info.lines),
                    ..ProgressRec::default()
                });
            });
            Ok(JobResult::Position(PositionResult {
                fen: pos.to_fen(),
                lines: lines_out(&pos, &result.lines),
                depth: result.depth,
                seldepth: result.seldepth,
                nodes: result.nodes,
                elapsed_ms: ms(result.elapsed),
            }))
        }
        JobSpec::Game {
            line,
            limits: l,
            game_id,
        } => game(
            line,
            l,
            game_id.clone(),
            searcher,
            stop,
            time_cap,
            on_progress,
        ),
        JobSpec::BestMove {
            line,
            level,
            limits: l,
            clock_cap_ms,
            seed,
        } => {
            let game = replay(line)?;
            let root = RootState::from_game(&game);
            let cap = clock_cap_ms.map_or(time_cap, |c| time_cap.min(Duration::from_millis(c)));
            best_move(&root, *level, l.as_ref(), *seed, cap, searcher).map(JobResult::BestMove)
        }
    }
}

fn best_move(
    root: &RootState,
    level: Option<u8>,
    job_limits: Option<&JobLimits>,
    seed: u64,
    cap: Duration,
    searcher: &mut Searcher,
) -> Result<BestMoveResult, JobInputError> {
    let pos = root.position;
    let moves = pos.legal_moves();
    let no_move = || JobInputError::Move {
        index: 0,
        text: String::new(),
        reason: "the side to move has no legal move".into(),
    };
    if moves.len() == 1 {
        return Ok(BestMoveResult {
            mv: move_out(&pos, &moves[0]),
            score: None,
            depth: 0,
            nodes: 0,
            search_ms: 0,
        });
    }
    let started = std::time::Instant::now();
    match level.and_then(|n| Level::for_variant(n, pos.variant())) {
        Some(mut lvl) => {
            lvl.time = Some(lvl.time.map_or(cap, |t| t.min(cap)));
            let seed = if seed == 0 { rand::random() } else { seed };
            let mut rng = Rng::new(seed);
            let (mv, raw) = lvl.choose_scored(searcher, root, &mut rng);
            let mv = mv.ok_or_else(no_move)?;
            Ok(BestMoveResult {
                mv: move_out(&pos, &mv),
                score: raw.map(|r| score_out(Score::from_internal(r))),
                depth: lvl.depth.unwrap_or(0),
                nodes: 0,
                search_ms: ms(started.elapsed()),
            })
        }
        None => {
            let l = job_limits.cloned().unwrap_or_default();
            let result: SearchResult = searcher.search(root, &limits(&l, cap), |_| {});
            let mv = result.best.ok_or_else(no_move)?;
            Ok(BestMoveResult {
                mv: move_out(&pos, &mv),
                score: result.score().map(score_out),
                depth: result.depth,
                nodes: result.nodes,
                search_ms: ms(result.elapsed),
            })
        }
    }
}

fn side_name(c: Color) -> &'static str {
    match c {
        Color::White => "white",
        Color::Black => "black",
    }
}

/// One searched position of a game: its mover's score, best move and PV (none when the game is over).
struct Searched {
    score: ScoreOut,
    best: Option<Move>,
    pv: Vec<Move>,
    depth: u32,
    nodes: u64,
}

fn search_at(game: &Game, l: &Limits, searcher: &mut Searcher) -> Searched {
    let root = RootState::from_game(game);
    match game.status() {
        GameStatus::Ongoing => {}
        // Game over: no pieces or no moves is lost for the side to move; a draw is level.
        GameStatus::Finished(result) => {
            let score = match result {
                GameResult::Win { winner, .. } if winner == root.position.side_to_move() => {
                    ScoreOut::WinIn(0)
                }
                GameResult::Win { .. } => ScoreOut::LossIn(0),
                GameResult::Draw(_) => ScoreOut::CentiMen(0),
            };
            return Searched {
                score,
                best: None,
                pv: Vec::new(),
                depth: 0,
                nodes: 0,
            };
        }
    }
    let result = searcher.search(&root, l, |_| {});
    Searched {
        score: result.score().map_or(ScoreOut::CentiMen(0), score_out),
        best: result.best,
        pv: result
            .lines
            .first()
            .map(|l| l.pv.clone())
            .unwrap_or_default(),
        depth: result.depth,
        nodes: result.nodes,
    }
}

#[allow(clippy::too_many_arguments)]
fn game(
    line: &Line,
    job_limits: &JobLimits,
    game_id: Option<String>,
    searcher: &mut Searcher,
    stop: &StopHandle,
    time_cap: Duration,
    mut on_progress: impl FnMut(ProgressRec),
) -> Result<JobResult, JobInputError> {
    let full = replay(line)?;
    let mut per_ply = limits(job_limits, time_cap);
    per_ply.multipv = 1;
    let mut game = Game::new(*full.start_position());
    let total = u32::try_from(full.moves().len()).unwrap_or(u32::MAX);
    let mut plies: Vec<PlyOut> = Vec::with_capacity(full.moves().len());
    let mut nodes = 0u64;
    let mut before = search_at(&game, &per_ply, searcher);
    nodes += before.nodes;
    for (i, mv) in full.moves().iter().enumerate() {
        if stop.is_stopped() {
            break;
        }
        let pos = *game.position();
        let forced = pos.legal_moves().len() == 1;
        game.play(mv).map_err(|e| JobInputError::Move {
            index: i,
            text: pos.move_to_text(mv),
            reason: e.to_string(),
        })?;
        let after = search_at(&game, &per_ply, searcher);
        nodes += after.nodes;
        let played_best = before.best == Some(*mv);
        let score_after = if played_best {
            before.score
        } else {
            negate(after.score)
        };
        let loss = (centi_men(before.score) - centi_men(score_after)).max(0) as u32;
        plies.push(PlyOut {
            ply: u32::try_from(i + 1).unwrap_or(u32::MAX),
            side: side_name(pos.side_to_move()).into(),
            played: move_out(&pos, mv),
            best: before.best.map(|b| move_out(&pos, &b)),
            score_before: Some(before.score),
            score_after: Some(score_after),
            loss_centi_men: loss,
            judgement: judge(loss, forced),
            pv: pv_out(&pos, &before.pv),
            depth: before.depth,
            nodes: before.nodes,
        });
        on_progress(ProgressRec {
            seq: plies.len() as u64,
            depth: before.depth,
            nodes,
            lines: Vec::new(),
            plies: plies.clone(),
            plies_total: total,
        });
        before = after;
    }
    Ok(JobResult::Game(GameAnalysis {
        rules: line.rules.clone(),
        start_fen: full.start_position().to_fen(),
        summary: summary(&plies),
        plies,
        game_id,
    }))
}

/// White's and Black's totals.
pub fn summary(plies: &[PlyOut]) -> Vec<SideSummaryOut> {
    ["white", "black"]
        .into_iter()
        .map(|side| {
            let mine: Vec<&PlyOut> = plies.iter().filter(|p| p.side == side).collect();
            let count = |j: Judgement| mine.iter().filter(|p| p.judgement == j).count() as u32;
            let total_loss: u64 = mine.iter().map(|p| u64::from(p.loss_centi_men)).sum();
            SideSummaryOut {
                side: side.into(),
                moves: mine.len() as u32,
                inaccuracies: count(Judgement::Inaccuracy),
                mistakes: count(Judgement::Mistake),
                blunders: count(Judgement::Blunder),
                average_loss_centi_men: if mine.is_empty() {
                    0
                } else {
                    (total_loss / mine.len() as u64) as u32
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judgement_thresholds() {
        let check = |loss, forced, expected| assert_eq!(judge(loss, forced), expected, "{loss}");
        check(0, false, Judgement::Good);
        check(29, false, Judgement::Good);
        check(30, false, Judgement::Inaccuracy);
        check(89, false, Judgement::Inaccuracy);
        check(90, false, Judgement::Mistake);
        check(249, false, Judgement::Mistake);
        check(250, false, Judgement::Blunder);
        check(20_000, true, Judgement::Good);
    }

    #[test]
    fn negation_moves_a_mate_one_ply() {
        assert_eq!(negate(ScoreOut::LossIn(3)), ScoreOut::WinIn(4));
        assert_eq!(negate(ScoreOut::CentiMen(-40)), ScoreOut::CentiMen(40));
        assert_eq!(centi_men(ScoreOut::WinIn(9)), WIN_CENTI_MEN);
        assert_eq!(centi_men(ScoreOut::CentiMen(-99_999)), -WIN_CENTI_MEN);
    }

    #[test]
    fn a_hung_piece_is_a_blunder_and_the_summary_counts_it() {
        // English: white to move; 22-18?? lets black take (14x23 is forced and wins a man); 22-17 is fine.
        let line = Line {
            rules: Rules {
                variant: "english".into(),
                options: String::new(),
            },
            fen: "W:W22,30:B14,3".into(),
            moves: vec!["22-18".into(), "14x23".into()],
        };
        let spec = JobSpec::Game {
            line,
            limits: JobLimits {
                depth: Some(8),
                multi_pv: 1,
                ..JobLimits::default()
            },
            game_id: None,
        };
        let mut searcher = Searcher::new(Variant::English);
        let stop = searcher.stop_handle();
        let mut updates = 0;
        let JobResult::Game(result) =
            run(&spec, &mut searcher, &stop, Duration::from_secs(10), |p| {
                updates += 1;
                assert_eq!(p.plies.len(), updates);
            })
            .unwrap()
        else {
            panic!("a game result")
        };
        assert_eq!(updates, 2, "one progress update per ply");
        assert_eq!(result.plies.len(), 2);
        let first = &result.plies[0];
        assert_eq!(first.played.notation, "22-18");
        assert_eq!(first.judgement, Judgement::Blunder, "{first:?}");
        assert!(first.loss_centi_men >= BLUNDER_CENTI_MEN);
        assert_eq!(
            result.plies[1].judgement,
            Judgement::Good,
            "the capture was forced"
        );
        assert_eq!(result.summary[0].blunders, 1);
        assert_eq!(result.summary[1].blunders, 0);
    }

    #[test]
    fn bad_moves_name_their_index() {
        let line = Line {
            rules: Rules {
                variant: "english".into(),
                options: String::new(),
            },
            fen: String::new(),
            moves: vec!["11-15".into(), "11-15".into()],
        };
        let err = replay(&line).unwrap_err();
        assert!(matches!(err, JobInputError::Move { index: 1, .. }), "{err}");
    }
}
