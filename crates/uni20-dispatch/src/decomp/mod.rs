//! Matrix decompositions of a rank-2 [`LocalTensor`]: the shared backend protocol.
//!
//! Each family ([`svd`](fn@svd), [`qr`](fn@qr)/[`lq`], [`eigh`](fn@eigh)) is selected through an ordered [`DecompBackendList`] with the same
//! accept/decline protocol and the same attempt log ([`KernelAttempt`]) and error
//! ([`KernelDispatchError`]) as contraction: each backend may decline the element type
//! ([`DecompBackend::accepts_types`]) or the problem ([`DecompBackend::accepts`]) with a
//! reason; the first that accepts both is committed to, and its result (or failure) is
//! final. This module owns that protocol (the [`DecompBackend`] trait common to every
//! family, [`MatrixProblem`], the generic list and its dispatch loop), the typed error
//! [`DecompError`] and the input validation shared by the families (rank 2, finite
//! entries). The family front ends live in `svd.rs`, `qr.rs` and `eigh.rs` (which name no
//! concrete backend); the default lists in `defaults.rs`; the faer
//! backend in `faer_decomp.rs`; the CUDA decliner (feature `cuda`) in `cuda_decline.rs`.
//! Every front end passes its input through `scale.rs` before dispatch: a matrix whose
//! largest entry lies outside a safe range (LAPACK's `sqrt(MIN_POSITIVE) / EPSILON` and its
//! inverse) is scaled by a power of two to `[0.5, 1)`, exactly, and the values and
//! triangular factors are unscaled after the backend returns, so no backend sees an input
//! that can overflow or underflow its sums of squares.

mod defaults;
mod eigh;
mod faer_decomp;
mod qr;
mod scale;
mod svd;

#[cfg(feature = "cuda")]
mod cuda_decline;

#[cfg(feature = "cuda")]
pub use cuda_decline::CudaDecompBackend;
pub use eigh::{
    eigh, eigh_lowest, eigh_with_attempts, hermitian_deviation, EighBackend, EighBackendList, EighFactors, EighOptions,
    EighResult, HermitianDeviation, LowestEigenpair,
};
pub use faer_decomp::FaerDecompBackend;
pub use qr::{lq, lq_with_attempts, qr, qr_with_attempts, LqResult, QrBackend, QrBackendList, QrFactors, QrResult};
pub use svd::{
    svd, svd_with_attempts, truncation_rank, SvdBackend, SvdBackendList, SvdFactors, SvdOptions, SvdResult,
    TruncationRank,
};

use std::fmt;
use std::sync::Arc;

use crate::backend::{first_accepting, KernelAttempt, KernelDispatchError, KernelError, Named};
use crate::dtype::with_dtype;
use crate::dtype::{DType, C64};
use crate::tensor::{LocalTensor, TensorError};
use crate::typed::{elems_of, first_non_finite, row_col};

/// The decomposition families, as named in attempt logs, errors and decline reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecompKind {
    /// Thin singular value decomposition ([`crate::decomp::svd`]).
    Svd,
    /// Thin QR decomposition ([`crate::decomp::qr`]).
    Qr,
    /// Thin LQ decomposition ([`crate::decomp::lq`]), computed as the QR of the adjoint.
    Lq,
    /// Hermitian eigendecomposition ([`crate::decomp::eigh`]).
    Eigh,
}

impl DecompKind {
    /// `"svd"`, `"qr"`, `"lq"`, `"eigh"`.
    pub fn name(self) -> &'static str {
        match self {
            DecompKind::Svd => "svd",
            DecompKind::Qr => "qr",
            DecompKind::Lq => "lq",
            DecompKind::Eigh => "eigh",
        }
    }
}

impl fmt::Display for DecompKind {
    /// Writes [`DecompKind::name`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A validated decomposition problem handed to backends.
///
/// Guarantees (established by the front ends before dispatch): `matrix` has rank 2 and
/// shape `[rows, cols]`, row-major, every entry finite. For [`DecompKind::Eigh`] it is
/// square and exactly Hermitian (the front end replaces the input by its Hermitian part
/// `(A + A^H) / 2`). For [`DecompKind::Lq`] the matrix is the adjoint `A^H` of the caller's
/// matrix and the backend computes its QR (the front end turns `A^H = Q R` into
/// `A = R^H Q^H`). Either extent may be zero.
#[derive(Clone, Copy, Debug)]
pub struct MatrixProblem<'a> {
    /// The family being dispatched.
    pub kind: DecompKind,
    /// The matrix, rank 2, `[rows, cols]`.
    pub matrix: &'a LocalTensor,
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
}

impl MatrixProblem<'_> {
    /// The element type of the matrix (and of the factors a backend returns).
    pub fn dtype(&self) -> DType {
        self.matrix.dtype()
    }

    /// `min(rows, cols)`: the inner dimension of thin factors.
    pub fn min_dim(&self) -> usize {
        self.rows.min(self.cols)
    }

    /// One-line description used in errors and tracing: `svd (f64) 3x4`.
    pub fn describe(&self) -> String {
        format!("{} ({}) {}x{}", self.kind, self.dtype(), self.rows, self.cols)
    }
}

/// What every decomposition backend answers, whatever its family: its name, whether it is
/// usable here, and whether it accepts an element type and a problem. The family traits
/// ([`crate::decomp::SvdBackend`], [`crate::decomp::QrBackend`], [`crate::decomp::EighBackend`]) add the method
/// that computes.
pub trait DecompBackend: Send + Sync {
    /// Stable short name, e.g. `"faer"`, `"cuda"`.
    fn name(&self) -> &str;
    /// `Err(reason)` if the backend is unusable on this machine. The dispatcher does not
    /// call this; an unavailable backend should also decline in `accepts_types`. Default:
    /// available.
    fn availability(&self) -> Result<(), String> {
        Ok(())
    }
    /// `Err(reason)` if the backend cannot run family `kind` on element type `dtype` at all.
    /// Default: every family and dtype.
    fn accepts_types(&self, _kind: DecompKind, _dtype: DType) -> Result<(), String> {
        Ok(())
    }
    /// `Err(reason)` if the backend declines this particular problem (size, ...). Default:
    /// every valid problem.
    fn accepts(&self, _problem: &MatrixProblem<'_>) -> Result<(), String> {
        Ok(())
    }
}

/// Ordered list of decomposition backends of one family (`B` is `dyn SvdBackend`,
/// `dyn QrBackend` or `dyn EighBackend`; see the aliases [`crate::decomp::SvdBackendList`],
/// [`crate::decomp::QrBackendList`], [`crate::decomp::EighBackendList`], which add the `default_cpu` and
/// `default_gpu_first` constructors).
pub struct DecompBackendList<B: ?Sized> {
    backends: Vec<Arc<B>>,
}

impl<B: ?Sized> Clone for DecompBackendList<B> {
    fn clone(&self) -> Self {
        DecompBackendList {
            backends: self.backends.clone(),
        }
    }
}

impl<B: ?Sized + DecompBackend> fmt::Debug for DecompBackendList<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DecompBackendList").field(&self.names()).finish()
    }
}

impl<B: ?Sized + DecompBackend> DecompBackendList<B> {
    /// A list trying `backends` in the given order. An empty list is allowed; every dispatch
    /// through it fails with an empty attempt log.
    pub fn new(backends: Vec<Arc<B>>) -> Self {
        DecompBackendList { backends }
    }

    /// Backend names in order.
    pub fn names(&self) -> Vec<&str> {
        self.backends.iter().map(|b| b.name()).collect()
    }

    /// The backends in order.
    pub fn backends(&self) -> &[Arc<B>] {
        &self.backends
    }

    /// Offers `problem` to each backend in order; the first that accepts both the types and
    /// the problem runs `run`, and `check` validates its result (a check failure counts as
    /// the committed backend failing). Emits a `tracing` debug event (target
    /// `uni20_dispatch`) naming the chosen backend.
    pub(crate) fn dispatch<R>(
        &self,
        problem: &MatrixProblem<'_>,
        run: impl Fn(&B, &MatrixProblem<'_>) -> Result<R, KernelError>,
        check: impl Fn(&R) -> Result<(), String>,
    ) -> Result<(R, Vec<KernelAttempt>), KernelDispatchError> {
        first_accepting(
            &self.backends,
            || problem.describe(),
            |backend| backend.accepts_types(problem.kind, problem.dtype()),
            |backend| backend.accepts(problem),
            |backend, name, declined| {
                tracing::debug!(
                    target: "uni20_dispatch",
                    backend = %name,
                    operation = %problem.kind,
                    dtype = %problem.dtype(),
                    rows = problem.rows,
                    cols = problem.cols,
                    declined,
                    "kernel backend selected"
                );
                run(backend, problem)
                    .map_err(|e| e.to_string())
                    .and_then(|r| check(&r).map(|()| r))
            },
        )
    }
}

impl<B: ?Sized + DecompBackend> Named for B {
    fn backend_name(&self) -> &str {
        self.name()
    }
}

/// Error from a decomposition front end ([`crate::decomp::svd`], [`crate::decomp::qr`], [`crate::decomp::lq`],
/// [`crate::decomp::eigh`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecompError {
    /// The input is not a rank-2 tensor.
    #[error("{op}: expected a matrix (rank 2), got shape {shape:?}")]
    NotMatrix {
        /// The operation.
        op: DecompKind,
        /// The input's shape.
        shape: Vec<usize>,
    },
    /// `eigh` needs a square matrix.
    #[error("{op}: expected a square matrix, got {rows}x{cols}")]
    NotSquare {
        /// The operation.
        op: DecompKind,
        /// Rows of the input.
        rows: usize,
        /// Columns of the input.
        cols: usize,
    },
    /// An entry is NaN or infinite (the first such entry in row-major order).
    #[error("{op}: entry ({row}, {col}) is not finite ({value})")]
    NonFinite {
        /// The operation.
        op: DecompKind,
        /// Row of the first non-finite entry.
        row: usize,
        /// Column of the first non-finite entry.
        col: usize,
        /// Its value, widened to `C64`.
        value: C64,
    },
    /// `eigh`: `max |A - A^H| > tol * max |A|`. `row`, `col` locate the largest deviation
    /// `|A[row, col] - conj(A[col, row])|` (the first in row-major order among equals).
    #[error(
        "eigh: matrix is not Hermitian: |A[{row},{col}] - conj(A[{col},{row}])| = {deviation:e} \
         exceeds {tolerance:e} * max|A| = {tolerance:e} * {max_abs:e}"
    )]
    NotHermitian {
        /// Row of the largest deviation.
        row: usize,
        /// Column of the largest deviation.
        col: usize,
        /// `|A[row, col] - conj(A[col, row])|`.
        deviation: f64,
        /// `max |A|` over all entries.
        max_abs: f64,
        /// The relative tolerance in force.
        tolerance: f64,
    },
    /// An option is out of range (negative or NaN tolerance, `max_rank == 0`, ...).
    #[error("{op}: invalid option {option}: {reason}")]
    InvalidOption {
        /// The operation.
        op: DecompKind,
        /// The option's field name.
        option: &'static str,
        /// Why it is invalid.
        reason: String,
    },
    /// A result overflows its type although the input is finite: the input was scaled into
    /// the safe range to factorize, and unscaling a singular value, an eigenvalue or an entry
    /// of `R`/`L` exceeds the largest finite value of `dtype` (possible only for inputs
    /// within a factor of about `sqrt(rows * cols)` of that value).
    #[error("{op}: {what} overflows {dtype} (the input is finite, but this result is not representable)")]
    Overflow {
        /// The operation.
        op: DecompKind,
        /// The result that overflows, e.g. `singular value 0` or `R[0, 3]`.
        what: String,
        /// The type it overflows (`f64` for values, the factor's dtype for `R`/`L`).
        dtype: DType,
    },
    /// Building a factor failed (size overflow).
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// No backend produced a result (all declined, or the committed one failed).
    #[error(transparent)]
    Dispatch(#[from] KernelDispatchError),
}

/// Checks that `t` is a rank-2 tensor with finite entries; returns `(rows, cols)`.
pub(crate) fn check_matrix(op: DecompKind, t: &LocalTensor) -> Result<(usize, usize), DecompError> {
    let &[rows, cols] = t.shape() else {
        return Err(DecompError::NotMatrix {
            op,
            shape: t.shape().to_vec(),
        });
    };
    let bad = with_dtype!(t.dtype(), T => first_non_finite(elems_of::<T>(t)));
    if let Some((i, value)) = bad {
        let (row, col) = row_col(i, cols);
        return Err(DecompError::NonFinite { op, row, col, value });
    }
    Ok((rows, cols))
}

/// Checks a relative tolerance option: finite and non-negative.
pub(crate) fn check_tol(op: DecompKind, option: &'static str, v: f64) -> Result<(), DecompError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(DecompError::InvalidOption {
            op,
            option,
            reason: format!("must be finite and >= 0, got {v}"),
        })
    }
}

/// The default relative tolerance for `dtype`: `1e-12` for `f64`/`c64`, `1e-5` for
/// `f32`/`c32`.
pub(crate) fn default_rtol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 | DType::C64 => 1e-12,
        DType::F32 | DType::C32 => 1e-5,
    }
}

/// Checks a factor returned by a backend: dtype and shape.
pub(crate) fn check_factor(name: &str, t: &LocalTensor, dtype: DType, shape: [usize; 2]) -> Result<(), String> {
    if t.dtype() != dtype || t.shape() != shape {
        return Err(format!(
            "backend returned {name} as {} {:?}, expected {} {:?}",
            t.dtype(),
            t.shape(),
            dtype,
            shape
        ));
    }
    Ok(())
}
