//! Static evaluation: the learned pattern evaluation ([`crate::learned`]) where a variant ships weights
//! (`data/weights/<variant>.drw`; [`shipped`] lists them), else one hand-set weight table per variant.
//!
//! Scores are in centi-men from the side to move's point of view (hand-set: a man is worth
//! [`Weights::man`] = 100; learned: the fit's scale, about 220 for a man with all men on the board and 60 in
//! the endgame). The drawn-ending rule (a lone king against too few pieces) applies to both.
//! Every number the evaluation uses lives in a [`Weights`] table (one `static` per variant), so tuning means
//! editing data, not code. The board-shape tables (rows, centre, back row, forward neighbours) are built
//! once per board from the engine's square coordinates.

use std::sync::{Arc, OnceLock};

use draughts_engine::{Board, BoardKind, Color, Position, Variant};

use crate::learned::LearnedWeights;
use crate::nnue::{AccumulatorStack, Network, Sets};
use crate::wide::WideEval;

/// The tunable numbers of the evaluation of one variant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Weights {
    /// A man (the unit: 100).
    pub man: i32,
    /// A king. Flying kings are worth about three men, short kings (english, italian) about one and a half.
    pub king: i32,
    /// Bonus per man by the number of rows it has advanced from its own back row (index 0 = back row).
    /// Small, rising values: "tempo" in draughts terms.
    pub advance: [i32; 10],
    /// Bonus per man on a centre square.
    pub centre: i32,
    /// Bonus per man still on its own back row while the opponent has men (guards the promotion row).
    pub back_row: i32,
    /// Bonus for a man one step from promotion with a free square to promote on (half of it two steps away
    /// on a free path).
    pub runaway: i32,
    /// Bonus for having a king when the opponent has none.
    pub sole_king: i32,
    /// In drawn-looking king endings (a lone king against too few pieces to win, see [`Weights::lone_king_holds`])
    /// the score is divided by this.
    pub draw_divisor: i32,
    /// A lone king (no men) holds the draw against at most this many pieces (0: never). International and
    /// brazilian: 3 (FMJD endgame rule, 16 moves); the other flying-king variants: 2; short kings: 0.
    pub lone_king_holds: u32,
    /// Antidraughts: the goal is to lose every piece (or be blocked), so material counts against its
    /// owner (docs/rules.md §9.2). The positional terms are then zero in the table.
    pub give_away: bool,
}

/// International (10x10, flying kings).
pub static INTERNATIONAL: Weights = Weights {
    man: 100,
    king: 300,
    advance: [0, 1, 2, 3, 4, 6, 8, 11, 15, 0],
    centre: 4,
    back_row: 3,
    runaway: 120,
    sole_king: 40,
    draw_divisor: 16,
    lone_king_holds: 3,
    give_away: false,
};

/// Brazilian: international rules on 8x8.
pub static BRAZILIAN: Weights = Weights {
    king: 280,
    advance: [0, 2, 4, 6, 9, 13, 18, 0, 0, 0],
    centre: 5,
    back_row: 4,
    runaway: 110,
    ..INTERNATIONAL
};

/// Russian: flying kings, promotion mid-chain, free capture choice.
pub static RUSSIAN: Weights = Weights {
    lone_king_holds: 2,
    ..BRAZILIAN
};

/// Czech: flying kings, men capture forward only.
pub static CZECH: Weights = Weights {
    lone_king_holds: 2,
    ..BRAZILIAN
};

/// Spanish: flying kings, men capture forward only, mirrored board.
pub static SPANISH: Weights = Weights {
    lone_king_holds: 2,
    ..BRAZILIAN
};

/// English (American checkers): short kings.
pub static ENGLISH: Weights = Weights {
    man: 100,
    king: 150,
    advance: [0, 1, 2, 4, 6, 9, 13, 0, 0, 0],
    centre: 5,
    back_row: 6,
    runaway: 60,
    sole_king: 20,
    draw_divisor: 1,
    lone_king_holds: 0,
    give_away: false,
};

/// Italian: short kings that men may not capture.
pub static ITALIAN: Weights = Weights {
    king: 160,
    ..ENGLISH
};

/// Turkish: orthogonal moves, 16 men, flying orthogonal kings.
pub static TURKISH: Weights = Weights {
    man: 100,
    king: 250,
    advance: [0, 0, 2, 4, 6, 9, 13, 0, 0, 0],
    centre: 2,
    back_row: 0,
    runaway: 100,
    sole_king: 40,
    draw_divisor: 8,
    lone_king_holds: 1,
    give_away: false,
};

/// Antidraughts: fewer pieces is better; a king (which is hard to lose) is the worst piece to keep.
/// Mobility is left to the search (a blocked side has won).
pub static ANTIDRAUGHTS: Weights = Weights {
    man: 100,
    king: 250,
    advance: [0; 10],
    centre: 0,
    back_row: 0,
    runaway: 0,
    sole_king: 0,
    draw_divisor: 1,
    lone_king_holds: 0,
    give_away: true,
};

/// Breakthrough: a race to the first king (a crowning is a won game, found by the search): advancement
/// and runaway men weigh much more than in international.
pub static BREAKTHROUGH: Weights = Weights {
    advance: [0, 2, 4, 7, 11, 16, 24, 35, 50, 0],
    back_row: 6,
    runaway: 400,
    lone_king_holds: 0,
    ..INTERNATIONAL
};

/// Killer: two kings beat a lone king (the killer rule), so a lone king holds only against one piece.
pub static KILLER: Weights = Weights {
    lone_king_holds: 1,
    ..INTERNATIONAL
};

/// Pool: flying kings, men capture backward, free capture choice (as russian, without mid-chain crowning).
pub static POOL: Weights = Weights { ..RUSSIAN };

/// Portuguese: the spanish rules.
pub static PORTUGUESE: Weights = Weights { ..SPANISH };

/// Frisian (docs/rules.md §11): international's shape; two kings usually beat a lone king within the seven
/// moves the rule gives them, so a lone king holds only against one piece.
pub static FRISIAN: Weights = Weights {
    lone_king_holds: 1,
    ..INTERNATIONAL
};

/// Frysk!: Frisian from five men a side.
pub static FRYSK: Weights = Weights { ..FRISIAN };

/// Canadian (docs/rules.md §12): international rules on 12x12, international's table (its advancement rows
/// spread over twelve rows, see `crate::wide`).
pub static CANADIAN: Weights = Weights { ..INTERNATIONAL };

impl Weights {
    /// The weight table of a variant.
    pub fn of(variant: Variant) -> &'static Weights {
        match variant {
            Variant::International => &INTERNATIONAL,
            Variant::Brazilian => &BRAZILIAN,
            Variant::Russian => &RUSSIAN,
            Variant::Czech => &CZECH,
            Variant::Spanish => &SPANISH,
            Variant::English => &ENGLISH,
            Variant::Italian => &ITALIAN,
            Variant::Turkish => &TURKISH,
            Variant::Antidraughts => &ANTIDRAUGHTS,
            Variant::Breakthrough => &BREAKTHROUGH,
            Variant::Killer => &KILLER,
            Variant::Pool => &POOL,
            Variant::Portuguese => &PORTUGUESE,
            Variant::Frisian => &FRISIAN,
            Variant::Frysk => &FRYSK,
            Variant::Canadian => &CANADIAN,
        }
    }
}

/// Board-shape masks for one colour.
#[derive(Clone, Debug)]
struct Side {
    /// `rows[r]`: squares `r` rows ahead of this colour's back row.
    rows: [u64; 10],
    /// The per-square weight of a man (advancement + centre) as bit planes: a man on a square adds
    /// `2^k` for every `k` with the square in `plus[k]`, and subtracts `2^k` for every `minus[k]`. Summing
    /// popcounts per plane costs a handful of instructions instead of one per row.
    plus: Vec<u64>,
    minus: Vec<u64>,
    back_row: u64,
    /// Squares one row before promotion, and two rows before.
    one_to_go: u64,
    two_to_go: u64,
    /// Forward neighbours of each bit (the squares a man on it moves to; sideways excluded).
    forward: [u64; 64],
}

/// The evaluation of one variant: its weights and its board tables.
#[derive(Clone, Debug)]
pub struct Evaluator {
    variant: Variant,
    weights: Weights,
    /// The learned pattern evaluation, when this variant has one (see [`crate::learned`]); the hand-set
    /// [`Weights`] then serve only for material values and the drawn-ending rule.
    learned: Option<Arc<LearnedWeights>>,
    /// The network evaluation, when one was chosen (see [`crate::nnue`]); then `learned` is `None`.
    nnue: Option<Arc<Network>>,
    white: Side,
    black: Side,
    centre: u64,
    /// The 12x12 board's tables (its squares do not fit the `u64` ones, which stay empty there).
    wide: Option<Box<WideEval>>,
    /// Drawish material (see [`Evaluator::set_drawish`]).
    drawish: bool,
}

impl Evaluator {
    /// The evaluator of a variant, the strongest it ships: its network ([`shipped_network`]) if it has
    /// one, else its learned weights ([`Evaluator::shipped_learned`]), else the hand-set table.
    pub fn new(variant: Variant) -> Evaluator {
        match shipped_network(variant) {
            Some(net) => Evaluator::network(net),
            None => Evaluator::shipped_learned(variant),
        }
    }

    /// The variant's shipped learned pattern weights if it has them, else the hand-set table: the default
    /// evaluation before the networks, kept for comparison (the CLI's `--eval learned`).
    pub fn shipped_learned(variant: Variant) -> Evaluator {
        let mut e = Evaluator::hand(variant);
        e.learned = shipped(variant);
        e
    }

    /// The hand-set evaluation of a variant (the evaluation before the learned one; kept for comparison).
    pub fn hand(variant: Variant) -> Evaluator {
        Evaluator::with_weights(variant, Weights::of(variant).clone())
    }

    /// An evaluator with other learned weights (a trainer's output).
    pub fn learned(weights: Arc<LearnedWeights>) -> Evaluator {
        let mut e = Evaluator::hand(weights.layout().variant());
        e.learned = Some(weights);
        e
    }

    /// An evaluator that plays a network ([`crate::nnue`]; the hand-set [`Weights`] then serve only for
    /// the drawn-ending rules).
    pub fn network(net: Arc<Network>) -> Evaluator {
        let mut e = Evaluator::hand(net.variant());
        e.nnue = Some(net);
        e
    }

    /// The network in use, if any.
    pub fn network_in_use(&self) -> Option<&Arc<Network>> {
        self.nnue.as_ref()
    }

    /// [`Evaluator::evaluate`], with a network's accumulator taken from (and left in) `stack` at `ply`
    /// instead of computed afresh; the same score. Without a network, `evaluate` itself.
    #[inline(always)]
    pub fn evaluate_at(&self, pos: &Position, stack: &mut AccumulatorStack, ply: usize) -> i32 {
        match &self.nnue {
            None => self.evaluate(pos),
            Some(net) => self.network_score(pos, |sets, wtm| stack.evaluate(net, sets, wtm, ply)),
        }
    }

    /// A network's score with the drawn-ending rules, the network's output given by `output`.
    #[inline(never)]
    fn network_score(&self, pos: &Position, output: impl FnOnce(Sets, bool) -> i32) -> i32 {
        let sets = Sets::of(pos);
        let wtm = pos.side_to_move() == Color::White;
        let own = output(sets, wtm);
        let white = if wtm { own } else { -own };
        let count = |side: u64| {
            (
                (side & !sets.kings).count_ones() as i32,
                (side & sets.kings).count_ones() as i32,
            )
        };
        let white = self.drawn_ending(white, count(sets.white), count(sets.black));
        if wtm { white } else { -white }
    }

    /// The learned weights in use, if any.
    pub fn learned_weights(&self) -> Option<&Arc<LearnedWeights>> {
        self.learned.as_ref()
    }

    /// The evaluator of a variant with other weights (for tuning).
    pub fn with_weights(variant: Variant, weights: Weights) -> Evaluator {
        let board = variant.rules().board.board();
        if board.kind == BoardKind::Twelve {
            return Evaluator {
                variant,
                wide: Some(Box::new(WideEval::new(board, &weights))),
                weights,
                learned: None,
                nnue: None,
                white: empty_side(),
                black: empty_side(),
                centre: 0,
                drawish: false,
            };
        }
        let size = board.size;
        let turkish = board.kind == BoardKind::Turkish;
        let mut white = empty_side();
        let mut black = empty_side();
        let mut centre = 0u64;
        let (lo, hi) = if size == 10 { (2, 7) } else { (2, 5) };
        for sq in board.squares() {
            let bit = 1u64 << sq.bit();
            let (file, rank) = board.coords(sq);
            let white_row = usize::from(rank);
            let black_row = usize::from(size - 1 - rank);
            white.rows[white_row] |= bit;
            black.rows[black_row] |= bit;
            if (lo..=hi).contains(&file) && (lo..=hi).contains(&rank) {
                centre |= bit;
            }
            white.forward[sq.bit() as usize] = forward(board, file, rank, 1, turkish);
            black.forward[sq.bit() as usize] = forward(board, file, rank, -1, turkish);
        }
        for side in [&mut white, &mut black] {
            side.back_row = side.rows[0];
            side.one_to_go = side.rows[usize::from(size) - 2];
            side.two_to_go = side.rows[usize::from(size) - 3];
            for (row, mask) in side.rows.iter().enumerate() {
                let mut m = *mask;
                while m != 0 {
                    let bit = m & m.wrapping_neg();
                    m &= m - 1;
                    let weight =
                        weights.advance[row] + if centre & bit != 0 { weights.centre } else { 0 };
                    let planes = if weight >= 0 {
                        &mut side.plus
                    } else {
                        &mut side.minus
                    };
                    let magnitude = weight.unsigned_abs();
                    for k in 0..32 {
                        if magnitude >> k & 1 != 0 {
                            if planes.len() <= k {
                                planes.resize(k + 1, 0);
                            }
                            planes[k] |= bit;
                        }
                    }
                }
            }
        }
        Evaluator {
            variant,
            weights,
            learned: None,
            nnue: None,
            white,
            black,
            centre,
            wide: None,
            drawish: false,
        }
    }

    /// Scales down a lead that material says is hard to convert, once the other side has a king: by 8
    /// when the side ahead has at most three pieces, by 2 when the kings are equal and the men differ by at
    /// most one.
    pub fn set_drawish(&mut self, on: bool) {
        self.drawish = on;
    }

    /// Whether drawish material is scaled (see [`Evaluator::set_drawish`]).
    pub fn drawish(&self) -> bool {
        self.drawish
    }

    pub fn variant(&self) -> Variant {
        self.variant
    }

    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    /// The centre squares (bits) that earn [`Weights::centre`].
    pub fn centre_squares(&self) -> u64 {
        self.centre
    }

    /// The value of one side's pieces (men and kings) in centi-men.
    pub fn material(&self, pos: &Position, color: Color) -> i32 {
        let (men, kings) = pos.material(color);
        men as i32 * self.weights.man + kings as i32 * self.weights.king
    }

    /// The score of a position for the side to move, in centi-men.
    #[inline]
    pub fn evaluate(&self, pos: &Position) -> i32 {
        let w = &self.weights;
        if let Some(wide) = &self.wide {
            return match &self.learned {
                Some(learned) => self.learned_wide(learned, pos),
                None => wide.evaluate(w, pos),
            };
        }
        let white = pos.pieces(Color::White).bits64();
        let black = pos.pieces(Color::Black).bits64();
        let kings = pos.kings().bits64();
        let empty = !(white | black);
        let wm = white & !kings;
        let bm = black & !kings;
        let wk = (white & kings).count_ones() as i32;
        let bk = (black & kings).count_ones() as i32;
        let n_wm = wm.count_ones() as i32;
        let n_bm = bm.count_ones() as i32;

        let mut score = if let Some(learned) = &self.learned {
            learned.evaluate_white(white, black, kings, pos.side_to_move() == Color::White)
        } else if let Some(net) = &self.nnue {
            return self.network_score(pos, |sets, wtm| net.evaluate(sets, wtm));
        } else {
            let mut score = (n_wm - n_bm) * w.man + (wk - bk) * w.king;
            if w.give_away {
                score = -score;
            }
            score += self.men_terms(&self.white, wm, bm, empty);
            score -= self.men_terms(&self.black, bm, wm, empty);
            if wk > 0 && bk == 0 {
                score += w.sole_king;
            } else if bk > 0 && wk == 0 {
                score -= w.sole_king;
            }
            score
        };

        score = self.drawn_ending(score, (n_wm, wk), (n_bm, bk));
        match pos.side_to_move() {
            Color::White => score,
            Color::Black => -score,
        }
    }

    /// The learned evaluation on the 12x12 board (its sets read in `u128`), for the side to move.
    #[inline(never)]
    fn learned_wide(&self, learned: &LearnedWeights, pos: &Position) -> i32 {
        let (white, black, kings) = <u128 as crate::learned::Word>::of(pos);
        let white_to_move = pos.side_to_move() == Color::White;
        let score = learned.evaluate_white(white, black, kings, white_to_move);
        let count = |side: u128| {
            (
                (side & !kings).count_ones() as i32,
                (side & kings).count_ones() as i32,
            )
        };
        let score = self.drawn_ending(score, count(white), count(black));
        if white_to_move { score } else { -score }
    }

    /// White's score scaled down in drawn-looking king endings: a lone king against too few pieces.
    /// `white` and `black` are each side's (men, kings).
    #[inline(always)]
    fn drawn_ending(&self, score: i32, white: (i32, i32), black: (i32, i32)) -> i32 {
        let w = &self.weights;
        if w.lone_king_holds > 0 {
            let lone = |(m, k): (i32, i32)| m == 0 && k == 1;
            let n_white = (white.0 + white.1) as u32;
            let n_black = (black.0 + black.1) as u32;
            if (lone(black) && n_white <= w.lone_king_holds)
                || (lone(white) && n_black <= w.lone_king_holds)
            {
                return score / w.draw_divisor;
            }
        }
        if self.drawish {
            let ((wm, wk), (bm, bk)) = (white, black);
            let (ahead, other_kings) = if score > 0 {
                ((wm, wk), bk)
            } else {
                ((bm, bk), wk)
            };
            if other_kings > 0 {
                if ahead.0 + ahead.1 <= 3 {
                    return score / 8;
                }
                if wk == bk && (wm - bm).abs() <= 1 {
                    return score / 2;
                }
            }
        }
        score
    }

    /// Positional terms of one side's men: advancement, centre, back row, runaways.
    #[inline(always)]
    fn men_terms(&self, side: &Side, own_men: u64, opp_men: u64, empty: u64) -> i32 {
        let w = &self.weights;
        let mut s = 0;
        for (k, plane) in side.plus.iter().enumerate() {
            s += ((own_men & plane).count_ones() as i32) << k;
        }
        for (k, plane) in side.minus.iter().enumerate() {
            s -= ((own_men & plane).count_ones() as i32) << k;
        }
        if opp_men != 0 {
            s += (own_men & side.back_row).count_ones() as i32 * w.back_row;
        }
        let mut near = own_men & side.one_to_go;
        while near != 0 {
            let bit = near.trailing_zeros() as usize;
            near &= near - 1;
            if side.forward[bit] & empty != 0 {
                s += w.runaway;
            }
        }
        let mut near = own_men & side.two_to_go;
        while near != 0 {
            let bit = near.trailing_zeros() as usize;
            near &= near - 1;
            let mut next = side.forward[bit] & empty;
            while next != 0 {
                let b = next.trailing_zeros() as usize;
                next &= next - 1;
                if side.forward[b] & empty == side.forward[b] && side.forward[b] != 0 {
                    s += w.runaway / 2;
                    break;
                }
            }
        }
        s
    }
}

/// The learned weights the repository ships for a variant (`crates/ai/data/weights/`), decoded once.
pub fn shipped(variant: Variant) -> Option<Arc<LearnedWeights>> {
    const N: usize = Variant::ALL.len();
    static CACHE: [OnceLock<Option<Arc<LearnedWeights>>>; N] = [const { OnceLock::new() }; N];
    let i = Variant::ALL.iter().position(|v| *v == variant)?;
    CACHE[i]
        .get_or_init(|| {
            let bytes = shipped_bytes(variant)?;
            Some(Arc::new(
                LearnedWeights::from_bytes(variant, bytes).expect("the shipped weights decode"),
            ))
        })
        .clone()
}

/// The network the repository ships as a variant's default evaluation (`crates/ai/data/nnue/`), decoded
/// once; `None` where the variant plays its learned weights. International plays round twenty-seven's
/// network (docs/ai.md "Round twenty-seven": round twenty-six's network fitted on for two epochs on eight
/// new seed shards, +17 +/- 24 Elo over it at equal nodes; 50.0% (47.9-52.1%) against Scan 2.0 at 0.1 s
/// a move over 400 games, where round twenty-six's scored 49.2% and the learned weights 35.8%; 52.0%
/// (49.3-54.7%) at 1 s over 100 games, round twenty-eight).
pub fn shipped_network(variant: Variant) -> Option<Arc<Network>> {
    static INTERNATIONAL: OnceLock<Arc<Network>> = OnceLock::new();
    match variant {
        Variant::International => Some(
            INTERNATIONAL
                .get_or_init(|| {
                    let bytes = include_bytes!("../data/nnue/international-r27.nnue");
                    Arc::new(
                        Network::from_bytes(variant, bytes).expect("the shipped network decodes"),
                    )
                })
                .clone(),
        ),
        // No wildcard: a new variant must say here whether it ships a network.
        Variant::English
        | Variant::Italian
        | Variant::Russian
        | Variant::Brazilian
        | Variant::Spanish
        | Variant::Czech
        | Variant::Turkish
        | Variant::Antidraughts
        | Variant::Breakthrough
        | Variant::Killer
        | Variant::Pool
        | Variant::Portuguese
        | Variant::Frisian
        | Variant::Frysk
        | Variant::Canadian => None,
    }
}

fn shipped_bytes(variant: Variant) -> Option<&'static [u8]> {
    match variant {
        Variant::International => Some(include_bytes!("../data/weights/international.drw")),
        Variant::English => Some(include_bytes!("../data/weights/english.drw")),
        Variant::Italian => Some(include_bytes!("../data/weights/italian.drw")),
        Variant::Brazilian => Some(include_bytes!("../data/weights/brazilian.drw")),
        Variant::Russian => Some(include_bytes!("../data/weights/russian.drw")),
        Variant::Pool => Some(include_bytes!("../data/weights/pool.drw")),
        Variant::Spanish => Some(include_bytes!("../data/weights/spanish.drw")),
        Variant::Czech => Some(include_bytes!("../data/weights/czech.drw")),
        Variant::Portuguese => Some(include_bytes!("../data/weights/portuguese.drw")),
        Variant::Frisian => Some(include_bytes!("../data/weights/frisian.drw")),
        Variant::Killer => Some(include_bytes!("../data/weights/killer.drw")),
        Variant::Turkish => Some(include_bytes!("../data/weights/turkish.drw")),
        Variant::Canadian => Some(include_bytes!("../data/weights/canadian.drw")),
        Variant::Antidraughts => Some(include_bytes!("../data/weights/antidraughts.drw")),
        Variant::Frysk => Some(include_bytes!("../data/weights/frysk.drw")),
        Variant::Breakthrough => Some(include_bytes!("../data/weights/breakthrough.drw")),
        // No wildcard: a new variant must say here whether it ships weights (`None`: the hand-set table).
    }
}

fn empty_side() -> Side {
    Side {
        rows: [0; 10],
        plus: Vec::new(),
        minus: Vec::new(),
        back_row: 0,
        one_to_go: 0,
        two_to_go: 0,
        forward: [0; 64],
    }
}

/// The squares a man on (file, rank) moves forward to (`dir` = +1 for White, -1 for Black).
fn forward(board: &Board, file: u8, rank: u8, dir: i8, turkish: bool) -> u64 {
    let next_rank = i16::from(rank) + i16::from(dir);
    if !(0..i16::from(board.size)).contains(&next_rank) {
        return 0;
    }
    let r = next_rank as u8;
    let files: &[i16] = if turkish { &[0] } else { &[-1, 1] };
    let mut mask = 0;
    for df in files {
        let f = i16::from(file) + df;
        if (0..i16::from(board.size)).contains(&f)
            && let Some(sq) = board.square_at(f as u8, r)
        {
            mask |= 1u64 << sq.bit();
        }
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_positions_are_balanced() {
        for v in Variant::ALL {
            let pos = Position::start(v);
            assert_eq!(Evaluator::hand(v).evaluate(&pos), 0, "{v}");
            // The learned evaluation knows whose move it is, but not much more at the start.
            assert!(Evaluator::new(v).evaluate(&pos).abs() < 30, "{v}");
        }
    }

    #[test]
    fn a_lone_king_against_three_is_drawish_in_international() {
        let e = Evaluator::hand(Variant::International);
        let pos = Position::from_fen(Variant::International, "W:WK10,K20,K30:BK45").unwrap();
        assert!(e.evaluate(&pos) < 100, "{}", e.evaluate(&pos));
        let pos = Position::from_fen(Variant::International, "W:WK10,K20,K30,K40:BK45").unwrap();
        assert!(e.evaluate(&pos) > 600);
    }

    #[test]
    fn drawish_material_scales_the_lead_once_the_other_side_has_a_king() {
        let fen_score = |e: &Evaluator, fen: &str| {
            e.evaluate(&Position::from_fen(Variant::International, fen).unwrap())
        };
        let plain = Evaluator::hand(Variant::International);
        let mut drawish = Evaluator::hand(Variant::International);
        drawish.set_drawish(true);
        // Three pieces (a king and two men) against a king and a man: an eighth.
        let fen = "W:WK10,31,32:BK45,19";
        assert_eq!(fen_score(&drawish, fen), fen_score(&plain, fen) / 8);
        // Kings equal, men one apart: a half; for Black ahead, from Black's side too.
        let fen = "W:WK10,31,32,33,34,35:BK45,16,17,18,19";
        assert_eq!(fen_score(&drawish, fen), fen_score(&plain, fen) / 2);
        let fen = "B:WK10,31,32,33,34:BK45,16,17,18,19,20";
        assert_eq!(fen_score(&drawish, fen), fen_score(&plain, fen) / 2);
        // The other side without a king: unscaled.
        let fen = "W:WK10,31,32:B19,20";
        assert_eq!(fen_score(&drawish, fen), fen_score(&plain, fen));
        // Two men ahead with four pieces or more: unscaled.
        let fen = "W:WK10,31,32,33,34,35:BK45,16,17,18";
        assert_eq!(fen_score(&drawish, fen), fen_score(&plain, fen));
    }

    /// The bit-plane sum equals the plain per-row sum, also with negative weights.
    #[test]
    fn planes_equal_the_row_by_row_sum() {
        for v in Variant::ALL {
            let mut weights = Weights::of(v).clone();
            weights.advance[3] = -7;
            weights.centre = 5;
            for w in [Weights::of(v).clone(), weights.clone()] {
                let e = Evaluator::with_weights(v, w.clone());
                for side in [&e.white, &e.black] {
                    let men = 0x5A5A_A5A5_0F0F_F0F0u64 & side.rows.iter().fold(0, |a, r| a | r);
                    let plain: i32 = side
                        .rows
                        .iter()
                        .zip(w.advance.iter())
                        .map(|(r, a)| (men & r).count_ones() as i32 * a)
                        .sum::<i32>()
                        + (men & e.centre).count_ones() as i32 * w.centre;
                    let planes: i32 = side
                        .plus
                        .iter()
                        .enumerate()
                        .map(|(k, p)| ((men & p).count_ones() as i32) << k)
                        .sum::<i32>()
                        - side
                            .minus
                            .iter()
                            .enumerate()
                            .map(|(k, p)| ((men & p).count_ones() as i32) << k)
                            .sum::<i32>();
                    assert_eq!(plain, planes, "{v}");
                }
            }
        }
    }

    /// Every variant that ships learned weights plays with them, and they know that a man up is better:
    /// the start position with one of Black's men taken off scores higher for White than the start (lower
    /// in antidraughts, whose goal is to lose every piece).
    #[test]
    fn shipped_weights_are_used_and_value_a_man() {
        for v in Variant::ALL {
            let e = Evaluator::shipped_learned(v);
            if shipped(v).is_none() {
                assert!(e.learned_weights().is_none(), "{v}");
                continue;
            }
            assert!(e.learned_weights().is_some(), "{v}");
            let start = Position::start(v);
            let board = start.board();
            let black: Vec<String> = board
                .squares()
                .filter(|sq| start.pieces(Color::Black).0 >> sq.bit() & 1 != 0)
                .map(|sq| board.number(sq).to_string())
                .collect();
            let white: Vec<String> = board
                .squares()
                .filter(|sq| start.pieces(Color::White).0 >> sq.bit() & 1 != 0)
                .map(|sq| board.number(sq).to_string())
                .collect();
            let score = |black: &[String]| {
                let fen = format!("W:W{}:B{}", white.join(","), black.join(","));
                e.evaluate(&Position::from_fen(v, &fen).unwrap())
            };
            let (level, up) = (score(&black), score(&black[1..]));
            if v.rules().goal == draughts_engine::Goal::Lose {
                assert!(up < level - 30, "{v}: {up} vs {level}");
            } else {
                assert!(up > level + 30, "{v}: {up} vs {level}");
            }
        }
    }

    /// International plays its shipped network by default (the other variants their learned weights),
    /// and both international evaluations know the basics: a man up is better, four kings beat a lone
    /// king, and three kings against one stay drawish.
    #[test]
    fn the_shipped_international_evaluations_are_used_and_sensible() {
        for v in Variant::ALL {
            let e = Evaluator::new(v);
            assert_eq!(
                e.network_in_use().is_some(),
                v == Variant::International,
                "{v}"
            );
            assert_eq!(
                shipped_network(v).is_some(),
                v == Variant::International,
                "{v}"
            );
            if v != Variant::International {
                assert_eq!(
                    e.learned_weights().is_some(),
                    Evaluator::shipped_learned(v).learned_weights().is_some(),
                    "{v}"
                );
            }
        }
        let network = Evaluator::new(Variant::International);
        assert!(network.learned_weights().is_none());
        let learned = Evaluator::shipped_learned(Variant::International);
        assert!(learned.learned_weights().is_some() && learned.network_in_use().is_none());
        for e in [network, learned] {
            let score =
                |fen: &str| e.evaluate(&Position::from_fen(Variant::International, fen).unwrap());
            let level = score("W:W31,32,33,34,35:B16,17,18,19,20");
            let up = score("W:W31,32,33,34,35,36:B16,17,18,19,20");
            assert!(up > level + 30, "{up} vs {level}");
            let four = score("W:WK10,K20,K30,K40:BK45");
            let three = score("W:WK10,K20,K30:BK45");
            // Four kings win and three draw: at least about a man apart (a man is 75-94 units at depth
            // 1, docs/ai.md; round twenty-seven's network: 89 against 0).
            assert!(four > three + 75 && three < 50, "{four} {three}");
        }
    }

    #[test]
    fn short_kings_are_worth_less_than_flying_kings() {
        assert!(ENGLISH.king < INTERNATIONAL.king);
        assert!(ITALIAN.king < RUSSIAN.king);
    }
}
