//! The element-wise planner, pure: one item per stored block of `a` (every
//! block of a dense tensor, the allowed blocks of a symmetric one), on the
//! block's owner (or, for an `axpby` whose `b` lies elsewhere, the rank
//! holding most of the item's input bytes, under a load cap), with the box
//! of `b` each item reads and the blocks that must move.

use super::command::{ElementwiseDescV1, ElementwiseItem, ElementwiseOp};
use super::reshape::ReshapeRule;
use crate::layout::Blocking;
use crate::ops::kit::{place_reading, stored_alike, Assigner, BoxSource, ItemPlan};
use crate::tensor::{Manifest, TensorMeta};
use crate::transfer::TransferSet;

/// An element-wise operation validated against its operands' static
/// descriptions.
#[derive(Clone, Debug)]
pub(crate) struct Validated {
    pub(crate) name: &'static str,
    pub(crate) op: ElementwiseOp,
    pub(crate) out: TensorMeta,
}

/// The tiling of `a`'s blocking with its modes permuted (output mode `k` is
/// mode `perm[k]` of `a`).
pub(crate) fn permuted(b: &Blocking, perm: &[usize]) -> Blocking {
    let shape: Vec<usize> = perm.iter().map(|&p| b.shape()[p]).collect();
    let ext = perm.iter().map(|&p| b.mode(p).to_vec()).collect();
    Blocking::from_extents(&shape, ext).expect("a permutation of a valid tiling is valid")
}

/// Plans `v` from the manifest of `a` and those of the other operands,
/// `more` (`b` for an `Axpby` with a second operand; the terms after the
/// first for a `Combination`, in output order like `a`). For a reshape,
/// `a` already has the rule's input tiling.
pub(crate) fn plan(
    v: &Validated,
    workers: &[usize],
    ma: &Manifest,
    more: &[Manifest],
    rule: Option<&ReshapeRule>,
) -> ItemPlan<ElementwiseDescV1> {
    let mb = more.first();
    let n = ma.stored_blocks();
    let mut assign = Assigner::new(workers, n);
    let mut set = TransferSet::new();
    let mut items = Vec::with_capacity(n);
    let out_b = &v.out.blocking;
    // Terms of a combination stored as `a` (`stored_alike`: the same tiling
    // and, for symmetric terms, the same legs; the usual case of a Krylov
    // recurrence) read block `b` for item `b`: no search of their tiling
    // per block. Others (a symmetric term tiled differently) search.
    let aligned: Vec<bool> = match v.op {
        ElementwiseOp::Combination { .. } => more
            .iter()
            .map(|m| *out_b == ma.blocking && stored_alike(m, ma))
            .collect(),
        _ => Vec::new(),
    };
    for (b, a_ref) in ma.blocks.iter().enumerate() {
        let a_multi = ma.stored_multi(b);
        let mut rest = Vec::new();
        let (out_block, out_shape, b_src) = match (&v.op, rule) {
            (ElementwiseOp::Reshape, Some(rule)) => {
                let o = rule.out_block(b);
                (o, out_b.block_shape(&out_b.multi(o)), None)
            }
            (ElementwiseOp::Combination { .. }, _) => {
                // Every term is in `a`'s order: output block = `a`'s block.
                let (o_off, o_shape) = (out_b.block_offset(&a_multi), out_b.block_shape(&a_multi));
                rest = more
                    .iter()
                    .zip(&aligned)
                    .map(|(m, &same)| {
                        if same {
                            BoxSource::block(m, b, &o_off, &o_shape)
                        } else {
                            BoxSource::of(m, &o_off, &o_shape)
                        }
                    })
                    .collect();
                let o = match v.out.layout() {
                    None => out_b.linear(&a_multi),
                    Some(l) => l.find(&a_multi).unwrap_or(usize::MAX),
                };
                (o, o_shape, None)
            }
            (ElementwiseOp::Axpby { perm_a, b: second, .. }, _) => {
                let o_multi: Vec<usize> = perm_a.iter().map(|&p| a_multi[p]).collect();
                let src = match (second, mb) {
                    (Some(s), Some(mb)) => {
                        let (o_off, o_shape) = (out_b.block_offset(&o_multi), out_b.block_shape(&o_multi));
                        let mut off = vec![0; o_off.len()];
                        let mut shape = vec![0; o_off.len()];
                        for (k, &q) in s.perm.iter().enumerate() {
                            off[q] = o_off[k];
                            shape[q] = o_shape[k];
                        }
                        Some(BoxSource::of(mb, &off, &shape))
                    }
                    _ => None,
                };
                // A symmetric output's block of a permuted allowed block is
                // allowed (same legs, permuted); a missing one would be a
                // bug, reported as a protocol error when the replies arrive.
                let o = match v.out.layout() {
                    None => out_b.linear(&o_multi),
                    Some(l) => l.find(&o_multi).unwrap_or(usize::MAX),
                };
                (o, out_b.block_shape(&o_multi), src)
            }
            _ => (b, ma.blocking.block_shape(&a_multi), None),
        };
        let reads: Vec<&BoxSource> = b_src.iter().chain(&rest).collect();
        let rank = place_reading(&mut assign, &mut set, a_ref, ma.block_bytes(b), &reads);
        items.push(ElementwiseItem {
            rank,
            out_block,
            out_shape,
            a: *a_ref,
            b: b_src,
            rest,
        });
    }
    let transfers = set.into_vec();
    let ranks: Vec<usize> = items.iter().map(|i| i.rank).collect();
    let out_blocks = items.iter().map(|i| i.out_block).collect();
    ItemPlan::new(
        v.name,
        ElementwiseDescV1 {
            op: v.op.clone(),
            out_dtype: v.out.dtype,
            items,
            transfers: transfers.clone(),
            out_names: Vec::new(),
            hold_replicas: false,
        },
        &ranks,
        out_blocks,
        v.out.stored_blocks(),
        ranks.len(),
        &transfers,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::test_manifest;
    use uni20_dispatch::{DType, C64};

    fn manifest(shape: &[usize], ext: Vec<Vec<usize>>, owners: &[usize]) -> Manifest {
        test_manifest(shape, ext, DType::F64, 1, |b| owners[b])
    }

    #[test]
    fn a_transpose_stays_on_the_owners_and_permutes_block_numbers() {
        // a: 4x2 in blocks [2, 2] x [1, 1]; block b owned by rank 1 + b % 2.
        let ma = manifest(&[4, 2], vec![vec![2, 2], vec![1, 1]], &[1, 2, 1, 2]);
        let perm = vec![1, 0];
        let v = Validated {
            name: "permute",
            op: ElementwiseOp::Axpby {
                alpha: C64::new(1.0, 0.0),
                perm_a: perm.clone(),
                conj_a: false,
                b: None,
            },
            out: TensorMeta {
                symmetric: None,
                shape: vec![2, 4],
                dtype: DType::F64,
                blocking: permuted(&ma.blocking, &perm),
            },
        };
        let p = plan(&v, &[1, 2], &ma, &[], None);
        let d = &p.descriptor;
        assert!(d.transfers.is_empty());
        assert_eq!(d.items.iter().map(|i| i.rank).collect::<Vec<_>>(), vec![1, 2, 1, 2]);
        // Block (i, j) of a is block (j, i) of the output (2 x 2 blocks).
        assert_eq!(p.out_blocks, vec![0, 2, 1, 3]);
        assert_eq!(d.items[1].out_shape, vec![1, 2]);
        assert_eq!(p.participants, vec![1, 2]);
    }
}
