//! The Lanczos eigensolver for the lowest eigenpair of a Hermitian operator
//! that is applied matrix-free to distributed tensors ([`LinearOperator`]).
//!
//! Every vector operation is a distributed one ([`uni20_dist::lincomb`],
//! [`uni20_dist::axpby`], [`uni20_dist::scale`], [`uni20_dist::inner`], [`uni20_dist::norm`]): the
//! Krylov vectors stay on the workers and only the scalars `alpha_j`,
//! `beta_j` reach the root, which diagonalises the small tridiagonal matrix
//! `T_j` locally. The recurrence is the plain three-term one without
//! reorthogonalisation (as TeNPy's `LanczosGroundState` by default): the
//! lowest Ritz pair converges long before the loss of orthogonality makes
//! ghost copies of it, and the Ritz vector is normalised explicitly.
//! Reference: C. Lanczos, J. Res. Nat. Bur. Standards 45, 255 (1950);
//! the residual estimate `||A x - theta x|| = beta_j |y_j|` is eq. (13.2.2)
//! of B. N. Parlett, *The Symmetric Eigenvalue Problem* (SIAM, 1998).
//!
//! A pass stops on the first of: the residual at most `tol`; the lowest
//! Ritz value changed by less than `e_tol` over the last step, after at
//! least `min_krylov` steps (the energy-change stop of DMRG codes: the Ritz
//! value falls monotonically towards the eigenvalue, and in a DMRG sweep
//! the warm start is already close, so two or three steps usually do);
//! `max_krylov` steps. Small problems (at most `dense_max` unknowns, the
//! bonds near the chain ends) are not iterated at all when the operator
//! offers its matrix ([`LinearOperator::matrix`]): the matrix is formed on
//! the root from the environments and diagonalised there, with no
//! operator application and no round trip per step.

use std::sync::Arc;

use uni20_dispatch::decomp::{eigh, eigh_lowest, EighBackendList, EighOptions};
use uni20_dispatch::{DType, LocalTensor, C64};
use uni20_dist::{axpby, inner, lincomb, norm, reblock, scale, DistTensor};
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

    /// The operator's matrix on the positions `rows` of vectors shaped as
    /// `like`: `m[i * n + j] = <e_(rows[i]) | A | e_(rows[j])>` (row-major,
    /// `n = rows.len()`), where a position is the row-major linear index
    /// into the dense shape of `like` (for a symmetric tensor, its dense
    /// embedding; [`lanczos_lowest`] passes the charge-allowed positions).
    /// Gathers what it needs onto the root, so it is meant for small
    /// problems only. `None` (the default) when the operator cannot form
    /// its matrix: the solver then iterates.
    ///
    /// # Errors
    /// The errors of the gathers ([`DistTensor::to_dense`]).
    fn matrix(&self, ctl: &Controller<'_>, like: &DistTensor, rows: &[usize]) -> Result<Option<Vec<C64>>, TnError> {
        let _ = (ctl, like, rows);
        Ok(None)
    }
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
    /// Energy-change stop: also stop when the lowest Ritz value changed by
    /// less than this over the last step, once `min_krylov` steps are done
    /// (finite, `>= 0`; `0` turns the criterion off). Not a bound on the
    /// error by itself: the error of the value is at most
    /// `residual^2 / (lambda_1 - value)` (Kato-Temple, `lambda_1` the
    /// second eigenvalue) with the `residual` the result reports, and in
    /// practice of the order of the last change when the Ritz value
    /// converges geometrically. A positive `e_tol` below the roundoff of
    /// the Ritz value is raised to it ([`E_TOL_ROUNDOFF_ULPS`]). Default
    /// `0` (DMRG sets it per step from the truncation:
    /// [`crate::DmrgOptions::e_tol_to_truncation`]).
    pub e_tol: f64,
    /// Fewest steps (applications) of a pass before the energy-change stop
    /// may end it, at least 2 (one change needs two Ritz values) and at most
    /// `max_krylov`. Default 2.
    pub min_krylov: usize,
    /// Problems of at most this many unknowns (the elements of the start
    /// vector; of a symmetric one, its charge-allowed elements) are solved
    /// by forming the operator's matrix on the root and diagonalising it
    /// there, when the operator can ([`LinearOperator::matrix`]); such a
    /// solve applies the operator 0 times. `0` always iterates. Default
    /// 256.
    pub dense_max: usize,
}

impl Default for LanczosOptions {
    fn default() -> Self {
        LanczosOptions {
            max_krylov: 20,
            max_restarts: 1,
            tol: 1e-8,
            e_tol: 0.0,
            min_krylov: 2,
            dense_max: DEFAULT_DENSE_MAX,
        }
    }
}

/// The default [`LanczosOptions::dense_max`].
pub const DEFAULT_DENSE_MAX: usize = 256;

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
        if !(self.e_tol.is_finite() && self.e_tol >= 0.0) {
            return Err(TnError::InvalidOption {
                name: "Lanczos e_tol",
                value: self.e_tol.to_string(),
                expected: "a finite number >= 0",
            });
        }
        if self.min_krylov < 2 || self.min_krylov > self.max_krylov {
            return Err(TnError::InvalidOption {
                name: "min_krylov",
                value: self.min_krylov.to_string(),
                expected: "at least 2 and at most max_krylov",
            });
        }
        Ok(())
    }

    /// The behaviour before the energy-change stop and the dense solves:
    /// these options with `e_tol = 0` and `dense_max = 0` (residual stop
    /// only, every problem iterated).
    pub fn residual_only(self) -> LanczosOptions {
        LanczosOptions {
            e_tol: 0.0,
            dense_max: 0,
            ..self
        }
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
    /// The residual estimate `beta_j |y_j|` of the last pass (of a dense
    /// solve, `||A x - value x||` computed on the root).
    pub residual: f64,
    /// Applications of the operator, all passes together (0 for a dense
    /// solve).
    pub applications: usize,
    /// True if `residual <= tol`, the energy-change stop ended the pass,
    /// the Krylov space became invariant, or the problem was solved densely.
    pub converged: bool,
    /// True if the problem was solved by diagonalising the operator's
    /// matrix on the root (`dense_max`), not by iterating.
    pub dense: bool,
}

/// The lowest eigenpair of the Hermitian operator `op`, by Lanczos from
/// the start vector `start` (any shape `op` accepts, real or complex, not
/// zero). Each pass builds at most `max_krylov` Krylov vectors, stops early
/// when the residual estimate falls to `tol` or the next Lanczos vector
/// vanishes (an invariant subspace), and ends with the Ritz vector
/// `sum_k y_k v_k`, normalised; up to `max_restarts` further passes start
/// from it. A pass also stops when the lowest Ritz value changed by less
/// than `e_tol` over its last step (after `min_krylov` steps). Memory:
/// `max_krylov + 2` vectors of `start`'s size at once.
///
/// Each step costs one application of `op`, one `inner`, one `norm` (the
/// two round trips to the root) and one [`lincomb`] (the three-term
/// recurrence in one pass): the Lanczos vectors are kept unnormalised
/// with their scale factors on the root, so no step needs a `scale` of its
/// own. The Ritz vector of a pass of `k` steps costs one `lincomb`, a
/// `norm` and a `scale` (one `scale` when `k = 1`).
///
/// When `start` has at most `dense_max` unknowns and `op` forms its matrix
/// ([`LinearOperator::matrix`]), its lowest eigenpair is found on the root
/// instead (the eigenvalues alone and inverse iteration from `start`,
/// [`uni20_dispatch::decomp::eigh_lowest`]; for a degenerate lowest level
/// the full decomposition and the normalised projection of `start` onto
/// the level, as the Krylov space of `start` would find), with
/// `applications == 0` and `dense` set. A dense `start` keeps its block tiling, a symmetric one its layout.
///
/// # Errors
/// [`TnError::InvalidOption`] for bad options or a start vector of zero or
/// non-finite norm; [`TnError::Krylov`] if the tridiagonal (or the dense)
/// eigenproblem fails (non-finite coefficients: a non-finite operator; a
/// dense matrix that is not Hermitian to `1e-10` relative); the errors of
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
    if let Some(r) = dense_lowest(ctl, op, start, opts)? {
        return Ok(r);
    }
    let mut x = Scaled {
        t: start.clone(),
        c: 1.0 / n0,
    };
    let mut applications = 0;
    let mut pass = 0;
    loop {
        let r = one_pass(ctl, op, x, opts)?;
        applications += r.applications;
        pass += 1;
        if r.converged || pass > opts.max_restarts {
            return Ok(LanczosResult { applications, ..r });
        }
        x = Scaled { t: r.vector, c: 1.0 };
    }
}

/// A Lanczos vector kept as `c * t` (`c` real): the normalisations of the
/// recurrence stay scalars, folded into the next element-wise operation,
/// instead of a [`scale`] each (an operation with its own planning and a
/// pass over the data). The operator is linear, so `A (c t) = c (A t)`.
struct Scaled {
    t: DistTensor,
    c: f64,
}

/// One Lanczos pass from the unit vector `v0` (kept scaled: `v0.c * v0.t`
/// has norm 1).
fn one_pass(
    ctl: &Controller<'_>,
    op: &dyn LinearOperator,
    v0: Scaled,
    opts: &LanczosOptions,
) -> Result<LanczosResult, TnError> {
    let eigh_backends = EighBackendList::default_cpu(1);
    // Lanczos vector j is `basis[j].c * basis[j].t`, of norm 1.
    let mut basis: Vec<Scaled> = vec![v0];
    let (mut alphas, mut betas): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    let mut previous = f64::NAN;
    let (value, y, residual, converged) = loop {
        let j = basis.len() - 1;
        let (tj, cj) = (&basis[j].t, basis[j].c);
        // A v_j = c_j (A t_j).
        let w = op.apply(ctl, tj)?;
        let a = cj * cj * inner(ctl, tj, &w)?.re;
        // w_j = A v_j - a v_j - beta_(j-1) v_(j-1), one operation.
        let mut terms = vec![(real(cj), &w), (real(-a * cj), tj)];
        if j > 0 {
            let prev = &basis[j - 1];
            terms.push((real(-betas[j - 1] * prev.c), &prev.t));
        }
        let w = lincomb(ctl, &terms)?;
        let b = norm(ctl, &w)?;
        alphas.push(a);
        let (theta, y) = lowest_of_tridiagonal(&alphas, &betas, &eigh_backends)?;
        let residual = b * y[j].abs();
        let invariant = b <= 1e-14 * theta.abs().max(a.abs()).max(1e-300);
        // NaN before the second step: no change to compare yet.
        let settled = alphas.len() >= opts.min_krylov && (previous - theta).abs() < e_tol_at(opts.e_tol, theta);
        if residual <= opts.tol || invariant || settled {
            break (theta, y, residual, true);
        }
        previous = theta;
        if basis.len() == opts.max_krylov {
            break (theta, y, residual, false);
        }
        betas.push(b);
        basis.push(Scaled { t: w, c: 1.0 / b });
    };
    let applications = alphas.len();
    // The Ritz vector sum_k y_k v_k, normalised. After one step it is
    // `+-v_0`, already of norm 1.
    let x = if let [only] = basis.as_slice() {
        scale(ctl, y[0] * only.c, &only.t)?
    } else {
        let terms: Vec<(C64, &DistTensor)> = basis.iter().zip(&y).map(|(v, &yk)| (real(yk * v.c), &v.t)).collect();
        let x = lincomb(ctl, &terms)?;
        drop(basis);
        let nx = norm(ctl, &x)?;
        scale(ctl, 1.0 / nx, &x)?
    };
    Ok(LanczosResult {
        value,
        vector: x,
        residual,
        applications,
        converged,
        dense: false,
    })
}

/// The positions of `x` that may be non-zero, as row-major linear indices
/// into its dense shape: all of them for a dense tensor, those of the
/// charge-allowed blocks for a symmetric one (in block order).
fn allowed_positions(x: &DistTensor) -> Vec<usize> {
    let shape = x.shape().to_vec();
    let Some(layout) = x.layout() else {
        return (0..x.len()).collect();
    };
    let rank = shape.len();
    let mut strides = vec![1usize; rank];
    for k in (0..rank.saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * shape[k + 1];
    }
    let mut out = Vec::with_capacity(layout.stored_elements());
    for b in 0..layout.blocks().len() {
        let (off, ext) = (layout.block_offsets(b), layout.block_extents(b));
        if ext.contains(&0) {
            continue;
        }
        let mut idx = vec![0usize; rank];
        'block: loop {
            out.push((0..rank).map(|k| (off[k] + idx[k]) * strides[k]).sum());
            // Odometer over the block's extents, last mode fastest.
            let mut k = rank;
            loop {
                if k == 0 {
                    break 'block;
                }
                k -= 1;
                idx[k] += 1;
                if idx[k] < ext[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
    }
    out
}

/// The lowest eigenvector of the `n x n` Hermitian `local` by the full
/// decomposition (where [`eigh_lowest`] declines): for a degenerate lowest
/// level (to `1e-11` of the largest `|lambda|`), the normalised projection
/// of the start `x0` onto it, so that a degenerate ground state keeps the
/// start's member; otherwise, or for a start without weight there, the
/// first eigenvector.
fn full_lowest(local: &LocalTensor, x0: &[C64], opts: &EighOptions) -> Result<Vec<C64>, TnError> {
    let n = x0.len();
    let e = eigh(local, opts, &EighBackendList::default_cpu(1))?;
    let v = e.vectors.to_c64_vec();
    let lowest = e.values[0];
    let scale_of = e.values.iter().fold(0.0f64, |s, l| s.max(l.abs())).max(1e-300);
    let deg = e.values.iter().take_while(|&&l| l - lowest <= 1e-11 * scale_of).count();
    let first: Vec<C64> = (0..n).map(|i| v[i * n]).collect();
    if deg == 1 {
        return Ok(first);
    }
    let mut p = vec![C64::new(0.0, 0.0); n];
    for j in 0..deg {
        let c: C64 = (0..n).map(|i| v[i * n + j].conj() * x0[i]).sum();
        for (i, pi) in p.iter_mut().enumerate() {
            *pi += c * v[i * n + j];
        }
    }
    let np = p.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
    Ok(if np > 1e-8 {
        p.into_iter().map(|z| z / np).collect()
    } else {
        first
    })
}

/// The dense solve of [`lanczos_lowest`] (`None` when it does not apply).
fn dense_lowest(
    ctl: &Controller<'_>,
    op: &dyn LinearOperator,
    start: &DistTensor,
    opts: &LanczosOptions,
) -> Result<Option<LanczosResult>, TnError> {
    let unknowns = start.layout().map_or(start.len(), |l| l.stored_elements());
    if opts.dense_max == 0 || unknowns > opts.dense_max || unknowns == 0 {
        return Ok(None);
    }
    let rows = allowed_positions(start);
    let Some(m) = op.matrix(ctl, start, &rows)? else {
        return Ok(None);
    };
    let n = rows.len();
    if m.len() != n * n {
        return Err(TnError::Internal(
            "LinearOperator::matrix returned a matrix of the wrong size",
        ));
    }
    let real = m.iter().all(|z| z.im == 0.0);
    let local = if real {
        LocalTensor::from_f64(&[n, n], m.iter().map(|z| z.re).collect())?
    } else {
        LocalTensor::from_c64(&[n, n], m.clone())?
    };
    let opts_h = EighOptions {
        hermitian_rtol: Some(1e-10),
    };
    let x0 = start.to_dense(ctl)?.to_c64_vec();
    let x0: Vec<C64> = rows.iter().map(|&r| x0[r]).collect();
    // The lowest eigenvalue alone and inverse iteration from the start
    // (about 0.6 of the work of all eigenvectors, measured); a degenerate
    // lowest level (or a start without weight) falls back to the full
    // decomposition.
    // A faer failure there (a workspace it could not allocate) also falls back.
    let found = match eigh_lowest(&local, &x0, &opts_h, 1) {
        Err(uni20_dispatch::decomp::DecompError::Dispatch(_)) => None,
        r => r?,
    };
    let y = match found {
        Some(p) => p.vector,
        None => full_lowest(&local, &x0, &opts_h)?,
    };
    // The residual ||M y - lowest y|| and the Rayleigh quotient of y.
    let my: Vec<C64> = (0..n).map(|i| (0..n).map(|j| m[i * n + j] * y[j]).sum()).collect();
    let value: f64 = (0..n).map(|i| (y[i].conj() * my[i]).re).sum();
    let residual = (0..n).map(|i| (my[i] - y[i] * value).norm_sqr()).sum::<f64>().sqrt();
    let shape = start.shape().to_vec();
    let total: usize = shape.iter().product();
    let vector = if real && start.dtype() == DType::F64 {
        let mut d = vec![0.0; total];
        for (i, &r) in rows.iter().enumerate() {
            d[r] = y[i].re;
        }
        LocalTensor::from_f64(&shape, d)?
    } else {
        let mut d = vec![C64::new(0.0, 0.0); total];
        for (i, &r) in rows.iter().enumerate() {
            d[r] = y[i];
        }
        LocalTensor::from_c64(&shape, d)?
    };
    let vector = match start.layout() {
        Some(layout) => DistTensor::from_dense(ctl, &vector, Arc::new(layout.clone()), 0.0)?,
        None => {
            let block = start
                .blocking()
                .extents()
                .iter()
                .flatten()
                .copied()
                .max()
                .unwrap_or(1)
                .max(1);
            let t = DistTensor::from_local(ctl, &vector, block)?;
            reblock(ctl, &t, start.blocking())?
        }
    };
    Ok(Some(LanczosResult {
        value,
        vector,
        residual,
        applications: 0,
        converged: true,
        dense: true,
    }))
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
        let w = op.apply(ctl, &basis[j])?;
        let a = inner(ctl, &basis[j], &w)?.re;
        // w_j = A q_j - a q_j - beta_(j-1) q_(j-1), one operation.
        let mut terms = vec![(real(1.0), &w), (real(-a), &basis[j])];
        if j > 0 {
            terms.push((real(-betas[j - 1]), &basis[j - 1]));
        }
        let w = lincomb(ctl, &terms)?;
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
        // A complex multiple of a real vector.
        match basis[0].meta().symmetric.clone() {
            // Symmetric: added to a complex zero of the same layout (the
            // promotion of axpby), block by block.
            Some(layout) => {
                let zero = uni20_dist::sym_zeros(ctl, layout, DType::C64)?;
                axpby(ctl, 1.0, &zero, first, &basis[0], &labels)?
            }
            // Dense: a contraction with a complex scalar makes it complex.
            None => {
                let c = DistTensor::from_local(ctl, &LocalTensor::from_c64(&[], vec![first])?, 1)?;
                let spec = labels.split_once("->").map_or(String::new(), |(l, _)| l.to_string());
                uni20_dist::contract(ctl, format!(",{spec}->{spec}"), &c, &basis[0])?
            }
        }
    } else {
        scale(ctl, first, &basis[0])?
    };
    if basis.len() > 1 {
        let mut terms: Vec<(C64, &DistTensor)> = vec![(real(1.0), &x)];
        terms.extend(basis.iter().zip(&coeffs).skip(1).map(|(q, &ck)| (ck * beta0, q)));
        x = lincomb(ctl, &terms)?;
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

/// Units of roundoff (`f64::EPSILON * |theta|`) below which a change of
/// the lowest Ritz value `theta` is not resolved: the energy-change stop of
/// [`lanczos_lowest`] uses `max(e_tol, E_TOL_ROUNDOFF_ULPS * f64::EPSILON *
/// |theta|)` whenever `e_tol > 0`. The Ritz value comes from inner
/// products of vectors of many elements, whose rounding alone moves it by
/// some units of `f64::EPSILON * |theta|` from step to step; a tolerance
/// below that ends a pass only by chance (L = 100 Heisenberg at chi 400,
/// `|theta|` about 44: the floor is 1.6e-13, where the sweeps' rule had
/// asked for 1.3e-16; `docs/performance.md`).
pub const E_TOL_ROUNDOFF_ULPS: f64 = 16.0;

/// The energy-change tolerance a pass uses at Ritz value `theta`: `e_tol`
/// raised to the roundoff floor ([`E_TOL_ROUNDOFF_ULPS`]), `0` (the stop
/// off) when `e_tol` is `0`.
fn e_tol_at(e_tol: f64, theta: f64) -> f64 {
    if e_tol > 0.0 {
        e_tol.max(E_TOL_ROUNDOFF_ULPS * f64::EPSILON * theta.abs())
    } else {
        0.0
    }
}

/// `"abc->abc"` for rank 3: the element-wise spec of same-shape vectors.
fn identity_spec(rank: usize) -> String {
    let labels: String = (0..rank).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    format!("{labels}->{labels}")
}

/// A real coefficient of [`lincomb`].
fn real(x: f64) -> C64 {
    C64::new(x, 0.0)
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
