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
//! - **Failures are routed explicitly, or by panics.** Upstream routes an exception escaping
//!   a coroutine to every `WriteBuffer` parameter. Here a task calls
//!   [`WriteBuffer::fail`] / [`WriteGuard::fail`], and any write buffer dropped while its
//!   thread panics poisons its epoch ([`PanicError`]; the executors fill in the panic
//!   message). Returning `Err` from a task without calling `fail` releases its writers
//!   unwritten, which readers see as the previous value.
//! - **The deterministic executor is FIFO** (upstream's `DebugScheduler` is LIFO per batch
//!   while its comment says FIFO, Q4). Tests here never depend on that order for
//!   correctness, only for their logs.
//! - **Deadlocks are errors, not aborts or hangs**: [`LocalExecutor::run`] and
//!   [`LocalExecutor::block_on`] return [`AsyncError::Deadlock`] with a dump naming each
//!   waiting task, the buffer it awaits, and the buffers blocking it. Blocking waits
//!   inside a `LocalExecutor` task return [`AsyncError::WouldBlock`].
//! - **Leaks**: dropping an executor drops its pending tasks and so releases their
//!   buffers; nothing is leaked through parked tasks (upstream leaks parked coroutines).
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

mod buffer;
mod epoch;
mod error;
mod executor;
pub mod guide;
mod sync;
mod task_ctx;

pub use buffer::{
    Async, ReadBuffer, ReadGuard, ReadIntoMaybe, ReadMaybe, ReadOwned, ReadRef, WriteBuffer, WriteGuard, WriteOwned,
};
pub use error::{AsyncError, BlockedTask, DeadlockReport, PanicError, SharedError};
pub use executor::{JoinHandle, LocalExecutor, LocalHandle, ThreadPoolExecutor};
