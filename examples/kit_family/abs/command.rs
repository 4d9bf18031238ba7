//! The `example.abs.v1` command: the descriptor, the per-item function
//! (one block's modulus) and the one `command!` line; the kit's
//! `handle_items` does the exchange, the filter, the commit, the reply and
//! the replica release.

use serde::{Deserialize, Serialize};
use uni20::dist::kit::{handle_items, ItemWork, Transfer};
use uni20::dist::{Block, BlockRef};
use uni20::persist::{ObjectId, PersistentPtr};
use uni20::{command, DType, HandlerError, KernelContext, LocalTensor, TensorData};

/// One output block: `|input|`, computed by `rank`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AbsItem {
    /// Rank that computes and owns the output block.
    pub rank: usize,
    /// Output block number (the input's block number).
    pub out_block: usize,
    /// The input block.
    pub input: BlockRef,
}

/// The `example.abs.v1` descriptor: the whole plan on the root; each
/// participant receives its share (its items, the transfers it takes part in).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AbsDescV1 {
    /// Output dtype.
    pub dtype: DType,
    /// One item per block.
    pub items: Vec<AbsItem>,
    /// Blocks of storage ranks moving to compute ranks.
    pub transfers: Vec<Transfer>,
}

impl ItemWork for AbsDescV1 {
    type Item = AbsItem;
    const OPERATION: &'static str = "abs";
    fn work(&self) -> (&[AbsItem], &[Transfer]) {
        (&self.items, &self.transfers)
    }
    fn place(_: usize, item: &AbsItem) -> (usize, usize) {
        (item.rank, item.out_block)
    }
    /// The work lists, so that the root sends each rank only its share
    /// (`place` and `compute` do not read the item's index).
    fn work_mut(&mut self) -> Option<(&mut Vec<AbsItem>, &mut Vec<Transfer>)> {
        Some((&mut self.items, &mut self.transfers))
    }
    /// The per-item function: the modulus of every element of the block.
    fn compute(&self, ctx: &KernelContext<'_>, _: usize, item: &AbsItem) -> Result<LocalTensor, HandlerError> {
        let block = ctx
            .store()
            .load_wait(PersistentPtr::<Block>::from_id(item.input.id))
            .map_err(|e| HandlerError::from(e).with_object(item.input.id))?;
        let values = block.0.to_c64_vec().into_iter().map(|z| z.norm());
        let data = match self.dtype {
            DType::F32 => TensorData::F32(values.map(|v| v as f32).collect()),
            _ => TensorData::F64(values.collect()),
        };
        Ok(LocalTensor::from_data(block.0.shape(), data)?)
    }
}

command!(
    /// `example.abs.v1`: each item's block replaced by its modulus.
    pub AbsV1 = "example.abs.v1", schema 1, AbsDescV1 => Vec<(usize, ObjectId)>, handle_items::<AbsDescV1>
);
