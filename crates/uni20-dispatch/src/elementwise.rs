//! Element-wise kernels on dense [`LocalTensor`]s: [`axpby`] (`alpha * op(A) + beta *
//! op(B)` with a per-operand axis permutation and conjugation) and its thin wrappers
//! [`scale`], [`conj`], [`permute`], [`lincomb`] (`sum_k c_k t_k` over same-shaped
//! terms in one pass), plus [`reshape`] (a new shape over unchanged C-order
//! data). Also owns [`ElementwiseError`], shared with the reductions in `reduce.rs`.
//!
//! Arithmetic is done in double precision (`f64` or `C64`) and rounded once to the output
//! dtype. Large outputs are split into at most `threads` contiguous chunks of the output,
//! filled in parallel on the global rayon pool; the result does not depend on `threads`.
//! When the permutation moves the first operand's contiguous axis away from the output's
//! last axis (a transpose), the fill walks `32 x 32` tiles so that reads and writes both
//! stay in cache, and the parallel chunks are slabs of output axis 0.

use std::borrow::Cow;

use rayon::prelude::*;

use crate::dtype::with_dtype;
use crate::dtype::{DType, C64};
use crate::tensor::{LocalTensor, TensorError};
use crate::typed::{elems_of, tensor, Lane};

/// Outputs with at least this many elements are filled in parallel when `threads > 1`.
pub(crate) const PAR_MIN: usize = 1 << 15;

/// Error from the element-wise and reduction kernels.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ElementwiseError {
    /// `perm` is not a permutation of `0..rank` for the operand's rank.
    #[error("operand {operand}: {perm:?} is not a permutation of 0..{rank}")]
    BadPermutation {
        /// `'a'` or `'b'`.
        operand: char,
        /// The permutation given.
        perm: Vec<usize>,
        /// The operand's rank.
        rank: usize,
    },
    /// Two operands (after permutation) have different shapes.
    #[error("shape mismatch: expected {expected:?}, got {got:?}")]
    ShapeMismatch {
        /// The shape required (the first operand's, permuted).
        expected: Vec<usize>,
        /// The second operand's shape (permuted).
        got: Vec<usize>,
    },
    /// The requested output dtype is narrower than the operands' promoted dtype.
    #[error("output dtype {to} is narrower than the operands' dtype {from}")]
    NarrowingOutput {
        /// The promoted operand dtype.
        from: DType,
        /// The requested output dtype.
        to: DType,
    },
    /// `alpha` (or `beta`) has a nonzero imaginary part but the output is real.
    #[error("{which} = {value} has a nonzero imaginary part but the output dtype {dtype} is real")]
    ComplexScalarForRealOutput {
        /// `"alpha"` or `"beta"`.
        which: &'static str,
        /// The offending scalar.
        value: C64,
        /// The (real) output dtype.
        dtype: DType,
    },
    /// [`reshape`]: the new shape has a different number of elements.
    #[error("cannot reshape {from:?} ({from_len} elements) to {to:?}")]
    ElementCount {
        /// The tensor's shape.
        from: Vec<usize>,
        /// Its element count.
        from_len: usize,
        /// The requested shape (its product differs or overflows).
        to: Vec<usize>,
    },
    /// [`lincomb`] was given no terms.
    #[error("a linear combination needs at least one term")]
    NoTerms,
    /// Building the output failed (size overflow).
    #[error(transparent)]
    Tensor(#[from] TensorError),
}

/// `out = alpha * op_a(a) + beta * op_b(b)` as a new dense tensor.
///
/// `op_x(x)` is `permute(x, perm_x)`, conjugated when `conj_x`. The permutation follows
/// `numpy.transpose`: axis `k` of the result is axis `perm[k]` of the operand, so the
/// result's shape is `[a.shape()[perm_a[k]] for k]`; `b` is `(tensor, perm_b, conj_b)` and
/// its permuted shape must equal that shape. Conjugation of a real operand is a no-op.
///
/// Output dtype: `out_dtype`, or if `None` the promotion of the operands' dtypes
/// ([`DType::promote`], as in contraction; `b`'s dtype counts even when `beta == 0`). A
/// given `out_dtype` must be at least as wide as that promotion. With a real output,
/// `alpha` (and `beta` when `b` is given) must be real. If `beta == 0`, `b`'s elements are
/// not read (a NaN there does not leak), though its shape and dtype still count. If `b` is
/// `None`, `beta` is ignored.
///
/// Each element is computed in double precision from the exactly widened operands and
/// rounded once to the output dtype, so results with exactly representable inputs are
/// exact. Rank 0 (one element) and empty tensors work. `threads` bounds the parallelism
/// (`0` and `1`: sequential); the result is identical for every `threads`.
///
/// # Errors
/// [`ElementwiseError::BadPermutation`], [`ElementwiseError::ShapeMismatch`],
/// [`ElementwiseError::NarrowingOutput`], [`ElementwiseError::ComplexScalarForRealOutput`].
#[allow(clippy::too_many_arguments)]
pub fn axpby(
    alpha: C64,
    a: &LocalTensor,
    perm_a: &[usize],
    conj_a: bool,
    beta: C64,
    b: Option<(&LocalTensor, &[usize], bool)>,
    out_dtype: Option<DType>,
    threads: usize,
) -> Result<LocalTensor, ElementwiseError> {
    check_perm('a', perm_a, a.rank())?;
    let out_shape: Vec<usize> = perm_a.iter().map(|&p| a.shape()[p]).collect();
    let mut dtype = a.dtype();
    if let Some((bt, perm_b, _)) = b {
        check_perm('b', perm_b, bt.rank())?;
        let got: Vec<usize> = perm_b.iter().map(|&p| bt.shape()[p]).collect();
        if got != out_shape {
            return Err(ElementwiseError::ShapeMismatch {
                expected: out_shape,
                got,
            });
        }
        dtype = dtype.promote(bt.dtype());
    }
    if let Some(to) = out_dtype {
        if dtype.promote(to) != to {
            return Err(ElementwiseError::NarrowingOutput { from: dtype, to });
        }
        dtype = to;
    }
    let zero = C64::new(0.0, 0.0);
    let b = b.filter(|_| beta != zero);
    if !dtype.is_complex() {
        let scalars = [("alpha", alpha), ("beta", if b.is_some() { beta } else { zero })];
        if let Some(&(which, value)) = scalars.iter().find(|(_, v)| v.im != 0.0) {
            return Err(ElementwiseError::ComplexScalarForRealOutput { which, value, dtype });
        }
    }
    let a = widen(a, dtype)?;
    let b = b.map(|(t, p, c)| widen(t, dtype).map(|t| (t, p, c))).transpose()?;
    with_dtype!(dtype, T => {
        let op_a = Operand::new(elems_of::<T>(&a), a.shape(), perm_a, conj_a, T::scalar(alpha));
        let op_b = b.as_ref().map(|(t, p, c)| Operand::new(elems_of::<T>(t), t.shape(), p, *c, T::scalar(beta)));
        let out = fill_par(&out_shape, &op_a, op_b.as_ref(), threads);
        Ok(tensor(&out_shape, out)?)
    })
}

/// `out = sum_k c_k x_k` over same-shaped tensors `terms = [(c_k, x_k)]`, as a new dense
/// tensor: the `k`-term generalisation of [`axpby`] without permutations (one pass over
/// the data, in sub-blocks that stay in cache, instead of `k - 1` passes, as a Krylov
/// solver's three-term recurrence and its Ritz vector need).
///
/// Output dtype: `out_dtype`, or if `None` the promotion of every term's dtype; a given
/// `out_dtype` must be at least as wide. With a real output the coefficients must be real.
/// A term whose coefficient is zero is not read (a NaN there does not leak), though its
/// shape and dtype still count. Each element is summed in double precision, in term order,
/// and rounded once to the output dtype. `threads` bounds the parallelism (`0` and `1`:
/// sequential); the result is identical for every `threads`.
///
/// # Errors
/// [`ElementwiseError::NoTerms`] for an empty `terms`; [`ElementwiseError::ShapeMismatch`]
/// (a term's shape differs from the first's); [`ElementwiseError::NarrowingOutput`];
/// [`ElementwiseError::ComplexScalarForRealOutput`] (`which = "coefficient"`).
pub fn lincomb(
    terms: &[(C64, &LocalTensor)],
    out_dtype: Option<DType>,
    threads: usize,
) -> Result<LocalTensor, ElementwiseError> {
    let (_, first) = terms.first().ok_or(ElementwiseError::NoTerms)?;
    let shape = first.shape();
    let mut dtype = first.dtype();
    for (_, t) in &terms[1..] {
        if t.shape() != shape {
            return Err(ElementwiseError::ShapeMismatch {
                expected: shape.to_vec(),
                got: t.shape().to_vec(),
            });
        }
        dtype = dtype.promote(t.dtype());
    }
    if let Some(to) = out_dtype {
        if dtype.promote(to) != to {
            return Err(ElementwiseError::NarrowingOutput { from: dtype, to });
        }
        dtype = to;
    }
    check_coefficients(terms.iter().map(|&(c, _)| c), dtype)?;
    let zero = C64::new(0.0, 0.0);
    // The first term always counts (it fixes the output even when its coefficient is 0).
    let read: Vec<(C64, Cow<'_, LocalTensor>)> = terms
        .iter()
        .enumerate()
        .filter(|(k, (c, _))| *k == 0 || *c != zero)
        .map(|(_, (c, t))| widen(t, dtype).map(|t| (*c, t)))
        .collect::<Result<_, _>>()?;
    let n: usize = shape.iter().product();
    with_dtype!(dtype, T => {
        let parts: Vec<(C64, &[T])> = read.iter().map(|(c, t)| (*c, elems_of::<T>(t))).collect();
        Ok(tensor(shape, sum_terms(&parts, n, threads))?)
    })
}

/// Checks that `coefs` suit an output of `dtype`: every one real when `dtype` is real
/// (the coefficient check of [`lincomb`], shared with the distributed `lincomb`).
///
/// # Errors
/// [`ElementwiseError::ComplexScalarForRealOutput`] (`which = "coefficient"`) naming the
/// first complex coefficient.
pub fn check_coefficients(coefs: impl IntoIterator<Item = C64>, dtype: DType) -> Result<(), ElementwiseError> {
    match coefs.into_iter().find(|c| c.im != 0.0) {
        Some(value) if !dtype.is_complex() => Err(ElementwiseError::ComplexScalarForRealOutput {
            which: "coefficient",
            value,
            dtype,
        }),
        _ => Ok(()),
    }
}

/// Elements per sub-block of [`sum_terms`]: the wide accumulator of one sub-block stays in
/// L1 while every term streams through it.
const SUM_SUB: usize = 2048;

/// The elements of `sum_k c_k x_k` (`parts` non-empty, every `x_k` of length `n`), summed in
/// the wide type in term order and rounded once; in parallel chunks of the output when
/// large, each chunk in sub-blocks of [`SUM_SUB`] elements (one pass over the memory of each
/// term and of the output). A zero first coefficient does not read the first term.
fn sum_terms<T: Lane>(parts: &[(C64, &[T])], n: usize, threads: usize) -> Vec<T> {
    let zero_first = parts[0].0 == C64::new(0.0, 0.0);
    let parts: Vec<(T::W, &[T])> = parts.iter().map(|&(c, x)| (T::scalar(c), x)).collect();
    let chunk = if n >= PAR_MIN && threads > 1 {
        n.div_ceil(threads.min(n / (PAR_MIN / 8)).max(1))
    } else {
        n.max(1)
    };
    let fill = |c: usize, out: &mut [T]| {
        let mut acc: Vec<T::W> = vec![T::zero_w(); SUM_SUB.min(out.len())];
        for (sub, out) in out.chunks_mut(SUM_SUB).enumerate() {
            let lo = c * chunk + sub * SUM_SUB;
            let acc = &mut acc[..out.len()];
            let (s0, x0) = parts[0];
            if zero_first {
                acc.fill(T::zero_w());
            } else {
                for (a, &x) in acc.iter_mut().zip(&x0[lo..]) {
                    *a = s0 * x.widen();
                }
            }
            for &(s, x) in &parts[1..] {
                for (a, &x) in acc.iter_mut().zip(&x[lo..]) {
                    *a = *a + s * x.widen();
                }
            }
            for (o, &a) in out.iter_mut().zip(acc.iter()) {
                *o = T::narrow(a);
            }
        }
    };
    let mut out: Vec<T> = vec![T::narrow(T::zero_w()); n];
    if chunk < n {
        out.par_chunks_mut(chunk).enumerate().for_each(|(c, o)| fill(c, o));
    } else {
        fill(0, &mut out);
    }
    out
}

/// `alpha * a`, same dtype and shape as `a` (wrapper over [`axpby`]).
///
/// # Errors
/// [`ElementwiseError::ComplexScalarForRealOutput`] if `a` is real and `alpha` is not.
pub fn scale(alpha: C64, a: &LocalTensor, threads: usize) -> Result<LocalTensor, ElementwiseError> {
    let id: Vec<usize> = (0..a.rank()).collect();
    axpby(alpha, a, &id, false, C64::new(0.0, 0.0), None, None, threads)
}

/// The complex conjugate of `a` (a copy of `a` for real dtypes); wrapper over [`axpby`].
///
/// # Errors
/// None in practice (the signature matches the other wrappers).
pub fn conj(a: &LocalTensor, threads: usize) -> Result<LocalTensor, ElementwiseError> {
    let id: Vec<usize> = (0..a.rank()).collect();
    axpby(
        C64::new(1.0, 0.0),
        a,
        &id,
        true,
        C64::new(0.0, 0.0),
        None,
        None,
        threads,
    )
}

/// `numpy.transpose(a, perm)` as a new dense tensor: axis `k` of the result is axis
/// `perm[k]` of `a`. Wrapper over [`axpby`].
///
/// # Errors
/// [`ElementwiseError::BadPermutation`].
pub fn permute(a: &LocalTensor, perm: &[usize], threads: usize) -> Result<LocalTensor, ElementwiseError> {
    axpby(
        C64::new(1.0, 0.0),
        a,
        perm,
        false,
        C64::new(0.0, 0.0),
        None,
        None,
        threads,
    )
}

/// `a` with a new shape of the same element count: the C-order data is unchanged (a copy),
/// which fuses or splits adjacent modes (`[2, 3, 4] -> [6, 4]`, `[6, 4] -> [2, 3, 4]`, or
/// any shape with the same product, including rank 0 for one element).
///
/// # Errors
/// [`ElementwiseError::ElementCount`] if the product of `shape` differs from `a.len()` or
/// overflows.
pub fn reshape(a: &LocalTensor, shape: &[usize]) -> Result<LocalTensor, ElementwiseError> {
    check_count(a, shape)?;
    Ok(LocalTensor::from_data(shape, a.data().clone())?)
}

/// [`reshape`] without copying the data: consumes `a` (also on error).
///
/// # Errors
/// As [`reshape`].
pub fn reshape_owned(a: LocalTensor, shape: &[usize]) -> Result<LocalTensor, ElementwiseError> {
    check_count(&a, shape)?;
    Ok(LocalTensor::from_data(shape, a.into_data())?)
}

fn check_count(a: &LocalTensor, shape: &[usize]) -> Result<(), ElementwiseError> {
    let n = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    if n != Some(a.len()) {
        return Err(ElementwiseError::ElementCount {
            from: a.shape().to_vec(),
            from_len: a.len(),
            to: shape.to_vec(),
        });
    }
    Ok(())
}

/// `Err(BadPermutation)` unless `perm` is a permutation of `0..rank`.
pub(crate) fn check_perm(operand: char, perm: &[usize], rank: usize) -> Result<(), ElementwiseError> {
    let mut seen = vec![false; rank];
    let ok = perm.len() == rank
        && perm.iter().all(|&p| {
            let fresh = p < rank && !seen[p];
            if fresh {
                seen[p] = true;
            }
            fresh
        });
    if ok {
        Ok(())
    } else {
        Err(ElementwiseError::BadPermutation {
            operand,
            perm: perm.to_vec(),
            rank,
        })
    }
}

/// Borrows `t` if it has `dtype`, else casts (widening; the caller checked the direction).
fn widen(t: &LocalTensor, dtype: DType) -> Result<Cow<'_, LocalTensor>, TensorError> {
    if t.dtype() == dtype {
        Ok(Cow::Borrowed(t))
    } else {
        t.cast(dtype).map(Cow::Owned)
    }
}

/// One operand of the fill: its elements, its C strides permuted into output order, its
/// conjugation flag and its scalar.
struct Operand<'a, T: Lane> {
    data: &'a [T],
    strides: Vec<usize>,
    conj: bool,
    scalar: T::W,
}

impl<'a, T: Lane> Operand<'a, T> {
    fn new(data: &'a [T], shape: &[usize], perm: &[usize], conj: bool, scalar: T::W) -> Self {
        let mut c = vec![1usize; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            c[d] = c[d + 1] * shape[d + 1];
        }
        Operand {
            data,
            strides: perm.iter().map(|&p| c[p]).collect(),
            conj,
            scalar,
        }
    }

    /// `scalar * op(x)` for the element at `offset`, in the wide type.
    #[inline]
    fn term(&self, offset: usize) -> T::W {
        let w = self.data[offset].widen();
        self.scalar * if self.conj { T::conj_w(w) } else { w }
    }
}

/// Edge of the square tiles of [`fill_tiled`] (elements).
const TILE: usize = 32;

/// The output of `a (+ b)` over `shape`, in parallel chunks when large (at most `threads`
/// of them, and none smaller than `PAR_MIN / 8` elements).
fn fill_par<T: Lane>(shape: &[usize], a: &Operand<'_, T>, b: Option<&Operand<'_, T>>, threads: usize) -> Vec<T> {
    let n: usize = shape.iter().product();
    let mut out = vec![T::zero(); n];
    if n == 0 {
        return out;
    }
    let parts = if n >= PAR_MIN {
        threads.min(n / (PAR_MIN / 8)).max(1)
    } else {
        1
    };
    if let Some(q) = tiled_axis(shape, a) {
        if parts == 1 {
            fill_tiled(&mut out, 0, shape, q, a, b);
            return out;
        }
        // Split along output axis 0 into contiguous slabs of whole axis-0 indices.
        let rows = shape[0].div_ceil(parts.min(shape[0]));
        let slab = n / shape[0];
        out.par_chunks_mut(rows * slab)
            .enumerate()
            .for_each(|(c, part)| fill_tiled(part, c * rows, shape, q, a, b));
    } else if parts > 1 {
        let chunk = n.div_ceil(parts);
        out.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(c, part)| fill(part, c * chunk, shape, a, b));
    } else {
        fill(&mut out, 0, shape, a, b);
    }
    out
}

/// The output axis along which `a` is contiguous, when it is not the output's last axis
/// (a transposing permutation: [`fill_tiled`] then keeps both reads and writes in cache).
fn tiled_axis<T: Lane>(shape: &[usize], a: &Operand<'_, T>) -> Option<usize> {
    let last = shape.len().checked_sub(1)?;
    if last == 0 || shape[last] == 1 || a.strides[last] == 1 {
        return None;
    }
    (0..last).find(|&d| a.strides[d] == 1 && shape[d] > 1)
}

/// Fills `out`, the output elements of axis-0 indices `lo..lo + out.len() / slab`, in
/// `TILE x TILE` tiles of the plane spanned by output axes `q` (along which `a` is
/// contiguous) and `last` (along which `out` is contiguous), for every index of the other
/// axes.
fn fill_tiled<T: Lane>(
    out: &mut [T],
    lo: usize,
    shape: &[usize],
    q: usize,
    a: &Operand<'_, T>,
    b: Option<&Operand<'_, T>>,
) {
    let rank = shape.len();
    let last = rank - 1;
    let mut os = vec![1usize; rank];
    for d in (0..last).rev() {
        os[d] = os[d + 1] * shape[d + 1];
    }
    let hi = lo + out.len() / os[0];
    // Range of each axis inside this slab: axis 0 is [lo, hi), the others whole.
    let range = |d: usize| if d == 0 { (lo, hi) } else { (0, shape[d]) };
    let others: Vec<usize> = (0..last).filter(|&d| d != q).collect();
    let mut idx: Vec<usize> = (0..rank).map(|d| range(d).0).collect();
    let (q0, q1) = range(q);
    let (nl, sal) = (shape[last], a.strides[last]);
    let zero_b = [0usize; 0];
    let b_strides = b.map_or(&zero_b[..], |b| &b.strides[..]);
    loop {
        let off = |s: &[usize]| others.iter().map(|&d| idx[d] * s[d]).sum::<usize>();
        let base_out = off(&os) - lo * os[0] * usize::from(q != 0);
        let base_a = off(&a.strides);
        let base_b = if b.is_some() { off(b_strides) } else { 0 };
        for i0 in (q0..q1).step_by(TILE) {
            for j0 in (0..nl).step_by(TILE) {
                for i in i0..(i0 + TILE).min(q1) {
                    let o = base_out + (i - if q == 0 { lo } else { 0 }) * os[q];
                    let oa = base_a + i * a.strides[q];
                    let jr = j0..(j0 + TILE).min(nl);
                    let dst = &mut out[o + jr.start..o + jr.end];
                    match b {
                        Some(b) => {
                            let ob = base_b + i * b.strides[q];
                            for (x, j) in dst.iter_mut().zip(jr) {
                                *x = T::narrow(a.term(oa + j * sal) + b.term(ob + j * b.strides[last]));
                            }
                        }
                        None => {
                            for (x, j) in dst.iter_mut().zip(jr) {
                                *x = T::narrow(a.term(oa + j * sal));
                            }
                        }
                    }
                }
            }
        }
        // Next index of the other axes (odometer, last of `others` fastest).
        let mut k = others.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            let d = others[k];
            idx[d] += 1;
            if idx[d] < range(d).1 {
                break;
            }
            idx[d] = range(d).0;
        }
    }
}

/// Fills `out`, the row-major output elements `start..start + out.len()` over `shape`.
fn fill<T: Lane>(out: &mut [T], start: usize, shape: &[usize], a: &Operand<'_, T>, b: Option<&Operand<'_, T>>) {
    let rank = shape.len();
    if rank == 0 {
        let w = a.term(0);
        out[0] = T::narrow(b.map_or(w, |b| w + b.term(0)));
        return;
    }
    let mut idx = vec![0usize; rank];
    let mut rem = start;
    for d in (0..rank).rev() {
        idx[d] = rem % shape[d];
        rem /= shape[d];
    }
    let last = rank - 1;
    let (sa, sb) = (a.strides[last], b.map_or(0, |b| b.strides[last]));
    let mut pos = 0;
    while pos < out.len() {
        let off = |s: &[usize]| idx.iter().zip(s).map(|(i, s)| i * s).sum::<usize>();
        let oa = off(&a.strides);
        let run = (shape[last] - idx[last]).min(out.len() - pos);
        let dst = &mut out[pos..pos + run];
        match b {
            Some(b) => {
                let ob = off(&b.strides);
                for (j, x) in dst.iter_mut().enumerate() {
                    *x = T::narrow(a.term(oa + j * sa) + b.term(ob + j * sb));
                }
            }
            None => {
                for (j, x) in dst.iter_mut().enumerate() {
                    *x = T::narrow(a.term(oa + j * sa));
                }
            }
        }
        pos += run;
        idx[last] = 0;
        for d in (0..last).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}
