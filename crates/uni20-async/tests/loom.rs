//! Loom models of the epoch queue and of the blocking waits. Every interleaving of the
//! threads below is explored, every access to the value slot is checked for data races
//! (loom's `UnsafeCell`), and a blocking wait whose wake-up is lost shows up as a deadlock
//! (every thread parked).
//!
//! Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p uni20-async --release --test loom
//! ```
//!
//! Without `--cfg loom` this file compiles to nothing.
#![cfg(loom)]

use loom::future::block_on;
use loom::thread;
use std::future::IntoFuture;
use uni20_async::Async;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    // Keeps each model well under a minute on two cores; the bugs these models target
    // (a writer starting early, a lost wake-up) need at most two preemptions.
    b.preemption_bound = Some(3);
    b.check(f);
}

/// Two readers of epoch 0 and the writer of epoch 1: both readers see the old value, the
/// writer never overlaps them (a race on the slot would be reported by loom).
#[test]
fn two_readers_and_a_writer() {
    model(|| {
        let a = Async::new(1usize);
        let r1 = a.read();
        let r2 = a.read();
        let w = a.write();
        let t1 = thread::spawn(move || *block_on(r1.into_future()).unwrap());
        let t2 = thread::spawn(move || *block_on(r2.into_future()).unwrap());
        let mut g = block_on(w.into_future()).unwrap();
        assert_eq!(g.set(2), Some(1));
        drop(g);
        assert_eq!(t1.join().unwrap(), 1);
        assert_eq!(t2.join().unwrap(), 1);
        assert_eq!(*block_on(a.read().into_future()).unwrap(), 2);
    });
}

/// Writer, reader, writer: the reader sees exactly the first write, and the second writer
/// sees the first write and waits for the reader.
#[test]
fn writer_reader_writer() {
    model(|| {
        let a = Async::new(0usize);
        let w1 = a.write();
        let r1 = a.read();
        let w2 = a.write();
        let tw = thread::spawn(move || {
            let mut g = block_on(w1.into_future()).unwrap();
            g.set(1);
        });
        let tr = thread::spawn(move || *block_on(r1.into_future()).unwrap());
        let mut g2 = block_on(w2.into_future()).unwrap();
        let seen = *g2.get().unwrap();
        g2.set(2);
        drop(g2);
        tw.join().unwrap();
        assert_eq!(tr.join().unwrap(), 1);
        assert_eq!(seen, 1);
    });
}

/// A reader that is never awaited, dropped on another thread, still holds back the next
/// writer until it is gone; the wake-up from its drop is not lost.
#[test]
fn dropped_unawaited_reader() {
    model(|| {
        let a = Async::new(0usize);
        let r = a.read();
        let w = a.write();
        let r1 = a.read();
        let td = thread::spawn(move || drop(r));
        let tr = thread::spawn(move || *block_on(r1.into_future()).unwrap());
        let mut g = block_on(w.into_future()).unwrap();
        g.set(5);
        drop(g);
        td.join().unwrap();
        assert_eq!(tr.join().unwrap(), 5);
    });
}

/// A thread blocked in `get_wait` (parked, not driving an executor) on an epoch whose writer
/// runs on another thread: whatever the interleaving of the write, the release's wake-up
/// and the park, the waiter wakes and sees the written value.
#[test]
fn blocking_read_wait_wakes_on_write() {
    model(|| {
        let a = Async::new(0usize);
        let w = a.write();
        let r = a.read();
        let waiter = thread::spawn(move || r.get_wait().unwrap());
        let mut g = block_on(w.into_future()).unwrap();
        g.set(7);
        drop(g);
        assert_eq!(waiter.join().unwrap(), 7);
    });
}

/// A thread blocked in `WriteBuffer::wait` wakes when the last reader of the previous epoch
/// is dropped on another thread, and then has the slot to itself.
#[test]
fn blocking_write_wait_wakes_on_reader_drop() {
    model(|| {
        let a = Async::new(1usize);
        let r0 = a.read();
        let w = a.write();
        let r1 = a.read();
        let writer = thread::spawn(move || {
            let mut g = w.wait().unwrap();
            let old = *g.get().unwrap();
            g.set(old + 1);
        });
        assert_eq!(*r0.try_get().unwrap().unwrap(), 1);
        drop(r0);
        writer.join().unwrap();
        assert_eq!(*r1.try_get().unwrap().unwrap(), 2);
    });
}
