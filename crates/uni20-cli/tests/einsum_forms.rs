//! `uni20 contract` on the einsum forms numpy users expect (traces,
//! diagonals, one operand, implicit output, ellipsis with broadcasting),
//! against the numpy fixtures in `tests/fixtures/einsum`, and the size
//! limits that refuse absurd plans with a one-line error instead of an
//! allocation abort.

mod cli_common;

use cli_common::{npy, uni20};
use std::path::{Path, PathBuf};

use uni20::prelude::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/einsum")
}
/// Real scalars as the CLI takes them; `None` for a complex one (the CLI
/// takes real `--alpha`/`--beta` only).
fn real_scalar(dir: &Path, file: &str) -> Option<Option<String>> {
    match std::fs::read_to_string(dir.join(file)) {
        Err(_) => Some(None),
        Ok(text) => {
            let t = text.trim();
            t.parse::<f64>().ok().map(|_| Some(t.to_string()))
        }
    }
}

#[test]
fn every_real_scalar_einsum_form_matches_numpy() {
    let dir = tempfile::tempdir().unwrap();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    let mut ran = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let (Some(alpha), Some(beta)) = (real_scalar(case, "alpha.txt"), real_scalar(case, "beta.txt")) else {
            continue;
        };
        let spec = std::fs::read_to_string(case.join("spec.txt")).unwrap();
        let out = dir.path().join(format!("{name}.npy"));
        let mut args: Vec<String> = vec!["contract".into(), spec.trim().into()];
        args.push(case.join("a.npy").to_string_lossy().into_owned());
        if case.join("b.npy").exists() {
            args.push(case.join("b.npy").to_string_lossy().into_owned());
        }
        args.extend([
            "-o".into(),
            out.to_string_lossy().into_owned(),
            "--block".into(),
            "2".into(),
        ]);
        if let Some(a) = alpha {
            args.extend(["--alpha".into(), a]);
        }
        if let Some(b) = beta {
            args.extend(["--beta".into(), b, "--c-in".into()]);
            args.push(case.join("c.npy").to_string_lossy().into_owned());
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = uni20(&refs);
        assert_eq!(code, 0, "{name}: {err}");
        ran.push((name, out, case.join("out.npy")));
    }
    assert!(ran.len() >= 25, "only {} einsum fixtures ran", ran.len());
    // Compare with numpy's results in one small universe.
    uni20::universe()
        .ranks(1)
        .run(|ctl| {
            for (name, ours, theirs) in &ran {
                let got = read_npy(ctl, ours, 64).unwrap().to_local(ctl).unwrap();
                let want = read_npy(ctl, theirs, 64).unwrap().to_local(ctl).unwrap();
                assert_eq!(got.shape(), want.shape(), "{name}");
                assert_eq!(got.dtype(), want.dtype(), "{name}");
                let scale = want.to_c64_vec().iter().map(|z| z.norm()).fold(1.0, f64::max);
                let tol = match want.dtype() {
                    DType::F32 | DType::C32 => 1e-5,
                    _ => 1e-12,
                };
                let diff = got.max_abs_diff(&want).unwrap();
                assert!(diff <= tol * scale, "{name}: max |diff| {diff:e}");
            }
        })
        .unwrap();
}

/// A header-only `.npy` file whose data part is a hole of `bytes` bytes
/// (sparse: nothing is written to disk).
fn header_only(path: &Path, shape: &str, bytes: u64) {
    let v = npy("<f8", shape, &[]);
    let n = v.len() as u64;
    std::fs::write(path, v).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(n + bytes)
        .unwrap();
}

#[test]
fn absurd_plans_are_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Zero elements, but an output of 2^64 elements: refused by size.
    let empty = d.join("empty.npy");
    header_only(&empty, "(65536, 65536, 0)", 0);
    let e = empty.to_str().unwrap();
    let out = d.join("o.npy");
    let o = out.to_str().unwrap();
    let (code, _, err) = uni20(&["contract", "abz,cdz->abcd", e, e, "-o", o, "--block", "1"]);
    assert_eq!(code, 1, "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("exceeds the limit"), "{err}");
    assert!(!out.exists());
    // A plain matrix with block 1: 2^32 blocks, refused naming the count.
    let big = d.join("big.npy");
    header_only(&big, "(65536, 65536)", 65536 * 65536 * 8);
    let b = big.to_str().unwrap();
    let (code, _, err) = uni20(&["contract", "ij,jk->ik", b, b, "-o", o, "--block", "1"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("4294967296 blocks exceed the limit"), "{err}");
    assert!(err.contains("larger block size"), "{err}");
    // A zero-element tensor contracted to a zero-element result works and is
    // one empty block, not one block per empty tile.
    let (code, _, err) = uni20(&["contract", "abz,abz->z", e, e, "-o", o, "--block", "1"]);
    assert_eq!(code, 0, "{err}");
    // Operand count must match the spec.
    let (code, _, err) = uni20(&["contract", "ii->", e, e, "-o", o]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("1 input(s), but 2 operand file(s)"), "{err}");
}
