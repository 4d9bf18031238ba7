//! The contraction front ends: validation, promotion, dispatch.
//!
//! [`contract_into`] is the strided entry (views with arbitrary strides and conjugation
//! flags, writing into a strided C); [`contract_views`] returns a new tensor from views;
//! [`contract`] is the convenience wrapper over whole [`LocalTensor`]s with dtype promotion.

use std::borrow::Cow;

use crate::backend::{BackendList, ContractProblem, KernelAttempt, KernelDispatchError};
use crate::dtype::{DType, C64};
use crate::scalar::Element;
use crate::spec::{EinsumSpec, SpecError};
use crate::tensor::{checked_len, LocalTensor, TensorError};
use crate::view::{AnyView, StridedView, StridedViewMut};

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
    /// [`contract_into`]: the output view overlaps operand A or B in memory. (Safe Rust
    /// cannot build such views, since C is borrowed mutably; the check guards views built
    /// from raw parts.)
    #[error("output C overlaps operand {0} in memory")]
    Overlap(char),
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
        a: AnyView::of_tensor(&a),
        b: AnyView::of_tensor(&b),
        c: c.as_deref().map(AnyView::of_tensor),
        dtype,
        out_shape,
    };
    Ok(backends.dispatch(&problem)?)
}

/// Checks spec, shapes, output size and scalars for a same-dtype view problem and builds
/// the [`ContractProblem`] (with `c` dropped when `beta == 0`).
fn view_problem<'a, T: Element>(
    spec: &'a EinsumSpec,
    alpha: C64,
    a: &StridedView<'a, T>,
    b: &StridedView<'a, T>,
    beta: C64,
    c: Option<StridedView<'a, T>>,
) -> Result<ContractProblem<'a>, ContractError> {
    spec.validate()?;
    let label_dims = spec.label_dims(a.shape(), b.shape())?;
    let out_shape = spec.output_shape(a.shape(), b.shape())?;
    checked_len(&out_shape, T::DTYPE.size_bytes())?;
    if let Some(c) = &c {
        if c.shape() != out_shape.as_slice() {
            return Err(ContractError::Shape {
                expected: out_shape,
                got: c.shape().to_vec(),
            });
        }
    }
    let zero = C64::new(0.0, 0.0);
    let c = c.filter(|_| beta != zero);
    let beta = if c.is_some() { beta } else { zero };
    if !T::DTYPE.is_complex() {
        for (which, value) in [("alpha", alpha), ("beta", beta)] {
            if value.im != 0.0 {
                return Err(ContractError::ComplexScalarForRealOutput {
                    which,
                    value,
                    dtype: T::DTYPE,
                });
            }
        }
    }
    Ok(ContractProblem {
        spec,
        classes: spec.classes(),
        label_dims,
        alpha,
        beta,
        a: a.clone().into(),
        b: b.clone().into(),
        c: c.map(Into::into),
        dtype: T::DTYPE,
        out_shape,
    })
}

/// `alpha * einsum(spec, A, B) + beta * C` on strided views of one element type, returned
/// as a new row-major tensor, with the dispatch log.
///
/// Shapes: `a` has one extent per `spec.a` label, `b` per `spec.b` label (shared labels
/// agree); `c`, if given, has the output shape (`spec.out` extents). Views may have any
/// strides (negative, zero, size-1 modes) and each carries its own conjugation flag, which
/// is applied on read (`conj(A)`, `conj(B)`, `conj(C)`). `beta == 0` never reads `c`; an
/// empty contracted dimension gives `beta * C` (or zeros). `alpha == 0` does not read A or B
/// (BLAS convention). For a real `T`, `alpha` and `beta` must be real. Never panics on user
/// input.
///
/// # Errors
/// [`ContractError::Spec`], [`ContractError::Shape`] (C's shape),
/// [`ContractError::ComplexScalarForRealOutput`], [`ContractError::Tensor`] (output size
/// overflow), [`ContractError::Dispatch`].
pub fn contract_views<T: Element>(
    spec: &EinsumSpec,
    alpha: C64,
    a: &StridedView<'_, T>,
    b: &StridedView<'_, T>,
    beta: C64,
    c: Option<&StridedView<'_, T>>,
    backends: &BackendList,
) -> Result<(LocalTensor, Vec<KernelAttempt>), ContractError> {
    let problem = view_problem(spec, alpha, a, b, beta, c.cloned())?;
    Ok(backends.dispatch(&problem)?)
}

/// `C <- alpha * einsum(spec, A, B) + beta * C`, written in place through the strided,
/// writable view `c` (which must have the output shape). Returns the dispatch log.
///
/// Semantics as [`contract_views`]: arbitrary strides and per-operand conjugation on `a` and
/// `b`; `beta == 0` overwrites C without reading it (NaN in C does not leak); an empty
/// contracted dimension gives `beta * C`. The backend computes into a fresh buffer that is
/// then copied into `c`, so on any error `c` is left unchanged. C must not overlap A or B
/// (checked by address range).
///
/// # Errors
/// As [`contract_views`], plus [`ContractError::Overlap`] if C shares memory with A or B.
pub fn contract_into<T: Element>(
    spec: &EinsumSpec,
    alpha: C64,
    a: &StridedView<'_, T>,
    b: &StridedView<'_, T>,
    beta: C64,
    c: &mut StridedViewMut<'_, T>,
    backends: &BackendList,
) -> Result<Vec<KernelAttempt>, ContractError> {
    let (out, attempts) = {
        let cv = c.as_view();
        if cv.overlaps(a) {
            return Err(ContractError::Overlap('A'));
        }
        if cv.overlaps(b) {
            return Err(ContractError::Overlap('B'));
        }
        let problem = view_problem(spec, alpha, a, b, beta, Some(cv))?;
        backends.dispatch(&problem)?
    };
    let data = out.typed::<T>().ok_or_else(|| {
        ContractError::Dispatch(KernelDispatchError {
            operation: format!("contract {spec} ({})", T::DTYPE),
            attempts: attempts.clone(),
        })
    })?;
    c.write_row_major(data);
    Ok(attempts)
}

/// Borrows `t` if it already has `dtype`, otherwise casts (widening) into a new tensor.
fn promote(t: &LocalTensor, dtype: DType) -> Result<Cow<'_, LocalTensor>, TensorError> {
    if t.dtype() == dtype {
        Ok(Cow::Borrowed(t))
    } else {
        t.cast(dtype).map(Cow::Owned)
    }
}
