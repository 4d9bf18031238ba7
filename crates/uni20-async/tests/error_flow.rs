//! Errors flow downstream through tasks instead of leaving stale values.
//!
//! The rule (crate docs, "Failures"): once a buffer operation has handed an error to a task
//! running on one of this crate's executors, every write buffer that task drops without
//! having written it poisons its epoch with that error. Written buffers keep what was
//! written. Errors that do not come from a buffer are routed with `fail`.

use std::error::Error as _;
use uni20_async::{Async, AsyncError, LocalExecutor, ThreadPoolExecutor};

mod common;
use common::named_write_read;

/// Asserts `e` is a poison whose origin is `origin` and whose source chain reaches an error
/// whose text contains `root`.
fn assert_poison_chain(e: &AsyncError, origin: &str, root: &str) {
    let AsyncError::Poisoned { origin: o, .. } = e else {
        panic!("expected poison, got {e}")
    };
    assert!(o.contains(origin), "origin {o:?} should name {origin:?}");
    let mut texts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        texts.push(s.to_string());
        cur = s.source();
    }
    assert!(
        texts.iter().any(|t| t.contains(root)),
        "{texts:#?} should reach {root:?}"
    );
}

/// Stage 1 poisons `x`; stage 2 reads `x` with `?` while holding the writer of `y`
/// (which has an old value); stage 3 reads `y`.
struct Chain {
    stage1: uni20_async::WriteBuffer<i32>,
    x_read: uni20_async::ReadBuffer<i32>,
    y_write: uni20_async::WriteBuffer<i32>,
    y_read: uni20_async::ReadBuffer<i32>,
    _x: Async<i32>,
    _y: Async<i32>,
}

fn chain() -> Chain {
    let x = Async::new(1).with_name("x");
    let y = Async::new(100).with_name("y"); // the stale value stage 3 must not see
    let (stage1, x_read) = (x.write(), x.read());
    let (y_write, y_read) = (y.write(), y.read());
    Chain {
        stage1,
        x_read,
        y_write,
        y_read,
        _x: x,
        _y: y,
    }
}

/// What a chain whose stage 1 already failed leaves to the test besides stage 2's
/// buffers: stage 3's reader of `y` (and the buffers, kept alive).
struct AfterFailedStage1 {
    y_read: uni20_async::ReadBuffer<i32>,
    _x: Async<i32>,
    _y: Async<i32>,
}

/// A chain whose stage 1 failed with `message` before any task ran: stage 2's reader of
/// `x` and writer of `y`, and the rest.
fn failed_chain(
    message: &str,
) -> (
    uni20_async::ReadBuffer<i32>,
    uni20_async::WriteBuffer<i32>,
    AfterFailedStage1,
) {
    let c = chain();
    c.stage1.fail(message);
    let rest = AfterFailedStage1 {
        y_read: c.y_read,
        _x: c._x,
        _y: c._y,
    };
    (c.x_read, c.y_write, rest)
}

async fn stage1(w: uni20_async::WriteBuffer<i32>) -> Result<(), AsyncError> {
    let g = w.await?;
    g.fail("stage 1 failed");
    Ok(())
}

async fn stage2(r: uni20_async::ReadBuffer<i32>, w: uni20_async::WriteBuffer<i32>) -> Result<(), AsyncError> {
    let v = *r.get().await?;
    drop(r);
    w.set(v * 2).await
}

#[test]
fn three_stage_chain_local() {
    let c = chain();
    let ex = LocalExecutor::new();
    let h1 = ex.spawn_named("stage 1", stage1(c.stage1));
    let h2 = ex.spawn_named("stage 2", stage2(c.x_read, c.y_write));
    let h3 = ex.spawn_named("stage 3", async move { c.y_read.get().await.copied() });
    ex.run().unwrap();
    h1.try_take().unwrap().unwrap().unwrap();
    let e2 = h2.try_take().unwrap().unwrap().unwrap_err();
    assert_poison_chain(&e2, "write(`x`@1", "stage 1 failed");
    let e3 = h3.try_take().unwrap().unwrap().unwrap_err();
    assert_poison_chain(&e3, "write(`y`@1", "stage 1 failed");
    // The propagated poison's source is the error stage 2 got, naming `x`'s failed writer.
    let AsyncError::Poisoned { source, .. } = &e3 else {
        unreachable!()
    };
    let inner = source
        .downcast_ref::<AsyncError>()
        .expect("source is the AsyncError stage 2 saw");
    assert!(matches!(inner, AsyncError::Poisoned { origin, .. } if origin.contains("write(`x`@1")));
}

#[test]
fn three_stage_chain_pool() {
    let c = chain();
    let pool = ThreadPoolExecutor::new(2).unwrap();
    // Spawn in reverse order so the stages really wait for each other.
    let h3 = pool.spawn(async move { c.y_read.get().await.copied() });
    let h2 = pool.spawn(stage2(c.x_read, c.y_write));
    let h1 = pool.spawn(stage1(c.stage1));
    h1.join().unwrap().unwrap();
    assert_poison_chain(&h2.join().unwrap().unwrap_err(), "write(`x`@1", "stage 1 failed");
    assert_poison_chain(&h3.join().unwrap().unwrap_err(), "write(`y`@1", "stage 1 failed");
}

/// Stage 2 with a blocking read on a pool thread, and the writer already acquired.
#[test]
fn acquired_but_unwritten_guard_is_poisoned_too() {
    let (r, w, c) = failed_chain("early failure");
    let pool = ThreadPoolExecutor::new(2).unwrap();
    let h2 = pool.spawn(async move {
        let g = w.await?; // acquired, looked at, never written
        assert_eq!(g.get(), Some(&100));
        let v = r.get_wait()?;
        drop(g);
        Ok::<_, AsyncError>(v)
    });
    assert!(h2.join().unwrap().unwrap_err().is_poisoned());
    assert_poison_chain(&c.y_read.get_wait().unwrap_err(), "write(`y`@1", "early failure");
}

/// A task that wrote a buffer and then returned an error does not poison what it wrote;
/// the buffers it had not written are poisoned.
#[test]
fn written_buffers_keep_their_value_after_an_error() {
    let c = chain();
    let (_z, wz, rz) = named_write_read(-1, "z");
    let ex = LocalExecutor::new();
    ex.spawn(stage1(c.stage1));
    let (r, wy) = (c.x_read, c.y_write);
    let h = ex.spawn(async move {
        let mut gy = wy.await?;
        gy.set(5); // written
        let _wz = wz; // held, never written
        let v = *r.get().await?; // poisoned: returns here
        gy.set(v);
        Ok::<(), AsyncError>(())
    });
    ex.run().unwrap();
    assert!(h.try_take().unwrap().unwrap().unwrap_err().is_poisoned());
    assert_eq!(c.y_read.get_wait().unwrap(), 5);
    assert_poison_chain(&rz.get_wait().unwrap_err(), "write(`z`@1", "stage 1 failed");
}

/// The rule is about errors a task *got*, not how it leaves: swallowing the error and
/// returning `Ok` without writing still poisons, so no stale value escapes.
#[test]
fn swallowed_error_without_a_write_still_poisons() {
    let (r, w, c) = failed_chain("swallowed");
    let ex = LocalExecutor::new();
    ex.spawn(async move {
        if r.get().await.is_err() {
            drop(w);
        }
    });
    ex.run().unwrap();
    assert_poison_chain(&c.y_read.get_wait().unwrap_err(), "write(`y`@1", "swallowed");
}

/// Handling the error by writing a fallback is a write: nothing is poisoned.
#[test]
fn handled_error_with_a_fallback_write_does_not_poison() {
    let (r, w, c) = failed_chain("handled");
    let ex = LocalExecutor::new();
    ex.spawn(async move {
        let v = r.get().await.copied().unwrap_or(-7);
        drop(r);
        w.set(v).await
    });
    ex.run().unwrap();
    assert_eq!(c.y_read.get_wait().unwrap(), -7);
}

/// "No value" read with `get()?` is an error that reaches the outputs; read with `maybe()`
/// it is not an error, and an unwritten output passes its old value through.
#[test]
fn no_value_error_poisons_but_maybe_passes_through() {
    let e: Async<i32> = Async::empty();
    let (we, re1, re2) = (e.write(), e.read(), e.read());
    drop(we); // epoch 0 released unwritten: no value
    let y1 = Async::new(100).with_name("y1");
    let y2 = Async::new(200).with_name("y2");
    let (w1, r1) = (y1.write(), y1.read());
    let (w2, r2) = (y2.write(), y2.read());
    let ex = LocalExecutor::new();
    ex.spawn(async move {
        let v = *re1.get().await?;
        w1.set(v).await
    });
    ex.spawn(async move {
        if let Some(v) = re2.maybe().await? {
            let v = *v;
            w2.set(v).await?;
        }
        Ok::<(), AsyncError>(())
    });
    ex.run().unwrap();
    let err = r1.get_wait().unwrap_err();
    assert_poison_chain(&err, "write(`y1`@1", "no value");
    assert_eq!(r2.get_wait().unwrap(), 200);
}

/// Errors that do not come from a buffer are the task's own business: they reach its
/// outputs only through `fail` (documented in the crate docs).
#[test]
fn own_errors_are_routed_with_fail() {
    let (y, w1, r1) = named_write_read(1, "y");
    let (w2, r2) = (y.write(), y.read());
    assert_eq!((w1.epoch(), r1.epoch(), w2.epoch(), r2.epoch()), (1, 1, 2, 2));
    let ex = LocalExecutor::new();
    let h = ex.spawn(async move {
        let w1 = w1;
        "x".parse::<i32>()?; // a parse error, not from a buffer: w1 passes through
        drop(w1);
        Ok::<(), Box<dyn std::error::Error>>(())
    });
    ex.spawn(async move {
        match "y".parse::<i32>() {
            Ok(v) => w2.set(v).await.map_err(|e| e.to_string()),
            Err(e) => {
                w2.fail(e.clone());
                Err(e.to_string())
            }
        }
    });
    ex.run().unwrap();
    assert!(h.try_take().unwrap().unwrap().is_err());
    assert_eq!(
        r1.get_wait().unwrap(),
        1,
        "the unwritten writer passed the old value through"
    );
    assert_poison_chain(&r2.get_wait().unwrap_err(), "write(`y`@2", "invalid digit");
}

/// A task that got an error and is still pending when its executor is dropped poisons its
/// unwritten buffers as it is dropped.
#[test]
fn pending_task_dropped_with_the_executor_poisons() {
    let (r, w, c) = failed_chain("then stuck");
    let never = Async::new(0);
    let (_blocker, stuck) = (never.write(), never.read());
    let ex = LocalExecutor::new();
    ex.spawn(async move {
        let _ = r.get().await;
        let _ = stuck.get().await; // never ready
        drop(w);
    });
    assert!(matches!(ex.run().unwrap_err(), AsyncError::Deadlock(_)));
    drop(ex);
    assert_poison_chain(&c.y_read.get_wait().unwrap_err(), "write(`y`@1", "then stuck");
}

/// A buffer dropped unwritten by a task that got no error still passes the old value
/// through (the cancellation path is unchanged).
#[test]
fn unwritten_buffer_without_an_error_passes_through() {
    let (_y, w, r) = named_write_read(3, "y");
    let ex = LocalExecutor::new();
    ex.spawn(async move { drop(w) });
    ex.run().unwrap();
    assert_eq!(r.get_wait().unwrap(), 3);
}
