//! The `uni20.reblock.v1` command: its descriptor (one item per block of
//! the new tiling: the box it covers and the old blocks that overlap it)
//! and the worker handler, which exchanges the old blocks worker to worker,
//! assembles each new block it owns, commits it and replies with its id.

use serde::{Deserialize, Serialize};
use uni20_persist::ObjectId;
use uni20_worker::{command, HandlerError, WorkerContext};

use super::pieces::BoxSource;
use crate::tensor::Block;
use crate::transfer::{exchange_blocks, Transfer};

/// One block of the new tiling, assembled by `rank`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReblockItem {
    /// Rank that assembles and owns the new block.
    pub rank: usize,
    /// Block number in the new tiling.
    pub out_block: usize,
    /// The box of the new block and the old blocks overlapping it.
    pub source: BoxSource,
}

/// The `uni20.reblock.v1` descriptor, identical on every participant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReblockDescV1 {
    /// One item per new block.
    pub items: Vec<ReblockItem>,
    /// Worker-to-worker transfers of old blocks; transfer `i` uses the tags of `i`.
    pub transfers: Vec<Transfer>,
}

command!(
    /// The command `uni20.reblock.v1`. Reply of each participant: `(item index,
    /// object id)` of every new block it committed.
    pub ReblockV1 = "uni20.reblock.v1", schema 1, ReblockDescV1 => Vec<(usize, ObjectId)>, handle_reblock
);

fn handle_reblock(ctx: &mut WorkerContext<'_>, d: ReblockDescV1) -> Result<Vec<(usize, ObjectId)>, HandlerError> {
    let me = ctx.rank();
    let store = ctx.store();
    let replicas = exchange_blocks(ctx, &d.transfers)?;
    let mut out = Vec::new();
    for (idx, item) in d.items.iter().enumerate().filter(|(_, i)| i.rank == me) {
        let t = item
            .source
            .assemble(store)
            .map_err(|e| e.context(format!("reblock item {idx} (new block {})", item.out_block)))?
            .into_tensor();
        let p = store
            .commit(Block(t))
            .map_err(|e| HandlerError::from(e).context(format!("committing new block {}", item.out_block)))?;
        out.push((idx, p.id()));
    }
    tracing::debug!(
        rank = me,
        blocks = out.len(),
        replicas = replicas.len(),
        "reblock: blocks assembled"
    );
    store
        .release_many(&replicas)
        .map_err(|e| HandlerError::from(e).context("dropping the replicas of this command"))?;
    Ok(out)
}
