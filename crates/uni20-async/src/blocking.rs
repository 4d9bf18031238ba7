//! Blocking waits: how `get_wait`, `wait`, `take_wait` and `JoinHandle::join` block the
//! calling thread. Outside a [`LocalExecutor`](crate::LocalExecutor) task the thread parks
//! until the awaited buffer's waker unparks it ([`park_on`]); this works on any thread,
//! including [`ThreadPoolExecutor`](crate::ThreadPoolExecutor) threads, because it does not
//! use `futures`' executor machinery (which refuses to nest). Inside a `LocalExecutor` task
//! the wait runs the executor's other tasks until the buffer is ready instead, as the
//! thread that would park is the only one that can make progress.

use crate::error::AsyncError;
use crate::executor;
use crate::sync::{current_thread, park, AtomicBool, Thread};
use crate::task_ctx;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Wake, Waker};

/// Wakes a parked thread: sets `woken`, and unparks the thread unless it was already set
/// (then an unpark is already on its way, or the thread has not parked yet and will see
/// the flag before it does).
struct ThreadWaker {
    thread: Thread,
    woken: AtomicBool,
}

impl Wake for ThreadWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        if !self.woken.swap(true, Ordering::AcqRel) {
            self.thread.unpark();
        }
    }
}

/// Drives `fut` to completion on the calling thread, parking it between polls.
///
/// Works on every thread, executor threads included; never nests an executor.
pub(crate) fn park_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let tw = std::sync::Arc::new(ThreadWaker {
        thread: current_thread(),
        woken: AtomicBool::new(false),
    });
    let waker = Waker::from(tw.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        // `park` may return spuriously (or for a stale token): re-check the flag.
        while !tw.woken.swap(false, Ordering::AcqRel) {
            park();
        }
    }
}

/// The blocking wait behind every `*_wait` method.
///
/// Inside a `LocalExecutor` task: runs the executor's other tasks until `fut` is ready, and
/// gives [`AsyncError::WouldBlock`] (naming `describe()`) if the executor runs out of
/// runnable tasks first. Anywhere else: parks the thread until `fut` is ready.
pub(crate) fn wait<F: Future>(fut: F, describe: impl FnOnce() -> String) -> Result<F::Output, AsyncError> {
    let mut fut = pin!(fut);
    if let Some(local) = executor::current_local() {
        return local
            .help_until(fut.as_mut())
            .ok_or_else(|| task_ctx::observed(AsyncError::WouldBlock { buffer: describe() }));
    }
    Ok(park_on(fut))
}
