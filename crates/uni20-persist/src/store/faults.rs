//! Fault injection for tests and for exercising fail-stop handling:
//! [`Store::inject_io_failures`] makes the next commits fail as a full disk would.

use std::path::PathBuf;

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

    pub(super) fn take_injected_io_failure(&self, id: ObjectId) -> Result<(), PersistError> {
        use std::sync::atomic::Ordering;
        let left = self.inner.io_faults.load(Ordering::SeqCst);
        if left == 0
            || self
                .inner
                .io_faults
                .compare_exchange(left, left - 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
        {
            return Ok(());
        }
        let path = self.object_path(id).unwrap_or_else(|| PathBuf::from("<memory>"));
        Err(PersistError::Io {
            op: format!("write object {id} (injected fault)"),
            path,
            source: std::io::Error::from_raw_os_error(libc_enospc()),
        })
    }
}

/// `ENOSPC` ("No space left on device") on Linux and the BSDs.
const fn libc_enospc() -> i32 {
    28
}
