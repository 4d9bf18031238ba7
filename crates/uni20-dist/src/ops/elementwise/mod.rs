//! Element-wise operations on distributed tensors: [`axpby`] (`alpha *
//! a + beta * b` with labels that may permute), [`lincomb`] (`sum_k c_k
//! t_k` in one operation), [`scale`], [`conj`],
//! [`permute`] and [`reshape`], on dense and symmetric tensors (a symmetric
//! operand is computed block by block over its allowed blocks only), and
//! the layout changes of symmetric tensors, [`fuse_legs`] and
//! [`split_leg`] (their geometry in `symmetric`, their command in
//! `regroup`). Each output block is computed by one rank
//! (the owner of the corresponding block of `a`, or for `axpby` and
//! `lincomb` the rank holding most of its input bytes) from blocks fetched worker to worker;
//! nothing passes through the root. Like [`contract`](crate::contract),
//! every call validates labels, shapes and dtypes at once and returns a
//! pending tensor; the work is planned from the operands' manifests once
//! they are ready (in program order). The label specs are in `spec`, the
//! reshape blocking rule in `reshape`, the command in `command`.

mod command;
pub(crate) mod error;
mod plan;
mod regroup;
mod reshape;
mod spec;
mod symmetric;

use std::sync::Arc;

use uni20_dispatch::{DType, ElementwiseError, C64};
use uni20_worker::Controller;

use crate::error::{DistError, LayoutError};
use crate::ops::kit::{check_block_bytes, defer_items};
use crate::ops::reblock::{submit_reblock, submit_reblock_to};
use crate::symmetry::{Direction, Fusion, SymmetricLayout};
use crate::tensor::{DistTensor, TensorMeta};
use command::{ElementwiseOp, ElementwiseV1, SecondOperand};
use plan::{permuted, plan, Validated};
use regroup::RegroupV1;
use reshape::ReshapeRule;
use spec::LabelSpec;
use symmetric::Geometry;

/// `Err` unless `alpha` (and `beta`) are real for a real output dtype.
fn check_real_scalars(dtype: DType, scalars: &[(&'static str, C64)]) -> Result<(), DistError> {
    if !dtype.is_complex() {
        if let Some(&(which, value)) = scalars.iter().find(|(_, v)| v.im != 0.0) {
            return Err(ElementwiseError::ComplexScalarForRealOutput { which, value, dtype }.into());
        }
    }
    Ok(())
}

/// Queues `v` over `a` and the other operands `more` (`b`, or the further
/// terms of a combination) and returns the pending output; `note` (a
/// preceding reblock of `a`) goes into the summary with its bytes.
fn submit(
    ctl: &Controller<'_>,
    v: Validated,
    a: &DistTensor,
    more: &[&DistTensor],
    rule: Option<ReshapeRule>,
    note: Option<String>,
) -> DistTensor {
    let mut inputs = vec![a];
    inputs.extend_from_slice(more);
    defer_items::<ElementwiseV1>(ctl, v.out.clone(), &inputs, move |workers, manifests, keep| {
        let mut p = plan(&v, workers, &manifests[0], &manifests[1..], rule.as_ref());
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
/// Symmetric operands (both or neither): `b`'s legs must be `a`'s up to the
/// label permutation (same group, direction and sectors per leg; tilings
/// may differ) with the same flux; the output has `a`'s legs permuted into
/// output order, and one item per allowed block of `a` is computed.
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
/// `alpha`/`beta` with a real output; [`DistError::Layout`] (`Mixed`) for
/// a symmetric and a dense operand; [`DistError::SymLayout`]
/// (`LegMismatch` naming both legs and what differs, `FluxMismatch`) for
/// symmetric operands that do not match; [`DistError::Job`] if the job
/// already stopped.
pub fn axpby(
    ctl: &Controller<'_>,
    alpha: impl Into<C64>,
    a: &DistTensor,
    beta: impl Into<C64>,
    b: &DistTensor,
    spec: &str,
) -> Result<DistTensor, DistError> {
    crate::tensor::check_layouts("axpby", &[a, b])?;
    a.check_universe(ctl)?;
    b.check_universe(ctl)?;
    let (alpha, beta) = (alpha.into(), beta.into());
    let s = LabelSpec::parse(spec, 2)?;
    s.check_rank(spec, "a", a.shape().len())?;
    s.check_rank(spec, "b", b.shape().len())?;
    let (perm_a, perm_b) = (s.perm(&s.a), s.perm(&s.b));
    let out_layout = match (a.layout(), b.layout()) {
        (Some(la), Some(lb)) => {
            symmetric::check_same_legs("axpby", la, &perm_a, lb, &perm_b)?;
            // In `a`'s order (every Krylov-vector update of a solver): `a`'s
            // layout itself, shared, not enumerated again.
            if perm_a.iter().enumerate().all(|(k, &p)| k == p) {
                a.meta().symmetric.clone()
            } else {
                Some(Arc::new(symmetric::permuted_layout(la, &perm_a)?))
            }
        }
        _ => None,
    };
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
        out: out_meta(a, out_layout, &perm_a, dtype)?,
        op: ElementwiseOp::Axpby {
            alpha,
            perm_a,
            conj_a: false,
            b: second.clone(),
        },
    };
    tracing::debug!(spec, shape = ?v.out.shape, dtype = dtype.name(), "axpby queued");
    Ok(submit(ctl, v, a, second.map(|_| b).as_slice(), None, None))
}

/// `sum_k c_k t_k` over `terms = [(c_k, t_k)]`, every term in the same
/// mode order (the `k`-term [`axpby`] without labels): one distributed
/// operation, one pass over each block, where a chain of `axpby` calls
/// would plan, submit and store `k - 1` of them (a Krylov solver's
/// three-term recurrence and its Ritz vector).
///
/// The output has the first term's shape and tiling (and, for symmetric
/// terms, its layout); its dtype is the promotion of every term's. Output
/// block `o` is computed by the rank holding most of its input bytes (the
/// owner of the first term's block, or of the overlapping blocks of the
/// others; under a load cap); the other terms may be tiled differently,
/// their overlapping pieces are then fetched worker to worker and cut to
/// the block's box. Arithmetic is that of `uni20_dispatch::lincomb`:
/// double precision, summed in term order, rounded once. A term after the
/// first whose coefficient is zero is neither read nor waited for (its
/// shape, dtype and layout still count); with a zero first coefficient the
/// first term still fixes the tiling and is waited for, but its values do
/// not enter the sum. Symmetric terms (all or none)
/// must have the first's legs and flux.
///
/// Returns at once; see [`contract`](crate::contract) for the deferred
/// semantics (program order, poisoning, keep-alive).
///
/// # Errors
/// Before anything is submitted: [`DistError::Elementwise`] (`NoTerms`)
/// for an empty `terms`, (`ComplexScalarForRealOutput`, `which =
/// "coefficient"`) for a complex coefficient with a real output;
/// [`DistError::ShapeMismatch`] if a term's shape differs from the
/// first's; [`DistError::Layout`] (`Mixed`) for symmetric and dense terms
/// together; [`DistError::SymLayout`] (`LegMismatch`, `FluxMismatch`) for
/// symmetric terms that do not match; [`DistError::WrongUniverse`];
/// [`DistError::Job`] if the job already stopped.
pub fn lincomb(ctl: &Controller<'_>, terms: &[(C64, &DistTensor)]) -> Result<DistTensor, DistError> {
    let Some(&(_, a)) = terms.first() else {
        return Err(ElementwiseError::NoTerms.into());
    };
    let tensors: Vec<&DistTensor> = terms.iter().map(|&(_, t)| t).collect();
    crate::tensor::check_layouts("lincomb", &tensors)?;
    let id: Vec<usize> = (0..a.shape().len()).collect();
    let mut dtype = a.dtype();
    for (k, t) in tensors.iter().enumerate() {
        t.check_universe(ctl)?;
        if t.shape() != a.shape() {
            return Err(DistError::ShapeMismatch {
                what: format!("lincomb: term {k}"),
                expected: a.shape().to_vec(),
                got: t.shape().to_vec(),
            });
        }
        if let (Some(la), Some(lt)) = (a.layout(), t.layout()) {
            symmetric::check_same_legs("lincomb", la, &id, lt, &id)?;
        }
        dtype = dtype.promote(t.dtype());
    }
    uni20_dispatch::check_coefficients(terms.iter().map(|&(c, _)| c), dtype)?;
    check_job(ctl)?;
    let zero = C64::new(0.0, 0.0);
    let kept: Vec<(C64, &DistTensor)> = terms
        .iter()
        .enumerate()
        .filter(|&(k, &(c, _))| k == 0 || c != zero)
        .map(|(_, &t)| t)
        .collect();
    let v = Validated {
        name: "lincomb",
        out: out_meta(a, a.meta().symmetric.clone(), &id, dtype)?,
        op: ElementwiseOp::Combination {
            coefs: kept.iter().map(|&(c, _)| c).collect(),
        },
    };
    tracing::debug!(terms = kept.len(), shape = ?v.out.shape, dtype = dtype.name(), "lincomb queued");
    let more: Vec<&DistTensor> = kept[1..].iter().map(|&(_, t)| t).collect();
    Ok(submit(ctl, v, a, &more, None, None))
}

/// The output description of a block-wise map of `a` with modes permuted
/// by `perm`: the symmetric `layout` when given (its legs are `a`'s
/// permuted), otherwise `a`'s tiling permuted.
fn out_meta(
    a: &DistTensor,
    layout: Option<Arc<SymmetricLayout>>,
    perm: &[usize],
    dtype: DType,
) -> Result<TensorMeta, DistError> {
    match layout {
        Some(l) => TensorMeta::symmetric(l, dtype),
        None => Ok(TensorMeta::dense(
            perm.iter().map(|&p| a.shape()[p]).collect(),
            dtype,
            permuted(a.blocking(), perm),
        )),
    }
}

/// One-operand element-wise map: `alpha * op(t)` with permutation `perm`
/// (`layout`: the output's symmetric layout, for a symmetric `t`).
fn unary(
    ctl: &Controller<'_>,
    name: &'static str,
    t: &DistTensor,
    alpha: C64,
    perm: Vec<usize>,
    conj: bool,
    layout: Option<Arc<SymmetricLayout>>,
) -> Result<DistTensor, DistError> {
    check_real_scalars(t.dtype(), &[("alpha", alpha)])?;
    check_job(ctl)?;
    let v = Validated {
        name,
        out: out_meta(t, layout, &perm, t.dtype())?,
        op: ElementwiseOp::Axpby {
            alpha,
            perm_a: perm,
            conj_a: conj,
            b: None,
        },
    };
    tracing::debug!(op = name, shape = ?v.out.shape, "element-wise operation queued");
    Ok(submit(ctl, v, t, &[], None, None))
}

/// `alpha * t`, same shape, tiling, owners and dtype as `t` (and for a
/// symmetric `t` the same layout); each block is scaled by its owner
/// (nothing moves). Returns at once.
///
/// # Errors
/// [`DistError::Elementwise`] (`ComplexScalarForRealOutput`) for a complex
/// `alpha` and a real `t`; [`DistError::Job`] if the job already stopped.
pub fn scale(ctl: &Controller<'_>, alpha: impl Into<C64>, t: &DistTensor) -> Result<DistTensor, DistError> {
    t.check_universe(ctl)?;
    let layout = t.meta().symmetric.clone();
    unary(
        ctl,
        "scale",
        t,
        alpha.into(),
        (0..t.shape().len()).collect(),
        false,
        layout,
    )
}

/// The complex conjugate of `t` (a copy for real dtypes), computed block
/// by block by the owners (nothing moves). Returns at once.
///
/// For a symmetric `t` the conjugate lives in the dual space: every leg is
/// dualized ([`Leg::dual`](crate::symmetry::Leg::dual): same sectors and
/// tiles, opposite direction) and the flux is negated, so the allowed
/// blocks (and their order) are the same and the dense embedding is the
/// conjugate of `t`'s (as TeNPy's `conj` and ITensor's `dag`).
///
/// # Errors
/// [`DistError::Symmetry`] (`Overflow`) negating a U(1) flux of
/// `i64::MIN`; [`DistError::Job`] if the job already stopped.
pub fn conj(ctl: &Controller<'_>, t: &DistTensor) -> Result<DistTensor, DistError> {
    t.check_universe(ctl)?;
    let layout = t.layout().map(symmetric::conj_layout).transpose()?.map(Arc::new);
    unary(
        ctl,
        "conj",
        t,
        C64::new(1.0, 0.0),
        (0..t.shape().len()).collect(),
        true,
        layout,
    )
}

/// `numpy.transpose` by labels: `spec` is `"ijk->kij"` (the tensor's labels,
/// then the output's, each a permutation of the other). The output has the
/// tiling of `t` with its modes permuted (for a symmetric `t`, its legs
/// permuted, same flux); each block is transposed by its owner (nothing
/// moves). Values are copied exactly. Returns at once.
///
/// # Errors
/// [`DistError::Labels`] for a malformed spec, repeated labels, labels that
/// are not a permutation, or a label count other than the rank;
/// [`DistError::Job`] if the job already stopped.
pub fn permute(ctl: &Controller<'_>, t: &DistTensor, spec: &str) -> Result<DistTensor, DistError> {
    t.check_universe(ctl)?;
    let s = LabelSpec::parse(spec, 1)?;
    s.check_rank(spec, "a", t.shape().len())?;
    let perm = s.perm(&s.a);
    let layout = t
        .layout()
        .map(|l| symmetric::permuted_layout(l, &perm))
        .transpose()?
        .map(Arc::new);
    unary(ctl, "permute", t, C64::new(1.0, 0.0), perm, false, layout)
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
/// [`DistError::Job`] if the job already stopped;
/// [`DistError::Layout`] (`DenseOnly`) for a symmetric `t`: a fused leg of a
/// symmetric tensor groups its states by charge, which is a permutation of
/// the row-major reshape, so use [`fuse_legs`] / [`split_leg`].
pub fn reshape(ctl: &Controller<'_>, t: &DistTensor, shape: &[usize]) -> Result<DistTensor, DistError> {
    if t.is_symmetric() {
        return Err(LayoutError::DenseOnly {
            operation: "reshape",
            operand: 0,
            hint: "a symmetric tensor's legs are fused with fuse_legs and split with split_leg: a fused leg \
                   groups its states by charge, a permutation of the row-major reshape",
        }
        .into());
    }
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
        Ok(submit(ctl, v, t, &[], Some(rule), None))
    } else {
        let note = format!("reblocked the input to {:?} first", rule.input.extents());
        let r = submit_reblock(ctl, t, rule.input.clone(), Some("for a reshape".into()));
        Ok(submit(ctl, v, &r, &[], Some(rule), Some(note)))
    }
}

/// Queues a fuse or split of `t` with geometry `geo` into `out`; `note` (a
/// preceding reblock of `t`) goes into the summary with its bytes.
fn submit_regroup(
    ctl: &Controller<'_>,
    name: &'static str,
    t: &DistTensor,
    out: TensorMeta,
    geo: Geometry,
    note: Option<String>,
) -> DistTensor {
    let meta = out.clone();
    defer_items::<RegroupV1>(ctl, out, &[t], move |workers, manifests, keep| {
        let mut p = symmetric::plan_regroup(name, workers, &manifests[0], &meta, &geo);
        if let Some(note) = note {
            let moved = keep[0].plan_summary().map_or(0, |s| s.bytes_moved);
            p.summary.notes.push(format!("{note} ({moved} bytes moved)"));
        }
        p
    })
}

/// `Err` unless `t` is symmetric ([`LayoutError::SymmetricOnly`]).
fn symmetric_layout<'t>(operation: &'static str, t: &'t DistTensor) -> Result<&'t SymmetricLayout, DistError> {
    t.layout()
        .ok_or_else(|| LayoutError::SymmetricOnly { operation, operand: 0 }.into())
}

/// Fuses the `count` adjacent legs `first_leg .. first_leg + count` of the
/// symmetric tensor `t` into one leg of direction `direction` (TeNPy's
/// `combine_legs`, ITensor's combiner). Returns the fused tensor and the
/// [`Fusion`] that [`split_leg`] takes to undo it (`Fusion::new` of the same
/// legs and direction rebuilds it, for example after a restart).
///
/// The fused leg's sectors are the sorted distinct charges `q_F` of the
/// parts' sector combinations (`s_F q_F = sum_j s_j q_j`, so the flux is
/// unchanged), one tile per sector ([`reblock`](crate::reblock) the result
/// for smaller tiles). Its states are grouped by charge: inside a sector
/// the combinations follow in lexicographic order of their sector indices
/// and the states of one combination in row-major order. The dense
/// embedding of the result is therefore the dense embedding of `t` with
/// the fused modes reshaped row-major and the fused index then permuted by
/// [`Fusion::fuse_index`]: element `(.., i_1 .. i_k, ..)` of `t` is element
/// `(.., fusion.fuse_index(&[i_1 .. i_k]), ..)` of the result. This is not
/// [`reshape`] (which refuses symmetric tensors).
///
/// Every output block is assembled from whole input blocks by the rank
/// holding most of them (under a load cap; the others are fetched worker to
/// worker); values are copied exactly, nothing is computed. Returns at
/// once.
///
/// # Errors
/// [`DistError::Layout`] (`SymmetricOnly`) for a dense `t` (use
/// [`reshape`]); [`DistError::SymLayout`] (`LegRange`) when `count` is 0 or
/// the legs run past the last; [`DistError::Symmetry`] when a fused charge
/// or dimension overflows; [`DistError::Blocking`] or
/// [`DistError::PlanTooLarge`] when the fused tiling is too large;
/// [`DistError::WrongUniverse`]; [`DistError::Job`] if the job already
/// stopped.
pub fn fuse_legs(
    ctl: &Controller<'_>,
    t: &DistTensor,
    first_leg: usize,
    count: usize,
    direction: Direction,
) -> Result<(DistTensor, Fusion), DistError> {
    t.check_universe(ctl)?;
    let l = symmetric_layout("fuse_legs", t)?;
    let (lout, fusion) = symmetric::fused_layout(l, first_leg, count, direction)?;
    let lout = Arc::new(lout);
    let geo = symmetric::fuse_geometry(l, &lout, first_leg, &fusion)?;
    let out = TensorMeta::symmetric(lout, t.dtype())?;
    check_block_bytes(&out.blocking, t.dtype(), "the fused tensor's tiling")?;
    check_job(ctl)?;
    tracing::debug!(first_leg, count, "fuse_legs queued");
    Ok((submit_regroup(ctl, "fuse_legs", t, out, geo, None), fusion))
}

/// Splits leg `leg` of the symmetric tensor `t` into the legs that
/// `fusion` fused (TeNPy's `split_legs`): the exact inverse of
/// [`fuse_legs`], element `(.., f, ..)` of `t` becoming element `(..,
/// fusion.split_index(f), ..)` of the result, whose new legs are
/// `fusion.parts()` with their tilings.
///
/// The leg must be the fusion's fused leg (same group and sectors, any
/// tiling) or its dual: a leg of a conjugated fused tensor splits into the
/// duals of the parts. When the leg is not one tile per sector, `t` is
/// first [`reblock`](crate::reblock)ed so that it is (noted in the summary
/// with the bytes moved); then each output block is cut from one block of
/// `t` by its owner (nothing moves). Values are copied exactly. Returns at
/// once.
///
/// # Errors
/// [`DistError::Layout`] (`SymmetricOnly`) for a dense `t`;
/// [`DistError::SymLayout`]: `LegRange` for a leg past the last,
/// `FusionMismatch` (naming both legs) when the leg is not the fused leg;
/// [`DistError::Blocking`] or [`DistError::PlanTooLarge`] when a tiling is
/// too large; [`DistError::WrongUniverse`]; [`DistError::Job`] if the job
/// already stopped.
pub fn split_leg(ctl: &Controller<'_>, t: &DistTensor, leg: usize, fusion: &Fusion) -> Result<DistTensor, DistError> {
    t.check_universe(ctl)?;
    let l = symmetric_layout("split_leg", t)?;
    let parts = symmetric::split_parts(l, leg, fusion)?;
    let whole = symmetric::whole_sectors(l, leg)?.map(Arc::new);
    let lin: &SymmetricLayout = whole.as_deref().unwrap_or(l);
    let lout = Arc::new(symmetric::split_layout(lin, leg, &parts)?);
    let geo = symmetric::split_geometry(lin, &lout, leg, fusion)?;
    let out = TensorMeta::symmetric(lout, t.dtype())?;
    check_block_bytes(&out.blocking, t.dtype(), "the split tensor's tiling")?;
    let whole_meta = whole.map(|w| TensorMeta::symmetric(w, t.dtype())).transpose()?;
    if let Some(m) = &whole_meta {
        check_block_bytes(&m.blocking, t.dtype(), "the split leg's sectors as single blocks")?;
    }
    check_job(ctl)?;
    tracing::debug!(leg, parts = parts.len(), "split_leg queued");
    Ok(match whole_meta {
        None => submit_regroup(ctl, "split_leg", t, out, geo, None),
        Some(m) => {
            let r = submit_reblock_to(ctl, t, m, Some("for a split".into()));
            let note = format!("reblocked leg {leg} to one tile per sector first");
            submit_regroup(ctl, "split_leg", &r, out, geo, Some(note))
        }
    })
}
