//! # uni20-worker: the rank runtime
//!
//! A universe of ranks speaks one protocol over two transports: in-process
//! (ranks as threads, the default; no MPI needed) and MPI (feature `mpi`,
//! rsmpi 0.8, one rank per process). Rank 0, the root, runs user code through
//! a [`Controller`]; every other rank runs the [`worker_loop`], executing
//! commands looked up in a [`Registry`] that the linker assembled before
//! `main` from the [`COMMANDS`] distributed slice.
//!
//! Layering (ARCHITECTURE.md): this crate knows ranks, envelopes and
//! handlers, but nothing about contraction plans; those live in `uni20-dist`.

#![warn(missing_docs)]

mod context;
mod controller;
mod diag;
mod envelope;
pub mod fault;
mod inproc;
#[cfg(feature = "mpi")]
mod mpi_transport;
mod registry;
mod transport;
mod universe;

pub use context::{decode_descriptor, encode_reply, CommandSpec, WorkerContext};
pub use controller::{Controller, DeferredJob, OnDone, PendingOp, RawReplies};
pub use diag::{Diagnostic, HandlerError, JobError};
pub use envelope::{
    decode_exact, encode, max_envelope_bytes, DecodeError, Envelope, DEFAULT_MAX_ENVELOPE_BYTES,
    ENVELOPE_FORMAT_VERSION,
};
pub use fault::{Fault, FaultKind, FaultPlan};
pub use inproc::InProcessTransport;
#[cfg(feature = "mpi")]
pub use mpi_transport::MpiTransport;
pub use registry::{
    command_id, diff_signatures, digest_of, CommandEntry, CommandSignature, HandlerFn, HandlerLocation, Registry,
    RegistryError, COMMANDS,
};
pub use transport::{
    data_tag, Tag, Transport, TransportError, TAG_CMD, TAG_DATA_BASE, TAG_HELLO, TAG_REPLY, TAG_ROOT_DATA, TAG_START,
};
pub use universe::{launched_by_mpi, worker_loop, TransportChoice, UniverseBuilder, WorkerExit, DEFAULT_RANKS};

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

fn handle_noop(_ctx: &mut WorkerContext<'_>, env: &Envelope) -> Result<Vec<u8>, HandlerError> {
    decode_descriptor::<Noop>(env)?;
    encode_reply::<Noop>(&())
}

register_command! {
    static NOOP_V1 = { wire: "uni20.noop.v1", debug: "noop", schema: 1, handler: handle_noop };
}
