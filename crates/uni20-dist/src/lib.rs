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
//! | `transfer` | worker-to-worker block transfers, shared by every family |
//! | `summary` | `PlanSummary`: a plan in numbers |
//! | `ops::contract` | `contract`, its pure planner, its command and handler |
//! | `ops::decomp` | `svd`, `qr`, `lq`, `eigh`: split parser, planner, commands and handlers |
//! | `ops::replicate` | `replicate` and its command |
//! | `ops::elementwise` | `axpby`, `scale`, `conj`, `permute`, `reshape`, their label specs and command |
//! | `ops::reblock` | `reblock`, `Tiling`, boxes assembled from another tiling's blocks |
//! | `ops::reduce` | `norm`, `inner`, `max_abs` (`reduce`) and their command |
//! | `ops::create` | `zeros`, `random`, `identity` and their command |
//! | `ops::deferred` | waiting for inputs, submitting, filling outputs |
//! | [`symmetry`] | abelian groups and charges, legs with sectors, the charge rule and allowed blocks, leg fusion |
//! | `npy` | distributed `.npy` reading and writing |
//! | `checkpoint` | checkpoints of named tensors (their blocks are kept) |
//! | `lifetimes` | `gc` across ranks from live tensors, checkpoints and named roots |
//!
//! Commands defined here (all registered at link time):
//! `uni20.contract.v1`, `uni20.svd.v1`, `uni20.qr.v1`, `uni20.eigh.v1`,
//! `uni20.distribute_factors.v1`, `uni20.replicate.v1`, `uni20.put_blocks.v1`,
//! `uni20.get_blocks.v1`, `uni20.npy_read.v1`, `uni20.npy_write.v1`,
//! `uni20.elementwise.v1`, `uni20.reblock.v1`, `uni20.reduce.v1`,
//! `uni20.create.v1`.

#![warn(missing_docs)]

mod checkpoint;
mod error;
pub mod layout;
mod lifetimes;
mod npy;
mod ops;
mod placement;
mod scatter;
mod summary;
pub mod symmetry;
mod tensor;
mod transfer;

pub use checkpoint::{checkpoint, flush_all, restore, retire, Checkpoint};
pub use error::DistError;
pub use layout::{Blocking, BlockingError, MAX_BLOCKS};
pub use lifetimes::{gc, GcTotals};
pub use npy::{
    npy_header_bytes, read_npy, read_npy_header, resolve_npy_output, write_npy, NpyLayout, NpyReadDesc, NpyReadV1,
    NpyWriteDesc, NpyWriteV1,
};
pub use ops::contract::{
    contract, contract_with, einsum, plan_contract, ContractDescriptorV1, ContractOptions, ContractPlan, ContractV1,
    WorkItem, MAX_BLOCK_BYTES, MAX_BLOCK_PRODUCTS,
};
pub use ops::create::{identity, random, zeros, CreateDescV1, CreateV1, Recipe};
pub use ops::decomp::{
    eigh, lq, qr, svd, DecompReplyV1, DistributeFactorsDescV1, DistributeFactorsV1, EighDescV1, EighOptions,
    EighOutput, EighV1, FactoredV1, LqOutput, MatrixDescV1, QrDescV1, QrOptions, QrOutput, QrV1, RejectionV1,
    SplitError, SvdDescV1, SvdOptions, SvdOutput, SvdTruncation, SvdV1, TruncationV1, DEFAULT_MAX_MATRIX_BYTES,
};
pub use ops::elementwise::{
    axpby, conj, permute, reshape, scale, ElementwiseDescV1, ElementwiseItem, ElementwiseOp, ElementwiseV1, LabelError,
    SecondOperand,
};
pub use ops::reblock::{reblock, BoxSource, Piece, ReblockDescV1, ReblockItem, ReblockV1, Tiling};
pub use ops::reduce::{inner, max_abs, norm, reduce, ReduceDescV1, ReduceItem, ReduceOp, ReduceV1, Reduced, Reduction};
pub use ops::replicate::{replicate, ReplicateDesc, ReplicateV1};
pub use placement::Placement;
pub use scatter::{GetBlocksDesc, GetBlocksV1, PutBlocksDesc, PutBlocksV1};
pub use summary::{PlanSummary, RankShare};
pub use tensor::{Block, BlockRef, DistTensor, Manifest, TensorMeta};
pub use transfer::{exchange_blocks, Transfer, TransferSet};

/// Referenced by the facade so the linker keeps this crate's command
/// registrations (a crate whose items are never used can be dropped).
#[doc(hidden)]
pub fn force_link() {
    std::hint::black_box(ContractV1::WIRE_NAME);
    std::hint::black_box([
        SvdV1::WIRE_NAME,
        QrV1::WIRE_NAME,
        EighV1::WIRE_NAME,
        DistributeFactorsV1::WIRE_NAME,
    ]);
}

use uni20_worker::CommandSpec as _;
