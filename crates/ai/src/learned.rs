//! The learned evaluation: pattern tables over board windows plus a few global features, two game phases.
//!
//! Layout (the same code computes the search's score and the trainer's features, so they cannot disagree):
//! - **Windows.** Every 4x4 block of the board whose corner is on an even file and rank (international:
//!   16 blocks, 8x8 boards: 9, canadian's 12x12: 25) holds 8 playable squares; Turkish uses 4x2 blocks (files 0, 2, 4; ranks 0,
//!   2, 4, 6: 12 blocks of 8 squares). Each block has a table of 3^8 = 6561 entries, indexed by the
//!   contents of its 8 squares (empty, own man, opponent man; kings are left to the global features).
//! - **Both colours share the tables.** A table is written from its owner's side: White applies table `w` to
//!   block `w` of the board; Black applies the same table to the block rotated by 180 degrees, with the
//!   colours swapped. So a position and its colour-mirrored copy get opposite scores, and every table
//!   learns from both sides' men.
//! - **Big windows** (optional, `Big`; no shipped file has them): the 4-file by 6-row rectangles of
//!   each side's half of a diagonal board, 12 squares and 3^12 entries a table, each read by its owner
//!   only; their tables follow the blocks' tables, before the global features ([`Layout::dense_base`]).
//! - **Index by lookup.** A block's squares are gathered from the men bitboards in a few shift-and-mask
//!   chunks (runs of adjacent bits) into an 8-bit number per colour; two 256-entry tables per block turn
//!   those into the base-3 index of the white view and of the black view.
//! - **Global features** (White minus Black): men, kings, tempo (rows advanced, summed), balance (how
//!   evenly the men spread over the left and right wings), runaway men one and two rows from promotion,
//!   having a king, the side to move, king mobility (the empty squares each king sees along its lines, one
//!   square each way for short kings) and kings on the long diagonal. A weights file written before the
//!   last two existed still loads, with them at zero.
//! - **Phases.** Every weight has a middlegame and an endgame value; the score blends them by the game's
//!   [`Phase`]: the number of men left (all men: middlegame; none: endgame), or the men's rows still to go
//!   to promotion, summed over both sides ("pip", as Scan 2.0 blends; the start position: middlegame),
//!   which also moves toward the endgame as the men advance. The weights file says which.
//!
//! - **Words.** The sets are read as `u64` on every board of up to 64 squares and as `u128` on the 12x12
//!   board ([`Word`]); the code is the same, monomorphised, so the narrow boards keep their `u64` speed.
//!
//! Weights are `i16` in quarter centi-men ([`UNIT`]). The file format ([`LearnedWeights::to_bytes`]): the
//! magic `DRW2` (or `DRW3` and a phase byte, for weights blended by pip; or `DRW4`, the phase byte and the
//! number of big tables, for weights with big windows), the variant key's length and
//! bytes, the number of tables and entries per table, the number of global features, then every weight's
//! two values (middlegame, endgame), tables first, as runs of zeros and varint values (the first format,
//! `DRW1`, held them as plain `i16` and is still read).

use std::ops::{BitAnd, BitOr, Not, Shr};

use draughts_engine::{Board, BoardKind, Color, Position, Variant};

/// Weight units per centi-man.
pub const UNIT: i32 = 4;
/// Squares per window.
pub const WINDOW: usize = 8;
/// Entries per table (3^8).
pub const TABLE: usize = 6561;
/// Squares per big window (4 files by 6 rows).
pub const BIG_WINDOW: usize = 12;
/// Entries per big table (3^12).
pub const BIG_TABLE: usize = 531_441;
/// Global features.
pub const N_DENSE: usize = 10;
/// The names of the global features, in order.
pub const DENSE_NAMES: [&str; N_DENSE] = [
    "men",
    "kings",
    "tempo",
    "balance",
    "runaway-1",
    "runaway-2",
    "has-king",
    "side-to-move",
    "king-mobility",
    "king-diagonal",
];

mod sealed {
    pub trait Sealed {}
    impl Sealed for u64 {}
    impl Sealed for u128 {}
}

/// The word a position's sets are read in: `u64` (every board of up to 64 squares) or `u128` (the 12x12
/// board). The evaluation and the trainer's features are monomorphised over it, so the boards of up to 64
/// squares keep their `u64` code.
pub trait Word:
    Copy
    + Eq
    + BitAnd<Output = Self>
    + BitOr<Output = Self>
    + Not<Output = Self>
    + Shr<u32, Output = Self>
    + sealed::Sealed
{
    const ZERO: Self;
    /// Set bits.
    fn ones(self) -> i32;
    /// The lowest set bit's index.
    fn first(self) -> usize;
    /// The set without its lowest bit.
    fn without_first(self) -> Self;
    /// Bits 0-63.
    fn low(self) -> u64;
    /// The board tables of `layout` in this word.
    #[doc(hidden)]
    fn masks(layout: &Layout) -> &Masks<Self>;
    /// A position's sets in this word: White's pieces, Black's, the kings.
    fn of(pos: &Position) -> (Self, Self, Self);
}

/// The bit operations both words share, one definition for the two `impl`s.
macro_rules! word_bits {
    ($t:ty) => {
        const ZERO: $t = 0;
        #[inline(always)]
        fn ones(self) -> i32 {
            self.count_ones() as i32
        }
        #[inline(always)]
        fn first(self) -> usize {
            self.trailing_zeros() as usize
        }
        #[inline(always)]
        fn without_first(self) -> $t {
            self & self.wrapping_sub(1)
        }
    };
}

impl Word for u64 {
    word_bits!(u64);
    #[inline(always)]
    fn low(self) -> u64 {
        self
    }
    #[inline(always)]
    fn masks(layout: &Layout) -> &Masks<u64> {
        debug_assert!(!layout.wide, "the 12x12 board is read in u128");
        &layout.narrow
    }
    fn of(pos: &Position) -> (u64, u64, u64) {
        (
            pos.pieces(Color::White).bits64(),
            pos.pieces(Color::Black).bits64(),
            pos.kings().bits64(),
        )
    }
}

impl Word for u128 {
    word_bits!(u128);
    #[inline(always)]
    fn low(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn masks(layout: &Layout) -> &Masks<u128> {
        &layout.wide_masks
    }
    fn of(pos: &Position) -> (u128, u128, u128) {
        (
            pos.pieces(Color::White).0,
            pos.pieces(Color::Black).0,
            pos.kings().0,
        )
    }
}

/// The board tables of the global features in one [`Word`] (built in `u128`; the `u64` copy is the same
/// sets truncated, used on the boards of up to 64 squares).
#[doc(hidden)]
#[derive(Clone, Debug)]
pub struct Masks<W> {
    /// Tempo planes: a white man on a square adds `2^k` for each plane `k` holding it (rows advanced).
    white_rows: Vec<W>,
    black_rows: Vec<W>,
    /// Balance planes (distance from the board's middle file, doubled) for the left and right wings.
    left: Vec<W>,
    right: Vec<W>,
    white_one_to_go: W,
    white_two_to_go: W,
    black_one_to_go: W,
    black_two_to_go: W,
    /// Forward neighbours of every bit, per colour.
    white_forward: Box<[W; 128]>,
    black_forward: Box<[W; 128]>,
    /// The long diagonal (corner to corner, the double corners' line); empty on the Turkish board.
    main_diagonal: W,
}

impl Masks<u128> {
    fn truncated(&self) -> Masks<u64> {
        let t = |v: &[u128]| v.iter().map(|&x| x as u64).collect::<Vec<u64>>();
        let f = |a: &[u128; 128]| Box::new(a.map(|x| x as u64));
        Masks {
            white_rows: t(&self.white_rows),
            black_rows: t(&self.black_rows),
            left: t(&self.left),
            right: t(&self.right),
            white_one_to_go: self.white_one_to_go as u64,
            white_two_to_go: self.white_two_to_go as u64,
            black_one_to_go: self.black_one_to_go as u64,
            black_two_to_go: self.black_two_to_go as u64,
            white_forward: f(&self.white_forward),
            black_forward: f(&self.black_forward),
            main_diagonal: self.main_diagonal as u64,
        }
    }
}

/// One shift-and-mask step of gathering a window's squares: `((bb >> shift) & mask) << dest`.
#[derive(Clone, Copy, Debug, Default)]
struct Chunk {
    shift: u8,
    dest: u8,
    mask: u64,
}

#[derive(Clone, Debug)]
struct Window {
    chunks: Vec<Chunk>,
    /// Gathered 8-bit value -> base-3 digits (1 per set bit) of the white view, and of the black view.
    white_digits: Box<[u16; 256]>,
    black_digits: Box<[u16; 256]>,
    /// The table White applies here (this window) and the table Black applies here (the rotated one).
    white_table: u32,
    black_table: u32,
}

/// The board geometry of the learned evaluation of one variant.
#[derive(Clone, Debug)]
pub struct Layout {
    variant: Variant,
    windows: Vec<Window>,
    /// The fast gathering of the diagonal boards (`None` on the Turkish board: chunks).
    pairs: Option<RowPairs>,
    /// The big windows, when the weights have them (see [`Big`]).
    big: Option<Big>,
    /// Per window, the owner squares whose men's value (material and tempo) is folded into its table:
    /// `(digit position, rows advanced)`; every square belongs to exactly one window.
    folded: Vec<Vec<(u8, u8)>>,
    /// Balance by bitboard byte: the summed file distance from the middle (negative on the left).
    balance_bytes: Box<[[i8; 256]; 16]>,
    /// Men of both colours at the start (the men phase's full scale).
    start_men: i32,
    /// The men's rows to go to promotion at the start, both colours (the pip phase's full scale).
    start_pip: i32,
    /// The rows a man crosses from its first row to its promotion row (the board's size less one).
    last_row: i32,
    /// How the two phases are blended.
    phase: Phase,
    /// Per bit, the squares a king looks at in each of its four directions, nearest first (the
    /// diagonals; ranks and files on the Turkish board).
    king_rays: Vec<[Vec<u8>; 4]>,
    /// Kings move any distance (else one square).
    flying: bool,
    /// The 12x12 board (read in `u128`).
    wide: bool,
    narrow: Masks<u64>,
    wide_masks: Masks<u128>,
}

/// Gathering on the diagonal boards. Rows `2k` and `2k + 1` (from the top) fill one contiguous run of
/// `size` bits starting at bit `k * (size + 1)`; one table lookup turns that run into the 4 bits of each
/// window column (8 bits apart), and a window's byte is the nibble of its two row pairs side by side.
#[derive(Clone, Debug)]
struct RowPairs {
    n: usize,
    stride: u32,
    width_mask: u64,
    nibbles: Vec<u32>,
    /// Per window: its top row pair and its column.
    at: Vec<(u8, u8)>,
}

impl RowPairs {
    /// Per row pair, the nibble of every column (8 bits apart).
    #[inline(always)]
    fn blocks(&self, bb: u64) -> [u32; 6] {
        let mut blocks = [0u32; 6];
        for (k, b) in blocks.iter_mut().enumerate().take(self.n) {
            *b = self.nibbles[((bb >> (k as u32 * self.stride)) & self.width_mask) as usize];
        }
        blocks
    }

    /// Per window row (two row pairs), the byte of every column (8 bits apart), from [`RowPairs::blocks`].
    #[inline(always)]
    fn quads(&self, blocks: &[u32; 6]) -> [u32; 5] {
        let mut q = [0u32; 5];
        for k in 0..self.n.saturating_sub(1) {
            q[k] = blocks[k] | blocks[k + 1] << 4;
        }
        q
    }
}

/// The big windows (an addition to the 4x4 blocks, as Scan 3 and Kingsrow read the board): on a
/// diagonal board, the 4-file by 6-row rectangles of each side's half (its own first six rows), one per
/// column of the blocks (international: 4 per side). Each is read by its owner only: White's by table
/// `j` (its column) in White's view, Black's by the table of the rotated rectangle, colours swapped; so a
/// table holds one rectangle of its owner's half and both colours teach it. A rectangle's 12 squares are
/// three row pairs' column nibbles side by side (in bit order); the rotation by 180 degrees reverses that
/// order (checked when the layout is made), so Black's index reads the same digits backwards.
#[derive(Clone, Debug)]
struct Big {
    /// Per window: its top row pair, its column, its table, whether White owns it.
    windows: Vec<(u8, u8, u32, bool)>,
    /// Six gathered bits -> their base-3 digits (1 per set bit), and the same of the six bits reversed.
    trits: [u32; 64],
    trits_rev: [u32; 64],
}

impl Big {
    /// The big windows of a diagonal board with row pairs (`None` where the board has too few rows).
    fn new(board: &Board, pairs: &RowPairs) -> Option<Big> {
        let size = board.size;
        if pairs.n < 3 {
            return None;
        }
        let columns = (size - 4) / 2 + 1;
        // Bits of the rectangle whose top is row pair `k` (rows 2k.. from the top) at column `j`, ascending.
        let bits_of = |k: u8, j: u8| -> Vec<u32> {
            let mut v: Vec<u32> = (2 * k..2 * k + 6)
                .flat_map(|row| {
                    (2 * j..2 * j + 4).filter_map(move |f| board.square_at(f, size - 1 - row))
                })
                .map(|sq| sq.bit())
                .collect();
            v.sort_unstable();
            v
        };
        let rotate = |bit: u32| rotated(board, bit);
        let bottom = pairs.n as u8 - 3;
        let mut windows = Vec::new();
        for j in 0..columns {
            let own = bits_of(bottom, j);
            let theirs = bits_of(0, columns - 1 - j);
            assert_eq!(own.len(), BIG_WINDOW, "a big window holds 12 squares");
            for (i, &b) in own.iter().enumerate() {
                assert_eq!(
                    rotate(b),
                    theirs[BIG_WINDOW - 1 - i],
                    "the rotation reverses a big window's squares"
                );
            }
            windows.push((bottom, j, u32::from(j), true));
            windows.push((0, columns - 1 - j, u32::from(j), false));
        }
        let trits: [u32; 64] = std::array::from_fn(|x| {
            (0..6)
                .filter(|i| x >> i & 1 != 0)
                .map(|i| 3u32.pow(i))
                .sum()
        });
        let trits_rev: [u32; 64] = std::array::from_fn(|x| {
            let rev = (0..6).fold(0, |r, i| r | (x >> i & 1) << (5 - i));
            trits[rev]
        });
        Some(Big {
            windows,
            trits,
            trits_rev,
        })
    }

    fn n_tables(&self) -> usize {
        self.windows.len() / 2
    }
}

/// How a position's middlegame and endgame scores are blended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Phase {
    /// By the men on the board: all of the start position's men is the middlegame, none the endgame (every
    /// file before `DRW3`).
    #[default]
    Men,
    /// By the men's rows still to go to their promotion row, summed over both sides (Scan 2.0's "pip"): the
    /// start position is the middlegame; a capture and a man's step both move toward the endgame, so a
    /// closed position whose men have advanced is scored by other weights than the opening's.
    Pip,
}

impl Phase {
    /// Every phase, in the order `train fit --phase` lists them.
    pub const ALL: [Phase; 2] = [Phase::Men, Phase::Pip];

    /// The name `train fit --phase` takes.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Men => "men",
            Phase::Pip => "pip",
        }
    }

    pub fn from_name(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// The features of one position as the trainer sees them (White's point of view).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Features {
    /// Table entries used: `table * TABLE + index`, and the sign (+1 White's view, -1 Black's).
    pub entries: Vec<(u32, i8)>,
    pub dense: [i32; N_DENSE],
    /// Middlegame share, 0..=1.
    pub phase: f32,
}

impl Layout {
    /// The layout of a variant's board.
    pub fn new(variant: Variant) -> Layout {
        let board = variant.rules().board.board();
        let size = board.size;
        let turkish = board.kind == BoardKind::Turkish;
        let wide = board.kind == BoardKind::Twelve;
        let (width, height, step_r) = if turkish { (4, 2, 2) } else { (4, 4, 2) };
        let mut corners = Vec::new();
        let mut r = 0;
        while r + height <= size {
            let mut f = 0;
            while f + width <= size {
                corners.push((f, r));
                f += 2;
            }
            r += step_r;
        }
        let squares_of = |f0: u8, r0: u8| -> Vec<u32> {
            let mut v = Vec::new();
            for r in r0..r0 + height {
                for f in f0..f0 + width {
                    if let Some(sq) = board.square_at(f, r) {
                        v.push(sq.bit());
                    }
                }
            }
            v
        };
        let rotate = |bit: u32| rotated(board, bit);
        // Owner-view square order of each table: the squares of block `w` in (rank, file) order.
        let owner_squares: Vec<Vec<u32>> = corners.iter().map(|&(f, r)| squares_of(f, r)).collect();
        let mut windows = Vec::new();
        for (w, &(f0, r0)) in corners.iter().enumerate() {
            let squares = &owner_squares[w];
            assert_eq!(squares.len(), WINDOW, "a window holds 8 squares");
            let mut bits: Vec<u32> = squares.clone();
            bits.sort_unstable();
            // Black's table here: the block that the rotation maps onto this one.
            let rot_corner = (size - width - f0, size - height - r0);
            let black_table = corners
                .iter()
                .position(|&c| c == rot_corner)
                .expect("the windows are closed under rotation");
            let black_order = &owner_squares[black_table];
            let mut white_digits = Box::new([0u16; 256]);
            let mut black_digits = Box::new([0u16; 256]);
            for value in 0..256usize {
                let (mut wd, mut bd) = (0u32, 0u32);
                for (j, &bit) in bits.iter().enumerate() {
                    if value >> j & 1 == 0 {
                        continue;
                    }
                    let k = squares.iter().position(|&s| s == bit).expect("own square");
                    wd += 3u32.pow(k as u32);
                    // In Black's view this board square is the owner square `rotate(bit)` of block
                    // `black_table`.
                    let kb = black_order
                        .iter()
                        .position(|&s| s == rotate(bit))
                        .expect("rotated square");
                    bd += 3u32.pow(kb as u32);
                }
                white_digits[value] = wd as u16;
                black_digits[value] = bd as u16;
            }
            // Runs of adjacent bits become one chunk.
            let mut chunks: Vec<Chunk> = Vec::new();
            let mut j = 0;
            while j < bits.len() {
                let start = j;
                while j + 1 < bits.len() && bits[j + 1] == bits[j] + 1 {
                    j += 1;
                }
                let len = j - start + 1;
                chunks.push(Chunk {
                    shift: bits[start] as u8,
                    dest: start as u8,
                    mask: (1u64 << len) - 1,
                });
                j += 1;
            }
            windows.push(Window {
                chunks,
                white_digits,
                black_digits,
                white_table: w as u32,
                black_table: black_table as u32,
            });
        }

        // Fast gathering (diagonal boards): check that it equals the chunks on every window.
        let pairs = (!turkish && !wide).then(|| {
            let n = usize::from(size / 2);
            let stride = u32::from(size) + 1;
            let width_mask = (1u64 << size) - 1;
            let columns = usize::from((size - width) / 2 + 1);
            // Bits of row pair 0 (rows 0 and 1 from the top = ranks size-1 and size-2) by column.
            let mut column_bits: Vec<Vec<u32>> = vec![Vec::new(); columns];
            for (j, bits) in column_bits.iter_mut().enumerate() {
                for r in [size - 1, size - 2] {
                    for f in 2 * j as u8..2 * j as u8 + width {
                        if let Some(sq) = board.square_at(f, r) {
                            bits.push(sq.bit());
                        }
                    }
                }
                bits.sort_unstable();
            }
            let nibbles: Vec<u32> = (0..1usize << size)
                .map(|v| {
                    let mut out = 0u32;
                    for (j, bits) in column_bits.iter().enumerate() {
                        for (m, &b) in bits.iter().enumerate() {
                            if v >> b & 1 != 0 {
                                out |= 1 << (8 * j + m);
                            }
                        }
                    }
                    out
                })
                .collect();
            let at = corners
                .iter()
                .map(|&(f0, r0)| (((size - height - r0) / 2), f0 / 2))
                .collect();
            RowPairs {
                n,
                stride,
                width_mask,
                nibbles,
                at,
            }
        });
        // Folding of material and tempo: each square goes to the first window that holds it.
        let mut owner_of = [usize::MAX; 128];
        for (w, squares) in owner_squares.iter().enumerate() {
            for &b in squares {
                if owner_of[b as usize] == usize::MAX {
                    owner_of[b as usize] = w;
                }
            }
        }
        for sq in board.squares() {
            assert!(
                owner_of[sq.bit() as usize] != usize::MAX,
                "every square is in a window"
            );
        }
        let folded = owner_squares
            .iter()
            .enumerate()
            .map(|(w, squares)| {
                squares
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| owner_of[**b as usize] == w)
                    .map(|(k, &b)| (k as u8, board.coords(draughts_square(board, b)).1))
                    .collect()
            })
            .collect();
        let mut balance_bytes = Box::new([[0i8; 256]; 16]);
        for (byte, table) in balance_bytes.iter_mut().enumerate() {
            for (v, entry) in table.iter_mut().enumerate() {
                let mut sum = 0i32;
                for m in 0..8 {
                    let bit = 8 * byte as u32 + m;
                    if v >> m & 1 != 0 && board.mask >> bit & 1 != 0 {
                        let (f, _) = board.coords(draughts_square(board, bit));
                        sum += 2 * i32::from(f) - (i32::from(size) - 1);
                    }
                }
                *entry = sum as i8;
            }
        }

        let start = Position::start(variant);
        let start_men =
            (start.pieces(Color::White).count() + start.pieces(Color::Black).count()) as i32;
        // The men's rows to go at the start: each man's distance from its promotion row.
        let start_pip: i32 = start
            .pieces(Color::White)
            .chain(start.pieces(Color::Black))
            .map(|sq| {
                let (_, r) = board.coords(sq);
                let ahead = if start.piece_at(sq).map(|p| p.color) == Some(Color::White) {
                    size - 1 - r
                } else {
                    r
                };
                i32::from(ahead)
            })
            .sum();
        let mut white_rows = vec![0u128; 4];
        let mut black_rows = vec![0u128; 4];
        let mut left = vec![0u128; 4];
        let mut right = vec![0u128; 4];
        let mut white_one_to_go = 0;
        let mut white_two_to_go = 0;
        let mut black_one_to_go = 0;
        let mut black_two_to_go = 0;
        let corner_dark = board.square_at(0, 0).is_some();
        let mut main_diagonal = 0u128;
        let mut king_rays: Vec<[Vec<u8>; 4]> = vec![Default::default(); 128];
        let mut white_forward = Box::new([0u128; 128]);
        let mut black_forward = Box::new([0u128; 128]);
        for sq in board.squares() {
            let bit = 1u128 << sq.bit();
            let (f, r) = board.coords(sq);
            let wr = u32::from(r);
            let br = u32::from(size - 1 - r);
            for k in 0..4 {
                if wr >> k & 1 != 0 {
                    white_rows[k] |= bit;
                }
                if br >> k & 1 != 0 {
                    black_rows[k] |= bit;
                }
            }
            let d = 2 * i32::from(f) - (i32::from(size) - 1);
            let planes = if d < 0 { &mut left } else { &mut right };
            for (k, plane) in planes.iter_mut().enumerate() {
                if d.unsigned_abs() >> k & 1 != 0 {
                    *plane |= bit;
                }
            }
            if r == size - 2 {
                white_one_to_go |= bit;
            }
            if r == size - 3 {
                white_two_to_go |= bit;
            }
            if r == 1 {
                black_one_to_go |= bit;
            }
            if r == 2 {
                black_two_to_go |= bit;
            }
            white_forward[sq.bit() as usize] = forward(board, f, r, 1, turkish);
            black_forward[sq.bit() as usize] = forward(board, f, r, -1, turkish);
            let on_diagonal = if corner_dark {
                f == r
            } else {
                f + r == size - 1
            };
            if !turkish && on_diagonal {
                main_diagonal |= bit;
            }
            let dirs: [(i16, i16); 4] = if turkish {
                [(0, 1), (0, -1), (1, 0), (-1, 0)]
            } else {
                [(1, 1), (1, -1), (-1, 1), (-1, -1)]
            };
            for (d, &(df, dr)) in dirs.iter().enumerate() {
                let (mut x, mut y) = (i16::from(f) + df, i16::from(r) + dr);
                while (0..i16::from(size)).contains(&x) && (0..i16::from(size)).contains(&y) {
                    if let Some(s) = board.square_at(x as u8, y as u8) {
                        king_rays[sq.bit() as usize][d].push(s.bit() as u8);
                    }
                    x += df;
                    y += dr;
                }
            }
        }
        let wide_masks = Masks {
            white_rows,
            black_rows,
            left,
            right,
            white_one_to_go,
            white_two_to_go,
            black_one_to_go,
            black_two_to_go,
            white_forward,
            black_forward,
            main_diagonal,
        };
        Layout {
            variant,
            windows,
            pairs,
            big: None,
            folded,
            balance_bytes,
            start_men,
            start_pip,
            last_row: i32::from(size) - 1,
            phase: Phase::Men,
            king_rays,
            flying: variant.rules().flying_kings,
            wide,
            narrow: wide_masks.truncated(),
            wide_masks,
        }
    }

    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// The same layout with its phases blended by `phase`.
    pub fn with_phase(mut self, phase: Phase) -> Layout {
        self.phase = phase;
        self
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The same layout with the big windows (true) or without; `None` where the board has none (the
    /// Turkish and the 12x12 boards).
    pub fn with_big(mut self, on: bool) -> Option<Layout> {
        if !on {
            self.big = None;
            return Some(self);
        }
        let board = self.variant.rules().board.board();
        self.big = Some(Big::new(board, self.pairs.as_ref()?)?);
        Some(self)
    }

    /// Number of pattern tables (the 4x4 blocks').
    pub fn n_tables(&self) -> usize {
        self.windows.len()
    }

    /// Number of big tables (0 without the big windows).
    pub fn n_big_tables(&self) -> usize {
        self.big.as_ref().map_or(0, Big::n_tables)
    }

    /// Where the global features' weights start: after the blocks' tables and the big tables.
    pub fn dense_base(&self) -> usize {
        self.windows.len() * TABLE + self.n_big_tables() * BIG_TABLE
    }

    /// Number of weights per phase: every table entry, then the global features.
    pub fn n_weights(&self) -> usize {
        self.dense_base() + N_DENSE
    }

    /// Both sides' row-pair nibbles ([`RowPairs::blocks`] of White's men, of Black's), read once for the
    /// blocks and the big windows (`None` on boards without row pairs).
    #[inline(always)]
    fn row_pair_blocks<W: Word>(&self, wm: W, bm: W) -> Option<([u32; 6], [u32; 6])> {
        self.pairs
            .as_ref()
            .map(|p| (p.blocks(wm.low()), p.blocks(bm.low())))
    }

    /// Calls `f(weight index, owner is White)` for every big window (none without them); `blocks` are
    /// [`Layout::row_pair_blocks`] of the same men.
    #[inline(always)]
    fn for_each_big(&self, blocks: Option<&([u32; 6], [u32; 6])>, mut f: impl FnMut(usize, bool)) {
        let (Some(big), Some((bw, bb))) = (&self.big, blocks) else {
            return;
        };
        let base = self.windows.len() * TABLE;
        for &(k, j, table, white) in &big.windows {
            let k = usize::from(k);
            let s = 8 * u32::from(j);
            let g = |b: &[u32; 6]| -> usize {
                (((b[k] >> s) & 15) | ((b[k + 1] >> s) & 15) << 4 | ((b[k + 2] >> s) & 15) << 8)
                    as usize
            };
            let (gw, gb) = (g(bw), g(bb));
            let (t, r) = (&big.trits, &big.trits_rev);
            let idx = if white {
                t[gw & 63] + 2 * t[gb & 63] + 729 * (t[gw >> 6] + 2 * t[gb >> 6])
            } else {
                r[gb >> 6] + 2 * r[gw >> 6] + 729 * (r[gb & 63] + 2 * r[gw & 63])
            };
            f(base + table as usize * BIG_TABLE + idx as usize, white);
        }
    }

    #[inline(always)]
    fn gather<W: Word>(chunks: &[Chunk], bb: W) -> usize {
        let mut v = 0u64;
        for c in chunks {
            v |= ((bb >> u32::from(c.shift)).low() & c.mask) << c.dest;
        }
        v as usize
    }

    /// Calls `f(window, white byte, black byte)` for every window; `blocks` are
    /// [`Layout::row_pair_blocks`] of the same men.
    #[inline(always)]
    fn for_each_window<W: Word>(
        &self,
        blocks: Option<&([u32; 6], [u32; 6])>,
        wm: W,
        bm: W,
        mut f: impl FnMut(&Window, usize, usize),
    ) {
        if let (Some(p), Some((bw, bb))) = (&self.pairs, blocks) {
            // Only boards of up to 64 squares have row pairs.
            let qw = p.quads(bw);
            let qb = p.quads(bb);
            for (w, &(k, j)) in self.windows.iter().zip(&p.at) {
                let shift = 8 * u32::from(j);
                let gw = (qw[usize::from(k)] >> shift) & 0xFF;
                let gb = (qb[usize::from(k)] >> shift) & 0xFF;
                f(w, gw as usize, gb as usize);
            }
        } else {
            for w in &self.windows {
                f(w, Self::gather(&w.chunks, wm), Self::gather(&w.chunks, bm));
            }
        }
    }

    /// The balance term (White minus Black) by byte lookups, as [`Layout::dense`] computes it.
    #[inline(always)]
    fn balance_fast<W: Word>(&self, wm: W, bm: W) -> i32 {
        let side = |men: W| -> i32 {
            let mut s = 0i32;
            let mut m = men;
            let mut byte = 0;
            while m != W::ZERO {
                s += i32::from(self.balance_bytes[byte][(m.low() & 0xFF) as usize]);
                m = m >> 8;
                byte += 1;
            }
            s.abs()
        };
        side(bm) - side(wm)
    }

    /// The global features, White minus Black.
    #[inline(always)]
    fn dense<W: Word>(&self, white: W, black: W, kings: W, white_to_move: bool) -> [i32; N_DENSE] {
        let x = W::masks(self);
        let wm = white & !kings;
        let bm = black & !kings;
        let wk = (white & kings).ones();
        let bk = (black & kings).ones();
        let empty = !(white | black);
        let planes = |men: W, planes: &[W]| -> i32 {
            planes
                .iter()
                .enumerate()
                .map(|(k, &p)| (men & p).ones() << k)
                .sum()
        };
        let tempo = planes(wm, &x.white_rows) - planes(bm, &x.black_rows);
        let balance = |men: W| (planes(men, &x.right) - planes(men, &x.left)).abs();
        let (w1, w2) = runaways(
            wm,
            empty,
            x.white_one_to_go,
            x.white_two_to_go,
            &x.white_forward,
        );
        let (b1, b2) = runaways(
            bm,
            empty,
            x.black_one_to_go,
            x.black_two_to_go,
            &x.black_forward,
        );
        [
            wm.ones() - bm.ones(),
            wk - bk,
            tempo,
            balance(bm) - balance(wm),
            w1 - b1,
            w2 - b2,
            i32::from(wk > 0) - i32::from(bk > 0),
            if white_to_move { 1 } else { -1 },
            self.king_mobility(white, black, kings),
            (white & kings & x.main_diagonal).ones() - (black & kings & x.main_diagonal).ones(),
        ]
    }

    /// King mobility, White minus Black: the empty squares each king sees along its four lines (one
    /// square each way when kings do not fly).
    #[inline]
    fn king_mobility<W: Word>(&self, white: W, black: W, kings: W) -> i32 {
        let occupied = white | black;
        let reach = |mut set: W| -> i32 {
            let mut n = 0;
            while set != W::ZERO {
                let bit = set.first();
                set = set.without_first();
                for ray in &self.king_rays[bit] {
                    for &s in ray {
                        if (occupied >> u32::from(s)).low() & 1 != 0 {
                            break;
                        }
                        n += 1;
                        if !self.flying {
                            break;
                        }
                    }
                }
            }
            n
        };
        reach(white & kings) - reach(black & kings)
    }

    /// The phase's full scale: its measure at the start.
    #[inline(always)]
    fn phase_scale(&self) -> i32 {
        match self.phase {
            Phase::Men => self.start_men,
            Phase::Pip => self.start_pip,
        }
    }

    /// The middlegame share of a position in 0..=[`Self::phase_scale`].
    #[inline(always)]
    fn phase_of<W: Word>(&self, white: W, black: W, kings: W) -> i32 {
        let men = (white | black) & !kings;
        match self.phase {
            Phase::Men => men.ones().min(self.start_men),
            Phase::Pip => {
                // Rows to go: a man's row count less the rows it has advanced (the tempo planes).
                let x = W::masks(self);
                let mut advanced = 0;
                for k in 0..x.white_rows.len() {
                    advanced += ((white & men & x.white_rows[k]).ones()
                        + (black & men & x.black_rows[k]).ones())
                        << k;
                }
                (self.last_row * men.ones() - advanced).clamp(0, self.start_pip)
            }
        }
    }

    /// The trainer's view of a position.
    pub fn features<W: Word>(&self, white: W, black: W, kings: W, white_to_move: bool) -> Features {
        let wm = white & !kings;
        let bm = black & !kings;
        let mut entries = Vec::with_capacity(2 * self.windows.len() + 2 * self.n_big_tables());
        for w in &self.windows {
            let gw = Self::gather(&w.chunks, wm);
            let gb = Self::gather(&w.chunks, bm);
            let iw = u32::from(w.white_digits[gw]) + 2 * u32::from(w.white_digits[gb]);
            let ib = u32::from(w.black_digits[gb]) + 2 * u32::from(w.black_digits[gw]);
            entries.push((w.white_table * TABLE as u32 + iw, 1));
            entries.push((w.black_table * TABLE as u32 + ib, -1));
        }
        let blocks = self.row_pair_blocks(wm, bm);
        self.for_each_big(blocks.as_ref(), |i, white| {
            entries.push((i as u32, if white { 1 } else { -1 }))
        });
        debug_assert!({
            let mut fast = Vec::new();
            self.for_each_window(blocks.as_ref(), wm, bm, |w, gw, gb| {
                let iw = u32::from(w.white_digits[gw]) + 2 * u32::from(w.white_digits[gb]);
                fast.push((w.white_table * TABLE as u32 + iw, 1i8));
                let ib = u32::from(w.black_digits[gb]) + 2 * u32::from(w.black_digits[gw]);
                fast.push((w.black_table * TABLE as u32 + ib, -1i8));
            });
            fast[..] == entries[..2 * self.windows.len()]
        });
        Features {
            entries,
            dense: self.dense(white, black, kings, white_to_move),
            phase: self.phase_of(white, black, kings) as f32 / self.phase_scale() as f32,
        }
    }
}

/// Runaway men: on the row before promotion with a free square ahead, and two rows before with a free path.
#[inline(always)]
fn runaways<W: Word>(men: W, empty: W, one: W, two: W, fwd: &[W; 128]) -> (i32, i32) {
    let mut n1 = 0;
    let mut near = men & one;
    while near != W::ZERO {
        let bit = near.first();
        near = near.without_first();
        if fwd[bit] & empty != W::ZERO {
            n1 += 1;
        }
    }
    let mut n2 = 0;
    let mut near = men & two;
    while near != W::ZERO {
        let bit = near.first();
        near = near.without_first();
        let mut next = fwd[bit] & empty;
        while next != W::ZERO {
            let b = next.first();
            next = next.without_first();
            if fwd[b] != W::ZERO && fwd[b] & empty == fwd[b] {
                n2 += 1;
                break;
            }
        }
    }
    (n1, n2)
}

/// The bit of the square that a rotation of the board by 180 degrees puts on `bit`'s.
fn rotated(board: &Board, bit: u32) -> u32 {
    let (f, r) = board.coords(draughts_square(board, bit));
    board
        .square_at(board.size - 1 - f, board.size - 1 - r)
        .expect("the board is symmetric under rotation")
        .bit()
}

fn draughts_square(board: &Board, bit: u32) -> draughts_engine::Square {
    board
        .squares()
        .find(|s| s.bit() == bit)
        .expect("a playable bit")
}

/// The squares a man on (file, rank) moves forward to (`dir` = +1 for White, -1 for Black).
fn forward(board: &Board, file: u8, rank: u8, dir: i8, turkish: bool) -> u128 {
    let next_rank = i16::from(rank) + i16::from(dir);
    if !(0..i16::from(board.size)).contains(&next_rank) {
        return 0;
    }
    let files: &[i16] = if turkish { &[0] } else { &[-1, 1] };
    let mut mask = 0;
    for df in files {
        let f = i16::from(file) + df;
        if (0..i16::from(board.size)).contains(&f)
            && let Some(sq) = board.square_at(f as u8, next_rank as u8)
        {
            mask |= 1u128 << sq.bit();
        }
    }
    mask
}

/// Errors reading a weights file.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WeightsError {
    #[error("not a weights file (bad magic)")]
    Magic,
    #[error("the weights file is truncated")]
    Truncated,
    #[error("the weights file is for variant '{0}'")]
    Variant(String),
    #[error(
        "the weights file's shape ({0} tables, {1} features) does not fit this variant's layout"
    )]
    Shape(u32, u32),
    #[error("the weights file's body is malformed")]
    Body,
}

/// The learned weights of one variant with its layout: an evaluation.
#[derive(Clone, Debug)]
pub struct LearnedWeights {
    layout: Layout,
    /// `(middlegame, endgame)` per weight: tables, then the global features.
    weights: Vec<[i16; 2]>,
    /// What the evaluation reads: the tables with material and tempo folded in (see [`Layout`]'s
    /// `folded`), so those two features cost nothing at a leaf.
    fast: Vec<[i16; 2]>,
    /// The king mobility or long-diagonal weights are not all zero (else a leaf skips them).
    king_terms: bool,
}

/// The tables with the men and tempo weights folded into them.
fn fold(layout: &Layout, weights: &[[i16; 2]]) -> Vec<[i16; 2]> {
    let base = layout.dense_base();
    let men = weights[base];
    let tempo = weights[base + 2];
    let mut fast = weights[..base].to_vec();
    for (w, squares) in layout.folded.iter().enumerate() {
        for idx in 0..TABLE {
            let mut add = [0i32; 2];
            for &(k, rank) in squares {
                if (idx / 3usize.pow(u32::from(k))) % 3 == 1 {
                    for ph in 0..2 {
                        add[ph] += i32::from(men[ph]) + i32::from(rank) * i32::from(tempo[ph]);
                    }
                }
            }
            let e = &mut fast[w * TABLE + idx];
            for ph in 0..2 {
                e[ph] = (i32::from(e[ph]) + add[ph]).clamp(-32767, 32767) as i16;
            }
        }
    }
    fast.extend_from_slice(&weights[base..]);
    fast
}

/// The weights file's magic (zero runs, see [`LearnedWeights::to_bytes`]).
const MAGIC: &[u8; 4] = b"DRW2";
/// The format of weights blended by another phase than the men's: `DRW2`'s with a phase byte after the
/// magic (1: [`Phase::Pip`]).
const MAGIC_PHASED: &[u8; 4] = b"DRW3";
/// The first format's magic: every weight as two plain `i16`.
const MAGIC_PLAIN: &[u8; 4] = b"DRW1";
/// The format of weights with the big windows: `DRW3`'s with the phase byte (0: men, 1: pip) and the
/// number of big tables after the magic; the big tables follow the blocks' tables.
const MAGIC_BIG: &[u8; 4] = b"DRW4";

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &mut &[u8]) -> Result<u32, WeightsError> {
    let mut v = 0u32;
    for shift in (0..35).step_by(7) {
        let (&b, tail) = bytes.split_first().ok_or(WeightsError::Truncated)?;
        *bytes = tail;
        v |= u32::from(b & 0x7f)
            .checked_shl(shift)
            .ok_or(WeightsError::Body)?;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(WeightsError::Body)
}

fn zigzag(v: i16) -> u32 {
    ((i32::from(v) << 1) ^ (i32::from(v) >> 31)) as u32
}

fn unzigzag(z: u32) -> Result<i16, WeightsError> {
    let v = ((z >> 1) as i32) ^ -((z & 1) as i32);
    i16::try_from(v).map_err(|_| WeightsError::Body)
}

impl LearnedWeights {
    /// All-zero pattern tables with plain material (a starting point for training).
    pub fn material_only(variant: Variant, man: i32, king: i32) -> LearnedWeights {
        let layout = Layout::new(variant);
        let mut weights = vec![[0i16; 2]; layout.n_weights()];
        let base = layout.dense_base();
        let m = (man * UNIT) as i16;
        let k = (king * UNIT) as i16;
        weights[base] = [m, m];
        weights[base + 1] = [k, k];
        LearnedWeights::build(layout, weights)
    }

    /// Weights of `layout` from float values in centi-men (the trainer's output), rounded and clamped to
    /// `i16`.
    pub fn from_centi_men(layout: Layout, values: &[[f32; 2]]) -> LearnedWeights {
        assert_eq!(values.len(), layout.n_weights());
        let weights = values
            .iter()
            .map(|v| {
                let q = |x: f32| (x * UNIT as f32).round().clamp(-32767.0, 32767.0) as i16;
                [q(v[0]), q(v[1])]
            })
            .collect();
        LearnedWeights::build(layout, weights)
    }

    /// These weights for another variant whose board and features are laid out the same (killer,
    /// antidraughts and breakthrough from international's, say): the same values under the other
    /// variant's name. `None` when the layouts differ.
    pub fn for_variant(&self, variant: Variant) -> Option<LearnedWeights> {
        let layout = Layout::new(variant);
        let (a, b) = (self.layout.variant().rules(), variant.rules());
        let same = a.board.board().size == b.board.board().size
            && a.board.board().kind == b.board.board().kind;
        let layout = layout
            .with_phase(self.layout.phase)
            .with_big(self.layout.big.is_some())?;
        (same && layout.n_weights() == self.layout.n_weights())
            .then(|| LearnedWeights::build(layout, self.weights.clone()))
    }

    /// These weights with the big windows added, their tables at zero (a fit that adds them starts from
    /// these); `None` where the board has none. Weights that have them already are returned as they are.
    pub fn with_big_tables(&self) -> Option<LearnedWeights> {
        if self.layout.big.is_some() {
            return Some(self.clone());
        }
        let layout = self.layout.clone().with_big(true)?;
        let base = self.layout.dense_base();
        let mut weights = self.weights[..base].to_vec();
        weights.resize(layout.dense_base(), [0, 0]);
        weights.extend_from_slice(&self.weights[base..]);
        Some(LearnedWeights::build(layout, weights))
    }

    /// The same values blended by another [`Phase`] (a fit that changes the phase starts from these).
    pub fn with_phase(self, phase: Phase) -> LearnedWeights {
        LearnedWeights {
            layout: self.layout.with_phase(phase),
            ..self
        }
    }

    fn build(layout: Layout, weights: Vec<[i16; 2]>) -> LearnedWeights {
        let fast = fold(&layout, &weights);
        let base = layout.dense_base();
        let king_terms = weights[base + 8..base + N_DENSE]
            .iter()
            .any(|w| *w != [0, 0]);
        LearnedWeights {
            layout,
            weights,
            fast,
            king_terms,
        }
    }

    /// The weights in centi-men (for continuing training).
    pub fn to_centi_men(&self) -> Vec<[f32; 2]> {
        self.weights
            .iter()
            .map(|w| [f32::from(w[0]) / UNIT as f32, f32::from(w[1]) / UNIT as f32])
            .collect()
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// One global feature's weights in centi-men (middlegame, endgame).
    pub fn dense_weight(&self, feature: usize) -> (f32, f32) {
        let w = self.weights[self.layout.dense_base() + feature];
        (f32::from(w[0]) / UNIT as f32, f32::from(w[1]) / UNIT as f32)
    }

    /// The weights file (`MAGIC`, `DRW2`; `MAGIC_PHASED`, `DRW3`, and a phase byte when the phases are
    /// blended by pip): the header (magic, the variant key's length and bytes, the
    /// number of tables, entries per table and global features, each a little-endian `u32`), then the
    /// weights' `2 * n` values (middlegame, endgame of each weight in turn) as runs: the number of zeros
    /// before the next non-zero value, then that value (zigzag), both as LEB128 varints; a last run of
    /// zeros may end the file. Most pattern entries are never seen in training and stay zero, so this is
    /// about a tenth of the plain `i16` body that `DRW1` files hold (still read).
    pub fn to_bytes(&self) -> Vec<u8> {
        let key = self.layout.variant.key().as_bytes();
        let mut out = Vec::with_capacity(64 + key.len());
        let phase_byte = match self.layout.phase {
            Phase::Men => 0,
            Phase::Pip => 1,
        };
        if self.layout.big.is_some() {
            out.extend_from_slice(MAGIC_BIG);
            out.push(phase_byte);
            out.push(self.layout.n_big_tables() as u8);
        } else if phase_byte == 0 {
            out.extend_from_slice(MAGIC);
        } else {
            out.extend_from_slice(MAGIC_PHASED);
            out.push(phase_byte);
        }
        out.push(key.len() as u8);
        out.extend_from_slice(key);
        out.extend_from_slice(&(self.layout.n_tables() as u32).to_le_bytes());
        out.extend_from_slice(&(TABLE as u32).to_le_bytes());
        out.extend_from_slice(&(N_DENSE as u32).to_le_bytes());
        let mut zeros = 0u32;
        for &v in self.weights.iter().flatten() {
            if v == 0 {
                zeros += 1;
                continue;
            }
            put_varint(&mut out, zeros);
            put_varint(&mut out, zigzag(v));
            zeros = 0;
        }
        if zeros > 0 {
            put_varint(&mut out, zeros);
        }
        out
    }

    pub fn from_bytes(variant: Variant, bytes: &[u8]) -> Result<LearnedWeights, WeightsError> {
        let mut rest = bytes;
        let mut take = |n: usize| -> Result<&[u8], WeightsError> {
            if rest.len() < n {
                return Err(WeightsError::Truncated);
            }
            let (head, tail) = rest.split_at(n);
            rest = tail;
            Ok(head)
        };
        let phase_of = |b: u8| match b {
            0 => Ok(Phase::Men),
            1 => Ok(Phase::Pip),
            _ => Err(WeightsError::Body),
        };
        let (runs, phase, n_big) = match take(4)? {
            m if m == MAGIC => (true, Phase::Men, 0),
            m if m == MAGIC_PLAIN => (false, Phase::Men, 0),
            m if m == MAGIC_PHASED => match take(1)?[0] {
                1 => (true, Phase::Pip, 0),
                _ => return Err(WeightsError::Body),
            },
            m if m == MAGIC_BIG => {
                let head = take(2)?;
                (true, phase_of(head[0])?, head[1])
            }
            _ => return Err(WeightsError::Magic),
        };
        let key_len = take(1)?[0] as usize;
        let key = String::from_utf8_lossy(take(key_len)?).into_owned();
        if key != variant.key() {
            return Err(WeightsError::Variant(key));
        }
        let mut u32_at = || -> Result<u32, WeightsError> {
            let b = take(4)?;
            Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let (n_tables, table, n_dense) = (u32_at()?, u32_at()?, u32_at()?);
        let layout = Layout::new(variant)
            .with_phase(phase)
            .with_big(n_big > 0)
            .ok_or(WeightsError::Shape(n_tables, n_dense))?;
        // A file from before a global feature was added holds fewer; the missing ones weigh zero.
        if n_tables as usize != layout.n_tables()
            || usize::from(n_big) != layout.n_big_tables()
            || table as usize != TABLE
            || n_dense as usize > N_DENSE
        {
            return Err(WeightsError::Shape(n_tables, n_dense));
        }
        let n = layout.dense_base() + n_dense as usize;
        let mut weights: Vec<[i16; 2]> = if runs {
            let mut values = vec![0i16; 2 * n];
            let mut body = rest;
            let mut at = 0usize;
            while at < values.len() {
                at += get_varint(&mut body)? as usize;
                if at >= values.len() {
                    break;
                }
                values[at] = unzigzag(get_varint(&mut body)?)?;
                at += 1;
            }
            if at > values.len() || !body.is_empty() {
                return Err(WeightsError::Body);
            }
            values.chunks_exact(2).map(|c| [c[0], c[1]]).collect()
        } else {
            take(4 * n)?
                .chunks_exact(4)
                .map(|c| {
                    [
                        i16::from_le_bytes([c[0], c[1]]),
                        i16::from_le_bytes([c[2], c[3]]),
                    ]
                })
                .collect()
        };
        weights.resize(layout.n_weights(), [0, 0]);
        Ok(LearnedWeights::build(layout, weights))
    }

    /// White's score in centi-men (before draw scaling).
    #[inline]
    pub fn evaluate_white<W: Word>(
        &self,
        white: W,
        black: W,
        kings: W,
        white_to_move: bool,
    ) -> i32 {
        let l = &self.layout;
        let x = W::masks(l);
        let wm = white & !kings;
        let bm = black & !kings;
        let (mut mg, mut eg) = (0i32, 0i32);
        let t = &self.fast;
        let blocks = l.row_pair_blocks(wm, bm);
        l.for_each_window(blocks.as_ref(), wm, bm, |w, gw, gb| {
            let iw = w.white_table as usize * TABLE
                + usize::from(w.white_digits[gw])
                + 2 * usize::from(w.white_digits[gb]);
            let ib = w.black_table as usize * TABLE
                + usize::from(w.black_digits[gb])
                + 2 * usize::from(w.black_digits[gw]);
            let a = t[iw];
            let b = t[ib];
            mg += i32::from(a[0]) - i32::from(b[0]);
            eg += i32::from(a[1]) - i32::from(b[1]);
        });
        l.for_each_big(blocks.as_ref(), |i, white| {
            let a = t[i];
            if white {
                mg += i32::from(a[0]);
                eg += i32::from(a[1]);
            } else {
                mg -= i32::from(a[0]);
                eg -= i32::from(a[1]);
            }
        });
        // The global features but men and tempo (folded into the tables).
        let base = l.dense_base();
        let mut add = |k: usize, x: i32| {
            let w = t[base + k];
            mg += x * i32::from(w[0]);
            eg += x * i32::from(w[1]);
        };
        if kings != W::ZERO {
            let wk = (white & kings).ones();
            let bk = (black & kings).ones();
            add(1, wk - bk);
            add(6, i32::from(wk > 0) - i32::from(bk > 0));
            if self.king_terms {
                add(8, l.king_mobility(white, black, kings));
                add(
                    9,
                    (white & kings & x.main_diagonal).ones()
                        - (black & kings & x.main_diagonal).ones(),
                );
            }
        }
        add(3, l.balance_fast(wm, bm));
        let empty = !(white | black);
        let (w1, w2) = runaways(
            wm,
            empty,
            x.white_one_to_go,
            x.white_two_to_go,
            &x.white_forward,
        );
        let (b1, b2) = runaways(
            bm,
            empty,
            x.black_one_to_go,
            x.black_two_to_go,
            &x.black_forward,
        );
        add(4, w1 - b1);
        add(5, w2 - b2);
        add(7, if white_to_move { 1 } else { -1 });
        let ph = l.phase_of(white, black, kings);
        let scale = l.phase_scale();
        (mg * ph + eg * (scale - ph)) / (scale * UNIT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_weights(variant: Variant, seed: u64) -> LearnedWeights {
        sample_weights_in(Layout::new(variant), seed)
    }

    fn sample_weights_in(layout: Layout, seed: u64) -> LearnedWeights {
        let mut rng = crate::level::Rng::new(seed);
        let values: Vec<[f32; 2]> = (0..layout.n_weights())
            .map(|_| {
                [
                    rng.below(4001) as f32 / 10.0 - 200.0,
                    rng.below(4001) as f32 / 10.0 - 200.0,
                ]
            })
            .collect();
        LearnedWeights::from_centi_men(layout, &values)
    }

    /// Every variant's layouts: in both phases, and with the big windows where its board has them.
    fn learned_layouts() -> impl Iterator<Item = Layout> {
        learned_variants().flat_map(|v| {
            Phase::ALL.into_iter().flat_map(move |phase| {
                [false, true]
                    .into_iter()
                    .filter_map(move |big| Layout::new(v).with_phase(phase).with_big(big))
            })
        })
    }

    /// Every variant: the pattern layout covers every board, the 12x12 one read in `u128`.
    fn learned_variants() -> impl Iterator<Item = Variant> {
        Variant::ALL.into_iter()
    }

    /// A position's sets in `u128`.
    fn sets(pos: &Position) -> (u128, u128, u128) {
        <u128 as Word>::of(pos)
    }

    /// White's score read in the board's word (`u128` on the 12x12 board, else `u64`).
    fn white_score(
        w: &LearnedWeights,
        (white, black, kings): (u128, u128, u128),
        wtm: bool,
    ) -> i32 {
        if w.layout().wide {
            w.evaluate_white(white, black, kings, wtm)
        } else {
            w.evaluate_white(white as u64, black as u64, kings as u64, wtm)
        }
    }

    /// The features read in the board's word.
    fn features_of(
        layout: &Layout,
        (white, black, kings): (u128, u128, u128),
        wtm: bool,
    ) -> Features {
        if layout.wide {
            layout.features(white, black, kings, wtm)
        } else {
            layout.features(white as u64, black as u64, kings as u64, wtm)
        }
    }

    fn positions(variant: Variant, n: usize, seed: u64) -> Vec<Position> {
        let mut rng = crate::level::Rng::new(seed);
        let mut out = Vec::new();
        let mut pos = Position::start(variant);
        while out.len() < n {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                pos = Position::start(variant);
                continue;
            }
            pos = pos.play_unchecked(&moves[rng.below(moves.len() as u64) as usize]);
            out.push(pos);
        }
        out
    }

    fn mirror(pos: &Position) -> ((u128, u128, u128), bool) {
        let board = pos.board();
        let size = board.size;
        let rot = |bb: u128| -> u128 {
            let mut out = 0;
            for sq in board.squares() {
                if bb >> sq.bit() & 1 != 0 {
                    let (f, r) = board.coords(sq);
                    out |= 1u128 << board.square_at(size - 1 - f, size - 1 - r).unwrap().bit();
                }
            }
            out
        };
        let (white, black, kings) = sets(pos);
        (
            (rot(black), rot(white), rot(kings)),
            pos.side_to_move() == Color::Black,
        )
    }

    /// A position and its colour-mirrored copy score exactly opposite, in every variant and phase, with
    /// and without the big windows.
    #[test]
    fn colour_mirrored_positions_score_opposite() {
        for layout in learned_layouts() {
            let v = layout.variant();
            let w = sample_weights_in(layout, 7);
            for pos in positions(v, 300, 11) {
                let s = white_score(&w, sets(&pos), pos.side_to_move() == Color::White);
                let (m_sets, m_wtm) = mirror(&pos);
                let m = white_score(&w, m_sets, m_wtm);
                assert!((s + m).abs() <= 1, "{v}: {s} vs {m}");
            }
        }
    }

    /// The evaluation equals the trainer's linear model over the features (up to rounding), in both
    /// phases, with and without the big windows.
    #[test]
    fn evaluation_equals_the_feature_model() {
        for layout in learned_layouts() {
            let v = layout.variant();
            let w = sample_weights_in(layout, 3);
            let cm = w.to_centi_men();
            let layout = w.layout();
            for pos in positions(v, 200, 5) {
                let wtm = pos.side_to_move() == Color::White;
                let f = features_of(layout, sets(&pos), wtm);
                let (mut mg, mut eg) = (0f64, 0f64);
                for &(i, s) in &f.entries {
                    mg += f64::from(s) * f64::from(cm[i as usize][0]);
                    eg += f64::from(s) * f64::from(cm[i as usize][1]);
                }
                let base = layout.dense_base();
                for (k, x) in f.dense.iter().enumerate() {
                    mg += f64::from(*x) * f64::from(cm[base + k][0]);
                    eg += f64::from(*x) * f64::from(cm[base + k][1]);
                }
                let p = f64::from(f.phase);
                let model = mg * p + eg * (1.0 - p);
                let s = f64::from(white_score(&w, sets(&pos), wtm));
                assert!((model - s).abs() <= 1.01, "{v}: model {model} eval {s}");
            }
        }
    }

    #[test]
    fn indices_stay_inside_their_tables_and_windows_hold_eight_squares() {
        for v in learned_variants() {
            let layout = Layout::new(v);
            assert!(layout.n_tables() >= 9, "{v}");
            for pos in positions(v, 100, 9) {
                let f = features_of(&layout, sets(&pos), true);
                assert_eq!(f.entries.len(), 2 * layout.n_tables());
                for (i, _) in f.entries {
                    assert!((i as usize) < layout.n_tables() * TABLE);
                }
            }
        }
        assert_eq!(Layout::new(Variant::International).n_tables(), 16);
        assert_eq!(Layout::new(Variant::English).n_tables(), 9);
        assert_eq!(Layout::new(Variant::Canadian).n_tables(), 25);
    }

    /// On the boards of up to 64 squares the `u128` reading gives the `u64` one's scores and features.
    #[test]
    fn both_words_read_a_narrow_board_alike() {
        for v in [Variant::International, Variant::English, Variant::Turkish] {
            let w = sample_weights(v, 13);
            for pos in positions(v, 200, 17) {
                let (white, black, kings) = sets(&pos);
                let wtm = pos.side_to_move() == Color::White;
                assert_eq!(
                    w.evaluate_white(white, black, kings, wtm),
                    w.evaluate_white(white as u64, black as u64, kings as u64, wtm),
                    "{v}"
                );
                assert_eq!(
                    w.layout().features(white, black, kings, wtm),
                    w.layout()
                        .features(white as u64, black as u64, kings as u64, wtm),
                    "{v}"
                );
            }
        }
    }

    /// The big windows: 4 tables of 3^12 on the 10x10 board (8 rectangles), 3 on 8x8, none on the
    /// Turkish and 12x12 boards; each position uses every rectangle once, inside its table; added at zero
    /// they change no score; the file keeps them (`DRW4`), and so does a variant on the same board.
    #[test]
    fn big_windows_cover_each_half_and_travel_with_the_file() {
        let intl = Layout::new(Variant::International).with_big(true).unwrap();
        assert_eq!(intl.n_big_tables(), 4);
        assert_eq!(
            Layout::new(Variant::English)
                .with_big(true)
                .unwrap()
                .n_big_tables(),
            3
        );
        assert!(Layout::new(Variant::Turkish).with_big(true).is_none());
        assert!(Layout::new(Variant::Canadian).with_big(true).is_none());
        for v in [Variant::International, Variant::Russian] {
            let layout = Layout::new(v).with_big(true).unwrap();
            let small = 2 * layout.n_tables();
            for pos in positions(v, 200, 23) {
                let f = features_of(&layout, sets(&pos), true);
                let big = &f.entries[small..];
                assert_eq!(big.len(), 2 * layout.n_big_tables(), "{v}");
                assert_eq!(
                    big.iter().filter(|e| e.1 == 1).count(),
                    layout.n_big_tables()
                );
                for &(i, _) in big {
                    let i = i as usize;
                    assert!(
                        i >= layout.n_tables() * TABLE && i < layout.dense_base(),
                        "{v}"
                    );
                }
            }
            // At the start every rectangle holds men: no index is 0.
            let f = features_of(&layout, sets(&Position::start(v)), true);
            assert!(f.entries[small..].iter().all(|&(i, _)| {
                !(i as usize - layout.n_tables() * TABLE).is_multiple_of(BIG_TABLE)
            }));
        }
        let w = sample_weights(Variant::International, 31);
        let with = w.with_big_tables().unwrap();
        assert_eq!(
            with.layout().n_weights(),
            w.layout().n_weights() + 4 * BIG_TABLE
        );
        for pos in positions(Variant::International, 200, 29) {
            let wtm = pos.side_to_move() == Color::White;
            assert_eq!(
                white_score(&w, sets(&pos), wtm),
                white_score(&with, sets(&pos), wtm)
            );
        }
        let big = sample_weights_in(intl.with_phase(Phase::Pip), 37);
        let bytes = big.to_bytes();
        assert_eq!(&bytes[..4], b"DRW4");
        let back = LearnedWeights::from_bytes(Variant::International, &bytes).unwrap();
        assert_eq!(back.weights, big.weights);
        assert_eq!(back.layout().phase(), Phase::Pip);
        assert_eq!(back.layout().n_big_tables(), 4);
        let killer = big.for_variant(Variant::Killer).unwrap();
        assert_eq!(killer.layout().n_big_tables(), 4);
        assert_eq!(killer.weights, big.weights);
        let mut bad = bytes.clone();
        bad[5] = 3;
        assert_eq!(
            LearnedWeights::from_bytes(Variant::International, &bad).unwrap_err(),
            WeightsError::Shape(16, N_DENSE as u32)
        );
    }

    #[test]
    fn weights_round_trip_through_bytes_and_reject_other_files() {
        let w = sample_weights(Variant::International, 1);
        let bytes = w.to_bytes();
        let back = LearnedWeights::from_bytes(Variant::International, &bytes).unwrap();
        assert_eq!(back.weights, w.weights);
        assert_eq!(
            LearnedWeights::from_bytes(Variant::English, &bytes).unwrap_err(),
            WeightsError::Variant("international".into())
        );
        assert_eq!(
            LearnedWeights::from_bytes(Variant::International, &bytes[..100]).unwrap_err(),
            WeightsError::Truncated
        );
        assert_eq!(
            LearnedWeights::from_bytes(Variant::International, b"XXXXabc").unwrap_err(),
            WeightsError::Magic
        );
        let mut longer = bytes.clone();
        longer.push(1);
        assert_eq!(
            LearnedWeights::from_bytes(Variant::International, &longer).unwrap_err(),
            WeightsError::Body
        );
    }

    /// Weights blended by pip are written as `DRW3` with a phase byte and read back so; a `DRW2` file is
    /// blended by the men; an unknown phase byte is refused.
    #[test]
    fn the_phase_travels_with_the_weights_file() {
        let men = sample_weights(Variant::International, 2);
        let pip = men.clone().with_phase(Phase::Pip);
        assert_eq!(&men.to_bytes()[..4], MAGIC);
        let bytes = pip.to_bytes();
        assert_eq!(&bytes[..5], b"DRW3\x01");
        let back = LearnedWeights::from_bytes(Variant::International, &bytes).unwrap();
        assert_eq!(back.layout().phase(), Phase::Pip);
        assert_eq!(back.weights, men.weights);
        let (m, p) = (men.to_bytes(), bytes);
        assert_eq!(m[4..], p[5..], "the same body after the phase byte");
        let back = LearnedWeights::from_bytes(Variant::International, &m).unwrap();
        assert_eq!(back.layout().phase(), Phase::Men);
        let mut other = p.clone();
        other[4] = 7;
        assert_eq!(
            LearnedWeights::from_bytes(Variant::International, &other).unwrap_err(),
            WeightsError::Body
        );
        // Another variant's weights keep their phase.
        let killer = pip.for_variant(Variant::Killer).unwrap();
        assert_eq!(killer.layout().phase(), Phase::Pip);
        for phase in Phase::ALL {
            assert_eq!(Phase::from_name(phase.name()), Some(phase));
        }
        assert_eq!(Phase::from_name("tempo"), None);
    }

    /// The pip phase: the start position is the middlegame; a man's step forward moves toward the endgame
    /// by one row of the start's total, as a capture moves the men phase; a board of kings is the endgame.
    #[test]
    fn pip_counts_the_mens_rows_to_go() {
        for v in learned_variants() {
            let pip = Layout::new(v).with_phase(Phase::Pip);
            let men = Layout::new(v);
            let start = Position::start(v);
            let share = |l: &Layout, pos: &Position| {
                features_of(l, sets(pos), pos.side_to_move() == Color::White).phase
            };
            assert_eq!(share(&pip, &start), 1.0, "{v}");
            assert_eq!(share(&men, &start), 1.0, "{v}");
            let quiet = start
                .legal_moves()
                .into_iter()
                .find(|m| !m.is_capture())
                .expect("a first move");
            let after = start.play_unchecked(&quiet);
            let rows_to_go = pip.start_pip as f32;
            let expected = (rows_to_go - 1.0) / rows_to_go;
            if v.rules().board.board().kind == BoardKind::Turkish {
                // Turkish men may step sideways: no row gained.
                assert!(share(&pip, &after) >= expected, "{v}");
            } else {
                assert!((share(&pip, &after) - expected).abs() < 1e-6, "{v}");
            }
            assert_eq!(share(&men, &after), 1.0, "{v}");
        }
        let kings = Position::from_fen(Variant::International, "W:WK46,K47:BK5").unwrap();
        let l = Layout::new(Variant::International).with_phase(Phase::Pip);
        assert_eq!(features_of(&l, sets(&kings), true).phase, 0.0);
        assert_eq!(
            l.start_pip, 300,
            "Scan 2.0's scale: 20 men a side, 150 rows to go"
        );
        // A man one step from promotion has one row to go.
        let near = Position::from_fen(Variant::International, "W:W6:B45").unwrap();
        assert_eq!(features_of(&l, sets(&near), true).phase, 2.0 / 300.0);
    }

    /// A file written before the king features (8 global features) still loads, the new ones at zero;
    /// a file with more features than the layout knows is refused.
    #[test]
    fn files_with_fewer_global_features_load_with_the_rest_at_zero() {
        let w = sample_weights(Variant::International, 4);
        let n_tables = w.layout().n_tables();
        let mut old = Vec::new();
        old.extend_from_slice(MAGIC_PLAIN);
        old.push(13);
        old.extend_from_slice(b"international");
        for v in [n_tables as u32, TABLE as u32, 8] {
            old.extend_from_slice(&v.to_le_bytes());
        }
        for e in &w.weights[..n_tables * TABLE + 8] {
            old.extend_from_slice(&e[0].to_le_bytes());
            old.extend_from_slice(&e[1].to_le_bytes());
        }
        let back = LearnedWeights::from_bytes(Variant::International, &old).unwrap();
        assert_eq!(
            back.weights[..n_tables * TABLE + 8],
            w.weights[..n_tables * TABLE + 8]
        );
        assert_eq!(back.weights[n_tables * TABLE + 8..], [[0, 0]; N_DENSE - 8]);
        let mut more = old[..4 + 1 + 13 + 8].to_vec();
        more.extend_from_slice(&(N_DENSE as u32 + 1).to_le_bytes());
        assert_eq!(
            LearnedWeights::from_bytes(Variant::International, &more).unwrap_err(),
            WeightsError::Shape(n_tables as u32, N_DENSE as u32 + 1)
        );
    }

    /// The king features on positions worked out by hand.
    #[test]
    fn king_mobility_and_the_long_diagonal_count_what_a_king_sees() {
        let dense = |v: Variant, fen: &str| {
            let pos = Position::from_fen(v, fen).unwrap();
            features_of(&Layout::new(v), sets(&pos), true).dense
        };
        let (mobility, diagonal) = (8, 9);
        // A white king on 46 alone sees the whole long diagonal (9 squares); the black man on 1 sees
        // nothing (it is no king).
        let d = dense(Variant::International, "W:WK46:B1");
        assert_eq!((d[mobility], d[diagonal]), (9, 1));
        // A black man on 28 stops the king after 41, 37 and 32.
        let d = dense(Variant::International, "W:WK46:B28");
        assert_eq!(d[mobility], 3);
        // A black king on 28: White sees 41, 37, 32 (3); Black sees 32, 37, 41 toward 46 (3), 23, 19,
        // 14, 10, 5 (5), 22, 17, 11, 6 (4) and 33, 39, 44, 50 (4). Both kings are on the long diagonal.
        let d = dense(Variant::International, "W:WK46:BK28");
        assert_eq!((d[mobility], d[diagonal]), (3 - 16, 0));
        // Short kings look one square each way: a king on 18 of english's board sees its four
        // neighbours.
        let d = dense(Variant::English, "W:WK18:B1");
        assert_eq!(d[mobility], 4);
        // Every diagonal board's long diagonal has one square per rank.
        for v in learned_variants() {
            let layout = Layout::new(v);
            let board = v.rules().board.board();
            let n = layout.wide_masks.main_diagonal.count_ones();
            if board.kind == BoardKind::Turkish {
                assert_eq!(n, 0);
            } else {
                assert_eq!(n, u32::from(board.size), "{v}");
            }
        }
    }

    /// Weights move to a variant on the same board as the same values (international's to killer), and
    /// not to another board.
    #[test]
    fn weights_move_to_a_variant_on_the_same_board() {
        let intl = crate::eval::shipped(Variant::International).expect("shipped");
        let killer = intl.for_variant(Variant::Killer).expect("the same board");
        assert_eq!(killer.weights, intl.weights);
        let fen = "W:W28,31,32,33,34,35,36,38,41,K45:B2,5,7,9,11,13,16,18,19,K22";
        let a = Position::from_fen(Variant::International, fen).unwrap();
        let b = Position::from_fen(Variant::Killer, fen).unwrap();
        let white = |w: &LearnedWeights, p: &Position| {
            w.evaluate_white(
                p.pieces(Color::White).bits64(),
                p.pieces(Color::Black).bits64(),
                p.kings().bits64(),
                true,
            )
        };
        assert_eq!(white(&intl, &a), white(&killer, &b));
        assert!(intl.for_variant(Variant::English).is_none());
        let english = LearnedWeights::material_only(Variant::English, 100, 250);
        assert!(english.for_variant(Variant::Russian).is_some());
        assert!(english.for_variant(Variant::Turkish).is_none());
        assert!(english.for_variant(Variant::Canadian).is_none());
    }

    /// Zero runs keep mostly-zero weights small, and the first (plain) format still decodes.
    #[test]
    fn sparse_weights_are_small_and_plain_files_still_decode() {
        for v in [Variant::International, Variant::English, Variant::Turkish] {
            let w = LearnedWeights::material_only(v, 100, -250);
            let bytes = w.to_bytes();
            assert!(bytes.len() < 64, "{v}: {} bytes", bytes.len());
            assert_eq!(
                LearnedWeights::from_bytes(v, &bytes).unwrap().weights,
                w.weights
            );
            let mut plain = MAGIC_PLAIN.to_vec();
            plain.extend_from_slice(&bytes[4..4 + 1 + v.key().len() + 12]);
            for x in w.weights.iter().flatten() {
                plain.extend_from_slice(&x.to_le_bytes());
            }
            assert_eq!(
                LearnedWeights::from_bytes(v, &plain).unwrap().weights,
                w.weights
            );
        }
        for x in [0i16, 1, -1, 63, -64, i16::MAX, i16::MIN] {
            assert_eq!(unzigzag(zigzag(x)), Ok(x));
        }
    }
}
