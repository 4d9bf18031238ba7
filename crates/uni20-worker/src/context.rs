//! What a handler sees of its rank.

use std::any::Any;

use serde::de::DeserializeOwned;
use serde::Serialize;
use uni20_dispatch::BackendList;
use uni20_persist::Store;

use crate::diag::HandlerError;
use crate::envelope::{decode_exact, DecodeError, Envelope};
use crate::transport::Transport;

/// A typed command: the ABI of one operation family.
///
/// The wire name and schema version are the ABI (design invariant 11); the
/// descriptor holds IDs, shapes, layouts and small scalars, never pointers.
/// Register the worker-side handler once with
/// [`register_command!`](crate::register_command)`(MyCmdV1 => handle_my_cmd)`:
/// the registration reads the wire name, debug name and schema version from
/// this impl, so the two can never disagree.
pub trait CommandSpec: 'static {
    /// Versioned wire name, e.g. `uni20.contract.v1`.
    const WIRE_NAME: &'static str;
    /// Debug name for diagnostics.
    const DEBUG_NAME: &'static str;
    /// Descriptor schema version.
    const SCHEMA_VERSION: u32;
    /// The descriptor the root sends (identical to every participant).
    /// `'static` so that the root can hand its own share to its handler
    /// as a typed value ([`run_typed_inline`]) instead of encoding and
    /// decoding it.
    type Descriptor: Serialize + DeserializeOwned + 'static;
    /// What each participant replies.
    type Reply: Serialize + DeserializeOwned;
}

/// Decodes the descriptor of `C` from an envelope, checking the schema.
///
/// # Errors
/// [`DecodeError::SchemaMismatch`], [`DecodeError::Malformed`] or
/// [`DecodeError::TrailingBytes`].
pub fn decode_descriptor<C: CommandSpec>(envelope: &Envelope) -> Result<C::Descriptor, DecodeError> {
    if envelope.schema_version != C::SCHEMA_VERSION {
        return Err(DecodeError::SchemaMismatch {
            wire_name: envelope.wire_name.clone(),
            found: envelope.schema_version,
            expected: C::SCHEMA_VERSION,
        });
    }
    decode_exact(&envelope.descriptor, "descriptor")
}

/// Encodes a reply of `C` (the bytes a [`HandlerFn`](crate::registry::HandlerFn) returns).
///
/// # Errors
/// A [`HandlerError`] if postcard cannot encode the value (for example a
/// sequence whose length is unknown).
pub fn encode_reply<C: CommandSpec>(reply: &C::Reply) -> Result<Vec<u8>, HandlerError> {
    postcard::to_stdvec(reply).map_err(|e| HandlerError::msg(format!("encoding reply: {e}")))
}

/// The typed handler of command `C`: the rank's context and the decoded
/// descriptor in, the reply out.
///
/// # Errors
/// Any [`HandlerError`]; the worker loop forwards it to the root as a
/// [`Diagnostic`](crate::Diagnostic) and the job stops (fail-stop).
pub type TypedHandler<C> =
    fn(&mut WorkerContext<'_>, <C as CommandSpec>::Descriptor) -> Result<<C as CommandSpec>::Reply, HandlerError>;

/// The one place where a typed handler meets the wire: decodes the
/// descriptor of `C` from `envelope` (checking the schema version and
/// rejecting trailing bytes), runs `handler` and encodes its reply.
///
/// [`register_command!`](crate::register_command) wraps every handler in
/// this function; call it directly only to run a handler outside the
/// registry (tests).
///
/// # Errors
/// A [`HandlerError`] for an undecodable descriptor (with the command's
/// wire name), the handler's own error, or a reply that cannot be encoded.
pub fn run_typed<C: CommandSpec>(
    ctx: &mut WorkerContext<'_>,
    envelope: &Envelope,
    handler: TypedHandler<C>,
) -> Result<Vec<u8>, HandlerError> {
    let descriptor = decode_descriptor::<C>(envelope)
        .map_err(|e| HandlerError::from(e).context(format!("decoding the descriptor of `{}`", C::WIRE_NAME)))?;
    let reply = handler(ctx, descriptor)?;
    encode_reply::<C>(&reply)
}

/// The erased inline form of a handler: the root's own share of a command
/// as a typed value (a `Box` of the command's descriptor), not as bytes.
/// [`register_command!`](crate::register_command) builds one per command
/// ([`CommandEntry::inline`](crate::CommandEntry::inline)) around
/// [`run_typed_inline`].
pub type InlineFn = fn(&mut WorkerContext<'_>, Box<dyn Any>) -> Result<Vec<u8>, HandlerError>;

/// As [`run_typed`] for a descriptor the root already holds as a value
/// (its own share of a command it submitted, when it is a participant):
/// no descriptor bytes are encoded or decoded; the reply is encoded as
/// always. Used through [`InlineFn`].
///
/// # Errors
/// A [`HandlerError`] if `descriptor` is not a `C::Descriptor` (an entry
/// registered for another command type), the handler's own error, or a
/// reply that cannot be encoded.
pub fn run_typed_inline<C: CommandSpec>(
    ctx: &mut WorkerContext<'_>,
    descriptor: Box<dyn Any>,
    handler: TypedHandler<C>,
) -> Result<Vec<u8>, HandlerError> {
    let descriptor = descriptor.downcast::<C::Descriptor>().map_err(|_| {
        HandlerError::msg(format!(
            "an in-process descriptor of another type than `{}`'s",
            C::WIRE_NAME
        ))
    })?;
    let reply = handler(ctx, *descriptor)?;
    encode_reply::<C>(&reply)
}

/// The rank-local resources a handler may use.
pub struct WorkerContext<'a> {
    pub(crate) transport: &'a dyn Transport,
    pub(crate) store: &'a Store,
    pub(crate) backends: &'a BackendList,
    pub(crate) threads: usize,
    pub(crate) op_id: u64,
    /// Storage ranks of the universe (the last ranks); 0 where the runner
    /// does not know them (SPMD mode, unit tests).
    pub(crate) storage_ranks: usize,
    /// An injected `corrupt` fault applies to this command.
    pub(crate) corrupt_sends: bool,
}

impl<'a> WorkerContext<'a> {
    /// Whether `rank` is one of the universe's storage ranks (the last
    /// `storage_ranks` ranks; always `false` in SPMD mode, which has none).
    pub fn is_storage_rank(&self, rank: usize) -> bool {
        self.storage_ranks > 0 && (self.size().saturating_sub(self.storage_ranks)..self.size()).contains(&rank)
    }

    /// True when an injected `corrupt` fault (`UNI20_INJECT_FAULT`, see
    /// [`crate::fault`]) applies to this rank and command: code that sends
    /// object payloads to other ranks flips one byte of each, so that the
    /// receiver's checksum check fails. Always false without injection.
    pub fn corrupt_sends(&self) -> bool {
        self.corrupt_sends
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.transport.rank()
    }
    /// Number of ranks in the universe.
    pub fn size(&self) -> usize {
        self.transport.size()
    }
    /// The operation being executed.
    pub fn op_id(&self) -> u64 {
        self.op_id
    }
    /// Point-to-point messaging with other ranks.
    pub fn transport(&self) -> &'a dyn Transport {
        self.transport
    }
    /// This rank's persistent object store.
    pub fn store(&self) -> &'a Store {
        self.store
    }
    /// This rank's local backend list for contractions.
    pub fn backends(&self) -> &'a BackendList {
        self.backends
    }
    /// Thread budget of this rank's local kernels.
    pub fn threads(&self) -> usize {
        self.threads
    }
    /// What a handler's local kernels may use of this rank (store, backends,
    /// thread budget), without the transport: a [`KernelContext`] is `Sync`,
    /// so independent work items of one command can run on several threads
    /// (the rank's own and rayon helpers) at the same time.
    pub fn kernels(&self) -> KernelContext<'a> {
        KernelContext {
            rank: self.transport.rank(),
            store: self.store,
            backends: self.backends,
            threads: self.threads,
        }
    }
}

/// The rank-local resources of a local kernel: the store, the backends and
/// a thread budget, without the transport (which only the handler's own
/// thread may use). `Send + Sync`: the work items of one command may be
/// computed in parallel, each with its own [`KernelContext`] whose budget
/// is its share of the rank's ([`KernelContext::with_threads`]).
#[derive(Clone, Copy)]
pub struct KernelContext<'a> {
    rank: usize,
    store: &'a Store,
    backends: &'a BackendList,
    threads: usize,
}

impl<'a> KernelContext<'a> {
    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }
    /// This rank's persistent object store.
    pub fn store(&self) -> &'a Store {
        self.store
    }
    /// This rank's local backend list for contractions.
    pub fn backends(&self) -> &'a BackendList {
        self.backends
    }
    /// Thread budget of this kernel (at least 1 when the rank has threads:
    /// pass it to kernels that take a thread count).
    pub fn threads(&self) -> usize {
        self.threads
    }
    /// The same context with thread budget `threads` (a work item's share
    /// of the rank's budget when several items run at once).
    pub fn with_threads(self, threads: usize) -> KernelContext<'a> {
        KernelContext { threads, ..self }
    }
}
