//! The crate's error type.

use std::error::Error as StdError;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// A shared, thread-safe error value, as stored in a poisoned epoch.
pub type SharedError = Arc<dyn StdError + Send + Sync + 'static>;

/// Everything that can go wrong when awaiting a buffer or running an executor.
///
/// "No value" ([`AsyncError::NoValue`]) and "an upstream task failed"
/// ([`AsyncError::Poisoned`]) are deliberately different variants: the first is the
/// cancellation of upstream Uni20 (the slot was never filled, or was `take`n), the second
/// is an error that some writer recorded.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AsyncError {
    /// The epoch being accessed was poisoned by a failed writer (an explicit
    /// [`WriteBuffer::fail`](crate::WriteBuffer::fail), a writer dropped during a panic, or
    /// a writer dropped unwritten by a task that had been handed an error), either in this
    /// epoch or in an earlier one: poison is sticky. See the crate docs, "Failures".
    #[error("{buffer}: poisoned by {origin}: {message}")]
    Poisoned {
        /// The buffer that observed the poison, e.g. ``read(`x`@3 #7)``.
        buffer: String,
        /// The epoch of that buffer.
        epoch: u64,
        /// The writer that failed, e.g. ``write(`x`@2 #5)``.
        origin: String,
        /// The epoch whose writer failed (`<= epoch`).
        origin_epoch: u64,
        /// `source.to_string()`, kept for convenience.
        message: String,
        /// The error the writer failed with.
        source: SharedError,
    },
    /// The epoch became readable but the slot holds no value: the `Async` was created empty
    /// and its writer released without writing, or a writer `take`-ed the value.
    #[error("{buffer}: no value")]
    NoValue {
        /// The buffer that found no value.
        buffer: String,
        /// The epoch of that buffer.
        epoch: u64,
    },
    /// A deterministic executor ran out of runnable tasks while some were still waiting.
    #[error("{0}")]
    Deadlock(DeadlockReport),
    /// A task panicked; its write buffers were poisoned with the panic message.
    #[error("task {task} panicked: {message}")]
    TaskPanicked {
        /// The task's id and name, e.g. `3 "writer"`.
        task: String,
        /// The panic payload, if it was a string.
        message: String,
    },
    /// A blocking wait inside a [`LocalExecutor`](crate::LocalExecutor) task ran the
    /// executor's other tasks until none was runnable, and the buffer is still not ready:
    /// blocking the thread could never finish, because the tasks that could make it ready
    /// run on this thread (or are the waiting tasks themselves, further up the stack).
    #[error("blocking wait on {buffer} inside a LocalExecutor task would deadlock; await it instead")]
    WouldBlock {
        /// The buffer that was waited on.
        buffer: String,
    },
    /// An executor could not be created (for example, the OS refused to spawn threads).
    #[error("executor error: {0}")]
    Executor(String),
}

impl AsyncError {
    /// `true` for [`AsyncError::NoValue`]: the "cancelled" outcome rather than an error.
    pub fn is_no_value(&self) -> bool {
        matches!(self, AsyncError::NoValue { .. })
    }

    /// `true` for [`AsyncError::Poisoned`].
    pub fn is_poisoned(&self) -> bool {
        matches!(self, AsyncError::Poisoned { .. })
    }
}

/// One task that was still waiting when a [`LocalExecutor`](crate::LocalExecutor) stalled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedTask {
    /// The executor's id for the task (spawn order, from 0).
    pub id: u64,
    /// The name given at spawn time (empty if none).
    pub name: String,
    /// One line per buffer the task was waiting on at its last poll, each naming the buffer
    /// (``read(`x`@1 #4)``) and what blocks it (the holder of an earlier epoch, or a missing
    /// writer). Empty if the task was waiting on something that is not a buffer.
    pub waits: Vec<String>,
}

/// The dump a [`LocalExecutor`](crate::LocalExecutor) returns instead of hanging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadlockReport {
    /// Every task still pending, in spawn order.
    pub blocked: Vec<BlockedTask>,
}

impl fmt::Display for DeadlockReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "DEADLOCK: {} task(s) waiting and none runnable", self.blocked.len())?;
        for t in &self.blocked {
            if t.name.is_empty() {
                writeln!(f, "  task {}:", t.id)?;
            } else {
                writeln!(f, "  task {} {:?}:", t.id, t.name)?;
            }
            if t.waits.is_empty() {
                writeln!(f, "    waiting on something that is not an Async buffer")?;
            }
            for w in &t.waits {
                writeln!(f, "    {w}")?;
            }
        }
        Ok(())
    }
}

/// The error stored when a task panics while holding a write buffer.
///
/// The panic message is filled in once the executor has caught the panic
/// ([`LocalExecutor`](crate::LocalExecutor), [`ThreadPoolExecutor`](crate::ThreadPoolExecutor));
/// on a plain thread, or if read before the catch, it says only that the writer was dropped
/// during a panic.
#[derive(Debug, Clone)]
pub struct PanicError {
    message: Arc<OnceLock<String>>,
}

impl PanicError {
    pub(crate) fn pending() -> Self {
        PanicError {
            message: Arc::new(OnceLock::new()),
        }
    }

    pub(crate) fn with_message(message: String) -> Self {
        let e = Self::pending();
        let _ = e.message.set(message);
        e
    }

    pub(crate) fn fill(&self, message: &str) {
        let _ = self.message.set(message.to_string());
    }

    /// The panic message, if known.
    pub fn message(&self) -> Option<&str> {
        self.message.get().map(String::as_str)
    }
}

impl fmt::Display for PanicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.message() {
            Some(m) => write!(f, "writer panicked: {m}"),
            None => write!(f, "writer dropped during a panic"),
        }
    }
}

impl StdError for PanicError {}
