//! The CUDA entry of the decomposition backend lists (feature `cuda`): it declines every
//! family, so that `default_gpu_first` lists record the reason and fall through to faer.
//! The contraction backend in `cuda.rs` is unrelated and unchanged.

use super::eigh::{EighBackend, EighFactors};
use super::qr::{QrBackend, QrFactors};
use super::svd::{SvdBackend, SvdFactors};
use super::{DecompBackend, DecompKind, MatrixProblem};
use crate::backend::KernelError;
use crate::dtype::DType;

/// CUDA decomposition backend, named `"cuda"`: no decomposition runs on the device yet, so
/// it declines every family and dtype in [`DecompBackend::accepts_types`] with the reason
/// `"not implemented for <family>"` (`svd`, `qr`, `lq`, `eigh`). Its compute methods are
/// never reached through a list; called directly they fail with the same reason.
#[derive(Clone, Copy, Debug, Default)]
pub struct CudaDecompBackend;

/// The decline reason for `kind`.
fn reason(kind: DecompKind) -> String {
    format!("not implemented for {kind}")
}

impl DecompBackend for CudaDecompBackend {
    fn name(&self) -> &str {
        "cuda"
    }
    fn availability(&self) -> Result<(), String> {
        Err("no decomposition runs on the CUDA backend (contraction only)".to_string())
    }
    fn accepts_types(&self, kind: DecompKind, _dtype: DType) -> Result<(), String> {
        Err(reason(kind))
    }
}

impl SvdBackend for CudaDecompBackend {
    fn svd(&self, p: &MatrixProblem<'_>) -> Result<SvdFactors, KernelError> {
        Err(KernelError::Failed(reason(p.kind)))
    }
}

impl QrBackend for CudaDecompBackend {
    fn qr(&self, p: &MatrixProblem<'_>) -> Result<QrFactors, KernelError> {
        Err(KernelError::Failed(reason(p.kind)))
    }
}

impl EighBackend for CudaDecompBackend {
    fn eigh(&self, p: &MatrixProblem<'_>) -> Result<EighFactors, KernelError> {
        Err(KernelError::Failed(reason(p.kind)))
    }
}
