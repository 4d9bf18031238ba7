//! The DMRG reference check of `cargo xtask bench`: `examples/dmrg.rs` on
//! the open spin-1/2 Heisenberg chain at L = 100, chi 100 must end within
//! 1e-6 of the reference energy -44.127739 (TeNPy gives -44.12773987 at
//! chi 100), in-process (one rank, 2 kernel threads) and, when `mpirun` is
//! installed, under `mpirun -n 3`. Prints each run's per-sweep lines and a
//! verdict; the run takes a few minutes, which is why it is not in
//! `cargo xtask test`.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Result;

use crate::cargo::{self, TargetKind, ROOT_PACKAGE};
use crate::launcher::Launcher;
use crate::proc::{run_with_timeout, Outcome};

/// The open-chain reference energy at L = 100 (six decimals).
pub const REFERENCE: f64 = -44.127739;

/// The tolerance of the check.
pub const TOLERANCE: f64 = 1e-6;

/// The example's arguments: L = 100, chi 100, at most 10 sweeps (it stops earlier once the
/// energy changes by less than 1e-10 over a sweep).
const ARGS: &[&str] = &["--sites", "100", "--chi-max", "100", "--sweeps", "10"];

/// Runs the check; returns whether every run passed.
pub fn dmrg_reference(launcher: Option<&Launcher>) -> Result<bool> {
    let ex = (TargetKind::Example, "dmrg".to_string());
    let args: Vec<OsString> = ARGS.iter().map(OsString::from).collect();
    let scratch = std::env::temp_dir().join(format!("uni20-bench-dmrg-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let timeout = Duration::from_secs(1800);
    let mut ok = true;

    // In-process first: the MPI build writes the same binary path.
    let exe = cargo::build(ROOT_PACKAGE, std::slice::from_ref(&ex), true, &[])?[&ex].clone();
    eprintln!("xtask: == DMRG L=100 chi 100, in-process, 1 rank x 2 threads ==");
    let mut cmd = Command::new(&exe);
    cmd.args(&args)
        .env("UNI20_RANKS", "1")
        .env("UNI20_THREADS_PER_RANK", "2")
        .env("RAYON_NUM_THREADS", "2");
    ok &= check("in-process", &mut cmd, &scratch.join("inproc.txt"), timeout)?;

    match launcher {
        Some(launcher) => {
            let exe = cargo::build_mpi(ROOT_PACKAGE, std::slice::from_ref(&ex), true, &[])?[&ex].clone();
            eprintln!("xtask: == DMRG L=100 chi 100, mpirun -n 3 ==");
            let mut cmd = launcher.command(3, &exe, &args);
            ok &= check("mpirun -n 3", &mut cmd, &scratch.join("mpi.txt"), timeout)?;
        }
        None => eprintln!("xtask: mpirun not found: skipping the DMRG check under MPI"),
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(ok)
}

/// Runs `cmd` with its output in `log`, echoes the per-sweep lines and
/// checks the final energy.
fn check(what: &str, cmd: &mut Command, log: &Path, timeout: Duration) -> Result<bool> {
    let file = std::fs::File::create(log)?;
    cmd.stdin(Stdio::null()).stdout(file.try_clone()?).stderr(file);
    let (outcome, elapsed) = run_with_timeout(cmd, timeout)?;
    let text = std::fs::read_to_string(log).unwrap_or_default();
    for line in text.lines().filter(|l| l.contains("sweep ") || l.contains("final:")) {
        eprintln!("  {line}");
    }
    let energy: Option<f64> = text.lines().find_map(|l| {
        let rest = &l[l.find("final: E = ")? + 11..];
        rest.split_whitespace().next()?.parse().ok()
    });
    let pass = match (outcome, energy) {
        (Outcome::Exited(0), Some(e)) => {
            let d = (e - REFERENCE).abs();
            let pass = d <= TOLERANCE;
            eprintln!(
                "xtask: DMRG {what}: E = {e:.12}, |E - ({REFERENCE})| = {d:.2e} ({}) in {:.0} s",
                if pass { "ok" } else { "FAILED: above 1e-6" },
                elapsed.as_secs_f64()
            );
            pass
        }
        (o, e) => {
            eprintln!(
                "xtask: DMRG {what}: FAILED ({}, final energy {e:?})\n{text}",
                o.describe()
            );
            false
        }
    };
    Ok(pass)
}
