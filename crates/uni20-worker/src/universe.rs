//! Configuring a universe: [`UniverseBuilder`] and the transport choice.
//!
//! The builder collects the caller's settings, resolves the transport and
//! hands a resolved launch to [`crate::launch`], which starts the ranks. The
//! arrows run one way: builder -> launch -> (startup, worker loop,
//! controller) -> (handler, protocol, transport).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::controller::Controller;
use crate::diag::JobError;
use crate::fault::FaultPlan;
use crate::launch::{self, Launch};
use crate::registry::CommandEntry;

/// Which engine carries the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportChoice {
    /// MPI when built with feature `mpi` and started by `mpirun`, else in-process.
    Auto,
    /// Ranks as threads of this process.
    InProcess,
    /// One rank per MPI process (feature `mpi`).
    Mpi,
}

/// Configures and starts a universe.
///
/// ```no_run
/// let answer = uni20_worker::UniverseBuilder::new().ranks(3).run(|ctl| ctl.size()).unwrap();
/// assert_eq!(answer, 3);
/// ```
#[derive(Clone, Debug)]
pub struct UniverseBuilder {
    ranks: Option<usize>,
    threads_per_rank: Option<usize>,
    transport: TransportChoice,
    startup_timeout: Duration,
    registry_overrides: BTreeMap<usize, Vec<CommandEntry>>,
    faults: Option<FaultPlan>,
    store_dir: Option<std::path::PathBuf>,
    memory_budget: Option<u64>,
    storage_ranks: Option<usize>,
}

impl Default for UniverseBuilder {
    fn default() -> Self {
        UniverseBuilder::new()
    }
}

/// Why a universe could not run the user's closure to completion.
pub type RunResult<R> = Result<R, JobError>;

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n| n > 0)
}

/// True when this process was started by an MPI launcher.
pub fn launched_by_mpi() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
        "PMI_RANK",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
}

impl UniverseBuilder {
    /// A builder with defaults: `UNI20_RANKS` ranks (default
    /// [`DEFAULT_RANKS`](crate::DEFAULT_RANKS)) for the in-process universe,
    /// automatic transport, `UNI20_THREADS_PER_RANK` threads per rank
    /// (default: cores / ranks), start-up timeout `UNI20_STARTUP_TIMEOUT`
    /// seconds (default 60).
    pub fn new() -> UniverseBuilder {
        UniverseBuilder {
            ranks: None,
            threads_per_rank: None,
            transport: TransportChoice::Auto,
            startup_timeout: Duration::from_secs(env_usize("UNI20_STARTUP_TIMEOUT").unwrap_or(60) as u64),
            registry_overrides: BTreeMap::new(),
            faults: None,
            store_dir: std::env::var_os("UNI20_STORE_DIR").map(Into::into),
            memory_budget: std::env::var("UNI20_STORE_BUDGET")
                .ok()
                .and_then(|v| v.trim().parse().ok()),
            storage_ranks: None,
        }
    }

    /// Puts every rank's persistent store on disk under `dir` (one
    /// `rank-<r>` directory each; default: `UNI20_STORE_DIR`, else in
    /// memory). Reopening the same directory with the same number of ranks
    /// serves every object flushed before (restart from a checkpoint).
    pub fn store_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.store_dir = Some(dir.into());
        self
    }

    /// Memory budget of each rank's disk store in bytes (default:
    /// `UNI20_STORE_BUDGET`, else unlimited); unpinned objects beyond it are
    /// spilled to disk.
    pub fn memory_budget(mut self, bytes: u64) -> Self {
        self.memory_budget = Some(bytes);
        self
    }

    /// Dedicates the last `k` ranks to serving objects (default:
    /// `UNI20_STORAGE_RANKS`, else 0). Storage ranks own blocks placed on
    /// them and send them straight to the workers that need them; they are
    /// never assigned work items. At least one compute worker (or the root
    /// alone) must remain: `k < size - 1` when `size > 1`.
    pub fn storage_ranks(mut self, k: usize) -> Self {
        self.storage_ranks = Some(k);
        self
    }

    /// Injects faults (see [`crate::fault`]); overrides `UNI20_INJECT_FAULT`.
    pub fn faults(mut self, plan: FaultPlan) -> Self {
        self.faults = Some(plan);
        self
    }

    /// Number of ranks of the in-process universe (ignored under MPI, where
    /// `mpirun -n` decides). Zero is rejected at `run`.
    pub fn ranks(mut self, n: usize) -> Self {
        self.ranks = Some(n);
        self
    }

    /// Thread budget of each rank's local kernels.
    pub fn threads_per_rank(mut self, n: usize) -> Self {
        self.threads_per_rank = Some(n.max(1));
        self
    }

    /// Chooses the transport.
    pub fn transport(mut self, t: TransportChoice) -> Self {
        self.transport = t;
        self
    }

    /// How long the root waits for every worker to arrive at start-up.
    pub fn startup_timeout(mut self, t: Duration) -> Self {
        self.startup_timeout = t;
        self
    }

    /// Replaces the link-time registry of one in-process rank by `entries`.
    /// For tests and plugin scenarios: it lets two ranks disagree about the
    /// registry, which the start-up check must refuse.
    pub fn registry_for_rank(mut self, rank: usize, entries: Vec<CommandEntry>) -> Self {
        self.registry_overrides.insert(rank, entries);
        self
    }

    fn resolved_transport(&self) -> TransportChoice {
        match self.transport {
            TransportChoice::Auto if cfg!(feature = "mpi") && launched_by_mpi() => TransportChoice::Mpi,
            TransportChoice::Auto => TransportChoice::InProcess,
            t => t,
        }
    }

    /// Starts the universe and runs `f` on the root.
    ///
    /// In-process, worker ranks are threads that end when `f` returns. Under
    /// MPI, worker ranks run the worker loop and then **exit the process**
    /// (status 0 after a clean shutdown, non-zero otherwise); only the root
    /// returns from `run`.
    ///
    /// # Errors
    /// [`JobError::RegistryMismatch`] if ranks disagree about the registry,
    /// [`JobError::Startup`] for a bad configuration or a rank that never
    /// arrives, [`JobError::Registry`] for an invalid link-time registry.
    /// Errors of individual operations are returned by those operations.
    pub fn run<R>(self, f: impl FnOnce(&Controller<'_>) -> R) -> RunResult<R> {
        let transport = self.resolved_transport();
        let launch = Launch {
            ranks: self.ranks,
            threads_per_rank: self.threads_per_rank,
            startup_timeout: self.startup_timeout,
            registry_overrides: self.registry_overrides,
            faults: self.faults,
            store_dir: self.store_dir,
            memory_budget: self.memory_budget,
            storage_ranks: self.storage_ranks,
        };
        match transport {
            TransportChoice::Mpi => launch::mpi(launch, f),
            _ => launch::in_process(launch, f),
        }
    }
}
