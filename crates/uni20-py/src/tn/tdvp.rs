//! Two-site TDVP (`uni20::tn::Tdvp`) from Python: real or imaginary time
//! evolution of an MPS under any MPO, dense or symmetric, with an optional
//! Python observer after each step. The state's measurements are those of
//! :class:`Mps`.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use uni20::tn::{LanczosOptions, Tdvp as TnTdvp, TdvpOptions, TdvpStep as TnTdvpStep};

use super::{lock, same_universe, Mpo, Mps};
use crate::errors::{py_result, Failure};
use crate::universe::Handle;

/// What one TDVP step did.
#[pyclass(module = "uni20", frozen, get_all, skip_from_py_object)]
#[derive(Clone)]
pub(crate) struct TdvpStep {
    /// Time reached after the step.
    time: f64,
    /// Sum of the discarded weights of the step's SVDs (the truncation
    /// error).
    discarded_weight: f64,
    /// Largest discarded weight of the step's SVDs.
    max_discarded_weight: f64,
    /// Largest bond dimension after the step.
    max_bond: usize,
    /// ``<H>`` at the step's last bond (conserved by real-time TDVP up to
    /// the truncation).
    energy: f64,
    /// Applications of the effective Hamiltonians.
    applications: usize,
    /// Largest error estimate of the step's Krylov exponentials.
    max_krylov_error: f64,
    /// Krylov exponentials that stopped at ``krylov_max`` vectors above
    /// ``krylov_tol``.
    unconverged: usize,
}

impl From<TnTdvpStep> for TdvpStep {
    fn from(s: TnTdvpStep) -> TdvpStep {
        TdvpStep {
            time: s.time,
            discarded_weight: s.discarded_weight,
            max_discarded_weight: s.max_discarded_weight,
            max_bond: s.max_bond,
            energy: s.energy,
            applications: s.applications,
            max_krylov_error: s.max_krylov_error,
            unconverged: s.unconverged,
        }
    }
}

#[pymethods]
impl TdvpStep {
    fn __repr__(&self) -> String {
        format!(
            "TdvpStep(time={}, energy={:.12}, discarded_weight={:.3e}, max_bond={})",
            self.time, self.energy, self.discarded_weight, self.max_bond
        )
    }
}

/// The two-site TDVP integrator (second order): each :meth:`step`
/// advances the state by `dt`, ``exp(-i H dt)`` in real time (the state
/// becomes complex) or ``exp(-H dt)`` renormalised with
/// ``imaginary=True``. Any MPO (long-range terms included, unlike
/// :class:`Tebd`), dense or symmetric with a state of the same kind. The
/// integrator evolves its own copy of `mps` (right-canonical, centre on
/// site 0, as :meth:`Universe.random_mps`, :meth:`Universe.product_mps`
/// and a finished DMRG give it); :attr:`mps` is the current state.
#[pyclass(module = "uni20", frozen)]
pub(crate) struct Tdvp {
    t: Arc<Mutex<TnTdvp>>,
    h: Arc<Handle>,
    sites: Option<Arc<Vec<uni20::tn::Site>>>,
}

#[pymethods]
impl Tdvp {
    /// Raises ``OptionError`` for a `dt` that is not finite and positive,
    /// ``chi_max == 0``, a negative `cutoff`, bad Krylov options or a chain
    /// shorter than 2 sites; ``ShapeError`` or ``SymmetryError`` when the
    /// MPS and MPO do not fit.
    #[new]
    #[pyo3(signature = (mpo, mps, dt=0.05, imaginary=false, chi_max=64, cutoff=1e-12, krylov_tol=1e-12, krylov_max=30, block=64))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        mpo: &Mpo,
        mps: &Mps,
        dt: f64,
        imaginary: bool,
        chi_max: usize,
        cutoff: f64,
        krylov_tol: f64,
        krylov_max: usize,
        block: usize,
    ) -> PyResult<Tdvp> {
        let r = (|| {
            same_universe(&mpo.h, &mps.h, "the MPO and the MPS")?;
            let opts = TdvpOptions {
                dt,
                imaginary,
                chi_max,
                cutoff,
                krylov: LanczosOptions {
                    tol: krylov_tol,
                    max_krylov: krylov_max,
                    max_restarts: 0,
                    ..LanczosOptions::default()
                },
                block,
                ..TdvpOptions::default()
            };
            opts.validate()?;
            let (w, psi) = (mpo.m.clone(), mps.snapshot());
            let t = mpo.h.call(py, move |ctl| Ok(TnTdvp::new(ctl, w, psi, opts)?))?;
            Ok(Tdvp {
                t: Arc::new(Mutex::new(t)),
                h: mpo.h.clone(),
                sites: mps.sites.clone(),
            })
        })();
        py_result(py, r)
    }

    /// One step of `dt` (a right and a left half sweep of ``dt / 2``).
    fn step(&self, py: Python<'_>) -> PyResult<TdvpStep> {
        let t = self.t.clone();
        let r = self.h.call(py, move |ctl| Ok(lock(&t).step(ctl)?));
        py_result(py, r).map(TdvpStep::from)
    }

    /// `steps` steps; after each, `observer(tdvp, step)` runs here, on
    /// the root (it may measure :attr:`mps`); returning ``True`` stops the
    /// run, an exception propagates. Returns the steps' records.
    #[pyo3(signature = (steps, observer=None))]
    fn run(slf: &Bound<'_, Self>, steps: usize, observer: Option<Bound<'_, PyAny>>) -> PyResult<Vec<TdvpStep>> {
        let me = slf.get();
        let mut out = Vec::with_capacity(steps);
        for _ in 0..steps {
            let s = me.step(slf.py())?;
            out.push(s.clone());
            if let Some(obs) = &observer {
                if obs.call1((slf, s))?.is_truthy()? {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Changes the time step of the following steps. Raises
    /// ``OptionError`` for a `dt` that is not finite and positive.
    fn set_dt(&self, py: Python<'_>, dt: f64) -> PyResult<()> {
        py_result(py, lock(&self.t).set_dt(dt).map_err(Failure::from))
    }

    /// Time evolved so far.
    #[getter]
    fn time(&self) -> f64 {
        lock(&self.t).time()
    }

    /// The current state (a copy sharing its site tensors; centre on site
    /// 0).
    #[getter]
    fn mps(&self) -> Mps {
        Mps::wrap(lock(&self.t).mps().clone(), &self.h, self.sites.clone())
    }
}
