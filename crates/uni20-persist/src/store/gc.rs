//! Named roots and garbage collection: [`Store::set_root`] / [`Store::remove_root`]
//! keep a durable map of root names to IDs, and [`Store::gc`] removes, from memory
//! and disk, every object not reachable (through `Persist::references`) from the
//! roots, the pinned objects and the loads in progress.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::state::OnDisk;
use super::{GcReport, Store};
use crate::{ObjectId, PersistError};

/// A reachable object whose references gc must still find: id, type name, resident bytes.
type Unresolved = (ObjectId, String, Option<Arc<Vec<u8>>>);

impl Store {
    /// Names `id` as a root: [`gc`](Store::gc) keeps it and everything it references
    /// (for example `"checkpoint/latest"` naming a wavefunction manifest). Replaces any
    /// previous root of that name. A disk store records the named roots durably
    /// (temp file, fsync, rename, directory fsync) before returning; they survive a
    /// restart. The object itself is not flushed: call [`flush`](Store::flush) for that.
    ///
    /// # Errors
    /// [`PersistError::Io`] if the roots file cannot be written (the root is then not set).
    pub fn set_root(&self, name: &str, id: impl Into<ObjectId>) -> Result<(), PersistError> {
        self.edit_roots(|r| {
            r.insert(name.to_owned(), id.into());
        })
    }

    /// Removes the root `name`; returns the ID it named, if any.
    ///
    /// # Errors
    /// [`PersistError::Io`] if the roots file cannot be written.
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
        Ok(())
    }

    /// Garbage collection: keeps every object reachable from `roots` or from the
    /// named roots ([`set_root`](Store::set_root)) (through
    /// [`Persist::references`]), every pinned object (and what it reaches) and every
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
            let loading: Vec<ObjectId> = self.inner.loading.lock().keys().copied().collect();
            let mut stack: Vec<ObjectId> = roots.to_vec();
            stack.extend(st.roots.values().copied());
            stack.extend(loading);
            stack.extend(st.entries.values().filter(|e| e.pinned()).map(|e| e.meta.id));
            let mut reach: HashSet<ObjectId> = HashSet::new();
            let mut unknown: Vec<Unresolved> = Vec::new();
            while let Some(id) = stack.pop() {
                if !reach.insert(id) {
                    continue;
                }
                let Some(e) = st.entries.get(&id) else { continue };
                match &e.refs {
                    Some(r) => stack.extend(r.iter().copied()),
                    None => unknown.push((id, e.meta.type_name.clone(), e.bytes.clone())),
                }
            }
            if unknown.is_empty() {
                let victims: Vec<ObjectId> = st
                    .entries
                    .values()
                    .filter(|e| !reach.contains(&e.meta.id) && !e.pinned())
                    .map(|e| e.meta.id)
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
                if let Some(disk) = &self.inner.disk {
                    for &id in &files {
                        disk.remove_object(id)?;
                        report.files_removed += 1;
                    }
                    if !files.is_empty() {
                        disk.sync_dir()?;
                    }
                }
                tracing::debug!(?report, "gc done");
                return Ok(report);
            }
            drop(st);
            for (id, type_name, bytes) in unknown {
                let f = self.inner.state.lock().refs_fns.get(&type_name).copied();
                let Some(f) = f else {
                    return Err(PersistError::GcUnknownType { id, type_name });
                };
                let bytes: Arc<Vec<u8>> = match bytes {
                    Some(b) => b,
                    None => self.encoded(id)?.1,
                };
                let refs = f(&bytes)?;
                let mut st = self.inner.state.lock();
                if let Some(e) = st.entries.get_mut(&id) {
                    e.refs = Some(refs);
                }
            }
        }
    }
}
