//! [`Store`]: one rank's object store (memory cache + optional disk directory).
//!
//! This module owns the [`Store`] handle and its shared body (`Inner`), the public
//! option and report types ([`StoreOptions`], [`StoreStats`], [`GcReport`],
//! [`ReleaseReport`]), the in-memory constructor and the read-only queries
//! (`meta`, `contains`, `ids`, `is_resident`, `is_pinned`, `stats`). The work is
//! split by concern into submodules that each add an `impl Store` block: `state`
//! (entries, LRU index, resident-bytes account, the release rule), `open` (a rank
//! directory), `commit` (new objects and replicas), `load` (the load paths and
//! `encoded`), `residency` (budget, LRU eviction, spill, the cheap sweep of released
//! objects), `durability` (flush and fsync), `reach` (reachability through
//! references), `release` (the owner's release), `gc` (named roots and garbage
//! collection), `verify` (integrity checks by ID), `adopt` (copying an object out of another rank's directory under the same root, for a restore on another rank count), `offload` (offload and prefetch on request, with the spill directory of an in-memory store) and `faults` (fault injection). Layers only call downwards: `state` <
//! `faults` < `residency` < `commit` < `load` < `durability` < `reach` < `release` <
//! `gc`, with `adopt` above `durability` and `open` on top.

mod adopt;
mod commit;
mod durability;
mod faults;
mod gc;
mod load;
mod offload;
mod open;
mod reach;
mod release;
mod residency;
mod state;
mod verify;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::disk::Disk;
use crate::id::fresh_nonce;
use crate::pool::LoadPool;
use crate::{ObjectId, ObjectMeta, Persist};
pub use offload::Offloaded;
pub use state::StoreStats;
use state::{refs_erased, Alloc, Entry, OnDisk, State};
pub use verify::{Damage, Integrity};

/// Options of a disk-backed store ([`Store::open`]).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct StoreOptions {
    /// Memory budget in bytes for resident objects (decoded values are charged
    /// their encoded size, resident byte payloads their length). When exceeded the
    /// cache evicts unpinned entries in least-recently-used order, writing them to
    /// disk first if they are not there yet. Pinned entries (a live [`PValue`](crate::PValue)) are
    /// never evicted, so the budget can be exceeded by pinned data. The check runs
    /// after commits, replica inserts and loads that may do I/O (never in
    /// [`Store::try_load_local`]); a failed spill does not fail them: the object
    /// stays resident, the next check retries it, and the error is reported by
    /// [`Store::take_background_error`]. `None`: unlimited.
    pub memory_budget: Option<u64>,
}

impl StoreOptions {
    /// Default options: no memory budget.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the memory budget in bytes (see [`StoreOptions::memory_budget`]).
    pub fn memory_budget(mut self, bytes: u64) -> Self {
        self.memory_budget = Some(bytes);
        self
    }
}

/// Result of [`Store::gc`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GcReport {
    /// Objects kept (reachable from a root, or pinned, or being loaded).
    pub kept: u64,
    /// Objects removed from memory and disk.
    pub removed: u64,
    /// Resident bytes freed.
    pub bytes_freed: u64,
    /// Object files deleted (including unreadable ones that were unreachable).
    pub files_removed: u64,
}

/// Result of [`Store::release`] and [`Store::release_many`].
///
/// `released`, `not_found`, `deferred` and `retained` count the (deduplicated) IDs of
/// the call; `freed`, `bytes_freed` and `files_removed` count everything the call
/// removed, including objects of earlier releases that it found free.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReleaseReport {
    /// IDs of the call that this store held.
    pub released: u64,
    /// IDs of the call that this store does not hold (never here, or already freed).
    pub not_found: u64,
    /// Released objects of the call kept for now because pinned (explicit pin, live
    /// `PValue`) or being loaded; the first sweep after the last pin frees them.
    pub deferred: u64,
    /// Released objects of the call kept because a named root reaches them.
    pub retained: u64,
    /// Objects removed from memory and disk.
    pub freed: u64,
    /// Encoded payload bytes of the freed objects ([`ObjectMeta::size`]).
    pub bytes_freed: u64,
    /// Object files deleted.
    pub files_removed: u64,
}

/// The shared body of a [`Store`] (all clones point to one).
struct Inner {
    /// Rank this store allocates IDs for.
    rank: u32,
    /// This store's nonce, the middle part of every ID it allocates (never 0).
    nonce: u64,
    /// The rank directory (exclusively held); `None` for an in-memory store.
    disk: Option<Disk>,
    /// Memory budget in bytes (a disk store only evicts with one).
    budget: Option<u64>,
    /// Entries, LRU index, roots and counters.
    state: Mutex<State>,
    /// Single-flight locks of the loads in progress, by ID.
    loading: Mutex<HashMap<ObjectId, Arc<Mutex<()>>>>,
    /// The ID counter.
    alloc: Mutex<Alloc>,
    /// Serializes edits of the named roots.
    roots_edit: Mutex<()>,
    /// The directory of an in-memory store's offloaded objects (`Store::offload`),
    /// set once: given ([`Store::set_offload_dir`]) or a temporary one.
    spill: std::sync::OnceLock<offload::SpillDir>,
    /// Background threads of `Store::load`.
    pool: LoadPool,
    /// Commits still to fail (fault injection, [`Store::inject_io_failures`]).
    io_faults: std::sync::atomic::AtomicU32,
    /// Spills still to fail (fault injection, [`Store::inject_spill_failures`]).
    spill_faults: std::sync::atomic::AtomicU32,
}

/// One rank's object store.
///
/// Thread-safe and cheap to clone (clones share the same store); every method
/// takes `&self`. Objects are immutable: [`commit`](Store::commit) allocates a fresh
/// [`ObjectId`] (origin = this store's rank, nonce = [`Store::nonce`], seq = its
/// counter) and the object is
/// servable by the time the handle is returned. Copies of objects from other
/// ranks enter with [`insert_replica`](Store::insert_replica).
///
/// Two forms exist:
/// * [`Store::in_memory`]: objects live in memory only, nothing is evicted (unless a
///   budget is given, [`Store::in_memory_with_budget`], or the program offloads) and
///   `flush` is a no-op; the store's random nonce keeps its IDs apart from those of
///   every other store.
/// * [`Store::open`]: a directory per rank; commits stay in memory and their files
///   are written behind (temp file + rename) only when they are flushed or leave
///   memory: [`flush`](Store::flush) / [`flush_ids`](Store::flush_ids) /
///   [`flush_all`](Store::flush_all) write and fsync them, a memory budget spills the
///   least recently used ones, [`evict`](Store::evict) spills one; an object released
///   before then never touches the disk. A reopened store serves every flushed
///   object.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("rank", &self.inner.rank)
            .field("nonce", &format_args!("{:016x}", self.inner.nonce))
            .field("dir", &self.inner.disk.as_ref().map(|d| d.dir().to_owned()))
            .field("budget", &self.inner.budget)
            .finish()
    }
}

impl Store {
    fn from_parts(
        rank: u32,
        nonce: u64,
        disk: Option<Disk>,
        budget: Option<u64>,
        mut state: State,
        next: u64,
    ) -> Store {
        state.track_lru = budget.is_some();
        // The index of whatever the state already holds resident (nothing,
        // for the stores opened today): kept only with a budget.
        state.lru = if state.track_lru {
            state
                .entries
                .iter()
                .filter(|(_, e)| e.resident())
                .map(|(id, e)| (e.tick, *id))
                .collect()
        } else {
            Default::default()
        };
        Store {
            inner: Arc::new(Inner {
                rank,
                nonce,
                disk,
                budget,
                state: Mutex::new(state),
                loading: Mutex::new(HashMap::new()),
                alloc: Mutex::new(Alloc { next, reserved: next }),
                roots_edit: Mutex::new(()),
                spill: std::sync::OnceLock::new(),
                pool: LoadPool::new(),
                io_faults: std::sync::atomic::AtomicU32::new(0),
                spill_faults: std::sync::atomic::AtomicU32::new(0),
            }),
        }
    }

    /// Creates an empty in-memory store for `rank`, with a fresh random nonce
    /// ([`ObjectId::nonce`]). Sequence numbers start at 0.
    ///
    /// Nothing is written to disk and nothing is evicted. Two in-memory stores, even of
    /// the same rank in one process (successive universes, jobs, tests), draw
    /// independent 64-bit nonces, so their IDs differ (a collision has probability
    /// about 2^-64 per pair of stores).
    pub fn in_memory(rank: u32) -> Store {
        Store::from_parts(rank, fresh_nonce(), None, None, State::new(), 0)
    }

    /// Creates an empty in-memory store for `rank` (as [`Store::in_memory`])
    /// that keeps at most `budget` bytes resident, charged as
    /// [`StoreOptions::memory_budget`] describes: beyond it, the least recently
    /// used unpinned objects are written to the store's offload directory
    /// ([`set_offload_dir`](Store::set_offload_dir), else a temporary directory
    /// created at the first spill and removed with the store) and dropped from
    /// memory; a later load reads them back (size and CRC checked). Nothing
    /// survives the store: this is a bound on memory, not persistence. A failed
    /// spill leaves the object resident and is reported by
    /// [`take_background_error`](Store::take_background_error).
    pub fn in_memory_with_budget(rank: u32, budget: u64) -> Store {
        Store::from_parts(rank, fresh_nonce(), None, Some(budget), State::new(), 0)
    }

    /// The rank this store allocates IDs for.
    pub fn rank(&self) -> u32 {
        self.inner.rank
    }

    /// This store's nonce: the [`ObjectId::nonce`] of every ID it allocates. Random per
    /// in-memory store; for a disk store, created with the rank directory and kept
    /// across reopens. Never [`ObjectId::NIL_NONCE`].
    pub fn nonce(&self) -> u64 {
        self.inner.nonce
    }

    /// The directory holding this store's object files (`dir/rank-<rank>`), or
    /// `None` for an in-memory store.
    pub fn dir(&self) -> Option<&Path> {
        self.inner.disk.as_ref().map(Disk::dir)
    }

    /// Path of the file that holds (or would hold) object `id`; `None` for an
    /// in-memory store.
    pub fn object_path(&self, id: ObjectId) -> Option<PathBuf> {
        self.inner.disk.as_ref().map(|d| d.object_path(id))
    }

    /// The disk that holds this store's object files: its rank directory, or for
    /// an in-memory store the directory of its offloaded objects once it has one.
    pub(super) fn file_disk(&self) -> Option<&Disk> {
        self.inner
            .disk
            .as_ref()
            .or_else(|| self.inner.spill.get().map(|s| &s.disk))
    }

    /// Registers `T` so that [`gc`](Store::gc) can find the references of byte-only
    /// objects of type `T::TYPE_NAME` (replicas never decoded here). Types passed to
    /// `commit` or any load are registered automatically.
    pub fn register<T: Persist>(&self) {
        self.inner
            .state
            .lock()
            .refs_fns
            .entry(T::TYPE_NAME.to_owned())
            .or_insert(refs_erased::<T>);
    }

    /// Metadata of `id` if this store holds it (resident or on disk). No I/O.
    pub fn meta(&self, id: ObjectId) -> Option<ObjectMeta> {
        self.seal(id);
        let st = self.inner.state.lock();
        st.entries.get(&id).filter(|e| !e.dead()).map(|e| e.meta())
    }

    /// Computes the checksum of a committed value of `id` not yet checksummed
    /// (`Entry::checksum`) outside the state lock, so that loads and commits
    /// on other threads do not wait behind a CRC pass over a large block; the
    /// first result stored wins (every pass gives the same value). Nothing to
    /// do for an entry already sealed or not held.
    pub(super) fn seal(&self, id: ObjectId) {
        let src = {
            let st = self.inner.state.lock();
            let Some(e) = st.entries.get(&id) else { return };
            if e.crc.get().is_some() {
                return;
            }
            e.crc_source()
        };
        let Some(crc) = src.and_then(|s| s.compute()) else {
            return;
        };
        let st = self.inner.state.lock();
        if let Some(e) = st.entries.get(&id) {
            let _ = e.crc.set(crc);
        }
    }

    /// The encoded size in bytes of `id` ([`ObjectMeta::size`]) if this store
    /// holds it (resident or on disk); `None` otherwise. No I/O, no copy of
    /// the metadata: for deciding how to process an object before loading it.
    pub fn size_of(&self, id: ObjectId) -> Option<u64> {
        let st = self.inner.state.lock();
        st.entries.get(&id).filter(|e| !e.dead()).map(|e| e.head.size)
    }

    /// True if this store holds `id` (resident or on disk).
    /// No I/O.
    pub fn contains(&self, id: ObjectId) -> bool {
        self.inner.state.lock().entries.get(&id).is_some_and(|e| !e.dead())
    }

    /// IDs of every object this store holds (resident or on
    /// disk), sorted. Objects whose files were found unreadable at [`open`](Store::open)
    /// are not listed (loading them fails with a fatal error). No I/O.
    pub fn ids(&self) -> Vec<ObjectId> {
        let mut v: Vec<ObjectId> = {
            let st = self.inner.state.lock();
            st.entries.values().filter(|e| !e.dead()).map(|e| e.head.id).collect()
        };
        v.sort_unstable();
        v
    }

    /// True if `id` has a resident form here (decoded value or bytes). No I/O.
    pub fn is_resident(&self, id: ObjectId) -> bool {
        self.inner.state.lock().entries.get(&id).is_some_and(Entry::resident)
    }

    /// True if `id` is pinned here (some [`PValue`](crate::PValue) of it is alive, or an explicit
    /// [`pin`](Store::pin)). No I/O.
    pub fn is_pinned(&self, id: ObjectId) -> bool {
        self.inner.state.lock().entries.get(&id).is_some_and(Entry::pinned)
    }

    /// What this store holds now and its counters (see [`StoreStats`]). Walks every
    /// entry under the state lock: O(objects); no I/O.
    pub fn stats(&self) -> StoreStats {
        let st = self.inner.state.lock();
        let mut s = st.stats.clone();
        s.objects = 0;
        s.pinned_objects = 0;
        s.bytes_pinned = 0;
        s.spilled_objects = 0;
        s.bytes_spilled = 0;
        s.releases_pending = 0;
        for e in st.entries.values().filter(|e| !e.dead()) {
            s.objects += 1;
            if e.pinned() {
                s.pinned_objects += 1;
                s.bytes_pinned += if e.resident() { e.charge() } else { e.head.size };
            } else if !e.resident() && e.disk != OnDisk::No {
                s.spilled_objects += 1;
                s.bytes_spilled += e.head.size;
            }
            if e.released {
                s.releases_pending += 1;
            }
        }
        drop(st);
        s.io_ops = self.inner.disk.as_ref().map_or(0, Disk::io_ops);
        s
    }
}
