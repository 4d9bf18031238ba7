//! The write side of an [`Async`](crate::Async): [`WriteBuffer`], the future of awaiting it
//! ([`WriteOwned`]) and the [`WriteGuard`] of an active writer. Also where a write buffer
//! dropped unwritten decides whether to poison its epoch (a panic, or an error its task
//! was handed; see the crate docs, "Failures").

use crate::blocking;
use crate::buffer::Shared;
use crate::epoch::{self, Kind};
use crate::error::{AsyncError, SharedError};
use crate::sync::{Arc, MutPtr};
use crate::task_ctx;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Write capability for one epoch of an [`Async`](crate::Async).
///
/// Created by [`Async::write`](crate::Async::write); move-only. `buf.await` resolves to a [`WriteGuard`] once
/// every earlier epoch has finished. Dropping the buffer (or its guard) releases the
/// epoch to its readers.
///
/// What its readers see after the drop:
/// - if it was **written** (a [`WriteGuard`] gave mutable access to the slot: `set`,
///   `slot`, `get_mut`, `value_mut`, `take`, `get_or_insert_with`), what was written,
///   unless the thread is panicking;
/// - if it is dropped while the thread is **panicking**, [`AsyncError::Poisoned`] with a
///   [`PanicError`](crate::PanicError), written or not;
/// - if it was not written and the task dropping it (a task of [`LocalExecutor`] or
///   [`ThreadPoolExecutor`]) has been **handed an error** by a buffer operation before,
///   [`AsyncError::Poisoned`] with that error as the source;
/// - otherwise (not written, no error) the previous value, or emptiness, unchanged.
///
/// [`fail`](WriteBuffer::fail) poisons it explicitly. See the crate docs, "Failures".
///
/// [`LocalExecutor`]: crate::LocalExecutor
/// [`ThreadPoolExecutor`]: crate::ThreadPoolExecutor
pub struct WriteBuffer<T> {
    shared: Arc<Shared<T>>,
    epoch: u64,
    id: u64,
    released: bool,
    /// A guard gave mutable access to the slot.
    written: bool,
}

impl<T> WriteBuffer<T> {
    /// Wraps a registration made by `Async::write`.
    pub(crate) fn new(shared: Arc<Shared<T>>, epoch: u64, id: u64) -> Self {
        WriteBuffer {
            shared,
            epoch,
            id,
            released: false,
            written: false,
        }
    }

    /// The epoch this writer opens (or joined).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The debug name of the `Async`, if any.
    pub fn name(&self) -> Option<String> {
        self.shared.core.name().map(|n| n.to_string())
    }

    pub(crate) fn describe(&self) -> String {
        self.shared.core.describe(self.epoch, Kind::Write, self.id)
    }

    /// `true` if awaiting would complete at once (every earlier epoch has finished).
    pub fn is_ready(&self) -> bool {
        self.shared.core.poll_writer(self.epoch, self.id, None).is_ready()
    }

    /// Poisons this epoch with `err` and releases the writer. Every reader of this epoch
    /// and of every later epoch gets [`AsyncError::Poisoned`] carrying `err` (poison is
    /// sticky). If the epoch was already poisoned, the first error is kept.
    ///
    /// Does not wait: a writer may fail before it ever became active.
    pub fn fail<E>(self, err: E)
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.fail_shared(epoch::to_shared(err.into()));
    }

    /// As [`fail`](WriteBuffer::fail), with an already shared error.
    pub fn fail_shared(mut self, err: SharedError) {
        self.released = true;
        self.shared.core.release_writer(self.epoch, self.id, Some(err));
    }

    /// Waits for the writer, replaces the value with `value` and releases.
    ///
    /// # Errors
    /// [`AsyncError::Poisoned`] if an earlier epoch was poisoned (the value is dropped).
    pub async fn set(self, value: T) -> Result<(), AsyncError> {
        let mut g = self.await?;
        g.set(value);
        Ok(())
    }

    /// Waits for the writer, moves the value out (leaving the slot empty) and releases.
    /// `Ok(None)` if the slot was already empty.
    ///
    /// # Errors
    /// [`AsyncError::Poisoned`].
    pub async fn take(self) -> Result<Option<T>, AsyncError> {
        let mut g = self.await?;
        Ok(g.take())
    }

    /// Blocks until the writer is active. Blocks as
    /// [`Async::get_wait`](crate::Async::get_wait) does: parks the thread, or inside a
    /// [`LocalExecutor`](crate::LocalExecutor) task runs its other tasks.
    ///
    /// # Errors
    /// [`AsyncError::Poisoned`], or [`AsyncError::WouldBlock`] inside a `LocalExecutor`
    /// task when no task of the executor can make the writer ready (the writer is then
    /// released unwritten, which poisons its epoch with that error: the task was handed
    /// an error).
    pub fn wait(self) -> Result<WriteGuard<T>, AsyncError> {
        let core = self.shared.core.clone();
        let (epoch, id) = (self.epoch, self.id);
        blocking::wait(self.into_future(), move || core.describe(epoch, Kind::Write, id))?
    }

    /// Releases the writer now without writing (same as dropping it: the previous value
    /// passes through, unless the drop poisons, see [`WriteBuffer`]).
    pub fn release(self) {}
}

impl<T> Drop for WriteBuffer<T> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let fail = match task_ctx::panic_poison() {
            Some(panic) => Some(std::sync::Arc::new(panic) as SharedError),
            None if !self.written => task_ctx::task_failure(),
            None => None,
        };
        self.shared.core.release_writer(self.epoch, self.id, fail);
    }
}

impl<T> fmt::Debug for WriteBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl<T> IntoFuture for WriteBuffer<T> {
    type Output = Result<WriteGuard<T>, AsyncError>;
    type IntoFuture = WriteOwned<T>;

    /// Waits until this writer is active.
    fn into_future(self) -> WriteOwned<T> {
        WriteOwned { buf: Some(self) }
    }
}

/// Future of awaiting a [`WriteBuffer`]. Output: `Result<WriteGuard<T>, AsyncError>`.
/// Dropping it unfinished releases the writer unwritten.
#[must_use = "futures do nothing unless awaited"]
#[derive(Debug)]
pub struct WriteOwned<T> {
    buf: Option<WriteBuffer<T>>,
}

impl<T> Unpin for WriteOwned<T> {}

impl<T> Future for WriteOwned<T> {
    type Output = Result<WriteGuard<T>, AsyncError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(buf) = this.buf.as_ref() else {
            return Poll::Pending;
        };
        match buf.shared.core.poll_writer(buf.epoch, buf.id, Some(cx)) {
            Poll::Pending => {
                task_ctx::record_wait(&buf.shared.core, buf.epoch, Kind::Write, buf.id);
                Poll::Pending
            }
            Poll::Ready(Err(e)) => {
                let e = task_ctx::observed(e);
                this.buf = None;
                Poll::Ready(Err(e))
            }
            Poll::Ready(Ok(())) => {
                let buf = this.buf.take().expect("checked above");
                let ptr = buf.shared.slot.get_mut();
                Poll::Ready(Ok(WriteGuard { ptr, buf }))
            }
        }
    }
}

/// Exclusive access to the slot of an active writer. Releases the epoch to its readers
/// when dropped (poisoning it if dropped during a panic, or if dropped unwritten by a task
/// that was handed an error; see [`WriteBuffer`]).
pub struct WriteGuard<T> {
    // Field order: the pointer (a loom access token) must go before the registration.
    ptr: MutPtr<Option<T>>,
    buf: WriteBuffer<T>,
}

// SAFETY: the guard is the only accessor of the slot while it lives; moving it moves `T`
// access to another thread (`T: Send`); sharing `&WriteGuard` shares `&T` (`T: Sync`).
unsafe impl<T: Send + Sync> Send for WriteGuard<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for WriteGuard<T> {}

impl<T> WriteGuard<T> {
    /// The epoch being written.
    pub fn epoch(&self) -> u64 {
        self.buf.epoch
    }

    /// The whole slot: `None` means "no value". Assigning `None` empties it. Counts as
    /// writing (see [`WriteBuffer`]), as do all the `&mut self` accessors below.
    pub fn slot(&mut self) -> &mut Option<T> {
        self.buf.written = true;
        // SAFETY: an active writer has exclusive access (see `Shared`).
        self.ptr.with(|p| unsafe { &mut *p })
    }

    fn slot_ref(&self) -> &Option<T> {
        // SAFETY: as `slot`.
        self.ptr.with(|p| unsafe { &*p })
    }

    /// The current value (left by the previous epoch, or by earlier calls here).
    pub fn get(&self) -> Option<&T> {
        self.slot_ref().as_ref()
    }

    /// Mutable access to the current value, if any.
    pub fn get_mut(&mut self) -> Option<&mut T> {
        self.slot().as_mut()
    }

    /// Mutable access to the current value.
    ///
    /// # Errors
    /// [`AsyncError::NoValue`] if the slot is empty.
    pub fn value_mut(&mut self) -> Result<&mut T, AsyncError> {
        if self.slot_ref().is_none() {
            return Err(task_ctx::observed(AsyncError::NoValue {
                buffer: self.buf.describe(),
                epoch: self.buf.epoch,
            }));
        }
        Ok(self.slot().as_mut().expect("checked"))
    }

    /// Stores `value` (emplace into an empty slot, or assign over the old value).
    /// Returns the previous value.
    pub fn set(&mut self, value: T) -> Option<T> {
        self.slot().replace(value)
    }

    /// The value, inserting `f()` first if the slot is empty.
    pub fn get_or_insert_with(&mut self, f: impl FnOnce() -> T) -> &mut T {
        self.slot().get_or_insert_with(f)
    }

    /// Moves the value out, leaving the slot empty (later readers get
    /// [`AsyncError::NoValue`] unless something is written). The writer stays held.
    pub fn take(&mut self) -> Option<T> {
        self.slot().take()
    }

    /// [`take`](WriteGuard::take), then release.
    pub fn take_release(mut self) -> Option<T> {
        self.take()
    }

    /// Poisons the epoch with `err` and releases. Whatever is in the slot stays, but
    /// readers of this and later epochs get [`AsyncError::Poisoned`].
    pub fn fail<E>(self, err: E)
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let WriteGuard { ptr, buf } = self;
        // End the slot access (tracked under loom) before releasing the epoch.
        #[allow(clippy::drop_non_drop)]
        drop(ptr);
        buf.fail(err);
    }

    /// Releases the writer now (same as dropping the guard).
    pub fn release(self) {}
}

impl<T: fmt::Debug> fmt::Debug for WriteGuard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteGuard")
            .field("buffer", &self.buf)
            .field("value", self.slot_ref())
            .finish()
    }
}
