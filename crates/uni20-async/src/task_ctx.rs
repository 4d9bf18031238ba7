//! Thread-local bookkeeping of the task being polled: which buffers a
//! [`LocalExecutor`](crate::LocalExecutor) task waits on (for deadlock dumps), the panic a
//! dropped write buffer must record, and the first error buffer operations handed to the
//! task (which its unwritten write buffers inherit when dropped). Outside an executor's
//! poll this is all inert.

use crate::epoch::{Core, Kind};
use crate::error::{AsyncError, PanicError, SharedError};
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

/// The number of waits recorded so far in this poll (see [`truncate_waits`]).
pub(crate) fn waits_mark() -> usize {
    WAITS.with(|w| w.borrow().len())
}

/// Forgets the waits recorded after `mark`: a blocking wait polls buffers on the task's
/// behalf, and those polls are not what the task waits on when it returns `Pending`.
pub(crate) fn truncate_waits(mark: usize) {
    WAITS.with(|w| w.borrow_mut().truncate(mark));
}

/// Marks `tag` as the task being polled until the returned guard drops, and collects the
/// waits it records. Scopes nest (a blocking wait inside a task polls other tasks): the
/// enclosing task's tag and recorded waits are restored on drop.
pub(crate) struct PollScope {
    prev: Option<TaskTag>,
    prev_waits: Vec<WaitRecord>,
}

impl PollScope {
    pub(crate) fn enter(tag: TaskTag) -> Self {
        let prev = CURRENT.with(|c| c.replace(Some(tag)));
        let prev_waits = WAITS.with(|w| std::mem::take(&mut *w.borrow_mut()));
        PollScope { prev, prev_waits }
    }

    /// Takes the waits recorded since `enter`.
    pub(crate) fn take_waits(&self) -> Vec<WaitRecord> {
        WAITS.with(|w| std::mem::take(&mut *w.borrow_mut()))
    }
}

impl Drop for PollScope {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.prev));
        let prev = std::mem::take(&mut self.prev_waits);
        WAITS.with(|w| *w.borrow_mut() = prev);
    }
}

thread_local! {
    /// `Some` while a task of one of this crate's executors is polled or dropped on this
    /// thread; inside, the first error a buffer operation handed to that task.
    static TASK_FAILURE: RefCell<Option<Option<SharedError>>> = const { RefCell::new(None) };
}

/// Installs a task's failure state for one poll (or its drop). Scopes nest; the enclosing
/// state comes back on [`exit`](FailureScope::exit) or drop.
pub(crate) struct FailureScope {
    prev: Option<Option<SharedError>>,
    active: bool,
    /// The task's state, kept here when the thread-local is gone (thread teardown).
    kept: Option<SharedError>,
}

impl FailureScope {
    /// Enters the scope of a task whose first observed error so far is `state`.
    pub(crate) fn enter(state: Option<SharedError>) -> Self {
        let mut state = Some(state);
        match TASK_FAILURE.try_with(|t| t.borrow_mut().replace(state.take().flatten())) {
            Ok(prev) => FailureScope {
                prev,
                active: true,
                kept: None,
            },
            Err(_) => FailureScope {
                prev: None,
                active: false,
                kept: state.flatten(),
            },
        }
    }

    /// Leaves the scope, returning the task's (possibly updated) state.
    pub(crate) fn exit(mut self) -> Option<SharedError> {
        if !self.active {
            return self.kept.take();
        }
        self.active = false;
        let prev = self.prev.take();
        TASK_FAILURE
            .try_with(|t| std::mem::replace(&mut *t.borrow_mut(), prev))
            .ok()
            .flatten()
            .flatten()
    }
}

impl Drop for FailureScope {
    fn drop(&mut self) {
        if self.active {
            let prev = self.prev.take();
            let _ = TASK_FAILURE.try_with(|t| {
                if let Ok(mut t) = t.try_borrow_mut() {
                    *t = prev;
                }
            });
        }
    }
}

/// Records that a buffer operation is handing `err` to the task being polled (the first
/// such error is kept), and returns it. Outside a task this only returns `err`.
pub(crate) fn observed(err: AsyncError) -> AsyncError {
    let _ = TASK_FAILURE.try_with(|t| {
        if let Ok(mut t) = t.try_borrow_mut() {
            if let Some(slot @ None) = t.as_mut() {
                *slot = Some(std::sync::Arc::new(err.clone()));
            }
        }
    });
    err
}

/// The first error buffer operations handed to the task being polled, if any: what an
/// unwritten write buffer dropped now must be poisoned with.
pub(crate) fn task_failure() -> Option<SharedError> {
    TASK_FAILURE
        .try_with(|t| t.try_borrow().ok().and_then(|t| t.clone().flatten()))
        .ok()
        .flatten()
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
