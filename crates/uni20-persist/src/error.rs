//! The crate's error type.

use std::path::PathBuf;

use crate::ObjectId;

/// Errors of the persistent store.
///
/// Under the project's fail-stop policy, [`Conflict`](PersistError::Conflict),
/// [`Checksum`](PersistError::Checksum), [`Corrupt`](PersistError::Corrupt) and
/// [`Io`](PersistError::Io) are fatal for the job: the caller is expected to end the
/// operation and abort, reporting the message (which names the object and, for disk
/// errors, the file).
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum PersistError {
    /// The object is not present in this store.
    #[error("object {0} not found")]
    NotFound(ObjectId),
    /// Payload bytes do not match their metadata (size or CRC-32). `path` names the
    /// file when the bytes came from disk.
    #[error(
        "checksum mismatch for object {id}{}: expected {expected_size} bytes crc32 {expected:#010x}, got {actual_size} bytes crc32 {actual:#010x}",
        path.as_ref().map(|p| format!(" in file {}", p.display())).unwrap_or_default()
    )]
    Checksum {
        /// Object whose payload is damaged.
        id: ObjectId,
        /// Checksum recorded in the metadata.
        expected: u32,
        /// Checksum of the bytes actually seen.
        actual: u32,
        /// Size in bytes recorded in the metadata.
        expected_size: u64,
        /// Size in bytes actually seen.
        actual_size: u64,
        /// File the bytes were read from, if any.
        path: Option<PathBuf>,
    },
    /// A second, different value was offered for an ID that already names a value.
    /// Objects are immutable: this is fatal.
    #[error("conflicting bytes for object {0}: objects are immutable once committed")]
    Conflict(ObjectId),
    /// The object exists but was committed with a different `Persist::TYPE_NAME`.
    #[error("object {id} has type {found:?}, requested as {expected:?}")]
    TypeMismatch {
        /// Object requested.
        id: ObjectId,
        /// `TYPE_NAME` of the requested type.
        expected: String,
        /// `TYPE_NAME` recorded in the object's metadata.
        found: String,
    },
    /// `Persist::decode` rejected the payload.
    #[error("decode error: {0}")]
    Decode(String),
    /// An object file on disk is damaged (bad magic, truncated or undecodable header,
    /// wrong name) or the nonce, counter or roots file is damaged.
    #[error("corrupt store file {}{}: {reason}", path.display(), id.map(|i| format!(" (object {i})")).unwrap_or_default())]
    Corrupt {
        /// Object concerned, when known.
        id: Option<ObjectId>,
        /// File concerned.
        path: PathBuf,
        /// Which check the file failed.
        check: FailedCheck,
        /// What is wrong.
        reason: String,
    },
    /// An I/O operation failed.
    #[error("I/O error during {op} on {}: {source}", path.display())]
    Io {
        /// What the store was doing (e.g. "write object r0:3").
        op: String,
        /// File or directory concerned.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Another rank's copy of an object could not be taken over
    /// ([`Store::adopt`](crate::Store::adopt): no such file in the old owner's
    /// directory, or this store has no directory), or a storage rank's answer
    /// to a get was a failure ([`StorageResponse::into_fetched`](crate::StorageResponse::into_fetched)).
    #[error("remote fetch of object {id} failed: {reason}")]
    Remote {
        /// Object requested.
        id: ObjectId,
        /// What went wrong, with the path or the other rank's message.
        reason: String,
    },
    /// [`Store::open`](crate::Store::open) of a rank directory that a live store of this
    /// process already has open (two stores on one directory would allocate colliding IDs).
    #[error("store directory {} is already open in this process", path.display())]
    AlreadyOpen {
        /// The rank directory.
        path: PathBuf,
    },
    /// [`Store::open`](crate::Store::open) of a rank directory that another live
    /// process holds (an advisory `flock` on its `lock` file; released when that
    /// process's store is dropped or the process dies, SIGKILL included).
    #[error(
        "store directory {} is held by another process ({})",
        path.display(),
        holder.map(|p| format!("pid {p}")).unwrap_or_else(|| "holder unknown".into())
    )]
    Locked {
        /// The rank directory.
        path: PathBuf,
        /// Process ID of the holder, as it recorded it in the lock file, if readable.
        holder: Option<u32>,
    },
    /// The `Async<T>` epoch given to [`Store::persist_copy`](crate::Store::persist_copy) /
    /// [`Store::persist_take`](crate::Store::persist_take) is poisoned or holds no value;
    /// nothing was committed.
    #[error("async source: {0}")]
    Async(#[from] uni20_async::AsyncError),
    /// Garbage collection could not determine what an object references, so it
    /// refused to delete anything (see [`Store::gc`](crate::Store::gc)).
    #[error("gc refused: cannot find references of object {id} of type {type_name:?} (register the type with Store::register)")]
    GcUnknownType {
        /// Object whose references are unknown.
        id: ObjectId,
        /// Its type name.
        type_name: String,
    },
}

/// The integrity check a damaged store file failed (see
/// [`PersistError::failed_check`] and [`Damage`](crate::Damage)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum FailedCheck {
    /// The file's length differs from what its header records (truncated, or
    /// extended), or it is too short to hold a header at all.
    Size,
    /// A CRC-32 differs from the one recorded (of the header, or of the payload).
    Checksum,
    /// The file is not of the expected format: bad magic, an unsupported format
    /// version, or it holds another object than its name says.
    Format,
    /// The bytes pass the size and checksum checks but do not decode (the
    /// header, or the payload as its recorded type).
    Decode,
}

impl std::fmt::Display for FailedCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FailedCheck::Size => "size check",
            FailedCheck::Checksum => "checksum (CRC-32) check",
            FailedCheck::Format => "format check",
            FailedCheck::Decode => "decode check",
        })
    }
}

impl PersistError {
    /// The integrity check that this error reports a failure of: `Some` for
    /// [`Checksum`](PersistError::Checksum) ([`FailedCheck::Size`] when the sizes
    /// differ, else [`FailedCheck::Checksum`]), [`Corrupt`](PersistError::Corrupt)
    /// (its `check`) and [`Decode`](PersistError::Decode) ([`FailedCheck::Decode`]);
    /// `None` for every other error (an absent object, an I/O failure, ...).
    pub fn failed_check(&self) -> Option<FailedCheck> {
        match self {
            PersistError::Checksum {
                expected_size,
                actual_size,
                ..
            } => Some(if expected_size != actual_size {
                FailedCheck::Size
            } else {
                FailedCheck::Checksum
            }),
            PersistError::Corrupt { check, .. } => Some(*check),
            PersistError::Decode(_) => Some(FailedCheck::Decode),
            _ => None,
        }
    }

    pub(crate) fn io(op: impl Into<String>, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        PersistError::Io {
            op: op.into(),
            path: path.into(),
            source,
        }
    }

    /// True for errors that the fail-stop policy treats as fatal for the job
    /// (`Conflict`, `Checksum`, `Corrupt`, `Io`).
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            PersistError::Conflict(_)
                | PersistError::Checksum { .. }
                | PersistError::Corrupt { .. }
                | PersistError::Io { .. }
        )
    }
}
