//! The store's mutable state: the entry of each object (its metadata, resident forms,
//! disk state, references, pins), the LRU index over resident entries, the
//! resident-bytes account that the memory budget reads, the named roots and the
//! counters. `State::update`, `State::insert`, `State::insert_new_resident` (a
//! commit's entry, inserted with its resident form) and `State::remove` are the only
//! places that change resident forms, so the account and the LRU index stay exact.
//! Also the type-erased helpers that let one map hold objects of every type.

use std::any::Any;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use crate::{ObjectId, ObjectMeta, Persist, PersistError};

/// A decoded value of any `Persist` type.
pub(super) type AnyArc = Arc<dyn Any + Send + Sync>;
/// A weak reference to an [`AnyArc`].
pub(super) type WeakAny = std::sync::Weak<dyn Any + Send + Sync>;
/// Re-encodes a type-erased value (`None` if it is not the expected type).
pub(super) type EncodeFn = fn(&(dyn Any + Send + Sync)) -> Option<Vec<u8>>;
/// Decodes a payload and returns the references of the value.
pub(super) type RefsFn = fn(&[u8]) -> Result<Vec<ObjectId>, PersistError>;

/// The CRC-32 of a type-erased value's encoding, computed in place from its
/// borrowed or split encoding (`None` if it is not the expected type).
pub(super) type CrcFn = fn(&(dyn Any + Send + Sync)) -> Option<u32>;

/// [`CrcFn`] of `T`: over [`Persist::encode_borrowed`], else the parts of
/// [`Persist::encode_split`], else [`Persist::encode`].
pub(super) fn crc_erased<T: Persist>(v: &(dyn Any + Send + Sync)) -> Option<u32> {
    let v = v.downcast_ref::<T>()?;
    Some(match (v.encode_borrowed(), v.encode_split()) {
        (Some(b), _) => crate::id::crc_of_parts(&[b]),
        (None, Some((head, body))) => crate::id::crc_of_parts(&[&head, body]),
        (None, None) => crate::id::crc_of_parts(&[&v.encode()]),
    })
}

/// What an entry's checksum is computed from ([`Entry::crc_source`]).
pub(super) enum CrcSource {
    /// Its resident encoded bytes.
    Bytes(Arc<Vec<u8>>),
    /// Its decoded value and the in-place CRC of the value's type.
    Value(AnyArc, CrcFn),
}

impl CrcSource {
    /// The CRC-32 of the encoding; `None` if the value is not of the
    /// function's type.
    pub(super) fn compute(&self) -> Option<u32> {
        match self {
            CrcSource::Bytes(b) => Some(crate::id::crc_of_parts(&[b])),
            CrcSource::Value(v, f) => f(&**v),
        }
    }
}

/// [`EncodeFn`] of `T`.
pub(super) fn encode_erased<T: Persist>(v: &(dyn Any + Send + Sync)) -> Option<Vec<u8>> {
    v.downcast_ref::<T>().map(T::encode)
}

/// [`RefsFn`] of `T`.
pub(super) fn refs_erased<T: Persist>(b: &[u8]) -> Result<Vec<ObjectId>, PersistError> {
    Ok(T::decode(b)?.references())
}

/// Hasher for `ObjectId` keys: the IDs are not attacker-controlled, so a multiply-xor
/// mix replaces SipHash on the cache-hit path.
#[derive(Clone, Copy, Default)]
pub(super) struct IdHash;

impl std::hash::BuildHasher for IdHash {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

#[derive(Clone, Copy)]
pub(super) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        let x = self.0 ^ (self.0 >> 29);
        x.wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (x >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Where an object's file stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OnDisk {
    /// No file: resident only.
    No,
    /// Written (temp file + rename) but not fsynced.
    Written,
    /// Written, fsynced, directory fsynced.
    Durable,
}

/// Usage and counters of one store, from [`Store::stats`](crate::Store::stats).
///
/// The first group is a snapshot of what the store holds now (computed by
/// `stats`); the rest are counters since the store was created or opened. Sizes are
/// encoded payload sizes ([`ObjectMeta::size`]); a resident entry holding both its
/// decoded value and its bytes is charged twice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreStats {
    /// Objects this store holds (resident or on disk;
    /// released objects still pinned included).
    pub objects: u64,
    /// Objects with a resident form held by the store (decoded value or bytes).
    pub resident_objects: u64,
    /// Bytes charged to resident forms (what
    /// [`StoreOptions::memory_budget`](crate::StoreOptions::memory_budget) bounds).
    pub bytes_resident: u64,
    /// Objects pinned by an explicit pin or a live `PValue`.
    pub pinned_objects: u64,
    /// Bytes of the pinned objects: their resident charge, or their size for a
    /// released object that only `PValue`s hold. Not evictable.
    pub bytes_pinned: u64,
    /// Objects only on disk (a file and no resident form).
    pub spilled_objects: u64,
    /// Bytes of the objects only on disk.
    pub bytes_spilled: u64,
    /// Released objects still present because pinned, being loaded or reachable
    /// from a named root (see [`Store::release`](crate::Store::release)).
    pub releases_pending: u64,

    /// Loads served from an already-decoded resident value.
    pub hits: u64,
    /// Loads that found no decoded resident value (whether or not they then succeeded).
    pub misses: u64,
    /// Entries whose resident forms were dropped by the cache policy.
    pub evictions: u64,
    /// Evicted entries written to disk because they were not there yet.
    pub spills: u64,
    /// Spill writes that failed (the object stayed resident; see
    /// [`Store::take_background_error`](crate::Store::take_background_error)).
    pub spill_failures: u64,
    /// Times a value was decoded from bytes (resident or read from disk).
    pub materializations: u64,
    /// Successful `commit` calls.
    pub commits: u64,
    /// Object files read from disk (loads, `encoded`, pins, gc reading references).
    pub disk_reads: u64,
    /// Object files written to disk (commit, spill or flush).
    pub disk_writes: u64,
    /// Object files deleted (release, gc).
    pub disk_deletes: u64,
    /// Deletions of released objects' files that failed (see
    /// [`Store::take_background_error`](crate::Store::take_background_error)).
    pub delete_failures: u64,
    /// Every filesystem operation of a disk store: object-file reads, header reads,
    /// writes, fsyncs and deletions, directory fsyncs and listings, reads and writes
    /// of the nonce, counter and roots files (0 for an in-memory store).
    pub io_ops: u64,
    /// Released objects freed (removed from memory and disk), by
    /// [`Store::release`](crate::Store::release) or a later sweep.
    pub releases: u64,
    /// Objects whose resident forms [`Store::offload`](crate::Store::offload) dropped.
    pub offloads: u64,
    /// Bytes of resident forms dropped by those offloads (their charge).
    pub bytes_offloaded: u64,
    /// Object files written by offloads (objects that had no file yet).
    pub offload_writes: u64,
    /// Loads started by [`Store::prefetch`](crate::Store::prefetch) that made an
    /// object resident.
    pub prefetches: u64,
    /// Encoded bytes made resident by those prefetches.
    pub bytes_prefetched: u64,
}

impl StoreStats {
    /// Object-file operations: `disk_reads + disk_writes + disk_deletes`.
    pub fn object_io(&self) -> u64 {
        self.disk_reads + self.disk_writes + self.disk_deletes
    }
}

/// One object known to the store.
pub(super) struct Entry {
    /// Its metadata, but for the checksum: `head.checksum` is not read (it is 0
    /// while unsealed); the checksum is [`Entry::checksum`] and the whole
    /// metadata [`Entry::meta`].
    pub(super) head: ObjectMeta,
    /// The CRC-32 of its encoding: known from the start for a replica, a file
    /// or bytes; for a committed value computed on first need (the object
    /// leaving memory or the rank, or its metadata asked for), from the
    /// resident value by `crc_fn`. Most intermediates of a computation are
    /// released before any of that happens and are never checksummed.
    pub(super) crc: std::cell::OnceCell<u32>,
    /// Checksums the resident value in place (a committed value's type).
    pub(super) crc_fn: Option<CrcFn>,
    /// Resident decoded value; extra strong references are live `PValue`s.
    pub(super) value: Option<AnyArc>,
    /// Encoder of `value`'s type (to re-encode for `encoded` and spills).
    pub(super) encoder: Option<EncodeFn>,
    /// Resident encoded payload.
    pub(super) bytes: Option<Arc<Vec<u8>>>,
    /// Disk state of its file.
    pub(super) disk: OnDisk,
    /// IDs it references, once known (from the value or the file header).
    pub(super) refs: Option<Vec<ObjectId>>,
    /// Its key in the LRU index while resident.
    pub(super) tick: u64,
    /// A spill of it is in progress (not a candidate again meanwhile).
    pub(super) spilling: bool,
    /// Its last spill failed (logged once until a spill succeeds).
    pub(super) spill_failed: bool,
    /// Explicit pins by ID (`Store::pin`), on top of live `PValue`s.
    pub(super) pins: u64,
    /// The owner released it (`Store::release`): it goes once nothing pins it and no
    /// named root reaches it.
    pub(super) released: bool,
    /// Released but reachable from a named root at the last check (kept).
    pub(super) rooted: bool,
    /// A released object's value, still referenced by live `PValue`s: the store
    /// dropped its own strong reference so that the memory goes with the last one.
    pub(super) held: Option<WeakAny>,
    /// Committed here under a name given by another party
    /// ([`Store::commit_as`](crate::Store::commit_as)): this store's own
    /// object although its ID's nonce is not the store's.
    pub(super) named: bool,
}

impl Entry {
    /// A fresh entry with no resident form (add forms with [`State::update`], or set
    /// them before [`State::insert_new_resident`]).
    pub(super) fn new(meta: ObjectMeta, disk: OnDisk, refs: Option<Vec<ObjectId>>) -> Entry {
        let e = Entry::unsealed(meta, None, disk, refs);
        let _ = e.crc.set(e.head.checksum);
        e
    }

    /// A fresh entry whose checksum is computed on first need by `crc_fn` from
    /// the value set before [`State::insert_new_resident`] (or from resident
    /// bytes); `head.checksum` is ignored.
    pub(super) fn unsealed(
        head: ObjectMeta,
        crc_fn: Option<CrcFn>,
        disk: OnDisk,
        refs: Option<Vec<ObjectId>>,
    ) -> Entry {
        Entry {
            head,
            crc: std::cell::OnceCell::new(),
            crc_fn,
            value: None,
            encoder: None,
            bytes: None,
            disk,
            refs,
            tick: 0,
            spilling: false,
            spill_failed: false,
            pins: 0,
            released: false,
            rooted: false,
            held: None,
            named: false,
        }
    }

    /// The CRC-32 of its encoding, computed (once) from the resident bytes or
    /// the resident or held value when the entry was committed unsealed. An
    /// entry that is not released keeps a resident form until it is sealed (a
    /// spill, flush or offload asks for [`Entry::meta`] before it writes and
    /// drops the form only after); a released one without a value or file is
    /// dead, or removed by `State::settle` if a root reaches it.
    pub(super) fn checksum(&self) -> u32 {
        *self.crc.get_or_init(|| {
            let Some(src) = self.crc_source() else {
                // Unreachable by the invariant above (`State::settle`
                // removes a rooted entry whose value is gone); a zero
                // checksum makes any later verification fail loudly.
                tracing::error!(object = %self.head.id, "checksum of an object with no resident form");
                return 0;
            };
            src.compute().unwrap_or_else(|| {
                tracing::error!(object = %self.head.id, "checksum: the resident value is not of the committed type");
                0
            })
        })
    }

    /// What the checksum of this entry is computed from (resident bytes
    /// first, else the resident or held value with its type's [`CrcFn`]):
    /// cheap to take, so that `Store::seal` can compute it
    /// outside the state lock. `None` without either.
    pub(super) fn crc_source(&self) -> Option<CrcSource> {
        if let Some(b) = &self.bytes {
            return Some(CrcSource::Bytes(b.clone()));
        }
        Some(CrcSource::Value(self.decoded()?, self.crc_fn?))
    }

    /// Its full metadata, checksum included ([`Entry::checksum`]).
    pub(super) fn meta(&self) -> ObjectMeta {
        ObjectMeta {
            checksum: self.checksum(),
            ..self.head.clone()
        }
    }

    /// The decoded value: resident, or still held by `PValue`s of a released object.
    pub(super) fn decoded(&self) -> Option<AnyArc> {
        self.value.clone().or_else(|| self.held.as_ref()?.upgrade())
    }

    /// Released and not kept by a root: only pins (or a load) keep it, and it needs
    /// no file.
    pub(super) fn released_unrooted(&self) -> bool {
        self.released && !self.rooted
    }

    /// Released, not kept by a root and not pinned: logically gone (loads say
    /// `NotFound`), removed from the map at the next sweep.
    pub(super) fn dead(&self) -> bool {
        self.released_unrooted() && !self.pinned()
    }

    /// Bytes charged to the memory budget: the encoded size for a resident value
    /// plus the length of resident bytes.
    pub(super) fn charge(&self) -> u64 {
        let v = if self.value.is_some() { self.head.size } else { 0 };
        let b = self.bytes.as_ref().map_or(0, |b| b.len() as u64);
        v + b
    }
    /// Has a resident form held by the store (value or bytes).
    pub(super) fn resident(&self) -> bool {
        self.value.is_some() || self.bytes.is_some()
    }
    /// An explicit pin, or a live `PValue` (a strong reference besides the store's,
    /// or a live value of a released object).
    pub(super) fn pinned(&self) -> bool {
        self.pins > 0
            || self.value.as_ref().is_some_and(|v| Arc::strong_count(v) > 1)
            || self.held.as_ref().is_some_and(|w| w.strong_count() > 0)
    }
}

/// Everything behind the store's state lock.
#[derive(Default)]
pub(super) struct State {
    /// Every object this store holds.
    pub(super) entries: HashMap<ObjectId, Entry, IdHash>,
    /// Whether the LRU index is kept and hits reorder it (only a store with a
    /// budget evicts; set once, when the store is opened).
    pub(super) track_lru: bool,
    /// Objects whose files were found unreadable at open, with the error.
    pub(super) corrupt: HashMap<ObjectId, PersistError>,
    /// Resident entries by last-use tick (oldest first).
    pub(super) lru: BTreeMap<u64, ObjectId>,
    /// Last tick handed out.
    pub(super) tick: u64,
    /// How to find the references of a byte-only object, by type name.
    /// (FxHash: looked up by the type's name on every commit and load.)
    pub(super) refs_fns: rustc_hash::FxHashMap<String, RefsFn>,
    /// Named gc roots.
    pub(super) roots: BTreeMap<String, ObjectId>,
    /// Released objects still present and not kept by a root (pinned, being loaded,
    /// or dead and awaiting removal): looked at by every sweep.
    pub(super) pending: HashSet<ObjectId, IdHash>,
    /// Released objects kept because a named root reaches them: looked at again
    /// only when roots change or on the next release or gc.
    pub(super) retained: HashSet<ObjectId, IdHash>,
    /// Files of released objects were deleted since the last directory fsync.
    pub(super) unsynced_deletes: bool,
    /// The first spill or sweep-deletion failure not yet taken by
    /// `Store::take_background_error`.
    pub(super) background_error: Option<PersistError>,
    /// Counters (the snapshot fields are filled in by `Store::stats`, except
    /// `bytes_resident` and `resident_objects`, kept exact here).
    pub(super) stats: StoreStats,
}

impl State {
    /// Empty state with the crate's built-in `Persist` types registered for `gc`.
    pub(super) fn new() -> State {
        let mut st = State::default();
        let builtins: [(&str, RefsFn); 10] = [
            (<Vec<u8>>::TYPE_NAME, refs_erased::<Vec<u8>>),
            (String::TYPE_NAME, refs_erased::<String>),
            (<Vec<f64>>::TYPE_NAME, refs_erased::<Vec<f64>>),
            (<Vec<f32>>::TYPE_NAME, refs_erased::<Vec<f32>>),
            (<Vec<i64>>::TYPE_NAME, refs_erased::<Vec<i64>>),
            (<Vec<u64>>::TYPE_NAME, refs_erased::<Vec<u64>>),
            (<Vec<i32>>::TYPE_NAME, refs_erased::<Vec<i32>>),
            (<Vec<u32>>::TYPE_NAME, refs_erased::<Vec<u32>>),
            (<Vec<ObjectId>>::TYPE_NAME, refs_erased::<Vec<ObjectId>>),
            (crate::ObjectSet::TYPE_NAME, refs_erased::<crate::ObjectSet>),
        ];
        for (name, f) in builtins {
            st.refs_fns.insert(name.to_owned(), f);
        }
        st
    }

    /// Applies `f` to entry `id`, keeping the resident-bytes account and LRU index right.
    pub(super) fn update<R>(&mut self, id: ObjectId, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let e = self.entries.get_mut(&id)?;
        let before = e.charge();
        let was_resident = e.resident();
        let r = f(e);
        let after = e.charge();
        let now_resident = e.resident();
        let old_tick = e.tick;
        if now_resident {
            // The entry's new place in the LRU order, set through the one
            // lookup above.
            self.tick += 1;
            e.tick = self.tick;
        }
        self.stats.bytes_resident = self.stats.bytes_resident.saturating_sub(before) + after;
        // The LRU index serves eviction only: a store without a budget
        // (fixed at open) keeps the ticks in the entries and no index, which
        // saves a B-tree removal and insertion per commit, load and release.
        if was_resident {
            if self.track_lru {
                self.lru.remove(&old_tick);
            }
            self.stats.resident_objects = self.stats.resident_objects.saturating_sub(1);
        }
        if now_resident {
            if self.track_lru {
                self.lru.insert(self.tick, id);
            }
            self.stats.resident_objects += 1;
        }
        Some(r)
    }

    /// Registers how to find the references of objects of type `name` (for
    /// `gc` of byte-only objects), once: a lookup by `&str` first, so the
    /// commits and loads of a known type allocate no key.
    pub(super) fn register_refs(&mut self, name: &str, f: RefsFn) {
        if !self.refs_fns.contains_key(name) {
            self.refs_fns.insert(name.to_owned(), f);
        }
    }

    /// Inserts a new entry that already has its resident form (a commit):
    /// one map lookup, with the resident counters and the LRU index kept as
    /// [`State::update`] keeps them. Returns false, and drops `e` without
    /// touching the store, if the store already holds its ID.
    pub(super) fn insert_new_resident(&mut self, mut e: Entry) -> bool {
        let id = e.head.id;
        let std::collections::hash_map::Entry::Vacant(slot) = self.entries.entry(id) else {
            return false;
        };
        if e.resident() {
            self.tick += 1;
            e.tick = self.tick;
            self.stats.bytes_resident += e.charge();
            self.stats.resident_objects += 1;
            if self.track_lru {
                self.lru.insert(e.tick, id);
            }
        }
        slot.insert(e);
        true
    }

    /// Inserts an entry that has no resident form yet (add forms with `update`).
    pub(super) fn insert(&mut self, e: Entry) {
        debug_assert!(!e.resident());
        if let Some(old) = self.remove(e.head.id) {
            tracing::error!(object = %old.head.id, "replacing an existing entry");
        }
        self.entries.insert(e.head.id, e);
    }

    pub(super) fn remove(&mut self, id: ObjectId) -> Option<Entry> {
        let e = self.entries.remove(&id)?;
        if e.resident() {
            if self.track_lru {
                self.lru.remove(&e.tick);
            }
            self.stats.resident_objects = self.stats.resident_objects.saturating_sub(1);
            self.stats.bytes_resident = self.stats.bytes_resident.saturating_sub(e.charge());
        }
        self.pending.remove(&id);
        self.retained.remove(&id);
        Some(e)
    }

    /// Applies the release rule to released entry `id` (see `Store::release`).
    ///
    /// `rooted`: `Some(r)` after a reachability check from the named roots, `None` to
    /// keep the last verdict. `loading`: a load of `id` is in progress (kept, file
    /// kept). `io`: whether the caller deletes files; if not, an entry whose file must
    /// go stays, hidden ([`Entry::dead`]), for a later sweep. A released object that
    /// only live `PValue`s pin loses the store's own strong reference here, so its
    /// memory goes with the last `PValue`. Never does I/O itself.
    pub(super) fn settle(&mut self, id: ObjectId, rooted: Option<bool>, loading: bool, io: bool) -> Settled {
        let Some(e) = self.entries.get_mut(&id) else {
            self.pending.remove(&id);
            self.retained.remove(&id);
            return Settled::Missing;
        };
        if !e.released {
            self.pending.remove(&id);
            self.retained.remove(&id);
            return Settled::Kept { delete_file: false };
        }
        if let Some(r) = rooted {
            e.rooted = r;
        }
        if e.rooted {
            // Kept by a root: take back a value that only `PValue`s were holding.
            if let Some(v) = e.held.take().and_then(|w| w.upgrade()) {
                self.update(id, |e| {
                    if e.value.is_none() {
                        e.value = Some(v);
                    }
                });
            } else if !e.resident() && e.disk == OnDisk::No && !loading {
                // The last `PValue` dropped the value before a root reached
                // the object, and it has no file: nothing of it is left to
                // load, serve or checksum, so a root cannot keep it.
                tracing::warn!(object = %id, "a root reaches a released object whose last value is gone: removed");
                let size = e.head.size;
                self.remove(id);
                self.stats.releases += 1;
                return Settled::Freed { size, file: false };
            }
            self.pending.remove(&id);
            self.retained.insert(id);
            return Settled::Kept { delete_file: false };
        }
        self.retained.remove(&id);
        self.pending.insert(id);
        if loading {
            return Settled::Kept { delete_file: false };
        }
        if e.pins == 0 && e.resident() {
            self.update(id, |e| {
                if let Some(v) = e.value.take() {
                    if Arc::strong_count(&v) > 1 {
                        e.held = Some(Arc::downgrade(&v));
                    }
                }
                e.bytes = None;
            });
        }
        let Some(e) = self.entries.get_mut(&id) else {
            return Settled::Missing;
        };
        let file = e.disk != OnDisk::No;
        if e.pinned() {
            // Pins keep it resident and `PValue`s hold their value: no file needed.
            if file && io {
                e.disk = OnDisk::No;
                return Settled::Kept { delete_file: true };
            }
            return Settled::Kept { delete_file: false };
        }
        if file && !io {
            return Settled::Kept { delete_file: false };
        }
        let size = e.head.size;
        self.remove(id);
        self.stats.releases += 1;
        Settled::Freed { size, file }
    }

    pub(super) fn touch(&mut self, id: ObjectId) {
        let _ = self.update(id, |_| ());
    }

    /// A resident decoded value of type `T`, if any (counts a hit).
    pub(super) fn resident_value<T: Persist>(&mut self, id: ObjectId) -> Option<Result<Arc<T>, PersistError>> {
        let e = self.entries.get(&id)?;
        let v = e.decoded()?;
        if e.head.type_name != T::TYPE_NAME {
            return Some(Err(type_mismatch::<T>(&e.head)));
        }
        let r = v.downcast::<T>().map_err(|_| PersistError::TypeMismatch {
            id,
            expected: T::TYPE_NAME.to_owned(),
            found: format!("{} (a different Rust type)", e.head.type_name),
        });
        if r.is_ok() {
            self.stats.hits += 1;
            if self.track_lru {
                self.touch(id);
            }
        }
        Some(r)
    }
}

/// The `TypeMismatch` error for loading `meta` as a `T`.
pub(super) fn type_mismatch<T: Persist>(meta: &ObjectMeta) -> PersistError {
    PersistError::TypeMismatch {
        id: meta.id,
        expected: T::TYPE_NAME.to_owned(),
        found: meta.type_name.clone(),
    }
}

/// Checks `bytes` against the size and CRC-32 recorded in `meta`.
pub(super) fn verify(meta: &ObjectMeta, bytes: &[u8], path: Option<&Path>) -> Result<(), PersistError> {
    let actual = crc32fast::hash(bytes);
    if bytes.len() as u64 != meta.size || actual != meta.checksum {
        return Err(PersistError::Checksum {
            id: meta.id,
            expected: meta.checksum,
            actual,
            expected_size: meta.size,
            actual_size: bytes.len() as u64,
            path: path.map(Path::to_owned),
        });
    }
    Ok(())
}

/// What [`State::settle`] did with one released object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Settled {
    /// Not in the map (removed earlier).
    Missing,
    /// Still present (rooted, pinned, being loaded, or waiting for a sweep that may
    /// delete its file); `delete_file`: the caller must delete its file now.
    Kept {
        /// The object's file is no longer needed: delete it.
        delete_file: bool,
    },
    /// Removed from the map; `file`: the caller must delete its file.
    Freed {
        /// Encoded payload size in bytes.
        size: u64,
        /// It had a file.
        file: bool,
    },
}

/// The ID counter of a store.
pub(super) struct Alloc {
    /// Next sequence number to issue.
    pub(super) next: u64,
    /// Durably reserved high-water mark (disk store): `next` may reach it before the
    /// counter file is rewritten.
    pub(super) reserved: u64,
}

/// Most threads that `Store::flush_ids` (and the deletion of released objects'
/// files) use at once: concurrent fsyncs, writes and unlinks keep the device
/// busy where one after the other each waits for its own round trip.
pub(super) const FLUSH_THREADS: usize = 8;

/// `f` applied to every item, by up to [`FLUSH_THREADS`] scoped threads (on the
/// calling thread alone for fewer than 2 items); the results in item order.
pub(super) fn for_each_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = FLUSH_THREADS.min(items.len());
    if threads < 2 {
        return items.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        mine.push((i, f(item)));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    out.sort_unstable_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}
