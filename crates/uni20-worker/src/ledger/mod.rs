//! Who keeps a block alive: the root's [`ReleaseLedger`] counts, per object,
//! the root-side handles that name it (a distributed tensor's block map
//! retains its blocks; clones share one retain), and queues an object for
//! release on its owner rank when its count falls to zero, unless a
//! checkpoint or named root keeps it ([`ReleaseLedger::keep`]).
//!
//! The controller drains the queue: a rank's queued releases travel with
//! the next command sent to that rank (no extra message), or as one
//! explicit `uni20.release.v1` command when a rank's queue passes
//! [`RELEASE_BATCH_OBJECTS`] objects or [`RELEASE_BATCH_BYTES`] bytes, and
//! always before shutdown. An operation in flight keeps its inputs' handles
//! until it has completed, so nothing in use is ever queued. The ledger is
//! thread-safe (a handle may be dropped on any thread) and never blocks on
//! the network: dropping a handle only queues.
//!
//! The ledger also holds the root's table of **replicas** that workers
//! keep between commands ([`replicas`]): which rank holds a copy of which
//! block, within a per-rank byte budget, evicted least recently used; the
//! release of a replica travels in the same queues as an owner's.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use parking_lot::Mutex;
use uni20_persist::ObjectId;

/// A rank's queue becomes an explicit release command at this many objects.
pub const RELEASE_BATCH_OBJECTS: usize = 512;

/// A rank's queue becomes an explicit release command at this many bytes.
pub const RELEASE_BATCH_BYTES: u64 = 64 << 20;

/// Counters of a [`ReleaseLedger`] since its universe started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LedgerStats {
    /// Handle sets dropped (one per distributed tensor whose last handle
    /// was dropped).
    pub drops: u64,
    /// Objects queued for release (their count reached zero).
    pub objects_queued: u64,
    /// Objects handed to the controller for sending.
    pub objects_sent: u64,
    /// Command frames that carried releases piggybacked (no extra message).
    pub piggybacked_frames: u64,
    /// Explicit `uni20.release.v1` commands sent (one message per rank).
    pub release_commands: u64,
    /// Objects kept by checkpoints or named roots (never released).
    pub kept: u64,
    /// Replicas recorded as kept by the ranks that received them
    /// ([`ReleaseLedger::hold_replicas`]).
    pub replicas_recorded: u64,
    /// Transfers not planned because the receiver held a replica
    /// ([`ReleaseLedger::use_replicas`]).
    pub replica_hits: u64,
    /// Payload bytes of those transfers.
    pub replica_bytes_saved: u64,
    /// Replicas released to stay within the per-rank budget (least
    /// recently used first).
    pub replicas_evicted: u64,
    /// Replicas released with their block (its last handle dropped, or the
    /// block offloaded).
    pub replicas_released: u64,
}

/// The handles naming one object, counted per owning rank: `place` gives
/// a block a new owner under the same object id, so one id can be owned
/// (and needed) on several ranks, each copy released when the last handle
/// naming it there drops.
#[derive(Debug)]
struct Entry {
    bytes: u64,
    /// `(owner, handles naming the object on that owner)`, counts > 0
    /// (inline: almost every block has one owner, and a retain per block
    /// per operation made this an allocation each).
    owners: smallvec::SmallVec<[(usize, u32); 1]>,
}

impl Entry {
    fn owns(&self, rank: usize) -> bool {
        self.owners.iter().any(|&(o, _)| o == rank)
    }
}

#[derive(Debug, Default)]
struct Pending {
    /// Objects this rank owns.
    ids: Vec<ObjectId>,
    /// Replicas this rank holds of other ranks' objects (never taken out by
    /// [`ReleaseLedger::keep`], which keeps the owner's copy).
    replicas: Vec<ObjectId>,
    bytes: u64,
}

impl Pending {
    fn len(&self) -> usize {
        self.ids.len() + self.replicas.len()
    }
}

#[derive(Debug, Default)]
struct State {
    open: bool,
    refs: HashMap<ObjectId, Entry>,
    kept: HashMap<ObjectId, u32>,
    pending: BTreeMap<usize, Pending>,
    replicas: replicas::ReplicaTable,
    replica_budget: u64,
    stats: LedgerStats,
}

/// Reference counts of the objects named by root-side handles, and the
/// per-rank queues of objects to release (see the module docs).
#[derive(Debug)]
pub struct ReleaseLedger {
    universe: u64,
    state: Mutex<State>,
}

/// One block a handle names: its owner rank, object id and payload bytes.
pub type HeldBlock = (usize, ObjectId, u64);

pub mod replicas;

impl ReleaseLedger {
    /// An open ledger of the universe identified by `universe`.
    pub fn new(universe: u64) -> ReleaseLedger {
        ReleaseLedger {
            universe,
            state: Mutex::new(State {
                open: true,
                replica_budget: crate::config::DEFAULT_REPLICA_BYTES,
                ..State::default()
            }),
        }
    }

    /// The identity of the universe this ledger belongs to.
    pub fn universe(&self) -> u64 {
        self.universe
    }

    /// One more handle names each of `blocks`.
    pub fn retain(&self, blocks: &[HeldBlock]) {
        let mut st = self.state.lock();
        if !st.open {
            return;
        }
        for &(owner, id, bytes) in blocks {
            let e = st.refs.entry(id).or_insert(Entry {
                bytes,
                owners: smallvec::SmallVec::new(),
            });
            match e.owners.iter_mut().find(|(o, _)| *o == owner) {
                Some((_, n)) => *n += 1,
                None => {
                    e.owners.push((owner, 1));
                    // A copy held as a replica is now an owned copy (a
                    // `place` onto a rank that had the block): only the
                    // owner's handles release it from now on.
                    st.replicas.remove(id, owner);
                }
            }
        }
    }

    /// A handle naming `blocks` (`(owner, object, bytes)`) was dropped: an
    /// object whose handles on that owner fall to zero is queued for
    /// release there, unless kept (an object `place` gave a second owner
    /// is released on each owner with the last handle naming it there);
    /// the replicas go with the last handle on any owner. Never
    /// blocks on the network; does nothing once the universe has ended.
    pub fn drop_refs(&self, blocks: &[HeldBlock]) {
        let mut st = self.state.lock();
        if !st.open {
            return;
        }
        st.stats.drops += 1;
        for &(owner, id, _) in blocks {
            let Some(e) = st.refs.get_mut(&id) else { continue };
            let Some(k) = e.owners.iter().position(|&(o, _)| o == owner) else {
                continue;
            };
            e.owners[k].1 -= 1;
            if e.owners[k].1 > 0 {
                continue;
            }
            e.owners.swap_remove(k);
            let bytes = e.bytes;
            if e.owners.is_empty() {
                st.refs.remove(&id);
                // The copies other ranks hold go with the last handle, even
                // when a checkpoint keeps the owner's.
                st.release_replicas_of(id);
            }
            if st.kept.contains_key(&id) {
                continue;
            }
            let p = st.pending.entry(owner).or_default();
            p.ids.push(id);
            p.bytes += bytes;
            st.stats.objects_queued += 1;
        }
    }

    /// Never release `ids` (they are referenced by a checkpoint or a named
    /// root); takes any of them out of the release queues. Keeps are
    /// counted: an object kept twice (say by two checkpoints) needs two
    /// [`ReleaseLedger::unkeep`] calls before it can be released.
    pub fn keep(&self, ids: &[ObjectId]) {
        let mut st = self.state.lock();
        let mut added = 0;
        for id in ids {
            let n = st.kept.entry(*id).or_insert(0);
            if *n == 0 {
                added += 1;
            }
            *n += 1;
        }
        st.stats.kept += added;
        let State { pending, kept, .. } = &mut *st;
        for p in pending.values_mut() {
            p.ids.retain(|id| !kept.contains_key(id));
        }
    }

    /// Undoes one [`ReleaseLedger::keep`] of each of `blocks` (for example
    /// when a newer checkpoint supersedes an older one). An object whose
    /// keep count falls to zero and that no live handle names is queued for
    /// release on its owner, as if its last handle had been dropped; one
    /// that a handle still names is released when that handle goes. Objects
    /// that were not kept are ignored. Does nothing once the universe has
    /// ended.
    pub fn unkeep(&self, blocks: &[HeldBlock]) {
        let mut st = self.state.lock();
        if !st.open {
            return;
        }
        for &(owner, id, bytes) in blocks {
            let Some(n) = st.kept.get_mut(&id) else { continue };
            *n -= 1;
            if *n > 0 {
                continue;
            }
            st.kept.remove(&id);
            st.stats.kept = st.stats.kept.saturating_sub(1);
            if st.refs.contains_key(&id) {
                continue;
            }
            let p = st.pending.entry(owner).or_default();
            if !p.ids.contains(&id) {
                p.ids.push(id);
                p.bytes += bytes;
                st.stats.objects_queued += 1;
            }
        }
    }

    /// The objects kept by [`ReleaseLedger::keep`].
    pub fn kept(&self) -> Vec<ObjectId> {
        let mut v: Vec<ObjectId> = self.state.lock().kept.keys().copied().collect();
        v.sort();
        v
    }

    /// Every object some handle names, with each of its owners (live
    /// objects, for gc).
    pub fn live(&self) -> Vec<(usize, ObjectId)> {
        let mut v: Vec<(usize, ObjectId)> = self
            .state
            .lock()
            .refs
            .iter()
            .flat_map(|(id, e)| e.owners.iter().map(move |&(o, _)| (o, *id)))
            .collect();
        v.sort();
        v
    }

    /// Takes rank `rank`'s queued releases (to send them).
    pub fn take_pending(&self, rank: usize) -> Vec<ObjectId> {
        let mut st = self.state.lock();
        let taken = st
            .pending
            .remove(&rank)
            .map(|mut p| {
                p.ids.append(&mut p.replicas);
                p.ids
            })
            .unwrap_or_default();
        st.stats.objects_sent += taken.len() as u64;
        taken
    }

    /// Ranks whose queue has passed a batch threshold.
    pub fn over_threshold(&self) -> Vec<usize> {
        self.state
            .lock()
            .pending
            .iter()
            .filter(|(_, p)| p.len() >= RELEASE_BATCH_OBJECTS || p.bytes >= RELEASE_BATCH_BYTES)
            .map(|(r, _)| *r)
            .collect()
    }

    /// Ranks with any queued release.
    pub fn pending_ranks(&self) -> Vec<usize> {
        self.state
            .lock()
            .pending
            .iter()
            .filter(|(_, p)| p.len() > 0)
            .map(|(r, _)| *r)
            .collect()
    }

    /// Number of objects queued for `rank`.
    pub fn pending_count(&self, rank: usize) -> usize {
        self.state.lock().pending.get(&rank).map_or(0, Pending::len)
    }

    /// The counters.
    pub fn stats(&self) -> LedgerStats {
        self.state.lock().stats.clone()
    }

    pub(crate) fn note_piggyback(&self) {
        self.state.lock().stats.piggybacked_frames += 1;
    }

    pub(crate) fn note_release_command(&self) {
        self.state.lock().stats.release_commands += 1;
    }

    /// Ends the ledger with its universe: later retains and drops (handles
    /// that outlive the universe) do nothing.
    pub(crate) fn close(&self) {
        let mut st = self.state.lock();
        st.open = false;
        st.refs.clear();
        st.pending.clear();
        st.replicas = replicas::ReplicaTable::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u64) -> ObjectId {
        ObjectId::new(1, n)
    }

    #[test]
    fn counts_queue_and_keep() {
        let l = ReleaseLedger::new(7);
        let a = [(1, id(1), 100), (2, id(2), 50)];
        l.retain(&a);
        l.retain(&a[..1]); // an alias of block 1
        l.drop_refs(&a);
        // id 1 still named once; id 2 queued on rank 2.
        assert_eq!(l.pending_ranks(), vec![2]);
        assert_eq!(l.take_pending(2), vec![id(2)]);
        l.keep(&[id(1)]);
        l.drop_refs(&a[..1]);
        assert!(l.pending_ranks().is_empty(), "a kept object is never queued");
        let s = l.stats();
        assert_eq!((s.drops, s.objects_queued, s.objects_sent, s.kept), (2, 1, 1, 1));
        l.close();
        l.retain(&a);
        l.drop_refs(&a);
        assert!(l.pending_ranks().is_empty(), "a closed ledger ignores handles");
    }

    #[test]
    fn an_object_owned_on_two_ranks_is_released_on_each_with_its_last_handle_there() {
        // `place` gives block 1 a second owner (rank 2) under the same id.
        let l = ReleaseLedger::new(3);
        l.retain(&[(1, id(1), 100)]);
        l.retain(&[(2, id(1), 100)]);
        l.retain(&[(2, id(1), 100)]);
        assert_eq!(l.live(), vec![(1, id(1)), (2, id(1))]);
        l.drop_refs(&[(1, id(1), 100)]);
        assert_eq!(l.take_pending(1), vec![id(1)], "rank 1's copy goes with its handle");
        l.drop_refs(&[(2, id(1), 100)]);
        assert!(l.pending_ranks().is_empty(), "one handle still names it on rank 2");
        l.drop_refs(&[(2, id(1), 100)]);
        assert_eq!(l.take_pending(2), vec![id(1)]);
        assert!(l.live().is_empty());
    }

    #[test]
    fn unkeep_releases_once_no_keep_or_handle_remains() {
        let l = ReleaseLedger::new(3);
        let a = [(1, id(1), 100), (2, id(2), 50)];
        l.retain(&a);
        l.keep(&[id(1), id(2)]);
        l.keep(&[id(1)]); // a second checkpoint shares block 1
        l.drop_refs(&a);
        assert!(l.pending_ranks().is_empty());
        l.unkeep(&a);
        // Block 2: no keep and no handle left; block 1: still kept once.
        assert_eq!(l.pending_ranks(), vec![2]);
        assert_eq!(l.take_pending(2), vec![id(2)]);
        l.retain(&a[..1]); // a handle to block 1 again (a restored tensor)
        l.unkeep(&a[..1]);
        assert!(l.pending_ranks().is_empty(), "a named object waits for its handle");
        l.drop_refs(&a[..1]);
        assert_eq!(l.take_pending(1), vec![id(1)]);
        l.unkeep(&a); // not kept any more: ignored
        assert!(l.pending_ranks().is_empty());
        assert_eq!(l.stats().kept, 0);
    }

    #[test]
    fn thresholds() {
        let l = ReleaseLedger::new(0);
        let many: Vec<HeldBlock> = (0..RELEASE_BATCH_OBJECTS as u64).map(|n| (3, id(n), 1)).collect();
        l.retain(&many);
        l.drop_refs(&many[..many.len() - 1]);
        assert!(l.over_threshold().is_empty());
        l.drop_refs(&many[many.len() - 1..]);
        assert_eq!(l.over_threshold(), vec![3]);
        let big = [(4, id(10_000), RELEASE_BATCH_BYTES)];
        l.retain(&big);
        l.drop_refs(&big);
        assert_eq!(l.over_threshold(), vec![3, 4]);
    }
}
