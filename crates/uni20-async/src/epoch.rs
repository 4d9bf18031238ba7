//! The epoch queue: the type-independent state machine behind every `Async<T>`.
//!
//! One mutex per `Async` guards a deque of open epochs. The front epoch is the only one
//! that has *started*; every later epoch is pending until the front one finishes and is
//! popped. Which phase the front epoch is in follows from its registrations:
//!
//! | front epoch                              | phase    | who may proceed          |
//! |------------------------------------------|----------|--------------------------|
//! | `!has_writer`                            | Started  | nobody (readers wait)    |
//! | `writer.is_some()`                       | Writing  | its writer               |
//! | `has_writer && writer.is_none()`         | Reading  | all its readers          |
//!
//! The front epoch *finishes* (is popped, and the next one starts) when it is Reading, has
//! no live readers, and a later epoch exists. Since `read()` only ever joins the latest
//! epoch, no reader can join an epoch after a later one exists, so a finished epoch can
//! never be needed again.

use crate::error::{AsyncError, SharedError};
use crate::sync::Mutex;
use crate::task_ctx::{self, TaskTag};
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

static NEXT_CORE_ID: AtomicU64 = AtomicU64::new(0);

/// Which side of an epoch a registration is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Read,
    Write,
}

/// The stored failure of an epoch.
#[derive(Clone, Debug)]
pub(crate) struct Poison {
    pub(crate) origin: String,
    pub(crate) origin_epoch: u64,
    pub(crate) error: SharedError,
}

#[derive(Debug)]
struct Slot {
    id: u64,
    waker: Option<Waker>,
    created_by: Option<TaskTag>,
    awaited_by: Option<TaskTag>,
}

impl Slot {
    fn new(id: u64) -> Self {
        Slot {
            id,
            waker: None,
            created_by: task_ctx::current(),
            awaited_by: None,
        }
    }

    fn park(&mut self, cx: &Context<'_>) {
        match &self.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => self.waker = Some(cx.waker().clone()),
        }
    }

    fn whose(&self) -> String {
        let mut s = String::new();
        if let Some(t) = self.created_by {
            let _ = write!(s, ", created in task {}", t.task);
        }
        if let Some(t) = self.awaited_by {
            let _ = write!(s, ", awaited by task {}", t.task);
        }
        if s.is_empty() {
            s.push_str(", never awaited by a LocalExecutor task");
        }
        s
    }
}

#[derive(Debug)]
struct Epoch {
    /// A writer was ever registered (or the phantom writer of `Async::new`).
    has_writer: bool,
    /// The live (not yet released) writer registration.
    writer: Option<Slot>,
    /// Live reader registrations.
    readers: Vec<Slot>,
    poison: Option<Poison>,
}

impl Epoch {
    fn new(has_writer: bool) -> Self {
        Epoch {
            has_writer,
            writer: None,
            readers: Vec::new(),
            poison: None,
        }
    }

    fn reading(&self) -> bool {
        self.has_writer && self.writer.is_none()
    }
}

#[derive(Debug)]
struct Timeline {
    name: Option<std::sync::Arc<str>>,
    /// Epoch number of `epochs[0]`.
    base: u64,
    /// Never empty.
    epochs: VecDeque<Epoch>,
    next_id: u64,
}

impl Timeline {
    fn label(&self, id: u64) -> String {
        match &self.name {
            Some(n) => format!("`{n}`"),
            None => format!("Async#{id}"),
        }
    }

    fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn index(&self, epoch: u64) -> usize {
        debug_assert!(epoch >= self.base, "registration outlived its epoch");
        (epoch - self.base) as usize
    }

    /// Finish every front epoch that can finish; collect the wakers of whoever may now run.
    fn settle(&mut self, wake: &mut Vec<Waker>) {
        loop {
            let front = &self.epochs[0];
            if !front.reading() || !front.readers.is_empty() || self.epochs.len() == 1 {
                return;
            }
            let old = self.epochs.pop_front().expect("len > 1");
            self.base += 1;
            let new = &mut self.epochs[0];
            if old.poison.is_some() {
                // Sticky, and the earliest failure wins.
                new.poison = old.poison;
            }
            if let Some(w) = &mut new.writer {
                wake.extend(w.waker.take());
                return;
            }
            // Its writer was released before the epoch started: straight to Reading.
            for r in &mut new.readers {
                wake.extend(r.waker.take());
            }
        }
    }
}

/// The state machine shared by an `Async`, its buffers and guards.
#[derive(Debug)]
pub(crate) struct Core {
    id: u64,
    tl: Mutex<Timeline>,
}

fn wake_all(wake: Vec<Waker>) {
    for w in wake {
        w.wake();
    }
}

impl Core {
    /// `written`: epoch 0 starts Reading through a phantom writer (`Async::new`).
    pub(crate) fn new(written: bool) -> Self {
        let mut epochs = VecDeque::with_capacity(2);
        epochs.push_back(Epoch::new(written));
        Core {
            id: NEXT_CORE_ID.fetch_add(1, Ordering::Relaxed),
            tl: Mutex::new(Timeline {
                name: None,
                base: 0,
                epochs,
                next_id: 0,
            }),
        }
    }

    pub(crate) fn set_name(&self, name: Option<std::sync::Arc<str>>) {
        self.tl.lock().name = name;
    }

    pub(crate) fn name(&self) -> Option<std::sync::Arc<str>> {
        self.tl.lock().name.clone()
    }

    pub(crate) fn latest_epoch(&self) -> u64 {
        let tl = self.tl.lock();
        tl.base + tl.epochs.len() as u64 - 1
    }

    /// ``read(`x`@3 #7)``.
    pub(crate) fn describe(&self, epoch: u64, kind: Kind, id: u64) -> String {
        let tl = self.tl.lock();
        Self::describe_locked(&tl, self.id, epoch, kind, id)
    }

    fn describe_locked(tl: &Timeline, core: u64, epoch: u64, kind: Kind, id: u64) -> String {
        let k = match kind {
            Kind::Read => "read",
            Kind::Write => "write",
        };
        format!("{k}({}@{epoch} #{id})", tl.label(core))
    }

    /// Registers a reader on the latest epoch: `(epoch, id)`.
    pub(crate) fn add_reader(&self) -> (u64, u64) {
        let mut tl = self.tl.lock();
        let id = tl.fresh_id();
        let epoch = tl.base + tl.epochs.len() as u64 - 1;
        tl.epochs.back_mut().expect("never empty").readers.push(Slot::new(id));
        (epoch, id)
    }

    /// Registers another reader on `epoch`, which must still hold a live reader (clone).
    pub(crate) fn add_reader_at(&self, epoch: u64) -> u64 {
        let mut tl = self.tl.lock();
        let id = tl.fresh_id();
        let i = tl.index(epoch);
        tl.epochs[i].readers.push(Slot::new(id));
        id
    }

    /// Registers a writer: joins the latest epoch if it has no writer yet, else opens a
    /// new epoch. Returns `(epoch, id)`.
    pub(crate) fn add_writer(&self) -> (u64, u64) {
        let mut wake = Vec::new();
        let r = {
            let mut tl = self.tl.lock();
            let id = tl.fresh_id();
            let latest = tl.epochs.back_mut().expect("never empty");
            if !latest.has_writer {
                latest.has_writer = true;
                latest.writer = Some(Slot::new(id));
            } else {
                let mut e = Epoch::new(true);
                e.writer = Some(Slot::new(id));
                tl.epochs.push_back(e);
                // The previous latest epoch may have been Reading with no readers.
                tl.settle(&mut wake);
            }
            (tl.base + tl.epochs.len() as u64 - 1, id)
        };
        wake_all(wake);
        r
    }

    fn poison_error(tl: &Timeline, core: u64, epoch: u64, kind: Kind, id: u64, p: &Poison) -> AsyncError {
        AsyncError::Poisoned {
            buffer: Self::describe_locked(tl, core, epoch, kind, id),
            epoch,
            origin: p.origin.clone(),
            origin_epoch: p.origin_epoch,
            message: p.error.to_string(),
            source: p.error.clone(),
        }
    }

    /// Polls a reader. `Ready(Ok)` means the epoch is Reading and not poisoned: the slot
    /// may be read until the registration is released. `cx == None` probes without parking.
    pub(crate) fn poll_reader(&self, epoch: u64, id: u64, cx: Option<&Context<'_>>) -> Poll<Result<(), AsyncError>> {
        let mut tl = self.tl.lock();
        let i = tl.index(epoch);
        if cx.is_some() {
            if let Some(tag) = task_ctx::current() {
                if let Some(s) = tl.epochs[i].readers.iter_mut().find(|s| s.id == id) {
                    s.awaited_by = Some(tag);
                }
            }
        }
        let e = &tl.epochs[i];
        if i == 0 && e.reading() {
            return Poll::Ready(match &e.poison {
                None => Ok(()),
                Some(p) => Err(Self::poison_error(&tl, self.id, epoch, Kind::Read, id, p)),
            });
        }
        if let Some(cx) = cx {
            if let Some(s) = tl.epochs[i].readers.iter_mut().find(|s| s.id == id) {
                s.park(cx);
            }
        }
        Poll::Pending
    }

    /// Polls a writer. `Ready(Ok)` means it is the active writer of a started,
    /// unpoisoned epoch: it has exclusive access to the slot until released.
    pub(crate) fn poll_writer(&self, epoch: u64, id: u64, cx: Option<&Context<'_>>) -> Poll<Result<(), AsyncError>> {
        let mut tl = self.tl.lock();
        let i = tl.index(epoch);
        if cx.is_some() {
            if let (Some(tag), Some(s)) = (task_ctx::current(), tl.epochs[i].writer.as_mut()) {
                s.awaited_by = Some(tag);
            }
        }
        if i == 0 {
            let e = &tl.epochs[0];
            return Poll::Ready(match &e.poison {
                None => Ok(()),
                Some(p) => Err(Self::poison_error(&tl, self.id, epoch, Kind::Write, id, p)),
            });
        }
        if let Some(cx) = cx {
            if let Some(s) = tl.epochs[i].writer.as_mut() {
                s.park(cx);
            }
        }
        Poll::Pending
    }

    /// Releases a reader registration (never awaited, pending or done alike).
    pub(crate) fn release_reader(&self, epoch: u64, id: u64) {
        let mut wake = Vec::new();
        {
            let mut tl = self.tl.lock();
            let i = tl.index(epoch);
            let readers = &mut tl.epochs[i].readers;
            if let Some(pos) = readers.iter().position(|s| s.id == id) {
                readers.swap_remove(pos);
            }
            if i == 0 {
                tl.settle(&mut wake);
            }
        }
        wake_all(wake);
    }

    /// Releases the writer registration of `epoch`, poisoning the epoch first if `fail`
    /// is given (first error wins).
    pub(crate) fn release_writer(&self, epoch: u64, id: u64, fail: Option<SharedError>) {
        let mut wake = Vec::new();
        {
            let mut tl = self.tl.lock();
            let i = tl.index(epoch);
            if let Some(error) = fail {
                if tl.epochs[i].poison.is_none() {
                    let origin = Self::describe_locked(&tl, self.id, epoch, Kind::Write, id);
                    tl.epochs[i].poison = Some(Poison {
                        origin,
                        origin_epoch: epoch,
                        error,
                    });
                }
            }
            let e = &mut tl.epochs[i];
            if e.writer.as_ref().is_some_and(|s| s.id == id) {
                e.writer = None;
            }
            if i == 0 {
                for r in &mut tl.epochs[0].readers {
                    wake.extend(r.waker.take());
                }
                tl.settle(&mut wake);
            }
        }
        wake_all(wake);
    }

    /// One line saying what `(epoch, kind, id)` is waiting for, naming the buffers that
    /// block it. Used in deadlock dumps.
    pub(crate) fn explain_wait(&self, epoch: u64, kind: Kind, id: u64) -> String {
        let tl = self.tl.lock();
        let me = Self::describe_locked(&tl, self.id, epoch, kind, id);
        if epoch < tl.base {
            return format!("{me}: epoch already finished (stale wait)");
        }
        let i = tl.index(epoch);
        let front = &tl.epochs[0];
        let base = tl.base;
        let mut out = if i > 0 {
            format!("{me} waits for epoch {base} to finish; ")
        } else {
            format!("{me} waits for its own epoch's writer; ")
        };
        if !front.has_writer {
            let _ = write!(out, "epoch {base} has no writer (write() was never called for it)");
        } else if let Some(w) = &front.writer {
            let _ = write!(
                out,
                "blocked by {}{} (not released)",
                Self::describe_locked(&tl, self.id, base, Kind::Write, w.id),
                w.whose()
            );
        } else if i == 0 {
            let _ = write!(out, "it is readable (should be runnable)");
        } else {
            let _ = write!(out, "blocked by {} live reader(s):", front.readers.len());
            for r in &front.readers {
                let _ = write!(
                    out,
                    " {}{};",
                    Self::describe_locked(&tl, self.id, base, Kind::Read, r.id),
                    r.whose()
                );
            }
        }
        out
    }
}

/// Boxes an error message or error value for [`Core::release_writer`].
pub(crate) fn to_shared(err: Box<dyn std::error::Error + Send + Sync>) -> SharedError {
    SharedError::from(err)
}
