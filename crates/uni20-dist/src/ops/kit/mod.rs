//! The family kit: what every operation family shares, so that no family
//! imports another one's internals.
//!
//! | file | holds |
//! |---|---|
//! | `assign` | [`Assigner`]: the rank of each work item (most local bytes under a load cap); [`CostAssigner`]: the same under a cap on each rank's summed flops |
//! | `source` | [`BoxSource`], `Piece`: a box of a tensor and the blocks that overlap it (plan and worker side); [`place_reading`]: an item's rank and input transfers |
//! | `tiling` | [`Tiling`] (how a caller names a tiling), [`check_block_bytes`], [`MAX_BLOCK_BYTES`] |
//! | `cache` | the plan cache: structural keys, plans re-bound to new object ids, LRU bound ([`plan_cache_stats`]) |
//! | `items` | the root side of an item-per-block command: [`ItemPlan`], [`participants_of`], [`submit_items`] (which splits the plan per rank: [`Shares`]), [`defer_items`] |
//! | `replicas` | replicas kept between commands: transfers to a rank that holds the block taken out of the plan, the command told to keep what it receives ([`set_replica_budget`]) |
//! | `worker` | the worker side: the [`ItemWork`] trait and its one generic handler [`handle_items`] |
//! | `deferred` | waiting for inputs in program order, submitting without blocking, filling or poisoning outputs |
//!
//! Writing a family whose command computes one output block per item:
//! a descriptor holding the items and the transfers, an [`ItemWork`] impl
//! naming them (`work`, `place`) and computing one item's block (`compute`), one
//! `command!(pub MyV1 = "uni20.my.v1", schema 1, MyDescV1 => Vec<(usize, ObjectId)>, handle_items::<MyDescV1>)`
//! line, and a planner returning an [`ItemPlan`] that [`defer_items`]
//! (inputs not ready yet) or [`submit_items`] submits. Families whose
//! command does something else (reductions, decompositions) use the pieces
//! they need.

pub(crate) mod assign;
pub(crate) mod cache;
pub(crate) mod deferred;
pub(crate) mod items;
pub(crate) mod replicas;
pub(crate) mod source;
pub(crate) mod tiling;
pub(crate) mod worker;

pub use assign::{Assigner, CostAssigner};
pub(crate) use cache::{cached_items, cached_items_refit, write_structure, Rebind};
pub use cache::{
    plan_cache_stats, set_plan_cache_budget, set_plan_cache_capacity, PlanCacheStats, DEFAULT_PLAN_CACHE_BYTES,
    DEFAULT_PLAN_CACHE_ENTRIES,
};
pub(crate) use items::submit_items;
pub use items::{defer_items, participants_of, pipelining, set_pipelining, ItemPlan, Shares};
pub use replicas::{replica_budget, set_replica_budget};
pub(crate) use source::{place_reading, rebuilt_bytes, stored_alike, BoxSource};
pub(crate) use tiling::{check_block_bytes, check_plan_size, Tiling, MAX_BLOCK_BYTES};
pub(crate) use worker::item_work_fields;
pub use worker::{handle_items, ItemWork, NamedOutputs};
