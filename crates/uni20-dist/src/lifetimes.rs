//! Garbage collection across ranks: [`gc`] computes, on the root, every
//! object that must stay (the blocks of live tensors, the blocks kept by
//! checkpoints, and what the root's named roots reference, such as the
//! `checkpoint` root), tells each rank which of its objects to keep
//! (`uni20.gc.v1`), and each rank removes every other object from memory
//! and disk. Day-to-day freeing does not need it: dropping the last handle
//! of a tensor releases its blocks (see `uni20_worker::ledger::ReleaseLedger`); gc
//! is for stores reopened after a crash or a run that did not clean up.

use std::collections::BTreeMap;

use uni20_persist::ObjectId;
use uni20_worker::commands::{GcDesc, GcV1};
use uni20_worker::Controller;

use crate::error::DistError;

/// What [`gc`] did on all ranks together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GcTotals {
    /// Ranks that collected.
    pub ranks: usize,
    /// Objects kept.
    pub kept: u64,
    /// Objects removed from memory and disk.
    pub removed: u64,
    /// Object files deleted.
    pub files_removed: u64,
}

/// Removes, on every rank, each object that no live tensor, checkpoint or
/// named root of the root's store needs. Runs at a quiescent point: it
/// first drains every operation and sends the queued releases.
///
/// # Errors
/// [`DistError::Job`] if an operation fails while draining, or a rank's
/// store cannot collect (fail-stop); [`DistError::Store`] for the root's
/// own store.
pub fn gc(ctl: &Controller<'_>) -> Result<GcTotals, DistError> {
    ctl.drain()?;
    ctl.collect()?;
    // Every rank removes what no live handle or keep names, the replicas
    // it holds included: the root's table of them starts afresh.
    ctl.ledger().forget_replicas();
    let mut keep: BTreeMap<usize, Vec<ObjectId>> = BTreeMap::new();
    for (owner, id) in ctl.ledger().live() {
        keep.entry(owner).or_default().push(id);
    }
    // Checkpoints named as roots in the root's store keep their blocks on
    // the blocks' owners.
    for (_, root) in ctl.store().roots() {
        if let Ok(cp) = crate::checkpoint::load_checkpoint(ctl, root) {
            for (_, m) in &cp.tensors {
                for b in &m.blocks {
                    keep.entry(b.owner).or_default().push(b.id);
                }
            }
        }
    }
    let kept_anywhere = ctl.ledger().kept();
    let mut totals = GcTotals::default();
    let root_keep: Vec<ObjectId> = keep
        .get(&0)
        .into_iter()
        .flatten()
        .chain(&kept_anywhere)
        .copied()
        .collect();
    let r = ctl.store().gc(&root_keep)?;
    totals.ranks += 1;
    totals.kept += r.kept;
    totals.removed += r.removed;
    totals.files_removed += r.files_removed;
    if ctl.size() > 1 {
        let ranks: Vec<usize> = (1..ctl.size()).collect();
        let desc = GcDesc {
            keep: ranks
                .iter()
                .map(|&r| {
                    let mut ids: Vec<ObjectId> = keep.get(&r).cloned().unwrap_or_default();
                    ids.extend(&kept_anywhere);
                    ids.sort();
                    ids.dedup();
                    (r, ids)
                })
                .collect(),
        };
        for (_, s) in ctl.submit::<GcV1>(&desc, &ranks)? {
            totals.ranks += 1;
            totals.kept += s.kept;
            totals.removed += s.removed;
            totals.files_removed += s.files_removed;
        }
    }
    Ok(totals)
}
