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
use uni20_async::{Async, ReadBuffer, WriteBuffer};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    // Keeps each model well under a minute on two cores; the bugs these models target
    // (a writer starting early, a lost wake-up) need at most two preemptions.
    b.preemption_bound = Some(3);
    b.check(f);
}

/// Awaits `r` on a new thread; the thread returns the value it read.
fn read_on_thread(r: ReadBuffer<usize>) -> thread::JoinHandle<usize> {
    thread::spawn(move || *block_on(r.into_future()).unwrap())
}

/// Awaits `w` on this thread, sets `v` and releases the epoch; returns the value it replaced.
fn write_now(w: WriteBuffer<usize>, v: usize) -> Option<usize> {
    block_on(w.into_future()).unwrap().set(v)
}

/// Two readers of epoch 0 and the writer of epoch 1: both readers see the old value, the
/// writer never overlaps them (a race on the slot would be reported by loom).
#[test]
fn two_readers_and_a_writer() {
    model(|| {
        let a = Async::new(1usize);
        let (r1, r2, w) = (a.read(), a.read(), a.write());
        let t1 = read_on_thread(r1);
        let t2 = read_on_thread(r2);
        assert_eq!(write_now(w, 2), Some(1));
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
        let (w1, r1, w2) = (a.write(), a.read(), a.write());
        let tw = thread::spawn(move || write_now(w1, 1));
        let tr = read_on_thread(r1);
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
        let (r, w, r1) = (a.read(), a.write(), a.read());
        let td = thread::spawn(move || drop(r));
        let tr = read_on_thread(r1);
        write_now(w, 5);
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
        let (w, r) = (a.write(), a.read());
        let waiter = thread::spawn(move || r.get_wait().unwrap());
        write_now(w, 7);
        assert_eq!(waiter.join().unwrap(), 7);
    });
}

/// A thread blocked in `WriteBuffer::wait` wakes when the last reader of the previous epoch
/// is dropped on another thread, and then has the slot to itself.
#[test]
fn blocking_write_wait_wakes_on_reader_drop() {
    model(|| {
        let a = Async::new(1usize);
        let (r0, w, r1) = (a.read(), a.write(), a.read());
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
