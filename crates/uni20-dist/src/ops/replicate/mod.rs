//! `replicate`: copy a tensor's blocks from their owners to one rank,
//! worker to worker (never through the root). Persistent objects are
//! immutable, so a replica is as good as the original; the storage-rank
//! benchmark uses it with `keep = false`. `place`: the same copies towards
//! the ranks of a [`Placement`] (the put of the object store: blocks to
//! storage ranks, or back to the workers), as a new tensor naming the new
//! owners. The planners are in `plan`, the command `uni20.replicate.v1` in
//! `command`.

mod command;
mod plan;

use uni20_worker::Controller;

use crate::error::DistError;
use crate::placement::Placement;
use crate::summary::PlanSummary;
use crate::tensor::DistTensor;
use command::ReplicateV1;
use plan::{plan_place, plan_replicate};

/// Copies every block of `t` that `to` does not own onto rank `to`, straight
/// from the owners; waits for completion and returns the bytes moved.
/// With `keep == false` the copies are verified and dropped again.
///
/// # Errors
/// As [`DistTensor::manifest`]; [`DistError::Job`] if a transfer fails.
pub fn replicate(ctl: &Controller<'_>, t: &DistTensor, to: usize, keep: bool) -> Result<u64, DistError> {
    crate::tensor::dense_only("replicate", &[t])?;
    let m = t.manifest(ctl)?;
    let (desc, participants, bytes) = plan_replicate(&m, to, keep);
    if !participants.is_empty() {
        ctl.submit::<ReplicateV1>(&desc, &participants)?;
    }
    Ok(bytes)
}

/// The same tensor with its blocks owned by the ranks of `placement`
/// (round-robin, block `b` on `placement`'s `b % n`-th rank): every block
/// not already on its new owner is copied there straight from its current
/// owner (worker to storage rank, storage rank to worker; payloads never
/// pass through the root), verified (size and CRC-32) and kept. Waits for
/// the copies and returns the new tensor; its
/// [`plan_summary`](DistTensor::plan_summary) (operation `place`) counts
/// the transfers and bytes per rank.
///
/// This is the explicit put and fetch of storage ranks (issue #28, the
/// design's "get, put ... as steps of a plan"): `place(ctl, &t,
/// &Placement::Storage)` followed by dropping `t` moves a tensor out of the
/// workers' memory onto the storage ranks; an operation that reads the
/// placed tensor fetches its blocks from the storage ranks as transfers of
/// its own plan, and `place(ctl, &s, &Placement::Workers)` brings it back
/// whole. The blocks keep their object ids (objects are immutable); the
/// copies on the old owners are released when the last handle naming them
/// there drops, like any tensor's.
///
/// # Errors
/// As [`DistTensor::manifest`]; as [`Placement::ranks`] (no storage ranks
/// for [`Placement::Storage`], a rank outside the universe);
/// [`DistError::Job`] if a transfer or a verification fails (naming the
/// rank and the object).
pub fn place(ctl: &Controller<'_>, t: &DistTensor, placement: &Placement) -> Result<DistTensor, DistError> {
    t.check_universe(ctl)?;
    let m = t.manifest(ctl)?;
    let owners = placement.owners(ctl, m.blocks.len())?;
    let (desc, participants, placed) = plan_place(m, &owners);
    if !participants.is_empty() {
        ctl.submit::<ReplicateV1>(&desc, &participants)?;
    }
    let summary = PlanSummary::from_parts("place", [], 0, &desc.transfers, &participants);
    let out = DistTensor::from_manifest(ctl, placed)?;
    out.set_plan_summary(summary);
    Ok(out)
}
