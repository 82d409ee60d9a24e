//! The network's integer kernels. They are plain Rust loops; [`dispatch`] runs a piece of the network
//! either as compiled for the target's baseline ([`Kernel::Portable`]: SSE2 on x86-64, whatever the
//! target has elsewhere) or inside an AVX2 context chosen at run time ([`Kernel::Avx2`], through `pulp`'s
//! safe `V3` token), where the compiler turns the same loops into 256-bit instructions. Both compute the
//! same integers: additions wrap in `i16` (the network's weights keep every sum inside it anyway), clips
//! are exact, and the dot products are exact `i32` sums (no term or sum can reach `i32`'s limits with
//! activations of at most 127 and `i16` weights).

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
    use pulp::bytemuck;
    use pulp::x86::V3;
    use std::arch::x86_64::__m256i;

    #[inline(always)]
    fn load(s: &[i16]) -> __m256i {
        let a: [i16; 16] = s[..16].try_into().expect("16 lanes");
        bytemuck::cast(a)
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
}
