//! The universe as a Python object: a root thread that owns the
//! [`Controller`] and runs the jobs the Python thread hands it.
//!
//! `uni20::universe().run(f)` lends the controller to `f` for as long as
//! `f` runs, which a context manager cannot wrap directly: `__enter__`
//! must return to Python. So the universe runs on its own thread (the
//! root thread); `f` serves a channel of jobs (closures over the
//! controller) until the Python side closes it. Each binding sends one job
//! and waits for its reply with the GIL released, checking for signals
//! every 50 ms (Ctrl-C raises `KeyboardInterrupt` at once; the job itself
//! runs to its end on the root thread, and the universe is then closed).
//!
//! Under `mpirun` (feature `mpi`) the root thread initialises MPI and runs
//! the universe in library mode on `MPI_COMM_WORLD` (`run_on`, which
//! returns on every rank, so that a failed command becomes a Python
//! exception on rank 0 instead of ending the job): on rank 0 it serves the
//! jobs; on every other rank it runs the worker loop and then ends the
//! process, so the Python script never continues past `Universe.__enter__`
//! there (the calling thread waits, GIL released, until the process exits).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use uni20::{Controller, JobError};

use crate::errors::{panic_text, py_result, Failure, Kind, Res};

/// A job: runs on the root thread with the controller.
type Job = Box<dyn FnOnce(&Controller<'_>) + Send>;

/// What the Python side sends to the root thread.
enum Msg {
    /// Run this job.
    Job(Job),
    /// End the universe: cleanly, or (under MPI) by aborting every rank
    /// with this reason.
    Close { abort: Option<String> },
}

/// What the root thread reports once the universe has started.
#[derive(Clone, Debug)]
struct Started {
    size: usize,
    transport: &'static str,
    threads_per_rank: usize,
    compute_ranks: Vec<usize>,
}

/// How often a waiting caller wakes to let Python handle signals.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// The shared state of one universe: the job channel and the root thread.
pub(crate) struct Handle {
    tx: Mutex<Option<Sender<Msg>>>,
    thread: Mutex<Option<JoinHandle<Result<(), JobError>>>>,
    /// Set when a wait was interrupted (Ctrl-C) while a job ran: the job
    /// finishes on the root thread, but no new job is accepted.
    interrupted: AtomicBool,
    info: Started,
}

impl Handle {
    /// Runs `f` on the root thread and returns its result, waiting with the
    /// GIL released. A panic of `f` becomes [`Kind::Internal`].
    ///
    /// # Errors
    /// [`Kind::Closed`] if the universe is closed or was interrupted; `f`'s
    /// own failure; `KeyboardInterrupt` (or another signal handler's
    /// exception) if a signal arrives while waiting.
    pub(crate) fn call<R: Send + 'static>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Controller<'_>) -> Res<R> + Send + 'static,
    ) -> Res<R> {
        if self.interrupted.load(Ordering::SeqCst) {
            return Err(Failure::new(
                Kind::Closed,
                "the universe was interrupted (Ctrl-C) while an operation ran; open a new one",
            ));
        }
        let (reply_tx, reply_rx) = mpsc::channel::<Res<R>>();
        let job: Job = Box::new(move |ctl| {
            let r = catch_unwind(AssertUnwindSafe(|| f(ctl))).unwrap_or_else(|p| {
                Err(Failure::new(
                    Kind::Internal,
                    format!("uni20 panicked (a bug; please report it): {}", panic_text(&*p)),
                ))
            });
            let _ = reply_tx.send(r);
        });
        {
            let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
            let Some(tx) = tx.as_ref() else {
                return Err(Failure::new(Kind::Closed, "the universe is closed"));
            };
            tx.send(Msg::Job(job))
                .map_err(|_| Failure::new(Kind::Closed, "the universe has ended (its root thread is gone)"))?;
        }
        match wait(py, reply_rx) {
            Ok(Some(r)) => r,
            Ok(None) => Err(Failure::new(
                Kind::Job,
                "the universe ended while the operation ran (see the error printed above)",
            )),
            Err(e) => {
                self.interrupted.store(true, Ordering::SeqCst);
                Err(Failure::Python(e))
            }
        }
    }

    /// Ends the universe. `abort`: under MPI, end every rank with this
    /// reason (`MPI_Abort`, which also ends this process). Returns the
    /// universe's own failure, if it had one. Does not wait for a job that
    /// an interrupt left running.
    fn close(&self, py: Python<'_>, abort: Option<String>) -> Res<()> {
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(tx) = tx else { return Ok(()) };
        let _ = tx.send(Msg::Close { abort });
        drop(tx);
        if self.interrupted.load(Ordering::SeqCst) {
            // The running job may take long; the thread ends on its own.
            return Ok(());
        }
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread {
            let joined = py.detach(move || t.join());
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e.into()),
                Err(p) => {
                    return Err(Failure::new(
                        Kind::Internal,
                        format!("the root thread panicked: {}", panic_text(&*p)),
                    ))
                }
            }
        }
        Ok(())
    }
}

/// Waits for a reply with the GIL released, waking every
/// [`SIGNAL_POLL`] to run Python's signal handlers. `Ok(None)`: the
/// sender is gone without replying.
fn wait<T: Send>(py: Python<'_>, rx: Receiver<T>) -> PyResult<Option<T>> {
    let mut rx = rx;
    loop {
        let (r, back) = py.detach(move || (rx.recv_timeout(SIGNAL_POLL), rx));
        rx = back;
        match r {
            Ok(v) => return Ok(Some(v)),
            Err(RecvTimeoutError::Disconnected) => return Ok(None),
            Err(RecvTimeoutError::Timeout) => py.check_signals()?,
        }
    }
}

/// Serves jobs until the Python side closes the channel.
fn serve(ctl: &Controller<'_>, rx: Receiver<Msg>) {
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Job(job) => job(ctl),
            Msg::Close { abort } => {
                if let Some(reason) = abort {
                    ctl.transport().abort(&reason);
                }
                break;
            }
        }
    }
}

/// Runs the universe on this (the root) thread: in-process, or under an
/// MPI launcher with the MPI build in library mode on `MPI_COMM_WORLD`
/// (MPI initialised and finalised here). Library mode returns on every
/// rank, so a failed command reaches Python as an exception instead of
/// ending the job; a worker rank ends its process here once the universe
/// is over (status 0 after rank 0 shut it down or aborted it, 1 after the
/// worker's own failure).
fn run_universe(builder: uni20::UniverseBuilder, root: impl FnOnce(&Controller<'_>)) -> Result<(), JobError> {
    #[cfg(feature = "mpi")]
    if uni20::worker::launched_by_mpi() {
        use uni20::mpi::traits::Communicator;
        let Some((mpi, _)) = uni20::mpi::initialize_with_threading(uni20::mpi::Threading::Funneled) else {
            return Err(JobError::Startup(
                "MPI is already initialised in this process: one universe per process under mpirun".into(),
            ));
        };
        let world = mpi.world();
        let rank = world.rank();
        let out = builder.run_on(&world, root);
        drop(world);
        drop(mpi);
        return match out {
            Ok(uni20::RankExit::Root(())) => Ok(()),
            Ok(uni20::RankExit::Worker(exit)) => {
                // The script never runs past Universe.__enter__ on a worker.
                // The job's status is rank 0's (its exception, or the script's
                // own exit): after rank 0 shut the universe down or aborted it
                // (rank 0 reports why), a worker ends with 0, so that mpirun
                // does not kill rank 0 before it has printed its traceback; a
                // worker's own failure ends it with 1.
                std::process::exit(match exit {
                    uni20::WorkerExit::Shutdown | uni20::WorkerExit::Aborted(_) => 0,
                    _ => 1,
                })
            }
            Err(e) if rank == 0 => Err(e),
            Err(e) => {
                eprintln!("uni20: rank {rank}: {e}");
                std::process::exit(1)
            }
        };
    }
    builder.run(root)
}

/// A universe of ranks: rank 0 (this process, or under MPI the process of
/// rank 0) runs the Python script; the other ranks serve it.
///
/// Use it as a context manager::
///
///     with uni20.Universe(ranks=2, threads_per_rank=1) as u:
///         t = u.tensor(numpy.eye(4), block=2)
///
/// In-process (the default) the ranks are threads of this process. Under
/// ``mpirun -n N python script.py`` with an MPI build (cargo feature
/// ``mpi``) each process is one rank: rank 0 returns from ``__enter__``
/// and runs the script, every other rank serves as a worker from
/// ``__enter__`` on and exits when rank 0 leaves the ``with`` block. An
/// exception that leaves the ``with`` block on rank 0 under MPI aborts the
/// universe: every worker exits at once, and the exception propagates on
/// rank 0 (Python prints its traceback, once, and exits with status 1,
/// which is the job's status).
#[pyclass(module = "uni20")]
pub(crate) struct Universe {
    ranks: Option<usize>,
    threads_per_rank: Option<usize>,
    store_dir: Option<std::path::PathBuf>,
    pub(crate) handle: Option<Arc<Handle>>,
}

impl Universe {
    /// The open universe's handle.
    ///
    /// # Errors
    /// [`Kind::Closed`] before `__enter__`/`start` or after the end.
    pub(crate) fn handle(&self) -> Res<Arc<Handle>> {
        self.handle.clone().ok_or_else(|| {
            Failure::new(
                Kind::Closed,
                "the universe is not running: use `with uni20.Universe() as u:` (or call start())",
            )
        })
    }
}

#[pymethods]
impl Universe {
    /// A universe with `ranks` in-process ranks (default: ``UNI20_RANKS``,
    /// else 4; ignored under MPI, where ``mpirun -n`` decides),
    /// `threads_per_rank` kernel threads per rank (default: cores / ranks)
    /// and, with `store_dir`, each rank's persistent store on disk under
    /// that directory (needed to restore a checkpoint in a later run).
    /// Nothing starts before ``__enter__`` (or ``start()``).
    #[new]
    #[pyo3(signature = (ranks=None, threads_per_rank=None, store_dir=None))]
    fn new(ranks: Option<usize>, threads_per_rank: Option<usize>, store_dir: Option<std::path::PathBuf>) -> Self {
        Universe {
            ranks,
            threads_per_rank,
            store_dir,
            handle: None,
        }
    }

    /// Starts the universe (what ``__enter__`` does) and returns it. Under
    /// MPI, only rank 0 returns.
    ///
    /// Raises ``StartupError`` if the universe cannot start (a bad
    /// ``UNI20_*`` variable, 0 ranks, ``threads_per_rank=0``, a build without MPI under
    /// ``mpirun`` with several processes, a second universe in one MPI
    /// process), ``UniverseClosedError``-free otherwise.
    fn start(this: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let py = this.py();
        let mut slf = this.borrow_mut();
        if slf.handle.is_some() {
            return py_result(py, Err(Failure::new(Kind::Startup, "this universe is already running")));
        }
        let mut builder = uni20::universe();
        if let Some(n) = slf.ranks {
            builder = builder.ranks(n);
        }
        if slf.threads_per_rank == Some(0) {
            // The builder would round 0 up to 1 silently.
            return py_result(
                py,
                Err(Failure::new(
                    Kind::Startup,
                    "threads_per_rank = 0: a rank needs at least 1 kernel thread",
                )),
            );
        }
        if let Some(n) = slf.threads_per_rank {
            builder = builder.threads_per_rank(n);
        }
        if let Some(d) = &slf.store_dir {
            builder = builder.store_dir(d);
        }
        let (tx, rx) = mpsc::channel::<Msg>();
        let (started_tx, started_rx) = mpsc::channel::<Result<Started, JobError>>();
        let started_err = started_tx.clone();
        let thread = std::thread::Builder::new()
            .name("uni20-root".into())
            .spawn(move || {
                let root = move |ctl: &Controller<'_>| {
                    let info = Started {
                        size: ctl.size(),
                        transport: ctl.transport_kind().name(),
                        threads_per_rank: ctl.threads_per_rank(),
                        compute_ranks: ctl.compute_ranks(),
                    };
                    let _ = started_tx.send(Ok(info));
                    serve(ctl, rx);
                };
                let out = run_universe(builder, root);
                if let Err(e) = &out {
                    // Start-up failed: tell the waiting caller why.
                    let _ = started_err.send(Err(JobError::Startup(e.to_string())));
                }
                out
            })
            .map_err(|e| Failure::new(Kind::Startup, format!("cannot start the root thread: {e}")));
        let thread = py_result(py, thread)?;
        let started = match wait(py, started_rx)? {
            Some(Ok(info)) => info,
            Some(Err(e)) => {
                let _ = thread.join();
                let msg = match e {
                    JobError::Startup(m) => m,
                    other => other.to_string(),
                };
                return py_result(py, Err(Failure::new(Kind::Startup, msg)));
            }
            None => {
                let why = match thread.join() {
                    Err(p) => panic_text(&*p),
                    Ok(_) => "the root thread ended before the universe started".into(),
                };
                return py_result(py, Err(Failure::new(Kind::Startup, why)));
            }
        };
        slf.handle = Some(Arc::new(Handle {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            interrupted: AtomicBool::new(false),
            info: started,
        }));
        drop(slf);
        // A universe the script never closed ends with the interpreter
        // (under MPI the workers would otherwise wait for rank 0 forever).
        py.import("atexit")?
            .call_method1("register", (this.getattr("close")?,))?;
        Ok(this)
    }

    fn __enter__(this: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        Universe::start(this)
    }

    /// Ends the universe: after an exception under MPI, aborts it (every
    /// worker exits at once); otherwise shuts the workers down. Never
    /// suppresses the exception.
    #[pyo3(signature = (exc_type=None, exc=None, tb=None))]
    fn __exit__(
        &mut self,
        py: Python<'_>,
        exc_type: Option<Bound<'_, PyAny>>,
        exc: Option<Bound<'_, PyAny>>,
        tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let Some(h) = self.handle.take() else { return Ok(false) };
        if let (Some(t), Some(e)) = (&exc_type, &exc) {
            if h.info.transport == "mpi" {
                if h.interrupted.load(Ordering::SeqCst) {
                    // The root thread is still busy with the interrupted
                    // operation and cannot abort the universe: print the
                    // traceback and end this process; mpirun then ends the
                    // other ranks.
                    let traceback = py.import("traceback")?;
                    let kwargs = PyDict::new(py);
                    kwargs.set_item("file", py.import("sys")?.getattr("stderr")?)?;
                    traceback.call_method("print_exception", (t, e, tb), Some(&kwargs))?;
                    py.import("sys")?.getattr("stderr")?.call_method0("flush")?;
                    std::process::exit(1);
                }
                // Every worker is told with an abort frame and exits; the
                // exception propagates here (Python prints the traceback
                // once, on rank 0, and exits with status 1).
                let reason = format!(
                    "rank 0 raised {}: {}",
                    t.getattr("__name__").map(|n| n.to_string()).unwrap_or_default(),
                    e.str().map(|s| s.to_string()).unwrap_or_default()
                );
                let _ = h.close(py, Some(reason));
                return Ok(false);
            }
            // In-process: shut down; the exception propagates.
            let _ = h.close(py, None);
            return Ok(false);
        }
        py_result(py, h.close(py, None))?;
        Ok(false)
    }

    /// Ends the universe (as leaving the ``with`` block without an
    /// exception). Tensors of a closed universe can no longer be used.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.handle.take() {
            Some(h) => py_result(py, h.close(py, None)),
            None => Ok(()),
        }
    }

    /// True while the universe runs.
    #[getter]
    fn running(&self) -> bool {
        self.handle.is_some()
    }

    /// Number of ranks (root included).
    #[getter]
    fn size(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(py_result(py, self.handle())?.info.size)
    }

    /// ``"in-process"`` or ``"mpi"``.
    #[getter]
    fn transport(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(py_result(py, self.handle())?.info.transport)
    }

    /// Kernel threads of each rank.
    #[getter]
    fn threads_per_rank(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(py_result(py, self.handle())?.info.threads_per_rank)
    }

    /// The ranks that compute (all but the root and any storage ranks).
    #[getter]
    fn compute_ranks(&self, py: Python<'_>) -> PyResult<Vec<usize>> {
        Ok(py_result(py, self.handle())?.info.compute_ranks.clone())
    }

    fn __repr__(&self) -> String {
        match &self.handle {
            Some(h) => format!(
                "Universe(size={}, transport={:?}, threads_per_rank={})",
                h.info.size, h.info.transport, h.info.threads_per_rank
            ),
            None => "Universe(not running)".into(),
        }
    }
}
