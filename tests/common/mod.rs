//! Shared helpers of the root package's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use uni20::prelude::*;

/// One numpy-produced fixture case (`scripts/gen_fixtures.py`).
pub struct Case {
    pub name: String,
    pub dir: PathBuf,
    pub spec: String,
    pub alpha: C64,
    pub beta: Option<C64>,
}

/// Parses numpy/python scalar text such as `1.5`, `-0.75`, `2.5-0.5j`.
pub fn parse_scalar(s: &str) -> C64 {
    let s = s.trim().trim_start_matches('(').trim_end_matches(')');
    if let Some(body) = s.strip_suffix('j') {
        // split at the last sign that is not the leading one or an exponent sign
        let bytes = body.as_bytes();
        let mut split = None;
        for i in (1..bytes.len()).rev() {
            if (bytes[i] == b'+' || bytes[i] == b'-') && !matches!(bytes[i - 1], b'e' | b'E') {
                split = Some(i);
                break;
            }
        }
        match split {
            Some(i) => C64::new(body[..i].parse().unwrap(), body[i..].parse().unwrap()),
            None => C64::new(0.0, body.parse().unwrap()),
        }
    } else {
        C64::new(s.parse().unwrap(), 0.0)
    }
}

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/contract")
}

/// The numpy einsum forms (traces, diagonals, one operand, implicit output,
/// ellipsis with broadcasting): `tests/fixtures/einsum`.
pub fn einsum_fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/einsum")
}

/// Every two-operand contraction fixture case, sorted by name.
pub fn cases() -> Vec<Case> {
    cases_in(&fixtures_dir())
}

/// Every einsum-form fixture case (one or two operands), sorted by name.
pub fn einsum_cases() -> Vec<Case> {
    cases_in(&einsum_fixtures_dir())
}

fn cases_in(root: &Path) -> Vec<Case> {
    let mut v: Vec<Case> = std::fs::read_dir(root)
        .expect("fixtures directory")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|dir| {
            let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
            Case {
                name: dir.file_name().unwrap().to_string_lossy().into_owned(),
                spec: read("spec.txt").unwrap().trim().to_string(),
                alpha: read("alpha.txt")
                    .map(|s| parse_scalar(&s))
                    .unwrap_or(C64::new(1.0, 0.0)),
                beta: read("beta.txt").map(|s| parse_scalar(&s)),
                dir,
            }
        })
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// Relative tolerance for comparing a result of this dtype.
pub fn tolerance(t: &LocalTensor) -> f64 {
    match t.dtype() {
        uni20::DType::F32 | uni20::DType::C32 => 1e-5,
        _ => 1e-12,
    }
}

/// Asserts `got` equals `want` in shape, dtype and values (relative to the largest |want|).
pub fn assert_close(got: &LocalTensor, want: &LocalTensor, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let scale = want.to_c64_vec().iter().map(|z| z.norm()).fold(1.0, f64::max);
    let diff = got.max_abs_diff(want).unwrap();
    assert!(
        diff <= tolerance(want) * scale,
        "{what}: max |diff| = {diff:e} (scale {scale})"
    );
}

/// Runs one fixture case through distributed `read_npy`, `einsum` (one or
/// two operands: `b.npy` is optional) and `to_local`, checks the result
/// against numpy's and that no payload went through the root; returns the
/// result tensor and numpy's values.
pub fn run_case(ctl: &Controller<'_>, case: &Case, block: usize) -> (DistTensor, LocalTensor) {
    let read = |f: &str| read_npy(ctl, case.dir.join(f), block).unwrap();
    let a = read("a.npy");
    let b = case.dir.join("b.npy").exists().then(|| read("b.npy"));
    let operands: Vec<&DistTensor> = std::iter::once(&a).chain(b.as_ref()).collect();
    let c = case.dir.join("c.npy").exists().then(|| read("c.npy"));
    let want = read("out.npy").to_local(ctl).unwrap();
    let opts = ContractOptions {
        alpha: case.alpha,
        beta: case.beta.unwrap_or_default(),
        c: c.as_ref(),
        ..Default::default()
    };
    let out = uni20::dist::einsum(ctl, &case.spec, &operands, &opts)
        .unwrap_or_else(|e| panic!("{} ({}): {e}", case.name, case.spec));
    out.wait(ctl).unwrap();
    let plan = out.plan_summary().expect("plan of an executed contraction");
    if ctl.size() > 1 {
        assert_eq!(
            plan.bytes_through_root, 0,
            "{}: payload routed through the root",
            case.name
        );
        assert!(
            !plan.participants.contains(&0),
            "{}: root took part in the contraction",
            case.name
        );
    }
    let what = format!("{} ranks={} block={block}", case.name, ctl.size());
    assert_close(&out.to_local(ctl).unwrap(), &want, &what);
    (out, want)
}

/// The example binary `name` that `cargo test` builds next to the running
/// test (`target/<profile>/examples/<name>`), built first if it is missing
/// (a filtered test run).
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test>-<hash>
    let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let bin = profile_dir.join("examples").join(name);
    if !bin.exists() {
        let mut cmd = std::process::Command::new(env!("CARGO"));
        cmd.args(["build", "--example", name]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let st = cmd.current_dir(env!("CARGO_MANIFEST_DIR")).status().unwrap();
        assert!(st.success(), "building examples/{name} failed");
    }
    assert!(bin.exists(), "{} missing", bin.display());
    bin
}
