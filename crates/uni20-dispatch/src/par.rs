//! A parallel map in which the calling thread takes part.
//!
//! A rank's thread (the root, or an in-process or MPI worker) is not a
//! rayon worker. Handing a command's items to rayon with `par_iter` from
//! such a thread injects the whole job into the pool and blocks the caller
//! until a pool thread has woken, run it and woken the caller again: two
//! thread wake-ups per command, each tens of microseconds on a virtual
//! machine, for commands that take a few hundred microseconds. On the 2-core
//! machine of `docs/performance.md` that made one rank with 2 threads slower
//! than one rank with 1 thread (0.72x at L = 100, chi = 100, symmetric).
//!
//! [`map_indexed`] instead runs items on the calling thread at once and
//! spawns `threads - 1` helpers on rayon's pool; every thread claims the
//! next unclaimed item until none is left, so a helper that wakes late
//! finds less (or nothing) to do and the caller never waits for a wake-up
//! before starting.

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
/// A panic in `f` on any thread is resumed on the calling thread after the
/// helpers have finished (rayon's scope semantics); the items not yet
/// claimed are then skipped.
pub fn map_indexed<R: Send>(n: usize, threads: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    if threads <= 1 || n <= 1 {
        return (0..n).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        let r = f(i);
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
    fn a_panic_in_an_item_reaches_the_caller() {
        let r = std::panic::catch_unwind(|| map_indexed(8, 2, |i| if i == 5 { panic!("item five") } else { i }));
        assert!(r.is_err());
    }
}
