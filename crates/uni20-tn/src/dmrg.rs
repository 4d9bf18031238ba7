//! Finite two-site DMRG ([`Dmrg`]) on distributed tensors: S. R. White,
//! Phys. Rev. Lett. 69, 2863 (1992); the matrix-product formulation of
//! U. Schollwöck, Ann. Phys. 326, 96 (2011), section 6.
//!
//! A sweep goes right over the bonds `(0,1) .. (L-2,L-1)` and back left
//! over `(L-2,L-1) .. (0,1)`. Each step contracts the two site tensors into
//! `theta[a, s, t, b]`, finds the lowest eigenpair of the two-site effective
//! Hamiltonian ([`TwoSiteHamiltonian`]) by [`lanczos_lowest`] started from
//! `theta`, splits it by a truncated [`svd`] (`chi_max`, absolute cutoff on
//! the normalised singular values), keeps the kept singular values
//! normalised to one, and grows the environment on the side it leaves. The
//! environment on the side it moves into is dropped at once (it no longer
//! matches the state), so at most `L + 1` environments live at any time and
//! memory does not grow with the number of sweeps.
//!
//! Canonical form between sweeps: sites `1..L` right-normalised, the
//! orthogonality centre (and the norm) in site 0 — the form [`Dmrg::new`]
//! expects and the form a checkpoint stores, so a resumed run rebuilds its
//! right environments from the checkpointed sites and continues exactly as
//! the uninterrupted run would.

use std::time::Instant;

use uni20_dist::{checkpoint, contract, retire, Checkpoint, DistTensor};
use uni20_persist::ObjectId;
use uni20_worker::Controller;

use crate::env::{grow_left, grow_right, Matvec, TwoSiteHamiltonian};
use crate::error::TnError;
use crate::excited::{Orthogonal, Projected};
use crate::lanczos::{lanczos_lowest, LanczosOptions};
use crate::mpo::Mpo;
use crate::mps::Mps;
use crate::split::split_two_site;

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
    /// [`MAX_ADAPTIVE_TOL`], where `w` is the discarded weight of the run's
    /// previous SVD (TeNPy's `P_tol_to_trunc`, stated for the residual). The
    /// residual `r` moves the energy by about `r^2 / gap`, so with the
    /// default `0.1` that is `0.01 w / gap`, below what the truncation itself
    /// costs, while far fewer operator applications are needed once the
    /// bond dimension saturates (L = 100, chi 100 Heisenberg: 772 instead of
    /// 1,801 per converged sweep, energy within 2e-11 of the fixed-tolerance
    /// run; `docs/performance.md`). `0` keeps `lanczos.tol` for every step.
    /// Finite, `>= 0`. Default `0.1`.
    pub tol_to_truncation: f64,
    /// Block extent of every mode of the distributed tensors, including
    /// new bonds (at least 1). Default 64.
    pub block: usize,
    /// How the effective Hamiltonian is applied.
    pub matvec: Matvec,
}

impl Default for DmrgOptions {
    fn default() -> Self {
        DmrgOptions {
            chi_max: 64,
            cutoff: 1e-10,
            lanczos: LanczosOptions::default(),
            tol_to_truncation: 0.1,
            block: 64,
            matvec: Matvec::default(),
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
        self.lanczos.validate()
    }

    /// The Lanczos options of a step whose previous SVD discarded the
    /// relative weight `w` (`None` before the run's first SVD): see
    /// `tol_to_truncation`.
    pub fn step_lanczos(&self, w: Option<f64>) -> LanczosOptions {
        let adaptive = w.map_or(0.0, |w| self.tol_to_truncation * w.max(0.0).sqrt());
        LanczosOptions {
            tol: self.lanczos.tol.max(adaptive.min(MAX_ADAPTIVE_TOL)),
            ..self.lanczos
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

/// Largest residual tolerance the adaptive rule of
/// [`DmrgOptions::tol_to_truncation`] gives (early sweeps, where the
/// discarded weights are large): `1e-4`.
pub const MAX_ADAPTIVE_TOL: f64 = 1e-4;

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
    /// The energy of the sweep's last step (the bond `(0, 1)`).
    pub energy: f64,
    /// Change of `energy` from the previous sweep (`NaN` for the first
    /// sweep of a run that was not resumed).
    pub energy_change: f64,
    /// Largest relative discarded weight `sum discarded s^2 / sum s^2` of
    /// the sweep's SVDs.
    pub max_truncation: f64,
    /// Largest bond dimension after the sweep.
    pub max_bond: usize,
    /// Operator applications of all Lanczos runs of the sweep.
    pub lanczos_applications: usize,
    /// Largest Lanczos residual estimate of the sweep.
    pub max_residual: f64,
    /// Steps whose eigensolver stopped at `max_krylov` (and its restarts)
    /// with the residual still above its `tol`: their energy and state are
    /// not converged (raise `max_krylov` or `max_restarts`).
    pub unconverged_steps: usize,
    /// Wall time of the sweep, in seconds.
    pub seconds: f64,
    /// Of `seconds`: in the eigensolver (its operator applications, and
    /// whatever earlier deferred work they waited for).
    pub lanczos_seconds: f64,
    /// Of `seconds`: in the SVDs (assembly, factorisation, distribution).
    pub svd_seconds: f64,
}

/// A two-site DMRG run: the MPO, the MPS being optimised and the
/// environments (see the module docs).
#[derive(Debug)]
pub struct Dmrg {
    mpo: Mpo,
    mps: Mps,
    opts: DmrgOptions,
    /// `left[i]`: sites `0..i` contracted (`left[0]` the boundary).
    left: Vec<Option<DistTensor>>,
    /// `right[i]`: sites `i+1..L` contracted (`right[L-1]` the boundary).
    right: Vec<Option<DistTensor>>,
    sweeps: u64,
    energy: Option<f64>,
    /// The checkpoint this run wrote or resumed from last, retired when
    /// the next one is written.
    last_checkpoint: Option<Checkpoint>,
    /// Discarded weight of the run's last SVD (sets the next step's
    /// eigensolver tolerance; checkpointed, so a resumed run continues with
    /// the same tolerances).
    last_discarded: Option<f64>,
    /// Lower states the run stays orthogonal to, with their overlap
    /// environments, and the weight of their projectors.
    orthogonal: Vec<Orthogonal>,
    weight: f64,
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
        let n = mps.len();
        if n < 2 {
            return Err(TnError::InvalidOption {
                name: "sites",
                value: n.to_string(),
                expected: "at least 2 for two-site DMRG",
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
        let mut left = vec![None; n];
        let mut right = vec![None; n];
        // Dense or symmetric boundaries, as the MPS and MPO are (checked).
        left[0] = Some(crate::conserve::left_environment(ctl, &mpo, &mps, opts.block)?);
        right[n - 1] = Some(crate::conserve::right_environment(ctl, &mpo, &mps, opts.block)?);
        for i in (1..n - 1).rev() {
            let env = env_at(&right, i + 1)?;
            right[i] = Some(grow_right(ctl, env, &mpo.sites()[i + 1], mps.site(i + 1))?);
        }
        Ok(Dmrg {
            mpo,
            mps,
            opts,
            left,
            right,
            sweeps: 0,
            energy: None,
            last_checkpoint: None,
            last_discarded: None,
            orthogonal: Vec::new(),
            weight: 0.0,
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
            self.orthogonal.push(Orthogonal::new(ctl, phi, &self.mps)?);
        }
        self.weight = weight;
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
        d.sweeps = cp.step;
        d.energy = Some(energy);
        // Checkpoints written before the adaptive tolerance have no second
        // scalar: the first step then uses `lanczos.tol`.
        d.last_discarded = cp.scalars.get(1).copied().filter(|w| w.is_finite());
        d.last_checkpoint = Some(cp);
        Ok(d)
    }

    /// The current MPS (between sweeps: centre in site 0).
    pub fn mps(&self) -> &Mps {
        &self.mps
    }

    /// Sweeps completed (including those of the run a checkpoint came from).
    pub fn sweeps(&self) -> u64 {
        self.sweeps
    }

    /// The energy of the last completed sweep, if any.
    pub fn energy(&self) -> Option<f64> {
        self.energy
    }

    /// One full sweep (right, then left), calling `progress` after each of
    /// its `2 (L - 1)` steps.
    ///
    /// # Errors
    /// The errors of the distributed operations and of the eigensolver; a
    /// failed command is fail-stop ([`uni20_dist::DistError::Job`]) and
    /// leaves the run unusable.
    pub fn sweep(&mut self, ctl: &Controller<'_>, progress: &mut dyn FnMut(StepInfo)) -> Result<SweepStats, TnError> {
        let n = self.mps.len();
        let start = Instant::now();
        let mut acc = Acc::default();
        let total = 2 * (n - 1);
        let mut done = 0;
        for i in 0..n - 1 {
            self.step(ctl, i, true, &mut acc)?;
            done += 1;
            progress(StepInfo { done, total, site: i });
        }
        for i in (0..n - 1).rev() {
            self.step(ctl, i, false, &mut acc)?;
            done += 1;
            progress(StepInfo { done, total, site: i });
        }
        // The centre tensor is computed (it was an SVD factor's product):
        // the timing includes the sweep's deferred work.
        self.mps.site(0).wait(ctl)?;
        self.sweeps += 1;
        let energy = acc.energy;
        let energy_change = self.energy.map_or(f64::NAN, |e| energy - e);
        self.energy = Some(energy);
        Ok(SweepStats {
            sweep: self.sweeps,
            energy,
            energy_change,
            max_truncation: acc.max_truncation,
            max_bond: self.mps.max_bond(),
            lanczos_applications: acc.applications,
            max_residual: acc.max_residual,
            unconverged_steps: acc.unconverged,
            seconds: start.elapsed().as_secs_f64(),
            lanczos_seconds: acc.lanczos_seconds,
            svd_seconds: acc.svd_seconds,
        })
    }

    /// Optimises the bond `(i, i+1)` and moves the centre right
    /// (`to_right`) or left.
    fn step(&mut self, ctl: &Controller<'_>, i: usize, to_right: bool, acc: &mut Acc) -> Result<(), TnError> {
        let n = self.mps.len();
        let w = self.mpo.sites();
        let h = TwoSiteHamiltonian::new(
            ctl,
            env_at(&self.left, i)?,
            &w[i],
            &w[i + 1],
            env_at(&self.right, i + 1)?,
            self.opts.matvec,
        )?;
        let theta = contract(ctl, "asb,btc->astc", self.mps.site(i), self.mps.site(i + 1))?;
        let t0 = Instant::now();
        let lopts = self.opts.step_lanczos(self.last_discarded);
        let eig = if self.orthogonal.is_empty() {
            lanczos_lowest(ctl, &h, &theta, &lopts)?
        } else {
            let projectors = self
                .orthogonal
                .iter()
                .map(|o| o.projector(ctl, i))
                .collect::<Result<_, _>>()?;
            let op = Projected {
                h: &h,
                projectors,
                weight: self.weight,
            };
            lanczos_lowest(ctl, &op, &theta, &lopts)?
        };
        acc.lanczos_seconds += t0.elapsed().as_secs_f64();
        drop((h, theta));
        acc.energy = eig.value;
        acc.applications += eig.applications;
        acc.max_residual = acc.max_residual.max(eig.residual);
        acc.unconverged += usize::from(!eig.converged);
        let t1 = Instant::now();
        let f = split_two_site(
            ctl,
            &eig.vector,
            "as|tc",
            self.opts.chi_max,
            self.opts.cutoff,
            self.opts.block,
        )?;
        acc.svd_seconds += t1.elapsed().as_secs_f64();
        acc.max_truncation = acc.max_truncation.max(f.discarded_weight);
        self.last_discarded = Some(f.discarded_weight);
        // Renormalised singular values: the state keeps norm 1.
        let s_diag = f.s;
        for o in &mut self.orthogonal {
            if to_right {
                o.moved_right(ctl, i, &f.u)?;
            } else {
                o.moved_left(ctl, i, &f.vh)?;
            }
        }
        if to_right {
            let right_site = contract(ctl, "kj,jtc->ktc", &s_diag, &f.vh)?;
            self.left[i + 1] = Some(grow_left(ctl, env_at(&self.left, i)?, &w[i], &f.u)?);
            self.mps.set_site(i, f.u);
            self.mps.set_site(i + 1, right_site);
            if i + 1 < n - 1 {
                self.right[i + 1] = None;
            }
        } else {
            let left_site = contract(ctl, "ask,kj->asj", &f.u, &s_diag)?;
            if i > 0 {
                self.right[i] = Some(grow_right(ctl, env_at(&self.right, i + 1)?, &w[i + 1], &f.vh)?);
                self.left[i + 1] = None;
            }
            self.mps.set_site(i, left_site);
            self.mps.set_site(i + 1, f.vh);
        }
        Ok(())
    }

    /// Writes the current MPS, sweep count, energy, last discarded weight
    /// and truncation options (scalars 0-3: energy, discarded weight,
    /// `chi_max`, `cutoff`; see [`checkpoint_truncation`]) as a checkpoint
    /// ([`uni20_dist::checkpoint`]: every rank's store flushed, the
    /// manifest committed and named as the root `checkpoint`), then retires
    /// the previous checkpoint of this run ([`uni20_dist::retire`]), so only
    /// the latest one keeps its blocks. Returns the id that
    /// [`uni20_dist::restore`] and [`Dmrg::resume`] take.
    ///
    /// # Errors
    /// The errors of [`uni20_dist::checkpoint`] (a rank that cannot flush).
    pub fn checkpoint(&mut self, ctl: &Controller<'_>) -> Result<ObjectId, TnError> {
        let mut cp = Checkpoint {
            label: format!(
                "{CHECKPOINT_LABEL} L={} chi_max={} cutoff={:e}",
                self.mps.len(),
                self.opts.chi_max,
                self.opts.cutoff
            ),
            step: self.sweeps,
            scalars: vec![
                self.energy.unwrap_or(f64::NAN),
                self.last_discarded.unwrap_or(f64::NAN),
                self.opts.chi_max as f64,
                self.opts.cutoff,
            ],
            tensors: Vec::new(),
        };
        self.mps.add_to_checkpoint(ctl, &mut cp)?;
        let p = checkpoint(ctl, &cp)?;
        if let Some(old) = self.last_checkpoint.replace(cp) {
            retire(ctl, &old);
        }
        Ok(p.id())
    }
}

/// Per-sweep accumulators.
#[derive(Default)]
struct Acc {
    energy: f64,
    max_truncation: f64,
    applications: usize,
    max_residual: f64,
    unconverged: usize,
    lanczos_seconds: f64,
    svd_seconds: f64,
}

fn env_at(envs: &[Option<DistTensor>], i: usize) -> Result<&DistTensor, TnError> {
    envs.get(i)
        .and_then(Option::as_ref)
        .ok_or(TnError::Internal("a step needs an environment the sweep has not built"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_tolerance_follows_the_discarded_weight() {
        let opts = DmrgOptions::default();
        let tol = |w| opts.step_lanczos(w).tol;
        assert_eq!(tol(None), 1e-8);
        assert_eq!(tol(Some(0.0)), 1e-8);
        assert!((tol(Some(1e-10)) - 1e-6).abs() < 1e-18);
        assert_eq!(tol(Some(1e-20)), 1e-8);
        assert_eq!(tol(Some(0.5)), MAX_ADAPTIVE_TOL);
        let fixed = DmrgOptions {
            tol_to_truncation: 0.0,
            ..opts
        };
        assert_eq!(fixed.step_lanczos(Some(1e-4)).tol, 1e-8);
        assert_eq!(fixed.step_lanczos(Some(1e-4)).max_krylov, opts.lanczos.max_krylov);
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
