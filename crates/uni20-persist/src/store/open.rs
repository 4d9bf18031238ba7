//! Opening a rank directory: [`Store::open`] indexes the object files found, resumes
//! the ID counter above everything issued before and loads the named roots. The
//! exclusive hold on the directory itself belongs to the disk layer
//! (`crate::dir_lock`).

use std::path::Path;

use super::state::{Entry, OnDisk, State};
use super::{Store, StoreOptions};
use crate::disk::Disk;
use crate::PersistError;

impl Store {
    /// Opens (creating if needed) the disk store of `rank` under `dir`: the objects
    /// live in `dir/rank-<rank>/`.
    ///
    /// Every object file found is indexed (headers are read and checked; payloads are
    /// read on load). Unreadable files are remembered: loading such an object fails
    /// with the fatal [`PersistError::Corrupt`] / [`PersistError::Checksum`] naming the
    /// file, never `NotFound`. Leftover temporary files are deleted. The ID counter
    /// resumes above both the durably reserved high-water mark and every own-origin
    /// object found, so IDs never collide with earlier ones, even after a crash.
    ///
    /// One store per rank directory: a second `open` of a directory that a live store
    /// of this process holds fails with [`PersistError::AlreadyOpen`]. Opening one
    /// directory from two processes at once is not detected and not supported.
    ///
    /// # Errors
    /// [`PersistError::Io`] if the directory cannot be created or listed;
    /// [`PersistError::Corrupt`] if the counter or roots file is damaged;
    /// [`PersistError::AlreadyOpen`].
    pub fn open(dir: &Path, rank: u32, opts: StoreOptions) -> Result<Store, PersistError> {
        let disk = Disk::create(dir, rank)?;
        let mut state = State::new();
        let mut next = disk.read_counter()?.unwrap_or(0);
        state.roots = disk.read_roots()?;
        for (id, res) in disk.scan()? {
            if id.origin == rank {
                next = next.max(id.seq.saturating_add(1));
            }
            match res {
                Ok(h) => {
                    state.insert(Entry {
                        meta: h.meta,
                        value: None,
                        encoder: None,
                        bytes: None,
                        disk: OnDisk::Durable,
                        refs: h.refs,
                        tick: 0,
                        spilling: false,
                        pins: 0,
                    });
                }
                Err(e) => {
                    tracing::error!(object = %id, error = %e, "unreadable object file in store");
                    state.corrupt.insert(id, e);
                }
            }
        }
        tracing::debug!(rank, dir = %disk.dir().display(), objects = state.entries.len(), next, "opened persistent store");
        Ok(Store::from_parts(rank, Some(disk), opts.memory_budget, state, next))
    }
}
