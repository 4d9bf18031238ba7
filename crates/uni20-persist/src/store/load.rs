//! The load paths: [`Store::try_load_local`] (resident only, no I/O),
//! [`Store::load_wait`] (blocking) and [`Store::load`] (async, on the load pool) all
//! end in one single-flight `materialize` per ID, which decodes resident bytes, a
//! disk file. Also the encoded forms served to other ranks
//! ([`Store::encoded`], [`Store::encoded_for_transfer`]) and pins by ID
//! ([`Store::pin`], [`Store::unpin`]), which make an object's bytes resident.

use std::sync::Arc;

use parking_lot::Mutex;

use super::state::{encode_erased, refs_erased, type_mismatch, verify, AnyArc, EncodeFn, OnDisk};
use super::{Inner, Store};
use crate::pool::spawn_blocking;
use crate::{ObjectId, ObjectMeta, PValue, Persist, PersistError, PersistentPtr};

/// Removes a load-in-progress marker when the loader finishes (or fails).
struct LoadingGuard<'a> {
    inner: &'a Inner,
    id: ObjectId,
    lock: Arc<Mutex<()>>,
}

impl Drop for LoadingGuard<'_> {
    fn drop(&mut self) {
        let mut l = self.inner.loading.lock();
        if l.get(&self.id).is_some_and(|a| Arc::ptr_eq(a, &self.lock)) {
            // Waiters holding this lock re-check residency once they get it; new
            // arrivals create a fresh lock and re-check too.
            l.remove(&self.id);
        }
    }
}

impl Store {
    /// The loading lock of `id` (single flight: one load or prefetch read at a
    /// time per object), registered until the returned guard drops; the
    /// caller locks `guard.lock` while it works.
    fn loading_slot(&self, id: ObjectId) -> LoadingGuard<'_> {
        let lock = {
            let mut l = self.inner.loading.lock();
            l.entry(id).or_insert_with(|| Arc::new(Mutex::new(()))).clone()
        };
        LoadingGuard {
            inner: &self.inner,
            id,
            lock,
        }
    }

    /// Returns the object if it is resident here, without I/O and without blocking
    /// on other loads' I/O.
    ///
    /// Returns `None` on a miss: the object is absent, only on disk, of another type
    /// (logged), or its bytes fail to decode (logged). A resident byte-only replica
    /// is decoded here, once: concurrent callers wait for the one decode, and the
    /// decoded value replaces the bytes in the cache, so later loads share it.
    ///
    /// Never performs I/O, even on a disk store over its memory budget: the
    /// eviction and spill work that a decode may call for is left to the next
    /// commit, [`load_wait`](Store::load_wait) or [`load`](Store::load).
    pub fn try_load_local<T: Persist>(&self, p: PersistentPtr<T>) -> Option<PValue<T>> {
        let id = p.id();
        {
            let mut st = self.inner.state.lock();
            match st.resident_value::<T>(id) {
                Some(Ok(v)) => return Some(PValue::new(id, v)),
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "try_load_local: type mismatch");
                    return None;
                }
                None => {}
            }
            st.stats.misses += 1;
            if !matches!(st.entries.get(&id), Some(e) if e.bytes.is_some()) {
                return None;
            }
        }
        match self.materialize::<T>(id, false) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(object = %id, error = %e, "try_load_local failed to decode resident bytes");
                None
            }
        }
    }

    /// Returns the object, materializing it if needed, blocking the calling thread.
    ///
    /// Sources, in order: the resident value; resident bytes (decoded); this store's
    /// disk file (read, size and CRC checked, decoded). A store never fetches from
    /// other ranks on a miss: another rank's object is here only as a replica
    /// inserted beforehand ([`Store::insert_replica`], which the runtime's plans do
    /// as explicit transfers). Concurrent loads of one ID materialize it once; the
    /// others wait for it.
    ///
    /// # Errors
    /// * [`PersistError::NotFound`] if this store does not hold it;
    /// * [`PersistError::TypeMismatch`] if the object is not a `T`;
    /// * [`PersistError::Checksum`] / [`PersistError::Corrupt`] (fatal) if its file or
    ///   bytes are damaged; the error names the object and the file;
    /// * [`PersistError::Io`], [`PersistError::Decode`].
    pub fn load_wait<T: Persist>(&self, p: PersistentPtr<T>) -> Result<PValue<T>, PersistError> {
        let id = p.id();
        {
            let mut st = self.inner.state.lock();
            if let Some(r) = st.resident_value::<T>(id) {
                return r.map(|v| PValue::new(id, v));
            }
            st.stats.misses += 1;
        }
        match self.materialize::<T>(id, true)? {
            Some(v) => Ok(v),
            None => Err(PersistError::NotFound(id)),
        }
    }

    /// Async form of [`load_wait`](Store::load_wait): completes at once (without
    /// suspending) on a resident hit; otherwise the disk read and decode run on
    /// this store's small background thread pool and the future completes when it is
    /// done. Works with any executor (it only uses the `Waker`).
    ///
    /// # Errors
    /// As [`load_wait`](Store::load_wait).
    pub async fn load<T: Persist>(&self, p: PersistentPtr<T>) -> Result<PValue<T>, PersistError> {
        let id = p.id();
        {
            let mut st = self.inner.state.lock();
            match st.resident_value::<T>(id) {
                Some(r) => return r.map(|v| PValue::new(id, v)),
                None => st.stats.misses += 1,
            }
        }
        let store = self.clone();
        spawn_blocking(&self.inner.pool, move || {
            store.materialize::<T>(id, true)?.ok_or(PersistError::NotFound(id))
        })
        .await
    }

    /// Single-flight materialization of `id` as `T`. With `io == false` only resident
    /// bytes are used and nothing touches the disk: no spill, no eviction work, no
    /// file deletion. `Ok(None)`: not available from the allowed sources.
    pub(super) fn materialize<T: Persist>(&self, id: ObjectId, io: bool) -> Result<Option<PValue<T>>, PersistError> {
        let _guard = self.loading_slot(id);
        let _held = _guard.lock.lock();

        // Someone may have finished while we waited; find what we can use.
        enum Src {
            Bytes(Arc<Vec<u8>>),
            Disk,
        }
        let src = {
            let mut st = self.inner.state.lock();
            st.register_refs(T::TYPE_NAME, refs_erased::<T>);
            if let Some(r) = st.resident_value::<T>(id) {
                return r.map(|v| Some(PValue::new(id, v)));
            }
            match st.entries.get(&id) {
                // Released and unpinned: gone, and not to be fetched back either.
                Some(e) if e.dead() => return Ok(None),
                Some(e) => {
                    if e.head.type_name != T::TYPE_NAME {
                        return Err(type_mismatch::<T>(&e.head));
                    }
                    if let Some(b) = &e.bytes {
                        Src::Bytes(b.clone())
                    } else if e.disk != OnDisk::No {
                        Src::Disk
                    } else {
                        // Resident value of another Rust type with the same name.
                        return Err(PersistError::TypeMismatch {
                            id,
                            expected: T::TYPE_NAME.to_owned(),
                            found: format!("{} (a different Rust type)", e.head.type_name),
                        });
                    }
                }
                None => {
                    if let Some(e) = st.corrupt.get(&id) {
                        return Err(self.corrupt_error(id, e));
                    }
                    // Not held here: objects of other ranks come only as
                    // replicas that a plan's transfer inserted.
                    return Ok(None);
                }
            }
        };
        let bytes: Arc<Vec<u8>> = match src {
            Src::Bytes(b) => b,
            Src::Disk if io => {
                let disk = self.file_disk().ok_or(PersistError::NotFound(id))?;
                let (h, payload) = disk.read_object(id)?;
                let mut st = self.inner.state.lock();
                st.stats.disk_reads += 1;
                if let Some(e) = st.entries.get(&id) {
                    if e.meta() != h.meta {
                        return Err(PersistError::Corrupt {
                            id: Some(id),
                            path: disk.object_path(id),
                            check: crate::FailedCheck::Format,
                            reason: "file metadata differs from the indexed metadata".into(),
                        });
                    }
                }
                payload.into()
            }
            _ => return Ok(None),
        };
        let value = T::decode(&bytes)?;
        let refs = value.references();
        let arc = Arc::new(value);
        {
            let mut st = self.inner.state.lock();
            st.stats.materializations += 1;
            let any: AnyArc = arc.clone();
            st.update(id, |e| {
                e.value = Some(any);
                e.encoder = Some(encode_erased::<T>);
                e.refs = Some(refs);
                // The decoded value replaces the byte form (re-encoded on demand).
                e.bytes = None;
            });
        }
        drop(_held);
        drop(_guard);
        // The no-I/O path (`try_load_local`) leaves file deletions and eviction work
        // to the next commit or I/O load.
        self.sweep_released(io);
        if io {
            self.enforce_budget();
        }
        Ok(Some(PValue::new(id, arc)))
    }

    /// The prefetch job: reads object `id` from disk into `buf` (allocated by
    /// the thread that asked, see [`crate::disk::Disk::read_object_into`]) and
    /// keeps the verified bytes resident, to be decoded by the first load, on
    /// the loading thread. Takes the object's loading lock, so a load that
    /// starts meanwhile waits for it and then finds the bytes. `Ok(false)`:
    /// nothing to do (resident already, released, or not on disk).
    pub(super) fn prefetch_bytes(&self, id: ObjectId, buf: Vec<u8>) -> Result<bool, PersistError> {
        let _guard = self.loading_slot(id);
        let _held = _guard.lock.lock();
        let wanted = |st: &super::state::State| {
            st.entries
                .get(&id)
                .is_some_and(|e| !e.dead() && !e.resident() && e.disk != OnDisk::No)
        };
        if !wanted(&self.inner.state.lock()) {
            return Ok(false);
        }
        let disk = self.file_disk().ok_or(PersistError::NotFound(id))?;
        let (h, payload) = disk.read_object_with(id, buf)?;
        let mut st = self.inner.state.lock();
        st.stats.disk_reads += 1;
        if !wanted(&st) {
            return Ok(false);
        }
        if st.entries.get(&id).is_some_and(|e| e.meta() != h.meta) {
            return Err(PersistError::Corrupt {
                id: Some(id),
                path: disk.object_path(id),
                check: crate::FailedCheck::Format,
                reason: "file metadata differs from the indexed metadata".into(),
            });
        }
        let size = payload.len() as u64;
        st.update(id, |e| e.bytes = Some(Arc::new(payload)));
        st.stats.prefetches += 1;
        st.stats.bytes_prefetched += size;
        drop(st);
        drop(_held);
        drop(_guard);
        // As after a load: releases that waited for this read, and the budget.
        self.sweep_released(true);
        self.enforce_budget();
        Ok(true)
    }

    pub(super) fn corrupt_error(&self, id: ObjectId, e: &PersistError) -> PersistError {
        let path = self.object_path(id).unwrap_or_default();
        PersistError::Corrupt {
            id: Some(id),
            path,
            check: e.failed_check().unwrap_or(crate::FailedCheck::Format),
            reason: e.to_string(),
        }
    }

    /// The metadata and encoded bytes of object `id`, to send to another rank.
    ///
    /// Uses resident bytes, else re-encodes the resident value (checking the result
    /// against the recorded size and CRC-32), else reads the disk file.
    ///
    /// # Errors
    /// [`PersistError::NotFound`] if this store does not hold `id`;
    /// [`PersistError::Checksum`] if re-encoding gives different bytes (a
    /// non-deterministic `Persist::encode`) or the file is damaged;
    /// [`PersistError::Corrupt`], [`PersistError::Io`] for disk problems.
    pub fn encoded(&self, id: ObjectId) -> Result<(ObjectMeta, Arc<Vec<u8>>), PersistError> {
        self.encoded_impl(id, true, false)
    }

    /// Like [`Store::encoded`], but a payload re-encoded from a resident value
    /// is not checked against its checksum here: for transfers, where the
    /// receiving store's [`Store::insert_replica`] verifies size and checksum
    /// anyway (one CRC pass instead of two on the path).
    ///
    /// # Errors
    /// As [`Store::encoded`], except [`PersistError::Checksum`] for a
    /// resident value, which the receiver reports instead.
    pub fn encoded_for_transfer(&self, id: ObjectId) -> Result<(ObjectMeta, Arc<Vec<u8>>), PersistError> {
        self.encoded_impl(id, false, false)
    }

    /// [`encoded`](Store::encoded) with options: `check` verifies a re-encoded
    /// payload's checksum; `released` also serves a released object that nothing
    /// holds any more but whose bytes are still here (for reachability checks).
    pub(super) fn encoded_impl(
        &self,
        id: ObjectId,
        check: bool,
        released: bool,
    ) -> Result<(ObjectMeta, Arc<Vec<u8>>), PersistError> {
        enum Src {
            Value(AnyArc, EncodeFn),
            Disk,
        }
        // A fresh commit's checksum, computed outside the lock.
        self.seal(id);
        let (meta, src) = {
            let st = self.inner.state.lock();
            let Some(e) = st.entries.get(&id).filter(|e| released || !e.dead()) else {
                if let Some(c) = st.corrupt.get(&id) {
                    return Err(self.corrupt_error(id, c));
                }
                return Err(PersistError::NotFound(id));
            };
            if let Some(b) = &e.bytes {
                return Ok((e.meta(), b.clone()));
            }
            match (e.decoded(), e.encoder) {
                (Some(v), Some(enc)) => (e.meta(), Src::Value(v, enc)),
                _ if e.disk != OnDisk::No => (e.meta(), Src::Disk),
                _ => return Err(PersistError::NotFound(id)),
            }
        };
        let bytes = match src {
            Src::Value(v, enc) => {
                let b = enc(&*v).ok_or_else(|| PersistError::Decode(format!("object {id}: encoder type mismatch")))?;
                if check {
                    verify(&meta, &b, None)?;
                }
                b
            }
            Src::Disk => {
                let disk = self.file_disk().ok_or(PersistError::NotFound(id))?;
                let (h, b) = disk.read_object(id)?;
                self.inner.state.lock().stats.disk_reads += 1;
                if h.meta != meta {
                    return Err(PersistError::Corrupt {
                        id: Some(id),
                        path: disk.object_path(id),
                        check: crate::FailedCheck::Format,
                        reason: "file metadata differs from the indexed metadata".into(),
                    });
                }
                b
            }
        };
        Ok((meta, bytes.into()))
    }

    /// Pins object `id` by ID, without knowing its type (the storage-rank `pin`
    /// request): makes its bytes resident (reading its disk file if needed, fully
    /// verified) and keeps it resident, and safe from [`gc`](Store::gc), until a
    /// matching [`unpin`](Store::unpin). Pins nest.
    ///
    /// # Errors
    /// [`PersistError::NotFound`] if this store does not hold `id`; disk errors as
    /// [`encoded`](Store::encoded).
    pub fn pin(&self, id: ObjectId) -> Result<(), PersistError> {
        {
            let mut st = self.inner.state.lock();
            let e = st
                .entries
                .get_mut(&id)
                .filter(|e| !e.dead())
                .ok_or(PersistError::NotFound(id))?;
            e.pins += 1;
            if e.resident() {
                return Ok(());
            }
        }
        let res = self.encoded(id);
        let mut st = self.inner.state.lock();
        match res {
            Ok((_, bytes)) => {
                st.update(id, |e| {
                    if !e.resident() {
                        e.bytes = Some(bytes);
                    }
                });
                Ok(())
            }
            Err(err) => {
                if let Some(e) = st.entries.get_mut(&id) {
                    e.pins = e.pins.saturating_sub(1);
                }
                Err(err)
            }
        }
    }

    /// Removes one pin added by [`pin`](Store::pin). Returns `false` if `id` had no
    /// explicit pin. The entry returns to the cache policy once no pin and no
    /// `PValue` remain; a [released](Store::release) object that nothing else holds
    /// leaves memory at once (its file, if any, goes at the next sweep). No I/O.
    pub fn unpin(&self, id: ObjectId) -> bool {
        let mut st = self.inner.state.lock();
        let released = match st.entries.get_mut(&id) {
            Some(e) if e.pins > 0 => {
                e.pins -= 1;
                e.pins == 0 && e.released
            }
            _ => return false,
        };
        if released {
            let loading = self.inner.loading.lock().contains_key(&id);
            st.settle(id, None, loading, false);
        }
        true
    }
}
