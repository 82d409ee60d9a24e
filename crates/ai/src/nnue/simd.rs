//! The network's integer kernels. They are plain Rust loops; [`dispatch`] runs a piece of the network
//! either as compiled for the target's baseline ([`Kernel::Portable`]: SSE2 on x86-64, whatever the
//! target has elsewhere) or inside an AVX2 context chosen at run time ([`Kernel::Avx2`], through `pulp`'s
//! safe `V3` token), where the compiler turns the same loops into 256-bit instructions. Both compute the
//! same integers: additions wrap in `i16` (the network's weights keep every sum inside it anyway), clips
//! are exact, and the dot products are exact `i32` sums (no term or sum can reach `i32`'s limits with
//! activations of at most 127 and `i16` weights). The hottest parts (the second layer, and the
//! accumulator's update held in registers) are also written out with AVX2 intrinsics in [`avx2`], which
//! compute the same integers.

use super::Kernel;

/// A piece of the network's work, run by [`dispatch`]. `run` must be `#[inline(always)]` and call only
/// `#[inline(always)]` code, so that all of it is compiled inside the AVX2 context (a closure would be a
/// function of its own, compiled for the baseline).
pub(super) trait Work: Sized {
    type Output;
    fn run(self) -> Self::Output;
    /// The work in the AVX2 context, given its token (by default `run`, compiled there).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn run_avx2(self, _v3: pulp::x86::V3) -> Self::Output {
        self.run()
    }
}

/// `pulp`'s entry into the AVX2 context.
#[cfg(target_arch = "x86_64")]
struct InAvx2<W>(W, pulp::x86::V3);

#[cfg(target_arch = "x86_64")]
impl<W: Work> pulp::WithSimd for InAvx2<W> {
    type Output = W::Output;
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) -> W::Output {
        self.0.run_avx2(self.1)
    }
}

/// Runs `work` on `kernel`'s instruction set.
#[inline(always)]
pub(super) fn dispatch<W: Work>(kernel: Kernel, work: W) -> W::Output {
    #[cfg(target_arch = "x86_64")]
    if kernel == Kernel::Avx2
        && let Some(v3) = pulp::x86::V3::try_new()
    {
        return pulp::Simd::vectorize(v3, InAvx2(work, v3));
    }
    let _ = kernel;
    work.run()
}

/// Whether this CPU runs [`Kernel::Avx2`].
pub(super) fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        pulp::x86::V3::try_new().is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `acc += row`, lane by lane.
#[inline(always)]
pub(super) fn add(acc: &mut [i16], row: &[i16]) {
    for (a, r) in acc.iter_mut().zip(row) {
        *a = a.wrapping_add(*r);
    }
}

/// `acc -= row`, lane by lane.
#[inline(always)]
pub(super) fn sub(acc: &mut [i16], row: &[i16]) {
    for (a, r) in acc.iter_mut().zip(row) {
        *a = a.wrapping_sub(*r);
    }
}

/// The instruction set a piece of work runs in: AVX2's token where it was chosen, else `None`.
#[cfg(target_arch = "x86_64")]
pub(super) type Isa = Option<pulp::x86::V3>;
/// The instruction set a piece of work runs in (no written-out kernels on this target).
#[cfg(not(target_arch = "x86_64"))]
pub(super) type Isa = Option<std::convert::Infallible>;

/// `dest = source - (the rows of w1 at the offsets gone) + (the rows at came)` (`dest` itself is the
/// source when `source` is `None`; the length a multiple of 16): with AVX2, for the common lengths, the
/// lanes held in registers while the rows are applied; else a stretch of 16 lanes at a time.
#[inline(always)]
pub(super) fn shift(
    isa: Isa,
    source: Option<&[i16]>,
    dest: &mut [i16],
    w1: &[i16],
    gone: &[usize],
    came: &[usize],
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(v3) = isa {
        match dest.len() / 16 {
            1 => return avx2::shift::<1>(v3, source, dest, w1, gone, came),
            2 => return avx2::shift::<2>(v3, source, dest, w1, gone, came),
            4 => return avx2::shift::<4>(v3, source, dest, w1, gone, came),
            8 => return avx2::shift::<8>(v3, source, dest, w1, gone, came),
            16 => return avx2::shift::<16>(v3, source, dest, w1, gone, came),
            _ => {}
        }
    }
    let _ = isa;
    shift_by_stretch(source, dest, w1, gone, came)
}

/// [`shift`] one stretch of 16 lanes at a time.
#[inline(always)]
pub(super) fn shift_by_stretch(
    source: Option<&[i16]>,
    dest: &mut [i16],
    w1: &[i16],
    gone: &[usize],
    came: &[usize],
) {
    for c in (0..dest.len()).step_by(16) {
        let s: &[i16] = source.unwrap_or(dest);
        let mut v: [i16; 16] = s[c..c + 16].try_into().expect("16 lanes");
        for &r in gone {
            for (x, w) in v.iter_mut().zip(&w1[r + c..r + c + 16]) {
                *x = x.wrapping_sub(*w);
            }
        }
        for &r in came {
            for (x, w) in v.iter_mut().zip(&w1[r + c..r + c + 16]) {
                *x = x.wrapping_add(*w);
            }
        }
        dest[c..c + 16].copy_from_slice(&v);
    }
}

/// `out = clamp(x, 0, 127)`.
#[inline(always)]
pub(super) fn clip(x: &[i16], out: &mut [i16]) {
    for (o, v) in out.iter_mut().zip(x) {
        *o = (*v).clamp(0, super::ONE as i16);
    }
}

/// `sum(a[i] * b[i])` in `i32` (lengths a multiple of 16).
#[inline(always)]
pub(super) fn dot(a: &[i16], b: &[i16]) -> i32 {
    // Eight running sums of adjacent pairs of products (the shape of one 256-bit multiply-add);
    // integer sums in any order are the same number.
    let mut lanes = [0i32; 8];
    for (x, y) in a.chunks_exact(16).zip(b.chunks_exact(16)) {
        for i in 0..8 {
            let pair = i32::from(x[2 * i]) * i32::from(y[2 * i])
                + i32::from(x[2 * i + 1]) * i32::from(y[2 * i + 1]);
            lanes[i] = lanes[i].wrapping_add(pair);
        }
    }
    lanes.iter().fold(0i32, |s, v| s.wrapping_add(*v))
}

/// The second and third layers: `b3 + sum_j w3[j] * clamp((b2[j] + x . w2[j]) >> 6, 0, 127)`.
#[inline(always)]
pub(super) fn layers(x: &[i16], w2: &[i16], b2: &[i32], w3: &[i16], b3: i32) -> i32 {
    let mut out = b3;
    for ((row, b), w) in w2.chunks_exact(x.len()).zip(b2).zip(w3) {
        let z = b.wrapping_add(dot(x, row));
        out = out.wrapping_add((z >> 6).clamp(0, super::ONE) * i32::from(*w));
    }
    out
}

/// The same integers with AVX2 instructions written out (through `pulp`'s safe token), eight outputs at
/// a time.
#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    use super::QuadWeights;
    use pulp::bytemuck;
    use pulp::x86::V3;
    use std::arch::x86_64::__m256i;

    #[inline(always)]
    fn load(s: &[i16]) -> __m256i {
        let a: [i16; 16] = s[..16].try_into().expect("16 lanes");
        bytemuck::cast(a)
    }

    /// [`super::shift`] over `16 * C` lanes kept in registers.
    #[inline(always)]
    pub(in super::super) fn shift<const C: usize>(
        v3: V3,
        source: Option<&[i16]>,
        dest: &mut [i16],
        w1: &[i16],
        gone: &[usize],
        came: &[usize],
    ) {
        let a = v3.avx2;
        let mut v: [__m256i; C] = {
            let s: &[i16] = source.unwrap_or(dest);
            std::array::from_fn(|c| load(&s[16 * c..]))
        };
        for &r in gone {
            let row = &w1[r..r + 16 * C];
            for (c, x) in v.iter_mut().enumerate() {
                *x = a._mm256_sub_epi16(*x, load(&row[16 * c..]));
            }
        }
        for &r in came {
            let row = &w1[r..r + 16 * C];
            for (c, x) in v.iter_mut().enumerate() {
                *x = a._mm256_add_epi16(*x, load(&row[16 * c..]));
            }
        }
        for (d, x) in dest.chunks_exact_mut(16).zip(&v) {
            let o: [i16; 16] = bytemuck::cast(*x);
            d.copy_from_slice(&o);
        }
    }

    /// `out = clamp(x, 0, 127)` (lengths a multiple of 16).
    #[inline(always)]
    pub(in super::super) fn clip(v3: V3, x: &[i16], out: &mut [i16]) {
        let zero = v3.avx._mm256_setzero_si256();
        let top = v3.avx._mm256_set1_epi16(super::super::ONE as i16);
        for (o, v) in out.chunks_exact_mut(16).zip(x.chunks_exact(16)) {
            let y = v3
                .avx2
                ._mm256_min_epi16(v3.avx2._mm256_max_epi16(load(v), zero), top);
            let a: [i16; 16] = bytemuck::cast(y);
            o.copy_from_slice(&a);
        }
    }

    /// [`super::layers`] (`x.len()` a multiple of 16, `b2.len()` of 8).
    #[inline(always)]
    pub(in super::super) fn layers(
        v3: V3,
        x: &[i16],
        w2: &[i16],
        b2: &[i32],
        w3: &[i16],
        b3: i32,
    ) -> i32 {
        let (a, av) = (v3.avx2, v3.avx);
        let n = x.len();
        let zero = av._mm256_setzero_si256();
        let top = av._mm256_set1_epi32(super::super::ONE);
        let mut out = zero;
        for (g, (bias, w)) in b2.chunks_exact(8).zip(w3.chunks_exact(8)).enumerate() {
            let rows = &w2[g * 8 * n..(g + 1) * 8 * n];
            let mut acc = [zero; 8];
            for c in (0..n).step_by(16) {
                let xv = load(&x[c..]);
                for (k, sum) in acc.iter_mut().enumerate() {
                    let wv = load(&rows[k * n + c..]);
                    *sum = a._mm256_add_epi32(*sum, a._mm256_madd_epi16(xv, wv));
                }
            }
            let s01 = a._mm256_hadd_epi32(acc[0], acc[1]);
            let s23 = a._mm256_hadd_epi32(acc[2], acc[3]);
            let s45 = a._mm256_hadd_epi32(acc[4], acc[5]);
            let s67 = a._mm256_hadd_epi32(acc[6], acc[7]);
            let s0123 = a._mm256_hadd_epi32(s01, s23);
            let s4567 = a._mm256_hadd_epi32(s45, s67);
            let lo = a._mm256_permute2x128_si256::<0x20>(s0123, s4567);
            let hi = a._mm256_permute2x128_si256::<0x31>(s0123, s4567);
            let b: [i32; 8] = bias.try_into().expect("8 biases");
            let z = a._mm256_add_epi32(a._mm256_add_epi32(lo, hi), bytemuck::cast(b));
            let z = a._mm256_srai_epi32::<6>(z);
            let z = a._mm256_min_epi32(a._mm256_max_epi32(z, zero), top);
            let w: [i32; 8] = std::array::from_fn(|j| i32::from(w[j]));
            out = a._mm256_add_epi32(out, a._mm256_mullo_epi32(z, bytemuck::cast(w)));
        }
        let o: [i32; 8] = bytemuck::cast(out);
        o.iter().fold(b3, |s, v| s.wrapping_add(*v))
    }

    /// [`super::layers`] on the clipped halves `own` then `other` (each a multiple of 16 long), with the
    /// second layer's weights as bytes in the layout of [`super::QuadWeights`]: the activations packed
    /// to bytes, each group of four that is not all zero multiplied into every output with
    /// `maddubs` (exact: a pair of products is at most 2 x 127 x 128, inside `i16`) and widened to
    /// `i32` with `madd`; groups of four zeros add nothing and are skipped. The sums are the same `i32`s
    /// in another order, so the same integers as [`layers`].
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(in super::super) fn layers_quads(
        v3: V3,
        own: &[i16],
        other: &[i16],
        wq: &QuadWeights,
        b2: &[i32],
        b3: i32,
    ) -> i32 {
        let (wq, w3, pairs) = (&wq.bytes[..], &wq.w3[..], wq.pairs);
        match b2.len() / 8 {
            1 => quads::<1>(v3, own, other, wq, pairs, b2, w3, b3),
            2 => quads::<2>(v3, own, other, wq, pairs, b2, w3, b3),
            3 => quads::<3>(v3, own, other, wq, pairs, b2, w3, b3),
            4 => quads::<4>(v3, own, other, wq, pairs, b2, w3, b3),
            5 => quads::<5>(v3, own, other, wq, pairs, b2, w3, b3),
            6 => quads::<6>(v3, own, other, wq, pairs, b2, w3, b3),
            7 => quads::<7>(v3, own, other, wq, pairs, b2, w3, b3),
            // The format's limit: at most 64 outputs, eight to a group.
            _ => quads::<8>(v3, own, other, wq, pairs, b2, w3, b3),
        }
    }

    /// [`layers_quads`] for `G` groups of eight outputs.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn quads<const G: usize>(
        v3: V3,
        own: &[i16],
        other: &[i16],
        wq: &[i8],
        pairs: bool,
        b2: &[i32],
        w3: &[i32],
        b3: i32,
    ) -> i32 {
        let (a, av) = (v3.avx2, v3.avx);
        let zero = av._mm256_setzero_si256();
        let top = av._mm256_set1_epi16(super::super::ONE as i16);
        // The clipped activations as bytes (own then other) and a bit for each group of four of them
        // that is not all zero.
        let mut x = [0u8; 2 * super::super::MAX_HIDDEN];
        let n = own.len() + other.len();
        for (i, v) in own
            .chunks_exact(16)
            .chain(other.chunks_exact(16))
            .enumerate()
        {
            let y = a._mm256_min_epi16(a._mm256_max_epi16(load(v), zero), top);
            // Bytes 0-7 and 16-23 hold the sixteen values; gather them into the low half.
            let p = a._mm256_permute4x64_epi64::<0x08>(a._mm256_packus_epi16(y, y));
            let b: [u8; 32] = bytemuck::cast(p);
            x[16 * i..16 * i + 16].copy_from_slice(&b[..16]);
        }
        // At most 2 x 256 / 4 = 128 groups of four.
        let mut live = 0u128;
        for (i, c) in x[..n].chunks_exact(32).enumerate() {
            let b: [u8; 32] = c.try_into().expect("32 bytes");
            let is_zero = a._mm256_cmpeq_epi32(bytemuck::cast(b), zero);
            let zeros = av._mm256_movemask_ps(av._mm256_castsi256_ps(is_zero)) as u128;
            live |= (!zeros & 0xff) << (8 * i);
        }
        let ones = av._mm256_set1_epi16(1);
        let quad = |q: u32| {
            let q = q as usize;
            let xq = u32::from_le_bytes(x[4 * q..4 * q + 4].try_into().expect("4 bytes"));
            (
                av._mm256_set1_epi32(xq as i32),
                &wq[q * 32 * G..(q + 1) * 32 * G],
            )
        };
        let mut acc = [zero; G];
        while live != 0 {
            let (x1, rows1) = quad(live.trailing_zeros());
            live &= live - 1;
            if pairs && live != 0 {
                // Two groups' pair sums added in i16 before widening: exact when every weight is
                // within +-64 (`pairs`): 2 x 2 x 127 x 64 < 32768.
                let (x2, rows2) = quad(live.trailing_zeros());
                live &= live - 1;
                for (g, sum) in acc.iter_mut().enumerate() {
                    let r1: [i8; 32] = rows1[32 * g..32 * g + 32].try_into().expect("32 weights");
                    let r2: [i8; 32] = rows2[32 * g..32 * g + 32].try_into().expect("32 weights");
                    let p = a._mm256_add_epi16(
                        a._mm256_maddubs_epi16(x1, bytemuck::cast(r1)),
                        a._mm256_maddubs_epi16(x2, bytemuck::cast(r2)),
                    );
                    *sum = a._mm256_add_epi32(*sum, a._mm256_madd_epi16(p, ones));
                }
            } else {
                for (g, sum) in acc.iter_mut().enumerate() {
                    let r: [i8; 32] = rows1[32 * g..32 * g + 32].try_into().expect("32 weights");
                    let p = a._mm256_maddubs_epi16(x1, bytemuck::cast(r));
                    *sum = a._mm256_add_epi32(*sum, a._mm256_madd_epi16(p, ones));
                }
            }
        }
        let top = av._mm256_set1_epi32(super::super::ONE);
        let mut out = zero;
        for (g, sum) in acc.iter().enumerate() {
            let b: [i32; 8] = b2[8 * g..8 * g + 8].try_into().expect("8 biases");
            let z = a._mm256_srai_epi32::<6>(a._mm256_add_epi32(*sum, bytemuck::cast(b)));
            let z = a._mm256_min_epi32(a._mm256_max_epi32(z, zero), top);
            let w: [i32; 8] = w3[8 * g..8 * g + 8].try_into().expect("8 weights");
            out = a._mm256_add_epi32(out, a._mm256_mullo_epi32(z, bytemuck::cast(w)));
        }
        let o: [i32; 8] = bytemuck::cast(out);
        o.iter().fold(b3, |s, v| s.wrapping_add(*v))
    }
}

/// The second layer's weights (`L x n`, row per output) as bytes laid out for
/// [`avx2::layers_quads`]: for each group of four inputs, for each group of eight outputs, the eight
/// outputs' four weights in turn (32 bytes); and the output layer's weights widened to `i32`.
#[derive(Clone, Debug)]
pub(super) struct QuadWeights {
    bytes: Vec<i8>,
    w3: Vec<i32>,
    /// Every weight within +-64, so that two groups' pair sums can be added in `i16`.
    pub(super) pairs: bool,
}

impl QuadWeights {
    /// `None` when a weight does not fit in a byte.
    pub(super) fn of(w2: &[i16], w3: &[i16], layer2: usize, n: usize) -> Option<QuadWeights> {
        let mut bytes = Vec::with_capacity(w2.len());
        for q in 0..n / 4 {
            for j in 0..layer2 {
                for k in 0..4 {
                    bytes.push(i8::try_from(w2[j * n + 4 * q + k]).ok()?);
                }
            }
        }
        Some(QuadWeights {
            pairs: bytes.iter().all(|w| (-64..=64).contains(w)),
            bytes,
            w3: w3.iter().map(|&w| i32::from(w)).collect(),
        })
    }
}
