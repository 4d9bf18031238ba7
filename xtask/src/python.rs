//! The Python stage of `cargo xtask test`: the `uni20` Python package
//! (`crates/uni20-py`) installed with pip into a virtual environment under
//! `target/`, and its pytest suite run in-process and under `mpirun -n 3`.
//!
//! The package is built by maturin through `pip install` (no build
//! isolation: maturin, numpy and pytest are installed into the venv first)
//! in the dev profile (`--release`: the release profile), so it reuses the
//! dependencies stage 1 built; with the MPI launcher present it is the MPI
//! build (cargo feature `mpi`), which also runs the in-process session.
//! The example comparison of the suite gets the `dmrg` example built by
//! stage 1 (`UNI20_DMRG_EXAMPLE`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use crate::cargo::workspace_root;
use crate::launcher::{describe, find_in_path, Launcher};
use crate::proc::{self, Outcome};

/// Ranks of the MPI session of the suite.
pub const PYTHON_MPI_RANKS: u32 = 3;

/// Python packages the stage installs into its venv.
const PIP_PACKAGES: &[&str] = &["maturin>=1.9.4,<2", "numpy", "pytest"];

/// The outcome of one step of the stage: its name, result and wall time.
pub type StepResult = (String, Outcome, Duration);

/// Why the stage cannot run on this machine, if it cannot: no `python3`,
/// or a `python3` without the `venv` module (Debian: `python3-venv`).
fn missing_python() -> Option<String> {
    let Some(py) = find_in_path("python3") else {
        return Some("python3 is not on PATH".into());
    };
    let ok = Command::new(&py)
        .args(["-c", "import venv, ensurepip"])
        .output()
        .is_ok_and(|o| o.status.success());
    (!ok).then(|| {
        format!(
            "{} has no working venv/ensurepip module (Debian: apt-get install python3-venv)",
            py.display()
        )
    })
}

/// Runs `cmd` under `timeout`, echoing it first.
fn step(name: &str, cmd: &mut Command, timeout: Duration) -> Result<StepResult> {
    eprintln!("xtask: {}", describe(cmd));
    let (outcome, elapsed) = proc::run_with_timeout(cmd, timeout)?;
    eprintln!("xtask: {name} -> {}", outcome.describe());
    Ok((name.to_string(), outcome, elapsed))
}

/// The stage. `launcher`: run the MPI session too (and build with MPI).
/// `require`: a missing Python fails the stage instead of skipping it.
/// `example`: the `dmrg` example binary the suite compares against.
///
/// # Errors
/// A command that cannot be started at all.
pub fn stage(
    launcher: Option<&Launcher>,
    release: bool,
    require: bool,
    timeout: Duration,
    example: Option<&Path>,
) -> Result<Vec<StepResult>> {
    eprintln!("\nxtask: == stage 3: the Python package (crates/uni20-py) ==");
    if let Some(why) = missing_python() {
        let verdict = if require {
            "--require-mpi was given: FAILING."
        } else {
            "The Python stage is SKIPPED."
        };
        eprintln!("xtask: WARNING: {why}.\nxtask: the pytest suite of the Python package was NOT run. {verdict}");
        return Ok(if require {
            vec![("python: setup".into(), Outcome::Exited(1), Duration::ZERO)]
        } else {
            Vec::new()
        });
    }
    let root = workspace_root();
    let venv = root.join("target").join("py-venv");
    let python = venv.join("bin").join("python");
    let mut results = Vec::new();
    let setup_timeout = Duration::from_secs(900).max(timeout);
    if !python.exists() {
        let r = step(
            "python: venv",
            Command::new("python3").arg("-m").arg("venv").arg(&venv),
            setup_timeout,
        )?;
        let ok = r.1.success();
        results.push(r);
        if !ok {
            return Ok(results);
        }
    }
    let have_packages = Command::new(&python)
        .args(["-c", "import maturin, numpy, pytest"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_packages {
        let r = step(
            "python: pip install maturin numpy pytest",
            Command::new(&python)
                .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
                .args(PIP_PACKAGES),
            setup_timeout,
        )?;
        let ok = r.1.success();
        results.push(r);
        if !ok {
            return Ok(results);
        }
    }
    // pip install ./crates/uni20-py, built by maturin in this venv.
    let mut args = vec![
        "--profile".to_string(),
        if release { "release" } else { "dev" }.to_string(),
    ];
    if launcher.is_some() {
        args.extend(["--features".into(), "mpi".into()]);
    }
    let mut install = Command::new(&python);
    install
        .current_dir(&root)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
        .args([
            "--no-build-isolation",
            "--force-reinstall",
            "--no-deps",
            "./crates/uni20-py",
        ])
        .env("MATURIN_PEP517_ARGS", args.join(" "))
        .env("VIRTUAL_ENV", &venv)
        .env("PATH", venv_path(&venv));
    let r = step("python: pip install ./crates/uni20-py", &mut install, setup_timeout)?;
    let ok = r.1.success();
    results.push(r);
    if !ok {
        return Ok(results);
    }
    let tests: PathBuf = root.join("crates").join("uni20-py").join("tests");
    let pytest_args: Vec<OsString> = ["-m", "pytest", "-q", "-p", "no:cacheprovider"]
        .iter()
        .map(OsString::from)
        .chain([tests.into_os_string()])
        .collect();
    let mut session = Command::new(&python);
    session.current_dir(&root).args(&pytest_args);
    if let Some(exe) = example {
        session.env("UNI20_DMRG_EXAMPLE", exe);
    }
    results.push(step("python: pytest (in-process)", &mut session, timeout)?);
    if let Some(l) = launcher {
        let mut cmd = l.command(PYTHON_MPI_RANKS, &python, &pytest_args);
        cmd.current_dir(&root).stdin(std::process::Stdio::null());
        results.push(step(
            &format!("python: mpirun -n {PYTHON_MPI_RANKS} pytest"),
            &mut cmd,
            timeout,
        )?);
    }
    Ok(results)
}

/// `PATH` with the venv's `bin` first, as an activated venv has it: maturin's
/// build backend runs the `maturin` executable by name (found only that way
/// when pip runs without build isolation and the venv is not activated; seen
/// with a pyenv interpreter).
fn venv_path(venv: &std::path::Path) -> OsString {
    let mut dirs = vec![venv.join("bin")];
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).unwrap_or_else(|_| venv.join("bin").into_os_string())
}

/// The `dmrg` example binary stage 1 built (`cargo test` builds the
/// examples), if it is there.
pub fn built_example(release: bool) -> Option<PathBuf> {
    let p = workspace_root()
        .join("target")
        .join(if release { "release" } else { "debug" })
        .join("examples")
        .join("dmrg");
    p.exists().then_some(p)
}
