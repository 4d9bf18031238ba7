//! Durability: [`Store::flush`], [`Store::flush_ids`] and [`Store::flush_all`] write
//! the files not on disk yet, fsync each file, then fsync the rank directory once per
//! batch, and record the objects as durable; the same directory fsync makes the
//! deletions of released objects' files durable. A commit alone only makes an object
//! servable (file written and renamed, not fsynced).

use super::state::OnDisk;
use super::Store;
use crate::{ObjectId, PersistError};

impl Store {
    /// Makes object `id` durable: writes its file if it is not on disk yet, fsyncs the
    /// file, then fsyncs the directory. A no-op for an in-memory store, an object
    /// already durable, and a [released](Store::release) object that only pins keep
    /// (it is not written back). The directory is fsynced if a file was written or if
    /// files of released objects were deleted since the last flush, so a flush also
    /// makes earlier releases durable.
    ///
    /// # Errors
    /// [`PersistError::NotFound`] if this store does not hold `id`;
    /// [`PersistError::Io`] on write or fsync failure (fatal).
    pub fn flush(&self, id: impl Into<ObjectId>) -> Result<(), PersistError> {
        self.flush_ids(&[id.into()])
    }

    /// Makes every object of this store durable as one batch: writes the files not yet
    /// on disk, fsyncs each new file, then fsyncs the directory once. Released objects
    /// that only pins keep are skipped. A no-op for an in-memory store.
    ///
    /// # Errors
    /// [`PersistError::Io`] on write or fsync failure (fatal).
    pub fn flush_all(&self) -> Result<(), PersistError> {
        if self.inner.disk.is_none() {
            return Ok(());
        }
        self.flush_ids(&self.unflushed())
    }

    /// The objects that [`flush_all`](Store::flush_all) would make durable now
    /// (not yet durable, not released), sorted by ID; empty for an in-memory
    /// store. No I/O.
    pub fn unflushed(&self) -> Vec<ObjectId> {
        if self.inner.disk.is_none() {
            return Vec::new();
        }
        let mut ids: Vec<ObjectId> = {
            let st = self.inner.state.lock();
            st.entries
                .values()
                .filter(|e| !e.dead() && e.disk != OnDisk::Durable && !e.released_unrooted())
                .map(|e| e.meta.id)
                .collect()
        };
        ids.sort_unstable();
        ids
    }

    /// Flushes a batch of objects: one directory fsync for the whole batch.
    ///
    /// # Errors
    /// As [`flush`](Store::flush).
    pub fn flush_ids(&self, ids: &[ObjectId]) -> Result<(), PersistError> {
        let Some(disk) = self.inner.disk.as_ref() else {
            for &id in ids {
                if !self.contains(id) {
                    return Err(PersistError::NotFound(id));
                }
            }
            return Ok(());
        };
        let mut synced = Vec::new();
        for &id in ids {
            let (state, meta, refs) = {
                let st = self.inner.state.lock();
                let e = st
                    .entries
                    .get(&id)
                    .filter(|e| !e.dead())
                    .ok_or(PersistError::NotFound(id))?;
                if e.released_unrooted() {
                    // Released, only pins keep it for now: no file to make durable.
                    continue;
                }
                (e.disk, e.meta.clone(), e.refs.clone())
            };
            match state {
                OnDisk::Durable => continue,
                OnDisk::Written => {}
                OnDisk::No => {
                    let (_, bytes) = self.encoded(id)?;
                    disk.write_object(&meta, refs.as_deref(), &bytes)?;
                    let mut st = self.inner.state.lock();
                    st.stats.disk_writes += 1;
                    if let Some(e) = st.entries.get_mut(&id) {
                        if e.disk == OnDisk::No {
                            e.disk = OnDisk::Written;
                        }
                    }
                }
            }
            disk.sync_object(id)?;
            synced.push(id);
        }
        let deletions = std::mem::take(&mut self.inner.state.lock().unsynced_deletes);
        if synced.is_empty() && !deletions {
            return Ok(());
        }
        if let Err(e) = disk.sync_dir() {
            self.inner.state.lock().unsynced_deletes |= deletions;
            return Err(e);
        }
        let mut st = self.inner.state.lock();
        for id in synced {
            if let Some(e) = st.entries.get_mut(&id) {
                e.disk = OnDisk::Durable;
            }
        }
        Ok(())
    }
}
