//! The life of a distributed operation on the root, shared by every
//! family: wait (in program order) until the inputs' block maps are ready,
//! plan from their manifests, submit without blocking, and fill the
//! outputs' block maps from the replies, or poison them with the first
//! error. An operation keeps its input tensors alive until every
//! participant has replied, even if the user dropped them after calling.

use std::cell::RefCell;
use std::rc::Rc;

use uni20_async::{ReadBuffer, WriteBuffer};
use uni20_worker::{CommandSpec, Controller, DeferredJob, JobError};

use crate::error::DistError;
use crate::summary::PlanSummary;
use crate::tensor::{BlockRef, DistTensor, Manifest};

/// One input of a deferred operation: the read epoch taken when the user
/// called the operation, and the handle that keeps the tensor alive.
pub(crate) struct Input {
    read: ReadBuffer<Vec<BlockRef>>,
    tensor: DistTensor,
}

impl Input {
    /// Takes a read epoch of `t` now (program order is causal order).
    pub(crate) fn of(t: &DistTensor) -> Input {
        Input {
            read: t.read_blocks(),
            tensor: t.clone(),
        }
    }
}

/// One output of a deferred operation: the pending tensor and the write
/// buffer of its block map.
pub(crate) struct Output {
    pub(crate) tensor: DistTensor,
    pub(crate) write: WriteBuffer<Vec<BlockRef>>,
}

impl Output {
    /// Fails this output with `e`.
    pub(crate) fn fail(self, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) {
        self.write.fail(e);
    }

    /// Writes the block map (the tensor retains its blocks from now on).
    fn fill(self, blocks: Vec<BlockRef>) {
        self.tensor.adopt(&blocks);
        match self.write.wait() {
            Ok(mut g) => {
                g.set(blocks);
            }
            Err(e) => tracing::error!("output epoch unavailable: {e}"),
        }
    }
}

/// What the planning step of an operation produces, given the inputs'
/// manifests.
pub(crate) type PlanFn<'c> =
    Box<dyn FnOnce(&Controller<'c>, Vec<Manifest>, Vec<Output>, Vec<DistTensor>) -> Result<(), DistError> + 'c>;

/// A distributed operation waiting for its inputs' block maps.
pub(crate) struct OpJob<'c> {
    inputs: Vec<Input>,
    outputs: Vec<Output>,
    plan: PlanFn<'c>,
}

impl<'c> OpJob<'c> {
    /// A job over `inputs` that fills `outputs` by running `plan` once the
    /// inputs are ready. `plan` gets the manifests (in input order), the
    /// outputs and the input handles (to keep alive until completion,
    /// usually by passing them to [`submit_filling`]).
    pub(crate) fn new(inputs: Vec<Input>, outputs: Vec<Output>, plan: PlanFn<'c>) -> OpJob<'c> {
        OpJob { inputs, outputs, plan }
    }
}

impl<'c> DeferredJob<'c> for OpJob<'c> {
    fn ready(&self) -> bool {
        self.inputs.iter().all(|i| i.read.is_ready())
    }

    fn run(self: Box<Self>, ctl: &Controller<'c>) {
        let OpJob { inputs, outputs, plan } = *self;
        let mut manifests = Vec::with_capacity(inputs.len());
        let mut keep = Vec::with_capacity(inputs.len());
        let mut failure = None;
        for i in inputs {
            match (i.read.wait(), i.tensor.pipelined_failure()) {
                (Ok(_), Some(e)) => {
                    failure.get_or_insert(Failure::Pipelined(e));
                }
                (Ok(blocks), None) => manifests.push(Manifest::new(i.tensor.meta(), blocks.clone())),
                (Err(e), _) => {
                    failure.get_or_insert(Failure::Poisoned(e));
                }
            }
            drop(i.read);
            keep.push(i.tensor);
        }
        if let Some(e) = failure {
            for o in outputs {
                match &e {
                    Failure::Poisoned(e) => o.fail(e.clone()),
                    Failure::Pipelined(e) => o.fail(SharedDistError(e.clone())),
                }
            }
            return;
        }
        // `plan` fails its outputs itself once it owns them; an error it
        // returns has already been recorded there.
        if let Err(e) = plan(ctl, manifests, outputs, keep) {
            tracing::debug!("operation failed while planning: {e}");
        }
    }

    fn abandon(self: Box<Self>, error: JobError) {
        let e = std::sync::Arc::new(DistError::Job(error));
        for o in self.outputs {
            o.fail(SharedDistError(e.clone()));
        }
    }
}

/// Why an operation's input is unusable: its block map is poisoned, or
/// the pipelined operation that wrote it failed afterwards.
enum Failure {
    Poisoned(uni20_async::AsyncError),
    Pipelined(std::sync::Arc<DistError>),
}

/// What a submission sends: one descriptor to every participant, or one
/// per participant (a plan split per rank).
pub(crate) enum Sending<'d, D> {
    /// `(descriptor, participants)`.
    Whole(&'d D, &'d [usize]),
    /// As `Whole`, owned: the root runs its own share from the value
    /// ([`Controller::submit_nowait_owned`]).
    WholeOwned(D, &'d [usize]),
    /// `(rank, descriptor)` per participant.
    Each(Vec<(usize, D)>),
}

impl<D> Sending<'_, D> {
    /// Sends command `C` as described (`submit_nowait` or
    /// `submit_nowait_each`); `on_done` runs on completion.
    fn submit<'c, C: CommandSpec<Descriptor = D> + 'c>(
        self,
        ctl: &Controller<'c>,
        on_done: impl FnOnce(&Controller<'c>, Result<Vec<(usize, C::Reply)>, JobError>) + 'c,
    ) -> Result<u64, JobError> {
        match self {
            Sending::Whole(desc, participants) => ctl.submit_nowait::<C>(desc, participants, on_done),
            Sending::WholeOwned(desc, participants) => ctl.submit_nowait_owned::<C>(desc, participants, on_done),
            Sending::Each(shares) => ctl.submit_nowait_each::<C>(shares, on_done),
        }
    }
}

/// Submits command `C` without waiting and fills `outputs` from the
/// replies: `collect` turns every participant's reply into one block map
/// per output. On any failure (submission, a failed reply, `collect`)
/// every output is poisoned with that error. `keep` (the inputs) stays
/// alive until the operation has completed. Each output gets `summary`.
pub(crate) fn submit_filling<'c, C: CommandSpec>(
    ctl: &Controller<'c>,
    desc: &C::Descriptor,
    participants: &[usize],
    outputs: Vec<Output>,
    keep: Vec<DistTensor>,
    summary: PlanSummary,
    collect: impl FnOnce(Vec<(usize, C::Reply)>) -> Result<Vec<Vec<BlockRef>>, DistError> + 'c,
) {
    submit_filling_with::<C>(ctl, Sending::Whole(desc, participants), outputs, keep, summary, collect);
}

/// As [`submit_filling`], with the descriptors given by `sending`.
pub(crate) fn submit_filling_with<'c, C: CommandSpec>(
    ctl: &Controller<'c>,
    sending: Sending<'_, C::Descriptor>,
    outputs: Vec<Output>,
    keep: Vec<DistTensor>,
    summary: PlanSummary,
    collect: impl FnOnce(Vec<(usize, C::Reply)>) -> Result<Vec<Vec<BlockRef>>, DistError> + 'c,
) {
    tracing::debug!("{summary}");
    for o in &outputs {
        o.tensor.set_plan_summary(summary.clone());
    }
    // Shared between the completion callback and this function, so a
    // submission failure can poison the outputs with its error.
    let slot = Rc::new(RefCell::new(Some(outputs)));
    let cb_slot = slot.clone();
    let on_done = move |_: &Controller<'c>, replies: Result<Vec<(usize, C::Reply)>, JobError>| {
        let _keep = keep;
        let Some(outputs) = cb_slot.borrow_mut().take() else {
            return;
        };
        let maps = replies.map_err(DistError::from).and_then(collect).and_then(|maps| {
            if maps.len() == outputs.len() {
                Ok(maps)
            } else {
                Err(DistError::Protocol(format!(
                    "{} block maps for {} outputs",
                    maps.len(),
                    outputs.len()
                )))
            }
        });
        match maps {
            Ok(maps) => outputs.into_iter().zip(maps).for_each(|(o, m)| o.fill(m)),
            Err(e) => {
                let e = std::sync::Arc::new(e);
                for o in outputs {
                    o.fail(SharedDistError(e.clone()));
                }
            }
        }
    };
    let submitted = sending.submit::<C>(ctl, on_done);
    if let Err(e) = submitted {
        if let Some(outputs) = slot.borrow_mut().take() {
            let e = std::sync::Arc::new(DistError::from(e));
            for o in outputs {
                o.fail(SharedDistError(e.clone()));
            }
        }
    }
}

/// As [`submit_filling_with`] for a command whose outputs were named
/// before submission (pipelined submission): `early` is the one output's
/// block map, written as soon as the command is sent, so that dependent
/// operations are planned and sent without waiting for its replies. The
/// output stays not ready ([`DistTensor::is_ready`]) until the replies
/// have arrived; they must name exactly `early` (else a protocol error).
/// A failure after submission is recorded on the output
/// ([`DistTensor::settle`]): [`DistTensor::wait`] reports it, and an
/// operation still to be planned on it fails with it. After sending, the
/// replies already in are collected ([`Controller::progress`]), so the
/// inputs of completed commands are released while a chain is sent. Under fail-stop the
/// first failure also completes every operation in flight, so every later
/// operation reports it.
pub(crate) fn submit_pipelined<'c, C: CommandSpec>(
    ctl: &Controller<'c>,
    sending: Sending<'_, C::Descriptor>,
    outputs: Vec<Output>,
    keep: Vec<DistTensor>,
    summary: PlanSummary,
    early: Vec<BlockRef>,
    collect: impl FnOnce(Vec<(usize, C::Reply)>) -> Result<Vec<Vec<BlockRef>>, DistError> + 'c,
) {
    let [output]: [Output; 1] = match outputs.try_into() {
        Ok(one) => one,
        Err(outputs) => {
            let e = std::sync::Arc::new(DistError::Protocol(format!(
                "a pipelined command with {} outputs",
                outputs.len()
            )));
            for o in outputs {
                o.fail(SharedDistError(e.clone()));
            }
            return;
        }
    };
    tracing::debug!("{summary} (pipelined)");
    output.tensor.set_plan_summary(summary);
    let tensor = output.tensor.clone();
    tensor.begin_flight();
    let named = early.clone();
    // Weak: a handle dropped (or `release`d) while the command is in
    // flight frees its blocks as soon as the command has run.
    let settled = tensor.downgrade();
    let on_done = move |_: &Controller<'c>, replies: Result<Vec<(usize, C::Reply)>, JobError>| {
        let _keep = keep;
        let checked = replies.map_err(DistError::from).and_then(collect).and_then(|maps| {
            if maps.len() == 1 && maps[0] == named {
                Ok(())
            } else {
                Err(DistError::Protocol(
                    "the replies of a pipelined command name other blocks than the root named".into(),
                ))
            }
        });
        if let Some(t) = settled.upgrade() {
            t.settle(checked.err().map(std::sync::Arc::new));
        }
    };
    let submitted = sending.submit::<C>(ctl, on_done);
    match submitted {
        Ok(_) => {
            output.fill(early);
            // Collect the replies already in, so the inputs of completed
            // commands are let go (their blocks queued for release) while
            // a long chain is still being sent, not only when the root
            // next waits. Never blocks; a failure found here is recorded
            // (fail-stop) and reported by the next call.
            drop(tensor);
            let _ = ctl.progress();
        }
        Err(e) => {
            let e = std::sync::Arc::new(DistError::from(e));
            tensor.settle(Some(e.clone()));
            output.fail(SharedDistError(e));
        }
    }
}

/// One error poisoning several outputs.
#[derive(Debug)]
pub(crate) struct SharedDistError(pub(crate) std::sync::Arc<DistError>);

impl std::fmt::Display for SharedDistError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SharedDistError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}
