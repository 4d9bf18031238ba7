//! The `uni20.replicate.v1` command: its descriptor (the copies to make)
//! and its handler, which runs the kit's block exchange and optionally
//! drops the verified replicas again.

use serde::{Deserialize, Serialize};
use uni20_worker::{command, HandlerError, WorkerContext};

use crate::transfer::exchange_blocks;
use crate::transfer::record::Transfer;

command!(
    /// The command `uni20.replicate.v1`.
    ///
    /// Reply: the number of replicas created on the replying rank.
    pub(crate) ReplicateV1 = "uni20.replicate.v1", schema 1, ReplicateDesc => u64, handle_replicate
);

/// Descriptor of [`ReplicateV1`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReplicateDesc {
    /// The copies to make (the `i`-th between one sender and one receiver uses the tags of `i`).
    pub(crate) transfers: Vec<Transfer>,
    /// Drop the new replicas again after verifying them (for benchmarks:
    /// every repetition then moves the bytes again).
    pub(crate) release_after: bool,
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
