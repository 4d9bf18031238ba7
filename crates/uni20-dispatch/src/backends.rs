//! The contraction backend protocol and the concrete backends.
//!
//! - Protocol: a [`ContractBackend`] accepts or declines a [`ContractProblem`] (checked once
//!   by [`ContractProblem::new`], with [`check_scalars`]) and computes it; a failure after
//!   acceptance is a [`KernelError`]. The ordered list that runs the protocol is
//!   [`crate::BackendList`] (at the crate root, with its attempt log).
//! - Backends: [`FaerBackend`] (batched GEMM via faer), `BlasBackend` (feature `blas`:
//!   the system OpenBLAS through `cblas-sys`), [`ReferenceBackend`] (naive strided loops,
//!   the test oracle; also [`reference_contract`]), `CudaBackend` (feature `cuda`).
//! - [`available_backends`]: name and availability of every backend this build knows (what
//!   `uni20 info` reports); [`GPU_MIN_MACS`]: the size below which `default_gpu_first`
//!   keeps problems on the CPU.

pub use crate::backend::{ContractBackend, KernelError};
#[cfg(feature = "blas")]
pub use crate::blas_backend::BlasBackend;
#[cfg(feature = "cuda")]
pub use crate::cuda::CudaBackend;
pub use crate::defaults::{available_backends, GPU_MIN_MACS};
pub use crate::error::{check_scalars, ScalarRole};
pub use crate::faer_backend::FaerBackend;
pub use crate::problem::{ContractProblem, IndexClasses};
pub use crate::reference::{reference_contract, ReferenceBackend};
