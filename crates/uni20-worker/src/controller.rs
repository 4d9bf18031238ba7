//! The root's [`Controller`]: submission of command descriptors, the table
//! of operations in flight, and deferred jobs.
//!
//! An operation is *submitted* when its envelope has been sent to every
//! participant; it *completes* when every participant has replied. Between
//! the two the root is free: [`Controller::submit_nowait`] returns at once
//! and calls its completion callback later, from whichever root call next
//! collects replies ([`Controller::progress`], [`Controller::wait_op`],
//! [`Controller::drain`], or a data phase). Replies are matched by `op_id`,
//! never by arrival order.
//!
//! A [`DeferredJob`] is work whose inputs are not ready yet (e.g. a
//! contraction whose operand is still being computed). Jobs run in
//! submission order as soon as [`DeferredJob::ready`] holds; program order of
//! submission is causal order.
//!
//! Fail-stop: the first failure reply aborts the job (MPI: `MPI_Abort`; in
//! process: every rank is woken), and every operation still in flight
//! completes with [`JobError::Stopped`] naming that first failure.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::marker::PhantomData;
use std::time::Duration;

use uni20_dispatch::BackendList;
use uni20_persist::Store;

use crate::context::{CommandSpec, WorkerContext};
use crate::diag::{Diagnostic, JobError};
use crate::envelope::{decode_exact, encode, Envelope};
use crate::fault::{FaultKind, FaultPlan};
use crate::registry::{command_id, Registry};
use crate::transport::{Transport, TransportError, TAG_CMD, TAG_REPLY};
use crate::universe::{run_handler, Control, Reply};

/// Raw replies of one operation: `(rank, reply bytes)` in rank order.
pub type RawReplies = Vec<(usize, Vec<u8>)>;

/// Completion callback of an operation submitted without waiting: called
/// with the op_id and the raw replies (or the failure).
pub type OnDone<'c> = Box<dyn FnOnce(&Controller<'c>, u64, Result<RawReplies, JobError>) + 'c>;

/// Work deferred until its inputs are ready (see the module docs).
pub trait DeferredJob<'c> {
    /// True once every input of the job is available (or failed).
    fn ready(&self) -> bool;
    /// Runs the job (typically: plan and [`Controller::submit_nowait`]).
    fn run(self: Box<Self>, ctl: &Controller<'c>);
    /// Called instead of `run` when the job can never run (its inputs are
    /// never written); the job should fail its outputs with `error`.
    fn abandon(self: Box<Self>, error: JobError);
}

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
        Controller {
            transport,
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
        }
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.transport.size()
    }

    /// The compute workers, which hold blocks and run work items:
    /// `1..size - k` for `k` storage ranks, or `[0]` when the root is alone.
    pub fn worker_ranks(&self) -> Vec<usize> {
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

    /// Every rank except the root: compute workers and storage ranks (or
    /// `[0]` when the root is alone).
    pub fn all_workers(&self) -> Vec<usize> {
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

    /// Transport name: `in-process` or `mpi`.
    pub fn transport_kind(&self) -> &'static str {
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

    /// Number of deferred jobs not yet run.
    pub fn deferred(&self) -> usize {
        self.deferred.borrow().len()
    }

    fn stopped(&self) -> Option<JobError> {
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
        let cb: OnDone<'a> = Box::new(move |ctl, op_id, raw| {
            let decoded = raw.and_then(|raw| decode_replies::<C>(raw, op_id));
            on_done(ctl, decoded)
        });
        self.send_op::<C>(desc, participants, Some(cb))
    }

    fn send_op<C: CommandSpec>(
        &self,
        desc: &C::Descriptor,
        participants: &[usize],
        on_done: Option<OnDone<'a>>,
    ) -> Result<u64, JobError> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        if self.registry.by_wire_name(C::WIRE_NAME).is_none() {
            return Err(JobError::UnknownCommand(C::WIRE_NAME.into()));
        }
        let op_id = self.next_op.get();
        self.next_op.set(op_id + 1);
        let mut env = Envelope {
            op_id,
            command_id: command_id(C::WIRE_NAME),
            wire_name: C::WIRE_NAME.into(),
            debug_name: C::DEBUG_NAME.into(),
            schema_version: C::SCHEMA_VERSION,
            descriptor: encode(desc),
        };
        let root_faults = [
            FaultKind::UnknownCmd,
            FaultKind::Schema,
            FaultKind::Garbage,
            FaultKind::Trailing,
        ];
        if let Some(f) = self.faults.at(0, op_id, &root_faults) {
            tracing::warn!(op_id, "injected fault {f}");
            match f.kind {
                FaultKind::UnknownCmd => env.command_id = command_id("uni20.injected.unknown.v1"),
                FaultKind::Schema => env.schema_version += 1,
                FaultKind::Garbage => env.descriptor = vec![0xff; 7],
                _ => env.descriptor.push(0),
            }
        }
        tracing::debug!(op_id, wire = C::WIRE_NAME, participants = participants.len(), "submit");
        let frame = encode(&Control::Run(env.encode()));
        let remote: Vec<usize> = participants.iter().copied().filter(|&r| r != 0).collect();
        self.inflight.borrow_mut().insert(
            op_id,
            InFlight {
                wire_name: C::WIRE_NAME,
                remaining: participants.len(),
                replies: Vec::new(),
                on_done,
                result: None,
            },
        );
        for &r in &remote {
            if let Err(e) = self.transport.send(r, TAG_CMD, &frame) {
                self.inflight.borrow_mut().remove(&op_id);
                return Err(self.fail_transport(e));
            }
        }
        if participants.contains(&0) {
            let mut ctx = WorkerContext {
                transport: self.transport,
                store: &self.store,
                backends: &self.backends,
                threads: self.threads,
                op_id,
            };
            let outcome = run_handler(&self.registry, &mut ctx, &env, None);
            self.accept_reply(0, Reply { op_id, outcome });
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

    /// Blocks until operation `op_id` has completed and returns its raw
    /// replies (for operations submitted with [`Controller::begin`]).
    ///
    /// # Errors
    /// As [`Controller::finish`].
    pub fn wait_op(&self, op_id: u64) -> Result<RawReplies, JobError> {
        loop {
            let done = {
                let mut table = self.inflight.borrow_mut();
                match table.get(&op_id) {
                    None => {
                        return Err(self
                            .stopped()
                            .unwrap_or(JobError::Protocol(format!("unknown op_id {op_id}"))))
                    }
                    Some(e) if e.result.is_some() => table.remove(&op_id).and_then(|e| e.result),
                    Some(_) => None,
                }
            };
            if let Some(r) = done {
                return r;
            }
            self.recv_one_reply()?;
        }
    }

    /// Collects every reply that has already arrived and runs the deferred
    /// jobs that became ready; never blocks.
    ///
    /// # Errors
    /// The first failure (fail-stop).
    pub fn progress(&self) -> Result<(), JobError> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        self.pump_replies()?;
        self.run_ready_jobs();
        match self.stopped() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Runs everything submitted so far to completion: every deferred job
    /// and every operation in flight.
    ///
    /// # Errors
    /// The first failure (fail-stop), or [`JobError::Protocol`] if deferred
    /// jobs wait for inputs that nothing will write.
    pub fn drain(&self) -> Result<(), JobError> {
        loop {
            self.run_ready_jobs();
            if let Some(e) = self.stopped() {
                self.abandon_jobs(&e);
                return Err(e);
            }
            if !self.inflight.borrow().is_empty() {
                self.recv_one_reply()?;
                continue;
            }
            if self.deferred.borrow().is_empty() {
                return Ok(());
            }
            // Jobs wait, nothing is in flight: their inputs will never be written.
            let e = JobError::Protocol(format!(
                "{} deferred operation(s) wait for inputs that nothing will produce",
                self.deferred.borrow().len()
            ));
            self.abandon_jobs(&e);
            return Err(e);
        }
    }

    /// Drives the job (deferred jobs, replies of operations in flight) until
    /// `cond` holds.
    ///
    /// # Errors
    /// The first failure (fail-stop), or [`JobError::Protocol`] if `cond`
    /// can never become true (nothing is in flight and no deferred job can
    /// run).
    pub fn wait_until(&self, cond: impl Fn() -> bool) -> Result<(), JobError> {
        loop {
            self.run_ready_jobs();
            if cond() {
                return Ok(());
            }
            if let Some(e) = self.stopped() {
                self.abandon_jobs(&e);
                return Err(e);
            }
            if self.inflight.borrow().is_empty() {
                return Err(JobError::Protocol(format!(
                    "waiting for a value that nothing will produce ({} deferred job(s) blocked)",
                    self.deferred.borrow().len()
                )));
            }
            self.recv_one_reply()?;
        }
    }

    /// Queues a job that runs (in submission order) once its inputs are
    /// ready; runs it at once if it already is and nothing is queued before it.
    pub fn defer(&self, job: Box<dyn DeferredJob<'a> + 'a>) {
        if let Some(e) = self.stopped() {
            job.abandon(e);
            return;
        }
        self.deferred.borrow_mut().push_back(job);
        self.run_ready_jobs();
    }

    fn abandon_jobs(&self, e: &JobError) {
        let jobs: Vec<_> = self.deferred.borrow_mut().drain(..).collect();
        for j in jobs {
            j.abandon(JobError::Stopped(e.to_string()));
        }
    }

    /// Runs queued jobs from the front while they are ready (FIFO: a job
    /// never overtakes an earlier one).
    fn run_ready_jobs(&self) {
        if self.running_jobs.replace(true) {
            return; // a job is running and submitting: no re-entry
        }
        loop {
            let job = {
                let mut q = self.deferred.borrow_mut();
                match q.front() {
                    Some(j) if j.ready() => q.pop_front(),
                    _ => None,
                }
            };
            match job {
                Some(j) => match self.stopped() {
                    Some(e) => j.abandon(e),
                    None => j.run(self),
                },
                None => break,
            }
        }
        self.running_jobs.set(false);
    }

    fn recv_one_reply(&self) -> Result<(), JobError> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        let (src, bytes) = self.transport.recv_any(TAG_REPLY).map_err(|e| self.fail_transport(e))?;
        self.handle_reply_bytes(src, &bytes)
    }

    fn pump_replies(&self) -> Result<(), JobError> {
        while let Some((src, bytes)) = self
            .transport
            .try_recv(None, TAG_REPLY)
            .map_err(|e| self.fail_transport(e))?
        {
            self.handle_reply_bytes(src, &bytes)?;
        }
        Ok(())
    }

    fn handle_reply_bytes(&self, src: usize, bytes: &[u8]) -> Result<(), JobError> {
        let reply: Reply = decode_exact(bytes, "reply").map_err(|e| {
            let ops: Vec<String> = self
                .inflight
                .borrow()
                .iter()
                .map(|(id, f)| format!("op_id {id} (`{}`)", f.wire_name))
                .collect();
            self.fail_protocol(format!(
                "rank {src} sent an undecodable reply while {} in flight: {e}",
                ops.join(", ")
            ))
        })?;
        match &reply.outcome {
            Err(d) => Err(self.fail((**d).clone())),
            Ok(_) => {
                if !self.inflight.borrow().contains_key(&reply.op_id) {
                    return Err(self.fail_protocol(format!(
                        "rank {src} replied to op_id {}, which is not in flight",
                        reply.op_id
                    )));
                }
                self.accept_reply(src, reply);
                Ok(())
            }
        }
    }

    /// Records one participant's reply; completes the operation when it was
    /// the last one.
    fn accept_reply(&self, src: usize, reply: Reply) {
        let bytes = match reply.outcome {
            Ok(b) => b,
            Err(d) => {
                let _ = self.fail(*d);
                return;
            }
        };
        let finished = {
            let mut table = self.inflight.borrow_mut();
            let Some(entry) = table.get_mut(&reply.op_id) else {
                return;
            };
            entry.replies.push((src, bytes));
            entry.remaining -= 1;
            if entry.remaining > 0 {
                return;
            }
            entry.replies.sort_by_key(|(r, _)| *r);
            let replies = std::mem::take(&mut entry.replies);
            match entry.on_done.take() {
                Some(cb) => {
                    table.remove(&reply.op_id);
                    Some((cb, reply.op_id, replies))
                }
                None => {
                    entry.result = Some(Ok(replies));
                    None
                }
            }
        };
        if let Some((cb, op_id, replies)) = finished {
            cb(self, op_id, Ok(replies));
        }
    }

    /// Sends a payload to `dest` in a root-involving data phase (tag
    /// [`TAG_ROOT_DATA`](crate::TAG_ROOT_DATA)), while watching for a failure
    /// reply from any participant: a failed peer that will never receive
    /// must not leave the root blocked.
    ///
    /// # Errors
    /// [`JobError::Command`] if a participant reported a failure meanwhile;
    /// [`JobError::Transport`] if the job was aborted.
    pub fn send_data(&self, dest: usize, bytes: &[u8]) -> Result<(), JobError> {
        let mut failure = None;
        let sent = self.transport.send_polling(dest, crate::TAG_ROOT_DATA, bytes, &mut || {
            self.pump_replies().map_err(|e| {
                let text = e.to_string();
                failure = Some(e);
                text
            })
        });
        if let Some(e) = failure {
            return Err(e);
        }
        sent.map_err(|e| self.fail_transport(e))
    }

    /// Receives a payload from `src` in a root-involving data phase, while
    /// watching for a failure reply from any participant (see
    /// [`Controller::send_data`]).
    ///
    /// # Errors
    /// [`JobError::Command`] if a participant reported a failure before
    /// sending; [`JobError::Transport`] if the job was aborted.
    pub fn recv_data(&self, src: usize) -> Result<Vec<u8>, JobError> {
        let mut spins = 0u32;
        loop {
            match self.transport.try_recv(Some(src), crate::TAG_ROOT_DATA) {
                Ok(Some((_, bytes))) => return Ok(bytes),
                Ok(None) => {}
                Err(e) => return Err(self.fail_transport(e)),
            }
            self.pump_replies()?;
            if let Some(e) = self.stopped() {
                return Err(e);
            }
            spins += 1;
            if spins < 1000 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    fn fail_transport(&self, e: TransportError) -> JobError {
        let e = JobError::Transport(e);
        self.record_failure(&e, None);
        e
    }

    fn fail_protocol(&self, why: String) -> JobError {
        let e = JobError::Protocol(why);
        self.record_failure(&e, None);
        self.stop(&e);
        e
    }

    fn fail(&self, d: Diagnostic) -> JobError {
        let e = JobError::Command(Box::new(d.clone()));
        self.record_failure(&e, Some((d.op_id, &d)));
        self.stop(&e);
        e
    }

    /// Remembers the first failure and completes every operation in flight:
    /// the failed one with its diagnostic, the others with
    /// [`JobError::Stopped`].
    fn record_failure(&self, e: &JobError, failed: Option<(u64, &Diagnostic)>) {
        if self.first_failure.borrow().is_some() {
            return;
        }
        *self.first_failure.borrow_mut() = Some(e.to_string());
        let pending: Vec<(u64, InFlight<'a>)> = std::mem::take(&mut *self.inflight.borrow_mut()).into_iter().collect();
        for (op_id, mut entry) in pending {
            let err = match failed {
                Some((id, d)) if id == op_id => JobError::Command(Box::new(d.clone())),
                _ => JobError::Stopped(e.to_string()),
            };
            match entry.on_done.take() {
                Some(cb) => cb(self, op_id, Err(err)),
                None => {
                    entry.result = Some(Err(err));
                    self.inflight.borrow_mut().insert(op_id, entry);
                }
            }
        }
    }

    fn stop(&self, e: &JobError) {
        tracing::warn!("fail-stop: {e}");
        // On MPI `abort` prints the reason once and ends every rank.
        self.transport.abort(&format!("fail-stop:\n{e}"));
    }
}
