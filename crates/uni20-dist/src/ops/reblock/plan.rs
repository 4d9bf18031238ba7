//! The reblock planner, pure: one item per stored block of the new tiling
//! (every block of a dense tensor, the allowed blocks of a symmetric one),
//! assigned to the compute rank holding most bytes of the old blocks that
//! overlap it (under a load cap), and the old blocks each item needs from
//! other ranks; and the retiling of a symmetric layout ([`sym_retiled`]).

use super::command::{ReblockDescV1, ReblockItem};
use crate::error::{DistError, SymLayoutError};
use crate::ops::kit::{Assigner, BoxSource, ItemPlan, Tiling};
use crate::symmetry::{Leg, SymmetricLayout};
use crate::tensor::{Manifest, TensorMeta};
use crate::transfer::TransferSet;

/// Plans the reblock of the tensor of manifest `m` into `to` (same shape
/// and dtype; a symmetric `to` has `m`'s sectors and flux) over the compute
/// ranks `workers` (not empty): one item per stored block of `to`, assigned
/// to the rank holding most bytes of the old blocks that overlap it (under
/// a load cap of `ceil(blocks / workers)`), and the old blocks each item
/// needs from other ranks. A new symmetric block lies in one sector per
/// leg, so every old block it overlaps is allowed too.
pub(crate) fn plan_reblock(workers: &[usize], m: &Manifest, to: &TensorMeta) -> ItemPlan<ReblockDescV1> {
    let n = to.stored_blocks();
    let mut assign = Assigner::new(workers, n);
    let mut items = Vec::with_capacity(n);
    let mut set = TransferSet::new();
    for b in 0..n {
        let multi = to.stored_multi(b);
        let source = BoxSource::of(m, &to.blocking.block_offset(&multi), &to.blocking.block_shape(&multi));
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
            out_names: Vec::new(),
            hold_replicas: false,
        },
        &ranks,
        (0..n).collect(),
        n,
        0,
        &transfers,
    )
}

/// The layout `l` with its sectors retiled by `tiling`: a block size (one,
/// or one per leg) cuts every sector into tiles of at most that size;
/// explicit extents must lie inside one sector each and become the tiles.
///
/// # Errors
/// The errors of [`Tiling::blocking`] on the dense shape (rank, zero block
/// size, shape, too many blocks); [`SymLayoutError::TileCrossesSector`] for
/// an explicit extent across a sector boundary.
pub(crate) fn sym_retiled(l: &SymmetricLayout, tiling: &Tiling) -> Result<SymmetricLayout, DistError> {
    let dense = tiling.blocking(&l.dense_shape())?;
    let mut legs = Vec::with_capacity(l.legs().len());
    for (k, leg) in l.legs().iter().enumerate() {
        legs.push(match tiling {
            Tiling::Block(b) => leg.retiled(*b)?,
            Tiling::PerMode(v) => leg.retiled(v[k])?,
            Tiling::Exact(_) => cut_by_sector(k, leg, dense.mode(k))?,
        });
    }
    Ok(SymmetricLayout::new(l.symmetry().clone(), legs, l.flux().clone())?)
}

/// `leg` with the tiles `extents` (along the whole leg), each inside one
/// sector.
fn cut_by_sector(k: usize, leg: &Leg, extents: &[usize]) -> Result<Leg, DistError> {
    let mut tiles: Vec<Vec<usize>> = vec![Vec::new(); leg.sectors().len()];
    let (mut s, mut off) = (0usize, 0usize);
    for &e in extents {
        let Some(sector) = leg.sectors().get(s) else {
            break; // no states left (a leg without sectors has one empty block)
        };
        let end = leg.sector_offset(s) + sector.dim;
        if off + e > end {
            return Err(SymLayoutError::TileCrossesSector {
                leg: k,
                offset: off,
                extent: e,
                sector: s,
                sector_end: end,
            }
            .into());
        }
        tiles[s].push(e);
        off += e;
        if off == end {
            s += 1;
        }
    }
    Ok(Leg::with_tiles(
        leg.symmetry().clone(),
        leg.direction(),
        leg.sectors().to_vec(),
        tiles,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Blocking;
    use crate::tensor::test_manifest;
    use uni20_dispatch::DType;

    #[test]
    fn unchanged_blocks_stay_and_cut_blocks_move_once() {
        // Old tiling [3, 1] of 4 rows (owners 1, 2); new tiling [1, 1, 1, 1].
        let m = test_manifest(&[4], vec![vec![3, 1]], DType::F64, 1, |b| 1 + b);
        let to = Blocking::from_extents(&[4], vec![vec![1, 1, 1, 1]]).unwrap();
        let p = plan_reblock(&[1, 2], &m, &TensorMeta::dense(vec![4], DType::F64, to));
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
