//! Thread-local bookkeeping that lets [`LocalExecutor`](crate::LocalExecutor) say which
//! task waits on which buffer. Outside a `LocalExecutor` poll this is all inert.

use crate::epoch::{Core, Kind};
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
}

/// While an executor drops the future of a task that panicked, the panic message; write
/// buffers dropped then poison their epochs with it.
pub(crate) fn dropping_after_panic() -> Option<String> {
    DROPPING_AFTER_PANIC.with(|d| d.borrow().clone())
}

/// Drops `value` with [`dropping_after_panic`] set to `message`.
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
