//! The root's plan cache: an operation whose operands have the same block
//! structure as an earlier one reuses that operation's plan, re-bound to
//! the new operands' object ids, instead of planning again (every Lanczos
//! matvec of a DMRG step contracts tensors of one structure).
//!
//! - **Key** (structural, never the object ids): the family, its validated
//!   parameters (spec, scalars, conjugation, output description), the
//!   compute ranks, and per input its static description (shape, dtype,
//!   tiling, symmetric layout with its sectors and flux), the owner of
//!   every block, and the aliasing pattern (which block positions hold the
//!   same object id, within an input or across inputs). The plan is a
//!   function of exactly these, so two operations with equal keys get
//!   equal plans; keys are compared in full, not by hash.
//! - **Extents** (symmetric contractions, [`cached_items_refit`]): the key
//!   holds each symmetric operand's block structure (group, flux, and per
//!   leg its direction, sectors' charges and tile counts) instead of its
//!   extents, and a hit re-fits the plan to the operands' extents (block
//!   shapes, multiply-adds, transfer bytes, summary) after checking that
//!   every item reads exactly the block pairs this operation gives it. A
//!   converged symmetric DMRG sweep moves some sector's dimension by one at
//!   almost every bond, so keys with extents missed there two times in
//!   three; the re-fitted plan keeps its rank assignment, so the outputs
//!   keep their owners and the next operations hit as well.
//! - **Template**: the cached plan with, for every object id it names (in
//!   the descriptor's walk order, [`Rebind::ids_mut`]), the input and block
//!   position the id came from. Re-binding copies the plan and writes the
//!   new operands' ids at those positions; an id found in no input (never
//!   the case for the families cached today) makes the plan uncacheable.
//! - **Bound**: least recently used entries are evicted beyond the capacity
//!   (`UNI20_PLAN_CACHE` entries, default [`DEFAULT_PLAN_CACHE_ENTRIES`];
//!   0 disables the cache) or beyond the byte budget (`UNI20_PLAN_CACHE_BYTES`,
//!   default [`DEFAULT_PLAN_CACHE_BYTES`]: the estimated memory of the keys,
//!   templates and slots; a plan larger than the budget is not cached),
//!   shared by all families of one universe.
//!   Lookups are counted in the controller's
//!   [`RootProfile`](uni20_worker::RootProfile) and logged at debug level.

use rustc_hash::FxHashMap as HashMap;
use std::any::Any;

use serde::Serialize;
use uni20_persist::ObjectId;
use uni20_worker::Controller;

use super::items::ItemPlan;
use crate::tensor::Manifest;

/// Entries the plan cache holds unless `UNI20_PLAN_CACHE` says otherwise:
/// enough for every structure of a converged DMRG sweep to come back in
/// the next one (a symmetric L = 20 sweep plans about 400 distinct
/// contractions; most recur from sweep to sweep once the bonds' sectors
/// settle), where 64 only covers the matvecs within one step.
pub const DEFAULT_PLAN_CACHE_ENTRIES: usize = 2048;

/// Estimated bytes the plan cache may hold unless `UNI20_PLAN_CACHE_BYTES`
/// says otherwise (32 MiB).
pub const DEFAULT_PLAN_CACHE_BYTES: usize = 32 << 20;

/// A descriptor whose object ids can be re-bound: visits every object id
/// it names, always in the same order for descriptors of equal structure.
pub(crate) trait Rebind {
    /// Calls `f` on every object id of the descriptor, in a fixed order.
    fn ids_mut(&mut self, f: &mut dyn FnMut(&mut ObjectId));
    /// Estimated heap and inline bytes of the descriptor (for the cache's
    /// byte budget; computed from its lengths, not by encoding it).
    fn approx_bytes(&self) -> usize;
}

/// Numbers of one universe's plan cache ([`plan_cache_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanCacheStats {
    /// Plans held now.
    pub entries: usize,
    /// Most plans held (0: the cache is off).
    pub capacity: usize,
    /// Lookups that reused a plan.
    pub hits: u64,
    /// Lookups that planned (and cached the plan when it could).
    pub misses: u64,
    /// Plans dropped to stay within the capacity or the byte budget.
    pub evictions: u64,
    /// Estimated bytes held now (keys, templates, slots).
    pub bytes: usize,
    /// The byte budget.
    pub budget_bytes: usize,
}

impl PlanCacheStats {
    /// Hits over lookups, in `[0, 1]` (0 with no lookups).
    pub fn hit_rate(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            0.0
        } else {
            self.hits as f64 / n as f64
        }
    }
}

struct Entry {
    plan: Box<dyn Any>,
    slots: Vec<(u32, u32)>,
    last_used: u64,
    bytes: usize,
}

/// The cache itself, one per universe (kept in the controller's root
/// state).
pub(crate) struct PlanCache {
    entries: HashMap<Vec<u8>, Entry>,
    capacity: usize,
    budget: usize,
    bytes: usize,
    tick: u64,
    stats: PlanCacheStats,
}

impl Default for PlanCache {
    fn default() -> PlanCache {
        let capacity = std::env::var("UNI20_PLAN_CACHE")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(DEFAULT_PLAN_CACHE_ENTRIES);
        let budget = std::env::var("UNI20_PLAN_CACHE_BYTES")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(DEFAULT_PLAN_CACHE_BYTES);
        PlanCache {
            entries: HashMap::default(),
            capacity,
            budget,
            bytes: 0,
            tick: 0,
            stats: PlanCacheStats::default(),
        }
    }
}

impl PlanCache {
    /// Evicts least recently used entries until at most `n` entries and at
    /// most the byte budget are held: one sort of the entries' last uses
    /// per call, however many go (a scan per evicted entry made a full
    /// cache's misses quadratic).
    fn evict_to(&mut self, n: usize) {
        if self.entries.len() <= n && self.bytes <= self.budget {
            return;
        }
        let mut uses: Vec<(u64, usize)> = self.entries.values().map(|e| (e.last_used, e.bytes)).collect();
        uses.sort_unstable();
        let (mut len, mut bytes) = (self.entries.len(), self.bytes);
        let mut cut = None;
        for (last_used, b) in uses {
            if len <= n && bytes <= self.budget {
                break;
            }
            len -= 1;
            bytes = bytes.saturating_sub(b);
            cut = Some(last_used);
        }
        let Some(cut) = cut else {
            return;
        };
        let before = self.entries.len();
        let mut freed = 0;
        self.entries.retain(|_, e| {
            let keep = e.last_used > cut;
            if !keep {
                freed += e.bytes;
            }
            keep
        });
        self.bytes = self.bytes.saturating_sub(freed);
        self.stats.evictions += (before - self.entries.len()) as u64;
    }
}

/// The numbers of `ctl`'s plan cache: entries, capacity, hits, misses and
/// evictions since the universe started (or since the capacity was last
/// set).
pub fn plan_cache_stats(ctl: &Controller<'_>) -> PlanCacheStats {
    ctl.with_root_state(|c: &mut PlanCache| PlanCacheStats {
        entries: c.entries.len(),
        capacity: c.capacity,
        bytes: c.bytes,
        budget_bytes: c.budget,
        ..c.stats
    })
}

/// Sets how many plans `ctl`'s plan cache holds (0 turns it off), evicting
/// the least recently used ones beyond it, and resets its counters. The
/// initial capacity is `UNI20_PLAN_CACHE` (default
/// [`DEFAULT_PLAN_CACHE_ENTRIES`]).
pub fn set_plan_cache_capacity(ctl: &Controller<'_>, capacity: usize) {
    ctl.with_root_state(|c: &mut PlanCache| {
        c.capacity = capacity;
        c.evict_to(capacity);
        c.stats = PlanCacheStats::default();
    });
}

/// Sets the estimated bytes `ctl`'s plan cache may hold, evicting the least
/// recently used plans beyond it (the counters are kept). The initial
/// budget is `UNI20_PLAN_CACHE_BYTES` (default [`DEFAULT_PLAN_CACHE_BYTES`]).
pub fn set_plan_cache_budget(ctl: &Controller<'_>, bytes: usize) {
    ctl.with_root_state(|c: &mut PlanCache| {
        c.budget = bytes;
        let n = c.capacity;
        c.evict_to(n);
    });
}

/// How a plan-cache key describes a symmetric operand.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyExtents {
    /// In full: shape, tiling and every sector's dimension and tiles (the
    /// plan depends on them).
    Full,
    /// Without extents: group, flux, and per leg its direction, sectors'
    /// charges and tile counts (the block structure), for a family whose
    /// cached plan is re-fitted to the operands' extents on a hit.
    Structure,
}

/// Appends the block structure of a symmetric layout, without extents
/// ([`KeyExtents::Structure`]): two layouts with equal structure have the
/// same allowed blocks in the same order (the charge rule reads charges
/// and tile counts only).
pub(crate) fn write_structure(key: &mut Vec<u8>, l: &crate::symmetry::SymmetricLayout) -> Option<()> {
    let sym = uni20_worker::envelope::encode(l.symmetry());
    if sym.is_empty() {
        return None;
    }
    key.extend_from_slice(&(sym.len() as u64).to_le_bytes());
    key.extend_from_slice(&sym);
    let charge = |key: &mut Vec<u8>, c: &crate::symmetry::Charge| {
        key.extend_from_slice(&(c.components().len() as u32).to_le_bytes());
        for &x in c.components() {
            key.extend_from_slice(&x.to_le_bytes());
        }
    };
    charge(key, l.flux());
    key.extend_from_slice(&(l.legs().len() as u32).to_le_bytes());
    for leg in l.legs() {
        key.push(leg.direction() as u8);
        key.extend_from_slice(&(leg.sectors().len() as u32).to_le_bytes());
        for (s, sector) in leg.sectors().iter().enumerate() {
            charge(key, &sector.charge);
            key.extend_from_slice(&(leg.sector_tiles(s).len() as u32).to_le_bytes());
        }
    }
    Some(())
}

/// The structural key of an operation (see the module docs), or `None`
/// when a part cannot be encoded (the operation is then not cached).
fn structural_key(
    family: &str,
    params: &impl Serialize,
    workers: &[usize],
    inputs: &[&Manifest],
    extents: KeyExtents,
) -> Option<Vec<u8>> {
    let mut key = Vec::with_capacity(256);
    key.extend_from_slice(family.as_bytes());
    key.push(0);
    let p = uni20_worker::envelope::encode(params);
    if p.is_empty() {
        return None;
    }
    key.extend_from_slice(&(p.len() as u64).to_le_bytes());
    key.extend_from_slice(&p);
    key.extend_from_slice(&(workers.len() as u64).to_le_bytes());
    for &w in workers {
        key.extend_from_slice(&(w as u64).to_le_bytes());
    }
    let mut first: HashMap<ObjectId, (u32, u32)> = HashMap::default();
    for (i, m) in inputs.iter().enumerate() {
        match (&m.symmetric, extents) {
            (Some(l), KeyExtents::Structure) => {
                key.push(b'S');
                key.push(m.dtype as u8);
                write_structure(&mut key, l)?;
            }
            _ => {
                let meta = uni20_worker::envelope::encode(&(&m.shape, m.dtype, &m.blocking, &m.symmetric));
                if meta.is_empty() {
                    return None;
                }
                key.push(b'I');
                key.extend_from_slice(&(meta.len() as u64).to_le_bytes());
                key.extend_from_slice(&meta);
            }
        }
        key.extend_from_slice(&(m.blocks.len() as u64).to_le_bytes());
        for (b, r) in m.blocks.iter().enumerate() {
            key.extend_from_slice(&(r.owner as u32).to_le_bytes());
            let here = (i as u32, b as u32);
            let at = *first.entry(r.id).or_insert(here);
            if at != here {
                // An alias: position (i, b) holds the id first seen at `at`.
                key.push(b'A');
                key.extend_from_slice(&at.0.to_le_bytes());
                key.extend_from_slice(&at.1.to_le_bytes());
            }
        }
    }
    Some(key)
}

/// Plans with `plan` or reuses a cached plan of the same structure (see the
/// module docs): `family` names the operation (and the descriptor type),
/// `params` its validated parameters, `inputs` every manifest the plan
/// reads (in a fixed order). Counts the lookup in `ctl`'s profile.
pub(crate) fn cached_items<D>(
    ctl: &Controller<'_>,
    family: &'static str,
    params: &impl Serialize,
    workers: &[usize],
    inputs: &[&Manifest],
    plan: impl FnOnce() -> ItemPlan<D>,
) -> ItemPlan<D>
where
    D: Rebind + Clone + 'static,
{
    lookup(ctl, family, params, workers, inputs, KeyExtents::Full, |_| true, plan)
}

/// As [`cached_items`], for a family whose plan depends on its symmetric
/// operands' extents only through numbers it can compute again (block
/// shapes, multiply-adds, transfer bytes): the key holds the operands'
/// block structure without extents ([`KeyExtents::Structure`]), and on a hit
/// `refit` brings the re-bound plan to this operation's extents, checking
/// that its block structure is this operation's. A `refit` that returns
/// false (the plan does not fit) counts as a miss: the operation is planned
/// again and its plan replaces the cached one, so a plan is never used
/// where it does not fit.
///
/// A symmetric DMRG sweep moves a sector's dimension by one from sweep to
/// sweep at most bonds, where the structure recurs; and a re-used plan
/// keeps its rank assignment, so its outputs keep their owners and the
/// operations that read them find their plans too.
pub(crate) fn cached_items_refit<D>(
    ctl: &Controller<'_>,
    family: &'static str,
    params: &impl Serialize,
    workers: &[usize],
    inputs: &[&Manifest],
    refit: impl FnOnce(&mut ItemPlan<D>) -> bool,
    plan: impl FnOnce() -> ItemPlan<D>,
) -> ItemPlan<D>
where
    D: Rebind + Clone + 'static,
{
    lookup(ctl, family, params, workers, inputs, KeyExtents::Structure, refit, plan)
}

/// The lookup of [`cached_items`] and [`cached_items_refit`].
#[allow(clippy::too_many_arguments)]
fn lookup<D>(
    ctl: &Controller<'_>,
    family: &'static str,
    params: &impl Serialize,
    workers: &[usize],
    inputs: &[&Manifest],
    extents: KeyExtents,
    refit: impl FnOnce(&mut ItemPlan<D>) -> bool,
    plan: impl FnOnce() -> ItemPlan<D>,
) -> ItemPlan<D>
where
    D: Rebind + Clone + 'static,
{
    let capacity = ctl.with_root_state(|c: &mut PlanCache| c.capacity);
    let key = if capacity == 0 {
        None
    } else {
        structural_key(family, params, workers, inputs, extents)
    };
    let Some(key) = key else {
        return plan();
    };
    let hit = ctl.with_root_state(|c: &mut PlanCache| {
        c.tick += 1;
        let tick = c.tick;
        let e = c.entries.get_mut(&key)?;
        let template = e.plan.downcast_ref::<ItemPlan<D>>()?;
        e.last_used = tick;
        let mut p = template.clone();
        let mut slots = e.slots.iter();
        let mut complete = true;
        p.descriptor.ids_mut(&mut |id| match slots.next() {
            Some(&(i, b)) => *id = inputs[i as usize].blocks[b as usize].id,
            None => complete = false,
        });
        (complete && slots.next().is_none()).then_some(p)
    });
    let hit = hit.and_then(|mut p| refit(&mut p).then_some(p));
    ctl.note_plan_lookup(hit.is_some());
    if let Some(mut p) = hit {
        p.summary.cached = true;
        ctl.with_root_state(|c: &mut PlanCache| {
            c.stats.hits += 1;
            tracing::debug!(
                family,
                hits = c.stats.hits,
                misses = c.stats.misses,
                "plan cache hit (hit rate {:.1} %)",
                c.stats.hit_rate() * 100.0
            );
        });
        return p;
    }
    let mut p = plan();
    let mut index: HashMap<ObjectId, (u32, u32)> = HashMap::default();
    for (i, m) in inputs.iter().enumerate() {
        for (b, r) in m.blocks.iter().enumerate() {
            index.entry(r.id).or_insert((i as u32, b as u32));
        }
    }
    let mut slots = Vec::new();
    let mut known = true;
    p.descriptor.ids_mut(&mut |id| match index.get(id) {
        Some(&s) => slots.push(s),
        None => known = false,
    });
    ctl.with_root_state(|c: &mut PlanCache| {
        c.stats.misses += 1;
        let bytes = key.len()
            + slots.len() * std::mem::size_of::<(u32, u32)>()
            + p.descriptor.approx_bytes()
            + p.out_blocks.len() * std::mem::size_of::<usize>()
            + std::mem::size_of::<ItemPlan<D>>()
            + 256;
        if known && bytes <= c.budget {
            let last_used = c.tick;
            let old = c.entries.insert(
                key,
                Entry {
                    plan: Box::new(p.clone()),
                    slots,
                    last_used,
                    bytes,
                },
            );
            c.bytes += bytes;
            if let Some(old) = old {
                c.bytes = c.bytes.saturating_sub(old.bytes);
            }
            // Over capacity, an eighth more goes at once, so that a full
            // cache sorts its entries once per `capacity / 8` misses.
            let cap = c.capacity;
            if c.entries.len() > cap {
                c.evict_to(cap - cap / 8);
            } else {
                c.evict_to(cap);
            }
        }
        tracing::debug!(
            family,
            entries = c.entries.len(),
            bytes = c.bytes,
            hits = c.stats.hits,
            misses = c.stats.misses,
            "plan cache miss (hit rate {:.1} %)",
            c.stats.hit_rate() * 100.0
        );
    });
    p
}
