//! # uni20-dispatch
//!
//! Local kernel selection for contractions.
//!
//! - [`LocalTensor`]: dense, owned, row-major tensors with a runtime [`DType`].
//! - [`EinsumSpec`]: a numpy einsum spec with one or two operands, parsed once: explicit or
//!   implicit output (`"ij,jk->ik"`, `"ij,jk"`), repeated labels (`"ii->"` trace, `"ii->i"`
//!   diagonal, `"iij,jk->ik"`), ellipsis with broadcasting (`"...ij,...jk->...ik"`).
//!   [`EinsumSpec::resolve`] turns it, for given operand shapes, into a [`ResolvedSpec`]
//!   (ordinary labels only), the form kernels consume and command descriptors carry. Both
//!   serialize as their canonical string and validate when deserialized.
//! - [`BackendList`]: an ordered list of contraction backends, most specific first. Each
//!   backend accepts or declines (with a reason); the first acceptance commits, and a failure
//!   after commitment is terminal. [`KernelDispatchError`] lists every attempt in order. The
//!   default lists ([`BackendList::default_cpu`], [`BackendList::default_gpu_first`],
//!   [`BackendList::reference_only`]) are defined together (`defaults.rs`); contraction and
//!   the decompositions share one dispatch loop.
//! - [`backends`]: the protocol ([`backends::ContractBackend`], [`backends::ContractProblem`]:
//!   a contraction checked once by [`backends::ContractProblem::new`] (spec, shapes, dtypes,
//!   accumulator, [`backends::check_scalars`]) and lowered to the two-operand form backends
//!   run) and the backends: [`backends::FaerBackend`] (batched GEMM via faer over the shared
//!   GEMM lowering), `BlasBackend` (feature `blas`: the system OpenBLAS through `cblas-sys`,
//!   same lowering under CBLAS's layout rules), [`backends::ReferenceBackend`] (naive strided
//!   loops, the test oracle), `CudaBackend` (feature `cuda`).
//! - [`tune`]: measured backend choice. A [`tune::TuneTable`] attached with
//!   [`BackendList::with_tuning`] maps each [`tune::ShapeClass`] (dtype; m, n, k, batch
//!   rounded to powers of two; thread budget) to the backend measured fastest, which dispatch
//!   then tries first; tables are saved and loaded as JSON per machine (`UNI20_TUNE_FILE`,
//!   [`tune::TuneTable::from_env`]).
//! - [`decomp`]: SVD, QR/LQ and Hermitian eigendecomposition of a matrix, each through its
//!   own ordered backend list with the same accept/decline protocol (default lists in
//!   `decomp/defaults.rs`).
//! - [`view`]: strided views, the operands of [`contract_views`] and [`contract_into`].
//! - [`par`]: [`par::map_indexed`], the parallel map of a rank's items in which the rank's
//!   own thread takes part (rayon helpers claim the rest from a shared counter).
//! - [`PairContraction`]: many small block products summed into one output block with
//!   reused buffers (the local kernel of a block-sparse contraction item).
//! - Entry points: [`contract`] (`C = alpha * einsum(spec, A, B) + beta * C` with dtype
//!   promotion), [`contract_unary`] (one operand), [`contract_operands`] (either),
//!   [`contract_views`] and [`contract_into`] (strided views); element-wise operations
//!   ([`axpby`], [`scale`], [`conj`], [`permute`], [`reshape`]), creation ([`random_block`],
//!   [`zeros_block`], [`identity_block`]) and reductions ([`inner`], [`norm_sqr`],
//!   [`max_abs`]).
//!
//! The chosen backend, the tuning decision with its timings, and the GEMM plan are recorded as
//! `tracing` debug events with target `uni20_dispatch` (`UNI20_LOG=debug`).
//!
//! ```
//! use uni20_dispatch::{contract, contract_unary, BackendList, EinsumSpec, LocalTensor, C64, DType};
//!
//! let one = C64::new(1.0, 0.0);
//! let zero = C64::new(0.0, 0.0);
//! let cpu = BackendList::default_cpu(1);
//! let a = LocalTensor::from_f64(&[2, 2], vec![1.0, 2.0, 3.0, 4.0])?;
//! let b = LocalTensor::from_c64(&[2, 1], vec![C64::new(1.0, 1.0), C64::new(0.0, -1.0)])?;
//! let out = contract("ij,jk->ik", one, &a, &b, zero, None, &cpu)?;
//! assert_eq!(out.dtype(), DType::C64); // f64 x c64 promotes to c64
//! assert_eq!(out.shape(), &[2, 1]);
//! assert_eq!(out.to_c64_vec(), vec![C64::new(1.0, -1.0), C64::new(3.0, -1.0)]);
//!
//! // One operand: the trace, and the diagonal.
//! let tr = contract_unary("ii", one, &a, zero, None, &cpu)?;
//! assert_eq!(tr.to_c64_vec(), vec![C64::new(5.0, 0.0)]);
//! let diag = contract_unary("ii->i", one, &a, zero, None, &cpu)?;
//! assert_eq!(diag.to_c64_vec(), vec![C64::new(1.0, 0.0), C64::new(4.0, 0.0)]);
//!
//! // Ellipsis with broadcasting: a batch of 3 matrices times one matrix (batch extent 1).
//! let x = LocalTensor::from_f64(&[3, 2, 2], (0..12).map(f64::from).collect())?;
//! let y = LocalTensor::from_f64(&[1, 2, 2], vec![1.0, 0.0, 0.0, 2.0])?;
//! let spec = EinsumSpec::parse("...ij,...jk->...ik")?;
//! let r = spec.resolve(&[x.shape(), y.shape()])?; // concrete: what a descriptor carries
//! assert_eq!(r.to_string(), "Aij,Bjk->Aik");
//! let z = contract(&spec, one, &x, &y, zero, None, &cpu)?;
//! assert_eq!(z.shape(), &[3, 2, 2]);
//! assert_eq!(z.to_c64_vec()[..4], [0.0, 2.0, 2.0, 6.0].map(|v| C64::new(v, 0.0)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]
#![deny(unreachable_pub)]

mod alloc;
mod backend;
pub mod backends;
#[cfg(feature = "blas")]
mod blas_backend;
mod contract;
#[cfg(feature = "cuda")]
mod cuda;
pub mod decomp;
mod defaults;
mod dtype;
mod elementwise;
mod error;
mod faer_backend;
mod lower;
mod options;
mod pairs;
pub mod par;
mod permute;
mod problem;
mod random;
mod reduce;
mod reference;
mod scalar;
mod spec;
mod tensor;
pub mod tune;
mod typed;
pub mod view;

// Tensors and element types.
pub use dtype::{DType, DTypeError, C32, C64};
pub use scalar::Element;
pub use tensor::{LocalTensor, TensorData, TensorError};

// Einsum specs.
pub use spec::{EinsumSpec, ResolveSpec, ResolvedSpec, SpecError};

// Contraction: the entry points, their options and errors.
pub use contract::{
    contract, contract_into, contract_operands, contract_unary, contract_views, contract_with_attempts, einsum,
};
pub use error::ContractError;
pub use options::ContractOptions;
pub use pairs::PairContraction;

// Backend choice: the ordered list every entry point takes, and its attempt log. The
// backend protocol and the concrete backends are in [`backends`].
pub use backend::{AttemptOutcome, BackendList, KernelAttempt, KernelDispatchError};

// Element-wise operations, creation, reductions.
pub use elementwise::{
    axpby, check_coefficients, conj, lincomb, permute, reshape, reshape_owned, scale, ElementwiseError,
};
pub use random::{identity_block, random_block, zeros_block, BlockError};
pub use reduce::{inner, max_abs, norm_sqr};
