//! Blocking waits (`get_wait`, `wait`, `take_wait`, `JoinHandle::join`) called from inside
//! executor tasks: on `ThreadPoolExecutor` threads they block the pool thread and wake when
//! the value is ready; inside `LocalExecutor` tasks they run the executor's other tasks
//! until the value is ready, and report `WouldBlock` only when no task of the executor is
//! left that could make it ready.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll};
use std::time::Duration;
use uni20_async::{Async, AsyncError, LocalExecutor, ThreadPoolExecutor};

mod common;
use common::{assert_would_block, log, named_write_read, yield_now, Log};

// --- ThreadPoolExecutor ------------------------------------------------------------------

#[test]
fn pool_task_get_wait_on_a_ready_value() {
    let pool = ThreadPoolExecutor::new(2).unwrap();
    let x = Arc::new(Async::new(7i64));
    let x2 = x.clone();
    let h = pool.spawn(async move { x2.get_wait() });
    assert_eq!(h.join().unwrap().unwrap(), 7);
}

#[test]
fn pool_task_blocks_until_another_pool_task_writes() {
    let pool = ThreadPoolExecutor::new(2).unwrap();
    let x = Async::new(0u64).with_name("x");
    let w = x.write(); // epoch 1
    let r = x.read(); // epoch 1: ready only once `w` is released
    let (started_tx, started_rx) = mpsc::channel();
    let waiter = pool.spawn_named("waiter", async move {
        let was_ready = r.is_ready();
        started_tx.send(()).unwrap();
        (was_ready, r.get_wait())
    });
    started_rx.recv().unwrap();
    // Not an assertion on time: it only makes it near certain that the waiter is parked
    // (rather than finding the value ready at its first poll) when the writer runs.
    std::thread::sleep(Duration::from_millis(30));
    let writer = pool.spawn_named("writer", async move { w.set(42).await });
    writer.join().unwrap().unwrap();
    let (was_ready, got) = waiter.join().unwrap();
    assert!(!was_ready, "the waiter must have started before the write");
    assert_eq!(got.unwrap(), 42);
    assert_eq!(x.get_wait().unwrap(), 42);
}

#[test]
fn pool_task_write_wait_blocks_until_the_reader_is_dropped() {
    let pool = ThreadPoolExecutor::new(2).unwrap();
    let x = Arc::new(Async::new(1u32));
    let r0 = x.read(); // epoch 0 reader holds back epoch 1's writer
    let w = x.write();
    let (started_tx, started_rx) = mpsc::channel();
    let h = pool.spawn(async move {
        let was_ready = w.is_ready();
        started_tx.send(()).unwrap();
        let mut g = w.wait().unwrap();
        let old = *g.get().unwrap();
        g.set(old + 10);
        was_ready
    });
    started_rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(*r0.try_get().unwrap().unwrap(), 1);
    drop(r0);
    assert!(!h.join().unwrap());
    assert_eq!(x.get_wait().unwrap(), 11);
}

#[test]
fn pool_task_take_wait_and_wait() {
    let pool = ThreadPoolExecutor::new(2).unwrap();
    let x = Arc::new(Async::new(String::from("v")));
    let x2 = x.clone();
    let h = pool.spawn(async move {
        x2.wait()?;
        x2.take_wait()
    });
    assert_eq!(h.join().unwrap().unwrap(), "v");
    assert!(x.get_wait().unwrap_err().is_no_value());
}

#[test]
fn join_inside_a_pool_task() {
    let pool = ThreadPoolExecutor::new(2).unwrap();
    let inner_pool = pool.clone();
    let x = Async::new(5i32);
    let (w, r) = (x.write(), x.read());
    let h = pool.spawn(async move {
        let child = inner_pool.spawn(async move { w.set(6).await });
        child.join().unwrap().unwrap();
        r.get_wait()
    });
    assert_eq!(h.join().unwrap().unwrap(), 6);
}

#[test]
fn blocking_waits_on_plain_threads_still_work() {
    let x = Arc::new(Async::new(0u8));
    let w = x.write();
    let x2 = x.clone();
    let t = std::thread::spawn(move || x2.get_wait());
    std::thread::sleep(Duration::from_millis(20));
    let t2 = std::thread::spawn(move || {
        let mut g = w.wait().unwrap();
        g.set(3);
    });
    t2.join().unwrap();
    // `get_wait` on `x2` joined epoch 1 (created after `write()`), so it sees 3.
    assert_eq!(t.join().unwrap().unwrap(), 3);
}

// --- LocalExecutor --------------------------------------------------------------------------

#[test]
fn local_get_wait_on_a_ready_value() {
    let x = Rc::new(Async::new(9));
    let ex = LocalExecutor::new();
    let x2 = x.clone();
    let h = ex.spawn(async move { x2.get_wait() });
    ex.run().unwrap();
    assert_eq!(h.try_take().unwrap().unwrap().unwrap(), 9);
}

#[test]
fn local_get_wait_runs_the_task_that_writes() {
    let (_x, w, r) = named_write_read(0, "x");
    let ex = LocalExecutor::new();
    let l: Log = Rc::default();
    let (l1, l2) = (l.clone(), l.clone());
    // The waiter is spawned (and polled) first; its writer has not run yet.
    let waiter = ex.spawn_named("waiter", async move {
        log(&l1, format!("waiter: ready={}", r.is_ready()));
        let v = r.get_wait();
        log(&l1, "waiter: woke");
        v
    });
    ex.spawn_named("writer", async move {
        log(&l2, "writer: set 42");
        w.set(42).await
    });
    ex.run().unwrap();
    assert_eq!(waiter.try_take().unwrap().unwrap().unwrap(), 42);
    assert_eq!(*l.borrow(), ["waiter: ready=false", "writer: set 42", "waiter: woke"]);
}

#[test]
fn local_nested_blocking_waits() {
    let x = Async::new(0).with_name("x");
    let y = Async::new(0).with_name("y");
    let (wx, rx) = (x.write(), x.read());
    let (wy, ry) = (y.write(), y.read());
    let ex = LocalExecutor::new();
    // A blocks on x; x's writer B blocks on y; y's writer C runs inside B's wait.
    let a = ex.spawn_named("A", async move { rx.get_wait() });
    ex.spawn_named("B", async move {
        let v = ry.get_wait()?;
        wx.set(v + 1).await
    });
    ex.spawn_named("C", async move { wy.set(10).await });
    ex.run().unwrap();
    assert_eq!(a.try_take().unwrap().unwrap().unwrap(), 11);
}

/// A wait that no task of the executor can satisfy is reported, not hung on.
#[test]
fn local_wait_nobody_can_satisfy_is_would_block() {
    let x = Rc::new(Async::new(1).with_name("x"));
    let w = x.write(); // held by the test, never released while the executor runs
    let ex = LocalExecutor::new();
    let x2 = x.clone();
    let h = ex.spawn(async move { x2.get_wait() });
    ex.spawn(async {}); // an unrelated task the wait may run first
    ex.run().unwrap();
    let e = h.try_take().unwrap().unwrap().unwrap_err();
    assert_would_block(&e, "read(`x`@1");
    drop(w);
}

/// Polls `fut` once (registering the task's waker) and drops it.
fn poll_once<F: Future + Unpin>(mut fut: F) -> impl Future<Output = bool> {
    std::future::poll_fn(move |cx: &mut Context<'_>| Poll::Ready(Pin::new(&mut fut).poll(cx).is_ready()))
}

/// A task woken while it runs other tasks inside a blocking wait is not lost: it is polled
/// again later and still sees wake-ups that arrive after the wait.
#[test]
fn local_wake_during_a_blocking_wait_is_kept() {
    let p = Async::new(0).with_name("p");
    let x = Async::new(0).with_name("x");
    let q = Async::new(0).with_name("q");
    let (wp, rp) = (p.write(), p.read());
    let (wx, rx) = (x.write(), x.read());
    let (wq, rq) = (q.write(), q.read());
    let ex = LocalExecutor::new();
    let a = ex.spawn_named("A", async move {
        // Park A's own waker on `p`; B will wake it while A is inside `get_wait`.
        assert!(!poll_once(rp.get()).await);
        let v = rx.get_wait()?;
        let pv = *rp.get().await?;
        // `q` is written by C, which waits for a yield first: A must be woken again.
        let qv = *rq.get().await?;
        Ok::<_, AsyncError>((v, pv, qv))
    });
    ex.spawn_named("B", async move {
        wp.set(1).await?; // wakes A's waker while A is running
        wx.set(2).await
    });
    ex.spawn_named("C", async move {
        yield_now().await;
        yield_now().await;
        wq.set(3).await
    });
    ex.run().unwrap();
    assert_eq!(a.try_take().unwrap().unwrap().unwrap(), (2, 1, 3));
}

/// `join` on a pool task from inside a `LocalExecutor` task blocks the thread until the
/// pool task finishes.
#[test]
fn local_task_joins_a_pool_task() {
    let pool = ThreadPoolExecutor::new(1).unwrap();
    let ex = LocalExecutor::new();
    let h = ex.spawn(async move { pool.spawn(async { 40 + 2 }).join() });
    ex.run().unwrap();
    assert_eq!(h.try_take().unwrap().unwrap().unwrap(), 42);
}

/// A writer whose blocking wait cannot finish is released unwritten by a task that was
/// handed `WouldBlock`, so its epoch is poisoned with that error (see the crate docs,
/// "Failures") rather than passing the old value on as if nothing happened.
#[test]
fn local_write_wait_that_would_block_poisons_its_epoch() {
    let x = Async::new(1).with_name("x");
    let r0 = x.read(); // held by the test: epoch 1's writer can never start
    let (w, r1) = (x.write(), x.read());
    let ex = LocalExecutor::new();
    let h = ex.spawn(async move { w.wait().map(|_| ()) });
    ex.run().unwrap();
    let e = h.try_take().unwrap().unwrap().unwrap_err();
    assert_would_block(&e, "write(`x`@1");
    drop(r0);
    let e = r1.get_wait().unwrap_err();
    assert!(
        matches!(&e, AsyncError::Poisoned { origin, message, .. }
        if origin.contains("write(`x`@1") && message.contains("would deadlock")),
        "{e}"
    );
}
