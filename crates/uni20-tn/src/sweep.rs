//! The open two-site sweep engine ([`SweepEngine`]), kept apart from what
//! is solved at each bond ([`LocalProblem`]).
//!
//! The engine owns the MPO, the MPS and the environments; a sweep goes
//! right over the bonds `(0,1) .. (L-2,L-1)` and back left over
//! `(L-2,L-1) .. (0,1)`. At every bond it builds the two-site effective
//! Hamiltonian ([`TwoSiteHamiltonian`]) and the two-site tensor `theta`,
//! hands both to the local problem, splits the tensor the problem returns
//! (a truncated SVD, or with a mixer the density-matrix split below), tells
//! the problem where the orthonormal site went ([`LocalProblem::moved`]),
//! offers it the new centre site with its one-site effective Hamiltonian
//! ([`LocalProblem::centre`], the backward step of TDVP) and grows the
//! environment on the side it leaves. The environment on the side it moves
//! into is dropped at once, so at most `L + 1` environments live at any
//! time.
//!
//! **Environment budget** ([`EnvBudget`], [`SweepEngine::with_env_budget`]):
//! after each step (and while the first right environments are built) the
//! engine keeps resident at most that many bytes of environments, the ones
//! nearest the next bond (distance in sites from the bond the next step
//! solves), and offloads the others to their owners' disk stores
//! ([`uni20_dist::offload`]); with `prefetch`, an offloaded environment that
//! the next step needs is loaded again ([`uni20_dist::prefetch`]) while the
//! current step's deferred work runs (the other offloaded ones stay on disk
//! until a step needs them, so the resident environments are the recent
//! ones, at most the budget). Without prefetch, the step that needs an
//! offloaded environment loads it when its first contraction runs. The arithmetic is the same either way:
//! the energies equal those of an unbudgeted run.
//!
//! The local problems of this crate: the ground state (and excited states,
//! with projectors onto lower states) of [`crate::Dmrg`], and the forward
//! and backward Krylov exponentials of [`crate::Tdvp`]. A user's own
//! problem (a shift-invert solver, a different projector, a symmetric
//! tensor once `uni20-dist` has them) is one `impl LocalProblem`.
//!
//! Per sweep the engine takes [`SweepParams`] (truncation, eigensolver
//! tolerance, mixer); a [`SweepSchedule`] lists them per sweep and an
//! [`Observer`] sees each sweep's [`SweepStats`] and the state and decides
//! whether to go on ([`SweepEngine::run`], [`crate::Dmrg::run`]).
//!
//! **Mixer** (S. R. White, Phys. Rev. B 72, 180403 (2005)): with
//! `mixer = alpha > 0`, a step moving right keeps the eigenvectors of the
//! perturbed reduced density matrix
//! `rho = theta theta^+ + alpha sum_v P_v P_v^+` of the left half, where
//! `P[a, s, v, u, d] = sum L[a, w, c] W_i[w, v, s, t] theta[c, t, u, d]` is
//! the left half of `H theta` (and the mirror image moving left). The
//! perturbation adds to the kept basis the states that `H` reaches from
//! it, so a bond can grow sectors (quantum numbers, or directions of a
//! single-site update) that `theta` alone has lost; the new centre is the
//! projection of `theta` onto the kept basis, renormalised, and the
//! reported discarded weight is the part of `theta` lost by it. `alpha`
//! is usually lowered sweep by sweep (a schedule) to 0, where the split is
//! the plain truncated SVD again.

use std::time::Instant;

use uni20_dispatch::LocalTensor;
use uni20_dist::decomp::EighOptions;
use uni20_dist::{
    axpby, conj, contract, contract_with, eigh, norm, offload, permute, prefetch, scale, ContractOptions, DistTensor,
};
use uni20_worker::Controller;

use crate::env::{grow_left, grow_left_fused, grow_right, grow_right_fused, Matvec, TwoSiteHamiltonian};
use crate::error::TnError;
use crate::lanczos::{LanczosOptions, LinearOperator};
use crate::mpo::Mpo;
use crate::mps::Mps;
use crate::split::split_two_site;

/// Largest residual tolerance the adaptive rule of
/// [`SweepParams::tol_to_truncation`] gives (early sweeps, where the
/// discarded weights are large): `1e-4`.
pub const MAX_ADAPTIVE_TOL: f64 = 1e-4;

/// Largest energy-change tolerance the rule of
/// [`SweepParams::e_tol_to_truncation`] gives: `1e-6`.
pub const MAX_ADAPTIVE_E_TOL: f64 = 1e-6;

/// The default [`SweepParams::e_tol_to_truncation`] (and
/// [`crate::DmrgOptions::e_tol_to_truncation`]).
pub const DEFAULT_E_TOL_TO_TRUNCATION: f64 = 10.0;

/// The default [`SweepParams::e_tol_to_energy_change`] (and
/// [`crate::DmrgOptions::e_tol_to_energy_change`]). `1e-2` until
/// 2026-12-05: cheaper early sweeps, but the run reached its converged
/// energy sweeps later (L = 100 Heisenberg with Sz at chi 400: within 1e-8
/// after 7 sweeps and 41 s, with `1e-4` after 5 sweeps and 27-31 s;
/// `docs/performance.md`).
pub const DEFAULT_E_TOL_TO_ENERGY_CHANGE: f64 = 1e-4;

/// What one sweep uses: truncation, eigensolver tolerance and mixer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepParams {
    /// Largest bond dimension kept by each split (at least 1).
    pub chi_max: usize,
    /// Singular values (of the normalised two-site tensor) at or below this
    /// are dropped (finite, `>= 0`); with a mixer, eigenvalues of the
    /// normalised density matrix at or below `cutoff^2`.
    pub cutoff: f64,
    /// The eigensolver of each step (its `tol` is the smallest residual
    /// tolerance; see `tol_to_truncation`).
    pub lanczos: LanczosOptions,
    /// Adaptive eigensolver tolerance: a step stops its Lanczos at the
    /// residual `max(lanczos.tol, tol_to_truncation * sqrt(w))`, at most
    /// [`MAX_ADAPTIVE_TOL`], with `w` the discarded weight of the run's
    /// previous split (see [`crate::DmrgOptions::tol_to_truncation`]).
    /// `0` keeps `lanczos.tol`. Finite, `>= 0`.
    pub tol_to_truncation: f64,
    /// Energy-change stop following the truncation: a step also stops its
    /// Lanczos when the lowest Ritz value changed by less than
    /// `max(lanczos.e_tol, e_tol_to_truncation * w)`, at most
    /// [`MAX_ADAPTIVE_E_TOL`], where `w` is the largest discarded weight of
    /// the previous sweep (of the run's previous split during the first
    /// sweep) — see [`crate::DmrgOptions::e_tol_to_truncation`]. `0` keeps
    /// `lanczos.e_tol`. Finite, `>= 0`.
    pub e_tol_to_truncation: f64,
    /// Energy-change stop following the sweeps' convergence: a step also
    /// stops its Lanczos when the lowest Ritz value changed by less than
    /// `e_tol_to_energy_change * |dE| / (2 (L - 1))`, at most
    /// [`MAX_ADAPTIVE_E_TOL`], where `dE` is the energy change of the
    /// previous sweep, shared among its `2 (L - 1)` steps (after a run's
    /// first sweep, whose change is unknown: [`MAX_ADAPTIVE_E_TOL`]; no
    /// such term in a run's first sweep). While the environments are far
    /// from converged, solving a step much below the next sweep's energy
    /// change buys nothing; once the sweeps settle the term falls below the
    /// truncation's and changes nothing (see
    /// [`crate::DmrgOptions::e_tol_to_energy_change`]). `0` turns it off.
    /// Finite, `>= 0`.
    pub e_tol_to_energy_change: f64,
    /// Mixer strength `alpha` of the density-matrix perturbation (module
    /// docs); `0` (the default) splits by the plain truncated SVD. Finite,
    /// `>= 0`.
    pub mixer: f64,
}

impl Default for SweepParams {
    fn default() -> Self {
        SweepParams {
            chi_max: 64,
            cutoff: 1e-10,
            lanczos: LanczosOptions::default(),
            tol_to_truncation: 0.1,
            e_tol_to_truncation: DEFAULT_E_TOL_TO_TRUNCATION,
            e_tol_to_energy_change: DEFAULT_E_TOL_TO_ENERGY_CHANGE,
            mixer: 0.0,
        }
    }
}

fn non_negative(name: &'static str, v: f64) -> Result<(), TnError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(TnError::InvalidOption {
            name,
            value: v.to_string(),
            expected: "a finite number >= 0",
        })
    }
}

impl SweepParams {
    /// Checks the ranges documented on the fields.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] naming the first field out of range.
    pub fn validate(&self) -> Result<(), TnError> {
        if self.chi_max == 0 {
            return Err(TnError::InvalidOption {
                name: "chi_max",
                value: "0".into(),
                expected: "at least 1",
            });
        }
        non_negative("cutoff", self.cutoff)?;
        non_negative("tol_to_truncation", self.tol_to_truncation)?;
        non_negative("e_tol_to_truncation", self.e_tol_to_truncation)?;
        non_negative("e_tol_to_energy_change", self.e_tol_to_energy_change)?;
        non_negative("mixer", self.mixer)?;
        self.lanczos.validate()
    }

    /// The Lanczos options of a step whose previous split discarded the
    /// relative weight `w` (`None` before the run's first split), in a
    /// sweep whose previous sweep's largest discarded weight was `w_sweep`
    /// (`None` in a run's first sweep: `w` stands in): the residual
    /// tolerance from `w` (`tol_to_truncation`), the energy-change
    /// tolerance from `w_sweep` (`e_tol_to_truncation`).
    pub fn step_lanczos(&self, w: Option<f64>, w_sweep: Option<f64>) -> LanczosOptions {
        self.step_lanczos_after(w, w_sweep, None)
    }

    /// As [`SweepParams::step_lanczos`], in a sweep after one whose energy
    /// changed by `de_step` per step (its `|dE|` over its `2 (L - 1)`
    /// steps; `None`: no such information, the rule of
    /// `e_tol_to_energy_change` adds nothing; `Some(f64::INFINITY)`: the
    /// change is unknown, after a run's first sweep): the energy-change
    /// tolerance is the largest of `lanczos.e_tol` and the two rules, each
    /// rule at most [`MAX_ADAPTIVE_E_TOL`].
    pub fn step_lanczos_after(&self, w: Option<f64>, w_sweep: Option<f64>, de_step: Option<f64>) -> LanczosOptions {
        let adaptive = w.map_or(0.0, |w| self.tol_to_truncation * w.max(0.0).sqrt());
        let e_adaptive = w_sweep.or(w).map_or(0.0, |w| self.e_tol_to_truncation * w.max(0.0));
        let e_sweeps = match de_step {
            Some(de) if self.e_tol_to_energy_change > 0.0 && !de.is_nan() => self.e_tol_to_energy_change * de.abs(),
            _ => 0.0,
        };
        LanczosOptions {
            tol: self.lanczos.tol.max(adaptive.min(MAX_ADAPTIVE_TOL)),
            e_tol: self
                .lanczos
                .e_tol
                .max(e_adaptive.min(MAX_ADAPTIVE_E_TOL))
                .max(e_sweeps.min(MAX_ADAPTIVE_E_TOL)),
            ..self.lanczos
        }
    }
}

/// The parameters of successive sweeps: sweep `k` (0-based, counted from
/// the start of the schedule) uses entry `k`; the schedule has as many
/// sweeps as entries.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SweepSchedule {
    sweeps: Vec<SweepParams>,
}

impl SweepSchedule {
    /// An empty schedule.
    pub fn new() -> SweepSchedule {
        SweepSchedule::default()
    }

    /// `n` sweeps with the same parameters.
    pub fn constant(params: SweepParams, n: usize) -> SweepSchedule {
        SweepSchedule {
            sweeps: vec![params; n],
        }
    }

    /// Appends one sweep.
    pub fn then(mut self, params: SweepParams) -> SweepSchedule {
        self.sweeps.push(params);
        self
    }

    /// One sweep per entry of `chi`, with that `chi_max` and the other
    /// fields of `base` (the usual ramp of the bond dimension).
    pub fn ramp_chi(base: SweepParams, chi: &[usize]) -> SweepSchedule {
        SweepSchedule {
            sweeps: chi.iter().map(|&c| SweepParams { chi_max: c, ..base }).collect(),
        }
    }

    /// The parameters of every sweep, in order.
    pub fn sweeps(&self) -> &[SweepParams] {
        &self.sweeps
    }

    /// Checks every entry ([`SweepParams::validate`]).
    ///
    /// # Errors
    /// The first entry's error.
    pub fn validate(&self) -> Result<(), TnError> {
        self.sweeps.iter().try_for_each(SweepParams::validate)
    }
}

/// Where a step of a sweep is, for progress reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StepInfo {
    /// Steps of this sweep done so far (1-based after the step).
    pub done: usize,
    /// Steps in a sweep: `2 (L - 1)`.
    pub total: usize,
    /// The left site of the bond just optimised.
    pub site: usize,
}

/// What one sweep measured.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SweepStats {
    /// Sweeps completed, this one included (1 for the first).
    pub sweep: u64,
    /// The energy of the sweep's last step (the bond `(0, 1)`): the
    /// eigenvalue for DMRG, `<theta|H|theta>` for TDVP.
    pub energy: f64,
    /// Change of `energy` from the previous sweep (`NaN` for the first
    /// sweep of a run that was not resumed).
    pub energy_change: f64,
    /// Largest relative discarded weight `sum discarded s^2 / sum s^2` of
    /// the sweep's splits.
    pub max_truncation: f64,
    /// Sum of the discarded weights of the sweep's splits (the truncation
    /// error of a TDVP time step).
    pub total_truncation: f64,
    /// Largest bond dimension after the sweep.
    pub max_bond: usize,
    /// Operator applications of all Krylov runs of the sweep (a dense
    /// solve counts none).
    pub lanczos_applications: usize,
    /// Steps solved densely on the root instead of by iterating
    /// ([`crate::LanczosOptions::dense_max`]).
    pub dense_steps: usize,
    /// Largest Krylov residual (error) estimate of the sweep.
    pub max_residual: f64,
    /// Steps whose Krylov solver stopped at `max_krylov` (and its restarts)
    /// with the residual still above its `tol`: their energy and state are
    /// not converged (raise `max_krylov` or `max_restarts`).
    pub unconverged_steps: usize,
    /// Wall time of the sweep, in seconds.
    pub seconds: f64,
    /// Of `seconds`: in the local solver (its operator applications, and
    /// whatever earlier deferred work they waited for).
    pub lanczos_seconds: f64,
    /// Of `seconds`: in the splits (assembly, factorisation, distribution).
    pub svd_seconds: f64,
}

/// One bond of a sweep, as the engine hands it to a [`LocalProblem`].
#[non_exhaustive]
pub struct LocalStep<'a> {
    /// The left site `i` of the bond `(i, i+1)`.
    pub bond: usize,
    /// The sweep's direction: the centre moves right after the step.
    pub to_right: bool,
    /// The two-site effective Hamiltonian of the bond.
    pub hamiltonian: &'a TwoSiteHamiltonian,
    /// The current two-site tensor `theta[a, s, t, c]` (norm 1).
    pub theta: &'a DistTensor,
    /// The eigensolver options for this step (the sweep's, with the
    /// adaptive tolerance applied).
    pub lanczos: LanczosOptions,
}

/// What a [`LocalProblem`] returns for a bond.
#[derive(Clone, Debug)]
pub struct LocalSolution {
    /// The new two-site tensor `theta[a, s, t, c]` (the engine splits it).
    pub theta: DistTensor,
    /// The energy (or other figure) to report for the step.
    pub energy: f64,
    /// Operator applications spent.
    pub applications: usize,
    /// Residual or error estimate of the solver.
    pub residual: f64,
    /// Whether the solver reached its tolerance.
    pub converged: bool,
    /// Whether the problem was solved densely on the root (no operator
    /// applications; counted in [`SweepStats::dense_steps`]).
    pub dense: bool,
}

/// The one-site effective Hamiltonian of site `i`:
/// `(H M)[a, s, b] = sum L[a, w, c] W_i[w, v, s, t] R[b, v, d] M[c, t, d]`
/// (the backward step of TDVP), applied matrix-free.
#[derive(Clone, Debug)]
pub struct OneSiteHamiltonian {
    left: DistTensor,
    w: DistTensor,
    right: DistTensor,
}

impl OneSiteHamiltonian {
    /// The operator of the environments `left`, `right` of site `i` and its
    /// MPO tensor `w`.
    pub fn new(left: &DistTensor, w: &DistTensor, right: &DistTensor) -> OneSiteHamiltonian {
        OneSiteHamiltonian {
            left: left.clone(),
            w: w.clone(),
            right: right.clone(),
        }
    }
}

impl LinearOperator for OneSiteHamiltonian {
    fn apply(&self, ctl: &Controller<'_>, m: &DistTensor) -> Result<DistTensor, TnError> {
        let t1 = contract(ctl, "awc,ctd->awtd", &self.left, m)?;
        let t2 = contract(ctl, "awtd,wvst->asvd", &t1, &self.w)?;
        Ok(contract(ctl, "asvd,bvd->asb", &t2, &self.right)?)
    }
}

/// What is solved at each bond of a sweep (module docs). Only `solve` is
/// required.
pub trait LocalProblem {
    /// The new two-site tensor of the bond `step.bond`.
    ///
    /// # Errors
    /// The errors of the solver and of the distributed operations.
    fn solve(&mut self, ctl: &Controller<'_>, step: &LocalStep<'_>) -> Result<LocalSolution, TnError>;

    /// After the split at `bond`: moving right, `site` is the new
    /// left-orthonormal tensor of site `bond`; moving left, the new
    /// right-orthonormal tensor of site `bond + 1` (for overlap
    /// environments of other states). The default does nothing.
    ///
    /// # Errors
    /// The errors of the distributed operations.
    fn moved(&mut self, ctl: &Controller<'_>, bond: usize, to_right: bool, site: &DistTensor) -> Result<(), TnError> {
        let _ = (ctl, bond, to_right, site);
        Ok(())
    }

    /// The new centre site `site` (not at the chain's end of the sweep's
    /// direction) with its one-site effective Hamiltonian, after the split:
    /// return a replacement (TDVP's backward evolution) or `None` to keep
    /// it (the default).
    ///
    /// # Errors
    /// The errors of the solver and of the distributed operations.
    fn centre(
        &mut self,
        ctl: &Controller<'_>,
        site: usize,
        hamiltonian: &OneSiteHamiltonian,
        centre: &DistTensor,
    ) -> Result<Option<CentreUpdate>, TnError> {
        let _ = (ctl, site, hamiltonian, centre);
        Ok(None)
    }
}

/// A replacement centre site from [`LocalProblem::centre`].
#[derive(Clone, Debug)]
pub struct CentreUpdate {
    /// The new centre tensor `M[a, s, b]`.
    pub tensor: DistTensor,
    /// Operator applications spent.
    pub applications: usize,
    /// Error estimate of the solver.
    pub residual: f64,
    /// Whether the solver reached its tolerance.
    pub converged: bool,
}

/// What an [`Observer`] decides after a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Go on with the next sweep of the schedule.
    Continue,
    /// Stop the run after this sweep.
    Stop,
}

/// Called after every sweep of a run with the sweep's statistics and the
/// state (centre on site 0): it may measure (every measurement of
/// [`crate::measure`] takes the state) and decides whether to go on.
pub trait Observer {
    /// Sees sweep `stats.sweep`.
    ///
    /// # Errors
    /// Whatever the observer's measurements return; the run stops with it.
    fn observe(&mut self, ctl: &Controller<'_>, stats: &SweepStats, mps: &Mps) -> Result<Control, TnError>;
}

/// Stops when the energy changes by less than `tol` over a sweep (and that
/// sweep's eigensolver steps all converged, when `require_converged`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnergyConvergence {
    /// Largest `|energy_change|` that counts as converged.
    pub tol: f64,
    /// Also require `unconverged_steps == 0`.
    pub require_converged: bool,
}

impl Observer for EnergyConvergence {
    fn observe(&mut self, _: &Controller<'_>, stats: &SweepStats, _: &Mps) -> Result<Control, TnError> {
        let ok = stats.energy_change.abs() < self.tol && (!self.require_converged || stats.unconverged_steps == 0);
        Ok(if ok { Control::Stop } else { Control::Continue })
    }
}

/// Any closure `FnMut(&SweepStats, &Mps) -> Control` is an observer.
impl<F: FnMut(&SweepStats, &Mps) -> Control> Observer for F {
    fn observe(&mut self, _: &Controller<'_>, stats: &SweepStats, mps: &Mps) -> Result<Control, TnError> {
        Ok(self(stats, mps))
    }
}

/// A bound on the environment bytes a [`SweepEngine`] keeps resident (see
/// the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvBudget {
    /// Most bytes of environment blocks kept resident, summed over the
    /// owner ranks (the blocks' payload bytes, [`uni20_dist::TensorMeta::block_bytes`]).
    /// The environments the next step needs are kept only if they fit: a
    /// budget below them makes every step load them from disk.
    pub bytes: u64,
    /// Load offloaded environments back ahead of the step that needs them.
    pub prefetch: bool,
}

/// The two-site sweep engine: the MPO, the MPS (right-canonical on sites
/// `1..L` between sweeps, centre on site 0) and the environments.
#[derive(Debug)]
pub struct SweepEngine {
    mpo: Mpo,
    mps: Mps,
    block: usize,
    matvec: Matvec,
    /// `left[i]`: sites `0..i` contracted (`left[0]` the boundary).
    left: Vec<Option<DistTensor>>,
    /// `right[i]`: sites `i+1..L` contracted (`right[L-1]` the boundary).
    right: Vec<Option<DistTensor>>,
    /// The environment budget, if any.
    budget: Option<EnvBudget>,
    /// `left_off[i]`: `left[i]` was offloaded and not fetched back since.
    left_off: Vec<bool>,
    /// `right_off[i]`: the same for `right[i]`.
    right_off: Vec<bool>,
    sweeps: u64,
    energy: Option<f64>,
    last_discarded: Option<f64>,
    /// The largest discarded weight of the last completed sweep.
    sweep_discarded: Option<f64>,
    /// `|dE|` of the last completed sweep (`INFINITY` after a run's first
    /// sweep, whose change is unknown; `None` before any sweep).
    sweep_energy_change: Option<f64>,
}

/// Per-sweep accumulators.
#[derive(Default)]
struct Acc {
    energy: f64,
    max_truncation: f64,
    total_truncation: f64,
    applications: usize,
    dense_steps: usize,
    max_residual: f64,
    unconverged: usize,
    lanczos_seconds: f64,
    svd_seconds: f64,
}

/// Payload bytes of `t`'s stored blocks.
fn tensor_bytes(t: &DistTensor) -> u64 {
    let m = t.meta();
    (0..m.stored_blocks()).map(|b| m.block_bytes(b)).sum()
}

fn env_at(envs: &[Option<DistTensor>], i: usize) -> Result<&DistTensor, TnError> {
    envs.get(i)
        .and_then(Option::as_ref)
        .ok_or(TnError::Internal("a step needs an environment the sweep has not built"))
}

/// The factors of a split: `(left site, centre-carrying right site)` moving
/// right or `(centre-carrying left site, right site)` moving left, and the
/// relative discarded weight.
struct Split {
    left: DistTensor,
    right: DistTensor,
    discarded: f64,
}

impl SweepEngine {
    /// An engine on `mps`, which must be right-normalised on sites `1..L`
    /// (as [`Mps::random`], [`Mps::product`], [`Mps::symmetric_random`] and
    /// a checkpoint give it); dense, or symmetric with a symmetric `mpo`
    /// ([`crate::conserve`]: the run stays in the MPS's sector);
    /// builds the right environments (deferred: returns before they are
    /// computed). New bonds are cut into blocks of `block`.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for a chain shorter than 2 sites or
    /// `block == 0`; [`TnError::Shape`] if the MPS and MPO differ in length
    /// or local dimension; the validation errors of the contractions.
    pub fn new(ctl: &Controller<'_>, mpo: Mpo, mps: Mps, block: usize, matvec: Matvec) -> Result<SweepEngine, TnError> {
        SweepEngine::with_env_budget(ctl, mpo, mps, block, matvec, None)
    }

    /// As [`SweepEngine::new`], keeping at most `budget` bytes of
    /// environments resident (module docs), from the first right
    /// environments it builds on.
    ///
    /// # Errors
    /// As [`SweepEngine::new`].
    pub fn with_env_budget(
        ctl: &Controller<'_>,
        mpo: Mpo,
        mps: Mps,
        block: usize,
        matvec: Matvec,
        budget: Option<EnvBudget>,
    ) -> Result<SweepEngine, TnError> {
        let n = mps.len();
        if n < 2 {
            return Err(TnError::InvalidOption {
                name: "sites",
                value: n.to_string(),
                expected: "at least 2 for a two-site sweep",
            });
        }
        if block == 0 {
            return Err(TnError::InvalidOption {
                name: "block",
                value: "0".into(),
                expected: "at least 1",
            });
        }
        let phys: Vec<usize> = (0..n).map(|i| mps.site(i).shape()[1]).collect();
        let mpo_phys: Vec<usize> = (0..mpo.len()).map(|i| mpo.phys_dim(i)).collect();
        if phys != mpo_phys {
            return Err(TnError::Shape {
                what: "local dimensions of the MPS sites vs the MPO sites".into(),
                expected: mpo_phys,
                got: phys,
            });
        }
        let mut e = SweepEngine {
            mpo,
            mps,
            block,
            matvec,
            left: vec![None; n],
            right: vec![None; n],
            budget,
            left_off: vec![false; n],
            right_off: vec![false; n],
            sweeps: 0,
            energy: None,
            last_discarded: None,
            sweep_discarded: None,
            sweep_energy_change: None,
        };
        // Dense or symmetric boundaries, as the MPS and MPO are (checked).
        e.left[0] = Some(crate::conserve::left_environment(ctl, &e.mpo, &e.mps, block)?);
        e.right[n - 1] = Some(crate::conserve::right_environment(ctl, &e.mpo, &e.mps, block)?);
        for i in (1..n - 1).rev() {
            let env = env_at(&e.right, i + 1)?;
            e.right[i] = Some(grow_right(ctl, env, &e.mpo.sites()[i + 1], e.mps.site(i + 1))?);
            // The newest environment is the nearest to bond 0, where the
            // first sweep starts: the window ends there.
            e.fit_envs(ctl, i - 1)?;
        }
        e.fit_envs(ctl, 0)?;
        Ok(e)
    }

    /// The environment budget, if any.
    pub fn env_budget(&self) -> Option<EnvBudget> {
        self.budget
    }

    /// Every environment the engine holds now: `(left environments,
    /// right environments)`, by site (`None` where none is kept).
    pub fn environments(&self) -> (&[Option<DistTensor>], &[Option<DistTensor>]) {
        (&self.left, &self.right)
    }

    /// Payload bytes of all the environments the engine holds now (from
    /// their metadata; no waiting).
    pub fn env_bytes(&self) -> u64 {
        self.left.iter().chain(&self.right).flatten().map(tensor_bytes).sum()
    }

    /// Applies the budget for a next step at bond `(j, j+1)`: the
    /// environments nearest it (`left[k]` at distance `|k - j|`, `right[k]`
    /// at `|k - j - 1|`) stay or come back within the budget, the others
    /// are offloaded. A no-op without a budget.
    fn fit_envs(&mut self, ctl: &Controller<'_>, j: usize) -> Result<(), TnError> {
        let Some(budget) = self.budget else {
            return Ok(());
        };
        // (distance, side, site): left first on ties (either is fine).
        let mut order: Vec<(usize, bool, usize)> = Vec::new();
        for (k, e) in self.left.iter().enumerate() {
            if e.is_some() {
                order.push((k.abs_diff(j), false, k));
            }
        }
        for (k, e) in self.right.iter().enumerate() {
            if e.is_some() {
                order.push((k.abs_diff(j + 1), true, k));
            }
        }
        order.sort_unstable();
        let mut kept = 0u64;
        for (dist, is_right, k) in order {
            let (envs, off) = if is_right {
                (&self.right, &mut self.right_off)
            } else {
                (&self.left, &mut self.left_off)
            };
            let Some(t) = envs[k].as_ref() else { continue };
            let bytes = tensor_bytes(t);
            if kept + bytes <= budget.bytes {
                kept += bytes;
                // Offloaded environments within the budget come back only
                // when the next step needs them (fetching the others early
                // would fill memory with what is not read yet). Without
                // prefetch the step loads them on demand; resident either way.
                if off[k] && dist == 0 {
                    if budget.prefetch {
                        prefetch(ctl, t)?;
                    }
                    off[k] = false;
                }
            } else {
                if !off[k] {
                    offload(ctl, t)?;
                }
                // Over budget yet needed next: the step loads it again, so
                // the next fit must offload it again.
                off[k] = dist != 0;
            }
        }
        Ok(())
    }

    /// The bond the step after the one at `i` (moving right if `to_right`)
    /// solves: the next one in the direction, or at a chain end the first
    /// of the way back (the next sweep starts at bond 0 again).
    fn next_bond(&self, i: usize, to_right: bool) -> usize {
        let n = self.mps.len();
        if to_right {
            (i + 1).min(n - 2)
        } else {
            i.saturating_sub(1)
        }
    }

    /// The current MPS (between sweeps: centre in site 0).
    pub fn mps(&self) -> &Mps {
        &self.mps
    }

    /// The MPO.
    pub fn mpo(&self) -> &Mpo {
        &self.mpo
    }

    /// Sweeps completed.
    pub fn sweeps(&self) -> u64 {
        self.sweeps
    }

    /// The energy of the last completed sweep, if any.
    pub fn energy(&self) -> Option<f64> {
        self.energy
    }

    /// The discarded weight of the last split (sets the next step's
    /// adaptive eigensolver tolerance).
    pub fn last_discarded(&self) -> Option<f64> {
        self.last_discarded
    }

    /// The largest discarded weight of the last completed sweep (sets the
    /// energy-change tolerance of the next sweep's steps).
    pub fn sweep_discarded(&self) -> Option<f64> {
        self.sweep_discarded
    }

    /// `|dE|` of the last completed sweep (sets the energy-change tolerance
    /// of the next sweep's steps with
    /// [`SweepParams::e_tol_to_energy_change`]): `INFINITY` after a run's
    /// first sweep, `None` before any.
    pub fn sweep_energy_change(&self) -> Option<f64> {
        self.sweep_energy_change
    }

    /// Continues the counts of an earlier run (a resumed checkpoint): the
    /// sweeps completed, its energy, its last discarded weight, the
    /// largest discarded weight of its last sweep and `|dE|` of its last
    /// sweep (as [`SweepEngine::sweep_energy_change`] returned it).
    pub fn set_history(
        &mut self,
        sweeps: u64,
        energy: Option<f64>,
        last_discarded: Option<f64>,
        sweep_discarded: Option<f64>,
        sweep_energy_change: Option<f64>,
    ) {
        self.sweeps = sweeps;
        self.energy = energy;
        self.last_discarded = last_discarded;
        self.sweep_discarded = sweep_discarded;
        self.sweep_energy_change = sweep_energy_change;
    }

    /// One full sweep (right, then left) solving `problem` at every bond
    /// with `params`, calling `progress` after each of its `2 (L - 1)`
    /// steps.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for bad `params`; the errors of the
    /// problem and of the distributed operations; a failed command is
    /// fail-stop ([`uni20_dist::DistError::Job`]) and leaves the engine
    /// unusable.
    pub fn sweep(
        &mut self,
        ctl: &Controller<'_>,
        problem: &mut dyn LocalProblem,
        params: &SweepParams,
        progress: &mut dyn FnMut(StepInfo),
    ) -> Result<SweepStats, TnError> {
        params.validate()?;
        let n = self.mps.len();
        let start = Instant::now();
        let mut acc = Acc::default();
        let total = 2 * (n - 1);
        let mut done = 0;
        for i in 0..n - 1 {
            self.step(ctl, problem, params, i, true, &mut acc)?;
            done += 1;
            progress(StepInfo { done, total, site: i });
        }
        for i in (0..n - 1).rev() {
            self.step(ctl, problem, params, i, false, &mut acc)?;
            done += 1;
            progress(StepInfo { done, total, site: i });
        }
        // The centre tensor is computed (it was a split factor's product):
        // the timing includes the sweep's deferred work.
        self.mps.site(0).wait(ctl)?;
        self.sweeps += 1;
        let energy = acc.energy;
        let energy_change = self.energy.map_or(f64::NAN, |e| energy - e);
        self.energy = Some(energy);
        self.sweep_discarded = Some(acc.max_truncation);
        self.sweep_energy_change = Some(if energy_change.is_nan() {
            f64::INFINITY
        } else {
            energy_change.abs()
        });
        Ok(SweepStats {
            sweep: self.sweeps,
            energy,
            energy_change,
            max_truncation: acc.max_truncation,
            total_truncation: acc.total_truncation,
            max_bond: self.mps.max_bond(),
            lanczos_applications: acc.applications,
            dense_steps: acc.dense_steps,
            max_residual: acc.max_residual,
            unconverged_steps: acc.unconverged,
            seconds: start.elapsed().as_secs_f64(),
            lanczos_seconds: acc.lanczos_seconds,
            svd_seconds: acc.svd_seconds,
        })
    }

    /// Sweeps by `schedule` (one sweep per entry), showing each sweep to
    /// `observer`, until the schedule ends or the observer stops the run.
    /// Returns the statistics of every sweep run.
    ///
    /// # Errors
    /// As [`SweepEngine::sweep`] and the observer's errors.
    pub fn run(
        &mut self,
        ctl: &Controller<'_>,
        problem: &mut dyn LocalProblem,
        schedule: &SweepSchedule,
        observer: &mut dyn Observer,
    ) -> Result<Vec<SweepStats>, TnError> {
        schedule.validate()?;
        let mut out = Vec::new();
        for params in schedule.sweeps() {
            let stats = self.sweep(ctl, problem, params, &mut |_| {})?;
            let control = observer.observe(ctl, &stats, &self.mps)?;
            out.push(stats);
            if control == Control::Stop {
                break;
            }
        }
        Ok(out)
    }

    /// Solves the bond `(i, i+1)` and moves the centre right (`to_right`)
    /// or left.
    fn step(
        &mut self,
        ctl: &Controller<'_>,
        problem: &mut dyn LocalProblem,
        params: &SweepParams,
        i: usize,
        to_right: bool,
        acc: &mut Acc,
    ) -> Result<(), TnError> {
        let n = self.mps.len();
        let w = self.mpo.sites();
        let h = TwoSiteHamiltonian::new(
            ctl,
            env_at(&self.left, i)?,
            &w[i],
            &w[i + 1],
            env_at(&self.right, i + 1)?,
            self.matvec,
        )?;
        let theta = contract(ctl, "asb,btc->astc", self.mps.site(i), self.mps.site(i + 1))?;
        let t0 = Instant::now();
        let sol = problem.solve(
            ctl,
            &LocalStep {
                bond: i,
                to_right,
                hamiltonian: &h,
                theta: &theta,
                lanczos: params.step_lanczos_after(
                    self.last_discarded,
                    self.sweep_discarded,
                    self.sweep_energy_change.map(|de| de / (2 * (n - 1)) as f64),
                ),
            },
        )?;
        acc.lanczos_seconds += t0.elapsed().as_secs_f64();
        drop(theta);
        // The fused `L W_i` (`W_(i+1) R`) grows the environment the centre
        // leaves in two contractions instead of three; the other side's
        // product is released now.
        let fused = h.into_fused(to_right);
        acc.energy = sol.energy;
        acc.applications += sol.applications;
        acc.dense_steps += usize::from(sol.dense);
        acc.max_residual = acc.max_residual.max(sol.residual);
        acc.unconverged += usize::from(!sol.converged);
        let t1 = Instant::now();
        let split = if params.mixer > 0.0 {
            self.mixed_split(ctl, &sol.theta, i, to_right, params)?
        } else {
            let f = split_two_site(ctl, &sol.theta, "as|tc", params.chi_max, params.cutoff, self.block)?;
            if to_right {
                Split {
                    right: contract(ctl, "kj,jtc->ktc", &f.s, &f.vh)?,
                    left: f.u,
                    discarded: f.discarded_weight,
                }
            } else {
                Split {
                    left: contract(ctl, "ask,kj->asj", &f.u, &f.s)?,
                    right: f.vh,
                    discarded: f.discarded_weight,
                }
            }
        };
        acc.svd_seconds += t1.elapsed().as_secs_f64();
        acc.max_truncation = acc.max_truncation.max(split.discarded);
        acc.total_truncation += split.discarded;
        self.last_discarded = Some(split.discarded);
        let Split { left, right, .. } = split;
        let (centre_site, mut centre) = if to_right {
            problem.moved(ctl, i, true, &left)?;
            self.left[i + 1] = Some(match &fused {
                Some(lw) => grow_left_fused(ctl, lw, &left)?,
                None => grow_left(ctl, env_at(&self.left, i)?, &w[i], &left)?,
            });
            self.left_off[i + 1] = false;
            self.mps.set_site(i, left);
            (i + 1, right)
        } else {
            problem.moved(ctl, i, false, &right)?;
            if i > 0 {
                self.right[i] = Some(match &fused {
                    Some(wr) => grow_right_fused(ctl, wr, &right)?,
                    None => grow_right(ctl, env_at(&self.right, i + 1)?, &w[i + 1], &right)?,
                });
                self.right_off[i] = false;
            }
            self.mps.set_site(i + 1, right);
            (i, left)
        };
        drop(fused);
        // The backward step (TDVP) on the new centre, except at the end of
        // the sweep's direction.
        if (to_right && centre_site < n - 1) || (!to_right && centre_site > 0) {
            let h1 = OneSiteHamiltonian::new(
                env_at(&self.left, centre_site)?,
                &w[centre_site],
                env_at(&self.right, centre_site)?,
            );
            let t0 = Instant::now();
            if let Some(u) = problem.centre(ctl, centre_site, &h1, &centre)? {
                centre = u.tensor;
                acc.applications += u.applications;
                acc.max_residual = acc.max_residual.max(u.residual);
                acc.unconverged += usize::from(!u.converged);
            }
            acc.lanczos_seconds += t0.elapsed().as_secs_f64();
        }
        self.mps.set_site(centre_site, centre);
        if to_right {
            if i + 1 < n - 1 {
                self.right[i + 1] = None;
            }
        } else if i > 0 {
            self.left[i + 1] = None;
        }
        let next = self.next_bond(i, to_right);
        self.fit_envs(ctl, next)
    }

    /// The density-matrix split with the mixer (module docs).
    fn mixed_split(
        &self,
        ctl: &Controller<'_>,
        theta: &DistTensor,
        i: usize,
        to_right: bool,
        params: &SweepParams,
    ) -> Result<Split, TnError> {
        let w = self.mpo.sites();
        let conj_second = ContractOptions {
            conj: [false, true],
            ..ContractOptions::default()
        };
        let alpha = params.mixer;
        // rho over the half the centre leaves: (a, s) moving right, (t, c) moving left.
        let rho = if to_right {
            let t1 = contract(ctl, "awc,ctud->awtud", env_at(&self.left, i)?, theta)?;
            let p = contract(ctl, "awtud,wvst->asvud", &t1, &w[i])?;
            let r0 = contract_with(ctl, "astc,xytc->asxy", theta, theta, &conj_second)?;
            let r1 = contract_with(ctl, "asvud,xyvud->asxy", &p, &p, &conj_second)?;
            axpby(ctl, 1.0, &r0, alpha, &r1, "asxy->asxy")?
        } else {
            let t1 = contract(ctl, "bxd,astd->bxast", env_at(&self.right, i + 1)?, theta)?;
            let q = contract(ctl, "bxast,vxut->asvub", &t1, &w[i + 1])?;
            let r0 = contract_with(ctl, "astc,asxy->tcxy", theta, theta, &conj_second)?;
            let r1 = contract_with(ctl, "asvub,asvxy->ubxy", &q, &q, &conj_second)?;
            axpby(ctl, 1.0, &r0, alpha, &r1, "tcxy->tcxy")?
        };
        let e = eigh(
            ctl,
            &rho,
            "ab|cd",
            &EighOptions {
                hermitian_rtol: Some(1e-10),
                k_block: Some(self.block),
                ..EighOptions::default()
            },
        )?;
        let total: f64 = e.values.iter().sum();
        let floor = params.cutoff * params.cutoff * total;
        let m = e.values.len();
        let k = e
            .values
            .iter()
            .rev()
            .take(params.chi_max)
            .take_while(|&&v| v > floor)
            .count()
            .max(1);
        // Columns m-1, m-2, .. m-k of the eigenvectors: the largest first.
        let mut sel = vec![0.0; m * k];
        for j in 0..k {
            sel[(m - 1 - j) * k + j] = 1.0;
        }
        let sel = DistTensor::from_local(ctl, &LocalTensor::from_f64(&[m, k], sel)?, self.block)?;
        let theta_norm = norm(ctl, theta)?;
        if to_right {
            let a = contract(ctl, "asn,nk->ask", &e.vectors, &sel)?;
            let c = contract_with(
                ctl,
                "ask,astc->ktc",
                &a,
                theta,
                &ContractOptions {
                    conj: [true, false],
                    ..ContractOptions::default()
                },
            )?;
            let kept = norm(ctl, &c)?;
            Ok(Split {
                left: a,
                right: scale(ctl, 1.0 / kept, &c)?,
                discarded: (1.0 - (kept / theta_norm).powi(2)).max(0.0),
            })
        } else {
            let v = contract(ctl, "tcn,nk->tck", &e.vectors, &sel)?;
            let c = contract(ctl, "astc,tck->ask", theta, &v)?;
            let kept = norm(ctl, &c)?;
            let vh = permute(ctl, &conj(ctl, &v)?, "tck->ktc")?;
            Ok(Split {
                left: scale(ctl, 1.0 / kept, &c)?,
                right: vh,
                discarded: (1.0 - (kept / theta_norm).powi(2)).max(0.0),
            })
        }
    }
}
