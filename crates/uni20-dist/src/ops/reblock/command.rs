//! The `uni20.reblock.v1` command: its descriptor (one item per block of
//! the new tiling: the box it covers and the old blocks that overlap it)
//! and its per-item compute (assemble the box from the old blocks); the
//! kit's [`handle_items`] exchanges, commits and replies.

use serde::{Deserialize, Serialize};
use uni20_dispatch::LocalTensor;
use uni20_persist::ObjectId;
use uni20_worker::{command, HandlerError, KernelContext};

use crate::ops::kit::{handle_items, item_work_fields, BoxSource, ItemWork};
use crate::transfer::record::Transfer;

/// One block of the new tiling, assembled by `rank`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReblockItem {
    /// Rank that assembles and owns the new block.
    pub(crate) rank: usize,
    /// Block number in the new tiling.
    pub(crate) out_block: usize,
    /// The box of the new block and the old blocks overlapping it.
    pub(crate) source: BoxSource,
}

/// The `uni20.reblock.v1` descriptor: the whole plan, of which each participant
/// receives its share (its own items and the transfers it takes part in).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReblockDescV1 {
    /// One item per new block.
    pub(crate) items: Vec<ReblockItem>,
    /// Worker-to-worker transfers of old blocks (the `i`-th between one sender and one receiver uses the tags of `i`).
    pub(crate) transfers: Vec<Transfer>,
    /// Output IDs named by the root before submission, one entry per rank
    /// with items (empty: each rank's store issues fresh IDs).
    pub(crate) out_names: Vec<crate::ops::kit::NamedOutputs>,
    /// Keep the replicas this command's transfers deliver after it: the
    /// root records them and releases them later (replicas kept between
    /// commands); `false`: each rank drops them when the command is done.
    pub(crate) hold_replicas: bool,
}

impl ItemWork for ReblockDescV1 {
    item_work_fields!(ReblockItem);
    const OPERATION: &'static str = "reblock";
    fn compute(&self, ctx: &KernelContext<'_>, _: usize, item: &ReblockItem) -> Result<LocalTensor, HandlerError> {
        Ok(item.source.assemble(ctx.store())?.into_tensor())
    }
}

command!(
    /// The command `uni20.reblock.v1`. Reply of each participant: `(item
    /// index, object id)` of every new block it committed.
    pub(crate) ReblockV1 = "uni20.reblock.v1", schema 3, ReblockDescV1 => Vec<(usize, ObjectId)>, handle_items::<ReblockDescV1>
);
