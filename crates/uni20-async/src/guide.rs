//! # Guide: using `Async<T>` correctly (documentation only)
//!
//! ## The model
//!
//! An [`Async<T>`](crate::Async) is one value slot plus a *timeline* of epochs. Each
//! [`write()`](crate::Async::write) opens a new epoch; each [`read()`](crate::Async::read)
//! joins the latest one. The epoch of a buffer is fixed **when the buffer is created**, so
//! the causal graph is the program order of `read()`/`write()` calls, not the order in
//! which tasks are spawned, scheduled or awaited:
//!
//! ```
//! # use uni20_async::Async;
//! let x = Async::new(1);
//! let r0 = x.read();   // epoch 0: sees 1
//! let w1 = x.write();  // epoch 1
//! let r1 = x.read();   // epoch 1: sees whatever w1 leaves
//! assert_eq!((r0.epoch(), w1.epoch(), r1.epoch()), (0, 1, 1));
//! ```
//!
//! [`Async::empty()`](crate::Async::empty) starts with an epoch 0 that has no writer: the
//! first `write()` *joins* epoch 0 instead of opening epoch 1, and readers created before it
//! see what it writes. [`Async::new(v)`](crate::Async::new) counts epoch 0 as written.
//!
//! ## Legality rules
//!
//! "Waits" means "its `.await` does not complete".
//!
//! 1. **Readers together.** All readers of an epoch may hold the value at the same time,
//!    on any threads.
//! 2. **Writer before readers.** A reader of epoch *n* waits until epoch *n*'s writer has
//!    been released (dropped, after writing or not).
//! 3. **Readers before the next writer.** The writer of epoch *n+1* waits until every reader
//!    registration of epoch *n* is gone: guards, buffers that were **never awaited**, and
//!    clones alike. A live buffer blocks others even if nobody awaits it.
//! 4. **One writer at a time.** Writers of successive epochs run one after another.
//! 5. **Only awaits are ordered.** Code in a task before its first await on a buffer is not
//!    ordered by that buffer.
//! 6. **No ordering across objects.** Two `Async`s are unordered unless a task holds buffers
//!    of both.
//!
//! ## Values, "no value", and errors
//!
//! - A writer dropped without writing passes the previous value (or emptiness) through.
//! - [`WriteGuard::take`](crate::WriteGuard::take) moves the value out and leaves the slot
//!   empty. Readers of an empty slot get [`AsyncError::NoValue`](crate::AsyncError::NoValue)
//!   from `get()`, or `Ok(None)` from `maybe()`. "No value" is the cancellation outcome, not
//!   an error.
//! - [`WriteBuffer::fail`](crate::WriteBuffer::fail), or a writer dropped during a panic,
//!   poisons its epoch: its readers, **and the readers and writers of every later epoch**,
//!   get [`AsyncError::Poisoned`](crate::AsyncError::Poisoned). To start afresh, make a new
//!   `Async`.
//! - Errors flow on through tasks: a task that got an error from a buffer (say
//!   `r.get().await?` on a poisoned input) poisons every write buffer it then drops
//!   unwritten, so its readers see the error rather than a stale value. Write a fallback
//!   value if the task handles the error; call `fail` for errors that are not from a
//!   buffer. The full rule is in the [crate docs](crate#failures-what-a-write-buffer-leaves-behind).
//!
//! ## The kernel shape: read, compute, release reads, then write
//!
//! A task that updates a value in place holds a reader of epoch *n* and the writer of
//! epoch *n+1*. By rule 3 the writer cannot start while the task's own reader lives, so
//! **drop the readers before awaiting the writer**:
//!
//! ```
//! # use uni20_async::{Async, LocalExecutor};
//! let x = Async::new(3.0f64).with_name("x");
//! let r = x.read();   // epoch 0
//! let w = x.write();  // epoch 1
//! let ex = LocalExecutor::new();
//! ex.spawn(async move {
//!     let v = *r.get().await?;  // 1. acquire inputs
//!     let y = v * v;            // 2. compute into a local
//!     drop(r);                  // 3. release the reads
//!     w.set(y).await            // 4. then write
//! });
//! ex.run()?;
//! assert_eq!(x.get_wait()?, 9.0);
//! # Ok::<(), uni20_async::AsyncError>(())
//! ```
//!
//! The same task with step 3 moved after step 4 is the classic **self-deadlock**: the
//! writer of epoch 1 waits for the reader of epoch 0, which the waiting task itself holds.
//! On a thread pool it hangs; the deterministic [`LocalExecutor`](crate::LocalExecutor)
//! reports it instead:
//!
//! ```
//! # use uni20_async::{Async, AsyncError, LocalExecutor};
//! let x = Async::new(3.0f64).with_name("x");
//! let (r, w) = (x.read(), x.write());
//! let ex = LocalExecutor::new();
//! ex.spawn(async move {
//!     let v = *r.get().await.unwrap();
//!     w.set(v * v).await.unwrap(); // still holding `r`: never completes
//! });
//! let err = ex.run().unwrap_err();
//! assert!(matches!(err, AsyncError::Deadlock(_)));
//! // DEADLOCK: 1 task(s) waiting and none runnable
//! //   task 0:
//! //     write(`x`@1 #1) waits for epoch 0 to finish; blocked by 1 live reader(s):
//! //     read(`x`@0 #0), awaited by task 0;
//! assert!(err.to_string().contains("read(`x`@0"));
//! ```
//!
//! The mirror image also deadlocks: holding the writer of epoch *n* while awaiting a reader
//! of epoch *n* or later. Release (drop) the writer guard first.
//!
//! ## Blocking waits
//!
//! [`Async::get_wait`](crate::Async::get_wait), [`Async::wait`](crate::Async::wait),
//! [`ReadBuffer::wait`](crate::ReadBuffer::wait) and
//! [`WriteBuffer::wait`](crate::WriteBuffer::wait) block the calling thread, parking it
//! until the buffer is ready. They work on any thread, including inside
//! [`ThreadPoolExecutor`](crate::ThreadPoolExecutor) tasks, where each one holds a pool
//! thread while it waits (prefer `.await` there). Inside a `LocalExecutor` task they run
//! the executor's other tasks until the buffer is ready, and return
//! [`AsyncError::WouldBlock`](crate::AsyncError::WouldBlock) rather than hang when no task
//! is left that could make it ready. From plain code,
//! [`LocalExecutor::block_on`](crate::LocalExecutor::block_on) waits deterministically.
