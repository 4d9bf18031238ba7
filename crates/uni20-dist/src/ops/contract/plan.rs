//! The contraction planner, pure: validation of a spec against the
//! operands' static descriptions ([`validate`]), and the plan built from
//! their manifests ([`plan`]): one work item per output block, each
//! assigned to the rank that already owns most of its input bytes (under a
//! load cap), and the list of blocks that must move. No transport, no
//! controller: testable with simulated ranks.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use uni20_dispatch::backends::check_scalars;
use uni20_dispatch::{ContractError, ContractOptions, DType, ResolveSpec, ResolvedSpec, SpecError, C64};

use super::command::{ContractDescriptorV1, Term, WorkItem};
use crate::error::DistError;
use crate::layout::Blocking;
use crate::ops::kit::items::split_shares;
use crate::ops::kit::{check_plan_size, ItemPlan, MAX_BLOCK_BYTES};
use crate::summary::PlanSummary;
use crate::tensor::{BlockRef, Manifest, TensorMeta};
use crate::transfer::FastHash;
use crate::transfer::Transfer;
use uni20_persist::ObjectId;

/// Most block products (work-item terms) one contraction plan may hold.
pub const MAX_BLOCK_PRODUCTS: u128 = 1 << 24;

/// A validated, rank-assigned contraction plan.
#[derive(Clone, Debug, PartialEq)]
pub struct ContractPlan {
    /// What is sent to the workers (crate-private; see
    /// [`ContractPlan::descriptor_bytes`]).
    pub(crate) descriptor: ContractDescriptorV1,
    /// Global output shape.
    pub out_shape: Vec<usize>,
    /// Output block tiling.
    pub out_blocking: Blocking,
    /// Ranks that receive the descriptor.
    pub participants: Vec<usize>,
}

impl ContractPlan {
    /// Bytes of the whole plan's encoded descriptor. Each participant
    /// receives only its share of it ([`ContractPlan::share_bytes`]).
    pub fn descriptor_bytes(&self) -> usize {
        uni20_worker::envelope::encode(&self.descriptor).len()
    }

    /// Per participant (ascending), the bytes of the encoded descriptor it
    /// receives when the plan is submitted: the descriptor holding only the
    /// items it computes and the transfers it sends or receives. Empty for
    /// a plan without participants.
    pub fn share_bytes(&self) -> Vec<(usize, usize)> {
        match split_shares(self.descriptor.clone(), &self.participants) {
            Ok(s) => s
                .shares
                .iter()
                .map(|(r, d)| (*r, uni20_worker::envelope::encode(d).len()))
                .collect(),
            // Not split (cannot happen for a plan of `plan_contract`): each
            // receives the whole descriptor.
            Err(d) => {
                let n = uni20_worker::envelope::encode(&d).len();
                self.participants.iter().map(|&r| (r, n)).collect()
            }
        }
    }

    /// Total payload bytes moved between ranks.
    pub fn bytes_moved(&self) -> u64 {
        self.descriptor.transfers.iter().map(|t| t.bytes).sum()
    }

    /// Payload bytes sent to or from the root (zero whenever the root is not
    /// also the only worker).
    pub fn bytes_through_root(&self) -> u64 {
        self.descriptor
            .transfers
            .iter()
            .filter(|t| t.from == 0 || t.to == 0)
            .map(|t| t.bytes)
            .sum()
    }

    /// The plan as the kit submits it (descriptor, participants, summary,
    /// the output block of each item). `n_blocks` is the output's number of
    /// stored blocks (of its tiling when dense, of its layout's allowed
    /// blocks when symmetric).
    pub(crate) fn into_items(self, n_blocks: usize) -> ItemPlan<ContractDescriptorV1> {
        let summary = self.summary();
        ItemPlan {
            out_blocks: self.descriptor.items.iter().map(|i| i.out_block).collect(),
            n_blocks,
            descriptor: self.descriptor,
            participants: self.participants,
            summary,
        }
    }

    /// The plan in numbers (work items, block products, multiply-adds,
    /// transfers, bytes, per-rank shares).
    pub fn summary(&self) -> PlanSummary {
        summary_of(&self.descriptor, &self.participants)
    }
}

/// The summary of a contraction plan with `descriptor` sent to
/// `participants` ([`ContractPlan::summary`]).
pub(crate) fn summary_of(descriptor: &ContractDescriptorV1, participants: &[usize]) -> PlanSummary {
    let terms: usize = descriptor.items.iter().map(|i| i.terms.len()).sum();
    let mut s = PlanSummary::from_parts(
        "contract",
        descriptor.items.iter().map(|i| i.rank),
        terms,
        &descriptor.transfers,
        participants,
    );
    s.set_flops(descriptor.items.iter().map(|i| (i.rank, i.flops)));
    s
}

/// A contraction validated against its operands' static descriptions.
#[derive(Clone, Debug)]
pub(crate) struct Validated {
    pub(crate) spec: ResolvedSpec,
    pub(crate) out: TensorMeta,
    reduce: Vec<char>,
    reduce_blocking: Blocking,
    alpha: C64,
    beta: C64,
    conj: [bool; 2],
    pub(crate) use_c: bool,
    /// An operand has no elements: the product is zero and items have no terms.
    empty_product: bool,
}

impl Validated {
    /// Everything of the validated contraction its plan depends on besides
    /// the manifests, for the plan cache's key.
    pub(crate) fn cache_params(&self) -> impl serde::Serialize + '_ {
        (
            &self.spec,
            &self.out,
            &self.reduce,
            &self.reduce_blocking,
            self.alpha,
            self.beta,
            self.conj,
            self.use_c,
            self.empty_product,
        )
    }
}

fn label_extents(labels: &[char], blocking: &Blocking, map: &mut BTreeMap<char, Vec<usize>>) -> Result<(), DistError> {
    for (l, e) in labels.iter().zip(blocking.extents()) {
        match map.get(l) {
            Some(prev) if prev != e => {
                return Err(DistError::BlockingMismatch {
                    label: *l,
                    first: prev.clone(),
                    second: e.clone(),
                })
            }
            Some(_) => {}
            None => {
                map.insert(*l, e.clone());
            }
        }
    }
    Ok(())
}

fn checked_blocking(labels: &[char], ext: &BTreeMap<char, Vec<usize>>, what: &str) -> Result<Blocking, DistError> {
    let shape: Vec<usize> = labels.iter().map(|l| ext[l].iter().sum()).collect();
    Blocking::from_extents(&shape, labels.iter().map(|l| ext[l].clone()).collect()).map_err(|e| match e {
        crate::layout::BlockingError::TooManyBlocks { count, limit, .. } => DistError::PlanTooLarge {
            what: format!("{what} blocks"),
            count,
            limit: limit as u128,
            hint: "use a larger block size".into(),
        },
        other => other.into(),
    })
}

/// Checks a contraction of one or two operands using only shapes, dtypes
/// and tilings (known before the operands' producing operations complete),
/// including the size limits of the plan it will build. The spec is
/// resolved here, once, against the global shapes (numpy rules for
/// strings and `EinsumSpec`s; a `ResolvedSpec` is taken literally).
pub(crate) fn validate(
    spec: impl ResolveSpec,
    inputs: &[&TensorMeta],
    c: Option<&TensorMeta>,
    alpha: C64,
    beta: C64,
    conj: [bool; 2],
) -> Result<Validated, DistError> {
    let shapes: Vec<&[usize]> = inputs.iter().map(|m| m.shape.as_slice()).collect();
    let spec = spec.resolve_spec(&shapes)?.into_owned();
    let out_shape = spec.output_shape(&shapes)?;
    let mut out_dtype: DType = inputs
        .iter()
        .map(|m| m.dtype)
        .reduce(DType::promote)
        .ok_or(SpecError::NoOperands)?;
    if let Some(c) = c {
        out_dtype = out_dtype.promote(c.dtype);
        if c.shape != out_shape {
            return Err(ContractError::Shape {
                expected: out_shape,
                got: c.shape.clone(),
            }
            .into());
        }
    }
    check_scalars(out_dtype, alpha, c.map(|_| beta))?;
    // A tensor with no elements contributes nothing but its shape: its
    // tiling (one block) does not constrain the others' (see `Blocking`).
    let empty_product = inputs.iter().any(|m| m.is_empty());
    let c = c.filter(|c| !c.is_empty());
    let mut ext = BTreeMap::new();
    for (labels, m) in spec.inputs().iter().zip(inputs) {
        if !m.is_empty() {
            label_extents(labels, &m.blocking, &mut ext)?;
        }
    }
    if let Some(c) = c {
        label_extents(spec.output(), &c.blocking, &mut ext)?;
    }
    for (labels, m) in spec.inputs().iter().zip(inputs) {
        for (l, &n) in labels.iter().zip(&m.shape) {
            ext.entry(*l).or_insert_with(|| vec![n]);
        }
    }
    if out_shape.contains(&0) {
        for l in spec.output() {
            let n = ext[l].iter().sum();
            ext.insert(*l, vec![n]);
        }
    }
    let out_blocking = checked_blocking(spec.output(), &ext, "output")?;
    let reduce: Vec<char> = ext.keys().copied().filter(|l| !spec.output().contains(l)).collect();
    let reduce_blocking = checked_blocking(&reduce, &ext, "reduction")?;
    let products = if empty_product {
        0
    } else {
        (out_blocking.num_blocks() as u128) * (reduce_blocking.num_blocks() as u128)
    };
    check_plan_size(
        "block products of the contraction",
        products,
        MAX_BLOCK_PRODUCTS,
        "use a larger block size",
    )?;
    let largest_block: u128 = spec
        .output()
        .iter()
        .map(|l| ext[l].iter().copied().max().unwrap_or(0) as u128)
        .fold(1u128, |acc, n| acc.saturating_mul(n))
        .saturating_mul(out_dtype.size_bytes() as u128);
    check_plan_size(
        "bytes of the largest output block",
        largest_block,
        MAX_BLOCK_BYTES,
        "use a smaller block size",
    )?;
    let use_c = c.is_some() && beta != C64::new(0.0, 0.0);
    Ok(Validated {
        empty_product,
        out: TensorMeta {
            symmetric: None,
            shape: out_shape,
            dtype: out_dtype,
            blocking: out_blocking,
        },
        spec,
        reduce,
        reduce_blocking,
        alpha,
        beta,
        conj,
        use_c,
    })
}

/// Builds the plan of a validated contraction from the operands' manifests
/// (`inputs` in operand order). `workers` is not empty (callers check).
///
/// Linear in the block products: an item's rank is chosen among the owners
/// of its inputs (and the least-loaded worker), never by scanning every
/// worker, and its transfers are requested as it is placed (in item order,
/// then term order, as before).
pub(crate) fn plan(v: &Validated, workers: &[usize], inputs: &[&Manifest], cm: Option<&Manifest>) -> ContractPlan {
    let spec = &v.spec;
    let out_labels = spec.output();
    let out_blocking = &v.out.blocking;
    // Per operand: where each of its labels takes its block index from
    // (output position, or reduction position + the output's rank), and
    // the row-major strides of its block grid.
    let n_out_labels = out_labels.len();
    let operands: Vec<(Vec<usize>, Vec<usize>)> = spec
        .inputs()
        .iter()
        .zip(inputs)
        .map(|(labels, m)| {
            let from = labels
                .iter()
                .map(|l| match out_labels.iter().position(|x| x == l) {
                    Some(p) => p,
                    None => n_out_labels + v.reduce.iter().position(|x| x == l).unwrap_or(0),
                })
                .collect();
            let dims = m.blocking.dims();
            let mut strides = vec![1; dims.len()];
            for d in (0..dims.len().saturating_sub(1)).rev() {
                strides[d] = strides[d + 1] * dims[d + 1];
            }
            (from, strides)
        })
        .collect();
    // Block bytes, computed on first use.
    let mut bytes_of: Vec<Vec<u64>> = inputs.iter().map(|m| vec![u64::MAX; m.blocks.len()]).collect();
    let cm = cm.filter(|_| v.use_c);
    // Every distinct object id read (inputs, then C) numbered once, so an
    // item's distinct inputs and the (object, receiver) pairs already
    // planned are found by index, without hashing in the item loop.
    let mut numbers: HashMap<ObjectId, usize, FastHash> = HashMap::default();
    let canon: Vec<Vec<usize>> = inputs
        .iter()
        .copied()
        .chain(cm)
        .map(|m| {
            m.blocks
                .iter()
                .map(|b| {
                    let n = numbers.len();
                    *numbers.entry(b.id).or_insert(n)
                })
                .collect()
        })
        .collect();
    let n_ids = numbers.len();
    drop(numbers);
    let n_out = out_blocking.num_blocks();
    let n_terms = if v.empty_product {
        0
    } else {
        v.reduce_blocking.num_blocks()
    };
    let reduce_multi: Vec<Vec<usize>> = (0..n_terms).map(|r| v.reduce_blocking.multi(r)).collect();
    let reduce_elems: Vec<u64> = reduce_multi
        .iter()
        .map(|r| v.reduce_blocking.block_shape(r).iter().map(|&n| n as u64).product())
        .collect();
    let cap = n_out.div_ceil(workers.len());
    // Workers by rank (a duplicate counts once), their loads, and the
    // loads ordered for the least-loaded one.
    let mut slot: HashMap<usize, usize, FastHash> = HashMap::default();
    let mut ranks = Vec::new();
    for &w in workers {
        slot.entry(w).or_insert_with(|| {
            ranks.push(w);
            ranks.len() - 1
        });
    }
    let mut load = vec![0usize; ranks.len()];
    let mut by_load: BTreeSet<(usize, usize)> = ranks.iter().map(|&w| (0, w)).collect();
    let mut items = Vec::with_capacity(n_out);
    // At most one transfer per block read, and per (object, worker); the
    // reservation is capped (pages of the unused part are never touched).
    let reads = n_out.saturating_mul(n_terms * inputs.len() + usize::from(cm.is_some()));
    let pairs = n_ids.saturating_mul(ranks.len());
    let mut transfers: Vec<Transfer> = Vec::with_capacity(reads.min(pairs).min(1 << 22));
    let mut planned = PairSet::new(n_ids, ranks.len());
    let mut index = vec![0usize; n_out_labels + v.reduce.len()];
    // This item's reads: (block, bytes, object number).
    let mut refs: Vec<(BlockRef, u64, usize)> = Vec::new();
    // The last item that counted each object number.
    let mut seen_by = vec![usize::MAX; n_ids];
    let mut local: Vec<(usize, u64)> = Vec::new();
    for o_lin in 0..n_out {
        let o = out_blocking.multi(o_lin);
        index[..n_out_labels].copy_from_slice(&o);
        refs.clear();
        let mut terms = Vec::with_capacity(n_terms);
        for r in &reduce_multi {
            index[n_out_labels..n_out_labels + r.len()].copy_from_slice(r);
            let term: Term = operands
                .iter()
                .zip(inputs)
                .zip(bytes_of.iter_mut().zip(&canon))
                .map(|(((from, strides), m), (bytes, canon))| {
                    let lin: usize = from.iter().zip(strides).map(|(&f, &s)| index[f] * s).sum();
                    if bytes[lin] == u64::MAX {
                        bytes[lin] = m.block_bytes(lin);
                    }
                    refs.push((m.blocks[lin], bytes[lin], canon[lin]));
                    m.blocks[lin]
                })
                .collect();
            terms.push(term);
        }
        let c_in = cm.map(|c| {
            refs.push((c.blocks[o_lin], c.block_bytes(o_lin), canon[inputs.len()][o_lin]));
            c.blocks[o_lin]
        });
        // Locality: bytes of this item's distinct inputs already on each rank.
        local.clear();
        for &(r, bytes, n) in &refs {
            if std::mem::replace(&mut seen_by[n], o_lin) != o_lin {
                match local.iter_mut().find(|(w, _)| *w == r.owner) {
                    Some((_, b)) => *b += bytes,
                    None => local.push((r.owner, bytes)),
                }
            }
        }
        // The worker below the cap holding the most of those bytes (ties:
        // lower load, then lower rank); else the least-loaded worker below
        // the cap (ties: lower rank); else (never, by the cap) round-robin.
        let holder = local
            .iter()
            .filter(|&&(_, b)| b > 0)
            .filter_map(|&(w, b)| slot.get(&w).map(|&k| (w, k, b)))
            .filter(|&(_, k, _)| load[k] < cap)
            .max_by_key(|&(w, k, b)| (b, std::cmp::Reverse(load[k]), std::cmp::Reverse(w)))
            .map(|(w, _, _)| w);
        let rank = holder
            .or_else(|| by_load.first().filter(|&&(l, _)| l < cap).map(|&(_, w)| w))
            .unwrap_or(workers[o_lin % workers.len()]);
        let k = slot[&rank];
        by_load.remove(&(load[k], rank));
        load[k] += 1;
        by_load.insert((load[k], rank));
        // Each (object, receiver) once, in item order, then read order.
        for &(r, bytes, n) in &refs {
            if r.owner != rank && planned.insert(n, k) {
                transfers.push(Transfer {
                    id: r.id,
                    from: r.owner,
                    to: rank,
                    bytes,
                });
            }
        }
        let out_shape = out_blocking.block_shape(&o);
        // Per term: output block elements times the term's reduction block elements.
        let out_elems: u64 = out_shape.iter().map(|&n| n as u64).product();
        let flops = reduce_elems[..terms.len()].iter().map(|&e| out_elems * e).sum();
        items.push(WorkItem {
            rank,
            out_block: o_lin,
            out_shape,
            terms,
            c_in,
            flops,
        });
    }
    let mut participants: BTreeSet<usize> = items.iter().map(|i| i.rank).collect();
    participants.extend(transfers.iter().flat_map(|t| [t.from, t.to]));
    let descriptor = ContractDescriptorV1 {
        spec: spec.clone(),
        alpha: v.alpha,
        beta: if v.use_c { v.beta } else { C64::new(0.0, 0.0) },
        conj: v.conj,
        out_dtype: v.out.dtype,
        items,
        transfers,
        out_names: Vec::new(),
        hold_replicas: false,
        block_pairs: false,
    };
    ContractPlan {
        descriptor,
        out_shape: v.out.shape.clone(),
        out_blocking: out_blocking.clone(),
        participants: participants.into_iter().collect(),
    }
}

/// A set of (object number, worker slot) pairs: a bit matrix when it has
/// at most `PairSet::MAX_BITS` cells (zeroed lazily by the allocator, so
/// only the pages of pairs inserted are touched), a hash set beyond.
enum PairSet {
    Bits { bits: Vec<u64>, slots: usize },
    Hashed(HashSet<(usize, usize), FastHash>),
}

impl PairSet {
    /// Most cells of the bit matrix: 2^31 bits (256 MiB of address space).
    const MAX_BITS: usize = 1 << 31;

    fn new(objects: usize, slots: usize) -> PairSet {
        match objects.checked_mul(slots) {
            Some(cells) if cells <= Self::MAX_BITS => PairSet::Bits {
                bits: vec![0; cells.div_ceil(64)],
                slots,
            },
            _ => PairSet::Hashed(HashSet::default()),
        }
    }

    /// Inserts `(object, slot)`; true when it was not there.
    fn insert(&mut self, object: usize, slot: usize) -> bool {
        match self {
            PairSet::Bits { bits, slots } => {
                let cell = object * *slots + slot;
                let (word, bit) = (cell / 64, 1u64 << (cell % 64));
                let new = bits[word] & bit == 0;
                bits[word] |= bit;
                new
            }
            PairSet::Hashed(set) => set.insert((object, slot)),
        }
    }
}

/// Validates a contraction of one or two manifests and builds its plan,
/// without submitting anything. `workers` are the ranks that may compute
/// (see [`Controller::compute_ranks`](uni20_worker::Controller::compute_ranks));
/// `opts.c` is the existing output for `beta`.
///
/// Symmetric manifests (all of them) are planned as [`einsum`](super::einsum)
/// plans symmetric operands: block pairs only, placed by flops.
///
/// # Errors
/// [`DistError::Layout`] when symmetric and dense manifests are mixed;
/// for symmetric ones the errors of [`einsum`](super::einsum)'s symmetric
/// path; [`DistError::Spec`] for a malformed spec or a shape that does not fit it;
/// [`DistError::Contract`] for a C of the wrong shape or a complex scalar
/// with a real output; [`DistError::BlockingMismatch`] if an index is
/// blocked differently in two operands (this pure planner does not reblock;
/// [`einsum`](super::einsum) does); [`DistError::PlanTooLarge`] beyond
/// the plan limits; [`DistError::NoRanks`] for no workers.
pub fn plan_contract(
    workers: &[usize],
    spec: impl ResolveSpec,
    inputs: &[&Manifest],
    opts: &ContractOptions<'_, Manifest>,
) -> Result<ContractPlan, DistError> {
    if workers.is_empty() {
        return Err(DistError::NoRanks("the contraction's worker list".into()));
    }
    let metas: Vec<TensorMeta> = inputs.iter().map(|m| m.meta()).collect();
    let meta_refs: Vec<&TensorMeta> = metas.iter().collect();
    let cmeta = opts.c.map(Manifest::meta);
    let symmetric = metas.iter().chain(cmeta.as_ref()).position(|m| m.symmetric.is_some());
    let dense = metas.iter().chain(cmeta.as_ref()).position(|m| m.symmetric.is_none());
    match (symmetric, dense) {
        (Some(symmetric), Some(dense)) => {
            return Err(crate::error::LayoutError::Mixed {
                operation: "plan_contract",
                symmetric,
                dense,
            }
            .into())
        }
        (Some(_), None) => {
            let spec = super::symmetric::resolve(spec, &meta_refs)?;
            let v = super::symmetric::validate_symmetric(
                &spec,
                &meta_refs,
                cmeta.as_ref(),
                opts.alpha,
                opts.beta,
                opts.conj,
            )?;
            return Ok(super::symmetric::plan_symmetric(&v, workers, inputs, opts.c));
        }
        _ => {}
    }
    let v = validate(spec, &meta_refs, cmeta.as_ref(), opts.alpha, opts.beta, opts.conj)?;
    Ok(plan(&v, workers, inputs, opts.c))
}

/// The planner as it was before it was made linear (one scan of every
/// worker per item), kept as the oracle of `tests`.
#[cfg(test)]
mod reference {
    use super::*;
    use crate::transfer::TransferSet;

    /// Builds the plan of a validated contraction from the operands' manifests
    /// (`inputs` in operand order). `workers` is not empty (callers check).
    pub(crate) fn plan_reference(
        v: &Validated,
        workers: &[usize],
        inputs: &[&Manifest],
        cm: Option<&Manifest>,
    ) -> ContractPlan {
        let spec = &v.spec;
        let out_labels = spec.output();
        let out_blocking = &v.out.blocking;
        let block_index = |labels: &[char], m: &Manifest, o: &[usize], r: &[usize]| -> (BlockRef, u64) {
            let multi: Vec<usize> = labels
                .iter()
                .map(|l| match out_labels.iter().position(|x| x == l) {
                    Some(p) => o[p],
                    None => r[v.reduce.iter().position(|x| x == l).unwrap_or(0)],
                })
                .collect();
            let lin = m.blocking.linear(&multi);
            (m.blocks[lin], m.block_bytes(lin))
        };
        let cm = cm.filter(|_| v.use_c);
        let n_out = out_blocking.num_blocks();
        let cap = n_out.div_ceil(workers.len());
        let mut load: BTreeMap<usize, usize> = workers.iter().map(|&w| (w, 0)).collect();
        let mut items = Vec::with_capacity(n_out);
        let mut sizes: BTreeMap<_, u64> = BTreeMap::new();
        for o_lin in 0..n_out {
            let o = out_blocking.multi(o_lin);
            let n_terms = if v.empty_product {
                0
            } else {
                v.reduce_blocking.num_blocks()
            };
            let mut terms = Vec::with_capacity(n_terms);
            for r_lin in 0..n_terms {
                let r = v.reduce_blocking.multi(r_lin);
                let term: Term = spec
                    .inputs()
                    .iter()
                    .zip(inputs)
                    .map(|(labels, m)| {
                        let (br, bytes) = block_index(labels, m, &o, &r);
                        sizes.insert(br.id, bytes);
                        br
                    })
                    .collect();
                terms.push(term);
            }
            let c_in = cm.map(|c| {
                sizes.insert(c.blocks[o_lin].id, c.block_bytes(o_lin));
                c.blocks[o_lin]
            });
            // Locality: bytes of this item's inputs already on each rank.
            let mut local: BTreeMap<usize, u64> = BTreeMap::new();
            let mut seen = BTreeSet::new();
            for r in terms.iter().flatten().chain(c_in.iter()) {
                if seen.insert(r.id) {
                    *local.entry(r.owner).or_default() += sizes[&r.id];
                }
            }
            let rank = workers
                .iter()
                .copied()
                .filter(|w| load[w] < cap)
                .max_by_key(|w| {
                    (
                        local.get(w).copied().unwrap_or(0),
                        std::cmp::Reverse(load[w]),
                        std::cmp::Reverse(*w),
                    )
                })
                .unwrap_or(workers[o_lin % workers.len()]);
            *load.entry(rank).or_default() += 1;
            let out_shape = out_blocking.block_shape(&o);
            // Per term: output block elements times the term's reduction block elements.
            let out_elems: u64 = out_shape.iter().map(|&n| n as u64).product();
            let flops = (0..terms.len())
                .map(|r_lin| {
                    let r = v.reduce_blocking.multi(r_lin);
                    out_elems
                        * v.reduce_blocking
                            .block_shape(&r)
                            .iter()
                            .map(|&n| n as u64)
                            .product::<u64>()
                })
                .sum();
            items.push(WorkItem {
                rank,
                out_block: o_lin,
                out_shape,
                terms,
                c_in,
                flops,
            });
        }
        let mut transfers = TransferSet::new();
        for it in &items {
            for r in it.terms.iter().flatten().chain(it.c_in.iter()) {
                transfers.need(r, sizes[&r.id], it.rank);
            }
        }
        let transfers: Vec<Transfer> = transfers.into_vec();
        let mut participants: BTreeSet<usize> = items.iter().map(|i| i.rank).collect();
        participants.extend(transfers.iter().flat_map(|t| [t.from, t.to]));
        let descriptor = ContractDescriptorV1 {
            spec: spec.clone(),
            alpha: v.alpha,
            beta: if v.use_c { v.beta } else { C64::new(0.0, 0.0) },
            conj: v.conj,
            out_dtype: v.out.dtype,
            items,
            transfers,
            out_names: Vec::new(),
            hold_replicas: false,
            block_pairs: false,
        };
        ContractPlan {
            descriptor,
            out_shape: v.out.shape.clone(),
            out_blocking: out_blocking.clone(),
            participants: participants.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::test_manifest;
    use uni20_dispatch::DType;

    /// The linear planner builds exactly the plan of the one it replaced:
    /// matrix products, a product with C, a contraction of a repeated
    /// label, over owner patterns that favour a few ranks (so the cap
    /// binds), owners outside the workers, and duplicate workers.
    #[test]
    fn the_planner_matches_the_reference_planner() {
        let owner_patterns: [fn(usize) -> usize; 4] = [
            |b| 1 + b % 3,
            |_| 2,
            |b| [0, 1, 5, 2, 2, 9][b % 6],
            |b| 1 + (b * 7 + b / 3) % 5,
        ];
        let worker_sets: [&[usize]; 4] = [&[1, 2, 3], &[2], &[1, 2, 3, 4, 5, 6, 7], &[3, 1, 3, 2]];
        let mut checked = 0;
        for (pa, pb) in [(0, 3), (1, 0), (2, 2), (3, 1)] {
            for workers in worker_sets {
                let a = test_manifest(
                    &[9, 8],
                    vec![vec![2, 3, 4], vec![3, 5]],
                    DType::F64,
                    1,
                    owner_patterns[pa],
                );
                let b = test_manifest(
                    &[8, 7],
                    vec![vec![3, 5], vec![1, 2, 4]],
                    DType::F64,
                    2,
                    owner_patterns[pb],
                );
                let c = test_manifest(
                    &[9, 7],
                    vec![vec![2, 3, 4], vec![1, 2, 4]],
                    DType::F64,
                    3,
                    owner_patterns[pb],
                );
                let sq = test_manifest(&[8, 8], vec![vec![3, 5], vec![3, 5]], DType::F64, 4, owner_patterns[pa]);
                let cases: Vec<(&str, Vec<&Manifest>, Option<&Manifest>, C64)> = vec![
                    ("ij,jk->ik", vec![&a, &b], None, C64::new(0.0, 0.0)),
                    ("ij,jk->ik", vec![&a, &b], Some(&c), C64::new(0.5, 0.0)),
                    ("ij,jk->ki", vec![&a, &b], None, C64::new(0.0, 0.0)),
                    ("ij,kj->ik", vec![&a, &a], None, C64::new(0.0, 0.0)),
                    ("ii,ij->j", vec![&sq, &b], None, C64::new(0.0, 0.0)),
                    ("ij->", vec![&a], None, C64::new(0.0, 0.0)),
                ];
                for (spec, ins, cm, beta) in cases {
                    let metas: Vec<TensorMeta> = ins.iter().map(|m| m.meta()).collect();
                    let refs: Vec<&TensorMeta> = metas.iter().collect();
                    let cmeta = cm.map(Manifest::meta);
                    let v = validate(spec, &refs, cmeta.as_ref(), C64::new(1.0, 0.0), beta, [false, false])
                        .unwrap_or_else(|e| panic!("{spec}: {e}"));
                    let got = plan(&v, workers, &ins, cm);
                    let want = reference::plan_reference(&v, workers, &ins, cm);
                    assert_eq!(got, want, "{spec} over {workers:?}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 96);
    }

    /// Both forms of the planned-pairs set answer alike.
    #[test]
    fn pair_sets_agree() {
        let mut bits = PairSet::new(7, 5);
        let mut hashed = PairSet::Hashed(HashSet::default());
        assert!(matches!(bits, PairSet::Bits { .. }));
        assert!(matches!(PairSet::new(1 << 20, 1 << 12), PairSet::Hashed(_)));
        for i in 0..200usize {
            let (o, s) = ((i * 5 + i / 7) % 7, (i * 3) % 5);
            assert_eq!(bits.insert(o, s), hashed.insert(o, s), "pair ({o}, {s})");
        }
        assert!(!bits.insert(6, 4) && !hashed.insert(6, 4));
    }
}
