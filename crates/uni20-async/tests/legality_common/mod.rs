//! Helpers shared by the legality scenarios.
#![allow(dead_code)]

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

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

pub type Log = Rc<RefCell<Vec<String>>>;

pub fn log(l: &Log, s: impl Into<String>) {
    l.borrow_mut().push(s.into());
}
