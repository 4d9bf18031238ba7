//! Reductions of dense [`LocalTensor`]s: [`norm_sqr`], [`inner`] and [`max_abs`].
//!
//! Summation scheme (the same for every thread budget, so results are bit-identical for any
//! `threads`): the elements are cut into fixed blocks of [`BLOCK`] elements; each block is
//! summed in double precision into 8 interleaved partial sums combined pairwise; the block
//! sums are then added in order with Neumaier compensation. The rounding error is then
//! about `eps * sqrt(BLOCK / 8) * (sum of |terms|)` over a block rather than growing with
//! the total length, which keeps 4096 x 4096 inner products within about `1e-14` relative of
//! the exact value. Blocks are computed in parallel (at most `threads` tasks) for large
//! inputs.
//!
//! The loops are memory-bound for large inputs; on x86-64 they prefetch [`PREFETCH_BYTES`]
//! ahead of the element being read (as OpenBLAS's `ddot` does), which the hardware
//! prefetcher alone does not match for one core streaming two arrays.

use std::borrow::Cow;

use rayon::prelude::*;

use crate::dtype::with_dtype;
use crate::dtype::{DType, C64};
use crate::elementwise::{ElementwiseError, PAR_MIN};
use crate::tensor::{LocalTensor, TensorError};
use crate::typed::{elems_of, Lane, Neumaier};

/// Elements per block of the summation scheme.
pub(crate) const BLOCK: usize = 1024;

/// Interleaved partial sums per block.
const LANES: usize = 8;

/// How far ahead of the element being read the reduction loops prefetch, in bytes (2 KiB:
/// 32 cache lines per stream). On the 2-core test machine (`benches/numpy_vdot.py`, two
/// 4096 x 4096 f64 tensors, see `docs/performance.md`) the prefetch took the 2-thread
/// `inner` from 12.1-12.5 ms to 10.6-11.3 ms (medians); 1 KiB and 4 KiB measured the same
/// as 2 KiB within the noise.
pub(crate) const PREFETCH_BYTES: usize = 2048;

/// Bytes of one cache line (the prefetch granule).
const LINE: usize = 64;

/// Hints the CPU to fetch the cache lines of `xs[at..at + LANES]` shifted [`PREFETCH_BYTES`]
/// ahead. The address may lie past the end of `xs` (a prefetch never faults and reads
/// nothing into the program), so it is computed with wrapping arithmetic. A no-op off x86-64.
#[inline(always)]
fn prefetch_ahead<X>(xs: &[X], at: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = xs.as_ptr().wrapping_add(at).cast::<u8>().wrapping_add(PREFETCH_BYTES);
        let mut line = 0;
        while line < std::mem::size_of::<X>() * LANES {
            // SAFETY: `_mm_prefetch` only hints the cache; it does not dereference the pointer
            // in the program's sense and cannot fault, whatever the address (SSE is part of
            // the x86-64 baseline).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(line).cast::<i8>()) };
            line += LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (xs, at);
}

/// `sum |x|^2` over every element of `a`, as `f64` (single precision is widened first).
/// `0.0` for an empty tensor; NaN or infinity propagate. `threads` bounds the parallelism;
/// the result is identical for every `threads`.
pub fn norm_sqr(a: &LocalTensor, threads: usize) -> f64 {
    with_dtype!(a.dtype(), T => {
        let x = elems_of::<T>(a);
        let sums = block_map(x.len(), threads, |r| lane_sum(&x[r], |v: &T| Lane::abs2(*v), 0.0, |p, q| p + q));
        compensate(sums.into_iter().map(|s| C64::new(s, 0.0))).re
    })
}

/// `sum conj(a_i) * b_i` over all elements in row-major order (as `numpy.vdot`), as `C64`.
///
/// `a` and `b` must have the same shape; their dtypes may differ (each is widened exactly;
/// products and sums are in double precision whatever the dtypes). `0` for empty tensors.
/// `threads` bounds the parallelism; the result is identical for every `threads`.
///
/// # Errors
/// [`ElementwiseError::ShapeMismatch`] if the shapes differ.
pub fn inner(a: &LocalTensor, b: &LocalTensor, threads: usize) -> Result<C64, ElementwiseError> {
    if a.shape() != b.shape() {
        return Err(ElementwiseError::ShapeMismatch {
            expected: a.shape().to_vec(),
            got: b.shape().to_vec(),
        });
    }
    let dtype = a.dtype().promote(b.dtype());
    let (a, b) = (widen(a, dtype)?, widen(b, dtype)?);
    Ok(with_dtype!(dtype, T => {
        let (x, y) = (elems_of::<T>(&a), elems_of::<T>(&b));
        let n = x.len().min(y.len());
        let sums = block_map(n, threads, |r| dot_block::<T>(&x[r.clone()], &y[r]));
        compensate(sums.into_iter().map(T::parts))
    }))
}

/// `max |x|` over every element of `a` (complex: the modulus), as `f64`. `0.0` for an
/// empty tensor; NaN if any element has a NaN component. `threads` bounds the parallelism.
pub fn max_abs(a: &LocalTensor, threads: usize) -> f64 {
    with_dtype!(a.dtype(), T => {
        let x = elems_of::<T>(a);
        let maxima = block_map(x.len(), threads, |r| {
            x[r].iter().fold(0.0f64, |m, v| {
                let v = Lane::abs(*v);
                if v.is_nan() || m.is_nan() { f64::NAN } else { m.max(v) }
            })
        });
        maxima.into_iter().fold(0.0f64, |m, v| if v.is_nan() || m.is_nan() { f64::NAN } else { m.max(v) })
    })
}

/// Borrows `t` if it has `dtype`, else widens it.
fn widen(t: &LocalTensor, dtype: DType) -> Result<Cow<'_, LocalTensor>, TensorError> {
    if t.dtype() == dtype {
        Ok(Cow::Borrowed(t))
    } else {
        t.cast(dtype).map(Cow::Owned)
    }
}

/// `f` applied to each block range `[i * BLOCK, min((i + 1) * BLOCK, n))`, in block order;
/// in parallel (at most `threads` tasks) when `n >= PAR_MIN`.
fn block_map<R: Send, F: Fn(std::ops::Range<usize>) -> R + Sync>(n: usize, threads: usize, f: F) -> Vec<R> {
    let blocks = n.div_ceil(BLOCK);
    let range = |i: usize| i * BLOCK..((i + 1) * BLOCK).min(n);
    if threads > 1 && n >= PAR_MIN {
        (0..blocks)
            .into_par_iter()
            .with_min_len(blocks.div_ceil(threads))
            .map(|i| f(range(i)))
            .collect()
    } else {
        (0..blocks).map(|i| f(range(i))).collect()
    }
}

/// Sum of `term(x)` over `xs` in [`LANES`] interleaved partial sums, combined pairwise.
#[inline]
fn lane_sum<X, W: Copy>(xs: &[X], term: impl Fn(&X) -> W, zero: W, add: impl Fn(W, W) -> W) -> W {
    let mut acc = [zero; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for (i, c) in chunks.enumerate() {
        prefetch_ahead(xs, i * LANES);
        for l in 0..LANES {
            acc[l] = add(acc[l], term(&c[l]));
        }
    }
    for (l, x) in rest.iter().enumerate() {
        acc[l] = add(acc[l], term(x));
    }
    let q = |i: usize| add(add(acc[i], acc[i + 1]), add(acc[i + 2], acc[i + 3]));
    add(q(0), q(4))
}

/// `sum conj(x_i) * y_i` over one block, in the wide type.
fn dot_block<T: Lane>(x: &[T], y: &[T]) -> T::W {
    let mut acc = [T::zero_w(); LANES];
    let xc = x.chunks_exact(LANES);
    let yc = y.chunks_exact(LANES);
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (i, (cx, cy)) in xc.zip(yc).enumerate() {
        prefetch_ahead(x, i * LANES);
        prefetch_ahead(y, i * LANES);
        for l in 0..LANES {
            acc[l] = acc[l] + T::conj_w(cx[l].widen()) * cy[l].widen();
        }
    }
    for (l, (a, b)) in xr.iter().zip(yr).enumerate() {
        acc[l] = acc[l] + T::conj_w(a.widen()) * b.widen();
    }
    let q = |i: usize| (acc[i] + acc[i + 1]) + (acc[i + 2] + acc[i + 3]);
    q(0) + q(4)
}

/// Neumaier-compensated sum of complex values, real and imaginary parts separately.
fn compensate(values: impl Iterator<Item = C64>) -> C64 {
    let (mut re, mut im) = (Neumaier::default(), Neumaier::default());
    for v in values {
        re.add(v.re);
        im.add(v.im);
    }
    C64::new(re.total(), im.total())
}
