//! The Hermitian eigendecomposition family: the [`EighBackend`] trait, its list, and the
//! [`eigh`] front end, which checks that the input is Hermitian within a relative tolerance
//! and hands backends its exact Hermitian part.

use super::{
    check_factor, check_matrix, check_tol, default_rtol, scale, DecompBackend, DecompBackendList, DecompError,
    DecompKind, MatrixProblem,
};
use crate::backend::{KernelAttempt, KernelError};
use crate::dtype::with_dtype;
use crate::dtype::{DType, C64};
use crate::tensor::LocalTensor;
use crate::typed::{elems_of, tensor, Lane};

/// The eigendecomposition `A = V diag(values) V^H` a backend returns for an `n x n`
/// Hermitian matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct EighFactors {
    /// `n` real eigenvalues, non-decreasing.
    pub values: Vec<f64>,
    /// `n x n`, column `j` the unit eigenvector of `values[j]`, orthonormal columns, the
    /// matrix's dtype.
    pub vectors: LocalTensor,
}

/// An eigendecomposition backend: [`DecompBackend`] plus the computation.
pub trait EighBackend: DecompBackend {
    /// The eigendecomposition of `problem.matrix`, which is square and exactly Hermitian.
    ///
    /// # Errors
    /// Any [`KernelError`]; dispatch then fails without trying further backends.
    fn eigh(&self, problem: &MatrixProblem<'_>) -> Result<EighFactors, KernelError>;
}

/// Ordered list of Hermitian eigendecomposition backends.
pub type EighBackendList = DecompBackendList<dyn EighBackend>;

/// Options of [`eigh`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EighOptions {
    /// The input is accepted as Hermitian when `max |A - A^H| <= hermitian_rtol * max |A|`
    /// (finite, `>= 0`). `None`: `1e-12` for `f64`/`c64`, `1e-5` for `f32`/`c32`.
    pub hermitian_rtol: Option<f64>,
}

impl EighOptions {
    /// The relative Hermiticity tolerance in force for `dtype`:
    /// `hermitian_rtol`, or its default.
    pub fn rtol_for(&self, dtype: DType) -> f64 {
        self.hermitian_rtol.unwrap_or(default_rtol(dtype))
    }
}

/// How far a square matrix is from Hermitian ([`hermitian_deviation`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HermitianDeviation {
    /// The largest `|A[row, col] - conj(A[col, row])|`.
    pub deviation: f64,
    /// Its row (`row <= col`; the first such entry in row-major order).
    pub row: usize,
    /// Its column.
    pub col: usize,
    /// `max |A|`.
    pub max_abs: f64,
}

/// The largest deviation of the square `matrix` from Hermitian, with
/// `max |A|` (what [`eigh`] compares with `hermitian_rtol`); callers that
/// decompose a matrix in pieces (the sectors of a block-diagonal one)
/// combine the pieces' deviations and apply the tolerance to the whole.
///
/// # Errors
/// [`DecompError::NotMatrix`] (not rank 2), [`DecompError::NotSquare`].
pub fn hermitian_deviation(matrix: &LocalTensor) -> Result<HermitianDeviation, DecompError> {
    let op = DecompKind::Eigh;
    let (rows, cols) = check_matrix(op, matrix)?;
    if rows != cols {
        return Err(DecompError::NotSquare { op, rows, cols });
    }
    Ok(with_dtype!(matrix.dtype(), T => deviation(elems_of::<T>(matrix), rows)))
}

/// The eigendecomposition from [`eigh`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct EighResult {
    /// The `n` eigenvalues, non-decreasing, as `f64` whatever the dtype.
    pub values: Vec<f64>,
    /// `n x n`, the input's dtype: column `j` is a unit eigenvector of `values[j]`; the
    /// columns are orthonormal.
    pub vectors: LocalTensor,
}

/// Eigendecomposition of the Hermitian `n x n` `matrix`: `matrix = V diag(values) V^H`
/// with `values` non-decreasing and `V` (`vectors`) unitary.
///
/// The matrix must be Hermitian within the tolerance of [`EighOptions::hermitian_rtol`];
/// the decomposition is then of its Hermitian part `(A + A^H) / 2` (so both triangles are
/// used, and a real diagonal is enforced). An empty `0 x 0` matrix gives no eigenvalues and
/// a `0 x 0` `vectors`. The eigenvectors of a repeated eigenvalue are any orthonormal basis
/// of its eigenspace (the backend's choice). Any finite scale is handled: an input outside
/// the dtype's safe range is scaled exactly by a power of two before the backend runs and
/// the eigenvalues are unscaled (as for [`svd`](crate::decomp::svd)).
///
/// # Errors
/// [`DecompError::NotMatrix`], [`DecompError::NotSquare`], [`DecompError::NonFinite`],
/// [`DecompError::InvalidOption`] (negative or non-finite tolerance),
/// [`DecompError::NotHermitian`] (naming the largest deviation and where),
/// [`DecompError::Dispatch`] (every backend declined, or the committed one failed or
/// returned eigenvalues that are not finite or not sorted, or vectors of the wrong
/// dtype/shape), [`DecompError::Overflow`] (an eigenvalue above `f64::MAX`, for entries
/// near it), [`DecompError::Tensor`].
pub fn eigh(matrix: &LocalTensor, opts: &EighOptions, backends: &EighBackendList) -> Result<EighResult, DecompError> {
    eigh_with_attempts(matrix, opts, backends).map(|(r, _)| r)
}

/// Like [`eigh`], also returning the dispatch log.
///
/// # Errors
/// As [`eigh`].
pub fn eigh_with_attempts(
    matrix: &LocalTensor,
    opts: &EighOptions,
    backends: &EighBackendList,
) -> Result<(EighResult, Vec<KernelAttempt>), DecompError> {
    let op = DecompKind::Eigh;
    let n = check_square_hermitian(matrix, opts)?;
    let dtype = matrix.dtype();
    // The Hermitian part is taken after scaling, so that `A + A^H` cannot overflow.
    let scaled = scale::to_safe_range(matrix)?;
    let herm = with_dtype!(dtype, T => tensor(&[n, n], hermitian_part(elems_of::<T>(scaled.matrix()), n))?);
    let problem = MatrixProblem {
        kind: op,
        matrix: &herm,
        rows: n,
        cols: n,
    };
    let (mut f, attempts) = backends.dispatch(&problem, |b, p| b.eigh(p), |f| check_factors(f, dtype, n))?;
    scaled.scaling().unscale_values(op, "eigenvalue", &mut f.values)?;
    Ok((
        EighResult {
            values: f.values,
            vectors: f.vectors,
        },
        attempts,
    ))
}

/// The lowest eigenpair of a Hermitian matrix found from a start vector
/// ([`eigh_lowest`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LowestEigenpair {
    /// The Rayleigh quotient `y^H A y` of `vector`: the lowest eigenvalue to rounding.
    pub value: f64,
    /// `n` entries, unit norm: the eigenvector of the non-degenerate lowest eigenvalue,
    /// with the phase that makes its overlap `<start, vector>` real and positive (for a
    /// real matrix and a real start, real).
    pub vector: Vec<C64>,
    /// `||A y - value y||`, at most `1e-12 max |lambda|`.
    pub residual: f64,
}

/// The lowest eigenpair of the Hermitian `n x n` `matrix` (`f64` or `c64`), without the
/// other eigenvectors: the eigenvalues alone (Householder tridiagonalisation and implicit
/// QR; both share the Householder tridiagonalisation, so this measured about 0.6 of the
/// instructions of [`eigh`] with vectors at `n <= 256`), then shifted inverse
/// iteration `y <- (A - sigma I)^-1 y` from `start` by a Cholesky factor, with `sigma`
/// just below the lowest eigenvalue (`1e-3` of the gap to the next one, clamped to
/// `[1e-12, 1e-10] max |lambda|`; inverse iteration: Parlett, *The Symmetric Eigenvalue
/// Problem*, SIAM 1998, section 4.2). Each solve shrinks the other components by
/// `(lowest - sigma) / (gap + lowest - sigma)` and keeps the phase of the start's
/// component along the eigenvector (a real matrix with a complex start is iterated in
/// complex arithmetic). Runs on the calling thread when `threads <= 1`, else with faer on
/// `threads` of the global rayon pool.
///
/// The Hermitian part `(A + A^H) / 2` is used, as in [`eigh`]. Returns `Ok(None)` when
/// the method does not apply and the caller should use [`eigh`] instead: a dtype other
/// than `f64`/`c64`, an empty matrix, a largest `|a_ij|` outside `[1e-100, 1e100]`
/// (where [`eigh`] scales), a degenerate lowest level (the next eigenvalue within
/// `1e-11 max |lambda|`: the caller then chooses a vector in the eigenspace), `start` of
/// zero norm, a shifted matrix that is not positive definite in floating point, or a
/// residual still above `1e-12 max |lambda|` after eight solves.
///
/// # Errors
/// [`DecompError::NotMatrix`], [`DecompError::NotSquare`], [`DecompError::NonFinite`],
/// [`DecompError::InvalidOption`] (a bad tolerance, or `start.len() != n`),
/// [`DecompError::NotHermitian`], [`DecompError::Dispatch`] (faer failed).
pub fn eigh_lowest(
    matrix: &LocalTensor,
    start: &[C64],
    opts: &EighOptions,
    threads: usize,
) -> Result<Option<LowestEigenpair>, DecompError> {
    let op = DecompKind::Eigh;
    let n = check_square_hermitian(matrix, opts)?;
    let dtype = matrix.dtype();
    if start.len() != n {
        return Err(DecompError::InvalidOption {
            op,
            option: "start",
            reason: format!("has {} entries, the matrix is {n}x{n}", start.len()),
        });
    }
    let max_abs = with_dtype!(dtype, T => elems_of::<T>(matrix).iter().fold(0.0f64, |m, &x| m.max(Lane::abs(x))));
    if n == 0 || !matches!(dtype, DType::F64 | DType::C64) || !(1e-100..=1e100).contains(&max_abs) {
        return Ok(None);
    }
    let par = if threads <= 1 {
        faer::Par::Seq
    } else {
        faer::Par::rayon(threads)
    };
    let found = if dtype == DType::F64 && start.iter().any(|z| z.im != 0.0) {
        // A complex start of a real matrix: iterate in complex arithmetic, so that the
        // start's imaginary part counts and the result takes its overlap's phase.
        let herm: Vec<C64> = hermitian_part(elems_of::<f64>(matrix), n)
            .into_iter()
            .map(|x| C64::new(x, 0.0))
            .collect();
        super::faer_decomp::lowest_typed::<C64>(&herm, n, start, par)
    } else {
        with_dtype!(dtype, T => {
            let herm = hermitian_part(elems_of::<T>(matrix), n);
            super::faer_decomp::lowest_typed::<T>(&herm, n, start, par)
        })
    }
    .map_err(|e| {
        DecompError::Dispatch(crate::backend::KernelDispatchError {
            operation: format!("lowest eigenpair of a {n}x{n} {} matrix", dtype.name()),
            attempts: vec![KernelAttempt {
                backend: "faer".into(),
                outcome: crate::backend::AttemptOutcome::Failed(e.to_string()),
            }],
        })
    })?;
    Ok(found.map(|(value, vector, residual)| LowestEigenpair {
        value,
        vector,
        residual,
    }))
}

/// The order `n` of a square, finite matrix that is Hermitian within the tolerance of
/// `opts` (the input checks of [`eigh`] and [`eigh_lowest`]).
fn check_square_hermitian(matrix: &LocalTensor, opts: &EighOptions) -> Result<usize, DecompError> {
    let op = DecompKind::Eigh;
    let (rows, cols) = check_matrix(op, matrix)?;
    if rows != cols {
        return Err(DecompError::NotSquare { op, rows, cols });
    }
    let tol = opts.rtol_for(matrix.dtype());
    check_tol(op, "hermitian_rtol", tol)?;
    with_dtype!(matrix.dtype(), T => check_hermitian(elems_of::<T>(matrix), rows, tol)?);
    Ok(rows)
}

/// The largest `|a_ij - conj(a_ji)|` of the `n x n` matrix `a`, and `max |a_ij|`.
fn deviation<T: Lane>(a: &[T], n: usize) -> HermitianDeviation {
    let max_abs = a.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let mut worst = (0.0f64, 0, 0);
    for i in 0..n {
        for j in i..n {
            let d = a[i * n + j].to_c64() - a[j * n + i].to_c64().conj();
            let d = d.norm();
            if d > worst.0 {
                worst = (d, i, j);
            }
        }
    }
    HermitianDeviation {
        deviation: worst.0,
        row: worst.1,
        col: worst.2,
        max_abs,
    }
}

/// `Err(NotHermitian)` if `max |a_ij - conj(a_ji)| > tol * max |a_ij|`.
fn check_hermitian<T: Lane>(a: &[T], n: usize, tol: f64) -> Result<(), DecompError> {
    let d = deviation(a, n);
    if d.deviation > tol * d.max_abs {
        return Err(DecompError::NotHermitian {
            row: d.row,
            col: d.col,
            deviation: d.deviation,
            max_abs: d.max_abs,
            tolerance: tol,
        });
    }
    Ok(())
}

/// `(a + a^H) / 2`, computed in double precision and rounded once.
fn hermitian_part<T: Lane>(a: &[T], n: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(n * n);
    for i in 0..n {
        for j in 0..n {
            let s = a[i * n + j].widen() + T::conj_w(a[j * n + i].widen());
            out.push(T::narrow(s * T::scalar(crate::dtype::C64::new(0.5, 0.0))));
        }
    }
    out
}

/// Checks a backend's factors: eigenvalue count, range and order; the vectors' dtype and
/// shape.
fn check_factors(f: &EighFactors, dtype: DType, n: usize) -> Result<(), String> {
    check_factor("vectors", &f.vectors, dtype, [n, n])?;
    if f.values.len() != n {
        return Err(format!("backend returned {} eigenvalues, expected {n}", f.values.len()));
    }
    if let Some(i) = f.values.iter().position(|x| !x.is_finite()) {
        return Err(format!("eigenvalue {i} is {}", f.values[i]));
    }
    if let Some(i) = f.values.windows(2).position(|w| w[0] > w[1]) {
        return Err(format!(
            "eigenvalues not ascending: values[{i}] = {} > values[{}] = {}",
            f.values[i],
            i + 1,
            f.values[i + 1]
        ));
    }
    Ok(())
}
