//! The MPI stage's restart-on-another-rank-count check: `examples/dmrg.rs`
//! (L = 8, chi 8; dense, and symmetric with `--conserve Sz`) writes its checkpoints under
//! `mpirun -n 3`, stops after sweep 2, and is resumed from the checkpoint of
//! sweep 2 on `-n 2`, on `-n 5` and in-process on 1 rank (each from its own
//! copy of the store directory). The resumed sweeps 3-4 must give the
//! uninterrupted `-n 3` run's energies to 1e-10, and a resume on fewer ranks
//! must print the one-line redistribution notice.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::cargo::{self, TargetKind, ROOT_PACKAGE};
use crate::launcher::Launcher;
use crate::proc::Outcome;
use crate::test::{Job, TestOptions};

/// `(sweep, energy)` of the per-sweep lines, whatever tag mpirun adds.
fn energies(text: &str) -> Vec<(u64, f64)> {
    text.lines()
        .filter_map(|l| {
            let rest = &l[l.find("sweep ")? + 6..];
            let n = rest.split_whitespace().next()?.parse().ok()?;
            let e = rest.split_once("E = ")?.1.split_whitespace().next()?.parse().ok()?;
            Some((n, e))
        })
        .collect()
}

/// Copies the store directory `from` to `to` (without the lock files).
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let dst = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &dst)?;
        } else if e.file_name() != "lock" {
            std::fs::copy(e.path(), dst)?;
        }
    }
    Ok(())
}

/// Runs `cmd` with its output in `log`; returns the outcome and the text.
fn run_logged(mut cmd: Command, log: &Path, timeout: Duration) -> Result<(Outcome, String)> {
    let f = std::fs::File::create(log)?;
    cmd.stdin(Stdio::null()).stdout(f.try_clone()?).stderr(f);
    let (o, _) = crate::proc::run_with_timeout(&mut cmd, timeout)?;
    Ok((o, std::fs::read_to_string(log).unwrap_or_default()))
}

/// The check described in the module docs, one job per model variant.
pub(crate) fn dmrg_rank_count_resume(launcher: &Launcher, opts: &TestOptions) -> Result<Vec<(Job, Outcome, Duration)>> {
    let ex = (TargetKind::Example, "dmrg".to_string());
    let exe = cargo::build_mpi(ROOT_PACKAGE, std::slice::from_ref(&ex), opts.release, &[])?[&ex].clone();
    let scratch = std::env::temp_dir().join(format!("uni20-dmrg-ranks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let mut results = Vec::new();
    for (label, extra) in [
        ("dense", &[][..]),
        ("conserve Sz", &["--conserve", "Sz", "--sector", "0"][..]),
    ] {
        eprintln!("\nxtask: ---- dmrg checkpoint of 3 ranks resumed on 2, 5 and 1 (in-process) ranks ({label}) ----");
        let start = Instant::now();
        let dir = scratch.join(label.replace(' ', "-"));
        std::fs::create_dir_all(&dir)?;
        let args = |sweeps: &str, store: &Path, more: &[&str]| -> Vec<OsString> {
            let mut a: Vec<OsString> = [
                "--sites",
                "8",
                "--chi-max",
                "8",
                "--tol",
                "0",
                "--seed",
                "5",
                "--block",
                "8",
                "--sweeps",
            ]
            .iter()
            .map(OsString::from)
            .collect();
            a.push(sweeps.into());
            a.push("--checkpoint".into());
            a.push(store.into());
            a.extend(extra.iter().map(OsString::from));
            a.extend(more.iter().map(OsString::from));
            a
        };
        let full_store = dir.join("full");
        let (o1, full) = run_logged(
            launcher.command(3, &exe, &args("4", &full_store, &[])),
            &dir.join("full.txt"),
            opts.timeout,
        )?;
        let first_store = dir.join("first");
        let (o2, first) = run_logged(
            launcher.command(3, &exe, &args("2", &first_store, &[])),
            &dir.join("first.txt"),
            opts.timeout,
        )?;
        let id = first.lines().find_map(|l| {
            let rest = &l[l.find("checkpoint: ")? + 12..];
            rest.ends_with("(after sweep 2)")
                .then(|| rest.split_whitespace().next().map(str::to_string))
                .flatten()
        });
        let full_e = energies(&full);
        let mut ok = o1 == Outcome::Exited(0) && o2 == Outcome::Exited(0) && full_e.len() == 4;
        let Some(id) = id.filter(|_| ok) else {
            eprintln!("xtask: FAIL: the -n 3 runs: {o1:?} / {o2:?}\n{full}\n--\n{first}");
            results.push((job(label), Outcome::Exited(1), start.elapsed()));
            continue;
        };
        for ranks in [2u32, 5, 1] {
            let store: PathBuf = dir.join(format!("resume-{ranks}"));
            copy_dir(&first_store, &store)?;
            let a = args("4", &store, &["--resume", &id]);
            let cmd = if ranks == 1 {
                let mut c = Command::new(&exe);
                c.args(&a).env("UNI20_RANKS", "1");
                c
            } else {
                launcher.command(ranks, &exe, &a)
            };
            let (o, text) = run_logged(cmd, &dir.join(format!("resume-{ranks}.txt")), opts.timeout)?;
            let got = energies(&text);
            let same = got.len() == 2
                && full_e[2..]
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.0 == b.0 && (a.1 - b.1).abs() < 1e-10);
            // Fewer ranks than the writer re-place blocks; more keep them.
            let notice = if ranks < 3 {
                text.contains("resume: restored on") && text.contains("re-placed from")
            } else {
                text.contains("resume: restored on 5 ranks: nothing re-placed")
            };
            if o == Outcome::Exited(0) && same && notice {
                let line = text.lines().find(|l| l.contains("resume: restored")).unwrap_or("");
                eprintln!("xtask: resumed on {ranks} rank(s): sweeps 3-4 match; {}", line.trim());
            } else {
                eprintln!(
                    "xtask: FAIL: resumed on {ranks} rank(s) ({o:?}, energies match: {same}, notice: {notice})\n{full}\n--\n{text}"
                );
                ok = false;
            }
        }
        let outcome = if ok { Outcome::Exited(0) } else { Outcome::Exited(1) };
        results.push((job(label), outcome, start.elapsed()));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(results)
}

/// The summary line of one variant.
fn job(label: &str) -> Job {
    Job {
        kind: TargetKind::Example,
        name: format!("dmrg resume on another rank count ({label})"),
        ranks: 3,
    }
}
