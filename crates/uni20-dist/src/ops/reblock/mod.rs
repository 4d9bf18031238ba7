//! Redistribution: [`reblock`] moves a tensor into a new block tiling,
//! worker to worker. Each block of the new tiling is assembled by the rank
//! that will own it from the parts of the old blocks that overlap it; the
//! owner is the compute rank already holding most of those bytes (under a
//! load cap), so blocks whose boundaries do not change stay where they
//! are. Also home of what other families share for reading a tensor under
//! another tiling (`pieces`), the caller's tiling forms (`tiling`) and the
//! submission of item-per-block commands ([`submit_items`]).

mod command;
pub(crate) mod pieces;
mod tiling;

pub use command::{ReblockDescV1, ReblockItem, ReblockV1};
pub use pieces::{BoxSource, Piece};
pub(crate) use tiling::check_block_bytes;
pub use tiling::Tiling;

use std::collections::BTreeSet;

use uni20_persist::ObjectId;
use uni20_worker::{CommandSpec, Controller};

use crate::error::DistError;
use crate::layout::Blocking;
use crate::ops::deferred::{submit_filling, Input, OpJob, Output};
use crate::summary::PlanSummary;
use crate::tensor::{collect_item_refs, DistTensor, Manifest, TensorMeta};
use crate::transfer::{Transfer, TransferSet};
use pieces::Assigner;

/// A planned item-per-block command: what is sent, to whom, the summary,
/// and the output block of each item.
pub(crate) struct ItemPlan<D> {
    pub(crate) descriptor: D,
    pub(crate) participants: Vec<usize>,
    pub(crate) summary: PlanSummary,
    pub(crate) out_blocks: Vec<usize>,
    pub(crate) n_blocks: usize,
}

/// The participants of a plan: the ranks of its items and both ends of
/// every transfer, sorted.
pub(crate) fn participants_of(item_ranks: impl IntoIterator<Item = usize>, transfers: &[Transfer]) -> Vec<usize> {
    let mut p: BTreeSet<usize> = item_ranks.into_iter().collect();
    p.extend(transfers.iter().flat_map(|t| [t.from, t.to]));
    p.into_iter().collect()
}

/// Submits an item-per-block command without waiting and fills the one
/// output from the `(item, object id)` replies.
pub(crate) fn submit_items<'c, C>(
    ctl: &Controller<'c>,
    plan: ItemPlan<C::Descriptor>,
    outputs: Vec<Output>,
    keep: Vec<DistTensor>,
) where
    C: CommandSpec<Reply = Vec<(usize, ObjectId)>> + 'c,
{
    let ItemPlan {
        descriptor,
        participants,
        summary,
        out_blocks,
        n_blocks,
    } = plan;
    submit_filling::<C>(
        ctl,
        &descriptor,
        &participants,
        outputs,
        keep,
        summary,
        move |replies| Ok(vec![collect_item_refs(replies, &out_blocks, n_blocks)?]),
    );
}

/// Plans the reblock of the tensor of manifest `m` into tiling `to` (same
/// shape) over the compute ranks `workers` (not empty): one item per new
/// block, assigned to the rank holding most bytes of the old blocks that
/// overlap it (under a load cap of `ceil(blocks / workers)`), and the old
/// blocks each item needs from other ranks.
pub(crate) fn plan_reblock(workers: &[usize], m: &Manifest, to: &Blocking) -> ItemPlan<ReblockDescV1> {
    let n = to.num_blocks();
    let mut assign = Assigner::new(workers, n);
    let mut items = Vec::with_capacity(n);
    let mut set = TransferSet::new();
    for b in 0..n {
        let multi = to.multi(b);
        let source = BoxSource::of(m, &to.block_offset(&multi), &to.block_shape(&multi));
        let rank = assign.pick(source.overlap_bytes());
        for p in &source.pieces {
            set.need(&p.block, p.bytes, rank);
        }
        items.push(ReblockItem {
            rank,
            out_block: b,
            source,
        });
    }
    let transfers = set.into_vec();
    let participants = participants_of(items.iter().map(|i| i.rank), &transfers);
    let summary = PlanSummary::from_parts("reblock", items.iter().map(|i| i.rank), 0, &transfers, &participants);
    ItemPlan {
        out_blocks: (0..n).collect(),
        n_blocks: n,
        descriptor: ReblockDescV1 { items, transfers },
        participants,
        summary,
    }
}

/// Queues the reblock of `t` into `to` (already validated) and returns the
/// pending result; `note` is added to its summary.
pub(crate) fn submit_reblock(ctl: &Controller<'_>, t: &DistTensor, to: Blocking, note: Option<String>) -> DistTensor {
    let meta = TensorMeta {
        shape: t.shape().to_vec(),
        dtype: t.dtype(),
        blocking: to,
    };
    let (out, write) = DistTensor::pending(ctl, meta);
    let output = Output {
        tensor: out.clone(),
        write,
    };
    let job = OpJob::new(
        vec![Input::of(t)],
        vec![output],
        Box::new(move |ctl, manifests: Vec<Manifest>, outputs, keep| {
            let mut plan = plan_reblock(&ctl.compute_ranks(), &manifests[0], &outputs[0].tensor.meta().blocking);
            plan.summary.notes.extend(note);
            submit_items::<ReblockV1>(ctl, plan, outputs, keep);
            Ok::<(), DistError>(())
        }),
    );
    ctl.defer(Box::new(job));
    out
}

/// Redistributes `t` into a new block tiling: `tiling` is one block size
/// for every mode (`usize`), one per mode (`Vec<usize>`, `[usize; N]`) or
/// explicit extents ([`Blocking`]); see [`Tiling`].
///
/// Each block of the new tiling is assembled by its owner from the parts of
/// the old blocks that overlap it, fetched worker to worker (never through
/// the root). The owner of a new block is the compute rank holding most of
/// those bytes, under a load cap of `ceil(new blocks / compute ranks)`
/// (ties: the less loaded, then the lower rank), so a block whose
/// boundaries do not change is copied on its owner without moving. Values
/// are copied exactly. [`DistTensor::plan_summary`] gives the bytes moved.
///
/// Returns at once, like [`contract`](crate::contract): the reblock runs once
/// `t` is ready; its failure poisons the result. If the tiling equals
/// `t`'s, the result is `t` itself (a clone of the handle; nothing runs).
///
/// # Errors
/// From validation, before anything is submitted: the errors of
/// [`Tiling::blocking`]; [`DistError::PlanTooLarge`] if a block of the new
/// tiling would exceed [`MAX_BLOCK_BYTES`](crate::MAX_BLOCK_BYTES);
/// [`DistError::Job`] if the job already stopped.
pub fn reblock(ctl: &Controller<'_>, t: &DistTensor, tiling: impl Into<Tiling>) -> Result<DistTensor, DistError> {
    t.check_universe(ctl)?;
    let to = tiling.into().blocking(t.shape())?;
    check_block_bytes(&to, t.dtype(), "the new tiling")?;
    if ctl.has_failed() {
        ctl.progress()?;
    }
    if &to == t.blocking() {
        return Ok(t.clone());
    }
    tracing::debug!(shape = ?t.shape(), from = ?t.blocking().extents(), to = ?to.extents(), "reblock queued");
    Ok(submit_reblock(ctl, t, to, None))
}
