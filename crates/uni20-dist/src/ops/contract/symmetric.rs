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
//! - **Memo**: the block pairs and the output layout depend only on the
//!   spec, the conjugation, the operands' layouts and dtypes, so the root
//!   keeps up to [`PAIR_MEMO_ENTRIES`] of the most recently used (`PairMemo`): every
//!   Lanczos matvec of a DMRG step contracts operands of one structure, and
//!   without the memo the root spent about a tenth of a symmetric sweep
//!   enumerating the same pairs again (`docs/performance.md`).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, Mutex};

use uni20_dispatch::backends::check_scalars;
use uni20_dispatch::{ResolveSpec, ResolvedSpec, C64};
use uni20_persist::ObjectId;

use super::command::{ContractDescriptorV1, WorkItem};
use super::plan::{ContractPlan, MAX_BLOCK_PRODUCTS};
use crate::error::{DistError, LayoutError};
use crate::ops::kit::{check_plan_size, CostAssigner, ItemPlan, MAX_BLOCK_BYTES};
use crate::symmetry::{plan_pairs, Leg, PairPlan, SymContractError, SymmetricLayout};
use crate::tensor::{Manifest, TensorMeta};
use crate::transfer::TransferSet;

/// A symmetric contraction validated against its operands' layouts.
#[derive(Clone, Debug)]
pub(crate) struct SymValidated {
    pub(crate) spec: ResolvedSpec,
    pub(crate) out: TensorMeta,
    pairs: Arc<PairPlan>,
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
    /// the manifests, for the plan cache's key (the block pairs and the
    /// output layout follow from the spec, the conjugation and the
    /// operands' layouts, whose block structure the key holds; the extents
    /// are re-fitted on a hit by [`refit_symmetric`]).
    pub(crate) fn cache_params(&self) -> impl serde::Serialize + '_ {
        (&self.spec, self.out.dtype, self.alpha, self.beta, self.conj, self.use_c)
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
    let mut arcs = Vec::with_capacity(2);
    for (i, m) in inputs.iter().enumerate() {
        arcs.push(m.symmetric.clone().ok_or(LayoutError::SymmetricOnly {
            operation: "symmetric einsum",
            operand: i,
        })?);
    }
    let key = MemoKey {
        labels: [
            spec.inputs()[0].clone(),
            spec.inputs()[1].clone(),
            spec.output().to_vec(),
        ],
        conj,
        layouts: [arcs[0].clone(), arcs[1].clone()],
    };
    let (pairs, out_layout, largest_block) = match PAIR_MEMO.get(&key) {
        Some(v) => v,
        None => {
            let mut layouts = Vec::with_capacity(2);
            for (i, l) in arcs.iter().enumerate() {
                layouts.push(if conj[i] { dual_layout(l)? } else { (**l).clone() });
            }
            let p = Arc::new(plan_pairs(
                &layouts[0],
                &spec.inputs()[0],
                &layouts[1],
                &spec.inputs()[1],
                spec.output(),
            )?);
            PAIR_MEMO.insert(key, p)
        }
    };
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
    check_plan_size(
        "bytes of the largest output block",
        largest_block.saturating_mul(out_dtype.size_bytes() as u128),
        MAX_BLOCK_BYTES,
        "use smaller tiles",
    )?;
    let out = TensorMeta::symmetric(out_layout, out_dtype)?;
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

/// Entries the root's [`PairMemo`] keeps (least recently used dropped
/// beyond): a symmetric DMRG step uses a handful of structures, a sweep a
/// few hundred.
pub(crate) const PAIR_MEMO_ENTRIES: usize = 1024;

/// What the block pairs of a symmetric contraction depend on: the labels
/// (A, B, output), the conjugation and the operands' layouts (compared by
/// value: symmetry, legs and flux determine the allowed blocks).
#[derive(Clone)]
struct MemoKey {
    labels: [Vec<char>; 3],
    conj: [bool; 2],
    layouts: [Arc<SymmetricLayout>; 2],
}

fn same_layout(a: &Arc<SymmetricLayout>, b: &Arc<SymmetricLayout>) -> bool {
    Arc::ptr_eq(a, b) || (a.flux() == b.flux() && a.symmetry() == b.symmetry() && a.legs() == b.legs())
}

impl PartialEq for MemoKey {
    fn eq(&self, o: &MemoKey) -> bool {
        self.labels == o.labels
            && self.conj == o.conj
            && same_layout(&self.layouts[0], &o.layouts[0])
            && same_layout(&self.layouts[1], &o.layouts[1])
    }
}

impl Eq for MemoKey {}

impl Hash for MemoKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.labels.hash(h);
        self.conj.hash(h);
        for l in &self.layouts {
            l.symmetry().hash(h);
            l.legs().hash(h);
            l.flux().hash(h);
        }
    }
}

/// The root's memo of block pairs ([`plan_pairs`] results, each with its
/// output layout as one shared `Arc`, so that outputs of one structure
/// share it and later keys compare by pointer), bounded by
/// [`PAIR_MEMO_ENTRIES`]. Process-wide: the pairs are a pure function of
/// the key, so sharing between universes of one process is safe.
struct PairMemo {
    inner: Mutex<MemoInner>,
}

/// The pairs, their output layout, and the element count of the output's
/// largest block (checked against `MAX_BLOCK_BYTES` on every call; computed
/// once here, not once per contraction).
type Memoized = (Arc<PairPlan>, Arc<SymmetricLayout>, u128);

#[derive(Default)]
struct MemoInner {
    // FxHash: a key hashes every leg of both layouts, many small writes,
    // which SipHash made a measurable part of a symmetric sweep's planning.
    map: rustc_hash::FxHashMap<MemoKey, (Memoized, u64)>,
    tick: u64,
}

static PAIR_MEMO: LazyLock<PairMemo> = LazyLock::new(|| PairMemo {
    inner: Mutex::new(MemoInner::default()),
});

impl PairMemo {
    fn lock(&self) -> std::sync::MutexGuard<'_, MemoInner> {
        // A panic while holding the lock leaves the map consistent (every
        // update is one insert or remove).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, key: &MemoKey) -> Option<Memoized> {
        let mut m = self.lock();
        m.tick += 1;
        let tick = m.tick;
        m.map.get_mut(key).map(|(v, t)| {
            *t = tick;
            v.clone()
        })
    }

    fn insert(&self, key: MemoKey, pairs: Arc<PairPlan>) -> Memoized {
        let out = Arc::new(pairs.output.clone());
        let largest = (0..out.blocks().len())
            .map(|b| out.block_extents(b).iter().map(|&n| n as u128).product::<u128>())
            .max()
            .unwrap_or(0);
        let mut m = self.lock();
        if m.map.len() >= PAIR_MEMO_ENTRIES {
            // The least recently used eighth goes at once: one O(entries)
            // pass per PAIR_MEMO_ENTRIES / 8 misses, not one per miss.
            let mut uses: Vec<u64> = m.map.values().map(|(_, t)| *t).collect();
            let (_, &mut cut, _) = uses.select_nth_unstable(PAIR_MEMO_ENTRIES / 8);
            m.map.retain(|_, (_, t)| *t > cut);
        }
        m.tick += 1;
        let tick = m.tick;
        let v = (pairs, out, largest);
        m.map.insert(key, (v.clone(), tick));
        v
    }
}

/// Re-fits a cached plan, re-bound to this contraction's operands
/// (`inputs`: A, B, then C_in when `v.use_c`), to their extents: every
/// item's output shape and multiply-adds, every transfer's bytes and the
/// summary are computed again; the rank of each item and the transfers'
/// endpoints are kept. False (the plan must not be used) unless every item
/// reads exactly the block pairs and C_in block that `v` gives its output
/// block, so a plan of another structure is never used.
pub(crate) fn refit_symmetric(v: &SymValidated, p: &mut ItemPlan<ContractDescriptorV1>, inputs: &[&Manifest]) -> bool {
    let (Some(ma), Some(mb)) = (inputs.first(), inputs.get(1)) else {
        return false;
    };
    let cm = if v.use_c { inputs.get(2).copied() } else { None };
    if v.use_c && cm.is_none() {
        return false;
    }
    let out = &v.pairs.output;
    let n_out = out.blocks().len();
    let d = &mut p.descriptor;
    if d.items.len() != n_out || v.pairs.items.len() > n_out {
        return false;
    }
    let mut by_out: Vec<Option<&crate::symmetry::PairItem>> = vec![None; n_out];
    for it in &v.pairs.items {
        match by_out.get_mut(it.out_block) {
            Some(slot) => *slot = Some(it),
            None => return false,
        }
    }
    for it in &mut d.items {
        let b = it.out_block;
        let Some(&pairs) = by_out.get(b) else {
            return false;
        };
        let pairs_match = match pairs {
            Some(pi) => {
                pi.pairs.len() == it.terms.len()
                    && it.terms.iter().zip(&pi.pairs).all(|(t, &(ai, bi))| {
                        t.len() == 2 && ma.blocks.get(ai) == Some(&t[0]) && mb.blocks.get(bi) == Some(&t[1])
                    })
            }
            None => it.terms.is_empty(),
        };
        if !pairs_match || it.c_in != cm.and_then(|c| c.blocks.get(b).copied()) {
            return false;
        }
        it.flops = pairs.map_or(0, |pi| pi.flops);
        it.out_shape.clear();
        it.out_shape.extend(
            out.blocks()[b]
                .tiles
                .iter()
                .zip(out.legs())
                .map(|(&t, l)| l.tile(t).map_or(0, |x| x.extent)),
        );
    }
    // The block sizes by id, only for a plan that moves blocks (a one-rank
    // plan moves none, and this index was most of its re-fit).
    if !d.transfers.is_empty() {
        let mut sizes: rustc_hash::FxHashMap<ObjectId, u64> = rustc_hash::FxHashMap::default();
        sizes.reserve(ma.blocks.len() + mb.blocks.len() + cm.map_or(0, |c| c.blocks.len()));
        for m in [Some(*ma), Some(*mb), cm].into_iter().flatten() {
            for (b, r) in m.blocks.iter().enumerate() {
                sizes.insert(r.id, m.block_bytes(b));
            }
        }
        for t in &mut d.transfers {
            match sizes.get(&t.id) {
                Some(&bytes) => t.bytes = bytes,
                None => return false,
            }
        }
    }
    // The items, their output blocks and the participants are the template's.
    p.summary = super::plan::summary_of(&p.descriptor, &p.participants);
    true
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
                    .map(|&(ai, bi)| smallvec::smallvec![ma.blocks[ai], mb.blocks[bi]])
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
        out_names: Vec::new(),
        hold_replicas: false,
        block_pairs: true,
    };
    ContractPlan {
        descriptor,
        out_shape: v.out.shape.clone(),
        out_blocking: v.out.blocking.clone(),
        participants: participants.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::kit::ItemPlan;
    use crate::symmetry::{Direction, Symmetry};
    use crate::tensor::BlockRef;
    use uni20_dispatch::DType;

    /// A U(1) leg with sectors `(charge, dim)`, tiles of at most 4.
    fn leg(dir: Direction, sectors: &[(i64, usize)]) -> Leg {
        crate::symmetry::u1_test_leg(dir, sectors, 4)
    }

    /// A flux-0 matrix "ab" with legs (Out a, In b), blocks owned round
    /// robin by ranks 1 and 2, ids from `origin`.
    fn matrix(a: &[(i64, usize)], b: &[(i64, usize)], origin: u32) -> (TensorMeta, Manifest) {
        let g = Symmetry::u1();
        let l = SymmetricLayout::new(
            g.clone(),
            vec![leg(Direction::Out, a), leg(Direction::In, b)],
            g.charge(&[0]).unwrap(),
        )
        .unwrap();
        let meta = TensorMeta::symmetric(Arc::new(l), DType::F64).unwrap();
        let blocks = (0..meta.stored_blocks())
            .map(|k| BlockRef {
                owner: 1 + k % 2,
                id: ObjectId::new(origin, k as u64),
            })
            .collect();
        let m = Manifest::new(&meta, blocks);
        (meta, m)
    }

    fn validated(ma: &TensorMeta, mb: &TensorMeta) -> SymValidated {
        let spec = resolve("ab,bc->ac", &[ma, mb]).unwrap();
        validate_symmetric(
            &spec,
            &[ma, mb],
            None,
            C64::new(1.0, 0.0),
            C64::new(0.0, 0.0),
            [false, false],
        )
        .unwrap()
    }

    fn planned(v: &SymValidated, a: &Manifest, b: &Manifest) -> ItemPlan<ContractDescriptorV1> {
        plan_symmetric(v, &[1, 2], &[a, b], None).into_items(v.n_out())
    }

    /// A plan re-fitted to operands of the same block structure with other
    /// extents has the shapes, multiply-adds and transfer bytes of a plan
    /// made for them, and keeps its rank assignment; a plan of another
    /// structure is refused.
    #[test]
    fn a_refit_plan_has_the_new_extents_and_another_structure_is_refused() {
        let (s1, s2) = ([(-1, 3), (0, 2), (1, 3)], [(-1, 2), (0, 4), (1, 1)]);
        let (ma1, a1) = matrix(&s1, &s1, 1);
        let (mb1, b1) = matrix(&s1, &s1, 2);
        let (ma2, a2) = matrix(&s2, &s2, 3);
        let (mb2, b2) = matrix(&s2, &s2, 4);
        let (v1, v2) = (validated(&ma1, &mb1), validated(&ma2, &mb2));
        // The cache re-binds the ids before the refit: do it by hand.
        let mut p = planned(&v1, &a1, &b1);
        for it in &mut p.descriptor.items {
            for t in &mut it.terms {
                let ai = a1.blocks.iter().position(|r| *r == t[0]).unwrap();
                let bi = b1.blocks.iter().position(|r| *r == t[1]).unwrap();
                t[0] = a2.blocks[ai];
                t[1] = b2.blocks[bi];
            }
        }
        let (ids1, ids2): (Vec<_>, Vec<_>) = (
            a1.blocks.iter().chain(&b1.blocks).map(|r| r.id).collect(),
            a2.blocks.iter().chain(&b2.blocks).map(|r| r.id).collect(),
        );
        for t in &mut p.descriptor.transfers {
            t.id = ids2[ids1.iter().position(|&i| i == t.id).unwrap()];
        }
        let ranks: Vec<usize> = p.descriptor.items.iter().map(|i| i.rank).collect();
        assert!(refit_symmetric(&v2, &mut p, &[&a2, &b2]));
        let fresh = planned(&v2, &a2, &b2);
        assert_eq!(p.descriptor.items.iter().map(|i| i.rank).collect::<Vec<_>>(), ranks);
        for (got, want) in p.descriptor.items.iter().zip(&fresh.descriptor.items) {
            assert_eq!(got.out_block, want.out_block);
            assert_eq!(got.out_shape, want.out_shape);
            assert_eq!(got.flops, want.flops);
            assert_eq!(got.terms, want.terms);
        }
        assert_ne!(
            p.descriptor
                .items
                .iter()
                .map(|i| i.out_shape.clone())
                .collect::<Vec<_>>(),
            planned(&v1, &a1, &b1)
                .descriptor
                .items
                .iter()
                .map(|i| i.out_shape.clone())
                .collect::<Vec<_>>(),
            "the two structures differ in extents"
        );
        for t in &p.descriptor.transfers {
            let m = if a2.blocks.iter().any(|r| r.id == t.id) {
                &a2
            } else {
                &b2
            };
            let b = m.blocks.iter().position(|r| r.id == t.id).unwrap();
            assert_eq!(t.bytes, m.block_bytes(b));
        }
        assert_eq!(p.summary.flops, fresh.summary.flops);
        assert_eq!(p.summary.work_items, fresh.summary.work_items);
        assert_eq!(p.summary.block_products, fresh.summary.block_products);
        let moved: u64 = p.descriptor.transfers.iter().map(|t| t.bytes).sum();
        assert_eq!(p.summary.bytes_moved, moved);

        // Another structure (a sector fewer on the contracted leg): refused.
        let s3 = [(-1, 3), (0, 2)];
        let (ma3, a3) = matrix(&s3, &s3, 5);
        let (mb3, b3) = matrix(&s3, &s3, 6);
        let v3 = validated(&ma3, &mb3);
        let mut q = planned(&v1, &a1, &b1);
        assert!(!refit_symmetric(&v3, &mut q, &[&a3, &b3]));
        // The right structure with ids that are not the operands': refused.
        let mut r = planned(&v1, &a1, &b1);
        assert!(!refit_symmetric(&v2, &mut r, &[&a2, &b2]));
    }
}
