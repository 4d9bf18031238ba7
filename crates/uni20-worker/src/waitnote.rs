//! The wait note: what this process's rank is blocked on right now, kept
//! where a signal handler can read it without locks or allocation.
//!
//! Under MPI a rank that dies of `SIGKILL` (the OOM killer, a node failure,
//! an injected `kill`) says nothing; the launcher then sends `SIGTERM` to
//! the survivors (Open MPI: `SIGTERM`, then `SIGKILL`). So that the job's
//! output still says what happened, each rank records, before it blocks on
//! peers, what it waits for:
//!
//! - the command it runs ([`CommandNote`]: op id and wire name; set by the
//!   worker loop and by the root when it runs its own part), and
//! - a worker's block exchange ([`waiting_for_objects`]: up to
//!   [`SENDER_SLOTS`] senders, with the first object awaited from each, and
//!   the number of objects in all), or the root's wait for replies
//!   (`waiting_for_replies`: the oldest operation in flight and how many
//!   replies it lacks).
//!
//! The handlers of [`crate::cleanup::install_signal_handlers`] call
//! [`write_on_signal`] after the cleanups, which writes one line to stderr
//! with `write(2)`, such as
//!
//! ```text
//! uni20: rank 1 (worker) terminated by SIGTERM while in uni20.contract.v1 (op 7), waiting for 4 object(s): object r3:5@00ab... from rank 3 (a storage rank)
//! ```
//!
//! The note is process-global: it is enabled (`enable`) only in a standalone MPI
//! universe (one rank per process). Elsewhere every call is one atomic
//! load and returns. Fields are atomics under a sequence lock: the writer
//! (the rank's thread) makes the sequence odd while it updates, and a
//! reader that finds it odd or changed prints no detail rather than a torn
//! one.

use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use uni20_persist::ObjectId;

/// Senders recorded per exchange (the first object awaited from each).
pub const SENDER_SLOTS: usize = 4;

static ENABLED: AtomicBool = AtomicBool::new(false);
static RANK: AtomicUsize = AtomicUsize::new(0);
/// First storage rank (storage ranks are the last ranks); `usize::MAX`: none.
static FIRST_STORAGE: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Sequence lock: odd while the writer updates the fields below.
static SEQ: AtomicU64 = AtomicU64::new(0);
static CMD_OP: AtomicU64 = AtomicU64::new(0);
static CMD_WIRE: Name = Name::empty();
/// 0: not waiting; [`WAIT_OBJECTS`] or [`WAIT_REPLIES`].
static WAIT_KIND: AtomicU32 = AtomicU32::new(0);
const WAIT_OBJECTS: u32 = 1;
const WAIT_REPLIES: u32 = 2;
/// Objects awaited in all, or replies outstanding.
static WAIT_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Root: the op id and wire name of the oldest operation in flight.
static WAIT_OP: AtomicU64 = AtomicU64::new(0);
static WAIT_WIRE: Name = Name::empty();

/// Longest wire name kept (longer ones are cut).
const NAME_CAP: usize = 64;

/// A wire name copied byte by byte into atomics: a reader that races the
/// writer sees wrong bytes at worst (and discards them, the sequence having
/// moved), never a dangling pointer.
struct Name {
    bytes: [AtomicU8; NAME_CAP],
    len: AtomicUsize,
}

impl Name {
    const fn empty() -> Name {
        Name {
            bytes: [const { AtomicU8::new(0) }; NAME_CAP],
            len: AtomicUsize::new(0),
        }
    }
    fn set(&self, s: &str) {
        let b = &s.as_bytes()[..s.len().min(NAME_CAP)];
        for (slot, &v) in self.bytes.iter().zip(b) {
            slot.store(v, Ordering::Relaxed);
        }
        self.len.store(b.len(), Ordering::Relaxed);
    }
    fn clear(&self) {
        self.len.store(0, Ordering::Relaxed);
    }
    fn is_set(&self) -> bool {
        self.len.load(Ordering::Relaxed) > 0
    }
}
/// Senders in use, and senders beyond the slots.
static SLOTS_USED: AtomicUsize = AtomicUsize::new(0);
static MORE_SENDERS: AtomicUsize = AtomicUsize::new(0);

struct SenderSlot {
    peer: AtomicUsize,
    origin: AtomicU32,
    nonce: AtomicU64,
    seq: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_SLOT: SenderSlot = SenderSlot {
    peer: AtomicUsize::new(0),
    origin: AtomicU32::new(0),
    nonce: AtomicU64::new(0),
    seq: AtomicU64::new(0),
};
static SLOTS: [SenderSlot; SENDER_SLOTS] = [EMPTY_SLOT; SENDER_SLOTS];

/// Turns the note on for this process: it hosts rank `rank` of a universe
/// of `size` ranks whose last `storage_ranks` are storage ranks. Called by
/// the standalone MPI launch; never in-process, where ranks share the process.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn enable(rank: usize, size: usize, storage_ranks: usize) {
    RANK.store(rank, Ordering::Relaxed);
    let first = if storage_ranks == 0 {
        usize::MAX
    } else {
        size.saturating_sub(storage_ranks)
    };
    FIRST_STORAGE.store(first, Ordering::Relaxed);
    ENABLED.store(true, Ordering::SeqCst);
}

/// True once `enable` (called by the standalone MPI launch) has run in this process.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Acquire)
}

/// The writer's side of the sequence lock (the standard pattern: odd, a
/// release fence, the relaxed stores, even with release).
fn write_locked(update: impl FnOnce()) {
    SEQ.fetch_add(1, Ordering::Relaxed);
    fence(Ordering::Release);
    update();
    SEQ.fetch_add(1, Ordering::Release);
}

/// The command this rank runs, recorded while the guard lives.
#[must_use = "the note is cleared when the guard is dropped"]
pub struct CommandNote {
    active: bool,
}

/// Records that this rank runs command `wire_name` as op `op_id` until the
/// returned guard is dropped (a no-op unless [`enabled`]).
pub fn running_command(op_id: u64, wire_name: &'static str) -> CommandNote {
    if !enabled() {
        return CommandNote { active: false };
    }
    write_locked(|| {
        CMD_OP.store(op_id, Ordering::Relaxed);
        CMD_WIRE.set(wire_name);
    });
    CommandNote { active: true }
}

impl Drop for CommandNote {
    fn drop(&mut self) {
        if self.active {
            write_locked(|| CMD_WIRE.clear());
        }
    }
}

/// A wait on peers, recorded while the guard lives.
#[must_use = "the note is cleared when the guard is dropped"]
pub struct WaitNote {
    active: bool,
}

impl Drop for WaitNote {
    fn drop(&mut self) {
        if self.active {
            write_locked(|| WAIT_KIND.store(0, Ordering::Relaxed));
        }
    }
}

/// Records that this rank waits for `awaited` objects (each `(sender,
/// object)`, in the order awaited) until the returned guard is dropped: the
/// first object of each of the first [`SENDER_SLOTS`] senders is kept. A
/// no-op unless [`enabled`].
pub fn waiting_for_objects(awaited: impl Iterator<Item = (usize, ObjectId)>) -> WaitNote {
    if !enabled() {
        return WaitNote { active: false };
    }
    write_locked(|| {
        let (mut used, mut more, mut count) = (0usize, 0usize, 0usize);
        // Senders beyond the slots are counted, not named: a fixed bitmask of
        // the first 64 ranks avoids counting one twice without allocating.
        let mut seen_beyond = 0u64;
        for (peer, id) in awaited {
            count += 1;
            if SLOTS[..used].iter().any(|s| s.peer.load(Ordering::Relaxed) == peer) {
                continue;
            }
            if used < SENDER_SLOTS {
                let s = &SLOTS[used];
                s.peer.store(peer, Ordering::Relaxed);
                s.origin.store(id.origin, Ordering::Relaxed);
                s.nonce.store(id.nonce, Ordering::Relaxed);
                s.seq.store(id.seq, Ordering::Relaxed);
                used += 1;
            } else if peer >= 64 || seen_beyond & (1 << peer) == 0 {
                if peer < 64 {
                    seen_beyond |= 1 << peer;
                }
                more += 1;
            }
        }
        SLOTS_USED.store(used, Ordering::Relaxed);
        MORE_SENDERS.store(more, Ordering::Relaxed);
        WAIT_COUNT.store(count, Ordering::Relaxed);
        WAIT_KIND.store(WAIT_OBJECTS, Ordering::Relaxed);
    });
    WaitNote { active: true }
}

/// Records that the root waits for replies, the oldest operation in flight
/// being `op_id` (`wire_name`) with `outstanding` replies missing.
pub(crate) fn waiting_for_replies(op_id: u64, wire_name: &'static str, outstanding: usize) -> WaitNote {
    if !enabled() {
        return WaitNote { active: false };
    }
    write_locked(|| {
        WAIT_OP.store(op_id, Ordering::Relaxed);
        WAIT_WIRE.set(wire_name);
        WAIT_COUNT.store(outstanding, Ordering::Relaxed);
        WAIT_KIND.store(WAIT_REPLIES, Ordering::Relaxed);
    });
    WaitNote { active: true }
}

/// A fixed buffer that truncates, for formatting without allocation.
struct Line {
    buf: [u8; 1024],
    len: usize,
}

impl Line {
    fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }
    fn num(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
    fn hex16(&mut self, v: u64) {
        let mut digits = [0u8; 16];
        for (i, d) in digits.iter_mut().enumerate() {
            let nib = ((v >> (60 - 4 * i)) & 0xf) as u8;
            *d = if nib < 10 { b'0' + nib } else { b'a' + nib - 10 };
        }
        self.push(&digits);
    }
    fn rank(&mut self, r: usize) {
        self.push(b"rank ");
        self.num(r as u64);
        if r == 0 {
            self.push(b" (root)");
        } else if r >= FIRST_STORAGE.load(Ordering::Relaxed) {
            self.push(b" (a storage rank)");
        } else {
            self.push(b" (worker)");
        }
    }
    /// The object id as `ObjectId`'s `Display` writes it.
    fn object(&mut self, origin: u32, nonce: u64, seq: u64) {
        self.push(b"r");
        self.num(u64::from(origin));
        self.push(b":");
        self.num(seq);
        if nonce != ObjectId::NIL_NONCE {
            self.push(b"@");
            self.hex16(nonce);
        }
    }
    /// A wire name recorded in a [`Name`] (nothing when unset).
    fn name(&mut self, name: &Name) {
        let n = name.len.load(Ordering::Relaxed).min(NAME_CAP);
        for b in &name.bytes[..n] {
            self.push(&[b.load(Ordering::Relaxed)]);
        }
    }
}

fn signal_name(sig: i32) -> &'static [u8] {
    match sig {
        libc::SIGTERM => b"SIGTERM",
        libc::SIGINT => b"SIGINT",
        libc::SIGHUP => b"SIGHUP",
        _ => b"a signal",
    }
}

/// Formats the note of this rank for signal `sig` (what
/// [`write_on_signal`] writes, without the newline) into `line`; false
/// when the note is not [`enabled`]. Async-signal-safe.
fn format_note(sig: i32, line: &mut Line) -> bool {
    if !enabled() {
        return false;
    }
    line.push(b"uni20: ");
    line.rank(RANK.load(Ordering::Relaxed));
    line.push(b" terminated by ");
    line.push(signal_name(sig));
    // A handler may interrupt the writer on its own thread: a few tries, then
    // no detail (never a torn one).
    for _ in 0..3 {
        let before = SEQ.load(Ordering::Acquire);
        if before % 2 == 1 {
            continue;
        }
        let mut detail = Line { buf: [0; 1024], len: 0 };
        if CMD_WIRE.is_set() {
            detail.push(b" while in ");
            detail.name(&CMD_WIRE);
            detail.push(b" (op ");
            detail.num(CMD_OP.load(Ordering::Relaxed));
            detail.push(b")");
        }
        match WAIT_KIND.load(Ordering::Relaxed) {
            WAIT_OBJECTS => {
                detail.push(b", waiting for ");
                detail.num(WAIT_COUNT.load(Ordering::Relaxed) as u64);
                detail.push(b" object(s): ");
                let used = SLOTS_USED.load(Ordering::Relaxed).min(SENDER_SLOTS);
                for (i, s) in SLOTS[..used].iter().enumerate() {
                    if i > 0 {
                        detail.push(b"; ");
                    }
                    detail.push(b"object ");
                    detail.object(
                        s.origin.load(Ordering::Relaxed),
                        s.nonce.load(Ordering::Relaxed),
                        s.seq.load(Ordering::Relaxed),
                    );
                    detail.push(b" from ");
                    detail.rank(s.peer.load(Ordering::Relaxed));
                }
                let more = MORE_SENDERS.load(Ordering::Relaxed);
                if more > 0 {
                    detail.push(b"; and objects from ");
                    detail.num(more as u64);
                    detail.push(b" more rank(s)");
                }
            }
            WAIT_REPLIES => {
                detail.push(b", waiting for replies: ");
                detail.num(WAIT_COUNT.load(Ordering::Relaxed) as u64);
                detail.push(b" missing to op ");
                detail.num(WAIT_OP.load(Ordering::Relaxed));
                detail.push(b" (");
                detail.name(&WAIT_WIRE);
                detail.push(b")");
            }
            _ => detail.push(b", no recorded wait on a peer"),
        }
        fence(Ordering::Acquire);
        if SEQ.load(Ordering::Relaxed) == before {
            line.push(&detail.buf[..detail.len]);
            return true;
        }
    }
    line.push(b" (what it waited for was being updated)");
    true
}

/// Writes this rank's note for signal `sig` to stderr, as one line with one
/// `write(2)`; nothing when the note is not [`enabled`]. Async-signal-safe:
/// atomics, a stack buffer and `write`.
pub fn write_on_signal(sig: i32) {
    let mut line = Line { buf: [0; 1024], len: 0 };
    if format_note(sig, &mut line) {
        if line.len == line.buf.len() {
            line.len -= 1;
        }
        line.buf[line.len] = b'\n';
        line.len += 1;
        // SAFETY: writes `len` initialised bytes of a live buffer to fd 2.
        unsafe {
            libc::write(2, line.buf.as_ptr().cast(), line.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn note(sig: i32) -> String {
        let mut line = Line { buf: [0; 1024], len: 0 };
        assert!(format_note(sig, &mut line));
        String::from_utf8(line.buf[..line.len].to_vec()).unwrap()
    }

    /// Child side of `sigterm_writes_the_note` (ignored: the note is
    /// process-global, and the other tests of this crate run in-process
    /// universes, so it is only enabled in a child process of its own):
    /// checks the formatting, then installs the handlers, records a wait and
    /// raises SIGTERM.
    #[test]
    #[ignore = "child process of sigterm_writes_the_note"]
    fn note_child() {
        if std::env::var("UNI20_WAITNOTE_CHILD").is_err() {
            // Run directly (`--include-ignored`): only the parent's child run checks.
            return;
        }
        assert!(!enabled());
        let mut off = Line { buf: [0; 1024], len: 0 };
        assert!(!format_note(libc::SIGTERM, &mut off));
        let _ignored = waiting_for_objects([(3, ObjectId::new(3, 5))].into_iter());
        enable(1, 4, 1);
        assert_eq!(
            note(libc::SIGTERM),
            "uni20: rank 1 (worker) terminated by SIGTERM, no recorded wait on a peer"
        );
        let cmd = running_command(7, "uni20.contract.v1");
        let many = (1..9).map(|r| (r, ObjectId::new(r as u32, 1)));
        let w = waiting_for_objects(many.chain([(8, ObjectId::new(8, 2))]));
        let text = note(libc::SIGHUP);
        assert!(
            text.contains("SIGHUP") && text.contains("waiting for 9 object(s)"),
            "{text}"
        );
        assert!(
            text.ends_with("from rank 4 (a storage rank); and objects from 4 more rank(s)"),
            "{text}"
        );
        drop(w);
        drop(cmd);
        RANK.store(0, Ordering::Relaxed);
        let w = waiting_for_replies(12, "uni20.npy_write.v1", 2);
        assert_eq!(
            note(libc::SIGINT),
            "uni20: rank 0 (root) terminated by SIGINT, waiting for replies: 2 missing to op 12 (uni20.npy_write.v1)"
        );
        drop(w);
        assert!(note(libc::SIGTERM).ends_with("no recorded wait on a peer"));
        // An update in progress (odd sequence) gives no detail.
        SEQ.fetch_add(1, Ordering::AcqRel);
        assert!(note(libc::SIGTERM).ends_with("(what it waited for was being updated)"));
        SEQ.fetch_add(1, Ordering::AcqRel);
        RANK.store(1, Ordering::Relaxed);
        crate::cleanup::install_signal_handlers().unwrap();
        let _cmd = running_command(7, "uni20.contract.v1");
        let id = ObjectId::with_nonce(3, 0xab, 5);
        let _w = waiting_for_objects([(3, id), (3, ObjectId::new(3, 6)), (2, ObjectId::new(2, 1))].into_iter());
        // SAFETY: raising a signal on our own process has no memory-safety
        // preconditions.
        unsafe { libc::raise(libc::SIGTERM) };
        // Not reached: the handler dies of the signal.
        std::process::exit(3);
    }

    #[test]
    fn sigterm_writes_the_note() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "waitnote::tests::note_child", "--ignored", "--nocapture"])
            .env("UNI20_WAITNOTE_CHILD", "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{:?}\n{err}", out.status);
        let want = "uni20: rank 1 (worker) terminated by SIGTERM while in uni20.contract.v1 (op 7), waiting for 3 \
                    object(s): object r3:5@00000000000000ab from rank 3 (a storage rank); object r2:1 from rank 2 \
                    (worker)\n";
        assert!(err.contains(want), "stderr lacks the note:\n{err}");
    }
}
