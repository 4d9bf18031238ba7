//! The Lanczos eigensolver for the lowest eigenpair of a Hermitian operator
//! that is applied matrix-free to distributed tensors ([`LinearOperator`]).
//!
//! Every vector operation is a distributed one ([`uni20_dist::axpby`],
//! [`uni20_dist::scale`], [`uni20_dist::inner`], [`uni20_dist::norm`]): the
//! Krylov vectors stay on the workers and only the scalars `alpha_j`,
//! `beta_j` reach the root, which diagonalises the small tridiagonal matrix
//! `T_j` locally. The recurrence is the plain three-term one without
//! reorthogonalisation (as TeNPy's `LanczosGroundState` by default): the
//! lowest Ritz pair converges long before the loss of orthogonality makes
//! ghost copies of it, and the Ritz vector is normalised explicitly.
//! Reference: C. Lanczos, J. Res. Nat. Bur. Standards 45, 255 (1950);
//! the residual estimate `||A x - theta x|| = beta_j |y_j|` is eq. (13.2.2)
//! of B. N. Parlett, *The Symmetric Eigenvalue Problem* (SIAM, 1998).

use uni20_dispatch::decomp::{eigh, EighBackendList, EighOptions};
use uni20_dispatch::{DType, LocalTensor, C64};
use uni20_dist::{axpby, inner, norm, scale, DistTensor};
use uni20_worker::Controller;

use crate::error::TnError;

/// A linear operator on distributed tensors of one shape, applied without
/// forming its matrix (for example the effective Hamiltonian of a DMRG
/// step, [`crate::TwoSiteHamiltonian`]). [`lanczos_lowest`] assumes it is
/// Hermitian.
pub trait LinearOperator {
    /// `A x`, of `x`'s shape. May return before the result is computed
    /// (a deferred distributed tensor).
    ///
    /// # Errors
    /// The validation errors of the distributed operations it submits.
    fn apply(&self, ctl: &Controller<'_>, x: &DistTensor) -> Result<DistTensor, TnError>;
}

/// Options of [`lanczos_lowest`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LanczosOptions {
    /// Largest Krylov dimension of one pass (applications of the operator
    /// per pass), at least 2 (one vector spans only the start vector, so a
    /// pass could not move it). Default 20.
    pub max_krylov: usize,
    /// Passes after the first, each restarted from the previous pass's Ritz
    /// vector, while the residual is above `tol`. Default 1.
    pub max_restarts: usize,
    /// Stop when the residual norm `||A x - theta x||` of the unit Ritz
    /// vector `x` is at most this (finite, `> 0`). The energy error is of
    /// the order of `tol^2 / gap`. Default `1e-8`.
    pub tol: f64,
}

impl Default for LanczosOptions {
    fn default() -> Self {
        LanczosOptions {
            max_krylov: 20,
            max_restarts: 1,
            tol: 1e-8,
        }
    }
}

impl LanczosOptions {
    /// Checks the ranges documented on the fields.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] naming the first field out of range.
    pub fn validate(&self) -> Result<(), TnError> {
        if self.max_krylov < 2 {
            return Err(TnError::InvalidOption {
                name: "max_krylov",
                value: self.max_krylov.to_string(),
                expected: "at least 2",
            });
        }
        if !(self.tol.is_finite() && self.tol > 0.0) {
            return Err(TnError::InvalidOption {
                name: "Lanczos tol",
                value: self.tol.to_string(),
                expected: "a finite number > 0",
            });
        }
        Ok(())
    }
}

/// The result of [`lanczos_lowest`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LanczosResult {
    /// The lowest Ritz value (the eigenvalue estimate).
    pub value: f64,
    /// Its Ritz vector, of norm 1 (computed: [`DistTensor::wait`] is not
    /// needed).
    pub vector: DistTensor,
    /// The residual estimate `beta_j |y_j|` of the last pass.
    pub residual: f64,
    /// Applications of the operator, all passes together.
    pub applications: usize,
    /// True if `residual <= tol` (or the Krylov space became invariant).
    pub converged: bool,
}

/// The lowest eigenpair of the Hermitian operator `op`, by Lanczos from
/// the start vector `start` (any shape `op` accepts, real or complex, not
/// zero). Each pass builds at most `max_krylov` Krylov vectors, stops early
/// when the residual estimate falls to `tol` or the next Lanczos vector
/// vanishes (an invariant subspace), and ends with the Ritz vector
/// `sum_k y_k v_k`, normalised; up to `max_restarts` further passes start
/// from it. Memory: `max_krylov + 2` vectors of `start`'s size at once.
///
/// Each step costs one application of `op`, one `inner`, one `norm` (the
/// two round trips to the root) and two or three element-wise operations.
///
/// # Errors
/// [`TnError::InvalidOption`] for bad options or a start vector of zero or
/// non-finite norm; [`TnError::Krylov`] if the tridiagonal eigenproblem
/// fails (non-finite coefficients: a non-finite operator); the errors of
/// the distributed operations (a failed command is
/// [`uni20_dist::DistError::Job`]).
pub fn lanczos_lowest(
    ctl: &Controller<'_>,
    op: &dyn LinearOperator,
    start: &DistTensor,
    opts: &LanczosOptions,
) -> Result<LanczosResult, TnError> {
    opts.validate()?;
    let n0 = norm(ctl, start)?;
    if !(n0.is_finite() && n0 > 0.0) {
        return Err(TnError::InvalidOption {
            name: "Lanczos start vector norm",
            value: n0.to_string(),
            expected: "a finite number > 0",
        });
    }
    let mut x = scale(ctl, 1.0 / n0, start)?;
    let mut applications = 0;
    let mut pass = 0;
    loop {
        let r = one_pass(ctl, op, &x, opts)?;
        applications += r.applications;
        pass += 1;
        if r.converged || pass > opts.max_restarts {
            return Ok(LanczosResult { applications, ..r });
        }
        x = r.vector;
    }
}

/// One Lanczos pass from the unit vector `v0`.
fn one_pass(
    ctl: &Controller<'_>,
    op: &dyn LinearOperator,
    v0: &DistTensor,
    opts: &LanczosOptions,
) -> Result<LanczosResult, TnError> {
    let labels = identity_spec(v0.shape().len());
    let eigh_backends = EighBackendList::default_cpu(1);
    let mut basis: Vec<DistTensor> = vec![v0.clone()];
    let (mut alphas, mut betas): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    let (value, y, residual, converged) = loop {
        let j = basis.len() - 1;
        let mut w = op.apply(ctl, &basis[j])?;
        let a = inner(ctl, &basis[j], &w)?.re;
        w = axpby(ctl, 1.0, &w, -a, &basis[j], &labels)?;
        if j > 0 {
            w = axpby(ctl, 1.0, &w, -betas[j - 1], &basis[j - 1], &labels)?;
        }
        let b = norm(ctl, &w)?;
        alphas.push(a);
        let (theta, y) = lowest_of_tridiagonal(&alphas, &betas, &eigh_backends)?;
        let residual = b * y[j].abs();
        let invariant = b <= 1e-14 * theta.abs().max(a.abs()).max(1e-300);
        if residual <= opts.tol || invariant {
            break (theta, y, residual, true);
        }
        if basis.len() == opts.max_krylov {
            break (theta, y, residual, false);
        }
        betas.push(b);
        basis.push(scale(ctl, 1.0 / b, &w)?);
    };
    let applications = alphas.len();
    let mut x = scale(ctl, y[0], &basis[0])?;
    for (k, v) in basis.iter().enumerate().skip(1) {
        x = axpby(ctl, 1.0, &x, y[k], v, &labels)?;
    }
    drop(basis);
    let nx = norm(ctl, &x)?;
    let x = scale(ctl, 1.0 / nx, &x)?;
    Ok(LanczosResult {
        value,
        vector: x,
        residual,
        applications,
        converged,
    })
}

/// The result of [`krylov_exp`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct KrylovExp {
    /// `exp(tau A) v`.
    pub vector: DistTensor,
    /// `<v|A|v> / <v|v>` (the first Lanczos coefficient).
    pub expectation: f64,
    /// Operator applications.
    pub applications: usize,
    /// Error estimate `|v| beta_j |(exp(tau T_j) e_1)_j|` of the result
    /// (the weight the next Krylov vector would get).
    pub error: f64,
    /// Whether `error <= tol` (or the Krylov space became invariant).
    pub converged: bool,
}

/// `exp(tau A) v` for a Hermitian operator `A` and a complex step `tau`
/// (`-i dt` for real time, `-dt` for imaginary time) by the Lanczos
/// projection `exp(tau A) v ~= |v| Q_j exp(tau T_j) e_1` onto the Krylov
/// space of `v` (Y. Saad, SIAM J. Numer. Anal. 29, 209 (1992); the
/// tridiagonal `T_j` is diagonalised on the root). Grows the space until
/// the error estimate is at most `opts.tol` or `opts.max_krylov` vectors
/// are used (no restarts: `max_restarts` is ignored). The vectors stay on
/// the workers.
///
/// # Errors
/// [`TnError::InvalidOption`] for bad `opts` or a non-finite `tau`; the
/// validation errors of the operator's contractions.
pub fn krylov_exp(
    ctl: &Controller<'_>,
    op: &dyn LinearOperator,
    v: &DistTensor,
    tau: C64,
    opts: &LanczosOptions,
) -> Result<KrylovExp, TnError> {
    opts.validate()?;
    if !(tau.re.is_finite() && tau.im.is_finite()) {
        return Err(TnError::InvalidOption {
            name: "Krylov exponential step",
            value: tau.to_string(),
            expected: "a finite complex number",
        });
    }
    let labels = identity_spec(v.shape().len());
    let backends = EighBackendList::default_cpu(1);
    let beta0 = norm(ctl, v)?;
    if beta0 == 0.0 {
        return Ok(KrylovExp {
            vector: v.clone(),
            expectation: 0.0,
            applications: 0,
            error: 0.0,
            converged: true,
        });
    }
    let mut basis: Vec<DistTensor> = vec![scale(ctl, 1.0 / beta0, v)?];
    let (mut alphas, mut betas): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    let (coeffs, error, converged) = loop {
        let j = basis.len() - 1;
        let mut w = op.apply(ctl, &basis[j])?;
        let a = inner(ctl, &basis[j], &w)?.re;
        w = axpby(ctl, 1.0, &w, -a, &basis[j], &labels)?;
        if j > 0 {
            w = axpby(ctl, 1.0, &w, -betas[j - 1], &basis[j - 1], &labels)?;
        }
        let b = norm(ctl, &w)?;
        alphas.push(a);
        let c = exp_of_tridiagonal(&alphas, &betas, tau, &backends)?;
        let error = beta0 * b * c[j].norm();
        let invariant = b <= 1e-14 * a.abs().max(1e-300);
        if error <= opts.tol || invariant {
            break (c, error, true);
        }
        if basis.len() == opts.max_krylov {
            break (c, error, false);
        }
        betas.push(b);
        basis.push(scale(ctl, 1.0 / b, &w)?);
    };
    let first = coeffs[0] * beta0;
    let mut x = if coeffs.iter().any(|c| c.im != 0.0) && v.dtype() == DType::F64 {
        // A complex multiple of a real vector: a contraction with a complex
        // scalar makes the result complex.
        let c = DistTensor::from_local(ctl, &LocalTensor::from_c64(&[], vec![first])?, 1)?;
        let spec = labels.split_once("->").map_or(String::new(), |(l, _)| l.to_string());
        uni20_dist::contract(ctl, format!(",{spec}->{spec}"), &c, &basis[0])?
    } else {
        scale(ctl, first, &basis[0])?
    };
    for (k, q) in basis.iter().enumerate().skip(1) {
        x = axpby(ctl, 1.0, &x, coeffs[k] * beta0, q, &labels)?;
    }
    Ok(KrylovExp {
        vector: x,
        expectation: alphas[0],
        applications: alphas.len(),
        error,
        converged,
    })
}

/// `exp(tau T) e_1` for the symmetric tridiagonal `T` (diagonal `alphas`,
/// off-diagonal `betas`), by its eigendecomposition.
fn exp_of_tridiagonal(
    alphas: &[f64],
    betas: &[f64],
    tau: C64,
    backends: &EighBackendList,
) -> Result<Vec<C64>, TnError> {
    let n = alphas.len();
    let mut t = vec![0.0; n * n];
    for (i, a) in alphas.iter().enumerate() {
        t[i * n + i] = *a;
    }
    for (i, b) in betas.iter().enumerate().take(n.saturating_sub(1)) {
        t[i * n + i + 1] = *b;
        t[(i + 1) * n + i] = *b;
    }
    let r = eigh(&LocalTensor::from_f64(&[n, n], t)?, &EighOptions::default(), backends)?;
    let q: Vec<f64> = r.vectors.to_c64_vec().iter().map(|z| z.re).collect();
    let e: Vec<C64> = r.values.iter().map(|&l| (tau * l).exp()).collect();
    Ok((0..n)
        .map(|k| (0..n).map(|m| e[m] * (q[k * n + m] * q[m])).sum())
        .collect())
}

/// The lowest eigenvalue of the symmetric tridiagonal matrix with diagonal
/// `alphas` (length `n`) and off-diagonal `betas` (length `n - 1`), and its
/// unit eigenvector (length `n`), by the local dense eigensolver `backends`.
fn lowest_of_tridiagonal(
    alphas: &[f64],
    betas: &[f64],
    backends: &EighBackendList,
) -> Result<(f64, Vec<f64>), TnError> {
    let n = alphas.len();
    let mut t = vec![0.0; n * n];
    for (i, a) in alphas.iter().enumerate() {
        t[i * n + i] = *a;
    }
    for (i, b) in betas.iter().enumerate().take(n.saturating_sub(1)) {
        t[i * n + i + 1] = *b;
        t[(i + 1) * n + i] = *b;
    }
    let m = LocalTensor::from_f64(&[n, n], t)?;
    let r = eigh(&m, &EighOptions::default(), backends)?;
    debug_assert_eq!(r.vectors.dtype(), DType::F64);
    let v = r.vectors.to_c64_vec();
    let y: Vec<f64> = (0..n).map(|i| v[i * n].re).collect();
    Ok((r.values[0], y))
}

/// `"abc->abc"` for rank 3: the element-wise spec of same-shape vectors.
fn identity_spec(rank: usize) -> String {
    let labels: String = (0..rank).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    format!("{labels}->{labels}")
}

#[cfg(test)]
mod tests {
    use super::lowest_of_tridiagonal;
    use uni20_dispatch::decomp::EighBackendList;

    #[test]
    fn one_krylov_vector_is_refused() {
        let with = |k| super::LanczosOptions {
            max_krylov: k,
            ..super::LanczosOptions::default()
        };
        assert!(with(0).validate().is_err());
        assert!(with(1).validate().is_err());
        assert!(with(2).validate().is_ok());
    }

    /// The path graph's Laplacian-like tridiagonal (2 on the diagonal, -1
    /// off it) has eigenvalues 2 - 2 cos(k pi / (n + 1)).
    #[test]
    fn tridiagonal_lowest_pair() {
        let n = 7;
        let (theta, y) =
            lowest_of_tridiagonal(&vec![2.0; n], &vec![-1.0; n - 1], &EighBackendList::default_cpu(1)).unwrap();
        let exact = 2.0 - 2.0 * (std::f64::consts::PI / (n as f64 + 1.0)).cos();
        assert!((theta - exact).abs() < 1e-13, "{theta} vs {exact}");
        let norm: f64 = y.iter().map(|v| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-13);
        // The lowest mode is sin(k pi / (n+1)), all of one sign.
        let s = y[0].signum();
        for (k, v) in y.iter().enumerate() {
            let exact =
                s * ((k + 1) as f64 * std::f64::consts::PI / (n as f64 + 1.0)).sin() / ((n as f64 + 1.0) / 2.0).sqrt();
            assert!((v - exact).abs() < 1e-12, "{k}: {v} vs {exact}");
        }
    }
}
