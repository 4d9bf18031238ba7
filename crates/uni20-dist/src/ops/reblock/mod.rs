//! Redistribution: [`reblock`] moves a tensor into a new block tiling,
//! worker to worker. Each block of the new tiling is assembled by the rank
//! that will own it from the parts of the old blocks that overlap it; the
//! owner is the compute rank already holding most of those bytes (under a
//! load cap), so blocks whose boundaries do not change stay where they
//! are. A symmetric tensor is retiled (its sectors cut into other tiles;
//! only allowed blocks are built). The planner is in `plan`, the command in
//! `command`; other families (contraction, reshape, split) align an operand
//! through [`submit_reblock`] / [`submit_reblock_to`].

mod command;
mod plan;

pub(crate) use plan::plan_reblock;

use std::sync::Arc;

use uni20_worker::Controller;

use crate::error::DistError;
use crate::layout::Blocking;
use crate::ops::kit::{check_block_bytes, defer_items, Tiling};
use crate::tensor::{DistTensor, TensorMeta};
use command::ReblockV1;
use plan::sym_retiled;

/// Queues the reblock of `t` into `to` (already validated: `t`'s shape and
/// dtype, and `t`'s layout retiled when `t` is symmetric) and returns the
/// pending result; `note` is added to its summary.
pub(crate) fn submit_reblock_to(
    ctl: &Controller<'_>,
    t: &DistTensor,
    to: TensorMeta,
    note: Option<String>,
) -> DistTensor {
    let meta = to.clone();
    defer_items::<ReblockV1>(ctl, to, &[t], move |workers, manifests, _| {
        let mut plan = plan_reblock(workers, &manifests[0], &meta);
        plan.summary.notes.extend(note);
        plan
    })
}

/// Queues the reblock of the dense tensor `t` into `to` (already
/// validated) and returns the pending result; `note` is added to its
/// summary.
pub(crate) fn submit_reblock(ctl: &Controller<'_>, t: &DistTensor, to: Blocking, note: Option<String>) -> DistTensor {
    let meta = TensorMeta::dense(t.shape().to_vec(), t.dtype(), to);
    submit_reblock_to(ctl, t, meta, note)
}

/// Redistributes `t` into a new block tiling: `tiling` is one block size
/// for every mode (`usize`), one per mode (`Vec<usize>`, `[usize; N]`) or
/// explicit extents ([`Blocking`]); see [`Tiling`].
///
/// A symmetric `t` keeps its legs' sectors and flux and is **retiled**: a
/// block size cuts every sector of a leg into tiles of at most that many
/// states ([`Leg::retiled`](crate::symmetry::Leg::retiled)); explicit
/// extents must lie inside one sector each and become the sectors' tiles
/// ([`Leg::with_tiles`](crate::symmetry::Leg::with_tiles)). Only allowed
/// blocks are built; the dense embedding does not change.
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
/// tiling would exceed [`MAX_BLOCK_BYTES`](crate::plan::MAX_BLOCK_BYTES);
/// for a symmetric `t`, [`DistError::SymLayout`] (`TileCrossesSector`) for
/// explicit extents that cut across a sector boundary;
/// [`DistError::Job`] if the job already stopped.
pub fn reblock(ctl: &Controller<'_>, t: &DistTensor, tiling: impl Into<Tiling>) -> Result<DistTensor, DistError> {
    t.check_universe(ctl)?;
    let tiling = tiling.into();
    let to = match t.layout() {
        None => TensorMeta::dense(t.shape().to_vec(), t.dtype(), tiling.blocking(t.shape())?),
        Some(l) => TensorMeta::symmetric(Arc::new(sym_retiled(l, &tiling)?), t.dtype())?,
    };
    check_block_bytes(&to.blocking, t.dtype(), "the new tiling")?;
    if ctl.has_failed() {
        ctl.progress()?;
    }
    if &to == t.meta() {
        return Ok(t.clone());
    }
    tracing::debug!(shape = ?t.shape(), from = ?t.blocking().extents(), to = ?to.blocking.extents(), "reblock queued");
    Ok(submit_reblock_to(ctl, t, to, None))
}
