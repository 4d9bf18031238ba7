//! [`ContractError`], the error of every contraction entry point, and [`check_scalars`], the
//! one place that refuses complex `alpha`/`beta` for a real output (called by the local front
//! ends, [`crate::backends::ContractProblem::new`], and the distributed layer).

use std::fmt;

use crate::backend::KernelDispatchError;
use crate::dtype::{DType, C64};
use crate::spec::SpecError;
use crate::tensor::TensorError;
use crate::view::ViewError;

/// Which scale factor of `alpha * einsum(...) + beta * C` an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarRole {
    /// The scale of the product.
    Alpha,
    /// The scale of the accumulator C.
    Beta,
}

impl fmt::Display for ScalarRole {
    /// `alpha` or `beta`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScalarRole::Alpha => "alpha",
            ScalarRole::Beta => "beta",
        })
    }
}

/// Error from a contraction entry point ([`crate::contract`] and friends) or from
/// [`crate::backends::ContractProblem::new`].
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ContractError {
    /// The spec is invalid or does not match the operand shapes.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// C's shape differs from the output shape.
    #[error("accumulator C has shape {got:?}, output shape is {expected:?}")]
    Shape {
        /// The output shape implied by the spec and operands.
        expected: Vec<usize>,
        /// C's shape.
        got: Vec<usize>,
    },
    /// `alpha` (or `beta`, when C is given) has a nonzero imaginary part but the output is real.
    #[error("{which} = {value} has a nonzero imaginary part but the output dtype {dtype} is real")]
    ComplexScalarForRealOutput {
        /// The offending scale factor.
        which: ScalarRole,
        /// Its value.
        value: C64,
        /// The (real) output dtype.
        dtype: DType,
    },
    /// [`crate::backends::ContractProblem::new`]: the views do not all have one dtype (operands in
    /// order, then C if given).
    #[error("operand dtypes {dtypes:?} differ (a contraction problem has one dtype)")]
    MixedDTypes {
        /// The dtype of each operand, then of C.
        dtypes: Vec<DType>,
    },
    /// The output would be too large to allocate (shape product overflows).
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// A view derived from an operand (its diagonal) could not be formed.
    #[error(transparent)]
    View(#[from] ViewError),
    /// No backend produced a result.
    #[error(transparent)]
    Dispatch(#[from] KernelDispatchError),
    /// A spec that [`crate::PairContraction`] cannot run: it needs two operands, each label
    /// once per operand, contracted labels absent from the output and every free label in it.
    #[error("not a block-pair contraction: {reason}")]
    PairSpec {
        /// What is wrong with the spec.
        reason: String,
    },
    /// [`crate::contract_into`]: the output view overlaps an input operand in memory. (Safe
    /// Rust cannot build such views, since C is borrowed mutably; the check guards views built
    /// from raw parts.)
    #[error("output C overlaps input operand {operand} in memory")]
    Overlap {
        /// Index of the input operand (0 or 1).
        operand: usize,
    },
}

impl From<std::convert::Infallible> for ContractError {
    fn from(never: std::convert::Infallible) -> ContractError {
        match never {}
    }
}

/// Refuses complex scale factors for a real output dtype: `alpha` must be real, and so must
/// `beta` when an accumulator C is given (`beta = Some(..)`; without C, beta is ignored).
/// Every entry point calls this; the distributed layer calls it on the root.
///
/// # Errors
/// [`ContractError::ComplexScalarForRealOutput`] naming the first offending factor.
pub fn check_scalars(dtype: DType, alpha: C64, beta: Option<C64>) -> Result<(), ContractError> {
    if dtype.is_complex() {
        return Ok(());
    }
    for (which, value) in [(ScalarRole::Alpha, Some(alpha)), (ScalarRole::Beta, beta)] {
        if let Some(value) = value.filter(|v| v.im != 0.0) {
            return Err(ContractError::ComplexScalarForRealOutput { which, value, dtype });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_checks() {
        let re = C64::new(2.0, 0.0);
        let im = C64::new(0.0, 1.0);
        assert_eq!(check_scalars(DType::F64, re, Some(re)), Ok(()));
        assert_eq!(check_scalars(DType::F32, re, None), Ok(()));
        assert_eq!(check_scalars(DType::C32, im, Some(im)), Ok(()));
        assert_eq!(check_scalars(DType::F64, re, None), Ok(()));
        assert_eq!(
            check_scalars(DType::F32, im, Some(im)),
            Err(ContractError::ComplexScalarForRealOutput {
                which: ScalarRole::Alpha,
                value: im,
                dtype: DType::F32
            })
        );
        assert_eq!(
            check_scalars(DType::F64, re, Some(im)),
            Err(ContractError::ComplexScalarForRealOutput {
                which: ScalarRole::Beta,
                value: im,
                dtype: DType::F64
            })
        );
        assert!(check_scalars(DType::F64, re, None).is_ok(), "beta without C is ignored");
        assert_eq!(ScalarRole::Beta.to_string(), "beta");
    }
}
