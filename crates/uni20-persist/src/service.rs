//! The storage-rank request/response protocol, transport-agnostic.
//!
//! A storage rank (or any rank) answers [`StorageRequest`]s with [`Store::serve`].
//! Both types are serde types: the worker runtime encodes them (postcard) into its
//! own envelopes and moves them over its transport.

use serde::{Deserialize, Serialize};

use crate::{Damage, Integrity, ObjectId, ObjectMeta, PersistError, Store};

/// A request to an object server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum StorageRequest {
    /// Send the object's metadata and bytes ([`Store::encoded`]).
    Get(ObjectId),
    /// Store a copy of an object ([`Store::insert_replica`]).
    Put {
        /// Its metadata.
        meta: ObjectMeta,
        /// Its encoded bytes (`meta.size` bytes).
        bytes: Vec<u8>,
    },
    /// Keep the object resident ([`Store::pin`]).
    Pin(ObjectId),
    /// Drop one pin ([`Store::unpin`]).
    Unpin(ObjectId),
    /// Does the server hold the object ([`Store::contains`])?
    Has(ObjectId),
    /// Does the server hold the object intact ([`Store::verify`]: its file read
    /// and checked)? Answered `Done` (intact), `NotFound` or `Damaged`.
    Verify(ObjectId),
}

/// The answer to a [`StorageRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum StorageResponse {
    /// Answer to `Get`.
    Object {
        /// Its metadata.
        meta: ObjectMeta,
        /// Its encoded bytes.
        bytes: Vec<u8>,
    },
    /// `Put`, `Pin` or `Unpin` succeeded.
    Done,
    /// Answer to `Has`.
    Has(bool),
    /// The server does not hold the object (`Get`, `Pin`), or `Unpin` of an object with
    /// no explicit pin.
    NotFound(ObjectId),
    /// Answer to `Verify`: the server holds the object, but damaged.
    Damaged(Damage),
    /// The request failed; the message is the server's [`PersistError`] text.
    /// `fatal` follows [`PersistError::is_fatal`].
    Failed {
        /// Error message, naming the object and file where relevant.
        message: String,
        /// Whether the fail-stop policy treats it as fatal.
        fatal: bool,
    },
}

impl StorageResponse {
    fn from_error(e: PersistError) -> StorageResponse {
        match e {
            PersistError::NotFound(id) => StorageResponse::NotFound(id),
            e => StorageResponse::Failed {
                fatal: e.is_fatal(),
                message: e.to_string(),
            },
        }
    }

    /// Turns a `Get` answer into the object's metadata and bytes (ready for
    /// [`Store::insert_replica`]): `Object` gives `Some`, `NotFound` gives `None`.
    ///
    /// # Errors
    /// [`PersistError::Remote`] for `Failed` and for answers that are not to a `Get`.
    pub fn into_fetched(self, id: ObjectId) -> Result<Option<(ObjectMeta, Vec<u8>)>, PersistError> {
        match self {
            StorageResponse::Object { meta, bytes } => Ok(Some((meta, bytes))),
            StorageResponse::NotFound(_) => Ok(None),
            StorageResponse::Failed { message, .. } => Err(PersistError::Remote { id, reason: message }),
            other => Err(PersistError::Remote {
                id,
                reason: format!("unexpected answer to get: {other:?}"),
            }),
        }
    }
}

impl Store {
    /// Answers one storage request from this store. Never panics; failures are
    /// reported in the response.
    pub fn serve(&self, req: StorageRequest) -> StorageResponse {
        let r = match req {
            StorageRequest::Get(id) => self.encoded(id).map(|(meta, bytes)| StorageResponse::Object {
                meta,
                bytes: bytes.to_vec(),
            }),
            StorageRequest::Put { meta, bytes } => self.insert_replica(meta, bytes).map(|()| StorageResponse::Done),
            StorageRequest::Pin(id) => self.pin(id).map(|()| StorageResponse::Done),
            StorageRequest::Unpin(id) => Ok(if self.unpin(id) {
                StorageResponse::Done
            } else {
                StorageResponse::NotFound(id)
            }),
            StorageRequest::Has(id) => Ok(StorageResponse::Has(self.contains(id))),
            StorageRequest::Verify(id) => self.verify(id).map(|v| match v {
                Integrity::Intact => StorageResponse::Done,
                Integrity::Missing => StorageResponse::NotFound(id),
                Integrity::Damaged(d) => StorageResponse::Damaged(d),
            }),
        };
        r.unwrap_or_else(StorageResponse::from_error)
    }
}
