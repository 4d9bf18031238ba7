//! The QR family: the [`QrBackend`] trait, its list, and the [`qr`] and [`lq`] front ends.
//! LQ is dispatched through the same list as the QR of the adjoint. Both front ends
//! normalize the factors so that the triangular factor has a real, non-negative diagonal,
//! which makes the result unique for a full-rank matrix whatever the backend.

use super::{
    check_factor, check_matrix, scale, DecompBackend, DecompBackendList, DecompError, DecompKind, MatrixProblem,
};
use crate::backend::{KernelAttempt, KernelError};
use crate::dtype::with_dtype;
use crate::dtype::{DType, C64};
use crate::tensor::LocalTensor;
use crate::typed::{adjoint, elems_of, tensor, Lane};

/// The thin QR `A = Q R` a backend returns for an `m x n` matrix, `k = min(m, n)`.
#[derive(Clone, Debug, PartialEq)]
pub struct QrFactors {
    /// `m x k`, orthonormal columns, the matrix's dtype.
    pub q: LocalTensor,
    /// `k x n`, upper trapezoidal (zero below the diagonal), the matrix's dtype.
    pub r: LocalTensor,
}

/// A QR backend: [`DecompBackend`] plus the computation.
pub trait QrBackend: DecompBackend {
    /// The thin QR of `problem.matrix` (kind [`DecompKind::Qr`], or [`DecompKind::Lq`] when
    /// the matrix is the adjoint of the caller's; the computation is the same). Any sign or
    /// phase convention; the front end normalizes it.
    ///
    /// # Errors
    /// Any [`KernelError`]; dispatch then fails without trying further backends.
    fn qr(&self, problem: &MatrixProblem<'_>) -> Result<QrFactors, KernelError>;
}

/// Ordered list of QR backends (used by both [`qr`] and [`lq`]).
pub type QrBackendList = DecompBackendList<dyn QrBackend>;

/// The thin QR `matrix = q r` from [`qr`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct QrResult {
    /// `m x k` with `k = min(m, n)`, orthonormal columns, the input's dtype.
    pub q: LocalTensor,
    /// `k x n`, upper trapezoidal with a real, non-negative diagonal, the input's dtype.
    pub r: LocalTensor,
}

/// The thin LQ `matrix = l q` from [`lq`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LqResult {
    /// `m x k` with `k = min(m, n)`, lower trapezoidal with a real, non-negative diagonal,
    /// the input's dtype.
    pub l: LocalTensor,
    /// `k x n`, orthonormal rows, the input's dtype.
    pub q: LocalTensor,
}

/// Thin QR decomposition of `matrix` (`m x n`): `matrix = q r`, `q` `m x k` with
/// orthonormal columns, `r` `k x n` upper trapezoidal, `k = min(m, n)`. The diagonal of `r`
/// is made real and non-negative (column `i` of `q` and row `i` of `r` are rescaled by a
/// unit phase), so the factors are unique for a matrix of full rank `k`. Empty input gives
/// `q` `m x 0` and `r` `0 x n`. Any finite scale is handled: an input outside the dtype's
/// safe range is scaled exactly by a power of two before the backend runs and `r` is
/// unscaled (as for [`svd`](crate::decomp::svd)).
///
/// # Errors
/// [`DecompError::NotMatrix`], [`DecompError::NonFinite`] (first NaN/infinite entry),
/// [`DecompError::Dispatch`] (every backend declined, or the committed one failed or
/// returned factors of the wrong dtype/shape), [`DecompError::Overflow`] (an entry of `r`
/// above the dtype's largest value, for entries near it), [`DecompError::Tensor`].
pub fn qr(matrix: &LocalTensor, backends: &QrBackendList) -> Result<QrResult, DecompError> {
    qr_with_attempts(matrix, backends).map(|(r, _)| r)
}

/// Like [`qr`], also returning the dispatch log.
///
/// # Errors
/// As [`qr`].
pub fn qr_with_attempts(
    matrix: &LocalTensor,
    backends: &QrBackendList,
) -> Result<(QrResult, Vec<KernelAttempt>), DecompError> {
    let (rows, cols) = check_matrix(DecompKind::Qr, matrix)?;
    let (f, attempts) = dispatch_qr(DecompKind::Qr, matrix, rows, cols, backends)?;
    Ok((QrResult { q: f.q, r: f.r }, attempts))
}

/// Thin LQ decomposition of `matrix` (`m x n`): `matrix = l q`, `l` `m x k` lower
/// trapezoidal with a real, non-negative diagonal, `q` `k x n` with orthonormal rows,
/// `k = min(m, n)`. Computed as the QR of the adjoint (`A^H = Q' R'`, so `l = R'^H`,
/// `q = Q'^H`), dispatched through the same [`QrBackendList`] with kind
/// [`DecompKind::Lq`]; this costs one transposed copy of the input and of each factor.
/// Empty input gives `l` `m x 0` and `q` `0 x n`.
///
/// # Errors
/// As [`qr`].
pub fn lq(matrix: &LocalTensor, backends: &QrBackendList) -> Result<LqResult, DecompError> {
    lq_with_attempts(matrix, backends).map(|(r, _)| r)
}

/// Like [`lq`], also returning the dispatch log.
///
/// # Errors
/// As [`qr`].
pub fn lq_with_attempts(
    matrix: &LocalTensor,
    backends: &QrBackendList,
) -> Result<(LqResult, Vec<KernelAttempt>), DecompError> {
    let (rows, cols) = check_matrix(DecompKind::Lq, matrix)?;
    let adj = with_dtype!(matrix.dtype(), T => tensor(&[cols, rows], adjoint(elems_of::<T>(matrix), rows, cols))?);
    let (f, attempts) = dispatch_qr(DecompKind::Lq, &adj, cols, rows, backends)?;
    let k = rows.min(cols);
    // f.q is cols x k, f.r is k x rows.
    let (l, q) = with_dtype!(matrix.dtype(), T => (
        tensor(&[rows, k], adjoint(elems_of::<T>(&f.r), k, rows))?,
        tensor(&[k, cols], adjoint(elems_of::<T>(&f.q), cols, k))?,
    ));
    Ok((LqResult { l, q }, attempts))
}

/// Dispatches the QR of the `rows x cols` matrix `m` (scaled into the safe range first, R
/// unscaled after) and normalizes the diagonal of R.
fn dispatch_qr(
    kind: DecompKind,
    m: &LocalTensor,
    rows: usize,
    cols: usize,
    backends: &QrBackendList,
) -> Result<(QrFactors, Vec<KernelAttempt>), DecompError> {
    let dtype = m.dtype();
    let scaled = scale::to_safe_range(m)?;
    let problem = MatrixProblem {
        kind,
        matrix: scaled.matrix(),
        rows,
        cols,
    };
    let k = rows.min(cols);
    let (f, attempts) = backends.dispatch(
        &problem,
        |b, p| b.qr(p),
        |f| {
            check_factor("Q", &f.q, dtype, [rows, k])?;
            check_factor("R", &f.r, dtype, [k, cols])
        },
    )?;
    let f = normalize(f, dtype, rows, cols)?;
    let what = if kind == DecompKind::Lq { "L^H" } else { "R" };
    let r = scaled.scaling().unscale_factor(kind, what, f.r)?;
    Ok((QrFactors { q: f.q, r }, attempts))
}

/// Rescales column `i` of Q and row `i` of R by a unit phase so that `R[i, i]` is real and
/// non-negative (`Q R` is unchanged up to rounding).
fn normalize(f: QrFactors, dtype: DType, rows: usize, cols: usize) -> Result<QrFactors, DecompError> {
    let k = rows.min(cols);
    Ok(with_dtype!(dtype, T => {
        let mut q = elems_of::<T>(&f.q).to_vec();
        let mut r = elems_of::<T>(&f.r).to_vec();
        normalize_typed::<T>(&mut q, &mut r, rows, cols, k);
        QrFactors { q: tensor(&[rows, k], q)?, r: tensor(&[k, cols], r)? }
    }))
}

fn normalize_typed<T: Lane>(q: &mut [T], r: &mut [T], rows: usize, cols: usize, k: usize) {
    for i in 0..k {
        let d = r[i * cols + i];
        let mag = d.abs();
        if mag == 0.0 || d.to_c64() == C64::new(mag, 0.0) {
            continue;
        }
        let phase = d.to_c64() / mag;
        let (p, pc) = (T::scalar(phase), T::scalar(phase.conj()));
        for x in &mut r[i * cols..(i + 1) * cols] {
            *x = T::narrow(pc * x.widen());
        }
        r[i * cols + i] = T::narrow(T::scalar(C64::new(mag, 0.0)));
        for row in 0..rows {
            let x = &mut q[row * k + i];
            *x = T::narrow(x.widen() * p);
        }
    }
}
