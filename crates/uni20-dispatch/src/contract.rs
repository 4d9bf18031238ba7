//! The `contract` front end: validation, promotion, dispatch.

use std::borrow::Cow;

use crate::backend::{BackendList, ContractProblem, KernelAttempt, KernelDispatchError};
use crate::dtype::{DType, C64};
use crate::spec::{EinsumSpec, SpecError};
use crate::tensor::{checked_len, LocalTensor, TensorError};

/// Error from [`contract`].
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
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
        /// `"alpha"` or `"beta"`.
        which: &'static str,
        /// The offending scalar.
        value: C64,
        /// The (real) output dtype.
        dtype: DType,
    },
    /// The output would be too large to allocate (shape product overflows).
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// No backend produced a result.
    #[error(transparent)]
    Dispatch(#[from] KernelDispatchError),
}

/// `C = alpha * einsum(spec, A, B) + beta * C`, returned as a new tensor.
///
/// Shapes: `a` has one extent per `spec.a` label, `b` per `spec.b` label; shared labels must
/// agree; the result has `spec.out` extents (rank 0 for `"...->"`). `c`, if given, must have
/// the output shape. Output dtype = `promote(a, b, c if given)`; operands are promoted (copied)
/// only when their dtype differs. If `beta == 0`, `c` is never read (NaN in it cannot leak),
/// though its shape and dtype still count. If `c` is `None`, `beta` is ignored. Labels only in
/// one operand and not in the output are summed over; zero-size dimensions work (an empty
/// contraction gives `beta * C` or zeros). Never panics on user input.
///
/// # Errors
/// [`ContractError::Spec`] (invalid spec, rank or extent mismatch), [`ContractError::Shape`]
/// (C's shape), [`ContractError::ComplexScalarForRealOutput`], [`ContractError::Tensor`]
/// (output size overflow), [`ContractError::Dispatch`] (every backend declined, or the chosen
/// one failed).
pub fn contract(
    spec: &EinsumSpec,
    alpha: C64,
    a: &LocalTensor,
    b: &LocalTensor,
    beta: C64,
    c: Option<&LocalTensor>,
    backends: &BackendList,
) -> Result<LocalTensor, ContractError> {
    contract_with_attempts(spec, alpha, a, b, beta, c, backends).map(|(t, _)| t)
}

/// Like [`contract`], also returning the dispatch log (every backend offered the problem, in
/// order, the last being the one that ran with [`crate::AttemptOutcome::Accepted`]).
///
/// # Errors
/// As [`contract`].
pub fn contract_with_attempts(
    spec: &EinsumSpec,
    alpha: C64,
    a: &LocalTensor,
    b: &LocalTensor,
    beta: C64,
    c: Option<&LocalTensor>,
    backends: &BackendList,
) -> Result<(LocalTensor, Vec<KernelAttempt>), ContractError> {
    spec.validate()?;
    let label_dims = spec.label_dims(a.shape(), b.shape())?;
    let out_shape = spec.output_shape(a.shape(), b.shape())?;
    let mut dtype = a.dtype().promote(b.dtype());
    if let Some(c) = c {
        if c.shape() != out_shape.as_slice() {
            return Err(ContractError::Shape {
                expected: out_shape,
                got: c.shape().to_vec(),
            });
        }
        dtype = dtype.promote(c.dtype());
    }
    checked_len(&out_shape, dtype.size_bytes())?;
    let use_c = c.filter(|_| beta != C64::new(0.0, 0.0));
    let beta = if use_c.is_some() { beta } else { C64::new(0.0, 0.0) };
    if !dtype.is_complex() {
        if alpha.im != 0.0 {
            return Err(ContractError::ComplexScalarForRealOutput {
                which: "alpha",
                value: alpha,
                dtype,
            });
        }
        if beta.im != 0.0 {
            return Err(ContractError::ComplexScalarForRealOutput {
                which: "beta",
                value: beta,
                dtype,
            });
        }
    }
    let a = promote(a, dtype)?;
    let b = promote(b, dtype)?;
    let c = use_c.map(|c| promote(c, dtype)).transpose()?;
    let problem = ContractProblem {
        spec,
        classes: spec.classes(),
        label_dims,
        alpha,
        beta,
        a: &a,
        b: &b,
        c: c.as_deref(),
        dtype,
        out_shape,
    };
    Ok(backends.dispatch(&problem)?)
}

/// Borrows `t` if it already has `dtype`, otherwise casts (widening) into a new tensor.
fn promote(t: &LocalTensor, dtype: DType) -> Result<Cow<'_, LocalTensor>, TensorError> {
    if t.dtype() == dtype {
        Ok(Cow::Borrowed(t))
    } else {
        t.cast(dtype).map(Cow::Owned)
    }
}
