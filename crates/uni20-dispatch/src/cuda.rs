//! CUDA backend (feature `cuda`): cuBLAS GEMM through cudarc with dynamic loading.
//!
//! Nothing here links against CUDA at build time. At first use the backend probes for the
//! driver library (`libcuda`) and cuBLAS (`libcublas`) with `is_culib_present()`, before any
//! cudarc call that could panic on a missing library, then counts devices; any failure makes
//! the backend unavailable with a reason, and it declines every problem.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::cublas::sys as cb;
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

use crate::backend::{ContractBackend, KernelError};
use crate::dtype::with_dtype;
use crate::dtype::{DType, C32, C64};
use crate::lower::Packed;
use crate::problem::ContractProblem;
use crate::scalar::Element;
use crate::tensor::LocalTensor;

/// A probed, usable device.
struct Gpu {
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    name: String,
    /// Kept alive for the stream and handle.
    _ctx: Arc<CudaContext>,
}

/// cuBLAS GEMM backend for device `ordinal`. Accepts all four dtypes when a device is
/// present; declines (types) with the probe's reason otherwise, and declines a problem whose
/// matrix extents exceed cuBLAS's 32-bit integers or that is below the
/// [`with_min_macs`](CudaBackend::with_min_macs) threshold.
///
/// Execution: host operands are packed (conjugation, summed labels and permutation applied)
/// into contiguous `[batch][m][k]` / `[batch][k][n]` buffers, copied to device memory with
/// cudarc's copy API, multiplied with `cublas{S,D,C,Z}gemm` once per batch element (complex
/// through the raw `cgemm`/`zgemm` layer), and the `[batch][m][n]` result is copied back and
/// reordered. Device buffers are only ever touched through CUDA calls; they are never read as
/// host memory. One problem runs at a time per backend (a mutex guards the handle).
pub struct CudaBackend {
    ordinal: usize,
    min_macs: u128,
    gpu: OnceLock<Result<Mutex<Gpu>, String>>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend").field("ordinal", &self.ordinal).finish()
    }
}

impl Default for CudaBackend {
    fn default() -> Self {
        CudaBackend::new()
    }
}

impl CudaBackend {
    /// A backend for device 0. Cheap: the device is probed on first use.
    pub fn new() -> CudaBackend {
        CudaBackend::with_device(0)
    }

    /// A backend for device `ordinal`. Cheap: the device is probed on first use.
    pub fn with_device(ordinal: usize) -> CudaBackend {
        CudaBackend {
            ordinal,
            min_macs: 0,
            gpu: OnceLock::new(),
        }
    }

    /// The same backend declining problems with fewer than `min_macs` multiply-adds (see
    /// [`ContractProblem::macs`]), for which transfers dominate.
    pub fn with_min_macs(mut self, min_macs: u128) -> CudaBackend {
        self.min_macs = min_macs;
        self
    }

    fn gpu(&self) -> Result<&Mutex<Gpu>, String> {
        self.gpu
            .get_or_init(|| probe(self.ordinal).map(Mutex::new))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The device name reported by the driver, or the reason the backend is unavailable.
    ///
    /// # Errors
    /// The probe's reason (no driver library, no cuBLAS, no device, ...).
    pub fn device_name(&self) -> Result<String, String> {
        let g = self
            .gpu()?
            .lock()
            .map_err(|_| "CUDA backend mutex poisoned".to_string())?;
        Ok(g.name.clone())
    }

    /// Diagnostics: GFLOP/s of `reps` device-resident `n x n` GEMMs of `dtype` (operands
    /// allocated and zero-filled on the device, timed after one warm-up call, synchronized).
    /// Complex GEMMs count 8 real flops per multiply-add, real ones 2.
    ///
    /// # Errors
    /// The unavailability reason, or a driver/cuBLAS error as text.
    pub fn gemm_gflops(&self, dtype: DType, n: usize, reps: usize) -> Result<f64, String> {
        let g = self
            .gpu()?
            .lock()
            .map_err(|_| "CUDA backend mutex poisoned".to_string())?;
        with_dtype!(dtype, T => {
            let len = n * n * <T as CuGemm>::WIDTH;
            let a: CudaSlice<<T as CuGemm>::Dev> = g.stream.alloc_zeros(len).map_err(|e| e.to_string())?;
            let b: CudaSlice<<T as CuGemm>::Dev> = g.stream.alloc_zeros(len).map_err(|e| e.to_string())?;
            let mut c: CudaSlice<<T as CuGemm>::Dev> = g.stream.alloc_zeros(len).map_err(|e| e.to_string())?;
            let run = |c: &mut CudaSlice<<T as CuGemm>::Dev>| -> Result<(), String> {
                gemm_batch::<T>(&g, &a, &b, c, 1, n, n, n, T::from_c64(C64::new(1.0, 0.0)), false)
            };
            run(&mut c)?;
            g.stream.synchronize().map_err(|e| e.to_string())?;
            let t = Instant::now();
            for _ in 0..reps {
                run(&mut c)?;
            }
            g.stream.synchronize().map_err(|e| e.to_string())?;
            let secs = t.elapsed().as_secs_f64().max(1e-12);
            let per = if dtype.is_complex() { 8.0 } else { 2.0 };
            Ok(per * (n as f64).powi(3) * reps as f64 / secs / 1e9)
        })
    }
}

/// Probes driver, cuBLAS and device, in that order; never panics (a panic inside cudarc is
/// caught and reported as a reason).
fn probe(ordinal: usize) -> Result<Gpu, String> {
    // SAFETY: `is_culib_present` only attempts to dlopen candidate library names.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("CUDA driver library (libcuda) not found".to_string());
    }
    // SAFETY: as above.
    if !unsafe { cb::is_culib_present() } {
        return Err("cuBLAS library (libcublas) not found".to_string());
    }
    let r = catch_unwind(AssertUnwindSafe(|| -> Result<Gpu, String> {
        let count = CudaContext::device_count().map_err(|e| format!("CUDA driver error: {e}"))?;
        if count <= 0 {
            return Err("no CUDA device present".to_string());
        }
        if ordinal >= count as usize {
            return Err(format!("CUDA device {ordinal} requested, {count} present"));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| format!("CUDA context: {e}"))?;
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).map_err(|e| format!("cuBLAS init: {e}"))?;
        let name = ctx.name().unwrap_or_else(|_| format!("CUDA device {ordinal}"));
        Ok(Gpu {
            stream,
            blas,
            name,
            _ctx: ctx,
        })
    }));
    r.unwrap_or_else(|_| Err("CUDA probe panicked inside cudarc".to_string()))
}

/// Element types with a cuBLAS GEMM. Device buffers hold the real components (`Dev`),
/// `WIDTH` per element.
trait CuGemm: Element {
    type Dev: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + bytemuck::Pod + Default;
    const WIDTH: usize;
    /// Column-major `C = alpha * op(A) * op(B) + beta * C` with `op = N`.
    ///
    /// # Safety
    /// Pointers are device pointers to buffers of the stated extents.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(
        h: cb::cublasHandle_t,
        m: i32,
        n: i32,
        k: i32,
        alpha: &Self,
        a: u64,
        lda: i32,
        b: u64,
        ldb: i32,
        beta: &Self,
        c: u64,
        ldc: i32,
    ) -> cb::cublasStatus_t;
}

const N: cb::cublasOperation_t = cb::cublasOperation_t::CUBLAS_OP_N;

macro_rules! cugemm {
    ($t:ty, $dev:ty, $w:expr, $f:ident, $ct:ty) => {
        impl CuGemm for $t {
            type Dev = $dev;
            const WIDTH: usize = $w;
            unsafe fn gemm(
                h: cb::cublasHandle_t,
                m: i32,
                n: i32,
                k: i32,
                alpha: &Self,
                a: u64,
                lda: i32,
                b: u64,
                ldb: i32,
                beta: &Self,
                c: u64,
                ldc: i32,
            ) -> cb::cublasStatus_t {
                // SAFETY: the caller upholds `CuGemm::gemm`'s contract: a live
                // handle, device pointers valid for the given shapes and
                // leading dimensions, host scalars alive for the call.
                unsafe {
                    cb::$f(
                        h,
                        N,
                        N,
                        m,
                        n,
                        k,
                        alpha as *const Self as *const $ct,
                        a as *const $ct,
                        lda,
                        b as *const $ct,
                        ldb,
                        beta as *const Self as *const $ct,
                        c as *mut $ct,
                        ldc,
                    )
                }
            }
        }
    };
}
cugemm!(f32, f32, 1, cublasSgemm_v2, f32);
cugemm!(f64, f64, 1, cublasDgemm_v2, f64);
cugemm!(C32, f32, 2, cublasCgemm_v2, cb::cuComplex);
cugemm!(C64, f64, 2, cublasZgemm_v2, cb::cuDoubleComplex);

/// Row-major `C[b] (+)= alpha * A[b] * B[b]` for `batch` contiguous `[m][k]`, `[k][n]`,
/// `[m][n]` blocks on the device (as column-major `C^T = B^T A^T`).
#[allow(clippy::too_many_arguments)]
fn gemm_batch<T: CuGemm>(
    g: &Gpu,
    a: &CudaSlice<T::Dev>,
    b: &CudaSlice<T::Dev>,
    c: &mut CudaSlice<T::Dev>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    alpha: T,
    accumulate: bool,
) -> Result<(), String> {
    let int = |x: usize| i32::try_from(x.max(1)).map_err(|_| format!("extent {x} exceeds cuBLAS int"));
    let (mi, ni, ki) = (int(m)?, int(n)?, int(k)?);
    let beta = if accumulate {
        T::from_c64(C64::new(1.0, 0.0))
    } else {
        T::zero()
    };
    let size = std::mem::size_of::<T>() as u64;
    let (pa, _ra) = a.device_ptr(&g.stream);
    let (pb, _rb) = b.device_ptr(&g.stream);
    let (pc, _rc) = c.device_ptr_mut(&g.stream);
    for bi in 0..batch as u64 {
        // SAFETY: the buffers hold `batch` blocks of the stated extents (allocated by the
        // caller from the packed lengths); the handle is bound to `g.stream`; alpha and beta
        // are host scalars (cuBLAS's default pointer mode).
        let st = unsafe {
            T::gemm(
                *g.blas.handle(),
                ni,
                mi,
                ki,
                &alpha,
                pb + bi * (k * n) as u64 * size,
                ni,
                pa + bi * (m * k) as u64 * size,
                ki,
                &beta,
                pc + bi * (m * n) as u64 * size,
                ni,
            )
        };
        if st != cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(format!("cuBLAS gemm failed: {st:?}"));
        }
    }
    Ok(())
}

fn upload<T: CuGemm>(g: &Gpu, v: &[T]) -> Result<CudaSlice<T::Dev>, String> {
    let comps: &[T::Dev] = bytemuck::cast_slice(v);
    if comps.is_empty() {
        return g.stream.alloc_zeros(1).map_err(|e| e.to_string());
    }
    g.stream
        .clone_htod(comps)
        .map_err(|e| format!("host-to-device copy: {e}"))
}

fn run_typed<T: CuGemm>(g: &Gpu, p: &ContractProblem<'_>) -> Result<LocalTensor, KernelError> {
    let pk = Packed::<T>::new(p)?;
    let out_len = pk.batch * pk.m * pk.n;
    let zero = C64::new(0.0, 0.0);
    let gemm = pk.k > 0 && out_len > 0 && p.alpha() != zero;
    let fail = |e: String| KernelError::Failed(e);
    let work: Vec<T> = if !gemm {
        pk.c.clone().unwrap_or_else(|| vec![T::zero(); out_len])
    } else {
        let a = upload(g, &pk.a).map_err(fail)?;
        let b = upload(g, &pk.b).map_err(fail)?;
        let mut c = match &pk.c {
            Some(c) => upload(g, c).map_err(fail)?,
            None => g
                .stream
                .alloc_zeros(out_len * T::WIDTH)
                .map_err(|e| fail(e.to_string()))?,
        };
        let alpha = T::from_c64(p.alpha());
        gemm_batch::<T>(g, &a, &b, &mut c, pk.batch, pk.m, pk.n, pk.k, alpha, pk.c.is_some()).map_err(fail)?;
        let host: Vec<T::Dev> = g
            .stream
            .clone_dtoh(&c)
            .map_err(|e| fail(format!("device-to-host copy: {e}")))?;
        let mut out = vec![T::zero(); out_len];
        bytemuck::cast_slice_mut::<T, T::Dev>(&mut out).copy_from_slice(&host[..out_len * T::WIDTH]);
        out
    };
    pk.unpack(p, &work)
}

impl ContractBackend for CudaBackend {
    fn name(&self) -> &str {
        "cuda"
    }
    fn availability(&self) -> Result<(), String> {
        self.gpu().map(|_| ())
    }
    fn accepts_types(&self, _dtype: DType) -> Result<(), String> {
        self.availability()
    }
    fn accepts(&self, p: &ContractProblem<'_>) -> Result<(), String> {
        if p.macs() < self.min_macs {
            return Err(format!(
                "problem too small for the device ({} multiply-adds < {})",
                p.macs(),
                self.min_macs
            ));
        }
        let cls = p.classes();
        let prod = |ls: &[char]| {
            ls.iter()
                .try_fold(1usize, |acc, &l| acc.checked_mul(p.dim(l).unwrap_or(1)))
                .unwrap_or(usize::MAX)
        };
        for (what, x) in [
            ("m", prod(&cls.free_a)),
            ("n", prod(&cls.free_b)),
            ("k", prod(&cls.contracted)),
        ] {
            if x > i32::MAX as usize {
                return Err(format!("matrix extent {what} = {x} exceeds cuBLAS's 32-bit int"));
            }
        }
        Ok(())
    }
    fn run(&self, p: &ContractProblem<'_>) -> Result<LocalTensor, KernelError> {
        let g = self.gpu().map_err(KernelError::Failed)?;
        let g = g
            .lock()
            .map_err(|_| KernelError::Failed("CUDA backend mutex poisoned".into()))?;
        with_dtype!(p.dtype(), T => run_typed::<T>(&g, p))
    }
}
