//! # uni20-dispatch
//!
//! Local kernel selection for contractions.
//!
//! - [`LocalTensor`]: dense, owned, row-major tensors with a runtime [`DType`].
//! - [`EinsumSpec`]: two-operand einsum specs with explicit output (`"abc,bcd->ad"`).
//! - [`BackendList`]: an ordered list of [`ContractBackend`]s, most specific first. Each
//!   backend accepts or declines (with a reason); the first acceptance commits, and a failure
//!   after commitment is terminal. [`KernelDispatchError`] lists every attempt in order.
//! - Backends: [`FaerBackend`] (GEMM per batch element via faer) and [`ReferenceBackend`]
//!   (naive strided loops, the test oracle).
//! - [`contract`]: `C = alpha * einsum(spec, A, B) + beta * C` with dtype promotion.
//!
//! The chosen backend is recorded as a `tracing` debug event with target `uni20_dispatch`.
//!
//! ```
//! use uni20_dispatch::{contract, BackendList, EinsumSpec, LocalTensor, C64, DType};
//!
//! let spec = EinsumSpec::parse("ij,jk->ik")?;
//! let a = LocalTensor::from_f64(&[2, 2], vec![1.0, 2.0, 3.0, 4.0])?;
//! let b = LocalTensor::from_c64(&[2, 1], vec![C64::new(1.0, 1.0), C64::new(0.0, -1.0)])?;
//! let out = contract(&spec, C64::new(1.0, 0.0), &a, &b, C64::new(0.0, 0.0), None,
//!                    &BackendList::default_cpu(1))?;
//! assert_eq!(out.dtype(), DType::C64); // f64 x c64 promotes to c64
//! assert_eq!(out.shape(), &[2, 1]);
//! assert_eq!(out.to_c64_vec(), vec![C64::new(1.0, -1.0), C64::new(3.0, -1.0)]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

mod alloc;
mod backend;
mod contract;
#[cfg(feature = "cuda")]
mod cuda;
mod decomp;
mod dtype;
mod elementwise;
mod faer_backend;
mod permute;
mod random;
mod reduce;
mod reference;
mod scalar;
mod spec;
mod tensor;
mod typed;
mod view;

pub use backend::{
    available_backends, AttemptOutcome, BackendList, ContractBackend, ContractProblem, KernelAttempt,
    KernelDispatchError, KernelError,
};
pub use contract::{contract, contract_into, contract_views, contract_with_attempts, ContractError};
#[cfg(feature = "cuda")]
pub use cuda::CudaBackend;
#[cfg(feature = "cuda")]
pub use decomp::cuda_decline::CudaDecompBackend;
pub use decomp::eigh::{eigh, eigh_with_attempts, EighBackend, EighBackendList, EighFactors, EighOptions, EighResult};
pub use decomp::faer_decomp::FaerDecompBackend;
pub use decomp::qr::{
    lq, lq_with_attempts, qr, qr_with_attempts, LqResult, QrBackend, QrBackendList, QrFactors, QrResult,
};
pub use decomp::svd::{svd, svd_with_attempts, SvdBackend, SvdBackendList, SvdFactors, SvdOptions, SvdResult};
pub use decomp::{DecompBackend, DecompBackendList, DecompError, DecompKind, MatrixProblem};
pub use dtype::{DType, DTypeError, C32, C64};
pub use elementwise::{axpby, conj, permute, reshape, reshape_owned, scale, ElementwiseError};
pub use faer_backend::FaerBackend;
pub use random::{identity_block, random_block, zeros_block, BlockError};
pub use reduce::{inner, max_abs, norm_sqr};
pub use reference::{reference_contract, ReferenceBackend};
pub use scalar::Element;
pub use spec::{EinsumSpec, IndexClasses, SpecError};
pub use tensor::{LocalTensor, TensorData, TensorError};
pub use view::{AnyView, StridedView, StridedViewMut, ViewError};
