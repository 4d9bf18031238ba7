//! One configuration per rank, read once at start-up: [`RankConfig`].
//!
//! Every `UNI20_*` runtime variable is read here and nowhere else, when a
//! universe starts ([`UniverseBuilder::run`](crate::UniverseBuilder::run)).
//! A malformed value is a start-up error, [`JobError::Config`], whose
//! one-line message names the variable, the value and the accepted form; a
//! typo never silently falls back to a default. An empty value counts as
//! unset. Builder methods override the environment.
//!
//! | variable | accepted form | default |
//! |---|---|---|
//! | `UNI20_RANKS` | integer 1 to [`MAX_IN_PROCESS_RANKS`] | [`DEFAULT_RANKS`] (in-process only) |
//! | `UNI20_THREADS_PER_RANK` | positive integer | cores / ranks on the node |
//! | `UNI20_STARTUP_TIMEOUT` | positive seconds (`60`, `2.5`) | 60 |
//! | `UNI20_ABORT_TIMEOUT` | positive seconds | 30 (library mode on MPI: how long a rank waits for its peers after an abort before `MPI_Abort`) |
//! | `UNI20_STORE_DIR` | directory | stores in memory |
//! | `UNI20_STORE_BUDGET` | size | unlimited |
//! | `UNI20_STORAGE_RANKS` | integer >= 0 | 0 |
//! | `UNI20_REPLICA_BYTES` | size (`0`: replicas dropped after each command) | [`DEFAULT_REPLICA_BYTES`] (256 MiB per rank) |
//! | `UNI20_INJECT_FAULT` | `KIND@rank=R[,op=N]`, `;`-separated ([`crate::fault`]) | none |
//! | `UNI20_BACKENDS` | `cpu` or `gpu-first` | `cpu` |
//! | `UNI20_MAX_ENVELOPE_BYTES` | size | [`DEFAULT_MAX_ENVELOPE_BYTES`] (256 MiB) |
//! | `UNI20_CHUNK_BYTES` | size, [`MIN_CHUNK_BYTES`] to [`MAX_CHUNK_BYTES`] | [`DEFAULT_CHUNK_BYTES`] (1 GiB) |
//! | `UNI20_ALLOW_NO_MPI` | `1`/`0`, `true`/`false`, `yes`/`no`, `on`/`off` | `0` |
//!
//! A *size* is an integer number of bytes with an optional unit: `B`; `KB`,
//! `MB`, `GB`, `TB` (powers of 1000); `KiB`, `MiB`, `GiB`, `TiB` (powers of
//! 1024); units are case-insensitive. `64KiB` is 65536 bytes, `10MB` is
//! 10,000,000; fractions (`1.5GiB`) and other suffixes (`64K`) are refused.
//!
//! The MPI launcher's own variables (`OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`, ...)
//! are read into [`LauncherEnv`]: they choose the transport, the thread
//! budget per rank, and let a build without MPI refuse to start under a
//! launcher ([`RankConfig::check_mpi_support`]).

mod parse;
#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use uni20_dispatch::tune::TuneTable;
use uni20_dispatch::BackendList;

use crate::diag::JobError;
use crate::envelope::DEFAULT_MAX_ENVELOPE_BYTES;
use crate::fault::FaultPlan;

/// Largest number of ranks of an in-process universe. Each rank is a thread
/// with its own mailbox and store; more ranks than this on one machine is a
/// configuration mistake (use MPI).
pub const MAX_IN_PROCESS_RANKS: usize = 1024;

/// Bytes of replicas each rank keeps between commands unless
/// `UNI20_REPLICA_BYTES` says otherwise (the root's table evicts the least
/// recently used beyond it; see [`crate::ledger::replicas`]).
pub const DEFAULT_REPLICA_BYTES: u64 = 256 << 20;

/// Default number of ranks of the in-process universe (`UNI20_RANKS` unset).
pub const DEFAULT_RANKS: usize = 4;

/// Default start-up timeout: how long the root waits for every worker.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Default abort timeout of a library-mode MPI universe: how long a rank
/// waits, after the universe was aborted, for its sends in flight and for
/// its peers' closing frames before it ends the process with `MPI_Abort`.
pub const DEFAULT_ABORT_TIMEOUT: Duration = Duration::from_secs(30);

/// Default largest MPI message: payloads above it are split into chunks
/// of this many bytes (1 GiB).
pub const DEFAULT_CHUNK_BYTES: usize = 1 << 30;

/// Smallest accepted chunk size (64 bytes).
pub const MIN_CHUNK_BYTES: usize = 64;

/// Largest accepted chunk size: MPI counts a message in `i32` elements, so a
/// message of bytes holds at most `i32::MAX` (2 GiB - 1).
pub const MAX_CHUNK_BYTES: usize = i32::MAX as usize;

/// Every `UNI20_*` variable [`RankConfig`] reads.
pub const RUNTIME_VARIABLES: &[&str] = &[
    "UNI20_RANKS",
    "UNI20_THREADS_PER_RANK",
    "UNI20_STARTUP_TIMEOUT",
    "UNI20_ABORT_TIMEOUT",
    "UNI20_STORE_DIR",
    "UNI20_STORE_BUDGET",
    "UNI20_STORAGE_RANKS",
    "UNI20_INJECT_FAULT",
    "UNI20_BACKENDS",
    "UNI20_MAX_ENVELOPE_BYTES",
    "UNI20_CHUNK_BYTES",
    "UNI20_ALLOW_NO_MPI",
    "UNI20_TUNE_FILE",
];

/// Variables whose presence means an MPI launcher started this process.
pub const LAUNCHER_VARIABLES: &[&str] = &[
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "PMIX_RANK",
    "MPI_LOCALNRANKS",
    "PMI_RANK",
    "MV2_COMM_WORLD_SIZE",
];

/// Launcher variables that give the number of processes of the job.
const WORLD_SIZE_VARIABLES: &[&str] = &["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"];

/// Launcher variables that give the number of processes on this node.
const LOCAL_SIZE_VARIABLES: &[&str] = &["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"];

/// The local contraction backends a rank uses (`UNI20_BACKENDS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendChoice {
    /// [`BackendList::default_cpu`]: faer, then the reference kernel.
    #[default]
    Cpu,
    /// [`BackendList::default_gpu_first`]: CUDA (feature `cuda` of
    /// `uni20-dispatch`) for large problems, then the CPU backends. A backend
    /// that cannot run here declines and the next one is tried.
    GpuFirst,
}

/// Tuning tables opened in this process, by file: in-process ranks share
/// one table (and so one measurement per shape class).
static TUNING: std::sync::OnceLock<parking_lot::Mutex<std::collections::HashMap<PathBuf, Arc<TuneTable>>>> =
    std::sync::OnceLock::new();

impl RankConfig {
    /// The tuning table of [`RankConfig::tune_file`], opened once per
    /// process and file (later calls share it).
    ///
    /// # Errors
    /// [`JobError::Config`] naming `UNI20_TUNE_FILE` if the file exists but
    /// cannot be read or is not a tuning table.
    pub fn tuning(&self) -> Result<Option<Arc<TuneTable>>, JobError> {
        let Some(path) = &self.tune_file else { return Ok(None) };
        let mut tables = TUNING.get_or_init(Default::default).lock();
        if let Some(t) = tables.get(path) {
            return Ok(Some(t.clone()));
        }
        let table = TuneTable::open(path).map_err(|e| {
            config_error(
                uni20_dispatch::tune::TUNE_FILE_ENV,
                &path.display().to_string(),
                format!("a tuning table written by `uni20 tune`, or a new path ({e})"),
            )
        })?;
        let table = Arc::new(table);
        tables.insert(path.clone(), table.clone());
        Ok(Some(table))
    }

    /// The contraction backends of a rank with a thread budget of `threads`:
    /// [`RankConfig::backends`]' list, ordered by the tuning table when one
    /// is configured (opened at start-up, see [`RankConfig::tuning`]).
    pub fn rank_backends(&self, threads: usize) -> BackendList {
        let list = self.backends.backend_list(threads);
        match self.tuning() {
            Ok(Some(t)) => list.with_tuning(t),
            Ok(None) => list,
            Err(e) => {
                tracing::warn!("tuning table not used: {e}");
                list
            }
        }
    }
}

impl BackendChoice {
    /// The backend list of a rank with a thread budget of `threads`.
    pub fn backend_list(self, threads: usize) -> BackendList {
        match self {
            BackendChoice::Cpu => BackendList::default_cpu(threads),
            BackendChoice::GpuFirst => BackendList::default_gpu_first(threads),
        }
    }

    /// The name used in `UNI20_BACKENDS`: `cpu` or `gpu-first`.
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Cpu => "cpu",
            BackendChoice::GpuFirst => "gpu-first",
        }
    }
}

/// What the MPI launcher's environment says about this process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LauncherEnv {
    /// The first of [`LAUNCHER_VARIABLES`] that is set: an MPI launcher
    /// started this process.
    pub detected: Option<&'static str>,
    /// Number of processes of the job and the variable that says so
    /// (`OMPI_COMM_WORLD_SIZE`, `PMI_SIZE` or `MV2_COMM_WORLD_SIZE`).
    pub world_size: Option<(&'static str, usize)>,
    /// Number of processes on this node (`OMPI_COMM_WORLD_LOCAL_SIZE` or
    /// `MPI_LOCALNRANKS`), which divides the cores among local ranks.
    pub local_size: Option<usize>,
}

/// The runtime configuration of a rank, read once at start-up.
///
/// Fields are public so a caller can inspect or adjust a configuration
/// before handing it to [`UniverseBuilder::config`](crate::UniverseBuilder::config);
/// the builder's own methods override it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RankConfig {
    /// In-process ranks (`UNI20_RANKS`); `None`: [`DEFAULT_RANKS`].
    /// Ignored under MPI, where the launcher decides.
    pub ranks: Option<usize>,
    /// Thread budget of each rank's kernels (`UNI20_THREADS_PER_RANK`);
    /// `None`: cores / ranks on the node.
    pub threads_per_rank: Option<usize>,
    /// How long the root waits for every worker (`UNI20_STARTUP_TIMEOUT`).
    pub startup_timeout: Duration,
    /// Library mode on MPI: how long a rank waits for its peers after the
    /// universe was aborted before it calls `MPI_Abort` on the universe's
    /// communicator (`UNI20_ABORT_TIMEOUT`).
    pub abort_timeout: Duration,
    /// Directory of the on-disk stores (`UNI20_STORE_DIR`); `None`: in memory.
    pub store_dir: Option<PathBuf>,
    /// Memory budget of each rank's store in bytes (`UNI20_STORE_BUDGET`; an
    /// in-memory store spills to a temporary directory); `None`: unlimited.
    pub store_budget: Option<u64>,
    /// Number of storage ranks, the last ranks of the universe (`UNI20_STORAGE_RANKS`).
    pub storage_ranks: usize,
    /// Payload bytes of the replicas each rank keeps between commands
    /// (`UNI20_REPLICA_BYTES`; 0: each command drops what it received).
    pub replica_bytes: u64,
    /// Injected faults (`UNI20_INJECT_FAULT`), checked against the universe
    /// size at launch.
    pub faults: FaultPlan,
    /// Local backends (`UNI20_BACKENDS`).
    pub backends: BackendChoice,
    /// Largest envelope a worker decodes, in bytes (`UNI20_MAX_ENVELOPE_BYTES`).
    pub max_envelope_bytes: usize,
    /// Largest single MPI message in bytes (`UNI20_CHUNK_BYTES`); larger
    /// payloads travel as several messages. Must be equal on every rank
    /// (checked at start-up).
    pub chunk_bytes: usize,
    /// Run without MPI support under an MPI launcher (`UNI20_ALLOW_NO_MPI`):
    /// every process then runs its own in-process universe.
    pub allow_no_mpi: bool,
    /// The MPI launcher's variables.
    pub launcher: LauncherEnv,
    /// The per-machine table of measured backend choices
    /// (`UNI20_TUNE_FILE`, see [`uni20_dispatch::tune::TuneTable`]): loaded if it
    /// exists, extended by measurement on first sight, saved after each
    /// measurement. `None`: the static backend order.
    pub tune_file: Option<PathBuf>,
}

impl Default for RankConfig {
    /// Every default, no environment.
    fn default() -> Self {
        RankConfig {
            ranks: None,
            threads_per_rank: None,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            abort_timeout: DEFAULT_ABORT_TIMEOUT,
            store_dir: None,
            store_budget: None,
            storage_ranks: 0,
            replica_bytes: DEFAULT_REPLICA_BYTES,
            faults: FaultPlan::default(),
            backends: BackendChoice::Cpu,
            max_envelope_bytes: DEFAULT_MAX_ENVELOPE_BYTES,
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            allow_no_mpi: false,
            tune_file: None,
            launcher: LauncherEnv::default(),
        }
    }
}

fn config_error(variable: &str, value: &str, expected: impl Into<String>) -> JobError {
    JobError::Config {
        variable: variable.to_string(),
        value: value.to_string(),
        expected: expected.into(),
    }
}

impl RankConfig {
    /// Reads every `UNI20_*` variable and the launcher's variables from the
    /// process environment.
    ///
    /// # Errors
    /// [`JobError::Config`] for the first malformed value, naming the
    /// variable, the value and the accepted form.
    pub fn from_env() -> Result<RankConfig, JobError> {
        RankConfig::from_lookup(&|name| std::env::var_os(name))
    }

    /// Like [`RankConfig::from_env`], from an explicit list of
    /// `(variable, value)` pairs instead of the environment (variables not
    /// listed are unset).
    ///
    /// # Errors
    /// As [`RankConfig::from_env`].
    pub fn from_vars<'v>(vars: impl IntoIterator<Item = (&'v str, &'v str)>) -> Result<RankConfig, JobError> {
        let map: std::collections::BTreeMap<&str, &str> = vars.into_iter().collect();
        RankConfig::from_lookup(&|name| map.get(name).map(OsString::from))
    }

    fn from_lookup(get: &dyn Fn(&str) -> Option<OsString>) -> Result<RankConfig, JobError> {
        // A set but empty variable counts as unset.
        let text = |name: &str| -> Result<Option<String>, JobError> {
            match get(name) {
                None => Ok(None),
                Some(v) => match v.into_string() {
                    Ok(s) if s.trim().is_empty() => Ok(None),
                    Ok(s) => Ok(Some(s)),
                    Err(v) => Err(config_error(name, &v.to_string_lossy(), "UTF-8 text")),
                },
            }
        };
        let with = |name: &str, expected: &str, parse: &dyn Fn(&str) -> Option<u64>| -> Result<Option<u64>, JobError> {
            match text(name)? {
                None => Ok(None),
                Some(v) => parse(&v).map(Some).ok_or_else(|| config_error(name, &v, expected)),
            }
        };
        let to_usize = |n: u64| usize::try_from(n).ok();
        let mut c = RankConfig::default();

        let ranks_form = format!("an integer from 1 to {MAX_IN_PROCESS_RANKS}");
        c.ranks = with("UNI20_RANKS", &ranks_form, &|v| {
            parse::count(v, 1, MAX_IN_PROCESS_RANKS).map(|n| n as u64)
        })?
        .map(|n| n as usize);
        c.threads_per_rank = with("UNI20_THREADS_PER_RANK", "a positive integer", &|v| {
            parse::count(v, 1, usize::MAX).map(|n| n as u64)
        })?
        .map(|n| n as usize);
        // A duration variable; `example` is the whole number of seconds its error suggests.
        let seconds = |name: &str, example: u32| -> Result<Option<Duration>, JobError> {
            match text(name)? {
                None => Ok(None),
                Some(v) => parse::seconds(&v).map(Some).ok_or_else(|| {
                    config_error(name, &v, format!("a positive number of seconds, e.g. {example} or 2.5"))
                }),
            }
        };
        if let Some(t) = seconds("UNI20_STARTUP_TIMEOUT", 60)? {
            c.startup_timeout = t;
        }
        if let Some(t) = seconds("UNI20_ABORT_TIMEOUT", 30)? {
            c.abort_timeout = t;
        }
        c.store_dir = get("UNI20_STORE_DIR")
            .filter(|v| !v.to_string_lossy().trim().is_empty())
            .map(PathBuf::from);
        c.store_budget = with("UNI20_STORE_BUDGET", parse::SIZE_FORM, &parse::size)?;
        c.replica_bytes = with("UNI20_REPLICA_BYTES", parse::SIZE_FORM, &parse::size)?.unwrap_or(c.replica_bytes);
        c.storage_ranks = with("UNI20_STORAGE_RANKS", "a non-negative integer", &|v| {
            parse::count(v, 0, usize::MAX).map(|n| n as u64)
        })?
        .map_or(0, |n| n as usize);
        if let Some(v) = text("UNI20_INJECT_FAULT")? {
            c.faults = FaultPlan::parse(&v).map_err(|why| {
                let why = why.strip_prefix("UNI20_INJECT_FAULT: ").unwrap_or(&why).to_string();
                config_error(
                    "UNI20_INJECT_FAULT",
                    &v,
                    format!("KIND@rank=R[,op=N] items separated by `;` ({why})"),
                )
            })?;
        }
        if let Some(v) = text("UNI20_BACKENDS")? {
            c.backends = match v.trim() {
                "cpu" => BackendChoice::Cpu,
                "gpu-first" => BackendChoice::GpuFirst,
                _ => return Err(config_error("UNI20_BACKENDS", &v, "`cpu` or `gpu-first`")),
            };
        }
        if let Some(n) = with("UNI20_MAX_ENVELOPE_BYTES", parse::SIZE_FORM, &|v| {
            parse::size(v).filter(|&n| n > 0 && to_usize(n).is_some())
        })? {
            c.max_envelope_bytes = n as usize;
        }
        let chunk_form = format!(
            "{} between {MIN_CHUNK_BYTES} B and {MAX_CHUNK_BYTES} B",
            parse::SIZE_FORM
        );
        if let Some(n) = with("UNI20_CHUNK_BYTES", &chunk_form, &|v| {
            parse::size(v).filter(|&n| (MIN_CHUNK_BYTES as u64..=MAX_CHUNK_BYTES as u64).contains(&n))
        })? {
            c.chunk_bytes = n as usize;
        }
        if let Some(v) = text("UNI20_ALLOW_NO_MPI")? {
            c.allow_no_mpi = parse::boolean(&v)
                .ok_or_else(|| config_error("UNI20_ALLOW_NO_MPI", &v, "1 or 0 (also true/false, yes/no, on/off)"))?;
        }
        c.tune_file = get(uni20_dispatch::tune::TUNE_FILE_ENV)
            .filter(|v| !v.to_string_lossy().trim().is_empty())
            .map(PathBuf::from);
        c.launcher = LauncherEnv::from_lookup(get);
        Ok(c)
    }

    /// Refuses the silent duplicate: a build without MPI support (`mpi_built`
    /// false) started by an MPI launcher with more than one process would run
    /// one complete in-process universe per process, each doing the whole
    /// job. `UNI20_ALLOW_NO_MPI=1` ([`RankConfig::allow_no_mpi`]) permits it.
    ///
    /// # Errors
    /// [`JobError::Startup`] with a one-line message telling the user to
    /// rebuild with `--features mpi`.
    pub fn check_mpi_support(&self, mpi_built: bool) -> Result<(), JobError> {
        match self.launcher.world_size {
            Some((variable, n)) if n > 1 && !mpi_built && !self.allow_no_mpi => Err(JobError::Startup(format!(
                "started by an MPI launcher with {n} processes ({variable}={n}) but this binary was built without \
                 MPI support, so every process would run the whole job on its own: rebuild with `--features mpi` \
                 (or set UNI20_ALLOW_NO_MPI=1 to run them anyway)"
            ))),
            _ => Ok(()),
        }
    }

    /// Checks values that may have been set by code rather than parsed from
    /// the environment (builder methods, edited fields).
    ///
    /// # Errors
    /// [`JobError::Startup`] naming the offending setting.
    pub fn validate(&self) -> Result<(), JobError> {
        if !(MIN_CHUNK_BYTES..=MAX_CHUNK_BYTES).contains(&self.chunk_bytes) {
            return Err(JobError::Startup(format!(
                "chunk size {} B is out of range: expected {MIN_CHUNK_BYTES} B to {MAX_CHUNK_BYTES} B",
                self.chunk_bytes
            )));
        }
        if self.max_envelope_bytes == 0 {
            return Err(JobError::Startup(
                "the envelope size limit must be at least 1 byte".into(),
            ));
        }
        if self.startup_timeout.is_zero() {
            return Err(JobError::Startup("the start-up timeout must be positive".into()));
        }
        if self.abort_timeout.is_zero() {
            return Err(JobError::Startup("the abort timeout must be positive".into()));
        }
        Ok(())
    }
}

impl LauncherEnv {
    /// Reads the launcher's variables from the process environment.
    pub fn from_env() -> LauncherEnv {
        LauncherEnv::from_lookup(&|name| std::env::var_os(name))
    }

    fn from_lookup(get: &dyn Fn(&str) -> Option<OsString>) -> LauncherEnv {
        // These belong to the launcher, not to us: an unreadable value means
        // "unknown", never an error.
        let number =
            |name: &str| -> Option<usize> { get(name)?.to_str()?.trim().parse().ok().filter(|&n: &usize| n > 0) };
        LauncherEnv {
            detected: LAUNCHER_VARIABLES.iter().copied().find(|v| get(v).is_some()),
            world_size: WORLD_SIZE_VARIABLES
                .iter()
                .copied()
                .find_map(|v| number(v).map(|n| (v, n))),
            local_size: LOCAL_SIZE_VARIABLES.iter().copied().find_map(number),
        }
    }
}
