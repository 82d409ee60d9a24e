//! The hand-set evaluation on the 12x12 board (canadian, docs/rules.md §12), whose squares do not fit the
//! `u64` tables of [`crate::eval`]: the same terms (material, advancement, centre, back row, runaways,
//! sole king, the drawn lone-king ending) over `u128` sets. Canadian ships learned weights
//! (`data/weights/canadian.drw`, read by [`crate::learned`] in `u128`), which replace it in play; this one is
//! the `hand` evaluation (`Evaluator::hand`) that the first self-play generation plays with and the matches
//! measure against.

use draughts_engine::{Board, Color, Position};

use crate::eval::Weights;

/// Board tables of one colour on the wide board.
#[derive(Clone, Debug)]
struct WideSide {
    /// Per bit: the weight of a man there (advancement plus centre).
    man_weight: Vec<i32>,
    back_row: u128,
    /// Squares one row before promotion, and two rows before.
    one_to_go: u128,
    two_to_go: u128,
    /// Per bit: the squares a man there moves to.
    forward: Vec<u128>,
}

/// The evaluation tables of the 12x12 board.
#[derive(Clone, Debug)]
pub(crate) struct WideEval {
    white: WideSide,
    black: WideSide,
}

impl WideEval {
    /// The tables for `board` with `weights`. The weights' advancement table has ten rows (the 10x10
    /// board's); row `r` of the 12 rows takes the entry at `r * 8 / 10` (rounded), the last row none.
    pub(crate) fn new(board: &Board, weights: &Weights) -> WideEval {
        let size = board.size;
        let rows = usize::from(size);
        let advance = |row: usize| -> i32 {
            if row + 1 >= rows {
                0
            } else {
                let k = (row * 8 + 5) / (rows - 2);
                weights.advance[k.min(weights.advance.len() - 2)]
            }
        };
        let side = |white: bool| {
            let mut s = WideSide {
                man_weight: vec![0; 128],
                back_row: 0,
                one_to_go: 0,
                two_to_go: 0,
                forward: vec![0; 128],
            };
            for sq in board.squares() {
                let bit = 1u128 << sq.bit();
                let (file, rank) = board.coords(sq);
                let row = usize::from(if white { rank } else { size - 1 - rank });
                let centre = (3..=8).contains(&file) && (3..=8).contains(&rank);
                s.man_weight[sq.bit() as usize] =
                    advance(row) + if centre { weights.centre } else { 0 };
                if row == 0 {
                    s.back_row |= bit;
                }
                if row + 2 == rows {
                    s.one_to_go |= bit;
                }
                if row + 3 == rows {
                    s.two_to_go |= bit;
                }
                let next = i16::from(rank) + if white { 1 } else { -1 };
                for df in [-1i16, 1] {
                    let f = i16::from(file) + df;
                    if (0..i16::from(size)).contains(&f)
                        && (0..i16::from(size)).contains(&next)
                        && let Some(t) = board.square_at(f as u8, next as u8)
                    {
                        s.forward[sq.bit() as usize] |= 1u128 << t.bit();
                    }
                }
            }
            s
        };
        WideEval {
            white: side(true),
            black: side(false),
        }
    }

    /// The hand-set score for the side to move, in centi-men (as [`crate::Evaluator::evaluate`]).
    pub(crate) fn evaluate(&self, w: &Weights, pos: &Position) -> i32 {
        let white = pos.pieces(Color::White).0;
        let black = pos.pieces(Color::Black).0;
        let kings = pos.kings().0;
        let empty = !(white | black);
        let (wm, bm) = (white & !kings, black & !kings);
        let wk = (white & kings).count_ones() as i32;
        let bk = (black & kings).count_ones() as i32;
        let mut score =
            (wm.count_ones() as i32 - bm.count_ones() as i32) * w.man + (wk - bk) * w.king;
        if w.give_away {
            score = -score;
        }
        score += self.men_terms(w, &self.white, wm, bm, empty);
        score -= self.men_terms(w, &self.black, bm, wm, empty);
        if wk > 0 && bk == 0 {
            score += w.sole_king;
        } else if bk > 0 && wk == 0 {
            score -= w.sole_king;
        }
        // Drawn-looking king endings: a lone king against too few pieces.
        let (n_wm, n_bm) = (wm.count_ones(), bm.count_ones());
        let (n_white, n_black) = (n_wm + wk as u32, n_bm + bk as u32);
        let lone = |men: u32, kings: i32| men == 0 && kings == 1;
        if w.lone_king_holds > 0
            && ((lone(n_bm, bk) && n_white <= w.lone_king_holds)
                || (lone(n_wm, wk) && n_black <= w.lone_king_holds))
        {
            score /= w.draw_divisor;
        }
        match pos.side_to_move() {
            Color::White => score,
            Color::Black => -score,
        }
    }

    fn men_terms(&self, w: &Weights, side: &WideSide, own: u128, opp: u128, empty: u128) -> i32 {
        let mut s = 0;
        let mut m = own;
        while m != 0 {
            s += side.man_weight[m.trailing_zeros() as usize];
            m &= m - 1;
        }
        if opp != 0 {
            s += (own & side.back_row).count_ones() as i32 * w.back_row;
        }
        let mut near = own & side.one_to_go;
        while near != 0 {
            if side.forward[near.trailing_zeros() as usize] & empty != 0 {
                s += w.runaway;
            }
            near &= near - 1;
        }
        let mut near = own & side.two_to_go;
        while near != 0 {
            let mut next = side.forward[near.trailing_zeros() as usize] & empty;
            near &= near - 1;
            while next != 0 {
                let f = side.forward[next.trailing_zeros() as usize];
                next &= next - 1;
                if f != 0 && f & empty == f {
                    s += w.runaway / 2;
                    break;
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use draughts_engine::{Position, Variant};

    use crate::eval::Evaluator;

    #[test]
    fn canadian_evaluation_is_symmetric_and_sees_material_and_advancement() {
        let e = Evaluator::hand(Variant::Canadian);
        let score = |fen: &str| e.evaluate(&Position::from_fen(Variant::Canadian, fen).unwrap());
        assert_eq!(score(Variant::Canadian.start_fen()), 0);
        // A man up is better, for either side to move (White's man on b2 = 61 lies above bit 63).
        assert!(score("W:W50,61:B20") > 50);
        assert!(score("B:W50,61:B20") < -50);
        // The colour-mirrored position (square n <-> 73 - n) scores the same for its side to move.
        assert_eq!(score("W:W50,61,K70:B20,K3"), score("B:W53,K70:B12,23,K3"));
        // An advanced man is worth more than a back one.
        assert!(score("W:W13:B60") > score("W:W61:B60"));
        // A lone king against three pieces is drawish (the FMJD endgame rule, as in international).
        assert!(score("W:WK1,K2,K3:BK72") < 100);
        assert!(score("W:WK1,K2,K3,K4:BK72") > 600);
    }
}
