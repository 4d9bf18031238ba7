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

#[test]
fn every_failure_path_stops_the_job_quickly_with_a_diagnostic() {
    let cases: &[(&str, &[&str])] = &[
        (
            "error@rank=1,op=3",
            &["rank 1", "op_id 3", "uni20.contract.v1", "injected error"],
        ),
        (
            "panic@rank=2,op=3",
            &["rank 2", "op_id 3", "uni20.contract.v1", "injected panic"],
        ),
        (
            "exit@rank=1,op=3",
            &["rank 1", "op_id 3", "uni20.contract.v1", "injected exit"],
        ),
        (
            "kill@rank=2,op=3",
            &["rank 2", "op_id 3", "uni20.contract.v1", "injected kill"],
        ),
        (
            "error@rank=2,op=1",
            &["rank 2", "op_id 1", "uni20.npy_read.v1", "injected error"],
        ),
        (
            "panic@rank=1,op=4",
            &["rank 1", "op_id 4", "uni20.npy_write.v1", "injected panic"],
        ),
        (
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
            "badreply@rank=1,op=3",
            &["rank 1", "op_id 3", "uni20.contract.v1", "undecodable reply"],
        ),
        (
            "unknowncmd@rank=0,op=3",
            &["op_id 3", "uni20.contract.v1", "unknown command id"],
        ),
        (
            "schema@rank=0,op=3",
            &["op_id 3", "uni20.contract.v1", "schema mismatch"],
        ),
        (
            "garbage@rank=0,op=3",
            &["op_id 3", "uni20.contract.v1", "malformed descriptor"],
        ),
        (
            "trailing@rank=0,op=3",
            &["op_id 3", "uni20.contract.v1", "trailing bytes after descriptor"],
        ),
        ("registry@rank=2", &["registries differ", "missing on rank 2"]),
        ("noarrive@rank=2", &["rank(s) 2 did not arrive"]),
    ];
    for (fault, needles) in cases {
        let (code, text, elapsed, wrote) = run(fault);
        assert_ne!(code, Some(0), "{fault}: exit status 0\n{text}");
        assert!(code.is_some(), "{fault}: killed by a signal\n{text}");
        assert!(elapsed < Duration::from_secs(10), "{fault}: took {elapsed:?}");
        for n in *needles {
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
