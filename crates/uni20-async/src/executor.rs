//! Executors: the deterministic [`LocalExecutor`] for tests, and the multi-threaded
//! [`ThreadPoolExecutor`].
//!
//! Both catch panics in tasks. The future of a task that panicked is dropped with the panic
//! message recorded, so every [`WriteBuffer`](crate::WriteBuffer) it held poisons its epoch
//! with a [`PanicError`](crate::PanicError) carrying that message.

use crate::error::{AsyncError, BlockedTask, DeadlockReport};
use crate::task_ctx::{self, PollScope, TaskTag, WaitRecord};
use futures::channel::oneshot;
use futures::task::ArcWake;
use std::any::Any;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

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

/// Runs a future, turning a panic into [`AsyncError::TaskPanicked`]; the future is then
/// dropped with the panic message recorded, so its write buffers poison their epochs.
struct CatchPanic<F> {
    fut: Option<Pin<Box<F>>>,
    label: String,
}

impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, AsyncError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(fut) = this.fut.as_mut() else {
            return Poll::Pending;
        };
        task_ctx::clear_unfilled_panics();
        match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => {
                this.fut = None;
                Poll::Ready(Ok(v))
            }
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
    waker: Arc<TaskWaker>,
    waits: Vec<WaitRecord>,
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
/// Blocking calls ([`Async::get_wait`](crate::Async::get_wait) and friends) inside its tasks
/// return [`AsyncError::WouldBlock`] instead of blocking when the buffer is not ready.
pub struct LocalExecutor {
    id: u64,
    tasks: RefCell<Vec<TaskEntry>>,
    queue: Queue,
    panics: Rc<RefCell<Vec<AsyncError>>>,
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
            .field("id", &self.id)
            .field("tasks", &self.tasks.borrow().len())
            .field("pending", &self.pending())
            .finish()
    }
}

impl LocalExecutor {
    /// An executor with no tasks.
    pub fn new() -> Self {
        LocalExecutor {
            id: NEXT_EXECUTOR_ID.fetch_add(1, Ordering::Relaxed),
            tasks: RefCell::new(Vec::new()),
            queue: Arc::new(parking_lot::Mutex::new(VecDeque::new())),
            panics: Rc::new(RefCell::new(Vec::new())),
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
        let name = name.into();
        let mut tasks = self.tasks.borrow_mut();
        let id = tasks.len() as u64;
        let label = if name.is_empty() {
            id.to_string()
        } else {
            format!("{id} {name:?}")
        };
        let slot = Rc::new(RefCell::new(None));
        let out = slot.clone();
        let panics = self.panics.clone();
        let wrapped = async move {
            let r = CatchPanic {
                fut: Some(Box::pin(fut)),
                label,
            }
            .await;
            if let Err(e) = &r {
                panics.borrow_mut().push(e.clone());
            }
            *out.borrow_mut() = Some(r);
        };
        let waker = Arc::new(TaskWaker {
            task: id,
            queued: AtomicBool::new(true),
            queue: self.queue.clone(),
        });
        tasks.push(TaskEntry {
            name,
            fut: Some(Box::pin(wrapped)),
            waker,
            waits: Vec::new(),
        });
        self.queue.lock().push_back(id);
        LocalHandle { slot }
    }

    /// Number of tasks not finished yet.
    pub fn pending(&self) -> usize {
        self.tasks.borrow().iter().filter(|t| t.fut.is_some()).count()
    }

    /// Polls one queued task. Returns `false` if the run queue was empty.
    fn step(&self) -> bool {
        let Some(id) = self.queue.lock().pop_front() else {
            return false;
        };
        let (fut, waker) = {
            let mut tasks = self.tasks.borrow_mut();
            let t = &mut tasks[id as usize];
            (t.fut.take(), t.waker.clone())
        };
        let Some(mut fut) = fut else {
            return true; // finished already; stale wake-up
        };
        waker.queued.store(false, Ordering::Release);
        let w = futures::task::waker(waker);
        let mut cx = Context::from_waker(&w);
        let scope = PollScope::enter(TaskTag {
            exec: self.id,
            task: id,
        });
        let res = fut.as_mut().poll(&mut cx);
        let waits = scope.take_waits();
        drop(scope);
        let mut tasks = self.tasks.borrow_mut();
        let t = &mut tasks[id as usize];
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

    fn report(&self) -> DeadlockReport {
        let tasks = self.tasks.borrow();
        let blocked = tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.fut.is_some())
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

    fn take_panic(&self) -> Result<(), AsyncError> {
        let mut p = self.panics.borrow_mut();
        if p.is_empty() {
            Ok(())
        } else {
            let first = p.remove(0);
            p.clear();
            Err(first)
        }
    }

    /// Runs until every task has finished.
    ///
    /// # Errors
    /// - [`AsyncError::Deadlock`] if tasks remain but none is runnable (the tasks stay
    ///   in the executor; dropping it drops them and releases their buffers);
    /// - otherwise [`AsyncError::TaskPanicked`] for the first task that panicked during
    ///   this run (the other tasks still ran to completion).
    pub fn run(&self) -> Result<(), AsyncError> {
        while self.step() {}
        if self.pending() > 0 {
            self.panics.borrow_mut().clear();
            return Err(AsyncError::Deadlock(self.report()));
        }
        self.take_panic()
    }

    /// Spawns `fut` and runs tasks until it finishes (other tasks may stay pending;
    /// a later `run` continues them). This is the deterministic `get_wait`.
    ///
    /// # Errors
    /// [`AsyncError::Deadlock`] if `fut` is still waiting when no task is runnable;
    /// [`AsyncError::TaskPanicked`] if `fut` panicked.
    pub fn block_on<F>(&self, fut: F) -> Result<F::Output, AsyncError>
    where
        F: Future + 'static,
    {
        let h = self.spawn_named("block_on", fut);
        loop {
            if let Some(r) = h.try_take() {
                return r;
            }
            if !self.step() {
                return Err(AsyncError::Deadlock(self.report()));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// ThreadPoolExecutor
// ---------------------------------------------------------------------------------------

/// A multi-threaded executor: a [`futures::executor::ThreadPool`] whose tasks report
/// panics through their [`JoinHandle`] (and poison the write buffers they held).
///
/// Buffers wake tasks through wakers, so tasks waiting on epochs do not occupy a thread.
/// Avoid blocking calls (`get_wait`, `wait`) inside its tasks: they block a pool thread.
#[derive(Debug, Clone)]
pub struct ThreadPoolExecutor {
    pool: futures::executor::ThreadPool,
}

/// Handle to a [`ThreadPoolExecutor`] task. Awaiting it (or [`join`](JoinHandle::join))
/// gives the task's output; dropping it does not cancel the task.
#[derive(Debug)]
pub struct JoinHandle<T> {
    rx: oneshot::Receiver<Result<T, AsyncError>>,
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, AsyncError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.get_mut().rx).poll(cx).map(|r| {
            r.unwrap_or_else(|_| {
                Err(AsyncError::TaskPanicked {
                    task: "?".to_string(),
                    message: "task dropped without finishing (executor shut down)".to_string(),
                })
            })
        })
    }
}

impl<T> JoinHandle<T> {
    /// Blocks the calling thread until the task finishes.
    ///
    /// # Errors
    /// [`AsyncError::TaskPanicked`] if the task panicked.
    pub fn join(self) -> Result<T, AsyncError> {
        futures::executor::block_on(self)
    }
}

impl ThreadPoolExecutor {
    /// A pool of `threads` worker threads (`threads == 0` means one per CPU).
    ///
    /// # Errors
    /// [`AsyncError::Executor`] if the threads cannot be spawned.
    pub fn new(threads: usize) -> Result<Self, AsyncError> {
        let mut b = futures::executor::ThreadPool::builder();
        b.name_prefix("uni20-async-");
        if threads > 0 {
            b.pool_size(threads);
        }
        let pool = b.create().map_err(|e| AsyncError::Executor(e.to_string()))?;
        Ok(ThreadPoolExecutor { pool })
    }

    /// Runs `fut` on the pool.
    pub fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_named("", fut)
    }

    /// As [`spawn`](ThreadPoolExecutor::spawn), with a name used in panic errors.
    pub fn spawn_named<F>(&self, name: impl Into<String>, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let task = CatchPanic {
            fut: Some(Box::pin(fut)),
            label: name.into(),
        };
        self.pool.spawn_ok(async move {
            let _ = tx.send(task.await);
        });
        JoinHandle { rx }
    }
}
