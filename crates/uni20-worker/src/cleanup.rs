//! Process-wide registry of temporary files that must not outlive a failed
//! process: files such as `write_npy`'s `.NAME.uni20-tmp-PID-N` are
//! [`register`]ed before they are created and removed by their
//! [`TempGuard`] on every ordinary path (success: [`TempGuard::dismiss`]
//! after the rename; error or unwinding panic: `Drop`). The paths that end
//! the process without unwinding call [`run_cleanups`] first: the MPI
//! transport's `abort` (fail-stop, before `MPI_Abort`), the MPI panic hook,
//! and the SIGTERM/SIGINT/SIGHUP handlers of [`install_signal_handlers`]
//! (the launcher's kill after another rank aborted, or Ctrl-C). SIGKILL
//! cannot be caught: a root killed that way leaves its temporary file (a
//! `.uni20-tmp-` name, never the target's).
//!
//! [`run_cleanups`] is async-signal-safe: the registry is a lock-free list of
//! leaked slots holding C strings, and a slot's string is freed on
//! deregistration only while no cleanup is running, so a handler never
//! reads freed memory and never allocates or locks.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::SeqCst};
use std::sync::OnceLock;

/// One registry entry. Slots are leaked and reused, never freed, so a
/// signal handler may walk the list at any time.
struct Slot {
    /// The registered path (`CString::into_raw`), or null when free.
    path: AtomicPtr<libc::c_char>,
    /// The next slot; written once, before the slot is published.
    next: AtomicPtr<Slot>,
}

/// Head of the slot list.
static HEAD: AtomicPtr<Slot> = AtomicPtr::new(null_mut());
/// Number of [`run_cleanups`] calls in progress; while it is non-zero a
/// deregistered path is leaked instead of freed (a cleanup may be reading it).
static CLEANING: AtomicUsize = AtomicUsize::new(0);

/// A registered temporary file: removed when the guard is dropped, unless
/// [`dismiss`](TempGuard::dismiss)ed; removed by [`run_cleanups`] while
/// registered.
#[must_use = "dropping the guard removes the file at once"]
pub struct TempGuard {
    slot: &'static Slot,
    path: PathBuf,
}

impl std::fmt::Debug for TempGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TempGuard").field("path", &self.path).finish()
    }
}

/// Registers `path` (made absolute against the current directory, without
/// touching the file system) for removal by [`run_cleanups`]. Register a
/// temporary file *before* creating it, so no instant exists at which the
/// file is on disk but unknown to the cleanup; if creating it then fails
/// (e.g. the name is taken), [`TempGuard::dismiss`] the guard instead of
/// dropping it, which would remove a file that is not yours.
///
/// # Errors
/// [`std::io::ErrorKind::InvalidInput`] for an empty path or one that
/// contains a NUL byte; the error of [`std::path::absolute`] otherwise.
pub fn register(path: &Path) -> std::io::Result<TempGuard> {
    let path = std::path::absolute(path)?;
    let raw = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "path contains a NUL byte"))?
        .into_raw();
    let mut cur = HEAD.load(SeqCst);
    while !cur.is_null() {
        // SAFETY: slots are leaked `Box`es, never freed.
        let slot: &'static Slot = unsafe { &*cur };
        if slot.path.compare_exchange(null_mut(), raw, SeqCst, SeqCst).is_ok() {
            return Ok(TempGuard { slot, path });
        }
        cur = slot.next.load(SeqCst);
    }
    let slot: &'static Slot = Box::leak(Box::new(Slot {
        path: AtomicPtr::new(raw),
        next: AtomicPtr::new(null_mut()),
    }));
    loop {
        let head = HEAD.load(SeqCst);
        slot.next.store(head, SeqCst);
        if HEAD
            .compare_exchange(head, slot as *const Slot as *mut Slot, SeqCst, SeqCst)
            .is_ok()
        {
            return Ok(TempGuard { slot, path });
        }
    }
}

impl TempGuard {
    /// The registered (absolute) path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Deregisters the path without removing anything: call it once the
    /// file was renamed into place, or when it was never created.
    pub fn dismiss(self) {
        self.deregister();
        std::mem::forget(self);
    }

    fn deregister(&self) {
        let raw = self.slot.path.swap(null_mut(), SeqCst);
        // A cleanup that loaded `raw` before the swap incremented CLEANING
        // before its load, so this load sees it (sequential consistency) and
        // the string is leaked; otherwise nobody can still be reading it.
        if !raw.is_null() && CLEANING.load(SeqCst) == 0 {
            // SAFETY: `raw` came from `CString::into_raw` in `register`, and
            // the swap made this the only owner.
            drop(unsafe { CString::from_raw(raw) });
        }
    }
}

impl Drop for TempGuard {
    /// Removes the file (a missing file is fine) and deregisters it.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        self.deregister();
    }
}

/// Removes every registered file now (`unlink(2)`; errors are ignored).
/// Registrations stay in place, so calling it twice is harmless.
///
/// Async-signal-safe: no allocation, no lock, only atomics and `unlink`.
/// Called before the process ends without unwinding: the MPI transport's
/// `abort`, the MPI panic hook and the handlers of
/// [`install_signal_handlers`]. Not called by the in-process transport's
/// abort: several universes may share that process, and each `TempGuard`
/// removes its own file when the error or panic reaches it.
pub fn run_cleanups() {
    CLEANING.fetch_add(1, SeqCst);
    let mut cur = HEAD.load(SeqCst);
    while !cur.is_null() {
        // SAFETY: slots are never freed.
        let slot = unsafe { &*cur };
        let raw = slot.path.load(SeqCst);
        if !raw.is_null() {
            // SAFETY: a registered string is freed only while CLEANING is 0.
            unsafe { libc::unlink(raw) };
        }
        cur = slot.next.load(SeqCst);
    }
    CLEANING.fetch_sub(1, SeqCst);
}

/// The currently registered paths (for diagnostics and tests; not
/// async-signal-safe).
pub fn registered() -> Vec<PathBuf> {
    CLEANING.fetch_add(1, SeqCst);
    let mut out = Vec::new();
    let mut cur = HEAD.load(SeqCst);
    while !cur.is_null() {
        // SAFETY: as in `run_cleanups`.
        let slot = unsafe { &*cur };
        let raw = slot.path.load(SeqCst);
        if !raw.is_null() {
            // SAFETY: a non-null path pointer of a slot is a NUL-terminated
            // string leaked by `register` and never freed while CLEANING > 0.
            let bytes = unsafe { CStr::from_ptr(raw) }.to_bytes();
            out.push(PathBuf::from(std::ffi::OsStr::from_bytes(bytes)));
        }
        cur = slot.next.load(SeqCst);
    }
    CLEANING.fetch_sub(1, SeqCst);
    out
}

/// Installs handlers for SIGTERM, SIGINT and SIGHUP (through `signal-hook`)
/// that call [`run_cleanups`], write the rank's wait note when it is
/// enabled ([`crate::waitnote::write_on_signal`]), and then die of the same signal, as the
/// default action would (`signal_hook::low_level::emulate_default_handler`).
/// Only the first call installs; later calls return the first outcome.
///
/// Opt-in, because it replaces the default action of these signals for the
/// whole process: a program that handles them itself should call
/// [`run_cleanups`] from its own handler instead. The `uni20` CLI installs
/// them on the root, which covers the launcher's SIGTERM after another rank
/// called `MPI_Abort` (Open MPI: SIGTERM, then SIGKILL).
///
/// # Errors
/// The OS error of `sigaction` (as text: the error is shared by every call).
pub fn install_signal_handlers() -> Result<(), String> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
                // SAFETY: the action only calls async-signal-safe code:
                // `run_cleanups` (atomics and unlink), `write_on_signal`
                // (atomics, a stack buffer and write) and
                // `emulate_default_handler` (sigaction, sigprocmask, raise).
                unsafe {
                    signal_hook::low_level::register(sig, move || {
                        run_cleanups();
                        crate::waitnote::write_on_signal(sig);
                        let _ = signal_hook::low_level::emulate_default_handler(sig);
                    })
                }
                .map_err(|e| format!("installing the handler of signal {sig}: {e}"))?;
            }
            Ok(())
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn guard_removes_on_drop_and_dismiss_keeps() {
        let dir = std::env::temp_dir().join(format!("uni20-cleanup-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("a.tmp");
        let ga = register(&a).unwrap();
        std::fs::write(&a, b"x").unwrap();
        assert!(registered().contains(&a));
        drop(ga);
        assert!(!a.exists());
        assert!(!registered().contains(&a));

        let b = dir.join("b.tmp");
        let gb = register(&b).unwrap();
        std::fs::write(&b, b"x").unwrap();
        gb.dismiss();
        assert!(b.exists(), "dismiss must not remove");
        assert!(!registered().contains(&b));

        // run_cleanups removes registered files and leaves others alone.
        let c = dir.join("c.tmp");
        let gc = register(&c).unwrap();
        std::fs::write(&c, b"x").unwrap();
        run_cleanups();
        assert!(!c.exists());
        assert!(b.exists());
        gc.dismiss();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn slots_are_reused_and_relative_paths_made_absolute() {
        let before = registered().len();
        let guards: Vec<TempGuard> = (0..50)
            .map(|i| register(Path::new(&format!("uni20-rel-{i}.tmp"))).unwrap())
            .collect();
        assert!(guards.iter().all(|g| g.path().is_absolute()));
        assert!(registered().len() >= before + 50);
        for g in guards {
            g.dismiss();
        }
        assert!(register(Path::new("a\0b")).is_err());
    }

    #[test]
    fn concurrent_register_and_cleanup_never_crash() {
        let dir = std::env::temp_dir().join(format!("uni20-cleanup-race-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let dir = &dir;
                s.spawn(move || {
                    for i in 0..500 {
                        let p = dir.join(format!("{t}-{i}"));
                        let g = register(&p).unwrap();
                        if i % 2 == 0 {
                            g.dismiss();
                        } else {
                            drop(g);
                        }
                    }
                });
            }
            s.spawn(|| {
                for _ in 0..2000 {
                    run_cleanups();
                }
            });
        });
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Child side of `signals_remove_registered_files` (ignored: it only
    /// runs there, in a child process): registers and creates the file
    /// named by the environment, then raises the signal.
    #[test]
    #[ignore = "child process of signals_remove_registered_files"]
    fn signal_child() {
        let (Ok(path), Ok(sig)) = (
            std::env::var("UNI20_CLEANUP_CHILD_FILE"),
            std::env::var("UNI20_CLEANUP_CHILD_SIG"),
        ) else {
            panic!("run only as the child of signals_remove_registered_files");
        };
        install_signal_handlers().unwrap();
        let guard = register(Path::new(&path)).unwrap();
        std::fs::write(&path, b"partial").unwrap();
        let sig: i32 = sig.parse().unwrap();
        // SAFETY: raising a signal on our own process has no memory-safety
        // preconditions.
        unsafe { libc::raise(sig) };
        drop(guard);
        // Not reached: the handler dies of the signal.
        std::process::exit(3);
    }

    #[test]
    fn signals_remove_registered_files() {
        let dir = std::env::temp_dir().join(format!("uni20-cleanup-sig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            let file = dir.join(format!("tmp-{sig}"));
            let status = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "cleanup::tests::signal_child", "--ignored", "--nocapture"])
                .env("UNI20_CLEANUP_CHILD_FILE", &file)
                .env("UNI20_CLEANUP_CHILD_SIG", sig.to_string())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap();
            assert_eq!(status.signal(), Some(sig), "signal {sig}: child ended with {status:?}");
            assert!(!file.exists(), "signal {sig}: temporary file left behind");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
