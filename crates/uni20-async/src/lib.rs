//! # uni20-async: causal epoch channels
//!
//! [`Async<T>`] is a value with a timeline. Code creates [`ReadBuffer`]s and
//! [`WriteBuffer`]s in program order (`x.read()`, `x.write()`), moves them into tasks, and
//! awaits them there; the epochs, not the scheduler, decide what may run. Start with the
//! [`guide`].
//!
//! ```
//! use uni20_async::{Async, LocalExecutor};
//!
//! let x = Async::new(2).with_name("x");
//! let r0 = x.read();   // epoch 0
//! let w1 = x.write();  // epoch 1
//! let r1 = x.read();   // epoch 1
//! let ex = LocalExecutor::new();
//! let seen_after = ex.spawn(async move { *r1.get().await.unwrap() });
//! ex.spawn(async move {
//!     let mut g = w1.await.unwrap();         // waits for r0 to be dropped
//!     *g.value_mut().unwrap() += 40;
//! });
//! let seen_before = ex.spawn(async move { *r0.await.unwrap() });
//! ex.run().unwrap();
//! assert_eq!(seen_before.try_take().unwrap().unwrap(), 2);
//! assert_eq!(seen_after.try_take().unwrap().unwrap(), 42);
//! ```
//!
//! ## Pieces
//!
//! | item | what |
//! |---|---|
//! | [`Async`] | the value: `empty`, `new`, `read`, `write`, `get_wait`, `take_wait` |
//! | [`ReadBuffer`] | `get().await` → `&T`; `.await` → [`ReadGuard`]; `maybe()`, `into_maybe()`, `try_get`, `wait` |
//! | [`WriteBuffer`] | `.await` → [`WriteGuard`] (`get`, `get_mut`, `set`, `take`, `slot`, `fail`); `set(v)`, `take()`, `fail(e)`, `wait` |
//! | [`AsyncError`] | `Poisoned` (a writer failed), `NoValue` (cancelled), `Deadlock`, `TaskPanicked`, `WouldBlock` |
//! | [`LocalExecutor`] | deterministic single-thread executor for tests; reports deadlocks with a dump |
//! | [`ThreadPoolExecutor`] | multi-threaded executor over `futures::executor::ThreadPool` |
//!
//! ## Decisions where upstream Uni20 has quirks
//!
//! This crate follows upstream Uni20's `Async<T>` (one slot per `Async`, epochs fixed at
//! buffer creation, `write()` joining a writer-less latest epoch, an `Async::new` epoch 0
//! counting as written). Where upstream has a quirk, the choice here is deliberate:
//!
//! - **Poison is sticky (as upstream, Q1).** Once an epoch is poisoned, the next epoch
//!   inherits the poison when it starts, for ever; a later successful write does not clear
//!   it. The earliest failure wins: if a later writer already failed on its own before its
//!   epoch started, the inherited, earlier error replaces its own. Upstream instead
//!   *overwrites* a later epoch's error with the incoming one, even when the incoming one
//!   is "no error"; we never clear a poison. Recovery = a new `Async`.
//! - **Writers are told about poison (unlike upstream, Q3).** Awaiting a `WriteBuffer` of a
//!   poisoned epoch gives `Err(AsyncError::Poisoned)` rather than silently running a write
//!   that no reader could ever see.
//! - **"No value" is not an error in `maybe()`, and is a distinct variant elsewhere**
//!   ([`AsyncError::NoValue`] vs [`AsyncError::Poisoned`]). There is no `or_cancel`
//!   task-destruction: Rust tasks return `Err(NoValue)` and the caller decides.
//! - **Failures reach a task's outputs by `fail`, by panics, and by errors the task was
//!   handed** (upstream routes an exception escaping a coroutine to every `WriteBuffer`
//!   parameter). See [Failures](#failures-what-a-write-buffer-leaves-behind) below.
//! - **The deterministic executor is FIFO** (upstream's `DebugScheduler` is LIFO per batch
//!   while its comment says FIFO, Q4). Tests here never depend on that order for
//!   correctness, only for their logs.
//! - **Deadlocks are errors, not aborts or hangs**: [`LocalExecutor::run`] and
//!   [`LocalExecutor::block_on`] return [`AsyncError::Deadlock`] with a dump naming each
//!   waiting task, the buffer it awaits, and the buffers blocking it. Blocking waits
//!   inside a `LocalExecutor` task run its other tasks until the value is ready (as
//!   upstream's `DebugScheduler` does) and return [`AsyncError::WouldBlock`] when no
//!   runnable task is left.
//! - **Blocking waits work on any thread**, executor threads included: outside a
//!   `LocalExecutor` task they park the thread until a waker unparks it.
//! - **Each task panic is reported once** by the `LocalExecutor`: by `block_on` for its own
//!   future, otherwise by `run`, one per call.
//! - **Leaks**: dropping an executor drops its pending tasks and so releases their
//!   buffers; nothing is leaked through parked tasks (upstream leaks parked coroutines).
//!
//! ## Failures: what a write buffer leaves behind
//!
//! Rust tasks return errors as values, which the runtime cannot see; what it sees is the
//! errors it hands to a task. A [`WriteBuffer`] (or its [`WriteGuard`]) **poisons** its
//! epoch, so that its readers and the readers and writers of every later epoch get
//! [`AsyncError::Poisoned`], when it is released:
//!
//! 1. by [`WriteBuffer::fail`] / [`WriteGuard::fail`], with the error given;
//! 2. while its thread panics, written or not, with a [`PanicError`] (the executors fill in
//!    the panic message);
//! 3. **unwritten, by a task that was handed an error**: once a buffer operation (an
//!    await, `get`, `try_get`, a `wait`, `value_mut`, `take_wait`) has returned an
//!    [`AsyncError`] to a task running on [`LocalExecutor`] or [`ThreadPoolExecutor`],
//!    every write buffer that task drops afterwards without having written it is poisoned,
//!    with the first such error as the source. A task that reads a poisoned input with `?`
//!    therefore poisons its outputs instead of leaving their old values to its readers; so
//!    does a task that swallows the error and returns without writing. The poison names
//!    the dropped writer as `origin`; its `source` is the `AsyncError` the task got, whose
//!    own source chain reaches the first failure.
//!
//! A buffer counts as **written** once its guard gave mutable access to the slot (`set`,
//! `slot`, `get_mut`, `value_mut`, `take`, `get_or_insert_with`). Written buffers keep what
//! was written (rule 3 does not apply to them), even if the task then returns an error.
//!
//! Otherwise an unwritten buffer passes the previous value, or emptiness, through: the
//! cancellation path. In particular:
//! - `maybe()` / `into_maybe()` on an empty slot give `Ok(None)`, which is not an error: a
//!   task that then drops its outputs unwritten cascades "no value" (or old values), as
//!   upstream's `or_cancel` does;
//! - errors that do not come from a buffer (an I/O or parse error returned with `?`) are
//!   invisible to the runtime: route them with `fail` before returning;
//! - futures polled outside these two executors (a plain thread, another executor) get
//!   rules 1 and 2 only.
//!
//! ## Thread safety
//!
//! `Async<T>`, the buffers and the guards are `Send + Sync` when `T: Send + Sync`. Wakers
//! are registered in the epoch queue, so waiting tasks cost nothing until they can run.
//! One `parking_lot` mutex per `Async` guards its epoch queue; it is never held while user
//! code runs or a waker is woken.
//!
//! ## Testing the epoch queue with loom
//!
//! Internal synchronisation goes through a small shim that switches to `loom` under
//! `cfg(loom)`. The models in `tests/loom.rs` run with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p uni20-async --release --test loom
//! ```
//!
//! (Add `CARGO_TARGET_DIR=target/loom` to keep the loom build from invalidating the
//! workspace's normal build artefacts.)
#![warn(missing_docs)]
#![deny(unreachable_pub)]

mod blocking;
mod buffer;
mod epoch;
mod error;
mod executor;
pub mod guide;
mod pool;
mod read;
mod sync;
mod task_ctx;
mod write;

pub use buffer::Async;
pub use error::{AsyncError, BlockedTask, DeadlockReport, PanicError, SharedError};
pub use executor::{LocalExecutor, LocalHandle};
pub use pool::{JoinHandle, ThreadPoolExecutor};
pub use read::{ReadBuffer, ReadGuard, ReadIntoMaybe, ReadMaybe, ReadOwned, ReadRef};
pub use write::{WriteBuffer, WriteGuard, WriteOwned};
