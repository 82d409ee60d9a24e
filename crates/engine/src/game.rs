//! A game: the position, its history, the draw rules in force and the result.

use crate::position::{Move, Position, PositionError};
use crate::variant::{Color, EndgameRule, Goal, ProgressReset, RuleSet, Variant};
use crate::{Fen, ResolveError};

/// Why a game was won.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WinReason {
    /// The loser has no pieces left.
    NoPieces,
    /// The loser, to move, has no legal move.
    NoMoves,
    Resignation,
    /// The loser's clock ran out (set by the referee).
    Time,
    /// Antidraughts: the WINNER, to move, has no pieces left (docs/rules.md §9.2).
    GaveAwayAllPieces,
    /// Antidraughts: the WINNER, to move, has no legal move (docs/rules.md §9.2).
    GaveAwayAllMoves,
    /// Breakthrough: the winner crowned the first king (docs/rules.md §9.3).
    FirstKing,
}

/// Why a game was drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DrawReason {
    /// The same position with the same side to move occurred three times.
    Repetition,
    /// `moves` moves by each side without progress (the variant's rule or `move-limit`).
    NoProgress {
        moves: u16,
    },
    /// FMJD endgame rule: `moves` moves by each side in a won-looking but drawn ending.
    Endgame {
        moves: u16,
    },
    Agreement,
}

/// A finished game's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GameResult {
    Win { winner: Color, reason: WinReason },
    Draw(DrawReason),
}

impl GameResult {
    /// The winner, or `None` for a draw.
    pub fn winner(&self) -> Option<Color> {
        match self {
            GameResult::Win { winner, .. } => Some(*winner),
            GameResult::Draw(_) => None,
        }
    }

    /// The result as the variant writes it (`2-0` in international, `1-0` in english: docs/rules.md §5.5);
    /// see [`Variant::result_text`].
    pub fn result_text(&self, variant: Variant) -> &'static str {
        variant.result_text(self.winner())
    }

    /// A short English explanation: `white wins: black has no legal move`.
    pub fn describe(&self) -> String {
        match self {
            GameResult::Win { winner, reason } => {
                let loser = winner.opposite().name();
                let why = match reason {
                    WinReason::NoPieces => format!("{loser} has no pieces left"),
                    WinReason::NoMoves => format!("{loser} has no legal move"),
                    WinReason::Resignation => format!("{loser} resigned"),
                    WinReason::Time => format!("{loser} ran out of time"),
                    WinReason::GaveAwayAllPieces => {
                        format!("{} has no pieces left (antidraughts)", winner.name())
                    }
                    WinReason::GaveAwayAllMoves => {
                        format!("{} has no legal move (antidraughts)", winner.name())
                    }
                    WinReason::FirstKing => format!("{} crowned the first king", winner.name()),
                };
                format!("{} wins: {why}", winner.name())
            }
            GameResult::Draw(reason) => {
                let why = match reason {
                    DrawReason::Repetition => "threefold repetition".to_string(),
                    DrawReason::NoProgress { moves } => {
                        format!("{moves} moves by each side without progress")
                    }
                    DrawReason::Endgame { moves } => {
                        format!("endgame rule, {moves} moves by each side")
                    }
                    DrawReason::Agreement => "agreed".to_string(),
                };
                format!("draw: {why}")
            }
        }
    }
}

/// Ongoing or finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GameStatus {
    Ongoing,
    Finished(GameResult),
}

/// Why a game action was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GameError {
    #[error("the game is over")]
    GameOver,
    #[error("illegal move in this position")]
    Illegal,
    #[error(transparent)]
    Move(#[from] ResolveError),
    #[error(transparent)]
    Position(#[from] PositionError),
}

/// A game from a start position: moves, the draw-rule counters and the result.
#[derive(Clone, Debug)]
pub struct Game {
    start: Position,
    position: Position,
    moves: Vec<Move>,
    /// Positions since the last irreversible move (capture or man move), current one last.
    since_irreversible: Vec<Position>,
    /// Plies counted toward the no-progress rule.
    no_progress_plies: u32,
    /// The endgame class (limit in moves) and plies spent in it.
    endgame: Option<(u16, u32)>,
    status: GameStatus,
}

impl Game {
    /// A game from a position (its FEN counters are not known: the no-progress count starts at zero).
    pub fn new(start: Position) -> Game {
        let mut g = Game {
            start,
            position: start,
            moves: Vec::new(),
            since_irreversible: vec![start],
            no_progress_plies: 0,
            endgame: None,
            status: GameStatus::Ongoing,
        };
        g.endgame = g.endgame_class().map(|limit| (limit, 0));
        g.status = g.evaluate();
        g
    }

    /// A game from a FEN; a lidraughts `:H` counter seeds the no-progress count.
    pub fn from_fen(rules: impl Into<RuleSet>, fen: &str) -> Result<Game, GameError> {
        let parsed: Fen = fen.parse().map_err(PositionError::from)?;
        let pos = Position::from_parsed_fen(&parsed, rules.into())?;
        let mut g = Game::new(pos);
        if let Some(h) = parsed.halfmove {
            g.no_progress_plies = h.min(10_000);
            if g.status == GameStatus::Ongoing {
                g.status = g.evaluate();
            }
        }
        Ok(g)
    }

    pub fn start_position(&self) -> &Position {
        &self.start
    }
    pub fn position(&self) -> &Position {
        &self.position
    }
    pub fn moves(&self) -> &[Move] {
        &self.moves
    }
    pub fn status(&self) -> GameStatus {
        self.status
    }
    pub fn rule_set(&self) -> RuleSet {
        self.position.rule_set()
    }
    /// Plies counted so far toward the no-progress draw.
    pub fn no_progress_plies(&self) -> u32 {
        self.no_progress_plies
    }

    /// Plays a legal move.
    pub fn play(&mut self, mv: &Move) -> Result<GameStatus, GameError> {
        if self.status != GameStatus::Ongoing {
            return Err(GameError::GameOver);
        }
        let next = self.position.play(mv).map_err(|_| GameError::Illegal)?;
        let rules = self.rule_set().draw_rules();
        let reset = match rules.no_progress.map(|p| p.reset) {
            Some(ProgressReset::CaptureOrPromotion) => mv.is_capture() || mv.promotes(),
            _ => mv.is_capture() || !mv.is_king_move(),
        };
        self.no_progress_plies = if reset { 0 } else { self.no_progress_plies + 1 };
        if mv.is_capture() || !mv.is_king_move() {
            self.since_irreversible.clear();
        }
        self.since_irreversible.push(next);
        self.position = next;
        self.moves.push(*mv);
        let class = self.endgame_class();
        self.endgame = match (class, self.endgame) {
            (Some(limit), Some((old, plies))) if old == limit => Some((limit, plies + 1)),
            (Some(limit), _) => Some((limit, 0)),
            (None, _) => None,
        };
        self.status = self.evaluate();
        Ok(self.status)
    }

    /// Resolves and plays a move text.
    pub fn play_text(&mut self, text: &str) -> Result<GameStatus, GameError> {
        if self.status != GameStatus::Ongoing {
            return Err(GameError::GameOver);
        }
        let mv = self.position.parse_move(text)?;
        self.play(&mv)
    }

    /// Ends the game by resignation of `color`.
    pub fn resign(&mut self, color: Color) -> Result<GameResult, GameError> {
        self.finish(GameResult::Win {
            winner: color.opposite(),
            reason: WinReason::Resignation,
        })
    }

    /// Ends the game as a draw agreed by both players.
    pub fn agree_draw(&mut self) -> Result<GameResult, GameError> {
        self.finish(GameResult::Draw(DrawReason::Agreement))
    }

    /// Ends the game because `color`'s time ran out.
    pub fn time_forfeit(&mut self, color: Color) -> Result<GameResult, GameError> {
        self.finish(GameResult::Win {
            winner: color.opposite(),
            reason: WinReason::Time,
        })
    }

    fn finish(&mut self, result: GameResult) -> Result<GameResult, GameError> {
        if self.status != GameStatus::Ongoing {
            return Err(GameError::GameOver);
        }
        self.status = GameStatus::Finished(result);
        Ok(result)
    }

    /// Endgame classes. FMJD (docs/rules.md §4.3): a lone king against at most three pieces including
    /// a king; the limit in moves per side is 16 for three pieces, 5 for one or two. Frisian (§11.6): only
    /// kings, two against one (7 moves each) or one against one (2 moves each).
    fn endgame_class(&self) -> Option<u16> {
        let p = &self.position;
        match self.rule_set().draw_rules().endgame {
            EndgameRule::None => return None,
            EndgameRule::Frisian => {
                let (wm, wk) = p.material(Color::White);
                let (bm, bk) = p.material(Color::Black);
                return match (wm + bm, wk, bk) {
                    (0, 1, 1) => Some(2),
                    (0, 2, 1) | (0, 1, 2) => Some(7),
                    _ => None,
                };
            }
            EndgameRule::Fmjd => {}
        }
        let class = |strong: Color| -> Option<u16> {
            let (wm, wk) = p.material(strong.opposite());
            let (sm, sk) = p.material(strong);
            if wm != 0 || wk != 1 || sk == 0 {
                return None;
            }
            match sm + sk {
                3 => Some(16),
                1 | 2 => Some(5),
                _ => None,
            }
        };
        class(Color::White).or_else(|| class(Color::Black))
    }

    fn evaluate(&self) -> GameStatus {
        let pos = &self.position;
        let side = pos.side_to_move();
        let goal = self.rule_set().rules().goal;
        let win = |winner: Color, reason: WinReason| {
            GameStatus::Finished(GameResult::Win { winner, reason })
        };
        if goal == Goal::FirstKing && !(pos.pieces(side.opposite()) & pos.kings()).is_empty() {
            return win(side.opposite(), WinReason::FirstKing);
        }
        if pos.pieces(side).is_empty() {
            return match goal {
                Goal::Lose => win(side, WinReason::GaveAwayAllPieces),
                _ => win(side.opposite(), WinReason::NoPieces),
            };
        }
        if pos.legal_moves().is_empty() {
            return match goal {
                Goal::Lose => win(side, WinReason::GaveAwayAllMoves),
                _ => win(side.opposite(), WinReason::NoMoves),
            };
        }
        let rules = self.rule_set().draw_rules();
        if rules.repetition {
            let n = self.since_irreversible.iter().filter(|q| *q == pos).count();
            if n >= 3 {
                return GameStatus::Finished(GameResult::Draw(DrawReason::Repetition));
            }
        }
        if let Some((limit, plies)) = self.endgame
            && plies >= 2 * u32::from(limit)
        {
            return GameStatus::Finished(GameResult::Draw(DrawReason::Endgame { moves: limit }));
        }
        if let Some(np) = rules.no_progress
            && self.no_progress_plies >= 2 * u32::from(np.moves)
        {
            return GameStatus::Finished(GameResult::Draw(DrawReason::NoProgress {
                moves: np.moves,
            }));
        }
        GameStatus::Ongoing
    }
}
