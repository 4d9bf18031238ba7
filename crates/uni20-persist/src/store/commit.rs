//! New objects entering the store: [`Store::commit`] (and the bytes form used by
//! `persist_copy`) allocates a fresh ID and inserts the resident entry (a disk
//! store writes the file later: write-behind, see [`Store::commit`]); [`Store::insert_replica`] takes in a verified copy of an object
//! from another rank. Both hand over to the residency layer's budget check
//! afterwards. Also the ID counter (`alloc_id`) with its durable reservation.

use std::sync::Arc;

use super::state::{crc_erased, encode_erased, refs_erased, verify, AnyArc, CrcFn, Entry, OnDisk};
use super::Store;
use crate::{ObjectId, ObjectMeta, Persist, PersistError, PersistentPtr};

/// The resident form a commit leaves behind.
enum Resident {
    Value(AnyArc),
    Bytes(Arc<Vec<u8>>),
}

/// The size and checksum of a commit's encoding.
enum Sum {
    /// Both computed.
    Known(u64, u32),
    /// The size; the checksum is computed from the resident value on first
    /// need by the function.
    Lazy(u64, CrcFn),
}

/// Seq numbers reserved (and recorded durably) at a time by a disk store.
const SEQ_BLOCK: u64 = 4096;

impl Store {
    fn alloc_id(&self) -> Result<ObjectId, PersistError> {
        let mut a = self.inner.alloc.lock();
        let seq = a.next;
        if let Some(disk) = &self.inner.disk {
            if seq >= a.reserved {
                let new = seq.saturating_add(SEQ_BLOCK);
                disk.write_counter(new)?;
                a.reserved = new;
            }
        }
        a.next = seq
            .checked_add(1)
            .ok_or_else(|| PersistError::Decode("object id counter exhausted".into()))?;
        Ok(ObjectId::with_nonce(self.inner.rank, self.inner.nonce, seq))
    }

    /// Commits `value` under `id`, an ID named by another party before the
    /// object existed (the root, planning a dependent operation against
    /// outputs not computed yet: pipelined submission,
    /// `docs/architecture.md`, "Operations in flight"); otherwise as
    /// [`Store::commit`]. The ID must have this store's rank as origin and
    /// a nonce that is neither nil nor this store's: a namer's nonce (the
    /// universe's identity), so it can never collide with an ID this store
    /// issues, before or after a restart. The object is this store's own:
    /// [`evict`](Store::evict) writes it to disk first, as for a fresh
    /// commit, instead of forgetting it as a replica.
    ///
    /// # Errors
    /// [`PersistError::Conflict`] if `id` has another origin, the nil nonce
    /// or this store's nonce, or already names an object; as
    /// [`Store::commit`] otherwise.
    pub fn commit_as<T: Persist>(&self, id: ObjectId, value: T) -> Result<PersistentPtr<T>, PersistError> {
        if id.origin != self.inner.rank || id.nonce == ObjectId::NIL_NONCE || id.nonce == self.inner.nonce {
            return Err(PersistError::Conflict(id));
        }
        self.commit_value(Some(id), value)
    }

    /// Commits `value` as a new immutable object and returns its handle.
    ///
    /// The value is kept resident as the decoded value. Types whose
    /// [`Persist::encode_borrowed`] or [`Persist::encode_split`] gives a view of their
    /// own memory are not encoded at all: their CRC-32 is computed in place when first
    /// needed (the object spilled, flushed, served to another rank, or its
    /// [`meta`](Store::meta) asked for), so an intermediate released before any of
    /// that is never checksummed. Other types are encoded once here, for the size and
    /// the CRC-32. The handle is returned only once
    /// the object is servable by this store.
    ///
    /// A disk store writes nothing here (write-behind): the object's file is written
    /// (temp file + rename) when the object is made durable ([`flush`](Store::flush),
    /// [`flush_ids`](Store::flush_ids), [`flush_all`](Store::flush_all): what a
    /// checkpoint reaches) or when it leaves memory (evicted under the
    /// [memory budget](crate::StoreOptions::memory_budget), or by [`evict`](Store::evict)).
    /// An object released before either happens never touches the disk. Until
    /// then a crash loses it, as it would lose a written but unflushed file.
    ///
    /// # Errors
    /// [`PersistError::Io`] if the counter file (one durable write per 4096 IDs of a
    /// disk store) cannot be written (fatal: no ID escapes). Work done on the side (the budget check's spills, the
    /// deletion of released objects' files) does not fail the commit; see
    /// [`Store::take_background_error`].
    pub fn commit<T: Persist>(&self, value: T) -> Result<PersistentPtr<T>, PersistError> {
        self.commit_value(None, value)
    }

    /// [`Store::commit`] under a fresh ID (`named` is `None`) or a reserved one.
    fn commit_value<T: Persist>(&self, named: Option<ObjectId>, value: T) -> Result<PersistentPtr<T>, PersistError> {
        let refs = value.references();
        let id = {
            let value = Arc::new(value);
            let resident: AnyArc = value.clone();
            // The value's own memory (borrowed, or a header then borrowed):
            // its size now, its checksum when first needed (`Entry::checksum`).
            // Otherwise the encoding is built here anyway, and checksummed.
            let sum = match (value.encode_borrowed(), value.encode_split()) {
                (Some(b), _) => Sum::Lazy(b.len() as u64, crc_erased::<T>),
                (None, Some((h, body))) => Sum::Lazy((h.len() + body.len()) as u64, crc_erased::<T>),
                (None, None) => {
                    let owned = value.encode();
                    Sum::Known(owned.len() as u64, crate::id::crc_of_parts(&[&owned]))
                }
            };
            self.commit_parts::<T>(named, sum, refs, move || Resident::Value(resident))?
        };
        // After the local handle is gone, so the new entry is not counted as pinned.
        self.sweep_released(true);
        self.enforce_budget();
        Ok(PersistentPtr::from_id(id))
    }

    /// Commits already-encoded bytes of a `T` (from [`Persist::encode`]) with the
    /// references of the value they encode; the bytes are kept resident and decoded on
    /// the first load. Used by `persist_copy`, which only borrows the value.
    pub(crate) fn commit_encoded<T: Persist>(
        &self,
        bytes: Vec<u8>,
        refs: Vec<ObjectId>,
    ) -> Result<PersistentPtr<T>, PersistError> {
        let bytes: Arc<Vec<u8>> = bytes.into();
        let sum = Sum::Known(bytes.len() as u64, crate::id::crc_of_parts(&[&bytes]));
        let id = self.commit_parts::<T>(None, sum, refs, || Resident::Bytes(bytes.clone()))?;
        self.sweep_released(true);
        self.enforce_budget();
        Ok(PersistentPtr::from_id(id))
    }

    /// Allocates an ID (or takes the reserved `named` one) for an encoding of the size and checksum `sum`, then inserts the entry (no file yet) with the resident form made by `resident`. No ID escapes on error.
    /// The caller enforces the memory budget afterwards.
    fn commit_parts<T: Persist>(
        &self,
        named: Option<ObjectId>,
        sum: Sum,
        refs: Vec<ObjectId>,
        resident: impl FnOnce() -> Resident,
    ) -> Result<ObjectId, PersistError> {
        let id = match named {
            Some(id) => id,
            None => self.alloc_id()?,
        };
        self.take_injected_io_failure(id)?;
        let (size, checksum, crc_fn) = match sum {
            Sum::Known(size, crc) => (size, crc, None),
            Sum::Lazy(size, f) => (size, 0, Some(f)),
        };
        let meta = ObjectMeta {
            id,
            type_name: T::TYPE_NAME.to_owned(),
            size,
            checksum,
        };
        // Write-behind: a disk store writes the object's file only when it is
        // flushed (a checkpoint reaches it) or spilled (the budget evicts it, or
        // `evict`), never here: most objects of a computation are intermediates
        // released long before either happens.
        {
            let mut e = match crc_fn {
                None => Entry::new(meta, OnDisk::No, Some(refs)),
                Some(f) => Entry::unsealed(meta, Some(f), OnDisk::No, Some(refs)),
            };
            e.named = named.is_some();
            match resident() {
                Resident::Value(v) => {
                    e.value = Some(v);
                    e.encoder = Some(encode_erased::<T>);
                }
                Resident::Bytes(b) => e.bytes = Some(b),
            }
            let mut st = self.inner.state.lock();
            if !st.insert_new_resident(e) {
                // A reserved ID committed twice, or a replica of a
                // not-yet-allocated own ID inserted before.
                return Err(PersistError::Conflict(id));
            }
            st.register_refs(T::TYPE_NAME, refs_erased::<T>);
            st.stats.commits += 1;
        }
        Ok(id)
    }

    /// Inserts a copy of an object (usually from another rank, possibly this one's).
    ///
    /// Checks that `bytes` has `meta.size` bytes and CRC-32 `meta.checksum`. If the
    /// store already holds `meta.id`: identical metadata (and identical bytes, when
    /// its bytes are resident) is a no-op; anything else is a conflict. The replica is
    /// kept as bytes and decoded on first load. A replica of an ID of this store (its
    /// rank and nonce) moves this store's counter past it. A disk store writes the replica to disk only when
    /// it is evicted or flushed.
    ///
    /// # Errors
    /// [`PersistError::Checksum`] if the bytes do not match `meta`;
    /// [`PersistError::Conflict`] (fatal) if the ID already names different content.
    pub fn insert_replica(&self, meta: ObjectMeta, bytes: Vec<u8>) -> Result<(), PersistError> {
        verify(&meta, &bytes, None)?;
        self.insert_verified(meta, bytes.into(), true)
    }

    pub(super) fn insert_verified(
        &self,
        meta: ObjectMeta,
        bytes: Arc<Vec<u8>>,
        budget: bool,
    ) -> Result<(), PersistError> {
        let id = meta.id;
        {
            let mut st = self.inner.state.lock();
            if let Some(e) = st.entries.get(&id) {
                if e.dead() {
                    // A released object that nothing held: this copy starts afresh.
                    st.remove(id);
                } else {
                    if e.meta() != meta || e.bytes.as_ref().is_some_and(|b| **b != *bytes) {
                        return Err(PersistError::Conflict(id));
                    }
                    return Ok(());
                }
            }
            if st.corrupt.remove(&id).is_some() {
                tracing::warn!(object = %id, "replacing unreadable object file content with a verified replica");
            }
            st.insert(Entry::new(meta, OnDisk::No, None));
            st.update(id, |e| e.bytes = Some(bytes));
        }
        if id.origin == self.inner.rank && id.nonce == self.inner.nonce {
            let mut a = self.inner.alloc.lock();
            if a.next <= id.seq {
                a.next = id.seq.saturating_add(1);
            }
        }
        if budget {
            self.sweep_released(true);
            self.enforce_budget();
        }
        Ok(())
    }
}
