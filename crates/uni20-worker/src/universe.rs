//! Configuring a universe: [`UniverseBuilder`], the transport choice, and
//! the three ways to run one (docs/architecture.md, "Three ways in"):
//!
//! - [`UniverseBuilder::run`]: standalone. The root runs the closure on a
//!   [`Controller`]; under `mpirun` uni20 owns the process (MPI init and
//!   finalize, its panic hook, `MPI_Abort` on fail-stop, workers `exit`).
//!   The engine of `uni20::launch`.
//! - `UniverseBuilder::run_on` (feature `mpi`): library mode on a
//!   communicator the host owns; returns on every rank ([`RankExit`]) and
//!   has no process-wide effect.
//! - [`UniverseBuilder::spmd`] and `UniverseBuilder::spmd_on`: the expert
//!   SPMD mode; the closure runs on every rank with an [`SpmdContext`].
//!
//! The builder collects the caller's settings, resolves the transport and
//! hands a resolved launch to `launch`, `mpi_launch` or `spmd::run`, which
//! start the ranks. The arrows run one way: builder -> launch -> (startup,
//! worker loop, controller, spmd) -> (handler, protocol, transport).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::{BackendChoice, LauncherEnv, RankConfig};
use crate::controller::Controller;
use crate::diag::JobError;
use crate::fault::FaultPlan;
use crate::launch::{self, Launch};
use crate::registry::CommandEntry;
use crate::spmd::SpmdContext;
use crate::worker::WorkerExit;

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
    abort_timeout: Option<Duration>,
    faults: Option<FaultPlan>,
    store_dir: Option<std::path::PathBuf>,
    memory_budget: Option<u64>,
    storage_ranks: Option<usize>,
    backends: Option<BackendChoice>,
    chunk_bytes: Option<usize>,
    max_envelope_bytes: Option<usize>,
    replica_bytes: Option<u64>,
}

impl Default for UniverseBuilder {
    fn default() -> Self {
        UniverseBuilder::new()
    }
}

/// Why a universe could not run the user's closure to completion.
pub type RunResult<R> = Result<R, JobError>;

/// The outcome of every rank an SPMD run hosted in this process, as
/// `(rank, outcome)` in rank order ([`UniverseBuilder::spmd`]).
pub type SpmdOutcomes<R> = Vec<(usize, RunResult<R>)>;

/// How a library-mode universe ended on one rank
/// (`UniverseBuilder::run_on`).
#[derive(Debug, PartialEq, Eq)]
pub enum RankExit<R> {
    /// This rank was the root: the closure's result.
    Root(R),
    /// This rank was a worker: how its loop ended, with the diagnostic of
    /// the failure that stopped the job in
    /// [`WorkerExit::Aborted`] (the root's fail-stop text).
    Worker(WorkerExit),
}

impl<R> RankExit<R> {
    /// True on the root.
    pub fn is_root(&self) -> bool {
        matches!(self, RankExit::Root(_))
    }

    /// The closure's result on the root, `None` on a worker.
    pub fn root(self) -> Option<R> {
        match self {
            RankExit::Root(v) => Some(v),
            RankExit::Worker(_) => None,
        }
    }
}

/// True when this process was started by an MPI launcher (one of
/// [`LAUNCHER_VARIABLES`](crate::config::LAUNCHER_VARIABLES) is set).
pub fn launched_by_mpi() -> bool {
    LauncherEnv::from_env().detected.is_some()
}

/// Builder methods that set one optional field of [`UniverseBuilder`]
/// (`self.field = Some(arg)`), each with its own doc comment and argument name.
macro_rules! option_setters {
    ($($(#[$doc:meta])* fn $field:ident($arg:ident: $ty:ty);)*) => {
        $(
            $(#[$doc])*
            pub fn $field(mut self, $arg: $ty) -> Self {
                self.$field = Some($arg);
                self
            }
        )*
    };
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
            abort_timeout: None,
            faults: None,
            store_dir: None,
            memory_budget: None,
            storage_ranks: None,
            backends: None,
            chunk_bytes: None,
            max_envelope_bytes: None,
            replica_bytes: None,
        }
    }

    option_setters! {
        /// Uses `config` instead of reading the environment; the builder's other
        /// methods still override it.
        fn config(config: RankConfig);
    }

    /// Puts every rank's persistent store on disk under `dir` (one
    /// `rank-<r>` directory each; default: `UNI20_STORE_DIR`, else in
    /// memory). Reopening the same directory with the same number of ranks
    /// serves every object flushed before (restart from a checkpoint).
    pub fn store_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.store_dir = Some(dir.into());
        self
    }

    option_setters! {
        /// Memory budget of each rank's store in bytes (default:
        /// `UNI20_STORE_BUDGET`, else unlimited); unpinned objects beyond it are
        /// spilled to disk: a disk store's own directory, an in-memory store's
        /// temporary offload directory ([`uni20_persist::Store::in_memory_with_budget`]).
        fn memory_budget(bytes: u64);
        /// Dedicates the last `k` ranks to serving objects (default:
        /// `UNI20_STORAGE_RANKS`, else 0). Storage ranks own blocks placed on
        /// them and send them straight to the workers that need them; they are
        /// never assigned work items. At least one compute worker (or the root
        /// alone) must remain: `k < size - 1` when `size > 1`.
        fn storage_ranks(k: usize);
        /// Injects faults (see [`crate::fault`]); overrides `UNI20_INJECT_FAULT`.
        fn faults(plan: FaultPlan);
        /// Number of ranks of the in-process universe (ignored under MPI, where
        /// `mpirun -n` decides; default `UNI20_RANKS`, else
        /// [`DEFAULT_RANKS`](crate::config::DEFAULT_RANKS)). Zero and more than
        /// [`MAX_IN_PROCESS_RANKS`](crate::config::MAX_IN_PROCESS_RANKS) are rejected at `run`.
        fn ranks(n: usize);
    }

    /// Thread budget of each rank's local kernels (default
    /// `UNI20_THREADS_PER_RANK`, else cores / ranks on the node).
    pub fn threads_per_rank(mut self, n: usize) -> Self {
        self.threads_per_rank = Some(n.max(1));
        self
    }

    option_setters! {
        /// Local backends of every rank (default `UNI20_BACKENDS`, else CPU).
        fn backends(choice: BackendChoice);
        /// Largest single MPI message in bytes (default `UNI20_CHUNK_BYTES`,
        /// else [`DEFAULT_CHUNK_BYTES`](crate::config::DEFAULT_CHUNK_BYTES)); larger
        /// payloads travel as several messages. Must be the same on every rank
        /// and within [`MIN_CHUNK_BYTES`](crate::config::MIN_CHUNK_BYTES)..=
        /// [`MAX_CHUNK_BYTES`](crate::config::MAX_CHUNK_BYTES) (checked at `run`).
        fn chunk_bytes(bytes: usize);
        /// Largest envelope a worker decodes (default `UNI20_MAX_ENVELOPE_BYTES`,
        /// else [`DEFAULT_MAX_ENVELOPE_BYTES`](crate::envelope::DEFAULT_MAX_ENVELOPE_BYTES)).
        fn max_envelope_bytes(bytes: usize);
        /// Payload bytes of the replicas each rank keeps between commands
        /// (default `UNI20_REPLICA_BYTES`, else
        /// [`DEFAULT_REPLICA_BYTES`](crate::config::DEFAULT_REPLICA_BYTES));
        /// 0 drops every replica after the command that received it.
        fn replica_bytes(bytes: u64);
    }

    /// Chooses the transport.
    pub fn transport(mut self, t: TransportChoice) -> Self {
        self.transport = t;
        self
    }

    option_setters! {
        /// How long the root waits for every worker to arrive at start-up
        /// (default `UNI20_STARTUP_TIMEOUT`, else 60 s).
        fn startup_timeout(t: Duration);
        /// Library mode on MPI: how long a rank waits for its peers after the
        /// universe was aborted before it ends the process with `MPI_Abort` on
        /// the universe's communicator (default `UNI20_ABORT_TIMEOUT`, else 30 s).
        fn abort_timeout(t: Duration);
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
        // Each builder override that was set replaces the configured value.
        c.ranks = self.ranks.or(c.ranks);
        c.threads_per_rank = self.threads_per_rank.or(c.threads_per_rank);
        c.startup_timeout = self.startup_timeout.unwrap_or(c.startup_timeout);
        c.abort_timeout = self.abort_timeout.unwrap_or(c.abort_timeout);
        if let Some(p) = &self.faults {
            c.faults = p.clone();
        }
        if let Some(d) = &self.store_dir {
            c.store_dir = Some(d.clone());
        }
        c.store_budget = self.memory_budget.or(c.store_budget);
        c.storage_ranks = self.storage_ranks.unwrap_or(c.storage_ranks);
        c.backends = self.backends.unwrap_or(c.backends);
        c.chunk_bytes = self.chunk_bytes.unwrap_or(c.chunk_bytes);
        c.max_envelope_bytes = self.max_envelope_bytes.unwrap_or(c.max_envelope_bytes);
        c.replica_bytes = self.replica_bytes.unwrap_or(c.replica_bytes);
        c.validate()?;
        // A tuning file that exists but cannot be read is a start-up error.
        c.tuning()?;
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

    /// Resolves the configuration and the launch for one run.
    fn launch(self) -> Result<(Launch, TransportChoice), JobError> {
        let config = self.resolved_config()?;
        config.check_mpi_support(cfg!(feature = "mpi"))?;
        let transport = self.resolved_transport(&config);
        Ok((
            Launch {
                config,
                registry_overrides: self.registry_overrides,
            },
            transport,
        ))
    }

    /// Starts a standalone universe and runs `f` on the root: the engine of
    /// `uni20::launch`.
    ///
    /// In-process, worker ranks are threads that end when `f` returns. Under
    /// MPI, this call owns the process: it initialises MPI (and refuses to
    /// start if the host already did: use `UniverseBuilder::run_on`),
    /// installs the runtime's panic hook, ends the job with `MPI_Abort` on
    /// fail-stop, and worker ranks run the worker loop and then **exit the
    /// process** (status 0 after a clean shutdown, non-zero otherwise); only
    /// the root returns from `run`. The in-process universe also installs
    /// the panic hook (once per process; it keeps handler panics quiet and
    /// records helper-thread panics for diagnostics).
    ///
    /// # Errors
    /// [`JobError::Config`] for a malformed `UNI20_*` variable;
    /// [`JobError::RegistryMismatch`] if ranks disagree about the registry;
    /// [`JobError::Startup`] for a bad configuration, a rank that cannot be
    /// started or never arrives, a rank whose preparation fails
    /// (`rank R failed at start-up: <error>`: its store cannot be opened or
    /// is held by another job; under MPI the root prints it and ends the
    /// job with `MPI_Abort` at once), MPI already initialised, or a build without
    /// MPI support started by an MPI launcher with several processes
    /// ([`RankConfig::check_mpi_support`]); [`JobError::Registry`] for an
    /// invalid link-time registry. Errors of individual operations are
    /// returned by those operations.
    pub fn run<R>(self, f: impl FnOnce(&Controller<'_>) -> R) -> RunResult<R> {
        let (launch, transport) = self.launch()?;
        match transport {
            #[cfg(feature = "mpi")]
            TransportChoice::Mpi => crate::mpi_launch::standalone(launch, f),
            #[cfg(not(feature = "mpi"))]
            TransportChoice::Mpi => Err(JobError::Startup(
                "this build has no MPI support: rebuild with `--features mpi`".into(),
            )),
            _ => launch::in_process(launch, f),
        }
    }

    /// Library mode: runs the universe on the ranks of `comm`, a
    /// communicator the host program owns (any intra-communicator, for
    /// example a half of the world from `split_by_color`). Every rank of
    /// `comm` must call `run_on`; rank 0 of `comm` is the root and runs `f`,
    /// the others run the worker loop.
    ///
    /// Returns on every rank: the root with [`RankExit::Root`]`(f's
    /// result)`, a worker with [`RankExit::Worker`] (clean shutdown, or
    /// [`WorkerExit::Aborted`] with the root's fail-stop diagnostic). The
    /// universe runs on its own duplicate of `comm` (`MPI_Comm_dup`, freed
    /// before returning), so several universes may run one after another on
    /// one communicator, and at the same time on disjoint ones. It never
    /// initialises or finalises MPI, installs no panic hook and never exits
    /// the process. On fail-stop every rank of the universe is told with an
    /// abort frame and returns; `MPI_Abort` on the universe's communicator
    /// is called only when a rank cannot complete its sends, or the closing
    /// handshake, within the abort timeout after an abort
    /// ([`UniverseBuilder::abort_timeout`]): a peer that died or never calls
    /// into uni20 again.
    ///
    /// Threading: MPI must be initialised by the host (any level); uni20
    /// calls MPI only from the thread that called `run_on`, which must be
    /// the thread that initialised MPI under `Threading::Single` or
    /// `Funneled` (checked). The settings the builder ignores under MPI
    /// (`ranks`) are ignored here too; a fault plan applies to this
    /// universe only.
    ///
    /// # Errors
    /// On the root: as [`UniverseBuilder::run`] (except MPI initialisation).
    /// On every rank: [`JobError::Startup`] if MPI is not initialised, is
    /// finalised, may not be called from this thread, or `comm` is an
    /// inter-communicator. A rank whose preparation fails (its
    /// configuration is invalid, its store cannot be opened) still joins
    /// the universe: it and the root return `JobError::Startup("rank R
    /// failed at start-up: <error>")` at once, the other workers
    /// [`WorkerExit::Refused`] or [`WorkerExit::Aborted`] with that text.
    #[cfg(feature = "mpi")]
    pub fn run_on<C: mpi::topology::Communicator, R>(
        self,
        comm: &C,
        f: impl FnOnce(&Controller<'_>) -> R,
    ) -> RunResult<RankExit<R>> {
        // A configuration error still joins the universe (to fail it at
        // once): the other ranks must not wait for this one.
        let launch = self.resolved_config().map(|config| Launch {
            config,
            registry_overrides: self.registry_overrides,
        });
        crate::mpi_launch::library(launch, comm, f)
    }

    /// Expert SPMD mode: runs `f` on every rank, each with its
    /// [`SpmdContext`] (rank, size, collectives, plan agreement, collective
    /// commands). Returns `(rank, outcome)` for the ranks this process ran:
    /// every rank, in rank order, in-process (`ranks` threads; rank 0 on the
    /// calling thread), or this process's rank under `mpirun` (built with
    /// `mpi`): on MPI initialised by the host if it is (library mode), else
    /// uni20 initialises and finalises it around the universe. A rank's
    /// outcome is `f`'s value, or the failure that stopped the universe (the
    /// same on every rank for a plan disagreement). No panic hook is
    /// installed and the process is never ended; a panic of `f` on rank 0
    /// (or under MPI, this rank) stops the universe and is re-raised, on
    /// another in-process rank it becomes that rank's error.
    ///
    /// # Errors
    /// [`JobError::Config`] / [`JobError::Startup`] for a bad configuration,
    /// a rank that cannot be started, or MPI that cannot be initialised.
    pub fn spmd<R: Send>(self, f: impl Fn(&SpmdContext<'_>) -> R + Sync) -> RunResult<SpmdOutcomes<R>> {
        let (launch, transport) = self.launch()?;
        match transport {
            #[cfg(feature = "mpi")]
            TransportChoice::Mpi => crate::mpi_launch::spmd_world(launch, &f),
            #[cfg(not(feature = "mpi"))]
            TransportChoice::Mpi => Err(JobError::Startup(
                "this build has no MPI support: rebuild with `--features mpi`".into(),
            )),
            _ => crate::spmd::run::in_process(launch, &f),
        }
    }

    /// Expert SPMD mode in library mode: runs `f` on this rank of an SPMD
    /// universe on `comm`, a communicator the host owns (every rank of
    /// `comm` must call it). Same MPI requirements, duplicate communicator,
    /// abort handling and return-on-every-rank behaviour as
    /// [`UniverseBuilder::run_on`].
    ///
    /// # Errors
    /// As [`UniverseBuilder::run_on`]; the failure that stopped the universe
    /// (for example [`JobError::Disagreement`]). A rank whose preparation
    /// fails takes part in the start-up check with its failure, and every
    /// rank returns `JobError::Startup("rank R failed at start-up: <error>")`.
    #[cfg(feature = "mpi")]
    pub fn spmd_on<C: mpi::topology::Communicator, R>(
        self,
        comm: &C,
        f: impl FnOnce(&SpmdContext<'_>) -> R,
    ) -> RunResult<R> {
        let launch = self.resolved_config().map(|config| Launch {
            config,
            registry_overrides: self.registry_overrides,
        });
        crate::spmd::run::on_communicator(launch, comm, f)
    }
}
