//! `uni20.replicate.v1`: copy a tensor's blocks from their owners to one
//! rank, worker to worker (never through the root). Persistent objects are
//! immutable, so a replica is as good as the original; the storage-rank
//! benchmark uses it with `keep = false`.

use serde::{Deserialize, Serialize};
use uni20_worker::{command, Controller, HandlerError, WorkerContext};

use crate::error::DistError;
use crate::tensor::DistTensor;
use crate::transfer::{exchange_blocks, Transfer, TransferSet};

command!(
    /// The command `uni20.replicate.v1`.
    ///
    /// Reply: the number of replicas created on the replying rank.
    pub ReplicateV1 = "uni20.replicate.v1", schema 1, ReplicateDesc => u64, handle_replicate
);

/// Descriptor of [`ReplicateV1`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicateDesc {
    /// The copies to make; transfer `i` uses the tags of `i`.
    pub transfers: Vec<Transfer>,
    /// Drop the new replicas again after verifying them (for benchmarks:
    /// every repetition then moves the bytes again).
    pub release_after: bool,
}

fn handle_replicate(ctx: &mut WorkerContext<'_>, d: ReplicateDesc) -> Result<u64, HandlerError> {
    let replicas = exchange_blocks(ctx, &d.transfers)?;
    if d.release_after {
        ctx.store()
            .release_many(&replicas)
            .map_err(|e| HandlerError::from(e).context("dropping the verified replicas"))?;
    }
    Ok(replicas.len() as u64)
}

/// Copies every block of `t` that `to` does not own onto rank `to`, straight
/// from the owners; waits for completion and returns the bytes moved.
/// With `keep == false` the copies are verified and dropped again.
///
/// # Errors
/// As [`DistTensor::manifest`]; [`DistError::Job`] if a transfer fails.
pub fn replicate(ctl: &Controller<'_>, t: &DistTensor, to: usize, keep: bool) -> Result<u64, DistError> {
    let m = t.manifest(ctl)?;
    let mut set = TransferSet::new();
    for (b, r) in m.blocks.iter().enumerate() {
        set.need(r, m.block_bytes(b), to);
    }
    let transfers = set.into_vec();
    let bytes = transfers.iter().map(|t| t.bytes).sum();
    let mut participants: Vec<usize> = transfers.iter().flat_map(|t| [t.from, t.to]).collect();
    participants.sort_unstable();
    participants.dedup();
    if !participants.is_empty() {
        ctl.submit::<ReplicateV1>(
            &ReplicateDesc {
                transfers,
                release_after: !keep,
            },
            &participants,
        )?;
    }
    Ok(bytes)
}
