//! Panic policy of a rank: which panics the runtime reports as a handler's
//! failure and which end the job.
//!
//! A panic inside a command handler, on the handler's own thread or on a
//! helper thread it uses (a rayon worker, a scoped thread), is caught by
//! [`run_handler`](crate::handler::run_handler) (rayon and scoped threads
//! carry the panic to the thread that joins them) and reported to the root
//! as that handler's [`Diagnostic`](crate::Diagnostic). The panic hook
//! therefore stays quiet for the handler's thread, and for a helper thread
//! while a handler runs it records the panic's thread, place and message,
//! which the diagnostic then lists (a scoped thread's own payload only says
//! "a scoped thread panicked"). Under MPI a rank is one process, so "a
//! handler is running" (a process-wide count) is exact. In-process the ranks
//! share helper threads: a helper panic is printed too, and recorded only
//! while exactly one handler runs in the process (otherwise nobody can tell
//! whose helper it was).
//! Any other panic on a rank thread is printed; under MPI it then aborts
//! `MPI_COMM_WORLD` from the rank's main thread, since the peers would stay
//! blocked in MPI calls (rsmpi issue 197). Panics on helper threads are never
//! aborted on: they reach a rank thread, whose handling decides.
//!
//! The hook is process-wide, so only standalone universes install it
//! (`UniverseBuilder::run`, `uni20::launch`). Library-mode and SPMD
//! universes leave the host's hook alone: a handler's panic is still caught
//! and reported as its diagnostic (printed by the host's hook), only the
//! helper-thread notes are missing, and a panic outside a handler stops the
//! universe with abort frames and is re-raised to the host.

use std::any::Any;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;

thread_local! {
    static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
    static RANK_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Handlers running in this process (all in-process ranks together).
static HANDLERS_RUNNING: AtomicUsize = AtomicUsize::new(0);
/// Set once this process runs as an MPI rank.
static MPI_MODE: AtomicBool = AtomicBool::new(false);
/// Panics of helper threads while handlers ran, not yet reported.
static HELPER_PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// At most this many helper panics are kept for one diagnostic.
const MAX_HELPER_PANICS: usize = 8;

/// What the panic hook does with one panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// Caught and reported by `run_handler`: say nothing.
    Quiet,
    /// A helper thread of a running handler: record it for the diagnostic.
    Note,
    /// As `Note`, and print it (in-process, one handler running).
    NoteAndPrint,
    /// Print it (the previous hook) and let it unwind.
    Print,
    /// Print it and abort `MPI_COMM_WORLD` (MPI, rank thread, no handler).
    Abort,
}

/// The panic policy (see the module docs) as a pure function of: an MPI
/// rank or not, the panicking thread a rank's own thread or not, inside a
/// handler on this thread or not, and the number of handlers running in
/// this process.
pub(crate) fn disposition(mpi: bool, rank_thread: bool, in_handler: bool, handlers_running: usize) -> Disposition {
    if in_handler {
        Disposition::Quiet
    } else if !rank_thread && mpi && handlers_running > 0 {
        Disposition::Note
    } else if !rank_thread && handlers_running == 1 {
        Disposition::NoteAndPrint
    } else if rank_thread && mpi {
        Disposition::Abort
    } else {
        Disposition::Print
    }
}

/// Marks the current thread as a rank's own thread (the root's, a worker's,
/// or an MPI process's main thread) until the guard is dropped.
pub(crate) struct RankThread {
    previous: bool,
}

impl RankThread {
    pub(crate) fn enter() -> RankThread {
        RankThread {
            previous: RANK_THREAD.with(|r| r.replace(true)),
        }
    }
}

impl Drop for RankThread {
    fn drop(&mut self) {
        RANK_THREAD.with(|r| r.set(self.previous));
    }
}

/// Marks a handler as running on the current thread until dropped.
pub(crate) struct HandlerRunning(());

impl HandlerRunning {
    pub(crate) fn enter() -> HandlerRunning {
        if HANDLERS_RUNNING.fetch_add(1, Ordering::SeqCst) == 0 {
            HELPER_PANICS.lock().clear();
        }
        IN_HANDLER.with(|h| h.set(true));
        HandlerRunning(())
    }
}

impl Drop for HandlerRunning {
    fn drop(&mut self) {
        IN_HANDLER.with(|h| h.set(false));
        if HANDLERS_RUNNING.fetch_sub(1, Ordering::SeqCst) == 1 {
            HELPER_PANICS.lock().clear();
        }
    }
}

/// The helper-thread panics recorded since the handlers started (one line
/// each: thread, place, message), removing them.
pub(crate) fn take_helper_panics() -> Vec<String> {
    std::mem::take(&mut *HELPER_PANICS.lock())
}

/// The text of a panic payload (`&str` or `String`), else a placeholder.
pub(crate) fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

fn note(info: &std::panic::PanicHookInfo<'_>) {
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("<unnamed>");
    let place = info
        .location()
        .map_or_else(|| "an unknown place".into(), ToString::to_string);
    let text = format!(
        "helper thread `{name}` panicked at {place}: {}",
        panic_message(info.payload())
    );
    let mut notes = HELPER_PANICS.lock();
    if notes.len() < MAX_HELPER_PANICS {
        notes.push(text);
    }
}

/// Installs the runtime's panic hook once per process (in front of the
/// previous hook). `mpi`: this process is an MPI rank from now on.
pub(crate) fn install_panic_hook(mpi: bool) {
    if mpi {
        MPI_MODE.store(true, Ordering::SeqCst);
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let d = disposition(
                MPI_MODE.load(Ordering::SeqCst),
                RANK_THREAD.with(Cell::get),
                IN_HANDLER.with(Cell::get),
                HANDLERS_RUNNING.load(Ordering::SeqCst),
            );
            match d {
                Disposition::Quiet => {}
                Disposition::Note => note(info),
                Disposition::NoteAndPrint => {
                    note(info);
                    previous(info);
                }
                Disposition::Print => previous(info),
                Disposition::Abort => {
                    previous(info);
                    abort_world();
                }
            }
        }));
    });
}

#[cfg(feature = "mpi")]
fn abort_world() {
    eprintln!("uni20: panic outside a command handler; aborting MPI_COMM_WORLD");
    // Temporary outputs of this rank go before the process does.
    crate::cleanup::run_cleanups();
    // SAFETY: MPI_MODE is set only after `MPI_Init`, on the thread that
    // initialised MPI (the only one that may call MPI); `MPI_Abort` does
    // not return.
    unsafe {
        mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, 70);
    }
}

#[cfg(not(feature = "mpi"))]
fn abort_world() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy() {
        use Disposition::*;
        // (mpi, rank thread, in handler, handlers running)
        let cases = [
            // The handler's own thread: caught by run_handler.
            ((true, true, true, 1), Quiet),
            ((false, true, true, 3), Quiet),
            // A helper (rayon, scoped thread) of a running handler.
            ((true, false, false, 1), Note),
            ((false, false, false, 1), NoteAndPrint),
            // In-process with several handlers running: whose helper is it?
            ((false, false, false, 2), Print),
            // A rank thread outside any handler.
            ((true, true, false, 0), Abort),
            ((false, true, false, 2), Print),
            // A helper while no handler runs: it reaches a rank thread.
            ((true, false, false, 0), Print),
            ((false, false, false, 0), Print),
        ];
        for ((mpi, rank, inside, running), want) in cases {
            assert_eq!(
                disposition(mpi, rank, inside, running),
                want,
                "{mpi} {rank} {inside} {running}"
            );
        }
    }
}
