//! Block grids and byte-level box copies between dense C-order arrays.

use serde::{Deserialize, Serialize};

/// Splits an extent `n` into blocks of at most `block` elements.
///
/// A zero extent gives one empty block (`[0]`), so every mode of every
/// tensor has at least one block and zero-size dimensions flow through
/// planning like any other. `block` must be positive (checked by callers).
pub fn block_extents(n: usize, block: usize) -> Vec<usize> {
    if n == 0 {
        return vec![0];
    }
    let block = block.max(1);
    let mut v = vec![block; n / block];
    if n % block != 0 {
        v.push(n % block);
    }
    v
}

/// Row-major (C order) strides, in elements, of a dense array of `shape`.
pub fn c_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    s
}

/// The block decomposition of a tensor: per mode, the extent of each block.
///
/// Block `(b_0, .., b_{r-1})` covers elements
/// `offset_k(b_k) .. offset_k(b_k) + extents[k][b_k]` of each mode `k`.
/// Blocks are numbered in row-major order of their multi-index; a rank-0
/// tensor has exactly one block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grid {
    /// Per mode, the extent of each block along that mode.
    pub extents: Vec<Vec<usize>>,
}

impl Grid {
    /// The grid of a tensor of `shape` cut into blocks of at most `block`.
    pub fn regular(shape: &[usize], block: usize) -> Grid {
        Grid {
            extents: shape.iter().map(|&n| block_extents(n, block)).collect(),
        }
    }

    /// Number of blocks per mode.
    pub fn dims(&self) -> Vec<usize> {
        self.extents.iter().map(Vec::len).collect()
    }

    /// Total number of blocks (product of [`Grid::dims`]; 1 for rank 0).
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
    pub fn block_shape(&self, multi: &[usize]) -> Vec<usize> {
        multi.iter().zip(&self.extents).map(|(&i, e)| e[i]).collect()
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

/// Copies a box of `shape` elements (each `elem` bytes) between two dense
/// arrays given by element strides and base element offsets. Runs along a
/// mode with unit stride on both sides are copied with one `memcpy` each.
///
/// # Panics
/// If a computed range lies outside `src` or `dst` (a caller bug: callers
/// derive every argument from validated shapes).
#[allow(clippy::too_many_arguments)]
pub fn copy_box(
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
    fn grid_indexing() {
        let g = Grid::regular(&[5, 3], 2);
        assert_eq!(g.dims(), vec![3, 2]);
        assert_eq!(g.num_blocks(), 6);
        assert_eq!(g.multi(3), vec![1, 1]);
        assert_eq!(g.linear(&[2, 1]), 5);
        assert_eq!(g.block_shape(&[2, 1]), vec![1, 1]);
        assert_eq!(g.block_offset(&[2, 1]), vec![4, 2]);
        assert_eq!(Grid::regular(&[], 3).num_blocks(), 1);
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
