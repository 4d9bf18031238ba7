//! The bridge from `uni20-async` epochs: [`Store::persist_copy`] and [`Store::persist_take`].
//!
//! Persistence attaches to a value at an epoch, not to the `Async<T>` channel: a
//! [`ReadBuffer`] names the value of one completed epoch (copied, the source stays
//! intact) and a [`WriteBuffer`] gives destructive access to it (the value is moved out
//! and the slot is left empty).

use std::fmt;

use uni20_async::{AsyncError, ReadBuffer, WriteBuffer, WriteGuard};

use crate::{Persist, PersistError, PersistentPtr, Store};

/// The error a failed [`Store::persist_take`] poisons its write epoch with.
///
/// Readers of that epoch (and of every later one: poison is sticky) get
/// [`AsyncError::Poisoned`] whose `source` downcasts to this type. The caller of
/// `persist_take` gets the original [`PersistError`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommitFailed {
    /// The store error's message (names the object and file where relevant).
    pub message: String,
    /// [`PersistError::is_fatal`] of the store error.
    pub fatal: bool,
}

impl fmt::Display for CommitFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "persist_take: commit failed: {}", self.message)
    }
}

impl std::error::Error for CommitFailed {}

impl CommitFailed {
    fn of(e: &PersistError) -> CommitFailed {
        CommitFailed {
            message: e.to_string(),
            fatal: e.is_fatal(),
        }
    }
}

fn no_value(what: &str, name: Option<String>, epoch: u64) -> PersistError {
    PersistError::Async(AsyncError::NoValue {
        buffer: format!(
            "{what}({}@{epoch})",
            name.map(|n| format!("`{n}`")).unwrap_or_else(|| "_".into())
        ),
        epoch,
    })
}

impl Store {
    /// Commits a copy of the value of `reader`'s epoch (non-destructive).
    ///
    /// Waits until the epoch is readable, encodes the value once ([`Persist::encode`];
    /// no `Clone` needed), releases the reader (so later writers can proceed), then
    /// commits the bytes as [`commit`](Store::commit) does; the object stays resident as
    /// bytes and is decoded on its first load. The source `Async<T>` keeps its value.
    ///
    /// The future suspends only while waiting for the epoch. The commit itself runs on
    /// the polling thread: for a disk store that is one buffered file write and rename
    /// (no fsync; see [`flush`](Store::flush)). It is not moved to a background thread
    /// because single-threaded executors such as `uni20_async::LocalExecutor` report a
    /// task woken only from outside as a deadlock.
    ///
    /// # Errors
    /// * [`PersistError::Async`] if the epoch is poisoned or holds no value (nothing is
    ///   committed);
    /// * as [`commit`](Store::commit) ([`PersistError::Io`], fatal): no ID escapes.
    pub async fn persist_copy<T: Persist>(&self, reader: ReadBuffer<T>) -> Result<PersistentPtr<T>, PersistError> {
        let (bytes, refs) = {
            let v = reader.get().await?;
            (v.encode(), v.references())
        };
        drop(reader);
        self.commit_encoded::<T>(bytes, refs)
    }

    /// Blocking form of [`persist_copy`](Store::persist_copy): blocks the calling
    /// thread until the epoch is readable, and writes on the calling thread.
    ///
    /// # Errors
    /// As [`persist_copy`](Store::persist_copy), plus [`PersistError::Async`] with
    /// [`AsyncError::WouldBlock`] when called inside a `LocalExecutor` task on an epoch
    /// that is not ready.
    pub fn persist_copy_wait<T: Persist>(&self, reader: ReadBuffer<T>) -> Result<PersistentPtr<T>, PersistError> {
        let (bytes, refs) = {
            let v = reader.wait()?;
            (v.encode(), v.references())
        };
        drop(reader);
        self.commit_encoded::<T>(bytes, refs)
    }

    /// Moves the value out of `writer`'s epoch and commits it (destructive).
    ///
    /// Waits until the writer is active, takes the value (the `Async<T>` slot is left
    /// empty: readers of this epoch get [`AsyncError::NoValue`]) and commits it as
    /// [`commit`](Store::commit) does, without copying it. As for
    /// [`persist_copy`](Store::persist_copy), the future suspends only while waiting for
    /// the writer; the commit runs on the polling thread. The write epoch is held until
    /// the commit has finished, then released.
    ///
    /// If the commit fails, no ID is returned or published, the value is dropped, and
    /// the epoch is poisoned with [`CommitFailed`] (fail-stop: readers of this and later
    /// epochs get [`AsyncError::Poisoned`]).
    ///
    /// # Errors
    /// * [`PersistError::Async`] if the epoch is poisoned or the slot is empty (nothing
    ///   is committed; an empty slot is left empty, not poisoned);
    /// * as [`commit`](Store::commit) ([`PersistError::Io`], fatal).
    pub async fn persist_take<T: Persist>(&self, writer: WriteBuffer<T>) -> Result<PersistentPtr<T>, PersistError> {
        let (name, epoch) = (writer.name(), writer.epoch());
        let mut guard = writer.await?;
        let Some(value) = guard.take() else {
            return Err(no_value("write", name, epoch));
        };
        let res = self.commit(value);
        finish_take(guard, res)
    }

    /// Blocking form of [`persist_take`](Store::persist_take): blocks the calling thread
    /// until the writer is active, and commits on the calling thread.
    ///
    /// # Errors
    /// As [`persist_take`](Store::persist_take), plus [`PersistError::Async`] with
    /// [`AsyncError::WouldBlock`] when called inside a `LocalExecutor` task on an epoch
    /// that is not ready.
    pub fn persist_take_wait<T: Persist>(&self, writer: WriteBuffer<T>) -> Result<PersistentPtr<T>, PersistError> {
        let (name, epoch) = (writer.name(), writer.epoch());
        let mut guard = writer.wait()?;
        let Some(value) = guard.take() else {
            return Err(no_value("write", name, epoch));
        };
        let res = self.commit(value);
        finish_take(guard, res)
    }
}

/// Releases the (now empty) write epoch on success; poisons it on failure.
fn finish_take<T>(
    guard: WriteGuard<T>,
    res: Result<PersistentPtr<T>, PersistError>,
) -> Result<PersistentPtr<T>, PersistError> {
    match res {
        Ok(p) => {
            drop(guard);
            Ok(p)
        }
        Err(e) => {
            tracing::error!(error = %e, "persist_take: commit failed; poisoning the write epoch");
            guard.fail(CommitFailed::of(&e));
            Err(e)
        }
    }
}
