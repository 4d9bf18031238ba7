//! # uni20-worker: the rank runtime
//!
//! A universe of ranks speaks one protocol over two transports: in-process
//! (ranks as threads, the default; no MPI needed) and MPI (feature `mpi`,
//! rsmpi 0.8, one rank per process). Rank 0, the root, runs user code through
//! a [`Controller`]; every other rank runs the [`worker_loop`], executing
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
//! Layering (ARCHITECTURE.md): this crate knows ranks, envelopes and
//! handlers, but nothing about contraction plans; those live in `uni20-dist`.
//!
//! Where things live (imports run one way, top to bottom):
//!
//! - `universe`: [`UniverseBuilder`], resolving a [`RankConfig`] (`config`:
//!   every `UNI20_*` variable, read once) and the transport;
//! - `launch`: starts the in-process universe and runs the root
//!   (handshake, the user's closure on a [`Controller`], drain, shutdown);
//!   `mpi_launch`: the standalone and library-mode MPI universes;
//! - `spmd`: the SPMD context, its collectives and plan agreement, and the
//!   SPMD runners;
//! - `startup` (the registry handshake), `worker` ([`worker_loop`]) and
//!   `controller` (submission, replies in flight, deferred jobs, data phases);
//! - `handler` (running one command, [`Diagnostic`]s) and `panics` (which
//!   panics are a handler's failure);
//! - `protocol` (the wire types), `envelope`, `registry`, `context`, `diag`;
//! - `transport` ([`Transport`]), `inproc`, `mpi_transport` (with abort
//!   frames and the closing handshake of library mode) and `chunk`
//!   (splitting payloads above the chunk size).

#![warn(missing_docs)]

// Used by the MPI transport; compiled (and unit-tested) in every build.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
mod chunk;
pub mod cleanup;
mod commands;
mod config;
mod context;
mod controller;
mod diag;
mod envelope;
pub mod fault;
mod handler;
mod inproc;
mod launch;
mod ledger;
#[cfg(feature = "mpi")]
mod mpi_launch;
#[cfg(feature = "mpi")]
mod mpi_transport;
mod panics;
mod protocol;
mod registry;
#[cfg(test)]
mod scripted;
mod spmd;
mod startup;
mod transport;
mod universe;
mod worker;

pub use commands::{
    Flush, GcDesc, GcSummary, GcV1, Noop, RankStoreStats, ReleaseSummary, ReleaseV1, SendRecv, SendRecvDesc,
    StorageCommand, StoreStatsV1,
};
pub use config::{
    BackendChoice, LauncherEnv, RankConfig, DEFAULT_ABORT_TIMEOUT, DEFAULT_CHUNK_BYTES, DEFAULT_STARTUP_TIMEOUT,
    LAUNCHER_VARIABLES, MAX_CHUNK_BYTES, MAX_IN_PROCESS_RANKS, MIN_CHUNK_BYTES, RUNTIME_VARIABLES,
};
pub use context::{decode_descriptor, encode_reply, run_typed, CommandSpec, TypedHandler, WorkerContext};
pub use controller::{CollectReport, Controller, DeferredJob, OnDone, PendingOp, RawReplies, MAX_OUTSTANDING};
pub use diag::{Diagnostic, Disagreement, HandlerError, JobError};
pub use envelope::{decode_exact, encode, DecodeError, Envelope, DEFAULT_MAX_ENVELOPE_BYTES, ENVELOPE_FORMAT_VERSION};
pub use fault::{Fault, FaultKind, FaultPlan};
pub use inproc::InProcessTransport;
pub use launch::DEFAULT_RANKS;
pub use ledger::{HeldBlock, LedgerStats, ReleaseLedger, RELEASE_BATCH_BYTES, RELEASE_BATCH_OBJECTS};
/// The rsmpi crate uni20 is built against (feature `mpi`): use it for the
/// communicators passed to [`UniverseBuilder::run_on`] and `spmd_on`, so the
/// types are the same.
#[cfg(feature = "mpi")]
pub use mpi;
#[cfg(feature = "mpi")]
pub use mpi_transport::MpiTransport;
pub use registry::{
    command_id, diff_signatures, digest_of, CommandEntry, CommandSignature, HandlerFn, HandlerLocation, Registry,
    RegistryError, COMMANDS, STORE_TYPES,
};
pub use spmd::{digest_bytes, plan_digest, CollectiveOp, Number, SpmdContext};
pub use transport::{
    data_tag, Tag, Transport, TransportError, TAG_ABORT, TAG_CMD, TAG_COLL, TAG_DATA_BASE, TAG_FIN, TAG_HELLO,
    TAG_REPLY, TAG_ROOT_DATA, TAG_START,
};
/// The store type as named by [`register_store_type!`] (a re-export of
/// `uni20_persist::Store`, so the macro works in crates that do not depend
/// on `uni20-persist` directly).
#[doc(hidden)]
pub use uni20_persist::Store as StoreHandle;
pub use universe::{launched_by_mpi, RankExit, RunResult, SpmdOutcomes, TransportChoice, UniverseBuilder};
pub use worker::{worker_loop, WorkerExit};

#[doc(hidden)]
pub use linkme;
