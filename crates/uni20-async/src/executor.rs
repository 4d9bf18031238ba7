//! The task wrapper both executors share ([`CatchPanic`]: panics and handed-back errors
//! reach the task's write buffers), and the deterministic [`LocalExecutor`] for tests,
//! including the "help while waiting" loop its tasks' blocking waits run. The
//! multi-threaded executor is in `pool.rs`.
//!
//! Both executors catch panics in tasks. The future of a task that panicked is dropped with
//! the panic message recorded, so every [`WriteBuffer`](crate::WriteBuffer) it held poisons
//! its epoch with a [`PanicError`](crate::PanicError) carrying that message.

use crate::error::{AsyncError, BlockedTask, DeadlockReport, SharedError};
use crate::task_ctx::{self, FailureScope, PollScope, TaskTag, WaitRecord};
use futures::task::ArcWake;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

static NEXT_EXECUTOR_ID: AtomicU64 = AtomicU64::new(0);

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Runs a task's future:
/// - turns a panic into [`AsyncError::TaskPanicked`]; the future is then dropped with the
///   panic message recorded, so its write buffers poison their epochs;
/// - keeps the task's failure state (the first error buffer operations handed to it)
///   across polls, and installs it while the future is polled or dropped, so that its
///   unwritten write buffers inherit that error when dropped.
pub(crate) struct CatchPanic<F> {
    fut: Option<Pin<Box<F>>>,
    label: String,
    failure: Option<SharedError>,
}

impl<F> CatchPanic<F> {
    pub(crate) fn new(fut: F, label: String) -> Self {
        CatchPanic {
            fut: Some(Box::pin(fut)),
            label,
            failure: None,
        }
    }
}

impl<F> Drop for CatchPanic<F> {
    /// A task dropped unfinished (its executor was dropped) drops its buffers inside its
    /// failure scope, like a finishing one.
    fn drop(&mut self) {
        if let Some(fut) = self.fut.take() {
            let scope = FailureScope::enter(self.failure.take());
            drop(fut);
            drop(scope.exit());
        }
    }
}

impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, AsyncError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(fut) = this.fut.as_mut() else {
            return Poll::Pending;
        };
        task_ctx::clear_unfilled_panics();
        let scope = FailureScope::enter(this.failure.take());
        let polled = catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx)));
        if matches!(polled, Ok(Poll::Ready(_))) {
            // A hand-written future may still hold buffers: drop them in the scope.
            this.fut = None;
        }
        this.failure = scope.exit();
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(payload) => {
                let message = panic_message(&*payload);
                task_ctx::fill_panics(&message);
                task_ctx::drop_after_panic(message.clone(), this.fut.take());
                Poll::Ready(Err(AsyncError::TaskPanicked {
                    task: this.label.clone(),
                    message,
                }))
            }
        }
    }
}

impl<F> Unpin for CatchPanic<F> {}

// ---------------------------------------------------------------------------------------
// LocalExecutor
// ---------------------------------------------------------------------------------------

type Queue = Arc<parking_lot::Mutex<VecDeque<u64>>>;

struct TaskWaker {
    task: u64,
    /// `true` while the task's id is in the run queue.
    queued: AtomicBool,
    queue: Queue,
}

impl ArcWake for TaskWaker {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        if !arc_self.queued.swap(true, Ordering::AcqRel) {
            arc_self.queue.lock().push_back(arc_self.task);
        }
    }
}

struct TaskEntry {
    name: String,
    fut: Option<Pin<Box<dyn Future<Output = ()>>>>,
    /// Being polled (its future is out of `fut`), possibly further up this thread's stack
    /// while a blocking wait of it runs other tasks.
    running: bool,
    waker: Arc<TaskWaker>,
    waits: Vec<WaitRecord>,
}

/// The state of a [`LocalExecutor`], shared with the blocking waits of its tasks.
pub(crate) struct LocalInner {
    id: u64,
    tasks: RefCell<Vec<TaskEntry>>,
    queue: Queue,
    /// Panics of tasks other than a `block_on` future, not yet returned by `run`.
    panics: Rc<RefCell<VecDeque<AsyncError>>>,
}

thread_local! {
    /// The `LocalExecutor`s polling a task on this thread, innermost last.
    static DRIVING: RefCell<Vec<Rc<LocalInner>>> = const { RefCell::new(Vec::new()) };
}

/// The `LocalExecutor` whose task this thread is polling, if any.
pub(crate) fn current_local() -> Option<Rc<LocalInner>> {
    DRIVING.try_with(|d| d.borrow().last().cloned()).ok().flatten()
}

/// Pops `DRIVING` when a poll ends (even by unwinding).
struct Driving;

impl Driving {
    fn enter(inner: &Rc<LocalInner>) -> Self {
        DRIVING.with(|d| d.borrow_mut().push(inner.clone()));
        Driving
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        let _ = DRIVING.try_with(|d| d.borrow_mut().pop());
    }
}

/// Wake-up flag of a blocking wait inside a `LocalExecutor` task.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

impl LocalInner {
    /// Polls one queued task. Returns `false` if no task is runnable (the queue is empty,
    /// or holds only tasks that are being polled further up the stack).
    fn step(self: &Rc<Self>) -> bool {
        let (id, mut fut, waker) = {
            let mut queue = self.queue.lock();
            let mut tasks = self.tasks.borrow_mut();
            // Tasks woken while they are being polled further up the stack stay queued,
            // in order, for when they return.
            let mut running = Vec::new();
            let found = loop {
                let Some(id) = queue.pop_front() else { break None };
                let t = &mut tasks[id as usize];
                if t.running {
                    running.push(id);
                    continue;
                }
                match t.fut.take() {
                    // Finished already: a stale wake-up.
                    None => continue,
                    Some(fut) => {
                        t.running = true;
                        break Some((id, fut, t.waker.clone()));
                    }
                }
            };
            for id in running.into_iter().rev() {
                queue.push_front(id);
            }
            match found {
                Some(f) => f,
                None => return false,
            }
        };
        waker.queued.store(false, Ordering::Release);
        let w = futures::task::waker(waker);
        let mut cx = Context::from_waker(&w);
        let res = {
            let _driving = Driving::enter(self);
            let scope = PollScope::enter(TaskTag {
                exec: self.id,
                task: id,
            });
            let res = fut.as_mut().poll(&mut cx);
            (res, scope.take_waits())
        };
        let (res, waits) = res;
        let mut tasks = self.tasks.borrow_mut();
        let t = &mut tasks[id as usize];
        t.running = false;
        if res.is_pending() {
            t.fut = Some(fut);
            t.waits = waits;
        } else {
            t.waits.clear();
            drop(tasks);
            drop(fut);
        }
        true
    }

    /// Runs other tasks of this executor until `fut` is ready: the blocking wait of a task
    /// being polled by this executor. `None` if no task is runnable while `fut` is still
    /// pending (blocking would never end: the tasks that could wake it run on this thread).
    pub(crate) fn help_until<F: Future + ?Sized>(self: &Rc<Self>, mut fut: Pin<&mut F>) -> Option<F::Output> {
        let flag = Arc::new(Flag(AtomicBool::new(true)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        loop {
            if flag.0.swap(false, Ordering::AcqRel) {
                // Polled on the task's behalf: not a wait of the task itself.
                let mark = task_ctx::waits_mark();
                let res = fut.as_mut().poll(&mut cx);
                task_ctx::truncate_waits(mark);
                if let Poll::Ready(v) = res {
                    return Some(v);
                }
            } else if !self.step() && !flag.0.load(Ordering::Acquire) {
                return None;
            }
        }
    }

    fn pending(&self) -> usize {
        self.tasks
            .borrow()
            .iter()
            .filter(|t| t.fut.is_some() || t.running)
            .count()
    }

    fn report(&self) -> DeadlockReport {
        let tasks = self.tasks.borrow();
        let blocked = tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.fut.is_some() || t.running)
            .map(|(id, t)| BlockedTask {
                id: id as u64,
                name: t.name.clone(),
                waits: t
                    .waits
                    .iter()
                    .map(|w| w.core.explain_wait(w.epoch, w.kind, w.id))
                    .collect(),
            })
            .collect();
        DeadlockReport { blocked }
    }
}

/// A deterministic, single-threaded executor for tests.
///
/// Tasks run in FIFO order of wake-ups (spawn order first), one poll at a time, on the
/// thread that calls [`run`](LocalExecutor::run) or [`block_on`](LocalExecutor::block_on).
/// Given the same program, every run interleaves the same way.
///
/// When no task is runnable but some are still waiting, it does not hang: it returns
/// [`AsyncError::Deadlock`] with a dump of every waiting task, the buffers it waits on
/// (``write(`x`@1 #3)``) and what blocks each of them (the earlier epoch's live writer or
/// readers, with the task that created or awaited them). It therefore assumes every wake-up
/// comes from its own tasks: a task waiting on another thread is reported as deadlocked.
///
/// Blocking calls ([`Async::get_wait`](crate::Async::get_wait) and the `wait` methods)
/// inside its tasks do not block the thread: they run the executor's other runnable tasks,
/// in the same FIFO order, until the value is ready (upstream's `DebugScheduler` does the
/// same). Such waits nest: a task run by a waiting task may itself wait. They return
/// [`AsyncError::WouldBlock`] when no runnable task is left and the value is still not
/// ready, including when only a task further up the stack of waits could make it ready
/// (that task cannot continue until the waits above it return).
/// [`JoinHandle::join`](crate::JoinHandle::join) is the exception: it parks the thread.
///
/// # Panics in tasks
///
/// Each panic it catches is reported exactly once: a panic of the future given to
/// [`block_on`](LocalExecutor::block_on) by that `block_on`, every other one by
/// [`run`](LocalExecutor::run), one per call, in the order they happened. A task's own
/// handle ([`LocalHandle::try_take`]) gives its panic as well.
pub struct LocalExecutor {
    inner: Rc<LocalInner>,
}

/// Handle to the output of a [`LocalExecutor`] task.
pub struct LocalHandle<T> {
    slot: Rc<RefCell<Option<Result<T, AsyncError>>>>,
}

impl<T> LocalHandle<T> {
    /// `true` once the task finished or panicked.
    pub fn is_finished(&self) -> bool {
        self.slot.borrow().is_some()
    }

    /// The task's output: `None` while it has not finished (or was already taken),
    /// `Some(Err(AsyncError::TaskPanicked))` if it panicked.
    pub fn try_take(&self) -> Option<Result<T, AsyncError>> {
        self.slot.borrow_mut().take()
    }
}

impl<T> fmt::Debug for LocalHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl Default for LocalExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for LocalExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalExecutor")
            .field("id", &self.inner.id)
            .field("tasks", &self.inner.tasks.borrow().len())
            .field("pending", &self.pending())
            .finish()
    }
}

impl LocalExecutor {
    /// An executor with no tasks.
    pub fn new() -> Self {
        LocalExecutor {
            inner: Rc::new(LocalInner {
                id: NEXT_EXECUTOR_ID.fetch_add(1, Ordering::Relaxed),
                tasks: RefCell::new(Vec::new()),
                queue: Arc::new(parking_lot::Mutex::new(VecDeque::new())),
                panics: Rc::new(RefCell::new(VecDeque::new())),
            }),
        }
    }

    /// Queues `fut` as a new task (it first runs at the next `run`/`block_on`).
    pub fn spawn<F>(&self, fut: F) -> LocalHandle<F::Output>
    where
        F: Future + 'static,
    {
        self.spawn_named("", fut)
    }

    /// As [`spawn`](LocalExecutor::spawn), with a name shown in deadlock dumps and panic
    /// errors.
    pub fn spawn_named<F>(&self, name: impl Into<String>, fut: F) -> LocalHandle<F::Output>
    where
        F: Future + 'static,
    {
        self.spawn_inner(name.into(), fut, Rc::new(Cell::new(true)))
    }

    /// `report_panic`: queue a panic of this task for `run` (read when it panics; false
    /// only for a `block_on` future while `block_on` is still there to return it).
    fn spawn_inner<F>(&self, name: String, fut: F, report_panic: Rc<Cell<bool>>) -> LocalHandle<F::Output>
    where
        F: Future + 'static,
    {
        let inner = &self.inner;
        let mut tasks = inner.tasks.borrow_mut();
        let id = tasks.len() as u64;
        let label = if name.is_empty() {
            id.to_string()
        } else {
            format!("{id} {name:?}")
        };
        let slot = Rc::new(RefCell::new(None));
        let out = slot.clone();
        let panics = inner.panics.clone();
        let wrapped = async move {
            let r = CatchPanic::new(fut, label).await;
            if let (Err(e), true) = (&r, report_panic.get()) {
                panics.borrow_mut().push_back(e.clone());
            }
            *out.borrow_mut() = Some(r);
        };
        let waker = Arc::new(TaskWaker {
            task: id,
            queued: AtomicBool::new(true),
            queue: inner.queue.clone(),
        });
        tasks.push(TaskEntry {
            name,
            fut: Some(Box::pin(wrapped)),
            running: false,
            waker,
            waits: Vec::new(),
        });
        inner.queue.lock().push_back(id);
        LocalHandle { slot }
    }

    /// Number of tasks not finished yet.
    pub fn pending(&self) -> usize {
        self.inner.pending()
    }

    /// Runs until every task has finished, or none is runnable.
    ///
    /// # Errors
    /// - [`AsyncError::TaskPanicked`] for the earliest task panic not reported yet (see
    ///   "Panics in tasks" above; the other tasks still ran as far as they could, and a
    ///   further panic waits for the next call);
    /// - otherwise [`AsyncError::Deadlock`] if tasks remain but none is runnable (the tasks
    ///   stay in the executor; dropping it drops them and releases their buffers). A
    ///   deadlock is a state, not an event: every `run` that finds it reports it.
    pub fn run(&self) -> Result<(), AsyncError> {
        while self.inner.step() {}
        if let Some(panic) = self.inner.panics.borrow_mut().pop_front() {
            return Err(panic);
        }
        if self.pending() > 0 {
            return Err(AsyncError::Deadlock(self.inner.report()));
        }
        Ok(())
    }

    /// Spawns `fut` and runs tasks until it finishes (other tasks may stay pending;
    /// a later `run` continues them, and reports their panics). This is the deterministic
    /// `get_wait`.
    ///
    /// # Errors
    /// [`AsyncError::Deadlock`] if `fut` is still waiting when no task is runnable (`fut`
    /// then stays in the executor as a task named `block_on`, which a later `run` may
    /// finish; its output is dropped, and `run` reports it if it panics);
    /// [`AsyncError::TaskPanicked`] if `fut` panicked (reported here only, not by `run`).
    pub fn block_on<F>(&self, fut: F) -> Result<F::Output, AsyncError>
    where
        F: Future + 'static,
    {
        let report_panic = Rc::new(Cell::new(false));
        let h = self.spawn_inner("block_on".to_string(), fut, report_panic.clone());
        loop {
            if let Some(r) = h.try_take() {
                return r;
            }
            if !self.inner.step() {
                report_panic.set(true);
                return Err(AsyncError::Deadlock(self.inner.report()));
            }
        }
    }
}
