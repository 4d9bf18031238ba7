//! Block tilings ([`Blocking`]) and byte-level box copies between dense
//! C-order arrays: how a tensor's elements are cut into blocks, how a block
//! is addressed (row-major block numbers, multi-indices, offsets), and how a
//! block is copied out of or into a dense array. Pure functions, no ranks.

use serde::{Deserialize, Serialize};

/// Splits an extent `n` into blocks of at most `block` elements.
///
/// A zero extent gives one empty block (`[0]`), so every mode of every
/// tensor has at least one block and zero-size dimensions flow through
/// planning like any other. `block` must be positive (checked by callers).
pub(crate) fn block_extents(n: usize, block: usize) -> Vec<usize> {
    if n == 0 {
        return vec![0];
    }
    let block = block.max(1);
    let mut v = vec![block; n / block];
    if !n.is_multiple_of(block) {
        v.push(n % block);
    }
    v
}

/// Advances the multi-index `idx` to the next one of the box
/// `lo[k] <= idx[k] < hi[k]` in row-major order (last mode fastest);
/// returns false (with `idx` back at `lo`) after the last one.
pub(crate) fn odometer_step(idx: &mut [usize], lo: &[usize], hi: &[usize]) -> bool {
    for k in (0..idx.len()).rev() {
        idx[k] += 1;
        if idx[k] < hi[k] {
            return true;
        }
        idx[k] = lo[k];
    }
    false
}

/// Row-major (C order) strides, in elements, of a dense array of `shape`.
pub(crate) fn c_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    s
}

/// Most blocks one tensor may have (about four million). A block map entry
/// costs about 30 bytes on the root and in every descriptor that names it;
/// beyond this a plan would not fit in memory or in one envelope. Use a
/// larger block size.
pub const MAX_BLOCKS: usize = 1 << 22;

/// The block decomposition (tiling) of a tensor: per mode, the extent of
/// each block along that mode.
///
/// Block `(b_0, .., b_{r-1})` covers elements
/// `offset_k(b_k) .. offset_k(b_k) + extents[k][b_k]` of each mode `k`.
/// Blocks are numbered in row-major order of their multi-index; a rank-0
/// tensor has exactly one block. A tensor with zero elements has exactly
/// one (empty) block: each mode is a single block of its full extent.
///
/// Invariants (checked by every constructor, including deserialization):
/// every mode has at least one block, the block extents of a mode are
/// positive unless the tensor has zero elements, and there are at most
/// [`MAX_BLOCKS`] blocks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<Vec<usize>>", into = "Vec<Vec<usize>>")]
pub struct Blocking {
    extents: Vec<Vec<usize>>,
}

/// Why a [`Blocking`] cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BlockingError {
    /// A block size of zero was requested.
    #[error("block size must be at least 1")]
    ZeroBlockSize,
    /// The tiling would have more than [`MAX_BLOCKS`] blocks.
    #[error("{count} blocks exceed the limit of {limit} blocks per tensor (shape {shape:?}); use a larger block size")]
    TooManyBlocks {
        /// Number of blocks requested (saturated at `u128::MAX`).
        count: u128,
        /// [`MAX_BLOCKS`].
        limit: usize,
        /// The tensor's shape.
        shape: Vec<usize>,
    },
    /// The block extents do not tile the shape.
    #[error("block extents {extents:?} do not tile shape {shape:?}")]
    DoesNotTile {
        /// The extents given.
        extents: Vec<Vec<usize>>,
        /// The shape they should tile.
        shape: Vec<usize>,
    },
}

fn count_blocks(extents: &[Vec<usize>]) -> u128 {
    extents.iter().fold(1u128, |acc, e| acc.saturating_mul(e.len() as u128))
}

impl Blocking {
    /// The tiling of a tensor of `shape` cut into blocks of at most `block`
    /// elements per mode (the last block of a mode may be smaller).
    ///
    /// # Errors
    /// [`BlockingError::ZeroBlockSize`] for `block == 0`;
    /// [`BlockingError::TooManyBlocks`] beyond [`MAX_BLOCKS`] blocks.
    pub fn regular(shape: &[usize], block: usize) -> Result<Blocking, BlockingError> {
        if block == 0 {
            return Err(BlockingError::ZeroBlockSize);
        }
        if shape.contains(&0) {
            return Ok(Blocking {
                extents: shape.iter().map(|&n| vec![n]).collect(),
            });
        }
        let count = shape
            .iter()
            .fold(1u128, |acc, &n| acc.saturating_mul(n.div_ceil(block) as u128));
        if count > MAX_BLOCKS as u128 {
            return Err(BlockingError::TooManyBlocks {
                count,
                limit: MAX_BLOCKS,
                shape: shape.to_vec(),
            });
        }
        Ok(Blocking {
            extents: shape.iter().map(|&n| block_extents(n, block)).collect(),
        })
    }

    /// A tiling from explicit per-mode block extents, checked against `shape`.
    ///
    /// # Errors
    /// [`BlockingError::DoesNotTile`] if a mode's extents do not sum to its
    /// size, a mode has no block, or a block is empty in a tensor with
    /// elements; [`BlockingError::TooManyBlocks`] beyond [`MAX_BLOCKS`].
    pub fn from_extents(shape: &[usize], extents: Vec<Vec<usize>>) -> Result<Blocking, BlockingError> {
        let empty_tensor = shape.contains(&0);
        let tiles = extents.len() == shape.len()
            && extents.iter().zip(shape).all(|(e, &n)| {
                !e.is_empty() && e.iter().sum::<usize>() == n && (empty_tensor || e.iter().all(|&x| x > 0))
            });
        if !tiles {
            return Err(BlockingError::DoesNotTile {
                extents,
                shape: shape.to_vec(),
            });
        }
        Blocking::checked(extents).map_err(|e| match e {
            BlockingError::TooManyBlocks { count, limit, .. } => BlockingError::TooManyBlocks {
                count,
                limit,
                shape: shape.to_vec(),
            },
            other => other,
        })
    }

    fn checked(extents: Vec<Vec<usize>>) -> Result<Blocking, BlockingError> {
        let count = count_blocks(&extents);
        let shape: Vec<usize> = extents.iter().map(|e| e.iter().sum()).collect();
        if extents.iter().any(Vec::is_empty) {
            return Err(BlockingError::DoesNotTile { extents, shape });
        }
        if count > MAX_BLOCKS as u128 {
            return Err(BlockingError::TooManyBlocks {
                count,
                limit: MAX_BLOCKS,
                shape,
            });
        }
        Ok(Blocking { extents })
    }

    /// Per mode, the extent of each block along that mode.
    pub fn extents(&self) -> &[Vec<usize>] {
        &self.extents
    }

    /// The block extents of mode `k`.
    ///
    /// # Panics
    /// If `k` is not below the tensor's rank.
    pub fn mode(&self, k: usize) -> &[usize] {
        &self.extents[k]
    }

    /// Number of modes.
    pub fn rank(&self) -> usize {
        self.extents.len()
    }

    /// The shape this tiling covers (per mode, the sum of its block extents).
    pub fn shape(&self) -> Vec<usize> {
        self.extents.iter().map(|e| e.iter().sum()).collect()
    }

    /// Number of blocks per mode.
    pub fn dims(&self) -> Vec<usize> {
        self.extents.iter().map(Vec::len).collect()
    }

    /// Total number of blocks (product of [`Blocking::dims`]; 1 for rank 0;
    /// at most [`MAX_BLOCKS`]).
    pub fn num_blocks(&self) -> usize {
        self.extents.iter().map(Vec::len).product()
    }

    /// Multi-index of block number `linear` (row-major).
    pub fn multi(&self, mut linear: usize) -> Vec<usize> {
        let dims = self.dims();
        let mut m = vec![0; dims.len()];
        for k in (0..dims.len()).rev() {
            m[k] = linear % dims[k];
            linear /= dims[k];
        }
        m
    }

    /// Block number of a multi-index (row-major).
    pub fn linear(&self, multi: &[usize]) -> usize {
        let dims = self.dims();
        multi.iter().zip(&dims).fold(0, |acc, (&i, &d)| acc * d + i)
    }

    /// Shape of the block at `multi`.
    ///
    /// # Panics
    /// If `multi` is out of range (callers derive it from this tiling).
    pub fn block_shape(&self, multi: &[usize]) -> Vec<usize> {
        multi.iter().zip(&self.extents).map(|(&i, e)| e[i]).collect()
    }

    /// Number of elements of block number `linear`.
    pub fn block_len(&self, linear: usize) -> usize {
        // Row-major: the last mode varies fastest.
        let mut rest = linear;
        let mut len = 1;
        for e in self.extents.iter().rev() {
            len *= e[rest % e.len()];
            rest /= e.len();
        }
        len
    }

    /// Element offset of the block at `multi` along each mode.
    pub fn block_offset(&self, multi: &[usize]) -> Vec<usize> {
        multi
            .iter()
            .zip(&self.extents)
            .map(|(&i, e)| e[..i].iter().sum())
            .collect()
    }
}

impl TryFrom<Vec<Vec<usize>>> for Blocking {
    type Error = BlockingError;
    fn try_from(extents: Vec<Vec<usize>>) -> Result<Blocking, BlockingError> {
        Blocking::checked(extents)
    }
}

impl From<Blocking> for Vec<Vec<usize>> {
    fn from(b: Blocking) -> Vec<Vec<usize>> {
        b.extents
    }
}

/// Copies a box of `shape` elements (each `elem` bytes) between two dense
/// arrays given by element strides and base element offsets. Runs along a
/// mode with unit stride on both sides are copied with one `memcpy` each.
///
/// # Panics
/// If a computed range lies outside `src` or `dst` (a caller bug: callers
/// derive every argument from validated shapes).
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_box(
    src: &[u8],
    src_strides: &[usize],
    src_base: usize,
    dst: &mut [u8],
    dst_strides: &[usize],
    dst_base: usize,
    shape: &[usize],
    elem: usize,
) {
    if shape.contains(&0) {
        return;
    }
    let r = shape.len();
    if r == 0 {
        dst[dst_base * elem..(dst_base + 1) * elem].copy_from_slice(&src[src_base * elem..(src_base + 1) * elem]);
        return;
    }
    let last = r - 1;
    let contiguous = src_strides[last] == 1 && dst_strides[last] == 1;
    let run = if contiguous { shape[last] } else { 1 };
    let mut idx = vec![0usize; r];
    loop {
        let s: usize = src_base + idx.iter().zip(src_strides).map(|(i, s)| i * s).sum::<usize>();
        let d: usize = dst_base + idx.iter().zip(dst_strides).map(|(i, s)| i * s).sum::<usize>();
        dst[d * elem..(d + run) * elem].copy_from_slice(&src[s * elem..(s + run) * elem]);
        // advance the odometer (skipping the contiguous run)
        let mut k = if contiguous { last } else { r };
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// Copies block `b` of `blocking` (a tiling of `local`'s shape) out of the
/// dense row-major tensor `local`, as a new tensor of the block's shape and
/// `local`'s dtype. Used by the root's scatter (`DistTensor::from_local`)
/// and by the SPMD scatter.
///
/// # Errors
/// The [`TensorError`](uni20_dispatch::TensorError) of building the block
/// (not reached when `blocking` tiles `local`'s shape).
///
/// # Panics
/// If `b` is not below `blocking.num_blocks()` or `blocking` does not tile
/// `local`'s shape.
pub(crate) fn extract_block(
    local: &uni20_dispatch::LocalTensor,
    blocking: &Blocking,
    b: usize,
) -> Result<uni20_dispatch::LocalTensor, uni20_dispatch::TensorError> {
    let multi = blocking.multi(b);
    let shape = blocking.block_shape(&multi);
    let off = blocking.block_offset(&multi);
    let gstrides = c_strides(local.shape());
    let base: usize = off.iter().zip(&gstrides).map(|(o, s)| o * s).sum();
    let elem = local.dtype().size_bytes();
    let mut out = vec![0u8; shape.iter().product::<usize>() * elem];
    copy_box(
        local.as_bytes(),
        &gstrides,
        base,
        &mut out,
        &c_strides(&shape),
        0,
        &shape,
        elem,
    );
    uni20_dispatch::LocalTensor::from_bytes(local.dtype(), &shape, &out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents() {
        assert_eq!(block_extents(10, 4), vec![4, 4, 2]);
        assert_eq!(block_extents(8, 4), vec![4, 4]);
        assert_eq!(block_extents(0, 4), vec![0]);
        assert_eq!(block_extents(3, 8), vec![3]);
    }

    #[test]
    fn block_len_is_the_product_of_the_block_shape() {
        for (shape, ext) in [
            (vec![10, 3, 7], vec![vec![4, 4, 2], vec![3], vec![1, 2, 4]]),
            (vec![5], vec![vec![2, 3]]),
            (vec![], vec![]),
        ] {
            let b = Blocking::from_extents(&shape, ext).unwrap();
            for lin in 0..b.num_blocks() {
                let want: usize = b.block_shape(&b.multi(lin)).iter().product();
                assert_eq!(b.block_len(lin), want, "block {lin} of {shape:?}");
            }
        }
    }

    #[test]
    fn grid_indexing() {
        let g = Blocking::regular(&[5, 3], 2).unwrap();
        assert_eq!(g.dims(), vec![3, 2]);
        assert_eq!(g.num_blocks(), 6);
        assert_eq!(g.multi(3), vec![1, 1]);
        assert_eq!(g.linear(&[2, 1]), 5);
        assert_eq!(g.block_shape(&[2, 1]), vec![1, 1]);
        assert_eq!(g.block_offset(&[2, 1]), vec![4, 2]);
        assert_eq!(Blocking::regular(&[], 3).unwrap().num_blocks(), 1);
        // A tensor with no elements is one empty block, whatever its extents.
        let empty = Blocking::regular(&[65536, 65536, 0], 1).unwrap();
        assert_eq!(empty.num_blocks(), 1);
        assert_eq!(empty.extents(), &[vec![65536], vec![65536], vec![0]]);
        assert!(matches!(
            Blocking::regular(&[65536, 65536], 1),
            Err(BlockingError::TooManyBlocks { count: 4294967296, .. })
        ));
        assert_eq!(Blocking::regular(&[3], 0), Err(BlockingError::ZeroBlockSize));
        // Deserialization checks the invariants too.
        let bad: Result<Blocking, _> = postcard::from_bytes(&postcard::to_stdvec(&vec![Vec::<usize>::new()]).unwrap());
        assert!(bad.is_err());
    }

    #[test]
    fn box_copy_extracts_and_transposes() {
        // 3x4 array of u8 values 0..12; extract rows 1..3, cols 1..3.
        let src: Vec<u8> = (0..12).collect();
        let mut dst = vec![0u8; 4];
        copy_box(&src, &[4, 1], 4 + 1, &mut dst, &[2, 1], 0, &[2, 2], 1);
        assert_eq!(dst, vec![5, 6, 9, 10]);
        // transpose 3x4 -> 4x3 through strides
        let mut t = vec![0u8; 12];
        copy_box(&src, &[4, 1], 0, &mut t, &[1, 3], 0, &[3, 4], 1);
        assert_eq!(t, vec![0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
    }
}
