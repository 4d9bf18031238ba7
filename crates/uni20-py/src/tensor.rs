//! Distributed tensors from and to numpy, einsum, decompositions,
//! element-wise operations, reductions, `.npy` and checkpoint I/O: thin
//! wrappers of `uni20::dist`, each run as one job on the root thread.

use std::sync::Arc;

use numpy::{Complex32, Complex64, PyArrayDyn, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use uni20::dist::decomp::{BondSector, EighOptions, QrOptions, SvdOptions, SvdTruncation};
use uni20::dist::{self as dist, Checkpoint, ContractOptions};
use uni20::{DType, DistTensor, LocalTensor, TensorData, C64};

use crate::errors::{py_result, Failure, Kind, Res};
use crate::universe::{Handle, Universe};

/// A distributed tensor: its blocks live in the ranks' stores; the Python
/// object is a handle (dropping the last handle frees the blocks).
///
/// Operations return at once where the Rust API does (einsum, element-wise
/// operations) and wait where a value is needed (``to_numpy``, reductions,
/// decompositions).
#[pyclass(module = "uni20", frozen)]
pub(crate) struct Tensor {
    pub(crate) t: DistTensor,
    pub(crate) h: Arc<Handle>,
}

impl Tensor {
    pub(crate) fn wrap(t: DistTensor, h: &Arc<Handle>) -> Tensor {
        Tensor { t, h: h.clone() }
    }
}

/// The numpy dtype name of a uni20 dtype.
pub(crate) fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::C32 => "complex64",
        DType::C64 => "complex128",
    }
}

/// Parses a dtype given as a numpy name or type (`"float64"`, `numpy.complex128`, `complex`, ...).
pub(crate) fn parse_dtype(py: Python<'_>, d: &Bound<'_, PyAny>) -> Res<DType> {
    let np = py.import("numpy")?;
    let name: String = np.getattr("dtype")?.call1((d,))?.getattr("name")?.extract()?;
    match name.as_str() {
        "float32" => Ok(DType::F32),
        "float64" => Ok(DType::F64),
        "complex64" => Ok(DType::C32),
        "complex128" => Ok(DType::C64),
        other => Err(Failure::new(
            Kind::DType,
            format!("unsupported dtype {other}: uni20 tensors are float32, float64, complex64 or complex128"),
        )),
    }
}

/// The dtype given as in :func:`parse_dtype`, float64 when none is.
pub(crate) fn dtype_or_f64(py: Python<'_>, dtype: Option<Bound<'_, PyAny>>) -> Res<DType> {
    Ok(dtype.map(|d| parse_dtype(py, &d)).transpose()?.unwrap_or(DType::F64))
}

/// A local tensor with the contents of a numpy array (any layout; integer
/// and boolean arrays become float64).
pub(crate) fn local_from_numpy(py: Python<'_>, arr: &Bound<'_, PyAny>) -> Res<LocalTensor> {
    let np = py.import("numpy")?;
    let mut a = np.getattr("asarray")?.call1((arr,))?;
    let kind: String = a.getattr("dtype")?.getattr("kind")?.extract()?;
    if matches!(kind.as_str(), "b" | "i" | "u") {
        a = a.call_method1("astype", ("float64",))?;
    }
    let shape: Vec<usize> = a.getattr("shape")?.extract()?;
    macro_rules! take {
        ($t:ty, $variant:ident) => {
            if let Ok(x) = a.cast::<PyArrayDyn<$t>>() {
                let ro = x.readonly();
                let v: Vec<$t> = ro.as_array().iter().copied().collect();
                return Ok(LocalTensor::from_data(&shape, TensorData::$variant(v))?);
            }
        };
    }
    take!(f64, F64);
    take!(f32, F32);
    take!(Complex64, C64);
    take!(Complex32, C32);
    let name: String = a.getattr("dtype")?.getattr("name")?.extract()?;
    Err(Failure::new(
        Kind::DType,
        format!("unsupported dtype {name}: uni20 tensors are float32, float64, complex64 or complex128"),
    ))
}

/// The numpy array of a local tensor (C order).
pub(crate) fn local_to_numpy<'py>(py: Python<'py>, t: LocalTensor) -> Res<Bound<'py, PyAny>> {
    let shape = t.shape().to_vec();
    let flat: Bound<'py, PyAny> = match t.into_data() {
        TensorData::F32(v) => numpy::PyArray1::from_vec(py, v).into_any(),
        TensorData::F64(v) => numpy::PyArray1::from_vec(py, v).into_any(),
        TensorData::C32(v) => numpy::PyArray1::from_vec(py, v).into_any(),
        TensorData::C64(v) => numpy::PyArray1::from_vec(py, v).into_any(),
    };
    Ok(flat.call_method1("reshape", (shape,))?)
}

/// A float vector as a 1-d numpy array.
pub(crate) fn vec_to_numpy(py: Python<'_>, v: Vec<f64>) -> Bound<'_, PyAny> {
    numpy::PyArray1::from_vec(py, v).into_any()
}

/// A complex scalar from a Python number.
fn scalar(x: &Bound<'_, PyAny>) -> Res<C64> {
    let c: Complex64 = x.extract()?;
    Ok(c)
}

/// Checks that every tensor belongs to `h`'s universe.
fn same_universe(h: &Arc<Handle>, ts: &[&Tensor]) -> Res<()> {
    if ts.iter().all(|t| Arc::ptr_eq(&t.h, h)) {
        Ok(())
    } else {
        Err(Failure::new(Kind::Shape, "the tensors belong to different universes"))
    }
}

/// A label string `"abc..."` of `n` letters.
fn labels(n: usize) -> Res<String> {
    if n > 52 {
        return Err(Failure::new(
            Kind::Shape,
            format!("{n} modes: at most 52 are supported here"),
        ));
    }
    Ok(('a'..='z').chain('A'..='Z').take(n).collect())
}

#[pymethods]
impl Universe {
    /// A distributed tensor with the contents of `arr` (a numpy array or
    /// anything ``numpy.asarray`` accepts; float32, float64, complex64,
    /// complex128, integers and booleans as float64), in blocks of extent
    /// `block` along every mode, spread over the compute ranks.
    #[pyo3(signature = (arr, block=64))]
    fn tensor(&self, py: Python<'_>, arr: &Bound<'_, PyAny>, block: usize) -> PyResult<Tensor> {
        let r = (|| {
            let h = self.handle()?;
            let local = local_from_numpy(py, arr)?;
            let t = h.call(py, move |ctl| Ok(DistTensor::from_local(ctl, &local, block)?))?;
            Ok(Tensor::wrap(t, &h))
        })();
        py_result(py, r)
    }

    /// A tensor of zeros of `shape` and `dtype`.
    #[pyo3(signature = (shape, dtype=None, block=64))]
    fn zeros(
        &self,
        py: Python<'_>,
        shape: Vec<usize>,
        dtype: Option<Bound<'_, PyAny>>,
        block: usize,
    ) -> PyResult<Tensor> {
        let r = (|| {
            let h = self.handle()?;
            let d = dtype_or_f64(py, dtype)?;
            let t = h.call(py, move |ctl| Ok(dist::zeros(ctl, &shape, d, block)?))?;
            Ok(Tensor::wrap(t, &h))
        })();
        py_result(py, r)
    }

    /// A tensor of uniform random numbers in [-1, 1) (real and imaginary
    /// parts), reproducible from `seed` whatever the number of ranks.
    #[pyo3(signature = (shape, dtype=None, block=64, seed=0))]
    fn random(
        &self,
        py: Python<'_>,
        shape: Vec<usize>,
        dtype: Option<Bound<'_, PyAny>>,
        block: usize,
        seed: u64,
    ) -> PyResult<Tensor> {
        let r = (|| {
            let h = self.handle()?;
            let d = dtype_or_f64(py, dtype)?;
            let t = h.call(py, move |ctl| Ok(dist::random(ctl, &shape, d, block, seed)?))?;
            Ok(Tensor::wrap(t, &h))
        })();
        py_result(py, r)
    }

    /// The identity viewed as a tensor: the first `row_modes` modes are the
    /// rows, the rest the columns (their flattened extents must agree).
    #[pyo3(signature = (shape, row_modes, dtype=None, block=64))]
    fn identity(
        &self,
        py: Python<'_>,
        shape: Vec<usize>,
        row_modes: usize,
        dtype: Option<Bound<'_, PyAny>>,
        block: usize,
    ) -> PyResult<Tensor> {
        let r = (|| {
            let h = self.handle()?;
            let d = dtype_or_f64(py, dtype)?;
            let t = h.call(py, move |ctl| Ok(dist::identity(ctl, &shape, d, block, row_modes)?))?;
            Ok(Tensor::wrap(t, &h))
        })();
        py_result(py, r)
    }

    /// Reads a ``.npy`` file (little-endian f4, f8, c8, c16; C or Fortran
    /// order) straight into a distributed tensor: each rank reads the
    /// blocks it owns. The file must be readable at the same path by every
    /// rank.
    #[pyo3(signature = (path, block=64))]
    fn read_npy(&self, py: Python<'_>, path: std::path::PathBuf, block: usize) -> PyResult<Tensor> {
        let r = (|| {
            let h = self.handle()?;
            let t = h.call(py, move |ctl| Ok(dist::read_npy(ctl, &path, block)?))?;
            Ok(Tensor::wrap(t, &h))
        })();
        py_result(py, r)
    }

    /// Writes a checkpoint: `tensors` (a dict name -> Tensor), with a
    /// `label`, a `step` counter and float `scalars`. Returns its id
    /// (``"r0:N@<nonce>"``), which :meth:`restore` takes. Durable when the
    /// universe has a ``store_dir``.
    #[pyo3(signature = (tensors, label="", step=0, scalars=None))]
    fn checkpoint(
        &self,
        py: Python<'_>,
        tensors: &Bound<'_, PyDict>,
        label: &str,
        step: u64,
        scalars: Option<Vec<f64>>,
    ) -> PyResult<String> {
        let r = (|| {
            let h = self.handle()?;
            let mut named = Vec::new();
            for (k, v) in tensors.iter() {
                let name: String = k.extract()?;
                let t = v.cast::<Tensor>().map_err(PyErr::from)?;
                same_universe(&h, &[t.get()])?;
                named.push((name, t.get().t.clone()));
            }
            let label = label.to_string();
            let scalars = scalars.unwrap_or_default();
            h.call(py, move |ctl| {
                let mut cp = Checkpoint {
                    label,
                    step,
                    scalars,
                    ..Checkpoint::default()
                };
                for (name, t) in &named {
                    cp.add(ctl, name, t)?;
                }
                let id = dist::checkpoint(ctl, &cp)?;
                Ok(id.id().to_string())
            })
        })();
        py_result(py, r)
    }

    /// Restores the checkpoint `id` (as :meth:`checkpoint` returned it,
    /// possibly in an earlier run with the same ``store_dir`` and number of
    /// ranks). Returns ``(label, step, scalars, tensors)`` with `scalars` a
    /// numpy array and `tensors` a dict name -> Tensor.
    fn restore<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyAny>> {
        let r = (|| {
            let h = self.handle()?;
            let oid: uni20::persist::ObjectId = id
                .parse()
                .map_err(|e| Failure::new(Kind::Checkpoint, format!("invalid checkpoint id {id:?}: {e}")))?;
            let (label, step, scalars, tensors) = h.call(py, move |ctl| {
                let cp = dist::restore(ctl, oid)?;
                let mut ts = Vec::new();
                for (name, _) in &cp.tensors {
                    ts.push((name.clone(), cp.tensor(ctl, name)?));
                }
                Ok((cp.label.clone(), cp.step, cp.scalars.clone(), ts))
            })?;
            let d = PyDict::new(py);
            for (name, t) in tensors {
                d.set_item(name, Tensor::wrap(t, &h))?;
            }
            let tuple = (label, step, vec_to_numpy(py, scalars), d).into_pyobject(py)?;
            Ok(tuple.into_any())
        })();
        py_result(py, r)
    }
}

#[pymethods]
impl Tensor {
    /// The shape.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.t.shape().to_vec()
    }

    /// The numpy name of the element type (``"float64"``, ...).
    #[getter]
    fn dtype(&self) -> &'static str {
        dtype_name(self.t.dtype())
    }

    /// Number of modes.
    #[getter]
    fn ndim(&self) -> usize {
        self.t.shape().len()
    }

    /// The block extents of every mode (a list per mode).
    #[getter]
    fn blocks(&self) -> Vec<Vec<usize>> {
        self.t.blocking().extents().to_vec()
    }

    /// The whole tensor as a numpy array (gathered on the root; waits for it).
    fn to_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = self.t.clone();
        let r = self
            .h
            .call(py, move |ctl| Ok(t.to_local(ctl)?))
            .and_then(|l| local_to_numpy(py, l));
        py_result(py, r)
    }

    /// numpy's array protocol: ``numpy.asarray(t)`` gathers the tensor.
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = copy;
        let a = self.to_numpy(py)?;
        match dtype {
            Some(d) => a.call_method1("astype", (d,)),
            None => Ok(a),
        }
    }

    /// Waits until the tensor is computed (raises its producing
    /// operation's failure).
    fn wait(&self, py: Python<'_>) -> PyResult<()> {
        let t = self.t.clone();
        py_result(py, self.h.call(py, move |ctl| Ok(t.wait(ctl)?)))
    }

    /// The Frobenius norm.
    fn norm(&self, py: Python<'_>) -> PyResult<f64> {
        let t = self.t.clone();
        py_result(py, self.h.call(py, move |ctl| Ok(dist::norm(ctl, &t)?)))
    }

    /// The largest modulus of an element.
    fn max_abs(&self, py: Python<'_>) -> PyResult<f64> {
        let t = self.t.clone();
        py_result(py, self.h.call(py, move |ctl| Ok(dist::max_abs(ctl, &t)?)))
    }

    /// The complex conjugate (a copy for real tensors).
    fn conj(&self, py: Python<'_>) -> PyResult<Tensor> {
        let t = self.t.clone();
        let r = self.h.call(py, move |ctl| Ok(dist::conj(ctl, &t)?));
        py_result(py, r.map(|t| Tensor::wrap(t, &self.h)))
    }

    /// The modes permuted: `axes` as in ``numpy.transpose`` (default:
    /// reversed), or a spec string such as ``"abc->cab"``.
    #[pyo3(signature = (axes=None))]
    fn transpose(&self, py: Python<'_>, axes: Option<Bound<'_, PyAny>>) -> PyResult<Tensor> {
        let r = (|| {
            let n = self.t.shape().len();
            let from = labels(n)?;
            let spec = match axes {
                Some(a) if a.is_instance_of::<pyo3::types::PyString>() => a.extract::<String>()?,
                Some(a) => {
                    let ax: Vec<usize> = a.extract()?;
                    let mut sorted = ax.clone();
                    sorted.sort_unstable();
                    if sorted != (0..n).collect::<Vec<_>>() {
                        return Err(Failure::new(
                            Kind::Shape,
                            format!("transpose: axes {ax:?} are not a permutation of {n} modes"),
                        ));
                    }
                    let chars: Vec<char> = from.chars().collect();
                    format!("{from}->{}", ax.iter().map(|&k| chars[k]).collect::<String>())
                }
                None => format!("{from}->{}", from.chars().rev().collect::<String>()),
            };
            let t = self.t.clone();
            let out = self.h.call(py, move |ctl| Ok(dist::permute(ctl, &t, &spec)?))?;
            Ok(Tensor::wrap(out, &self.h))
        })();
        py_result(py, r)
    }

    /// The tensor with a new shape that fuses adjacent modes or splits one
    /// mode into adjacent modes (row-major, as numpy).
    fn reshape(&self, py: Python<'_>, shape: Vec<usize>) -> PyResult<Tensor> {
        let t = self.t.clone();
        let r = self.h.call(py, move |ctl| Ok(dist::reshape(ctl, &t, &shape)?));
        py_result(py, r.map(|t| Tensor::wrap(t, &self.h)))
    }

    /// Writes the tensor to a ``.npy`` file (each rank writes its blocks
    /// into the file, which must be on a file system every rank sees).
    fn write_npy(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        let t = self.t.clone();
        py_result(py, self.h.call(py, move |ctl| Ok(dist::write_npy(ctl, &t, &path)?)))
    }

    fn __add__(&self, py: Python<'_>, other: &Tensor) -> PyResult<Tensor> {
        axpby_same(py, C64::new(1.0, 0.0), self, C64::new(1.0, 0.0), other)
    }

    fn __sub__(&self, py: Python<'_>, other: &Tensor) -> PyResult<Tensor> {
        axpby_same(py, C64::new(1.0, 0.0), self, C64::new(-1.0, 0.0), other)
    }

    fn __neg__(&self, py: Python<'_>) -> PyResult<Tensor> {
        scale_by(py, self, C64::new(-1.0, 0.0))
    }

    fn __mul__(&self, py: Python<'_>, alpha: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        let a = py_result(py, scalar(alpha))?;
        scale_by(py, self, a)
    }

    fn __rmul__(&self, py: Python<'_>, alpha: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.__mul__(py, alpha)
    }

    fn __truediv__(&self, py: Python<'_>, alpha: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        let a = py_result(py, scalar(alpha))?;
        scale_by(py, self, C64::new(1.0, 0.0) / a)
    }

    fn __repr__(&self) -> String {
        format!(
            "Tensor(shape={:?}, dtype={})",
            self.t.shape(),
            dtype_name(self.t.dtype())
        )
    }
}

fn scale_by(py: Python<'_>, t: &Tensor, alpha: C64) -> PyResult<Tensor> {
    let x = t.t.clone();
    let r = t.h.call(py, move |ctl| Ok(dist::scale(ctl, alpha, &x)?));
    py_result(py, r.map(|x| Tensor::wrap(x, &t.h)))
}

fn axpby_same(py: Python<'_>, alpha: C64, a: &Tensor, beta: C64, b: &Tensor) -> PyResult<Tensor> {
    let r = (|| {
        same_universe(&a.h, &[b])?;
        let l = labels(a.t.shape().len())?;
        let spec = format!("{l},{l}->{l}");
        let (x, y) = (a.t.clone(), b.t.clone());
        let out =
            a.h.call(py, move |ctl| Ok(dist::axpby(ctl, alpha, &x, beta, &y, &spec)?))?;
        Ok(Tensor::wrap(out, &a.h))
    })();
    py_result(py, r)
}

/// ``alpha * einsum(spec, *operands) + beta * c`` on one or two
/// distributed tensors, with numpy's einsum semantics (traces, diagonals,
/// ellipsis broadcasting, implicit output). Returns at once; the result is
/// computed on the workers.
///
/// Raises ``SpecError`` for a malformed spec or one that does not match
/// the shapes, ``ShapeError`` for a `c` of the wrong shape, ``DTypeError``
/// for mixed dtypes or a complex scalar with a real output.
#[pyfunction]
#[pyo3(signature = (spec, *operands, alpha=None, beta=None, c=None))]
pub(crate) fn einsum(
    py: Python<'_>,
    spec: &str,
    operands: Vec<PyRef<'_, Tensor>>,
    alpha: Option<Bound<'_, PyAny>>,
    beta: Option<Bound<'_, PyAny>>,
    c: Option<PyRef<'_, Tensor>>,
) -> PyResult<Tensor> {
    let r = (|| {
        let first = operands
            .first()
            .ok_or_else(|| Failure::new(Kind::Spec, "einsum needs one or two operands"))?;
        let h = first.h.clone();
        let refs: Vec<&Tensor> = operands.iter().map(|t| &**t).chain(c.as_deref()).collect();
        same_universe(&h, &refs)?;
        let ops: Vec<DistTensor> = operands.iter().map(|t| t.t.clone()).collect();
        let cin = c.as_ref().map(|t| t.t.clone());
        let alpha = alpha.map(|a| scalar(&a)).transpose()?.unwrap_or(C64::new(1.0, 0.0));
        let beta = beta.map(|b| scalar(&b)).transpose()?.unwrap_or(C64::new(0.0, 0.0));
        let spec = spec.to_string();
        let out = h.call(py, move |ctl| {
            let refs: Vec<&DistTensor> = ops.iter().collect();
            let opts = ContractOptions {
                alpha,
                beta,
                c: cin.as_ref(),
                ..ContractOptions::default()
            };
            Ok(dist::einsum(ctl, spec.as_str(), &refs, &opts)?)
        })?;
        Ok(Tensor::wrap(out, &h))
    })();
    py_result(py, r)
}

/// ``alpha * a + beta * b`` with `b`'s modes matched to `a`'s by `spec`
/// (``"ij,ji->ij"``; default: the same modes in the same order).
#[pyfunction]
#[pyo3(signature = (alpha, a, beta, b, spec=None))]
pub(crate) fn axpby(
    py: Python<'_>,
    alpha: &Bound<'_, PyAny>,
    a: &Tensor,
    beta: &Bound<'_, PyAny>,
    b: &Tensor,
    spec: Option<String>,
) -> PyResult<Tensor> {
    let r = (|| {
        same_universe(&a.h, &[b])?;
        let (al, be) = (scalar(alpha)?, scalar(beta)?);
        let spec = match spec {
            Some(s) => s,
            None => {
                let l = labels(a.t.shape().len())?;
                format!("{l},{l}->{l}")
            }
        };
        let (x, y) = (a.t.clone(), b.t.clone());
        let out = a.h.call(py, move |ctl| Ok(dist::axpby(ctl, al, &x, be, &y, &spec)?))?;
        Ok(Tensor::wrap(out, &a.h))
    })();
    py_result(py, r)
}

/// ``sum_k c_k * t_k`` over ``terms``, a sequence of ``(coefficient,
/// tensor)`` pairs of one shape (dense or symmetric with the same legs and
/// flux; tilings may differ), as one element-wise operation: each output
/// element is accumulated in double precision in term order and rounded
/// once. The output has the first tensor's tiling and the promotion of the
/// terms' dtypes; a term after the first with coefficient 0 is not read.
/// Returns at once; the result is computed on the workers.
///
/// Raises ``ShapeError`` for an empty ``terms``, a term of another shape
/// or a tensor of another universe; ``SymmetryError`` for dense and
/// symmetric terms mixed or other legs or flux; ``DTypeError`` for a
/// complex coefficient with a real output.
#[pyfunction]
pub(crate) fn lincomb(py: Python<'_>, terms: Vec<(Bound<'_, PyAny>, PyRef<'_, Tensor>)>) -> PyResult<Tensor> {
    let r = (|| {
        let first = terms
            .first()
            .ok_or_else(|| Failure::new(Kind::Shape, "lincomb needs at least one (coefficient, tensor) term"))?;
        let h = first.1.h.clone();
        let refs: Vec<&Tensor> = terms.iter().map(|(_, t)| &**t).collect();
        same_universe(&h, &refs)?;
        let owned: Vec<(C64, DistTensor)> = terms
            .iter()
            .map(|(c, t)| Ok((scalar(c)?, t.t.clone())))
            .collect::<Result<_, Failure>>()?;
        let out = h.call(py, move |ctl| {
            let borrowed: Vec<(C64, &DistTensor)> = owned.iter().map(|(c, t)| (*c, t)).collect();
            Ok(dist::lincomb(ctl, &borrowed)?)
        })?;
        Ok(Tensor::wrap(out, &h))
    })();
    py_result(py, r)
}

/// ``numpy.vdot(a, b)``: the sum of ``conj(a) * b`` over all elements
/// (a complex number).
#[pyfunction]
pub(crate) fn inner(py: Python<'_>, a: &Tensor, b: &Tensor) -> PyResult<Complex64> {
    let r = (|| {
        same_universe(&a.h, &[b])?;
        let (x, y) = (a.t.clone(), b.t.clone());
        a.h.call(py, move |ctl| Ok(dist::inner(ctl, &x, &y)?))
    })();
    py_result(py, r)
}

/// The result of :func:`svd`.
#[pyclass(module = "uni20", frozen, get_all)]
pub(crate) struct SvdResult {
    /// Shape ``(row modes.., k)``, orthonormal columns.
    u: Py<Tensor>,
    /// The kept singular values (numpy array), ``s[j]`` that of column
    /// ``u[..., j]`` and row ``vh[j, ...]``: non-increasing for a dense
    /// input; for a symmetric one, sector after sector in the order of the
    /// bond leg (non-increasing within each sector; see `sectors`).
    s: Py<PyAny>,
    /// Shape ``(k, column modes..)``, orthonormal rows.
    vh: Py<Tensor>,
    /// The discarded singular values (numpy array).
    discarded: Py<PyAny>,
    /// ``sum(discarded**2) / sum(all s**2)``.
    discarded_weight: f64,
    /// Symmetric input: ``(charge, values)`` of every sector of the bond
    /// leg (``u.legs[-1]``), in its order; empty for a dense input.
    sectors: Vec<(Py<PyTuple>, Py<PyAny>)>,
}

#[pymethods]
impl SvdResult {
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let l = PyList::new(
            py,
            [
                self.u.clone_ref(py).into_any(),
                self.s.clone_ref(py),
                self.vh.clone_ref(py).into_any(),
            ],
        )?;
        l.as_any().try_iter().map(|i| i.into_any())
    }
}

/// The values of the bond sectors one after the other (the order of the
/// bond leg's dense embedding).
fn bond_order(sectors: &[BondSector]) -> Vec<f64> {
    sectors.iter().flat_map(|b| b.values.iter().copied()).collect()
}

fn sectors_to_py(py: Python<'_>, sectors: Vec<BondSector>) -> PyResult<Vec<(Py<PyTuple>, Py<PyAny>)>> {
    sectors
        .into_iter()
        .map(|b| {
            Ok((
                crate::symmetric::charge_tuple(py, &b.charge)?.unbind(),
                vec_to_numpy(py, b.values).unbind(),
            ))
        })
        .collect()
}

/// The thin SVD ``A ~= U diag(s) Vh`` of `t` viewed as a matrix by
/// `split` (``"ab|c"``: modes a, b are the rows, c the columns; or
/// ``"abc->ca|b"`` to reorder), truncated by `max_rank`, `cutoff`
/// (absolute, keep values above it) and `max_discarded_weight`. Returns
/// an :class:`SvdResult`, which also unpacks as ``u, s, vh``.
///
/// A symmetric `t` is decomposed sector by sector (the truncation chooses
/// over all sectors together); `u` and `vh` are symmetric, joined by a new
/// bond leg whose sectors are listed in ``SvdResult.sectors``.
///
/// Raises ``SpecError`` for a bad split, ``OptionError`` for an invalid
/// truncation, ``NonFiniteError`` for NaN or infinite entries.
#[pyfunction]
#[pyo3(signature = (t, split, max_rank=None, cutoff=None, max_discarded_weight=None, block=None))]
pub(crate) fn svd(
    py: Python<'_>,
    t: &Tensor,
    split: String,
    max_rank: Option<usize>,
    cutoff: Option<f64>,
    max_discarded_weight: Option<f64>,
    block: Option<usize>,
) -> PyResult<SvdResult> {
    let x = t.t.clone();
    let r = t.h.call(py, move |ctl| {
        let opts = SvdOptions {
            truncation: SvdTruncation {
                max_rank,
                cutoff,
                max_discarded_weight,
                ..SvdTruncation::default()
            },
            k_block: block,
            ..SvdOptions::default()
        };
        let o = dist::svd(ctl, &x, &split, &opts)?;
        Ok((o.u, o.s, o.vh, o.discarded, o.discarded_weight, o.sectors))
    });
    let (u, s, vh, discarded, w, sectors) = py_result(py, r)?;
    let s = if sectors.is_empty() { s } else { bond_order(&sectors) };
    Ok(SvdResult {
        u: Py::new(py, Tensor::wrap(u, &t.h))?,
        s: vec_to_numpy(py, s).unbind(),
        vh: Py::new(py, Tensor::wrap(vh, &t.h))?,
        discarded: vec_to_numpy(py, discarded).unbind(),
        discarded_weight: w,
        sectors: sectors_to_py(py, sectors)?,
    })
}

/// The thin QR ``A = Q R`` of `t` viewed as a matrix by `split`;
/// ``(q, r)``, `r` with a real non-negative diagonal.
#[pyfunction]
#[pyo3(signature = (t, split, block=None))]
pub(crate) fn qr(py: Python<'_>, t: &Tensor, split: String, block: Option<usize>) -> PyResult<(Tensor, Tensor)> {
    let x = t.t.clone();
    let r = t.h.call(py, move |ctl| {
        let o = dist::qr(
            ctl,
            &x,
            &split,
            &QrOptions {
                k_block: block,
                ..QrOptions::default()
            },
        )?;
        Ok((o.q, o.r))
    });
    let (q, rr) = py_result(py, r)?;
    Ok((Tensor::wrap(q, &t.h), Tensor::wrap(rr, &t.h)))
}

/// The thin LQ ``A = L Q`` of `t` viewed as a matrix by `split`; ``(l, q)``.
#[pyfunction]
#[pyo3(signature = (t, split, block=None))]
pub(crate) fn lq(py: Python<'_>, t: &Tensor, split: String, block: Option<usize>) -> PyResult<(Tensor, Tensor)> {
    let x = t.t.clone();
    let r = t.h.call(py, move |ctl| {
        let o = dist::lq(
            ctl,
            &x,
            &split,
            &QrOptions {
                k_block: block,
                ..QrOptions::default()
            },
        )?;
        Ok((o.l, o.q))
    });
    let (l, q) = py_result(py, r)?;
    Ok((Tensor::wrap(l, &t.h), Tensor::wrap(q, &t.h)))
}

/// The eigendecomposition ``A = V diag(w) V^H`` of a Hermitian matrix view
/// of `t`; ``(w, v)`` with `w` a numpy array and `v` of shape ``(row
/// modes.., n)``, ``w[j]`` the eigenvalue of ``v[..., j]``: non-decreasing
/// for a dense `t`; for a symmetric one (flux zero, column legs the duals
/// of the row legs) sector after sector of the bond leg ``v.legs[-1]``,
/// non-decreasing within each.
///
/// Raises ``ShapeError`` for a non-square view, ``OptionError`` for a
/// matrix that is not Hermitian within `hermitian_rtol`.
#[pyfunction]
#[pyo3(signature = (t, split, hermitian_rtol=None, block=None))]
pub(crate) fn eigh<'py>(
    py: Python<'py>,
    t: &Tensor,
    split: String,
    hermitian_rtol: Option<f64>,
    block: Option<usize>,
) -> PyResult<(Bound<'py, PyAny>, Tensor)> {
    let x = t.t.clone();
    let r = t.h.call(py, move |ctl| {
        let o = dist::eigh(
            ctl,
            &x,
            &split,
            &EighOptions {
                hermitian_rtol,
                k_block: block,
                ..EighOptions::default()
            },
        )?;
        let w = if o.sectors.is_empty() {
            o.values
        } else {
            bond_order(&o.sectors)
        };
        Ok((w, o.vectors))
    });
    let (w, v) = py_result(py, r)?;
    Ok((vec_to_numpy(py, w), Tensor::wrap(v, &t.h)))
}
