//! `cargo xtask test`: the workspace tests, then every MPI integration test at
//! each supported rank count.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::cargo::{self, TargetKind, ROOT_PACKAGE};
use crate::launcher::Launcher;
use crate::proc::Outcome;
use crate::python;

/// Rank counts used when a test does not declare its own.
pub const DEFAULT_RANKS: &[u32] = &[1, 2, 3];

/// The marker comment declaring supported rank counts.
pub const RANKS_MARKER: &str = "uni20-mpi-ranks:";

/// Example run at 3 ranks as an end-to-end check, when it exists (also the
/// program of the fault stage).
pub const SMOKE_EXAMPLE: &str = "heisenberg";

/// Examples run under MPI as end-to-end checks, with their rank counts
/// (each must exit 0). `embed` splits the world into two halves.
pub const MPI_EXAMPLES: &[(&str, u32)] = &[
    (SMOKE_EXAMPLE, 3),
    ("custom_command", 3),
    ("kit_family", 3),
    ("embed", 4),
    ("embed", 6),
    ("guide_spmd", 3),
    ("guide_library_mode", 4),
];

/// Integration tests of the root package whose `#[ignore]`d tests need an
/// optimised build (physics references at sizes a debug build takes minutes
/// for): run with `--release -- --ignored` after stage 1.
pub const RELEASE_TESTS: &[&str] = &["tn_reference", "symmetric_dmrg"];

/// Options of `cargo xtask test`.
#[derive(Debug, Clone)]
pub struct TestOptions {
    /// Fail (instead of warning) when `mpirun` is missing.
    pub require_mpi: bool,
    /// Build and test in release mode.
    pub release: bool,
    /// Hard timeout for each MPI run.
    pub timeout: Duration,
    /// Skip `cargo test --workspace`; run only the MPI stage.
    pub mpi_only: bool,
    /// Run only the Python stage.
    pub python_only: bool,
    /// Run only the MPI fault stage.
    pub faults_only: bool,
}

/// One MPI job: a target at a number of ranks.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    /// Test or example.
    pub(crate) kind: TargetKind,
    /// Target name.
    pub(crate) name: String,
    /// Number of ranks to launch.
    pub(crate) ranks: u32,
}

/// Runs `cargo xtask test`; returns the process exit code.
pub fn run(opts: &TestOptions) -> Result<i32> {
    if opts.python_only {
        let launcher = Launcher::detect()?;
        if launcher.is_none() {
            warn_no_mpi(opts.require_mpi);
        }
        let py = python_stage(launcher.as_ref(), opts)?;
        print_python_summary(&py);
        let failed = py.iter().any(|(_, o, _)| !o.success()) || (opts.require_mpi && launcher.is_none());
        return Ok(i32::from(failed));
    }
    if opts.faults_only {
        let Some(launcher) = Launcher::detect()? else {
            warn_no_mpi(true);
            return Ok(1);
        };
        let results = fault_stage(&launcher, opts)?;
        print_summary(&results);
        return Ok(i32::from(results.iter().any(|(_, o, _)| !o.success())));
    }
    if !opts.mpi_only {
        eprintln!("xtask: == stage 1: cargo test --workspace ==");
        let mut cmd = cargo::cargo();
        cmd.args(["test", "--workspace"]);
        if opts.release {
            cmd.arg("--release");
        }
        let status = cargo::status(&mut cmd)?;
        if !status.success() {
            eprintln!("xtask: cargo test --workspace failed ({status})");
            return Ok(status.code().unwrap_or(1));
        }
        eprintln!("xtask: == stage 1b: the user guide (mdbook build docs/guide) ==");
        if crate::guide::build()? == crate::guide::GuideOutcome::Failed {
            return Ok(1);
        }
        eprintln!("xtask: == stage 1c: release reference tests ({RELEASE_TESTS:?}, --ignored) ==");
        let mut cmd = cargo::cargo();
        cmd.args(["test", "--release", "-p", ROOT_PACKAGE]);
        for t in RELEASE_TESTS {
            cmd.args(["--test", t]);
        }
        cmd.args(["--", "--ignored"]);
        let status = cargo::status(&mut cmd)?;
        if !status.success() {
            eprintln!("xtask: the release reference tests failed ({status})");
            return Ok(status.code().unwrap_or(1));
        }
    }

    eprintln!("xtask: == stage 2: MPI integration tests ==");
    let Some(launcher) = Launcher::detect()? else {
        warn_no_mpi(opts.require_mpi);
        let py = python_stage(None, opts)?;
        print_python_summary(&py);
        let failed = py.iter().any(|(_, o, _)| !o.success());
        return Ok(if opts.require_mpi || failed { 1 } else { 0 });
    };
    eprintln!(
        "xtask: launcher {} ({:?}: {})",
        launcher.program.display(),
        launcher.flavor,
        launcher.version
    );

    let meta = cargo::metadata()?;
    let mut jobs = Vec::new();
    let mut tests: Vec<_> = meta
        .targets_of(TargetKind::Test)
        .filter(|t| t.name.starts_with("mpi_"))
        .collect();
    tests.sort_by(|a, b| a.name.cmp(&b.name));
    for t in &tests {
        for ranks in declared_ranks(&t.src_path)? {
            jobs.push(Job {
                kind: TargetKind::Test,
                name: t.name.clone(),
                ranks,
            });
        }
    }
    for &(name, ranks) in MPI_EXAMPLES {
        if meta.targets_of(TargetKind::Example).any(|t| t.name == name) {
            jobs.push(Job {
                kind: TargetKind::Example,
                name: name.to_string(),
                ranks,
            });
        }
    }
    if jobs.is_empty() {
        eprintln!("xtask: no MPI integration tests (tests/mpi_*.rs) found");
        println!("0 passed, 0 failed");
        return Ok(0);
    }

    let mut targets: Vec<cargo::Target> = jobs.iter().map(|j| (j.kind, j.name.clone())).collect();
    targets.dedup();
    let exes =
        cargo::build_mpi(ROOT_PACKAGE, &targets, opts.release, &[]).context("building the MPI integration tests")?;

    let mut results: Vec<(Job, Outcome, Duration)> = Vec::new();
    for job in &jobs {
        let exe = &exes[&(job.kind, job.name.clone())];
        eprintln!(
            "\nxtask: ---- {} {} @ {} rank{} ----",
            job.kind.cargo_kind(),
            job.name,
            job.ranks,
            if job.ranks == 1 { "" } else { "s" }
        );
        let (outcome, elapsed) = launcher.run(job.ranks, exe, &[], opts.timeout, false)?;
        eprintln!("xtask: {} @ {} -> {}", job.name, job.ranks, outcome.describe());
        let stop = matches!(outcome, Outcome::Interrupted(_));
        results.push((job.clone(), outcome, elapsed));
        if stop {
            eprintln!("xtask: interrupted; skipping the remaining MPI runs");
            break;
        }
    }
    if !matches!(results.last(), Some((_, Outcome::Interrupted(_), _))) {
        results.extend(cli_parity(&launcher, opts)?);
        results.extend(fault_stage(&launcher, opts)?);
        results.extend(startup_stage(&launcher, opts)?);
        results.push(checkpoint_restart(&launcher, opts)?);
        results.extend(dmrg_kill_resume(&launcher, opts)?);
        results.extend(crate::resume::dmrg_rank_count_resume(&launcher, opts)?);
        results.push(no_mpi_refusal(&launcher, opts)?);
        results.push(abort_timeout_stage(&launcher, opts)?);
    }
    let interrupted = matches!(results.last(), Some((_, Outcome::Interrupted(_), _)));
    let py = if interrupted {
        Vec::new()
    } else {
        python_stage(Some(&launcher), opts)?
    };
    print_summary(&results);
    print_python_summary(&py);
    if let Some((_, Outcome::Interrupted(sig), _)) = results.last() {
        return Ok(128 + sig);
    }
    let failed =
        results.iter().filter(|(_, o, _)| !o.success()).count() + py.iter().filter(|(_, o, _)| !o.success()).count();
    Ok(if failed == 0 { 0 } else { 1 })
}

/// Stage 3, the Python package (see [`python::stage`]); a missing Python
/// fails it under `--require-mpi`.
fn python_stage(launcher: Option<&Launcher>, opts: &TestOptions) -> Result<Vec<python::StepResult>> {
    let example = python::built_example(opts.release);
    python::stage(
        launcher,
        opts.release,
        opts.require_mpi,
        opts.timeout.max(Duration::from_secs(600)),
        example.as_deref(),
    )
}

/// Prints the steps of the Python stage with their times and outcomes.
fn print_python_summary(results: &[python::StepResult]) {
    if results.is_empty() {
        return;
    }
    println!();
    println!("Python package summary");
    for (name, outcome, elapsed) in results {
        println!(
            "  {:<44}  {:>7.1}s  {}",
            name,
            elapsed.as_secs_f64(),
            outcome.describe()
        );
    }
}

/// Fixture cases (under `tests/fixtures`) used for the CLI parity runs: the
/// MPI runs read `a.npy` and `b.npy`, the in-process reference run reads
/// the two named operands (the little-endian copies of the big-endian
/// `npy_endian` operands, which must give the same result).
const PARITY_CASES: &[(&str, [&str; 2])] = &[
    ("contract/permuted_contracted", ["a.npy", "b.npy"]),
    ("contract/mixed_f64_c128", ["a.npy", "b.npy"]),
    ("contract/batch_permuted", ["a.npy", "b.npy"]),
    ("npy_endian/f64_c128", ["a_le.npy", "b_le.npy"]),
    ("npy_endian/f32_c64", ["a_le.npy", "b_le.npy"]),
];

/// `uni20 contract` under 1, 2 and 3 MPI ranks must write the same file (to
/// 1e-12 relative; 1e-6 for single precision, whose sums may be taken in
/// another order) as the in-process run of the same binary.
fn cli_parity(launcher: &Launcher, opts: &TestOptions) -> Result<Vec<(Job, Outcome, Duration)>> {
    let target = (TargetKind::Bin, "uni20".to_string());
    let exes = cargo::build_mpi("uni20-cli", std::slice::from_ref(&target), opts.release, &[])
        .context("building uni20-cli")?;
    let exe = &exes[&target];
    let root = cargo::workspace_root();
    let scratch = std::env::temp_dir().join(format!("uni20-cli-parity-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let mut results = Vec::new();
    for (case_dir, reference_operands) in PARITY_CASES {
        let dir = root.join("tests/fixtures").join(case_dir);
        let case = case_dir.replace('/', "-");
        let spec = std::fs::read_to_string(dir.join("spec.txt"))?.trim().to_string();
        let args_with = |a: &str, b: &str, out: &Path| -> Vec<std::ffi::OsString> {
            vec![
                "contract".into(),
                spec.clone().into(),
                dir.join(a).into(),
                dir.join(b).into(),
                "-o".into(),
                out.into(),
                "--block".into(),
                "2".into(),
            ]
        };
        let args = |out: &Path| args_with("a.npy", "b.npy", out);
        let reference = scratch.join(format!("{case}-inprocess.npy"));
        let status = std::process::Command::new(exe)
            .args(args_with(reference_operands[0], reference_operands[1], &reference))
            .env("UNI20_RANKS", "3")
            .stdin(std::process::Stdio::null())
            .status()?;
        if !status.success() {
            bail!("in-process `uni20 contract` failed for {case}: {status}");
        }
        for ranks in DEFAULT_RANKS {
            eprintln!(
                "\nxtask: ---- uni20 contract {case} ({spec}) @ {ranks} rank(s) vs in-process ({} {}) ----",
                reference_operands[0], reference_operands[1]
            );
            let out = scratch.join(format!("{case}-mpi{ranks}.npy"));
            let (mut outcome, elapsed) = launcher.run(*ranks, exe, &args(&out), opts.timeout, false)?;
            if outcome.success() {
                match npy_max_rel_diff(&out, &reference) {
                    Ok((d, tol)) if d <= tol => {
                        eprintln!("xtask: identical to the in-process output (max rel diff {d:e})")
                    }
                    Ok((d, tol)) => {
                        eprintln!("xtask: MISMATCH: max relative difference {d:e} > {tol:e}");
                        outcome = Outcome::Exited(1);
                    }
                    Err(e) => {
                        eprintln!("xtask: cannot compare outputs: {e:#}");
                        outcome = Outcome::Exited(1);
                    }
                }
            }
            let job = Job {
                kind: TargetKind::Bin,
                name: format!("uni20 contract {case}"),
                ranks: *ranks,
            };
            results.push((job, outcome, elapsed));
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(results)
}

/// Example of `uni20-cli` whose root panics outside any handler while
/// `write_npy` writes (a fault stage case without `UNI20_INJECT_FAULT`).
const ROOT_PANIC_EXAMPLE: &str = "root_panic_in_write";

/// Example of the `uni20` package that puts a tensor on a storage rank and
/// fetches it to a worker (a fault stage case: the storage rank is killed).
const STORAGE_FETCH_EXAMPLE: &str = "storage_fetch";

/// Injected failures under `mpirun -n 3` (see `UNI20_INJECT_FAULT` in
/// `docs/guide/src/troubleshooting.md`): each must end the whole job with a
/// non-zero status within
/// [`FAULT_DEADLINE`], the job's output must name what failed, and neither
/// the output file nor its temporary `.NAME.uni20-tmp-*` file may remain
/// (fail-stop on the root: the transport's abort; a failure on a worker:
/// the root's SIGTERM handler; a root panic: the panic hook).
const FAULT_CASES: &[(&str, &str, &[&str])] = &[
    (
        "contract",
        "error@rank=1,op=3",
        &["rank 1", "op_id 3", "uni20.contract.v1", "injected error"],
    ),
    (
        "contract",
        "panic@rank=2,op=3",
        &["rank 2", "op_id 3", "uni20.contract.v1", "injected panic"],
    ),
    (
        "contract",
        "helperpanic@rank=1,op=3",
        &[
            "rank 1",
            "op_id 3",
            "uni20.contract.v1",
            "handler panicked",
            "helper thread",
            "injected helper panic",
        ],
    ),
    (
        "contract",
        "exit@rank=1,op=3",
        &["rank 1", "op_id 3", "uni20.contract.v1", "injected exit"],
    ),
    (
        "contract",
        "kill@rank=2,op=3",
        &["rank 2", "op_id 3", "uni20.contract.v1", "injected kill"],
    ),
    (
        "contract",
        "io@rank=1,op=3",
        &[
            "rank 1",
            "op_id 3",
            "uni20.contract.v1",
            "injected fault",
            "No space left",
        ],
    ),
    (
        "contract",
        "badreply@rank=1,op=3",
        &["rank 1", "op_id 3", "uni20.contract.v1", "undecodable reply"],
    ),
    (
        "contract",
        "unknowncmd@rank=0,op=3",
        &["op_id 3", "uni20.contract.v1", "unknown command id"],
    ),
    (
        "contract",
        "schema@rank=0,op=3",
        &["op_id 3", "uni20.contract.v1", "schema mismatch"],
    ),
    (
        "contract",
        "garbage@rank=0,op=3",
        &["op_id 3", "uni20.contract.v1", "malformed descriptor"],
    ),
    (
        "contract",
        "trailing@rank=0,op=3",
        &["op_id 3", "uni20.contract.v1", "trailing bytes after descriptor"],
    ),
    (
        "contract",
        "registry@rank=2",
        &["registries differ", "missing on rank 2"],
    ),
    ("contract", "noarrive@rank=2", &["rank(s) 2 did not arrive"]),
    (
        "contract",
        "exit@rank=2,op=4",
        &["rank 2", "op_id 4", "uni20.npy_write.v1", "injected exit"],
    ),
    (
        "contract",
        "error@rank=1,op=4",
        &["rank 1", "op_id 4", "uni20.npy_write.v1", "injected error"],
    ),
    (
        ROOT_PANIC_EXAMPLE,
        "",
        &[
            "deliberate root panic during write_npy",
            "panic outside a command handler",
        ],
    ),
    // A storage rank killed while a worker fetches from it: the launcher ends
    // the survivors with SIGTERM, and the worker's wait note names the storage
    // rank, the object it awaited and itself (`examples/storage_fetch.rs`:
    // op 1 puts a tensor on storage rank 2, op 2 fetches it to worker 1).
    (
        STORAGE_FETCH_EXAMPLE,
        "kill@rank=2,op=2",
        &[
            "rank 2 died during op_id 2",
            "rank 1 (worker) terminated by SIGTERM while in uni20.replicate.v1 (op 2)",
            "waiting for 1 object(s): object r2:",
            "from rank 2 (a storage rank)",
        ],
    ),
    // The storage rank answers the fetch with a corrupt object: the worker's
    // checksum check fails and the root stops the job on its report.
    (
        STORAGE_FETCH_EXAMPLE,
        "corrupt@rank=2,op=2",
        &[
            "failed on rank 1 at op_id 2",
            "uni20.replicate.v1",
            "receiving object r2:",
            "from storage rank 2",
            "checksum",
        ],
    ),
    (
        "heisenberg",
        "panic@rank=1,op=1",
        &["rank 1", "op_id 1", "uni20.put_blocks.v1", "injected panic"],
    ),
];

/// Wall-clock bound for one injected-failure run, launch included.
const FAULT_DEADLINE: Duration = Duration::from_secs(10);

/// Runs every [`FAULT_CASES`] entry under `mpirun -n 3` and checks the outcome.
fn fault_stage(launcher: &Launcher, opts: &TestOptions) -> Result<Vec<(Job, Outcome, Duration)>> {
    let cli = (TargetKind::Bin, "uni20".to_string());
    let panic_ex = (TargetKind::Example, ROOT_PANIC_EXAMPLE.to_string());
    let cli_exes = cargo::build_mpi("uni20-cli", &[cli.clone(), panic_ex.clone()], opts.release, &[])?;
    let (cli_exe, panic_exe) = (cli_exes[&cli].clone(), cli_exes[&panic_ex].clone());
    let ex = (TargetKind::Example, SMOKE_EXAMPLE.to_string());
    let storage_ex = (TargetKind::Example, STORAGE_FETCH_EXAMPLE.to_string());
    let ex_exes = cargo::build_mpi(ROOT_PACKAGE, &[ex.clone(), storage_ex.clone()], opts.release, &[])?;
    let (ex_exe, storage_exe) = (ex_exes[&ex].clone(), ex_exes[&storage_ex].clone());
    let root = cargo::workspace_root();
    let case = root.join("tests/fixtures/contract/permuted_contracted");
    let scratch = std::env::temp_dir().join(format!("uni20-faults-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let mut results = Vec::new();
    for (i, (target, fault, needles)) in FAULT_CASES.iter().enumerate() {
        let out = scratch.join(format!("out{i}.npy"));
        let (exe, args): (&Path, Vec<std::ffi::OsString>) = if *target == ROOT_PANIC_EXAMPLE {
            (&panic_exe, vec![out.clone().into()])
        } else if *target == "contract" {
            let args = vec![
                "contract".into(),
                "abcd,dbef->acef".into(),
                case.join("a.npy").into(),
                case.join("b.npy").into(),
                "-o".into(),
                out.clone().into(),
                "--block".into(),
                "1".into(),
            ];
            (&cli_exe, args)
        } else if *target == STORAGE_FETCH_EXAMPLE {
            (&storage_exe, Vec::new())
        } else {
            (&ex_exe, Vec::new())
        };
        let label = if fault.is_empty() { "(none injected)" } else { fault };
        eprintln!("\nxtask: ---- fault {label} in {target} @ 3 ranks ----");
        let log_path = scratch.join(format!("log{i}.txt"));
        let log = std::fs::File::create(&log_path)?;
        let mut cmd = launcher.command(3, exe, &args);
        cmd.env("UNI20_INJECT_FAULT", fault)
            .env("UNI20_STARTUP_TIMEOUT", "3")
            .env("UNI20_BENCH_REPS", "1")
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let (mut outcome, elapsed) = crate::proc::run_with_timeout(&mut cmd, FAULT_DEADLINE)?;
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        for line in text
            .lines()
            .filter(|l| l.contains("uni20") || l.contains("rank"))
            .take(12)
        {
            eprintln!("    | {line}");
        }
        let missing: Vec<&str> = needles.iter().copied().filter(|n| !text.contains(n)).collect();
        let temp_prefix = format!(".out{i}.npy.uni20-tmp-");
        let debris: Vec<String> = std::fs::read_dir(&scratch)?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.starts_with(&temp_prefix))
            .collect();
        outcome = match outcome {
            Outcome::Exited(0) => {
                eprintln!("xtask: FAIL: the job exited 0 despite the injected fault");
                Outcome::Exited(1)
            }
            Outcome::TimedOut | Outcome::Interrupted(_) => outcome,
            _ if !missing.is_empty() => {
                eprintln!("xtask: FAIL: output lacks {missing:?}");
                Outcome::Exited(1)
            }
            _ if out.exists() => {
                eprintln!("xtask: FAIL: output file written despite the fault");
                Outcome::Exited(1)
            }
            // A rank that dies abruptly (`exit`, `kill`) makes the launcher end the
            // others, with SIGKILL if they do not stop at once: a process killed so
            // cannot remove its own temporary file. The output file itself must
            // still be absent (checked above); leftovers are reported, not failed.
            _ if !debris.is_empty() && (fault.starts_with("exit@") || fault.starts_with("kill@")) => {
                eprintln!(
                    "xtask: warning: temporary file(s) of ranks the launcher killed left behind: {debris:?} (no \
                     output file was written)"
                );
                for d in &debris {
                    let _ = std::fs::remove_file(scratch.join(d));
                }
                Outcome::Exited(0)
            }
            _ if !debris.is_empty() => {
                eprintln!("xtask: FAIL: temporary file(s) left behind: {debris:?}");
                Outcome::Exited(1)
            }
            _ => {
                eprintln!(
                    "xtask: stopped non-zero in {:.1} s with the expected diagnostic",
                    elapsed.as_secs_f64()
                );
                Outcome::Exited(0)
            }
        };
        let job = Job {
            kind: TargetKind::Bin,
            name: format!("fault {label} ({target})"),
            ranks: 3,
        };
        let stop = matches!(outcome, Outcome::Interrupted(_));
        results.push((job, outcome, elapsed));
        if stop {
            break;
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(results)
}

/// How a case of the start-up stage damages the store directory of one rank.
#[derive(Clone, Copy, Debug)]
enum StoreDamage {
    /// A plain file named `rank-R` where the rank's directory belongs.
    PlainFile,
    /// `rank-R/nonce` holds garbage.
    BadNonce,
    /// `rank-R/lock` is held (`flock`) by another process, as by a job
    /// still running on the directory.
    Held,
    /// Not the store: rank R alone starts with a malformed
    /// `UNI20_CHUNK_BYTES` (a per-rank configuration error, found before
    /// MPI is initialised; the rank exits at once and the launcher ends
    /// the job).
    BadVariable,
}

impl StoreDamage {
    /// The case's name in the log and the summary.
    fn label(self, rank: usize) -> String {
        match self {
            StoreDamage::PlainFile => format!("rank {rank}'s store directory a plain file"),
            StoreDamage::BadNonce => format!("rank {rank}'s nonce file damaged"),
            StoreDamage::Held => format!("rank {rank}'s store directory held by another process"),
            StoreDamage::BadVariable => format!("rank {rank}'s UNI20_CHUNK_BYTES malformed"),
        }
    }
}

/// Start-up failures of one rank under `mpirun -n 3` (`uni20 contract`
/// with `UNI20_STORE_DIR`): (rank, damage, what its error must name).
const STARTUP_CASES: &[(usize, StoreDamage, &str)] = &[
    (0, StoreDamage::PlainFile, "create store directory"),
    (2, StoreDamage::PlainFile, "create store directory"),
    (1, StoreDamage::BadNonce, "bad nonce file"),
    (0, StoreDamage::Held, "held by another process"),
    (2, StoreDamage::BadVariable, "UNI20_CHUNK_BYTES=\"banana\" is not valid"),
];

/// Wall-clock bound for one start-up case, launch included: the start-up
/// timeout is 60 s, so a job that waited for it fails.
const STARTUP_DEADLINE: Duration = Duration::from_secs(5);

/// Runs every [`STARTUP_CASES`] entry: the job must end non-zero (every
/// rank: `mpirun` returns only when every process has ended) within
/// [`STARTUP_DEADLINE`], its output must carry the failing rank's own
/// message (`rank R failed at start-up: opening the store in ...`; for the
/// configuration case, the rank's own error, which the launcher's output
/// tag and report attribute to it) and not the start-up timeout's, and no
/// output file may be written.
fn startup_stage(launcher: &Launcher, opts: &TestOptions) -> Result<Vec<(Job, Outcome, Duration)>> {
    let cli = (TargetKind::Bin, "uni20".to_string());
    let exe = cargo::build_mpi("uni20-cli", std::slice::from_ref(&cli), opts.release, &[])?[&cli].clone();
    let case_dir = cargo::workspace_root().join("tests/fixtures/contract/permuted_contracted");
    let scratch = std::env::temp_dir().join(format!("uni20-startup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let mut results = Vec::new();
    for (i, &(rank, damage, cause)) in STARTUP_CASES.iter().enumerate() {
        let store = scratch.join(format!("store{i}"));
        let rank_dir = store.join(format!("rank-{rank}"));
        std::fs::create_dir_all(&store)?;
        // Held until the job has ended.
        let mut _holder = None;
        match damage {
            StoreDamage::PlainFile => std::fs::write(&rank_dir, b"not a directory")?,
            StoreDamage::BadNonce => {
                std::fs::create_dir_all(&rank_dir)?;
                std::fs::write(rank_dir.join("nonce"), b"garbage")?;
            }
            StoreDamage::Held => {
                std::fs::create_dir_all(&rank_dir)?;
                let file = std::fs::File::create(rank_dir.join("lock"))?;
                // SAFETY: flock on a file descriptor this process owns.
                let rc = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX | libc::LOCK_NB) };
                if rc != 0 {
                    bail!(
                        "cannot lock {}: {}",
                        rank_dir.display(),
                        std::io::Error::last_os_error()
                    );
                }
                _holder = Some(file);
            }
            StoreDamage::BadVariable => {}
        }
        let out = scratch.join(format!("out{i}.npy"));
        let args: Vec<std::ffi::OsString> = vec![
            "contract".into(),
            "abcd,dbef->acef".into(),
            case_dir.join("a.npy").into(),
            case_dir.join("b.npy").into(),
            "-o".into(),
            out.clone().into(),
            "--block".into(),
            "1".into(),
        ];
        let label = damage.label(rank);
        eprintln!("\nxtask: ---- start-up failure: {label} @ 3 ranks ----");
        let log_path = scratch.join(format!("log{i}.txt"));
        let log = std::fs::File::create(&log_path)?;
        let mut cmd = if matches!(damage, StoreDamage::BadVariable) {
            // A shell sets the variable on that rank only, then runs the CLI.
            let script = format!(
                "if [ \"${{OMPI_COMM_WORLD_RANK:-$PMI_RANK}}\" = {rank} ]; then export UNI20_CHUNK_BYTES=banana; fi; \
                 exec \"$0\" \"$@\""
            );
            let mut sh_args: Vec<std::ffi::OsString> = vec!["-c".into(), script.into(), exe.clone().into()];
            sh_args.extend(args.iter().cloned());
            launcher.command(3, Path::new("/bin/sh"), &sh_args)
        } else {
            launcher.command(3, &exe, &args)
        };
        cmd.env("UNI20_STORE_DIR", &store)
            .env("UNI20_STARTUP_TIMEOUT", "60")
            .env_remove("UNI20_INJECT_FAULT")
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let (outcome, elapsed) = crate::proc::run_with_timeout(&mut cmd, STARTUP_DEADLINE)?;
        drop(_holder);
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        for line in text.lines().filter(|l| l.contains("uni20")).take(6) {
            eprintln!("    | {line}");
        }
        let needles = match damage {
            StoreDamage::BadVariable => vec![cause.to_string()],
            _ => vec![
                format!(
                    "rank {rank} failed at start-up: opening the store in {}",
                    store.display()
                ),
                cause.to_string(),
            ],
        };
        let missing: Vec<&String> = needles.iter().filter(|n| !text.contains(n.as_str())).collect();
        let outcome = match outcome {
            Outcome::Exited(0) => {
                eprintln!("xtask: FAIL: the job exited 0 despite the damaged store");
                Outcome::Exited(1)
            }
            Outcome::TimedOut => {
                eprintln!("xtask: FAIL: the job did not end within {STARTUP_DEADLINE:?}");
                outcome
            }
            Outcome::Interrupted(_) => outcome,
            _ if !missing.is_empty() => {
                eprintln!("xtask: FAIL: output lacks {missing:?}\n{text}");
                Outcome::Exited(1)
            }
            _ if text.contains("did not arrive") => {
                eprintln!("xtask: FAIL: the root waited for the start-up timeout\n{text}");
                Outcome::Exited(1)
            }
            _ if out.exists() => {
                eprintln!("xtask: FAIL: output file written despite the failed start-up");
                Outcome::Exited(1)
            }
            _ => {
                eprintln!(
                    "xtask: stopped non-zero in {:.1} s with rank {rank}'s message",
                    elapsed.as_secs_f64()
                );
                Outcome::Exited(0)
            }
        };
        let job = Job {
            kind: TargetKind::Bin,
            name: format!("start-up failure: {label}"),
            ranks: 3,
        };
        let stop = matches!(outcome, Outcome::Interrupted(_));
        results.push((job, outcome, elapsed));
        if stop {
            break;
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(results)
}

/// `examples/checkpoint.rs` under `mpirun -n 3`: a run stopped at a
/// checkpoint plus a run resumed from it print exactly the lines of an
/// uninterrupted run.
fn checkpoint_restart(launcher: &Launcher, opts: &TestOptions) -> Result<(Job, Outcome, Duration)> {
    let ex = (TargetKind::Example, "checkpoint".to_string());
    let exe = cargo::build_mpi(ROOT_PACKAGE, std::slice::from_ref(&ex), opts.release, &[])?[&ex].clone();
    let scratch = std::env::temp_dir().join(format!("uni20-checkpoint-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let start = std::time::Instant::now();
    let run = |store: &str, extra: &[&str]| -> Result<(Outcome, String)> {
        let log_path = scratch.join(format!("{store}-{}.txt", extra.join("_").replace([':', '-'], "")));
        let log = std::fs::File::create(&log_path)?;
        let mut args: Vec<std::ffi::OsString> = vec![
            "--store".into(),
            scratch.join(store).into(),
            "--steps".into(),
            "12".into(),
        ];
        args.extend(extra.iter().map(|a| a.into()));
        let mut cmd = launcher.command(3, &exe, &args);
        cmd.stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let (outcome, _) = crate::proc::run_with_timeout(&mut cmd, opts.timeout)?;
        Ok((outcome, std::fs::read_to_string(&log_path).unwrap_or_default()))
    };
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains("Tr H^2="))
            .filter_map(|l| l.split_once("L=").map(|(_, rest)| format!("L={rest}")))
            .collect()
    };
    eprintln!("\nxtask: ---- checkpoint restart (examples/checkpoint.rs) @ 3 ranks ----");
    let (o1, full) = run("full", &[])?;
    let (o2, first) = run("split", &["--stop-after", "6"])?;
    let id = first
        .lines()
        .find_map(|l| l.split_once("checkpoint: ").map(|(_, id)| id.trim().to_string()));
    let outcome = match (o1, o2, id) {
        (Outcome::Exited(0), Outcome::Exited(0), Some(id)) => {
            let (o3, second) = run("split", &["--resume", &id])?;
            let resumed: Vec<String> = lines(&first).into_iter().chain(lines(&second)).collect();
            if o3 == Outcome::Exited(0) && resumed == lines(&full) && resumed.len() == 12 {
                eprintln!("xtask: resumed from {id}: 12 values identical to the uninterrupted run");
                Outcome::Exited(0)
            } else {
                eprintln!("xtask: FAIL: resumed run differs\n{full}\n--\n{first}\n--\n{second}");
                Outcome::Exited(1)
            }
        }
        (a, b, id) => {
            eprintln!("xtask: FAIL: {a:?} / {b:?} / checkpoint id {id:?}\n{full}\n--\n{first}");
            Outcome::Exited(1)
        }
    };
    let _ = std::fs::remove_dir_all(&scratch);
    let job = Job {
        kind: TargetKind::Example,
        name: "checkpoint restart".into(),
        ranks: 3,
    };
    Ok((job, outcome, start.elapsed()))
}

/// The arguments of every run of the DMRG kill-and-resume jobs: L = 12,
/// chi 16, 6 sweeps with no early stop, a fixed seed.
const KILL_RESUME_ARGS: &[&str] = &[
    "--sites",
    "12",
    "--chi-max",
    "16",
    "--sweeps",
    "6",
    "--tol",
    "0",
    "--seed",
    "5",
    "--block",
    "8",
];

/// The symmetric runs of the kill-and-resume stage: (label, the arguments
/// of every run, as [`KILL_RESUME_ARGS`] for the dense one). L = 8 and
/// chi 6 (truncating: the bond reaches 16 untruncated) keep the job short
/// in a debug build; `--profile` makes each sweep print its operator
/// applications, which the resumed sweeps must repeat exactly. (The Hubbard
/// chain with `--conserve N,Sz` is left out: even at L = 4 one run takes
/// about a minute in a debug build on a loaded 2-core machine.)
const SYMMETRIC_KILL_RESUME: &[(&str, &[&str])] = &[(
    "--conserve Sz --sector 0",
    &[
        "--sites",
        "8",
        "--chi-max",
        "6",
        "--sweeps",
        "6",
        "--tol",
        "0",
        "--seed",
        "5",
        "--block",
        "8",
        "--conserve",
        "Sz",
        "--sector",
        "0",
        "--profile",
    ],
)];

/// `(sweep, energy)` of the per-sweep lines of an `examples/dmrg.rs` log,
/// whatever tag mpirun adds.
fn sweep_energies(text: &str) -> Vec<(u64, f64)> {
    text.lines()
        .filter_map(|l| {
            let rest = &l[l.find("sweep ")? + 6..];
            let n = rest.split_whitespace().next()?.parse().ok()?;
            let e = rest.split_once("E = ")?.1.split_whitespace().next()?.parse().ok()?;
            Some((n, e))
        })
        .collect()
}

/// Operator applications of each sweep, from the `--profile` lines of an
/// `examples/dmrg.rs` log (`profile: lanczos X s (N applications, ...`).
fn sweep_applications(text: &str) -> Vec<usize> {
    text.lines()
        .filter_map(|l| {
            let rest = &l[l.find("profile: lanczos ")?..];
            let before = rest.split_once(" applications")?.0;
            before.rsplit_once('(')?.1.parse().ok()
        })
        .collect()
}

/// The id of the checkpoint that a DMRG log announces after sweep `k`.
fn checkpoint_after(text: &str, k: u64) -> Option<String> {
    let tail = format!("(after sweep {k})");
    text.lines().find_map(|l| {
        let rest = &l[l.find("checkpoint: ")? + 12..];
        rest.ends_with(&tail)
            .then(|| rest.split_whitespace().next().map(str::to_string))
            .flatten()
    })
}

/// Whether a resumed run's log repeats sweeps 3-6 of the uninterrupted
/// run's: the same sweep numbers, energies equal to 1e-10 and, where the
/// uninterrupted run printed `--profile` lines, the same operator
/// applications per sweep. Returns the reason when it does not.
fn resumed_matches(full: &str, resumed: &str) -> std::result::Result<(), String> {
    let (full_e, resumed_e) = (sweep_energies(full), sweep_energies(resumed));
    let numbers = |e: &[(u64, f64)]| e.iter().map(|s| s.0).collect::<Vec<_>>();
    if numbers(&full_e) != [1, 2, 3, 4, 5, 6] {
        return Err(format!("the uninterrupted run printed sweeps {:?}", numbers(&full_e)));
    }
    if numbers(&resumed_e) != [3, 4, 5, 6] {
        return Err(format!(
            "the resumed run printed sweeps {:?}, not 3-6",
            numbers(&resumed_e)
        ));
    }
    for ((n, a), (_, b)) in full_e[2..].iter().zip(&resumed_e) {
        if (a - b).abs() >= 1e-10 {
            return Err(format!("sweep {n}: uninterrupted E = {a:.15}, resumed E = {b:.15}"));
        }
    }
    let (full_a, resumed_a) = (sweep_applications(full), sweep_applications(resumed));
    if !full_a.is_empty() && (full_a.len() != 6 || resumed_a != full_a[2..]) {
        return Err(format!(
            "operator applications per sweep: uninterrupted {full_a:?}, resumed {resumed_a:?} (must repeat sweeps 3-6)"
        ));
    }
    Ok(())
}

/// `examples/dmrg.rs` under `mpirun -n 3`: a short DMRG run (L = 12,
/// chi 16, 6 sweeps) uninterrupted, then the same run killed (SIGKILL to
/// every rank) right after the checkpoint of sweep 2 and resumed from it:
/// the resumed sweeps 3-6 must give the uninterrupted energies to 1e-10.
/// Second job: the same run with rank 2 killed inside the commit of the
/// checkpoint of sweep 3 (`UNI20_INJECT_FAULT=ckptkill@rank=2,op=3`: it
/// sends itself SIGKILL in its third flush, after part of its store is
/// durable, before the root commits the checkpoint record), resumed from
/// the checkpoint of sweep 2, with the same requirement. Then the first job
/// again for each symmetric run of [`SYMMETRIC_KILL_RESUME`] (block-sparse
/// site tensors in the stores), which must also repeat the uninterrupted
/// run's operator applications per sweep.
fn dmrg_kill_resume(launcher: &Launcher, opts: &TestOptions) -> Result<Vec<(Job, Outcome, Duration)>> {
    let ex = (TargetKind::Example, "dmrg".to_string());
    let exe = cargo::build_mpi(ROOT_PACKAGE, std::slice::from_ref(&ex), opts.release, &[])?[&ex].clone();
    let scratch = std::env::temp_dir().join(format!("uni20-dmrg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let command = |base: &[&str],
                   store: &str,
                   extra: &[&str],
                   log_name: &str|
     -> Result<(std::process::Command, std::path::PathBuf)> {
        let log_path = scratch.join(log_name);
        let log = std::fs::File::create(&log_path)?;
        let mut args: Vec<std::ffi::OsString> = base.iter().map(|a| a.into()).collect();
        args.push("--checkpoint".into());
        args.push(scratch.join(store).into());
        args.extend(extra.iter().map(|a| a.into()));
        let mut cmd = launcher.command(3, &exe, &args);
        cmd.stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        Ok((cmd, log_path))
    };
    // One kill-and-resume job: the uninterrupted run's log and the outcome.
    let kill_and_resume = |tag: &str, base: &[&str]| -> Result<(String, Outcome)> {
        let (mut cmd, full_log) = command(base, &format!("{tag}full"), &[], &format!("{tag}full.txt"))?;
        let (o1, _) = crate::proc::run_with_timeout(&mut cmd, opts.timeout)?;
        let full = std::fs::read_to_string(&full_log).unwrap_or_default();
        let (mut cmd, split_log) = command(base, &format!("{tag}split"), &[], &format!("{tag}split.txt"))?;
        let (o2, killed, _) = crate::proc::run_killed_at(&mut cmd, opts.timeout, &split_log, "(after sweep 2)")?;
        let first = std::fs::read_to_string(&split_log).unwrap_or_default();
        let outcome = match (o1, killed, checkpoint_after(&first, 2)) {
            (Outcome::Exited(0), true, Some(id)) => {
                let (mut cmd, resumed_log) = command(
                    base,
                    &format!("{tag}split"),
                    &["--resume", &id],
                    &format!("{tag}resumed.txt"),
                )?;
                let (o3, _) = crate::proc::run_with_timeout(&mut cmd, opts.timeout)?;
                let second = std::fs::read_to_string(&resumed_log).unwrap_or_default();
                match (o3, resumed_matches(&full, &second)) {
                    (Outcome::Exited(0), Ok(())) if second.contains(&format!("resumed from checkpoint {id}")) => {
                        let last = sweep_energies(&full)[5].1;
                        eprintln!(
                            "xtask: killed after sweep 2 ({o2:?}), resumed from {id}: sweeps 3-6 match (final E = \
                             {last:.12})"
                        );
                        Outcome::Exited(0)
                    }
                    (o3, why) => {
                        eprintln!(
                            "xtask: FAIL: resumed run differs ({o3:?}: {})\n{full}\n--\n{first}\n--\n{second}",
                            why.err()
                                .unwrap_or_else(|| format!("no line `resumed from checkpoint {id}`"))
                        );
                        Outcome::Exited(1)
                    }
                }
            }
            (a, killed, id) => {
                eprintln!("xtask: FAIL: {a:?} / killed {killed} / checkpoint id {id:?}\n{full}\n--\n{first}");
                Outcome::Exited(1)
            }
        };
        Ok((full, outcome))
    };

    let mut results = Vec::new();
    eprintln!("\nxtask: ---- dmrg kill and resume (examples/dmrg.rs) @ 3 ranks ----");
    let start = std::time::Instant::now();
    let (full, outcome) = kill_and_resume("", KILL_RESUME_ARGS)?;
    let job = Job {
        kind: TargetKind::Example,
        name: "dmrg kill and resume".into(),
        ranks: 3,
    };
    results.push((job, outcome, start.elapsed()));

    eprintln!("\nxtask: ---- dmrg kill inside the checkpoint commit and resume (ckptkill@rank=2,op=3) @ 3 ranks ----");
    let start = std::time::Instant::now();
    let fault = "ckptkill@rank=2,op=3";
    let (mut cmd, killed_log) = command(KILL_RESUME_ARGS, "ckpt", &[], "ckpt.txt")?;
    cmd.env("UNI20_INJECT_FAULT", fault);
    let (o4, _) = crate::proc::run_with_timeout(&mut cmd, opts.timeout)?;
    let killed = std::fs::read_to_string(&killed_log).unwrap_or_default();
    let died = killed.contains("rank 2 died inside checkpoint flush 3");
    let outcome = match (o4, died, checkpoint_after(&killed, 2), checkpoint_after(&killed, 3)) {
        (o, true, Some(id), None) if !o.success() && !matches!(o, Outcome::TimedOut | Outcome::Interrupted(_)) => {
            let (mut cmd, resumed_log) = command(KILL_RESUME_ARGS, "ckpt", &["--resume", &id], "ckpt-resumed.txt")?;
            let (o5, _) = crate::proc::run_with_timeout(&mut cmd, opts.timeout)?;
            let second = std::fs::read_to_string(&resumed_log).unwrap_or_default();
            match (o5, resumed_matches(&full, &second)) {
                (Outcome::Exited(0), Ok(())) => {
                    eprintln!(
                        "xtask: rank 2 killed inside the third checkpoint commit ({o4:?}), resumed from {id}: sweeps \
                         3-6 match (final E = {:.12})",
                        sweep_energies(&full)[5].1
                    );
                    Outcome::Exited(0)
                }
                (o5, why) => {
                    eprintln!(
                        "xtask: FAIL: resumed run differs ({o5:?}: {})\n{full}\n--\n{killed}\n--\n{second}",
                        why.err().unwrap_or_default()
                    );
                    Outcome::Exited(1)
                }
            }
        }
        (o, died, second, third) => {
            eprintln!(
                "xtask: FAIL: {o:?} / rank 2 died in the commit: {died} / checkpoint 2 {second:?} / checkpoint 3 \
                 {third:?} (must be none)\n{killed}"
            );
            Outcome::Exited(1)
        }
    };
    let job = Job {
        kind: TargetKind::Example,
        name: "dmrg kill inside the checkpoint commit and resume".into(),
        ranks: 3,
    };
    results.push((job, outcome, start.elapsed()));

    for (k, (label, args)) in SYMMETRIC_KILL_RESUME.iter().enumerate() {
        eprintln!("\nxtask: ---- dmrg {label} kill and resume (examples/dmrg.rs) @ 3 ranks ----");
        let start = std::time::Instant::now();
        let (_, outcome) = kill_and_resume(&format!("sym{k}-"), args)?;
        let job = Job {
            kind: TargetKind::Example,
            name: format!("dmrg {label} kill and resume"),
            ranks: 3,
        };
        results.push((job, outcome, start.elapsed()));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(results)
}

/// `uni20 contract` built *without* the `mpi` feature and started by
/// `mpirun -n 3` must refuse to start (non-zero exit, the one-line message
/// telling the user to rebuild with `--features mpi`) and write no output: three in-process jobs racing for one file is the silent
/// duplicate this refuses.
fn no_mpi_refusal(launcher: &Launcher, opts: &TestOptions) -> Result<(Job, Outcome, Duration)> {
    let target = (TargetKind::Bin, "uni20".to_string());
    let built = cargo::build("uni20-cli", std::slice::from_ref(&target), opts.release, &[])
        .context("building uni20-cli without mpi")?;
    let scratch = std::env::temp_dir().join(format!("uni20-no-mpi-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    // The binary's path is shared with the `mpi` build: keep this one.
    let exe = scratch.join("uni20-no-mpi");
    std::fs::copy(&built[&target], &exe).context("copying the non-MPI binary")?;
    let case = cargo::workspace_root().join("tests/fixtures/contract/matmul");
    let out = scratch.join("out.npy");
    let args: Vec<std::ffi::OsString> = vec![
        "contract".into(),
        "ij,jk->ik".into(),
        case.join("a.npy").into(),
        case.join("b.npy").into(),
        "-o".into(),
        out.clone().into(),
    ];
    eprintln!("\nxtask: ---- uni20 contract built without mpi @ 3 ranks: must refuse ----");
    let log_path = scratch.join("log.txt");
    let log = std::fs::File::create(&log_path)?;
    let mut cmd = launcher.command(3, &exe, &args);
    cmd.env_remove("UNI20_ALLOW_NO_MPI")
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    let (outcome, elapsed) = crate::proc::run_with_timeout(&mut cmd, FAULT_DEADLINE)?;
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let refusals = text.matches("rebuild with `--features mpi`").count();
    let left: Vec<String> = std::fs::read_dir(&scratch)?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.contains("out.npy"))
        .collect();
    let outcome = match outcome {
        Outcome::Exited(0) => {
            eprintln!("xtask: FAIL: the non-MPI build ran under mpirun and exited 0\n{text}");
            Outcome::Exited(1)
        }
        Outcome::TimedOut | Outcome::Interrupted(_) => outcome,
        // mpirun may kill the other processes once one has failed: one
        // message is enough.
        _ if refusals == 0 => {
            eprintln!("xtask: FAIL: no process printed the rebuild message\n{text}");
            Outcome::Exited(1)
        }
        _ if !left.is_empty() => {
            eprintln!("xtask: FAIL: output written despite the refusal: {left:?}");
            Outcome::Exited(1)
        }
        _ => {
            let line = text.lines().find(|l| l.contains("--features mpi")).unwrap_or("");
            eprintln!(
                "xtask: refused ({refusals} of 3 processes said so before mpirun stopped the job), no output: {line}"
            );
            Outcome::Exited(0)
        }
    };
    let _ = std::fs::remove_dir_all(&scratch);
    let job = Job {
        kind: TargetKind::Bin,
        name: "uni20 contract without mpi (refuses)".into(),
        ranks: 3,
    };
    Ok((job, outcome, elapsed))
}

/// `examples/abort_timeout.rs` under `mpirun -n 2`: library mode's only
/// `MPI_Abort`, when a peer cannot be reached after an abort. The job must
/// end non-zero within [`FAULT_DEADLINE`], saying why.
fn abort_timeout_stage(launcher: &Launcher, opts: &TestOptions) -> Result<(Job, Outcome, Duration)> {
    let ex = (TargetKind::Example, "abort_timeout".to_string());
    let exe = cargo::build_mpi(ROOT_PACKAGE, std::slice::from_ref(&ex), opts.release, &[])?[&ex].clone();
    let scratch = std::env::temp_dir().join(format!("uni20-abort-timeout-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let log_path = scratch.join("log.txt");
    let log = std::fs::File::create(&log_path)?;
    eprintln!("\nxtask: ---- library mode: a rank unreachable after an abort @ 2 ranks: must MPI_Abort ----");
    let mut cmd = launcher.command(2, &exe, &[]);
    cmd.stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    let (outcome, elapsed) = crate::proc::run_with_timeout(&mut cmd, FAULT_DEADLINE)?;
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let needles = [
        "waiting for rank(s) 1",
        "did not complete within 1s",
        "UNI20_ABORT_TIMEOUT",
    ];
    let missing: Vec<&str> = needles.iter().copied().filter(|n| !text.contains(n)).collect();
    let outcome = match outcome {
        Outcome::Exited(0) => {
            eprintln!("xtask: FAIL: the job exited 0\n{text}");
            Outcome::Exited(1)
        }
        Outcome::TimedOut | Outcome::Interrupted(_) => outcome,
        _ if !missing.is_empty() => {
            eprintln!("xtask: FAIL: output lacks {missing:?}\n{text}");
            Outcome::Exited(1)
        }
        _ => {
            eprintln!("xtask: ended with MPI_Abort after the abort timeout, as documented");
            Outcome::Exited(0)
        }
    };
    let _ = std::fs::remove_dir_all(&scratch);
    let job = Job {
        kind: TargetKind::Example,
        name: "abort_timeout (MPI_Abort expected)".into(),
        ranks: 2,
    };
    Ok((job, outcome, elapsed))
}

/// Largest |a - b| / max|b| over two npy files with identical headers
/// (dtypes `<f4 <f8 <c8 <c16`, complex compared per component), and the
/// tolerance for their precision (1e-6 single, 1e-12 double).
fn npy_max_rel_diff(a: &Path, b: &Path) -> Result<(f64, f64)> {
    let (x, y) = (std::fs::read(a)?, std::fs::read(b)?);
    let header = |v: &[u8]| -> Result<usize> {
        if v.len() < 10 || &v[..6] != b"\x93NUMPY" {
            bail!("not an npy file");
        }
        Ok(10 + u16::from_le_bytes([v[8], v[9]]) as usize)
    };
    let (hx, hy) = (header(&x)?, header(&y)?);
    if x[..hx] != y[..hy] {
        bail!("headers differ");
    }
    let text = String::from_utf8_lossy(&x[..hx]);
    let single = text.contains("<f4") || text.contains("<c8");
    let values = |v: &[u8]| -> Vec<f64> {
        if single {
            v.chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()) as f64)
                .collect()
        } else {
            v.chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect()
        }
    };
    let (vx, vy) = (values(&x[hx..]), values(&y[hy..]));
    if vx.len() != vy.len() {
        bail!("payload sizes differ");
    }
    let scale = vy.iter().fold(f64::MIN_POSITIVE, |m, v| m.max(v.abs()));
    let diff = vx.iter().zip(&vy).map(|(p, q)| (p - q).abs()).fold(0.0, f64::max) / scale;
    Ok((diff, if single { 1e-6 } else { 1e-12 }))
}

/// Prints the per-run table and the final `N passed, M failed` line.
fn print_summary(results: &[(Job, Outcome, Duration)]) {
    let width = results
        .iter()
        .map(|(j, _, _)| j.name.len() + j.kind.cargo_kind().len() + 1)
        .max()
        .unwrap_or(6)
        .max(6);
    println!();
    println!("MPI test summary");
    println!("  {:<width$}  {:>5}  {:>8}  result", "target", "ranks", "time");
    for (job, outcome, elapsed) in results {
        let target = format!("{}:{}", job.kind.cargo_kind(), job.name);
        println!(
            "  {:<width$}  {:>5}  {:>7.1}s  {}",
            target,
            job.ranks,
            elapsed.as_secs_f64(),
            outcome.describe()
        );
    }
    let passed = results.iter().filter(|(_, o, _)| o.success()).count();
    let failed = results.len() - passed;
    println!("{passed} passed, {failed} failed");
}

/// Rank counts a test declares with `// uni20-mpi-ranks: 1, 3` within its first
/// 40 lines, or [`DEFAULT_RANKS`].
fn declared_ranks(src: &Path) -> Result<Vec<u32>> {
    let text = std::fs::read_to_string(src).with_context(|| format!("reading {}", src.display()))?;
    parse_ranks(&text).with_context(|| format!("in {}", src.display()))
}

/// Parses the rank-count marker out of a source text.
fn parse_ranks(text: &str) -> Result<Vec<u32>> {
    for line in text.lines().take(40) {
        let Some(comment) = line.trim_start().strip_prefix("//") else {
            continue;
        };
        let Some(list) = comment.trim_start_matches(['/', '!']).trim().strip_prefix(RANKS_MARKER) else {
            continue;
        };
        let mut ranks = Vec::new();
        for item in list.split([',', ' ', '\t']).filter(|s| !s.is_empty()) {
            let n: u32 = item
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .with_context(|| format!("bad rank count `{item}` in `{}`", line.trim()))?;
            if !ranks.contains(&n) {
                ranks.push(n);
            }
        }
        if ranks.is_empty() {
            bail!("empty rank list in `{}`", line.trim());
        }
        return Ok(ranks);
    }
    Ok(DEFAULT_RANKS.to_vec())
}

/// The loud warning printed when no MPI launcher is installed.
fn warn_no_mpi(required: bool) {
    let bar = "!".repeat(72);
    let verdict = if required {
        "--require-mpi was given: FAILING."
    } else {
        "The MPI stage is SKIPPED; only single-process tests ran."
    };
    eprintln!(
        "\n{bar}\n\
         !! WARNING: `mpirun` was not found on PATH.\n\
         !! The MPI integration tests (tests/mpi_*.rs) were NOT run.\n\
         !! {verdict}\n\
         !!\n\
         !! To run them, install MPI and the build dependencies of the `mpi` crate:\n\
         !!     apt-get install libopenmpi-dev openmpi-bin libclang-dev pkgconf\n\
         !! (or set {}=/path/to/mpirun)\n\
         {bar}\n",
        crate::launcher::LAUNCHER_ENV
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_ranks() {
        assert_eq!(parse_ranks("fn main() {}\n").unwrap(), vec![1, 2, 3]);
    }

    #[test]
    fn declared() {
        let src = "//! doc\n// uni20-mpi-ranks: 3\nfn main() {}\n";
        assert_eq!(parse_ranks(src).unwrap(), vec![3]);
        let src = "// uni20-mpi-ranks: 2, 4 2\n";
        assert_eq!(parse_ranks(src).unwrap(), vec![2, 4]);
        let src = "//! uni20-mpi-ranks: 1,2\n";
        assert_eq!(parse_ranks(src).unwrap(), vec![1, 2]);
    }

    /// Sweeps of the symmetric kill-and-resume run (L = 8, chi 6, `--conserve
    /// Sz`, 3 ranks) as the example printed them: (sweep, energy, applications).
    const SWEEPS: [(u64, f64, usize); 6] = [
        (1, -3.373300304875, 134),
        (2, -3.373297667680, 112),
        (3, -3.373297651327, 112),
        (4, -3.373297651255, 112),
        (5, -3.373297651254, 112),
        (6, -3.373297651254, 112),
    ];

    /// A log of `examples/dmrg.rs --profile --checkpoint` under mpirun's
    /// `--tag-output` with the given sweeps.
    fn log(sweeps: &[(u64, f64, usize)], resumed_from: Option<u64>) -> String {
        let mut text =
            String::from("[1,0]<stdout>:uni20 dmrg: L=8 chi_max=6 cutoff=1e-10 block=8 seed=5; 3 ranks (mpi)\n");
        if let Some(k) = resumed_from {
            text += &format!("[1,0]<stdout>:resumed from checkpoint r0:1@ab (uni20.dmrg) after sweep {k}\n");
        }
        for &(n, e, apps) in sweeps {
            text += &format!(
                "[1,0]<stdout>:sweep {n:>3}  E = {e:.12}  dE = 1.0e-8  trunc = 2.690e-4  chi = 6  time = 64.39 s\n\
                 [1,0]<stdout>:  profile: lanczos 62.38 s ({apps} applications, largest residual 8.6e-5, 0 steps \
                 unconverged), svd 1.87 s, other 0.14 s; peak RSS of this process 45.2 MB\n\
                 [1,0]<stdout>:checkpoint: r0:{}@ab (after sweep {n})\n",
                n - 1
            );
        }
        text
    }

    #[test]
    fn resumed_run_is_compared_sweep_by_sweep() {
        let full = log(&SWEEPS, None);
        assert_eq!(sweep_energies(&full).len(), 6);
        assert_eq!(sweep_applications(&full), vec![134, 112, 112, 112, 112, 112]);
        assert_eq!(checkpoint_after(&full, 2).as_deref(), Some("r0:1@ab"));
        assert_eq!(checkpoint_after(&full, 7), None);
        assert_eq!(resumed_matches(&full, &log(&SWEEPS[2..], Some(2))), Ok(()));
        // The wrong checkpoint (after sweep 1): the resumed run repeats sweep 2.
        let wrong = resumed_matches(&full, &log(&SWEEPS[1..], Some(1))).unwrap_err();
        assert!(wrong.contains("[2, 3, 4, 5, 6], not 3-6"), "{wrong}");
        // One energy off by 1e-9.
        let mut perturbed = SWEEPS;
        perturbed[4].1 += 1e-9;
        let off = resumed_matches(&full, &log(&perturbed[2..], Some(2))).unwrap_err();
        assert!(off.starts_with("sweep 5:"), "{off}");
        // The state of the previous sweep resumed under the right label:
        // sweep 3 gives sweep 2's energy (1.6e-8 lower).
        let mut stale = SWEEPS;
        stale[2].1 = SWEEPS[1].1;
        assert!(resumed_matches(&full, &log(&stale[2..], Some(2)))
            .unwrap_err()
            .starts_with("sweep 3:"));
        // Same energies, other eigensolver work.
        let mut work = SWEEPS;
        work[3].2 += 1;
        let apps = resumed_matches(&full, &log(&work[2..], Some(2))).unwrap_err();
        assert!(apps.contains("applications"), "{apps}");
        // A resumed run that stopped early.
        assert!(resumed_matches(&full, &log(&SWEEPS[2..5], Some(2))).is_err());
        // Without --profile lines only the energies are compared.
        let plain = |t: &str| {
            t.lines()
                .filter(|l| !l.contains("profile:"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(
            resumed_matches(&plain(&full), &plain(&log(&work[2..], Some(2)))),
            Ok(())
        );
    }

    #[test]
    fn malformed() {
        assert!(parse_ranks("// uni20-mpi-ranks: x\n").is_err());
        assert!(parse_ranks("// uni20-mpi-ranks:\n").is_err());
        assert!(parse_ranks("// uni20-mpi-ranks: 0\n").is_err());
    }
}
