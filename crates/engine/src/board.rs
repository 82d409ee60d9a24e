//! Board geometries: how the playable squares of each board are numbered, named and laid out as bits.
//!
//! Every board keeps one bit per playable square in a word: a `u64` on the boards of up to 64 squares, a
//! `u128` on the 12x12 board (72 squares, 77 bits with its ghosts); the generator is generic over the word
//! ([`Bits`]), so the 64-bit boards compile to the code they had before the wide board existed. The
//! diagonal boards use the "ghost square"
//! layout of the strongest open engines: after every two rows one unused bit is inserted, so that each of
//! the four diagonal steps is one constant shift of the whole board (`±H` and `±(H+1)` with `H` = squares
//! per row) and a step off the left or right edge lands on a ghost bit, which the board mask removes.
//! The mirrored 8x8 board (Italian, Spanish; a1 light) is the left-right mirror of the ordinary one: it
//! shares its bit layout and only names its squares differently. Turkish uses all 64 squares, one bit each.

use std::fmt;
use std::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, BitXor, Not, Shl, Shr};

use crate::variant::Precedence;

/// The word a board's squares are kept in: `u64` (every board up to 64 squares) or `u128` (12x12).
/// The generator and the position's hot paths are monomorphised over it.
pub(crate) trait Bits:
    Copy
    + Eq
    + fmt::Debug
    + BitAnd<Output = Self>
    + BitOr<Output = Self>
    + BitXor<Output = Self>
    + Not<Output = Self>
    + BitAndAssign
    + BitOrAssign
    + Shl<u32, Output = Self>
    + Shr<u32, Output = Self>
{
    const ZERO: Self;
    /// Whether the word has bits above 63 (stored in the position's and the move's high parts).
    const WIDE: bool;
    fn is_zero(self) -> bool;
    /// The lowest set bit, as a set.
    fn lowest(self) -> Self;
    /// The set without its lowest bit.
    fn clear_lowest(self) -> Self;
    fn trailing_zeros(self) -> u32;
    fn count_ones(self) -> u32;
    /// The set of one bit (`i` below the word's width).
    fn bit(i: u32) -> Self;
    /// Bits 0-63 and 64-79 joined (the high part is ignored by `u64`).
    fn join(lo: u64, hi: u16) -> Self;
    /// Bits 0-63.
    fn lo(self) -> u64;
    /// Bits 64-79 (always 0 for `u64`).
    fn hi(self) -> u16;
}

impl Bits for u64 {
    const ZERO: u64 = 0;
    const WIDE: bool = false;
    #[inline(always)]
    fn is_zero(self) -> bool {
        self == 0
    }
    #[inline(always)]
    fn lowest(self) -> u64 {
        self & self.wrapping_neg()
    }
    #[inline(always)]
    fn clear_lowest(self) -> u64 {
        self & self.wrapping_sub(1)
    }
    #[inline(always)]
    fn trailing_zeros(self) -> u32 {
        u64::trailing_zeros(self)
    }
    #[inline(always)]
    fn count_ones(self) -> u32 {
        u64::count_ones(self)
    }
    #[inline(always)]
    fn bit(i: u32) -> u64 {
        1u64 << i
    }
    #[inline(always)]
    fn join(lo: u64, _hi: u16) -> u64 {
        lo
    }
    #[inline(always)]
    fn lo(self) -> u64 {
        self
    }
    #[inline(always)]
    fn hi(self) -> u16 {
        0
    }
}

impl Bits for u128 {
    const ZERO: u128 = 0;
    const WIDE: bool = true;
    #[inline(always)]
    fn is_zero(self) -> bool {
        self == 0
    }
    #[inline(always)]
    fn lowest(self) -> u128 {
        self & self.wrapping_neg()
    }
    #[inline(always)]
    fn clear_lowest(self) -> u128 {
        self & self.wrapping_sub(1)
    }
    #[inline(always)]
    fn trailing_zeros(self) -> u32 {
        u128::trailing_zeros(self)
    }
    #[inline(always)]
    fn count_ones(self) -> u32 {
        u128::count_ones(self)
    }
    #[inline(always)]
    fn bit(i: u32) -> u128 {
        1u128 << i
    }
    #[inline(always)]
    fn join(lo: u64, hi: u16) -> u128 {
        u128::from(lo) | (u128::from(hi) << 64)
    }
    #[inline(always)]
    fn lo(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn hi(self) -> u16 {
        (self >> 64) as u16
    }
}

/// The kinds of board the variants are played on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BoardKind {
    /// 10x10, 50 dark squares, a1 dark (international).
    Ten,
    /// 12x12, 72 dark squares, a1 dark (canadian; docs/rules.md §12).
    Twelve,
    /// 8x8, 32 dark squares, a1 dark (english, russian, brazilian, czech).
    Eight,
    /// 8x8, 32 dark squares on the mirrored board, a1 light (italian, spanish).
    EightMirrored,
    /// 8x8, all 64 squares, orthogonal moves (turkish).
    Turkish,
}

/// A playable square, identified by its bit in the board's layout. Use [`Board`] to convert to and from
/// PDN numbers and algebraic names; a `Square` is only meaningful together with its board.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Square(pub(crate) u8);

impl Square {
    /// The bit index of this square in the board's layout.
    pub fn bit(self) -> u32 {
        u32::from(self.0)
    }
    pub(crate) fn mask(self) -> u128 {
        1u128 << self.0
    }
    pub(crate) fn from_mask<B: Bits>(mask: B) -> Square {
        Square(mask.trailing_zeros() as u8)
    }
}

/// A set of squares of one board, one bit per square of the board's layout (bits 64 and up exist only on
/// the 12x12 board).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Bitboard(pub u128);

impl Bitboard {
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn count(self) -> u32 {
        self.0.count_ones()
    }
    pub fn contains(self, sq: Square) -> bool {
        self.0 & sq.mask() != 0
    }
    /// The set as a `u64`, for the boards of at most 64 bits (every board but the 12x12 one, whose squares
    /// above bit 63 this drops).
    #[inline(always)]
    pub fn bits64(self) -> u64 {
        debug_assert!(self.0 >> 64 == 0, "a 12x12 set does not fit in a u64");
        self.0 as u64
    }
}

impl std::ops::BitAnd for Bitboard {
    type Output = Bitboard;
    fn bitand(self, other: Bitboard) -> Bitboard {
        Bitboard(self.0 & other.0)
    }
}

impl Iterator for Bitboard {
    type Item = Square;
    fn next(&mut self) -> Option<Square> {
        if self.0 == 0 {
            None
        } else {
            let sq = Square(self.0.trailing_zeros() as u8);
            self.0 &= self.0 - 1;
            Some(sq)
        }
    }
}

/// Static description of one board: numbering, names and bit layout.
#[derive(Debug)]
pub struct Board {
    pub kind: BoardKind,
    /// Files (and ranks): 12, 10 or 8.
    pub size: u8,
    /// Number of playable squares: 72, 50, 32 or 64.
    pub n_squares: u8,
    /// All playable bits.
    pub mask: u128,
    /// Top row as White sees it (White's promotion row).
    pub top_row: u128,
    /// Bottom row (Black's promotion row).
    pub bottom_row: u128,
    bit_of_index: [u8; 128],
    index_of_bit: [u8; 128],
    file_of_index: [u8; 128],
    rank_of_index: [u8; 128],
}

const NONE: u8 = 0xFF;

const fn build(kind: BoardKind) -> Board {
    let (size, n): (u8, u8) = match kind {
        BoardKind::Ten => (10, 50),
        BoardKind::Twelve => (12, 72),
        BoardKind::Eight | BoardKind::EightMirrored => (8, 32),
        BoardKind::Turkish => (8, 64),
    };
    let mut bit_of_index = [NONE; 128];
    let mut index_of_bit = [NONE; 128];
    let mut file_of_index = [NONE; 128];
    let mut rank_of_index = [NONE; 128];
    let mut mask = 0u128;
    let mut top_row = 0u128;
    let mut bottom_row = 0u128;
    let mut k = 0u8;
    while k < n {
        let (bit, file, row) = match kind {
            BoardKind::Turkish => (k, k % 8, k / 8),
            _ => {
                let h = size / 2;
                let row = k / h;
                let i = k % h;
                let (file, bit_i) = match kind {
                    BoardKind::EightMirrored => {
                        let file = if row.is_multiple_of(2) {
                            2 * i
                        } else {
                            2 * i + 1
                        };
                        (file, h - 1 - i)
                    }
                    _ => {
                        let file = if row.is_multiple_of(2) {
                            2 * i + 1
                        } else {
                            2 * i
                        };
                        (file, i)
                    }
                };
                (row * h + bit_i + row / 2, file, row)
            }
        };
        bit_of_index[k as usize] = bit;
        index_of_bit[bit as usize] = k;
        file_of_index[k as usize] = file;
        rank_of_index[k as usize] = size - 1 - row;
        mask |= 1u128 << bit;
        if row == 0 {
            top_row |= 1u128 << bit;
        }
        if row == size - 1 {
            bottom_row |= 1u128 << bit;
        }
        k += 1;
    }
    Board {
        kind,
        size,
        n_squares: n,
        mask,
        top_row,
        bottom_row,
        bit_of_index,
        index_of_bit,
        file_of_index,
        rank_of_index,
    }
}

pub(crate) static TEN: Board = build(BoardKind::Ten);
pub(crate) static TWELVE: Board = build(BoardKind::Twelve);
pub(crate) static EIGHT: Board = build(BoardKind::Eight);
pub(crate) static EIGHT_MIRRORED: Board = build(BoardKind::EightMirrored);
pub(crate) static TURKISH: Board = build(BoardKind::Turkish);

impl BoardKind {
    /// The static description of this board.
    pub fn board(self) -> &'static Board {
        match self {
            BoardKind::Ten => &TEN,
            BoardKind::Twelve => &TWELVE,
            BoardKind::Eight => &EIGHT,
            BoardKind::EightMirrored => &EIGHT_MIRRORED,
            BoardKind::Turkish => &TURKISH,
        }
    }
}

impl Board {
    /// The square with this PDN number (1-based: 1..=72, 1..=50, 1..=32; Turkish 1..=64 from a8 to h1).
    pub fn square(&self, number: u32) -> Option<Square> {
        if number == 0 || number > u32::from(self.n_squares) {
            return None;
        }
        Some(Square(self.bit_of_index[number as usize - 1]))
    }

    /// The PDN number (1-based) of a square.
    pub fn number(&self, sq: Square) -> u32 {
        u32::from(self.index_of_bit[sq.0 as usize & 127]) + 1
    }

    /// Whether this bit is a playable square of the board.
    pub fn is_square(&self, sq: Square) -> bool {
        sq.0 < 128 && self.index_of_bit[sq.0 as usize] != NONE
    }

    /// File (0 = a) and rank (0 = rank 1) of a square, as White sees the board.
    pub fn coords(&self, sq: Square) -> (u8, u8) {
        let k = self.index_of_bit[sq.0 as usize & 127] as usize;
        (self.file_of_index[k], self.rank_of_index[k])
    }

    /// The playable square at a file (0 = a) and rank (0 = rank 1), if that square is playable.
    pub fn square_at(&self, file: u8, rank: u8) -> Option<Square> {
        if file >= self.size || rank >= self.size {
            return None;
        }
        let row = self.size - 1 - rank;
        if self.kind == BoardKind::Turkish {
            return self.square(u32::from(row) * 8 + u32::from(file) + 1);
        }
        let dark = match self.kind {
            BoardKind::EightMirrored => (file + row).is_multiple_of(2),
            _ => (file + row) % 2 == 1,
        };
        if !dark {
            return None;
        }
        let h = self.size / 2;
        self.square(u32::from(row * h + file / 2) + 1)
    }

    /// Algebraic name of a square (`a1` is White's bottom-left corner).
    pub fn algebraic(&self, sq: Square) -> Algebraic {
        let (file, rank) = self.coords(sq);
        Algebraic { file, rank }
    }

    /// Every playable square in PDN number order.
    pub fn squares(&self) -> impl Iterator<Item = Square> + '_ {
        (0..self.n_squares).map(|k| Square(self.bit_of_index[k as usize]))
    }
}

/// A square's algebraic name (`c3`), displayable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Algebraic {
    pub file: u8,
    pub rank: u8,
}

impl fmt::Display for Algebraic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", (b'a' + self.file) as char, self.rank + 1)
    }
}

/// Movement geometry used by the generator: up to eight directions, each a constant shift plus a mask that
/// removes squares which wrapped around an edge. Directions `d` and `d ^ 2` are opposite. Directions 0-3
/// are the ones pieces move along (diagonals; Turkish: orthogonals); Frisian adds captures along ranks and
/// files as directions 4-7.
pub(crate) trait Geometry {
    /// The word of this board: `u64`, or `u128` on the 12x12 board.
    type B: Bits;
    /// Number of capture directions: 4, or 8 on the Frisian board.
    const N_DIRS: usize;
    /// Bit set of every capture direction.
    const ALL_DIRS: u8;
    /// Directions 0-3 (kept as four-entry tables, as the boards without orthogonal captures had them: a
    /// uniform mask table folds to a constant in the generator's loops).
    const SHIFT: [i32; 4];
    const STEP_MASK: [Self::B; 4];
    /// Directions 4-7 (Frisian only; unused where `N_DIRS` is 4).
    const SHIFT_ORTHO: [i32; 4] = [0; 4];
    const STEP_MASK_ORTHO: [Self::B; 4] = [<Self::B as Bits>::ZERO; 4];
    /// Diagonal boards have ghosts and at most 55 bits (77 on 12x12); the orthogonal board uses all 64.
    const BOARD: &'static Board;
    /// `BOARD`'s playable squares and its top and bottom rows, in this geometry's word.
    const MASK: Self::B;
    const TOP_ROW: Self::B;
    const BOTTOM_ROW: Self::B;
    /// The Frisian king-move limit applies (docs/rules.md §11.5).
    const KING_MOVE_LIMIT: bool = false;
    /// Per bit `s`: the neighbours `o` a man on `s` can jump, those whose square beyond (`2o - s` in the bit
    /// layout) is on the board (the eight-direction board's man captures; empty where it is not used).
    const JUMP_NEIGHBOURS: [Self::B; 64] = [<Self::B as Bits>::ZERO; 64];
    /// Per bit `s`: the squares `2o - s` beyond those neighbours, where a man on `s` lands (and from where
    /// a man lands on `s`).
    const JUMP_LANDINGS: [Self::B; 64] = [<Self::B as Bits>::ZERO; 64];
    /// Per bit `t`: the neighbours `x` from which a man jumps a piece on `t` (the square beyond, `2t - x`,
    /// is on the board).
    const JUMPERS: [Self::B; 64] = [<Self::B as Bits>::ZERO; 64];
    /// Rules every variant played on this geometry shares, fixed at compile time so that the generator's
    /// tests of them fold away; `None` reads the position's rule table. (`geometry_rules_match_the_tables`
    /// checks them against docs/rules.md's tables in `variant.rs`.)
    const FLYING: Option<bool> = None;
    const MEN_CAPTURE_BACKWARD: Option<bool> = None;
    const MEN_CAPTURE_KINGS: Option<bool> = None;
    /// Captured pieces leave the board when the chain ends (the Turkish strike is the other way).
    const STRIKE: Option<bool> = None;
    const PRECEDENCE: Option<Precedence> = None;
    /// A variant on this geometry may end at the first crowning (breakthrough, docs/rules.md §9.3; only
    /// on [`Diag10`]): where it is false, perft's tests of that goal fold away.
    const FIRST_KING: bool = false;
    /// perft counts the replies to the quiet men's steps one ply above its last in bulk where the
    /// replying side has no king and no capture ([`crate::movegen::quiet_replies`]): the Frisian board
    /// and the 8x8 boards.
    const QUIET_REPLIES: bool = false;
    /// perft's last ply counts the men's capture chains on the 8x8 boards' bitboards where no king of the
    /// side to move can capture ([`crate::movegen::men_chains8`]; the Frisian board has its own).
    const MEN_CHAINS8: bool = false;
    /// The direction of each step, indexed by its shift + 16 (the eight-direction board's man captures).
    const DIR_OF_SHIFT: [u8; 32] = dir_table(Self::SHIFT, Self::SHIFT_ORTHO);
}

/// [`Geometry::DIR_OF_SHIFT`] from the shift tables (shifts within ±15).
const fn dir_table(diagonal: [i32; 4], ortho: [i32; 4]) -> [u8; 32] {
    let mut t = [0u8; 32];
    let mut d = 0;
    while d < 4 {
        t[(diagonal[d] + 16) as usize] = d as u8;
        if ortho[d] != 0 {
            t[(ortho[d] + 16) as usize] = 4 + d as u8;
        }
        d += 1;
    }
    t
}

#[inline(always)]
pub(crate) fn step<G: Geometry>(b: G::B, d: usize) -> G::B {
    // The four-direction boards index exactly as before the Frisian geometry existed (resolved at compile
    // time), so their generated code is unchanged.
    let (s, mask) = if G::N_DIRS == 4 || d < 4 {
        (G::SHIFT[d], G::STEP_MASK[d])
    } else {
        (G::SHIFT_ORTHO[d - 4], G::STEP_MASK_ORTHO[d - 4])
    };
    (if s > 0 {
        b << s as u32
    } else {
        b >> (-s) as u32
    }) & mask
}

/// [`step`] for a result that is only used intersected with a set of squares of the board: the mask is
/// left out where it is the board's own mask (the diagonal steps of the ghost layout, the Frisian steps
/// along files, Turkish steps along files: a step off an edge lands on a ghost bit or off the board, never
/// on another square), so only the edge masks of steps along ranks remain. Resolved at compile time.
#[inline(always)]
pub(crate) fn step_into<G: Geometry>(b: G::B, d: usize) -> G::B {
    let (s, mask) = if G::N_DIRS == 4 || d < 4 {
        (G::SHIFT[d], G::STEP_MASK[d])
    } else {
        (G::SHIFT_ORTHO[d - 4], G::STEP_MASK_ORTHO[d - 4])
    };
    let shifted = if s > 0 {
        b << s as u32
    } else {
        b >> (-s) as u32
    };
    if mask == G::MASK {
        shifted
    } else {
        shifted & mask
    }
}

/// The total size of `sets`, sets of few squares each (perft's last ply: the men that can capture, per
/// direction). Without a popcount instruction (the default x86-64 target) a count costs a dozen
/// instructions a set, so each set is first tested for one square at most, and counted only if some set
/// has more.
#[inline(always)]
pub(crate) fn count_sparse<B: Bits>(sets: &[B]) -> u32 {
    if cfg!(target_feature = "popcnt") {
        return sets.iter().map(|s| s.count_ones()).sum();
    }
    let mut n = 0;
    let mut more = B::ZERO;
    for s in sets {
        n += u32::from(!s.is_zero());
        more |= s.clear_lowest();
    }
    if more.is_zero() {
        n
    } else {
        sets.iter().map(|s| s.count_ones()).sum()
    }
}

/// Calls `f` for every capture direction of `G` in ascending order, one call per direction written out,
/// so that every `step` inside is a constant shift (the compiler does not unroll every loop over
/// directions, and a step by a direction read at run time is a table lookup and a variable shift).
#[inline(always)]
pub(crate) fn each_dir<G: Geometry>(mut f: impl FnMut(usize)) {
    f(0);
    f(1);
    f(2);
    f(3);
    if G::N_DIRS == 8 {
        f(4);
        f(5);
        f(6);
        f(7);
    }
}

/// 10x10: up-left, up-right, down-right, down-left.
pub(crate) struct Diag10;
impl Geometry for Diag10 {
    type B = u64;
    const N_DIRS: usize = 4;
    const ALL_DIRS: u8 = 0b1111;
    const SHIFT: [i32; 4] = [-6, -5, 6, 5];
    const STEP_MASK: [u64; 4] = [TEN.mask as u64; 4];
    const BOARD: &'static Board = &TEN;
    const MASK: u64 = TEN.mask as u64;
    const TOP_ROW: u64 = TEN.top_row as u64;
    const BOTTOM_ROW: u64 = TEN.bottom_row as u64;
    // International and its goal variants (antidraughts, breakthrough, killer).
    const FLYING: Option<bool> = Some(true);
    const MEN_CAPTURE_BACKWARD: Option<bool> = Some(true);
    const MEN_CAPTURE_KINGS: Option<bool> = Some(true);
    const STRIKE: Option<bool> = Some(true);
    const PRECEDENCE: Option<Precedence> = Some(Precedence::MostPieces);
    const FIRST_KING: bool = true;
}

/// 12x12 (canadian, docs/rules.md §12): the 10x10 layout with six squares a row, so the steps are 7 and 6
/// bits; 72 squares and five ghosts take bits 0-76 of a `u128`.
pub(crate) struct Diag12;
impl Geometry for Diag12 {
    type B = u128;
    const N_DIRS: usize = 4;
    const ALL_DIRS: u8 = 0b1111;
    const SHIFT: [i32; 4] = [-7, -6, 7, 6];
    const STEP_MASK: [u128; 4] = [TWELVE.mask; 4];
    const BOARD: &'static Board = &TWELVE;
    const MASK: u128 = TWELVE.mask;
    const TOP_ROW: u128 = TWELVE.top_row;
    const BOTTOM_ROW: u128 = TWELVE.bottom_row;
    // Canadian: international's rules.
    const FLYING: Option<bool> = Some(true);
    const MEN_CAPTURE_BACKWARD: Option<bool> = Some(true);
    const MEN_CAPTURE_KINGS: Option<bool> = Some(true);
    const STRIKE: Option<bool> = Some(true);
    const PRECEDENCE: Option<Precedence> = Some(Precedence::MostPieces);
}

const TEN_MASK: u64 = TEN.mask as u64;

/// The squares of the 10x10 board's leftmost and rightmost dark square of each row (PDN 1, 6, 11, ... and
/// 5, 10, 15, ...): a step along a row that lands there has wrapped around the edge.
const fn row_ends(first: bool) -> u64 {
    let mut m = 0u64;
    let mut row = 0u8;
    while row < 10 {
        let i = if first { 0 } else { 4 };
        m |= 1u64 << (row * 5 + i + row / 2);
        row += 1;
    }
    m
}

/// The union of the eight steps of every square of the Frisian board.
const fn frisian_neighbours() -> [u64; 64] {
    let shifts = [-6i32, -5, 6, 5, -11, 1, 11, -1];
    let masks = [
        TEN_MASK,
        TEN_MASK,
        TEN_MASK,
        TEN_MASK,
        TEN_MASK,
        TEN_MASK & !row_ends(true),
        TEN_MASK,
        TEN_MASK & !row_ends(false),
    ];
    let mut out = [0u64; 64];
    let mut bit = 0;
    while bit < 64 {
        let b = 1u64 << bit;
        if TEN_MASK & b != 0 {
            let mut d = 0;
            while d < 8 {
                let s = shifts[d];
                let t = if s > 0 { b << s } else { b >> -s };
                out[bit] |= t & masks[d];
                d += 1;
            }
        }
        bit += 1;
    }
    out
}

/// The neighbours of every square of the Frisian board that a man can jump (see
/// [`Geometry::JUMP_NEIGHBOURS`]): `o` is a neighbour of `s`, and `2o - s`, one more step the same way, a
/// neighbour of `o` (a step is a constant shift, and each direction has its own shift).
const fn frisian_jump_neighbours() -> [u64; 64] {
    let neighbours = frisian_neighbours();
    let mut out = [0u64; 64];
    let mut s = 0;
    while s < 64 {
        let mut c = neighbours[s];
        while c != 0 {
            let o = c.trailing_zeros() as usize;
            c &= c - 1;
            let l = 2 * o as i32 - s as i32;
            if l >= 0 && l < 64 && neighbours[o] & (1u64 << l) != 0 {
                out[s] |= 1u64 << o;
            }
        }
        s += 1;
    }
    out
}

/// The neighbours of every square of the Frisian board from which a man jumps a piece on it (see
/// [`Geometry::JUMPERS`]): `x` and `2t - x` are both neighbours of `t` (the opposite steps).
const fn frisian_jumpers() -> [u64; 64] {
    let neighbours = frisian_neighbours();
    let mut out = [0u64; 64];
    let mut t = 0;
    while t < 64 {
        let mut c = neighbours[t];
        while c != 0 {
            let x = c.trailing_zeros() as usize;
            c &= c - 1;
            let l = 2 * t as i32 - x as i32;
            if l >= 0 && l < 64 && neighbours[t] & (1u64 << l) != 0 {
                out[t] |= 1u64 << x;
            }
        }
        t += 1;
    }
    out
}

/// The squares two steps from every square of the Frisian board (see [`Geometry::JUMP_LANDINGS`]).
const fn frisian_jump_landings() -> [u64; 64] {
    let jumpable = frisian_jump_neighbours();
    let mut out = [0u64; 64];
    let mut s = 0;
    while s < 64 {
        let mut c = jumpable[s];
        while c != 0 {
            let o = c.trailing_zeros() as usize;
            c &= c - 1;
            out[s] |= 1u64 << (2 * o - s);
        }
        s += 1;
    }
    out
}

/// The squares a man on bit `s` of the Frisian board jumps to over `jumped`, a subset of
/// `JUMP_NEIGHBOURS[s]` (each neighbour `o` gives `2o - s`), without a loop over them: rotated so that `s`
/// is bit 22, the neighbours are eight fixed bits (offsets ±1, ±5, ±6, ±11), which a multiplication by
/// [`FRISIAN_JUMP_MAGIC`] gathers into the top byte, the index of [`FRISIAN_JUMPS`] (the landings, bits
/// `22 + 2 * offset`, rotated back). The squares beyond are on the board for those neighbours.
#[inline(always)]
pub(crate) fn frisian_jumps(s: u32, jumped: u64) -> u64 {
    let r = s.wrapping_sub(FRISIAN_JUMP_CENTRE);
    let index = jumped.rotate_right(r).wrapping_mul(FRISIAN_JUMP_MAGIC) >> 56;
    FRISIAN_JUMPS[index as usize].rotate_left(r)
}

const FRISIAN_JUMP_CENTRE: u32 = 22;
const FRISIAN_JUMP_OFFSETS: [i32; 8] = [-11, -6, -5, -1, 1, 5, 6, 11];
/// Maps every subset of the eight neighbour bits around bit 22 to its own top byte (found by search; the
/// test `frisian_jumps_match_the_neighbours` checks every square and subset).
const FRISIAN_JUMP_MAGIC: u64 = 0x0c02_0404_0080_0200;

/// See [`frisian_jumps`].
const FRISIAN_JUMPS: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut k = 0;
    while k < 256 {
        let (mut x, mut l) = (0u64, 0u64);
        let mut i = 0;
        while i < 8 {
            if k >> i & 1 != 0 {
                let o = FRISIAN_JUMP_CENTRE as i32 + FRISIAN_JUMP_OFFSETS[i];
                x |= 1 << o;
                l |= 1 << (2 * o - FRISIAN_JUMP_CENTRE as i32);
            }
            i += 1;
        }
        t[(x.wrapping_mul(FRISIAN_JUMP_MAGIC) >> 56) as usize] = l;
        k += 1;
    }
    t
};

/// Frisian 10x10 (docs/rules.md §11.2): the four diagonals of [`Diag10`], then up, right, down, left over
/// the dark squares two ranks or two files away (a row holds five dark squares one bit apart; two rows down
/// is eleven bits with the ghost layout).
pub(crate) struct Frisian10;
impl Geometry for Frisian10 {
    type B = u64;
    const N_DIRS: usize = 8;
    const ALL_DIRS: u8 = 0xFF;
    const SHIFT: [i32; 4] = [-6, -5, 6, 5];
    const STEP_MASK: [u64; 4] = [TEN_MASK; 4];
    const SHIFT_ORTHO: [i32; 4] = [-11, 1, 11, -1];
    const STEP_MASK_ORTHO: [u64; 4] = [
        TEN_MASK,
        TEN_MASK & !row_ends(true),
        TEN_MASK,
        TEN_MASK & !row_ends(false),
    ];
    const BOARD: &'static Board = &TEN;
    const MASK: u64 = TEN_MASK;
    const TOP_ROW: u64 = TEN.top_row as u64;
    const BOTTOM_ROW: u64 = TEN.bottom_row as u64;
    const KING_MOVE_LIMIT: bool = true;
    const JUMP_NEIGHBOURS: [u64; 64] = frisian_jump_neighbours();
    const JUMP_LANDINGS: [u64; 64] = frisian_jump_landings();
    const JUMPERS: [u64; 64] = frisian_jumpers();
    // Frisian and Frysk.
    const FLYING: Option<bool> = Some(true);
    const MEN_CAPTURE_BACKWARD: Option<bool> = Some(true);
    const MEN_CAPTURE_KINGS: Option<bool> = Some(true);
    const STRIKE: Option<bool> = Some(true);
    const PRECEDENCE: Option<Precedence> = Some(Precedence::Frisian);
    const QUIET_REPLIES: bool = true;
}

/// 8x8 diagonal (also the mirrored board, which shares the layout), one type per group of rule sets
/// ([`Rules8`]), so that the rules of the group are constants, as on the other boards.
pub(crate) struct Diag8<R: Rules8>(std::marker::PhantomData<R>);
impl<R: Rules8> Geometry for Diag8<R> {
    type B = u64;
    const N_DIRS: usize = 4;
    const ALL_DIRS: u8 = 0b1111;
    const SHIFT: [i32; 4] = [-5, -4, 5, 4];
    const STEP_MASK: [u64; 4] = [EIGHT.mask as u64; 4];
    const BOARD: &'static Board = &EIGHT;
    const MASK: u64 = EIGHT.mask as u64;
    const TOP_ROW: u64 = EIGHT.top_row as u64;
    const BOTTOM_ROW: u64 = EIGHT.bottom_row as u64;
    const FLYING: Option<bool> = Some(R::FLYING);
    const MEN_CAPTURE_BACKWARD: Option<bool> = Some(R::MEN_CAPTURE_BACKWARD);
    const MEN_CAPTURE_KINGS: Option<bool> = Some(R::MEN_CAPTURE_KINGS);
    // Every 8x8 rule set (with short kings the strike and removal at once give the same moves).
    const STRIKE: Option<bool> = Some(true);
    const PRECEDENCE: Option<Precedence> = Some(R::PRECEDENCE);
    const QUIET_REPLIES: bool = true;
    const MEN_CHAINS8: bool = true;
}

/// The rules a group of 8x8 rule sets shares (docs/rules.md §3), fixed for [`Diag8`].
pub(crate) trait Rules8 {
    const FLYING: bool;
    const MEN_CAPTURE_BACKWARD: bool;
    const MEN_CAPTURE_KINGS: bool;
    const PRECEDENCE: Precedence;
}

/// English.
pub(crate) struct English8;
impl Rules8 for English8 {
    const FLYING: bool = false;
    const MEN_CAPTURE_BACKWARD: bool = false;
    const MEN_CAPTURE_KINGS: bool = true;
    const PRECEDENCE: Precedence = Precedence::Free;
}

/// Italian.
pub(crate) struct Italian8;
impl Rules8 for Italian8 {
    const FLYING: bool = false;
    const MEN_CAPTURE_BACKWARD: bool = false;
    const MEN_CAPTURE_KINGS: bool = false;
    const PRECEDENCE: Precedence = Precedence::Italian;
}

/// Russian and pool.
pub(crate) struct Russian8;
impl Rules8 for Russian8 {
    const FLYING: bool = true;
    const MEN_CAPTURE_BACKWARD: bool = true;
    const MEN_CAPTURE_KINGS: bool = true;
    const PRECEDENCE: Precedence = Precedence::Free;
}

/// Brazilian.
pub(crate) struct Brazilian8;
impl Rules8 for Brazilian8 {
    const FLYING: bool = true;
    const MEN_CAPTURE_BACKWARD: bool = true;
    const MEN_CAPTURE_KINGS: bool = true;
    const PRECEDENCE: Precedence = Precedence::MostPieces;
}

/// Spanish and portuguese.
pub(crate) struct Spanish8;
impl Rules8 for Spanish8 {
    const FLYING: bool = true;
    const MEN_CAPTURE_BACKWARD: bool = false;
    const MEN_CAPTURE_KINGS: bool = true;
    const PRECEDENCE: Precedence = Precedence::MostPiecesThenKings;
}

/// Czech.
pub(crate) struct Czech8;
impl Rules8 for Czech8 {
    const FLYING: bool = true;
    const MEN_CAPTURE_BACKWARD: bool = false;
    const MEN_CAPTURE_KINGS: bool = true;
    const PRECEDENCE: Precedence = Precedence::KingFirst;
}

const FILE_A: u64 = 0x0101_0101_0101_0101;
const FILE_H: u64 = FILE_A << 7;

/// Turkish: up, right, down, left.
pub(crate) struct Ortho;
impl Geometry for Ortho {
    type B = u64;
    const N_DIRS: usize = 4;
    const ALL_DIRS: u8 = 0b1111;
    const SHIFT: [i32; 4] = [-8, 1, 8, -1];
    const STEP_MASK: [u64; 4] = [!0, !FILE_A, !0, !FILE_H];
    const BOARD: &'static Board = &TURKISH;
    const MASK: u64 = TURKISH.mask as u64;
    const TOP_ROW: u64 = TURKISH.top_row as u64;
    const BOTTOM_ROW: u64 = TURKISH.bottom_row as u64;
    // Turkish.
    const FLYING: Option<bool> = Some(true);
    const MEN_CAPTURE_BACKWARD: Option<bool> = Some(false);
    const MEN_CAPTURE_KINGS: Option<bool> = Some(true);
    const STRIKE: Option<bool> = Some(false);
    const PRECEDENCE: Option<Precedence> = Some(Precedence::MostPieces);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(b: &Board, n: u32) -> String {
        b.algebraic(b.square(n).unwrap()).to_string()
    }

    #[test]
    fn numbering_matches_the_rule_book() {
        assert_eq!(name(&TEN, 1), "b10");
        assert_eq!(name(&TEN, 5), "j10");
        assert_eq!(name(&TEN, 46), "a1");
        assert_eq!(name(&TEN, 50), "i1");
        assert_eq!(name(&EIGHT, 1), "b8");
        assert_eq!(name(&EIGHT, 29), "a1");
        assert_eq!(name(&EIGHT, 32), "g1");
        assert_eq!(name(&EIGHT_MIRRORED, 1), "a8");
        assert_eq!(name(&EIGHT_MIRRORED, 32), "h1");
        assert_eq!(name(&TURKISH, 1), "a8");
        assert_eq!(name(&TURKISH, 64), "h1");
        assert_eq!(name(&TWELVE, 1), "b12");
        assert_eq!(name(&TWELVE, 6), "l12");
        assert_eq!(name(&TWELVE, 67), "a1");
        assert_eq!(name(&TWELVE, 72), "k1");
        assert_eq!(name(&TWELVE, 43), "a5");
        assert_eq!(name(&TWELVE, 30), "l8");
    }

    #[test]
    fn coordinates_round_trip() {
        for b in [&TEN, &TWELVE, &EIGHT, &EIGHT_MIRRORED, &TURKISH] {
            assert_eq!(b.squares().count(), b.n_squares as usize);
            assert_eq!(b.mask.count_ones(), u32::from(b.n_squares));
            for sq in b.squares() {
                let (f, r) = b.coords(sq);
                assert_eq!(b.square_at(f, r), Some(sq));
                assert_eq!(b.square(b.number(sq)), Some(sq));
            }
        }
    }

    fn neighbours<G: Geometry>(n: u32) -> Vec<String> {
        let b = G::BOARD;
        let m = <G::B as Bits>::bit(b.square(n).unwrap().bit());
        (0..G::N_DIRS)
            .filter_map(|d| {
                let t = step::<G>(m, d);
                (!t.is_zero()).then(|| b.algebraic(Square::from_mask(t)).to_string())
            })
            .collect()
    }

    #[test]
    fn frisian_jumps_match_the_neighbours() {
        for sq in TEN.squares() {
            let s = sq.bit();
            let all = Frisian10::JUMP_NEIGHBOURS[s as usize];
            // Every subset of the jumpable neighbours.
            let mut sub = all;
            loop {
                let mut want = 0u64;
                let mut c = sub;
                while c != 0 {
                    let o = c.trailing_zeros();
                    c &= c - 1;
                    want |= 1 << (2 * o - s);
                }
                assert_eq!(frisian_jumps(s, sub), want, "{sq:?} {sub:#x}");
                if sub == 0 {
                    break;
                }
                sub = (sub - 1) & all;
            }
        }
    }

    #[test]
    fn steps_never_wrap() {
        // 10x10: square 6 is a9 (left edge), square 5 is j10 (right edge, top).
        assert_eq!(neighbours::<Diag10>(6), vec!["b10", "b8"]);
        assert_eq!(neighbours::<Diag10>(5), vec!["i9"]);
        assert_eq!(neighbours::<Diag10>(28), vec!["d6", "f6", "f4", "d4"]);
        assert_eq!(neighbours::<Diag8<Russian8>>(12), vec!["g7", "g5"]);
        // 12x12: 7 is a11 (left edge), 6 is l12 (right edge, top), 72 is k1 (bottom right corner).
        assert_eq!(neighbours::<Diag12>(7), vec!["b12", "b10"]);
        assert_eq!(neighbours::<Diag12>(6), vec!["k11"]);
        assert_eq!(neighbours::<Diag12>(72), vec!["j2", "l2"]);
        assert_eq!(neighbours::<Diag12>(40), vec!["g7", "i7", "i5", "g5"]);
        assert_eq!(neighbours::<Ortho>(8), vec!["h7", "g8"]);
        assert_eq!(neighbours::<Ortho>(9), vec!["a8", "b7", "a6"]);
        // every step from every square lands on a real neighbour
        fn check<G: Geometry>() {
            let b = G::BOARD;
            for sq in b.squares() {
                let (f, r) = b.coords(sq);
                let m = <G::B as Bits>::bit(sq.bit());
                for d in 0..G::N_DIRS {
                    let t = step::<G>(m, d);
                    if !t.is_zero() {
                        assert_eq!(t.count_ones(), 1);
                        let (tf, tr) = b.coords(Square::from_mask(t));
                        let (df, dr) = (i32::from(tf) - i32::from(f), i32::from(tr) - i32::from(r));
                        if d < 4 {
                            assert!(df.abs() <= 1 && dr.abs() <= 1);
                        } else {
                            // Frisian orthogonal steps: two files along the row or two ranks along the file.
                            assert!((df.abs() == 2 && dr == 0) || (df == 0 && dr.abs() == 2));
                        }
                        assert_eq!(step::<G>(t, d ^ 2), m);
                    } else if d >= 4 {
                        // no step only where the square two files or ranks away is off the board
                        let (tf, tr) = match d {
                            4 => (i32::from(f), i32::from(r) + 2),
                            5 => (i32::from(f) + 2, i32::from(r)),
                            6 => (i32::from(f), i32::from(r) - 2),
                            _ => (i32::from(f) - 2, i32::from(r)),
                        };
                        assert!(
                            !(0..10).contains(&tf) || !(0..10).contains(&tr),
                            "{sq:?} {d}"
                        );
                    }
                }
            }
        }
        check::<Diag10>();
        check::<Diag8<Russian8>>();
        check::<Diag12>();
        check::<Ortho>();
        check::<Frisian10>();
        for (d, s) in Frisian10::SHIFT
            .iter()
            .chain(&Frisian10::SHIFT_ORTHO)
            .enumerate()
        {
            assert_eq!(usize::from(Frisian10::DIR_OF_SHIFT[(s + 16) as usize]), d);
        }
        for sq in TEN.squares() {
            let m = 1u64 << sq.bit();
            let all = (0..8).fold(0, |acc, d| acc | step::<Frisian10>(m, d));
            assert_eq!(frisian_neighbours()[sq.0 as usize], all, "{sq:?}");
        }
        for sq in TEN.squares() {
            let m = 1u64 << sq.bit();
            let jumpable = (0..8).fold(0, |acc, d| {
                let o = step::<Frisian10>(m, d);
                if step::<Frisian10>(o, d) != 0 {
                    acc | o
                } else {
                    acc
                }
            });
            assert_eq!(
                Frisian10::JUMP_NEIGHBOURS[sq.0 as usize],
                jumpable,
                "{sq:?}"
            );
            let landings = (0..8).fold(0, |acc, d| {
                acc | step::<Frisian10>(step::<Frisian10>(m, d), d)
            });
            assert_eq!(Frisian10::JUMP_LANDINGS[sq.0 as usize], landings, "{sq:?}");
            let jumpers = (0..8).fold(0, |acc, d| {
                let x = step::<Frisian10>(m, d);
                if step::<Frisian10>(m, d ^ 2) != 0 {
                    acc | x
                } else {
                    acc
                }
            });
            assert_eq!(Frisian10::JUMPERS[sq.0 as usize], jumpers, "{sq:?}");
        }
        // Frisian: square 28 (e5) also reaches e7 (18), g5 (29), e3 (38), c5 (27); 6 (a9) c9 and a7.
        assert_eq!(
            neighbours::<Frisian10>(28),
            vec!["d6", "f6", "f4", "d4", "e7", "g5", "e3", "c5"]
        );
        assert_eq!(neighbours::<Frisian10>(6), vec!["b10", "b8", "c9", "a7"]);
        assert_eq!(neighbours::<Frisian10>(5), vec!["i9", "j8", "h10"]);
    }
}
