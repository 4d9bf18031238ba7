//! Exclusive hold on a rank directory: at most one live store per directory in this
//! process. A [`DirClaim`] is taken when the directory is opened and kept by the disk
//! handle; dropping it frees the directory for the next `Store::open`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::PersistError;

/// Rank directories opened by live stores of this process.
static OPEN_DIRS: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Marks a rank directory as open in this process until dropped.
pub(crate) struct DirClaim(PathBuf);

impl DirClaim {
    /// Claims `dir` for this process.
    ///
    /// # Errors
    /// [`PersistError::AlreadyOpen`] if a live store of this process holds it.
    pub(crate) fn new(dir: &Path) -> Result<DirClaim, PersistError> {
        let path = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
        let mut open = OPEN_DIRS.lock();
        if !open.get_or_insert_with(HashSet::new).insert(path.clone()) {
            return Err(PersistError::AlreadyOpen { path });
        }
        Ok(DirClaim(path))
    }
}

impl Drop for DirClaim {
    fn drop(&mut self) {
        if let Some(open) = OPEN_DIRS.lock().as_mut() {
            open.remove(&self.0);
        }
    }
}
