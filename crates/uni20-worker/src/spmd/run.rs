//! Starting SPMD universes: the rank body shared by both transports (the
//! registry check, the user's closure, the outcome), the in-process runner
//! (ranks as scoped threads) and the MPI runner (one rank per process, on a
//! duplicate of a host communicator). Neither installs a panic hook nor
//! ends the process: a panic in the closure stops the universe and is
//! re-raised on the rank's thread (in-process: rank 0's panic on the
//! caller's thread; another rank's panic becomes that rank's error).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use uni20_persist::Store;

use crate::config::DEFAULT_RANKS;
use crate::config::{RankConfig, MAX_IN_PROCESS_RANKS};
use crate::diag::JobError;
use crate::fault::{FaultKind, FaultPlan};
use crate::inproc::{InProcessTransport, Shared};
use crate::launch::Launch;
use crate::panics::panic_message;
use crate::protocol::{Arrival, Hello, StartupFailure};
use crate::registry::{diff_signatures, Registry};
use crate::transport::Transport;

use super::SpmdContext;

/// How one rank's closure ended.
pub(crate) enum RankOutcome<R> {
    /// It returned (or the universe stopped before or while it ran).
    Done(Result<R, JobError>),
    /// It panicked; the universe was aborted.
    Panicked(Box<dyn Any + Send>),
}

/// Fault kinds an SPMD universe can inject (on any rank, rank 0 included):
/// those that make one rank's handler fail.
const SPMD_FAULTS: &[FaultKind] = &[
    FaultKind::Error,
    FaultKind::Panic,
    FaultKind::HelperPanic,
    FaultKind::Io,
    FaultKind::BadReply,
    FaultKind::Corrupt,
];

/// Refuses faults an SPMD universe cannot inject, so a test that relies on
/// one never passes without it.
///
/// # Errors
/// [`JobError::Startup`] naming the fault.
pub(crate) fn check_faults(faults: &FaultPlan, size: usize) -> Result<(), JobError> {
    for kind in [
        FaultKind::Exit,
        FaultKind::Kill,
        FaultKind::CkptKill,
        FaultKind::NoArrive,
        FaultKind::Registry,
        FaultKind::Spawn,
        FaultKind::UnknownCmd,
        FaultKind::Schema,
        FaultKind::Garbage,
        FaultKind::Trailing,
    ] {
        if faults.has_kind(kind) {
            return Err(JobError::Startup(format!(
                "UNI20_INJECT_FAULT: {kind:?} cannot be injected in an SPMD universe (only {:?})",
                SPMD_FAULTS
            )));
        }
    }
    match faults.faults().iter().find(|f| f.rank >= size) {
        Some(f) => Err(JobError::Startup(format!(
            "UNI20_INJECT_FAULT: `{f}`: rank {} does not exist in a universe of {size} ranks",
            f.rank
        ))),
        None => Ok(()),
    }
}

/// Every rank checks that all ranks prepared and run the same registry and
/// chunk size (one all-gather of every rank's [`Arrival`]; every rank
/// computes the same verdict). A rank whose preparation failed takes part
/// with its failure ([`failed_rank_main`]), and every rank then returns
/// `rank R failed at start-up: <error>`, with no abort needed.
fn handshake(ctx: &SpmdContext<'_>, mine: Arrival) -> Result<(), JobError> {
    let all: Vec<Arrival> = ctx.all_gather(&mine)?;
    let mut hellos = Vec::with_capacity(all.len());
    let mut failures = Vec::new();
    for arrival in all {
        match arrival {
            Arrival::Ready(h) => hellos.push(h),
            Arrival::Failed(f) => failures.push(f.describe()),
        }
    }
    if !failures.is_empty() {
        return Err(JobError::Startup(failures.join("; ")));
    }
    let all = hellos;
    let mut differences = Vec::new();
    let mut settings = Vec::new();
    for h in all.iter().skip(1) {
        if h.digest != all[0].digest || h.signatures != all[0].signatures {
            differences.extend(diff_signatures(&all[0].signatures, &h.signatures, h.rank));
            if differences.is_empty() {
                differences.push(format!("rank {} reports a different registry digest", h.rank));
            }
        }
        if h.chunk_bytes != all[0].chunk_bytes {
            settings.push(format!(
                "rank {} splits messages into chunks of {} bytes, rank 0 into chunks of {} bytes \
                 (UNI20_CHUNK_BYTES must be equal on every rank)",
                h.rank, h.chunk_bytes, all[0].chunk_bytes
            ));
        }
    }
    if !differences.is_empty() {
        return Err(ctx.fail(JobError::RegistryMismatch { differences }));
    }
    if !settings.is_empty() {
        return Err(ctx.fail(JobError::Startup(settings.join("; "))));
    }
    Ok(())
}

/// One rank of an SPMD universe: the handshake, then `f` on this rank's
/// context. The outcome is the closure's value unless the universe stopped
/// (a failure recorded on this rank, or an abort by another).
pub(crate) fn rank_main<R>(
    t: &dyn Transport,
    registry: &Registry,
    store: &Store,
    threads: usize,
    config: &RankConfig,
    f: impl FnOnce(&SpmdContext<'_>) -> R,
) -> RankOutcome<R> {
    let backends = config.rank_backends(threads);
    let ctx = SpmdContext::new(t, registry, store, &backends, threads, &config.faults);
    let _span = tracing::info_span!("rank", rank = ctx.rank()).entered();
    let mine = Arrival::Ready(Hello {
        rank: ctx.rank(),
        digest: registry.digest(),
        signatures: registry.signatures(),
        chunk_bytes: config.chunk_bytes as u64,
    });
    if let Err(e) = handshake(&ctx, mine) {
        return RankOutcome::Done(Err(ctx.take_failure().unwrap_or(e)));
    }
    match catch_unwind(AssertUnwindSafe(|| f(&ctx))) {
        Err(p) => {
            let why = format!(
                "rank {} panicked in the SPMD closure: {}",
                ctx.rank(),
                panic_message(&*p)
            );
            ctx.fail(JobError::Stopped(why));
            RankOutcome::Panicked(p)
        }
        Ok(v) => RankOutcome::Done(match (ctx.take_failure(), t.aborted()) {
            (Some(e), _) => Err(e),
            (None, Some(why)) => Err(JobError::Stopped(why)),
            (None, None) => Ok(v),
        }),
    }
}

/// A rank of an SPMD universe whose preparation failed (`failure`): it
/// still takes part in the handshake's all-gather, with its failure, so
/// that every rank stops at once with it. Placeholders (an empty registry,
/// a store in memory) stand in for what the rank could not prepare; the
/// handshake uses neither. Returns the error this rank reports: the
/// handshake's verdict (every failed rank), or its own failure.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn failed_rank_main(t: &dyn Transport, failure: StartupFailure, config: &RankConfig) -> JobError {
    let registry = match Registry::from_entries(std::iter::empty()) {
        Ok(r) => r,
        Err(_) => return failure.into_error(),
    };
    let store = Store::in_memory(t.rank() as u32);
    let backends = config.rank_backends(1);
    let ctx = SpmdContext::new(t, &registry, &store, &backends, 1, &config.faults);
    let _span = tracing::info_span!("rank", rank = ctx.rank()).entered();
    tracing::error!("{}", failure.describe());
    match handshake(&ctx, Arrival::Failed(failure.clone())) {
        Err(e @ JobError::Startup(_)) => e,
        _ => failure.into_error(),
    }
}

/// An SPMD universe with ranks as threads of this process; `f` runs on
/// every rank (rank 0 on the calling thread). Returns `(rank, outcome)` in
/// rank order.
///
/// # Errors
/// [`JobError::Startup`] for a bad rank count, faults or store, or a rank
/// thread that cannot be started; [`JobError::Registry`] for an invalid
/// link-time registry.
pub(crate) fn in_process<R: Send>(
    launch: Launch,
    f: &(dyn Fn(&SpmdContext<'_>) -> R + Sync),
) -> Result<crate::universe::SpmdOutcomes<R>, JobError> {
    let n = launch.config.ranks.unwrap_or(DEFAULT_RANKS);
    if n == 0 || n > MAX_IN_PROCESS_RANKS {
        return Err(JobError::Startup(format!(
            "{n} in-process ranks requested: from 1 to {MAX_IN_PROCESS_RANKS}"
        )));
    }
    check_faults(&launch.config.faults, n)?;
    let threads = launch.threads(n);
    let shared = Shared::new(n);
    let mut ranks = Vec::with_capacity(n);
    for r in 0..n {
        ranks.push((
            launch.registry_of(r)?,
            launch.open_store(r).map_err(StartupFailure::into_error)?,
        ));
    }
    let config = &launch.config;
    let run_rank = |rank: usize, registry: Registry, store: Store| {
        let t = InProcessTransport::new(rank, shared.clone());
        let out = rank_main(&t, &registry, &store, threads, config, f);
        t.depart();
        out
    };
    let mut ranks = ranks.into_iter();
    let (root_registry, root_store) = ranks.next().ok_or_else(|| JobError::Startup("no rank 0".into()))?;
    let outcomes = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(n - 1);
        for (i, (registry, store)) in ranks.enumerate() {
            let rank = i + 1;
            let run_rank = &run_rank;
            let spawned = std::thread::Builder::new()
                .name(format!("uni20-spmd-{rank}"))
                .spawn_scoped(scope, move || run_rank(rank, registry, store));
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    let why = format!("cannot start the thread of rank {rank} of {n}: {e}");
                    InProcessTransport::new(0, shared.clone()).abort(&why);
                    return Err(JobError::Startup(why));
                }
            }
        }
        let mut outcomes = vec![run_rank(0, root_registry, root_store)];
        for h in handles {
            outcomes.push(
                h.join()
                    .unwrap_or_else(|p| RankOutcome::Panicked(Box::new(panic_message(&*p)))),
            );
        }
        Ok(outcomes)
    })?;
    let aborted = InProcessTransport::new(0, shared).aborted();
    let mut results = Vec::with_capacity(n);
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        let result = match outcome {
            RankOutcome::Panicked(p) if rank == 0 => std::panic::resume_unwind(p),
            RankOutcome::Panicked(p) => Err(JobError::Stopped(format!(
                "rank {rank} panicked in the SPMD closure: {}",
                panic_message(&*p)
            ))),
            RankOutcome::Done(Ok(v)) => match &aborted {
                Some(why) => Err(JobError::Stopped(why.clone())),
                None => Ok(v),
            },
            RankOutcome::Done(Err(e)) => Err(e),
        };
        results.push((rank, result));
    }
    Ok(results)
}

/// One rank of an SPMD universe on a duplicate of the host communicator
/// `comm` (library mode: MPI initialised by the host; every rank of `comm`
/// must call this).
///
/// # Errors
/// As [`in_process`] for this rank, plus the MPI requirements of
/// [`check_mpi_usable`](crate::mpi_transport::check_mpi_usable).
#[cfg(feature = "mpi")]
pub(crate) fn on_communicator<C: mpi::topology::Communicator, R>(
    launch: Result<Launch, JobError>,
    comm: &C,
    f: impl FnOnce(&SpmdContext<'_>) -> R,
) -> Result<R, JobError> {
    use crate::mpi_transport::{check_mpi_usable, duplicate_host_communicator, MpiTransport, OnAbort};
    use crate::startup::failure_of;
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
    let t = MpiTransport::with_policy(dup, launch.config.chunk_bytes, on_abort);
    let (rank, size) = (t.rank(), t.size());
    let prepare = || -> Result<_, StartupFailure> {
        if let Some(e) = unusable {
            return Err(failure_of(rank, e));
        }
        check_faults(&launch.config.faults, size).map_err(|e| failure_of(rank, e))?;
        let threads = launch.threads(launch.config.launcher.local_size.unwrap_or(size));
        let registry = launch.registry_of(rank).map_err(|e| failure_of(rank, e))?;
        Ok((threads, registry, launch.open_store(rank)?))
    };
    let outcome = match prepare() {
        Ok((threads, registry, store)) => rank_main(&t, &registry, &store, threads, &launch.config, f),
        Err(failure) => RankOutcome::Done(Err(failed_rank_main(&t, failure, &launch.config))),
    };
    let aborted = t.finish();
    drop(t);
    match outcome {
        RankOutcome::Panicked(p) => std::panic::resume_unwind(p),
        RankOutcome::Done(Ok(v)) => match aborted {
            Some(why) => Err(JobError::Stopped(why)),
            None => Ok(v),
        },
        RankOutcome::Done(Err(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    /// A rank whose preparation failed takes part in the SPMD handshake with
    /// its failure: every rank returns `rank 2 failed at start-up: ...` at
    /// once, and no rank's closure runs.
    #[test]
    fn a_failed_rank_stops_every_rank_at_the_handshake() {
        let shared = Shared::new(3);
        let registry = Registry::linked().unwrap();
        let config = RankConfig::default();
        let failure = StartupFailure {
            rank: 2,
            error: "opening the store in /data/rank-2: Not a directory".into(),
        };
        let ran = std::sync::atomic::AtomicUsize::new(0);
        let start = Instant::now();
        let outcomes: Vec<Result<(), JobError>> = std::thread::scope(|s| {
            let ready = |rank: usize| {
                let (shared, registry, config, ran) = (shared.clone(), &registry, &config, &ran);
                s.spawn(move || {
                    let t = InProcessTransport::new(rank, shared);
                    let store = Store::in_memory(rank as u32);
                    let out = rank_main(&t, registry, &store, 1, config, |_| {
                        ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    });
                    t.depart();
                    match out {
                        RankOutcome::Done(r) => r,
                        RankOutcome::Panicked(_) => panic!("rank {rank} panicked"),
                    }
                })
            };
            let (r0, r1) = (ready(0), ready(1));
            let t = InProcessTransport::new(2, shared.clone());
            let failed = failed_rank_main(&t, failure.clone(), &config);
            t.depart();
            vec![r0.join().unwrap(), r1.join().unwrap(), Err(failed)]
        });
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 0);
        for (rank, out) in outcomes.into_iter().enumerate() {
            match out {
                Err(JobError::Startup(m)) => assert_eq!(m, failure.describe(), "rank {rank}"),
                other => panic!("rank {rank}: {other:?}"),
            }
        }
    }
}
