//! Fault injection for tests and for exercising fail-stop handling:
//! [`Store::inject_io_failures`] makes the next commits fail as a full disk would,
//! and [`Store::inject_spill_failures`] does the same to the next spills.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use super::Store;
use crate::{ObjectId, PersistError};

impl Store {
    /// Fault injection, for tests and for debugging fail-stop handling: the
    /// next `n` commits fail with an I/O error (`ENOSPC`, as a full disk
    /// would), before their object is written or their id is returned.
    /// The allocated ids are never reused.
    pub fn inject_io_failures(&self, n: u32) {
        self.inner.io_faults.store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// Fault injection, for tests: the next `n` spills (writes of an evicted object's
    /// file by the memory budget) fail with an I/O error (`ENOSPC`, as a full disk
    /// would), before anything is written. Replaces any earlier count.
    pub fn inject_spill_failures(&self, n: u32) {
        self.inner.spill_faults.store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// Consumes one injected commit failure, if any, as the error for object `id`.
    pub(super) fn take_injected_io_failure(&self, id: ObjectId) -> Result<(), PersistError> {
        self.take_fault(&self.inner.io_faults, "write", id)
    }

    /// Consumes one injected spill failure, if any, as the error for object `id`.
    pub(super) fn take_injected_spill_failure(&self, id: ObjectId) -> Result<(), PersistError> {
        self.take_fault(&self.inner.spill_faults, "spill", id)
    }

    fn take_fault(&self, faults: &AtomicU32, what: &str, id: ObjectId) -> Result<(), PersistError> {
        let taken = faults.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if taken.is_err() {
            return Ok(());
        }
        let path = self.object_path(id).unwrap_or_else(|| PathBuf::from("<memory>"));
        Err(PersistError::Io {
            op: format!("{what} object {id} (injected fault)"),
            path,
            source: std::io::Error::from(rustix::io::Errno::NOSPC),
        })
    }
}
