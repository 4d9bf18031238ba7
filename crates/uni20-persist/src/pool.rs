//! A small background thread pool for blocking loads behind `Store::load`.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Number of background load threads per store.
const THREADS: usize = 4;

/// Lazily started pool; threads exit when the pool (its sender) is dropped.
pub(crate) struct LoadPool {
    tx: Mutex<Option<Sender<Job>>>,
}

impl LoadPool {
    pub(crate) fn new() -> Self {
        LoadPool { tx: Mutex::new(None) }
    }

    fn submit(&self, job: Job) {
        let mut tx = self.tx.lock();
        if tx.is_none() {
            let (s, r) = channel::<Job>();
            let r = Arc::new(Mutex::new(r));
            for i in 0..THREADS {
                let r: Arc<Mutex<Receiver<Job>>> = r.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("uni20-persist-load-{i}"))
                    .spawn(move || loop {
                        let job = r.lock().recv();
                        match job {
                            Ok(job) => job(),
                            Err(_) => break,
                        }
                    });
                if let Err(e) = spawned {
                    tracing::error!(error = %e, "cannot spawn load thread");
                }
            }
            *tx = Some(s);
        }
        let job = match tx.as_ref().map(|s| s.send(job)) {
            Some(Ok(())) => return,
            Some(Err(e)) => e.0,
            None => return,
        };
        // No live pool thread: run on a dedicated thread instead.
        drop(tx);
        if let Err(e) = std::thread::Builder::new().name("uni20-persist-load".into()).spawn(job) {
            tracing::error!(error = %e, "cannot spawn load thread");
        }
    }
}

struct Slot<R> {
    result: Option<std::thread::Result<R>>,
    waker: Option<Waker>,
}

/// Future of a job run on the pool.
pub(crate) struct BlockingFuture<R> {
    slot: Arc<Mutex<Slot<R>>>,
}

impl<R> Unpin for BlockingFuture<R> {}

impl<R> Future for BlockingFuture<R> {
    type Output = R;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        let mut s = self.slot.lock();
        match s.result.take() {
            Some(Ok(r)) => return Poll::Ready(r),
            // The job panicked (e.g. a `Persist::decode` that panics): re-raise it in
            // the awaiting task rather than hanging.
            Some(Err(p)) => std::panic::resume_unwind(p),
            None => {}
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Runs `f` on the pool; the returned future completes with its result.
pub(crate) fn spawn_blocking<R, F>(pool: &LoadPool, f: F) -> BlockingFuture<R>
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    let slot = Arc::new(Mutex::new(Slot {
        result: None,
        waker: None,
    }));
    let s2 = slot.clone();
    pool.submit(Box::new(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let waker = {
            let mut s = s2.lock();
            s.result = Some(r);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }));
    BlockingFuture { slot }
}
