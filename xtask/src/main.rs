//! Developer tasks for uni20-rs, run as `cargo xtask <task>`.
//!
//! * `cargo xtask mpirun -n N --example NAME [-- ARGS]` (or `--bin`, `--test`,
//!   `--bench`, `--exe`) builds a target with the `mpi` feature and launches it
//!   on N ranks under a hard timeout.
//! * `cargo xtask test [--require-mpi]` runs the workspace tests, then every
//!   MPI integration test (`tests/mpi_*.rs`) at 1, 2 and 3 ranks.
//! * `cargo xtask bench` runs the criterion benches, the MPI storage-fetch measurement, the
//!   DMRG reference check (L = 100, chi 100; alone with `--dmrg-only`) and, where python3
//!   has numpy, the interleaved numpy.einsum comparison.
//! * `cargo xtask guide` builds the user guide (`docs/guide`) with mdBook, warnings as
//!   errors (also a stage of `cargo xtask test`).

#![warn(clippy::missing_docs_in_private_items)]

mod bench_dmrg;
mod cargo;
mod guide;
mod launcher;
mod proc;
mod python;
mod resume;
mod test;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use crate::cargo::{TargetKind, CLI_PACKAGE, ROOT_PACKAGE};
use crate::launcher::Launcher;

/// Developer tasks for uni20-rs.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    /// The task to run.
    #[command(subcommand)]
    task: Task,
}

/// The available tasks.
#[derive(Debug, Subcommand)]
enum Task {
    /// Build a target with `--features mpi` and launch it on N ranks.
    ///
    /// Every output line is prefixed with its rank. The run is killed
    /// (whole process group, SIGTERM then SIGKILL) after --timeout seconds,
    /// in which case the exit status is 124; otherwise it is mpirun's.
    Mpirun(MpirunArgs),
    /// Run `cargo test --workspace`, then the MPI integration tests at
    /// 1, 2 and 3 ranks (or as declared by `// uni20-mpi-ranks: ...`).
    Test(TestArgs),
    /// Run `cargo bench --workspace` and say where the reports are.
    Bench(BenchArgs),
    /// Build the user guide (`mdbook build docs/guide`), failing on any warning.
    ///
    /// Without mdbook on PATH it skips with a warning, except under CI=true.
    Guide,
}

/// Arguments of `cargo xtask mpirun`.
#[derive(Debug, Args)]
struct MpirunArgs {
    /// Number of ranks.
    #[arg(short = 'n', long = "np", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    ranks: u32,
    /// Build in release mode.
    #[arg(long)]
    release: bool,
    /// Hard timeout in seconds for the MPI run (not the build).
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    timeout: u64,
    /// Extra cargo features (comma- or space-separated); `mpi` is always on.
    #[arg(long, short = 'F', value_name = "FEATURES")]
    features: Vec<String>,
    /// What to launch.
    #[command(flatten)]
    target: TargetSel,
    /// Arguments passed to every rank.
    #[arg(last = true, value_name = "ARGS")]
    args: Vec<OsString>,
}

/// Exactly one target to build and launch.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
struct TargetSel {
    /// An example of the `uni20` package.
    #[arg(long, value_name = "NAME")]
    example: Option<String>,
    /// A binary; `uni20` is built from the `uni20-cli` package.
    #[arg(long, value_name = "NAME")]
    bin: Option<String>,
    /// An integration test of the `uni20` package (e.g. `mpi_smoke`).
    #[arg(long, value_name = "NAME")]
    test: Option<String>,
    /// A bench of the `uni20` package with its own `main` (e.g. `mpi_roundtrip`).
    #[arg(long, value_name = "NAME")]
    bench: Option<String>,
    /// A prebuilt executable to launch as is (nothing is built).
    #[arg(long, value_name = "PATH")]
    exe: Option<PathBuf>,
}

/// Arguments of `cargo xtask test`.
#[derive(Debug, Args)]
struct TestArgs {
    /// Fail if `mpirun` is not installed instead of skipping the MPI stage.
    #[arg(long)]
    require_mpi: bool,
    /// Build and run in release mode.
    #[arg(long)]
    release: bool,
    /// Hard timeout in seconds for each MPI run.
    #[arg(long, value_name = "SECS", default_value_t = 180)]
    timeout: u64,
    /// Skip `cargo test --workspace` and run only the MPI stage.
    #[arg(long)]
    mpi_only: bool,
    /// Run only stage 3, the Python package (venv, pip install, pytest in-process and
    /// under mpirun -n 3).
    #[arg(long, conflicts_with = "mpi_only")]
    python_only: bool,
    /// Run only the MPI fault stage (injected failures under `mpirun -n 3`,
    /// each of which must stop the job within 10 s with its diagnostic).
    #[arg(long, conflicts_with_all = ["mpi_only", "python_only"])]
    faults_only: bool,
}

/// Arguments of `cargo xtask bench`.
#[derive(Debug, Args)]
struct BenchArgs {
    /// Run only the DMRG reference check (L = 100, chi 100, in-process and under
    /// `mpirun -n 3`; a few minutes).
    #[arg(long)]
    dmrg_only: bool,
    /// Arguments passed through to `cargo bench` (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    args: Vec<OsString>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Mpirun(args) => mpirun(args),
        Task::Test(args) => test::run(&test::TestOptions {
            require_mpi: args.require_mpi,
            release: args.release,
            timeout: Duration::from_secs(args.timeout),
            mpi_only: args.mpi_only,
            python_only: args.python_only,
            faults_only: args.faults_only,
        }),
        Task::Bench(args) => bench(args),
        Task::Guide => guide::build().map(|o| i32::from(o == guide::GuideOutcome::Failed)),
    };
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(err) => {
            eprintln!("xtask: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// `cargo xtask mpirun`: build, then launch under a hard timeout.
fn mpirun(args: MpirunArgs) -> Result<i32> {
    let launcher = Launcher::detect()?.context(
        "`mpirun` not found on PATH; install MPI: \
         apt-get install libopenmpi-dev openmpi-bin libclang-dev pkgconf",
    )?;
    let (label, exe) = match args.target.exe.clone() {
        Some(exe) => (exe.display().to_string(), exe),
        None => build_target(&args)?,
    };
    let (outcome, elapsed) = launcher.run(args.ranks, &exe, &args.args, Duration::from_secs(args.timeout), true)?;
    match outcome {
        proc::Outcome::Exited(0) => {}
        proc::Outcome::TimedOut => eprintln!(
            "xtask: error: `{label}` on {} ranks timed out after {} s and was killed (exit 124)",
            args.ranks, args.timeout
        ),
        other => eprintln!(
            "xtask: `{label}` on {} ranks: {} after {:.1}s",
            args.ranks,
            other.describe(),
            elapsed.as_secs_f64()
        ),
    }
    Ok(outcome.exit_code())
}

/// Builds the target selected on the command line; returns its name and path.
fn build_target(args: &MpirunArgs) -> Result<(String, PathBuf)> {
    let (kind, name) = match args.target.clone() {
        TargetSel { example: Some(n), .. } => (TargetKind::Example, n),
        TargetSel { bin: Some(n), .. } => (TargetKind::Bin, n),
        TargetSel { test: Some(n), .. } => (TargetKind::Test, n),
        TargetSel { bench: Some(n), .. } => (TargetKind::Bench, n),
        _ => unreachable!("clap enforces exactly one target"),
    };
    let package = if kind == TargetKind::Bin && name == "uni20" {
        CLI_PACKAGE
    } else {
        ROOT_PACKAGE
    };
    let target = (kind, name);
    let mut exes = cargo::build_mpi(package, std::slice::from_ref(&target), args.release, &args.features)?;
    let exe = exes.remove(&target).expect("build_mpi checks every target");
    Ok((target.1, exe))
}

/// `cargo xtask bench`: run the benches and point at the criterion reports, then the MPI
/// storage-fetch measurement, the DMRG reference check (L = 100, chi 100) and the numpy
/// comparison.
fn bench(args: BenchArgs) -> Result<i32> {
    if args.dmrg_only {
        let launcher = launcher::Launcher::detect()?;
        return Ok(if bench_dmrg::dmrg_reference(launcher.as_ref())? {
            0
        } else {
            1
        });
    }
    let mut cmd = cargo::cargo();
    // Bench targets only: the libraries' unit-test harness rejects criterion options.
    cmd.args(["bench", "--workspace", "--bench", "*"]);
    if !args.args.is_empty() {
        cmd.arg("--").args(&args.args);
    }
    let status = cargo::status(&mut cmd)?;
    let report = cargo::metadata()?.target_directory.join("criterion");
    if report.join("report/index.html").exists() {
        eprintln!(
            "xtask: criterion reports: {}",
            report.join("report/index.html").display()
        );
    } else if report.exists() {
        eprintln!("xtask: criterion output: {}", report.display());
    }
    if !status.success() {
        return Ok(status.code().unwrap_or(1));
    }
    // The MPI measurement: storage-rank fetch vs a raw send, 3 ranks.
    let launcher = launcher::Launcher::detect()?;
    match &launcher {
        Some(launcher) => {
            let ex = (cargo::TargetKind::Example, "storage_fetch".to_string());
            let exes = cargo::build_mpi(cargo::ROOT_PACKAGE, std::slice::from_ref(&ex), true, &[])?;
            eprintln!("xtask: == storage-rank fetch vs raw MPI send (mpirun -n 3) ==");
            let (outcome, _) = launcher.run(3, &exes[&ex], &[], std::time::Duration::from_secs(600), false)?;
            if !outcome.success() {
                eprintln!("xtask: storage_fetch failed: {}", outcome.describe());
                return Ok(1);
            }
        }
        None => eprintln!("xtask: mpirun not found: skipping the MPI storage-fetch measurement"),
    }
    if !bench_dmrg::dmrg_reference(launcher.as_ref())? {
        return Ok(1);
    }
    numpy_comparison()
}

/// `benches/numpy_einsum.py`: numpy.einsum against uni20's contract, interleaved call by
/// call through the `einsum_timing` example. Skipped (with a note) when `python3` with numpy
/// is not installed.
fn numpy_comparison() -> Result<i32> {
    let has_numpy = std::process::Command::new("python3")
        .args(["-c", "import numpy"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_numpy {
        eprintln!("xtask: python3 with numpy not found: skipping benches/numpy_einsum.py");
        return Ok(0);
    }
    let mut build = cargo::cargo();
    build.args([
        "build",
        "--release",
        "--example",
        "einsum_timing",
        "-p",
        cargo::ROOT_PACKAGE,
    ]);
    if !cargo::status(&mut build)?.success() {
        return Ok(1);
    }
    let meta = cargo::metadata()?;
    let server = meta.target_directory.join("release/examples/einsum_timing");
    eprintln!("xtask: == numpy.einsum vs uni20 contract, interleaved (benches/numpy_einsum.py) ==");
    let status = std::process::Command::new("python3")
        .arg(cargo::workspace_root().join("benches/numpy_einsum.py"))
        .arg("--server")
        .arg(format!("uni20={}", server.display()))
        // Some machines pin OpenBLAS's kernel through these; let it detect the CPU instead.
        .env_remove("OPENBLAS_CORETYPE")
        .env_remove("OPENBLAS_L2_SIZE")
        .status()
        .context("running python3 benches/numpy_einsum.py")?;
    Ok(if status.success() {
        0
    } else {
        status.code().unwrap_or(1)
    })
}
