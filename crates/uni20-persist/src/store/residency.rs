//! Residency: the memory budget. `enforce_budget` evicts unpinned resident entries in
//! least-recently-used order until the resident bytes fit, writing an entry to disk
//! first (a spill) when it has no file yet; a failed spill leaves that object
//! resident, is reported through [`Store::take_background_error`], and is retried at
//! the next check. [`Store::evict`] drops one object's resident forms on request. Pinned entries (a live `PValue` or an explicit pin)
//! are never evicted.

use std::collections::HashSet;
use std::sync::Arc;

use super::state::{for_each_parallel, verify, OnDisk, Settled};
use super::Store;
use crate::{ObjectId, PersistError};

impl Store {
    /// Evicts `id`: drops its resident forms (decoded value and bytes) from this
    /// store's cache, whatever the cache policy would do.
    ///
    /// Live [`PValue`](crate::PValue)s keep their value (they hold their own
    /// reference), and explicit pins ([`pin`](Store::pin)) are dropped with it. If the
    /// object has a disk file it stays servable from disk. In a disk store, an
    /// object this store committed that has no file yet (commits are written
    /// behind, see [`commit`](Store::commit)) is written first (a spill: one file
    /// write, not fsynced), so it stays servable from disk; if that write fails the
    /// object stays resident, the failure goes to
    /// [`take_background_error`](Store::take_background_error), and `false` is
    /// returned. Otherwise (an in-memory store, an unspilled replica, which its
    /// owner can serve again) this store forgets it entirely, as nothing else holds
    /// its bytes. No other I/O. Returns `true` if anything was dropped.
    pub fn evict(&self, id: ObjectId) -> bool {
        let own = id.origin == self.inner.rank
            && (id.nonce == self.inner.nonce || self.inner.state.lock().entries.get(&id).is_some_and(|e| e.named));
        if self.inner.disk.is_some() && own {
            if let Err(err) = self.write_back(id) {
                tracing::error!(object = %id, error = %err, "evict: cannot write the object's file; it stays resident");
                let mut st = self.inner.state.lock();
                st.stats.spill_failures += 1;
                if st.background_error.is_none() {
                    st.background_error = Some(err);
                }
                return false;
            }
        }
        let mut st = self.inner.state.lock();
        let Some(e) = st.entries.get(&id) else { return false };
        if e.disk != OnDisk::No {
            st.update(id, |e| {
                let was = e.resident();
                e.value = None;
                e.bytes = None;
                e.pins = 0;
                was
            })
            .unwrap_or(false)
        } else {
            st.remove(id).is_some()
        }
    }

    /// Writes the file of resident entry `id` if it has none yet (a spill, counted
    /// in `spills` and `disk_writes`); a no-op for an entry that has a file, is
    /// released (no root keeps it: it needs no file), is not resident or is unknown.
    fn write_back(&self, id: ObjectId) -> Result<(), PersistError> {
        let Some(disk) = self.inner.disk.as_ref() else {
            return Ok(());
        };
        let (meta, refs, src) = {
            let st = self.inner.state.lock();
            let Some(e) = st.entries.get(&id) else { return Ok(()) };
            if e.disk != OnDisk::No || e.released_unrooted() {
                return Ok(());
            }
            let src = match (&e.bytes, e.decoded(), e.encoder) {
                (Some(b), _, _) => Ok(b.clone()),
                (None, Some(v), Some(enc)) => Err((v, enc)),
                _ => return Ok(()),
            };
            (e.meta(), e.refs.clone(), src)
        };
        self.take_injected_spill_failure(id)?;
        let bytes: Arc<Vec<u8>> = match src {
            Ok(b) => b,
            Err((v, enc)) => {
                let b = enc(&*v).ok_or_else(|| PersistError::Decode(format!("object {id}: encoder type mismatch")))?;
                drop(v);
                verify(&meta, &b, None)?;
                b.into()
            }
        };
        disk.write_object(&meta, refs.as_deref(), &bytes)?;
        let mut st = self.inner.state.lock();
        st.stats.spills += 1;
        st.stats.disk_writes += 1;
        if let Some(e) = st.entries.get_mut(&id) {
            if e.disk == OnDisk::No {
                e.disk = OnDisk::Written;
            }
        }
        Ok(())
    }

    /// Evicts unpinned entries, least recently used first, until the resident bytes
    /// fit the budget (or only pinned entries remain). Spills to disk first when needed.
    ///
    /// A failed spill does not stop the others: the object stays resident (and
    /// servable), the pass goes on with the next candidates, and the next budget
    /// check tries it again. The failure is counted (`spill_failures`), logged, and
    /// the first one not yet taken is kept for [`take_background_error`](Store::take_background_error).
    /// Never fails the commit or load that ran it.
    pub(super) fn enforce_budget(&self) {
        let Some(budget) = self.inner.budget else {
            return;
        };
        if self.inner.state.lock().stats.bytes_resident <= budget {
            return;
        }
        // An in-memory store's spill directory, made once here: a failure is
        // reported once, not retried for every candidate.
        if let Err(e) = self.offload_disk() {
            let mut st = self.inner.state.lock();
            st.stats.spill_failures += 1;
            if st.background_error.is_none() {
                tracing::error!(error = %e, "cannot create the spill directory; objects stay resident");
                st.background_error = Some(e);
            }
            return;
        }
        let mut failed: HashSet<ObjectId> = HashSet::new();
        loop {
            let (id, meta, refs, src) = {
                let mut st = self.inner.state.lock();
                if st.stats.bytes_resident <= budget {
                    return;
                }
                let cand =
                    st.lru.values().copied().find(|id| {
                        !failed.contains(id) && st.entries.get(id).is_some_and(|e| !e.pinned() && !e.spilling)
                    });
                let Some(id) = cand else { return };
                let Some(e) = st.entries.get_mut(&id) else { return };
                if e.disk != OnDisk::No || e.dead() {
                    st.update(id, |e| {
                        e.value = None;
                        e.bytes = None;
                    });
                    st.stats.evictions += 1;
                    continue;
                }
                let src = match (&e.bytes, &e.value, e.encoder) {
                    (Some(b), _, _) => Ok(b.clone()),
                    (None, Some(v), Some(enc)) => Err((v.clone(), enc)),
                    _ => {
                        // Not reachable: a resident entry always has bytes or an
                        // encodable value. Leave it rather than spin.
                        failed.insert(id);
                        continue;
                    }
                };
                e.spilling = true;
                (id, e.meta(), e.refs.clone(), src)
            };
            let res = (|| {
                self.take_injected_spill_failure(id)?;
                let bytes: Arc<Vec<u8>> = match src {
                    Ok(b) => b,
                    Err((v, enc)) => {
                        let b = enc(&*v)
                            .ok_or_else(|| PersistError::Decode(format!("object {id}: encoder type mismatch")))?;
                        drop(v);
                        verify(&meta, &b, None)?;
                        b.into()
                    }
                };
                // A disk store's own directory; an in-memory store's offload
                // directory, created at its first spill.
                self.offload_disk()?
                    .write_object(&meta, refs.as_deref(), &bytes)
                    .map(|_| ())
            })();
            let mut st = self.inner.state.lock();
            let first = match st.entries.get_mut(&id) {
                Some(e) => {
                    e.spilling = false;
                    let first = !e.spill_failed;
                    e.spill_failed = res.is_err();
                    first
                }
                None if res.is_ok() => {
                    // Released and freed while its file was being written
                    // (the release found no file yet): nothing will delete the
                    // file it left, so this does.
                    st.stats.disk_writes += 1;
                    drop(st);
                    self.remove_orphan_file(id);
                    continue;
                }
                None => true,
            };
            if let Err(err) = res {
                st.stats.spill_failures += 1;
                if first {
                    tracing::error!(object = %id, error = %err, "spill failed; the object stays resident and the next budget check retries it");
                } else {
                    tracing::debug!(object = %id, error = %err, "spill failed again");
                }
                if st.background_error.is_none() {
                    st.background_error = Some(err);
                }
                failed.insert(id);
                continue;
            }
            st.stats.spills += 1;
            st.stats.disk_writes += 1;
            let evicted = st.update(id, |e| {
                e.disk = OnDisk::Written;
                let evict = !e.pinned();
                if evict {
                    e.value = None;
                    e.bytes = None;
                }
                evict
            });
            if evicted == Some(true) {
                st.stats.evictions += 1;
            }
        }
    }

    /// The first failure, not yet taken, of work the store did on the side of a
    /// commit, replica insert or load (then cleared): a spill that could not write
    /// its file ([`PersistError::Io`] naming the object and the file; the object
    /// stayed resident and is retried by the next budget check), or the deletion of
    /// the file of a freed released object. Those operations do not fail for it; this
    /// is where it is reported, once. Later failures while one waits here are only
    /// counted ([`StoreStats::spill_failures`](crate::StoreStats::spill_failures),
    /// [`StoreStats::delete_failures`](crate::StoreStats::delete_failures)) and
    /// logged. No I/O.
    pub fn take_background_error(&self) -> Option<PersistError> {
        self.inner.state.lock().background_error.take()
    }

    /// The cheap sweep: frees released objects that nothing pins any more and no
    /// named root reached at the last check (see [`release`](Store::release)). Memory
    /// is dropped at once; with `io`, their files are deleted too (without `io` such
    /// objects stay hidden for a later sweep). No reachability check; a no-op when
    /// no release is pending. Run by commits and loads, which do not fail for it: a
    /// failed deletion is counted, logged and kept for
    /// [`take_background_error`](Store::take_background_error).
    pub(super) fn sweep_released(&self, io: bool) {
        let files = {
            let mut st = self.inner.state.lock();
            if st.pending.is_empty() {
                return;
            }
            let ids: Vec<ObjectId> = st.pending.iter().copied().collect();
            let loading = self.inner.loading.lock();
            let mut files = Vec::new();
            for id in ids {
                match st.settle(id, None, loading.contains_key(&id), io) {
                    Settled::Freed { file: true, .. } | Settled::Kept { delete_file: true } => files.push(id),
                    Settled::Freed { file: false, .. } | Settled::Kept { delete_file: false } | Settled::Missing => {}
                }
            }
            files
        };
        if let (_, Err(e)) = self.delete_object_files(&files) {
            let mut st = self.inner.state.lock();
            if st.background_error.is_none() {
                st.background_error = Some(e);
            }
        }
    }

    /// Deletes the files of `ids` (a missing file is fine), counting each in the
    /// stats. Tries them all; returns how many were deleted and the first error.
    /// Deletes the file a spill or offload wrote for `id` after a release had
    /// already freed it; a failure is counted and logged, and kept for
    /// [`take_background_error`](Store::take_background_error).
    pub(super) fn remove_orphan_file(&self, id: ObjectId) {
        let res = self.offload_disk().and_then(|disk| disk.remove_object(id));
        let mut st = self.inner.state.lock();
        match res {
            Ok(()) => {
                st.stats.disk_deletes += 1;
                st.unsynced_deletes = true;
            }
            Err(e) => {
                tracing::error!(object = %id, error = %e, "cannot delete the file of an object freed during its spill");
                st.stats.delete_failures += 1;
                if st.background_error.is_none() {
                    st.background_error = Some(e);
                }
            }
        }
    }

    pub(super) fn delete_object_files(&self, ids: &[ObjectId]) -> (u64, Result<(), PersistError>) {
        let Some(disk) = self.file_disk() else {
            return (0, Ok(()));
        };
        let mut removed = 0;
        let mut first_err = Ok(());
        // Concurrent unlinks, as flushes fsync concurrently (see `for_each_parallel`).
        let results = for_each_parallel(ids, |&id| disk.remove_object(id));
        for (&id, res) in ids.iter().zip(results) {
            match res {
                Ok(()) => removed += 1,
                Err(e) => {
                    tracing::error!(object = %id, error = %e, "cannot delete the file of a released object");
                    self.inner.state.lock().stats.delete_failures += 1;
                    if first_err.is_ok() {
                        first_err = Err(e);
                    }
                }
            }
        }
        let mut st = self.inner.state.lock();
        st.stats.disk_deletes += removed;
        st.unsynced_deletes |= removed > 0;
        drop(st);
        (removed, first_err)
    }
}
