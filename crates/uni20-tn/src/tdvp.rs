//! Two-site TDVP ([`Tdvp`]) on the sweep engine: real time `exp(-i H t)`
//! or imaginary time `exp(-H tau)` for any MPO (long-range couplings
//! included, unlike TEBD).
//!
//! One step of `dt` is a right sweep then a left sweep of the
//! [`SweepEngine`], each of `dt / 2` (the symmetric, second-order
//! integrator of J. Haegeman, C. Lubich, I. Oseledets, B. Vandereycken and
//! F. Verstraete, Phys. Rev. B 94, 165116 (2016)): at every bond the
//! two-site tensor is evolved forward, `theta -> exp(-i H_2 dt/2) theta`,
//! by a Krylov exponential ([`krylov_exp`]), split by a truncated SVD, and
//! the new centre site evolved backward, `M -> exp(+i H_1 dt/2) M` with
//! the one-site effective Hamiltonian ([`LocalProblem::centre`]), except
//! at the last site of each half sweep. The truncation error of a step is
//! the sum of its discarded weights ([`TdvpStep::discarded_weight`]).
//! Imaginary-time steps renormalise the state (the splits keep norm 1).
//!
//! The state must be right-canonical with its centre on site 0 (as
//! [`Mps::random`], [`Mps::product`] and a DMRG after a full sweep leave
//! it); a step leaves it so again. A real-time step makes the state
//! complex.

use uni20_dispatch::C64;
use uni20_dist::DistTensor;
use uni20_worker::Controller;

use crate::env::Matvec;
use crate::error::TnError;
use crate::lanczos::{krylov_exp, LanczosOptions};
use crate::mpo::Mpo;
use crate::mps::Mps;
use crate::sweep::{
    CentreUpdate, LocalProblem, LocalSolution, LocalStep, OneSiteHamiltonian, SweepEngine, SweepParams,
};

/// Options of [`Tdvp`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TdvpOptions {
    /// Time step (finite, `> 0`).
    pub dt: f64,
    /// Imaginary time (`exp(-H dt)`, the state renormalised) instead of
    /// real time.
    pub imaginary: bool,
    /// Largest bond dimension kept (at least 1).
    pub chi_max: usize,
    /// Singular values at or below this are dropped (finite, `>= 0`).
    pub cutoff: f64,
    /// The Krylov exponential of every local step: at most `max_krylov`
    /// vectors, stopping when the error estimate is at most `tol`.
    /// Default 30 vectors, `1e-12`.
    pub krylov: LanczosOptions,
    /// Block extent of new bonds.
    pub block: usize,
    /// How the effective Hamiltonian is applied.
    pub matvec: Matvec,
}

impl Default for TdvpOptions {
    fn default() -> Self {
        TdvpOptions {
            dt: 0.05,
            imaginary: false,
            chi_max: 64,
            cutoff: 1e-12,
            krylov: LanczosOptions {
                max_krylov: 30,
                max_restarts: 0,
                tol: 1e-12,
                ..LanczosOptions::default()
            },
            block: 64,
            matvec: Matvec::default(),
        }
    }
}

impl TdvpOptions {
    /// Checks the ranges documented on the fields.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] naming the first field out of range.
    pub fn validate(&self) -> Result<(), TnError> {
        if !(self.dt.is_finite() && self.dt > 0.0) {
            return Err(TnError::InvalidOption {
                name: "dt",
                value: self.dt.to_string(),
                expected: "a finite number > 0",
            });
        }
        self.params().validate()
    }

    fn params(&self) -> SweepParams {
        SweepParams {
            chi_max: self.chi_max,
            cutoff: self.cutoff,
            lanczos: self.krylov,
            tol_to_truncation: 0.0,
            e_tol_to_truncation: 0.0,
            e_tol_to_energy_change: 0.0,
            mixer: 0.0,
        }
    }
}

/// What one [`Tdvp::step`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct TdvpStep {
    /// Time reached after the step.
    pub time: f64,
    /// Sum of the discarded weights of the step's splits (the truncation
    /// error).
    pub discarded_weight: f64,
    /// Largest discarded weight of the step's splits.
    pub max_discarded_weight: f64,
    /// Largest bond dimension after the step.
    pub max_bond: usize,
    /// `<H>` at the step's last bond (conserved by real-time TDVP up to the
    /// truncation).
    pub energy: f64,
    /// Operator applications of the step's Krylov exponentials.
    pub applications: usize,
    /// Largest Krylov error estimate of the step.
    pub max_krylov_error: f64,
    /// Krylov exponentials that stopped at `max_krylov` above `tol`.
    pub unconverged: usize,
}

/// The local problem of TDVP: forward two-site and backward one-site
/// Krylov exponentials of a half step.
struct Evolve {
    /// `-i dt/2` or `-dt/2`.
    tau: C64,
    imaginary: bool,
    krylov: LanczosOptions,
}

impl Evolve {
    fn normalised(&self, ctl: &Controller<'_>, x: DistTensor) -> Result<DistTensor, TnError> {
        if !self.imaginary {
            return Ok(x);
        }
        let n = uni20_dist::norm(ctl, &x)?;
        Ok(uni20_dist::scale(ctl, 1.0 / n, &x)?)
    }
}

impl LocalProblem for Evolve {
    fn solve(&mut self, ctl: &Controller<'_>, step: &LocalStep<'_>) -> Result<LocalSolution, TnError> {
        let r = krylov_exp(ctl, step.hamiltonian, step.theta, self.tau, &self.krylov)?;
        Ok(LocalSolution {
            theta: self.normalised(ctl, r.vector)?,
            energy: r.expectation,
            applications: r.applications,
            residual: r.error,
            converged: r.converged,
            dense: false,
        })
    }

    fn centre(
        &mut self,
        ctl: &Controller<'_>,
        _site: usize,
        hamiltonian: &OneSiteHamiltonian,
        centre: &DistTensor,
    ) -> Result<Option<CentreUpdate>, TnError> {
        let r = krylov_exp(ctl, hamiltonian, centre, -self.tau, &self.krylov)?;
        Ok(Some(CentreUpdate {
            tensor: self.normalised(ctl, r.vector)?,
            applications: r.applications,
            residual: r.error,
            converged: r.converged,
        }))
    }
}

/// A two-site TDVP integrator: the sweep engine on the evolving state.
#[derive(Debug)]
pub struct Tdvp {
    engine: SweepEngine,
    opts: TdvpOptions,
    time: f64,
}

impl Tdvp {
    /// An integrator of `mps` (right-canonical, centre on site 0) under
    /// `mpo`.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for bad options or a chain shorter than 2
    /// sites; as [`SweepEngine::new`].
    pub fn new(ctl: &Controller<'_>, mpo: Mpo, mps: Mps, opts: TdvpOptions) -> Result<Tdvp, TnError> {
        opts.validate()?;
        let engine = SweepEngine::new(ctl, mpo, mps, opts.block, opts.matvec)?;
        Ok(Tdvp {
            engine,
            opts,
            time: 0.0,
        })
    }

    /// The current state (centre on site 0).
    pub fn mps(&self) -> &Mps {
        self.engine.mps()
    }

    /// Time evolved so far (`dt` times the steps).
    pub fn time(&self) -> f64 {
        self.time
    }

    /// Changes the time step of the following steps (for example a
    /// coarse imaginary-time start followed by fine steps).
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for a `dt` that is not finite and
    /// positive (the step is not changed).
    pub fn set_dt(&mut self, dt: f64) -> Result<(), TnError> {
        let opts = TdvpOptions { dt, ..self.opts };
        opts.validate()?;
        self.opts = opts;
        Ok(())
    }

    /// One step of `dt` (a right and a left half sweep of `dt / 2`).
    ///
    /// # Errors
    /// The errors of the distributed operations; a failed command is
    /// fail-stop and leaves the integrator unusable.
    pub fn step(&mut self, ctl: &Controller<'_>) -> Result<TdvpStep, TnError> {
        let half = self.opts.dt / 2.0;
        let tau = if self.opts.imaginary {
            C64::new(-half, 0.0)
        } else {
            C64::new(0.0, -half)
        };
        let mut problem = Evolve {
            tau,
            imaginary: self.opts.imaginary,
            krylov: self.opts.krylov,
        };
        let s = self.engine.sweep(ctl, &mut problem, &self.opts.params(), &mut |_| {})?;
        self.time += self.opts.dt;
        Ok(TdvpStep {
            time: self.time,
            discarded_weight: s.total_truncation,
            max_discarded_weight: s.max_truncation,
            max_bond: s.max_bond,
            energy: s.energy,
            applications: s.lanczos_applications,
            max_krylov_error: s.max_residual,
            unconverged: s.unconverged_steps,
        })
    }
}
