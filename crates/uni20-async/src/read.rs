//! The read side of an [`Async`](crate::Async): [`ReadBuffer`], the futures its awaits
//! produce ([`ReadRef`], [`ReadMaybe`], [`ReadOwned`], [`ReadIntoMaybe`]) and the owning
//! [`ReadGuard`].

use crate::blocking;
use crate::buffer::Shared;
use crate::epoch::Kind;
use crate::error::AsyncError;
use crate::sync::{Arc, ConstPtr};
use crate::task_ctx;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Read capability for one epoch of an [`Async`](crate::Async).
///
/// Created by [`Async::read`](crate::Async::read). The epoch is fixed at creation. The registration is held
/// until this buffer (or the [`ReadGuard`] it is turned into) is dropped: while it lives
/// the next epoch's writer cannot start, awaited or not.
///
/// Await forms:
/// - `buf.get().await` → `Result<&T, AsyncError>`, borrowing the buffer (may be repeated);
/// - `buf.await` (consumes) → `Result<ReadGuard<T>, AsyncError>`, an owning guard;
/// - `buf.maybe().await` → `Result<Option<&T>, AsyncError>`: no value is `Ok(None)`;
/// - `buf.into_maybe().await` → `Result<Option<ReadGuard<T>>, AsyncError>`.
///
/// `Clone` registers another reader on the same epoch.
pub struct ReadBuffer<T> {
    shared: Arc<Shared<T>>,
    epoch: u64,
    id: u64,
}

impl<T> ReadBuffer<T> {
    /// Wraps a registration made by `Async::read`.
    pub(crate) fn new(shared: Arc<Shared<T>>, epoch: u64, id: u64) -> Self {
        ReadBuffer { shared, epoch, id }
    }

    /// The epoch this reader belongs to.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The debug name of the `Async`, if any.
    pub fn name(&self) -> Option<String> {
        self.shared.core.name().map(|n| n.to_string())
    }

    fn describe(&self) -> String {
        self.shared.core.describe(self.epoch, Kind::Read, self.id)
    }

    /// `true` if awaiting would complete at once (the epoch is readable).
    pub fn is_ready(&self) -> bool {
        self.shared.core.poll_reader(self.epoch, self.id, None).is_ready()
    }

    fn poll_inner(&self, cx: Option<&Context<'_>>) -> Poll<Result<Option<&T>, AsyncError>> {
        match self.shared.core.poll_reader(self.epoch, self.id, cx) {
            Poll::Pending => {
                if cx.is_some() {
                    task_ctx::record_wait(&self.shared.core, self.epoch, Kind::Read, self.id);
                }
                Poll::Pending
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(task_ctx::observed(e))),
            // SAFETY: the epoch is Reading and our registration keeps it from finishing
            // for as long as `self` is borrowed, so no writer can touch the slot.
            Poll::Ready(Ok(())) => Poll::Ready(Ok(self.shared.slot.get().with(|p| unsafe { &*p }).as_ref())),
        }
    }

    /// The "no value" error of this reader, recorded as handed to the current task.
    fn no_value(&self) -> AsyncError {
        task_ctx::observed(AsyncError::NoValue {
            buffer: self.describe(),
            epoch: self.epoch,
        })
    }

    /// Borrowing read: resolves to `&T` once the epoch is readable.
    ///
    /// # Errors
    /// [`AsyncError::NoValue`] if the slot is empty, [`AsyncError::Poisoned`] if the
    /// epoch (or an earlier one) was poisoned.
    pub fn get(&self) -> ReadRef<'_, T> {
        ReadRef { buf: self }
    }

    /// Like [`get`](ReadBuffer::get), but an empty slot gives `Ok(None)`, not an error.
    ///
    /// # Errors
    /// [`AsyncError::Poisoned`].
    pub fn maybe(&self) -> ReadMaybe<'_, T> {
        ReadMaybe { buf: self }
    }

    /// Owning "maybe" read: an empty slot gives `Ok(None)` and releases the registration
    /// at once.
    ///
    /// # Errors
    /// [`AsyncError::Poisoned`].
    pub fn into_maybe(self) -> ReadIntoMaybe<T> {
        ReadIntoMaybe { buf: Some(self) }
    }

    /// Never suspends: `None` if the epoch is not readable yet, else what `get` gives.
    pub fn try_get(&self) -> Option<Result<&T, AsyncError>> {
        match self.poll_inner(None) {
            Poll::Pending => None,
            Poll::Ready(r) => Some(r.and_then(|v| v.ok_or_else(|| self.no_value()))),
        }
    }

    /// Blocks until readable, then borrows the value. Blocks as
    /// [`Async::get_wait`](crate::Async::get_wait) does: parks the thread, or inside a
    /// [`LocalExecutor`](crate::LocalExecutor) task runs its other tasks.
    ///
    /// # Errors
    /// As [`get`](ReadBuffer::get), plus [`AsyncError::WouldBlock`] inside a
    /// `LocalExecutor` task when no task of the executor can make the epoch ready.
    pub fn wait(&self) -> Result<&T, AsyncError> {
        blocking::wait(self.get(), || self.describe())?
    }

    /// Blocks until readable, clones the value and releases the registration.
    ///
    /// # Errors
    /// As [`wait`](ReadBuffer::wait).
    pub fn get_wait(self) -> Result<T, AsyncError>
    where
        T: Clone,
    {
        self.wait().cloned()
    }

    /// Releases the registration now (same as dropping the buffer).
    pub fn release(self) {}
}

impl<T> Clone for ReadBuffer<T> {
    /// Registers another reader on the same epoch.
    fn clone(&self) -> Self {
        let id = self.shared.core.add_reader_at(self.epoch);
        ReadBuffer {
            shared: self.shared.clone(),
            epoch: self.epoch,
            id,
        }
    }
}

impl<T> Drop for ReadBuffer<T> {
    fn drop(&mut self) {
        self.shared.core.release_reader(self.epoch, self.id);
    }
}

impl<T> fmt::Debug for ReadBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl<T> IntoFuture for ReadBuffer<T> {
    type Output = Result<ReadGuard<T>, AsyncError>;
    type IntoFuture = ReadOwned<T>;

    /// Owning read: resolves to a [`ReadGuard`] that holds the registration.
    fn into_future(self) -> ReadOwned<T> {
        ReadOwned { buf: Some(self) }
    }
}

/// Future of [`ReadBuffer::get`]. Output: `Result<&T, AsyncError>`.
#[must_use = "futures do nothing unless awaited"]
#[derive(Debug)]
pub struct ReadRef<'a, T> {
    buf: &'a ReadBuffer<T>,
}

impl<'a, T> Future for ReadRef<'a, T> {
    type Output = Result<&'a T, AsyncError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let buf = self.buf;
        buf.poll_inner(Some(cx))
            .map(|r| r.and_then(|v| v.ok_or_else(|| buf.no_value())))
    }
}

/// Future of [`ReadBuffer::maybe`]. Output: `Result<Option<&T>, AsyncError>`.
#[must_use = "futures do nothing unless awaited"]
#[derive(Debug)]
pub struct ReadMaybe<'a, T> {
    buf: &'a ReadBuffer<T>,
}

impl<'a, T> Future for ReadMaybe<'a, T> {
    type Output = Result<Option<&'a T>, AsyncError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.buf.poll_inner(Some(cx))
    }
}

/// Future of awaiting a [`ReadBuffer`] by value. Output: `Result<ReadGuard<T>, AsyncError>`.
/// Dropping it unfinished releases the registration.
#[must_use = "futures do nothing unless awaited"]
#[derive(Debug)]
pub struct ReadOwned<T> {
    buf: Option<ReadBuffer<T>>,
}

impl<T> Unpin for ReadOwned<T> {}

/// Polls an owning read. `Ok(Err(buf))`: readable but empty; the buffer is handed back.
#[allow(clippy::type_complexity)]
fn poll_owned<T>(
    slot: &mut Option<ReadBuffer<T>>,
    cx: &mut Context<'_>,
) -> Poll<Result<Result<ReadGuard<T>, ReadBuffer<T>>, AsyncError>> {
    let Some(buf) = slot.as_ref() else {
        // Polled after completion: stay pending, like a fused future.
        return Poll::Pending;
    };
    match buf.poll_inner(Some(cx)) {
        Poll::Pending => Poll::Pending,
        Poll::Ready(Err(e)) => {
            *slot = None;
            Poll::Ready(Err(e))
        }
        Poll::Ready(Ok(value)) => {
            let has_value = value.is_some();
            let buf = slot.take().expect("checked above");
            if has_value {
                let ptr = buf.shared.slot.get();
                Poll::Ready(Ok(Ok(ReadGuard { ptr, buf })))
            } else {
                Poll::Ready(Ok(Err(buf)))
            }
        }
    }
}

impl<T> Future for ReadOwned<T> {
    type Output = Result<ReadGuard<T>, AsyncError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        poll_owned(&mut self.get_mut().buf, cx).map(|r| r.and_then(|g| g.map_err(|buf| buf.no_value())))
    }
}

/// Future of [`ReadBuffer::into_maybe`]. Output: `Result<Option<ReadGuard<T>>, AsyncError>`.
#[must_use = "futures do nothing unless awaited"]
#[derive(Debug)]
pub struct ReadIntoMaybe<T> {
    buf: Option<ReadBuffer<T>>,
}

impl<T> Unpin for ReadIntoMaybe<T> {}

impl<T> Future for ReadIntoMaybe<T> {
    type Output = Result<Option<ReadGuard<T>>, AsyncError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // An empty slot drops the handed-back buffer: the registration goes at once.
        poll_owned(&mut self.get_mut().buf, cx).map(|r| r.map(Result::ok))
    }
}

/// Owning read access to a value: derefs to `&T`. Holds the reader registration (so the
/// next epoch's writer waits) until dropped.
pub struct ReadGuard<T> {
    // Field order: the pointer (a loom access token) must go before the registration.
    ptr: ConstPtr<Option<T>>,
    buf: ReadBuffer<T>,
}

// SAFETY: the guard hands out `&T` only; sending or sharing it is sharing `&T` across
// threads, which `T: Sync` allows (`T: Send` for the shared slot's eventual drop).
unsafe impl<T: Send + Sync> Send for ReadGuard<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for ReadGuard<T> {}

impl<T> ReadGuard<T> {
    /// The epoch this guard reads.
    pub fn epoch(&self) -> u64 {
        self.buf.epoch
    }

    /// Releases the registration now (same as dropping the guard).
    pub fn release(self) {}

    /// Turns the guard back into a (ready) [`ReadBuffer`] of the same epoch.
    pub fn into_buffer(self) -> ReadBuffer<T> {
        self.buf
    }
}

impl<T> std::ops::Deref for ReadGuard<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a guard exists only for a Reading epoch with a value, and its
        // registration keeps that epoch from finishing, so no writer can run.
        let opt: &Option<T> = self.ptr.with(|p| unsafe { &*p });
        match opt {
            Some(v) => v,
            // The slot cannot change while a reader of a Reading epoch is live.
            None => unreachable!("ReadGuard over an empty slot"),
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for ReadGuard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadGuard")
            .field("buffer", &self.buf)
            .field("value", &**self)
            .finish()
    }
}
