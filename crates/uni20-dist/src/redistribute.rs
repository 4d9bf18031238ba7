//! Restoring a checkpoint on another rank count: the blocks a checkpoint
//! keeps on ranks that the restoring universe lacks (or on the root, which
//! holds no blocks once it has workers) are re-placed onto its compute
//! ranks. Each new owner copies its blocks straight out of the old owner's
//! store directory under the shared store root (`uni20.adopt.v1`, handled
//! by [`uni20_persist::Store::adopt`]: verified, then made durable in the
//! new owner's own directory), so no block passes through the root.
//! [`restore`](crate::restore) calls [`redistribute`] before it checks
//! the blocks.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use uni20_persist::ObjectId;
use uni20_worker::{command, Controller, HandlerError, WorkerContext};

use crate::error::DistError;
use crate::tensor::Manifest;

command!(
    /// `uni20.adopt.v1`: the participant copies each listed block out of
    /// the store directory of its old owner (a rank of the run that wrote the
    /// checkpoint) into its own store, durably
    /// ([`uni20_persist::Store::adopt`]).
    ///
    /// Reply: the payload bytes adopted.
    pub(crate) AdoptV1 = "uni20.adopt.v1", schema 1, AdoptDesc => u64, handle_adopt
);

/// Descriptor of [`AdoptV1`]: `(block, old owner)` pairs, all for the one
/// participant it is sent to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AdoptDesc {
    pub(crate) blocks: Vec<(ObjectId, u32)>,
}

fn handle_adopt(ctx: &mut WorkerContext<'_>, d: AdoptDesc) -> Result<u64, HandlerError> {
    adopt_all(ctx.store(), &d.blocks)
}

fn adopt_all(store: &uni20_persist::Store, blocks: &[(ObjectId, u32)]) -> Result<u64, HandlerError> {
    let mut bytes = 0;
    for &(id, from) in blocks {
        bytes += store.adopt(from, id).map_err(|e| {
            HandlerError::from(e).context(format!("adopting block {id} of checkpoint rank {from} onto this rank"))
        })?;
    }
    Ok(bytes)
}

/// What [`redistribute`] moved: a checkpoint restored on another rank count.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Redistribution {
    /// The old owners whose blocks moved (ranks this universe lacks, or the
    /// root when this universe has workers), ascending.
    pub from_ranks: Vec<usize>,
    /// The compute ranks that received them, ascending.
    pub to_ranks: Vec<usize>,
    /// Blocks re-placed (0 when only the placement of the others differs
    /// from this universe's compute ranks: a checkpoint of fewer ranks).
    pub blocks: usize,
    /// The ranks that keep the blocks that did not move, ascending.
    pub kept_on: Vec<usize>,
    /// Their payload bytes (as stored: encoded).
    pub bytes: u64,
    /// This universe's size.
    pub size: usize,
}

impl fmt::Display for Redistribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ranks = |r: &[usize]| {
            let list = r.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",");
            format!("rank{} {list}", if r.len() == 1 { "" } else { "s" })
        };
        let s = |n: usize| if n == 1 { "" } else { "s" };
        write!(f, "restored on {} rank{}: ", self.size, s(self.size))?;
        if self.blocks == 0 {
            write!(f, "nothing re-placed")?;
        } else {
            write!(
                f,
                "{} block{} ({} bytes) re-placed from {} onto {}",
                self.blocks,
                s(self.blocks),
                self.bytes,
                ranks(&self.from_ranks),
                ranks(&self.to_ranks)
            )?;
        }
        if !self.kept_on.is_empty() {
            write!(f, "; the other blocks stay on {}", ranks(&self.kept_on))?;
        }
        Ok(())
    }
}

/// Re-places the blocks of a checkpoint's named tensors (`Checkpoint::tensors`)
/// that this universe cannot serve where they
/// are: a block whose owner is not a rank here (the checkpoint was written
/// by more ranks), or is the root while this universe has compute ranks
/// (it was written by a lone root). Such blocks go round-robin to the
/// compute ranks ([`Controller::compute_ranks`]); each new owner copies its
/// blocks from the old owner's directory under the store root, which must
/// therefore be the same directory, visible from every rank. The
/// manifests are rewritten with the new owners. Blocks on ranks that exist
/// here stay where they are (a checkpoint of fewer ranks restored on more
/// keeps its placement; new tensors use every rank). The checkpoint object
/// in the store is not rewritten: the next checkpoint names the new owners,
/// and a second restore re-places again (copies already made are kept).
///
/// Returns `None` when nothing moved and the blocks' owners are exactly
/// this universe's compute ranks (the same rank count, as far as the
/// checkpoint shows); otherwise the [`Redistribution`], whose `Display` is
/// the one-line notice.
///
/// # Errors
/// [`DistError::Job`] naming the new owner, the block and its old owner's
/// file when a copy fails (no file there: a node-local store root, or the
/// block was removed; a damaged file; an in-memory store);
/// [`DistError::Store`] for the same failures when the root is alone.
pub fn redistribute(
    ctl: &Controller<'_>,
    tensors: &mut [(String, Manifest)],
) -> Result<Option<Redistribution>, DistError> {
    let size = ctl.size();
    let compute = ctl.compute_ranks();
    let misplaced = |owner: usize| owner >= size || (owner == 0 && size > 1);
    let mut per_owner: BTreeMap<usize, Vec<(ObjectId, u32)>> = BTreeMap::new();
    let (mut from, mut blocks) = (std::collections::BTreeSet::new(), 0usize);
    let mut next = 0usize;
    let mut kept = std::collections::BTreeSet::new();
    for (_, m) in tensors.iter_mut() {
        for b in &mut m.blocks {
            if !misplaced(b.owner) {
                kept.insert(b.owner);
                continue;
            }
            let old = u32::try_from(b.owner).map_err(|_| DistError::BadRank {
                rank: b.owner,
                size,
                what: "a checkpoint block's owner".into(),
            })?;
            let new = compute[next % compute.len()];
            next += 1;
            per_owner.entry(new).or_default().push((b.id, old));
            from.insert(b.owner);
            b.owner = new;
            blocks += 1;
        }
    }
    let kept_on: Vec<usize> = kept.into_iter().collect();
    if blocks == 0 && (kept_on.is_empty() || kept_on == compute) {
        return Ok(None);
    }
    let mut bytes = 0u64;
    if size == 1 {
        // The root alone: it adopts into its own store.
        for &(id, old) in per_owner.get(&0).into_iter().flatten() {
            bytes += ctl.store().adopt(old, id)?;
        }
    } else {
        let mut pending = Vec::new();
        for (&rank, list) in &per_owner {
            let desc = AdoptDesc { blocks: list.clone() };
            pending.push(ctl.begin::<AdoptV1>(&desc, &[rank])?);
        }
        for op in pending {
            for (_, b) in ctl.finish(op)? {
                bytes += b;
            }
        }
    }
    Ok(Some(Redistribution {
        from_ranks: from.into_iter().collect(),
        to_ranks: per_owner.keys().copied().collect(),
        blocks,
        kept_on,
        bytes,
        size,
    }))
}
