//! The backend protocol: the [`ContractBackend`] trait, an ordered [`BackendList`],
//! accept/decline per backend, the dispatch loop whose first acceptance commits, and its log
//! ([`KernelAttempt`], [`KernelDispatchError`]). The default lists live in `defaults.rs`.

use std::fmt;
use std::sync::Arc;

use crate::dtype::DType;
use crate::problem::ContractProblem;
use crate::tensor::{LocalTensor, TensorError};

/// Error returned by [`ContractBackend::run`] after the backend accepted a problem.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
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
    /// Computes the result: a tensor of dtype `problem.dtype()` and shape
    /// `problem.out_shape()`.
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
            if let Err(r) = backend.accepts_types(problem.dtype()) {
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
                operation = %problem.source_spec(),
                dtype = %problem.dtype(),
                declined = attempts.len(),
                "kernel backend selected"
            );
            let result = backend.run(problem).map_err(|e| e.to_string()).and_then(|t| {
                if t.dtype() != problem.dtype() || t.shape() != problem.out_shape() {
                    Err(format!(
                        "backend returned {} {:?}, expected {} {:?}",
                        t.dtype(),
                        t.shape(),
                        problem.dtype(),
                        problem.out_shape()
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
