//! TEBD (second-order Trotter) of nearest-neighbour models.

use std::sync::Arc;

use pyo3::prelude::*;
use uni20::tn::{Tebd as TnTebd, TebdOptions};

use super::{lock, same_universe, Model, Mps};
use crate::errors::py_result;
use crate::universe::{Handle, Universe};

/// What one TEBD step discarded.
#[pyclass(module = "uni20", frozen, get_all)]
pub(crate) struct TebdStep {
    /// Largest discarded weight of the step's SVDs.
    max_discarded_weight: f64,
    /// Sum of the discarded weights (the truncation error).
    discarded_weight: f64,
    /// Largest bond dimension after the step.
    max_bond: usize,
}

/// A TEBD integrator (second-order Trotter) of a nearest-neighbour
/// `model`: real time, or imaginary time with ``imaginary=True``.
#[pyclass(module = "uni20", frozen)]
pub(crate) struct Tebd {
    t: TnTebd,
    h: Arc<Handle>,
}

#[pymethods]
impl Tebd {
    /// Raises ``OptionError`` for a bad `dt`, `chi_max`, `cutoff` or
    /// `block`; ``ModelError`` for terms beyond nearest neighbours.
    #[new]
    #[pyo3(signature = (universe, model, dt=0.05, imaginary=false, chi_max=64, cutoff=1e-12, block=64))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        universe: &Universe,
        model: &Model,
        dt: f64,
        imaginary: bool,
        chi_max: usize,
        cutoff: f64,
        block: usize,
    ) -> PyResult<Tebd> {
        let r = (|| {
            let h = universe.handle()?;
            let m = model.inner();
            let opts = TebdOptions {
                dt,
                imaginary,
                chi_max,
                cutoff,
                block,
            };
            let t = h.call(py, move |ctl| Ok(TnTebd::new(ctl, &m, opts)?))?;
            Ok(Tebd { t, h })
        })();
        py_result(py, r)
    }

    /// Advances `mps` by one step `dt` (in place).
    fn step(&self, py: Python<'_>, mps: &Mps) -> PyResult<TebdStep> {
        let r = (|| {
            same_universe(&self.h, &mps.h, "the TEBD integrator and the MPS")?;
            let (t, m) = (self.t.clone(), mps.m.clone());
            self.h.call(py, move |ctl| Ok(t.step(ctl, &mut lock(&m))?))
        })();
        let s = py_result(py, r)?;
        Ok(TebdStep {
            max_discarded_weight: s.max_discarded_weight,
            discarded_weight: s.discarded_weight,
            max_bond: s.max_bond,
        })
    }
}
