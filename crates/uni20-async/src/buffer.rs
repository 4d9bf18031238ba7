//! `Async<T>`, its read and write buffers, and the guards their awaits produce.

use crate::epoch::{self, Core, Kind};
use crate::error::{AsyncError, SharedError};
use crate::sync::{Arc, ConstPtr, MutPtr, UnsafeCell};
use crate::task_ctx;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};

/// The value slot plus its epoch queue. Shared by the `Async`, every buffer and guard.
pub(crate) struct Shared<T> {
    pub(crate) core: Arc<Core>,
    slot: UnsafeCell<Option<T>>,
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
        ReadBuffer {
            shared: self.shared.clone(),
            epoch,
            id,
        }
    }

    /// Registers a writer. If the latest epoch has no writer yet (only possible for
    /// epoch 0 of [`Async::empty`] before its first `write()`), the writer joins it;
    /// otherwise it opens a new epoch after the latest one. The writer becomes ready
    /// once every earlier epoch has finished (its writer released and every reader
    /// registration dropped).
    pub fn write(&self) -> WriteBuffer<T> {
        let (epoch, id) = self.shared.core.add_writer();
        WriteBuffer {
            shared: self.shared.clone(),
            epoch,
            id,
            released: false,
        }
    }

    /// Blocks the calling thread until the latest epoch is readable, then returns a
    /// clone of the value.
    ///
    /// # Errors
    /// [`AsyncError::NoValue`], [`AsyncError::Poisoned`], or [`AsyncError::WouldBlock`]
    /// when called inside a [`LocalExecutor`](crate::LocalExecutor) task on a value that
    /// is not ready yet. Outside a `LocalExecutor`, this blocks for as long as it takes
    /// for other threads to release earlier buffers (forever, if nobody ever will).
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
        let epoch = w.epoch;
        let mut g = w.wait()?;
        g.take().ok_or(AsyncError::NoValue { buffer: desc, epoch })
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

/// Blocks on `fut`, unless this thread is inside a `LocalExecutor` poll and `ready` is
/// false (then blocking could never finish).
fn block<F: Future>(ready: bool, describe: impl FnOnce() -> String, fut: F) -> Result<F::Output, AsyncError> {
    if !ready && task_ctx::current().is_some() {
        return Err(AsyncError::WouldBlock { buffer: describe() });
    }
    Ok(futures::executor::block_on(fut))
}

// ---------------------------------------------------------------------------------------
// Readers
// ---------------------------------------------------------------------------------------

/// Read capability for one epoch of an [`Async`].
///
/// Created by [`Async::read`]. The epoch is fixed at creation. The registration is held
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
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            // SAFETY: the epoch is Reading and our registration keeps it from finishing
            // for as long as `self` is borrowed, so no writer can touch the slot.
            Poll::Ready(Ok(())) => Poll::Ready(Ok(self.shared.slot.get().with(|p| unsafe { &*p }).as_ref())),
        }
    }

    fn no_value(&self) -> AsyncError {
        AsyncError::NoValue {
            buffer: self.describe(),
            epoch: self.epoch,
        }
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

    /// Blocks the calling thread until readable, then borrows the value.
    ///
    /// # Errors
    /// As [`get`](ReadBuffer::get), plus [`AsyncError::WouldBlock`] inside a
    /// [`LocalExecutor`](crate::LocalExecutor) task if not ready.
    pub fn wait(&self) -> Result<&T, AsyncError> {
        block(self.is_ready(), || self.describe(), self.get())?
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

// ---------------------------------------------------------------------------------------
// Writers
// ---------------------------------------------------------------------------------------

/// Write capability for one epoch of an [`Async`].
///
/// Created by [`Async::write`]; move-only. `buf.await` resolves to a [`WriteGuard`] once
/// every earlier epoch has finished. Dropping the buffer (or its guard) releases the
/// epoch to its readers; dropping it without writing passes the previous value (or
/// emptiness) through unchanged.
///
/// Dropped while the thread is panicking, it **poisons** the epoch with a
/// [`PanicError`](crate::PanicError). [`fail`](WriteBuffer::fail) poisons it explicitly.
pub struct WriteBuffer<T> {
    shared: Arc<Shared<T>>,
    epoch: u64,
    id: u64,
    released: bool,
}

impl<T> WriteBuffer<T> {
    /// The epoch this writer opens (or joined).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The debug name of the `Async`, if any.
    pub fn name(&self) -> Option<String> {
        self.shared.core.name().map(|n| n.to_string())
    }

    fn describe(&self) -> String {
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

    /// Blocks the calling thread until the writer is active.
    ///
    /// # Errors
    /// [`AsyncError::Poisoned`], or [`AsyncError::WouldBlock`] inside a
    /// [`LocalExecutor`](crate::LocalExecutor) task if not ready.
    pub fn wait(self) -> Result<WriteGuard<T>, AsyncError> {
        let ready = self.is_ready();
        let core = self.shared.core.clone();
        let (epoch, id) = (self.epoch, self.id);
        block(ready, move || core.describe(epoch, Kind::Write, id), self.into_future())?
    }

    /// Releases the writer now without writing (same as dropping it).
    pub fn release(self) {}
}

impl<T> Drop for WriteBuffer<T> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let fail = task_ctx::panic_poison().map(|e| std::sync::Arc::new(e) as SharedError);
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
/// when dropped (poisoning it if dropped during a panic).
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

    /// The whole slot: `None` means "no value". Assigning `None` empties it.
    pub fn slot(&mut self) -> &mut Option<T> {
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
            return Err(AsyncError::NoValue {
                buffer: self.buf.describe(),
                epoch: self.buf.epoch,
            });
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
