//! Squares, materials and the perfect-up-to-overlap index of a slice.

use draughts_engine::{Bitboard, BoardKind, Color, Position, PositionError, Variant};

/// Binomial coefficients `C(n, k)` for `n <= 64`, `k <= 8`.
const BINOMIAL: [[u64; 9]; 65] = {
    let mut t = [[0u64; 9]; 65];
    let mut n = 0;
    while n <= 64 {
        t[n][0] = 1;
        let mut k = 1;
        while k <= 8 {
            t[n][k] = if n == 0 {
                0
            } else {
                t[n - 1][k - 1] + t[n - 1][k]
            };
            k += 1;
        }
        n += 1;
    }
    t
};

#[inline]
fn binomial(n: u32, k: u32) -> u64 {
    BINOMIAL[n as usize][k as usize]
}

/// Men and kings of each colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Material {
    pub white_men: u8,
    pub white_kings: u8,
    pub black_men: u8,
    pub black_kings: u8,
}

impl Material {
    /// Number of distinct keys ([`Material::key`]).
    pub const KEYS: usize = 1 << 12;

    pub fn new(white_men: u8, white_kings: u8, black_men: u8, black_kings: u8) -> Material {
        Material {
            white_men,
            white_kings,
            black_men,
            black_kings,
        }
    }
    pub fn white(self) -> u32 {
        u32::from(self.white_men + self.white_kings)
    }
    pub fn black(self) -> u32 {
        u32::from(self.black_men + self.black_kings)
    }
    pub fn total(self) -> u32 {
        self.white() + self.black()
    }
    pub fn men(self) -> u32 {
        u32::from(self.white_men + self.black_men)
    }
    /// A dense key (3 bits a group); only for totals up to [`super::MAX_PIECES`].
    #[inline]
    pub fn key(self) -> usize {
        usize::from(self.white_men & 7)
            | usize::from(self.white_kings & 7) << 3
            | usize::from(self.black_men & 7) << 6
            | usize::from(self.black_kings & 7) << 9
    }
    /// The four digits of file names: `2101` is two white men, one white king, none and one black.
    pub fn digits(self) -> String {
        format!(
            "{}{}{}{}",
            self.white_men, self.white_kings, self.black_men, self.black_kings
        )
    }
    /// Every material of exactly `n` pieces with at least one piece a side.
    pub fn all_with(n: u32) -> impl Iterator<Item = Material> {
        let n = n as u8;
        (0..=n).flat_map(move |wm| {
            (0..=n - wm).flat_map(move |wk| {
                (0..=n - wm - wk).filter_map(move |bm| {
                    let bk = n - wm - wk - bm;
                    let m = Material::new(wm, wk, bm, bk);
                    (m.white() > 0 && m.black() > 0).then_some(m)
                })
            })
        })
    }
    /// The slices up to `n` pieces in an order where every capture and promotion leads to a slice before.
    pub fn solving_order(n: u32) -> Vec<Material> {
        let mut all: Vec<Material> = (2..=n).flat_map(Material::all_with).collect();
        all.sort_by_key(|m| (m.total(), m.men(), *m));
        all
    }
}

impl std::fmt::Display for Material {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "white {}m{}k v black {}m{}k",
            self.white_men, self.white_kings, self.black_men, self.black_kings
        )
    }
}

/// A position as four masks over PDN squares (bit `n - 1` is square `n`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Squares {
    pub white_men: u64,
    pub white_kings: u64,
    pub black_men: u64,
    pub black_kings: u64,
}

impl Squares {
    pub fn material(&self) -> Material {
        Material::new(
            self.white_men.count_ones() as u8,
            self.white_kings.count_ones() as u8,
            self.black_men.count_ones() as u8,
            self.black_kings.count_ones() as u8,
        )
    }
    pub fn occupied(&self) -> u64 {
        self.white_men | self.white_kings | self.black_men | self.black_kings
    }
}

/// The board of a variant as the generator sees it: PDN squares, neighbours, where men may stand.
#[derive(Clone, Debug)]
pub struct Layout {
    variant: Variant,
    n_squares: u32,
    /// The engine's bit of each square, by PDN index (number - 1).
    bit_of: Vec<u8>,
    /// PDN index by engine bit (0xFF: none).
    index_of_bit: [u8; 128],
    /// Neighbour by direction: 0 and 1 toward White's promotion row (rank up), 2 and 3 down; -1 none.
    neighbour: Vec<[i8; 4]>,
    /// Squares where a man of each colour may stand (off its promotion row).
    men_allowed: [u64; 2],
    all: u64,
    flying_kings: bool,
}

impl Layout {
    /// The layout of a supported variant (see [`super::supports`]).
    pub fn new(variant: Variant) -> Option<Layout> {
        let rules = variant.rules();
        let diagonal = matches!(
            rules.board,
            BoardKind::Ten | BoardKind::Eight | BoardKind::EightMirrored
        );
        if !diagonal
            || variant.is_frisian()
            || rules.king_move_limit.is_some()
            || rules.orthogonal_captures
            || !super::normal_goal(variant)
        {
            return None;
        }
        let board = rules.board.board();
        let n = u32::from(board.n_squares);
        let mut bit_of = Vec::with_capacity(n as usize);
        let mut index_of_bit = [0xFF; 128];
        let mut men_allowed = [0u64; 2];
        for i in 0..n {
            let sq = board.square(i + 1)?;
            let bit = sq.bit();
            bit_of.push(bit as u8);
            index_of_bit[bit as usize] = i as u8;
            let mask = 1u128 << bit;
            if board.top_row & mask == 0 {
                men_allowed[0] |= 1 << i;
            }
            if board.bottom_row & mask == 0 {
                men_allowed[1] |= 1 << i;
            }
        }
        let mut neighbour = Vec::with_capacity(n as usize);
        for i in 0..n {
            let sq = board.square(i + 1)?;
            let (file, rank) = board.coords(sq);
            let mut dirs = [-1i8; 4];
            for (d, (df, dr)) in [(-1i8, 1i8), (1, 1), (-1, -1), (1, -1)]
                .into_iter()
                .enumerate()
            {
                let (f, r) = (file as i8 + df, rank as i8 + dr);
                if f < 0 || r < 0 {
                    continue;
                }
                if let Some(t) = board.square_at(f as u8, r as u8) {
                    dirs[d] = (board.number(t) - 1) as i8;
                }
            }
            neighbour.push(dirs);
        }
        Some(Layout {
            variant,
            n_squares: n,
            bit_of,
            index_of_bit,
            neighbour,
            men_allowed,
            all: if n == 64 { !0 } else { (1 << n) - 1 },
            flying_kings: rules.flying_kings,
        })
    }

    pub fn variant(&self) -> Variant {
        self.variant
    }
    pub fn n_squares(&self) -> u32 {
        self.n_squares
    }
    pub fn flying_kings(&self) -> bool {
        self.flying_kings
    }
    /// The neighbour of PDN index `i` in direction `d` (see [`Layout`]).
    #[inline]
    pub(crate) fn neighbour(&self, i: u32, d: usize) -> Option<u32> {
        let t = self.neighbour[i as usize][d];
        (t >= 0).then_some(t as u32)
    }
    pub(crate) fn men_allowed(&self, color: Color) -> u64 {
        self.men_allowed[usize::from(color == Color::Black)]
    }

    /// The masks and side to move of a position.
    #[inline]
    pub fn squares_of(&self, pos: &Position) -> (Squares, Color) {
        let to_mask = |bb: u128| {
            let mut m = 0u64;
            let mut bits = bb;
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                m |= 1 << self.index_of_bit[b as usize];
            }
            m
        };
        let kings = pos.kings().0;
        let white = pos.pieces(Color::White).0;
        let black = pos.pieces(Color::Black).0;
        (
            Squares {
                white_men: to_mask(white & !kings),
                white_kings: to_mask(white & kings),
                black_men: to_mask(black & !kings),
                black_kings: to_mask(black & kings),
            },
            pos.side_to_move(),
        )
    }

    /// The engine position of masks (validated by the engine, [`Position::from_bitboards`]).
    #[inline]
    pub fn position(&self, squares: &Squares, side: Color) -> Result<Position, PositionError> {
        let bits = |mut mask: u64| {
            let mut bb = 0u128;
            while mask != 0 {
                let i = mask.trailing_zeros();
                mask &= mask - 1;
                bb |= 1u128 << self.bit_of[i as usize];
            }
            Bitboard(bb)
        };
        Position::from_bitboards(
            self.variant,
            side,
            bits(squares.white_men),
            bits(squares.white_kings),
            bits(squares.black_men),
            bits(squares.black_kings),
        )
    }

    #[allow(dead_code)]
    pub(crate) fn bit_of(&self, i: u32) -> u8 {
        self.bit_of[i as usize]
    }
}

/// Colex rank of the squares of `group` among the squares of `universe` (`group` within `universe`).
#[inline]
fn rank(group: u64, universe: u64) -> u64 {
    let mut r = 0;
    let mut k = 1;
    let mut g = group;
    while g != 0 {
        let low = g & g.wrapping_neg();
        g &= g - 1;
        let pos = (universe & (low - 1)).count_ones();
        r += binomial(pos, k);
        k += 1;
    }
    r
}

/// The `k` squares of `universe` with colex rank `r`.
#[inline]
fn unrank(mut r: u64, k: u32, universe: u64) -> u64 {
    let size = universe.count_ones();
    let mut group = 0u64;
    let mut top = size;
    for i in (1..=k).rev() {
        // The largest c < top with C(c, i) <= r: r itself for the last square (C(c, 1) = c), else by
        // bisection (C(c, i) grows with c; C(i - 1, i) = 0).
        let (mut lo, mut hi) = if i == 1 {
            (r as u32, r as u32)
        } else {
            (i - 1, top - 1)
        };
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if binomial(mid, i) <= r {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        r -= binomial(lo, i);
        group |= select(universe, lo);
        top = lo;
    }
    group
}

/// The `n`-th (0-based) set bit of `mask`, as a mask (`n` below the number of bits set).
#[inline]
fn select(mask: u64, n: u32) -> u64 {
    debug_assert!(n < mask.count_ones());
    // The answer is at least `n` squares past the lowest; while fewer than `n + 1` bits are set up to a
    // candidate, it is at least that many squares further. The universes here have few holes (a run of
    // squares, or the squares not taken by a few men), so this ends after a step or two.
    let mut p = mask.trailing_zeros() + n;
    while p < 64 {
        let count = (mask & (u64::MAX >> (63 - p))).count_ones();
        if count == n + 1 {
            return 1 << p;
        }
        p += n + 1 - count;
    }
    // Only when `n` is not below the number of bits set (never by the index's own ranks): no square,
    // rather than a loop that does not end.
    0
}

/// The index of one slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceIndex {
    material: Material,
    n_white_men: u64,
    n_black_men: u64,
    n_white_kings: u64,
    n_black_kings: u64,
}

impl SliceIndex {
    pub fn new(layout: &Layout, material: Material) -> SliceIndex {
        let m = material;
        let n = layout.n_squares;
        let men = m.men();
        SliceIndex {
            material,
            n_white_men: binomial(layout.men_allowed[0].count_ones(), m.white_men.into()),
            n_black_men: binomial(layout.men_allowed[1].count_ones(), m.black_men.into()),
            n_white_kings: binomial(n - men, m.white_kings.into()),
            n_black_kings: binomial(n - men - u32::from(m.white_kings), m.black_kings.into()),
        }
    }

    pub fn material(&self) -> Material {
        self.material
    }

    /// Number of indices (both sides to move).
    pub fn size(&self) -> u64 {
        2 * self.n_white_men * self.n_black_men * self.n_white_kings * self.n_black_kings
    }

    /// The index of a position of this slice.
    #[inline]
    pub fn index(&self, layout: &Layout, s: &Squares, side: Color) -> u64 {
        let free = layout.all & !(s.white_men | s.black_men);
        let wm = rank(s.white_men, layout.men_allowed[0]);
        let bm = rank(s.black_men, layout.men_allowed[1]);
        let wk = rank(s.white_kings, free);
        let bk = rank(s.black_kings, free & !s.white_kings);
        let placement =
            wm + self.n_white_men * (bm + self.n_black_men * (wk + self.n_white_kings * bk));
        2 * placement + u64::from(side == Color::Black)
    }

    /// The position of an index, or `None` for an index that names none (two men on one square).
    #[inline]
    pub fn squares(&self, layout: &Layout, i: u64) -> Option<(Squares, Color)> {
        let m = self.material;
        let side = if i.is_multiple_of(2) {
            Color::White
        } else {
            Color::Black
        };
        let mut p = i / 2;
        let wm = p % self.n_white_men;
        p /= self.n_white_men;
        let bm = p % self.n_black_men;
        p /= self.n_black_men;
        let wk = p % self.n_white_kings;
        let bk = p / self.n_white_kings;
        let white_men = unrank(wm, m.white_men.into(), layout.men_allowed[0]);
        let black_men = unrank(bm, m.black_men.into(), layout.men_allowed[1]);
        if white_men & black_men != 0 {
            return None;
        }
        let free = layout.all & !(white_men | black_men);
        let white_kings = unrank(wk, m.white_kings.into(), free);
        let black_kings = unrank(bk, m.black_kings.into(), free & !white_kings);
        Some((
            Squares {
                white_men,
                white_kings,
                black_men,
                black_kings,
            },
            side,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_and_unrank_are_inverse() {
        let universe = 0b1011_0110_1101u64;
        for k in 0..=4u32 {
            let n = binomial(universe.count_ones(), k);
            for r in 0..n {
                let g = unrank(r, k, universe);
                assert_eq!(g.count_ones(), k);
                assert_eq!(g & !universe, 0);
                assert_eq!(rank(g, universe), r);
            }
        }
    }

    #[test]
    fn unrank_and_select_over_a_wide_universe() {
        // A universe spread over all 64 bits, as on the boards whose layouts leave ghost bits.
        let universe = 0xB6DB_6DB6_DB6D_B6DBu64 | 1 << 63;
        let naive = |mut mask: u64, n: u32| {
            for _ in 0..n {
                mask &= mask - 1;
            }
            mask & mask.wrapping_neg()
        };
        for n in 0..universe.count_ones() {
            assert_eq!(select(universe, n), naive(universe, n), "select {n}");
        }
        if !cfg!(debug_assertions) {
            assert_eq!(select(universe, universe.count_ones()), 0);
        }
        for k in 1..=5u32 {
            let n = binomial(universe.count_ones(), k);
            // Every rank near both ends and a stride through the middle.
            let ranks = (0..n.min(2000)).chain((0..n).step_by((n / 997).max(1) as usize));
            for r in ranks.chain(n.saturating_sub(2000)..n) {
                let g = unrank(r, k, universe);
                assert_eq!(g.count_ones(), k);
                assert_eq!(g & !universe, 0);
                assert_eq!(rank(g, universe), r, "k {k} rank {r}");
            }
        }
    }

    #[test]
    fn every_index_round_trips() {
        let layout = Layout::new(Variant::English).unwrap();
        let slice = SliceIndex::new(&layout, Material::new(1, 1, 1, 0));
        let mut valid = 0;
        for i in 0..slice.size() {
            if let Some((s, side)) = slice.squares(&layout, i) {
                valid += 1;
                assert_eq!(slice.index(&layout, &s, side), i);
            }
        }
        // 28 * 28 men placements, 24 of them on one square (5..=28); the king on the 30 squares left.
        assert_eq!(valid, 2 * (28 * 28 - 24) * 30);
    }
}
