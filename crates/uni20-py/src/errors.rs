//! Rust errors as Python exceptions of specific classes.
//!
//! Every binding returns [`Failure`], a `Send` description of what went wrong
//! (built on the root thread, where the error happened), and turns it into a
//! Python exception on the caller's thread with the GIL held
//! ([`Failure::into_pyerr`]). The classes live in `uni20/_errors.py` so that
//! they can derive from the matching built-in exception too (a spec error is
//! also a `ValueError`).

use std::error::Error as StdError;

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use uni20::dist::error::DistError;
use uni20::tn::TnError;
use uni20::JobError;

/// The Python exception class of a [`Failure`] (names of `uni20._errors`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A malformed einsum, label, permutation or split spec.
    Spec,
    /// Shapes, ranks or blockings that do not fit together.
    Shape,
    /// An unsupported or mismatched element type.
    DType,
    /// An option out of range.
    Option,
    /// A model, site or operator sum that does not make sense.
    Model,
    /// Charges, legs, fluxes or layouts of symmetric tensors that do not
    /// fit (a charge not of the group, a forbidden flux, a dense array
    /// that breaks the symmetry, symmetric and dense operands mixed).
    Symmetry,
    /// A checkpoint that is missing or does not hold what is needed.
    Checkpoint,
    /// A file that cannot be read or written.
    File,
    /// NaN or infinity where a finite value is needed.
    NonFinite,
    /// A command failed on a rank, or the job stopped (fail-stop).
    Job,
    /// The universe could not start.
    Startup,
    /// The universe is closed (or was interrupted).
    Closed,
    /// A panic of the Rust code, caught at the boundary (a bug).
    Internal,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Spec => "SpecError",
            Kind::Shape => "ShapeError",
            Kind::DType => "DTypeError",
            Kind::Option => "OptionError",
            Kind::Model => "ModelError",
            Kind::Symmetry => "SymmetryError",
            Kind::Checkpoint => "CheckpointError",
            Kind::File => "FileError",
            Kind::NonFinite => "NonFiniteError",
            Kind::Job => "JobError",
            Kind::Startup => "StartupError",
            Kind::Closed => "UniverseClosedError",
            Kind::Internal => "InternalError",
        }
    }
}

/// A failure of a binding, not yet a Python exception (so that it can be
/// built on the root thread and sent back).
#[derive(Debug)]
pub(crate) enum Failure {
    /// A uni20 error of the given class.
    Uni20 {
        /// The exception class.
        kind: Kind,
        /// The message (the Rust error's text).
        message: String,
        /// The rank the failing command ran on, for job failures.
        rank: Option<usize>,
        /// The failing command's wire name, for job failures.
        command: Option<String>,
    },
    /// An exception raised by Python code (an observer) or by pyo3.
    Python(PyErr),
}

/// The result type of the bindings.
pub(crate) type Res<T> = Result<T, Failure>;

impl Failure {
    /// A failure of class `kind` with `message`.
    pub(crate) fn new(kind: Kind, message: impl Into<String>) -> Failure {
        Failure::Uni20 {
            kind,
            message: message.into(),
            rank: None,
            command: None,
        }
    }

    /// The exception: an instance of `uni20.<Class>(message)` with the
    /// attributes `rank` and `command` (None unless a command failed).
    pub(crate) fn into_pyerr(self, py: Python<'_>) -> PyErr {
        match self {
            Failure::Python(e) => e,
            Failure::Uni20 {
                kind,
                message,
                rank,
                command,
            } => {
                let build = || -> PyResult<PyErr> {
                    let cls = py.import("uni20._errors")?.getattr(kind.class_name())?;
                    let args = PyTuple::new(py, [message.clone()])?;
                    let value = cls.call1(args)?;
                    value.setattr("rank", rank)?;
                    value.setattr("command", command.clone())?;
                    Ok(PyErr::from_value(value))
                };
                build().unwrap_or_else(|e| e)
            }
        }
    }
}

impl From<PyErr> for Failure {
    fn from(e: PyErr) -> Failure {
        Failure::Python(e)
    }
}

/// Converts a binding's result for Python.
pub(crate) fn py_result<T>(py: Python<'_>, r: Res<T>) -> PyResult<T> {
    r.map_err(|f| f.into_pyerr(py))
}

/// The first [`JobError`] in `e`'s source chain (a poisoned tensor carries
/// the failure of the operation that produced it).
fn job_in_chain<'a>(e: &'a (dyn StdError + 'static)) -> Option<&'a JobError> {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(j) = err.downcast_ref::<JobError>() {
            return Some(j);
        }
        match err.downcast_ref::<DistError>() {
            Some(DistError::Job(j)) => return Some(j),
            // A pipelined operation's failure, kept with its tensor
            // (transparent, so `source` would skip the inner error).
            Some(DistError::Failed(inner)) => {
                cur = Some(&**inner);
                continue;
            }
            _ => {}
        }
        cur = err.source();
    }
    None
}

fn job_failure(message: String, j: &JobError) -> Failure {
    let (rank, command) = match j {
        JobError::Command(d) => (Some(d.rank), Some(d.wire_name.clone())),
        _ => (None, None),
    };
    let kind = match j {
        JobError::Startup(_) | JobError::Config { .. } | JobError::RegistryMismatch { .. } => Kind::Startup,
        _ => Kind::Job,
    };
    Failure::Uni20 {
        kind,
        message,
        rank,
        command,
    }
}

impl From<JobError> for Failure {
    fn from(e: JobError) -> Failure {
        job_failure(e.to_string(), &e)
    }
}

fn dist_kind(e: &DistError) -> Kind {
    use DistError as D;
    match e {
        D::Spec(_) | D::Labels(_) | D::Split { .. } => Kind::Spec,
        D::Contract(c) => match c {
            uni20::dispatch::ContractError::Spec(_) => Kind::Spec,
            uni20::dispatch::ContractError::Shape { .. } => Kind::Shape,
            _ => Kind::DType,
        },
        D::Blocking(_)
        | D::BlockingMismatch { .. }
        | D::ShapeMismatch { .. }
        | D::RankMismatch { .. }
        | D::ReshapeNotAdjacent { .. }
        | D::Tensor(_)
        | D::MatrixTooLarge { .. }
        | D::PlanTooLarge { .. } => Kind::Shape,
        D::Elementwise(_) | D::DType(_) => Kind::DType,
        D::Decomp(_) | D::Block(_) | D::BadRank { .. } | D::NoRanks(_) => Kind::Option,
        D::NotFound(_)
        | D::DamagedBlock { .. }
        | D::BadManifest(_)
        | D::Store(uni20::persist::PersistError::NotFound(_)) => Kind::Checkpoint,
        D::Npy { .. } | D::Io { .. } | D::Store(_) => Kind::File,
        D::NonFinite { .. } => Kind::NonFinite,
        D::DenseEmbedding(uni20::dist::symmetry::DenseEmbeddingError::Shape { .. }) => Kind::Shape,
        D::DenseEmbedding(uni20::dist::symmetry::DenseEmbeddingError::Tolerance(_)) => Kind::Option,
        D::Symmetry(_)
        | D::SymContract(_)
        | D::DenseEmbedding(_)
        | D::Layout(_)
        | D::SymLayout(_)
        | D::SymDecomp(_) => Kind::Symmetry,
        _ => Kind::Job,
    }
}

impl From<DistError> for Failure {
    fn from(e: DistError) -> Failure {
        let message = e.to_string();
        if let Some(j) = job_in_chain(&e) {
            return job_failure(message, j);
        }
        Failure::new(dist_kind(&e), message)
    }
}

impl From<TnError> for Failure {
    fn from(e: TnError) -> Failure {
        let message = e.to_string();
        if let Some(j) = job_in_chain(&e) {
            return job_failure(message, j);
        }
        let kind = match &e {
            TnError::Dist(d) => dist_kind(d),
            // Dense with symmetric, or physical legs that differ.
            TnError::InvalidOption {
                name: "MPS and MPO layouts",
                ..
            } => Kind::Symmetry,
            TnError::InvalidOption { .. } => Kind::Option,
            TnError::Shape { .. } | TnError::Tensor(_) => Kind::Shape,
            TnError::BadCheckpoint(_) => Kind::Checkpoint,
            TnError::UnknownOperator { .. }
            | TnError::UnknownState { .. }
            | TnError::ChargeMismatch { .. }
            | TnError::BadTerm { .. } => Kind::Model,
            TnError::Symmetry(_) => Kind::Symmetry,
            TnError::Krylov(_) => Kind::NonFinite,
            _ => Kind::Internal,
        };
        Failure::new(kind, message)
    }
}

impl From<uni20::dist::symmetry::SymmetryError> for Failure {
    fn from(e: uni20::dist::symmetry::SymmetryError) -> Failure {
        Failure::new(Kind::Symmetry, e.to_string())
    }
}

impl From<uni20::dispatch::TensorError> for Failure {
    fn from(e: uni20::dispatch::TensorError) -> Failure {
        Failure::new(Kind::Shape, e.to_string())
    }
}

/// The text of a caught panic's payload.
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}
