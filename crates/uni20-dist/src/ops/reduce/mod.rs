//! Reductions of distributed tensors to one number: [`norm`] (Frobenius),
//! [`inner`] (`sum conj(a) * b`, as `numpy.vdot`) and [`max_abs`], all
//! through [`reduce`]. Synchronous: each waits for its operands, plans one
//! item per block of the first operand on the rank holding most of its
//! bytes, and submits `uni20.reduce.v1`; [`reduce_many`] runs several in
//! one command (`uni20.reduce_many.v1`, in `fused`). Partial results are combined on
//! the workers (compensated sums; see `command`) and only the final scalar
//! reaches the root; no block payload does. The planner is in `plan`.

mod command;
mod fused;
mod plan;

use uni20_dispatch::C64;
use uni20_worker::Controller;

use crate::error::DistError;
use crate::ops::kit::participants_of;
use crate::ops::kit::replicas::{record_replicas, skip_held};
use crate::summary::PlanSummary;
use crate::tensor::DistTensor;
use command::{ReduceOp, ReduceV1};
use fused::{ReduceManyDescV1, ReduceManyV1};
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
    let (op, a, b) = operands(r)?;
    let ma = a.manifest(ctl)?;
    let mb = b.map(|b| b.manifest(ctl)).transpose()?;
    let (mut desc, mut summary) = plan(op, &ctl.compute_ranks(), &ma, mb.as_ref());
    // Blocks a rank already holds as replicas do not move; what moves
    // stays there for the next command (a Lanczos step's `axpby` reads
    // the vectors its `inner` just compared).
    let held = skip_held(ctl, &mut desc.transfers).map(|(skipped, received)| {
        if !skipped.is_empty() {
            desc.participants = participants_of(desc.items.iter().map(|i| i.rank), &desc.transfers);
            summary.use_replicas(&skipped, &desc.participants);
        }
        desc.hold_replicas = true;
        received
    });
    ctl.note_transfers(summary.bytes_moved, summary.bytes_from_replicas);
    tracing::debug!("{summary}");
    let participants = desc.participants.clone();
    let replies = ctl.submit_owned::<ReduceV1>(desc, &participants)?;
    record_replicas(ctl, held);
    let values: Vec<C64> = replies.into_iter().filter_map(|(_, v)| v).collect();
    let [value] = values.as_slice() else {
        return Err(DistError::Protocol(format!(
            "{} ranks replied with a value to a reduction (expected 1)",
            values.len()
        )));
    };
    Ok(Reduced {
        value: finish_value(op, *value),
        summary,
    })
}

/// Several reductions in one command: one round trip between the root and
/// the ranks instead of one per reduction (a Lanczos step's `inner` and
/// `norm`, or a list of inner products). Returns the values in the order
/// of `rs`, each equal, bit for bit, to what [`reduce`] gives for it alone
/// (see [`reduce`] for how each is computed: the items of each reduction
/// are placed as when it runs alone; a block that two reductions need on
/// one rank moves once). Waits for every operand's producing operation,
/// then for the result. An empty list submits nothing.
///
/// # Errors
/// As [`reduce`], for the first reduction of `rs` whose operands are
/// invalid (checked before anything is waited for or submitted);
/// [`DistError::Protocol`] if not exactly one rank replies with the values.
pub fn reduce_many(ctl: &Controller<'_>, rs: &[Reduction<'_>]) -> Result<Vec<C64>, DistError> {
    let checked = rs.iter().map(|&r| operands(r)).collect::<Result<Vec<_>, _>>()?;
    if checked.is_empty() {
        return Ok(Vec::new());
    }
    let workers = ctl.compute_ranks();
    let mut plans = Vec::with_capacity(checked.len());
    let mut ops = Vec::with_capacity(checked.len());
    for &(op, a, b) in &checked {
        let ma = a.manifest(ctl)?;
        let mb = b.map(|b| b.manifest(ctl)).transpose()?;
        let (desc, summary) = plan(op, &workers, &ma, mb.as_ref());
        tracing::debug!("fused {summary}");
        plans.push(desc);
        ops.push(op);
    }
    let mut desc = ReduceManyDescV1::fuse(plans);
    let moved = |ts: &[crate::transfer::record::Transfer]| ts.iter().map(|t| t.bytes).sum::<u64>();
    let held = skip_held(ctl, &mut desc.transfers).map(|(skipped, received)| {
        if !skipped.is_empty() {
            desc.recompute_participants();
        }
        desc.hold_replicas = true;
        (moved(&skipped), received)
    });
    let from_replicas = held.as_ref().map_or(0, |h| h.0);
    ctl.note_transfers(moved(&desc.transfers), from_replicas);
    let participants = desc.participants.clone();
    let replies = ctl.submit_owned::<ReduceManyV1>(desc, &participants)?;
    record_replicas(ctl, held.map(|h| h.1));
    let mut values: Vec<Vec<C64>> = replies.into_iter().filter_map(|(_, v)| v).collect();
    let (Some(values), true) = (values.pop(), values.is_empty()) else {
        return Err(DistError::Protocol(format!(
            "{} ranks replied with values to a fused reduction (expected 1)",
            values.len()
        )));
    };
    if values.len() != ops.len() {
        return Err(DistError::Protocol(format!(
            "a fused reduction of {} returned {} values",
            ops.len(),
            values.len()
        )));
    }
    Ok(ops.iter().zip(values).map(|(&op, v)| finish_value(op, v)).collect())
}

/// The value a reduction returns from its combined value (the square root
/// for a norm).
fn finish_value(op: ReduceOp, v: C64) -> C64 {
    match op {
        ReduceOp::NormSqr => C64::new(v.re.sqrt(), 0.0),
        _ => v,
    }
}

/// The reduction, its first operand and its second (inner products),
/// checked: an inner product's operands have one layout and one shape.
fn operands(r: Reduction<'_>) -> Result<(ReduceOp, &DistTensor, Option<&DistTensor>), DistError> {
    Ok(match r {
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
    })
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
