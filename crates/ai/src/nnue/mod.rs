//! An NNUE-style evaluation: a small network whose first layer is a sum of rows selected by the pieces on
//! the board, kept up to date as the search moves from one position to the next, and evaluated in
//! integers (AVX2 where the CPU has it, chosen at run time; a portable path that gives the same numbers).
//!
//! **Inputs.** For each perspective (White's and Black's), 4 x N piece-square features (N: the board's
//! playable squares; 50 in international): own man, own king, opponent man, opponent king on each square.
//! White reads the squares as they are, Black reads the board rotated by 180 degrees with the colours
//! swapped, so a position and its colour-mirrored copy give the same inputs with the perspectives
//! exchanged, and (the output is for the side to move) score exactly opposite for White.
//!
//! **Layers.** `4N -> H` (the accumulator, `i16`, one per perspective, sharing weights), clipped to
//! `[0, 127]`; the side to move's `H` then the opponent's, `2H -> L` (`i16` weights, `i32` sums, shifted
//! right by 6 and clipped to `[0, 127]`), `L -> 1`. In the float model the trainer fits ([`fit`]), 127
//! stands for 1.0 after each clip and the second and third layers' weights are scaled by 64; the output
//! is in units of 100 centi-men. Every integer step is exact (no saturation can be reached: the
//! first-layer weights are clamped so that no accumulator can leave `i16` with 40 pieces on the board),
//! so the SIMD and portable paths agree bit for bit, and the incremental accumulator equals a full
//! refresh (tested).
//!
//! **Incremental update.** [`Accumulator`] remembers the sets it was computed for; the next position is
//! reached by subtracting the rows of the pieces that left a square and adding those that arrived (the
//! move's from and to squares, its captured pieces and a promotion all show up as such differences).
//! The searcher keeps one per ply, and a leaf is computed from the closest of: the accumulator of its own
//! ply (the sibling last evaluated there) and of the ply above (written into this ply's as it is read,
//! each perspective's sums held in AVX2 registers while the rows are applied); a full refresh when the
//! difference is large. A position met again at its ply with the same side to move reuses the output
//! kept there.
//!
//! **Second layer with AVX2.** When every second-layer weight fits in a byte (a fitted network's do: the
//! trainer keeps the float weights within +-[`W2_LIMIT`], so within +-64 as integers), the clipped
//! activations are packed to bytes and multiplied in groups of four with `maddubs`, groups of four zeros
//! skipped; when the weights are within +-64, two groups' `i16` pair sums are added before widening.
//! Both are exact, so the integers are the portable loops' (tested); other weights (a network from
//! elsewhere, or one fitted before the bound) take the `i16` kernel.
//!
//! **File format** (`DNN1`, little-endian): magic `DNN1`, `u16` version (1), `u8` length and the variant
//! key, `u16` N, `u16` H, `u16` L, then the first layer's weights (`4N x H` `i16`, row per feature), its
//! biases (`H` `i16`), the second layer's weights (`L x 2H` `i16`, row per output), its biases (`L` `i32`),
//! the output weights (`L` `i16`) and bias (`i32`). Nothing may follow. A bad magic, another version, a
//! shape that does not fit the board or the format's limits, or a short file is a typed [`NnueError`].

pub mod fit;
mod simd;

use draughts_engine::{Board, BoardKind, Color, Position, Variant};

/// The first bytes of a network file.
pub const MAGIC: &[u8; 4] = b"DNN1";
/// The format version this code reads and writes.
pub const VERSION: u16 = 1;
/// The largest first layer the format allows.
pub const MAX_HIDDEN: usize = 256;
/// The largest second layer the format allows.
pub const MAX_LAYER2: usize = 64;
/// Piece kinds per perspective: own man, own king, opponent man, opponent king.
pub const KINDS: usize = 4;
/// The scale of a clipped activation (1.0 in the float model).
pub const ONE: i32 = 127;
/// The scale of the second and third layers' weights.
pub const WEIGHT_SCALE: i32 = 64;
/// The trainer keeps the second layer's float weights within +-this (so within +-64 as integers, where
/// the AVX2 kernel adds two groups' pair sums in `i16`: its fastest path). A network fitted without the
/// bound had 11 of 8,192 weights outside it, two outside a byte, and searched on the `i16` kernel at 0.85
/// of the node rate (docs/ai.md, round twenty-one).
pub const W2_LIMIT: f32 = 1.0;
/// Centi-men per unit of the float model's output.
pub const OUTPUT_CM: i32 = 100;
/// More differing pieces than this, and an accumulator is computed afresh rather than updated.
const MAX_DELTA: u32 = 12;

/// Why a network file was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NnueError {
    #[error("not a network file (bad magic)")]
    Magic,
    #[error("network file version {0}; this build reads version {VERSION}")]
    Version(u16),
    #[error("the network file is truncated")]
    Truncated,
    #[error("the network file has {0} bytes after its end")]
    Trailing(usize),
    #[error("the network file is for variant '{0}'")]
    Variant(String),
    #[error("the network's shape ({0}) does not fit this board or the format's limits")]
    Shape(String),
    #[error("a network needs a board of at most 64 squares")]
    Board,
}

/// The square tables of one board: each bit's square index in White's view and in Black's (the board
/// rotated by 180 degrees).
#[derive(Clone, Debug)]
struct Squares {
    n: usize,
    white: [u8; 64],
    black: [u8; 64],
}

impl Squares {
    fn of(board: &Board) -> Result<Squares, NnueError> {
        if board.kind == BoardKind::Twelve {
            return Err(NnueError::Board);
        }
        let mut white = [u8::MAX; 64];
        let mut black = [u8::MAX; 64];
        let squares: Vec<_> = board.squares().collect();
        let index_of = |bit: u32| squares.iter().position(|s| s.bit() == bit);
        for (i, sq) in squares.iter().enumerate() {
            let (f, r) = board.coords(*sq);
            let rot = board
                .square_at(board.size - 1 - f, board.size - 1 - r)
                .ok_or(NnueError::Board)?;
            white[sq.bit() as usize] = i as u8;
            black[sq.bit() as usize] = index_of(rot.bit()).ok_or(NnueError::Board)? as u8;
        }
        Ok(Squares {
            n: squares.len(),
            white,
            black,
        })
    }
}

/// The piece sets of a position: White's, Black's, the kings (the board's bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sets {
    pub white: u64,
    pub black: u64,
    pub kings: u64,
}

impl Sets {
    pub fn of(pos: &Position) -> Sets {
        Sets {
            white: pos.pieces(Color::White).bits64(),
            black: pos.pieces(Color::Black).bits64(),
            kings: pos.kings().bits64(),
        }
    }

    /// White men, white kings, black men, black kings.
    #[inline(always)]
    fn planes(&self) -> [u64; 4] {
        [
            self.white & !self.kings,
            self.white & self.kings,
            self.black & !self.kings,
            self.black & self.kings,
        ]
    }
}

/// A network in the engine's integers.
#[derive(Clone, Debug)]
pub struct Network {
    variant: Variant,
    squares: Squares,
    hidden: usize,
    layer2: usize,
    w1: Vec<i16>,
    b1: Vec<i16>,
    w2: Vec<i16>,
    b2: Vec<i32>,
    w3: Vec<i16>,
    b3: i32,
    /// `w2` as bytes for the AVX2 kernel's second layer (`simd::QuadWeights`), when every weight
    /// fits in one; derived from `w2` and `w3`, not stored in the file.
    w2_quads: Option<simd::QuadWeights>,
    kernel: Kernel,
}

/// Which arithmetic evaluates the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// The loops as compiled for the target's baseline (SSE2 on x86-64).
    Portable,
    /// The same loops compiled for AVX2 and chosen at run time (x86-64, when the CPU has it).
    Avx2,
}

impl Kernel {
    /// The fastest kernel this CPU runs.
    pub fn detect() -> Kernel {
        if simd::has_avx2() {
            Kernel::Avx2
        } else {
            Kernel::Portable
        }
    }
}

/// The float weights of a network (the trainer's model), in the layout of [`Network`].
#[derive(Clone, Debug, PartialEq)]
pub struct FloatNet {
    pub variant: Variant,
    pub hidden: usize,
    pub layer2: usize,
    /// `4N x H`, row per feature.
    pub w1: Vec<f32>,
    pub b1: Vec<f32>,
    /// `L x 2H`, row per output.
    pub w2: Vec<f32>,
    pub b2: Vec<f32>,
    pub w3: Vec<f32>,
    pub b3: f32,
}

impl FloatNet {
    /// Features per perspective.
    pub fn n_features(&self) -> usize {
        self.w1.len() / self.hidden
    }
}

fn shape_ok(hidden: usize, layer2: usize) -> bool {
    hidden > 0
        && hidden <= MAX_HIDDEN
        && hidden.is_multiple_of(16)
        && layer2 > 0
        && layer2 <= MAX_LAYER2
        && layer2.is_multiple_of(8)
}

impl Network {
    /// The integer network of a float model (rounded; the first layer clamped so that no accumulator can
    /// overflow, the others to `i16`).
    pub fn quantise(net: &FloatNet) -> Result<Network, NnueError> {
        let squares = Squares::of(net.variant.rules().board.board())?;
        let n_features = KINDS * squares.n;
        if !shape_ok(net.hidden, net.layer2)
            || net.w1.len() != n_features * net.hidden
            || net.b1.len() != net.hidden
            || net.w2.len() != net.layer2 * 2 * net.hidden
            || net.b2.len() != net.layer2
            || net.w3.len() != net.layer2
        {
            return Err(NnueError::Shape(format!(
                "H {} L {} for {} squares",
                net.hidden, net.layer2, squares.n
            )));
        }
        // At most 40 pieces plus the bias: 41 terms, each kept within i16::MAX / 41.
        let first = f32::from(i16::MAX) / 41.0;
        let q = |x: f32, scale: f32, limit: f32| (x * scale).round().clamp(-limit, limit) as i16;
        let one = ONE as f32;
        let ws = WEIGHT_SCALE as f32;
        let w2: Vec<i16> = net.w2.iter().map(|&x| q(x, ws, 32767.0)).collect();
        Ok(Network {
            variant: net.variant,
            squares,
            hidden: net.hidden,
            layer2: net.layer2,
            w1: net.w1.iter().map(|&x| q(x, one, first)).collect(),
            b1: net.b1.iter().map(|&x| q(x, one, first)).collect(),
            w2,
            b2: net
                .b2
                .iter()
                .map(|&x| (x * one * ws).round().clamp(-1e9, 1e9) as i32)
                .collect(),
            w3: net.w3.iter().map(|&x| q(x, ws, 32767.0)).collect(),
            b3: (net.b3 * one * ws).round().clamp(-1e9, 1e9) as i32,
            w2_quads: None,
            kernel: Kernel::detect(),
        }
        .with_quads())
    }

    /// The float model this network rounds (each integer over its scale): the start of a fit that goes
    /// on from a shipped network (`fit::NnueFitConfig::init`). `quantise` of it gives this network back.
    pub fn to_float(&self) -> FloatNet {
        let one = ONE as f32;
        let ws = WEIGHT_SCALE as f32;
        FloatNet {
            variant: self.variant,
            hidden: self.hidden,
            layer2: self.layer2,
            w1: self.w1.iter().map(|&x| f32::from(x) / one).collect(),
            b1: self.b1.iter().map(|&x| f32::from(x) / one).collect(),
            w2: self.w2.iter().map(|&x| f32::from(x) / ws).collect(),
            b2: self.b2.iter().map(|&x| x as f32 / (one * ws)).collect(),
            w3: self.w3.iter().map(|&x| f32::from(x) / ws).collect(),
            b3: self.b3 as f32 / (one * ws),
        }
    }

    /// The network with its derived AVX2 weights made.
    fn with_quads(self) -> Network {
        let w2_quads = simd::QuadWeights::of(&self.w2, &self.w3, self.layer2, 2 * self.hidden);
        Network { w2_quads, ..self }
    }

    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// `(N, H, L)`: squares, first layer, second layer.
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.squares.n, self.hidden, self.layer2)
    }

    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// The same network on another kernel (`Avx2` only where the CPU has it: else `None`).
    pub fn with_kernel(&self, kernel: Kernel) -> Option<Network> {
        if kernel == Kernel::Avx2 && Kernel::detect() != Kernel::Avx2 {
            return None;
        }
        Some(Network {
            kernel,
            ..self.clone()
        })
    }

    /// The same network for another variant on the same board (international's for killer).
    pub fn for_variant(&self, variant: Variant) -> Option<Network> {
        (variant.rules().board == self.variant.rules().board).then(|| Network {
            variant,
            ..self.clone()
        })
    }

    /// The file's bytes (module docs).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        let key = self.variant.key().as_bytes();
        b.push(key.len() as u8);
        b.extend_from_slice(key);
        for n in [self.squares.n, self.hidden, self.layer2] {
            b.extend_from_slice(&(n as u16).to_le_bytes());
        }
        for v in self.w1.iter().chain(&self.b1).chain(&self.w2) {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for v in &self.b2 {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for v in &self.w3 {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&self.b3.to_le_bytes());
        b
    }

    /// Reads a file written by [`Network::to_bytes`] for `variant` (module docs for the errors).
    pub fn from_bytes(variant: Variant, bytes: &[u8]) -> Result<Network, NnueError> {
        let mut r = Reader { bytes, at: 0 };
        if r.take(4)? != MAGIC {
            return Err(NnueError::Magic);
        }
        let version = r.u16()?;
        if version != VERSION {
            return Err(NnueError::Version(version));
        }
        let len = usize::from(r.take(1)?[0]);
        let key = String::from_utf8_lossy(r.take(len)?).into_owned();
        if key != variant.key() {
            return Err(NnueError::Variant(key));
        }
        let (n, hidden, layer2) = (
            usize::from(r.u16()?),
            usize::from(r.u16()?),
            usize::from(r.u16()?),
        );
        let squares = Squares::of(variant.rules().board.board())?;
        if n != squares.n || !shape_ok(hidden, layer2) {
            return Err(NnueError::Shape(format!(
                "N {n} H {hidden} L {layer2}; the board has {} squares",
                squares.n
            )));
        }
        let w1 = r.i16s(KINDS * n * hidden)?;
        let b1 = r.i16s(hidden)?;
        let w2 = r.i16s(layer2 * 2 * hidden)?;
        let b2 = (0..layer2).map(|_| r.i32()).collect::<Result<_, _>>()?;
        let w3 = r.i16s(layer2)?;
        let b3 = r.i32()?;
        if r.at != bytes.len() {
            return Err(NnueError::Trailing(bytes.len() - r.at));
        }
        Ok(Network {
            variant,
            squares,
            hidden,
            layer2,
            w1,
            b1,
            w2,
            b2,
            w3,
            b3,
            w2_quads: None,
            kernel: Kernel::detect(),
        }
        .with_quads())
    }

    /// The first-layer feature of a piece kind (0-3 in White's view: white man, white king, black man,
    /// black king) on `bit`, seen from `perspective`.
    #[inline(always)]
    fn feature(&self, perspective: Color, kind: usize, bit: u32) -> usize {
        match perspective {
            Color::White => kind * self.squares.n + usize::from(self.squares.white[bit as usize]),
            // Black's own pieces are kinds 2 and 3 in White's view.
            Color::Black => {
                (kind ^ 2) * self.squares.n + usize::from(self.squares.black[bit as usize])
            }
        }
    }

    /// The active features of a position from one perspective (the trainer's inputs), in bit order of
    /// the kinds white man, white king, black man, black king.
    pub fn features(&self, sets: Sets, perspective: Color, out: &mut Vec<usize>) {
        out.clear();
        for (kind, mut plane) in sets.planes().into_iter().enumerate() {
            while plane != 0 {
                let bit = plane.trailing_zeros();
                plane &= plane - 1;
                out.push(self.feature(perspective, kind, bit));
            }
        }
    }

    /// An accumulator computed afresh for `sets`.
    pub fn refresh(&self, sets: Sets, acc: &mut Accumulator) {
        simd::dispatch(self.kernel, Refresh(self, sets, acc))
    }

    #[inline(always)]
    fn refresh_in(&self, sets: Sets, acc: &mut Accumulator) {
        acc.values.clear();
        acc.values.extend_from_slice(&self.b1);
        acc.values.extend_from_slice(&self.b1);
        for (kind, plane) in sets.planes().into_iter().enumerate() {
            self.apply(acc, kind, plane, true);
        }
        acc.sets = Some(sets);
        acc.score = None;
    }

    /// Adds (`add`) or takes away the first-layer rows of the pieces of `kind` on `bits`, in both
    /// perspectives' halves of `acc`. Inlined into the caller, so it runs in the caller's SIMD context.
    #[inline(always)]
    fn apply(&self, acc: &mut Accumulator, kind: usize, mut bits: u64, add: bool) {
        let h = self.hidden;
        while bits != 0 {
            let bit = bits.trailing_zeros();
            bits &= bits - 1;
            for (p, colour) in [Color::White, Color::Black].into_iter().enumerate() {
                let f = self.feature(colour, kind, bit);
                let (lanes, row) = (
                    &mut acc.values[p * h..(p + 1) * h],
                    &self.w1[f * h..(f + 1) * h],
                );
                if add {
                    simd::add(lanes, row);
                } else {
                    simd::sub(lanes, row);
                }
            }
        }
    }

    /// Sets `acc` to the sums of `sets`, reached from the sums of `from` (another accumulator; `acc`
    /// itself when `None`) by the rows of the pieces that differ: each 16-lane stretch of the sums is
    /// read once, has every differing row taken away or added, and is written once. `false` (and `acc`
    /// untouched) when the source holds no sets or more than a few pieces differ.
    #[inline(always)]
    fn update_from_in(
        &self,
        isa: simd::Isa,
        from: Option<&Accumulator>,
        sets: Sets,
        acc: &mut Accumulator,
    ) -> bool {
        let Some(old) = from.map_or(acc.sets, |f| f.sets) else {
            return false;
        };
        let (old_planes, new_planes) = (old.planes(), sets.planes());
        let delta: u32 = (0..4)
            .map(|k| (old_planes[k] ^ new_planes[k]).count_ones())
            .sum();
        if delta > MAX_DELTA {
            return false;
        }
        let h = self.hidden;
        // The first-layer rows (offsets into w1) that leave and arrive, for each perspective.
        const M: usize = MAX_DELTA as usize;
        let (mut gone, mut came) = ([[0usize; M]; 2], [[0usize; M]; 2]);
        let (mut n_gone, mut n_came) = (0, 0);
        for kind in 0..4 {
            for (bits, rows, n) in [
                (old_planes[kind] & !new_planes[kind], &mut gone, &mut n_gone),
                (new_planes[kind] & !old_planes[kind], &mut came, &mut n_came),
            ] {
                let mut bits = bits;
                while bits != 0 {
                    let bit = bits.trailing_zeros();
                    bits &= bits - 1;
                    rows[0][*n] = self.feature(Color::White, kind, bit) * h;
                    rows[1][*n] = self.feature(Color::Black, kind, bit) * h;
                    *n += 1;
                }
            }
        }
        acc.values.resize(2 * h, 0);
        for p in 0..2 {
            let (gone, came) = (&gone[p][..n_gone], &came[p][..n_came]);
            let source = from.map(|f| &f.values[p * h..(p + 1) * h]);
            let dest = &mut acc.values[p * h..(p + 1) * h];
            simd::shift(isa, source, dest, &self.w1, gone, came);
        }
        acc.sets = Some(sets);
        acc.score = None;
        true
    }

    /// The output for the side to move, in centi-men, from an accumulator of the position.
    pub fn output(&self, acc: &Accumulator, white_to_move: bool) -> i32 {
        simd::dispatch(self.kernel, Output(self, acc, white_to_move))
    }

    #[inline(always)]
    fn output_in(&self, acc: &Accumulator, white_to_move: bool) -> i32 {
        let h = self.hidden;
        let (own, other) = acc.values.split_at(h);
        let (own, other) = if white_to_move {
            (own, other)
        } else {
            (other, own)
        };
        let mut clipped = [0i16; 2 * MAX_HIDDEN];
        simd::clip(own, &mut clipped[..h]);
        simd::clip(other, &mut clipped[h..2 * h]);
        let out = simd::layers(&clipped[..2 * h], &self.w2, &self.b2, &self.w3, self.b3);
        // out is the float output times ONE * WEIGHT_SCALE.
        (i64::from(out) * i64::from(OUTPUT_CM) / i64::from(ONE * WEIGHT_SCALE)) as i32
    }

    /// [`Network::output_in`] with the AVX2 kernels written out.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn output_avx2(&self, v3: pulp::x86::V3, acc: &Accumulator, white_to_move: bool) -> i32 {
        let h = self.hidden;
        let (own, other) = acc.values.split_at(h);
        let (own, other) = if white_to_move {
            (own, other)
        } else {
            (other, own)
        };
        let out = if let Some(wq) = &self.w2_quads {
            simd::avx2::layers_quads(v3, own, other, wq, &self.b2, self.b3)
        } else {
            let mut clipped = [0i16; 2 * MAX_HIDDEN];
            simd::avx2::clip(v3, own, &mut clipped[..h]);
            simd::avx2::clip(v3, other, &mut clipped[h..2 * h]);
            simd::avx2::layers(v3, &clipped[..2 * h], &self.w2, &self.b2, &self.w3, self.b3)
        };
        (i64::from(out) * i64::from(OUTPUT_CM) / i64::from(ONE * WEIGHT_SCALE)) as i32
    }

    /// The score for the side to move, in centi-men, computed afresh (the reference).
    pub fn evaluate(&self, sets: Sets, white_to_move: bool) -> i32 {
        let mut acc = Accumulator::default();
        self.refresh(sets, &mut acc);
        self.output(&acc, white_to_move)
    }
}

struct Refresh<'a>(&'a Network, Sets, &'a mut Accumulator);
struct Output<'a>(&'a Network, &'a Accumulator, bool);

impl simd::Work for Refresh<'_> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        self.0.refresh_in(self.1, self.2)
    }
}

impl simd::Work for Output<'_> {
    type Output = i32;
    #[inline(always)]
    fn run(self) -> i32 {
        self.0.output_in(self.1, self.2)
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn run_avx2(self, v3: pulp::x86::V3) -> i32 {
        self.0.output_avx2(v3, self.1, self.2)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], NnueError> {
        let end = self.at.checked_add(n).ok_or(NnueError::Truncated)?;
        let s = self.bytes.get(self.at..end).ok_or(NnueError::Truncated)?;
        self.at = end;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16, NnueError> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn i32(&mut self) -> Result<i32, NnueError> {
        Ok(i32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn i16s(&mut self, n: usize) -> Result<Vec<i16>, NnueError> {
        let b = self.take(n.checked_mul(2).ok_or(NnueError::Truncated)?)?;
        Ok(b.chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect())
    }
}

/// The first layer's sums for both perspectives (White's, then Black's) and the sets they were computed
/// for.
#[derive(Clone, Debug, Default)]
pub struct Accumulator {
    values: Vec<i16>,
    sets: Option<Sets>,
    /// The last output computed from `values`, and for which side to move (White's: `true`).
    score: Option<(bool, i32)>,
}

impl Accumulator {
    /// The first layer's sums: White's perspective, then Black's.
    pub fn values(&self) -> &[i16] {
        &self.values
    }
}

/// The searcher's accumulators: one per ply (the last position evaluated at that ply).
#[derive(Clone, Debug, Default)]
pub struct AccumulatorStack {
    plies: Vec<Accumulator>,
    /// Full refreshes and incremental updates made (for the tests and benchmarks).
    pub refreshes: u64,
    pub updates: u64,
}

impl AccumulatorStack {
    /// Forgets every accumulator (a new network or a new game).
    pub fn clear(&mut self) {
        for a in &mut self.plies {
            a.sets = None;
        }
    }

    /// The score for the side to move of the position `sets` met at `ply`, in centi-men: the
    /// accumulator of this ply, else of the ply above, moved to `sets`; a refresh if neither is close.
    /// The same position met again at its ply with the same side to move gives the output kept from
    /// the last time. All of it runs in one piece on the network's kernel.
    pub fn evaluate(&mut self, net: &Network, sets: Sets, white_to_move: bool, ply: usize) -> i32 {
        if self.plies.len() <= ply + 1 {
            self.plies.resize_with(ply + 2, Accumulator::default);
        }
        simd::dispatch(
            net.kernel,
            StackEval(net, self, sets, white_to_move, ply + 1),
        )
    }

    /// Brings the accumulator of `here` (a ply plus one) to `sets`; `Err(score)` when it holds them and
    /// its kept output is for `white_to_move`.
    #[inline(always)]
    fn reach(
        &mut self,
        isa: simd::Isa,
        net: &Network,
        sets: Sets,
        white_to_move: bool,
        here: usize,
    ) -> Result<(), i32> {
        let near = |a: &Accumulator| {
            a.sets.map_or(u32::MAX, |s| {
                let (x, y) = (s.planes(), sets.planes());
                (0..4).map(|k| (x[k] ^ y[k]).count_ones()).sum()
            })
        };
        let d_here = near(&self.plies[here]);
        if d_here == 0 {
            return match self.plies[here].score {
                Some((wtm, score)) if wtm == white_to_move => Err(score),
                _ => Ok(()),
            };
        }
        let d_above = near(&self.plies[here - 1]);
        let (above, rest) = self.plies.split_at_mut(here);
        let acc = &mut rest[0];
        let from = (d_above < d_here).then(|| &above[here - 1]);
        if net.update_from_in(isa, from, sets, acc) {
            self.updates += 1;
        } else {
            net.refresh_in(sets, acc);
            self.refreshes += 1;
        }
        Ok(())
    }
}

struct StackEval<'a>(&'a Network, &'a mut AccumulatorStack, Sets, bool, usize);

impl simd::Work for StackEval<'_> {
    type Output = i32;
    #[inline(always)]
    fn run(self) -> i32 {
        let StackEval(net, stack, sets, wtm, here) = self;
        if let Err(score) = stack.reach(None, net, sets, wtm, here) {
            return score;
        }
        let acc = &mut stack.plies[here];
        let score = net.output_in(acc, wtm);
        acc.score = Some((wtm, score));
        score
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn run_avx2(self, v3: pulp::x86::V3) -> i32 {
        let StackEval(net, stack, sets, wtm, here) = self;
        if let Err(score) = stack.reach(Some(v3), net, sets, wtm, here) {
            return score;
        }
        let acc = &mut stack.plies[here];
        let score = net.output_avx2(v3, acc, wtm);
        acc.score = Some((wtm, score));
        score
    }
}

#[cfg(test)]
mod tests;
