//! Symmetric (block-sparse) tensors from Python: the symmetry groups
//! ([`Symmetry`]: U(1), Z_n and their products), legs with sectors
//! ([`Leg`]), the creation of symmetric tensors on the workers, their dense
//! embedding both ways, the charge-allowed blocks, and the fusion of legs
//! ([`Fusion`], [`fuse_legs`], [`split_leg`]). Einsum, the element-wise
//! operations, the reductions and the decompositions of `tensor.rs` take
//! the symmetric paths of `uni20::dist` for symmetric operands unchanged.
//!
//! Charges cross the boundary as tuples of ints, one component per group
//! factor; a plain int is accepted for a group of one factor.

use pyo3::prelude::*;
use pyo3::types::{PySlice, PyTuple};
use uni20::dist::symmetry::{Charge, Direction, GroupFactor, Leg as DistLeg, Sector, SymmetricLayout};
use uni20::dist::symmetry::{Fusion as DistFusion, Symmetry as DistSymmetry};
use uni20::dist::{self as dist};
use uni20::DistTensor;

use crate::errors::{py_result, Failure, Kind, Res};
use crate::tensor::{dtype_or_f64, local_from_numpy, local_to_numpy, Tensor};
use crate::universe::Universe;

/// The components of a charge given as an int or a sequence of ints.
fn components(c: &Bound<'_, PyAny>) -> Res<Vec<i64>> {
    if let Ok(q) = c.extract::<i64>() {
        return Ok(vec![q]);
    }
    c.extract::<Vec<i64>>().map_err(|_| {
        Failure::new(
            Kind::Symmetry,
            format!("a charge is an int or a tuple of ints (one per group factor), got {c}"),
        )
    })
}

/// The charge of `g` given as an int or a sequence of ints.
pub(crate) fn charge_of(g: &DistSymmetry, c: &Bound<'_, PyAny>) -> Res<Charge> {
    Ok(g.charge(&components(c)?)?)
}

/// A charge as a Python tuple of ints.
pub(crate) fn charge_tuple<'py>(py: Python<'py>, c: &Charge) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, c.components())
}

fn direction_of(d: &str) -> Res<Direction> {
    match d.to_ascii_lowercase().as_str() {
        "in" => Ok(Direction::In),
        "out" => Ok(Direction::Out),
        other => Err(Failure::new(
            Kind::Symmetry,
            format!("direction {other:?}: expected \"in\" or \"out\""),
        )),
    }
}

fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::In => "in",
        Direction::Out => "out",
    }
}

/// An abelian symmetry group: a product of U(1) and Z_n factors (the
/// trivial group, no factors, describes dense tensors). Charges are tuples
/// of ints, one per factor; Z_n components are kept in ``0..n``.
#[pyclass(module = "uni20", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub(crate) struct Symmetry {
    pub(crate) g: DistSymmetry,
}

#[pymethods]
impl Symmetry {
    /// The trivial group (no factors, one charge ``()``).
    #[staticmethod]
    fn trivial() -> Symmetry {
        Symmetry {
            g: DistSymmetry::trivial(),
        }
    }

    /// U(1): integer charges, fused by addition (``2 Sz``, or ``N``).
    #[staticmethod]
    fn u1() -> Symmetry {
        Symmetry { g: DistSymmetry::u1() }
    }

    /// Z_n (n >= 2): charges ``0..n``, fused by addition modulo n (parity
    /// for n = 2). Raises ``SymmetryError`` for n < 2.
    #[staticmethod]
    fn zn(py: Python<'_>, n: u32) -> PyResult<Symmetry> {
        py_result(py, DistSymmetry::zn(n).map(|g| Symmetry { g }).map_err(Failure::from))
    }

    /// The product of `factors` in that order, each ``"U1"`` or ``"Zn"``
    /// (``"Z2"``, ``"Z3"``, ...): ``Symmetry.product(["U1", "U1"])`` for N
    /// and Sz. Raises ``SymmetryError`` for an unknown factor or n < 2.
    #[staticmethod]
    fn product(py: Python<'_>, factors: Vec<String>) -> PyResult<Symmetry> {
        let r = (|| {
            let fs = factors
                .iter()
                .map(|f| {
                    let t = f.trim();
                    if t.eq_ignore_ascii_case("u1") {
                        return Ok(GroupFactor::U1);
                    }
                    t.strip_prefix(['Z', 'z'])
                        .and_then(|n| n.parse::<u32>().ok())
                        .map(GroupFactor::Z)
                        .ok_or_else(|| {
                            Failure::new(
                                Kind::Symmetry,
                                format!("group factor {f:?}: expected \"U1\" or \"Zn\" (for example \"Z2\")"),
                            )
                        })
                })
                .collect::<Res<Vec<_>>>()?;
            Ok(Symmetry {
                g: DistSymmetry::product(fs)?,
            })
        })();
        py_result(py, r)
    }

    /// The factors, as ``"U1"`` and ``"Zn"`` strings.
    #[getter]
    fn factors(&self) -> Vec<String> {
        self.g
            .factors()
            .iter()
            .map(|f| match f {
                GroupFactor::U1 => "U1".to_string(),
                GroupFactor::Z(n) => format!("Z{n}"),
            })
            .collect()
    }

    /// The identity charge (all components zero).
    #[getter]
    fn identity<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        charge_tuple(py, &self.g.identity())
    }

    /// The charge `c` (an int or a tuple of ints) in canonical form (Z_n
    /// components reduced into ``0..n``). Raises ``SymmetryError`` for the
    /// wrong number of components.
    fn charge<'py>(&self, py: Python<'py>, c: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
        let q = py_result(py, charge_of(&self.g, c))?;
        charge_tuple(py, &q)
    }

    /// The fusion ``a + b`` of two charges.
    fn fuse<'py>(
        &self,
        py: Python<'py>,
        a: &Bound<'py, PyAny>,
        b: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let r = (|| Ok(self.g.fuse(&charge_of(&self.g, a)?, &charge_of(&self.g, b)?)?))();
        let q = py_result(py, r)?;
        charge_tuple(py, &q)
    }

    /// The dual ``-a`` of a charge.
    fn dual<'py>(&self, py: Python<'py>, a: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
        let r = (|| Ok(self.g.dual(&charge_of(&self.g, a)?)?))();
        let q = py_result(py, r)?;
        charge_tuple(py, &q)
    }

    fn __repr__(&self) -> String {
        format!("Symmetry({})", self.g)
    }
}

/// A leg of a symmetric tensor: a group, a direction (``"out"``: charges
/// count with a plus sign in the charge rule, ``"in"``: with a minus
/// sign), and sectors ``(charge, dim)`` in strictly increasing charge
/// order, each cut into tiles (blocks) of at most `tile` states (default:
/// one tile per sector). The dense embedding lists the sectors one after
/// the other. Immutable.
#[pyclass(module = "uni20", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub(crate) struct Leg {
    pub(crate) l: DistLeg,
}

#[pymethods]
impl Leg {
    /// Raises ``SymmetryError`` for unsorted or repeated charges, a charge
    /// not of `symmetry`, a sector of dimension 0, a bad direction, or
    /// ``tile == 0``.
    #[new]
    #[pyo3(signature = (symmetry, direction, sectors, tile=None))]
    fn new(
        py: Python<'_>,
        symmetry: &Symmetry,
        direction: &str,
        sectors: Vec<(Bound<'_, PyAny>, usize)>,
        tile: Option<usize>,
    ) -> PyResult<Leg> {
        let r = (|| {
            let g = symmetry.g.clone();
            let dir = direction_of(direction)?;
            let s = sectors
                .iter()
                .map(|(q, dim)| {
                    Ok(Sector {
                        charge: charge_of(&g, q)?,
                        dim: *dim,
                    })
                })
                .collect::<Res<Vec<_>>>()?;
            let l = match tile {
                Some(t) => DistLeg::tiled(g, dir, s, t)?,
                None => DistLeg::new(g, dir, s)?,
            };
            Ok(Leg { l })
        })();
        py_result(py, r)
    }

    /// The group.
    #[getter]
    fn symmetry(&self) -> Symmetry {
        Symmetry {
            g: self.l.symmetry().clone(),
        }
    }

    /// ``"in"`` or ``"out"``.
    #[getter]
    fn direction(&self) -> &'static str {
        direction_name(self.l.direction())
    }

    /// The sectors as ``(charge tuple, dim)``, in charge order.
    #[getter]
    fn sectors<'py>(&self, py: Python<'py>) -> PyResult<Vec<(Bound<'py, PyTuple>, usize)>> {
        self.l
            .sectors()
            .iter()
            .map(|s| Ok((charge_tuple(py, &s.charge)?, s.dim)))
            .collect()
    }

    /// The tile extents of every sector (a list per sector).
    #[getter]
    fn tiles(&self) -> Vec<Vec<usize>> {
        (0..self.l.sectors().len())
            .map(|s| self.l.sector_tiles(s).to_vec())
            .collect()
    }

    /// The total dimension (the extent of the dense embedding).
    #[getter]
    fn dim(&self) -> usize {
        self.l.dim()
    }

    /// The dense offset of every sector, and the dimension last (length
    /// sectors + 1): sector `s` covers ``offsets[s]:offsets[s+1]``.
    #[getter]
    fn offsets(&self) -> Vec<usize> {
        (0..=self.l.sectors().len()).map(|s| self.l.sector_offset(s)).collect()
    }

    /// The same leg with the opposite direction: the leg it contracts with.
    fn dual(&self) -> Leg {
        Leg { l: self.l.dual() }
    }

    /// The same sectors cut into tiles of at most `tile` states.
    fn retiled(&self, py: Python<'_>, tile: usize) -> PyResult<Leg> {
        py_result(py, self.l.retiled(tile).map(|l| Leg { l }).map_err(Failure::from))
    }

    fn __repr__(&self) -> String {
        let sectors: Vec<String> = self
            .l
            .sectors()
            .iter()
            .map(|s| format!("{}:{}", s.charge, s.dim))
            .collect();
        format!(
            "Leg({}, {}, [{}])",
            self.l.symmetry(),
            direction_name(self.l.direction()),
            sectors.join(", ")
        )
    }
}

/// The map between legs fused by :func:`fuse_legs` and the fused leg;
/// :func:`split_leg` takes it to undo the fusion.
#[pyclass(module = "uni20", frozen)]
pub(crate) struct Fusion {
    f: DistFusion,
}

#[pymethods]
impl Fusion {
    /// The fusion of `parts` into one leg of `direction` (what
    /// :func:`fuse_legs` returns for the same legs). Raises
    /// ``SymmetryError`` for no parts or parts of different groups.
    #[new]
    #[pyo3(signature = (parts, direction="out"))]
    fn new(py: Python<'_>, parts: Vec<Leg>, direction: &str) -> PyResult<Fusion> {
        let r = (|| {
            let d = direction_of(direction)?;
            Ok(Fusion {
                f: DistFusion::new(parts.into_iter().map(|l| l.l).collect(), d)?,
            })
        })();
        py_result(py, r)
    }

    /// The legs that were fused.
    #[getter]
    fn parts(&self) -> Vec<Leg> {
        self.f.parts().iter().map(|l| Leg { l: l.clone() }).collect()
    }

    /// The fused leg.
    #[getter]
    fn fused(&self) -> Leg {
        Leg {
            l: self.f.fused().clone(),
        }
    }

    /// The position on the fused leg of the dense indices `index` (one
    /// per part). Raises ``SymmetryError`` for an index out of range.
    fn fuse_index(&self, py: Python<'_>, index: Vec<usize>) -> PyResult<usize> {
        py_result(py, self.f.fuse_index(&index).map_err(Failure::from))
    }

    /// The dense indices on the parts of position `f` of the fused leg.
    fn split_index(&self, py: Python<'_>, f: usize) -> PyResult<Vec<usize>> {
        py_result(py, self.f.split_index(f).map_err(Failure::from))
    }
}

/// The layout of `legs` with `flux` (default: the identity charge).
fn layout_of(legs: Vec<Leg>, flux: Option<&Bound<'_, PyAny>>) -> Res<SymmetricLayout> {
    let legs: Vec<DistLeg> = legs.into_iter().map(|l| l.l).collect();
    let g = legs
        .first()
        .map(|l| l.symmetry().clone())
        .ok_or_else(|| Failure::new(Kind::Symmetry, "a symmetric tensor needs at least one leg"))?;
    let flux = match flux {
        Some(f) => charge_of(&g, f)?,
        None => g.identity(),
    };
    Ok(SymmetricLayout::new(g, legs, flux)?)
}

#[pymethods]
impl Universe {
    /// A symmetric tensor of zeros with `legs` and `flux` (default: the
    /// identity charge): only the charge-allowed blocks are stored.
    ///
    /// Raises ``SymmetryError`` for no legs, legs of different groups, or
    /// a flux no block can carry.
    #[pyo3(signature = (legs, flux=None, dtype=None))]
    fn sym_zeros(
        &self,
        py: Python<'_>,
        legs: Vec<Leg>,
        flux: Option<Bound<'_, PyAny>>,
        dtype: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Tensor> {
        let r = (|| {
            let h = self.handle()?;
            let layout = layout_of(legs, flux.as_ref())?;
            let d = dtype_or_f64(py, dtype)?;
            let t = h.call(py, move |ctl| Ok(dist::sym_zeros(ctl, layout, d)?))?;
            Ok(Tensor::wrap(t, &h))
        })();
        py_result(py, r)
    }

    /// A random symmetric tensor with `legs` and `flux`: its dense
    /// embedding is ``random(shape, dtype, seed=seed)`` of the dense shape
    /// with every charge-forbidden block set to zero (for every tiling and
    /// number of ranks). Raises as :meth:`sym_zeros`.
    #[pyo3(signature = (legs, flux=None, dtype=None, seed=0))]
    fn sym_random(
        &self,
        py: Python<'_>,
        legs: Vec<Leg>,
        flux: Option<Bound<'_, PyAny>>,
        dtype: Option<Bound<'_, PyAny>>,
        seed: u64,
    ) -> PyResult<Tensor> {
        let r = (|| {
            let h = self.handle()?;
            let layout = layout_of(legs, flux.as_ref())?;
            let d = dtype_or_f64(py, dtype)?;
            let t = h.call(py, move |ctl| Ok(dist::sym_random(ctl, layout, d, seed)?))?;
            Ok(Tensor::wrap(t, &h))
        })();
        py_result(py, r)
    }

    /// The identity on `legs` as a symmetric tensor with legs ``legs``
    /// followed by their duals and flux zero; its dense embedding is the
    /// identity matrix of the legs' dimensions, reshaped.
    #[pyo3(signature = (legs, dtype=None))]
    fn sym_identity(&self, py: Python<'_>, legs: Vec<Leg>, dtype: Option<Bound<'_, PyAny>>) -> PyResult<Tensor> {
        let r = (|| {
            let h = self.handle()?;
            let legs: Vec<DistLeg> = legs.into_iter().map(|l| l.l).collect();
            let d = dtype_or_f64(py, dtype)?;
            let t = h.call(py, move |ctl| Ok(dist::sym_identity(ctl, &legs, d)?))?;
            Ok(Tensor::wrap(t, &h))
        })();
        py_result(py, r)
    }

    /// A symmetric tensor with `legs` and `flux` whose dense embedding is
    /// `arr` (of shape ``[leg.dim for leg in legs]``): the charge-allowed
    /// blocks are cut out of `arr` and scattered.
    ///
    /// Raises ``SymmetryError`` when an entry of a charge-forbidden block
    /// exceeds `tol` in magnitude (the message names the block, its
    /// charges and the flux), ``ShapeError`` for the wrong shape,
    /// ``OptionError`` for a negative `tol`.
    #[pyo3(signature = (arr, legs, flux=None, tol=0.0))]
    // The Python name of `DistTensor::from_dense`, a method of the universe.
    #[allow(clippy::wrong_self_convention)]
    fn from_dense(
        &self,
        py: Python<'_>,
        arr: &Bound<'_, PyAny>,
        legs: Vec<Leg>,
        flux: Option<Bound<'_, PyAny>>,
        tol: f64,
    ) -> PyResult<Tensor> {
        let r = (|| {
            let h = self.handle()?;
            let layout = layout_of(legs, flux.as_ref())?;
            let local = local_from_numpy(py, arr)?;
            let t = h.call(py, move |ctl| Ok(DistTensor::from_dense(ctl, &local, layout, tol)?))?;
            Ok(Tensor::wrap(t, &h))
        })();
        py_result(py, r)
    }
}

/// A block of a symmetric tensor read by :meth:`Tensor.sector_blocks`:
/// the sector charges and dense offsets along each leg, and its values.
type BlockItem<'py> = (Bound<'py, PyTuple>, Vec<usize>, Bound<'py, PyAny>);

#[pymethods]
impl Tensor {
    /// True for a symmetric (block-sparse) tensor.
    #[getter]
    fn is_symmetric(&self) -> bool {
        self.t.is_symmetric()
    }

    /// The legs of a symmetric tensor (None for a dense one).
    #[getter]
    fn legs(&self) -> Option<Vec<Leg>> {
        self.t
            .layout()
            .map(|l| l.legs().iter().map(|l| Leg { l: l.clone() }).collect())
    }

    /// The flux of a symmetric tensor, a charge tuple (None for a dense
    /// one): the stored blocks satisfy ``sum_out q - sum_in q = flux``.
    #[getter]
    fn flux<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.t.layout().map(|l| charge_tuple(py, l.flux())).transpose()
    }

    /// The group of a symmetric tensor (None for a dense one).
    #[getter]
    fn symmetry(&self) -> Option<Symmetry> {
        self.t.layout().map(|l| Symmetry {
            g: l.symmetry().clone(),
        })
    }

    /// Number of stored blocks (for a symmetric tensor: its charge-allowed
    /// blocks; for a dense one: every block).
    #[getter]
    fn stored_blocks(&self) -> usize {
        self.t.meta().stored_blocks()
    }

    /// Number of stored elements (``prod(shape)`` for a dense tensor).
    #[getter]
    fn stored_elements(&self) -> usize {
        match self.t.layout() {
            Some(l) => l.stored_elements(),
            None => self.t.len(),
        }
    }

    /// The stored (charge-allowed) blocks of a symmetric tensor, gathered
    /// on the root: a list of ``(charges, offsets, block)`` in tile order,
    /// with `charges` the sector charge of each leg (a tuple of charge
    /// tuples), `offsets` the block's position in the dense embedding and
    /// `block` a numpy array, so that
    /// ``dense[tuple(slice(o, o + n) for o, n in zip(offsets, block.shape))]``
    /// is `block`. Raises ``SymmetryError`` for a dense tensor.
    fn sector_blocks<'py>(&self, py: Python<'py>) -> PyResult<Vec<BlockItem<'py>>> {
        let Some(layout) = self.t.layout().cloned() else {
            return py_result(
                py,
                Err(Failure::new(
                    Kind::Symmetry,
                    "sector_blocks: the tensor is dense (use to_numpy)",
                )),
            );
        };
        let t = self.t.clone();
        let r = self
            .h
            .call(py, move |ctl| Ok(t.to_dense(ctl)?))
            .and_then(|l| local_to_numpy(py, l));
        let dense = py_result(py, r)?;
        let mut out = Vec::with_capacity(layout.blocks().len());
        for (b, blk) in layout.blocks().iter().enumerate() {
            let offsets = layout.block_offsets(b);
            let extents = layout.block_extents(b);
            let charges = blk
                .sectors
                .iter()
                .zip(layout.legs())
                .map(|(&s, l)| charge_tuple(py, &l.sectors()[s].charge))
                .collect::<PyResult<Vec<_>>>()?;
            let slices = offsets
                .iter()
                .zip(&extents)
                .map(|(&o, &n)| PySlice::new(py, o as isize, (o + n) as isize, 1))
                .collect::<Vec<_>>();
            let key = PyTuple::new(py, slices)?;
            let block = dense.get_item(key)?.call_method0("copy")?;
            out.push((PyTuple::new(py, charges)?, offsets, block));
        }
        Ok(out)
    }
}

/// Fuses `count` adjacent legs of the symmetric tensor `t`, from leg
/// `first`, into one leg of `direction` (TeNPy's ``combine_legs``):
/// returns ``(fused tensor, fusion)``. The fused leg groups its states by
/// charge, so the dense embedding of the result is `t`'s with the fused
/// modes reshaped row-major and then permuted by ``fusion.fuse_index``.
/// Not ``reshape`` (which refuses symmetric tensors).
///
/// Raises ``SymmetryError`` for a dense tensor or legs out of range.
#[pyfunction]
#[pyo3(signature = (t, first, count, direction="out"))]
pub(crate) fn fuse_legs(
    py: Python<'_>,
    t: &Tensor,
    first: usize,
    count: usize,
    direction: &str,
) -> PyResult<(Tensor, Fusion)> {
    let r = (|| {
        let d = direction_of(direction)?;
        let x = t.t.clone();
        let (out, f) =
            t.h.call(py, move |ctl| Ok(dist::fuse_legs(ctl, &x, first, count, d)?))?;
        Ok((Tensor::wrap(out, &t.h), Fusion { f }))
    })();
    py_result(py, r)
}

/// Splits leg `leg` of the symmetric tensor `t` into the legs that
/// `fusion` fused: the exact inverse of :func:`fuse_legs` (the leg may
/// also be the dual of the fused leg, as after ``conj``).
///
/// Raises ``SymmetryError`` for a dense tensor, a leg out of range, or a
/// leg that is not the fusion's fused leg.
#[pyfunction]
pub(crate) fn split_leg(py: Python<'_>, t: &Tensor, leg: usize, fusion: &Fusion) -> PyResult<Tensor> {
    let x = t.t.clone();
    let f = fusion.f.clone();
    let r = t.h.call(py, move |ctl| Ok(dist::split_leg(ctl, &x, leg, &f)?));
    py_result(py, r.map(|o| Tensor::wrap(o, &t.h)))
}
