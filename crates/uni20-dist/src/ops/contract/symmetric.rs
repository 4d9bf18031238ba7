//! The symmetric (block-sparse) contraction planner, pure: validation from
//! the operands' layouts ([`validate_symmetric`], at call time: the block
//! pairs follow from metadata alone) and the plan from their manifests
//! ([`plan_symmetric`]).
//!
//! - **Pairs**: [`plan_pairs`] on the operands' layouts (a conjugated
//!   operand enters with its legs and flux dualized) gives, per output
//!   block, the pairs of charge-allowed blocks that meet on the contracted
//!   legs; only those are planned, moved and multiplied. Each label is in at
//!   most one leg per operand; traces, diagonals, batch labels and
//!   broadcasting are typed errors ([`SymContractError`]).
//! - **Output**: the output layout is the charge-rule layout of the free
//!   legs with the fused flux, *all* of its allowed blocks. An allowed block
//!   that no pair reaches is still one (zero-term) work item: the worker
//!   writes zeros (or `beta * C_in`) without computing any pair, so the
//!   result has the full layout that the other families and `C_in` expect.
//! - **Placement**: by cost, not count ([`CostAssigner`]): an item's cost is
//!   its multiply-adds plus its output elements; items are placed largest
//!   first on the rank holding most of their input bytes, under a cap on
//!   each rank's summed cost.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use uni20_dispatch::backends::check_scalars;
use uni20_dispatch::{ResolveSpec, ResolvedSpec, C64};

use super::command::{ContractDescriptorV1, WorkItem};
use super::plan::{ContractPlan, MAX_BLOCK_PRODUCTS};
use crate::error::{DistError, LayoutError};
use crate::ops::kit::{check_plan_size, CostAssigner, MAX_BLOCK_BYTES};
use crate::symmetry::{plan_pairs, Leg, PairPlan, SymContractError, SymmetricLayout};
use crate::tensor::{Manifest, TensorMeta};
use crate::transfer::TransferSet;

/// A symmetric contraction validated against its operands' layouts.
#[derive(Clone, Debug)]
pub(crate) struct SymValidated {
    pub(crate) spec: ResolvedSpec,
    pub(crate) out: TensorMeta,
    pairs: PairPlan,
    alpha: C64,
    beta: C64,
    conj: [bool; 2],
    pub(crate) use_c: bool,
}

impl SymValidated {
    /// Number of stored blocks of the output (its layout's allowed blocks).
    pub(crate) fn n_out(&self) -> usize {
        self.pairs.output.blocks().len()
    }

    /// Everything of the validated contraction its plan depends on besides
    /// the manifests, for the plan cache's key (the block pairs follow from
    /// the spec, the conjugation and the operands' layouts, which the key
    /// holds).
    pub(crate) fn cache_params(&self) -> impl serde::Serialize + '_ {
        (&self.spec, &self.out, self.alpha, self.beta, self.conj, self.use_c)
    }
}

/// The layout of `conj(T)`: every leg dualized (direction flipped, same
/// sectors and tiles) and the flux dualized; the allowed blocks, and so
/// their order, are those of `l`.
fn dual_layout(l: &SymmetricLayout) -> Result<SymmetricLayout, DistError> {
    let g = l.symmetry();
    let legs: Vec<Leg> = l.legs().iter().map(Leg::dual).collect();
    Ok(SymmetricLayout::new(g.clone(), legs, g.dual(l.flux())?)?)
}

/// A layout in words for error messages: per leg its direction and sectors
/// (`charge:dim`), then the flux.
fn describe(l: &SymmetricLayout) -> String {
    let legs: Vec<String> = l
        .legs()
        .iter()
        .map(|leg| {
            let s: Vec<String> = leg
                .sectors()
                .iter()
                .map(|s| format!("{}:{}", s.charge, s.dim))
                .collect();
            format!("{:?}[{}]", leg.direction(), s.join(", "))
        })
        .collect();
    format!("legs ({}) flux {}", legs.join(", "), l.flux())
}

/// Resolves `spec` for symmetric operands against their ranks only (every
/// extent taken as 1): the legs' sectors, not the dense extents, decide
/// whether two legs match, so that a mismatch is reported by
/// [`plan_pairs`] with the leg and both sector lists. Ellipses become
/// labels (then batch labels, refused by [`plan_pairs`]).
///
/// # Errors
/// [`DistError::Spec`] for a malformed spec or a rank that does not fit it.
pub(crate) fn resolve(spec: impl ResolveSpec, metas: &[&TensorMeta]) -> Result<ResolvedSpec, DistError> {
    let ones: Vec<Vec<usize>> = metas.iter().map(|m| vec![1; m.shape.len()]).collect();
    let shapes: Vec<&[usize]> = ones.iter().map(Vec::as_slice).collect();
    Ok(spec.resolve_spec(&shapes)?.into_owned())
}

/// Checks a contraction of two symmetric operands (and a symmetric `c`)
/// from their layouts and dtypes, and plans its block pairs.
///
/// # Errors
/// [`SymContractError`]: not two operands, label problems, contracted legs
/// with different sectors, equal directions or different tiles, a C whose
/// layout is not the output's ([`SymContractError::OutputLayout`]), an
/// output flux no block satisfies; [`DistError::Layout`] for a dense
/// operand; [`DistError::Contract`] for a complex scalar with a real
/// output; [`DistError::PlanTooLarge`] beyond the plan limits.
pub(crate) fn validate_symmetric(
    spec: &ResolvedSpec,
    inputs: &[&TensorMeta],
    c: Option<&TensorMeta>,
    alpha: C64,
    beta: C64,
    conj: [bool; 2],
) -> Result<SymValidated, DistError> {
    if inputs.len() != 2 {
        return Err(SymContractError::OperandCount { got: inputs.len() }.into());
    }
    let mut layouts = Vec::with_capacity(2);
    for (i, m) in inputs.iter().enumerate() {
        let l = m.layout().ok_or(LayoutError::SymmetricOnly {
            operation: "symmetric einsum",
            operand: i,
        })?;
        layouts.push(if conj[i] { dual_layout(l)? } else { l.clone() });
    }
    let pairs = plan_pairs(
        &layouts[0],
        &spec.inputs()[0],
        &layouts[1],
        &spec.inputs()[1],
        spec.output(),
    )?;
    let mut out_dtype = inputs[0].dtype.promote(inputs[1].dtype);
    if let Some(c) = c {
        out_dtype = out_dtype.promote(c.dtype);
        let cl = c.layout().ok_or(LayoutError::SymmetricOnly {
            operation: "symmetric einsum (C_in)",
            operand: 2,
        })?;
        if cl.legs() != pairs.output.legs() || cl.flux() != pairs.output.flux() {
            return Err(SymContractError::OutputLayout {
                expected: describe(&pairs.output),
                got: describe(cl),
            }
            .into());
        }
    }
    check_scalars(out_dtype, alpha, c.map(|_| beta))?;
    check_plan_size(
        "block pairs of the contraction",
        pairs.pair_count() as u128,
        MAX_BLOCK_PRODUCTS,
        "use larger tiles",
    )?;
    let largest = (0..pairs.output.blocks().len())
        .map(|b| {
            pairs
                .output
                .block_extents(b)
                .iter()
                .map(|&n| n as u128)
                .product::<u128>()
        })
        .max()
        .unwrap_or(0)
        .saturating_mul(out_dtype.size_bytes() as u128);
    check_plan_size(
        "bytes of the largest output block",
        largest,
        MAX_BLOCK_BYTES,
        "use smaller tiles",
    )?;
    let out = TensorMeta::symmetric(Arc::new(pairs.output.clone()), out_dtype)?;
    Ok(SymValidated {
        spec: spec.clone(),
        out,
        pairs,
        alpha,
        beta,
        conj,
        use_c: c.is_some() && beta != C64::new(0.0, 0.0),
    })
}

/// Builds the plan of a validated symmetric contraction from the operands'
/// manifests (`inputs`: A and B) and C_in's. `workers` is not empty
/// (callers check). One item per allowed output block (see the module
/// docs), placed by cost.
pub(crate) fn plan_symmetric(
    v: &SymValidated,
    workers: &[usize],
    inputs: &[&Manifest],
    cm: Option<&Manifest>,
) -> ContractPlan {
    let out = &v.pairs.output;
    let n_out = out.blocks().len();
    let cm = cm.filter(|_| v.use_c);
    let by_out: BTreeMap<usize, &crate::symmetry::PairItem> = v.pairs.items.iter().map(|i| (i.out_block, i)).collect();
    let (ma, mb) = (inputs[0], inputs[1]);
    let mut items = Vec::with_capacity(n_out);
    let mut costs = Vec::with_capacity(n_out);
    for b in 0..n_out {
        let out_shape = out.block_extents(b);
        let (terms, flops) = match by_out.get(&b) {
            Some(it) => (
                it.pairs
                    .iter()
                    .map(|&(ai, bi)| vec![ma.blocks[ai], mb.blocks[bi]])
                    .collect(),
                it.flops,
            ),
            None => (Vec::new(), 0),
        };
        let elems: u64 = out_shape.iter().map(|&n| n as u64).product();
        costs.push(flops.saturating_add(elems));
        items.push(WorkItem {
            rank: 0,
            out_block: b,
            out_shape,
            terms,
            c_in: cm.map(|c| c.blocks[b]),
            flops,
        });
    }
    // Bytes of each input block, by id.
    let mut sizes: BTreeMap<_, u64> = BTreeMap::new();
    for b in 0..n_out {
        if let Some(it) = by_out.get(&b) {
            for &(ai, bi) in &it.pairs {
                sizes.insert(ma.blocks[ai].id, ma.block_bytes(ai));
                sizes.insert(mb.blocks[bi].id, mb.block_bytes(bi));
            }
        }
        if let Some(c) = cm {
            sizes.insert(c.blocks[b].id, c.block_bytes(b));
        }
    }
    let mut assigner = CostAssigner::new(workers, &costs);
    for b in CostAssigner::order(&costs) {
        let it = &items[b];
        let mut seen = BTreeSet::new();
        let local: Vec<(usize, u64)> = it
            .terms
            .iter()
            .flatten()
            .chain(it.c_in.iter())
            .filter(|r| seen.insert(r.id))
            .map(|r| (r.owner, sizes[&r.id]))
            .collect();
        items[b].rank = assigner.pick(costs[b], local);
    }
    let mut transfers = TransferSet::new();
    for it in &items {
        for r in it.terms.iter().flatten().chain(it.c_in.iter()) {
            transfers.need(r, sizes[&r.id], it.rank);
        }
    }
    let transfers = transfers.into_vec();
    let mut participants: BTreeSet<usize> = items.iter().map(|i| i.rank).collect();
    participants.extend(transfers.iter().flat_map(|t| [t.from, t.to]));
    let descriptor = ContractDescriptorV1 {
        spec: v.spec.clone(),
        alpha: v.alpha,
        beta: if v.use_c { v.beta } else { C64::new(0.0, 0.0) },
        conj: v.conj,
        out_dtype: v.out.dtype,
        items,
        transfers,
        block_pairs: true,
    };
    ContractPlan {
        descriptor,
        out_shape: v.out.shape.clone(),
        out_blocking: v.out.blocking.clone(),
        participants: participants.into_iter().collect(),
    }
}
