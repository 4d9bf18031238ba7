//! # uni20: ordinary tensor-network code across MPI ranks
//!
//! `uni20` starts a *universe* of ranks. Rank 0, the root, runs your code;
//! every other rank runs a worker loop. Distributed tensors live as blocks in
//! the workers' persistent stores; operations such as
//! [`contract`](prelude::contract) are
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
//!
//! Three ways to run (the guide, docs/guide, "Running under MPI and embedding"):
//!
//! - [`launch`]: the one-call entry of a standalone program. It owns the
//!   process: logging, signal handlers for temporary-file cleanup, MPI
//!   initialisation and finalisation, the panic hook, `MPI_Abort` on
//!   fail-stop, exit codes.
//! - Library mode (feature `mpi`): `universe().run_on(&communicator, |ctl|
//!   ..)` runs a universe on a communicator the host program owns and
//!   returns on every rank ([`RankExit`]); no process-wide effect.
//! - The expert SPMD mode: [`spmd()`] (one call, like `launch`) or
//!   `universe().spmd(..)` / `spmd_on(&communicator, ..)` run the closure on
//!   every rank with an [`SpmdContext`]; the collective operations are in
//!   [`mod@spmd`] (owned by `uni20-dist`, re-exported here).

#![warn(missing_docs)]

use std::process::ExitCode;

// The crates, whole.
pub use uni20_async;
pub use uni20_dispatch as dispatch;
pub use uni20_dist as dist;
pub use uni20_persist as persist;
pub use uni20_tn as tn;
pub use uni20_worker as worker;
/// The rsmpi crate uni20 is built against (feature `mpi`): the
/// communicators a host passes to `run_on` / `spmd_on` come from it.
#[cfg(feature = "mpi")]
pub use uni20_worker::mpi;

/// Distributed operations called collectively in the expert SPMD mode
/// (every rank calls them with the same arguments); see
/// [`uni20_dist::spmd`].
pub use uni20_dist::spmd;

// Local tensors and element types.
pub use uni20_dispatch::{BackendList, DType, EinsumSpec, LocalTensor, TensorData, C32, C64};

// Distributed tensors, their tilings, plans and checkpoints (the
// operations themselves are in the prelude and in [`dist`]).
pub use uni20_dist::{Blocking, Checkpoint, DistTensor, Manifest, Placement, PlanSummary, TensorMeta, Tiling};

// Errors.
pub use uni20_dist::error::{DistError, LabelError, SplitError};
pub use uni20_worker::{HandlerError, JobError};

// The runtime: universes, ranks, SPMD contexts.
pub use uni20_worker::{
    CollectiveOp, Controller, KernelContext, RankExit, RootProfile, SpmdContext, TransportChoice, UniverseBuilder,
    WorkerContext, WorkerExit,
};

// Writing a command.
pub use uni20_worker::{command, register_command, CommandSpec};

/// The names most programs need: every distributed operation with its
/// options, the tensor and runtime types, and what a custom command
/// needs (`command!`, [`HandlerError`], [`WorkerContext`], `Block`,
/// `BlockRef`).
pub mod prelude {
    pub use crate::{
        command, Controller, DType, DistError, DistTensor, EinsumSpec, HandlerError, LocalTensor, Placement, Tiling,
        UniverseBuilder, WorkerContext, C64,
    };
    pub use uni20_dist::decomp::{EighOptions, QrOptions, SvdOptions, SvdTruncation};
    pub use uni20_dist::{
        axpby, checkpoint, conj, contract, contract_with, eigh, einsum, identity, inner, lincomb, lq, max_abs, norm,
        permute, qr, random, read_npy, reblock, reshape, restore, retire, scale, svd, write_npy, zeros, Block,
        BlockRef, Checkpoint, ContractOptions,
    };
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

/// Installs the handlers that remove registered temporary files on
/// SIGTERM, SIGINT and SIGHUP; a failure is reported once and ignored.
fn install_signal_handlers() {
    if let Err(e) = uni20_worker::cleanup::install_signal_handlers() {
        eprintln!("uni20: warning: cannot install signal handlers: {e}");
    }
}

/// Makes the C allocator keep freed memory for reuse instead of returning it
/// to the kernel at once (glibc only: `M_MMAP_THRESHOLD` 256 MiB, so blocks
/// and kernel buffers below that come from the heap, and `M_TRIM_THRESHOLD`
/// 1 GiB, so freed heap memory is not handed back while less than that is
/// free). A tensor-network job allocates and frees the same buffer sizes
/// thousands of times per second; with glibc's defaults they are mapped,
/// faulted in page by page and unmapped again each time (measured in
/// `docs/performance.md`: a quarter of a DMRG sweep's CPU time in page
/// faults, 573,000 faults against 7,000 with this setting). The process's
/// peak resident memory is unchanged; its resident memory no longer shrinks
/// after a peak.
///
/// Process-wide: call it at the start of `main`, before other threads
/// allocate; [`launch`] calls it. Returns whether the settings were applied
/// (false on other C libraries, where it does nothing).
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes glibc's allocation parameters; it is
        // documented as callable at any time, from any thread.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 20) == 1 && libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Runs `f` on the root of a default universe (see [`universe`]) and turns
/// the outcome into a process exit status: success only if the universe
/// started and `f` returned `Ok`. Errors are printed to stderr once.
///
/// The one-call entry of a standalone program, with process-wide effects:
/// the allocator setting of [`keep_freed_memory`], logging ([`init_logging`]), signal handlers that remove temporary files
/// ([`worker::cleanup::install_signal_handlers`]), and under MPI the
/// initialisation and finalisation of MPI, the runtime's panic hook, and
/// `MPI_Abort` on fail-stop. Under MPI, worker ranks never return from this
/// call (they exit when the root shuts the job down). A program that
/// initialises MPI itself uses library mode instead
/// (`UniverseBuilder::run_on`, feature `mpi`).
pub fn launch<F>(f: F) -> ExitCode
where
    F: FnOnce(&Controller<'_>) -> anyhow::Result<()>,
{
    keep_freed_memory();
    init_logging();
    install_signal_handlers();
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

/// Runs `f` on every rank of a default SPMD universe (see
/// [`UniverseBuilder::spmd`]: in-process ranks, or every process of
/// `mpirun` when built with `mpi`) and turns the outcome into an exit
/// status: success only if every rank this process ran returned `Ok`. Each
/// distinct error is printed to stderr once, with the ranks that reported
/// it. Like [`launch`], it installs logging and the signal handlers.
///
/// ```
/// use uni20::CollectiveOp;
///
/// let status = uni20::spmd(|ctx| {
///     let total = ctx.all_reduce_num(ctx.rank() as u64 + 1, CollectiveOp::Sum)?;
///     let n = ctx.size() as u64;
///     anyhow::ensure!(total == n * (n + 1) / 2);
///     Ok(())
/// });
/// assert_eq!(status, std::process::ExitCode::SUCCESS);
/// ```
pub fn spmd<F>(f: F) -> ExitCode
where
    F: Fn(&SpmdContext<'_>) -> anyhow::Result<()> + Sync,
{
    init_logging();
    install_signal_handlers();
    let outcomes = match universe().spmd(f) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("uni20: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut errors: Vec<(String, Vec<usize>)> = Vec::new();
    for (rank, outcome) in outcomes {
        let text = match outcome {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => format!("error: {e:#}"),
            Err(e) => e.to_string(),
        };
        match errors.iter_mut().find(|(t, _)| *t == text) {
            Some((_, ranks)) => ranks.push(rank),
            None => errors.push((text, vec![rank])),
        }
    }
    for (text, ranks) in &errors {
        let ranks: Vec<String> = ranks.iter().map(ToString::to_string).collect();
        eprintln!("uni20: rank {}: {text}", ranks.join(", "));
    }
    if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The README's Rust example, compiled and run as a doctest so that it stays
/// true (the guide's code is tested by `xtask/tests/guide_blocks.rs`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
