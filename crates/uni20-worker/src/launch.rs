//! Launching a root/worker universe: the in-process universe (ranks as
//! scoped threads), the resolved settings every launch shares ([`Launch`]),
//! and the root's main routine shared by every transport and mode:
//! handshake, the user's closure on a [`Controller`], drain, shutdown. The
//! MPI launches (standalone and library mode) live in `mpi_launch.rs`.
//!
//! [`UniverseBuilder`](crate::UniverseBuilder) resolves its settings into a
//! [`Launch`] and calls [`in_process`] or an MPI launch; this module never
//! looks at the builder.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use uni20_persist::Store;

use crate::config::{RankConfig, DEFAULT_RANKS, MAX_IN_PROCESS_RANKS};
use crate::controller::Controller;
use crate::diag::JobError;
use crate::envelope::encode;
use crate::fault::FaultKind;
use crate::inproc::{InProcessTransport, Shared};
use crate::panics::{install_panic_hook, panic_message, RankThread};
use crate::protocol::{Control, StartupFailure};
use crate::registry::{CommandEntry, Registry};
use crate::startup::root_handshake;
use crate::transport::{Transport, TAG_CMD};
use crate::worker::{worker_loop, WorkerExit};

/// Everything a launch needs, resolved by the builder.
pub(crate) struct Launch {
    /// The configuration, environment and builder overrides applied.
    pub(crate) config: RankConfig,
    /// Per-rank registries replacing the link-time one (tests, plugins).
    pub(crate) registry_overrides: BTreeMap<usize, Vec<CommandEntry>>,
}

impl Launch {
    /// A launch with every default and no environment: what carries a rank
    /// whose configuration could not be resolved through the start-up
    /// handshake that reports it (library and SPMD mode on MPI).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn defaults() -> Launch {
        Launch {
            config: RankConfig::default(),
            registry_overrides: BTreeMap::new(),
        }
    }

    pub(crate) fn storage_count(&self, size: usize) -> Result<usize, JobError> {
        let k = self.config.storage_ranks;
        if k > 0 && k + 2 > size {
            return Err(JobError::Startup(format!(
                "{k} storage rank(s) need at least {} ranks (root + one worker + storage), the universe has {size}",
                k + 2
            )));
        }
        Ok(k)
    }

    /// Opens the store of `rank` (in memory, or its directory under
    /// [`RankConfig::store_dir`]) with every persistent type registered.
    ///
    /// # Errors
    /// The [`StartupFailure`] of `rank` when the directory cannot be opened
    /// (a plain file in its place, damaged files, held by another job).
    pub(crate) fn open_store(&self, rank: usize) -> Result<Store, StartupFailure> {
        let store = self.open_store_untyped(rank)?;
        for register in crate::registry::STORE_TYPES {
            register(&store);
        }
        Ok(store)
    }

    fn open_store_untyped(&self, rank: usize) -> Result<Store, StartupFailure> {
        match &self.config.store_dir {
            None => Ok(match self.config.store_budget {
                Some(b) => Store::in_memory_with_budget(rank as u32, b),
                None => Store::in_memory(rank as u32),
            }),
            Some(dir) => {
                let mut opts = uni20_persist::StoreOptions::new();
                if let Some(b) = self.config.store_budget {
                    opts = opts.memory_budget(b);
                }
                Store::open(dir, rank as u32, opts).map_err(|e| StartupFailure {
                    rank,
                    error: format!("opening the store in {}: {e}", dir.display()),
                })
            }
        }
    }

    pub(crate) fn check_faults(&self, size: usize) -> Result<(), JobError> {
        self.config.faults.validate(size).map_err(JobError::Startup)
    }

    pub(crate) fn registry_of(&self, rank: usize) -> Result<Registry, JobError> {
        let registry = match self.registry_overrides.get(&rank) {
            Some(entries) => Registry::from_entries(entries.iter().copied())?,
            None => Registry::linked()?,
        };
        if self.config.faults.has(rank, FaultKind::Registry) {
            // Simulate a rank built from different sources: one command missing.
            return Ok(Registry::from_entries(registry.entries().into_iter().skip(1).copied())?);
        }
        Ok(registry)
    }

    /// The thread budget of each rank when `local` ranks share this node.
    pub(crate) fn threads(&self, local: usize) -> usize {
        let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1);
        self.config.threads_per_rank.unwrap_or((cores / local.max(1)).max(1))
    }
}

/// Runs the universe with ranks as threads of this process; `f` runs on the
/// calling thread as rank 0.
pub(crate) fn in_process<R>(launch: Launch, f: impl FnOnce(&Controller<'_>) -> R) -> Result<R, JobError> {
    let n = launch.config.ranks.unwrap_or(DEFAULT_RANKS);
    if n == 0 {
        return Err(JobError::Startup("a universe needs at least one rank".into()));
    }
    if n > MAX_IN_PROCESS_RANKS {
        return Err(JobError::Startup(format!(
            "{n} in-process ranks requested: at most {MAX_IN_PROCESS_RANKS} (each rank is a thread with its own \
             store); use MPI for more"
        )));
    }
    let threads = launch.threads(n);
    launch.check_faults(n)?;
    install_panic_hook(false);
    let shared = Shared::new(n);
    let root_registry = launch.registry_of(0)?;
    let mut worker_registries = Vec::new();
    for r in 1..n {
        worker_registries.push(launch.registry_of(r)?);
    }
    let config = &launch.config;
    let storage = launch.storage_count(n)?;
    let mut stores = Vec::with_capacity(n);
    for r in 0..n {
        stores.push(launch.open_store(r).map_err(StartupFailure::into_error)?);
    }
    let mut stores = stores.into_iter();
    let root_store = stores.next().ok_or_else(|| JobError::Startup("no rank 0".into()))?;
    std::thread::scope(|scope| {
        for (i, (registry, store)) in worker_registries.into_iter().zip(stores).enumerate() {
            let rank = i + 1;
            let rank_shared = shared.clone();
            let spawned = if config.faults.has(rank, FaultKind::Spawn) {
                Err(std::io::Error::other("injected spawn failure (UNI20_INJECT_FAULT)"))
            } else {
                std::thread::Builder::new()
                    .name(format!("uni20-rank-{rank}"))
                    .spawn_scoped(scope, move || {
                        let _rank_thread = RankThread::enter();
                        let t = InProcessTransport::new(rank, rank_shared);
                        let backends = config.rank_backends(threads);
                        let _span = tracing::info_span!("rank", rank).entered();
                        let exit = catch_unwind(AssertUnwindSafe(|| {
                            worker_loop(&t, &registry, &store, &backends, threads, config)
                        }));
                        match exit {
                            Ok(WorkerExit::Died(why)) => died_in_process(&t, &why),
                            Ok(_) => {}
                            Err(p) => t.abort(&format!(
                                "rank {rank} panicked outside a command handler: {}",
                                panic_message(&*p)
                            )),
                        }
                    })
                    .map(drop)
            };
            if let Err(e) = spawned {
                // The ranks already started wait for the start-up verdict:
                // wake them, so that the scope can join them and return.
                let why = format!("cannot start the thread of rank {rank} of {n}: {e}");
                InProcessTransport::new(0, shared.clone()).abort(&why);
                return Err(JobError::Startup(format!(
                    "{why}; the {} rank(s) already started were stopped",
                    rank - 1
                )));
            }
        }
        let _rank_thread = RankThread::enter();
        let t = InProcessTransport::new(0, shared.clone());
        let _span = tracing::info_span!("rank", rank = 0).entered();
        let result = root_main(&t, root_registry, root_store, threads, storage, config, f);
        if result.is_err() {
            t.abort("the root stopped the job");
        }
        result
    })
}

/// How long an in-process rank that died waits for a survivor's report
/// before it stops the universe with its own.
const DEATH_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// An in-process rank died (an injected `exit` or `kill`): as a process of an
/// MPI job would, it first leaves silently, so that the ranks waiting for it
/// fail with what they awaited (a worker's exchange names the object and
/// whether the dead rank is a storage rank) and the root stops the job on
/// that report (in a few milliseconds). When no survivor reports within [`DEATH_GRACE`] (nobody
/// waited for it but the root), the rank's own reason stops the universe.
/// The reason is printed on stderr either way, as the MPI rank does.
fn died_in_process(t: &InProcessTransport, why: &str) {
    eprintln!("uni20: {why}");
    t.depart();
    let start = std::time::Instant::now();
    while t.aborted().is_none() && start.elapsed() < DEATH_GRACE {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    t.abort(why);
}

/// The root: handshake, the user's closure, drain, shutdown.
pub(crate) fn root_main<R>(
    t: &dyn Transport,
    registry: Registry,
    store: Store,
    threads: usize,
    storage_ranks: usize,
    config: &RankConfig,
    f: impl FnOnce(&Controller<'_>) -> R,
) -> Result<R, JobError> {
    root_handshake(t, &registry, config)?;
    let ctl = Controller::new(
        t,
        registry,
        store,
        config.rank_backends(threads),
        threads,
        storage_ranks,
        config.faults.clone(),
    );
    ctl.ledger().set_replica_budget(config.replica_bytes);
    let out = catch_unwind(AssertUnwindSafe(|| {
        let v = f(&ctl);
        // Operations submitted without waiting finish before shutdown, and
        // the owners free every block no handle names any more.
        ctl.drain().and_then(|()| ctl.collect()).map(|_| v)
    }));
    ctl.close_ledger();
    if !ctl.has_failed() {
        let shutdown: Arc<[u8]> = encode(&Control::Shutdown).into();
        for r in 1..t.size() {
            let _ = t.post(r, TAG_CMD, shutdown.clone());
        }
        // Every worker receives its shutdown frame before the root returns
        // (under MPI: before the communicator is finalised).
        let _ = t.flush();
    }
    match out {
        Ok(v) => v,
        Err(p) => {
            t.abort("the root panicked");
            std::panic::resume_unwind(p)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::commands::Flush;
    use crate::envelope::decode_exact;
    use crate::protocol::{Arrival, Hello, Start};
    use crate::scripted::Scripted;
    use crate::transport::{TAG_HELLO, TAG_START};

    fn arrive(t: &Scripted, registry: &Registry, ranks: std::ops::Range<usize>) {
        for rank in ranks {
            let hello = Hello {
                rank,
                digest: registry.digest(),
                signatures: registry.signatures(),
                chunk_bytes: RankConfig::default().chunk_bytes as u64,
            };
            t.deliver(rank, TAG_HELLO, encode(&Arrival::Ready(hello)));
        }
    }

    /// Operations still in flight when the closure returns are drained
    /// before any worker is told to shut down.
    #[test]
    fn shutdown_waits_for_operations_in_flight() {
        let t = Scripted::new(3);
        let registry = Registry::linked().unwrap();
        arrive(&t, &registry, 1..3);
        // Replies to ops 1 and 2, op 2 first; the closure never waits for them.
        for (op, r) in [(2, 1), (2, 2), (1, 2), (1, 1)] {
            t.reply(r, op, &(op * 10 + r as u64));
        }
        let done = std::rc::Rc::new(Cell::new(0));
        let out = root_main(&t, registry, Store::in_memory(0), 1, 0, &RankConfig::default(), |ctl| {
            for _ in 0..2 {
                let done = done.clone();
                ctl.submit_nowait::<Flush>(&(), &[1, 2], move |_, r| {
                    assert_eq!(r.unwrap().len(), 2);
                    done.set(done.get() + 1);
                })
                .unwrap();
            }
            assert_eq!(ctl.in_flight(), 2);
            "closure result"
        });
        assert_eq!(out.unwrap(), "closure result");
        assert_eq!(done.get(), 2);
        let sent = t.sent();
        let verdicts: Vec<usize> = sent.iter().filter(|s| s.tag == TAG_START).map(|s| s.dest).collect();
        assert_eq!(verdicts, [1, 2]);
        assert!(sent
            .iter()
            .filter(|s| s.tag == TAG_START)
            .all(|s| decode_exact::<Start>(&s.bytes, "start").unwrap() == Start::Go));
        let shutdowns: Vec<&crate::scripted::Sent> = sent
            .iter()
            .filter(|s| s.tag == TAG_CMD && s.control() == Control::Shutdown)
            .collect();
        assert_eq!(shutdowns.iter().map(|s| s.dest).collect::<Vec<_>>(), [1, 2]);
        // 2 hellos + 4 replies had been received before the first shutdown.
        assert!(shutdowns.iter().all(|s| s.after_received == 6));
        assert_eq!(sent.last().map(|s| s.control()), Some(Control::Shutdown));
        assert!(t.aborted().is_none());
    }

    /// A failure drained at the end stops the job: no shutdown, an abort.
    #[test]
    fn a_failure_found_while_draining_aborts_instead_of_shutting_down() {
        let t = Scripted::new(2);
        let registry = Registry::linked().unwrap();
        arrive(&t, &registry, 1..2);
        t.fail(1, 1, "uni20.flush.v1", "flush failed");
        let out = root_main(&t, registry, Store::in_memory(0), 1, 0, &RankConfig::default(), |ctl| {
            ctl.submit_nowait::<Flush>(&(), &[1], |_, r| assert!(r.is_err()))
                .unwrap();
        });
        assert!(matches!(out, Err(JobError::Command(d)) if d.rank == 1));
        assert!(t
            .sent()
            .iter()
            .all(|s| s.tag != TAG_CMD || s.control() != Control::Shutdown));
        assert!(t.aborted().unwrap().contains("flush failed"));
    }

    /// A worker with another chunk size is refused at start-up.
    #[test]
    fn a_chunk_size_mismatch_is_refused_at_start_up() {
        let t = Scripted::new(2);
        let registry = Registry::linked().unwrap();
        let hello = Hello {
            rank: 1,
            digest: registry.digest(),
            signatures: registry.signatures(),
            chunk_bytes: 4096,
        };
        t.deliver(1, TAG_HELLO, encode(&Arrival::Ready(hello)));
        let out = root_main(&t, registry, Store::in_memory(0), 1, 0, &RankConfig::default(), |_| ());
        let Err(JobError::Startup(m)) = out else {
            panic!("{out:?}")
        };
        assert!(m.contains("rank 1 splits messages into chunks of 4096 bytes"), "{m}");
        let verdict = t.sent().into_iter().find(|s| s.tag == TAG_START).unwrap();
        assert!(matches!(
            decode_exact::<Start>(&verdict.bytes, "start").unwrap(),
            Start::Refuse(_)
        ));
    }
}
