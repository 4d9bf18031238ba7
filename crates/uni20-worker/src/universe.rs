//! Configuring a universe: [`UniverseBuilder`] and the transport choice.
//!
//! The builder collects the caller's settings, resolves the transport and
//! hands a resolved launch to [`crate::launch`], which starts the ranks. The
//! arrows run one way: builder -> launch -> (startup, worker loop,
//! controller) -> (handler, protocol, transport).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::{BackendChoice, LauncherEnv, RankConfig};
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
/// Settings come from three places, later ones winning: the defaults, the
/// `UNI20_*` environment variables (read once, when [`UniverseBuilder::run`]
/// starts, into a [`RankConfig`]; or an explicit [`UniverseBuilder::config`]),
/// and the builder's own methods.
///
/// ```no_run
/// let answer = uni20_worker::UniverseBuilder::new().ranks(3).run(|ctl| ctl.size()).unwrap();
/// assert_eq!(answer, 3);
/// ```
#[derive(Clone, Debug)]
pub struct UniverseBuilder {
    config: Option<RankConfig>,
    transport: TransportChoice,
    registry_overrides: BTreeMap<usize, Vec<CommandEntry>>,
    ranks: Option<usize>,
    threads_per_rank: Option<usize>,
    startup_timeout: Option<Duration>,
    faults: Option<FaultPlan>,
    store_dir: Option<std::path::PathBuf>,
    memory_budget: Option<u64>,
    storage_ranks: Option<usize>,
    backends: Option<BackendChoice>,
    chunk_bytes: Option<usize>,
    max_envelope_bytes: Option<usize>,
}

impl Default for UniverseBuilder {
    fn default() -> Self {
        UniverseBuilder::new()
    }
}

/// Why a universe could not run the user's closure to completion.
pub type RunResult<R> = Result<R, JobError>;

/// True when this process was started by an MPI launcher (one of
/// [`LAUNCHER_VARIABLES`](crate::LAUNCHER_VARIABLES) is set).
pub fn launched_by_mpi() -> bool {
    LauncherEnv::from_env().detected.is_some()
}

impl UniverseBuilder {
    /// A builder that reads the environment at [`UniverseBuilder::run`]
    /// (see [`RankConfig`] for every variable and default) and chooses the
    /// transport automatically.
    pub fn new() -> UniverseBuilder {
        UniverseBuilder {
            config: None,
            transport: TransportChoice::Auto,
            registry_overrides: BTreeMap::new(),
            ranks: None,
            threads_per_rank: None,
            startup_timeout: None,
            faults: None,
            store_dir: None,
            memory_budget: None,
            storage_ranks: None,
            backends: None,
            chunk_bytes: None,
            max_envelope_bytes: None,
        }
    }

    /// Uses `config` instead of reading the environment; the builder's other
    /// methods still override it.
    pub fn config(mut self, config: RankConfig) -> Self {
        self.config = Some(config);
        self
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
    /// `mpirun -n` decides; default `UNI20_RANKS`, else
    /// [`DEFAULT_RANKS`](crate::DEFAULT_RANKS)). Zero and more than
    /// [`MAX_IN_PROCESS_RANKS`](crate::MAX_IN_PROCESS_RANKS) are rejected at `run`.
    pub fn ranks(mut self, n: usize) -> Self {
        self.ranks = Some(n);
        self
    }

    /// Thread budget of each rank's local kernels (default
    /// `UNI20_THREADS_PER_RANK`, else cores / ranks on the node).
    pub fn threads_per_rank(mut self, n: usize) -> Self {
        self.threads_per_rank = Some(n.max(1));
        self
    }

    /// Local backends of every rank (default `UNI20_BACKENDS`, else CPU).
    pub fn backends(mut self, choice: BackendChoice) -> Self {
        self.backends = Some(choice);
        self
    }

    /// Largest single MPI message in bytes (default `UNI20_CHUNK_BYTES`,
    /// else [`DEFAULT_CHUNK_BYTES`](crate::DEFAULT_CHUNK_BYTES)); larger
    /// payloads travel as several messages. Must be the same on every rank
    /// and within [`MIN_CHUNK_BYTES`](crate::MIN_CHUNK_BYTES)..=
    /// [`MAX_CHUNK_BYTES`](crate::MAX_CHUNK_BYTES) (checked at `run`).
    pub fn chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = Some(bytes);
        self
    }

    /// Largest envelope a worker decodes (default `UNI20_MAX_ENVELOPE_BYTES`,
    /// else [`DEFAULT_MAX_ENVELOPE_BYTES`](crate::DEFAULT_MAX_ENVELOPE_BYTES)).
    pub fn max_envelope_bytes(mut self, bytes: usize) -> Self {
        self.max_envelope_bytes = Some(bytes);
        self
    }

    /// Chooses the transport.
    pub fn transport(mut self, t: TransportChoice) -> Self {
        self.transport = t;
        self
    }

    /// How long the root waits for every worker to arrive at start-up
    /// (default `UNI20_STARTUP_TIMEOUT`, else 60 s).
    pub fn startup_timeout(mut self, t: Duration) -> Self {
        self.startup_timeout = Some(t);
        self
    }

    /// Replaces the link-time registry of one in-process rank by `entries`.
    /// For tests and plugin scenarios: it lets two ranks disagree about the
    /// registry, which the start-up check must refuse.
    pub fn registry_for_rank(mut self, rank: usize, entries: Vec<CommandEntry>) -> Self {
        self.registry_overrides.insert(rank, entries);
        self
    }

    /// The configuration this builder runs with: the explicit
    /// [`UniverseBuilder::config`] or the environment, then the builder's
    /// overrides, validated.
    ///
    /// # Errors
    /// [`JobError::Config`] for a malformed variable, [`JobError::Startup`]
    /// for an out-of-range value set by code.
    pub fn resolved_config(&self) -> Result<RankConfig, JobError> {
        let mut c = match &self.config {
            Some(c) => c.clone(),
            None => RankConfig::from_env()?,
        };
        if let Some(n) = self.ranks {
            c.ranks = Some(n);
        }
        if let Some(n) = self.threads_per_rank {
            c.threads_per_rank = Some(n);
        }
        if let Some(t) = self.startup_timeout {
            c.startup_timeout = t;
        }
        if let Some(p) = &self.faults {
            c.faults = p.clone();
        }
        if let Some(d) = &self.store_dir {
            c.store_dir = Some(d.clone());
        }
        if let Some(b) = self.memory_budget {
            c.store_budget = Some(b);
        }
        if let Some(k) = self.storage_ranks {
            c.storage_ranks = k;
        }
        if let Some(b) = self.backends {
            c.backends = b;
        }
        if let Some(n) = self.chunk_bytes {
            c.chunk_bytes = n;
        }
        if let Some(n) = self.max_envelope_bytes {
            c.max_envelope_bytes = n;
        }
        c.validate()?;
        Ok(c)
    }

    fn resolved_transport(&self, config: &RankConfig) -> TransportChoice {
        match self.transport {
            TransportChoice::Auto if cfg!(feature = "mpi") && config.launcher.detected.is_some() => {
                TransportChoice::Mpi
            }
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
    /// [`JobError::Config`] for a malformed `UNI20_*` variable;
    /// [`JobError::RegistryMismatch`] if ranks disagree about the registry;
    /// [`JobError::Startup`] for a bad configuration, a rank that cannot be
    /// started or never arrives, or a build without MPI support started by
    /// an MPI launcher with several processes
    /// ([`RankConfig::check_mpi_support`]); [`JobError::Registry`] for an
    /// invalid link-time registry. Errors of individual operations are
    /// returned by those operations.
    pub fn run<R>(self, f: impl FnOnce(&Controller<'_>) -> R) -> RunResult<R> {
        let config = self.resolved_config()?;
        config.check_mpi_support(cfg!(feature = "mpi"))?;
        let transport = self.resolved_transport(&config);
        let launch = Launch {
            config,
            registry_overrides: self.registry_overrides,
        };
        match transport {
            TransportChoice::Mpi => launch::mpi(launch, f),
            _ => launch::in_process(launch, f),
        }
    }
}
