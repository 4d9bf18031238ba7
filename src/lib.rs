//! # uni20: ordinary tensor-network code across MPI ranks
//!
//! `uni20` starts a *universe* of ranks. Rank 0, the root, runs your code;
//! every other rank runs a worker loop. Distributed tensors live as blocks in
//! the workers' persistent stores; operations such as [`contract`] are
//! planned on the root and submitted as versioned command descriptors, and
//! payloads move between workers, never through the root.
//!
//! ```no_run
//! use uni20::prelude::*;
//!
//! fn main() -> std::process::ExitCode {
//!     uni20::launch(|ctl| {
//!         let a = LocalTensor::from_f64(&[2, 3], vec![1., 2., 3., 4., 5., 6.])?;
//!         let b = LocalTensor::from_f64(&[3, 2], vec![1., 0., 0., 1., 1., 1.])?;
//!         let (a, b) = (DistTensor::from_local(ctl, &a, 2)?, DistTensor::from_local(ctl, &b, 2)?);
//!         let c = contract(ctl, "ij,jk->ik", &a, &b)?;
//!         println!("{:?}", c.to_local(ctl)?);
//!         Ok(())
//!     })
//! }
//! ```
//!
//! Transports: the in-process universe (ranks as threads; default; `UNI20_RANKS`
//! ranks, default 4) needs no MPI. Built with feature `mpi` and started by
//! `mpirun`, each process is one rank (`cargo xtask mpirun -n 3 --example
//! heisenberg`). The design lives in `docs/architecture.md`.

#![warn(missing_docs)]

use std::process::ExitCode;

pub use uni20_async;
pub use uni20_dispatch as dispatch;
pub use uni20_dist as dist;
pub use uni20_persist as persist;
pub use uni20_worker as worker;

pub use uni20_dispatch::{BackendList, DType, EinsumSpec, LocalTensor, TensorData, C32, C64};
pub use uni20_dist::{
    checkpoint, contract, contract_with, flush_all, plan_contract, read_npy, restore, write_npy, Blocking, Checkpoint,
    ContractOptions, ContractPlan, DistError, DistTensor, Manifest, Placement, PlanSummary, TensorMeta,
};
pub use uni20_dist::{
    eigh, lq, qr, svd, EighOptions, EighOutput, LqOutput, QrOptions, QrOutput, SplitError, SvdOptions, SvdOutput,
    SvdTruncation, DEFAULT_MAX_MATRIX_BYTES,
};
pub use uni20_worker::{
    register_command, CommandSpec, Controller, HandlerError, JobError, TransportChoice, TypedHandler, UniverseBuilder,
    WorkerContext,
};

/// The names most programs need.
pub mod prelude {
    pub use crate::{
        contract, contract_with, read_npy, write_npy, ContractOptions, Controller, DType, DistTensor, EinsumSpec,
        LocalTensor, Placement, UniverseBuilder, C64,
    };
    pub use crate::{eigh, lq, qr, svd, EighOptions, QrOptions, SvdOptions, SvdTruncation};
}

/// A universe builder with every operation crate force-linked, so their
/// command handlers are in the registry of every rank.
pub fn universe() -> UniverseBuilder {
    uni20_dist::force_link();
    UniverseBuilder::new()
}

/// Installs a `tracing` subscriber filtered by `UNI20_LOG` (e.g.
/// `UNI20_LOG=debug`; default `error`), writing to stderr. Does nothing if a
/// subscriber is already installed.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("UNI20_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Runs `f` on the root of a default universe (see [`universe`]) and turns
/// the outcome into a process exit status: success only if the universe
/// started and `f` returned `Ok`. Errors are printed to stderr once.
///
/// Under MPI, worker ranks never return from this call (they exit when the
/// root shuts the job down).
pub fn launch<F>(f: F) -> ExitCode
where
    F: FnOnce(&Controller<'_>) -> anyhow::Result<()>,
{
    init_logging();
    match universe().run(f) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("uni20: error: {e:#}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("uni20: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The README's Rust examples, compiled (and run, unless marked `no_run`)
/// as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
