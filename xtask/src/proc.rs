//! Running a child in its own process group under a hard timeout.
//!
//! `mpirun` is started as the leader of a fresh process group. On timeout (or
//! when xtask itself is interrupted) the whole group is sent `SIGTERM`, then
//! `SIGKILL` two seconds later.
//!
//! Open MPI puts every rank into a process group of its own, so signalling
//! mpirun's group alone does not reach the ranks once mpirun is dead. On Linux
//! xtask therefore makes itself a *child subreaper*: ranks orphaned by a killed
//! mpirun are re-parented to xtask, and every descendant found under `/proc`
//! is signalled as well. Nothing survives a timeout.

use std::io;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// Grace period between `SIGTERM` and `SIGKILL`.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// How often the supervisor polls the child.
const POLL: Duration = Duration::from_millis(20);

/// Last terminating signal received by xtask (0 if none).
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

/// Signal handler: records the signal for the supervisor loop.
extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(sig, Ordering::SeqCst);
}

/// Prepares xtask to supervise launcher processes.
///
/// Installs handlers for `SIGINT`, `SIGTERM` and `SIGHUP` that only record the
/// signal (the supervised child lives in another process group, so a Ctrl-C at
/// the terminal would not reach it; the supervisor forwards it instead), and on
/// Linux registers xtask as a child subreaper so orphaned ranks can be found
/// and killed. Safe to call more than once.
pub fn init_supervisor() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installing a handler that performs a single atomic store.
        unsafe {
            libc::signal(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        }
    }
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// The signal that interrupted xtask, if any.
pub fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// How a supervised run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The child exited normally with this status code.
    Exited(i32),
    /// The child was killed by this signal (not sent by us).
    Signaled(i32),
    /// The hard timeout expired; the process group was killed.
    TimedOut,
    /// xtask received this signal; the process group was killed.
    Interrupted(i32),
}

impl Outcome {
    /// Whether the run succeeded (exit status 0).
    pub fn success(self) -> bool {
        self == Outcome::Exited(0)
    }

    /// The exit code xtask should report for this outcome.
    ///
    /// Normal exits pass through, signals map to `128 + sig`, and timeouts map
    /// to 124 (as `timeout(1)` does).
    pub fn exit_code(self) -> i32 {
        match self {
            Outcome::Exited(code) => code,
            Outcome::Signaled(sig) | Outcome::Interrupted(sig) => 128 + sig,
            Outcome::TimedOut => 124,
        }
    }

    /// A short human-readable description, e.g. `exit 3` or `TIMEOUT`.
    pub fn describe(self) -> String {
        match self {
            Outcome::Exited(0) => "ok".to_string(),
            Outcome::Exited(code) => format!("FAILED (exit {code})"),
            Outcome::Signaled(sig) => format!("FAILED (signal {sig})"),
            Outcome::TimedOut => "TIMEOUT".to_string(),
            Outcome::Interrupted(sig) => format!("INTERRUPTED (signal {sig})"),
        }
    }
}

/// Converts a child's exit status into an [`Outcome`].
fn outcome_of(status: ExitStatus) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Outcome::Exited(code),
        (None, Some(sig)) => Outcome::Signaled(sig),
        (None, None) => Outcome::Exited(1),
    }
}

/// Runs `cmd` as the leader of a new process group, killing the group if it
/// is still running after `timeout` or if xtask is interrupted.
///
/// Returns the outcome and the wall-clock time taken. Stray descendants (for
/// example ranks orphaned by a crashed launcher) are killed in every case.
pub fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Result<(Outcome, Duration)> {
    let (outcome, _, elapsed) = supervise(cmd, timeout, None)?;
    Ok((outcome, elapsed))
}

/// Runs `cmd` (whose stdout the caller sends to the file `log`) like
/// [`run_with_timeout`], but kills its whole process group with `SIGKILL`
/// as soon as a line of `log` contains `marker` (a crash at a chosen point,
/// as a node failure would). Returns the outcome (`Signaled(9)` or the
/// launcher's exit after its ranks were killed, when the marker was seen),
/// whether the marker was seen, and the wall time.
pub fn run_killed_at(
    cmd: &mut Command,
    timeout: Duration,
    log: &std::path::Path,
    marker: &str,
) -> Result<(Outcome, bool, Duration)> {
    supervise(cmd, timeout, Some((log, marker)))
}

/// The supervision loop of [`run_with_timeout`] and [`run_killed_at`].
fn supervise(
    cmd: &mut Command,
    timeout: Duration,
    kill_at: Option<(&std::path::Path, &str)>,
) -> Result<(Outcome, bool, Duration)> {
    use std::os::unix::process::CommandExt;

    init_supervisor();
    cmd.process_group(0);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("failed to start {:?}", cmd.get_program()))?;
    let pgid = child.id() as libc::pid_t;
    let mut seen = false;
    let outcome = loop {
        if let Some((log, marker)) = kill_at {
            if std::fs::read_to_string(log).is_ok_and(|t| t.lines().any(|l| l.contains(marker))) {
                seen = true;
                sweep(Some(pgid), libc::SIGKILL);
                break outcome_of(child.wait()?);
            }
        }
        if let Some(status) = child.try_wait()? {
            break outcome_of(status);
        }
        if let Some(sig) = interrupted() {
            eprintln!("xtask: received signal {sig}; killing process group {pgid}");
            terminate(&mut child, pgid)?;
            break Outcome::Interrupted(sig);
        }
        if start.elapsed() >= timeout {
            eprintln!(
                "xtask: TIMEOUT: still running after {} s; killing process group {pgid} \
                 (SIGTERM, then SIGKILL after {} s)",
                timeout.as_secs(),
                KILL_GRACE.as_secs()
            );
            terminate(&mut child, pgid)?;
            break Outcome::TimedOut;
        }
        std::thread::sleep(POLL);
    };
    // Whatever happened, nothing started by this run may outlive it. (The
    // leader is reaped by now, so its group id is not signalled again.)
    sweep(None, libc::SIGKILL);
    reap_orphans(pgid);
    Ok((outcome, seen, start.elapsed()))
}

/// `SIGTERM` to the group and all descendants, wait up to [`KILL_GRACE`], then
/// `SIGKILL` and reap.
fn terminate(child: &mut Child, pgid: libc::pid_t) -> io::Result<()> {
    sweep(Some(pgid), libc::SIGTERM);
    let deadline = Instant::now() + KILL_GRACE;
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() && live_descendants().is_empty() {
            // Everything went down on SIGTERM; still SIGKILL the group in case
            // something in it is not our descendant any more.
            break;
        }
        reap_orphans(pgid);
        std::thread::sleep(POLL);
    }
    sweep(Some(pgid), libc::SIGKILL);
    child.wait()?;
    // Wait briefly for SIGKILLed orphans to disappear.
    let deadline = Instant::now() + KILL_GRACE;
    while !live_descendants().is_empty() && Instant::now() < deadline {
        sweep(None, libc::SIGKILL);
        reap_orphans(pgid);
        std::thread::sleep(POLL);
    }
    Ok(())
}

/// Sends `sig` to process group `pgid` (if given) and to every live
/// descendant of xtask.
fn sweep(pgid: Option<libc::pid_t>, sig: libc::c_int) {
    if let Some(pgid) = pgid {
        // SAFETY: plain killpg(2); ESRCH is expected and ignored.
        unsafe {
            libc::killpg(pgid, sig);
        }
    }
    for pid in live_descendants() {
        // SAFETY: as above.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// Reaps exited children re-parented to xtask (it is a subreaper on Linux),
/// leaving `except` (the supervised child, owned by its `Child` handle) alone.
fn reap_orphans(except: libc::pid_t) {
    let me = std::process::id() as libc::pid_t;
    for proc in descendants() {
        if proc.ppid == me && !proc.alive && proc.pid != except {
            let mut status = 0;
            // SAFETY: non-blocking waitpid on a specific zombie child of ours.
            unsafe {
                libc::waitpid(proc.pid, &mut status, libc::WNOHANG);
            }
        }
    }
}

/// Live (non-zombie) descendants of the xtask process.
fn live_descendants() -> Vec<libc::pid_t> {
    descendants().into_iter().filter(|p| p.alive).map(|p| p.pid).collect()
}

/// One process found below xtask in the process tree.
struct Descendant {
    /// Its process id.
    pid: libc::pid_t,
    /// Its parent's process id.
    ppid: libc::pid_t,
    /// False for zombies (exited, not yet reaped).
    alive: bool,
}

/// All descendants of the xtask process (zombies included), found via `/proc`.
#[cfg(target_os = "linux")]
fn descendants() -> Vec<Descendant> {
    use std::collections::HashMap;

    let me = std::process::id() as libc::pid_t;
    let mut children: HashMap<libc::pid_t, Vec<(libc::pid_t, bool)>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Format: "pid (comm) state ppid ..."; comm may contain spaces/parens.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("");
        let Some(ppid) = fields.next().and_then(|s| s.parse().ok()) else {
            continue;
        };
        children
            .entry(ppid)
            .or_default()
            .push((pid, state != "Z" && state != "X"));
    }
    let mut out = Vec::new();
    let mut stack = vec![me];
    while let Some(parent) = stack.pop() {
        for &(pid, alive) in children.get(&parent).map(Vec::as_slice).unwrap_or(&[]) {
            out.push(Descendant {
                pid,
                ppid: parent,
                alive,
            });
            stack.push(pid);
        }
    }
    out
}

/// Descendants are not tracked outside Linux; the process group is used alone.
#[cfg(not(target_os = "linux"))]
fn descendants() -> Vec<Descendant> {
    Vec::new()
}
