//! The kernels against numpy, on fixtures committed by `scripts/gen_kernel_fixtures.py`
//! (`tests/fixtures/kernels/`): singular values (`np.linalg.svd`), eigenvalues
//! (`np.linalg.eigvalsh`), `axpby` with permutations and conjugation (exact), reductions
//! (`np.vdot`, `sum |a|^2`, `max |a|`), and 4096 x 4096 / 1024 x 1024 inner products against
//! both the exactly rounded value and `np.vdot`.

mod kernels_common;

use kernels_common::*;
use uni20_dispatch::decomp::*;
use uni20_dispatch::*;

fn close(x: f64, y: f64, rtol: f64, scale: f64) -> bool {
    (x - y).abs() <= rtol * scale
}

#[test]
fn singular_values_match_numpy() {
    let cases = [
        "f64_7x5", "f64_3x8", "c64_6x4", "c64_4x9", "f32_6x6", "c32_5x3", "f64_1x6", "c64_5x1",
    ];
    for case in cases {
        let a = read_npy(&fixture(&format!("svd_{case}.npy")));
        let want = read_npy(&fixture(&format!("svd_{case}.s.npy"))).to_c64_vec();
        let r = svd(&a, &SvdOptions::default(), &SvdBackendList::default_cpu(1)).unwrap();
        assert_eq!(r.s.len(), want.len(), "{case}");
        let rtol = if eps(a.dtype()) > 1e-10 { 1e-5 } else { 1e-13 };
        for (x, w) in r.s.iter().zip(&want) {
            assert!(close(*x, w.re, rtol, want[0].re), "{case}: {:?} vs {:?}", r.s, want);
        }
    }
}

#[test]
fn eigenvalues_match_numpy() {
    for case in ["f64_8", "c64_6", "f32_5", "c32_4"] {
        let a = read_npy(&fixture(&format!("eigh_{case}.npy")));
        let want = read_npy(&fixture(&format!("eigh_{case}.w.npy"))).to_c64_vec();
        let r = eigh(&a, &EighOptions::default(), &EighBackendList::default_cpu(1)).unwrap();
        let scale = want.iter().map(|w| w.re.abs()).fold(0.0, f64::max);
        let rtol = if eps(a.dtype()) > 1e-10 { 1e-5 } else { 1e-13 };
        for (x, w) in r.values.iter().zip(&want) {
            assert!(close(*x, w.re, rtol, scale), "{case}: {:?} vs {:?}", r.values, want);
        }
    }
}

/// `params.txt` of an axpby case: `key value...` lines.
fn param<'a>(text: &'a str, key: &str) -> Option<Vec<&'a str>> {
    text.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
        .map(|r| r.split_whitespace().collect())
}

fn scalar(v: &[&str]) -> C64 {
    C64::new(v[0].parse().unwrap(), v[1].parse().unwrap())
}

fn perm(v: &[&str]) -> Vec<usize> {
    v.iter().map(|s| s.parse().unwrap()).collect()
}

#[test]
fn axpby_matches_numpy_exactly() {
    for case in ["c64_perm_conj", "f64_transpose", "f32_c32_mixed", "c32_scale_only"] {
        let dir = fixture(&format!("axpby_{case}"));
        let text = std::fs::read_to_string(dir.join("params.txt")).unwrap();
        let a = read_npy(&dir.join("a.npy"));
        let want = read_npy(&dir.join("out.npy"));
        let perm_a = perm(&param(&text, "perm_a").unwrap());
        let conj_a = param(&text, "conj_a").unwrap()[0] == "1";
        let alpha = scalar(&param(&text, "alpha").unwrap());
        let beta = scalar(&param(&text, "beta").unwrap());
        let out_dtype = DType::from_npy_descr(param(&text, "out_dtype").unwrap()[0]).unwrap();
        let b = param(&text, "perm_b").map(|p| {
            (
                read_npy(&dir.join("b.npy")),
                perm(&p),
                param(&text, "conj_b").unwrap()[0] == "1",
            )
        });
        for threads in [1, 3] {
            let got = axpby(
                alpha,
                &a,
                &perm_a,
                conj_a,
                beta,
                b.as_ref().map(|(t, p, c)| (t, p.as_slice(), *c)),
                Some(out_dtype),
                threads,
            )
            .unwrap();
            assert_eq!(got, want, "{case}, threads {threads}");
        }
    }
}

#[test]
fn reductions_match_numpy() {
    for case in ["f64_33x47", "c64_17x5x9", "f32_c64_40x3", "c32_1000"] {
        let dir = fixture(&format!("reduce_{case}"));
        let a = read_npy(&dir.join("a.npy"));
        let b = read_npy(&dir.join("b.npy"));
        let want = read_npy(&dir.join("out.npy")).to_c64_vec();
        for threads in [1, 2] {
            let v = inner(&a, &b, threads).unwrap();
            assert!(
                (v - want[0]).norm() <= 1e-13 * want[0].norm(),
                "{case}: inner {v} vs {}",
                want[0]
            );
            let n = norm_sqr(&a, threads);
            assert!(
                close(n, want[1].re, 1e-14, want[1].re),
                "{case}: norm_sqr {n} vs {}",
                want[1]
            );
            assert_eq!(max_abs(&a, threads), want[2].re, "{case}: max_abs");
        }
    }
}

/// The integer formula of `gen_kernel_fixtures.py`: `((i * mult) % modulus - modulus / 2) /
/// modulus` for `i` in `0..n`, exactly as numpy computes it (one correctly rounded division).
fn formula(n: usize, mult: i64, modulus: i64) -> Vec<f64> {
    (0..n as i64)
        .map(|i| ((i * mult) % modulus - modulus / 2) as f64 / modulus as f64)
        .collect()
}

#[test]
fn large_inner_products_match_numpy_and_the_exact_value() {
    let text = std::fs::read_to_string(fixture("inner_large.txt")).unwrap();
    let mut seen = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (rows, cols): (usize, usize) = (f[1].parse().unwrap(), f[2].parse().unwrap());
        let num = |i: usize| -> f64 { f[i].parse().unwrap() };
        let (exact, vdot) = (C64::new(num(3), num(5)), C64::new(num(4), num(6)));
        let n = rows * cols;
        let (a, b) = if f[0] == "real" {
            (
                LocalTensor::from_f64(&[rows, cols], formula(n, 7919, 10007)).unwrap(),
                LocalTensor::from_f64(&[rows, cols], formula(n, 104729, 10009)).unwrap(),
            )
        } else {
            let zip = |re: Vec<f64>, im: Vec<f64>| -> Vec<C64> {
                re.into_iter().zip(im).map(|(r, i)| C64::new(r, i)).collect()
            };
            (
                LocalTensor::from_c64(&[rows, cols], zip(formula(n, 7919, 10007), formula(n, 6007, 10037))).unwrap(),
                LocalTensor::from_c64(&[rows, cols], zip(formula(n, 104729, 10009), formula(n, 3571, 10061))).unwrap(),
            )
        };
        let got = inner(&a, &b, 2).unwrap();
        // These sums cancel heavily (sum |terms| / |result| is about 1e5), so this is a
        // stringent test of the summation: within 1e-12 of numpy, and closer to the exact
        // value than numpy's own error.
        let rel = |x: C64, y: C64| (x - y).norm() / y.norm();
        assert!(rel(got, vdot) <= 1e-12, "{}: {got} vs numpy {vdot}", f[0]);
        assert!(
            rel(got, exact) <= 1e-13,
            "{}: {got} vs exact {exact} ({:e})",
            f[0],
            rel(got, exact)
        );
        assert_eq!(got, inner(&a, &b, 1).unwrap(), "thread budget changed the result");
        seen += 1;
    }
    assert_eq!(seen, 2);
}
