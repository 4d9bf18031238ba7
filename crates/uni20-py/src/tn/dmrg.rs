//! Two-site DMRG with Python observers.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use uni20::tn::{Dmrg as TnDmrg, DmrgOptions, LanczosOptions, Site as TnSite, SweepStats as TnSweepStats};

use super::{lock, same_universe, Mpo, Mps};
use crate::errors::{py_result, Failure, Kind, Res};
use crate::universe::Handle;

/// The statistics of one DMRG sweep.
#[pyclass(module = "uni20", frozen, get_all, skip_from_py_object)]
#[derive(Clone)]
pub(crate) struct SweepStats {
    /// Sweeps completed so far (this one included).
    sweep: u64,
    /// The energy after the sweep.
    energy: f64,
    /// Change of the energy over the sweep (``nan`` for the first).
    energy_change: f64,
    /// Largest discarded weight of the sweep's SVDs.
    max_truncation: f64,
    /// Largest bond dimension.
    max_bond: usize,
    /// Applications of the effective Hamiltonian.
    lanczos_applications: usize,
    /// Largest final Lanczos residual.
    max_residual: f64,
    /// Steps whose eigensolver stopped above its tolerance.
    unconverged_steps: usize,
    /// Wall time of the sweep, seconds.
    seconds: f64,
    /// Of which in the eigensolver.
    lanczos_seconds: f64,
    /// Of which in the SVDs.
    svd_seconds: f64,
}

impl From<TnSweepStats> for SweepStats {
    fn from(s: TnSweepStats) -> SweepStats {
        SweepStats {
            sweep: s.sweep,
            energy: s.energy,
            energy_change: s.energy_change,
            max_truncation: s.max_truncation,
            max_bond: s.max_bond,
            lanczos_applications: s.lanczos_applications,
            max_residual: s.max_residual,
            unconverged_steps: s.unconverged_steps,
            seconds: s.seconds,
            lanczos_seconds: s.lanczos_seconds,
            svd_seconds: s.svd_seconds,
        }
    }
}

#[pymethods]
impl SweepStats {
    fn __repr__(&self) -> String {
        format!(
            "SweepStats(sweep={}, energy={:.12}, energy_change={:.3e}, max_truncation={:.3e}, max_bond={}, seconds={:.3})",
            self.sweep, self.energy, self.energy_change, self.max_truncation, self.max_bond, self.seconds
        )
    }
}

#[allow(clippy::too_many_arguments)]
fn dmrg_options(
    chi_max: usize,
    cutoff: f64,
    lanczos_tol: f64,
    lanczos_krylov: usize,
    lanczos_restarts: usize,
    tol_to_truncation: f64,
    block: usize,
) -> Res<DmrgOptions> {
    let opts = DmrgOptions {
        chi_max,
        cutoff,
        lanczos: LanczosOptions {
            tol: lanczos_tol,
            max_krylov: lanczos_krylov,
            max_restarts: lanczos_restarts,
            ..LanczosOptions::default()
        },
        tol_to_truncation,
        block,
        ..DmrgOptions::default()
    };
    opts.validate()?;
    Ok(opts)
}

/// Finite two-site DMRG of `mpo` from `mps` (right-normalised, as
/// ``random_mps`` gives it). The defaults are those of ``cargo run
/// --example dmrg``.
#[pyclass(module = "uni20", frozen)]
pub(crate) struct Dmrg {
    d: Arc<Mutex<TnDmrg>>,
    h: Arc<Handle>,
    /// The site types of the start state, when known.
    sites: Option<Arc<Vec<TnSite>>>,
}

#[pymethods]
impl Dmrg {
    /// Raises ``OptionError`` for options out of range, ``ShapeError`` if
    /// the MPS and MPO do not fit.
    #[new]
    #[pyo3(signature = (mpo, mps, chi_max=64, cutoff=1e-10, lanczos_tol=1e-8, lanczos_krylov=20, lanczos_restarts=1, tol_to_truncation=0.1, block=64))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        mpo: &Mpo,
        mps: &Mps,
        chi_max: usize,
        cutoff: f64,
        lanczos_tol: f64,
        lanczos_krylov: usize,
        lanczos_restarts: usize,
        tol_to_truncation: f64,
        block: usize,
    ) -> PyResult<Dmrg> {
        let r = (|| {
            same_universe(&mpo.h, &mps.h, "the MPO and the MPS")?;
            let opts = dmrg_options(
                chi_max,
                cutoff,
                lanczos_tol,
                lanczos_krylov,
                lanczos_restarts,
                tol_to_truncation,
                block,
            )?;
            let (w, psi) = (mpo.m.clone(), mps.snapshot());
            let d = mpo.h.call(py, move |ctl| Ok(TnDmrg::new(ctl, w, psi, opts)?))?;
            Ok(Dmrg {
                d: Arc::new(Mutex::new(d)),
                h: mpo.h.clone(),
                sites: mps.sites.clone(),
            })
        })();
        py_result(py, r)
    }

    /// Continues the run checkpointed as `checkpoint_id` (by
    /// :meth:`checkpoint`, possibly in an earlier process with the same
    /// ``store_dir`` and number of ranks), with the MPO `mpo`.
    #[staticmethod]
    #[pyo3(signature = (mpo, checkpoint_id, chi_max=64, cutoff=1e-10, lanczos_tol=1e-8, lanczos_krylov=20, lanczos_restarts=1, tol_to_truncation=0.1, block=64))]
    #[allow(clippy::too_many_arguments)]
    fn resume(
        py: Python<'_>,
        mpo: &Mpo,
        checkpoint_id: &str,
        chi_max: usize,
        cutoff: f64,
        lanczos_tol: f64,
        lanczos_krylov: usize,
        lanczos_restarts: usize,
        tol_to_truncation: f64,
        block: usize,
    ) -> PyResult<Dmrg> {
        let r = (|| {
            let opts = dmrg_options(
                chi_max,
                cutoff,
                lanczos_tol,
                lanczos_krylov,
                lanczos_restarts,
                tol_to_truncation,
                block,
            )?;
            let id: uni20::persist::ObjectId = checkpoint_id.parse().map_err(|e| {
                Failure::new(
                    Kind::Checkpoint,
                    format!("invalid checkpoint id {checkpoint_id:?}: {e}"),
                )
            })?;
            let w = mpo.m.clone();
            let d = mpo.h.call(py, move |ctl| {
                let cp = uni20::dist::restore(ctl, id)?;
                Ok(TnDmrg::resume(ctl, w, cp, opts)?)
            })?;
            Ok(Dmrg {
                d: Arc::new(Mutex::new(d)),
                h: mpo.h.clone(),
                sites: None,
            })
        })();
        py_result(py, r)
    }

    /// One sweep (left to right and back); its statistics.
    fn sweep(&self, py: Python<'_>) -> PyResult<SweepStats> {
        let d = self.d.clone();
        let r = self.h.call(py, move |ctl| Ok(lock(&d).sweep(ctl, &mut |_| {})?));
        py_result(py, r).map(SweepStats::from)
    }

    /// Sweeps until `sweeps` sweeps are done (counted from the start of
    /// the run) or the energy changes by less than `tol` over a sweep.
    /// After each sweep, `observer(dmrg, stats)` runs here, on the root
    /// (it may measure the state); returning ``True`` stops the run, an
    /// exception propagates. Returns the statistics of the sweeps run.
    #[pyo3(signature = (sweeps=20, tol=1e-10, observer=None))]
    fn run(
        slf: &Bound<'_, Self>,
        sweeps: u64,
        tol: f64,
        observer: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Vec<SweepStats>> {
        let py = slf.py();
        if !(tol.is_finite() && tol >= 0.0) {
            return py_result(
                py,
                Err(Failure::new(
                    Kind::Option,
                    format!("invalid tol = {tol}: expected a finite number >= 0"),
                )),
            );
        }
        let me = slf.get();
        let mut out = Vec::new();
        while lock(&me.d).sweeps() < sweeps {
            let s = me.sweep(py)?;
            out.push(s.clone());
            if let Some(obs) = &observer {
                let stop = obs.call1((slf, s.clone()))?;
                if stop.is_truthy()? {
                    break;
                }
            }
            if !s.energy.is_finite() {
                return py_result(
                    py,
                    Err(Failure::new(
                        Kind::NonFinite,
                        format!("the energy is not finite after sweep {}", s.sweep),
                    )),
                );
            }
            if s.energy_change.abs() < tol {
                break;
            }
        }
        Ok(out)
    }

    /// Writes a checkpoint of the run (state, sweep count, energy,
    /// options) and returns its id; the previous one is retired.
    fn checkpoint(&self, py: Python<'_>) -> PyResult<String> {
        let d = self.d.clone();
        let r = self.h.call(py, move |ctl| Ok(lock(&d).checkpoint(ctl)?.to_string()));
        py_result(py, r)
    }

    /// The energy after the last sweep (None before the first).
    #[getter]
    fn energy(&self) -> Option<f64> {
        lock(&self.d).energy()
    }

    /// Sweeps completed.
    #[getter]
    fn sweeps(&self) -> u64 {
        lock(&self.d).sweeps()
    }

    /// The current state (a copy sharing its site tensors).
    #[getter]
    fn mps(&self) -> Mps {
        Mps::wrap(lock(&self.d).mps().clone(), &self.h, self.sites.clone())
    }
}
