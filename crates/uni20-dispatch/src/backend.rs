//! The backend protocol: an ordered [`BackendList`], accept/decline per backend, and the
//! dispatch loop whose first acceptance commits.

use std::fmt;
use std::sync::Arc;

use crate::dtype::{DType, C64};
use crate::spec::{EinsumSpec, IndexClasses};
use crate::tensor::{LocalTensor, TensorError};
use crate::view::AnyView;

/// Error returned by [`ContractBackend::run`] after the backend accepted a problem.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum KernelError {
    /// The kernel failed; the string says why.
    #[error("{0}")]
    Failed(String),
    /// Building the output tensor failed.
    #[error(transparent)]
    Tensor(#[from] TensorError),
}

/// What happened when the dispatcher offered a problem to one backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// [`ContractBackend::accepts_types`] declined; the string is its reason.
    DeclinedTypes(String),
    /// [`ContractBackend::accepts`] declined; the string is its reason.
    Declined(String),
    /// The backend accepted and ran successfully (dispatch stopped here).
    Accepted,
    /// The backend accepted, then [`ContractBackend::run`] failed (terminal: no fallback).
    Failed(String),
}

impl fmt::Display for AttemptOutcome {
    /// `declined types: <reason>`, `declined: <reason>`, `accepted`, `accepted, then failed: <reason>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptOutcome::DeclinedTypes(r) => write!(f, "declined types: {r}"),
            AttemptOutcome::Declined(r) => write!(f, "declined: {r}"),
            AttemptOutcome::Accepted => f.write_str("accepted"),
            AttemptOutcome::Failed(r) => write!(f, "accepted, then failed: {r}"),
        }
    }
}

/// One entry of the dispatch log: backend name and outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelAttempt {
    /// [`ContractBackend::name`] of the backend.
    pub backend: String,
    /// What it did.
    pub outcome: AttemptOutcome,
}

/// No backend produced a result: either every backend declined, or the first one to accept
/// failed (in which case it is the last attempt, with [`AttemptOutcome::Failed`]).
/// `attempts` lists every backend tried, in list order; backends after a failure are not
/// tried and do not appear.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct KernelDispatchError {
    /// Human-readable description of the operation, e.g. `contract ij,jk->ik (f64)`.
    pub operation: String,
    /// Every attempt in order.
    pub attempts: Vec<KernelAttempt>,
}

impl KernelDispatchError {
    /// True if a backend accepted and then failed (as opposed to every backend declining).
    pub fn committed_failure(&self) -> bool {
        self.attempts
            .last()
            .is_some_and(|a| matches!(a.outcome, AttemptOutcome::Failed(_)))
    }
}

impl fmt::Display for KernelDispatchError {
    /// First line: summary; then one line per attempt: `  <backend>: <outcome>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.committed_failure() {
            write!(f, "kernel failed for {}", self.operation)?;
        } else if self.attempts.is_empty() {
            write!(f, "no backend available for {} (empty backend list)", self.operation)?;
        } else {
            write!(f, "no backend accepted {}", self.operation)?;
        }
        for a in &self.attempts {
            write!(f, "\n  {}: {}", a.backend, a.outcome)?;
        }
        Ok(())
    }
}

/// A fully validated contraction handed to backends:
/// `out = alpha * einsum(spec, a, b) + beta * c`.
///
/// Operands are strided views ([`AnyView`]) with arbitrary strides (negative, zero, size-1
/// modes) and a conjugation flag each; backends must honour both (or decline in
/// [`ContractBackend::accepts`]). Views borrow host memory only: a backend that works on a
/// device copies through its own API and never reinterprets a device buffer as host memory.
///
/// Guarantees: `spec` is valid; `a`, `b` (and `c` if present) all have dtype `dtype`;
/// `a.shape()`/`b.shape()` match the spec's labels; `c`, if present, has shape `out_shape`;
/// `c` is `None` whenever `beta == 0` (so kernels never read it); if `dtype` is real,
/// `alpha` and `beta` have zero imaginary parts. A hand-built problem may break these;
/// [`ContractProblem::validate`] checks them.
#[derive(Clone, Debug)]
pub struct ContractProblem<'a> {
    /// The einsum spec.
    pub spec: &'a EinsumSpec,
    /// `spec.classes()`, precomputed.
    pub classes: IndexClasses,
    /// Extent of every label (A labels first, then labels only in B).
    pub label_dims: Vec<(char, usize)>,
    /// Scale of the product.
    pub alpha: C64,
    /// Scale of `c` (zero when `c` is `None`).
    pub beta: C64,
    /// Operand A (dtype `dtype`), one extent per `spec.a` label.
    pub a: AnyView<'a>,
    /// Operand B (dtype `dtype`), one extent per `spec.b` label.
    pub b: AnyView<'a>,
    /// Accumulator read as `beta * c` (dtype `dtype`, shape `out_shape`); `None` if absent
    /// or `beta == 0`.
    pub c: Option<AnyView<'a>>,
    /// Output dtype.
    pub dtype: DType,
    /// Output shape (`spec.out` extents).
    pub out_shape: Vec<usize>,
}

impl ContractProblem<'_> {
    /// Extent of `label`, or `None` if the label does not occur in the spec.
    pub fn dim(&self, label: char) -> Option<usize> {
        self.label_dims.iter().find(|(l, _)| *l == label).map(|&(_, d)| d)
    }

    /// Re-checks the guarantees listed on [`ContractProblem`] (the fields are public, so a
    /// hand-built problem may violate them). Backends call this before touching data.
    ///
    /// # Errors
    /// A description of the first violated guarantee.
    pub fn validate(&self) -> Result<(), String> {
        self.spec.validate().map_err(|e| e.to_string())?;
        for (name, t) in [("A", Some(&self.a)), ("B", Some(&self.b)), ("C", self.c.as_ref())] {
            if let Some(t) = t {
                if t.dtype() != self.dtype {
                    return Err(format!(
                        "operand {name} has dtype {}, problem dtype is {}",
                        t.dtype(),
                        self.dtype
                    ));
                }
            }
        }
        let dims = self
            .spec
            .label_dims(self.a.shape(), self.b.shape())
            .map_err(|e| e.to_string())?;
        let mut sorted = dims.clone();
        let mut given = self.label_dims.clone();
        sorted.sort_unstable();
        given.sort_unstable();
        if sorted != given {
            return Err(format!(
                "label_dims {:?} do not match operand shapes ({:?})",
                self.label_dims, dims
            ));
        }
        let out = self
            .spec
            .output_shape(self.a.shape(), self.b.shape())
            .map_err(|e| e.to_string())?;
        crate::tensor::checked_len(&out, self.dtype.size_bytes()).map_err(|e| e.to_string())?;
        if out != self.out_shape {
            return Err(format!(
                "out_shape {:?} does not match the spec's output shape {:?}",
                self.out_shape, out
            ));
        }
        if let Some(c) = &self.c {
            if c.shape() != out.as_slice() {
                return Err(format!("C has shape {:?}, output shape is {:?}", c.shape(), out));
            }
        }
        if self.classes != self.spec.classes() {
            return Err("classes do not match the spec".to_string());
        }
        if self.c.is_none() && self.beta != C64::new(0.0, 0.0) {
            return Err(format!("beta = {} but no accumulator C", self.beta));
        }
        if !self.dtype.is_complex() && (self.alpha.im != 0.0 || self.beta.im != 0.0) {
            return Err(format!(
                "complex scalars (alpha {}, beta {}) for real dtype {}",
                self.alpha, self.beta, self.dtype
            ));
        }
        Ok(())
    }

    /// One-line description used in errors and tracing: `contract <spec> (<dtype>) A<shape> B<shape>`.
    pub fn describe(&self) -> String {
        format!(
            "contract {} ({}) A{:?} B{:?}",
            self.spec,
            self.dtype,
            self.a.shape(),
            self.b.shape()
        )
    }

    /// Number of multiply-adds (`product of all label extents`), saturating; 0 if any extent
    /// is 0.
    pub fn macs(&self) -> u128 {
        self.label_dims
            .iter()
            .try_fold(1u128, |acc, &(_, d)| acc.checked_mul(d as u128))
            .unwrap_or(u128::MAX)
    }
}

/// One contraction backend. The dispatcher asks [`accepts_types`](Self::accepts_types), then
/// [`accepts`](Self::accepts); the first backend accepting both is committed to, and its
/// [`run`](Self::run) result (success or failure) is final.
pub trait ContractBackend: Send + Sync {
    /// Stable short name, e.g. `"faer"`, `"reference"`.
    fn name(&self) -> &str;
    /// `Err(reason)` if the backend is unusable on this machine (reported by `uni20 info`).
    /// The dispatcher does not call this; an unavailable backend should also decline in
    /// `accepts_types`. Default: available.
    fn availability(&self) -> Result<(), String> {
        Ok(())
    }
    /// `Err(reason)` if the backend cannot handle output dtype `dtype` at all.
    /// Default: every dtype (a backend with a narrower range must override this).
    fn accepts_types(&self, _dtype: DType) -> Result<(), String> {
        Ok(())
    }
    /// `Err(reason)` if the backend declines this particular problem (shapes, layout, ...).
    /// Default: every valid problem.
    fn accepts(&self, _problem: &ContractProblem<'_>) -> Result<(), String> {
        Ok(())
    }
    /// Computes the result: a tensor of dtype `problem.dtype` and shape `problem.out_shape`.
    ///
    /// # Errors
    /// Any [`KernelError`]; dispatch then fails without trying further backends.
    fn run(&self, problem: &ContractProblem<'_>) -> Result<LocalTensor, KernelError>;
}

/// Ordered list of backends, most specific first.
#[derive(Clone)]
pub struct BackendList {
    backends: Vec<Arc<dyn ContractBackend>>,
}

impl fmt::Debug for BackendList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BackendList").field(&self.names()).finish()
    }
}

impl BackendList {
    /// A list trying `backends` in the given order. An empty list is allowed; every dispatch
    /// through it fails with an empty attempt log.
    pub fn new(backends: Vec<Arc<dyn ContractBackend>>) -> BackendList {
        BackendList { backends }
    }

    /// `[faer(threads), reference]`; see [`crate::FaerBackend::new`] for `threads`.
    pub fn default_cpu(threads: usize) -> BackendList {
        BackendList::new(vec![
            Arc::new(crate::faer_backend::FaerBackend::new(threads)),
            Arc::new(crate::reference::ReferenceBackend),
        ])
    }

    /// `[cuda, faer(threads), reference]` with the `cuda` feature, where cuda takes problems
    /// of at least `2^24` multiply-adds (smaller ones, and all problems when no device is
    /// present, fall through to faer with the reason logged); without the feature, the same as
    /// [`BackendList::default_cpu`].
    pub fn default_gpu_first(threads: usize) -> BackendList {
        #[cfg(feature = "cuda")]
        {
            let mut v = BackendList::default_cpu(threads).backends;
            v.insert(0, Arc::new(crate::cuda::CudaBackend::new().with_min_macs(1 << 24)));
            BackendList::new(v)
        }
        #[cfg(not(feature = "cuda"))]
        {
            BackendList::default_cpu(threads)
        }
    }

    /// `[reference]` only (the test oracle).
    pub fn reference_only() -> BackendList {
        BackendList::new(vec![Arc::new(crate::reference::ReferenceBackend)])
    }

    /// Backend names in order.
    pub fn names(&self) -> Vec<&str> {
        self.backends.iter().map(|b| b.name()).collect()
    }

    /// The backends in order.
    pub fn backends(&self) -> &[Arc<dyn ContractBackend>] {
        &self.backends
    }

    /// Offers `problem` to each backend in order; the first that accepts both types and
    /// problem is committed to. Emits a `tracing` debug event (target `uni20_dispatch`) with
    /// the chosen backend. Returns the result and the attempt log (ending with
    /// [`AttemptOutcome::Accepted`]).
    ///
    /// # Errors
    /// [`KernelDispatchError`] if all decline, if the committed backend's `run` fails, or if
    /// it returns a tensor of the wrong dtype/shape (recorded as [`AttemptOutcome::Failed`]).
    pub fn dispatch(
        &self,
        problem: &ContractProblem<'_>,
    ) -> Result<(LocalTensor, Vec<KernelAttempt>), KernelDispatchError> {
        let mut attempts = Vec::new();
        for backend in &self.backends {
            let name = backend.name().to_string();
            if let Err(r) = backend.accepts_types(problem.dtype) {
                attempts.push(KernelAttempt {
                    backend: name,
                    outcome: AttemptOutcome::DeclinedTypes(r),
                });
                continue;
            }
            if let Err(r) = backend.accepts(problem) {
                attempts.push(KernelAttempt {
                    backend: name,
                    outcome: AttemptOutcome::Declined(r),
                });
                continue;
            }
            tracing::debug!(
                target: "uni20_dispatch",
                backend = %name,
                operation = %problem.spec,
                dtype = %problem.dtype,
                declined = attempts.len(),
                "kernel backend selected"
            );
            let result = backend.run(problem).map_err(|e| e.to_string()).and_then(|t| {
                if t.dtype() != problem.dtype || t.shape() != problem.out_shape.as_slice() {
                    Err(format!(
                        "backend returned {} {:?}, expected {} {:?}",
                        t.dtype(),
                        t.shape(),
                        problem.dtype,
                        problem.out_shape
                    ))
                } else {
                    Ok(t)
                }
            });
            return match result {
                Ok(t) => {
                    attempts.push(KernelAttempt {
                        backend: name,
                        outcome: AttemptOutcome::Accepted,
                    });
                    Ok((t, attempts))
                }
                Err(reason) => {
                    tracing::warn!(target: "uni20_dispatch", backend = %name, %reason, "committed kernel failed");
                    attempts.push(KernelAttempt {
                        backend: name,
                        outcome: AttemptOutcome::Failed(reason),
                    });
                    Err(KernelDispatchError {
                        operation: problem.describe(),
                        attempts,
                    })
                }
            };
        }
        Err(KernelDispatchError {
            operation: problem.describe(),
            attempts,
        })
    }
}

/// Name and availability of every backend this build knows, for `uni20 info`: `cuda` first
/// (unavailable with a reason when built without the `cuda` feature or when no driver,
/// cuBLAS or device is present), then the backends of [`BackendList::default_cpu`]`(threads)`.
pub fn available_backends(threads: usize) -> Vec<(String, Result<(), String>)> {
    let mut v = vec![("cuda".to_string(), cuda_availability())];
    v.extend(
        BackendList::default_cpu(threads)
            .backends()
            .iter()
            .map(|b| (b.name().to_string(), b.availability())),
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
