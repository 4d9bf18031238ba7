//! How the caller names a block tiling ([`Tiling`]: one block size, one per
//! mode, or explicit extents) and its resolution against a shape, with the
//! size limits every new tiling must respect (block count, bytes of the
//! largest block: [`check_block_bytes`], [`MAX_BLOCK_BYTES`]). Pure.

use uni20_dispatch::DType;

use crate::error::DistError;
use crate::layout::{block_extents, Blocking, BlockingError};

/// A block tiling as the caller names it, resolved against a shape by
/// [`Tiling::blocking`]. Converts from a `usize` (one block size for every
/// mode), a `Vec<usize>`/`&[usize]`/`[usize; N]` (one block size per mode)
/// and a [`Blocking`] (explicit extents).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Tiling {
    /// Blocks of at most this many elements along every mode
    /// ([`Blocking::regular`]).
    Block(usize),
    /// Blocks of at most `sizes[k]` elements along mode `k`.
    PerMode(Vec<usize>),
    /// Exactly these block extents.
    Exact(Blocking),
}

impl From<usize> for Tiling {
    fn from(b: usize) -> Tiling {
        Tiling::Block(b)
    }
}
impl From<Vec<usize>> for Tiling {
    fn from(v: Vec<usize>) -> Tiling {
        Tiling::PerMode(v)
    }
}
impl From<&[usize]> for Tiling {
    fn from(v: &[usize]) -> Tiling {
        Tiling::PerMode(v.to_vec())
    }
}
impl<const N: usize> From<[usize; N]> for Tiling {
    fn from(v: [usize; N]) -> Tiling {
        Tiling::PerMode(v.to_vec())
    }
}
impl From<Blocking> for Tiling {
    fn from(b: Blocking) -> Tiling {
        Tiling::Exact(b)
    }
}
impl From<&Blocking> for Tiling {
    fn from(b: &Blocking) -> Tiling {
        Tiling::Exact(b.clone())
    }
}

impl Tiling {
    /// The tiling of a tensor of `shape`.
    ///
    /// # Errors
    /// [`DistError::RankMismatch`] if a per-mode list or explicit tiling has
    /// another rank than `shape`; [`DistError::ShapeMismatch`] if explicit
    /// extents cover another shape; [`DistError::Blocking`] for a block size
    /// of zero or more than [`MAX_BLOCKS`](crate::layout::MAX_BLOCKS) blocks.
    pub fn blocking(&self, shape: &[usize]) -> Result<Blocking, DistError> {
        match self {
            Tiling::Block(b) => Ok(Blocking::regular(shape, *b)?),
            Tiling::PerMode(sizes) => {
                same_rank("per-mode block sizes", shape.len(), sizes.len())?;
                if sizes.contains(&0) {
                    return Err(BlockingError::ZeroBlockSize.into());
                }
                let extents = shape.iter().zip(sizes).map(|(&n, &b)| block_extents(n, b)).collect();
                Ok(Blocking::from_extents(shape, extents)?)
            }
            Tiling::Exact(b) => {
                same_rank("the tiling", shape.len(), b.rank())?;
                if b.shape() != shape {
                    return Err(DistError::ShapeMismatch {
                        what: "the tiling's shape".into(),
                        expected: shape.to_vec(),
                        got: b.shape(),
                    });
                }
                Ok(b.clone())
            }
        }
    }
}

/// Most bytes one block of any tensor may have (1 TiB): a larger block
/// could not be assembled, sent or stored on one rank.
pub const MAX_BLOCK_BYTES: u128 = 1 << 40;

/// [`DistError::RankMismatch`] naming `what` unless `got == expected`.
fn same_rank(what: &str, expected: usize, got: usize) -> Result<(), DistError> {
    if got != expected {
        return Err(DistError::RankMismatch {
            what: what.into(),
            expected,
            got,
        });
    }
    Ok(())
}

/// Refuses a tiling whose largest block would exceed
/// [`MAX_BLOCK_BYTES`] bytes of `dtype`.
///
/// # Errors
/// [`DistError::PlanTooLarge`] naming the bytes and the limit.
pub(crate) fn check_block_bytes(blocking: &Blocking, dtype: DType, what: &str) -> Result<(), DistError> {
    let largest = blocking
        .extents()
        .iter()
        .map(|e| e.iter().copied().max().unwrap_or(0) as u128)
        .fold(1u128, |acc, n| acc.saturating_mul(n))
        .saturating_mul(dtype.size_bytes() as u128);
    check_plan_size(
        &format!("bytes of the largest block of {what}"),
        largest,
        MAX_BLOCK_BYTES,
        "use a smaller block size",
    )
}

/// Refuses a plan whose `count` of `what` exceeds `limit`.
///
/// # Errors
/// [`DistError::PlanTooLarge`] naming `what`, the count, the limit and
/// what the user can do (`hint`).
pub(crate) fn check_plan_size(what: &str, count: u128, limit: u128, hint: &str) -> Result<(), DistError> {
    if count > limit {
        return Err(DistError::PlanTooLarge {
            what: what.into(),
            count,
            limit,
            hint: hint.into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_resolves() {
        let shape = [5, 3];
        assert_eq!(
            Tiling::from(2).blocking(&shape).unwrap().extents(),
            &[vec![2, 2, 1], vec![2, 1]]
        );
        assert_eq!(
            Tiling::from([5, 1]).blocking(&shape).unwrap().extents(),
            &[vec![5], vec![1, 1, 1]]
        );
        let exact = Blocking::from_extents(&shape, vec![vec![1, 4], vec![3]]).unwrap();
        assert_eq!(Tiling::from(&exact).blocking(&shape).unwrap(), exact);
        assert!(matches!(
            Tiling::from(vec![1]).blocking(&shape),
            Err(DistError::RankMismatch {
                expected: 2,
                got: 1,
                ..
            })
        ));
        assert!(matches!(
            Tiling::from(exact).blocking(&[5, 4]),
            Err(DistError::ShapeMismatch { .. })
        ));
        assert!(matches!(
            Tiling::from([0, 1]).blocking(&shape),
            Err(DistError::Blocking(BlockingError::ZeroBlockSize))
        ));
        let huge = Blocking::regular(&[1 << 21, 1 << 20], 1 << 20).unwrap();
        assert!(matches!(
            check_block_bytes(&huge, DType::F64, "x"),
            Err(DistError::PlanTooLarge { .. })
        ));
    }
}
