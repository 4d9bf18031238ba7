//! `Async<T>` itself and the value slot it shares with its buffers; the buffers are in
//! `read.rs` and `write.rs`.

use crate::epoch::Core;
use crate::error::AsyncError;
use crate::read::ReadBuffer;
use crate::sync::{Arc, UnsafeCell};
use crate::task_ctx;
use crate::write::WriteBuffer;
use std::fmt;

/// The value slot plus its epoch queue. Shared by the `Async`, every buffer and guard.
pub(crate) struct Shared<T> {
    pub(crate) core: Arc<Core>,
    pub(crate) slot: UnsafeCell<Option<T>>,
}

// SAFETY: the slot is only touched by (a) readers of the front epoch once it is Reading,
// concurrently and immutably (needs `T: Sync`), or (b) the front epoch's single writer while
// no reader of that or an earlier epoch holds a registration, exclusively (needs `T: Send`,
// as the writer may run on any thread). The epoch state machine in `epoch.rs` enforces
// this; `tests/loom.rs` checks it.
unsafe impl<T: Send + Sync> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for Shared<T> {}

impl<T> Shared<T> {
    fn new(value: Option<T>) -> Self {
        let written = value.is_some();
        Shared {
            core: Arc::new(Core::new(written)),
            slot: UnsafeCell::new(value),
        }
    }
}

/// A value with a causal timeline: one slot, read and written in *epochs*.
///
/// Every [`write`](Async::write) opens a new epoch (unless the latest one has no writer
/// yet, see below); every [`read`](Async::read) joins the latest epoch. Which epoch a
/// buffer belongs to is fixed when the buffer is **created**, so the order of
/// `read()`/`write()` calls in program order is the causal order, whatever order tasks
/// later run or await in. See the [`guide`](crate::guide) for the rules.
///
/// `Async<T>` is `Send + Sync` when `T: Send + Sync`; share it between threads by
/// reference or `Arc`. It is deliberately not `Clone`: make buffers instead.
/// Dropping an `Async` does not disturb buffers still in flight; they keep the slot alive.
pub struct Async<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Async<T> {
    /// An `Async` with no value. Epoch 0 has no writer: readers created now wait until
    /// a writer joins epoch 0 (the first `write()`) and releases it. If that writer
    /// releases without writing, they get [`AsyncError::NoValue`].
    pub fn empty() -> Self {
        Async {
            shared: Arc::new(Shared::new(None)),
        }
    }

    /// An `Async` holding `value`. Epoch 0 counts as already written (a phantom writer),
    /// so readers created now are ready at once and the first `write()` opens epoch 1.
    pub fn new(value: T) -> Self {
        Async {
            shared: Arc::new(Shared::new(Some(value))),
        }
    }

    /// Sets the debug name used in errors and deadlock dumps (``read(`x`@3 #7)``).
    pub fn with_name(self, name: impl Into<String>) -> Self {
        self.set_name(name);
        self
    }

    /// Sets or replaces the debug name (also seen by buffers already created).
    pub fn set_name(&self, name: impl Into<String>) {
        let name: String = name.into();
        self.shared.core.set_name(Some(name.into()));
    }

    /// The debug name, if one was set.
    pub fn name(&self) -> Option<String> {
        self.shared.core.name().map(|n| n.to_string())
    }

    /// The number of the latest epoch (0 for a fresh `Async`): the epoch the next
    /// `read()` joins.
    pub fn latest_epoch(&self) -> u64 {
        self.shared.core.latest_epoch()
    }

    /// Registers a reader on the latest epoch. The registration lives until the buffer
    /// (or the guard it turns into) is dropped, and blocks the next epoch's writer until
    /// then, **even if it is never awaited**.
    pub fn read(&self) -> ReadBuffer<T> {
        let (epoch, id) = self.shared.core.add_reader();
        ReadBuffer::new(self.shared.clone(), epoch, id)
    }

    /// Registers a writer. If the latest epoch has no writer yet (only possible for
    /// epoch 0 of [`Async::empty`] before its first `write()`), the writer joins it;
    /// otherwise it opens a new epoch after the latest one. The writer becomes ready
    /// once every earlier epoch has finished (its writer released and every reader
    /// registration dropped).
    pub fn write(&self) -> WriteBuffer<T> {
        let (epoch, id) = self.shared.core.add_writer();
        WriteBuffer::new(self.shared.clone(), epoch, id)
    }

    /// Blocks until the latest epoch is readable, then returns a clone of the value.
    ///
    /// How it blocks depends on where it is called:
    /// - on any thread outside a [`LocalExecutor`](crate::LocalExecutor) task, including
    ///   [`ThreadPoolExecutor`](crate::ThreadPoolExecutor) threads, it parks the thread
    ///   until the epoch is ready, for as long as it takes other threads or tasks to
    ///   release the earlier buffers (forever, if nobody ever will). On a pool thread the
    ///   thread stays occupied meanwhile: if every pool thread blocks on work queued behind
    ///   it, the pool deadlocks.
    /// - inside a `LocalExecutor` task it runs the executor's other runnable tasks (in its
    ///   usual FIFO order) until the epoch is ready; see
    ///   [`AsyncError::WouldBlock`] for when it gives up.
    ///
    /// # Errors
    /// [`AsyncError::NoValue`], [`AsyncError::Poisoned`], or [`AsyncError::WouldBlock`]
    /// inside a `LocalExecutor` task whose executor runs out of runnable tasks while the
    /// value is still not ready.
    pub fn get_wait(&self) -> Result<T, AsyncError>
    where
        T: Clone,
    {
        self.read().get_wait()
    }

    /// Blocks until the latest epoch is readable and holds a value.
    ///
    /// # Errors
    /// As [`Async::get_wait`].
    pub fn wait(&self) -> Result<(), AsyncError> {
        self.read().wait().map(|_| ())
    }

    /// Blocks until a new writer (opened now) is active, moves the value out and leaves
    /// the slot empty; later readers get [`AsyncError::NoValue`] until someone writes.
    ///
    /// # Errors
    /// [`AsyncError::NoValue`] if the slot was empty, [`AsyncError::Poisoned`], or
    /// [`AsyncError::WouldBlock`] as for [`Async::get_wait`].
    pub fn take_wait(&self) -> Result<T, AsyncError> {
        let w = self.write();
        let desc = w.describe();
        let epoch = w.epoch();
        let mut g = w.wait()?;
        g.take()
            .ok_or_else(|| task_ctx::observed(AsyncError::NoValue { buffer: desc, epoch }))
    }
}

impl<T: Default> Default for Async<T> {
    /// `Async::new(T::default())`.
    fn default() -> Self {
        Async::new(T::default())
    }
}

impl<T> fmt::Debug for Async<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Async")
            .field("name", &self.shared.core.name())
            .field("latest_epoch", &self.latest_epoch())
            .finish_non_exhaustive()
    }
}
