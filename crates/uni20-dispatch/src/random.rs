//! Worker-side creation of one block of a global tensor: [`zeros_block`],
//! [`identity_block`] and [`random_block`], each given the global shape and the block's
//! offset and shape, so that a worker fills only the block it owns and the assembled
//! tensor does not depend on how it was cut into blocks (or on which rank made which
//! block). Random values come from the counter-based ChaCha8 generator of `rand_chacha`,
//! seeked to each element's global index.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::dtype::with_dtype;
use crate::dtype::{DType, C64};
use crate::scalar::Element;
use crate::tensor::{LocalTensor, TensorError};
use crate::typed::tensor;

/// Largest global element count [`random_block`] supports (`2^66`: four 32-bit ChaCha words
/// per element within the generator's `2^68`-word period).
pub(crate) const MAX_RANDOM_ELEMENTS: u128 = 1 << 66;

/// Error from the block creation functions.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BlockError {
    /// `global_shape`, `block_offset` and `block_shape` have different lengths.
    #[error("global shape has rank {global}, block offset {offset}, block shape {block}")]
    RankMismatch {
        /// `global_shape.len()`.
        global: usize,
        /// `block_offset.len()`.
        offset: usize,
        /// `block_shape.len()`.
        block: usize,
    },
    /// The block reaches past the global extent of a mode.
    #[error("block [{offset}, {offset} + {extent}) exceeds global extent {global} of mode {mode}")]
    OutOfBounds {
        /// The mode.
        mode: usize,
        /// The block's offset in that mode.
        offset: usize,
        /// The block's extent in that mode.
        extent: usize,
        /// The global extent of that mode.
        global: usize,
    },
    /// [`identity_block`]: `row_modes` exceeds the rank.
    #[error("row_modes = {row_modes} exceeds the rank {rank}")]
    BadSplit {
        /// The number of row modes requested.
        row_modes: usize,
        /// The rank.
        rank: usize,
    },
    /// [`random_block`]: the global tensor has more than `2^66` elements.
    #[error("global shape {shape:?} has more than 2^66 elements")]
    GlobalTooLarge {
        /// The global shape.
        shape: Vec<usize>,
    },
    /// Building the block failed (size overflow).
    #[error(transparent)]
    Tensor(#[from] TensorError),
}

/// A block of zeros: `LocalTensor::zeros(dtype, block_shape)`, for symmetry with the other
/// creation functions.
///
/// # Errors
/// [`BlockError::Tensor`] if the block's size overflows.
pub fn zeros_block(dtype: DType, block_shape: &[usize]) -> Result<LocalTensor, BlockError> {
    Ok(LocalTensor::zeros(dtype, block_shape)?)
}

/// The block at `block_offset` (shape `block_shape`) of the identity tensor of shape
/// `global_shape` whose first `row_modes` modes are its rows: element `(i_0, .., i_{r-1})`
/// is `1` when the C-order fused index of `(i_0 .. i_{row_modes-1})` equals that of
/// `(i_{row_modes} .. i_{r-1})`, else `0` (indices are global). For a rank-2 shape and
/// `row_modes = 1` this is the (possibly rectangular) identity matrix; with
/// `row_modes = rank / 2` and matching extents it is the identity operator on the row
/// space.
///
/// # Errors
/// [`BlockError::RankMismatch`], [`BlockError::OutOfBounds`], [`BlockError::BadSplit`],
/// [`BlockError::Tensor`].
pub fn identity_block(
    dtype: DType,
    global_shape: &[usize],
    row_modes: usize,
    block_offset: &[usize],
    block_shape: &[usize],
) -> Result<LocalTensor, BlockError> {
    check_block(global_shape, block_offset, block_shape)?;
    let rank = global_shape.len();
    if row_modes > rank {
        return Err(BlockError::BadSplit { row_modes, rank });
    }
    let fused = |idx: &[usize], modes: std::ops::Range<usize>| -> u128 {
        modes.fold(0u128, |acc, d| acc * global_shape[d] as u128 + idx[d] as u128)
    };
    let mut ones = Vec::new();
    for_each_index(block_offset, block_shape, |flat, global| {
        if fused(global, 0..row_modes) == fused(global, row_modes..rank) {
            ones.push(flat);
        }
    });
    with_dtype!(dtype, T => {
        let mut data = vec![T::zero(); block_shape.iter().product()];
        let one = T::from_c64(C64::new(1.0, 0.0));
        for i in ones {
            data[i] = one;
        }
        Ok(tensor(block_shape, data)?)
    })
}

/// The block at `block_offset` (shape `block_shape`) of the random tensor of shape
/// `global_shape` drawn with `seed`. Each element depends only on `(seed, g)`, where `g` is
/// its row-major index in the global tensor, so any blocking assembles the same tensor,
/// bit for bit.
///
/// Generator: ChaCha8 (`rand_chacha::ChaCha8Rng`) keyed by `from_seed` with the 32-byte
/// key `seed.to_le_bytes()` followed by 24 zero bytes, stream 0, seeked to word `4 g`; the
/// element takes the next two `u64` draws (`next_u64`), `re` then `im`.
///
/// Distribution: uniform on `[-1, 1)`: a real component is `k * 2^-52 - 1` with `k` the top
/// 53 bits of its draw (`f64`), or `k * 2^-23 - 1` with the top 24 bits (`f32`), exactly
/// representable in its type. Complex dtypes have independent real and imaginary parts;
/// real dtypes use the real part only, so the real part of a `c64` draw equals the `f64`
/// draw with the same seed and index (and `c32` likewise `f32`).
///
/// # Errors
/// [`BlockError::RankMismatch`], [`BlockError::OutOfBounds`],
/// [`BlockError::GlobalTooLarge`], [`BlockError::Tensor`].
pub fn random_block(
    seed: u64,
    dtype: DType,
    global_shape: &[usize],
    block_offset: &[usize],
    block_shape: &[usize],
) -> Result<LocalTensor, BlockError> {
    check_block(global_shape, block_offset, block_shape)?;
    let total = global_shape
        .iter()
        .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128));
    if total.is_none_or(|t| t > MAX_RANDOM_ELEMENTS) {
        return Err(BlockError::GlobalTooLarge {
            shape: global_shape.to_vec(),
        });
    }
    let n = block_shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| TensorError::Overflow {
            shape: block_shape.to_vec(),
        })?;
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let mut rng = ChaCha8Rng::from_seed(key);
    let single = matches!(dtype, DType::F32 | DType::C32);
    let run = block_shape.last().copied().unwrap_or(1);
    with_dtype!(dtype, T => {
        let mut data: Vec<T> = Vec::new();
        data.try_reserve_exact(n).map_err(|_| TensorError::Overflow { shape: block_shape.to_vec() })?;
        // Huge-page advice before the first write, as for the kernels' result buffers:
        // blocks are streamed whole later (reductions), and 4 KiB pages cost about 10 %.
        crate::alloc::advise_huge(&mut data);
        if n > 0 {
            // One seek per run along the last mode (contiguous in the global index).
            for_each_run(block_offset, block_shape, |global| {
                let g = global
                    .iter()
                    .zip(global_shape)
                    .fold(0u128, |acc, (&i, &d)| acc * d as u128 + i as u128);
                rng.set_word_pos(4 * g);
                for _ in 0..run {
                    let re = uniform(rng.next_u64(), single);
                    let im = uniform(rng.next_u64(), single);
                    data.push(T::from_c64(C64::new(re, im)));
                }
            });
        }
        Ok(tensor(block_shape, data)?)
    })
}

/// `k * 2^-52 - 1` with `k` the top 53 bits of `bits`, or `k * 2^-23 - 1` with the top 24
/// bits when `single` (both exact in `f64`, the latter also in `f32`).
fn uniform(bits: u64, single: bool) -> f64 {
    if single {
        (bits >> 40) as f64 * (1.0 / (1u64 << 23) as f64) - 1.0
    } else {
        (bits >> 11) as f64 * (1.0 / (1u64 << 52) as f64) - 1.0
    }
}

/// Checks ranks and that `offset + block <= global` in every mode.
fn check_block(global: &[usize], offset: &[usize], block: &[usize]) -> Result<(), BlockError> {
    if global.len() != offset.len() || global.len() != block.len() {
        return Err(BlockError::RankMismatch {
            global: global.len(),
            offset: offset.len(),
            block: block.len(),
        });
    }
    for (mode, ((&g, &o), &e)) in global.iter().zip(offset).zip(block).enumerate() {
        if o.checked_add(e).is_none_or(|end| end > g) {
            return Err(BlockError::OutOfBounds {
                mode,
                offset: o,
                extent: e,
                global: g,
            });
        }
    }
    Ok(())
}

/// Calls `f(flat, global_index)` for every element of the block in row-major order, where
/// `flat` is the element's index in the block.
fn for_each_index(offset: &[usize], block: &[usize], mut f: impl FnMut(usize, &[usize])) {
    if block.contains(&0) {
        return;
    }
    let mut global = offset.to_vec();
    let mut flat = 0;
    loop {
        f(flat, &global);
        flat += 1;
        let mut d = block.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            global[d] += 1;
            if global[d] < offset[d] + block[d] {
                break;
            }
            global[d] = offset[d];
        }
    }
}

/// Calls `f(global_index_of_run_start)` for every run of the block along its last mode
/// (one call for rank 0), in row-major order. The block must be non-empty.
fn for_each_run(offset: &[usize], block: &[usize], mut f: impl FnMut(&[usize])) {
    let Some(outer) = block.len().checked_sub(1) else {
        f(&[]);
        return;
    };
    for_each_index(&offset[..outer], &block[..outer], |_, head| {
        let mut start = head.to_vec();
        start.push(offset[outer]);
        f(&start);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_range_and_exactness() {
        assert_eq!(uniform(0, false), -1.0);
        assert_eq!(uniform(u64::MAX, false), 1.0 - f64::EPSILON);
        assert_eq!(uniform(0, true), -1.0);
        assert_eq!(uniform(u64::MAX, true), 1.0 - 2f64.powi(-23));
        assert_eq!(uniform(u64::MAX, true) as f32 as f64, uniform(u64::MAX, true));
        assert_eq!(uniform(1 << 63, false), 0.0);
    }

    #[test]
    fn index_walks() {
        let mut seen = Vec::new();
        for_each_index(&[1, 2], &[2, 2], |flat, g| seen.push((flat, g.to_vec())));
        assert_eq!(
            seen,
            vec![(0, vec![1, 2]), (1, vec![1, 3]), (2, vec![2, 2]), (3, vec![2, 3])]
        );
        let mut runs = Vec::new();
        for_each_run(&[1, 2], &[2, 2], |g| runs.push(g.to_vec()));
        assert_eq!(runs, vec![vec![1, 2], vec![2, 2]]);
        let mut scalar = 0;
        for_each_run(&[], &[], |g| {
            assert!(g.is_empty());
            scalar += 1;
        });
        assert_eq!(scalar, 1);
        for_each_index(&[0], &[0], |_, _| panic!("empty block has no elements"));
    }
}
