//! Where the root's time goes: planning (deferred jobs, outside
//! submission), submission (encoding and posting command frames), waiting
//! (blocked for replies), the workers' busy time (what each rank's handler
//! reported in its replies: kernels and block transfers), and the plan
//! cache's lookups. Counted from the universe's start; a caller takes two
//! [`RootProfile`] snapshots ([`Controller::profile`]) and subtracts them
//! ([`RootProfile::since`]) to account for one stretch of work, such as a
//! DMRG sweep.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::Instant;

use super::Controller;

/// The running counters (nanoseconds) behind [`RootProfile`].
#[derive(Default)]
pub(super) struct Counters {
    pub(super) operations: Cell<u64>,
    pub(super) plan_ns: Cell<u64>,
    pub(super) submit_ns: Cell<u64>,
    pub(super) wait_ns: Cell<u64>,
    pub(super) root_handler_ns: Cell<u64>,
    pub(super) busy_ns: RefCell<BTreeMap<usize, u64>>,
    pub(super) cache_hits: Cell<u64>,
    pub(super) cache_misses: Cell<u64>,
    pub(super) bytes_moved: Cell<u64>,
    pub(super) bytes_from_replicas: Cell<u64>,
}

pub(super) fn add(c: &Cell<u64>, ns: u64) {
    c.set(c.get().saturating_add(ns));
}

pub(super) fn elapsed_ns(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A snapshot of where the root's time went since the universe started
/// (see the module docs). Seconds are wall-clock seconds of the root
/// thread, except [`RootProfile::worker_busy_seconds`], which each rank
/// measured on its own clock.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RootProfile {
    /// Commands submitted.
    pub operations: u64,
    /// Seconds spent planning: in deferred jobs (reading manifests, planning,
    /// plan-cache lookups), outside submission.
    pub plan_seconds: f64,
    /// Seconds spent submitting: encoding envelopes, posting frames,
    /// recording replies and running completion callbacks (filling block
    /// maps). Excludes the root's own share of a command when the root is
    /// the only rank (that counts as rank 0's busy time).
    pub submit_seconds: f64,
    /// Seconds the root was blocked waiting for a reply.
    pub wait_seconds: f64,
    /// Per rank: seconds its handlers ran (kernels, block transfers with
    /// other ranks, store access), as reported in its replies. Rank 0
    /// appears only when it ran commands itself (a universe of one rank).
    pub worker_busy_seconds: BTreeMap<usize, f64>,
    /// Plan-cache lookups that reused a cached plan.
    pub plan_cache_hits: u64,
    /// Plan-cache lookups that planned from scratch.
    pub plan_cache_misses: u64,
    /// Payload bytes that item-per-block commands (contractions,
    /// element-wise operations, regroup, reblock) moved between ranks, by
    /// their plans.
    pub bytes_moved: u64,
    /// Payload bytes those commands did not move because the receiving
    /// rank held a replica from an earlier command.
    pub bytes_from_replicas: u64,
}

impl RootProfile {
    /// The counters accumulated after `earlier` (a snapshot of the same
    /// controller taken before this one): every field is the difference.
    pub fn since(&self, earlier: &RootProfile) -> RootProfile {
        RootProfile {
            operations: self.operations.saturating_sub(earlier.operations),
            plan_seconds: self.plan_seconds - earlier.plan_seconds,
            submit_seconds: self.submit_seconds - earlier.submit_seconds,
            wait_seconds: self.wait_seconds - earlier.wait_seconds,
            worker_busy_seconds: self
                .worker_busy_seconds
                .iter()
                .map(|(&r, &s)| (r, s - earlier.worker_busy_seconds.get(&r).copied().unwrap_or(0.0)))
                .collect(),
            plan_cache_hits: self.plan_cache_hits.saturating_sub(earlier.plan_cache_hits),
            plan_cache_misses: self.plan_cache_misses.saturating_sub(earlier.plan_cache_misses),
            bytes_moved: self.bytes_moved.saturating_sub(earlier.bytes_moved),
            bytes_from_replicas: self.bytes_from_replicas.saturating_sub(earlier.bytes_from_replicas),
        }
    }

    /// The busiest rank's busy seconds (0 when no rank reported any).
    pub fn worker_busy_max(&self) -> f64 {
        self.worker_busy_seconds.values().copied().fold(0.0, f64::max)
    }

    /// The mean busy seconds over the ranks that reported (0 when none did).
    pub fn worker_busy_mean(&self) -> f64 {
        let n = self.worker_busy_seconds.len();
        if n == 0 {
            0.0
        } else {
            self.worker_busy_seconds.values().sum::<f64>() / n as f64
        }
    }

    /// Hits over lookups of the plan cache, in `[0, 1]` (0 with no lookups).
    pub fn plan_cache_hit_rate(&self) -> f64 {
        let n = self.plan_cache_hits + self.plan_cache_misses;
        if n == 0 {
            0.0
        } else {
            self.plan_cache_hits as f64 / n as f64
        }
    }
}

impl<'a> Controller<'a> {
    /// Where the root's time went since the universe started (see
    /// [`RootProfile`]); subtract two snapshots with [`RootProfile::since`].
    pub fn profile(&self) -> RootProfile {
        let c = &self.counters;
        let s = |ns: u64| ns as f64 * 1e-9;
        RootProfile {
            operations: c.operations.get(),
            plan_seconds: s(c.plan_ns.get()),
            submit_seconds: s(c.submit_ns.get()),
            wait_seconds: s(c.wait_ns.get()),
            worker_busy_seconds: c.busy_ns.borrow().iter().map(|(&r, &ns)| (r, s(ns))).collect(),
            plan_cache_hits: c.cache_hits.get(),
            plan_cache_misses: c.cache_misses.get(),
            bytes_moved: c.bytes_moved.get(),
            bytes_from_replicas: c.bytes_from_replicas.get(),
        }
    }

    /// Counts one plan-cache lookup (for [`RootProfile::plan_cache_hits`]
    /// and [`RootProfile::plan_cache_misses`]); called by the planners that
    /// cache their plans.
    pub fn note_plan_lookup(&self, hit: bool) {
        let c = if hit {
            &self.counters.cache_hits
        } else {
            &self.counters.cache_misses
        };
        c.set(c.get() + 1);
    }

    /// Adds `ns` nanoseconds of handler time reported by `rank`.
    /// Counts the payload bytes a plan moves between ranks and those it
    /// found already held as replicas ([`RootProfile::bytes_moved`]).
    pub fn note_transfers(&self, moved: u64, from_replicas: u64) {
        add(&self.counters.bytes_moved, moved);
        add(&self.counters.bytes_from_replicas, from_replicas);
    }

    pub(super) fn note_busy(&self, rank: usize, ns: u64) {
        let mut b = self.counters.busy_ns.borrow_mut();
        let e = b.entry(rank).or_default();
        *e = e.saturating_add(ns);
    }

    /// Runs one deferred job, counting its time outside submission (and
    /// outside the root's own handler runs) as planning.
    pub(super) fn run_job_timed(&self, job: Box<dyn super::DeferredJob<'a> + 'a>) {
        let c = &self.counters;
        let before = c.submit_ns.get().saturating_add(c.root_handler_ns.get());
        let t = Instant::now();
        job.run(self);
        let total = elapsed_ns(t);
        let inner = c
            .submit_ns
            .get()
            .saturating_add(c.root_handler_ns.get())
            .saturating_sub(before);
        add(&c.plan_ns, total.saturating_sub(inner));
    }
}
