//! The `uni20.regroup.v1` command: fusing adjacent legs of a symmetric
//! tensor into one, or splitting a fused leg back (`fuse_legs`,
//! `split_leg`). Each item builds one output block from strided box copies
//! of input blocks (the geometry is planned on the root, see `symmetric`);
//! the kit's [`handle_items`] exchanges, commits and replies. Values are
//! copied exactly.

use serde::{Deserialize, Serialize};
use uni20_dispatch::{DType, LocalTensor};
use uni20_persist::{ObjectId, PersistentPtr};
use uni20_worker::{command, HandlerError, KernelContext};

use crate::layout::copy_box;
use crate::ops::kit::{handle_items, item_work_fields, ItemWork};
use crate::tensor::{Block, BlockRef};
use crate::transfer::record::Transfer;

/// One strided copy of an input block into the item's output block
/// (element units): the box `ext`, read at `src_base + sum_k i_k
/// src_strides[k]` of the input block, written at `dst_base + sum_k i_k
/// dst_strides[k]` of the output block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RegroupPiece {
    /// The input block.
    pub(crate) block: BlockRef,
    /// Its shape (checked when it is loaded).
    pub(crate) shape: Vec<usize>,
    /// Its payload bytes.
    pub(crate) bytes: u64,
    /// The box copied.
    pub(crate) ext: Vec<usize>,
    /// First element read.
    pub(crate) src_base: usize,
    /// Element strides in the input block, one per mode of `ext`.
    pub(crate) src_strides: Vec<usize>,
    /// First element written.
    pub(crate) dst_base: usize,
    /// Element strides in the output block, one per mode of `ext`.
    pub(crate) dst_strides: Vec<usize>,
}

/// One output block, computed by `rank`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RegroupItem {
    /// Rank that builds and owns the output block.
    pub(crate) rank: usize,
    /// Output block number (stored block of the output layout).
    pub(crate) out_block: usize,
    /// Output block shape.
    pub(crate) out_shape: Vec<usize>,
    /// The copies that fill it.
    pub(crate) pieces: Vec<RegroupPiece>,
}

/// The `uni20.regroup.v1` descriptor: the whole plan, of which each participant
/// receives its share (its own items and the transfers it takes part in).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RegroupDescV1 {
    /// Element type of input and output.
    pub(crate) dtype: DType,
    /// One item per output block.
    pub(crate) items: Vec<RegroupItem>,
    /// Worker-to-worker block transfers (the `i`-th between one sender and one receiver uses the tags of `i`).
    pub(crate) transfers: Vec<Transfer>,
    /// Output IDs named by the root before submission, one entry per rank
    /// with items (empty: each rank's store issues fresh IDs).
    pub(crate) out_names: Vec<crate::ops::kit::NamedOutputs>,
    /// Keep the replicas this command's transfers deliver after it: the
    /// root records them and releases them later (replicas kept between
    /// commands); `false`: each rank drops them when the command is done.
    pub(crate) hold_replicas: bool,
}

command!(
    /// The command `uni20.regroup.v1`. Reply of each participant: `(item
    /// index, object id)` of every output block it committed.
    pub(crate) RegroupV1 = "uni20.regroup.v1", schema 3, RegroupDescV1 => Vec<(usize, ObjectId)>, handle_items::<RegroupDescV1>
);

/// True when every element a strided box touches lies below `len`.
fn fits(base: usize, strides: &[usize], ext: &[usize], len: usize) -> bool {
    if ext.contains(&0) {
        return true;
    }
    strides.len() == ext.len()
        && ext
            .iter()
            .zip(strides)
            .try_fold(base, |acc, (&e, &s)| {
                (e - 1).checked_mul(s).and_then(|x| acc.checked_add(x))
            })
            .is_some_and(|last| last < len)
}

impl ItemWork for RegroupDescV1 {
    item_work_fields!(RegroupItem);
    const OPERATION: &'static str = "regroup";
    fn compute(&self, ctx: &KernelContext<'_>, _: usize, item: &RegroupItem) -> Result<LocalTensor, HandlerError> {
        let elem = self.dtype.size_bytes();
        let n: usize = item.out_shape.iter().product();
        let mut out = vec![0u8; n * elem];
        for p in &item.pieces {
            let v = ctx
                .store()
                .load_wait(PersistentPtr::<Block>::from_id(p.block.id))
                .map_err(|e| HandlerError::from(e).with_object(p.block.id))?;
            let src = &v.0;
            if src.shape() != p.shape.as_slice() || src.dtype() != self.dtype {
                return Err(HandlerError::msg(format!(
                    "block has shape {:?} {}, the plan says {:?} {}",
                    src.shape(),
                    src.dtype().name(),
                    p.shape,
                    self.dtype.name()
                ))
                .with_object(p.block.id));
            }
            let src_len: usize = p.shape.iter().product();
            if !fits(p.src_base, &p.src_strides, &p.ext, src_len) || !fits(p.dst_base, &p.dst_strides, &p.ext, n) {
                return Err(HandlerError::msg(format!(
                    "a copy of box {:?} does not fit the input block {:?} or the output block {:?}",
                    p.ext, p.shape, item.out_shape
                ))
                .with_object(p.block.id));
            }
            copy_box(
                src.as_bytes(),
                &p.src_strides,
                p.src_base,
                &mut out,
                &p.dst_strides,
                p.dst_base,
                &p.ext,
                elem,
            );
        }
        Ok(LocalTensor::from_bytes(self.dtype, &item.out_shape, &out)?)
    }
}

#[cfg(test)]
mod tests {
    use super::fits;

    #[test]
    fn strided_boxes_are_bounds_checked() {
        assert!(fits(0, &[3, 1], &[2, 3], 6));
        assert!(!fits(1, &[3, 1], &[2, 3], 6));
        assert!(fits(5, &[3, 1], &[0, 3], 1));
        assert!(!fits(0, &[1], &[2, 3], 100));
        assert!(!fits(0, &[usize::MAX, 1], &[3, 1], 100));
    }
}
