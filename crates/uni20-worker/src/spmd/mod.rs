//! The expert SPMD mode (design note `persistent_dispatch.md`, not in this
//! repository, "Expert SPMD mode"; docs/architecture.md, "Three ways in"):
//! every rank of the universe runs the same closure with an
//! [`SpmdContext`], which gives its rank and size, collectives
//! (`collectives.rs`), plan agreement (`agree.rs`), and collective execution
//! of registered commands ([`SpmdContext::run_collective`]): every rank
//! computes the plan itself, the ranks agree on its digest before any
//! payload moves, and each participant then runs the command's handler on
//! its own store, exactly as the worker loop would. `run.rs` starts SPMD
//! universes on both transports.
//!
//! Fail-stop: the first failure a rank sees (a collective mismatch, a failed
//! handler, a rank that left) is recorded and the universe is aborted with
//! it, so no rank stays blocked waiting for a rank that stopped; a plan
//! disagreement, which every rank computes from the same gathered digests,
//! is recorded on every rank without an abort. Every later collective call
//! returns [`JobError::Stopped`], and the universe's run returns the
//! failure.

mod agree;
mod collectives;
pub(crate) mod run;

pub use agree::{digest_bytes, plan_digest};
pub use collectives::{CollectiveOp, Number};

use std::cell::{Cell, RefCell};

use uni20_dispatch::BackendList;
use uni20_persist::Store;

use crate::context::{CommandSpec, WorkerContext};
use crate::diag::{Diagnostic, HandlerError, JobError};
use crate::envelope::{decode_exact, encode, Envelope};
use crate::fault::FaultPlan;
use crate::handler::{execute, Executed};
use crate::registry::{command_id, Registry};
use crate::transport::{Transport, TransportKind};

/// What every rank's closure gets in an SPMD universe.
///
/// Collective methods (`barrier`, `broadcast`, `gather`, `all_gather`,
/// `reduce`, `all_reduce`, `agree`, `run_collective`) must be called by
/// every rank, in the same order; a rank that calls another collective, or
/// leaves the closure while the others still call collectives, stops the
/// universe with an error naming both. Use it from the thread the closure
/// runs on.
pub struct SpmdContext<'a> {
    transport: &'a dyn Transport,
    registry: &'a Registry,
    store: &'a Store,
    backends: &'a BackendList,
    threads: usize,
    faults: &'a FaultPlan,
    /// Collectives entered so far.
    seq: Cell<u64>,
    /// Op id of the next collective operation (starts at 1).
    next_op: Cell<u64>,
    /// The first failure: returned by the universe's run.
    first: RefCell<Option<JobError>>,
    /// Its text: what later collective calls report.
    stopped: RefCell<Option<String>>,
}

impl<'a> SpmdContext<'a> {
    pub(crate) fn new(
        transport: &'a dyn Transport,
        registry: &'a Registry,
        store: &'a Store,
        backends: &'a BackendList,
        threads: usize,
        faults: &'a FaultPlan,
    ) -> SpmdContext<'a> {
        SpmdContext {
            transport,
            registry,
            store,
            backends,
            threads,
            faults,
            seq: Cell::new(0),
            next_op: Cell::new(1),
            first: RefCell::new(None),
            stopped: RefCell::new(None),
        }
    }

    /// This rank, in `0..size()`.
    pub fn rank(&self) -> usize {
        self.transport.rank()
    }
    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.transport.size()
    }
    /// Which transport this universe runs on (its [`TransportKind::name`] is `in-process`
    /// or `mpi`).
    pub fn transport_kind(&self) -> TransportKind {
        self.transport.kind()
    }
    /// This rank's persistent object store (it holds the blocks this rank
    /// owns).
    pub fn store(&self) -> &'a Store {
        self.store
    }
    /// This rank's local backends.
    pub fn backends(&self) -> &'a BackendList {
        self.backends
    }
    /// Thread budget of this rank's local kernels.
    pub fn threads_per_rank(&self) -> usize {
        self.threads
    }
    /// The command registry (identical on every rank: checked at start-up).
    pub fn registry(&self) -> &'a Registry {
        self.registry
    }
    /// True once a collective call failed on this rank (the universe is
    /// stopped).
    pub fn has_failed(&self) -> bool {
        self.stopped.borrow().is_some()
    }

    /// [`JobError::Stopped`] after the first failure.
    fn check(&self) -> Result<(), JobError> {
        match &*self.stopped.borrow() {
            Some(why) => Err(JobError::Stopped(why.clone())),
            None => Ok(()),
        }
    }

    /// Records the first failure, aborts the universe with it (so no rank
    /// waits for this one forever), and returns it. A failure every rank
    /// computes identically from the same exchanged data (a plan
    /// disagreement, a registry mismatch) is only recorded: every rank
    /// stops by itself, and an abort would race with the exchange's last
    /// messages.
    pub(crate) fn fail(&self, e: JobError) -> JobError {
        if self.stopped.borrow().is_some() {
            return e;
        }
        let text = e.to_string();
        *self.stopped.borrow_mut() = Some(text.clone());
        if !matches!(e, JobError::Disagreement(_) | JobError::RegistryMismatch { .. }) {
            self.transport.abort(&text);
        }
        *self.first.borrow_mut() = Some(duplicate(&e));
        e
    }

    /// Stops the universe because of a failure this rank found on its own
    /// (for example a local store error in the middle of a collective
    /// operation): records it as this rank's first failure and aborts the
    /// universe with `reason`, so every rank's waits fail with it instead of
    /// waiting for this rank. Returns the error to propagate
    /// ([`JobError::Stopped`] with `reason`).
    pub fn abort(&self, reason: impl Into<String>) -> JobError {
        self.fail(JobError::Stopped(reason.into()))
    }

    /// The first failure, once, for the universe's run.
    pub(crate) fn take_failure(&self) -> Option<JobError> {
        self.first.borrow_mut().take()
    }

    /// Runs command `C` collectively: every rank passes the same
    /// descriptor and participant list (and, in `fields`, digests of the
    /// plan's parts, which name the first difference when ranks disagree);
    /// the ranks agree on the plan ([`SpmdContext::agree`], operation
    /// `C::WIRE_NAME`), each participant runs `C`'s registered handler on its
    /// own store (the worker loop's handler runner, faults included), and
    /// every rank receives every participant's reply, in rank order.
    ///
    /// # Errors
    /// [`JobError::Disagreement`] when the plans differ;
    /// [`JobError::UnknownCommand`] if `C` is not registered;
    /// [`JobError::Command`] with the diagnostic on the rank whose handler
    /// failed (the universe is aborted with it, and the other ranks get it
    /// as [`JobError::Transport`] `Aborted` or [`JobError::Stopped`]);
    /// [`JobError::Protocol`] for an undecodable reply; the errors of the
    /// collectives.
    pub fn run_collective<C: CommandSpec>(
        &self,
        desc: &C::Descriptor,
        participants: &[usize],
        fields: &[(&str, u64)],
    ) -> Result<Vec<(usize, C::Reply)>, JobError> {
        self.check()?;
        let descriptor = encode(desc);
        let mut all: Vec<(&str, u64)> = vec![
            ("command", plan_digest(&(C::WIRE_NAME, C::SCHEMA_VERSION))),
            ("participants", plan_digest(participants)),
        ];
        all.extend_from_slice(fields);
        all.push(("descriptor", digest_bytes(&descriptor)));
        let op_id = self.agree(C::WIRE_NAME, &all)?;
        if self.registry.by_wire_name(C::WIRE_NAME).is_none() {
            return Err(self.fail(JobError::UnknownCommand(C::WIRE_NAME.into())));
        }
        if let Some(&bad) = participants.iter().find(|&&r| r >= self.size()) {
            return Err(self.fail(JobError::Protocol(format!(
                "op_id {op_id} (`{}`): participant {bad} is not a rank of this universe of {} ranks",
                C::WIRE_NAME,
                self.size()
            ))));
        }
        let env = Envelope {
            op_id,
            command_id: command_id(C::WIRE_NAME),
            wire_name: C::WIRE_NAME.into(),
            debug_name: C::DEBUG_NAME.into(),
            schema_version: C::SCHEMA_VERSION,
            descriptor,
        };
        let me = self.rank();
        let mine = if participants.contains(&me) {
            let mut ctx = WorkerContext {
                transport: self.transport,
                store: self.store,
                backends: self.backends,
                threads: self.threads,
                op_id,
                storage_ranks: 0,
                corrupt_sends: false,
            };
            match execute(self.registry, &mut ctx, &env, self.faults) {
                Executed::Reply(r) => r,
                Executed::BadReply => Ok(b"\xff\xffnot a reply".to_vec()),
                Executed::Died(why) => Err(Box::new(died(me, &env, why))),
            }
        } else {
            Ok(Vec::new())
        };
        let mine = match mine {
            Ok(bytes) => bytes,
            Err(d) => {
                // A handler that failed because another rank aborted the
                // universe reports that abort, not a consequence of it.
                return Err(match self.transport.aborted() {
                    Some(why) => self.fail(JobError::Stopped(why)),
                    None => self.fail(JobError::Command(d)),
                });
            }
        };
        let replies = self.all_gather_bytes(C::WIRE_NAME, mine)?;
        let mut out = Vec::with_capacity(participants.len());
        let mut ranks: Vec<usize> = participants.to_vec();
        ranks.sort_unstable();
        ranks.dedup();
        for r in ranks {
            let reply = decode_exact::<C::Reply>(&replies[r], "reply body").map_err(|e| {
                self.fail(JobError::Protocol(format!(
                    "op_id {op_id} (`{}`): reply body of rank {r}: {e}",
                    C::WIRE_NAME
                )))
            })?;
            out.push((r, reply));
        }
        Ok(out)
    }
}

/// A copy of `e` (`JobError` is not `Clone`: some sources are not);
/// variants without a cheap copy become [`JobError::Stopped`] with the text.
fn duplicate(e: &JobError) -> JobError {
    match e {
        JobError::Command(d) => JobError::Command(d.clone()),
        JobError::Disagreement(d) => JobError::Disagreement(d.clone()),
        JobError::Transport(t) => JobError::Transport(t.clone()),
        JobError::Protocol(p) => JobError::Protocol(p.clone()),
        JobError::UnknownCommand(c) => JobError::UnknownCommand(c.clone()),
        JobError::Stopped(why) => JobError::Stopped(why.clone()),
        JobError::Startup(why) => JobError::Startup(why.clone()),
        JobError::RegistryMismatch { differences } => JobError::RegistryMismatch {
            differences: differences.clone(),
        },
        other => JobError::Stopped(other.to_string()),
    }
}

/// The diagnostic of a rank that died (injected `exit` in-process) during
/// a collective operation.
fn died(rank: usize, env: &Envelope, why: String) -> Diagnostic {
    Diagnostic::of(rank, env, "spmd".into(), HandlerError::msg(why))
}
