//! Named roots and garbage collection: [`Store::set_root`] / [`Store::remove_root`]
//! keep a durable map of root names to IDs, and [`Store::gc`] removes, from memory
//! and disk, every object not reachable (through `Persist::references`) from the
//! roots, the pinned objects and the loads in progress. A root change also runs the
//! release layer's full sweep, since roots keep released objects.

use std::collections::BTreeMap;

use super::state::OnDisk;
use super::{GcReport, ReleaseReport, Store};
use crate::{ObjectId, PersistError};

impl Store {
    /// Names `id` as a root: [`gc`](Store::gc) keeps it and everything it references
    /// (for example `"checkpoint/latest"` naming a wavefunction manifest). Replaces any
    /// previous root of that name. A disk store records the named roots durably
    /// (temp file, fsync, rename, directory fsync) before returning; they survive a
    /// restart. The object itself is not flushed: call [`flush`](Store::flush) for that.
    /// A root also keeps [released](Store::release) objects that it reaches; objects
    /// released earlier that a replaced root no longer reaches are freed here.
    ///
    /// # Errors
    /// [`PersistError::Io`] if the roots file cannot be written (the root is then not
    /// set), or if the file of a released object freed by the change cannot be deleted
    /// (the root is set).
    pub fn set_root(&self, name: &str, id: impl Into<ObjectId>) -> Result<(), PersistError> {
        self.edit_roots(|r| {
            r.insert(name.to_owned(), id.into());
        })
    }

    /// Removes the root `name`; returns the ID it named, if any. Released objects
    /// that no remaining root reaches are freed here (see [`release`](Store::release)).
    ///
    /// # Errors
    /// [`PersistError::Io`] if the roots file cannot be written, or if the file of a
    /// released object freed by the change cannot be deleted (the root is removed).
    pub fn remove_root(&self, name: &str) -> Result<Option<ObjectId>, PersistError> {
        let mut old = None;
        self.edit_roots(|r| old = r.remove(name))?;
        Ok(old)
    }

    /// The ID named by root `name`, if any. No I/O.
    pub fn root(&self, name: &str) -> Option<ObjectId> {
        self.inner.state.lock().roots.get(name).copied()
    }

    /// All named roots, sorted by name. No I/O.
    pub fn roots(&self) -> Vec<(String, ObjectId)> {
        let st = self.inner.state.lock();
        st.roots.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    fn edit_roots(&self, f: impl FnOnce(&mut BTreeMap<String, ObjectId>)) -> Result<(), PersistError> {
        // Serialize root edits so the file and the map stay in the same order.
        let _edit = self.inner.roots_edit.lock();
        let mut roots = self.inner.state.lock().roots.clone();
        f(&mut roots);
        if let Some(disk) = &self.inner.disk {
            disk.write_roots(&roots)?;
        }
        self.inner.state.lock().roots = roots;
        // Released objects that no root reaches any more go now.
        self.settle_released(&mut ReleaseReport::default())
    }

    /// Garbage collection: keeps every object reachable from `roots` or from the
    /// named roots ([`set_root`](Store::set_root)) (through
    /// [`Persist::references`](crate::Persist::references)), every pinned object (and what it reaches) and every
    /// object being loaded; removes all others from memory and from disk, then
    /// fsyncs the directory. Roots and references this store does not hold are ignored.
    ///
    /// References of byte-only objects (replicas never decoded here, files written by
    /// an earlier process without recorded references) are found by decoding them with
    /// the type registered for their type name ([`register`](Store::register)).
    ///
    /// Must not run concurrently with commits of objects that reference objects not
    /// reachable from `roots` (run it at a quiescent point); objects committed after it
    /// starts are never removed by it.
    ///
    /// # Errors
    /// [`PersistError::GcUnknownType`] (nothing removed) if a reachable object's
    /// references cannot be determined; disk errors while reading references or
    /// deleting files.
    pub fn gc(&self, roots: &[ObjectId]) -> Result<GcReport, PersistError> {
        loop {
            let mut st = self.inner.state.lock();
            let mut start: Vec<ObjectId> = roots.to_vec();
            start.extend(st.roots.values().copied());
            start.extend(self.inner.loading.lock().keys().copied());
            start.extend(st.entries.values().filter(|e| e.pinned()).map(|e| e.head.id));
            let reach = match st.reach(start) {
                Ok(r) => r,
                Err(unknown) => {
                    drop(st);
                    self.resolve_refs(unknown)?;
                    continue;
                }
            };
            let victims: Vec<ObjectId> = st
                .entries
                .values()
                .filter(|e| e.dead() || (!reach.contains(&e.head.id) && !e.pinned()))
                .map(|e| e.head.id)
                .collect();
            let corrupt: Vec<ObjectId> = st.corrupt.keys().filter(|id| !reach.contains(id)).copied().collect();
            let mut report = GcReport::default();
            let mut files = Vec::new();
            for id in victims {
                if let Some(e) = st.remove(id) {
                    report.removed += 1;
                    report.bytes_freed += e.charge();
                    if e.disk != OnDisk::No {
                        files.push(id);
                    }
                }
            }
            for id in corrupt {
                st.corrupt.remove(&id);
                files.push(id);
            }
            report.kept = st.entries.len() as u64;
            drop(st);
            if let Some(disk) = self.file_disk() {
                for &id in &files {
                    disk.remove_object(id)?;
                    report.files_removed += 1;
                    self.inner.state.lock().stats.disk_deletes += 1;
                }
                if !files.is_empty() {
                    disk.sync_dir()?;
                }
            }
            tracing::debug!(?report, "gc done");
            return Ok(report);
        }
    }
}
