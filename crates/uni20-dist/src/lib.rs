//! # uni20-dist: the root controller's distributed operations
//!
//! Distributed tensors ([`DistTensor`]) are manifests on the root: global
//! shape, dtype, block grid, and per block the owner rank and persistent
//! object id. Operations are planned on the root and submitted as versioned
//! command descriptors; payloads move only between workers (or to the root
//! when the user asks: [`DistTensor::to_local`], [`write_npy`] header).
//!
//! Commands defined here (all registered at link time):
//! `uni20.contract.v1`, `uni20.put_blocks.v1`, `uni20.get_blocks.v1`,
//! `uni20.npy_read.v1`, `uni20.npy_write.v1`.

#![warn(missing_docs)]

mod checkpoint;
mod contract;
mod error;
pub mod layout;
mod npy;
mod tensor;

pub use checkpoint::{checkpoint, flush_all, restore, Checkpoint};
pub use contract::{
    contract, contract_with, plan_contract, replicate, ContractDescriptorV1, ContractOptions, ContractPlan, ContractV1,
    ReplicateDesc, ReplicateV1, Transfer, WorkItem,
};
pub use error::DistError;
pub use layout::Grid;
pub use npy::{
    npy_header_bytes, read_npy, read_npy_header, resolve_npy_output, write_npy, NpyLayout, NpyReadDesc, NpyReadV1,
    NpyWriteDesc, NpyWriteV1,
};
pub use tensor::{
    Block, BlockRef, DistTensor, GetBlocksDesc, GetBlocksV1, Manifest, Placement, PutBlocksDesc, PutBlocksV1,
    TensorMeta,
};

/// Referenced by the facade so the linker keeps this crate's command
/// registrations (a crate whose items are never used can be dropped).
#[doc(hidden)]
pub fn force_link() {
    std::hint::black_box(contract::ContractV1::WIRE_NAME);
}

use uni20_worker::CommandSpec as _;
