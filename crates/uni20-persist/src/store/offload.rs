//! Offload and prefetch on request, whatever the memory budget says:
//! [`Store::offload`] writes an object's file if it has none yet and drops its
//! resident forms, [`Store::prefetch`] loads an object back on the load pool
//! ahead of use, so that a later load finds it resident. A disk store offloads
//! into its own rank directory; an in-memory store into the directory set by
//! [`Store::set_offload_dir`], or else a temporary directory created at the first
//! offload and removed with the store (its last clone).
//!
//! An offloaded file of an in-memory store is only a copy of a value the store
//! could not keep in memory: it is never made durable (no fsync, no counter or
//! nonce file) and goes with the object's release or `gc`.

use std::path::Path;
use std::sync::Arc;

use super::state::{verify, OnDisk};
use super::Store;
use crate::disk::Disk;
use crate::{ObjectId, Persist, PersistError, PersistentPtr};

/// The directory of an in-memory store's offloaded objects (`dir/rank-<rank>`).
pub(super) struct SpillDir {
    /// The rank directory (declared first: its lock goes before the directory).
    pub(super) disk: Disk,
    /// The temporary directory holding it, removed when the store drops; `None`
    /// for a directory given with [`Store::set_offload_dir`].
    _tmp: Option<tempfile::TempDir>,
}

/// What one [`Store::offload`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Offloaded {
    /// Resident bytes dropped (the object's charge: encoded size of a decoded
    /// value plus resident bytes); 0 if it was not resident.
    pub bytes_dropped: u64,
    /// Payload bytes written to its file (0 if the file existed already).
    pub bytes_written: u64,
}

impl Store {
    /// Sets the directory where this in-memory store writes the objects it
    /// offloads ([`offload`](Store::offload)): `dir/rank-<rank>/`, created if
    /// needed and held exclusively like a store directory. Returns `false`, and
    /// changes nothing, when the store already has such a directory (a disk
    /// store's own, or one set or created earlier).
    ///
    /// # Errors
    /// [`PersistError::Io`] if the directory cannot be created or locked;
    /// [`PersistError::AlreadyOpen`] / [`PersistError::Locked`] if another store
    /// holds it.
    pub fn set_offload_dir(&self, dir: &Path) -> Result<bool, PersistError> {
        if self.file_disk().is_some() {
            return Ok(false);
        }
        let disk = Disk::create(dir, self.inner.rank)?;
        Ok(self.inner.spill.set(SpillDir { disk, _tmp: None }).is_ok())
    }

    /// The directory holding this store's offloaded objects, once it has one:
    /// the rank directory of a disk store, the one set by
    /// [`set_offload_dir`](Store::set_offload_dir) or the temporary one of the first
    /// offload. No I/O.
    pub fn offload_dir(&self) -> Option<&Path> {
        self.file_disk().map(Disk::dir)
    }

    /// The disk offloads write to, creating the temporary directory of an
    /// in-memory store that has none.
    pub(super) fn offload_disk(&self) -> Result<&Disk, PersistError> {
        if let Some(d) = self.file_disk() {
            return Ok(d);
        }
        let tmp = tempfile::Builder::new()
            .prefix("uni20-offload-")
            .tempdir()
            .map_err(|e| PersistError::io("create the offload directory", std::env::temp_dir(), e))?;
        let disk = Disk::create(tmp.path(), self.inner.rank)?;
        // A concurrent first offload may have won: its directory is used, this
        // one is removed again.
        let _ = self.inner.spill.set(SpillDir { disk, _tmp: Some(tmp) });
        self.file_disk()
            .ok_or_else(|| PersistError::Decode("offload directory vanished".into()))
    }

    /// Offloads object `id`: writes its file if it has none yet (into the rank
    /// directory, or for an in-memory store into its offload directory, see the
    /// module docs), then drops its resident forms, so that its memory goes once
    /// no [`PValue`](crate::PValue) holds it. It stays servable: the next load reads the
    /// file (size and CRC checked). A load of `id` in progress is waited for first.
    ///
    /// Objects that are not resident, explicitly [`pin`](Store::pin)ned, or
    /// [released](Store::release) are left as they are (`Offloaded::default()`).
    ///
    /// # Errors
    /// [`PersistError::NotFound`] if this store does not hold `id`;
    /// [`PersistError::Io`] if the file (or the temporary directory) cannot be
    /// written: the object then stays resident; [`PersistError::Checksum`] if
    /// re-encoding the value gives other bytes than it was committed with.
    pub fn offload(&self, id: ObjectId) -> Result<Offloaded, PersistError> {
        // A load in progress would make the object resident again after the
        // eviction: let it finish first.
        let lock = self.inner.loading.lock().get(&id).cloned();
        if let Some(lock) = lock {
            drop(lock.lock());
        }
        let (meta, refs, src) = {
            let mut st = self.inner.state.lock();
            let e = st
                .entries
                .get_mut(&id)
                .filter(|e| !e.dead())
                .ok_or(PersistError::NotFound(id))?;
            if !e.resident() || e.pins > 0 || e.released || e.spilling {
                return Ok(Offloaded::default());
            }
            if e.disk != OnDisk::No {
                let dropped = e.charge();
                st.update(id, |e| {
                    e.value = None;
                    e.bytes = None;
                });
                st.stats.offloads += 1;
                st.stats.bytes_offloaded += dropped;
                return Ok(Offloaded {
                    bytes_dropped: dropped,
                    bytes_written: 0,
                });
            }
            let src = match (&e.bytes, e.decoded(), e.encoder) {
                (Some(b), _, _) => Ok(b.clone()),
                (None, Some(v), Some(enc)) => Err((v, enc)),
                _ => return Ok(Offloaded::default()),
            };
            e.spilling = true;
            (e.meta(), e.refs.clone(), src)
        };
        let res = (|| {
            let disk = self.offload_disk()?;
            let bytes: Arc<Vec<u8>> = match src {
                Ok(b) => b,
                Err((v, enc)) => {
                    let b =
                        enc(&*v).ok_or_else(|| PersistError::Decode(format!("object {id}: encoder type mismatch")))?;
                    drop(v);
                    verify(&meta, &b, None)?;
                    b.into()
                }
            };
            disk.write_object(&meta, refs.as_deref(), &bytes)?;
            Ok::<u64, PersistError>(bytes.len() as u64)
        })();
        let mut st = self.inner.state.lock();
        let present = match st.entries.get_mut(&id) {
            Some(e) => {
                e.spilling = false;
                true
            }
            None => false,
        };
        let written = res?;
        if !present {
            // Released and freed while its file was written (the release
            // found no file yet): delete the file it left.
            st.stats.disk_writes += 1;
            drop(st);
            self.remove_orphan_file(id);
            return Ok(Offloaded {
                bytes_dropped: 0,
                bytes_written: written,
            });
        }
        st.stats.disk_writes += 1;
        st.stats.offload_writes += 1;
        let dropped = st
            .update(id, |e| {
                e.disk = OnDisk::Written;
                // Pinned or released meanwhile: keep what the pin needs.
                if e.pins > 0 || e.released {
                    return 0;
                }
                let c = e.charge();
                e.value = None;
                e.bytes = None;
                c
            })
            .unwrap_or(0);
        if dropped > 0 {
            st.stats.offloads += 1;
            st.stats.bytes_offloaded += dropped;
        }
        drop(st);
        // Released while its file was written: the sweep deletes the file.
        self.sweep_released(true);
        Ok(Offloaded {
            bytes_dropped: dropped,
            bytes_written: written,
        })
    }

    /// Starts reading object `p` (a `T`) back from disk on this store's load
    /// pool, so that a later [`load`](Store::load) / [`load_wait`](Store::load_wait)
    /// finds it resident (or joins the read in progress); returns at once. The
    /// job keeps the verified encoded bytes, in a buffer allocated by the
    /// calling thread; the first load decodes them where it runs (a
    /// [`load_wait`](Store::load_wait) on its caller's thread, an async
    /// [`load`](Store::load) on the pool), so that a prefetch leaves no decoded
    /// value in a load thread's allocator heap. Returns the
    /// encoded size of the object if a load was started, `None` if it is resident
    /// already, not held here, or of another type (nothing to do).
    ///
    /// A failed prefetch does not fail anything here: it is logged and kept for
    /// [`take_background_error`](Store::take_background_error), and the load that
    /// needs the object reports the failure again.
    pub fn prefetch<T: Persist>(&self, p: PersistentPtr<T>) -> Option<u64> {
        let id = p.id();
        let size = {
            let st = self.inner.state.lock();
            let e = st.entries.get(&id).filter(|e| !e.dead())?;
            if e.resident() || e.decoded().is_some() || e.head.type_name != T::TYPE_NAME || e.disk == OnDisk::No {
                return None;
            }
            e.head.size
        };
        let store = self.clone();
        // Allocated here, by the rank thread that asks: the load thread only
        // reads the file into it (untouched pages cost no memory until then).
        let buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        // The job runs whether or not its future is awaited.
        drop(crate::pool::spawn_blocking(&self.inner.pool, move || {
            match store.prefetch_bytes(id, buf) {
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(object = %id, error = %e, "prefetch failed");
                    let mut st = store.inner.state.lock();
                    if st.background_error.is_none() {
                        st.background_error = Some(e);
                    }
                }
            }
        }));
        Some(size)
    }
}
