//! # uni20-worker: the rank runtime
//!
//! A universe of ranks speaks one protocol over two transports: in-process
//! (ranks as threads, the default; no MPI needed) and MPI (feature `mpi`,
//! rsmpi 0.8, one rank per process). Rank 0, the root, runs user code through
//! a [`Controller`]; every other rank runs the worker loop, executing
//! commands looked up in a [`Registry`] that the linker assembled before
//! `main` from the [`COMMANDS`] distributed slice.
//!
//! Three ways to run one ([`UniverseBuilder`]): standalone
//! ([`UniverseBuilder::run`], which owns the process under MPI), library mode
//! on a communicator the host program owns (`UniverseBuilder::run_on`,
//! returning on every rank with a [`RankExit`]), and the expert SPMD mode
//! ([`UniverseBuilder::spmd`], `spmd_on`: every rank runs the closure with an
//! [`SpmdContext`]).
//!
//! Layering (docs/architecture.md, "Crates and their one job each"): this crate knows ranks, envelopes and
//! handlers, but nothing about contraction plans; those live in `uni20-dist`.
//!
//! Where things live (imports run one way, top to bottom):
//!
//! - `universe`: [`UniverseBuilder`], resolving a [`config::RankConfig`] (`config`:
//!   every `UNI20_*` variable, read once) and the transport;
//! - `launch`: starts the in-process universe and runs the root
//!   (handshake, the user's closure on a [`Controller`], drain, shutdown);
//!   `mpi_launch`: the standalone and library-mode MPI universes;
//! - `spmd`: the SPMD context, its collectives and plan agreement, and the
//!   SPMD runners;
//! - `startup` (the registry handshake), `worker` (the worker loop) and
//!   `controller` (submission, replies in flight, deferred jobs, data phases);
//! - `handler` (running one command, [`Diagnostic`]s) and `panics` (which
//!   panics are a handler's failure);
//! - `protocol` (the wire types), `envelope`, `registry`, `context`, `diag`;
//! - `transport` ([`transport::Transport`], [`transport::TransportKind`]),
//!   `inproc`, `mpi_transport` (with abort frames and the closing handshake
//!   of library mode) and `chunk` (splitting payloads above the chunk size).
//!
//! The crate root re-exports what a program or an operation family calls
//! (starting a universe, the [`Controller`], writing a command, the
//! registry, SPMD mode). Secondary public items live in documented modules:
//! [`commands`] (the built-in commands), [`config`] (every `UNI20_*`
//! variable and its defaults), [`context`] (descriptor and reply encoding
//! for hand-written handlers), [`envelope`] (the wire encoding),
//! [`fault`] (fault injection), [`ledger`] (the root's release ledger),
//! [`registry`] (signatures and their comparison), [`spmd`] (plan
//! agreement), [`transport`] (the transport protocol and message tags),
//! [`cleanup`] (temporary files removed on exit or signal) and [`waitnote`]
//! (what a rank waits for, printed when `SIGTERM` ends it under MPI).

#![warn(missing_docs)]
#![deny(unreachable_pub)]

// Used by the MPI transport; compiled (and unit-tested) in every build.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
mod chunk;
pub mod cleanup;
pub mod commands;
pub mod config;
pub mod context;
mod controller;
mod diag;
pub mod envelope;
pub mod fault;
mod handler;
mod inproc;
mod launch;
pub mod ledger;
#[cfg(feature = "mpi")]
mod mpi_launch;
#[cfg(feature = "mpi")]
mod mpi_transport;
mod panics;
mod protocol;
pub mod registry;
#[cfg(test)]
mod scripted;
pub mod spmd;
mod startup;
pub mod transport;
mod universe;
pub mod waitnote;
mod worker;

// Starting a universe and what it returns.
pub use universe::{launched_by_mpi, RankExit, RunResult, SpmdOutcomes, TransportChoice, UniverseBuilder};
pub use worker::WorkerExit;

// The root's handle: submitting commands, collecting replies, deferred jobs.
pub use controller::{CollectReport, Controller, DeferredJob, OnDone, PendingOp, RawReplies, RootProfile};

// Writing a command: its spec, its handler's context, and the errors a job reports.
pub use context::{run_typed, run_typed_inline, CommandSpec, InlineFn, KernelContext, TypedHandler, WorkerContext};
pub use diag::{Diagnostic, Disagreement, HandlerError, JobError};

// The command registry (what `register_command!` and `register_store_type!` expand to).
pub use envelope::Envelope;
pub use registry::{command_id, CommandEntry, HandlerLocation, Registry, RegistryError, COMMANDS, STORE_TYPES};

// SPMD mode: the per-rank context and its collectives (plan agreement helpers in [`spmd`]).
pub use spmd::{CollectiveOp, Number, SpmdContext};

// The MPI transport (the protocol it implements is in [`transport`]).
/// The rsmpi crate uni20 is built against (feature `mpi`): use it for the
/// communicators passed to [`UniverseBuilder::run_on`] and `spmd_on`, so the
/// types are the same.
#[cfg(feature = "mpi")]
pub use mpi;
#[cfg(feature = "mpi")]
pub use mpi_transport::MpiTransport;

/// The store type as named by [`register_store_type!`] (a re-export of
/// `uni20_persist::Store`, so the macro works in crates that do not depend
/// on `uni20-persist` directly).
#[doc(hidden)]
pub use uni20_persist::Store as StoreHandle;

#[doc(hidden)]
pub use linkme;

/// Hands the allocator's free memory back to the operating system
/// (glibc's `malloc_trim(0)`: every arena, including the free pages inside
/// the heap), so that memory a rank dropped on purpose, such as the blocks
/// it just offloaded to disk, leaves its resident set even under the
/// allocator settings of `uni20::keep_freed_memory` (which keep freed memory
/// for reuse) and in the arenas of other threads (a prefetch allocates on the
/// store's load threads). Returns `true` if memory was released. A no-op
/// returning `false` off Linux/glibc. Costs a walk of the heap and one
/// `madvise` per free page run; call it after large releases, not per block.
pub fn trim_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only returns free memory to the kernel; glibc
        // documents it as callable at any time, from any thread.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
