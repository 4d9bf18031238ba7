//! What a handler sees of its rank.

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
pub trait CommandSpec {
    /// Versioned wire name, e.g. `uni20.contract.v1`.
    const WIRE_NAME: &'static str;
    /// Debug name for diagnostics.
    const DEBUG_NAME: &'static str;
    /// Descriptor schema version.
    const SCHEMA_VERSION: u32;
    /// The descriptor the root sends (identical to every participant).
    type Descriptor: Serialize + DeserializeOwned;
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

/// Encodes a reply of `C` for [`HandlerFn`](crate::HandlerFn)'s return value.
pub fn encode_reply<C: CommandSpec>(reply: &C::Reply) -> Result<Vec<u8>, HandlerError> {
    postcard::to_stdvec(reply).map_err(|e| HandlerError::msg(format!("encoding reply: {e}")))
}

/// The rank-local resources a handler may use.
pub struct WorkerContext<'a> {
    pub(crate) transport: &'a dyn Transport,
    pub(crate) store: &'a Store,
    pub(crate) backends: &'a BackendList,
    pub(crate) threads: usize,
    pub(crate) op_id: u64,
}

impl<'a> WorkerContext<'a> {
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
}
