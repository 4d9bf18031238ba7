//! Release: the owner of an object says it no longer needs it. [`Store::release`] and
//! [`Store::release_many`] remove released objects from memory and disk at once,
//! unless something still holds them: an explicit pin, a live `PValue`, a load in
//! progress (the object is then freed by the first sweep after the last of these
//! goes), or a named root that reaches it through `Persist::references` (kept while
//! a root reaches it; looked at again whenever roots change). The full sweep here
//! checks reachability from the named roots; the cheap sweep of the residency layer,
//! run by commits and loads, completes deferred releases.

use std::collections::HashSet;

use super::state::Settled;
use super::{ReleaseReport, Store};
use crate::{ObjectId, PersistError};

impl Store {
    /// Releases one object: the owner no longer needs it. As
    /// [`release_many`](Store::release_many) with one ID.
    ///
    /// # Errors
    /// As [`release_many`](Store::release_many).
    pub fn release(&self, id: impl Into<ObjectId>) -> Result<ReleaseReport, PersistError> {
        self.release_many(&[id.into()])
    }

    /// Releases a batch of objects: their owner no longer needs them.
    ///
    /// Each released object this store holds is removed from memory and its file is
    /// deleted, unless
    /// * a named root ([`set_root`](Store::set_root)) reaches it through
    ///   [`Persist::references`](crate::Persist::references) (for example an
    ///   [`ObjectSet`](crate::ObjectSet) root keeps its objects): it stays, fully
    ///   servable, and is freed once a root change leaves it unreachable;
    /// * it is pinned (an explicit [`pin`](Store::pin) or a live [`PValue`](crate::PValue))
    ///   or being loaded: it stays loadable and servable while so. Its file is deleted
    ///   at once unless a load is in progress (pins keep it resident), and when only
    ///   `PValue`s hold it the store drops its own reference, so the memory goes with
    ///   the last `PValue`; the entry itself goes at the next sweep (the next commit,
    ///   I/O load, replica insert, release or gc). A value is never freed under the
    ///   holder of a `PValue`.
    ///
    /// Once freed an object is gone for good (loads say [`PersistError::NotFound`]),
    /// and naming it in a root later does not bring it back. IDs this store does not
    /// hold are counted in [`ReleaseReport::not_found`]; duplicates count once.
    /// Releasing an object twice is harmless.
    ///
    /// Cost: one traversal of the objects the named roots reach (none without named
    /// roots), plus one file deletion per freed file. Deletions are not fsynced here
    /// (one directory fsync per batch would cost more than the release): they become
    /// durable with the next directory fsync, which [`flush_all`](Store::flush_all)
    /// or any [`flush`](Store::flush) performs whenever deletions are pending, as do
    /// [`gc`](Store::gc) and [`set_root`](Store::set_root). After a crash before that, a
    /// freed object may reappear on reopen as an unreferenced object, which the next
    /// `gc` removes; its ID is never issued again.
    ///
    /// If the references of an object a root reaches cannot be determined (a
    /// byte-only object of a type never [`register`](Store::register)ed), every
    /// released object is conservatively kept as root-reachable, and a warning names
    /// the type.
    ///
    /// # Errors
    /// [`PersistError::Io`] if a file cannot be deleted (the other files are still
    /// deleted; the objects are gone from memory); disk errors while reading the
    /// references of root-reachable objects.
    pub fn release_many(&self, ids: &[ObjectId]) -> Result<ReleaseReport, PersistError> {
        let _edit = self.inner.roots_edit.lock();
        let mut mine = ids.to_vec();
        mine.sort_unstable();
        mine.dedup();
        let mut report = ReleaseReport::default();
        {
            let mut st = self.inner.state.lock();
            for &id in &mine {
                let newly = match st.entries.get_mut(&id) {
                    Some(e) if !e.dead() => {
                        report.released += 1;
                        !std::mem::replace(&mut e.released, true)
                    }
                    _ => {
                        report.not_found += 1;
                        continue;
                    }
                };
                if newly {
                    st.pending.insert(id);
                }
            }
        }
        let res = self.settle_released(&mut report);
        let st = self.inner.state.lock();
        for id in &mine {
            if st.retained.contains(id) {
                report.retained += 1;
            } else if st.pending.contains(id) {
                report.deferred += 1;
            }
        }
        drop(st);
        tracing::debug!(?report, "release done");
        res.map(|()| report)
    }

    /// The full sweep: applies the release rule to every released object still
    /// present, with a fresh reachability check from the named roots; deletes the
    /// files that are no longer needed. The caller holds `roots_edit`.
    pub(super) fn settle_released(&self, report: &mut ReleaseReport) -> Result<(), PersistError> {
        let mut conservative = false;
        let files = loop {
            let mut st = self.inner.state.lock();
            if st.pending.is_empty() && st.retained.is_empty() {
                return Ok(());
            }
            let roots: Vec<ObjectId> = st.roots.values().copied().collect();
            let reach = if conservative || roots.is_empty() {
                HashSet::new()
            } else {
                match st.reach(roots) {
                    Ok(r) => r,
                    Err(unknown) => {
                        drop(st);
                        match self.resolve_refs(unknown) {
                            Ok(()) => {}
                            Err(PersistError::GcUnknownType { id, type_name }) => {
                                tracing::warn!(
                                    object = %id,
                                    type_name,
                                    "release: references unknown (register the type with Store::register); \
                                     keeping every released object as root-reachable"
                                );
                                conservative = true;
                            }
                            Err(e) => return Err(e),
                        }
                        continue;
                    }
                }
            };
            let loading: HashSet<ObjectId> = self.inner.loading.lock().keys().copied().collect();
            let ids: Vec<ObjectId> = st.pending.iter().chain(st.retained.iter()).copied().collect();
            let mut files = Vec::new();
            for id in ids {
                let rooted = conservative || reach.contains(&id);
                match st.settle(id, Some(rooted), loading.contains(&id), true) {
                    Settled::Freed { size, file } => {
                        report.freed += 1;
                        report.bytes_freed += size;
                        if file {
                            files.push(id);
                        }
                    }
                    Settled::Kept { delete_file: true } => files.push(id),
                    Settled::Kept { delete_file: false } | Settled::Missing => {}
                }
            }
            break files;
        };
        let (removed, res) = self.delete_object_files(&files);
        report.files_removed += removed;
        res
    }
}
