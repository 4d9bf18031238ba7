//! The dense embedding of a symmetric tensor's blocks, both ways, for one
//! process: [`embed_blocks`] writes the allowed blocks into a dense array
//! (zeros elsewhere); [`split_dense`] cuts a dense array into the allowed
//! blocks after checking that every forbidden block is zero within a
//! tolerance, naming the first offending block.
//!
//! Every symmetric layout sits on a regular tiling of its dense shape
//! ([`SymmetricLayout::blocking`]: the legs' tiles, sector after sector), and
//! a symmetric block is the block of that tiling with the same tile tuple,
//! so both directions are box copies.

use uni20_dispatch::{DType, LocalTensor, TensorError};

use super::group::Charge;
use super::layout::SymmetricLayout;
use crate::layout::{c_strides, copy_box, extract_block, Blocking, BlockingError};

/// Why blocks and a dense array do not fit a symmetric layout.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DenseEmbeddingError {
    /// The number of blocks differs from the layout's allowed blocks.
    #[error("{got} blocks given for a layout with {expected} allowed blocks")]
    BlockCount {
        /// Allowed blocks of the layout.
        expected: usize,
        /// Blocks given.
        got: usize,
    },
    /// A block or the dense array has the wrong shape.
    #[error("{what}: expected shape {expected:?}, got {got:?}")]
    Shape {
        /// Which block, or the dense array.
        what: String,
        /// The shape required.
        expected: Vec<usize>,
        /// The shape given.
        got: Vec<usize>,
    },
    /// Blocks of different dtypes.
    #[error("block {block} has dtype {got}, block 0 has {expected}")]
    DType {
        /// The block.
        block: usize,
        /// Block 0's dtype.
        expected: DType,
        /// This block's dtype.
        got: DType,
    },
    /// A block that the charge rule forbids holds an entry larger than the
    /// tolerance: the dense tensor does not have this symmetry (or has
    /// another flux).
    #[error(
        "the dense tensor breaks the symmetry: block {tiles:?} (sectors with charges {charges}) is forbidden by the charge rule with flux {flux} but has an entry of magnitude {max_abs:e} > tolerance {tol:e}"
    )]
    BrokenSymmetry {
        /// Tile tuple of the offending block.
        tiles: Vec<usize>,
        /// The sector charges of that block, one per leg.
        charges: String,
        /// The layout's flux.
        flux: Charge,
        /// Largest magnitude in the block.
        max_abs: f64,
        /// The tolerance.
        tol: f64,
    },
    /// The tolerance is negative or not finite.
    #[error("tolerance {0} must be finite and >= 0")]
    Tolerance(f64),
    /// The regular tiling under the layout cannot be built (too many blocks).
    #[error(transparent)]
    Blocking(#[from] BlockingError),
    /// Building a tensor failed.
    #[error(transparent)]
    Tensor(#[from] TensorError),
}

impl SymmetricLayout {
    /// The regular tiling of the dense embedding on which the layout sits:
    /// along each leg, that leg's tiles in order. A symmetric block with
    /// tile tuple `t` is block `blocking().linear(t)` of it.
    ///
    /// # Errors
    /// [`BlockingError::TooManyBlocks`] when the full tiling has more than
    /// [`MAX_BLOCKS`](crate::layout::MAX_BLOCKS) blocks (allowed or not).
    pub fn blocking(&self) -> Result<Blocking, BlockingError> {
        let extents = self
            .legs()
            .iter()
            .map(|l| {
                (0..l.sectors().len())
                    .flat_map(|s| l.sector_tiles(s).to_vec())
                    .collect()
            })
            .collect();
        Blocking::from_extents(&self.dense_shape(), extents)
    }
}

/// The dense embedding of `blocks` (block `b` of the layout in
/// `blocks[b]`, row-major), zero outside the allowed blocks.
///
/// # Errors
/// [`DenseEmbeddingError::BlockCount`], [`DenseEmbeddingError::Shape`]
/// (a block of the wrong shape), [`DenseEmbeddingError::DType`] (mixed
/// dtypes), [`DenseEmbeddingError::Tensor`] (allocation limits).
pub fn embed_blocks(layout: &SymmetricLayout, blocks: &[LocalTensor]) -> Result<LocalTensor, DenseEmbeddingError> {
    if blocks.len() != layout.blocks().len() {
        return Err(DenseEmbeddingError::BlockCount {
            expected: layout.blocks().len(),
            got: blocks.len(),
        });
    }
    let dtype = blocks[0].dtype();
    let shape = layout.dense_shape();
    let mut out = LocalTensor::zeros(dtype, &shape)?;
    let gstrides = c_strides(&shape);
    let elem = dtype.size_bytes();
    let mut bytes = out.as_bytes().to_vec();
    for (b, t) in blocks.iter().enumerate() {
        let ext = layout.block_extents(b);
        if t.shape() != ext.as_slice() {
            return Err(DenseEmbeddingError::Shape {
                what: format!("block {b} (tiles {:?})", layout.blocks()[b].tiles),
                expected: ext,
                got: t.shape().to_vec(),
            });
        }
        if t.dtype() != dtype {
            return Err(DenseEmbeddingError::DType {
                block: b,
                expected: dtype,
                got: t.dtype(),
            });
        }
        let base: usize = layout.block_offsets(b).iter().zip(&gstrides).map(|(o, s)| o * s).sum();
        copy_box(
            t.as_bytes(),
            &c_strides(&ext),
            0,
            &mut bytes,
            &gstrides,
            base,
            &ext,
            elem,
        );
    }
    out = LocalTensor::from_bytes(dtype, &shape, &bytes)?;
    Ok(out)
}

/// Cuts the dense tensor `dense` (the layout's dense shape) into the
/// layout's allowed blocks, after checking that every forbidden block's
/// entries are at most `tol` in magnitude.
///
/// # Errors
/// [`DenseEmbeddingError::Shape`] (wrong dense shape),
/// [`DenseEmbeddingError::Tolerance`], [`DenseEmbeddingError::BrokenSymmetry`]
/// naming the first forbidden block (in row-major tile order) with a larger
/// entry, or NaN, [`DenseEmbeddingError::Blocking`].
pub fn split_dense(
    layout: &SymmetricLayout,
    dense: &LocalTensor,
    tol: f64,
) -> Result<Vec<LocalTensor>, DenseEmbeddingError> {
    if !(tol.is_finite() && tol >= 0.0) {
        return Err(DenseEmbeddingError::Tolerance(tol));
    }
    let shape = layout.dense_shape();
    if dense.shape() != shape.as_slice() {
        return Err(DenseEmbeddingError::Shape {
            what: "the dense tensor".into(),
            expected: shape,
            got: dense.shape().to_vec(),
        });
    }
    let blocking = layout.blocking()?;
    let mut out = Vec::with_capacity(layout.blocks().len());
    let mut next = 0usize; // the next allowed block, in row-major tile order
    for lin in 0..blocking.num_blocks() {
        let tiles = blocking.multi(lin);
        let allowed = layout.blocks().get(next).is_some_and(|b| b.tiles == tiles);
        let block = extract_block(dense, &blocking, lin)?;
        if allowed {
            out.push(block);
            next += 1;
        } else {
            let m = uni20_dispatch::max_abs(&block, 1);
            if m.is_nan() || m > tol {
                let charges: Vec<String> = tiles
                    .iter()
                    .zip(layout.legs())
                    .map(|(&t, l)| {
                        let s = l.tile(t).map(|x| x.sector).unwrap_or(0);
                        l.sectors()[s].charge.to_string()
                    })
                    .collect();
                return Err(DenseEmbeddingError::BrokenSymmetry {
                    tiles,
                    charges: charges.join(" "),
                    flux: layout.flux().clone(),
                    max_abs: m,
                    tol,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symmetry::{u1_test_leg, Direction, Symmetry};

    fn layout() -> SymmetricLayout {
        let g = Symmetry::u1();
        let a = u1_test_leg(Direction::Out, &[(-1, 2), (0, 1), (1, 3)], 2);
        let b = u1_test_leg(Direction::In, &[(-1, 1), (1, 2)], 1);
        SymmetricLayout::new(g.clone(), vec![a, b], g.identity()).unwrap()
    }

    #[test]
    fn embed_and_split_round_trip_and_zero_elsewhere() {
        let lay = layout();
        let blocks: Vec<LocalTensor> = (0..lay.blocks().len())
            .map(|b| {
                let ext = lay.block_extents(b);
                let n: usize = ext.iter().product();
                LocalTensor::from_f64(&ext, (0..n).map(|i| (b * 10 + i + 1) as f64).collect()).unwrap()
            })
            .collect();
        let dense = embed_blocks(&lay, &blocks).unwrap();
        assert_eq!(dense.shape(), &[6, 3]);
        // Independent check: entry (i, j) is nonzero iff charge(i) == charge(j) (Out - In = 0).
        let q_a = [-1, -1, 0, 1, 1, 1];
        let q_b = [-1, 1, 1];
        let d = match dense.data() {
            uni20_dispatch::TensorData::F64(v) => v.clone(),
            _ => unreachable!(),
        };
        for i in 0..6 {
            for j in 0..3 {
                assert_eq!(d[i * 3 + j] != 0.0, q_a[i] == q_b[j], "entry ({i}, {j})");
            }
        }
        let back = split_dense(&lay, &dense, 0.0).unwrap();
        assert_eq!(back, blocks);
    }

    #[test]
    fn a_dense_tensor_that_breaks_the_symmetry_is_refused_naming_the_block() {
        let lay = layout();
        let mut v = vec![0.0; 18];
        v[2 * 3] = 1e-3; // row 2 (charge 0) x column 0 (charge -1): forbidden
        let dense = LocalTensor::from_f64(&[6, 3], v).unwrap();
        let err = split_dense(&lay, &dense, 1e-6).unwrap_err();
        match &err {
            DenseEmbeddingError::BrokenSymmetry { tiles, max_abs, .. } => {
                assert_eq!(tiles, &vec![1, 0]);
                assert_eq!(*max_abs, 1e-3);
            }
            e => panic!("unexpected {e}"),
        }
        assert!(err.to_string().contains("(0) (-1)"), "{err}");
        assert_eq!(split_dense(&lay, &dense, 1e-2).unwrap().len(), lay.blocks().len());
        assert!(matches!(
            split_dense(&lay, &dense, -1.0),
            Err(DenseEmbeddingError::Tolerance(_))
        ));
        let wrong = LocalTensor::from_f64(&[3, 6], vec![0.0; 18]).unwrap();
        assert!(matches!(
            split_dense(&lay, &wrong, 0.0),
            Err(DenseEmbeddingError::Shape { .. })
        ));
        assert!(matches!(
            embed_blocks(&lay, &[]),
            Err(DenseEmbeddingError::BlockCount { .. })
        ));
    }
}
