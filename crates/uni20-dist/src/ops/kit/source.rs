//! Block sources: boxes assembled from the blocks of another tiling, for
//! every family that reads a tensor under a tiling other than its own
//! (reblock, axpby with differently blocked operands, inner products): the
//! plan side ([`BoxSource::of`]: which source blocks overlap a box, and
//! where) and the worker side ([`BoxSource::assemble`]: copy the
//! overlapping parts of the (local or replicated) source blocks into one
//! dense block). Also what a reblock between two tilings rebuilds
//! ([`rebuilt_bytes`]).

use serde::{Deserialize, Serialize};
use uni20_dispatch::{DType, LocalTensor};
use uni20_persist::{PValue, PersistentPtr, Store};
use uni20_worker::HandlerError;

use super::assign::Assigner;
use crate::layout::{c_strides, copy_box, odometer_step, Blocking};
use crate::tensor::{Block, BlockRef, Manifest};
use crate::transfer::TransferSet;

/// One source block overlapping a box: the block, and its global offset
/// and shape (so the handler can cut the overlap without the tiling).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Piece {
    /// The source block.
    pub(crate) block: BlockRef,
    /// Global element offset of the source block, per mode.
    pub(crate) offset: Vec<usize>,
    /// Shape of the source block.
    pub(crate) shape: Vec<usize>,
    /// Payload bytes of the source block.
    pub(crate) bytes: u64,
}

/// A dense box of a source tensor (global offset and shape, in the source's
/// mode order) and the source blocks that overlap it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BoxSource {
    /// Global element offset of the box, per mode.
    pub(crate) offset: Vec<usize>,
    /// Shape of the box.
    pub(crate) shape: Vec<usize>,
    /// Element type of the source.
    pub(crate) dtype: DType,
    /// The overlapping source blocks (none for an empty box).
    pub(crate) pieces: Vec<Piece>,
}

/// Indices of the blocks of one mode (extents `ext`) that overlap
/// `[lo, hi)`, with their offsets.
fn overlapping(ext: &[usize], lo: usize, hi: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &e) in ext.iter().enumerate() {
        if start < hi && start + e > lo {
            out.push((i, start));
        }
        start += e;
        if start >= hi {
            break;
        }
    }
    out
}

/// True if `m` stores its blocks exactly as `like` does: the same tiling
/// and, for symmetric tensors, the same legs, flux and group (so the same
/// allowed blocks in the same order), so stored block `b` of `m` covers
/// the elements of stored block `b` of `like`. Checked once per operand,
/// not per block.
pub(crate) fn stored_alike(m: &Manifest, like: &Manifest) -> bool {
    m.blocks.len() == like.blocks.len()
        && m.blocking == like.blocking
        && match (m.layout(), like.layout()) {
            (None, None) => true,
            (Some(x), Some(y)) => {
                std::ptr::eq(x, y) || (x.symmetry() == y.symmetry() && x.flux() == y.flux() && x.legs() == y.legs())
            }
            _ => false,
        }
}

impl BoxSource {
    /// The box at `offset` of `shape` of the tensor of manifest `m`, with
    /// the stored blocks of `m` that overlap it (row-major order of their
    /// block multi-indices). For a symmetric manifest the charge-forbidden
    /// blocks are no pieces: they are exact zeros, which
    /// [`BoxSource::assemble`] leaves in place. An empty box has no pieces.
    ///
    /// # Panics
    /// If the box does not lie inside `m.shape` (callers derive it from a
    /// tiling of the same shape).
    pub(crate) fn of(m: &Manifest, offset: &[usize], shape: &[usize]) -> BoxSource {
        let mut pieces = Vec::new();
        if !shape.contains(&0) {
            let per_mode: Vec<Vec<(usize, usize)>> = (0..shape.len())
                .map(|k| overlapping(m.blocking.mode(k), offset[k], offset[k] + shape[k]))
                .collect();
            let mut idx = vec![0usize; shape.len()];
            let lo = vec![0usize; shape.len()];
            let hi: Vec<usize> = per_mode.iter().map(Vec::len).collect();
            'outer: loop {
                let multi: Vec<usize> = idx.iter().zip(&per_mode).map(|(&i, v)| v[i].0).collect();
                let stored = match m.layout() {
                    None => Some(m.blocking.linear(&multi)),
                    Some(l) => l.find(&multi),
                };
                if let Some(b) = stored {
                    pieces.push(Piece {
                        block: m.blocks[b],
                        offset: idx.iter().zip(&per_mode).map(|(&i, v)| v[i].1).collect(),
                        shape: m.blocking.block_shape(&multi),
                        bytes: m.block_bytes(b),
                    });
                }
                if !odometer_step(&mut idx, &lo, &hi) {
                    break 'outer;
                }
            }
        }
        BoxSource {
            offset: offset.to_vec(),
            shape: shape.to_vec(),
            dtype: m.dtype,
            pieces,
        }
    }

    /// The box at `offset` of `shape` when it is exactly stored block `b` of
    /// `m` (the caller knows the box is that block: a term stored as the
    /// operation's first operand, [`stored_alike`]): what [`BoxSource::of`]
    /// returns for it, without searching the tiling.
    pub(crate) fn block(m: &Manifest, b: usize, offset: &[usize], shape: &[usize]) -> BoxSource {
        debug_assert_eq!(
            m.blocking.block_shape(&m.stored_multi(b)),
            shape,
            "block {b} is not the box"
        );
        let pieces = if shape.contains(&0) {
            Vec::new()
        } else {
            vec![Piece {
                block: m.blocks[b],
                offset: offset.to_vec(),
                shape: shape.to_vec(),
                bytes: (shape.iter().product::<usize>() * m.dtype.size_bytes()) as u64,
            }]
        };
        BoxSource {
            offset: offset.to_vec(),
            shape: shape.to_vec(),
            dtype: m.dtype,
            pieces,
        }
    }

    /// True if the box is exactly its single piece (no copy needed).
    pub(crate) fn is_whole_block(&self) -> bool {
        matches!(self.pieces.as_slice(), [p] if p.offset == self.offset && p.shape == self.shape)
    }

    /// Bytes of the part of each piece that lies in the box, by owner rank.
    pub(crate) fn overlap_bytes(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let elem = self.dtype.size_bytes() as u64;
        self.pieces.iter().map(move |p| {
            let n: u64 = (0..self.shape.len())
                .map(|k| {
                    let lo = p.offset[k].max(self.offset[k]);
                    let hi = (p.offset[k] + p.shape[k]).min(self.offset[k] + self.shape[k]);
                    hi.saturating_sub(lo) as u64
                })
                .product();
            (p.block.owner, n * elem)
        })
    }

    /// Assembles the box on a worker from its pieces, which must be in
    /// `store` (owned or replicated there). A box that is exactly one block
    /// is that block (no copy).
    ///
    /// # Errors
    /// A [`HandlerError`] naming the object if a piece cannot be loaded or
    /// has another shape or dtype than planned.
    pub(crate) fn assemble(&self, store: &Store) -> Result<Assembled, HandlerError> {
        let load = |p: &Piece| -> Result<PValue<Block>, HandlerError> {
            let v = store
                .load_wait(PersistentPtr::<Block>::from_id(p.block.id))
                .map_err(|e| HandlerError::from(e).with_object(p.block.id))?;
            if v.0.shape() != p.shape.as_slice() || v.0.dtype() != self.dtype {
                return Err(HandlerError::msg(format!(
                    "block has shape {:?} {}, the plan says {:?} {}",
                    v.0.shape(),
                    v.0.dtype().name(),
                    p.shape,
                    self.dtype.name()
                ))
                .with_object(p.block.id));
            }
            Ok(v)
        };
        if self.is_whole_block() {
            return Ok(Assembled::Stored(load(&self.pieces[0])?));
        }
        let elem = self.dtype.size_bytes();
        let n: usize = self.shape.iter().product();
        let mut bytes = vec![0u8; n * elem];
        let dst_strides = c_strides(&self.shape);
        for p in &self.pieces {
            let v = load(p)?;
            let src_strides = c_strides(&p.shape);
            let r = self.shape.len();
            let mut lo = vec![0; r];
            let mut ext = vec![0; r];
            for k in 0..r {
                lo[k] = p.offset[k].max(self.offset[k]);
                ext[k] = (p.offset[k] + p.shape[k])
                    .min(self.offset[k] + self.shape[k])
                    .saturating_sub(lo[k]);
            }
            let src_base: usize = (0..r).map(|k| (lo[k] - p.offset[k]) * src_strides[k]).sum();
            let dst_base: usize = (0..r).map(|k| (lo[k] - self.offset[k]) * dst_strides[k]).sum();
            copy_box(
                v.0.as_bytes(),
                &src_strides,
                src_base,
                &mut bytes,
                &dst_strides,
                dst_base,
                &ext,
                elem,
            );
        }
        let t = LocalTensor::from_bytes(self.dtype, &self.shape, &bytes)?;
        Ok(Assembled::Built(t))
    }
}

/// Places an item that reads block `a` (of `a_bytes` payload bytes) and
/// the boxes `b` of other tensors (none, one for an `axpby`, one per
/// further term of a linear combination): on `a`'s owner when nothing
/// else is read (and it is a compute rank), otherwise on the rank holding
/// most of the item's input bytes ([`Assigner::pick`]); requests every
/// input block on that rank from `set`. Returns the rank.
pub(crate) fn place_reading(
    assign: &mut Assigner,
    set: &mut TransferSet,
    a: &BlockRef,
    a_bytes: u64,
    b: &[&BoxSource],
) -> usize {
    let rank = if b.is_empty() {
        assign.keep(a.owner, a_bytes)
    } else {
        assign.pick(std::iter::once((a.owner, a_bytes)).chain(b.iter().flat_map(|src| src.overlap_bytes())))
    };
    set.need(a, a_bytes, rank);
    for p in b.iter().flat_map(|s| &s.pieces) {
        set.need(&p.block, p.bytes, rank);
    }
    rank
}

/// An assembled box: a stored block itself, or a newly built tensor.
pub(crate) enum Assembled {
    /// The box is exactly one stored block.
    Stored(PValue<Block>),
    /// The box was copied together from pieces.
    Built(LocalTensor),
}

impl Assembled {
    /// The dense tensor.
    pub(crate) fn tensor(&self) -> &LocalTensor {
        match self {
            Assembled::Stored(v) => &v.0,
            Assembled::Built(t) => t,
        }
    }

    /// The dense tensor, owned (a copy only for a stored block).
    pub(crate) fn into_tensor(self) -> LocalTensor {
        match self {
            Assembled::Stored(v) => v.0.clone(),
            Assembled::Built(t) => t,
        }
    }
}

/// True if block range `[lo, lo + len)` of a mode is exactly one block of
/// the extents `ext`.
pub(crate) fn is_block_of(ext: &[usize], lo: usize, len: usize) -> bool {
    let mut start = 0;
    for &e in ext {
        if start == lo {
            return e == len;
        }
        if start > lo {
            return false;
        }
        start += e;
    }
    false
}

/// Bytes of the blocks of `from` (a tiling of a tensor of `dtype`) that are
/// not exactly blocks of `to` (the bytes a reblock from `from` to `to` must
/// rebuild from pieces; blocks that are kept are copied on their owner).
pub(crate) fn rebuilt_bytes(from: &Blocking, to: &Blocking, dtype: DType) -> u64 {
    let kept_per_mode: Vec<Vec<bool>> = (0..from.rank())
        .map(|k| {
            let mut start = 0;
            from.mode(k)
                .iter()
                .map(|&e| {
                    let kept = is_block_of(to.mode(k), start, e);
                    start += e;
                    kept
                })
                .collect()
        })
        .collect();
    (0..from.num_blocks())
        .filter(|&b| {
            let m = from.multi(b);
            !m.iter().zip(&kept_per_mode).all(|(&i, v)| v[i])
        })
        .map(|b| (from.block_len(b) * dtype.size_bytes()) as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{test_manifest, TensorMeta};

    fn manifest(shape: &[usize], ext: Vec<Vec<usize>>) -> Manifest {
        test_manifest(shape, ext, DType::F64, 1, |b| 1 + b % 2)
    }

    #[test]
    fn pieces_cover_the_box() {
        let m = manifest(&[6, 4], vec![vec![2, 2, 2], vec![3, 1]]);
        let b = BoxSource::of(&m, &[1, 2], &[3, 2]);
        let offs: Vec<Vec<usize>> = b.pieces.iter().map(|p| p.offset.clone()).collect();
        assert_eq!(offs, vec![vec![0, 0], vec![0, 3], vec![2, 0], vec![2, 3]]);
        let bytes: u64 = b.overlap_bytes().map(|(_, n)| n).sum();
        assert_eq!(bytes, 3 * 2 * 8);
        assert!(!b.is_whole_block());
        assert!(BoxSource::of(&m, &[2, 0], &[2, 3]).is_whole_block());
        assert!(BoxSource::of(&m, &[0, 0], &[0, 3]).pieces.is_empty());
    }

    /// `BoxSource::block` is what the tiling search gives for every stored
    /// block of an operand stored alike (dense, and symmetric with its
    /// charge-forbidden blocks absent), and `stored_alike` tells such
    /// operands from others.
    #[test]
    fn a_block_box_equals_the_searched_box_for_operands_stored_alike() {
        use crate::symmetry::{Direction, Leg, SymmetricLayout, Symmetry};
        use std::sync::Arc;
        let dense = manifest(&[6, 4], vec![vec![2, 2, 2], vec![3, 1]]);
        let sym_layout = |d: usize| {
            let legs = vec![
                Leg::u1(Direction::Out, &[(-1, 3), (1, d)], 2).unwrap(),
                Leg::u1(Direction::In, &[(-1, 1), (1, 1)], 1).unwrap(),
                Leg::u1(Direction::In, &[(-2, 2), (0, 3), (2, 1)], 2).unwrap(),
            ];
            Arc::new(SymmetricLayout::new(Symmetry::u1(), legs, Symmetry::u1().identity()).unwrap())
        };
        let sym_manifest = |d: usize, origin: u32| {
            let meta = TensorMeta::symmetric(sym_layout(d), DType::C64).unwrap();
            let n = meta.stored_blocks();
            let blocks = (0..n)
                .map(|b| BlockRef {
                    owner: 1 + b % 3,
                    id: uni20_persist::ObjectId::new(origin, b as u64),
                })
                .collect();
            Manifest::new(&meta, blocks)
        };
        let sym = sym_manifest(4, 1);
        assert!(
            sym.stored_blocks() < sym.blocking.num_blocks(),
            "some blocks are forbidden"
        );
        for m in [&dense, &sym] {
            for b in 0..m.stored_blocks() {
                let multi = m.stored_multi(b);
                let (off, shape) = (m.blocking.block_offset(&multi), m.blocking.block_shape(&multi));
                assert_eq!(
                    BoxSource::block(m, b, &off, &shape),
                    BoxSource::of(m, &off, &shape),
                    "block {b}"
                );
            }
        }
        // Other ids, same structure: alike. Another tiling or sector size,
        // or dense against symmetric: not.
        assert!(stored_alike(&sym_manifest(4, 7), &sym));
        assert!(!stored_alike(&sym_manifest(3, 1), &sym));
        assert!(stored_alike(
            &manifest(&[6, 4], vec![vec![2, 2, 2], vec![3, 1]]),
            &dense
        ));
        assert!(!stored_alike(&manifest(&[6, 4], vec![vec![2, 4], vec![3, 1]]), &dense));
        assert!(!stored_alike(&dense, &sym));
    }

    #[test]
    fn rebuilt_bytes_counts_blocks_that_are_cut_differently() {
        let a = Blocking::from_extents(&[6, 2], vec![vec![2, 2, 2], vec![2]]).unwrap();
        let b = Blocking::from_extents(&[6, 2], vec![vec![2, 4], vec![2]]).unwrap();
        // Only a's first block is a block of b.
        assert_eq!(rebuilt_bytes(&a, &b, DType::F64), 2 * 2 * 2 * 8);
        assert_eq!(rebuilt_bytes(&b, &a, DType::F64), 4 * 2 * 8);
        assert_eq!(rebuilt_bytes(&a, &a, DType::F64), 0);
    }
}
