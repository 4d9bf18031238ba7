//! Legality rules of the epoch queue, one scenario per rule. Each scenario is built so
//! that the wrong interleaving (the one the rule forbids) would make it fail.

use std::cell::RefCell;
use std::future::IntoFuture;
use std::rc::Rc;
use uni20_async::{Async, AsyncError, LocalExecutor};

mod common;
use common::{log, yield_now, Log};

// --- epoch assignment ------------------------------------------------------------------

#[test]
fn epochs_are_fixed_at_creation() {
    let a = Async::<i32>::empty();
    let (r, w0, r0b, w1, r1) = (a.read(), a.write(), a.read(), a.write(), a.read());
    // An empty Async's epoch 0 has no writer: the first write() joins it.
    assert_eq!((r.epoch(), w0.epoch(), r0b.epoch()), (0, 0, 0));
    assert_eq!((w1.epoch(), r1.epoch()), (1, 1));
    assert_eq!(a.latest_epoch(), 1);

    let b = Async::new(5);
    // Async::new counts epoch 0 as written: the first write() opens epoch 1.
    assert_eq!(b.read().epoch(), 0);
    assert_eq!(b.write().epoch(), 1);
}

#[test]
fn read_before_first_write_on_empty_sees_that_write() {
    // Upstream consequence 2: the reader is on epoch 0 and observes the first write.
    let a = Async::<i32>::empty();
    let (r, w) = (a.read(), a.write());
    let ex = LocalExecutor::new();
    let hr = ex.spawn(async move { *r.get().await.unwrap() }); // polled first
    ex.spawn(async move { w.set(7).await.unwrap() });
    ex.run().unwrap();
    assert_eq!(hr.try_take().unwrap().unwrap(), 7);
}

#[test]
fn program_order_not_spawn_order_decides() {
    let a = Async::new(1);
    let (r0, w1, r1, w2, r2) = (a.read(), a.write(), a.read(), a.write(), a.read());
    let ex = LocalExecutor::new();
    // Spawn in reverse causal order.
    let h2 = ex.spawn(async move { *r2.await.unwrap() });
    ex.spawn(async move {
        let mut g = w2.await.unwrap();
        *g.value_mut().unwrap() *= 10;
    });
    let h1 = ex.spawn(async move { *r1.await.unwrap() });
    ex.spawn(async move {
        let mut g = w1.await.unwrap();
        *g.value_mut().unwrap() += 1;
    });
    let h0 = ex.spawn(async move { *r0.await.unwrap() });
    ex.run().unwrap();
    assert_eq!(h0.try_take().unwrap().unwrap(), 1);
    assert_eq!(h1.try_take().unwrap().unwrap(), 2);
    assert_eq!(h2.try_take().unwrap().unwrap(), 20);
}

// --- L1: readers of one epoch run together -----------------------------------------------

#[test]
fn readers_of_one_epoch_hold_the_value_together() {
    let a = Async::new(3);
    let held = Rc::new(RefCell::new((0usize, 0usize))); // (now, max)
    let ex = LocalExecutor::new();
    for _ in 0..3 {
        let r = a.read();
        let held = held.clone();
        ex.spawn(async move {
            let g = r.await.unwrap();
            {
                let mut h = held.borrow_mut();
                h.0 += 1;
                h.1 = h.1.max(h.0);
            }
            yield_now().await; // keep holding while the others read
            assert_eq!(*g, 3);
            held.borrow_mut().0 -= 1;
        });
    }
    ex.run().unwrap();
    assert_eq!(held.borrow().1, 3, "all readers must be able to hold at once");
}

#[test]
fn readers_run_concurrently_on_threads() {
    use std::sync::mpsc;
    use std::time::Duration;
    let a = Async::new(1u64);
    let pool = uni20_async::ThreadPoolExecutor::new(2).unwrap();
    let (tx1, rx1) = mpsc::channel::<()>();
    let (tx2, rx2) = mpsc::channel::<()>();
    let rendezvous = |r: uni20_async::ReadBuffer<u64>, tx: mpsc::Sender<()>, rx: mpsc::Receiver<()>| async move {
        let g = r.await.unwrap();
        tx.send(()).unwrap();
        // Both readers hold their guard here at the same time, or this times out.
        let ok = rx.recv_timeout(Duration::from_secs(10)).is_ok();
        (*g, ok)
    };
    let h1 = pool.spawn(rendezvous(a.read(), tx1, rx2));
    let h2 = pool.spawn(rendezvous(a.read(), tx2, rx1));
    assert_eq!(h1.join().unwrap(), (1, true));
    assert_eq!(h2.join().unwrap(), (1, true));
}

// --- L2: readers wait for their epoch's writer -------------------------------------------

#[test]
fn reader_waits_for_writer_of_its_epoch() {
    let a = Async::new(0);
    let (w, r) = (a.write(), a.read());
    assert!(!r.is_ready());
    let l: Log = Rc::default();
    let ex = LocalExecutor::new();
    let (l1, l2) = (l.clone(), l.clone());
    let hr = ex.spawn(async move {
        let v = *r.get().await.unwrap();
        log(&l1, format!("read {v}"));
        v
    });
    ex.spawn(async move {
        let mut g = w.await.unwrap();
        log(&l2, "write start");
        yield_now().await; // the reader must not get in while the writer holds
        g.set(42);
        log(&l2, "write end");
    });
    ex.run().unwrap();
    assert_eq!(hr.try_take().unwrap().unwrap(), 42);
    assert_eq!(*l.borrow(), ["write start", "write end", "read 42"]);
}

// --- L3: the next writer waits for every reader handle ---------------------------------

#[test]
fn writer_waits_for_unawaited_and_cloned_readers() {
    let a = Async::new(1);
    let r = a.read();
    let rc = r.clone();
    let w = a.write();
    assert!(!w.is_ready(), "a live reader handle blocks the next writer");
    drop(r);
    assert!(!w.is_ready(), "the clone still blocks it");
    drop(rc);
    assert!(w.is_ready());
}

#[test]
fn writer_waits_for_reader_holding_guard() {
    let a = Async::new(1);
    let (r, w) = (a.read(), a.write());
    let l: Log = Rc::default();
    let ex = LocalExecutor::new();
    let (l1, l2) = (l.clone(), l.clone());
    ex.spawn(async move {
        let mut g = w.await.unwrap();
        log(&l1, "write");
        g.set(2);
    });
    ex.spawn(async move {
        let g = r.await.unwrap();
        log(&l2, format!("read start {}", *g));
        yield_now().await;
        yield_now().await;
        log(&l2, format!("read end {}", *g)); // must still be 1
    });
    ex.run().unwrap();
    assert_eq!(*l.borrow(), ["read start 1", "read end 1", "write"]);
    assert_eq!(a.get_wait().unwrap(), 2);
}

#[test]
fn into_maybe_on_empty_releases_at_once() {
    let a = Async::<i32>::empty();
    let (w0, r, w1) = (a.write(), a.read(), a.write());
    drop(w0); // no value
    let g = futures::executor::block_on(r.into_maybe()).unwrap();
    assert!(g.is_none());
    assert!(w1.is_ready(), "an empty owning maybe-read holds no registration");
}

// --- L4: one writer at a time -------------------------------------------------------------

#[test]
fn writers_run_one_at_a_time_in_epoch_order() {
    let a = Async::new(Vec::<u32>::new());
    let ws: Vec<_> = (0..4).map(|_| a.write()).collect();
    let active = Rc::new(RefCell::new(0usize));
    let ex = LocalExecutor::new();
    for (i, w) in ws.into_iter().enumerate().rev() {
        let active = active.clone();
        ex.spawn(async move {
            let mut g = w.await.unwrap();
            *active.borrow_mut() += 1;
            assert_eq!(*active.borrow(), 1, "two writers active at once");
            yield_now().await;
            g.value_mut().unwrap().push(i as u32);
            *active.borrow_mut() -= 1;
        });
    }
    ex.run().unwrap();
    assert_eq!(a.get_wait().unwrap(), vec![0, 1, 2, 3]);
}

#[test]
fn writer_blocks_next_writer_until_released() {
    let a = Async::new(0);
    let (w1, w2) = (a.write(), a.write());
    assert!(w1.is_ready());
    assert!(!w2.is_ready());
    let g1 = futures::executor::block_on(w1.into_future()).unwrap();
    assert!(!w2.is_ready());
    drop(g1);
    assert!(w2.is_ready());
}

// --- writer forms ---------------------------------------------------------------------------

#[test]
fn dropped_writer_passes_previous_value_through() {
    let a = Async::new(String::from("kept"));
    let (w, r) = (a.write(), a.read());
    drop(w);
    assert_eq!(r.get_wait().unwrap(), "kept");
}

#[test]
fn emplace_into_empty_then_take_then_no_value() {
    let a = Async::<String>::empty();
    let (w0, r0, w1, r1) = (a.write(), a.read(), a.write(), a.read());
    let ex = LocalExecutor::new();
    let h0 = ex.spawn(async move { r0.get().await.cloned() });
    let ht = ex.spawn(async move { w1.take().await.unwrap() });
    let h1 = ex.spawn(async move {
        let plain = r1.get().await.err();
        let maybe = r1.maybe().await.unwrap().cloned();
        (plain, maybe)
    });
    ex.spawn(async move {
        let mut g = w0.await.unwrap();
        assert!(g.get().is_none());
        assert!(g.value_mut().unwrap_err().is_no_value());
        g.set("v".into());
    });
    ex.run().unwrap();
    assert_eq!(h0.try_take().unwrap().unwrap().unwrap(), "v");
    assert_eq!(ht.try_take().unwrap().unwrap().as_deref(), Some("v"));
    let (plain, maybe) = h1.try_take().unwrap().unwrap();
    assert!(plain.unwrap().is_no_value());
    assert_eq!(maybe, None);
}

#[test]
fn guard_slot_and_get_or_insert() {
    let a = Async::<Vec<i32>>::empty();
    let w = a.write();
    let mut g = w.wait().unwrap();
    g.get_or_insert_with(Vec::new).push(1);
    g.get_mut().unwrap().push(2);
    assert_eq!(g.slot().as_deref(), Some(&[1, 2][..]));
    drop(g);
    assert_eq!(a.get_wait().unwrap(), vec![1, 2]);
    assert_eq!(a.take_wait().unwrap(), vec![1, 2]);
    assert!(a.get_wait().unwrap_err().is_no_value());
    assert!(a.take_wait().unwrap_err().is_no_value());
}

// --- cancellation vs errors -------------------------------------------------------------

#[test]
fn reader_that_never_saw_a_value_gets_no_value() {
    let a = Async::<i32>::empty().with_name("never");
    let (r, w) = (a.read(), a.write());
    drop(w); // released without writing
    let err = r.wait().unwrap_err();
    assert!(matches!(err, AsyncError::NoValue { epoch: 0, .. }), "{err}");
    assert!(!err.is_poisoned());
    assert!(err.to_string().contains("`never`"), "{err}");
    assert_eq!(futures::executor::block_on(r.maybe()).unwrap(), None);
}

#[test]
fn get_wait_blocks_until_another_thread_writes() {
    let a = std::sync::Arc::new(Async::new(0u64));
    let (w, r) = (a.write(), a.read());
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut g = w.wait().unwrap();
        g.set(17);
    });
    assert_eq!(r.get_wait().unwrap(), 17);
    t.join().unwrap();
}

#[test]
fn blocking_inside_local_task_runs_the_writer_or_is_an_error_not_a_hang() {
    let a = std::rc::Rc::new(Async::new(1));
    let w = a.write();
    let ex = LocalExecutor::new();
    let a2 = a.clone();
    // The wait runs the writer task (spawned later) and then sees its value.
    let h = ex.spawn(async move { a2.get_wait() });
    ex.spawn(async move { w.set(2).await.unwrap() });
    ex.run().unwrap();
    assert_eq!(h.try_take().unwrap().unwrap().unwrap(), 2);
    // A writer no task of the executor will release: an error, not a hang.
    let w = a.write();
    let a3 = a.clone();
    let e = ex.block_on(async move { a3.get_wait() }).unwrap().unwrap_err();
    assert!(matches!(e, AsyncError::WouldBlock { .. }), "{e}");
    drop(w);
    // Ready values are fine to "block" on inside a task.
    let a4 = a.clone();
    assert_eq!(ex.block_on(async move { a4.get_wait() }).unwrap().unwrap(), 2);
}

#[test]
fn local_block_on_drives_other_tasks() {
    let a = Async::new(1);
    let (w, r) = (a.write(), a.read());
    let ex = LocalExecutor::new();
    ex.spawn(async move { w.set(3).await.unwrap() });
    assert_eq!(ex.block_on(async move { *r.get().await.unwrap() }).unwrap(), 3);
}

// --- thread safety -----------------------------------------------------------------------

#[test]
fn types_are_send_and_sync() {
    fn ss<T: Send + Sync>() {}
    ss::<Async<Vec<f64>>>();
    ss::<uni20_async::ReadBuffer<Vec<f64>>>();
    ss::<uni20_async::WriteBuffer<Vec<f64>>>();
    ss::<uni20_async::ReadGuard<Vec<f64>>>();
    ss::<uni20_async::WriteGuard<Vec<f64>>>();
    ss::<AsyncError>();
    fn send<T: Send>(_: &T) {}
    let a = Async::new(1);
    let r = a.read();
    send(&r.into_future_send());
}

trait IntoFutureSend {
    fn into_future_send(self) -> uni20_async::ReadOwned<i32>;
}
impl IntoFutureSend for uni20_async::ReadBuffer<i32> {
    fn into_future_send(self) -> uni20_async::ReadOwned<i32> {
        std::future::IntoFuture::into_future(self)
    }
}

#[test]
fn pool_chain_of_epochs_keeps_causal_order() {
    let pool = uni20_async::ThreadPoolExecutor::new(2).unwrap();
    let a = Async::new(0u64).with_name("chain");
    let mut handles = Vec::new();
    let mut expected = Vec::new();
    for k in 0..200u64 {
        let r = a.read();
        expected.push(k);
        handles.push(pool.spawn(async move { *r.await.unwrap() }));
        let (w, r2) = (a.write(), a.read());
        drop(r2);
        handles.push(pool.spawn(async move {
            let mut g = w.await.unwrap();
            let v = *g.get().unwrap();
            g.set(v + 1);
            u64::MAX
        }));
    }
    let got: Vec<u64> = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|v| *v != u64::MAX)
        .collect();
    assert_eq!(got, expected);
    assert_eq!(a.get_wait().unwrap(), 200);
}

#[test]
fn dropped_writers_cascade_through_several_epochs() {
    let a = Async::new(9).with_name("c");
    let r0 = a.read();
    let ws: Vec<_> = (0..3).map(|_| a.write()).collect();
    let r3 = a.read();
    assert_eq!(r3.epoch(), 3);
    drop(ws); // released before their epochs started
    assert!(!r3.is_ready(), "epoch 0's reader still holds everything back");
    drop(r0);
    assert!(r3.is_ready());
    assert_eq!(r3.get_wait().unwrap(), 9);
    assert_eq!(a.write().epoch(), 4);
}

#[test]
fn wake_up_reaches_a_parked_writer_on_another_thread() {
    let pool = uni20_async::ThreadPoolExecutor::new(2).unwrap();
    let a = Async::new(0u8);
    let (r, w) = (a.read(), a.write());
    let h = pool.spawn(async move { w.set(1).await });
    std::thread::sleep(std::time::Duration::from_millis(20));
    drop(r); // the only thing the parked writer waits for
    h.join().unwrap().unwrap();
    assert_eq!(a.get_wait().unwrap(), 1);
}
