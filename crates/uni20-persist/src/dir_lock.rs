//! Exclusive hold on a rank directory: one live store per directory, across
//! processes as well as inside one. Two stores on one directory would issue
//! colliding IDs and delete each other's files.
//!
//! Inside a process a [`DirClaim`] in a process-wide set gives a clear
//! [`PersistError::AlreadyOpen`]. Across processes the directory's `lock` file is
//! held with an advisory exclusive `flock` (taken without blocking) for the life of
//! the store: a second process gets [`PersistError::Locked`] naming the directory and
//! the holder's process ID, which the holder writes into the file. The kernel drops
//! the lock when the holder's file descriptor closes, so it is released when the
//! store is dropped and when the process dies in any way, SIGKILL included; a stale
//! process ID left in the file is only a hint and is overwritten by the next holder.
//! `flock` is advisory (it only stops other uni20 stores) and, on network file
//! systems, only as reliable as the file system's lock support.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use rustix::fs::{flock, FlockOperation};

use crate::PersistError;

/// Rank directories opened by live stores of this process.
static OPEN_DIRS: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Name of the lock file inside a rank directory.
pub(crate) const LOCK_FILE: &str = "lock";

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

/// This process's exclusive hold on a rank directory: the in-process claim and the
/// `flock` on its lock file. Released when dropped (or when the process dies).
pub(crate) struct DirLock {
    // Field order is drop order: unlock (close) before giving up the claim.
    _file: File,
    _claim: DirClaim,
}

impl DirLock {
    /// Takes `dir` (an existing directory) for this store: first the in-process claim,
    /// then the lock file's `flock`, without blocking; then records this process's
    /// ID in the lock file.
    ///
    /// # Errors
    /// [`PersistError::AlreadyOpen`] if a live store of this process holds `dir`;
    /// [`PersistError::Locked`] if another process holds it;
    /// [`PersistError::Io`] if the lock file cannot be opened, locked or written.
    pub(crate) fn acquire(dir: &Path) -> Result<DirLock, PersistError> {
        let claim = DirClaim::new(dir)?;
        let path = dir.join(LOCK_FILE);
        let io = |op: &str| {
            let path = path.clone();
            let op = op.to_owned();
            move |e: std::io::Error| PersistError::io(op, path, e)
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io("open lock file"))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                let holder = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|s| s.trim().parse::<u32>().ok());
                return Err(PersistError::Locked {
                    path: dir.canonicalize().unwrap_or_else(|_| dir.to_owned()),
                    holder,
                });
            }
            Err(e) => return Err(io("lock store directory")(e.into())),
        }
        file.set_len(0).map_err(io("write lock file"))?;
        file.write_all(format!("{}\n", std::process::id()).as_bytes())
            .map_err(io("write lock file"))?;
        Ok(DirLock {
            _file: file,
            _claim: claim,
        })
    }
}
