//! Distributed MPOs and MPSs: the builders on the universe (dense and
//! symmetric) and the measurements, returned as numpy arrays.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use uni20::dist::symmetry::Direction;
use uni20::tn::measure;
use uni20::tn::SectorLeg;
use uni20::tn::{Mpo as TnMpo, MpoOptions, Mps as TnMps, Site as TnSite};
use uni20::DistTensor;

use super::{charged, lock, Model, OpSum, Site, SiteList};
use crate::errors::{py_result, Failure, Kind, Res};
use crate::tensor::{vec_to_numpy, Tensor};
use crate::universe::{Handle, Universe};

/// A distributed matrix-product operator.
#[pyclass(module = "uni20", frozen)]
pub(crate) struct Mpo {
    pub(crate) m: TnMpo,
    pub(crate) h: Arc<Handle>,
}

#[pymethods]
impl Mpo {
    /// Number of sites.
    fn __len__(&self) -> usize {
        self.m.len()
    }

    /// The bond dimensions ``[D_0, ..., D_L]``.
    #[getter]
    fn bond_dims(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.m.sites().iter().map(|w| w.shape()[0]).collect();
        if let Some(last) = self.m.sites().last() {
            v.push(last.shape()[1]);
        }
        v
    }
}

/// A distributed matrix-product state (sites ``(left bond, d, right bond)``).
#[pyclass(module = "uni20", frozen)]
pub(crate) struct Mps {
    pub(crate) m: Arc<Mutex<TnMps>>,
    pub(crate) h: Arc<Handle>,
    /// The site types, when the builder knew them (needed to put a
    /// symmetric state's physical legs back in the basis order).
    pub(crate) sites: Option<Arc<Vec<TnSite>>>,
}

impl Mps {
    pub(crate) fn wrap(m: TnMps, h: &Arc<Handle>, sites: Option<Arc<Vec<TnSite>>>) -> Mps {
        Mps {
            m: Arc::new(Mutex::new(m)),
            h: h.clone(),
            sites,
        }
    }

    pub(crate) fn snapshot(&self) -> TnMps {
        lock(&self.m).clone()
    }

    /// For each symmetric site of `psi`, the basis state at every dense
    /// position of its physical leg (None for dense sites; None overall
    /// when no site is symmetric).
    fn physical_orders(&self, psi: &TnMps, sites: Option<&SiteList>) -> Res<Option<Vec<Option<Vec<usize>>>>> {
        if !psi.sites().iter().any(DistTensor::is_symmetric) {
            return Ok(None);
        }
        let list: Vec<TnSite> = match (sites, &self.sites) {
            (Some(s), _) => s.expand(psi.len())?,
            (None, Some(s)) => s.to_vec(),
            (None, None) => {
                return Err(Failure::new(
                    Kind::Symmetry,
                    "to_numpy of a symmetric state needs its site types: to_numpy(sites=...)",
                ))
            }
        };
        if list.len() != psi.len() {
            return Err(Failure::new(
                Kind::Shape,
                format!("expected one site type per site ({}), got {}", psi.len(), list.len()),
            ));
        }
        psi.sites()
            .iter()
            .zip(&list)
            .map(|(m, site)| {
                if !m.is_symmetric() {
                    return Ok(None);
                }
                let leg = SectorLeg::physical(site, Direction::In, 1)
                    .map_err(|e| Failure::new(Kind::Symmetry, e.to_string()))?;
                if leg.order.len() != m.shape()[1] {
                    return Err(Failure::new(
                        Kind::Shape,
                        format!(
                            "site type {} has {} states, the site tensor {}",
                            site.name(),
                            leg.order.len(),
                            m.shape()[1]
                        ),
                    ));
                }
                Ok(Some(leg.order))
            })
            .collect::<Res<Vec<_>>>()
            .map(Some)
    }

    /// One operator tensor per site: `op` of each site type (`sites`: one
    /// site type, or one per site).
    fn site_ops(&self, sites: &SiteList, op: &str, block: usize) -> Res<(Vec<TnSite>, String, usize)> {
        let l = lock(&self.m).len();
        let list = sites.expand(l)?;
        Ok((list, op.to_string(), block))
    }
}

fn ops_on_workers(
    ctl: &uni20::Controller<'_>,
    sites: &[TnSite],
    op: &str,
    block: usize,
) -> Result<Vec<DistTensor>, uni20::tn::TnError> {
    sites
        .iter()
        .map(|s| measure::site_operator(ctl, s, op, block))
        .collect()
}

#[pymethods]
impl Mps {
    /// Number of sites.
    fn __len__(&self) -> usize {
        lock(&self.m).len()
    }

    /// The bond dimensions ``[1, chi_1, ..., 1]``.
    #[getter]
    fn bond_dims(&self) -> Vec<usize> {
        lock(&self.m).bond_dims()
    }

    /// The largest bond dimension.
    #[getter]
    fn max_bond(&self) -> usize {
        lock(&self.m).max_bond()
    }

    /// The site tensor `i` (shape ``(chi_left, d, chi_right)``).
    fn site(&self, py: Python<'_>, i: usize) -> PyResult<Tensor> {
        let m = lock(&self.m);
        if i >= m.len() {
            return py_result(
                py,
                Err(Failure::new(
                    Kind::Shape,
                    format!("site {i} of a chain of {} sites", m.len()),
                )),
            );
        }
        Ok(Tensor::wrap(m.site(i).clone(), &self.h))
    }

    /// A copy (sharing the site tensors, which are immutable).
    fn copy(&self) -> Mps {
        Mps::wrap(self.snapshot(), &self.h, self.sites.clone())
    }

    /// True when the sites are symmetric tensors (a state built with
    /// ``symmetric=True`` or by :meth:`Universe.symmetric_mps`, and the
    /// DMRG and TDVP states that evolve from it).
    #[getter]
    fn is_symmetric(&self) -> bool {
        lock(&self.m).sites().iter().all(DistTensor::is_symmetric)
    }

    /// The total charge (a tuple of ints: ``(2 Sz,)``, ``(N,)``, ``(N, 2
    /// Sz)``, ``(parity,)``) of a symmetric state, None for a dense one.
    #[getter]
    fn total_charge<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, pyo3::types::PyTuple>>> {
        uni20::tn::total_charge(&lock(&self.m))
            .map(|q| crate::symmetric::charge_tuple(py, &q))
            .transpose()
    }

    /// ``<psi|O_i|psi> / <psi|psi>`` for every site `i`, with `O` the
    /// operator `op` of `sites` (one site type, or one per site): a numpy
    /// array of length L.
    #[pyo3(signature = (sites, op, block=64))]
    fn expectation_values<'py>(
        &self,
        py: Python<'py>,
        sites: SiteList,
        op: &str,
        block: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let r = (|| {
            let (list, op, block) = self.site_ops(&sites, op, block)?;
            let psi = self.snapshot();
            let v = self.h.call(py, move |ctl| {
                let ops = ops_on_workers(ctl, &list, &op, block)?;
                Ok(measure::local_expectations(ctl, &psi, &ops)?)
            })?;
            Ok(vec_to_numpy(py, v))
        })();
        py_result(py, r)
    }

    /// ``<A_i B_j>`` for ``j = i+1 .. i+range`` (default: to the end), with
    /// the operators `a` and `b` of `sites` and, for fermions, the string
    /// operator `string` (e.g. ``"F"``) on the sites in between.
    #[pyo3(signature = (sites, a, i, b, range=None, string=None, block=64))]
    #[allow(clippy::too_many_arguments)]
    fn correlations<'py>(
        &self,
        py: Python<'py>,
        sites: SiteList,
        a: &str,
        i: usize,
        b: &str,
        range: Option<usize>,
        string: Option<String>,
        block: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let r = (|| {
            let psi = self.snapshot();
            let list = sites.expand(psi.len())?;
            if i >= list.len() {
                return Err(Failure::new(
                    Kind::Shape,
                    format!("site {i} of a chain of {} sites", list.len()),
                ));
            }
            let (a, b) = (a.to_string(), b.to_string());
            let range = range.unwrap_or(list.len());
            let v = self.h.call(py, move |ctl| {
                let a_op = measure::site_operator(ctl, &list[i], &a, block)?;
                let b_ops = ops_on_workers(ctl, &list, &b, block)?;
                let s_ops = match &string {
                    Some(s) => Some(ops_on_workers(ctl, &list, s, block)?),
                    None => None,
                };
                Ok(measure::correlations(
                    ctl,
                    &psi,
                    &a_op,
                    i,
                    &b_ops,
                    s_ops.as_deref(),
                    range,
                )?)
            })?;
            Ok(vec_to_numpy(py, v))
        })();
        py_result(py, r)
    }

    /// The Schmidt values at every bond (a list of L-1 numpy arrays).
    #[pyo3(signature = (block=64))]
    fn schmidt_spectra<'py>(&self, py: Python<'py>, block: usize) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let psi = self.snapshot();
        let r = self
            .h
            .call(py, move |ctl| Ok(measure::schmidt_spectra(ctl, &psi, block)?));
        let spectra = py_result(py, r)?;
        Ok(spectra.into_iter().map(|s| vec_to_numpy(py, s)).collect())
    }

    /// The von Neumann entanglement entropy (natural log) of every bond: a
    /// numpy array of length L-1.
    #[pyo3(signature = (block=64))]
    fn entanglement_entropy<'py>(&self, py: Python<'py>, block: usize) -> PyResult<Bound<'py, PyAny>> {
        let psi = self.snapshot();
        let r = self
            .h
            .call(py, move |ctl| Ok(measure::schmidt_spectra(ctl, &psi, block)?));
        let spectra = py_result(py, r)?;
        Ok(vec_to_numpy(py, measure::entanglement_entropy(&spectra)))
    }

    /// ``<psi|H|psi> / <psi|psi>`` of the MPO.
    fn expectation(&self, py: Python<'_>, mpo: &Mpo) -> PyResult<f64> {
        let (psi, w) = (self.snapshot(), mpo.m.clone());
        py_result(py, self.h.call(py, move |ctl| Ok(measure::expectation(ctl, &psi, &w)?)))
    }

    /// ``(<H>, <H^2> - <H>^2)`` of the MPO on the normalised state.
    fn energy_variance(&self, py: Python<'_>, mpo: &Mpo) -> PyResult<(f64, f64)> {
        let (psi, w) = (self.snapshot(), mpo.m.clone());
        py_result(
            py,
            self.h.call(py, move |ctl| Ok(measure::energy_variance(ctl, &psi, &w)?)),
        )
    }

    /// ``|<self|other>|`` of the normalised states.
    fn overlap(&self, py: Python<'_>, other: &Mps) -> PyResult<f64> {
        let (a, b) = (self.snapshot(), other.snapshot());
        py_result(py, self.h.call(py, move |ctl| Ok(measure::overlap(ctl, &a, &b)?)))
    }

    /// The state as a dense numpy vector of length ``d**L`` in the site
    /// basis (gathers every site; for small chains and tests). For a
    /// symmetric state the physical legs are in sector order and are put
    /// back in the basis order of the site types: `sites` (one, or one per
    /// site), or those the state was built from. Raises ``SymmetryError``
    /// for a symmetric state whose site types are unknown or uncharged.
    #[pyo3(signature = (sites=None))]
    fn to_numpy<'py>(&self, py: Python<'py>, sites: Option<SiteList>) -> PyResult<Bound<'py, PyAny>> {
        let psi = self.snapshot();
        let orders = py_result(py, self.physical_orders(&psi, sites.as_ref()))?;
        let r = self.h.call(py, move |ctl| {
            psi.sites()
                .iter()
                .map(|s| s.to_local(ctl).map_err(Failure::from))
                .collect::<Res<Vec<_>>>()
        });
        let locals = py_result(py, r)?;
        let np = py.import("numpy")?;
        let mut acc: Option<Bound<'py, PyAny>> = None;
        for (i, l) in locals.into_iter().enumerate() {
            let a = crate::tensor::local_to_numpy(py, l);
            let mut a = py_result(py, a)?;
            if let Some(order) = orders.as_ref().and_then(|o| o[i].as_ref()) {
                // Dense position k of the physical leg is basis state order[k].
                let b = np.call_method1("zeros_like", (&a,))?;
                let all = pyo3::types::PySlice::full(py);
                let key = pyo3::types::PyTuple::new(
                    py,
                    [
                        all.clone().into_any(),
                        order.into_pyobject(py)?.into_any(),
                        all.into_any(),
                    ],
                )?;
                b.set_item(key, &a)?;
                a = b;
            }
            acc = Some(match acc {
                None => a,
                Some(prev) => np.call_method1("tensordot", (prev, a, 1))?,
            });
        }
        match acc {
            Some(a) => a.call_method1("reshape", (-1,)),
            None => Ok(vec_to_numpy(py, Vec::new())),
        }
    }
}

#[pymethods]
impl Universe {
    /// The Heisenberg chain's MPO (bond dimension 5, spin 1/2), built on the
    /// workers: the Hamiltonian of ``cargo run --example dmrg``.
    #[pyo3(signature = (length, block=64))]
    fn heisenberg_mpo(&self, py: Python<'_>, length: usize, block: usize) -> PyResult<Mpo> {
        let r = (|| {
            let h = self.handle()?;
            let m = h.call(py, move |ctl| Ok(TnMpo::heisenberg(ctl, length, block)?))?;
            Ok(Mpo { m, h })
        })();
        py_result(py, r)
    }

    /// The MPO of `model` (a :class:`Model`), or of an :class:`OpSum` on
    /// `sites`, compressed with the relative `cutoff` and distributed in
    /// blocks of `block`. With ``symmetric=True`` (site types with
    /// charges, from ``conserve=``) every site tensor is a symmetric tensor
    /// of flux zero: the MPO of a DMRG or TDVP in one charge sector, with
    /// a state from :meth:`symmetric_mps` or ``product_mps(...,
    /// symmetric=True)``.
    ///
    /// Raises ``ModelError`` for unknown operators or, with
    /// ``symmetric=True``, sites without charges; ``SymmetryError`` for a
    /// term that breaks the conservation law.
    #[pyo3(signature = (model, sites=None, block=64, cutoff=1e-13, symmetric=false))]
    fn mpo(
        &self,
        py: Python<'_>,
        model: &Bound<'_, PyAny>,
        sites: Option<SiteList>,
        block: usize,
        cutoff: f64,
        symmetric: bool,
    ) -> PyResult<Mpo> {
        let r = (|| {
            let h = self.handle()?;
            let (sum, list) = if let Ok(m) = model.cast::<Model>() {
                let m = m.get().inner();
                (m.hamiltonian, m.sites)
            } else {
                let sum = model.extract::<OpSum>().map_err(PyErr::from)?.o;
                let Some(s) = sites else {
                    return Err(Failure::new(Kind::Model, "mpo(opsum, sites): the sites are missing"));
                };
                let n = sum
                    .terms()
                    .iter()
                    .flat_map(|t| t.ops.iter().map(|o| o.1 + 1))
                    .max()
                    .unwrap_or(0);
                let list = match &s {
                    SiteList::One(_) => s.expand(n)?,
                    SiteList::Many(v) => s.expand(v.len())?,
                };
                (sum, list)
            };
            if symmetric {
                charged(&list)?;
            }
            let local = sum.to_mpo(&list, &MpoOptions { cutoff })?;
            let m = h.call(py, move |ctl| {
                if symmetric {
                    Ok(local.to_symmetric_mpo(ctl, &list, block)?)
                } else {
                    Ok(local.to_mpo(ctl, block)?)
                }
            })?;
            Ok(Mpo { m, h })
        })();
        py_result(py, r)
    }

    /// A random MPS of `length` sites of dimension `d` and bond `bond`,
    /// right-normalised, reproducible from `seed`: the start state of
    /// ``cargo run --example dmrg`` (``d=2, bond=8, seed=1``).
    #[pyo3(signature = (length, d=2, bond=8, block=64, seed=1))]
    fn random_mps(
        &self,
        py: Python<'_>,
        length: usize,
        d: usize,
        bond: usize,
        block: usize,
        seed: u64,
    ) -> PyResult<Mps> {
        let r = (|| {
            let h = self.handle()?;
            let m = h.call(py, move |ctl| Ok(TnMps::random(ctl, length, d, bond, block, seed)?))?;
            Ok(Mps::wrap(m, &h, None))
        })();
        py_result(py, r)
    }

    /// The product state with site `i` in the basis state ``labels[i]``
    /// of ``sites[i]`` (e.g. ``["up", "down", ...]``). With
    /// ``symmetric=True`` (sites with charges, from ``conserve=``) the
    /// sites are symmetric tensors and the state's total charge is that of
    /// the labels: the start state of a DMRG or TDVP in that sector.
    #[pyo3(signature = (sites, labels, block=64, symmetric=false))]
    fn product_mps(
        &self,
        py: Python<'_>,
        sites: SiteList,
        labels: Vec<String>,
        block: usize,
        symmetric: bool,
    ) -> PyResult<Mps> {
        let r = (|| {
            let h = self.handle()?;
            let list = sites.expand(labels.len())?;
            if symmetric {
                charged(&list)?;
            }
            let kept = Arc::new(list.clone());
            let m = h.call(py, move |ctl| {
                let refs: Vec<&str> = labels.iter().map(String::as_str).collect();
                if symmetric {
                    Ok(TnMps::symmetric_product(ctl, &list, &refs, block)?)
                } else {
                    Ok(TnMps::product(ctl, &list, &refs, block)?)
                }
            })?;
            Ok(Mps::wrap(m, &h, Some(kept)))
        })();
        py_result(py, r)
    }

    /// A random symmetric state of total charge `sector` on the charged
    /// site types of `sites` (a :class:`Model` built with ``conserve=``,
    /// or a list of site types), right-normalised as :class:`Dmrg` expects
    /// it, bond dimension at most `bond` (the sectors of every bond are
    /// those on a path from charge 0 to `sector`), reproducible from
    /// `seed`. `sector` is an int or a tuple of ints in the sites' units:
    /// ``2 Sz`` for ``conserve="Sz"`` (so ``sector=0`` is Sz = 0 and
    /// ``sector=2`` is Sz = 1), ``N``, ``(N, 2 Sz)``, or the parity.
    ///
    /// Raises ``ModelError`` for sites without charges, ``SymmetryError``
    /// for a sector that is not a charge of their group, ``OptionError``
    /// for a sector the sites cannot reach or ``bond == 0``.
    #[pyo3(signature = (sites, sector, bond=8, block=64, seed=1))]
    fn symmetric_mps(
        &self,
        py: Python<'_>,
        sites: &Bound<'_, PyAny>,
        sector: &Bound<'_, PyAny>,
        bond: usize,
        block: usize,
        seed: u64,
    ) -> PyResult<Mps> {
        let r = (|| {
            let h = self.handle()?;
            let list: Vec<TnSite> = if let Ok(m) = sites.cast::<Model>() {
                m.get().inner().sites
            } else {
                sites.extract::<Vec<Site>>()?.into_iter().map(|s| s.s).collect()
            };
            let g = charged(&list)?;
            let target = crate::symmetric::charge_of(&g, sector)?;
            let kept = Arc::new(list.clone());
            let m = h.call(py, move |ctl| {
                Ok(TnMps::symmetric_random(ctl, &list, &target, bond, block, seed)?)
            })?;
            Ok(Mps::wrap(m, &h, Some(kept)))
        })();
        py_result(py, r)
    }
}
