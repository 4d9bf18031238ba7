//! The backend protocol: the [`ContractBackend`] trait, an ordered [`BackendList`],
//! accept/decline per backend, the dispatch loop whose first acceptance commits, and its log
//! ([`KernelAttempt`], [`KernelDispatchError`]), with the per-class reordering of an attached
//! tuning table (`tune.rs`). The default lists live in `defaults.rs`.

use std::fmt;
use std::sync::Arc;

use crate::dtype::DType;
use crate::problem::ContractProblem;
use crate::tensor::{LocalTensor, TensorError};
use crate::tune::{measure, ShapeClass, TuneEntry, TuneTable};

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
    /// Whether measured backend choice ([`crate::tune::measure`], [`BackendList::tune`]) times this
    /// backend. Default `true`; the naive [`crate::backends::ReferenceBackend`] says `false` (it is the
    /// oracle and the fallback, never the fastest, and timing it on large shapes would take
    /// minutes).
    fn tune_candidate(&self) -> bool {
        true
    }
    /// Computes the result: a tensor of dtype `problem.dtype()` and shape
    /// `problem.out_shape()`.
    ///
    /// # Errors
    /// Any [`KernelError`]; dispatch then fails without trying further backends.
    fn run(&self, problem: &ContractProblem<'_>) -> Result<LocalTensor, KernelError>;
}

/// Ordered list of backends, most specific first (the static order), optionally with a
/// [`TuneTable`] that reorders it per [`ShapeClass`] from measurements
/// ([`with_tuning`](Self::with_tuning)).
#[derive(Clone)]
pub struct BackendList {
    backends: Vec<Arc<dyn ContractBackend>>,
    threads: usize,
    tuning: Option<Arc<TuneTable>>,
}

impl fmt::Debug for BackendList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendList")
            .field("backends", &self.names())
            .field("threads", &self.threads)
            .field("tuning", &self.tuning.as_ref().map(|t| t.len()))
            .finish()
    }
}

impl BackendList {
    /// A list trying `backends` in the given order, with no thread budget recorded (0) and no
    /// tuning table. An empty list is allowed; every dispatch through it fails with an empty
    /// attempt log.
    pub fn new(backends: Vec<Arc<dyn ContractBackend>>) -> BackendList {
        BackendList {
            backends,
            threads: 0,
            tuning: None,
        }
    }

    /// The same list recording `threads` as its thread budget (the default lists record the
    /// budget they were built with). Only the [`ShapeClass`] of tuning uses it; it does not
    /// change the backends.
    pub fn with_thread_budget(self, threads: usize) -> BackendList {
        BackendList { threads, ..self }
    }

    /// The thread budget recorded for this list (0 if none).
    pub fn thread_budget(&self) -> usize {
        self.threads
    }

    /// The same list with `table` attached: for each problem, the backend the table names for
    /// its [`ShapeClass`] is tried first and the rest in this list's order; a class without an
    /// entry is measured first when the table [measures new classes](TuneTable::measuring),
    /// else the static order applies. Dispatch still commits to the first acceptance.
    pub fn with_tuning(self, table: Arc<TuneTable>) -> BackendList {
        BackendList {
            tuning: Some(table),
            ..self
        }
    }

    /// The attached tuning table, if any.
    pub fn tuning(&self) -> Option<&Arc<TuneTable>> {
        self.tuning.as_ref()
    }

    /// Measures every backend of the list that accepts `problem` ([`measure`]), records the
    /// fastest in the attached table (saving an [opened](TuneTable::open) table) and returns
    /// the entry. `None` when fewer than two backends accepted and ran, or no table is
    /// attached (nothing is recorded then). Used by `uni20 tune`.
    pub fn tune(&self, problem: &ContractProblem<'_>) -> Option<TuneEntry> {
        let table = self.tuning.as_ref()?;
        let class = ShapeClass::of(problem, self.threads);
        let (entry, _) = measure(&self.backends, problem)?;
        log_choice(&class, &entry, "measured");
        table.record(class, entry.clone());
        Some(entry)
    }

    /// The backends in the order dispatch tries them for `problem`, and a result already
    /// computed by the first of them during a measurement.
    fn order_for(&self, problem: &ContractProblem<'_>) -> (Vec<Arc<dyn ContractBackend>>, Option<LocalTensor>) {
        let Some(table) = &self.tuning else {
            return (self.backends.clone(), None);
        };
        let class = ShapeClass::of(problem, self.threads);
        let (entry, done) = match table.get(&class) {
            Some(e) => {
                log_choice(&class, &e, "table");
                (e, None)
            }
            None if table.measures_new() => match measure(&self.backends, problem) {
                Some((e, out)) => {
                    log_choice(&class, &e, "measured");
                    table.record(class, e.clone());
                    (e, Some(out))
                }
                None => return (self.backends.clone(), None),
            },
            None => return (self.backends.clone(), None),
        };
        let mut order = self.backends.clone();
        match order.iter().position(|b| b.name() == entry.backend) {
            Some(i) => {
                let chosen = order.remove(i);
                order.insert(0, chosen);
                (order, done)
            }
            // The table names a backend this list does not have: static order.
            None => (order, None),
        }
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
        let (order, mut done) = self.order_for(problem);
        first_accepting(
            &order,
            || problem.describe(),
            |backend| backend.accepts_types(problem.dtype()),
            |backend| backend.accepts(problem),
            |backend, name, declined| {
                tracing::debug!(
                    target: "uni20_dispatch",
                    backend = %name,
                    operation = %problem.source_spec(),
                    dtype = %problem.dtype(),
                    declined,
                    "kernel backend selected"
                );
                // A measurement just ran the first backend of a tuned order on this problem.
                let run = match done.take() {
                    Some(t) if declined == 0 => Ok(t),
                    _ => backend.run(problem),
                };
                run.map_err(|e| e.to_string()).and_then(|t| {
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
                })
            },
        )
    }
}

/// The one "first backend that accepts" loop, shared by contraction
/// ([`BackendList::dispatch`]) and the decomposition families
/// (`decomp::DecompBackendList::dispatch`).
///
/// Offers the problem to each of `backends` in order: `accepts_types`, then `accepts`;
/// an `Err(reason)` of either is recorded as [`AttemptOutcome::DeclinedTypes`] or
/// [`AttemptOutcome::Declined`] and the next backend is asked; the first backend both
/// accept is committed to. The first committed backend runs `run(backend, name, declined)`
/// (`declined`: how many backends declined before it; `run` also emits the "kernel backend
/// selected" debug event with the fields of its operation and validates the result). Its
/// answer is final: `Ok` ends the log with [`AttemptOutcome::Accepted`], `Err(reason)` with
/// [`AttemptOutcome::Failed`] (logged as a `tracing` warning) and no further backend is tried.
/// `operation` describes the problem in the [`KernelDispatchError`].
pub(crate) fn first_accepting<B: ?Sized + Named, R>(
    backends: &[Arc<B>],
    operation: impl FnOnce() -> String,
    accepts_types: impl Fn(&B) -> Result<(), String>,
    accepts: impl Fn(&B) -> Result<(), String>,
    mut run: impl FnMut(&B, &str, usize) -> Result<R, String>,
) -> Result<(R, Vec<KernelAttempt>), KernelDispatchError> {
    let mut attempts = Vec::new();
    for backend in backends {
        let name = backend.backend_name().to_string();
        let declined = accepts_types(backend)
            .map_err(AttemptOutcome::DeclinedTypes)
            .and_then(|()| accepts(backend).map_err(AttemptOutcome::Declined));
        if let Err(outcome) = declined {
            attempts.push(KernelAttempt { backend: name, outcome });
            continue;
        }
        return match run(backend, &name, attempts.len()) {
            Ok(r) => {
                attempts.push(KernelAttempt {
                    backend: name,
                    outcome: AttemptOutcome::Accepted,
                });
                Ok((r, attempts))
            }
            Err(reason) => {
                tracing::warn!(target: "uni20_dispatch", backend = %name, %reason, "committed kernel failed");
                attempts.push(KernelAttempt {
                    backend: name,
                    outcome: AttemptOutcome::Failed(reason),
                });
                Err(KernelDispatchError {
                    operation: operation(),
                    attempts,
                })
            }
        };
    }
    Err(KernelDispatchError {
        operation: operation(),
        attempts,
    })
}

/// The name a backend of any kind is logged under in [`KernelAttempt::backend`]
/// (contraction and decomposition backends both have one).
pub(crate) trait Named {
    /// The backend's stable short name.
    fn backend_name(&self) -> &str;
}

impl Named for dyn ContractBackend {
    fn backend_name(&self) -> &str {
        self.name()
    }
}

/// The tuning decision as a `tracing` debug event (target `uni20_dispatch`).
fn log_choice(class: &ShapeClass, entry: &TuneEntry, source: &'static str) {
    tracing::debug!(
        target: "uni20_dispatch",
        class = %class,
        backend = %entry.backend,
        timings = %entry,
        source,
        "tuned backend order"
    );
}
