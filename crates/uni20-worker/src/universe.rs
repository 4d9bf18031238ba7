//! Starting a universe, the root's [`Controller`] and the worker loop.
//!
//! Rank 0 (the root) runs the user's closure; every other rank runs
//! [`worker_loop`]. Both transports speak the same protocol:
//!
//! 1. start-up: each worker sends its registry signature (`TAG_HELLO`); the
//!    root compares all of them with its own and answers `TAG_START` with a
//!    verdict. A mismatch stops the job before any command runs.
//! 2. commands: the root sends a control frame (`TAG_CMD`) holding an
//!    [`Envelope`]; each participant runs the handler and answers `TAG_REPLY`.
//! 3. shutdown: the root sends a shutdown frame when its closure returns.

use std::any::Any;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use uni20_dispatch::BackendList;
use uni20_persist::Store;

use crate::context::WorkerContext;
use crate::controller::Controller;
use crate::diag::{Diagnostic, HandlerError, JobError};
use crate::envelope::{decode_exact, encode, Envelope};
use crate::fault::{FaultKind, FaultPlan};
use crate::inproc::{InProcessTransport, Shared};
use crate::registry::{diff_signatures, CommandEntry, CommandSignature, Registry};
use crate::transport::{Transport, TransportError, TAG_CMD, TAG_HELLO, TAG_REPLY, TAG_START};

/// Default number of ranks of the in-process universe.
pub const DEFAULT_RANKS: usize = 4;

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

#[derive(Serialize, Deserialize)]
struct Hello {
    rank: usize,
    digest: u64,
    signatures: Vec<CommandSignature>,
}

#[derive(Serialize, Deserialize)]
enum Start {
    Go,
    Refuse(String),
}

#[derive(Serialize, Deserialize)]
pub(crate) enum Control {
    Run(Vec<u8>),
    Shutdown,
}

#[derive(Serialize, Deserialize)]
pub(crate) struct Reply {
    pub(crate) op_id: u64,
    pub(crate) outcome: Result<Vec<u8>, Box<Diagnostic>>,
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

/// The local contraction backends of a rank: `UNI20_BACKENDS=gpu-first`
/// puts the CUDA backend (build with feature `cuda`) before the CPU ones;
/// anything else, or unset, gives [`BackendList::default_cpu`]. Either way a
/// backend that cannot run here declines and the next one is tried.
pub fn rank_backends(threads: usize) -> BackendList {
    match std::env::var("UNI20_BACKENDS").as_deref() {
        Ok("gpu-first") => BackendList::default_gpu_first(threads),
        _ => BackendList::default_cpu(threads),
    }
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
    /// [`DEFAULT_RANKS`]) for the in-process universe, automatic transport,
    /// `UNI20_THREADS_PER_RANK` threads per rank (default: cores / ranks),
    /// start-up timeout `UNI20_STARTUP_TIMEOUT` seconds (default 60).
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

    fn storage_count(&self, size: usize) -> Result<usize, JobError> {
        let k = self
            .storage_ranks
            .or_else(|| env_usize("UNI20_STORAGE_RANKS"))
            .unwrap_or(0);
        if k > 0 && k + 2 > size {
            return Err(JobError::Startup(format!(
                "{k} storage rank(s) need at least {} ranks (root + one worker + storage), the universe has {size}",
                k + 2
            )));
        }
        Ok(k)
    }

    fn open_store(&self, rank: usize) -> Result<Store, JobError> {
        match &self.store_dir {
            None => Ok(Store::in_memory(rank as u32)),
            Some(dir) => {
                let mut opts = uni20_persist::StoreOptions::new();
                if let Some(b) = self.memory_budget {
                    opts = opts.memory_budget(b);
                }
                Store::open(dir, rank as u32, opts)
                    .map_err(|e| JobError::Startup(format!("rank {rank}: opening the store in {}: {e}", dir.display())))
            }
        }
    }

    /// Injects faults (see [`crate::fault`]); overrides `UNI20_INJECT_FAULT`.
    pub fn faults(mut self, plan: FaultPlan) -> Self {
        self.faults = Some(plan);
        self
    }

    fn fault_plan(&self, size: usize) -> Result<FaultPlan, JobError> {
        let plan = match &self.faults {
            Some(p) => p.clone(),
            None => FaultPlan::from_env().map_err(JobError::Startup)?,
        };
        plan.validate(size).map_err(JobError::Startup)?;
        Ok(plan)
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

    fn registry_of(&self, rank: usize, faults: &FaultPlan) -> Result<Registry, JobError> {
        let registry = match self.registry_overrides.get(&rank) {
            Some(entries) => Registry::from_entries(entries.iter().copied())?,
            None => Registry::linked()?,
        };
        if faults.has(rank, FaultKind::Registry) {
            // Simulate a rank built from different sources: one command missing.
            return Ok(Registry::from_entries(registry.entries().into_iter().skip(1).copied())?);
        }
        Ok(registry)
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
        match self.resolved_transport() {
            TransportChoice::Mpi => self.run_mpi(f),
            _ => self.run_in_process(f),
        }
    }

    fn run_in_process<R>(self, f: impl FnOnce(&Controller<'_>) -> R) -> RunResult<R> {
        let n = self.ranks.or_else(|| env_usize("UNI20_RANKS")).unwrap_or(DEFAULT_RANKS);
        if n == 0 {
            return Err(JobError::Startup("a universe needs at least one rank".into()));
        }
        let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1);
        let threads = self
            .threads_per_rank
            .or_else(|| env_usize("UNI20_THREADS_PER_RANK"))
            .unwrap_or((cores / n).max(1));
        let faults = self.fault_plan(n)?;
        install_quiet_handler_panic_hook();
        let shared = Shared::new(n);
        let root_registry = self.registry_of(0, &faults)?;
        let mut worker_registries = Vec::new();
        for r in 1..n {
            worker_registries.push(self.registry_of(r, &faults)?);
        }
        let faults = &faults;
        let storage = self.storage_count(n)?;
        let mut stores = Vec::with_capacity(n);
        for r in 0..n {
            stores.push(self.open_store(r)?);
        }
        let mut stores = stores.into_iter();
        let root_store = stores.next().ok_or_else(|| JobError::Startup("no rank 0".into()))?;
        std::thread::scope(|scope| {
            for (i, (registry, store)) in worker_registries.into_iter().zip(stores).enumerate() {
                let rank = i + 1;
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("uni20-rank-{rank}"))
                    .spawn_scoped(scope, move || {
                        let t = InProcessTransport::new(rank, shared);
                        let backends = rank_backends(threads);
                        let _span = tracing::info_span!("rank", rank).entered();
                        let exit = catch_unwind(AssertUnwindSafe(|| {
                            worker_loop(&t, &registry, &store, &backends, threads, faults)
                        }));
                        match exit {
                            Ok(WorkerExit::Died(why)) => t.abort(&why),
                            Ok(_) => {}
                            Err(p) => t.abort(&format!(
                                "rank {rank} panicked outside a command handler: {}",
                                panic_message(&*p)
                            )),
                        }
                    })
                    .map_err(|e| JobError::Startup(format!("spawning rank {rank}: {e}")))?;
            }
            let t = InProcessTransport::new(0, shared.clone());
            let _span = tracing::info_span!("rank", rank = 0).entered();
            let result = root_main(
                &t,
                root_registry,
                root_store,
                threads,
                storage,
                self.startup_timeout,
                faults.clone(),
                f,
            );
            if result.is_err() {
                t.abort("the root stopped the job");
            }
            result
        })
    }

    #[cfg(not(feature = "mpi"))]
    fn run_mpi<R>(self, _f: impl FnOnce(&Controller<'_>) -> R) -> RunResult<R> {
        Err(JobError::Startup(
            "this build has no MPI support: rebuild with `--features mpi`".into(),
        ))
    }

    #[cfg(feature = "mpi")]
    fn run_mpi<R>(self, f: impl FnOnce(&Controller<'_>) -> R) -> RunResult<R> {
        let (universe, _threading) = mpi::initialize_with_threading(mpi::Threading::Funneled)
            .ok_or_else(|| JobError::Startup("MPI was already initialised in this process".into()))?;
        let world = universe.world();
        install_mpi_panic_hook();
        let t = crate::mpi_transport::MpiTransport::new(world);
        let size = t.size();
        let rank = t.rank();
        let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1);
        let local = env_usize("OMPI_COMM_WORLD_LOCAL_SIZE")
            .or_else(|| env_usize("MPI_LOCALNRANKS"))
            .unwrap_or(size);
        let threads = self
            .threads_per_rank
            .or_else(|| env_usize("UNI20_THREADS_PER_RANK"))
            .unwrap_or((cores / local).max(1));
        let faults = self.fault_plan(size)?;
        let registry = self.registry_of(rank, &faults)?;
        let _span = tracing::info_span!("rank", rank).entered();
        let storage = self.storage_count(size)?;
        let store = self.open_store(rank)?;
        if rank == 0 {
            let result = root_main(&t, registry, store, threads, storage, self.startup_timeout, faults, f);
            if let Err(e) = &result {
                // Every start-up or job failure ends every rank.
                t.abort(&e.to_string());
            }
            drop(t);
            drop(universe);
            result
        } else {
            let backends = rank_backends(threads);
            let outcome = worker_loop(&t, &registry, &store, &backends, threads, &faults);
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
            drop(universe);
            std::process::exit(match outcome {
                WorkerExit::Shutdown => 0,
                _ => 1,
            });
        }
    }
}

thread_local! {
    static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
}

/// In-process: panics inside handlers are caught and reported to the root
/// as a diagnostic, so the default hook's message would only duplicate it.
fn install_quiet_handler_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_HANDLER.with(|h| h.get()) {
                previous(info);
            }
        }));
    });
}

#[cfg(feature = "mpi")]
fn install_mpi_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // A panic inside a handler is caught and reported to the root as a
        // diagnostic; any other panic would leave peers blocked in MPI calls,
        // so abort the communicator (rsmpi issue 197).
        if !IN_HANDLER.with(|h| h.get()) {
            previous(info);
            eprintln!("uni20: panic outside a command handler; aborting MPI_COMM_WORLD");
            crate::cleanup::run_cleanups();
            unsafe {
                mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, 70);
            }
        }
    }));
}

fn set_in_handler(v: bool) {
    IN_HANDLER.with(|h| h.set(v));
}

/// How a worker loop ended.
#[derive(Debug, PartialEq, Eq)]
pub enum WorkerExit {
    /// The root sent shutdown.
    Shutdown,
    /// The root refused to start (registry mismatch).
    Refused(String),
    /// The job was aborted or communication failed.
    Aborted(String),
    /// This rank died in the middle of an operation (injected `exit`/`kill`
    /// in-process); the reason names rank, op_id and command.
    Died(String),
}

/// What running one command produced.
enum Executed {
    Reply(Result<Vec<u8>, Box<Diagnostic>>),
    BadReply,
    Died(String),
}

fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Runs one handler and turns its error or panic into a [`Diagnostic`].
fn execute(registry: &Registry, ctx: &mut WorkerContext<'_>, env: &Envelope, faults: &FaultPlan) -> Executed {
    let rank = ctx.rank();
    let injected = faults.at(
        rank,
        env.op_id,
        &[
            FaultKind::Error,
            FaultKind::Panic,
            FaultKind::Exit,
            FaultKind::Kill,
            FaultKind::BadReply,
            FaultKind::Io,
        ],
    );
    if let Some(f) = injected {
        let why = format!(
            "rank {rank} died during op_id {} (`{}`): injected {f} (UNI20_INJECT_FAULT)",
            env.op_id, env.wire_name
        );
        match f.kind {
            FaultKind::Exit | FaultKind::Kill if ctx.transport.kind() == "mpi" => {
                eprintln!("uni20: {why}");
                if f.kind == FaultKind::Kill {
                    // SAFETY: raising a signal on our own process has no memory-safety preconditions.
                    unsafe {
                        libc::raise(libc::SIGKILL);
                    }
                }
                std::process::exit(17);
            }
            FaultKind::Exit | FaultKind::Kill => return Executed::Died(why),
            FaultKind::BadReply => return Executed::BadReply,
            FaultKind::Io => {
                tracing::warn!(
                    rank,
                    op_id = env.op_id,
                    "injected fault {f}: the next store write fails"
                );
                ctx.store.inject_io_failures(1);
            }
            _ => {}
        }
    }
    Executed::Reply(run_handler(
        registry,
        ctx,
        env,
        injected.map(|f| (f.kind, f.to_string())),
    ))
}

pub(crate) fn run_handler(
    registry: &Registry,
    ctx: &mut WorkerContext<'_>,
    env: &Envelope,
    injected: Option<(FaultKind, String)>,
) -> Result<Vec<u8>, Box<Diagnostic>> {
    let rank = ctx.rank();
    let diag = |location: String, error: HandlerError| {
        Box::new(Diagnostic {
            rank,
            op_id: env.op_id,
            debug_name: env.debug_name.clone(),
            wire_name: env.wire_name.clone(),
            command_id: env.command_id,
            schema_version: env.schema_version,
            location,
            error,
        })
    };
    let Some(entry) = registry.get(env.command_id) else {
        return Err(diag(
            "unknown".into(),
            HandlerError::msg(format!(
                "unknown command id {:#018x} (`{}`): not registered on rank {rank}",
                env.command_id, env.wire_name
            )),
        ));
    };
    let location = entry.location.to_string();
    if entry.schema_version != env.schema_version || entry.wire_name != env.wire_name {
        return Err(diag(
            location,
            HandlerError::msg(format!(
                "schema mismatch: envelope `{}` v{}, registered `{}` v{}",
                env.wire_name, env.schema_version, entry.wire_name, entry.schema_version
            )),
        ));
    }
    let _span = tracing::debug_span!("command", rank, op_id = env.op_id, wire = %env.wire_name).entered();
    set_in_handler(true);
    let outcome = catch_unwind(AssertUnwindSafe(|| match &injected {
        Some((FaultKind::Panic, f)) => panic!("injected panic {f} (UNI20_INJECT_FAULT)"),
        Some((FaultKind::Error, f)) => Err(HandlerError::msg(format!("injected error {f} (UNI20_INJECT_FAULT)"))),
        _ => (entry.handler)(ctx, env),
    }));
    set_in_handler(false);
    match outcome {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => Err(diag(location, e)),
        Err(p) => Err(diag(
            location,
            HandlerError::msg(format!("handler panicked: {}", panic_message(&*p))),
        )),
    }
}

/// The worker loop of one rank: handshake, then execute commands until
/// shutdown or abort.
pub fn worker_loop(
    t: &dyn Transport,
    registry: &Registry,
    store: &Store,
    backends: &BackendList,
    threads: usize,
    faults: &FaultPlan,
) -> WorkerExit {
    let rank = t.rank();
    if faults.has(rank, FaultKind::NoArrive) {
        tracing::warn!(rank, "injected fault: never sending the start-up hello");
        // Wait to be aborted by the root's start-up timeout.
        let _ = t.recv(0, TAG_START);
        return WorkerExit::Aborted("injected noarrive".into());
    }
    let hello = Hello {
        rank,
        digest: registry.digest(),
        signatures: registry.signatures(),
    };
    if let Err(e) = t.send(0, TAG_HELLO, &encode(&hello)) {
        return WorkerExit::Aborted(e.to_string());
    }
    match t.recv(0, TAG_START).map(|b| decode_exact::<Start>(&b, "start verdict")) {
        Ok(Ok(Start::Go)) => {}
        Ok(Ok(Start::Refuse(why))) => return WorkerExit::Refused(why),
        Ok(Err(e)) => return WorkerExit::Aborted(e.to_string()),
        Err(e) => return WorkerExit::Aborted(e.to_string()),
    }
    loop {
        let frame = match t.recv(0, TAG_CMD) {
            Ok(f) => f,
            Err(e) => return WorkerExit::Aborted(e.to_string()),
        };
        let (op_id, outcome) = match decode_exact::<Control>(&frame, "control frame") {
            Ok(Control::Shutdown) => return WorkerExit::Shutdown,
            Ok(Control::Run(bytes)) => match Envelope::decode(&bytes) {
                Ok(env) => {
                    let mut ctx = WorkerContext {
                        transport: t,
                        store,
                        backends,
                        threads,
                        op_id: env.op_id,
                    };
                    match execute(registry, &mut ctx, &env, faults) {
                        Executed::Reply(r) => (env.op_id, r),
                        Executed::Died(why) => return WorkerExit::Died(why),
                        Executed::BadReply => {
                            if let Err(e) = t.send(0, TAG_REPLY, b"\xff\xffnot a reply") {
                                return WorkerExit::Aborted(e.to_string());
                            }
                            continue;
                        }
                    }
                }
                Err(e) => (0, Err(Box::new(undecodable(rank, e.to_string())))),
            },
            Err(e) => (0, Err(Box::new(undecodable(rank, e.to_string())))),
        };
        if let Err(d) = &outcome {
            tracing::warn!(rank, op_id, "command failed: {}", d.error);
        }
        if let Err(e) = t.send(0, TAG_REPLY, &encode(&Reply { op_id, outcome })) {
            return WorkerExit::Aborted(e.to_string());
        }
    }
}

fn undecodable(rank: usize, why: String) -> Diagnostic {
    Diagnostic {
        rank,
        op_id: 0,
        debug_name: "?".into(),
        wire_name: "?".into(),
        command_id: 0,
        schema_version: 0,
        location: "worker loop".into(),
        error: HandlerError::msg(format!("undecodable command frame: {why}")),
    }
}

#[allow(clippy::too_many_arguments)]
fn root_main<R>(
    t: &dyn Transport,
    registry: Registry,
    store: Store,
    threads: usize,
    storage_ranks: usize,
    timeout: Duration,
    faults: FaultPlan,
    f: impl FnOnce(&Controller<'_>) -> R,
) -> RunResult<R> {
    let n = t.size();
    // Start-up handshake: every worker must arrive and agree on the registry.
    let mine = registry.signatures();
    let mut differences = Vec::new();
    let mut arrived = vec![false; n];
    arrived[0] = true;
    for _ in 1..n {
        let (src, bytes) = t.recv_any_timeout(TAG_HELLO, timeout).map_err(|e| match e {
            TransportError::Timeout(_) => {
                let missing: Vec<String> = (0..n).filter(|r| !arrived[*r]).map(|r| r.to_string()).collect();
                JobError::Startup(format!(
                    "rank(s) {} did not arrive within {timeout:?} (set UNI20_STARTUP_TIMEOUT to wait longer)",
                    missing.join(", ")
                ))
            }
            other => JobError::Transport(other),
        })?;
        arrived[src] = true;
        let hello: Hello = decode_exact(&bytes, "hello")?;
        if hello.digest != registry.digest() || hello.signatures != mine {
            differences.extend(diff_signatures(&mine, &hello.signatures, hello.rank));
            if differences.is_empty() {
                differences.push(format!("rank {} reports a different registry digest", hello.rank));
            }
        }
    }
    let verdict = if differences.is_empty() {
        Start::Go
    } else {
        Start::Refuse(differences.join("; "))
    };
    for r in 1..n {
        t.send(r, TAG_START, &encode(&verdict))?;
    }
    if !differences.is_empty() {
        return Err(JobError::RegistryMismatch { differences });
    }
    let ctl = Controller::new(
        t,
        registry,
        store,
        rank_backends(threads),
        threads,
        storage_ranks,
        faults,
    );
    let out = catch_unwind(AssertUnwindSafe(|| {
        let v = f(&ctl);
        // Operations submitted without waiting finish before shutdown.
        ctl.drain().map(|()| v)
    }));
    if !ctl.has_failed() {
        for r in 1..n {
            let _ = t.send(r, TAG_CMD, &encode(&Control::Shutdown));
        }
    }
    match out {
        Ok(v) => v,
        Err(p) => {
            t.abort("the root panicked");
            std::panic::resume_unwind(p)
        }
    }
}
