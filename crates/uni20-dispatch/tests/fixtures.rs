//! Checks the reference and faer backends against numpy-generated fixtures
//! (`scripts/gen_fixtures.py`): the two-operand contractions of `tests/fixtures/contract/` and
//! the other numpy einsum forms of `tests/fixtures/einsum/` (traces, diagonals, one-operand
//! specs, implicit output, ellipsis with broadcasting, broadcast extent-1 labels).

use std::path::{Path, PathBuf};

use uni20_dispatch::backends::*;
use uni20_dispatch::*;

fn fixture_root(set: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(set)
}

/// The case directories of a fixture set, sorted; panics unless there are at least
/// `at_least` (the generated set, not a partial one).
fn case_dirs(set: &str, at_least: usize) -> Vec<PathBuf> {
    let root = fixture_root(set);
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(
        cases.len() >= at_least,
        "expected the generated fixture set, found {}",
        cases.len()
    );
    cases
}

/// One fixture case: spec, operands, alpha, beta, optional C, numpy's result.
struct Case {
    name: String,
    spec: String,
    operands: Vec<LocalTensor>,
    alpha: C64,
    beta: C64,
    c: Option<LocalTensor>,
    expected: LocalTensor,
}

fn load(dir: &Path) -> Case {
    let operands = ["a.npy", "b.npy"]
        .iter()
        .map(|f| dir.join(f))
        .filter(|p| p.exists())
        .map(|p| read_npy(&p))
        .collect();
    Case {
        name: dir.file_name().unwrap().to_string_lossy().to_string(),
        spec: std::fs::read_to_string(dir.join("spec.txt"))
            .unwrap()
            .trim()
            .to_string(),
        operands,
        alpha: std::fs::read_to_string(dir.join("alpha.txt"))
            .map(|s| parse_scalar(&s))
            .unwrap_or(C64::new(1.0, 0.0)),
        beta: std::fs::read_to_string(dir.join("beta.txt"))
            .map(|s| parse_scalar(&s))
            .unwrap_or(C64::new(0.0, 0.0)),
        c: dir.join("c.npy").exists().then(|| read_npy(&dir.join("c.npy"))),
        expected: read_npy(&dir.join("out.npy")),
    }
}

fn lists() -> Vec<(&'static str, BackendList)> {
    #[cfg_attr(not(feature = "blas"), allow(unused_mut))]
    let mut v = vec![
        ("reference", BackendList::reference_only()),
        ("default-seq", BackendList::default_cpu(1)),
        ("default-par", BackendList::default_cpu(2)),
        (
            "faer-par",
            BackendList::new(vec![std::sync::Arc::new(FaerBackend::new(2))]),
        ),
    ];
    #[cfg(feature = "blas")]
    v.push((
        "blas-copying-par",
        BackendList::new(vec![std::sync::Arc::new(BlasBackend::new(2).copying(true))]),
    ));
    v
}

/// Asserts dtype, shape and values (relative to the largest |expected|) and that a fast
/// backend ran (the reference only in the reference-only list).
fn check(case: &Case, lname: &str, list: &BackendList, got: &LocalTensor, attempts: &[KernelAttempt]) {
    let name = &case.name;
    let expected = &case.expected;
    let ran = &attempts.last().unwrap().backend;
    assert!(list.names().contains(&ran.as_str()), "{name}/{lname}: {ran}");
    assert_eq!(
        ran == "reference",
        list.names() == ["reference"],
        "{name}/{lname}: {ran}"
    );
    assert_eq!(got.dtype(), expected.dtype(), "{name}/{lname}: dtype");
    assert_eq!(got.shape(), expected.shape(), "{name}/{lname}: shape");
    let scale = expected.to_c64_vec().iter().map(|z| z.norm()).fold(1.0f64, f64::max);
    let diff = got.max_abs_diff(expected).unwrap();
    assert!(
        diff <= tolerance(got.dtype()) * scale,
        "{name}/{lname}: max abs diff {diff} (scale {scale})"
    );
}

/// Minimal `.npy` reader: versions 1-3, C order, dtypes supported by [`DType::from_npy_descr`].
fn read_npy(path: &Path) -> LocalTensor {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..6], b"\x93NUMPY", "{}", path.display());
    let major = bytes[6];
    let (hlen, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => panic!("unsupported npy version {v}"),
    };
    let header = std::str::from_utf8(&bytes[start..start + hlen]).unwrap();
    let field = |key: &str| -> &str {
        let i = header.find(key).unwrap_or_else(|| panic!("no {key} in {header}"));
        header[i + key.len()..].trim_start_matches([':', ' '])
    };
    let descr = field("'descr'");
    let descr = &descr[1..descr[1..].find('\'').unwrap() + 1];
    let dtype = DType::from_npy_descr(descr).unwrap();
    assert!(field("'fortran_order'").starts_with("False"), "{header}");
    let shape_s = field("'shape'");
    let shape_s = &shape_s[1..shape_s.find(')').unwrap()];
    let shape: Vec<usize> = shape_s
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    LocalTensor::from_bytes(dtype, &shape, &bytes[start + hlen..]).unwrap()
}

/// Parses "1.5", "-0.75", "2.5-0.5j", "(2.5+0.5j)".
fn parse_scalar(s: &str) -> C64 {
    let s = s.trim().trim_start_matches('(').trim_end_matches(')');
    let Some(body) = s.strip_suffix('j') else {
        return C64::new(s.parse().unwrap(), 0.0);
    };
    let bytes = body.as_bytes();
    let split = (1..bytes.len())
        .rev()
        .find(|&i| (bytes[i] == b'+' || bytes[i] == b'-') && bytes[i - 1] != b'e')
        .unwrap_or(0);
    let re = if split == 0 {
        0.0
    } else {
        body[..split].parse().unwrap()
    };
    C64::new(re, body[split..].parse().unwrap())
}

fn tolerance(d: DType) -> f64 {
    if matches!(d, DType::F32 | DType::C32) {
        1e-4
    } else {
        1e-10
    }
}

#[test]
fn scalar_parser() {
    assert_eq!(parse_scalar("1.5"), C64::new(1.5, 0.0));
    assert_eq!(parse_scalar("2.5-0.5j\n"), C64::new(2.5, -0.5));
    assert_eq!(parse_scalar("(1e-3+2j)"), C64::new(1e-3, 2.0));
}

#[test]
fn backends_match_numpy_fixtures() {
    let cases = case_dirs("contract", 15);
    for dir in &cases {
        let case = load(dir);
        let spec = EinsumSpec::parse(&case.spec).unwrap();
        let [a, b] = &case.operands[..] else {
            panic!("{}: two operands expected", case.name)
        };
        for (lname, list) in &lists() {
            let (got, attempts) = contract_with_attempts(&spec, case.alpha, a, b, case.beta, case.c.as_ref(), list)
                .unwrap_or_else(|e| panic!("{}/{lname}: {e}", case.name));
            check(&case, lname, list, &got, &attempts);
        }
    }
}

#[test]
fn einsum_forms_match_numpy_fixtures() {
    let cases = case_dirs("einsum", 30);
    let mut unary = 0;
    for dir in &cases {
        let case = load(dir);
        let spec = EinsumSpec::parse(&case.spec).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!(spec.num_inputs(), case.operands.len(), "{}", case.name);
        let ops: Vec<&LocalTensor> = case.operands.iter().collect();
        for (lname, list) in &lists() {
            let (got, attempts) = contract_operands(&spec, case.alpha, &ops, case.beta, case.c.as_ref(), list)
                .unwrap_or_else(|e| panic!("{}/{lname}: {e}", case.name));
            check(&case, lname, list, &got, &attempts);
            // The resolved spec (what a descriptor carries) gives the same result, taken literally.
            let shapes: Vec<&[usize]> = ops.iter().map(|t| t.shape()).collect();
            let resolved = spec.resolve(&shapes).unwrap();
            let (again, attempts) = contract_operands(&resolved, case.alpha, &ops, case.beta, case.c.as_ref(), list)
                .unwrap_or_else(|e| panic!("{}/{lname} resolved {resolved}: {e}", case.name));
            check(&case, lname, list, &again, &attempts);
            if let [a] = &ops[..] {
                let t = contract_unary(case.spec.as_str(), case.alpha, a, case.beta, case.c.as_ref(), list).unwrap();
                assert_eq!(t, again, "{}/{lname}: contract_unary", case.name);
                unary += 1;
            }
        }
    }
    assert!(unary >= 10 * 3, "one-operand cases missing: {unary}");
}
