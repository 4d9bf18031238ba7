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
mod config;
mod context;
mod controller;
mod diag;
mod envelope;
pub mod fault;
mod handler;
mod inproc;
mod launch;
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

pub use config::{
    BackendChoice, LauncherEnv, RankConfig, DEFAULT_ABORT_TIMEOUT, DEFAULT_CHUNK_BYTES, DEFAULT_STARTUP_TIMEOUT,
    LAUNCHER_VARIABLES, MAX_CHUNK_BYTES, MAX_IN_PROCESS_RANKS, MIN_CHUNK_BYTES, RUNTIME_VARIABLES,
};
pub use context::{decode_descriptor, encode_reply, run_typed, CommandSpec, TypedHandler, WorkerContext};
pub use controller::{Controller, DeferredJob, OnDone, PendingOp, RawReplies};
pub use diag::{Diagnostic, Disagreement, HandlerError, JobError};
pub use envelope::{decode_exact, encode, DecodeError, Envelope, DEFAULT_MAX_ENVELOPE_BYTES, ENVELOPE_FORMAT_VERSION};
pub use fault::{Fault, FaultKind, FaultPlan};
pub use inproc::InProcessTransport;
pub use launch::DEFAULT_RANKS;
/// The rsmpi crate uni20 is built against (feature `mpi`): use it for the
/// communicators passed to [`UniverseBuilder::run_on`] and `spmd_on`, so the
/// types are the same.
#[cfg(feature = "mpi")]
pub use mpi;
#[cfg(feature = "mpi")]
pub use mpi_transport::MpiTransport;
pub use registry::{
    command_id, diff_signatures, digest_of, CommandEntry, CommandSignature, HandlerFn, HandlerLocation, Registry,
    RegistryError, COMMANDS,
};
pub use spmd::{digest_bytes, plan_digest, Number, ReduceOp, SpmdContext};
pub use transport::{
    data_tag, Tag, Transport, TransportError, TAG_ABORT, TAG_CMD, TAG_COLL, TAG_DATA_BASE, TAG_FIN, TAG_HELLO,
    TAG_REPLY, TAG_ROOT_DATA, TAG_START,
};
pub use universe::{launched_by_mpi, RankExit, RunResult, SpmdOutcomes, TransportChoice, UniverseBuilder};
pub use worker::{worker_loop, WorkerExit};

#[doc(hidden)]
pub use linkme;

/// The no-op command `uni20.noop.v1`: every participant replies at once.
/// Used to measure the command round trip (root -> workers -> root).
pub struct Noop;

impl CommandSpec for Noop {
    const WIRE_NAME: &'static str = "uni20.noop.v1";
    const DEBUG_NAME: &'static str = "noop";
    const SCHEMA_VERSION: u32 = 1;
    type Descriptor = ();
    type Reply = ();
}

fn handle_noop(_ctx: &mut WorkerContext<'_>, (): ()) -> Result<(), HandlerError> {
    Ok(())
}

register_command!(Noop => handle_noop);

/// `uni20.flush.v1`: every participant makes its whole store durable
/// ([`uni20_persist::Store::flush_all`]: object files and directory
/// fsynced, one batch). Reply: the number of objects the store holds.
pub struct Flush;

impl CommandSpec for Flush {
    const WIRE_NAME: &'static str = "uni20.flush.v1";
    const DEBUG_NAME: &'static str = "flush";
    const SCHEMA_VERSION: u32 = 1;
    type Descriptor = ();
    type Reply = u64;
}

fn handle_flush(ctx: &mut WorkerContext<'_>, (): ()) -> Result<u64, HandlerError> {
    ctx.store()
        .flush_all()
        .map_err(|e| HandlerError::from(e).context("flushing the store"))?;
    Ok(ctx.store().ids().len() as u64)
}

register_command!(Flush => handle_flush);

/// `uni20.storage.v1`: one object-server request (get, put, pin, release,
/// has) answered by the participant's store ([`uni20_persist::Store::serve`]).
/// Storage ranks are the intended targets; any rank can answer.
pub struct StorageCommand;

impl CommandSpec for StorageCommand {
    const WIRE_NAME: &'static str = "uni20.storage.v1";
    const DEBUG_NAME: &'static str = "storage";
    const SCHEMA_VERSION: u32 = 1;
    type Descriptor = uni20_persist::StorageRequest;
    type Reply = uni20_persist::StorageResponse;
}

fn handle_storage(
    ctx: &mut WorkerContext<'_>,
    req: uni20_persist::StorageRequest,
) -> Result<uni20_persist::StorageResponse, HandlerError> {
    let resp = ctx.store().serve(req);
    if let uni20_persist::StorageResponse::Failed { message, fatal: true } = &resp {
        return Err(HandlerError::msg(message.clone()).context("storage request"));
    }
    Ok(resp)
}

register_command!(StorageCommand => handle_storage);

/// `uni20.sendrecv.v1`: rank `from` sends `bytes` raw bytes to rank `to`
/// over the transport, nothing else (no store, no checksum). The baseline
/// against which object transfers are measured.
pub struct SendRecv;

/// Descriptor of [`SendRecv`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SendRecvDesc {
    /// Sending rank.
    pub from: usize,
    /// Receiving rank.
    pub to: usize,
    /// Message size in bytes.
    pub bytes: u64,
}

impl CommandSpec for SendRecv {
    const WIRE_NAME: &'static str = "uni20.sendrecv.v1";
    const DEBUG_NAME: &'static str = "sendrecv";
    const SCHEMA_VERSION: u32 = 1;
    type Descriptor = SendRecvDesc;
    /// Bytes received on the replying rank (0 on the sender).
    type Reply = u64;
}

fn handle_sendrecv(ctx: &mut WorkerContext<'_>, d: SendRecvDesc) -> Result<u64, HandlerError> {
    let me = ctx.rank();
    let tag = data_tag(0);
    let mut got = 0u64;
    if me == d.from {
        let len = usize::try_from(d.bytes).map_err(|_| HandlerError::msg("message size does not fit in memory"))?;
        let payload = vec![0x5au8; len];
        ctx.transport().exchange(&[(d.to, tag, &payload)], &[])?;
    }
    if me == d.to {
        got = ctx
            .transport()
            .exchange(&[], &[(d.from, tag)])?
            .iter()
            .map(|m| m.len() as u64)
            .sum();
    }
    Ok(got)
}

register_command!(SendRecv => handle_sendrecv);
