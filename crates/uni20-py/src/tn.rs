//! The tensor-network toolkit (`uni20::tn`) from Python: sites, operator
//! sums, models, MPOs, MPSs, two-site DMRG with Python observers, TEBD and
//! the measurements (returned as numpy arrays). Bindings only: every
//! algorithm is the Rust one.

use std::sync::{Arc, Mutex};

use numpy::Complex64;
use pyo3::prelude::*;
use uni20::tn::measure;
use uni20::tn::models::{self, Model as TnModel};
use uni20::tn::{
    Conserve, Dmrg as TnDmrg, DmrgOptions, LanczosOptions, Mpo as TnMpo, MpoOptions, Mps as TnMps, OpSum as TnOpSum,
    Site as TnSite, SweepStats as TnSweepStats, Tebd as TnTebd, TebdOptions,
};
use uni20::DistTensor;

use crate::errors::{py_result, Failure, Kind, Res};
use crate::tensor::{local_from_numpy, vec_to_numpy, Tensor};
use crate::universe::{Handle, Universe};

fn conserve(s: &str) -> Res<Conserve> {
    Ok(match s.to_ascii_lowercase().as_str() {
        "none" | "" => Conserve::None,
        "sz" => Conserve::Sz,
        "n" => Conserve::N,
        "nsz" | "n,sz" => Conserve::NSz,
        "parity" => Conserve::Parity,
        other => {
            return Err(Failure::new(
                Kind::Option,
                format!("conserve={other:?}: expected one of \"none\", \"Sz\", \"N\", \"NSz\", \"parity\""),
            ))
        }
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A site type: basis state labels, named operators (``d x d`` matrices)
/// and optional charges. Immutable; ``with_op`` returns a new site.
#[pyclass(module = "uni20", frozen, from_py_object)]
#[derive(Clone)]
pub(crate) struct Site {
    pub(crate) s: TnSite,
}

#[pymethods]
impl Site {
    /// A site type named `name` with the basis states `states` and no
    /// operators but the identity ``Id``.
    #[new]
    fn new(py: Python<'_>, name: &str, states: Vec<String>) -> PyResult<Site> {
        py_result(py, TnSite::new(name, states).map(|s| Site { s }).map_err(Failure::from))
    }

    /// Spin ``S = two_s / 2``: states ``Sz`` from ``+S`` down, operators
    /// ``Sz``, ``Sp``, ``Sm``, ``Sx``, ``Sy`` (complex), ``Id``.
    /// `conserve`: ``"none"``, ``"Sz"`` or ``"parity"``.
    #[staticmethod]
    #[pyo3(signature = (two_s=1, conserve="none"))]
    fn spin(py: Python<'_>, two_s: u32, conserve: &str) -> PyResult<Site> {
        let r = (|| {
            Ok(Site {
                s: TnSite::spin(two_s, self::conserve(conserve)?)?,
            })
        })();
        py_result(py, r)
    }

    /// Spinless fermion (``N``, ``C``, ``Cdag``, ``F``); `conserve`
    /// ``"none"``, ``"N"`` or ``"parity"``.
    #[staticmethod]
    #[pyo3(signature = (conserve="none"))]
    fn fermion(py: Python<'_>, conserve: &str) -> PyResult<Site> {
        let r = (|| {
            Ok(Site {
                s: TnSite::fermion(self::conserve(conserve)?)?,
            })
        })();
        py_result(py, r)
    }

    /// Spin-1/2 electron (four states; ``Cup``, ``Cdn``, ``Nup``, ``Ndn``,
    /// ``Ntot``, ...); `conserve` ``"none"``, ``"N"``, ``"Sz"``, ``"NSz"``
    /// or ``"parity"``.
    #[staticmethod]
    #[pyo3(signature = (conserve="none"))]
    fn electron(py: Python<'_>, conserve: &str) -> PyResult<Site> {
        let r = (|| {
            Ok(Site {
                s: TnSite::electron(self::conserve(conserve)?)?,
            })
        })();
        py_result(py, r)
    }

    /// Boson with at most `nmax` particles (``B``, ``Bdag``, ``N``).
    #[staticmethod]
    #[pyo3(signature = (nmax, conserve="none"))]
    fn boson(py: Python<'_>, nmax: usize, conserve: &str) -> PyResult<Site> {
        let r = (|| {
            Ok(Site {
                s: TnSite::boson(nmax, self::conserve(conserve)?)?,
            })
        })();
        py_result(py, r)
    }

    /// This site type with one more operator `name` (a ``d x d`` array,
    /// row = outgoing state); `fermionic` for operators that anticommute
    /// on different sites.
    #[pyo3(signature = (name, matrix, fermionic=false))]
    fn with_op(&self, py: Python<'_>, name: &str, matrix: &Bound<'_, PyAny>, fermionic: bool) -> PyResult<Site> {
        let r = (|| {
            let m = local_from_numpy(py, matrix)?;
            let d = self.s.dim();
            if m.shape() != [d, d] {
                return Err(Failure::new(
                    Kind::Shape,
                    format!(
                        "operator `{name}`: expected a {d}x{d} matrix, got shape {:?}",
                        m.shape()
                    ),
                ));
            }
            Ok(Site {
                s: self.s.clone().with_op(name, m.to_c64_vec(), fermionic)?,
            })
        })();
        py_result(py, r)
    }

    /// The site type's name.
    #[getter]
    fn name(&self) -> String {
        self.s.name().to_string()
    }

    /// The local dimension ``d``.
    #[getter]
    fn dim(&self) -> usize {
        self.s.dim()
    }

    /// The basis state labels.
    #[getter]
    fn states(&self) -> Vec<String> {
        self.s.states().to_vec()
    }

    /// The operator names.
    #[getter]
    fn op_names(&self) -> Vec<String> {
        self.s.op_names().into_iter().map(String::from).collect()
    }

    /// The operator `name` as a complex ``d x d`` numpy array.
    fn op<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let r = (|| {
            let op = self.s.op(name)?;
            let d = self.s.dim();
            let flat = numpy::PyArray1::from_vec(py, op.matrix.clone());
            Ok(flat.into_any().call_method1("reshape", ((d, d),))?)
        })();
        py_result(py, r)
    }

    fn __repr__(&self) -> String {
        format!("Site({:?}, dim={})", self.s.name(), self.s.dim())
    }
}

/// A sum of products of site operators: ``h.add(coeff, [("Sz", 0), ("Sz", 1)])``.
#[pyclass(module = "uni20", from_py_object)]
#[derive(Clone, Default)]
pub(crate) struct OpSum {
    pub(crate) o: TnOpSum,
}

#[pymethods]
impl OpSum {
    /// An empty sum.
    #[new]
    fn new() -> OpSum {
        OpSum::default()
    }

    /// Adds ``coeff * op_1(site_1) op_2(site_2) ...``; `ops` is a list of
    /// ``(operator name, site)`` in the order written. Returns the sum, so
    /// calls chain. Names are checked against the sites in ``to_mpo``.
    fn add<'py>(mut slf: PyRefMut<'py, Self>, coeff: Complex64, ops: Vec<(String, usize)>) -> PyRefMut<'py, Self> {
        let refs: Vec<(&str, usize)> = ops.iter().map(|(n, i)| (n.as_str(), *i)).collect();
        slf.o.add(coeff, &refs);
        slf
    }

    /// The terms as ``(coeff, [(name, site), ...])``.
    #[getter]
    fn terms(&self) -> Vec<(Complex64, Vec<(String, usize)>)> {
        self.o.terms().iter().map(|t| (t.coeff, t.ops.clone())).collect()
    }

    fn __len__(&self) -> usize {
        self.o.terms().len()
    }

    /// The MPO bond dimensions this sum compresses to on `sites` (built on
    /// the root only; raises ``ModelError`` for unknown operators or sites).
    #[pyo3(signature = (sites, cutoff=1e-13))]
    fn mpo_bond_dims(&self, py: Python<'_>, sites: Vec<Site>, cutoff: f64) -> PyResult<Vec<usize>> {
        let sites: Vec<TnSite> = sites.into_iter().map(|s| s.s).collect();
        let r = self.o.to_mpo(&sites, &MpoOptions { cutoff }).map(|m| m.bond_dims());
        py_result(py, r.map_err(Failure::from))
    }
}

/// A model: the site type of every site and the Hamiltonian.
#[pyclass(module = "uni20", frozen, get_all)]
pub(crate) struct Model {
    /// One site type per site.
    sites: Vec<Site>,
    /// The Hamiltonian.
    hamiltonian: OpSum,
}

impl Model {
    fn wrap(m: TnModel) -> Model {
        Model {
            sites: m.sites.into_iter().map(|s| Site { s }).collect(),
            hamiltonian: OpSum { o: m.hamiltonian },
        }
    }

    fn inner(&self) -> TnModel {
        TnModel {
            sites: self.sites.iter().map(|s| s.s.clone()).collect(),
            hamiltonian: self.hamiltonian.o.clone(),
        }
    }
}

#[pymethods]
impl Model {
    /// A model of your own: `sites` (one per site) and `hamiltonian`.
    #[new]
    fn new(sites: Vec<Site>, hamiltonian: OpSum) -> Model {
        Model { sites, hamiltonian }
    }

    fn __len__(&self) -> usize {
        self.sites.len()
    }
}

/// `J sum_i S_i . S_(i+1)`, spin ``two_s / 2``, open chain.
#[pyfunction]
#[pyo3(signature = (length, two_s=1, j=1.0, conserve="none"))]
pub(crate) fn heisenberg(py: Python<'_>, length: usize, two_s: u32, j: f64, conserve: &str) -> PyResult<Model> {
    let r = (|| {
        Ok(Model::wrap(models::heisenberg(
            length,
            two_s,
            j,
            self::conserve(conserve)?,
        )?))
    })();
    py_result(py, r)
}

/// The XXZ chain `Jxy (Sx Sx + Sy Sy) + Jz Sz Sz - hz sum Sz`.
#[pyfunction]
#[pyo3(signature = (length, two_s=1, jxy=1.0, jz=1.0, hz=0.0, conserve="none"))]
pub(crate) fn xxz(
    py: Python<'_>,
    length: usize,
    two_s: u32,
    jxy: f64,
    jz: f64,
    hz: f64,
    conserve: &str,
) -> PyResult<Model> {
    let r = (|| {
        Ok(Model::wrap(models::xxz(
            length,
            two_s,
            jxy,
            jz,
            hz,
            self::conserve(conserve)?,
        )?))
    })();
    py_result(py, r)
}

/// `J1 sum S_i . S_(i+1) + J2 sum S_i . S_(i+2)`, spin 1/2.
#[pyfunction]
#[pyo3(signature = (length, j1=1.0, j2=0.0, conserve="none"))]
pub(crate) fn j1j2(py: Python<'_>, length: usize, j1: f64, j2: f64, conserve: &str) -> PyResult<Model> {
    let r = (|| Ok(Model::wrap(models::j1j2(length, j1, j2, self::conserve(conserve)?)?)))();
    py_result(py, r)
}

/// `J sum S_i . S_(i+1) + D sum (Sz_i)^2`, spin 1.
#[pyfunction]
#[pyo3(signature = (length, j=1.0, d=0.0, conserve="none"))]
pub(crate) fn spin1(py: Python<'_>, length: usize, j: f64, d: f64, conserve: &str) -> PyResult<Model> {
    let r = (|| Ok(Model::wrap(models::spin1(length, j, d, self::conserve(conserve)?)?)))();
    py_result(py, r)
}

/// The transverse-field Ising chain `-J sum sx sx - g sum sz` (Pauli matrices).
#[pyfunction]
#[pyo3(signature = (length, j=1.0, g=1.0, conserve="none"))]
pub(crate) fn tfi(py: Python<'_>, length: usize, j: f64, g: f64, conserve: &str) -> PyResult<Model> {
    let r = (|| Ok(Model::wrap(models::tfi(length, j, g, self::conserve(conserve)?)?)))();
    py_result(py, r)
}

/// The Hubbard chain `-t sum (c+ c + h.c.) + U sum n_up n_dn - mu sum n`.
#[pyfunction]
#[pyo3(signature = (length, t=1.0, u=4.0, mu=0.0, conserve="none"))]
pub(crate) fn hubbard(py: Python<'_>, length: usize, t: f64, u: f64, mu: f64, conserve: &str) -> PyResult<Model> {
    let r = (|| {
        Ok(Model::wrap(models::hubbard(
            length,
            t,
            u,
            mu,
            self::conserve(conserve)?,
        )?))
    })();
    py_result(py, r)
}

/// A distributed matrix-product operator.
#[pyclass(module = "uni20", frozen)]
pub(crate) struct Mpo {
    m: TnMpo,
    h: Arc<Handle>,
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
    m: Arc<Mutex<TnMps>>,
    h: Arc<Handle>,
}

impl Mps {
    fn wrap(m: TnMps, h: &Arc<Handle>) -> Mps {
        Mps {
            m: Arc::new(Mutex::new(m)),
            h: h.clone(),
        }
    }

    fn snapshot(&self) -> TnMps {
        lock(&self.m).clone()
    }

    /// One operator tensor per site: `op` of each site type (`sites`: one
    /// site type, or one per site).
    fn site_ops(&self, sites: &SiteList, op: &str, block: usize) -> Res<(Vec<TnSite>, String, usize)> {
        let l = lock(&self.m).len();
        let list = sites.expand(l)?;
        Ok((list, op.to_string(), block))
    }
}

/// One site type for every site, or a list of them.
#[derive(FromPyObject)]
pub(crate) enum SiteList {
    /// The same site type everywhere.
    One(Site),
    /// One per site.
    Many(Vec<Site>),
}

impl SiteList {
    fn expand(&self, l: usize) -> Res<Vec<TnSite>> {
        match self {
            SiteList::One(s) => Ok(vec![s.s.clone(); l]),
            SiteList::Many(v) if v.len() == l => Ok(v.iter().map(|s| s.s.clone()).collect()),
            SiteList::Many(v) => Err(Failure::new(
                Kind::Shape,
                format!("expected one site type per site ({l}), got {}", v.len()),
            )),
        }
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
        Mps::wrap(self.snapshot(), &self.h)
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

    /// The state as a dense numpy vector of length ``d**L`` (gathers every
    /// site; for small chains and tests).
    fn to_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let psi = self.snapshot();
        let r = self.h.call(py, move |ctl| {
            psi.sites()
                .iter()
                .map(|s| s.to_local(ctl).map_err(Failure::from))
                .collect::<Res<Vec<_>>>()
        });
        let locals = py_result(py, r)?;
        let np = py.import("numpy")?;
        let mut acc: Option<Bound<'py, PyAny>> = None;
        for l in locals {
            let a = crate::tensor::local_to_numpy(py, l);
            let a = py_result(py, a)?;
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
    /// blocks of `block`.
    #[pyo3(signature = (model, sites=None, block=64, cutoff=1e-13))]
    fn mpo(
        &self,
        py: Python<'_>,
        model: &Bound<'_, PyAny>,
        sites: Option<SiteList>,
        block: usize,
        cutoff: f64,
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
            let local = sum.to_mpo(&list, &MpoOptions { cutoff })?;
            let m = h.call(py, move |ctl| Ok(local.to_mpo(ctl, block)?))?;
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
            Ok(Mps::wrap(m, &h))
        })();
        py_result(py, r)
    }

    /// The product state with site `i` in the basis state ``labels[i]``
    /// of ``sites[i]`` (e.g. ``["Up", "Dn", ...]``).
    #[pyo3(signature = (sites, labels, block=64))]
    fn product_mps(&self, py: Python<'_>, sites: SiteList, labels: Vec<String>, block: usize) -> PyResult<Mps> {
        let r = (|| {
            let h = self.handle()?;
            let list = sites.expand(labels.len())?;
            let m = h.call(py, move |ctl| {
                let refs: Vec<&str> = labels.iter().map(String::as_str).collect();
                Ok(TnMps::product(ctl, &list, &refs, block)?)
            })?;
            Ok(Mps::wrap(m, &h))
        })();
        py_result(py, r)
    }
}

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
            if !Arc::ptr_eq(&mpo.h, &mps.h) {
                return Err(Failure::new(
                    Kind::Shape,
                    "the MPO and the MPS belong to different universes",
                ));
            }
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
        Mps::wrap(lock(&self.d).mps().clone(), &self.h)
    }
}

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
            if !Arc::ptr_eq(&self.h, &mps.h) {
                return Err(Failure::new(Kind::Shape, "the MPS belongs to another universe"));
            }
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
