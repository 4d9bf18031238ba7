//! # uni20-dist: the root controller's distributed operations
//!
//! Distributed tensors ([`DistTensor`]) are manifests on the root: global
//! shape, dtype, block tiling, and per block the owner rank and persistent
//! object id. Operations are planned on the root and submitted as versioned
//! command descriptors; payloads move only between workers (or to the root
//! when the user asks: [`DistTensor::to_local`], [`DistTensor::from_local`]).
//!
//! | module | owns |
//! |---|---|
//! | `tensor` | `DistTensor`, `TensorMeta`, `Manifest`, `BlockRef`, the `Block` object type |
//! | [`layout`] | `Blocking` (block tilings) and byte-level box copies |
//! | `placement` | `Placement`: which ranks own the blocks of a new tensor |
//! | `scatter` | `from_local` / `to_local` and their commands |
//! | `transfer` | worker-to-worker block transfers (`transfer/record.rs`: the plain `Transfer` record, a leaf) |
//! | `summary` | `PlanSummary`: a plan in numbers |
//! | `ops::kit` | what every family shares: item assignment, block sources, item plans and their submission, size limits, the deferred submit/fill/poison machinery, the generic item handler |
//! | `ops::contract` | `contract`, `einsum`, its pure planner (`plan`), operand alignment (`align`), its command |
//! | `ops::decomp` | `svd`, `qr`, `lq`, `eigh`: split parser, planner, commands, worker assembly, root flow |
//! | `ops::replicate` | `replicate` and `place`, their planners and command |
//! | `ops::elementwise` | `axpby`, `lincomb`, `scale`, `conj`, `permute`, `reshape`, their label specs, planner and command; on symmetric tensors also `fuse_legs` / `split_leg` (`symmetric`: layouts and copy geometry; `regroup`: their command) |
//! | `ops::reblock` | `reblock`, its planner and command |
//! | `ops::reduce` | `norm`, `inner`, `max_abs` (`reduce`), its planner and command |
//! | `ops::create` | `zeros`, `random`, `identity`, their planner and command |
//! | [`symmetry`] | abelian groups and charges, legs with sectors, the charge rule and allowed blocks, leg fusion, contraction pairs, truncation across sectors |
//! | [`npy`] | distributed `.npy` reading and writing |
//! | `offload` | `offload` / `prefetch` of a tensor's blocks on their owners, their commands and the root's byte counts |
//! | `checkpoint` | checkpoints of named tensors (their blocks are kept) |
//! | `lifetimes` | `gc` across ranks from live tensors, checkpoints and named roots |
//! | [`spmd`] | the collective operations of the expert SPMD mode |
//!
//! Each family folder under `ops` has the same files: `mod.rs` (public
//! calls), `plan.rs` (pure planner, unit-tested without a universe) and
//! `command.rs` (descriptor, per-item compute, one `command!` line).
//! Descriptors, items and planners are crate-private; what a program calls
//! is re-exported below.
//!
//! Commands defined here (all registered at link time):
//! `uni20.contract.v1`, `uni20.svd.v1`, `uni20.qr.v1`, `uni20.eigh.v1`,
//! `uni20.distribute_factors.v1`, `uni20.sym_factorize.v1`, `uni20.sym_cut.v1`, `uni20.replicate.v1`, `uni20.put_blocks.v1`,
//! `uni20.get_blocks.v1`, `uni20.npy_read.v1`, `uni20.npy_write.v1`,
//! `uni20.offload.v1`, `uni20.prefetch.v1`, `uni20.elementwise.v1`, `uni20.regroup.v1`, `uni20.reblock.v1`, `uni20.reduce.v1`,
//! `uni20.create.v1`.

#![warn(missing_docs)]
#![deny(unreachable_pub)]

mod checkpoint;
pub mod error;
pub mod layout;
mod lifetimes;
pub mod npy;
mod offload;
mod ops;
mod placement;
mod redistribute;
mod scatter;
pub mod spmd;
mod summary;
pub mod symmetry;
mod tensor;
mod transfer;

// Tensors, tilings and placement.
pub use layout::Blocking;
pub use ops::kit::tiling::Tiling;
pub use placement::Placement;
pub use tensor::{Block, BlockRef, DistTensor, Manifest, TensorMeta};

// Offload and prefetch of a tensor's blocks.
pub use offload::{offload, prefetch, residency_stats, ResidencyStats};

// Contraction.
pub use ops::contract::{contract, contract_with, einsum, ContractOptions};

// The root's plan cache.
pub use ops::kit::{
    plan_cache_stats, set_plan_cache_budget, set_plan_cache_capacity, PlanCacheStats, DEFAULT_PLAN_CACHE_BYTES,
    DEFAULT_PLAN_CACHE_ENTRIES,
};

// Pipelined submission (outputs named at submission).
pub use ops::kit::{pipelining, set_pipelining};

// Replicas kept between commands.
pub use ops::kit::{replica_budget, set_replica_budget};

// Element-wise operations, redistribution and replication.
pub use ops::elementwise::{axpby, conj, fuse_legs, lincomb, permute, reshape, scale, split_leg};
pub use ops::reblock::reblock;
pub use ops::replicate::{place, replicate};

// Creation on the workers (dense, and symmetric: charge-allowed blocks only).
pub use ops::create::{identity, random, sym_identity, sym_random, sym_zeros, zeros};

// Reductions to one number.
pub use ops::reduce::{inner, max_abs, norm, reduce, reduce_many, Reduced, Reduction};

// Decompositions (their options and outputs are in [`decomp`]).
pub use ops::decomp::{eigh, lq, qr, svd};

// Files, checkpoints and block lifetimes.
pub use checkpoint::{
    checkpoint, flush_all, flush_checkpoint, restore, restore_redistributed, retire, Checkpoint, Restored,
};
pub use lifetimes::{gc, GcTotals};
pub use npy::{read_npy, write_npy};
pub use redistribute::{redistribute, Redistribution};

// Plans and errors.
pub use error::DistError;
pub use summary::PlanSummary;

/// Decompositions of a tensor viewed as a matrix: the calls (also at the
/// crate root), their options and outputs, and the matrix-size limit.
pub mod decomp {
    pub use crate::ops::decomp::{
        eigh, lq, qr, svd, BondSector, EighOptions, EighOutput, LqOutput, QrOptions, QrOutput, SvdOptions, SvdOutput,
        SvdTruncation, DEFAULT_MAX_MATRIX_BYTES,
    };
}

/// The family kit: what an operation family whose command computes one
/// output block per item is written with, in this crate or outside it
/// (`examples/kit_family`). A family is a folder of three files: `mod.rs`
/// (its public call: validate, then [`defer_items`](kit::defer_items)),
/// `plan.rs` (a pure planner returning an [`ItemPlan`](kit::ItemPlan):
/// items assigned with an [`Assigner`](kit::Assigner), blocks to move in a
/// [`TransferSet`](kit::TransferSet)) and `command.rs` (the descriptor, its
/// [`ItemWork`](kit::ItemWork) impl, whose `compute` is the per-item
/// function, and one `command!` line naming
/// [`handle_items`](kit::handle_items)).
pub mod kit {
    pub use crate::ops::kit::{
        defer_items, handle_items, participants_of, Assigner, CostAssigner, ItemPlan, ItemWork, NamedOutputs, Shares,
    };
    pub use crate::transfer::record::Transfer;
    pub use crate::transfer::TransferSet;
}

/// Plans without running them, and the limits every plan respects.
pub mod plan {
    pub use crate::ops::contract::{plan_contract, ContractPlan, MAX_BLOCK_PRODUCTS};
    pub use crate::ops::kit::tiling::MAX_BLOCK_BYTES;
    pub use crate::summary::{PlanSummary, RankShare};
}

/// Entry points for the decoding fuzz test (`tests/decode_fuzz.rs`), which
/// needs a global allocator of its own and so cannot be a unit test: the
/// contraction descriptor's bytes and its worker-side decoding, without
/// exposing the descriptor type. Not part of the API.
#[doc(hidden)]
pub mod fuzz {
    use crate::ops::contract::ContractPlan;

    /// The postcard bytes of `plan`'s `uni20.contract.v1` descriptor.
    pub fn contract_descriptor_bytes(plan: &ContractPlan) -> Vec<u8> {
        uni20_worker::envelope::encode(&plan.descriptor)
    }

    /// Decodes `bytes` as a `uni20.contract.v1` descriptor exactly as a
    /// worker does (`uni20_worker::decode_exact`: no trailing bytes).
    ///
    /// # Errors
    /// The decode error's text.
    pub fn decode_contract_descriptor(bytes: &[u8]) -> Result<(), String> {
        uni20_worker::envelope::decode_exact::<crate::ops::contract::ContractDescriptorV1>(bytes, "descriptor")
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// Referenced by the facade so the linker keeps this crate's command
/// registrations (a crate whose items are never used can be dropped).
#[doc(hidden)]
pub fn force_link() {
    std::hint::black_box(ops::contract::ContractV1::WIRE_NAME);
    std::hint::black_box([
        ops::decomp::SvdV1::WIRE_NAME,
        ops::decomp::QrV1::WIRE_NAME,
        ops::decomp::EighV1::WIRE_NAME,
        ops::decomp::DistributeFactorsV1::WIRE_NAME,
        ops::decomp::SymFactorizeV1::WIRE_NAME,
        ops::decomp::SymCutV1::WIRE_NAME,
    ]);
}

use uni20_worker::CommandSpec as _;

#[cfg(test)]
mod tests {
    /// The commands declared with `command!` keep their wire names, schema
    /// versions and debug names (they appear in diagnostics and in the
    /// start-up registry comparison).
    #[test]
    fn every_command_keeps_its_wire_name_schema_and_debug_name() {
        let registry = uni20_worker::Registry::linked().unwrap();
        let expected = [
            ("uni20.contract.v1", 5, "contract"),
            ("uni20.svd.v1", 1, "svd"),
            ("uni20.qr.v1", 1, "qr"),
            ("uni20.eigh.v1", 1, "eigh"),
            ("uni20.distribute_factors.v1", 1, "distribute_factors"),
            ("uni20.sym_factorize.v1", 1, "sym_factorize"),
            ("uni20.sym_cut.v1", 1, "sym_cut"),
            ("uni20.replicate.v1", 1, "replicate"),
            ("uni20.put_blocks.v1", 1, "put_blocks"),
            ("uni20.get_blocks.v1", 1, "get_blocks"),
            ("uni20.npy_read.v1", 2, "npy_read"),
            ("uni20.npy_write.v1", 1, "npy_write"),
            ("uni20.elementwise.v1", 4, "elementwise"),
            ("uni20.regroup.v1", 3, "regroup"),
            ("uni20.reblock.v1", 3, "reblock"),
            ("uni20.reduce.v1", 2, "reduce"),
            ("uni20.reduce_many.v1", 2, "reduce_many"),
            ("uni20.create.v1", 1, "create"),
            ("uni20.noop.v1", 1, "noop"),
            ("uni20.flush.v1", 1, "flush"),
            ("uni20.flush_objects.v1", 1, "flush_objects"),
            ("uni20.storage.v1", 1, "storage"),
            ("uni20.sendrecv.v1", 1, "sendrecv"),
            ("uni20.release.v1", 1, "release"),
            ("uni20.store_stats.v1", 1, "store_stats"),
            ("uni20.gc.v1", 1, "gc"),
            ("uni20.adopt.v1", 1, "adopt"),
            ("uni20.offload.v1", 1, "offload"),
            ("uni20.prefetch.v1", 1, "prefetch"),
        ];
        for (wire, schema, debug) in expected {
            let e = registry
                .by_wire_name(wire)
                .unwrap_or_else(|| panic!("{wire} is not registered"));
            assert_eq!((e.schema_version, e.debug_name), (schema, debug), "{wire}");
            assert_eq!(e.command_id, uni20_worker::command_id(wire));
        }
        assert_eq!(registry.entries().len(), expected.len());
    }
}
