//! Site types, operator sums and the standard models.

use numpy::Complex64;
use pyo3::prelude::*;
use uni20::tn::models::{self, Model as TnModel};
use uni20::tn::{MpoOptions, OpSum as TnOpSum, Site as TnSite};

use crate::errors::{py_result, Failure, Kind};
use crate::tensor::local_from_numpy;

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
                s: TnSite::spin(two_s, super::conserve(conserve)?)?,
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
                s: TnSite::fermion(super::conserve(conserve)?)?,
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
                s: TnSite::electron(super::conserve(conserve)?)?,
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
                s: TnSite::boson(nmax, super::conserve(conserve)?)?,
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
    pub(super) sites: Vec<Site>,
    /// The Hamiltonian.
    pub(super) hamiltonian: OpSum,
}

impl Model {
    pub(super) fn wrap(m: TnModel) -> Model {
        Model {
            sites: m.sites.into_iter().map(|s| Site { s }).collect(),
            hamiltonian: OpSum { o: m.hamiltonian },
        }
    }

    pub(super) fn inner(&self) -> TnModel {
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
            super::conserve(conserve)?,
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
            super::conserve(conserve)?,
        )?))
    })();
    py_result(py, r)
}

/// `J1 sum S_i . S_(i+1) + J2 sum S_i . S_(i+2)`, spin 1/2.
#[pyfunction]
#[pyo3(signature = (length, j1=1.0, j2=0.0, conserve="none"))]
pub(crate) fn j1j2(py: Python<'_>, length: usize, j1: f64, j2: f64, conserve: &str) -> PyResult<Model> {
    let r = (|| Ok(Model::wrap(models::j1j2(length, j1, j2, super::conserve(conserve)?)?)))();
    py_result(py, r)
}

/// `J sum S_i . S_(i+1) + D sum (Sz_i)^2`, spin 1.
#[pyfunction]
#[pyo3(signature = (length, j=1.0, d=0.0, conserve="none"))]
pub(crate) fn spin1(py: Python<'_>, length: usize, j: f64, d: f64, conserve: &str) -> PyResult<Model> {
    let r = (|| Ok(Model::wrap(models::spin1(length, j, d, super::conserve(conserve)?)?)))();
    py_result(py, r)
}

/// The transverse-field Ising chain `-J sum sx sx - g sum sz` (Pauli matrices).
#[pyfunction]
#[pyo3(signature = (length, j=1.0, g=1.0, conserve="none"))]
pub(crate) fn tfi(py: Python<'_>, length: usize, j: f64, g: f64, conserve: &str) -> PyResult<Model> {
    let r = (|| Ok(Model::wrap(models::tfi(length, j, g, super::conserve(conserve)?)?)))();
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
            super::conserve(conserve)?,
        )?))
    })();
    py_result(py, r)
}
