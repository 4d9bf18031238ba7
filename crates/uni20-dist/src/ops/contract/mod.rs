//! Distributed einsum contraction `C = alpha * einsum(spec, A, B) + beta *
//! C_in`: the public calls ([`contract`], [`contract_with`], [`einsum`]) and their
//! options, one type with the local contraction's. The pure planner lives
//! in `plan` (with the alignment of differently tiled operands in
//! `align`), the command and its per-item compute in `command`.

mod align;
mod command;
mod plan;
mod symmetric;

pub(crate) use command::{ContractDescriptorV1, ContractV1};
pub use plan::{plan_contract, ContractPlan, MAX_BLOCK_PRODUCTS};

use uni20_dispatch::ResolveSpec;
use uni20_worker::Controller;

use crate::error::DistError;
use crate::ops::kit::items::defer_items_with;
use crate::ops::kit::{cached_items, cached_items_refit};
use crate::ops::reblock::submit_reblock;
use crate::tensor::{DistTensor, Manifest, TensorMeta};
use plan::{plan, Validated};
use symmetric::{plan_symmetric, validate_symmetric, SymValidated};

/// Scalars, accumulator and conjugation flags of a distributed contraction
/// `C = alpha * einsum(spec, op(A), op(B)) + beta * C_in`: the options type
/// of the local contraction, with distributed tensors.
pub type ContractOptions<'a> = uni20_dispatch::ContractOptions<'a, DistTensor>;

/// `C = einsum(spec, A, B)` on distributed tensors; see [`einsum`].
///
/// # Errors
/// As [`einsum`].
pub fn contract(
    ctl: &Controller<'_>,
    spec: impl ResolveSpec,
    a: &DistTensor,
    b: &DistTensor,
) -> Result<DistTensor, DistError> {
    einsum(ctl, spec, &[a, b], &ContractOptions::default())
}

/// `C = alpha * einsum(spec, op(A), op(B)) + beta * C_in` on distributed
/// tensors; see [`einsum`].
///
/// # Errors
/// As [`einsum`].
pub fn contract_with(
    ctl: &Controller<'_>,
    spec: impl ResolveSpec,
    a: &DistTensor,
    b: &DistTensor,
    opts: &ContractOptions<'_>,
) -> Result<DistTensor, DistError> {
    einsum(ctl, spec, &[a, b], opts)
}

/// `C = alpha * einsum(spec, op(A)[, op(B)]) + beta * C_in` on one or two
/// distributed tensors, with numpy's einsum semantics: repeated labels in
/// an operand (traces `"ii->"`, diagonals `"ii->i"`), ellipsis with
/// broadcasting (`"...ij,...jk->...ik"`), implicit output (`"ij,jk"`), and
/// extent-1 broadcasting. `spec` is a `&str`, an
/// [`EinsumSpec`](uni20_dispatch::EinsumSpec) (both resolved against the
/// global shapes) or a [`ResolvedSpec`](uni20_dispatch::ResolvedSpec)
/// (taken literally).
///
/// Returns at once. The spec, shapes, dtypes and tilings are checked now
/// (errors here mean nothing was submitted); the contraction itself is
/// planned and submitted as soon as the operands (and C_in) are ready, in
/// program order, and the result's block map is written when the workers
/// reply (pipelined, the default in a universe of several ranks: when the
/// contraction is sent, so that operations on the result are sent at once
/// too; see [`pipelining`](crate::pipelining)). A failure of any input's
/// producing operation, or of this contraction, reaches the result with
/// the first error:
/// [`DistTensor::wait`], [`DistTensor::to_local`] and every later
/// operation on it report it. The operands stay alive until the
/// contraction has completed, even if the caller drops them.
///
/// Operands blocked differently on a shared index are aligned first: the
/// operand whose blocks would need the fewer bytes rebuilt is
/// [`reblock`](crate::reblock)ed to the other's extents (on a tie B is
/// reblocked; C_in, when used, is reblocked to the output tiling), and
/// the plan summary notes it, e.g. `reblocked B on j to [2, 2, 2] (96 bytes
/// moved)`. With `opts.strict_blocking` such operands are refused
/// ([`DistError::BlockingMismatch`]) instead. Output blocks are owned by
/// the ranks that computed them; [`DistTensor::plan_summary`] shows the
/// plan in numbers.
///
/// **Symmetric operands** (docs/architecture.md, "Symmetric layout"): two
/// symmetric operands give a symmetric result whose legs are the free legs
/// (in output order) and whose flux is the fusion of the operands' fluxes
/// (a conjugated operand enters with its legs and flux dualized). Only
/// pairs of charge-allowed blocks that meet on the contracted legs are
/// planned, moved and multiplied; the result has every block its layout
/// allows (one reached by no pair is written as zeros, or `beta * C_in`).
/// Each label must be in at most one leg per operand, every contracted pair
/// of legs must have the same sectors and tiles and opposite directions,
/// and C_in, when used, must have the product's layout. Items are placed by
/// flops ([`CostAssigner`](crate::kit::CostAssigner)) and the plan summary
/// counts the block pairs and their multiply-adds.
///
/// # Errors
/// [`DistError::WrongUniverse`] for an operand of another universe;
/// [`DistError::Layout`] ([`LayoutError::Mixed`](crate::error::LayoutError::Mixed))
/// for a symmetric operand with a dense one (or C_in);
/// [`DistError::SymContract`] for symmetric operands that cannot be
/// contracted as asked (one operand, traces, batch labels, broadcasting,
/// contracted legs with different sector lists, equal directions or
/// different tiles, a C_in of another layout) and
/// [`DistError::Symmetry`] for an output flux no block satisfies;
/// [`DistError::Spec`] (malformed spec, more than two operands, ranks,
/// extents, broadcasting), [`DistError::Contract`] (C's shape, a complex
/// scalar with a real output), [`DistError::BlockingMismatch`] (strict
/// mode only), [`DistError::PlanTooLarge`] from validation;
/// [`DistError::Job`] if the job already stopped.
pub fn einsum(
    ctl: &Controller<'_>,
    spec: impl ResolveSpec,
    operands: &[&DistTensor],
    opts: &ContractOptions<'_>,
) -> Result<DistTensor, DistError> {
    for t in operands.iter().copied().chain(opts.c) {
        t.check_universe(ctl)?;
    }
    let all: Vec<&DistTensor> = operands.iter().copied().chain(opts.c).collect();
    crate::tensor::check_layouts("einsum", &all)?;
    if all.iter().any(|t| t.is_symmetric()) {
        return einsum_symmetric(ctl, spec, operands, opts);
    }
    let metas: Vec<&TensorMeta> = operands.iter().map(|t| t.meta()).collect();
    let shapes: Vec<&[usize]> = metas.iter().map(|m| m.shape.as_slice()).collect();
    let spec = spec.resolve_spec(&shapes)?.into_owned();
    let cmeta = opts.c.map(|c| c.meta());
    let validated = plan::validate(&spec, &metas, cmeta, opts.alpha, opts.beta, opts.conj);
    let (v, targets) = match validated {
        Err(DistError::BlockingMismatch { .. }) if !opts.strict_blocking => {
            // Align the tilings (pure), validate the aligned descriptions,
            // and only then queue the reblocks.
            let used_c = cmeta.filter(|_| opts.beta != uni20_dispatch::C64::new(0.0, 0.0));
            let al = align::align(&spec, &metas, used_c)?;
            let aligned: Vec<TensorMeta> = metas
                .iter()
                .copied()
                .chain(used_c)
                .zip(&al.targets)
                .map(|(m, t)| match t {
                    Some((b, _)) => TensorMeta {
                        blocking: b.clone(),
                        ..m.clone()
                    },
                    None => m.clone(),
                })
                .collect();
            let refs: Vec<&TensorMeta> = aligned.iter().take(metas.len()).collect();
            let v = plan::validate(
                &spec,
                &refs,
                aligned.get(metas.len()).or(cmeta),
                opts.alpha,
                opts.beta,
                opts.conj,
            )?;
            (v, al.targets)
        }
        other => (other?, Vec::new()),
    };
    if ctl.has_failed() {
        ctl.progress()?;
    }
    let mut notes = Vec::new();
    let mut inputs: Vec<DistTensor> = operands.iter().map(|&t| t.clone()).collect();
    let mut c = opts.c.cloned();
    for (i, target) in targets.into_iter().enumerate() {
        if let Some((blocking, note)) = target {
            let n = inputs.len();
            // Index `n` is C_in (only present when `opts.c` is).
            if let Some(slot) = inputs.get_mut(i).or(if i == n { c.as_mut() } else { None }) {
                tracing::debug!("contraction: {note}");
                *slot = submit_reblock(ctl, slot, blocking, Some(format!("for a contraction: {note}")));
                notes.push((i, note));
            }
        }
    }
    let refs: Vec<&DistTensor> = inputs.iter().collect();
    Ok(submit_contraction(ctl, v, &refs, c.as_ref(), notes))
}

/// The symmetric path of [`einsum`]: two symmetric operands (and a
/// symmetric C_in of the output's layout); see the docs of [`einsum`].
fn einsum_symmetric(
    ctl: &Controller<'_>,
    spec: impl ResolveSpec,
    operands: &[&DistTensor],
    opts: &ContractOptions<'_>,
) -> Result<DistTensor, DistError> {
    let metas: Vec<&TensorMeta> = operands.iter().map(|t| t.meta()).collect();
    let spec = symmetric::resolve(spec, &metas)?;
    let v: SymValidated = validate_symmetric(
        &spec,
        &metas,
        opts.c.map(|c| c.meta()),
        opts.alpha,
        opts.beta,
        opts.conj,
    )?;
    if ctl.has_failed() {
        ctl.progress()?;
    }
    let mut inputs: Vec<&DistTensor> = operands.to_vec();
    inputs.extend(opts.c.filter(|_| v.use_c));
    Ok(defer_items_with::<ContractV1>(
        ctl,
        v.out.clone(),
        &inputs,
        move |ctl, workers, manifests, _| {
            let refs: Vec<&Manifest> = manifests.iter().take(2).collect();
            let n_out = v.n_out();
            let read: Vec<&Manifest> = manifests.iter().collect();
            cached_items_refit(
                ctl,
                "contract.symmetric",
                &v.cache_params(),
                workers,
                &read,
                |p| symmetric::refit_symmetric(&v, p, &read),
                || plan_symmetric(&v, workers, &refs, manifests.get(2)).into_items(n_out),
            )
        },
    ))
}

/// Queues the contraction `v` of `operands` (and `c` when `v.use_c`) and
/// returns its pending output. `notes` are `(input index, note)` of inputs
/// reblocked for it (index `operands.len()` is C_in); each note gets the
/// bytes its reblock moved in the summary.
fn submit_contraction(
    ctl: &Controller<'_>,
    v: Validated,
    operands: &[&DistTensor],
    c: Option<&DistTensor>,
    notes: Vec<(usize, String)>,
) -> DistTensor {
    let n_inputs = operands.len();
    let mut inputs = operands.to_vec();
    inputs.extend(c.filter(|_| v.use_c));
    defer_items_with::<ContractV1>(ctl, v.out.clone(), &inputs, move |ctl, workers, manifests, keep| {
        let refs: Vec<&Manifest> = manifests.iter().take(n_inputs).collect();
        let n_out = v.out.blocking.num_blocks();
        let read: Vec<&Manifest> = manifests.iter().collect();
        let mut p = cached_items(ctl, "contract", &v.cache_params(), workers, &read, || {
            plan(&v, workers, &refs, manifests.get(n_inputs)).into_items(n_out)
        });
        for (i, note) in notes {
            let moved = keep.get(i).and_then(|t| t.plan_summary()).map_or(0, |s| s.bytes_moved);
            p.summary.notes.push(format!("{note} ({moved} bytes moved)"));
        }
        p
    })
}
