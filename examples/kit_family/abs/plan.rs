//! The `abs` planner, pure: one item per block, on the block's owner when
//! it is a compute rank (then nothing moves), otherwise on the compute rank
//! the kit's `Assigner` picks, which fetches the block.

use uni20::dist::kit::{Assigner, ItemPlan, TransferSet};
use uni20::dist::Manifest;
use uni20::DType;

use super::command::{AbsDescV1, AbsItem};

/// The plan of `|m|` with output dtype `dtype` over the compute ranks
/// `workers` (not empty).
pub fn plan_abs(workers: &[usize], m: &Manifest, dtype: DType) -> ItemPlan<AbsDescV1> {
    let n = m.blocks.len();
    let mut assign = Assigner::new(workers, n);
    let mut set = TransferSet::new();
    let mut items = Vec::with_capacity(n);
    for (b, r) in m.blocks.iter().enumerate() {
        let rank = assign.keep(r.owner, m.block_bytes(b));
        set.need(r, m.block_bytes(b), rank);
        items.push(AbsItem {
            rank,
            out_block: b,
            input: *r,
        });
    }
    let transfers = set.into_vec();
    let ranks: Vec<usize> = items.iter().map(|i| i.rank).collect();
    let desc = AbsDescV1 {
        dtype,
        items,
        transfers: transfers.clone(),
    };
    ItemPlan::new("abs", desc, &ranks, (0..n).collect(), n, n, &transfers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use uni20::dist::{BlockRef, Blocking};
    use uni20::persist::ObjectId;

    #[test]
    fn blocks_stay_on_compute_owners_and_leave_storage_ranks() {
        let blocking = Blocking::from_extents(&[6], vec![vec![2, 2, 2]]).unwrap();
        let m = Manifest {
            shape: vec![6],
            dtype: DType::F64,
            blocking,
            symmetric: None,
            blocks: [1, 2, 3]
                .iter()
                .enumerate()
                .map(|(b, &owner)| BlockRef {
                    owner,
                    id: ObjectId::new(1, b as u64),
                })
                .collect(),
        };
        // Rank 3 is not a compute rank: its block goes to a compute rank.
        let p = plan_abs(&[1, 2], &m, DType::F64);
        let d = p.descriptor();
        assert_eq!(d.items.iter().map(|i| i.rank).collect::<Vec<_>>(), vec![1, 2, 1]);
        assert_eq!(
            d.transfers.iter().map(|t| (t.from, t.to)).collect::<Vec<_>>(),
            vec![(3, 1)]
        );
        assert_eq!(p.participants(), &[1, 2, 3]);
    }
}
