//! Each panic a `LocalExecutor` catches is reported exactly once by `run`/`block_on`:
//! `block_on` reports the panic of its own future; `run` reports every other one, one per
//! call, in the order they happened, before it reports a deadlock.

use uni20_async::{AsyncError, LocalExecutor};

mod common;
use common::named_write_read;

fn panic_message(e: &AsyncError) -> &str {
    match e {
        AsyncError::TaskPanicked { message, .. } => message,
        e => panic!("expected a panic, got {e}"),
    }
}

#[test]
fn block_on_panic_is_not_reported_again_by_run() {
    let ex = LocalExecutor::new();
    let e = ex.block_on(async { panic!("in block_on") }).unwrap_err();
    assert_eq!(panic_message(&e), "in block_on");
    ex.run().unwrap();
    // A second block_on that panics is again reported once.
    let e = ex.block_on(async { panic!("again") }).unwrap_err();
    assert_eq!(panic_message(&e), "again");
    ex.run().unwrap();
}

#[test]
fn panic_of_another_task_during_block_on_is_reported_by_run() {
    let ex = LocalExecutor::new();
    let h = ex.spawn_named("bad", async { panic!("other") });
    assert_eq!(ex.block_on(async { 5 }).unwrap(), 5);
    let e = ex.run().unwrap_err();
    assert_eq!(panic_message(&e), "other");
    assert!(matches!(&e, AsyncError::TaskPanicked { task, .. } if task.contains("bad")));
    ex.run().unwrap();
    // The handle still has its own copy.
    assert_eq!(panic_message(&h.try_take().unwrap().unwrap_err()), "other");
}

#[test]
fn several_panics_are_each_reported_once_in_order() {
    let ex = LocalExecutor::new();
    ex.spawn(async { panic!("first") });
    ex.spawn(async {});
    ex.spawn(async { panic!("second") });
    assert_eq!(panic_message(&ex.run().unwrap_err()), "first");
    assert_eq!(panic_message(&ex.run().unwrap_err()), "second");
    ex.run().unwrap();
}

#[test]
fn a_deadlock_does_not_swallow_a_panic() {
    let (_x, w, r) = named_write_read(0, "x");
    let ex = LocalExecutor::new();
    ex.spawn_named("stuck", async move { r.get().await.copied() });
    ex.spawn(async { panic!("lost?") });
    assert_eq!(panic_message(&ex.run().unwrap_err()), "lost?");
    // The deadlock is a state, not an event: it is reported by the next run, and again
    // as long as it lasts.
    assert!(matches!(ex.run().unwrap_err(), AsyncError::Deadlock(_)));
    assert!(matches!(ex.run().unwrap_err(), AsyncError::Deadlock(_)));
    drop(w);
    ex.run().unwrap();
}

#[test]
fn block_on_deadlock_keeps_other_panics_for_run() {
    let (_x, _w, r) = named_write_read(0, "x");
    let ex = LocalExecutor::new();
    ex.spawn(async { panic!("before the deadlock") });
    let e = ex.block_on(async move { r.get().await.copied() }).unwrap_err();
    assert!(matches!(e, AsyncError::Deadlock(_)), "{e}");
    assert_eq!(panic_message(&ex.run().unwrap_err()), "before the deadlock");
}

/// A `block_on` future left behind by a deadlock and finished by a later `run` has no
/// `block_on` left to report its panic: `run` does.
#[test]
fn deadlocked_block_on_future_that_later_panics_is_reported_by_run() {
    let (_x, w, r) = named_write_read(0, "x");
    let ex = LocalExecutor::new();
    let e = ex
        .block_on(async move {
            let _ = r.get().await;
            panic!("after the deadlock");
        })
        .unwrap_err();
    assert!(matches!(e, AsyncError::Deadlock(_)), "{e}");
    drop(w);
    assert_eq!(panic_message(&ex.run().unwrap_err()), "after the deadlock");
    ex.run().unwrap();
}
