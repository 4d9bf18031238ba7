//! The multi-threaded [`ThreadPoolExecutor`] and its [`JoinHandle`].

use crate::blocking;
use crate::error::AsyncError;
use crate::executor::CatchPanic;
use futures::channel::oneshot;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A multi-threaded executor: a [`futures::executor::ThreadPool`] whose tasks report
/// panics through their [`JoinHandle`] (and poison the write buffers they held).
///
/// Buffers wake tasks through wakers, so tasks waiting on epochs (by `.await`) do not
/// occupy a thread. Blocking calls inside its tasks ([`Async::get_wait`](crate::Async::get_wait),
/// the `wait` methods, [`JoinHandle::join`]) work, but park the pool thread until they
/// return: a pool whose threads all block on work queued behind them deadlocks, so prefer
/// `.await` in tasks, and give the pool more threads than the number of tasks that may
/// block at once.
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
    /// Blocks the calling thread (parking it) until the task finishes. Works on any
    /// thread, including the pool's own threads and inside
    /// [`LocalExecutor`](crate::LocalExecutor) tasks (which it blocks, without running
    /// their executor: the pool task must not need them to finish).
    ///
    /// # Errors
    /// [`AsyncError::TaskPanicked`] if the task panicked.
    pub fn join(self) -> Result<T, AsyncError> {
        blocking::park_on(self)
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
        let task = CatchPanic::new(fut, name.into());
        self.pool.spawn_ok(async move {
            let _ = tx.send(task.await);
        });
        JoinHandle { rx }
    }
}
