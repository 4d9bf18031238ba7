//! Replicas kept where they are used: the root's table of which rank
//! holds a copy of which block (`docs/architecture.md`, "Replicas kept
//! between commands").
//!
//! A rank that receives a block by a plan's transfer keeps it after the
//! command when the command says so; the root records it here
//! ([`ReleaseLedger::hold_replicas`]) once the command is sent, and a
//! later plan that needs the block on that rank asks
//! ([`ReleaseLedger::use_replicas`]) and moves nothing. The root alone
//! decides when a replica goes, so its table is never stale: a replica is
//! released when its block's last handle is dropped, when the block is
//! offloaded ([`ReleaseLedger::drop_replicas`]), or, least recently used
//! first, when the rank's replicas pass their byte budget. The release
//! travels in the rank's queue like an owner's, so it reaches the rank
//! after every command already sent to it (which may still read the
//! replica) and before any command planned after the eviction. The
//! worker's store may spill a held replica to its disk under its own
//! budget but never forgets it, so what the table says is there is.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use uni20_persist::ObjectId;

use super::{ReleaseLedger, State};

/// Per rank: the replicas it holds (last use, bytes), in least recently
/// used order.
#[derive(Debug, Default)]
struct RankReplicas {
    bytes: u64,
    held: HashMap<ObjectId, (u64, u64)>,
    lru: BTreeMap<u64, ObjectId>,
}

/// Which rank holds a replica of which object (see the module docs).
#[derive(Debug, Default)]
pub(super) struct ReplicaTable {
    holders: HashMap<ObjectId, Vec<usize>>,
    ranks: BTreeMap<usize, RankReplicas>,
    tick: u64,
}

impl ReplicaTable {
    /// Marks `(id, rank)` used now; its bytes, or `None` when not held.
    fn touch(&mut self, id: ObjectId, rank: usize) -> Option<u64> {
        self.tick += 1;
        let tick = self.tick;
        let r = self.ranks.get_mut(&rank)?;
        let (last, bytes) = r.held.get_mut(&id)?;
        r.lru.remove(last);
        *last = tick;
        r.lru.insert(tick, id);
        Some(*bytes)
    }

    /// Records `(id, rank)` as held (or used again, when it already is).
    fn insert(&mut self, id: ObjectId, rank: usize, bytes: u64) -> bool {
        if self.touch(id, rank).is_some() {
            return false;
        }
        let tick = self.tick;
        let r = self.ranks.entry(rank).or_default();
        r.held.insert(id, (tick, bytes));
        r.lru.insert(tick, id);
        r.bytes += bytes;
        self.holders.entry(id).or_default().push(rank);
        true
    }

    /// Forgets `(id, rank)` (no release is queued here); whether it was
    /// held.
    pub(super) fn remove(&mut self, id: ObjectId, rank: usize) -> bool {
        let Some(r) = self.ranks.get_mut(&rank) else {
            return false;
        };
        let Some((last, bytes)) = r.held.remove(&id) else {
            return false;
        };
        r.lru.remove(&last);
        r.bytes -= bytes;
        if let Some(h) = self.holders.get_mut(&id) {
            h.retain(|&x| x != rank);
            if h.is_empty() {
                self.holders.remove(&id);
            }
        }
        true
    }

    /// The least recently used replica of `rank` while its replicas hold
    /// more than `budget` bytes.
    fn over_budget(&self, rank: usize, budget: u64) -> Option<(ObjectId, u64)> {
        let r = self.ranks.get(&rank)?;
        if r.bytes <= budget {
            return None;
        }
        let (_, &id) = r.lru.iter().next()?;
        r.held.get(&id).map(|&(_, b)| (id, b))
    }
}

impl State {
    /// Queues the release of replica `id` on `rank` (after the commands
    /// already sent to it).
    fn queue_replica_release(&mut self, id: ObjectId, rank: usize, bytes: u64) {
        let p = self.pending.entry(rank).or_default();
        p.replicas.push(id);
        p.bytes += bytes;
    }

    /// Forgets every replica of `id` and queues their releases; how many.
    pub(super) fn release_replicas_of(&mut self, id: ObjectId) -> u64 {
        let Some(holders) = self.replicas.holders.get(&id).cloned() else {
            return 0;
        };
        let mut n = 0;
        for rank in holders {
            let bytes = self
                .replicas
                .ranks
                .get(&rank)
                .and_then(|r| r.held.get(&id))
                .map_or(0, |&(_, b)| b);
            if self.replicas.remove(id, rank) {
                self.queue_replica_release(id, rank, bytes);
                n += 1;
            }
        }
        self.stats.replicas_released += n;
        n
    }
}

/// Replicas one rank holds, for [`ReleaseLedger::replica_usage`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaUsage {
    /// Replicas held.
    pub replicas: u64,
    /// Their payload bytes.
    pub bytes: u64,
}

impl ReleaseLedger {
    /// Of the wanted `(object, receiving rank)` pairs, in order, whether
    /// the receiver holds a replica of the object (then it needs no
    /// transfer); those held count as used now (least-recently-used order)
    /// and as hits in [`LedgerStats`](super::LedgerStats). Nothing is held
    /// once the universe has ended.
    pub fn use_replicas(&self, wanted: impl IntoIterator<Item = (ObjectId, usize)>) -> Vec<bool> {
        let mut st = self.state.lock();
        let open = st.open;
        let mut hits = 0;
        let mut saved = 0;
        let held = wanted
            .into_iter()
            .map(|(id, rank)| match st.replicas.touch(id, rank).filter(|_| open) {
                Some(bytes) => {
                    hits += 1;
                    saved += bytes;
                    true
                }
                None => false,
            })
            .collect();
        st.stats.replica_hits += hits;
        st.stats.replica_bytes_saved += saved;
        held
    }

    /// Payload bytes of replicas each rank may hold
    /// ([`ReleaseLedger::set_replica_budget`]; 0: none is kept).
    pub fn replica_budget(&self) -> u64 {
        self.state.lock().replica_budget
    }

    /// Sets the per-rank replica budget (from `UNI20_REPLICA_BYTES` at
    /// start-up). Replicas already held beyond a smaller budget go at the
    /// next [`ReleaseLedger::hold_replicas`] on their rank.
    pub fn set_replica_budget(&self, bytes: u64) {
        self.state.lock().replica_budget = bytes;
    }

    /// Records that each rank of `received` (`(rank, object, payload
    /// bytes)`) keeps the replica a command just sent to it delivers, then
    /// evicts, least recently used first, the replicas of each of those
    /// ranks beyond the budget ([`ReleaseLedger::replica_budget`]) (their releases are queued, so they
    /// reach the rank after that command). A replica of a block no handle
    /// or keep names is released at once. Call it after the command is
    /// sent: a release queued before would travel with the command and
    /// run before it. Returns how many replicas were evicted. Does nothing
    /// once the universe has ended.
    pub fn hold_replicas(&self, received: &[super::HeldBlock]) -> u64 {
        let mut st = self.state.lock();
        if !st.open {
            return 0;
        }
        let budget = st.replica_budget;
        let mut ranks: Vec<usize> = Vec::new();
        for &(rank, id, bytes) in received {
            if st.refs.get(&id).is_some_and(|e| e.owns(rank)) {
                // The receiver owns this id itself (a `place` put it
                // there): its store kept its own copy and took nothing in.
                continue;
            }
            if !st.refs.contains_key(&id) && !st.kept.contains_key(&id) {
                // No handle names the block (any more): nothing would ever
                // release this copy, so it goes after the command.
                st.queue_replica_release(id, rank, bytes);
                continue;
            }
            if st.replicas.insert(id, rank, bytes) {
                st.stats.replicas_recorded += 1;
            }
            if !ranks.contains(&rank) {
                ranks.push(rank);
            }
        }
        let mut evicted = 0;
        for rank in ranks {
            while let Some((id, bytes)) = st.replicas.over_budget(rank, budget) {
                st.replicas.remove(id, rank);
                st.queue_replica_release(id, rank, bytes);
                evicted += 1;
            }
        }
        st.stats.replicas_evicted += evicted;
        evicted
    }

    /// Releases every replica of `ids` (for example blocks just offloaded
    /// to their owners' disks, whose copies elsewhere would keep them in
    /// memory); returns how many were queued.
    pub fn drop_replicas(&self, ids: &[ObjectId]) -> u64 {
        let mut st = self.state.lock();
        if !st.open {
            return 0;
        }
        ids.iter().map(|&id| st.release_replicas_of(id)).sum()
    }

    /// Forgets every replica without releasing it: for a collection that
    /// removes, on every rank, each object no live handle or keep names
    /// (replicas included).
    pub fn forget_replicas(&self) {
        self.state.lock().replicas = ReplicaTable::default();
    }

    /// The replicas `rank` holds now, by the root's table.
    pub fn replica_usage(&self, rank: usize) -> ReplicaUsage {
        let st = self.state.lock();
        st.replicas
            .ranks
            .get(&rank)
            .map_or_else(ReplicaUsage::default, |r| ReplicaUsage {
                replicas: r.held.len() as u64,
                bytes: r.bytes,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::super::ReleaseLedger;
    use uni20_persist::ObjectId;

    fn id(n: u64) -> ObjectId {
        ObjectId::new(1, n)
    }

    #[test]
    fn an_owned_copy_is_never_a_replica() {
        let l = ReleaseLedger::new(1);
        l.retain(&[(1, id(1), 100)]);
        // A transfer to rank 2, then rank 2 becomes an owner (a `place`).
        l.hold_replicas(&[(2, id(1), 100)]);
        assert_eq!(l.replica_usage(2).replicas, 1);
        l.retain(&[(2, id(1), 100)]);
        assert_eq!(l.replica_usage(2).replicas, 0, "forgotten, not released");
        assert!(l.pending_ranks().is_empty());
        // A transfer to a rank that owns the id records nothing.
        l.hold_replicas(&[(2, id(1), 100)]);
        assert_eq!(l.replica_usage(2).replicas, 0);
        assert_eq!(l.drop_replicas(&[id(1)]), 0);
        assert!(l.pending_ranks().is_empty());
    }

    #[test]
    fn held_replicas_are_hits_and_go_least_recently_used_first() {
        let l = ReleaseLedger::new(1);
        l.set_replica_budget(250);
        l.retain(&[(1, id(1), 100), (1, id(2), 100), (1, id(3), 100)]);
        assert_eq!(l.use_replicas([(id(1), 2)]), [false]);
        assert_eq!(l.hold_replicas(&[(2, id(1), 100), (2, id(2), 100)]), 0);
        let hits = l.use_replicas([(id(1), 2), (id(2), 3), (id(2), 2)]);
        assert_eq!(hits, [true, false, true]);
        // id 1 was used before id 2: it goes first when id 3 arrives.
        l.use_replicas([(id(2), 2)]);
        assert_eq!(l.hold_replicas(&[(2, id(3), 100)]), 1);
        assert_eq!(l.take_pending(2), vec![id(1)]);
        let hits = l.use_replicas([(id(1), 2), (id(2), 2), (id(3), 2)]);
        assert_eq!(hits, [false, true, true]);
        let s = l.stats();
        assert_eq!((s.replicas_recorded, s.replicas_evicted), (3, 1));
        assert_eq!((s.replica_hits, s.replica_bytes_saved), (5, 500));
        assert_eq!(l.replica_usage(2).bytes, 200);
    }

    #[test]
    fn a_zero_budget_releases_after_the_command_and_the_last_handle_releases_the_rest() {
        let l = ReleaseLedger::new(1);
        let blocks = [(1, id(1), 10), (1, id(2), 10)];
        l.retain(&blocks);
        l.set_replica_budget(0);
        assert_eq!(l.hold_replicas(&[(2, id(1), 10), (3, id(1), 10)]), 2);
        assert_eq!(l.take_pending(2), vec![id(1)]);
        assert_eq!(l.take_pending(3), vec![id(1)]);
        l.set_replica_budget(1 << 20);
        l.hold_replicas(&[(2, id(1), 10), (3, id(1), 10), (3, id(2), 10)]);
        // A checkpoint keeps id 1's owner copy; its replicas still go.
        l.keep(&[id(1)]);
        l.drop_refs(&blocks);
        assert_eq!(l.take_pending(1), vec![id(2)]);
        assert_eq!(l.take_pending(2), vec![id(1)]);
        let mut three = l.take_pending(3);
        three.sort();
        assert_eq!(three, vec![id(1), id(2)]);
        assert_eq!(l.stats().replicas_released, 3);
        assert_eq!(l.use_replicas([(id(1), 2)]), [false]);
    }

    #[test]
    fn dropped_forgotten_and_unnamed_replicas_are_not_held() {
        let l = ReleaseLedger::new(1);
        l.retain(&[(1, id(1), 10)]);
        l.hold_replicas(&[(2, id(1), 10)]);
        assert_eq!(l.drop_replicas(&[id(1)]), 1);
        assert_eq!(l.take_pending(2), vec![id(1)]);
        l.hold_replicas(&[(2, id(1), 10)]);
        l.forget_replicas();
        assert_eq!(l.use_replicas([(id(1), 2)]), [false]);
        assert!(l.pending_ranks().is_empty());
        // No handle names id 9: its copy goes after the command.
        l.hold_replicas(&[(2, id(9), 10)]);
        assert_eq!(l.take_pending(2), vec![id(9)]);
        assert_eq!(l.use_replicas([(id(9), 2)]), [false]);
    }
}
