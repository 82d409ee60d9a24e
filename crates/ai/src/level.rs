//! Playing levels 1 to 8 and the players the match runner uses.
//!
//! | level | depth | nodes | time cap | noise (centi-men) | idea |
//! |---|---|---|---|---|---|
//! | 1 | 1 | - | - | 150 | sees only what it takes and what it hangs at once; often picks a worse move |
//! | 2 | 2 | - | - | 90 | one reply deep, still careless |
//! | 3 | 3 | - | - | 50 | |
//! | 4 | 4 | - | - | 25 | |
//! | 5 | 5 | - | - | 10 | rarely strays from the best move |
//! | 6 | - | 15 000 | 1 s | 0 | a club player: a few plies of real search |
//! | 7 | - | 100 000 | 2 s | 0 | |
//! | 8 | - | 500 000 | 5 s | 0 | full strength at a fast move time (a tenth to a fifth of a second a move at 3-6 M nodes/s) |
//!
//! Turkish's level 6 searches 40 000 nodes ([`Level::for_variant`]): at 15 000 its search reached only level
//! 5's depth there and the two were level (docs/ai.md "Round nine").
//!
//! Every level searches with the variant's default evaluation ([`crate::Evaluator::new`]: international's
//! network, the other variants' learned weights), so the noise is in that evaluation's units (nominally
//! centi-men: at depth 1 the start position without Black's man on 1 scores 75 with international's
//! network and 94 with its learned weights, `draughts analyse -d 1 --eval ...`; docs/ai.md round
//! twenty-six).
//!
//! Levels stop on nodes or depth, so a level plays the same move on a slow or a busy machine; the time caps
//! are only a safety net far above the normal search time (matches drop them unless `--movetime` is given).
//! Level 8 was 1 500 000 nodes; 500 000 keeps the answer fast for a server and a 200-game match against
//! level 6 affordable on two shared cores, and still beats level 7 (see docs/ai.md for the measured ladders).
//!
//! With noise, every root move is searched to the level's depth (multi-PV over all moves) and the move with
//! the best `score + uniform(0, noise)` is played, so the beginner's mistakes are "almost best" moves that
//! lose something a deeper look would have seen, not random moves. The noise is drawn from a seeded
//! generator, so a game is reproducible from its seed.

use std::time::Duration;

use draughts_engine::{Color, Count, Move, Position, Variant};

use crate::eval::Weights;
use crate::search::{Limits, RootState, SearchResult, Searcher};

/// One playing level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Level {
    pub level: u8,
    pub depth: Option<u32>,
    pub nodes: Option<u64>,
    pub time: Option<Duration>,
    /// Random bonus, up to this many centi-men, added to each root move's score before choosing.
    pub noise: i32,
}

/// The lowest and highest levels.
pub const MIN_LEVEL: u8 = 1;
pub const MAX_LEVEL: u8 = 8;

impl Level {
    /// Level `n` (1..=8) as the table above gives it; `None` outside. A game in a known variant takes
    /// [`Level::for_variant`], which holds the per-variant exceptions.
    pub fn new(n: u8) -> Option<Level> {
        let (depth, nodes, time_ms, noise) = match n {
            1 => (Some(1), None, None, 150),
            2 => (Some(2), None, None, 90),
            3 => (Some(3), None, None, 50),
            4 => (Some(4), None, None, 25),
            5 => (Some(5), None, None, 10),
            6 => (None, Some(15_000), Some(1_000), 0),
            7 => (None, Some(100_000), Some(2_000), 0),
            8 => (None, Some(500_000), Some(5_000), 0),
            _ => return None,
        };
        Some(Level {
            level: n,
            depth,
            nodes,
            time: time_ms.map(Duration::from_millis),
            noise,
        })
    }

    /// Level `n` as played in `variant`: [`Level::new`], but turkish's level 6 searches 40 000 nodes
    /// (measured: at 15 000 it scored 58.5% against level 5 over 100 games, +60 ± 64; at 40 000 76.5%).
    pub fn for_variant(n: u8, variant: Variant) -> Option<Level> {
        let mut level = Level::new(n)?;
        if variant == Variant::Turkish && n == 6 {
            level.nodes = Some(40_000);
        }
        Some(level)
    }

    /// The search limits of this level (multi-PV over every move when it plays with noise).
    pub fn limits(&self, n_moves: usize) -> Limits {
        Limits {
            depth: self.depth,
            nodes: self.nodes,
            time: self.time,
            multipv: if self.noise > 0 { n_moves } else { 1 },
        }
    }

    /// Chooses a move (`None` if there is none).
    pub fn choose(&self, searcher: &mut Searcher, root: &RootState, rng: &mut Rng) -> Option<Move> {
        self.choose_scored(searcher, root, rng).0
    }

    /// Chooses a move and says what the search thought of the position: the best line's internal score
    /// for the side to move (`None` when there was nothing to search: no move or a single one).
    pub fn choose_scored(
        &self,
        searcher: &mut Searcher,
        root: &RootState,
        rng: &mut Rng,
    ) -> (Option<Move>, Option<i32>) {
        let n_moves = root.position.legal_moves().len();
        if n_moves <= 1 {
            return (root.position.legal_moves().first().copied(), None);
        }
        let result = searcher.search(root, &self.limits(n_moves), |_| {});
        (self.pick(&result, rng), result.lines.first().map(|l| l.raw))
    }

    fn pick(&self, result: &SearchResult, rng: &mut Rng) -> Option<Move> {
        if self.noise <= 0 || result.lines.len() <= 1 {
            return result.best;
        }
        result
            .lines
            .iter()
            .filter(|l| !l.pv.is_empty())
            .max_by_key(|l| {
                l.raw
                    .saturating_add(rng.below(self.noise as u64 + 1) as i32)
            })
            .map(|l| l.pv[0])
            .or(result.best)
    }
}

/// The one-ply greedy player: the move that leaves the best material balance, ties broken at random.
pub fn greedy_move(pos: &Position, rng: &mut Rng) -> Option<Move> {
    let weights = Weights::of(pos.variant());
    let me = pos.side_to_move();
    let value = |p: &Position, c: Color| {
        let (m, k) = p.material(c);
        m as i32 * weights.man + k as i32 * weights.king
    };
    let mut list = Vec::new();
    pos.legal_moves_into(&mut list, Count::Unique);
    let mut best: Vec<Move> = Vec::new();
    let mut best_score = i32::MIN;
    for mv in list {
        let next = pos.play_unchecked(&mv);
        let s = value(&next, me) - value(&next, !me);
        if s > best_score {
            best_score = s;
            best.clear();
        }
        if s == best_score {
            best.push(mv);
        }
    }
    if best.is_empty() {
        return None;
    }
    Some(best[rng.below(best.len() as u64) as usize])
}

/// A small deterministic random generator (splitmix64): enough for move noise and openings.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_their_table_and_turkish_level_six_searches_more() {
        for v in Variant::ALL {
            for n in MIN_LEVEL..=MAX_LEVEL {
                let level = Level::for_variant(n, v).unwrap();
                if v == Variant::Turkish && n == 6 {
                    assert_eq!(level.nodes, Some(40_000));
                } else {
                    assert_eq!(level, Level::new(n).unwrap(), "{v:?} level {n}");
                }
            }
            assert_eq!(Level::for_variant(0, v), None);
            assert_eq!(Level::for_variant(MAX_LEVEL + 1, v), None);
        }
        // Still below level 7's budget.
        let nodes = |n| Level::for_variant(n, Variant::Turkish).unwrap().nodes;
        assert!(nodes(6) < nodes(7));
    }
}
