//! Reductions of distributed tensors to one number: [`norm`] (Frobenius),
//! [`inner`] (`sum conj(a) * b`, as `numpy.vdot`) and [`max_abs`], all
//! through [`reduce`]. Synchronous: each waits for its operands, plans one
//! item per block of the first operand on the rank holding most of its
//! bytes, and submits `uni20.reduce.v1`. Partial results are combined on
//! the workers (compensated sums; see `command`) and only the final scalar
//! reaches the root; no block payload does. The planner is in `plan`.

mod command;
mod plan;

use uni20_dispatch::C64;
use uni20_worker::Controller;

use crate::error::DistError;
use crate::summary::PlanSummary;
use crate::tensor::DistTensor;
use command::{ReduceOp, ReduceV1};
use plan::plan;

/// A reduction and its operands.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Reduction<'a> {
    /// The Frobenius norm `sqrt(sum |t_i|^2)` (real).
    Norm(&'a DistTensor),
    /// `sum conj(a_i) * b_i` over all elements (`numpy.vdot(a, b)`).
    Inner(&'a DistTensor, &'a DistTensor),
    /// `max |t_i|` (real; the modulus for complex dtypes).
    MaxAbs(&'a DistTensor),
}

/// The value of a reduction and the summary of its plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduced {
    /// The value (real reductions: the real part, imaginary part 0).
    pub value: C64,
    /// Items, transfers, bytes moved (0 through the root).
    pub summary: PlanSummary,
}

/// Runs a reduction and returns its value with the summary of its plan.
/// Waits for the operands' producing operations, then for the result.
///
/// Each block of the first operand is reduced by the rank holding most of
/// its bytes (its owner, or for an inner product the owner of the
/// overlapping blocks of `b` when those are more; under a load cap), with
/// the local kernels (`uni20_dispatch::{norm_sqr, inner, max_abs}`: blocks
/// of 1024 elements in 8 interleaved sums, Neumaier-compensated across
/// blocks). A rank combines its items' values (Neumaier-compensated sum, or
/// maximum) into one scalar and sends it to the leader (the lowest
/// participating rank), which combines them in rank order; only the
/// leader's scalar reaches the root. The result matches `numpy.vdot` /
/// `numpy.linalg.norm` to about `1e-14` relative; the last bits may depend
/// on the tiling and rank count (the summation order does).
///
/// `b` of an inner product may be tiled differently from `a`: the
/// overlapping pieces of `b` are then fetched and cut to `a`'s blocks.
/// Mixed dtypes are widened (`f32` to `f64`; a real and a complex operand
/// are multiplied in complex).
///
/// # Errors
/// [`DistError::ShapeMismatch`] if the operands of an inner product have
/// different shapes (checked before anything is submitted or waited for);
/// an operand's failure ([`DistError::Async`]/[`DistError::Job`]); a
/// failure of the reduction on a worker ([`DistError::Job`], fail-stop);
/// [`DistError::Protocol`] if not exactly one rank replies with a value.
pub fn reduce(ctl: &Controller<'_>, r: Reduction<'_>) -> Result<Reduced, DistError> {
    let (op, a, b) = match r {
        Reduction::Norm(t) => (ReduceOp::NormSqr, t, None),
        Reduction::Inner(a, b) => {
            crate::tensor::check_layouts("inner", &[a, b])?;
            if a.shape() != b.shape() {
                return Err(DistError::ShapeMismatch {
                    what: "inner: operand b".into(),
                    expected: a.shape().to_vec(),
                    got: b.shape().to_vec(),
                });
            }
            (ReduceOp::Inner, a, Some(b))
        }
        Reduction::MaxAbs(t) => (ReduceOp::MaxAbs, t, None),
    };
    let ma = a.manifest(ctl)?;
    let mb = b.map(|b| b.manifest(ctl)).transpose()?;
    let (desc, summary) = plan(op, &ctl.compute_ranks(), &ma, mb.as_ref());
    tracing::debug!("{summary}");
    let replies = ctl.submit::<ReduceV1>(&desc, &desc.participants)?;
    let values: Vec<C64> = replies.into_iter().filter_map(|(_, v)| v).collect();
    let [value] = values.as_slice() else {
        return Err(DistError::Protocol(format!(
            "{} ranks replied with a value to a reduction (expected 1)",
            values.len()
        )));
    };
    let value = match op {
        ReduceOp::NormSqr => C64::new(value.re.sqrt(), 0.0),
        _ => *value,
    };
    Ok(Reduced { value, summary })
}

/// The Frobenius norm `sqrt(sum |t_i|^2)` of `t` (as `numpy.linalg.norm` of
/// the flattened tensor); see [`reduce`]. Waits for the result.
///
/// # Errors
/// As [`reduce`].
pub fn norm(ctl: &Controller<'_>, t: &DistTensor) -> Result<f64, DistError> {
    Ok(reduce(ctl, Reduction::Norm(t))?.value.re)
}

/// `sum conj(a_i) * b_i` over every element (`numpy.vdot(a, b)`); `a` and `b`
/// must have the same shape, their tilings and dtypes may differ; see
/// [`reduce`]. Waits for the result.
///
/// # Errors
/// As [`reduce`]; [`DistError::ShapeMismatch`] for different shapes.
pub fn inner(ctl: &Controller<'_>, a: &DistTensor, b: &DistTensor) -> Result<C64, DistError> {
    Ok(reduce(ctl, Reduction::Inner(a, b))?.value)
}

/// `max |t_i|` over every element (the modulus for complex dtypes; `0` for
/// an empty tensor; NaN if any element is NaN); see [`reduce`]. Waits for
/// the result.
///
/// # Errors
/// As [`reduce`].
pub fn max_abs(ctl: &Controller<'_>, t: &DistTensor) -> Result<f64, DistError> {
    Ok(reduce(ctl, Reduction::MaxAbs(t))?.value.re)
}
