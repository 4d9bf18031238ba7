//! Legality rules of the epoch queue for failures: poison (explicit, from a
//! guard, from a panicking task or thread) reaches this and every later
//! epoch, and misuse (a self-deadlock, a reader without writer, a writer
//! never released) is reported naming the buffers instead of hanging.

use std::future::IntoFuture;
use uni20_async::{Async, AsyncError, LocalExecutor};

mod common;
#[allow(unused_imports)]
use common::{log, named_read_write, named_write_read, yield_now, Log};

#[test]
fn explicit_fail_poisons_this_and_later_epochs() {
    let a = Async::new(1).with_name("p");
    let (w1, r1, w2, r2) = (a.write(), a.read(), a.write(), a.read());
    w1.fail("disk on fire");
    let e1 = r1.wait().unwrap_err();
    match &e1 {
        AsyncError::Poisoned {
            epoch,
            origin_epoch,
            message,
            origin,
            ..
        } => {
            assert_eq!((*epoch, *origin_epoch), (1, 1));
            assert_eq!(message, "disk on fire");
            assert!(origin.contains("write(`p`@1"), "{origin}");
        }
        e => panic!("expected Poisoned, got {e}"),
    }
    drop(r1);
    // Sticky: the writer of the next epoch is told, and readers after it stay poisoned.
    let e2 = futures::executor::block_on(w2.into_future()).unwrap_err();
    assert!(e2.is_poisoned());
    let e3 = r2.wait().unwrap_err();
    assert!(
        matches!(
            e3,
            AsyncError::Poisoned {
                epoch: 2,
                origin_epoch: 1,
                ..
            }
        ),
        "{e3}"
    );
    // maybe() reports poison too: it is an error, not "no value".
    assert!(futures::executor::block_on(r2.maybe()).unwrap_err().is_poisoned());
    assert!(a.get_wait().unwrap_err().is_poisoned());
}

#[test]
fn fail_before_epoch_starts_keeps_the_earliest_error() {
    let a = Async::new(0);
    let (w1, w2, r2) = (a.write(), a.write(), a.read());
    w2.fail("second"); // not yet started
    w1.fail("first");
    match r2.wait().unwrap_err() {
        AsyncError::Poisoned {
            message, origin_epoch, ..
        } => assert_eq!((message.as_str(), origin_epoch), ("first", 1)),
        e => panic!("{e}"),
    }
}

#[test]
fn guard_fail_poisons() {
    let a = Async::new(0);
    let g = a.write().wait().unwrap();
    g.fail(std::io::Error::other("io"));
    let e = a.get_wait().unwrap_err();
    let AsyncError::Poisoned { source, .. } = &e else {
        panic!("{e}")
    };
    assert!(source.downcast_ref::<std::io::Error>().is_some());
    assert!(std::error::Error::source(&e).is_some());
}

#[test]
fn panic_in_writer_task_reaches_every_later_reader() {
    let a = Async::new(1).with_name("x");
    let (w1, r1, w2, r2) = (a.write(), a.read(), a.write(), a.read());
    let ex = LocalExecutor::new();
    ex.spawn_named("boom", async move {
        let mut g = w1.await.unwrap();
        g.set(99);
        yield_now().await;
        panic!("kernel exploded");
    });
    let h1 = ex.spawn(async move { r1.get().await.copied() });
    let hw2 = ex.spawn(async move { w2.set(5).await });
    let h2 = ex.spawn(async move { r2.maybe().await.map(|v| v.copied()) });
    let err = ex.run().unwrap_err();
    assert!(
        matches!(&err, AsyncError::TaskPanicked { message, task } if message == "kernel exploded" && task.contains("boom")),
        "{err}"
    );
    for e in [
        h1.try_take().unwrap().unwrap().unwrap_err(),
        hw2.try_take().unwrap().unwrap().unwrap_err(),
        h2.try_take().unwrap().unwrap().unwrap_err(),
    ] {
        match e {
            AsyncError::Poisoned { message, origin, .. } => {
                assert!(message.contains("kernel exploded"), "{message}");
                assert!(origin.contains("write(`x`@1"), "{origin}");
            }
            e => panic!("expected poison, got {e}"),
        }
    }
}

#[test]
fn panic_in_pool_task_poisons() {
    let pool = uni20_async::ThreadPoolExecutor::new(2).unwrap();
    let a = Async::new(0u32);
    let w = a.write();
    let h = pool.spawn_named("bad", async move {
        let _g = w.await.unwrap();
        panic!("pool boom");
    });
    let e = h.join().unwrap_err();
    assert!(matches!(e, AsyncError::TaskPanicked { .. }), "{e}");
    let e = a.get_wait().unwrap_err();
    assert!(e.to_string().contains("pool boom"), "{e}");
}

#[test]
fn panic_on_plain_thread_poisons_via_panicking() {
    let a = std::sync::Arc::new(Async::new(0u32));
    let w = a.write();
    let t = std::thread::spawn(move || {
        let _g = w.wait().unwrap();
        panic!("thread boom");
    });
    assert!(t.join().is_err());
    assert!(a.get_wait().unwrap_err().is_poisoned());
}

// --- the kernel shape and its self-deadlock ---------------------------------------------

#[test]
fn read_compute_release_then_write_does_not_deadlock() {
    let (x, r, w) = named_read_write(2.0f64, "x");
    let ex = LocalExecutor::new();
    ex.spawn(async move {
        let v = *r.get().await.unwrap();
        let y = v * v;
        drop(r); // release the reads first
        w.set(y).await.unwrap();
    });
    ex.run().unwrap();
    assert_eq!(x.get_wait().unwrap(), 4.0);
}

#[test]
fn self_deadlock_is_reported_naming_both_buffers() {
    let (_x, r, w) = named_read_write(2.0f64, "x");
    let ex = LocalExecutor::new();
    ex.spawn_named("kernel", async move {
        let v = *r.get().await.unwrap();
        // BUG: still holding `r` (epoch 0) while awaiting the writer of epoch 1.
        w.set(v * v).await.unwrap();
        drop(r);
    });
    let err = ex.run().unwrap_err();
    let AsyncError::Deadlock(report) = &err else {
        panic!("expected deadlock, got {err}")
    };
    assert_eq!(report.blocked.len(), 1);
    assert_eq!(report.blocked[0].name, "kernel");
    let dump = err.to_string();
    assert!(dump.contains("write(`x`@1"), "{dump}");
    assert!(dump.contains("read(`x`@0"), "{dump}");
    assert!(dump.contains("awaited by task 0"), "{dump}");
}

#[test]
fn reader_of_epoch_without_writer_is_reported() {
    let a = Async::<i32>::empty().with_name("orphan");
    let r = a.read();
    let ex = LocalExecutor::new();
    ex.spawn(async move { r.get().await.copied() });
    let dump = ex.run().unwrap_err().to_string();
    assert!(dump.contains("read(`orphan`@0"), "{dump}");
    assert!(dump.contains("no writer"), "{dump}");
}

#[test]
fn writer_not_released_is_named() {
    let (_a, w, r) = named_write_read(1, "a");
    let ex = LocalExecutor::new();
    ex.spawn_named("holder", async move {
        let g = w.await.unwrap();
        futures::future::pending::<()>().await; // never releases
        drop(g);
    });
    ex.spawn_named("reader", async move { r.get().await.copied() });
    let dump = ex.run().unwrap_err().to_string();
    assert!(dump.contains("read(`a`@1"), "{dump}");
    assert!(dump.contains("blocked by write(`a`@1"), "{dump}");
    assert!(dump.contains("awaited by task 0"), "{dump}");
}

// --- blocking APIs --------------------------------------------------------------------
