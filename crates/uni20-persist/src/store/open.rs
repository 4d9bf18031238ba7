//! Opening a rank directory: [`Store::open`] indexes the object files found, resumes
//! the ID counter above everything issued before and loads the named roots. The
//! exclusive hold on the directory itself belongs to the disk layer
//! (`crate::dir_lock`).

use std::path::Path;

use super::state::{Entry, OnDisk, State};
use super::{Store, StoreOptions};
use crate::disk::Disk;
use crate::id::fresh_nonce;
use crate::PersistError;

impl Store {
    /// Opens (creating if needed) the disk store of `rank` under `dir`: the objects
    /// live in `dir/rank-<rank>/`.
    ///
    /// Every object file found is indexed (headers are read and checked; payloads are
    /// read on load). Unreadable files are remembered: loading such an object fails
    /// with the fatal [`PersistError::Corrupt`] / [`PersistError::Checksum`] naming the
    /// file, never `NotFound`. Leftover temporary files are deleted. The store's nonce
    /// ([`Store::nonce`]) is read from the directory's `nonce` file, or drawn at random
    /// and recorded durably when the directory has none (a new directory), so a
    /// reopened store keeps serving its objects under their IDs. The ID counter
    /// resumes above both the durably reserved high-water mark and every object of
    /// this rank and nonce found, so new IDs never collide with earlier ones, even
    /// after a crash.
    ///
    /// One store per rank directory: a second `open` of a directory that a live store
    /// of this process holds fails with [`PersistError::AlreadyOpen`], and one that
    /// another live process holds fails with [`PersistError::Locked`] (naming the
    /// directory and the holder's process ID). The hold is an advisory `flock` on the
    /// directory's `lock` file, released when the store (every clone) is dropped or
    /// the process dies, even by SIGKILL.
    ///
    /// # Errors
    /// [`PersistError::Io`] if the directory cannot be created or listed;
    /// [`PersistError::Corrupt`] if the nonce, counter or roots file is damaged;
    /// [`PersistError::AlreadyOpen`]; [`PersistError::Locked`].
    pub fn open(dir: &Path, rank: u32, opts: StoreOptions) -> Result<Store, PersistError> {
        let disk = Disk::create(dir, rank)?;
        let mut state = State::new();
        let nonce = match disk.read_nonce()? {
            Some(n) => n,
            None => {
                let n = fresh_nonce();
                disk.write_nonce(n)?;
                n
            }
        };
        let mut next = disk.read_counter()?.unwrap_or(0);
        state.roots = disk.read_roots()?;
        for (id, res) in disk.scan()? {
            if id.origin == rank && id.nonce == nonce {
                next = next.max(id.seq.saturating_add(1));
            }
            match res {
                Ok(h) => {
                    state.insert(Entry::new(h.meta, OnDisk::Durable, h.refs));
                }
                Err(e) => {
                    tracing::error!(object = %id, error = %e, "unreadable object file in store");
                    state.corrupt.insert(id, e);
                }
            }
        }
        tracing::debug!(rank, nonce = %format_args!("{nonce:016x}"), dir = %disk.dir().display(), objects = state.entries.len(), next, "opened persistent store");
        Ok(Store::from_parts(
            rank,
            nonce,
            Some(disk),
            opts.memory_budget,
            state,
            next,
        ))
    }
}
