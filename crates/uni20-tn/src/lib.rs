//! Tensor-network algorithms on uni20's distributed tensors: matrix-product
//! states ([`Mps`]) and operators ([`Mpo`], with the Heisenberg chain),
//! environments and the matrix-free two-site effective Hamiltonian
//! ([`TwoSiteHamiltonian`]), the Lanczos eigensolver over distributed
//! vectors ([`lanczos_lowest`]) and finite two-site DMRG ([`Dmrg`]),
//! checkpointed per sweep.
//!
//! Everything here is written against the public API of `uni20-dist`
//! (`contract`, `svd`, `lq`, `axpby`, `inner`, `norm`, checkpoints): it is
//! the template for a user's own algorithm. Every tensor stays on the
//! workers; the root sees only scalars (Lanczos coefficients, singular
//! values) and manifests. `examples/dmrg.rs` is the command-line front end.

#![warn(missing_docs)]
#![deny(unreachable_pub)]

pub mod conserve;
mod dmrg;
mod env;
mod error;
mod excited;
mod lanczos;
pub mod measure;
pub mod models;
mod mpo;
mod mps;
mod opsum;
mod sites;
mod split;
mod states;
mod tebd;

pub use conserve::{bond_sectors, check_layouts, left_environment, right_environment, total_charge, SectorLeg};
pub use dmrg::{checkpoint_truncation, Dmrg, DmrgOptions, StepInfo, SweepStats, CHECKPOINT_LABEL, MAX_ADAPTIVE_TOL};
pub use env::{grow_left, grow_right, Matvec, TwoSiteHamiltonian};
pub use error::TnError;
pub use lanczos::{lanczos_lowest, LanczosOptions, LanczosResult, LinearOperator};
pub use mpo::{heisenberg_left, heisenberg_right, heisenberg_tensor, Mpo, HEISENBERG_BOND, MAX_SITES, SPIN_HALF};
pub use mps::{site_name, Mps};
pub use opsum::{LocalMpo, MpoOptions, OpSum, OpTerm};
pub use sites::{Conserve, Site, SiteOp};
pub use tebd::{Tebd, TebdOptions, TebdStep};
