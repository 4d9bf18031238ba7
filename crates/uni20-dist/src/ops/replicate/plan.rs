//! The replication planner, pure: every block of a tensor that rank `to`
//! does not own moves there once, straight from its owner.

use super::command::ReplicateDesc;
use crate::ops::kit::participants_of;
use crate::tensor::Manifest;
use crate::transfer::TransferSet;

/// The descriptor moving block `b` of `m` onto `owners[b]` (kept), its
/// participants (both ends of every transfer) and the manifest naming the
/// new owners. `owners` has one entry per block.
pub(crate) fn plan_place(mut m: Manifest, owners: &[usize]) -> (ReplicateDesc, Vec<usize>, Manifest) {
    debug_assert_eq!(owners.len(), m.blocks.len());
    let mut set = TransferSet::new();
    for (b, r) in m.blocks.iter().enumerate() {
        set.need(r, m.block_bytes(b), owners[b]);
    }
    for (r, &to) in m.blocks.iter_mut().zip(owners) {
        r.owner = to;
    }
    let transfers = set.into_vec();
    let participants = participants_of([], &transfers);
    (
        ReplicateDesc {
            transfers,
            release_after: false,
        },
        participants,
        m,
    )
}

/// The descriptor copying every block of `m` not owned by `to` onto `to`
/// (dropped again after verification unless `keep`), its participants
/// (both ends of every transfer) and the bytes it moves.
pub(crate) fn plan_replicate(m: &Manifest, to: usize, keep: bool) -> (ReplicateDesc, Vec<usize>, u64) {
    let mut set = TransferSet::new();
    for (b, r) in m.blocks.iter().enumerate() {
        set.need(r, m.block_bytes(b), to);
    }
    let transfers = set.into_vec();
    let bytes = transfers.iter().map(|t| t.bytes).sum();
    let participants = participants_of([], &transfers);
    (
        ReplicateDesc {
            transfers,
            release_after: !keep,
        },
        participants,
        bytes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::test_manifest;
    use uni20_dispatch::DType;

    #[test]
    fn blocks_already_on_the_target_do_not_move() {
        let owners = [1, 3, 2];
        let m = test_manifest(&[6], vec![vec![2, 2, 2]], DType::F32, 1, |b| owners[b]);
        let (d, participants, bytes) = plan_replicate(&m, 3, false);
        assert_eq!(
            d.transfers.iter().map(|t| (t.from, t.to)).collect::<Vec<_>>(),
            vec![(1, 3), (2, 3)]
        );
        assert_eq!(participants, vec![1, 2, 3]);
        assert_eq!(bytes, 2 * 2 * 4);
        assert!(d.release_after);
    }

    #[test]
    fn place_moves_only_blocks_whose_owner_changes() {
        let owners = [1, 3, 2];
        let m = test_manifest(&[6], vec![vec![2, 2, 2]], DType::F64, 1, |b| owners[b]);
        let ids: Vec<_> = m.blocks.iter().map(|r| r.id).collect();
        let (d, participants, placed) = plan_place(m, &[4, 3, 4]);
        assert_eq!(
            d.transfers.iter().map(|t| (t.id, t.from, t.to)).collect::<Vec<_>>(),
            vec![(ids[0], 1, 4), (ids[2], 2, 4)]
        );
        assert!(d.transfers.iter().all(|t| t.bytes == 2 * 8));
        assert_eq!(participants, vec![1, 2, 4]);
        assert!(!d.release_after, "placed blocks are kept");
        assert_eq!(placed.blocks.iter().map(|r| r.owner).collect::<Vec<_>>(), vec![4, 3, 4]);
        assert_eq!(placed.blocks.iter().map(|r| r.id).collect::<Vec<_>>(), ids);
    }
}
