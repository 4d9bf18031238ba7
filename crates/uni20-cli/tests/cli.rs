//! `uni20 contract` end to end: a correct run matches numpy's fixture, and
//! every kind of bad input exits non-zero with a one-line reason and writes
//! no output file.

mod cli_common;

use cli_common::{npy, uni20};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/contract")
}

#[test]
fn contract_matches_numpy_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let case = fixtures().join("three_index");
    let out = dir.path().join("c.npy");
    let (code, _, err) = uni20(&[
        "contract",
        "abc,bcd->ad",
        case.join("a.npy").to_str().unwrap(),
        case.join("b.npy").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--block",
        "2",
    ]);
    assert_eq!(code, 0, "{err}");
    let ours = std::fs::read(&out).unwrap();
    let want = std::fs::read(case.join("out.npy")).unwrap();
    // Compare the f64 payloads (headers may differ in padding).
    let parse = |b: &[u8]| -> Vec<f64> {
        let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
        b[10 + hlen..]
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let (x, y) = (parse(&ours), parse(&want));
    assert_eq!(x.len(), y.len());
    let scale = y.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (p, q) in x.iter().zip(&y) {
        assert!((p - q).abs() <= 1e-12 * scale, "{p} vs {q}");
    }
}

#[test]
fn bad_input_fails_with_one_line_and_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = fixtures().join("matmul");
    let a = m.join("a.npy");
    let b = m.join("b.npy");
    // Unsupported dtype: int32.
    let ints = d.join("ints.npy");
    std::fs::write(&ints, npy("<i4", "(2, 2)", &[0u8; 16])).unwrap();
    // Big-endian int64 (big-endian floats are supported).
    let big = d.join("big.npy");
    std::fs::write(&big, npy(">i8", "(2, 2)", &[0u8; 32])).unwrap();
    // Truncated: header promises 4 doubles, file holds 3.
    let short = d.join("short.npy");
    std::fs::write(&short, npy("<f8", "(2, 2)", &[0u8; 24])).unwrap();
    // Not an npy file at all.
    let garbage = d.join("garbage.npy");
    std::fs::write(&garbage, b"hello, this is not numpy").unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["ij,jk->->".into(), s(&a), s(&b)], "spec"),
        (vec!["ij,jk->iq".into(), s(&a), s(&b)], "spec"),
        (vec!["i j,jk->ik,".into(), s(&a), s(&b)], "spec"),
        (vec!["ijk,jk->ik".into(), s(&a), s(&b)], "spec"),
        (vec!["ij,ik->jk".into(), s(&a), s(&b)], "extent"),
        (vec!["ij,jk->ik".into(), s(&ints), s(&b)], "<i4"),
        (vec!["ij,jk->ik".into(), s(&big), s(&b)], ">i8"),
        (vec!["ij,jk->ik".into(), s(&short), s(&b)], "truncated"),
        (vec!["ij,jk->ik".into(), s(&garbage), s(&b)], "header"),
        (
            vec!["ij,jk->ik".into(), s(&d.join("missing.npy")), s(&b)],
            "missing.npy",
        ),
    ];
    for (i, (args, needle)) in cases.into_iter().enumerate() {
        let out = d.join(format!("out{i}.npy"));
        let mut full: Vec<&str> = vec!["contract"];
        full.extend(args.iter().map(String::as_str));
        full.extend(["-o", out.to_str().unwrap()]);
        let (code, _, err) = uni20(&full);
        assert_ne!(code, 0, "{args:?} succeeded");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{args:?}: expected one line, got {err}");
        assert!(lines[0].contains(needle), "{args:?}: `{}` lacks {needle:?}", lines[0]);
        assert!(!out.exists(), "{args:?}: output written despite the error");
    }
    // No temporary files were left behind either.
    let leftovers: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("uni20-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn info_lists_commands_and_backends() {
    let (code, out, err) = uni20(&["info"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("transport: in-process"), "{out}");
    assert!(out.contains("ranks: 3"), "{out}");
    for c in ["uni20.contract.v1", "uni20.npy_read.v1", "uni20.npy_write.v1"] {
        assert!(out.contains(c), "{c} missing from\n{out}");
    }
    assert!(out.contains("faer") && out.contains("reference"), "{out}");
}
