// Shared test helpers (included with `mod common;`).
#![allow(dead_code)]

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

use uni20_persist::{ObjectId, Store};

struct ThreadWaker(Thread);
impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Minimal executor: polls `f` on this thread, parking between wakeups.
pub fn block_on<F: Future>(f: F) -> F::Output {
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Polls `f` once with a no-op waker.
pub fn poll_once<F: Future>(f: F) -> Poll<F::Output> {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let waker = Waker::from(Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    f.as_mut().poll(&mut cx)
}

/// Copies the objects `ids` of `from` into `to` as replicas (their encoded bytes, as a
/// transfer would).
pub fn replicate(from: &Store, to: &Store, ids: &[ObjectId]) {
    for &id in ids {
        let (meta, bytes) = from.encoded(id).unwrap();
        to.insert_replica(meta, bytes.to_vec()).unwrap();
    }
}

/// Runs `f(i)` for every `i` in `0..n`, each on its own thread, all released together by a
/// barrier; returns the results in `i` order.
pub fn at_once<T: Send + 'static>(n: usize, f: impl Fn(usize) -> T + Send + Sync + 'static) -> Vec<T> {
    let f = Arc::new(f);
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (f, barrier) = (f.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                f(i)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}
