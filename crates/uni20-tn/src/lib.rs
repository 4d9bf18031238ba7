//! Tensor-network algorithms on uni20's distributed tensors: site types
//! ([`Site`]) and operator sums compiled into MPOs ([`OpSum`],
//! [`models`]), matrix-product states ([`Mps`]) and operators ([`Mpo`]),
//! environments and the matrix-free effective Hamiltonians
//! ([`TwoSiteHamiltonian`], [`OneSiteHamiltonian`]), Krylov solvers over
//! distributed vectors ([`lanczos_lowest`], [`krylov_exp`]), the open sweep
//! engine ([`SweepEngine`] running any [`LocalProblem`], with
//! [`SweepSchedule`], [`Observer`] and a mixer), finite two-site DMRG
//! ([`Dmrg`], checkpointed per sweep, excited states by projection),
//! two-site TDVP ([`Tdvp`]), TEBD ([`Tebd`]) and measurements
//! ([`measure`]).
//!
//! Everything here is written against the public API of `uni20-dist`
//! (`contract`, `svd`, `eigh`, `lq`, `axpby`, `inner`, `norm`, checkpoints): it is
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
mod sweep;
mod tdvp;
mod tebd;

pub use conserve::{bond_sectors, check_layouts, left_environment, right_environment, total_charge, SectorLeg};
pub use dmrg::{checkpoint_truncation, Dmrg, DmrgOptions, CHECKPOINT_LABEL};
pub use env::{grow_left, grow_left_fused, grow_right, grow_right_fused, Matvec, TwoSiteHamiltonian, FUSED_MAX_BOND};
pub use error::TnError;
pub use lanczos::{
    krylov_exp, lanczos_lowest, KrylovExp, LanczosOptions, LanczosResult, LinearOperator, DEFAULT_DENSE_MAX,
    E_TOL_ROUNDOFF_ULPS,
};
pub use mpo::{heisenberg_left, heisenberg_right, heisenberg_tensor, Mpo, HEISENBERG_BOND, MAX_SITES, SPIN_HALF};
pub use mps::{site_name, Mps};
pub use opsum::{LocalMpo, MpoOptions, OpSum, OpTerm};
pub use sites::{Conserve, Site, SiteOp};
pub use sweep::{
    CentreUpdate, Control, EnergyConvergence, EnvBudget, LocalProblem, LocalSolution, LocalStep, Observer,
    OneSiteHamiltonian, StepInfo, SweepEngine, SweepParams, SweepSchedule, SweepStats, DEFAULT_E_TOL_TO_ENERGY_CHANGE,
    DEFAULT_E_TOL_TO_TRUNCATION, MAX_ADAPTIVE_E_TOL, MAX_ADAPTIVE_TOL,
};
pub use tdvp::{Tdvp, TdvpOptions, TdvpStep};
pub use tebd::{Tebd, TebdOptions, TebdStep};
