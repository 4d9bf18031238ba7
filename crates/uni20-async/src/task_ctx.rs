//! Thread-local bookkeeping that lets [`LocalExecutor`](crate::LocalExecutor) say which
//! task waits on which buffer. Outside a `LocalExecutor` poll this is all inert.

use crate::epoch::{Core, Kind};
use crate::error::PanicError;
use crate::sync::Arc;
use std::cell::{Cell, RefCell};

/// Identifies one task of one executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskTag {
    pub(crate) exec: u64,
    pub(crate) task: u64,
}

/// "This task, at its last poll, waited on this buffer."
pub(crate) struct WaitRecord {
    pub(crate) core: Arc<Core>,
    pub(crate) epoch: u64,
    pub(crate) kind: Kind,
    pub(crate) id: u64,
}

thread_local! {
    static CURRENT: Cell<Option<TaskTag>> = const { Cell::new(None) };
    static WAITS: RefCell<Vec<WaitRecord>> = const { RefCell::new(Vec::new()) };
}

/// The task being polled on this thread by a `LocalExecutor`, if any.
pub(crate) fn current() -> Option<TaskTag> {
    CURRENT.with(|c| c.get())
}

/// Records a pending wait for the current task (no-op outside a `LocalExecutor` poll).
pub(crate) fn record_wait(core: &Arc<Core>, epoch: u64, kind: Kind, id: u64) {
    if current().is_some() {
        WAITS.with(|w| {
            w.borrow_mut().push(WaitRecord {
                core: core.clone(),
                epoch,
                kind,
                id,
            })
        });
    }
}

/// Marks `tag` as the task being polled until the returned guard drops, and collects the
/// waits it records.
pub(crate) struct PollScope {
    prev: Option<TaskTag>,
}

impl PollScope {
    pub(crate) fn enter(tag: TaskTag) -> Self {
        let prev = CURRENT.with(|c| c.replace(Some(tag)));
        WAITS.with(|w| w.borrow_mut().clear());
        PollScope { prev }
    }

    /// Takes the waits recorded since `enter`.
    pub(crate) fn take_waits(&self) -> Vec<WaitRecord> {
        WAITS.with(|w| std::mem::take(&mut *w.borrow_mut()))
    }
}

impl Drop for PollScope {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.prev));
    }
}

thread_local! {
    static DROPPING_AFTER_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
    static UNFILLED_PANICS: RefCell<Vec<PanicError>> = const { RefCell::new(Vec::new()) };
}

/// The poison a write buffer dropped now must store, if any: during a panic (its message is
/// filled in when an executor catches it), or while an executor drops a panicked task.
pub(crate) fn panic_poison() -> Option<PanicError> {
    if let Some(m) = DROPPING_AFTER_PANIC.with(|d| d.borrow().clone()) {
        return Some(PanicError::with_message(m));
    }
    if std::thread::panicking() {
        let e = PanicError::pending();
        UNFILLED_PANICS.with(|u| u.borrow_mut().push(e.clone()));
        return Some(e);
    }
    None
}

/// Forgets unfilled panic errors left by earlier, unrelated panics on this thread.
pub(crate) fn clear_unfilled_panics() {
    UNFILLED_PANICS.with(|u| {
        if let Ok(mut u) = u.try_borrow_mut() {
            u.clear();
        }
    });
}

/// Fills the message of every panic error created since the last clear.
pub(crate) fn fill_panics(message: &str) {
    UNFILLED_PANICS.with(|u| {
        for e in u.borrow_mut().drain(..) {
            e.fill(message);
        }
    });
}

/// Drops `value` with writer drops poisoning their epochs with `message`.
pub(crate) fn drop_after_panic<V>(message: String, value: V) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            DROPPING_AFTER_PANIC.with(|d| *d.borrow_mut() = None);
        }
    }
    DROPPING_AFTER_PANIC.with(|d| *d.borrow_mut() = Some(message));
    let _reset = Reset;
    drop(value);
}
