//! The contraction front ends: spec resolution, dtype promotion, then one
//! [`ContractProblem`] dispatched through a [`BackendList`].
//!
//! [`contract_operands`] is the general tensor entry (one or two operands, any numpy einsum
//! form); [`contract`], [`contract_with_attempts`] and [`contract_unary`] are its two- and
//! one-operand wrappers. [`contract_views`] and [`contract_into`] take strided views (arbitrary
//! strides and conjugation flags), the latter writing into a strided C. Any operand count on
//! views goes through [`ContractProblem::new`] and [`BackendList::dispatch`] directly.

use std::borrow::Cow;

use crate::backend::{BackendList, KernelAttempt, KernelDispatchError};
use crate::dtype::{DType, C64};
use crate::error::{check_scalars, ContractError};
use crate::options::ContractOptions;
use crate::problem::ContractProblem;
use crate::scalar::Element;
use crate::spec::{ResolveSpec, SpecError};
use crate::tensor::{checked_len, LocalTensor, TensorError};
use crate::view::{AnyView, StridedView, StridedViewMut};

/// `C = alpha * einsum(spec, operands...) + beta * C` over one or two tensors, returned as a
/// new tensor with the dispatch log (every backend offered the problem, in order, the last
/// being the one that ran with [`crate::AttemptOutcome::Accepted`]).
///
/// `spec` is anything [`ResolveSpec`] accepts: a [`crate::EinsumSpec`] or `&str` gets numpy's
/// einsum semantics against the operand shapes (diagonals and traces for repeated labels,
/// ellipsis broadcasting, implicit output, extent-1 broadcasting), a [`crate::ResolvedSpec`]
/// is taken literally. `c`, if given, must have the output shape. Output dtype =
/// `promote(operands, c if given)`; operands are promoted (copied) only when their dtype
/// differs. If `beta == 0`, `c` is never read (NaN in it cannot leak), though its shape and
/// dtype still count. If `c` is `None`, `beta` is ignored. Labels absent from the output are
/// summed over; zero-size dimensions work (an empty contraction gives `beta * C` or zeros).
/// Never panics on user input.
///
/// # Errors
/// [`ContractError::Spec`] (invalid or unresolvable spec, operand count, ranks, extents,
/// broadcasting), [`ContractError::Shape`] (C's shape),
/// [`ContractError::ComplexScalarForRealOutput`] (see [`check_scalars`]),
/// [`ContractError::Tensor`] (output size overflow), [`ContractError::Dispatch`] (every
/// backend declined, or the chosen one failed).
pub fn contract_operands(
    spec: impl ResolveSpec,
    alpha: C64,
    operands: &[&LocalTensor],
    beta: C64,
    c: Option<&LocalTensor>,
    backends: &BackendList,
) -> Result<(LocalTensor, Vec<KernelAttempt>), ContractError> {
    contract_conj(spec, alpha, operands, [false; 2], beta, c, backends)
}

/// `C = alpha * einsum(spec, op(A)[, op(B)]) + beta * C_in` over one or two
/// local tensors with [`ContractOptions`] (the options type the distributed
/// contraction uses too), returned as a new tensor with the dispatch log.
/// `op(X)` conjugates X when its `conj` flag is set (free: a flag of the
/// strided view). `opts.strict_blocking` is ignored.
///
/// # Errors
/// As [`contract_operands`].
pub fn einsum(
    spec: impl ResolveSpec,
    operands: &[&LocalTensor],
    opts: &ContractOptions<'_, LocalTensor>,
    backends: &BackendList,
) -> Result<(LocalTensor, Vec<KernelAttempt>), ContractError> {
    contract_conj(spec, opts.alpha, operands, opts.conj, opts.beta, opts.c, backends)
}

fn contract_conj(
    spec: impl ResolveSpec,
    alpha: C64,
    operands: &[&LocalTensor],
    conj: [bool; 2],
    beta: C64,
    c: Option<&LocalTensor>,
    backends: &BackendList,
) -> Result<(LocalTensor, Vec<KernelAttempt>), ContractError> {
    let shapes: Vec<&[usize]> = operands.iter().map(|t| t.shape()).collect();
    let spec = spec.resolve_spec(&shapes)?;
    let out_shape = spec.output_shape(&shapes)?;
    // output_shape checked operands.len() == spec.num_inputs() >= 1.
    let Some(mut dtype) = operands.iter().map(|t| t.dtype()).reduce(DType::promote) else {
        return Err(SpecError::NoOperands.into());
    };
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
    check_scalars(dtype, alpha, c.map(|_| beta))?;
    let use_c = c.filter(|_| beta != C64::new(0.0, 0.0));
    let promoted = operands
        .iter()
        .map(|t| promote(t, dtype))
        .collect::<Result<Vec<_>, _>>()?;
    let c = use_c.map(|c| promote(c, dtype)).transpose()?;
    let views: Vec<AnyView<'_>> = promoted
        .iter()
        .zip(conj.iter().chain(std::iter::repeat(&false)))
        .map(|(t, &cj)| {
            if cj {
                AnyView::of_tensor(t).conj()
            } else {
                AnyView::of_tensor(t)
            }
        })
        .collect();
    let problem = ContractProblem::new(&*spec, alpha, &views, beta, c.as_deref().map(AnyView::of_tensor))?;
    Ok(backends.dispatch(&problem)?)
}

/// `C = alpha * einsum(spec, A, B) + beta * C`, returned as a new tensor: the two-operand
/// [`contract_operands`].
///
/// # Errors
/// As [`contract_operands`].
pub fn contract(
    spec: impl ResolveSpec,
    alpha: C64,
    a: &LocalTensor,
    b: &LocalTensor,
    beta: C64,
    c: Option<&LocalTensor>,
    backends: &BackendList,
) -> Result<LocalTensor, ContractError> {
    contract_operands(spec, alpha, &[a, b], beta, c, backends).map(|(t, _)| t)
}

/// Like [`contract`], also returning the dispatch log.
///
/// # Errors
/// As [`contract_operands`].
pub fn contract_with_attempts(
    spec: impl ResolveSpec,
    alpha: C64,
    a: &LocalTensor,
    b: &LocalTensor,
    beta: C64,
    c: Option<&LocalTensor>,
    backends: &BackendList,
) -> Result<(LocalTensor, Vec<KernelAttempt>), ContractError> {
    contract_operands(spec, alpha, &[a, b], beta, c, backends)
}

/// `C = alpha * einsum(spec, A) + beta * C` for a one-operand spec (`"ii->"` trace, `"ii->i"`
/// diagonal, `"ij->ji"` permutation, `"ijk->k"` sums, `"...ii->..."`), returned as a new
/// tensor: the one-operand [`contract_operands`]. It runs through the same backend list: the
/// problem becomes `"<spec A>,-><out>"` with a rank-0 second operand equal to 1 (see
/// [`ContractProblem::new`]).
///
/// # Errors
/// As [`contract_operands`]; a two-operand spec is [`crate::SpecError::OperandCount`].
pub fn contract_unary(
    spec: impl ResolveSpec,
    alpha: C64,
    a: &LocalTensor,
    beta: C64,
    c: Option<&LocalTensor>,
    backends: &BackendList,
) -> Result<LocalTensor, ContractError> {
    contract_operands(spec, alpha, &[a], beta, c, backends).map(|(t, _)| t)
}

/// `alpha * einsum(spec, A, B) + beta * C` on strided views of one element type, returned
/// as a new row-major tensor, with the dispatch log.
///
/// Views may have any strides (negative, zero, size-1 modes) and each carries its own
/// conjugation flag, which is applied on read (`conj(A)`, `conj(B)`, `conj(C)`). `c`, if
/// given, has the output shape. `beta == 0` never reads `c`; an empty contracted dimension
/// gives `beta * C` (or zeros). `alpha == 0` does not read A or B (BLAS convention). For a
/// real `T`, `alpha` and `beta` must be real. The spec is as for [`contract_operands`].
/// Never panics on user input.
///
/// # Errors
/// [`ContractError::Spec`], [`ContractError::Shape`] (C's shape),
/// [`ContractError::ComplexScalarForRealOutput`], [`ContractError::Tensor`] (output size
/// overflow), [`ContractError::Dispatch`].
pub fn contract_views<T: Element>(
    spec: impl ResolveSpec,
    alpha: C64,
    a: &StridedView<'_, T>,
    b: &StridedView<'_, T>,
    beta: C64,
    c: Option<&StridedView<'_, T>>,
    backends: &BackendList,
) -> Result<(LocalTensor, Vec<KernelAttempt>), ContractError> {
    let operands = [a.clone().into(), b.clone().into()];
    let problem = ContractProblem::new(spec, alpha, &operands, beta, c.cloned().map(Into::into))?;
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
    spec: impl ResolveSpec,
    alpha: C64,
    a: &StridedView<'_, T>,
    b: &StridedView<'_, T>,
    beta: C64,
    c: &mut StridedViewMut<'_, T>,
    backends: &BackendList,
) -> Result<Vec<KernelAttempt>, ContractError> {
    let (out, attempts, operation) = {
        let cv = c.as_view();
        for (operand, v) in [a, b].into_iter().enumerate() {
            if cv.overlaps(v) {
                return Err(ContractError::Overlap { operand });
            }
        }
        let operands = [a.clone().into(), b.clone().into()];
        let problem = ContractProblem::new(spec, alpha, &operands, beta, Some(cv.into()))?;
        let (out, attempts) = backends.dispatch(&problem)?;
        (out, attempts, problem.describe())
    };
    // `dispatch` checked the result's dtype, so this only fails for a broken invariant.
    let data = out.typed::<T>().ok_or_else(|| {
        ContractError::Dispatch(KernelDispatchError {
            operation,
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
