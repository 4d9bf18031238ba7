//! Helpers shared by the uni20-async integration tests (legality, failures, blocking
//! waits, panics): the yield and log helpers of the scenarios, and the buffer set-ups
//! they repeat.
#![allow(dead_code)]

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use uni20_async::{Async, AsyncError, ReadBuffer, WriteBuffer};

/// Yields once to the executor (wakes itself, so it is runnable again at once).
pub fn yield_now() -> impl Future<Output = ()> {
    struct Y(bool);
    impl Future for Y {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                Poll::Ready(())
            } else {
                self.0 = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
    Y(false)
}

/// The order in which the tasks of a scenario did things.
pub type Log = Rc<RefCell<Vec<String>>>;

/// Appends `s` to the log `l`.
pub fn log(l: &Log, s: impl Into<String>) {
    l.borrow_mut().push(s.into());
}

/// A buffer named `name` holding `value`, with the writer of its next epoch and then a
/// reader of that epoch, registered in that program order.
pub fn named_write_read<T>(value: T, name: &str) -> (Async<T>, WriteBuffer<T>, ReadBuffer<T>) {
    let a = Async::new(value).with_name(name);
    let (w, r) = (a.write(), a.read());
    (a, w, r)
}

/// A buffer named `name` holding `value`, with a reader of its current epoch and then the
/// writer of the next one, registered in that program order.
pub fn named_read_write<T>(value: T, name: &str) -> (Async<T>, ReadBuffer<T>, WriteBuffer<T>) {
    let a = Async::new(value).with_name(name);
    let (r, w) = (a.read(), a.write());
    (a, r, w)
}

/// Asserts that `e` is `WouldBlock` on the buffer whose description contains `buffer`
/// (for example ``"read(`x`@1"``).
pub fn assert_would_block(e: &AsyncError, buffer: &str) {
    assert!(
        matches!(e, AsyncError::WouldBlock { buffer: b } if b.contains(buffer)),
        "{e}"
    );
}
