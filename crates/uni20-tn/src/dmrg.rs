//! Finite two-site DMRG ([`Dmrg`]) on distributed tensors: S. R. White,
//! Phys. Rev. Lett. 69, 2863 (1992); the matrix-product formulation of
//! U. Schollwöck, Ann. Phys. 326, 96 (2011), section 6.
//!
//! The sweeps are those of the [`SweepEngine`] (`crate::sweep`): a sweep
//! goes right over the bonds `(0,1) .. (L-2,L-1)` and back left over
//! `(L-2,L-1) .. (0,1)`. The local problem of DMRG at each bond finds the
//! lowest eigenpair of the two-site effective Hamiltonian
//! ([`crate::TwoSiteHamiltonian`], with projectors onto lower states for
//! excited states: [`Dmrg::orthogonal_to`]) by [`lanczos_lowest`] started
//! from `theta`; the engine splits it by a truncated
//! [`uni20_dist::svd`] (`chi_max`, absolute cutoff on the normalised
//! singular values; or the density-matrix split of the mixer), keeps the
//! kept singular values normalised to one, and grows the environment on
//! the side it leaves, so at most `L + 1` environments live at any time
//! and memory does not grow with the number of sweeps. [`Dmrg::sweep`]
//! uses the run's [`DmrgOptions`]; [`Dmrg::sweep_with`] one entry of a
//! [`SweepSchedule`]; [`Dmrg::run`] a whole schedule with an
//! [`Observer`].
//!
//! Canonical form between sweeps: sites `1..L` right-normalised, the
//! orthogonality centre (and the norm) in site 0 — the form [`Dmrg::new`]
//! expects and the form a checkpoint stores, so a resumed run rebuilds its
//! right environments from the checkpointed sites and continues exactly as
//! the uninterrupted run would.

use uni20_dist::{checkpoint, retire, Checkpoint, DistTensor};
use uni20_persist::ObjectId;
use uni20_worker::Controller;

use crate::env::Matvec;
use crate::error::TnError;
use crate::excited::{Orthogonal, Projected};
use crate::lanczos::{lanczos_lowest, LanczosOptions};
use crate::mpo::Mpo;
use crate::mps::Mps;
#[cfg(test)]
use crate::sweep::MAX_ADAPTIVE_TOL;
use crate::sweep::{
    Control, LocalProblem, LocalSolution, LocalStep, Observer, StepInfo, SweepEngine, SweepParams, SweepSchedule,
    SweepStats,
};

/// Label prefix of the checkpoints that [`Dmrg::checkpoint`] writes.
pub const CHECKPOINT_LABEL: &str = "uni20-tn two-site dmrg v1";

/// Options of a [`Dmrg`] run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DmrgOptions {
    /// Largest bond dimension kept by each SVD (at least 1). Default 64.
    pub chi_max: usize,
    /// Singular values (of the normalised two-site tensor) at or below this
    /// are dropped, as TeNPy's `svd_min` (finite, `>= 0`). Default `1e-10`.
    pub cutoff: f64,
    /// The eigensolver of each step (its `tol` is the smallest residual
    /// tolerance; see `tol_to_truncation`).
    pub lanczos: LanczosOptions,
    /// Adaptive eigensolver tolerance: each step stops its Lanczos at the
    /// residual `max(lanczos.tol, tol_to_truncation * sqrt(w))`, at most
    /// [`MAX_ADAPTIVE_TOL`](crate::MAX_ADAPTIVE_TOL), where `w` is the discarded weight of the run's
    /// previous SVD (TeNPy's `P_tol_to_trunc`, stated for the residual). The
    /// residual `r` moves the energy by about `r^2 / gap`, so with the
    /// default `0.1` that is `0.01 w / gap`, below what the truncation itself
    /// costs, while far fewer operator applications are needed once the
    /// bond dimension saturates (L = 100, chi 100 Heisenberg: 772 instead of
    /// 1,801 per converged sweep, energy within 2e-11 of the fixed-tolerance
    /// run; `docs/performance.md`). `0` keeps `lanczos.tol` for every step.
    /// Finite, `>= 0`. Default `0.1`.
    pub tol_to_truncation: f64,
    /// Energy-change stop following the truncation: each step also stops
    /// its Lanczos once the lowest Ritz value changes by less than
    /// `max(lanczos.e_tol, e_tol_to_truncation * w)` over a step (after
    /// `lanczos.min_krylov` steps), at most
    /// [`MAX_ADAPTIVE_E_TOL`](crate::MAX_ADAPTIVE_E_TOL), where `w` is the
    /// largest discarded weight of the previous sweep (the energy the
    /// truncation itself costs is of the order of `w` times the energy
    /// scale, so a step need not be solved much below it). With the warm
    /// start (the previous step's two-site tensor) a converged sweep then
    /// stops most steps after two applications (L = 100, chi = 100
    /// Heisenberg: `docs/performance.md`). `0` keeps `lanczos.e_tol` (by
    /// default 0: the residual stop alone). Finite, `>= 0`. Default
    /// [`DEFAULT_E_TOL_TO_TRUNCATION`](crate::DEFAULT_E_TOL_TO_TRUNCATION).
    pub e_tol_to_truncation: f64,
    /// Energy-change stop following the sweeps' convergence: each step
    /// also stops its Lanczos once the lowest Ritz value changes by less
    /// than `e_tol_to_energy_change * |dE| / (2 (L - 1))` (at most
    /// [`MAX_ADAPTIVE_E_TOL`](crate::MAX_ADAPTIVE_E_TOL); after the run's
    /// first sweep, whose change is unknown, that largest value), where
    /// `dE` is the previous sweep's energy change, shared among its
    /// `2 (L - 1)` steps. A value much below 1 matters: a step that stops
    /// after `lanczos.min_krylov` applications improves its energy little,
    /// so a tolerance above a step's share of the change would stall the
    /// sweeps. Early sweeps, whose
    /// environments are far from converged and whose bonds are not yet
    /// truncated (so `e_tol_to_truncation` gives almost nothing), then do
    /// not solve each step far below what the next sweep changes anyway
    /// (L = 100, chi = 100 Heisenberg with Sz: sweeps 2 and 3 drop from
    /// about 7,000 and 6,300 to 3,000 and 1,800 applications with the
    /// default `1e-4`; `docs/performance.md`). Too large a factor makes the
    /// sweeps converge later: with `1e-2` the chi = 400 run needed 7 sweeps
    /// to come within 1e-8 of its final energy, with `1e-4` 5. Converged
    /// sweeps are not affected: there `|dE|` is far below the discarded
    /// weight, or the term is below the roundoff floor of the eigensolver
    /// ([`E_TOL_ROUNDOFF_ULPS`](crate::E_TOL_ROUNDOFF_ULPS)). `0` turns it
    /// off. Finite, `>= 0`. Default
    /// [`DEFAULT_E_TOL_TO_ENERGY_CHANGE`](crate::DEFAULT_E_TOL_TO_ENERGY_CHANGE).
    pub e_tol_to_energy_change: f64,
    /// Block extent of every mode of the distributed tensors, including
    /// new bonds (at least 1). Default 64.
    pub block: usize,
    /// How the effective Hamiltonian is applied.
    pub matvec: Matvec,
    /// Most bytes of environments kept resident, the others offloaded to
    /// their owners' disk stores and fetched back when needed
    /// ([`EnvBudget`](crate::EnvBudget), [`SweepEngine::with_env_budget`](crate::SweepEngine::with_env_budget)).
    /// `None` (the default): every environment stays in memory.
    pub env_budget: Option<crate::EnvBudget>,
}

impl Default for DmrgOptions {
    fn default() -> Self {
        DmrgOptions {
            chi_max: 64,
            cutoff: 1e-10,
            lanczos: LanczosOptions::default(),
            tol_to_truncation: 0.1,
            e_tol_to_truncation: crate::sweep::DEFAULT_E_TOL_TO_TRUNCATION,
            e_tol_to_energy_change: crate::sweep::DEFAULT_E_TOL_TO_ENERGY_CHANGE,
            block: 64,
            matvec: Matvec::default(),
            env_budget: None,
        }
    }
}

impl DmrgOptions {
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
        if self.block == 0 {
            return Err(TnError::InvalidOption {
                name: "block",
                value: "0".into(),
                expected: "at least 1",
            });
        }
        if !(self.cutoff.is_finite() && self.cutoff >= 0.0) {
            return Err(TnError::InvalidOption {
                name: "cutoff",
                value: self.cutoff.to_string(),
                expected: "a finite number >= 0",
            });
        }
        if !(self.tol_to_truncation.is_finite() && self.tol_to_truncation >= 0.0) {
            return Err(TnError::InvalidOption {
                name: "tol_to_truncation",
                value: self.tol_to_truncation.to_string(),
                expected: "a finite number >= 0",
            });
        }
        if !(self.e_tol_to_truncation.is_finite() && self.e_tol_to_truncation >= 0.0) {
            return Err(TnError::InvalidOption {
                name: "e_tol_to_truncation",
                value: self.e_tol_to_truncation.to_string(),
                expected: "a finite number >= 0",
            });
        }
        if !(self.e_tol_to_energy_change.is_finite() && self.e_tol_to_energy_change >= 0.0) {
            return Err(TnError::InvalidOption {
                name: "e_tol_to_energy_change",
                value: self.e_tol_to_energy_change.to_string(),
                expected: "a finite number >= 0",
            });
        }
        self.lanczos.validate()
    }

    /// The Lanczos options of a step whose previous SVD discarded the
    /// relative weight `w` (`None` before the run's first SVD), in a sweep
    /// after one whose largest discarded weight was `w_sweep`: see
    /// `tol_to_truncation`, `e_tol_to_truncation` and
    /// [`SweepParams::step_lanczos`].
    pub fn step_lanczos(&self, w: Option<f64>, w_sweep: Option<f64>) -> LanczosOptions {
        self.sweep_params().step_lanczos(w, w_sweep)
    }

    /// These options as the parameters of one sweep ([`SweepParams`], no
    /// mixer).
    pub fn sweep_params(&self) -> SweepParams {
        SweepParams {
            chi_max: self.chi_max,
            cutoff: self.cutoff,
            lanczos: self.lanczos,
            tol_to_truncation: self.tol_to_truncation,
            e_tol_to_truncation: self.e_tol_to_truncation,
            e_tol_to_energy_change: self.e_tol_to_energy_change,
            mixer: 0.0,
        }
    }
}

/// The truncation options a checkpoint of [`Dmrg::checkpoint`] was written
/// with: `(chi_max, cutoff)`, from its scalars 2 and 3. `None` for a
/// checkpoint written before they were recorded (two scalars), or one whose
/// values are not a valid `chi_max` (a whole number >= 1) and `cutoff`
/// (finite, >= 0).
///
/// [`Dmrg::resume`] takes its options from the caller, not from the
/// checkpoint: a resumed run may change them; this says whether it does.
pub fn checkpoint_truncation(cp: &Checkpoint) -> Option<(usize, f64)> {
    let (&chi, &cutoff) = (cp.scalars.get(2)?, cp.scalars.get(3)?);
    let chi_ok = chi.is_finite() && chi >= 1.0 && chi.fract() == 0.0 && chi <= usize::MAX as f64;
    (chi_ok && cutoff.is_finite() && cutoff >= 0.0).then_some((chi as usize, cutoff))
}

/// A two-site DMRG run: a [`SweepEngine`] (MPO, MPS, environments) and
/// the eigenvalue problem solved at each bond (see the module docs).
#[derive(Debug)]
pub struct Dmrg {
    engine: SweepEngine,
    opts: DmrgOptions,
    problem: LowestEigen,
    /// The truncation of the last sweep (recorded in checkpoints).
    last_params: SweepParams,
    /// The checkpoint this run wrote or resumed from last, retired when
    /// the next one is written.
    last_checkpoint: Option<Checkpoint>,
}

/// The local problem of DMRG: the lowest eigenpair of the two-site
/// effective Hamiltonian, or of `H + weight sum_k |phi_k><phi_k|` with
/// lower states to stay orthogonal to.
#[derive(Debug, Default)]
struct LowestEigen {
    orthogonal: Vec<Orthogonal>,
    weight: f64,
}

impl LocalProblem for LowestEigen {
    fn solve(&mut self, ctl: &Controller<'_>, step: &LocalStep<'_>) -> Result<LocalSolution, TnError> {
        let eig = if self.orthogonal.is_empty() {
            lanczos_lowest(ctl, step.hamiltonian, step.theta, &step.lanczos)?
        } else {
            let projectors = self
                .orthogonal
                .iter()
                .map(|o| o.projector(ctl, step.bond))
                .collect::<Result<_, _>>()?;
            let op = Projected {
                h: step.hamiltonian,
                projectors,
                weight: self.weight,
            };
            lanczos_lowest(ctl, &op, step.theta, &step.lanczos)?
        };
        Ok(LocalSolution {
            theta: eig.vector,
            energy: eig.value,
            applications: eig.applications,
            residual: eig.residual,
            converged: eig.converged,
            dense: eig.dense,
        })
    }

    fn moved(&mut self, ctl: &Controller<'_>, bond: usize, to_right: bool, site: &DistTensor) -> Result<(), TnError> {
        for o in &mut self.orthogonal {
            if to_right {
                o.moved_right(ctl, bond, site)?;
            } else {
                o.moved_left(ctl, bond, site)?;
            }
        }
        Ok(())
    }
}

impl Dmrg {
    /// A run from `mps`, which must be right-normalised on sites `1..L`
    /// (as [`Mps::random`], [`Mps::symmetric_random`] and a checkpoint give
    /// it); builds the right environments (deferred: returns before they
    /// are computed). A symmetric MPS and MPO ([`crate::conserve`]) make a
    /// run in the MPS's sector.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for bad options, a chain shorter than 2
    /// sites, or a dense MPS with a symmetric MPO or the reverse
    /// ([`crate::check_layouts`]); [`TnError::Shape`] if the MPS and MPO differ in length or
    /// local dimension; the validation errors of the contractions.
    pub fn new(ctl: &Controller<'_>, mpo: Mpo, mps: Mps, opts: DmrgOptions) -> Result<Dmrg, TnError> {
        opts.validate()?;
        if mps.len() < 2 {
            return Err(TnError::InvalidOption {
                name: "sites",
                value: mps.len().to_string(),
                expected: "at least 2 for two-site DMRG",
            });
        }
        let engine = SweepEngine::with_env_budget(ctl, mpo, mps, opts.block, opts.matvec, opts.env_budget)?;
        Ok(Dmrg {
            engine,
            opts,
            problem: LowestEigen::default(),
            last_params: opts.sweep_params(),
            last_checkpoint: None,
        })
    }

    /// Makes the run stay orthogonal to `states` (lower eigenstates found
    /// before, for example by earlier runs): every step then minimises
    /// `H + weight sum_k |phi_k><phi_k|`, whose lowest state is the lowest
    /// one orthogonal to all `phi_k` when `weight` is larger than the gap
    /// to them (ITensor's `weight`). Call it before the first sweep.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for a weight that is not finite and
    /// positive; [`TnError::Shape`] for a state of another length; the
    /// validation errors of the overlap contractions.
    pub fn orthogonal_to(mut self, ctl: &Controller<'_>, states: Vec<Mps>, weight: f64) -> Result<Dmrg, TnError> {
        if !(weight.is_finite() && weight > 0.0) {
            return Err(TnError::InvalidOption {
                name: "weight",
                value: weight.to_string(),
                expected: "finite and > 0 (larger than the gap to the lower states)",
            });
        }
        for phi in states {
            self.problem
                .orthogonal
                .push(Orthogonal::new(ctl, phi, self.engine.mps())?);
        }
        self.problem.weight = weight;
        Ok(self)
    }

    /// Resumes the run stored in `cp` (written by [`Dmrg::checkpoint`]):
    /// its MPS, sweep count and energy, with new `opts` (which may differ
    /// from those the checkpoint was written with: [`checkpoint_truncation`]
    /// tells).
    ///
    /// # Errors
    /// [`TnError::BadCheckpoint`] if `cp` is not a DMRG checkpoint of
    /// `mpo.len()` sites; as [`Mps::from_checkpoint`] and [`Dmrg::new`].
    pub fn resume(ctl: &Controller<'_>, mpo: Mpo, cp: Checkpoint, opts: DmrgOptions) -> Result<Dmrg, TnError> {
        if !cp.label.starts_with(CHECKPOINT_LABEL) {
            return Err(TnError::BadCheckpoint(format!(
                "its label is {:?}, not a DMRG checkpoint ({CHECKPOINT_LABEL:?})",
                cp.label
            )));
        }
        let energy = *cp
            .scalars
            .first()
            .ok_or_else(|| TnError::BadCheckpoint("the energy scalar is missing".into()))?;
        let mps = Mps::from_checkpoint(ctl, &cp, mpo.len())?;
        let mut d = Dmrg::new(ctl, mpo, mps, opts)?;
        // Checkpoints written before the adaptive tolerance have no second
        // scalar: the first step then uses `lanczos.tol`.
        let last_discarded = cp.scalars.get(1).copied().filter(|w| w.is_finite());
        // Scalar 4 (the last sweep's largest discarded weight) is absent in
        // checkpoints written before the energy-change stop.
        let sweep_discarded = cp.scalars.get(4).copied().filter(|w| w.is_finite());
        // Scalar 5 (the last sweep's |dE|, INFINITY after a first sweep) is
        // absent in checkpoints written before the rule of
        // `e_tol_to_energy_change`, which then adds nothing.
        let sweep_energy_change = cp.scalars.get(5).copied().filter(|de| !de.is_nan());
        d.engine.set_history(
            cp.step,
            Some(energy),
            last_discarded,
            sweep_discarded,
            sweep_energy_change,
        );
        d.last_checkpoint = Some(cp);
        Ok(d)
    }

    /// The current MPS (between sweeps: centre in site 0).
    pub fn mps(&self) -> &Mps {
        self.engine.mps()
    }

    /// The sweep engine (MPO, MPS and environments) of the run.
    pub fn engine(&self) -> &SweepEngine {
        &self.engine
    }

    /// Sweeps completed (including those of the run a checkpoint came from).
    pub fn sweeps(&self) -> u64 {
        self.engine.sweeps()
    }

    /// The energy of the last completed sweep, if any.
    pub fn energy(&self) -> Option<f64> {
        self.engine.energy()
    }

    /// One full sweep (right, then left) with the run's options, calling
    /// `progress` after each of its `2 (L - 1)` steps.
    ///
    /// # Errors
    /// The errors of the distributed operations and of the eigensolver; a
    /// failed command is fail-stop ([`uni20_dist::DistError::Job`]) and
    /// leaves the run unusable.
    pub fn sweep(&mut self, ctl: &Controller<'_>, progress: &mut dyn FnMut(StepInfo)) -> Result<SweepStats, TnError> {
        let params = self.opts.sweep_params();
        self.sweep_with(ctl, &params, progress)
    }

    /// One full sweep with `params` instead of the run's options (one entry
    /// of a [`SweepSchedule`]: truncation, eigensolver tolerance, mixer).
    ///
    /// # Errors
    /// As [`Dmrg::sweep`]; [`TnError::InvalidOption`] for bad `params`.
    pub fn sweep_with(
        &mut self,
        ctl: &Controller<'_>,
        params: &SweepParams,
        progress: &mut dyn FnMut(StepInfo),
    ) -> Result<SweepStats, TnError> {
        let stats = self.engine.sweep(ctl, &mut self.problem, params, progress)?;
        self.last_params = *params;
        Ok(stats)
    }

    /// Sweeps by `schedule`, showing every sweep to `observer` (which may
    /// measure and stop the run, as [`crate::EnergyConvergence`] does);
    /// returns the statistics of the sweeps run.
    ///
    /// # Errors
    /// As [`Dmrg::sweep_with`] and the observer's errors.
    pub fn run(
        &mut self,
        ctl: &Controller<'_>,
        schedule: &SweepSchedule,
        observer: &mut dyn Observer,
    ) -> Result<Vec<SweepStats>, TnError> {
        schedule.validate()?;
        let mut out = Vec::new();
        for params in schedule.sweeps() {
            let stats = self.sweep_with(ctl, params, &mut |_| {})?;
            let control = observer.observe(ctl, &stats, self.engine.mps())?;
            out.push(stats);
            if control == Control::Stop {
                break;
            }
        }
        Ok(out)
    }

    /// Writes the current MPS, sweep count, energy, last discarded weight
    /// and truncation options (scalars 0-4: energy, discarded weight,
    /// `chi_max`, `cutoff` of the last sweep, see [`checkpoint_truncation`];
    /// the last sweep's largest discarded weight; scalar 5: the last
    /// sweep's `|dE|`, see [`SweepEngine::sweep_energy_change`])
    /// as a checkpoint ([`uni20_dist::checkpoint`]: every rank's store
    /// flushed, the manifest committed and named as the root `checkpoint`),
    /// then retires the previous checkpoint of this run
    /// ([`uni20_dist::retire`]), so only the latest one keeps its blocks.
    /// Returns the id that [`uni20_dist::restore`] and [`Dmrg::resume`]
    /// take.
    ///
    /// # Errors
    /// The errors of [`uni20_dist::checkpoint`] (a rank that cannot flush).
    pub fn checkpoint(&mut self, ctl: &Controller<'_>) -> Result<ObjectId, TnError> {
        let mps = self.engine.mps();
        let mut cp = Checkpoint {
            label: format!(
                "{CHECKPOINT_LABEL} L={} chi_max={} cutoff={:e}",
                mps.len(),
                self.last_params.chi_max,
                self.last_params.cutoff
            ),
            step: self.engine.sweeps(),
            scalars: vec![
                self.engine.energy().unwrap_or(f64::NAN),
                self.engine.last_discarded().unwrap_or(f64::NAN),
                self.last_params.chi_max as f64,
                self.last_params.cutoff,
                self.engine.sweep_discarded().unwrap_or(f64::NAN),
                self.engine.sweep_energy_change().unwrap_or(f64::NAN),
            ],
            tensors: Vec::new(),
        };
        mps.add_to_checkpoint(ctl, &mut cp)?;
        let p = checkpoint(ctl, &cp)?;
        if let Some(old) = self.last_checkpoint.replace(cp) {
            retire(ctl, &old);
        }
        Ok(p.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_tolerance_follows_the_discarded_weight() {
        let opts = DmrgOptions::default();
        let tol = |w| opts.step_lanczos(w, None).tol;
        assert_eq!(tol(None), 1e-8);
        assert_eq!(tol(Some(0.0)), 1e-8);
        assert!((tol(Some(1e-10)) - 1e-6).abs() < 1e-18);
        assert_eq!(tol(Some(1e-20)), 1e-8);
        assert_eq!(tol(Some(0.5)), MAX_ADAPTIVE_TOL);
        let fixed = DmrgOptions {
            tol_to_truncation: 0.0,
            ..opts
        };
        assert_eq!(fixed.step_lanczos(Some(1e-4), None).tol, 1e-8);
        assert_eq!(fixed.step_lanczos(Some(1e-4), None).max_krylov, opts.lanczos.max_krylov);
    }

    #[test]
    fn step_energy_tolerance_follows_the_sweeps_energy_change() {
        let p = DmrgOptions::default().sweep_params();
        let c = p.e_tol_to_energy_change;
        assert!(c > 0.0 && c < 1.0);
        let e_tol = |de| p.step_lanczos_after(Some(0.0), Some(0.0), de).e_tol;
        // No sweep yet: nothing from this rule (and nothing from the truncation).
        assert_eq!(e_tol(None), 0.0);
        // After a first sweep (change unknown): the loosest value.
        assert_eq!(e_tol(Some(f64::INFINITY)), crate::MAX_ADAPTIVE_E_TOL);
        // A large change per step: capped; a small one: `c` times it.
        assert_eq!(e_tol(Some(1.0)), crate::MAX_ADAPTIVE_E_TOL);
        assert!((e_tol(Some(1e-9)) - c * 1e-9).abs() < 1e-24);
        // The larger of this rule and the truncation's.
        // (w_sweep 1e-8: below the cap with the default factor 10.)
        let both = p.step_lanczos_after(Some(0.0), Some(1e-8), Some(1e-9)).e_tol;
        assert!(p.e_tol_to_truncation * 1e-8 < crate::MAX_ADAPTIVE_E_TOL);
        assert!((both - p.e_tol_to_truncation * 1e-8).abs() < 1e-22);
        // Off (0 * INFINITY must not turn into a tolerance).
        let off = SweepParams {
            e_tol_to_energy_change: 0.0,
            ..p
        };
        assert_eq!(
            off.step_lanczos_after(Some(0.0), Some(0.0), Some(f64::INFINITY)).e_tol,
            0.0
        );
        // `step_lanczos` is the rule without the sweeps' energy change.
        assert_eq!(p.step_lanczos(Some(0.0), Some(0.0)).e_tol, 0.0);
    }

    #[test]
    fn step_energy_tolerance_follows_the_previous_sweep() {
        let opts = DmrgOptions::default();
        let e_tol = |w, ws| opts.step_lanczos(w, ws).e_tol;
        let c = opts.e_tol_to_truncation;
        assert!(c > 0.0);
        // No truncation yet: the floor (off by default).
        assert_eq!(e_tol(None, None), 0.0);
        assert_eq!(e_tol(Some(0.0), Some(0.0)), 0.0);
        // The previous sweep's largest weight wins over the last split's.
        assert!((e_tol(Some(0.0), Some(1e-9)) - c * 1e-9).abs() < 1e-22);
        assert!((e_tol(Some(1e-12), Some(1e-9)) - c * 1e-9).abs() < 1e-22);
        // The first sweep: the last split's weight stands in.
        assert!((e_tol(Some(1e-9), None) - c * 1e-9).abs() < 1e-22);
        assert_eq!(e_tol(Some(0.5), Some(0.5)), crate::MAX_ADAPTIVE_E_TOL);
        let floor = DmrgOptions {
            lanczos: LanczosOptions {
                e_tol: 1e-12,
                ..LanczosOptions::default()
            },
            e_tol_to_truncation: 0.0,
            ..opts
        };
        assert_eq!(floor.step_lanczos(Some(1e-4), Some(1e-4)).e_tol, 1e-12);
        // The residual tolerance is unchanged by the sweep's weight.
        assert_eq!(
            opts.step_lanczos(Some(1e-10), Some(1e-4)).tol,
            opts.step_lanczos(Some(1e-10), None).tol
        );
    }

    #[test]
    fn checkpoint_truncation_reads_scalars_2_and_3() {
        let cp = |scalars: Vec<f64>| Checkpoint {
            scalars,
            ..Checkpoint::default()
        };
        assert_eq!(
            checkpoint_truncation(&cp(vec![-1.0, 1e-9, 16.0, 1e-8])),
            Some((16, 1e-8))
        );
        // Written before the options were recorded.
        assert_eq!(checkpoint_truncation(&cp(vec![-1.0, 1e-9])), None);
        assert_eq!(checkpoint_truncation(&cp(vec![-1.0])), None);
        for bad in [
            vec![0.0, 0.0, 0.0, 1e-8],
            vec![0.0, 0.0, 2.5, 1e-8],
            vec![0.0, 0.0, 8.0, f64::NAN],
        ] {
            assert_eq!(checkpoint_truncation(&cp(bad.clone())), None, "{bad:?}");
        }
    }
}
