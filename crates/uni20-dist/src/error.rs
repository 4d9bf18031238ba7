//! Errors of distributed operations.

use std::path::PathBuf;

use uni20_dispatch::{ContractError, DTypeError, SpecError, TensorError};
use uni20_worker::JobError;

/// Error of a distributed tensor operation.
///
/// Validation errors (`Spec`, `Shape`, `Blocking`, `BlockSize`, `Npy`, ...)
/// are detected on the root before anything is submitted: nothing ran and
/// nothing was lost. `Job` means a submitted command failed (fail-stop).
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    /// The einsum spec is malformed or does not fit the operands.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// Operand shapes or dtypes are incompatible.
    #[error("{0}")]
    Shape(String),
    /// Root-side validation of the local contraction contract failed.
    #[error(transparent)]
    Contract(#[from] ContractError),
    /// An index is blocked differently in two operands.
    #[error(
        "index `{label}` is blocked as {first:?} in one operand and {second:?} in another; use the same block size"
    )]
    Blocking {
        /// The index label.
        label: char,
        /// Block extents in the first operand.
        first: Vec<usize>,
        /// Block extents in the other operand.
        second: Vec<usize>,
    },
    /// Block size zero.
    #[error("block size must be at least 1")]
    BlockSize,
    /// A local tensor could not be built.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// Unsupported dtype.
    #[error(transparent)]
    DType(#[from] DTypeError),
    /// An npy file is malformed, truncated or unsupported.
    #[error("{}: {reason}", path.display())]
    Npy {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// An I/O error on the root (the message names the file and the OS
    /// error; the error is not chained again as a source).
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// An operand's producing operation failed (its epoch is poisoned with
    /// the first error), or it has no value.
    #[error(transparent)]
    Async(#[from] uni20_async::AsyncError),
    /// A persistent-store operation on the root failed.
    #[error(transparent)]
    Store(#[from] uni20_persist::PersistError),
    /// A submitted command failed, or the job was aborted.
    #[error(transparent)]
    Job(#[from] JobError),
}
