//! `examples/dmrg.rs` killed with SIGKILL during its third sweep (right
//! after it printed the checkpoint of sweep 2) and resumed from that
//! checkpoint reaches the same energies, sweep for sweep, as an
//! uninterrupted run with the same seed (to 1e-10); a resume from a
//! directory that does not exist is refused without creating it.
//!
//! The example binary is the one `cargo test` builds next to this test
//! (`target/<profile>/examples/dmrg`); if it is missing (a filtered
//! `cargo test --test dmrg_resume`), the test builds it with cargo first.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/dmrg_resume-<hash>
    let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let bin = profile_dir.join("examples").join("dmrg");
    if !bin.exists() {
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "--example", "dmrg"]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let st = cmd.current_dir(env!("CARGO_MANIFEST_DIR")).status().unwrap();
        assert!(st.success(), "building examples/dmrg failed");
    }
    assert!(bin.exists(), "{} missing", bin.display());
    bin
}

const ARGS: &[&str] = &[
    "--sites",
    "12",
    "--chi-max",
    "8",
    "--sweeps",
    "6",
    "--tol",
    "0",
    "--seed",
    "5",
    "--block",
    "8",
    "--profile",
];

fn command(bin: &Path, store: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(ARGS)
        .arg("--checkpoint")
        .arg(store)
        .args(extra)
        .env("UNI20_RANKS", "3")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .stdout(Stdio::piped());
    cmd
}

/// `(sweep, energy)` of every per-sweep line of `text`.
fn sweeps(text: &str) -> Vec<(u64, f64)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("sweep ")?;
            let mut it = rest.split_whitespace();
            let n = it.next()?.parse().ok()?;
            let e = rest.split_once("E = ")?.1.split_whitespace().next()?.parse().ok()?;
            Some((n, e))
        })
        .collect()
}

/// Operator applications of each sweep, from the `--profile` lines.
fn applications(text: &str) -> Vec<usize> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix("profile: ")?;
            let before = rest.split_once(" applications")?.0;
            before.rsplit_once('(')?.1.parse().ok()
        })
        .collect()
}

#[test]
fn killed_run_resumes_to_the_same_energy() {
    let bin = example_binary();
    let dirs = tempfile::tempdir().unwrap();
    let (full_dir, split_dir) = (dirs.path().join("full"), dirs.path().join("split"));

    let full = command(&bin, &full_dir, &[]).output().unwrap();
    assert!(full.status.success(), "uninterrupted run failed");
    let full_text = String::from_utf8_lossy(&full.stdout).into_owned();
    let full = sweeps(&full_text);
    let full_applications = applications(&full_text);
    assert_eq!(full_applications.len(), 6, "{full_text}");
    assert_eq!(full.iter().map(|s| s.0).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5, 6]);

    // Read the output as it comes; SIGKILL right after the checkpoint of
    // sweep 2 is announced (the run is then inside sweep 3).
    let mut child = command(&bin, &split_dir, &[]).spawn().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    let mut id = None;
    for line in out.lines() {
        let line = line.unwrap();
        first.push_str(&line);
        first.push('\n');
        if let Some(rest) = line.strip_prefix("checkpoint: ") {
            if rest.ends_with("(after sweep 2)") {
                child.kill().unwrap(); // SIGKILL
                id = rest.split_whitespace().next().map(str::to_string);
                break;
            }
        }
    }
    let status = child.wait().unwrap();
    assert!(!status.success(), "the run was not killed: {status:?}\n{first}");
    let id = id.unwrap_or_else(|| panic!("no checkpoint after sweep 2 in:\n{first}"));
    assert_eq!(sweeps(&first).len(), 2, "{first}");

    let resumed = command(&bin, &split_dir, &["--resume", &id]).output().unwrap();
    let text = String::from_utf8_lossy(&resumed.stdout);
    assert!(resumed.status.success(), "resumed run failed:\n{text}");
    assert!(text.contains(&format!("resumed from checkpoint {id}")), "{text}");
    let resumed = sweeps(&text);
    assert_eq!(
        resumed.iter().map(|s| s.0).collect::<Vec<_>>(),
        vec![3, 4, 5, 6],
        "{text}"
    );
    for ((n, a), (_, b)) in full[2..].iter().zip(&resumed) {
        assert!((a - b).abs() < 1e-10, "sweep {n}: uninterrupted {a}, resumed {b}");
    }
    // The same eigensolver work too: chi 8 truncates, so every step's
    // adaptive tolerance (set by the previous SVD's discarded weight) is far
    // above --lanczos-tol, and the resumed steps must stop where the
    // uninterrupted run's did.
    assert_eq!(applications(&text), full_applications[2..], "{text}");
    // Sweeps 1-2 of the killed run equal the uninterrupted run's too.
    for ((n, a), (_, b)) in full.iter().zip(&sweeps(&first)) {
        assert!((a - b).abs() < 1e-10, "sweep {n}: uninterrupted {a}, killed run {b}");
    }
}

#[test]
fn resume_from_a_missing_directory_is_refused_without_creating_it() {
    let bin = example_binary();
    let dirs = tempfile::tempdir().unwrap();
    // Runs a resume with `store` as --checkpoint; it must fail: its stderr.
    let refused = |store: &Path| {
        let out = command(&bin, store, &["--resume", "r0:5@0123456789abcdef"])
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let missing = dirs.path().join("never-written");
    let err = refused(&missing);
    assert!(
        err.contains("cannot resume r0:5@0123456789abcdef") && err.contains("does not exist"),
        "{err}"
    );
    assert!(!missing.exists(), "the store directory was created");
    // A file where the directory should be: named as such, left as it is.
    let file = dirs.path().join("a-file");
    std::fs::write(&file, b"not a store").unwrap();
    let err = refused(&file);
    assert!(err.contains("is not a directory"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), b"not a store");
}
