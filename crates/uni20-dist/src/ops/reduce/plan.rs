//! The reduction planner, pure: one item per stored block of the first
//! operand (for a symmetric operand, its charge-allowed blocks only: the
//! others are zeros and add nothing),
//! on the rank holding most of its bytes (its owner, or for an inner
//! product the owners of the overlapping blocks of `b` when those are
//! more; under a load cap), with the blocks that must move.

use super::command::{ReduceDescV1, ReduceItem, ReduceOp};
use crate::ops::kit::{participants_of, place_reading, stored_alike, Assigner, BoxSource};
use crate::summary::PlanSummary;
use crate::tensor::Manifest;
use crate::transfer::TransferSet;

/// Plans a reduction from the manifest of `a` (and `b` for an inner
/// product, of the same shape) over the compute ranks `workers`.
pub(crate) fn plan(
    op: ReduceOp,
    workers: &[usize],
    ma: &Manifest,
    mb: Option<&Manifest>,
) -> (ReduceDescV1, PlanSummary) {
    let n = ma.stored_blocks();
    let mut assign = Assigner::new(workers, n);
    let mut set = TransferSet::new();
    let mut items = Vec::with_capacity(n);
    // `b` stored as `a` (an inner product of two Lanczos vectors): item
    // `blk` reads block `blk` of `b`, found without a tiling search.
    let aligned = mb.is_some_and(|mb| stored_alike(mb, ma));
    for (blk, a) in ma.blocks.iter().enumerate() {
        let multi = ma.stored_multi(blk);
        let b = mb.map(|mb| {
            let (offset, shape) = (ma.blocking.block_offset(&multi), ma.blocking.block_shape(&multi));
            if aligned {
                BoxSource::block(mb, blk, &offset, &shape)
            } else {
                BoxSource::of(mb, &offset, &shape)
            }
        });
        let rank = place_reading(&mut assign, &mut set, a, ma.block_bytes(blk), b.as_ref().as_slice());
        items.push(ReduceItem { rank, a: *a, b });
    }
    let transfers = set.into_vec();
    let participants = participants_of(items.iter().map(|i| i.rank), &transfers);
    let name = match op {
        ReduceOp::NormSqr => "norm",
        ReduceOp::Inner => "inner",
        ReduceOp::MaxAbs => "max_abs",
    };
    let summary = PlanSummary::from_parts(
        name,
        items.iter().map(|i| i.rank),
        items.len(),
        &transfers,
        &participants,
    );
    (
        ReduceDescV1 {
            op,
            items,
            transfers,
            participants,
            hold_replicas: false,
        },
        summary,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::test_manifest;
    use uni20_dispatch::DType;

    fn manifest(ext: Vec<usize>, owners: &[usize], origin: u32) -> Manifest {
        let n: usize = ext.iter().sum();
        test_manifest(&[n], vec![ext], DType::F64, origin, |b| owners[b])
    }

    #[test]
    fn a_norm_moves_nothing_and_the_leader_is_the_lowest_rank() {
        let a = manifest(vec![2, 2, 2], &[2, 3, 2], 1);
        let (d, s) = plan(ReduceOp::NormSqr, &[1, 2, 3], &a, None);
        assert!(d.transfers.is_empty());
        assert_eq!(d.items.iter().map(|i| i.rank).collect::<Vec<_>>(), vec![2, 3, 2]);
        assert_eq!(d.participants, vec![2, 3]);
        assert_eq!((s.operation.as_str(), s.work_items), ("norm", 3));
    }

    #[test]
    fn an_inner_product_fetches_the_pieces_of_b() {
        // a in blocks [2, 2] on rank 1; b in one block of 4 on rank 2.
        let a = manifest(vec![2, 2], &[1, 1], 1);
        let b = manifest(vec![4], &[2], 2);
        let (d, s) = plan(ReduceOp::Inner, &[1, 2], &a, Some(&b));
        let ranks: Vec<usize> = d.items.iter().map(|i| i.rank).collect();
        // Each item has 16 bytes of a on rank 1 and 16 of b on rank 2: a tie,
        // broken by load and then by the lower rank.
        assert_eq!(ranks, vec![1, 2]);
        assert_eq!(d.items[0].b.as_ref().unwrap().pieces.len(), 1);
        let moved: Vec<(usize, usize)> = d.transfers.iter().map(|t| (t.from, t.to)).collect();
        assert_eq!(moved, vec![(2, 1), (1, 2)]);
        assert_eq!(s.bytes_moved, 32 + 16);
    }
}
