//! A parallel map in which the calling thread takes part.
//!
//! A rank's thread (the root, or an in-process or MPI worker) is not a
//! rayon worker. Handing a command's items to rayon with `par_iter` from
//! such a thread injects the whole job into the pool and blocks the caller
//! until a pool thread has woken, run it and woken the caller again: two
//! thread wake-ups per command, each tens of microseconds on a virtual
//! machine, for commands that take a few hundred microseconds. On the 2-core
//! machine of `docs/performance.md` that made one rank with 2 threads slower
//! than one rank with 1 thread (0.78x at L = 100, chi = 100, symmetric).
//!
//! [`map_indexed`] instead runs items on the calling thread at once and
//! spawns `threads - 1` helpers on rayon's pool (the global pool: there is
//! no pool per rank); every thread claims the next unclaimed item until
//! none is left, so a helper that wakes late finds less (or nothing) to do.
//! The caller does not wait for a wake-up before starting, but it does wait
//! at the end until every helper has been scheduled and has finished
//! (rayon's scope), which can mean one wake-up when it finished the items
//! alone.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `f(i)` for `i` in `0..n`, in index order, computed by the calling thread
/// and at most `threads - 1` helper tasks on rayon's current pool (the
/// global pool when called from outside one).
///
/// Items are claimed one at a time from a shared counter, so uneven items
/// balance; the results are returned in index order whatever thread
/// computed them. With `threads <= 1` or `n <= 1` everything runs on the
/// calling thread and rayon is not touched.
///
/// # Panics
/// A panic in `f` on any thread stops the claiming once it unwinds (after
/// the panic hook has run, no thread starts another item) and is resumed on
/// the calling thread once the helpers have finished the items they hold
/// (rayon's scope semantics).
pub fn map_indexed<R: Send>(n: usize, threads: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    map_claimed(n, threads, None, f)
}

/// [`map_indexed`] with the items claimed largest first: `costs[i]` is item
/// `i`'s estimated cost (any unit; only the order matters), and the threads
/// claim items in decreasing cost, ties in index order (the longest
/// processing time first rule, Graham 1969). An item that costs more than
/// the rest starts at once instead of last, where it would leave the other
/// threads idle at the end; sector blocks of one symmetric operation differ
/// in cost by orders of magnitude. The results are in index order, as for
/// [`map_indexed`].
///
/// # Panics
/// If `costs` is shorter than `n`; and as [`map_indexed`] for a panic in `f`.
pub fn map_largest_first<R: Send>(n: usize, threads: usize, costs: &[u64], f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    assert!(
        costs.len() >= n,
        "map_largest_first: {} costs for {n} items",
        costs.len()
    );
    if threads <= 1 || n <= 1 {
        return (0..n).map(f).collect();
    }
    map_claimed(n, threads, Some(&largest_first(&costs[..n])), f)
}

/// Indices of `costs` in decreasing cost, ties in index order.
fn largest_first(costs: &[u64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..costs.len()).collect();
    // A stable sort: equal costs keep index order.
    order.sort_by_key(|&i| std::cmp::Reverse(costs[i]));
    order
}

/// The claiming loop of [`map_indexed`] and [`map_largest_first`]: the k-th
/// claim takes item `order[k]` (item `k` without an order).
fn map_claimed<R: Send>(n: usize, threads: usize, order: Option<&[usize]>, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    if threads <= 1 || n <= 1 {
        return (0..n).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let work = || loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        if k >= n {
            break;
        }
        let i = order.map_or(k, |o| o[k]);
        let stop = StopClaimsOnUnwind { next: &next, n };
        let r = f(i);
        std::mem::forget(stop);
        *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    };
    rayon::in_place_scope(|s| {
        for _ in 1..threads.min(n) {
            s.spawn(|_| work());
        }
        work();
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .expect("every index below n is claimed and filled once the scope has ended")
        })
        .collect()
}

/// Set while an item runs: dropped only when `f` unwinds, it moves the
/// shared counter past the end so that no thread claims another item.
struct StopClaimsOnUnwind<'a> {
    next: &'a AtomicUsize,
    n: usize,
}

impl Drop for StopClaimsOnUnwind<'_> {
    fn drop(&mut self) {
        self.next.store(self.n, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_in_index_order_for_any_budget() {
        for threads in 0..5 {
            for n in [0, 1, 2, 3, 17, 200] {
                let got = map_indexed(n, threads, |i| i * i + 1);
                let want: Vec<usize> = (0..n).map(|i| i * i + 1).collect();
                assert_eq!(got, want, "threads {threads}, n {n}");
            }
        }
    }

    #[test]
    fn largest_first_returns_index_order_and_claims_by_cost() {
        for threads in 0..4 {
            for n in [0, 1, 2, 5, 40] {
                let costs: Vec<u64> = (0..n as u64).map(|i| (i * 7919) % 13).collect();
                let got = map_largest_first(n, threads, &costs, |i| i * 3);
                let want: Vec<usize> = (0..n).map(|i| i * 3).collect();
                assert_eq!(got, want, "threads {threads}, n {n}");
            }
        }
        assert_eq!(largest_first(&[1, 5, 3, 9, 9, 2]), vec![3, 4, 1, 2, 5, 0]);
        assert_eq!(largest_first(&[]), Vec::<usize>::new());
        // Every item runs once whatever the order.
        let calls: Vec<AtomicUsize> = (0..300).map(|_| AtomicUsize::new(0)).collect();
        let costs: Vec<u64> = (0..300u64).map(|i| (i * 31) % 17).collect();
        let _ = map_largest_first(calls.len(), 3, &costs, |i| calls[i].fetch_add(1, Ordering::Relaxed));
        assert!(calls.iter().all(|c| c.load(Ordering::Relaxed) == 1));
    }

    #[test]
    fn every_item_runs_exactly_once() {
        let calls: Vec<AtomicUsize> = (0..500).map(|_| AtomicUsize::new(0)).collect();
        let _ = map_indexed(calls.len(), 3, |i| calls[i].fetch_add(1, Ordering::Relaxed));
        assert!(calls.iter().all(|c| c.load(Ordering::Relaxed) == 1));
    }

    #[test]
    fn a_helper_thread_computes_items_when_the_caller_is_slow() {
        // The caller blocks in item 0 until another thread has computed
        // item 1: that can only finish if a helper runs.
        let done = AtomicUsize::new(0);
        let out = map_indexed(2, 2, |i| {
            if i == 0 {
                let start = std::time::Instant::now();
                while done.load(Ordering::Acquire) == 0 {
                    assert!(start.elapsed().as_secs() < 30, "no helper picked up item 1");
                    std::thread::yield_now();
                }
            } else {
                done.store(1, Ordering::Release);
            }
            std::thread::current().id()
        });
        assert_ne!(out[0], out[1]);
    }

    #[test]
    fn a_panic_in_an_item_reaches_the_caller_and_stops_the_claims() {
        let started = AtomicUsize::new(0);
        let r = std::panic::catch_unwind(|| {
            map_indexed(200, 2, |i| {
                started.fetch_add(1, Ordering::Relaxed);
                if i == 0 {
                    panic!("item zero")
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
                i
            })
        });
        assert!(r.is_err());
        // The other thread goes on while the panic hook runs (printing a
        // backtrace took about 0.1 s here), then stops: far from all 200
        // items (2 s of sleeping on two threads) start.
        assert!(
            started.load(Ordering::Relaxed) < 100,
            "{}",
            started.load(Ordering::Relaxed)
        );
    }

    #[test]
    fn the_calling_thread_computes_items_while_every_pool_thread_is_busy() {
        // Every thread of rayon's global pool blocks until the caller has
        // computed all items itself: without the caller taking part the map
        // could not finish (it would time out below).
        let pool = rayon::current_num_threads();
        let (running, release) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let caller = std::thread::current().id();
        rayon::in_place_scope(|s| {
            for _ in 0..pool {
                s.spawn(|_| {
                    running.fetch_add(1, Ordering::SeqCst);
                    let start = std::time::Instant::now();
                    while release.load(Ordering::SeqCst) == 0 && start.elapsed().as_secs() < 30 {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                });
            }
            let start = std::time::Instant::now();
            while running.load(Ordering::SeqCst) < pool {
                assert!(start.elapsed().as_secs() < 30, "the pool's threads did not start");
                std::thread::yield_now();
            }
            let done = AtomicUsize::new(0);
            let by = map_indexed(6, 3, |i| {
                if done.fetch_add(1, Ordering::SeqCst) + 1 == 6 {
                    release.store(1, Ordering::SeqCst);
                }
                (i, std::thread::current().id())
            });
            assert_eq!(
                release.load(Ordering::SeqCst),
                1,
                "the blockers were released by a timeout"
            );
            assert!(
                by.iter().enumerate().all(|(k, &(i, t))| k == i && t == caller),
                "{by:?}"
            );
        });
    }
}
