//! The reblock planner, pure: one item per block of the new tiling,
//! assigned to the compute rank holding most bytes of the old blocks that
//! overlap it (under a load cap), and the old blocks each item needs from
//! other ranks.

use super::command::{ReblockDescV1, ReblockItem};
use crate::layout::Blocking;
use crate::ops::kit::{Assigner, BoxSource, ItemPlan};
use crate::tensor::Manifest;
use crate::transfer::TransferSet;

/// Plans the reblock of the tensor of manifest `m` into tiling `to` (same
/// shape) over the compute ranks `workers` (not empty): one item per new
/// block, assigned to the rank holding most bytes of the old blocks that
/// overlap it (under a load cap of `ceil(blocks / workers)`), and the old
/// blocks each item needs from other ranks.
pub(crate) fn plan_reblock(workers: &[usize], m: &Manifest, to: &Blocking) -> ItemPlan<ReblockDescV1> {
    let n = to.num_blocks();
    let mut assign = Assigner::new(workers, n);
    let mut items = Vec::with_capacity(n);
    let mut set = TransferSet::new();
    for b in 0..n {
        let multi = to.multi(b);
        let source = BoxSource::of(m, &to.block_offset(&multi), &to.block_shape(&multi));
        let rank = assign.pick(source.overlap_bytes());
        for p in &source.pieces {
            set.need(&p.block, p.bytes, rank);
        }
        items.push(ReblockItem {
            rank,
            out_block: b,
            source,
        });
    }
    let transfers = set.into_vec();
    let ranks: Vec<usize> = items.iter().map(|i| i.rank).collect();
    ItemPlan::new(
        "reblock",
        ReblockDescV1 {
            items,
            transfers: transfers.clone(),
        },
        &ranks,
        (0..n).collect(),
        n,
        0,
        &transfers,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::test_manifest;
    use uni20_dispatch::DType;

    #[test]
    fn unchanged_blocks_stay_and_cut_blocks_move_once() {
        // Old tiling [3, 1] of 4 rows (owners 1, 2); new tiling [1, 1, 1, 1].
        let m = test_manifest(&[4], vec![vec![3, 1]], DType::F64, 1, |b| 1 + b);
        let to = Blocking::from_extents(&[4], vec![vec![1, 1, 1, 1]]).unwrap();
        let p = plan_reblock(&[1, 2], &m, &to);
        let ranks: Vec<usize> = p.descriptor.items.iter().map(|i| i.rank).collect();
        // New blocks 0..3 lie in old block 0 (rank 1), but the cap is 2 items
        // per rank: block 2 goes to rank 2, which fetches old block 0 once.
        // Block 3 is old block 1 itself and stays on rank 2.
        assert_eq!(ranks, vec![1, 1, 2, 2]);
        let t: Vec<(usize, usize, u64)> = p.descriptor.transfers.iter().map(|t| (t.from, t.to, t.bytes)).collect();
        assert_eq!(t, vec![(1, 2, 24)]);
        assert_eq!(p.participants, vec![1, 2]);
        assert_eq!(p.summary.bytes_moved, 24);
        assert!(!p.descriptor.items[0].source.is_whole_block());
        assert!(p.descriptor.items[3].source.is_whole_block());
    }
}
