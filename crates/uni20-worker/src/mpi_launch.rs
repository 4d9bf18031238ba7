//! Launching MPI universes, in the two ways a process can host one.
//!
//! - **Standalone** ([`standalone`], `launch` and
//!   [`UniverseBuilder::run`](crate::UniverseBuilder::run) under `mpirun`):
//!   uni20 owns the process. It initialises MPI (`Funneled`) on
//!   `MPI_COMM_WORLD`, installs its panic hook, aborts with `MPI_Abort` on
//!   fail-stop, ends worker processes with `exit` after their loop, and
//!   finalises MPI on the root.
//! - **Library mode** ([`library`], [`UniverseBuilder::run_on`](crate::UniverseBuilder::run_on)):
//!   the host owns MPI and passes a communicator. The universe runs on a
//!   duplicate of it (`MPI_Comm_dup`, freed at the end), never initialises
//!   or finalises MPI, installs no hook, and returns on every rank: the
//!   root with the closure's result, a worker with its [`WorkerExit`].
//!   Fail-stop sends abort frames instead of calling `MPI_Abort` (see
//!   `mpi_transport`).

use std::panic::{catch_unwind, AssertUnwindSafe};

use mpi::topology::{Communicator, SimpleCommunicator};

use crate::controller::Controller;
use crate::diag::JobError;
use crate::fault::FaultKind;
use crate::launch::{root_main, Launch};
use crate::mpi_transport::{check_mpi_usable, duplicate_host_communicator, MpiTransport, OnAbort};
use crate::panics::{install_panic_hook, panic_message, RankThread};
use crate::protocol::StartupFailure;
use crate::spmd::SpmdContext;
use crate::startup::{failure_of, worker_failed_handshake};
use crate::transport::{Transport, TAG_CMD};
use crate::universe::RankExit;
use crate::worker::{worker_loop, WorkerExit};

/// The message for a standalone start in a process whose MPI the host
/// already initialised.
const ALREADY_INITIALISED: &str = "MPI was already initialised in this process (by the host program): run the \
                                   universe in library mode with `UniverseBuilder::run_on(&communicator, ..)`, \
                                   which uses the host's communicator and returns on every rank";

/// What one rank needs before its loop or closure runs.
struct Rank {
    registry: crate::registry::Registry,
    store: uni20_persist::Store,
    threads: usize,
    storage: usize,
}

/// Prepares this rank: the checks of the configuration against the size,
/// its registry and its store.
///
/// # Errors
/// This rank's [`StartupFailure`]; the caller still joins the start-up
/// handshake with it, so no rank waits for this one.
fn prepare(launch: &Launch, t: &MpiTransport) -> Result<Rank, StartupFailure> {
    let (size, rank) = (t.size(), t.rank());
    let failed = |e| failure_of(rank, e);
    launch.check_faults(size).map_err(failed)?;
    if launch.config.faults.has_kind(FaultKind::Spawn) {
        return Err(failed(JobError::Startup(
            "UNI20_INJECT_FAULT: `spawn` applies to the in-process universe only".into(),
        )));
    }
    Ok(Rank {
        threads: launch.threads(launch.config.launcher.local_size.unwrap_or(size)),
        storage: launch.storage_count(size).map_err(failed)?,
        registry: launch.registry_of(rank).map_err(failed)?,
        store: launch.open_store(rank)?,
    })
}

/// Runs this process as one rank of a standalone MPI universe on
/// `MPI_COMM_WORLD`. Only the root returns; workers exit the process when
/// the job ends (status 0 after a clean shutdown, 1 otherwise).
pub(crate) fn standalone<R>(launch: Launch, f: impl FnOnce(&Controller<'_>) -> R) -> Result<R, JobError> {
    let (universe, _threading) = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .ok_or_else(|| JobError::Startup(ALREADY_INITIALISED.into()))?;
    let world = universe.world();
    install_panic_hook(true);
    let _rank_thread = RankThread::enter();
    let t = MpiTransport::with_chunk_bytes(world, launch.config.chunk_bytes);
    let rank = t.rank();
    let _span = tracing::info_span!("rank", rank).entered();
    let prepared = prepare(&launch, &t);
    if let Ok(p) = &prepared {
        // Every rank of a standalone universe says what it waited for when
        // the launcher ends it after another rank died (SIGTERM).
        crate::waitnote::enable(rank, t.size(), p.storage);
        if let Err(e) = crate::cleanup::install_signal_handlers() {
            tracing::warn!(rank, "no wait note on SIGTERM: {e}");
        }
    }
    if rank == 0 {
        let result = prepared.map_err(StartupFailure::into_error).and_then(
            |Rank {
                 registry,
                 store,
                 threads,
                 storage,
             }| root_main(&t, registry, store, threads, storage, &launch.config, f),
        );
        if let Err(e) = &result {
            // Every start-up or job failure ends every rank (a failure of
            // the root's own preparation included: the workers wait in the
            // handshake).
            t.abort(&e.to_string());
        }
        drop(t);
        drop(universe);
        result
    } else {
        let Rank {
            registry,
            store,
            threads,
            storage: _,
        } = match prepared {
            Ok(prepared) => prepared,
            Err(failure) => {
                // The root reports this rank's failure and aborts the job;
                // exiting first could make mpirun kill the root before it
                // has said anything.
                worker_failed_handshake(&t, &failure);
                let _ = t.recv(0, TAG_CMD);
                drop(t);
                drop(universe);
                std::process::exit(1);
            }
        };
        let backends = launch.config.rank_backends(threads);
        let outcome = worker_loop(&t, &registry, &store, &backends, threads, &launch.config);
        match &outcome {
            WorkerExit::Died(why) => t.abort(why),
            // The root prints why and aborts the job; exiting first could
            // make mpirun kill the root before it has said anything.
            WorkerExit::Refused(_) => {
                let _ = t.recv(0, TAG_CMD);
            }
            _ => {}
        }
        drop(t);
        // Dropped before exit: an in-memory store's temporary offload
        // directory goes with it.
        drop(store);
        drop(universe);
        std::process::exit(match outcome {
            WorkerExit::Shutdown => 0,
            _ => 1,
        });
    }
}

/// Runs this process as one rank of a library-mode universe on a duplicate
/// of the host's communicator `comm`. Every rank of `comm` must call it.
/// Returns on every rank (see the module docs); a panic of the root's
/// closure stops the universe and is then re-raised.
///
/// `launch` is this rank's resolved launch, or the error resolving it: a
/// rank whose configuration is unusable still joins the universe and fails
/// its start-up, so that no peer waits for it.
///
/// # Errors
/// On the root: the errors of [`UniverseBuilder::run`](crate::UniverseBuilder::run).
/// On any rank: [`JobError::Startup`] if MPI is not usable from this thread
/// ([`check_mpi_usable`]) or `comm` is an inter-communicator; on the rank
/// whose preparation failed (configuration, store, registry), its own
/// failure as `rank R failed at start-up: <error>`, after the root has
/// stopped the universe with it (the root returns the same text, the other
/// workers [`WorkerExit::Refused`] or [`WorkerExit::Aborted`] with it).
pub(crate) fn library<C: Communicator, R>(
    launch: Result<Launch, JobError>,
    comm: &C,
    f: impl FnOnce(&Controller<'_>) -> R,
) -> Result<RankExit<R>, JobError> {
    check_mpi_usable()?;
    // Collective over `comm`: every rank gets here, even one whose
    // configuration is unusable, so that no peer waits for it.
    let dup = duplicate_host_communicator(comm)?;
    let (launch, unusable) = match launch {
        Ok(launch) => (launch, None),
        // The defaults carry this rank through the handshake, which fails.
        Err(e) => (Launch::defaults(), Some(e)),
    };
    let on_abort = OnAbort::Frames {
        timeout: launch.config.abort_timeout,
    };
    // Dropping the transport on any early return runs the closing
    // handshake, so the peers are never left waiting for this rank.
    let t = MpiTransport::with_policy(dup, launch.config.chunk_bytes, on_abort);
    let rank = t.rank();
    let prepared = match unusable {
        Some(e) => Err(failure_of(rank, e)),
        None => prepare(&launch, &t),
    };
    let Rank {
        registry,
        store,
        threads,
        storage,
    } = match prepared {
        Ok(prepared) => prepared,
        Err(failure) => {
            if rank == 0 {
                // The workers wait in the handshake: the abort ends it.
                t.abort(&failure.describe());
            } else {
                worker_failed_handshake(&t, &failure);
            }
            t.finish();
            return Err(failure.into_error());
        }
    };
    let _span = tracing::info_span!("rank", rank).entered();
    if rank == 0 {
        let out = catch_unwind(AssertUnwindSafe(|| {
            root_main(&t, registry, store, threads, storage, &launch.config, f)
        }));
        match out {
            Ok(result) => {
                if let Err(e) = &result {
                    t.abort(&format!("the root stopped the universe: {e}"));
                }
                let aborted = t.finish();
                match (result, aborted) {
                    (Ok(v), None) => Ok(RankExit::Root(v)),
                    (Ok(_), Some(why)) => Err(JobError::Stopped(why)),
                    (Err(e), _) => Err(e),
                }
            }
            Err(p) => {
                t.abort("the root panicked");
                t.finish();
                std::panic::resume_unwind(p)
            }
        }
    } else {
        let backends = launch.config.rank_backends(threads);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            worker_loop(&t, &registry, &store, &backends, threads, &launch.config)
        }));
        let exit = match outcome {
            Ok(WorkerExit::Died(why)) => {
                t.abort(&why);
                WorkerExit::Died(why)
            }
            Ok(exit) => exit,
            Err(p) => {
                let why = format!("rank {rank} panicked outside a command handler: {}", panic_message(&*p));
                t.abort(&why);
                t.finish();
                std::panic::resume_unwind(p)
            }
        };
        let aborted = t.finish();
        Ok(RankExit::Worker(match (exit, aborted) {
            (WorkerExit::Shutdown, Some(why)) => WorkerExit::Aborted(why),
            (exit, _) => exit,
        }))
    }
}

/// An SPMD universe on `MPI_COMM_WORLD` for a process started by `mpirun`:
/// on the host's MPI if it is already initialised (library mode), else MPI
/// is initialised (`Funneled`) here and finalised before returning.
/// Returns this rank's `(rank, outcome)`.
///
/// # Errors
/// [`JobError::Startup`] if MPI cannot be initialised.
pub(crate) fn spmd_world<R>(
    launch: Launch,
    f: impl FnOnce(&SpmdContext<'_>) -> R,
) -> Result<crate::universe::SpmdOutcomes<R>, JobError> {
    if mpi::environment::is_initialized() {
        let world = SimpleCommunicator::world();
        let rank = world.rank() as usize;
        return Ok(vec![(rank, crate::spmd::run::on_communicator(Ok(launch), &world, f))]);
    }
    let (universe, _threading) = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .ok_or_else(|| JobError::Startup("MPI could not be initialised".into()))?;
    let world = universe.world();
    let rank = world.rank() as usize;
    let out = crate::spmd::run::on_communicator(Ok(launch), &world, f);
    drop(world);
    drop(universe);
    Ok(vec![(rank, out)])
}
