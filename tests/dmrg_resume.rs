//! `examples/dmrg.rs` killed with SIGKILL during its third sweep (right
//! after it printed the checkpoint of sweep 2) and resumed from that
//! checkpoint reaches the same energies, sweep for sweep, as an
//! uninterrupted run with the same seed (to 1e-10); so does a run whose
//! rank 2 dies inside the commit of the third checkpoint (injected
//! `ckptkill`), resumed from the second. A resume from a directory that
//! does not exist is refused without creating it; one whose block files
//! are damaged names the file and the failed check; one with another
//! `--chi-max` or `--cutoff` says so in one line.
//!
//! The example binary is the one `cargo test` builds next to this test
//! (`target/<profile>/examples/dmrg`); if it is missing (a filtered
//! `cargo test --test dmrg_resume`), the test builds it with cargo first.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

fn example_binary() -> PathBuf {
    common::example_binary("dmrg")
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

/// The uninterrupted run of [`ARGS`], shared by the tests below: its store
/// directory (under the target's tmp directory) and its stdout.
fn uninterrupted() -> &'static (PathBuf, String) {
    static RUN: OnceLock<(PathBuf, String)> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("dmrg_resume-full-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let out = command(&example_binary(), &dir, &[]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "uninterrupted run failed:\n{text}");
        assert_eq!(sweeps(&text).len(), 6, "{text}");
        (dir, text)
    })
}

/// The checkpoint id printed after sweep `k` in `text`.
fn checkpoint_after(text: &str, k: u64) -> Option<String> {
    let tail = format!("(after sweep {k})");
    text.lines().find_map(|l| {
        let rest = l.strip_prefix("checkpoint: ")?;
        rest.ends_with(&tail)
            .then(|| rest.split_whitespace().next().map(str::to_string))?
    })
}

/// Copies the store directory `from` (rank directories of object files, and the
/// example's `model.txt`) to `to`.
fn copy_store(from: &Path, to: &Path) {
    for rank in std::fs::read_dir(from).unwrap() {
        let rank = rank.unwrap();
        let dest = to.join(rank.file_name());
        if rank.file_type().unwrap().is_file() {
            std::fs::create_dir_all(to).unwrap();
            std::fs::copy(rank.path(), &dest).unwrap();
            continue;
        }
        std::fs::create_dir_all(&dest).unwrap();
        for f in std::fs::read_dir(rank.path()).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), dest.join(f.file_name())).unwrap();
        }
    }
}

#[test]
fn a_kill_inside_the_checkpoint_commit_leaves_the_previous_checkpoint_resumable() {
    let bin = example_binary();
    let (_, full_text) = uninterrupted();
    let full = sweeps(full_text);
    let dirs = tempfile::tempdir().unwrap();
    let store = dirs.path().join("split");
    // Rank 2 dies in its third uni20.flush.v1: the commit of the checkpoint
    // of sweep 3, after part of its store is durable and before the root
    // commits the checkpoint record.
    let killed = command(&bin, &store, &[])
        .env("UNI20_INJECT_FAULT", "ckptkill@rank=2,op=3")
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&killed.stdout).into_owned();
    let err = String::from_utf8_lossy(&killed.stderr).into_owned();
    assert!(!killed.status.success(), "the run survived the injected kill:\n{text}");
    assert!(
        err.contains("rank 2 died inside checkpoint flush 3") && err.contains("ckptkill@rank=2,op=3"),
        "{err}"
    );
    assert_eq!(
        sweeps(&text).iter().map(|s| s.0).collect::<Vec<_>>(),
        vec![1, 2, 3],
        "{text}"
    );
    assert!(
        checkpoint_after(&text, 3).is_none(),
        "the third checkpoint was announced:\n{text}"
    );
    let id = checkpoint_after(&text, 2).unwrap_or_else(|| panic!("no checkpoint after sweep 2 in:\n{text}"));
    // The checkpoint record of sweep 3 was never published: the root's
    // store still names the second checkpoint as its root.
    let root_store = uni20::persist::Store::open(&store, 0, Default::default()).unwrap();
    assert_eq!(root_store.root("checkpoint").map(|r| r.to_string()), Some(id.clone()));
    drop(root_store);

    let resumed = command(&bin, &store, &["--resume", &id]).output().unwrap();
    let text = String::from_utf8_lossy(&resumed.stdout);
    assert!(resumed.status.success(), "resumed run failed:\n{text}");
    // What sweep 3 and its interrupted commit left in the stores goes.
    let removed: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("gc: removed ")?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no gc line:\n{text}"));
    assert!(removed > 0, "{text}");
    let resumed = sweeps(&text);
    assert_eq!(
        resumed.iter().map(|s| s.0).collect::<Vec<_>>(),
        vec![3, 4, 5, 6],
        "{text}"
    );
    for ((n, a), (_, b)) in full[2..].iter().zip(&resumed) {
        assert!((a - b).abs() < 1e-10, "sweep {n}: uninterrupted {a}, resumed {b}");
    }
}

#[test]
fn a_truncated_block_file_is_named_with_the_failed_check() {
    let bin = example_binary();
    let (full_dir, full_text) = uninterrupted();
    let id = checkpoint_after(full_text, 6).unwrap();
    let dirs = tempfile::tempdir().unwrap();
    let store = dirs.path().join("damaged");
    copy_store(full_dir, &store);
    // Every object file of rank 2 loses its tail: the checkpoint's first
    // block on rank 2 (in manifest order) is the one reported.
    let rank2 = store.join("rank-2");
    let mut files = 0;
    for f in std::fs::read_dir(&rank2).unwrap() {
        let path = f.unwrap().path();
        if path.extension().is_some_and(|e| e == "obj") {
            let len = std::fs::metadata(&path).unwrap().len();
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(len - 16)
                .unwrap();
            files += 1;
        }
    }
    assert!(files > 0, "rank 2 holds no block of the checkpoint");
    let out = command(&bin, &store, &["--resume", &id])
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = err
        .lines()
        .find(|l| l.starts_with("dmrg: error:"))
        .unwrap_or_else(|| panic!("no error line:\n{err}"));
    assert!(
        line.contains("is damaged")
            && line.contains(&format!("{}/", rank2.display()))
            && line.contains(".obj failed its size check")
            && line.contains("(truncated)"),
        "{line}"
    );
    assert!(!line.contains("not found") && !line.contains("superseded"), "{line}");
}

#[test]
fn a_resume_with_other_truncation_options_says_so_in_one_line() {
    let bin = example_binary();
    let (full_dir, full_text) = uninterrupted();
    let id = checkpoint_after(full_text, 6).unwrap();
    let dirs = tempfile::tempdir().unwrap();
    let store = dirs.path().join("copy");
    copy_store(full_dir, &store);
    // The checkpoint is at --sweeps 6: the resumes run no sweep. `chi_max`
    // replaces the value of ARGS (clap refuses a repeated option).
    let resume = |chi_max: &str, extra: &[&str]| {
        let mut args: Vec<&str> = ARGS.to_vec();
        let at = args.iter().position(|a| *a == "--chi-max").unwrap() + 1;
        args[at] = chi_max;
        let out = Command::new(&bin)
            .args(&args)
            .arg("--checkpoint")
            .arg(&store)
            .args(["--resume", &id])
            .args(extra)
            .env("UNI20_RANKS", "3")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}");
        assert!(sweeps(&text).is_empty(), "{text}");
        text.lines()
            .filter(|l| l.contains("options changed"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    // ARGS give --chi-max 8 and the default --cutoff 1e-10, as the checkpoint.
    assert_eq!(resume("8", &[]), Vec::<String>::new());
    assert_eq!(
        resume("12", &["--cutoff", "1e-8"]),
        vec![
            "resume: options changed from the checkpoint's: --chi-max 8 -> 12, --cutoff 1e-10 -> 1e-8 (the resumed \
             sweeps use the new values)"
        ]
    );
    assert_eq!(
        resume("8", &["--cutoff", "0"]),
        vec!["resume: options changed from the checkpoint's: --cutoff 1e-10 -> 0e0 (the resumed sweeps use the new values)"]
    );
}
