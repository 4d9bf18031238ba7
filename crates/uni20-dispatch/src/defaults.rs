//! The default backend lists, in one place: [`BackendList::default_cpu`],
//! [`BackendList::default_gpu_first`], [`BackendList::reference_only`], and
//! [`available_backends`] (what `uni20 info` reports). A new backend is added to the lists
//! here.

use std::sync::Arc;

use crate::backend::{BackendList, ContractBackend};
use crate::faer_backend::FaerBackend;
use crate::reference::ReferenceBackend;

/// Problems below this many multiply-adds stay on the CPU in
/// [`BackendList::default_gpu_first`] (transfers dominate below it).
pub const GPU_MIN_MACS: u128 = 1 << 24;

/// The CPU backends in static preference order: `[faer, blas, reference]` with the `blas`
/// feature, else `[faer, reference]`. faer comes first because its kernels are chosen at run
/// time for the CPU it runs on, while a system OpenBLAS may not know the CPU (Debian's 0.3.21
/// falls back to its generic Prescott kernel on recent Xeons, 4x slower); BLAS is chosen where
/// a tuning table measured it faster.
fn cpu_backends(threads: usize) -> Vec<Arc<dyn ContractBackend>> {
    #[cfg_attr(not(feature = "blas"), allow(unused_mut))]
    let mut v: Vec<Arc<dyn ContractBackend>> = vec![Arc::new(FaerBackend::new(threads)), Arc::new(ReferenceBackend)];
    #[cfg(feature = "blas")]
    v.insert(1, Arc::new(crate::blas_backend::BlasBackend::new(threads)));
    v
}

impl BackendList {
    /// `[faer(threads), blas(threads), reference]` with the `blas` feature, else
    /// `[faer(threads), reference]`; see [`FaerBackend::new`] for `threads`. The list records
    /// `threads` as its thread budget and has no tuning table (static order: faer runs every
    /// problem); attach one with [`BackendList::with_tuning`] to let measurements put BLAS
    /// first where it is faster. The BLAS backend declines problems whose strides BLAS cannot
    /// express, which faer then reads in place.
    pub fn default_cpu(threads: usize) -> BackendList {
        BackendList::new(cpu_backends(threads)).with_thread_budget(threads)
    }

    /// `[cuda, <default_cpu>]` with the `cuda` feature, where cuda takes problems of
    /// at least [`GPU_MIN_MACS`] multiply-adds (smaller ones, and all problems when no device
    /// is present, fall through to faer with the reason logged); without the feature, the same
    /// as [`BackendList::default_cpu`].
    pub fn default_gpu_first(threads: usize) -> BackendList {
        #[cfg_attr(not(feature = "cuda"), allow(unused_mut))]
        let mut v = cpu_backends(threads);
        #[cfg(feature = "cuda")]
        v.insert(0, Arc::new(crate::cuda::CudaBackend::new().with_min_macs(GPU_MIN_MACS)));
        BackendList::new(v).with_thread_budget(threads)
    }

    /// `[reference]` only (the test oracle).
    pub fn reference_only() -> BackendList {
        BackendList::new(vec![Arc::new(ReferenceBackend)])
    }
}

/// Name and availability of every backend this build knows, for `uni20 info`: `cuda` first
/// (unavailable with a reason when built without the `cuda` feature or when no driver,
/// cuBLAS or device is present), `blas` when built without the `blas` feature (unavailable,
/// with the reason), then the backends of [`BackendList::default_cpu`]`(threads)`: faer,
/// blas (available, or unavailable when not built), reference.
pub fn available_backends(threads: usize) -> Vec<(String, Result<(), String>)> {
    let mut v = vec![("cuda".to_string(), cuda_availability())];
    v.extend(
        cpu_backends(threads)
            .iter()
            .map(|b| (b.name().to_string(), b.availability())),
    );
    #[cfg(not(feature = "blas"))]
    v.insert(
        2,
        (
            "blas".to_string(),
            Err("not built: enable the cargo feature `blas` of uni20-dispatch (system OpenBLAS)".to_string()),
        ),
    );
    v
}

#[cfg(feature = "cuda")]
fn cuda_availability() -> Result<(), String> {
    crate::cuda::CudaBackend::new().availability()
}

#[cfg(not(feature = "cuda"))]
fn cuda_availability() -> Result<(), String> {
    Err("not built: enable the cargo feature `cuda` of uni20-dispatch".to_string())
}
