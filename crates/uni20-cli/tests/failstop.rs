//! Fail-stop on the in-process universe: for each failure path, injected
//! with `UNI20_INJECT_FAULT`, `uni20 contract` on 3 ranks exits non-zero
//! within 10 seconds, prints one diagnostic naming the rank, op_id, wire
//! name and the injected cause, and leaves neither the output file nor its
//! temporary `.c.npy.uni20-tmp-*` file.
//!
//! The contract job runs op 1 (`npy_read` A), op 2 (`npy_read` B), op 3
//! (`contract`), op 4 (`npy_write`).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn run(fault: &str) -> (Option<i32>, String, Duration, bool) {
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/contract/permuted_contracted");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c.npy");
    let start = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_uni20"))
        .args(["contract", "abcd,dbef->acef", "--block", "1", "-o"])
        .arg(&out)
        .arg(case.join("a.npy"))
        .arg(case.join("b.npy"))
        .env("UNI20_RANKS", "3")
        .env("UNI20_STARTUP_TIMEOUT", "2")
        .env("UNI20_INJECT_FAULT", fault)
        .output()
        .unwrap();
    let elapsed = start.elapsed();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // Anything left in the directory: the output or a temporary file.
    let left = std::fs::read_dir(dir.path()).unwrap().next().is_some();
    (o.status.code(), text, elapsed, left)
}

/// The wire name of operation `op` of the contract job (see the module comment).
fn wire_of(op: u64) -> &'static str {
    match op {
        1 | 2 => "uni20.npy_read.v1",
        3 => "uni20.contract.v1",
        4 => "uni20.npy_write.v1",
        _ => panic!("the contract job has no op {op}"),
    }
}

#[test]
fn every_failure_path_stops_the_job_quickly_with_a_diagnostic() {
    // Faults injected into one operation: (kind, rank, op, whether the diagnostic names
    // the rank, what it says of the cause). It also names the op_id and the wire name.
    let op_faults: &[(&str, usize, u64, bool, &[&str])] = &[
        ("error", 1, 3, true, &["injected error"]),
        ("panic", 2, 3, true, &["injected panic"]),
        ("exit", 1, 3, true, &["injected exit"]),
        ("kill", 2, 3, true, &["injected kill"]),
        ("error", 2, 1, true, &["injected error"]),
        ("panic", 1, 4, true, &["injected panic"]),
        ("io", 1, 3, true, &["injected fault", "No space left"]),
        ("badreply", 1, 3, true, &["undecodable reply"]),
        ("unknowncmd", 0, 3, false, &["unknown command id"]),
        ("schema", 0, 3, false, &["schema mismatch"]),
        ("garbage", 0, 3, false, &["malformed descriptor"]),
        ("trailing", 0, 3, false, &["trailing bytes after descriptor"]),
    ];
    let mut cases: Vec<(String, Vec<String>)> = op_faults
        .iter()
        .map(|&(kind, rank, op, names_rank, cause)| {
            let mut needles = Vec::new();
            if names_rank {
                needles.push(format!("rank {rank}"));
            }
            needles.push(format!("op_id {op}"));
            needles.push(wire_of(op).to_string());
            needles.extend(cause.iter().map(|c| c.to_string()));
            (format!("{kind}@rank={rank},op={op}"), needles)
        })
        .collect();
    // Start-up faults.
    cases.push((
        "registry@rank=2".into(),
        vec!["registries differ".into(), "missing on rank 2".into()],
    ));
    cases.push(("noarrive@rank=2".into(), vec!["rank(s) 2 did not arrive".into()]));
    for (fault, needles) in &cases {
        let (code, text, elapsed, wrote) = run(fault);
        assert_ne!(code, Some(0), "{fault}: exit status 0\n{text}");
        assert!(code.is_some(), "{fault}: killed by a signal\n{text}");
        assert!(elapsed < Duration::from_secs(10), "{fault}: took {elapsed:?}");
        for n in needles {
            assert!(text.contains(n), "{fault}: output lacks {n:?}:\n{text}");
        }
        assert!(!wrote, "{fault}: output or temporary file left behind");
    }
}

#[test]
fn a_malformed_fault_spec_is_a_startup_error() {
    let (code, text, _, _) = run("pnaic@rank=1");
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("UNI20_INJECT_FAULT") && text.contains("unknown kind"),
        "{text}"
    );
}
