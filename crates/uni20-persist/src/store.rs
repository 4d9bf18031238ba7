//! [`Store`]: one rank's object store (memory cache + optional disk directory).

use std::any::Any;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::disk::Disk;
use crate::pool::{spawn_blocking, LoadPool};
use crate::{ObjectId, ObjectMeta, PValue, Persist, PersistError, PersistentPtr};

type AnyArc = Arc<dyn Any + Send + Sync>;
type EncodeFn = fn(&(dyn Any + Send + Sync)) -> Option<Vec<u8>>;
type RefsFn = fn(&[u8]) -> Result<Vec<ObjectId>, PersistError>;

fn encode_erased<T: Persist>(v: &(dyn Any + Send + Sync)) -> Option<Vec<u8>> {
    v.downcast_ref::<T>().map(T::encode)
}

fn refs_erased<T: Persist>(b: &[u8]) -> Result<Vec<ObjectId>, PersistError> {
    Ok(T::decode(b)?.references())
}

/// Hasher for `ObjectId` keys: the IDs are not attacker-controlled, so a multiply-xor
/// mix replaces SipHash on the cache-hit path.
#[derive(Clone, Copy, Default)]
struct IdHash;

impl std::hash::BuildHasher for IdHash {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

#[derive(Clone, Copy)]
struct IdHasher(u64);

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

/// The resident form a commit leaves behind.
enum Resident {
    Value(AnyArc),
    Bytes(Arc<Vec<u8>>),
}

/// A reachable object whose references gc must still find: id, type name, resident bytes.
type Unresolved = (ObjectId, String, Option<Arc<Vec<u8>>>);

/// Seq numbers reserved (and recorded durably) at a time by a disk store.
const SEQ_BLOCK: u64 = 4096;

/// Options of a disk-backed store ([`Store::open`]).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct StoreOptions {
    /// Memory budget in bytes for resident objects (decoded values are charged
    /// their encoded size, resident byte payloads their length). When exceeded the
    /// cache evicts unpinned entries in least-recently-used order, writing them to
    /// disk first if they are not there yet. Pinned entries (a live [`PValue`]) are
    /// never evicted, so the budget can be exceeded by pinned data. `None`: unlimited.
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

/// Counters of one store, from [`Store::stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreStats {
    /// Loads served from an already-decoded resident value.
    pub hits: u64,
    /// Loads that found no decoded resident value (whether or not they then succeeded).
    pub misses: u64,
    /// Entries whose resident forms were dropped by the cache policy.
    pub evictions: u64,
    /// Evicted entries written to disk because they were not there yet.
    pub spills: u64,
    /// Bytes currently charged to resident entries (see [`StoreOptions::memory_budget`]).
    pub bytes_resident: u64,
    /// Objects this store can serve without a remote fetch (resident or on disk).
    pub objects: u64,
    /// Objects with a resident form (decoded value or byte payload).
    pub resident_objects: u64,
    /// Times a value was decoded from bytes (resident, disk or remote).
    pub materializations: u64,
    /// Successful `commit` calls.
    pub commits: u64,
    /// Object files read from disk.
    pub disk_reads: u64,
    /// Object files written to disk (commit, spill or flush).
    pub disk_writes: u64,
    /// Objects fetched from the remote source.
    pub remote_fetches: u64,
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

/// A source of objects this store does not hold: another rank, a storage rank.
///
/// Installed with [`Store::set_remote_source`]; consulted by
/// [`Store::load_wait`] / [`Store::load`] on a local miss. The worker runtime
/// implements it over its transport.
pub trait RemoteSource: Send + Sync + 'static {
    /// Fetches object `id`'s metadata and payload bytes, blocking the calling thread.
    /// Returns `Ok(None)` if no reachable rank has it. The store verifies size and
    /// checksum before using the bytes.
    ///
    /// # Errors
    /// Any [`PersistError`] (typically [`PersistError::Remote`]) on transport failure.
    fn fetch(&self, id: ObjectId) -> Result<Option<(ObjectMeta, Vec<u8>)>, PersistError>;
}

/// A store serves as the remote source of another (e.g. ranks as threads of one
/// process): `fetch` is [`Store::encoded`], with `NotFound` mapped to `Ok(None)`.
impl RemoteSource for Store {
    fn fetch(&self, id: ObjectId) -> Result<Option<(ObjectMeta, Vec<u8>)>, PersistError> {
        match self.encoded(id) {
            Ok((m, b)) => Ok(Some((m, b.to_vec()))),
            Err(PersistError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OnDisk {
    No,
    Written,
    Durable,
}

struct Entry {
    meta: ObjectMeta,
    value: Option<AnyArc>,
    encoder: Option<EncodeFn>,
    bytes: Option<Arc<Vec<u8>>>,
    disk: OnDisk,
    refs: Option<Vec<ObjectId>>,
    tick: u64,
    spilling: bool,
    /// Explicit pins by ID ([`Store::pin`]), on top of live `PValue`s.
    pins: u64,
}

impl Entry {
    fn charge(&self) -> u64 {
        let v = if self.value.is_some() { self.meta.size } else { 0 };
        let b = self.bytes.as_ref().map_or(0, |b| b.len() as u64);
        v + b
    }
    fn resident(&self) -> bool {
        self.value.is_some() || self.bytes.is_some()
    }
    fn pinned(&self) -> bool {
        self.pins > 0 || self.value.as_ref().is_some_and(|v| Arc::strong_count(v) > 1)
    }
}

#[derive(Default)]
struct State {
    entries: HashMap<ObjectId, Entry, IdHash>,
    /// Whether hits reorder the LRU index (only a disk store with a budget evicts).
    track_lru: bool,
    corrupt: HashMap<ObjectId, PersistError>,
    lru: BTreeMap<u64, ObjectId>,
    tick: u64,
    refs_fns: HashMap<String, RefsFn>,
    roots: BTreeMap<String, ObjectId>,
    stats: StoreStats,
}

impl State {
    /// Empty state with the crate's built-in `Persist` types registered for `gc`.
    fn new() -> State {
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
            (crate::Manifest::TYPE_NAME, refs_erased::<crate::Manifest>),
        ];
        for (name, f) in builtins {
            st.refs_fns.insert(name.to_owned(), f);
        }
        st
    }

    /// Applies `f` to entry `id`, keeping the resident-bytes account and LRU index right.
    fn update<R>(&mut self, id: ObjectId, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let e = self.entries.get_mut(&id)?;
        let before = e.charge();
        let was_resident = e.resident();
        let r = f(e);
        let after = e.charge();
        let now_resident = e.resident();
        let old_tick = e.tick;
        self.stats.bytes_resident = self.stats.bytes_resident.saturating_sub(before) + after;
        if was_resident {
            self.lru.remove(&old_tick);
            self.stats.resident_objects = self.stats.resident_objects.saturating_sub(1);
        }
        if now_resident {
            self.tick += 1;
            let t = self.tick;
            if let Some(e) = self.entries.get_mut(&id) {
                e.tick = t;
            }
            self.lru.insert(t, id);
            self.stats.resident_objects += 1;
        }
        Some(r)
    }

    /// Inserts an entry that has no resident form yet (add forms with `update`).
    fn insert(&mut self, e: Entry) {
        debug_assert!(!e.resident());
        if let Some(old) = self.remove(e.meta.id) {
            tracing::error!(object = %old.meta.id, "replacing an existing entry");
        }
        self.entries.insert(e.meta.id, e);
        self.stats.objects += 1;
    }

    fn remove(&mut self, id: ObjectId) -> Option<Entry> {
        let e = self.entries.remove(&id)?;
        if e.resident() {
            self.lru.remove(&e.tick);
            self.stats.resident_objects = self.stats.resident_objects.saturating_sub(1);
            self.stats.bytes_resident = self.stats.bytes_resident.saturating_sub(e.charge());
        }
        self.stats.objects = self.stats.objects.saturating_sub(1);
        Some(e)
    }

    fn touch(&mut self, id: ObjectId) {
        let _ = self.update(id, |_| ());
    }

    /// A resident decoded value of type `T`, if any (counts a hit).
    fn resident_value<T: Persist>(&mut self, id: ObjectId) -> Option<Result<Arc<T>, PersistError>> {
        let e = self.entries.get(&id)?;
        let v = e.value.as_ref()?.clone();
        if e.meta.type_name != T::TYPE_NAME {
            return Some(Err(type_mismatch::<T>(&e.meta)));
        }
        let r = v.downcast::<T>().map_err(|_| PersistError::TypeMismatch {
            id,
            expected: T::TYPE_NAME.to_owned(),
            found: format!("{} (a different Rust type)", e.meta.type_name),
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

fn type_mismatch<T: Persist>(meta: &ObjectMeta) -> PersistError {
    PersistError::TypeMismatch {
        id: meta.id,
        expected: T::TYPE_NAME.to_owned(),
        found: meta.type_name.clone(),
    }
}

fn verify(meta: &ObjectMeta, bytes: &[u8], path: Option<&Path>) -> Result<(), PersistError> {
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

/// Rank directories opened by live stores of this process.
static OPEN_DIRS: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Marks a rank directory as open in this process until dropped.
struct DirClaim(PathBuf);

impl DirClaim {
    fn new(dir: &Path) -> Result<DirClaim, PersistError> {
        let path = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
        let mut open = OPEN_DIRS.lock();
        if !open.get_or_insert_with(HashSet::new).insert(path.clone()) {
            return Err(PersistError::AlreadyOpen { path });
        }
        Ok(DirClaim(path))
    }
}

impl Drop for DirClaim {
    fn drop(&mut self) {
        if let Some(open) = OPEN_DIRS.lock().as_mut() {
            open.remove(&self.0);
        }
    }
}

struct Alloc {
    next: u64,
    reserved: u64,
}

pub(crate) struct Inner {
    rank: u32,
    disk: Option<Disk>,
    budget: Option<u64>,
    state: Mutex<State>,
    loading: Mutex<HashMap<ObjectId, Arc<Mutex<()>>>>,
    alloc: Mutex<Alloc>,
    roots_edit: Mutex<()>,
    claim: Mutex<Option<DirClaim>>,
    remote: RwLock<Option<Arc<dyn RemoteSource>>>,
    pool: LoadPool,
    /// Writes still to fail (fault injection, [`Store::inject_io_failures`]).
    io_faults: std::sync::atomic::AtomicU32,
}

/// One rank's object store.
///
/// Thread-safe and cheap to clone (clones share the same store); every method
/// takes `&self`. Objects are immutable: [`commit`](Store::commit) allocates a fresh
/// [`ObjectId`] (origin = this store's rank, seq = its counter) and the object is
/// servable by the time the handle is returned. Copies of objects from other
/// ranks enter with [`insert_replica`](Store::insert_replica).
///
/// Two forms exist:
/// * [`Store::in_memory`]: objects live in memory only, nothing is ever evicted,
///   `flush` is a no-op, and IDs are unique only for the life of the store.
/// * [`Store::open`]: a directory per rank; commits are written to disk (temp file +
///   rename), [`flush`](Store::flush) / [`flush_all`](Store::flush_all) make them
///   durable, a reopened store serves every flushed object, and a memory budget
///   bounds the cache.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("rank", &self.inner.rank)
            .field("dir", &self.inner.disk.as_ref().map(|d| d.dir().to_owned()))
            .field("budget", &self.inner.budget)
            .finish()
    }
}

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
    fn from_parts(rank: u32, disk: Option<Disk>, budget: Option<u64>, mut state: State, next: u64) -> Store {
        state.track_lru = budget.is_some() && disk.is_some();
        Store {
            inner: Arc::new(Inner {
                rank,
                disk,
                budget,
                state: Mutex::new(state),
                loading: Mutex::new(HashMap::new()),
                alloc: Mutex::new(Alloc { next, reserved: next }),
                roots_edit: Mutex::new(()),
                claim: Mutex::new(None),
                remote: RwLock::new(None),
                pool: LoadPool::new(),
                io_faults: std::sync::atomic::AtomicU32::new(0),
            }),
        }
    }

    /// Creates an empty in-memory store for `rank`. Sequence numbers start at 0.
    ///
    /// Nothing is written to disk and nothing is evicted. Two in-memory stores
    /// created with the same rank allocate colliding IDs: create one per rank.
    pub fn in_memory(rank: u32) -> Store {
        Store::from_parts(rank, None, None, State::new(), 0)
    }

    /// Opens (creating if needed) the disk store of `rank` under `dir`: the objects
    /// live in `dir/rank-<rank>/`.
    ///
    /// Every object file found is indexed (headers are read and checked; payloads are
    /// read on load). Unreadable files are remembered: loading such an object fails
    /// with the fatal [`PersistError::Corrupt`] / [`PersistError::Checksum`] naming the
    /// file, never `NotFound`. Leftover temporary files are deleted. The ID counter
    /// resumes above both the durably reserved high-water mark and every own-origin
    /// object found, so IDs never collide with earlier ones, even after a crash.
    ///
    /// One store per rank directory: a second `open` of a directory that a live store
    /// of this process holds fails with [`PersistError::AlreadyOpen`]. Opening one
    /// directory from two processes at once is not detected and not supported.
    ///
    /// # Errors
    /// [`PersistError::Io`] if the directory cannot be created or listed;
    /// [`PersistError::Corrupt`] if the counter or roots file is damaged;
    /// [`PersistError::AlreadyOpen`].
    pub fn open(dir: &Path, rank: u32, opts: StoreOptions) -> Result<Store, PersistError> {
        let disk = Disk::create(dir, rank)?;
        let claim = DirClaim::new(disk.dir())?;
        let mut state = State::new();
        let mut next = disk.read_counter()?.unwrap_or(0);
        state.roots = disk.read_roots()?;
        for (id, res) in disk.scan()? {
            if id.origin == rank {
                next = next.max(id.seq.saturating_add(1));
            }
            match res {
                Ok(h) => {
                    state.insert(Entry {
                        meta: h.meta,
                        value: None,
                        encoder: None,
                        bytes: None,
                        disk: OnDisk::Durable,
                        refs: h.refs,
                        tick: 0,
                        spilling: false,
                        pins: 0,
                    });
                }
                Err(e) => {
                    tracing::error!(object = %id, error = %e, "unreadable object file in store");
                    state.corrupt.insert(id, e);
                }
            }
        }
        tracing::debug!(rank, dir = %disk.dir().display(), objects = state.entries.len(), next, "opened persistent store");
        let store = Store::from_parts(rank, Some(disk), opts.memory_budget, state, next);
        *store.inner.claim.lock() = Some(claim);
        Ok(store)
    }

    /// The rank this store allocates IDs for.
    pub fn rank(&self) -> u32 {
        self.inner.rank
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

    /// Installs the source consulted by `load_wait`/`load` on a local miss,
    /// replacing any previous one.
    pub fn set_remote_source(&self, source: Arc<dyn RemoteSource>) {
        *self.inner.remote.write() = Some(source);
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

    /// Fault injection, for tests and for debugging fail-stop handling: the
    /// next `n` commits fail with an I/O error (`ENOSPC`, as a full disk
    /// would), before their object is written or their id is returned.
    /// The allocated ids are never reused.
    pub fn inject_io_failures(&self, n: u32) {
        self.inner.io_faults.store(n, std::sync::atomic::Ordering::SeqCst);
    }

    fn take_injected_io_failure(&self, id: ObjectId) -> Result<(), PersistError> {
        use std::sync::atomic::Ordering;
        let left = self.inner.io_faults.load(Ordering::SeqCst);
        if left == 0
            || self
                .inner
                .io_faults
                .compare_exchange(left, left - 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
        {
            return Ok(());
        }
        let path = self.object_path(id).unwrap_or_else(|| PathBuf::from("<memory>"));
        Err(PersistError::Io {
            op: format!("write object {id} (injected fault)"),
            path,
            source: std::io::Error::from_raw_os_error(libc_enospc()),
        })
    }

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
        Ok(ObjectId {
            origin: self.inner.rank,
            seq,
        })
    }

    /// Commits `value` as a new immutable object and returns its handle.
    ///
    /// The value is encoded once (to compute its size and CRC-32 and, for a disk store,
    /// to write its file), then kept resident as the decoded value. Types whose
    /// [`Persist::encode_borrowed`] gives a view are checksummed and written in place,
    /// with no encoding copy. The handle is
    /// returned only once the object is servable by this store; in a disk store the
    /// file exists under its final name but is not yet durable (see [`flush`](Store::flush)).
    ///
    /// # Errors
    /// [`PersistError::Io`] if the object file or the counter file cannot be written
    /// (fatal: no ID escapes); errors of a spill triggered by the memory budget.
    pub fn commit<T: Persist>(&self, value: T) -> Result<PersistentPtr<T>, PersistError> {
        let refs = value.references();
        let id = {
            let value = Arc::new(value);
            let resident: AnyArc = value.clone();
            let owned;
            let bytes: &[u8] = match value.encode_borrowed() {
                // Zero-copy: checksum and write the value's own memory.
                Some(b) => b,
                None => {
                    owned = value.encode();
                    &owned
                }
            };
            self.commit_parts::<T>(bytes, refs, move || Resident::Value(resident))?
        };
        // After the local handle is gone, so the new entry is not counted as pinned.
        self.enforce_budget()?;
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
        let id = self.commit_parts::<T>(&bytes, refs, || Resident::Bytes(bytes.clone()))?;
        self.enforce_budget()?;
        Ok(PersistentPtr::from_id(id))
    }

    /// Allocates an ID for `bytes`, writes the object file (disk store), then inserts
    /// the entry with the resident form made by `resident`. No ID escapes on error.
    /// The caller enforces the memory budget afterwards.
    fn commit_parts<T: Persist>(
        &self,
        bytes: &[u8],
        refs: Vec<ObjectId>,
        resident: impl FnOnce() -> Resident,
    ) -> Result<ObjectId, PersistError> {
        let id = self.alloc_id()?;
        self.take_injected_io_failure(id)?;
        let meta = ObjectMeta::of_bytes(id, T::TYPE_NAME, bytes);
        let mut disk_state = OnDisk::No;
        if let Some(disk) = &self.inner.disk {
            disk.write_object(&meta, Some(&refs), bytes)?;
            disk_state = OnDisk::Written;
        }
        {
            let mut st = self.inner.state.lock();
            if st.entries.contains_key(&id) {
                // Only possible if a replica of a not-yet-allocated own ID was inserted.
                return Err(PersistError::Conflict(id));
            }
            st.refs_fns.entry(T::TYPE_NAME.to_owned()).or_insert(refs_erased::<T>);
            if disk_state != OnDisk::No {
                st.stats.disk_writes += 1;
            }
            let form = resident();
            st.insert(Entry {
                meta,
                value: None,
                encoder: None,
                bytes: None,
                disk: disk_state,
                refs: Some(refs),
                tick: 0,
                spilling: false,
                pins: 0,
            });
            st.update(id, |e| match form {
                Resident::Value(v) => {
                    e.value = Some(v);
                    e.encoder = Some(encode_erased::<T>);
                }
                Resident::Bytes(b) => e.bytes = Some(b),
            });
            st.stats.commits += 1;
        }
        Ok(id)
    }

    /// Returns the object if it is resident here, without I/O and without blocking
    /// on other loads' I/O.
    ///
    /// Returns `None` on a miss: the object is absent, only on disk, of another type
    /// (logged), or its bytes fail to decode (logged). A resident byte-only replica
    /// is decoded here, once: concurrent callers wait for the one decode.
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
    /// disk file (read, size and CRC checked, decoded); the remote source (bytes
    /// verified and kept as a replica, then decoded). Concurrent loads of one ID
    /// materialize it once; the others wait for it.
    ///
    /// # Errors
    /// * [`PersistError::NotFound`] if absent here and at the remote source (or no source is set);
    /// * [`PersistError::TypeMismatch`] if the object is not a `T`;
    /// * [`PersistError::Checksum`] / [`PersistError::Corrupt`] (fatal) if its file or
    ///   fetched bytes are damaged; the error names the object and the file;
    /// * [`PersistError::Io`], [`PersistError::Remote`], [`PersistError::Decode`].
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
    /// suspending) on a resident hit; otherwise the disk read or remote fetch runs on
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
    /// bytes are used. `Ok(None)`: not available from the allowed sources.
    fn materialize<T: Persist>(&self, id: ObjectId, io: bool) -> Result<Option<PValue<T>>, PersistError> {
        let lock = {
            let mut l = self.inner.loading.lock();
            l.entry(id).or_insert_with(|| Arc::new(Mutex::new(()))).clone()
        };
        let _guard = LoadingGuard {
            inner: &self.inner,
            id,
            lock: lock.clone(),
        };
        let _held = lock.lock();

        // Someone may have finished while we waited; find what we can use.
        enum Src {
            Bytes(Arc<Vec<u8>>),
            Disk,
            Remote,
        }
        let src = {
            let mut st = self.inner.state.lock();
            st.refs_fns.entry(T::TYPE_NAME.to_owned()).or_insert(refs_erased::<T>);
            if let Some(r) = st.resident_value::<T>(id) {
                return r.map(|v| Some(PValue::new(id, v)));
            }
            match st.entries.get(&id) {
                Some(e) => {
                    if e.meta.type_name != T::TYPE_NAME {
                        return Err(type_mismatch::<T>(&e.meta));
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
                            found: format!("{} (a different Rust type)", e.meta.type_name),
                        });
                    }
                }
                None => {
                    if let Some(e) = st.corrupt.get(&id) {
                        return Err(self.corrupt_error(id, e));
                    }
                    Src::Remote
                }
            }
        };
        let bytes: Arc<Vec<u8>> = match src {
            Src::Bytes(b) => b,
            Src::Disk if io => {
                let disk = self.inner.disk.as_ref().ok_or(PersistError::NotFound(id))?;
                let (h, payload) = disk.read_object(id)?;
                let mut st = self.inner.state.lock();
                st.stats.disk_reads += 1;
                if let Some(e) = st.entries.get(&id) {
                    if e.meta != h.meta {
                        return Err(PersistError::Corrupt {
                            id: Some(id),
                            path: disk.object_path(id),
                            reason: "file metadata differs from the indexed metadata".into(),
                        });
                    }
                }
                payload.into()
            }
            Src::Remote if io => {
                let remote = self.inner.remote.read().clone();
                let Some(remote) = remote else { return Ok(None) };
                let Some((meta, payload)) = remote.fetch(id)? else {
                    return Ok(None);
                };
                if meta.id != id {
                    return Err(PersistError::Remote {
                        id,
                        reason: format!("remote source returned object {}", meta.id),
                    });
                }
                if meta.type_name != T::TYPE_NAME {
                    return Err(type_mismatch::<T>(&meta));
                }
                verify(&meta, &payload, None)?;
                let payload: Arc<Vec<u8>> = payload.into();
                self.insert_verified(meta, payload.clone(), false)?;
                self.inner.state.lock().stats.remote_fetches += 1;
                payload
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
        self.enforce_budget()?;
        Ok(Some(PValue::new(id, arc)))
    }

    fn corrupt_error(&self, id: ObjectId, e: &PersistError) -> PersistError {
        let path = self.object_path(id).unwrap_or_default();
        PersistError::Corrupt {
            id: Some(id),
            path,
            reason: e.to_string(),
        }
    }

    /// The metadata and encoded bytes of object `id`, to send to another rank.
    ///
    /// Uses resident bytes, else re-encodes the resident value (checking the result
    /// against the recorded size and CRC-32), else reads the disk file. Never
    /// consults the remote source.
    ///
    /// # Errors
    /// [`PersistError::NotFound`] if this store does not hold `id`;
    /// [`PersistError::Checksum`] if re-encoding gives different bytes (a
    /// non-deterministic `Persist::encode`) or the file is damaged;
    /// [`PersistError::Corrupt`], [`PersistError::Io`] for disk problems.
    pub fn encoded(&self, id: ObjectId) -> Result<(ObjectMeta, Arc<Vec<u8>>), PersistError> {
        self.encoded_impl(id, true)
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
        self.encoded_impl(id, false)
    }

    fn encoded_impl(&self, id: ObjectId, check: bool) -> Result<(ObjectMeta, Arc<Vec<u8>>), PersistError> {
        enum Src {
            Value(AnyArc, EncodeFn),
            Disk,
        }
        let (meta, src) = {
            let st = self.inner.state.lock();
            let Some(e) = st.entries.get(&id) else {
                if let Some(c) = st.corrupt.get(&id) {
                    return Err(self.corrupt_error(id, c));
                }
                return Err(PersistError::NotFound(id));
            };
            if let Some(b) = &e.bytes {
                return Ok((e.meta.clone(), b.clone()));
            }
            match (&e.value, e.encoder) {
                (Some(v), Some(enc)) => (e.meta.clone(), Src::Value(v.clone(), enc)),
                _ if e.disk != OnDisk::No => (e.meta.clone(), Src::Disk),
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
                let disk = self.inner.disk.as_ref().ok_or(PersistError::NotFound(id))?;
                let (h, b) = disk.read_object(id)?;
                self.inner.state.lock().stats.disk_reads += 1;
                if h.meta != meta {
                    return Err(PersistError::Corrupt {
                        id: Some(id),
                        path: disk.object_path(id),
                        reason: "file metadata differs from the indexed metadata".into(),
                    });
                }
                b
            }
        };
        Ok((meta, bytes.into()))
    }

    /// Inserts a copy of an object (usually from another rank, possibly this one's).
    ///
    /// Checks that `bytes` has `meta.size` bytes and CRC-32 `meta.checksum`. If the
    /// store already holds `meta.id`: identical metadata (and identical bytes, when
    /// its bytes are resident) is a no-op; anything else is a conflict. The replica is
    /// kept as bytes and decoded on first load. A replica of an own-origin ID moves
    /// this store's counter past it. A disk store writes the replica to disk only when
    /// it is evicted or flushed.
    ///
    /// # Errors
    /// [`PersistError::Checksum`] if the bytes do not match `meta`;
    /// [`PersistError::Conflict`] (fatal) if the ID already names different content.
    pub fn insert_replica(&self, meta: ObjectMeta, bytes: Vec<u8>) -> Result<(), PersistError> {
        verify(&meta, &bytes, None)?;
        self.insert_verified(meta, bytes.into(), true)
    }

    fn insert_verified(&self, meta: ObjectMeta, bytes: Arc<Vec<u8>>, budget: bool) -> Result<(), PersistError> {
        let id = meta.id;
        {
            let mut st = self.inner.state.lock();
            if let Some(e) = st.entries.get(&id) {
                if e.meta != meta || e.bytes.as_ref().is_some_and(|b| **b != *bytes) {
                    return Err(PersistError::Conflict(id));
                }
                return Ok(());
            }
            if st.corrupt.remove(&id).is_some() {
                tracing::warn!(object = %id, "replacing unreadable object file content with a verified replica");
            }
            st.insert(Entry {
                meta,
                value: None,
                encoder: None,
                bytes: None,
                disk: OnDisk::No,
                refs: None,
                tick: 0,
                spilling: false,
                pins: 0,
            });
            st.update(id, |e| e.bytes = Some(bytes));
        }
        if id.origin == self.inner.rank {
            let mut a = self.inner.alloc.lock();
            if a.next <= id.seq {
                a.next = id.seq.saturating_add(1);
            }
        }
        if budget {
            self.enforce_budget()?;
        }
        Ok(())
    }

    /// Metadata of `id` if this store holds it (resident or on disk). No I/O.
    pub fn meta(&self, id: ObjectId) -> Option<ObjectMeta> {
        self.inner.state.lock().entries.get(&id).map(|e| e.meta.clone())
    }

    /// True if this store can serve `id` without a remote fetch (resident or on disk).
    /// No I/O.
    pub fn contains(&self, id: ObjectId) -> bool {
        self.inner.state.lock().entries.contains_key(&id)
    }

    /// IDs of every object this store can serve without a remote fetch (resident or on
    /// disk), sorted. Objects whose files were found unreadable at [`open`](Store::open)
    /// are not listed (loading them fails with a fatal error). No I/O.
    pub fn ids(&self) -> Vec<ObjectId> {
        let mut v: Vec<ObjectId> = self.inner.state.lock().entries.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// True if `id` has a resident form here (decoded value or bytes). No I/O.
    pub fn is_resident(&self, id: ObjectId) -> bool {
        self.inner.state.lock().entries.get(&id).is_some_and(Entry::resident)
    }

    /// True if `id` is pinned here (some [`PValue`] of it is alive, or an explicit
    /// [`pin`](Store::pin)). No I/O.
    pub fn is_pinned(&self, id: ObjectId) -> bool {
        self.inner.state.lock().entries.get(&id).is_some_and(Entry::pinned)
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
            let e = st.entries.get_mut(&id).ok_or(PersistError::NotFound(id))?;
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
    /// `PValue` remain. No I/O.
    pub fn unpin(&self, id: ObjectId) -> bool {
        let mut st = self.inner.state.lock();
        match st.entries.get_mut(&id) {
            Some(e) if e.pins > 0 => {
                e.pins -= 1;
                true
            }
            _ => false,
        }
    }

    /// Drops the resident materialization of `id` from this store.
    ///
    /// Live [`PValue`]s keep their value (they hold their own reference), and explicit
    /// pins ([`pin`](Store::pin)) are dropped with it. If the
    /// object has a disk file it stays servable from disk; otherwise this store
    /// forgets it entirely. No I/O. Returns `true` if anything was dropped.
    pub fn release(&self, id: ObjectId) -> bool {
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

    /// A snapshot of this store's counters.
    pub fn stats(&self) -> StoreStats {
        self.inner.state.lock().stats.clone()
    }

    /// Evicts unpinned entries, least recently used first, until the resident bytes
    /// fit the budget (or only pinned entries remain). Spills to disk first when needed.
    fn enforce_budget(&self) -> Result<(), PersistError> {
        let (Some(budget), Some(disk)) = (self.inner.budget, self.inner.disk.as_ref()) else {
            return Ok(());
        };
        loop {
            let (id, meta, refs, src) = {
                let mut st = self.inner.state.lock();
                if st.stats.bytes_resident <= budget {
                    return Ok(());
                }
                let cand = st
                    .lru
                    .values()
                    .copied()
                    .find(|id| st.entries.get(id).is_some_and(|e| !e.pinned() && !e.spilling));
                let Some(id) = cand else { return Ok(()) };
                let e = st.entries.get_mut(&id).ok_or(PersistError::NotFound(id))?;
                if e.disk != OnDisk::No {
                    st.update(id, |e| {
                        e.value = None;
                        e.bytes = None;
                    });
                    st.stats.evictions += 1;
                    continue;
                }
                e.spilling = true;
                let src = match (&e.bytes, &e.value, e.encoder) {
                    (Some(b), _, _) => Ok(b.clone()),
                    (None, Some(v), Some(enc)) => Err((v.clone(), enc)),
                    _ => {
                        // Not reachable: a resident entry always has bytes or an
                        // encodable value. Stop rather than spin.
                        e.spilling = false;
                        return Ok(());
                    }
                };
                (id, e.meta.clone(), e.refs.clone(), src)
            };
            let res = (|| {
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
                disk.write_object(&meta, refs.as_deref(), &bytes).map(|_| ())
            })();
            let mut st = self.inner.state.lock();
            if let Some(e) = st.entries.get_mut(&id) {
                e.spilling = false;
            }
            res?;
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

    /// Makes object `id` durable: writes its file if it is not on disk yet, fsyncs the
    /// file, then fsyncs the directory. A no-op for an in-memory store or an object
    /// already durable.
    ///
    /// # Errors
    /// [`PersistError::NotFound`] if this store does not hold `id`;
    /// [`PersistError::Io`] on write or fsync failure (fatal).
    pub fn flush(&self, id: impl Into<ObjectId>) -> Result<(), PersistError> {
        self.flush_ids(&[id.into()])
    }

    /// Makes every object of this store durable as one batch: writes the files not yet
    /// on disk, fsyncs each new file, then fsyncs the directory once. A no-op for an
    /// in-memory store.
    ///
    /// # Errors
    /// [`PersistError::Io`] on write or fsync failure (fatal).
    pub fn flush_all(&self) -> Result<(), PersistError> {
        if self.inner.disk.is_none() {
            return Ok(());
        }
        let ids: Vec<ObjectId> = {
            let st = self.inner.state.lock();
            st.entries
                .values()
                .filter(|e| e.disk != OnDisk::Durable)
                .map(|e| e.meta.id)
                .collect()
        };
        self.flush_ids(&ids)
    }

    /// Flushes a batch of objects: one directory fsync for the whole batch.
    ///
    /// # Errors
    /// As [`flush`](Store::flush).
    pub fn flush_ids(&self, ids: &[ObjectId]) -> Result<(), PersistError> {
        let Some(disk) = self.inner.disk.as_ref() else {
            for &id in ids {
                if !self.contains(id) {
                    return Err(PersistError::NotFound(id));
                }
            }
            return Ok(());
        };
        let mut synced = Vec::new();
        for &id in ids {
            let (state, meta, refs) = {
                let st = self.inner.state.lock();
                let e = st.entries.get(&id).ok_or(PersistError::NotFound(id))?;
                (e.disk, e.meta.clone(), e.refs.clone())
            };
            match state {
                OnDisk::Durable => continue,
                OnDisk::Written => {}
                OnDisk::No => {
                    let (_, bytes) = self.encoded(id)?;
                    disk.write_object(&meta, refs.as_deref(), &bytes)?;
                    let mut st = self.inner.state.lock();
                    st.stats.disk_writes += 1;
                    if let Some(e) = st.entries.get_mut(&id) {
                        if e.disk == OnDisk::No {
                            e.disk = OnDisk::Written;
                        }
                    }
                }
            }
            disk.sync_object(id)?;
            synced.push(id);
        }
        if synced.is_empty() {
            return Ok(());
        }
        disk.sync_dir()?;
        let mut st = self.inner.state.lock();
        for id in synced {
            if let Some(e) = st.entries.get_mut(&id) {
                e.disk = OnDisk::Durable;
            }
        }
        Ok(())
    }

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

/// `ENOSPC` ("No space left on device") on Linux and the BSDs.
const fn libc_enospc() -> i32 {
    28
}
