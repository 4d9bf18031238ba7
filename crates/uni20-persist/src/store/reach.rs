//! Reachability through [`Persist::references`](crate::Persist::references): the
//! closure of a set of IDs over the references the store knows, and the resolution of
//! references it does not know yet (byte-only objects, files without recorded
//! references), by decoding them with the type registered for their type name. Used
//! by garbage collection, by release (objects a named root reaches are kept) and by
//! [`Store::flush_reachable`] (what a checkpoint reaches is made durable).

use std::collections::HashSet;
use std::sync::Arc;

use super::state::State;
use super::Store;
use crate::{ObjectId, PersistError};

/// A reachable object whose references are still unknown: id, type name, resident bytes.
pub(super) type Unresolved = (ObjectId, String, Option<Arc<Vec<u8>>>);

impl State {
    /// Every ID reachable from `start` (the start IDs included, held here or not),
    /// through the references of the entries held here, released ones included (a
    /// release verdict may depend on them). `Err`: the
    /// reachable entries whose references are unknown (resolve them with
    /// [`Store::resolve_refs`] and try again).
    pub(super) fn reach(&self, start: Vec<ObjectId>) -> Result<HashSet<ObjectId>, Vec<Unresolved>> {
        let mut stack = start;
        let mut reach: HashSet<ObjectId> = HashSet::new();
        let mut unknown: Vec<Unresolved> = Vec::new();
        while let Some(id) = stack.pop() {
            if !reach.insert(id) {
                continue;
            }
            let Some(e) = self.entries.get(&id) else { continue };
            match &e.refs {
                Some(r) => stack.extend(r.iter().copied()),
                None => unknown.push((id, e.head.type_name.clone(), e.bytes.clone())),
            }
        }
        if unknown.is_empty() {
            Ok(reach)
        } else {
            Err(unknown)
        }
    }
}

impl Store {
    /// Makes durable, as one batch ([`flush_ids`](Store::flush_ids): files written
    /// if not on disk yet, each fsynced, one directory fsync), the objects `ids` and
    /// every object held here that they reach through
    /// [`Persist::references`](crate::Persist::references): what a checkpoint naming
    /// `ids` needs on this rank's disk, and nothing else (objects it does not reach
    /// stay written behind, see [`commit`](Store::commit)). Referenced objects this
    /// store does not hold (another rank's) are skipped. Returns how many objects
    /// the batch covered (durable ones included). A no-op for an in-memory store
    /// beyond the checks.
    ///
    /// # Errors
    /// [`PersistError::NotFound`] if this store does not hold one of `ids`;
    /// [`PersistError::GcUnknownType`] if the references of a reached byte-only
    /// object of an unregistered type are needed; as [`flush_ids`](Store::flush_ids).
    pub fn flush_reachable(&self, ids: &[ObjectId]) -> Result<usize, PersistError> {
        if let Some(&id) = ids.iter().find(|&&id| !self.contains(id)) {
            return Err(PersistError::NotFound(id));
        }
        let reach = loop {
            let r = self.inner.state.lock().reach(ids.to_vec());
            match r {
                Ok(r) => break r,
                Err(unknown) => self.resolve_refs(unknown)?,
            }
        };
        let mut held: Vec<ObjectId> = {
            let st = self.inner.state.lock();
            reach
                .into_iter()
                .filter(|id| st.entries.get(id).is_some_and(|e| !e.dead()))
                .collect()
        };
        held.sort_unstable();
        self.flush_ids(&held)?;
        Ok(held.len())
    }

    /// Finds and records the references of `unknown` objects: decodes their bytes
    /// (resident, re-encoded or read from disk, released objects included) with the
    /// type registered for their type name. Objects with no bytes left (vanished, or
    /// freed releases) are recorded as referencing nothing.
    ///
    /// # Errors
    /// [`PersistError::GcUnknownType`] for a type name with no registered type; errors
    /// of `encoded` (disk) and of the type's `decode`.
    pub(super) fn resolve_refs(&self, unknown: Vec<Unresolved>) -> Result<(), PersistError> {
        for (id, type_name, bytes) in unknown {
            let f = self.inner.state.lock().refs_fns.get(&type_name).copied();
            let Some(f) = f else {
                return Err(PersistError::GcUnknownType { id, type_name });
            };
            let bytes: Arc<Vec<u8>> = match bytes {
                Some(b) => b,
                None => match self.encoded_impl(id, true, true) {
                    Ok((_, b)) => b,
                    Err(PersistError::NotFound(_)) => {
                        // Gone meanwhile (a freed release): it keeps nothing alive.
                        if let Some(e) = self.inner.state.lock().entries.get_mut(&id) {
                            e.refs = Some(Vec::new());
                        }
                        continue;
                    }
                    Err(e) => return Err(e),
                },
            };
            let refs = f(&bytes)?;
            let mut st = self.inner.state.lock();
            if let Some(e) = st.entries.get_mut(&id) {
                e.refs = Some(refs);
            }
        }
        Ok(())
    }
}
