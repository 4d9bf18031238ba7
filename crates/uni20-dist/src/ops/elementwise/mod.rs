//! Element-wise operations on distributed tensors: [`axpby`] (`alpha *
//! a + beta * b` with labels that may permute), [`scale`], [`conj`],
//! [`permute`] and [`reshape`]. Each output block is computed by one rank
//! (the owner of the corresponding block of `a`, or for `axpby` the rank
//! holding most of its input bytes) from blocks fetched worker to worker;
//! nothing passes through the root. Like [`contract`](crate::contract),
//! every call validates labels, shapes and dtypes at once and returns a
//! pending tensor; the work is planned from the operands' manifests once
//! they are ready (in program order). The label specs are in `spec`, the
//! reshape blocking rule in `reshape`, the command in `command`.

mod command;
pub(crate) mod error;
mod plan;
mod reshape;
mod spec;

use uni20_dispatch::{DType, ElementwiseError, C64};
use uni20_worker::Controller;

use crate::error::DistError;
use crate::ops::kit::{check_block_bytes, defer_items};
use crate::ops::reblock::submit_reblock;
use crate::tensor::{DistTensor, TensorMeta};
use command::{ElementwiseOp, ElementwiseV1, SecondOperand};
use plan::{permuted, plan, Validated};
use reshape::ReshapeRule;
use spec::LabelSpec;

/// `Err` unless `alpha` (and `beta`) are real for a real output dtype.
fn check_real_scalars(dtype: DType, scalars: &[(&'static str, C64)]) -> Result<(), DistError> {
    if !dtype.is_complex() {
        if let Some(&(which, value)) = scalars.iter().find(|(_, v)| v.im != 0.0) {
            return Err(ElementwiseError::ComplexScalarForRealOutput { which, value, dtype }.into());
        }
    }
    Ok(())
}

/// Queues `v` over `a` (and `b`) and returns the pending output; `note` (a
/// preceding reblock of `a`) goes into the summary with its bytes.
fn submit(
    ctl: &Controller<'_>,
    v: Validated,
    a: &DistTensor,
    b: Option<&DistTensor>,
    rule: Option<ReshapeRule>,
    note: Option<String>,
) -> DistTensor {
    let mut inputs = vec![a];
    inputs.extend(b);
    defer_items::<ElementwiseV1>(ctl, v.out.clone(), &inputs, move |workers, manifests, keep| {
        let mut p = plan(&v, workers, &manifests[0], manifests.get(1), rule.as_ref());
        if let Some(note) = note {
            let moved = keep[0].plan_summary().map_or(0, |s| s.bytes_moved);
            p.summary.notes.push(format!("{note} ({moved} bytes moved)"));
        }
        p
    })
}

fn check_job(ctl: &Controller<'_>) -> Result<(), DistError> {
    if ctl.has_failed() {
        ctl.progress()?;
    }
    Ok(())
}

/// `alpha * a + beta * b` with labels: `spec` names `a`'s labels, `b`'s
/// and the output's, `"ijk,kji->kij"`, or `a`'s and the output's,
/// `"ijk->kij"`, with `b` already in output order (the same as
/// `"ijk,kij->kij"`). Each operand names every output label once (a
/// permutation: no repeated, summed or broadcast labels); the extent of a
/// label must be the same in `a` and `b`.
///
/// The output has `a`'s tiling with its modes permuted into output order;
/// its dtype is the promotion of `a`'s and `b`'s ([`DType::promote`]: `f64`
/// and `c64` give `c64`, as numpy). Output block `o` is computed by the rank
/// holding most of its input bytes (the owner of `a`'s block, or of the
/// overlapping blocks of `b`; under a load cap; ties to the less loaded,
/// then lower rank): `b` may be tiled differently, its overlapping pieces
/// are then fetched and cut to the block's box. Blocks move worker to
/// worker only; arithmetic is that of `uni20_dispatch::axpby` (double
/// precision, rounded once), so results with exactly representable inputs
/// are exact. If `beta == 0`, `b` is neither read nor waited for (its shape
/// and dtype still count).
///
/// Returns at once; see [`contract`](crate::contract) for the deferred
/// semantics (program order, poisoning, keep-alive).
///
/// # Errors
/// Before anything is submitted: [`DistError::Labels`] for a malformed
/// spec, repeated labels, labels that are not a permutation, or a label
/// count that differs from an operand's rank; [`DistError::ShapeMismatch`]
/// if a label's extent differs between `a` and `b`;
/// [`DistError::Elementwise`] (`ComplexScalarForRealOutput`) for a complex
/// `alpha`/`beta` with a real output; [`DistError::Job`] if the job
/// already stopped.
pub fn axpby(
    ctl: &Controller<'_>,
    alpha: impl Into<C64>,
    a: &DistTensor,
    beta: impl Into<C64>,
    b: &DistTensor,
    spec: &str,
) -> Result<DistTensor, DistError> {
    crate::tensor::dense_only("axpby", &[a, b])?;
    a.check_universe(ctl)?;
    b.check_universe(ctl)?;
    let (alpha, beta) = (alpha.into(), beta.into());
    let s = LabelSpec::parse(spec, 2)?;
    s.check_rank(spec, "a", a.shape().len())?;
    s.check_rank(spec, "b", b.shape().len())?;
    let (perm_a, perm_b) = (s.perm(&s.a), s.perm(&s.b));
    let out_shape: Vec<usize> = perm_a.iter().map(|&p| a.shape()[p]).collect();
    let b_shape: Vec<usize> = perm_b.iter().map(|&p| b.shape()[p]).collect();
    if out_shape != b_shape {
        return Err(DistError::ShapeMismatch {
            what: format!("axpby {spec:?}: operand b in output order"),
            expected: out_shape,
            got: b_shape,
        });
    }
    let dtype = a.dtype().promote(b.dtype());
    let zero = C64::new(0.0, 0.0);
    check_real_scalars(dtype, &[("alpha", alpha), ("beta", beta)])?;
    check_job(ctl)?;
    let second = (beta != zero).then_some(SecondOperand {
        beta,
        perm: perm_b,
        conj: false,
    });
    let v = Validated {
        name: "axpby",
        out: TensorMeta {
            symmetric: None,
            shape: out_shape,
            dtype,
            blocking: permuted(a.blocking(), &perm_a),
        },
        op: ElementwiseOp::Axpby {
            alpha,
            perm_a,
            conj_a: false,
            b: second.clone(),
        },
    };
    tracing::debug!(spec, shape = ?v.out.shape, dtype = dtype.name(), "axpby queued");
    Ok(submit(ctl, v, a, second.map(|_| b), None, None))
}

/// One-operand element-wise map: `alpha * op(t)` with permutation `perm`.
fn unary(
    ctl: &Controller<'_>,
    name: &'static str,
    t: &DistTensor,
    alpha: C64,
    perm: Vec<usize>,
    conj: bool,
) -> Result<DistTensor, DistError> {
    check_real_scalars(t.dtype(), &[("alpha", alpha)])?;
    check_job(ctl)?;
    let v = Validated {
        name,
        out: TensorMeta {
            symmetric: None,
            shape: perm.iter().map(|&p| t.shape()[p]).collect(),
            dtype: t.dtype(),
            blocking: permuted(t.blocking(), &perm),
        },
        op: ElementwiseOp::Axpby {
            alpha,
            perm_a: perm,
            conj_a: conj,
            b: None,
        },
    };
    tracing::debug!(op = name, shape = ?v.out.shape, "element-wise operation queued");
    Ok(submit(ctl, v, t, None, None, None))
}

/// `alpha * t`, same shape, tiling, owners and dtype as `t`; each block is
/// scaled by its owner (nothing moves). Returns at once.
///
/// # Errors
/// [`DistError::Elementwise`] (`ComplexScalarForRealOutput`) for a complex
/// `alpha` and a real `t`; [`DistError::Job`] if the job already stopped.
pub fn scale(ctl: &Controller<'_>, alpha: impl Into<C64>, t: &DistTensor) -> Result<DistTensor, DistError> {
    crate::tensor::dense_only("scale", &[t])?;
    t.check_universe(ctl)?;
    unary(ctl, "scale", t, alpha.into(), (0..t.shape().len()).collect(), false)
}

/// The complex conjugate of `t` (a copy for real dtypes), computed block
/// by block by the owners (nothing moves). Returns at once.
///
/// # Errors
/// [`DistError::Job`] if the job already stopped.
pub fn conj(ctl: &Controller<'_>, t: &DistTensor) -> Result<DistTensor, DistError> {
    crate::tensor::dense_only("conj", &[t])?;
    t.check_universe(ctl)?;
    unary(ctl, "conj", t, C64::new(1.0, 0.0), (0..t.shape().len()).collect(), true)
}

/// `numpy.transpose` by labels: `spec` is `"ijk->kij"` (the tensor's labels,
/// then the output's, each a permutation of the other). The output has the
/// tiling of `t` with its modes permuted; each block is transposed by its
/// owner (nothing moves). Values are copied exactly. Returns at once.
///
/// # Errors
/// [`DistError::Labels`] for a malformed spec, repeated labels, labels that
/// are not a permutation, or a label count other than the rank;
/// [`DistError::Job`] if the job already stopped.
pub fn permute(ctl: &Controller<'_>, t: &DistTensor, spec: &str) -> Result<DistTensor, DistError> {
    crate::tensor::dense_only("permute", &[t])?;
    t.check_universe(ctl)?;
    let s = LabelSpec::parse(spec, 1)?;
    s.check_rank(spec, "a", t.shape().len())?;
    unary(ctl, "permute", t, C64::new(1.0, 0.0), s.perm(&s.a), false)
}

/// `numpy.reshape` (row-major) restricted to fusing adjacent modes into one
/// and splitting one mode into adjacent modes, e.g. `[2, 3, 4] -> [6, 4]` or
/// `[6, 4] -> [2, 3, 4]` (modes of extent 1 may be added or dropped
/// anywhere). Values are copied exactly.
///
/// Blocking rule (blocks must map to blocks): a fuse needs the inner fused
/// modes to be one block each, and the fused mode's blocks are the outer
/// mode's blocks times the inner extents; a split of `m` into `(n_0, ..,
/// n_k)` needs every block extent of `m` to be a multiple of `P = n_1 * ..
/// * n_k`, and `n_0`'s blocks are those extents divided by `P` (the other
/// new modes one block each). When `t` is not tiled so, it is first
/// [`reblock`](crate::reblock)ed (fused inner modes made whole; a split mode
/// cut into blocks of `P * max(1, e / P)`, `e` its largest block extent),
/// noted in the summary with the bytes it moved. Each output block is then
/// the reshape of one block of `t`, done by its owner.
///
/// Returns at once.
///
/// # Errors
/// [`DistError::Elementwise`] (`ElementCount`) if the element count
/// differs; [`DistError::ReshapeNotAdjacent`] for any other reshape (e.g.
/// `[2, 3] -> [3, 2]`: do it in two steps, or permute); [`DistError::Blocking`]
/// or [`DistError::PlanTooLarge`] if the needed tilings are too large;
/// [`DistError::Job`] if the job already stopped.
pub fn reshape(ctl: &Controller<'_>, t: &DistTensor, shape: &[usize]) -> Result<DistTensor, DistError> {
    crate::tensor::dense_only("reshape", &[t])?;
    t.check_universe(ctl)?;
    let rule = ReshapeRule::new(t.blocking(), shape)?;
    check_block_bytes(&rule.input, t.dtype(), "the reshape's input tiling")?;
    check_job(ctl)?;
    let v = Validated {
        name: "reshape",
        out: TensorMeta {
            symmetric: None,
            shape: shape.to_vec(),
            dtype: t.dtype(),
            blocking: rule.output.clone(),
        },
        op: ElementwiseOp::Reshape,
    };
    tracing::debug!(from = ?t.shape(), to = ?shape, "reshape queued");
    if &rule.input == t.blocking() {
        Ok(submit(ctl, v, t, None, Some(rule), None))
    } else {
        let note = format!("reblocked the input to {:?} first", rule.input.extents());
        let r = submit_reblock(ctl, t, rule.input.clone(), Some("for a reshape".into()));
        Ok(submit(ctl, v, &r, None, Some(rule), Some(note)))
    }
}
