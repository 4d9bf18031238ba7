//! The root's [`Controller`]: submission of command descriptors, the table
//! of operations in flight, and deferred jobs.
//!
//! This file owns the controller's state and submission; `inflight.rs`
//! collects replies and records the first failure, `deferred.rs` runs
//! deferred jobs and drains, `data.rs` holds the root-involving data phases.
//!
//! An operation is *submitted* when its envelope has been sent to every
//! participant; it *completes* when every participant has replied. Between
//! the two the root is free: [`Controller::submit_nowait`] returns at once
//! and calls its completion callback later, from whichever root call next
//! collects replies ([`Controller::progress`], [`Controller::wait_op`],
//! [`Controller::drain`], or a data phase). Replies are matched by `op_id`,
//! never by arrival order.
//!
//! Every participant receives the same descriptor ([`Controller::submit_nowait`],
//! [`Controller::begin`]), or each its own ([`Controller::submit_nowait_each`]:
//! a plan split per rank); either way one op_id and one reply per participant.
//!
//! A [`DeferredJob`] is work whose inputs are not ready yet (e.g. a
//! contraction whose operand is still being computed). Jobs run in
//! submission order as soon as [`DeferredJob::ready`] holds; program order of
//! submission is causal order.
//!
//! Fail-stop: the first failure reply aborts the job (MPI: `MPI_Abort`; in
//! process: every rank is woken), and every operation still in flight
//! completes with [`JobError::Stopped`] naming that first failure.

mod data;
mod deferred;
mod inflight;
mod profile;
mod releases;
#[cfg(test)]
mod tests;

pub use deferred::DeferredJob;
pub use profile::RootProfile;
pub use releases::CollectReport;

use std::any::{Any, TypeId};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

use serde_bytes::ByteBuf;
use uni20_dispatch::BackendList;
use uni20_persist::{ObjectId, Store};

use crate::context::{CommandSpec, WorkerContext};
use crate::diag::JobError;
use crate::envelope::{decode_exact, encode, encode_shared, EnvelopeRef};
use crate::fault::{FaultKind, FaultPlan};
use crate::handler::run_handler;
use crate::ledger::ReleaseLedger;
use crate::protocol::{ControlRef, Reply};
use crate::registry::{command_id, Registry};
use crate::transport::{Transport, TransportKind, TAG_CMD};

/// Raw replies of one operation: `(rank, reply bytes)` in rank order.
pub type RawReplies = Vec<(usize, Vec<u8>)>;

/// Completion callback of an operation submitted without waiting: called
/// with the op_id and the raw replies (or the failure).
pub type OnDone<'c> = Box<dyn FnOnce(&Controller<'c>, u64, Result<RawReplies, JobError>) + 'c>;

struct InFlight<'c> {
    wire_name: &'static str,
    remaining: usize,
    replies: RawReplies,
    on_done: Option<OnDone<'c>>,
    result: Option<Result<RawReplies, JobError>>,
}

/// The root's handle on the universe, passed to the user's closure.
///
/// Submits command descriptors to workers and collects their replies. All
/// methods take `&self`; the controller is used from the root thread only.
pub struct Controller<'a> {
    transport: &'a dyn Transport,
    universe_id: u64,
    ledger: Arc<ReleaseLedger>,
    flushing_releases: Cell<bool>,
    registry: Registry,
    store: Store,
    backends: BackendList,
    threads: usize,
    storage_ranks: usize,
    faults: FaultPlan,
    next_op: Cell<u64>,
    first_failure: RefCell<Option<String>>,
    inflight: RefCell<BTreeMap<u64, InFlight<'a>>>,
    deferred: RefCell<VecDeque<Box<dyn DeferredJob<'a> + 'a>>>,
    running_jobs: Cell<bool>,
    counters: profile::Counters,
    root_state: RefCell<HashMap<TypeId, Box<dyn Any>>>,
}

/// What one submission sends: one descriptor for every participant, or
/// one per participant.
enum Descriptors<'d, D> {
    /// `(descriptor, participants)`: every participant receives it.
    Shared(&'d D, &'d [usize]),
    /// As `Shared`, owned: the root runs its own share from the value.
    SharedOwned(D, &'d [usize]),
    /// `(rank, descriptor)` per participant, owned: the root runs its own
    /// share from the value.
    Each(Vec<(usize, D)>),
}

/// A submitted command whose replies have not been collected yet.
#[must_use = "an operation must be finished with Controller::finish"]
pub struct PendingOp<C: CommandSpec> {
    /// The operation id.
    pub op_id: u64,
    _c: PhantomData<C>,
}

fn decode_replies<C: CommandSpec>(raw: RawReplies, op_id: u64) -> Result<Vec<(usize, C::Reply)>, JobError> {
    raw.into_iter()
        .map(|(r, b)| {
            decode_exact::<C::Reply>(&b, "reply body").map(|v| (r, v)).map_err(|e| {
                JobError::Protocol(format!(
                    "op_id {op_id} (`{}`): reply body of rank {r}: {e}",
                    C::WIRE_NAME
                ))
            })
        })
        .collect()
}
impl<'a> Controller<'a> {
    pub(crate) fn new(
        transport: &'a dyn Transport,
        registry: Registry,
        store: Store,
        backends: BackendList,
        threads: usize,
        storage_ranks: usize,
        faults: FaultPlan,
    ) -> Controller<'a> {
        let universe_id = new_universe_id();
        Controller {
            transport,
            universe_id,
            ledger: Arc::new(ReleaseLedger::new(universe_id)),
            flushing_releases: Cell::new(false),
            registry,
            store,
            backends,
            threads,
            storage_ranks,
            faults,
            next_op: Cell::new(1),
            first_failure: RefCell::new(None),
            inflight: RefCell::new(BTreeMap::new()),
            deferred: RefCell::new(VecDeque::new()),
            running_jobs: Cell::new(false),
            counters: profile::Counters::default(),
            root_state: RefCell::new(HashMap::new()),
        }
    }

    /// The identity of this universe: a random 64-bit value drawn when it
    /// started, so handles of one universe are never taken for another's.
    pub fn universe_id(&self) -> u64 {
        self.universe_id
    }
    /// The ledger of root-side handles and queued block releases (see
    /// [`ReleaseLedger`]). Distributed tensors retain their blocks in it and
    /// release them when their last handle drops.
    pub fn ledger(&self) -> &Arc<ReleaseLedger> {
        &self.ledger
    }
    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.transport.size()
    }
    /// The compute ranks, which hold blocks and run work items:
    /// `1..size - k` for `k` storage ranks, or `[0]` when the root is alone
    /// (storage ranks are not compute ranks).
    pub fn compute_ranks(&self) -> Vec<usize> {
        if self.size() == 1 {
            vec![0]
        } else {
            (1..self.size() - self.storage_ranks).collect()
        }
    }
    /// The storage ranks (the last `k` ranks): object servers that own
    /// blocks placed on them and never compute.
    pub fn storage_ranks(&self) -> Vec<usize> {
        (self.size() - self.storage_ranks..self.size()).collect()
    }
    /// Every rank except the root: compute ranks and storage ranks (or
    /// `[0]` when the root is alone, which then does everything itself).
    pub fn non_root_ranks(&self) -> Vec<usize> {
        if self.size() == 1 {
            vec![0]
        } else {
            (1..self.size()).collect()
        }
    }
    /// The transport (for root-involving data phases such as scatter/gather).
    pub fn transport(&self) -> &dyn Transport {
        self.transport
    }
    /// The root's own persistent store (holds blocks only when the root is
    /// alone).
    pub fn store(&self) -> &Store {
        &self.store
    }
    /// The root's local backends.
    pub fn backends(&self) -> &BackendList {
        &self.backends
    }
    /// The root's registry (identical on every rank after start-up).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
    /// Thread budget of each rank's local kernels.
    pub fn threads_per_rank(&self) -> usize {
        self.threads
    }
    /// Which transport this universe runs on (its [`TransportKind::name`] is `in-process`
    /// or `mpi`).
    pub fn transport_kind(&self) -> TransportKind {
        self.transport.kind()
    }
    /// True once an operation has failed and the job was stopped.
    pub fn has_failed(&self) -> bool {
        self.first_failure.borrow().is_some()
    }
    /// Number of operations submitted and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.inflight.borrow().len()
    }
    /// Runs `f` on this universe's root-side state of type `T` (created
    /// with `T::default()` on first use, kept until the controller is
    /// dropped): for example a plan cache of a family of operations. A call
    /// made from inside `f` for the same `T` sees a fresh default value
    /// (the outer call's state is taken out while `f` runs), and what it
    /// stores is replaced by the outer call's.
    pub fn with_root_state<T: Default + 'static, R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let taken = self.root_state.borrow_mut().remove(&TypeId::of::<T>());
        let mut state: Box<T> = taken.and_then(|b| b.downcast::<T>().ok()).unwrap_or_default();
        let r = f(&mut state);
        self.root_state.borrow_mut().insert(TypeId::of::<T>(), state);
        r
    }
    /// Number of deferred jobs not yet run.
    pub fn deferred(&self) -> usize {
        self.deferred.borrow().len()
    }
    pub(super) fn stopped(&self) -> Option<JobError> {
        self.first_failure
            .borrow()
            .as_ref()
            .map(|f| JobError::Stopped(f.clone()))
    }
    /// Submits `desc` to `participants` and waits for every reply.
    ///
    /// # Errors
    /// As [`Controller::begin`] and [`Controller::finish`].
    pub fn submit<C: CommandSpec>(
        &self,
        desc: &C::Descriptor,
        participants: &[usize],
    ) -> Result<Vec<(usize, C::Reply)>, JobError> {
        let op = self.begin::<C>(desc, participants)?;
        self.finish(op)
    }
    /// As [`Controller::submit`], taking the descriptor by value: when the
    /// root is a participant it runs its own share from the value (see
    /// [`Controller::submit_nowait_owned`]).
    ///
    /// # Errors
    /// As [`Controller::submit`].
    pub fn submit_owned<C: CommandSpec>(
        &self,
        desc: C::Descriptor,
        participants: &[usize],
    ) -> Result<Vec<(usize, C::Reply)>, JobError> {
        let op_id = self.send_op_with::<C>(Descriptors::SharedOwned(desc, participants), None)?;
        self.finish(PendingOp::<C> { op_id, _c: PhantomData })
    }
    /// Sends the command to every participant and returns without waiting;
    /// collect the replies with [`Controller::finish`]. The root runs its
    /// own share at once when it is a participant.
    ///
    /// # Errors
    /// [`JobError::UnknownCommand`] if `C` is not in the registry (nothing is
    /// sent); [`JobError::Stopped`] after an earlier failure;
    /// [`JobError::Transport`] if the job was aborted.
    pub fn begin<C: CommandSpec>(
        &self,
        desc: &C::Descriptor,
        participants: &[usize],
    ) -> Result<PendingOp<C>, JobError> {
        let op_id = self.send_op::<C>(desc, participants, None)?;
        Ok(PendingOp { op_id, _c: PhantomData })
    }
    /// Submits the command and returns its op_id at once; `on_done` runs
    /// with every participant's decoded reply (or the failure) when the
    /// operation completes.
    ///
    /// # Errors
    /// As [`Controller::begin`]; `on_done` is not called when this fails.
    pub fn submit_nowait<C: CommandSpec + 'a>(
        &self,
        desc: &C::Descriptor,
        participants: &[usize],
        on_done: impl FnOnce(&Controller<'a>, Result<Vec<(usize, C::Reply)>, JobError>) + 'a,
    ) -> Result<u64, JobError> {
        let cb = decoding::<C>(on_done);
        self.send_op::<C>(desc, participants, Some(cb))
    }
    /// Submits one command with a different descriptor per participant and
    /// returns its op_id at once: `shares` holds `(rank, descriptor)`, one
    /// entry per participant. Everything else is as [`Controller::submit_nowait`]:
    /// one op_id and one envelope per rank with the same fields, the rank's
    /// queued releases in its frame, injected faults applied to every
    /// share, the root running its own share at once when it is a
    /// participant, and `on_done` called with every participant's decoded
    /// reply (in rank order) when the operation completes.
    ///
    /// Use it when each rank needs only part of a plan (an item-per-block
    /// command's own items and the transfers it takes part in); commands
    /// whose handler needs the whole descriptor use `submit_nowait`.
    ///
    /// # Errors
    /// [`JobError::Protocol`] if a rank appears twice in `shares` or is not
    /// below [`Controller::size`] (nothing is sent); otherwise as
    /// [`Controller::begin`]. `on_done` is not called when this fails.
    pub fn submit_nowait_each<C: CommandSpec + 'a>(
        &self,
        shares: Vec<(usize, C::Descriptor)>,
        on_done: impl FnOnce(&Controller<'a>, Result<Vec<(usize, C::Reply)>, JobError>) + 'a,
    ) -> Result<u64, JobError> {
        let mut seen = std::collections::BTreeSet::new();
        for &(r, _) in &shares {
            if r >= self.size() {
                return Err(JobError::Protocol(format!(
                    "`{}`: a share for rank {r} of a universe of {} ranks",
                    C::WIRE_NAME,
                    self.size()
                )));
            }
            if !seen.insert(r) {
                return Err(JobError::Protocol(format!(
                    "`{}`: two shares for rank {r}",
                    C::WIRE_NAME
                )));
            }
        }
        let cb = decoding::<C>(on_done);
        self.send_op_with::<C>(Descriptors::Each(shares), Some(cb))
    }
    /// As [`Controller::submit_nowait`], taking the descriptor by value:
    /// when the root is a participant it runs its own share from the value
    /// (no descriptor bytes encoded for it or decoded), and when it is the
    /// only participant nothing is encoded at all.
    ///
    /// # Errors
    /// As [`Controller::submit_nowait`].
    pub fn submit_nowait_owned<C: CommandSpec + 'a>(
        &self,
        desc: C::Descriptor,
        participants: &[usize],
        on_done: impl FnOnce(&Controller<'a>, Result<Vec<(usize, C::Reply)>, JobError>) + 'a,
    ) -> Result<u64, JobError> {
        let cb = decoding::<C>(on_done);
        self.send_op_with::<C>(Descriptors::SharedOwned(desc, participants), Some(cb))
    }
    fn send_op<C: CommandSpec>(
        &self,
        desc: &C::Descriptor,
        participants: &[usize],
        on_done: Option<OnDone<'a>>,
    ) -> Result<u64, JobError> {
        self.send_op_with::<C>(Descriptors::Shared(desc, participants), on_done)
    }
    fn send_op_with<C: CommandSpec>(
        &self,
        descs: Descriptors<'_, C::Descriptor>,
        on_done: Option<OnDone<'a>>,
    ) -> Result<u64, JobError> {
        let started = Instant::now();
        let handler_before = self.counters.root_handler_ns.get();
        let r = self.send_op_untimed::<C>(descs, on_done);
        let handler = self.counters.root_handler_ns.get().saturating_sub(handler_before);
        profile::add(
            &self.counters.submit_ns,
            profile::elapsed_ns(started).saturating_sub(handler),
        );
        r
    }
    fn send_op_untimed<C: CommandSpec>(
        &self,
        descs: Descriptors<'_, C::Descriptor>,
        on_done: Option<OnDone<'a>>,
    ) -> Result<u64, JobError> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        let Some(entry) = self.registry.by_wire_name(C::WIRE_NAME) else {
            return Err(JobError::UnknownCommand(C::WIRE_NAME.into()));
        };
        let has_inline = entry.inline.is_some();
        self.flush_full_release_queues()?;
        let op_id = self.next_op.get();
        self.next_op.set(op_id + 1);
        profile::add(&self.counters.operations, 1);
        let root_faults = [
            FaultKind::UnknownCmd,
            FaultKind::Schema,
            FaultKind::Garbage,
            FaultKind::Trailing,
        ];
        let fault = self.faults.at(0, op_id, &root_faults);
        // The root's own share, kept as a value when the entry can run it
        // so (an injected root fault travels as bytes, like any rank's).
        let inline_ok = has_inline && fault.is_none();
        let mut own: Option<C::Descriptor> = None;
        // The encoded descriptors (empty for a share the root keeps as a
        // value), and per participant the one it receives.
        let (mut descriptors, targets): (Vec<Vec<u8>>, Vec<(usize, usize)>) = match descs {
            Descriptors::Shared(desc, participants) => {
                (vec![encode(desc)], participants.iter().map(|&r| (r, 0)).collect())
            }
            Descriptors::SharedOwned(desc, participants) => {
                let root = participants.contains(&0);
                let bytes = if root && inline_ok && participants.iter().all(|&r| r == 0) {
                    Vec::new()
                } else {
                    encode(&desc)
                };
                if root && inline_ok {
                    own = Some(desc);
                }
                (vec![bytes], participants.iter().map(|&r| (r, 0)).collect())
            }
            Descriptors::Each(shares) => {
                let mut descriptors = Vec::with_capacity(shares.len());
                let mut targets = Vec::with_capacity(shares.len());
                for (k, (r, d)) in shares.into_iter().enumerate() {
                    if r == 0 && inline_ok {
                        descriptors.push(Vec::new());
                        own = Some(d);
                    } else {
                        descriptors.push(encode(&d));
                    }
                    targets.push((r, k));
                }
                (descriptors, targets)
            }
        };
        let mut env = EnvelopeRef {
            op_id,
            command_id: command_id(C::WIRE_NAME),
            wire_name: C::WIRE_NAME,
            debug_name: C::DEBUG_NAME,
            schema_version: C::SCHEMA_VERSION,
            descriptor: &[],
        };
        if let Some(f) = fault {
            tracing::warn!(op_id, "injected fault {f}");
            match f.kind {
                FaultKind::UnknownCmd => env.command_id = command_id("uni20.injected.unknown.v1"),
                FaultKind::Schema => env.schema_version += 1,
                FaultKind::Garbage => descriptors.iter_mut().for_each(|d| *d = vec![0xff; 7]),
                _ => descriptors.iter_mut().for_each(|d| d.push(0)),
            }
        }
        tracing::debug!(
            op_id,
            wire = C::WIRE_NAME,
            participants = targets.len(),
            descriptors = descriptors.len(),
            "submit"
        );
        // One encoded envelope per descriptor; with one shared descriptor,
        // one frame posted to every participant: submission never waits for
        // a worker to receive (it may be busy replying). A rank with queued
        // releases gets them in its own copy of the frame.
        // Only the descriptors some other rank receives are framed.
        let mut sent = vec![false; descriptors.len()];
        for &(r, k) in &targets {
            if r != 0 {
                sent[k] = true;
            }
        }
        let envelopes: Vec<Vec<u8>> = descriptors
            .iter()
            .zip(&sent)
            .map(|(d, &s)| {
                if s {
                    EnvelopeRef { descriptor: d, ..env }.encode()
                } else {
                    Vec::new()
                }
            })
            .collect();
        // A frame encoded straight from its envelope (no copy of it), into
        // one shared buffer of its size.
        let run = |k: usize, releases: Vec<ObjectId>| {
            encode_shared(&ControlRef::Run {
                envelope: &envelopes[k],
                releases,
            })
        };
        let frames: Vec<Option<Arc<[u8]>>> = (0..envelopes.len())
            .map(|k| sent[k].then(|| run(k, Vec::new())))
            .collect();
        self.inflight.borrow_mut().insert(
            op_id,
            InFlight {
                wire_name: C::WIRE_NAME,
                remaining: targets.len(),
                replies: Vec::new(),
                on_done,
                result: None,
            },
        );
        for &(r, k) in targets.iter().filter(|&&(r, _)| r != 0) {
            let releases = self.ledger.take_pending(r);
            // `frames[k]` is there: rank `r` receives descriptor `k`.
            let frame = match &frames[k] {
                Some(frame) if releases.is_empty() => frame.clone(),
                _ => {
                    if !releases.is_empty() {
                        self.ledger.note_piggyback();
                    }
                    run(k, releases)
                }
            };
            if let Err(e) = self.transport.post(r, TAG_CMD, frame) {
                self.inflight.borrow_mut().remove(&op_id);
                return Err(self.fail_transport(e));
            }
        }
        drop(frames);
        if let Some(&(_, k)) = targets.iter().find(|&&(r, _)| r == 0) {
            self.release_on_root();
            let mut ctx = WorkerContext {
                transport: self.transport,
                store: &self.store,
                backends: &self.backends,
                threads: self.threads,
                op_id,
                storage_ranks: self.storage_ranks,
                corrupt_sends: false,
            };
            let t = Instant::now();
            // A share kept as a value runs from it; its envelope (for the
            // diagnostic of a failure) carries no bytes.
            let inline = own.map(|d| Box::new(d) as Box<dyn Any>);
            let own_env = EnvelopeRef {
                descriptor: if inline.is_some() { &[] } else { &descriptors[k] },
                ..env
            };
            let outcome = run_handler(&self.registry, &mut ctx, &own_env.to_envelope(), None, inline);
            let busy_ns = profile::elapsed_ns(t);
            profile::add(&self.counters.root_handler_ns, busy_ns);
            self.accept_reply(
                0,
                Reply {
                    op_id,
                    outcome: outcome.map(ByteBuf::from),
                    busy_ns,
                },
            );
        }
        Ok(op_id)
    }
    /// Waits for every reply of `op` (collecting replies of other operations
    /// on the way), in rank order.
    ///
    /// # Errors
    /// [`JobError::Command`] with the first failing rank's diagnostic; the
    /// job is then aborted (fail-stop: on MPI the diagnostic is printed and
    /// every rank exits non-zero). [`JobError::Stopped`] if another
    /// operation failed first.
    pub fn finish<C: CommandSpec>(&self, op: PendingOp<C>) -> Result<Vec<(usize, C::Reply)>, JobError> {
        let raw = self.wait_op(op.op_id)?;
        decode_replies::<C>(raw, op.op_id).map_err(|e| self.fail_protocol(e.to_string()))
    }
}

/// The completion callback of an operation of `C` submitted without
/// waiting: decodes every participant's reply, then calls `on_done`.
fn decoding<'a, C: CommandSpec + 'a>(
    on_done: impl FnOnce(&Controller<'a>, Result<Vec<(usize, C::Reply)>, JobError>) + 'a,
) -> OnDone<'a> {
    Box::new(move |ctl, op_id, raw| {
        let decoded = raw.and_then(|raw| decode_replies::<C>(raw, op_id));
        on_done(ctl, decoded)
    })
}

/// A fresh universe identity: 64 random bits (never 0).
fn new_universe_id() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        // No entropy source: the clock and the process id still separate
        // universes of one process and of concurrent processes.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        b = (t ^ (u64::from(std::process::id()) << 32)).to_le_bytes();
    }
    u64::from_le_bytes(b).max(1)
}
