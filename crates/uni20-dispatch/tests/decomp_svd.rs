//! SVD through the dispatcher: reconstruction and orthonormality for every dtype and for
//! thin, wide, vector-shaped and empty matrices; the truncation rule (maximum rank,
//! discarded weight, cutoff, degenerate multiplets, at least one value, zero matrix) on
//! matrices with a known spectrum; inputs scaled from 1e-300 to 1e300 (1e-30 to 1e30 in
//! single precision) and discarded weights at scales whose squares overflow or underflow;
//! option and input errors.

mod kernels_common;

use kernels_common::*;
use uni20_dispatch::decomp::*;
use uni20_dispatch::*;

/// `SvdOptions` with the named fields set to `Some(value)` and the rest default.
macro_rules! opts {
    ($($field:ident: $value:expr),+) => {
        SvdOptions {
            $($field: Some($value),)+
            ..Default::default()
        }
    };
}

fn list() -> SvdBackendList {
    SvdBackendList::default_cpu(1)
}

/// Tolerance of reconstruction and orthonormality checks for `dtype`.
fn tol(dtype: DType) -> f64 {
    if eps(dtype) > 1e-10 {
        2e-5
    } else {
        1e-12
    }
}

/// Asserts `u diag(s) vh == a` (relative to `max |a|`), orthonormal columns of `u` and
/// rows of `vh`, descending non-negative `s`, and the factor shapes and dtypes.
fn check_full(a: &LocalTensor, r: &SvdResult) {
    let (av, m, n) = mat(a);
    let k = m.min(n);
    assert_eq!(r.kept, k);
    assert_eq!(r.s.len(), k);
    assert_eq!(r.u.shape(), &[m, k]);
    assert_eq!(r.vh.shape(), &[k, n]);
    assert_eq!((r.u.dtype(), r.vh.dtype()), (a.dtype(), a.dtype()));
    assert!(r.discarded.is_empty() && r.discarded_weight == 0.0 && !r.degenerate_split);
    assert!(r.s.windows(2).all(|w| w[0] >= w[1]), "{:?}", r.s);
    assert!(r.s.iter().all(|&x| x >= 0.0));
    let (u, _, _) = mat(&r.u);
    let (vh, _, _) = mat(&r.vh);
    let us: Vec<C64> = u.iter().enumerate().map(|(i, x)| x * r.s[i % k]).collect();
    let rec = matmul(&us, &vh, m, k, n);
    let t = tol(a.dtype());
    let scale = max_norm(&av).max(f64::MIN_POSITIVE);
    assert!(
        max_diff(&rec, &av) <= t * scale,
        "reconstruction {} for {m}x{n} {}",
        max_diff(&rec, &av) / scale,
        a.dtype()
    );
    assert!(
        column_orthonormality(&u, m, k) <= t,
        "U {}",
        column_orthonormality(&u, m, k)
    );
    assert!(
        row_orthonormality(&vh, k, n) <= t,
        "Vh {}",
        row_orthonormality(&vh, k, n)
    );
}

#[test]
fn reconstructs_every_dtype_and_shape() {
    let shapes = [(1, 1), (1, 7), (7, 1), (5, 5), (9, 4), (4, 9), (30, 17), (17, 30)];
    for (i, dtype) in DType::ALL.into_iter().enumerate() {
        for (j, &(m, n)) in shapes.iter().enumerate() {
            let a = rand_matrix((i * 100 + j) as u64, dtype, m, n);
            let (r, attempts) = svd_with_attempts(&a, &SvdOptions::default(), &list()).unwrap();
            check_full(&a, &r);
            assert_eq!(
                attempts,
                vec![KernelAttempt {
                    backend: "faer".into(),
                    outcome: AttemptOutcome::Accepted
                }]
            );
        }
    }
}

/// Inputs of extreme scale (`c A` for `c` from `1e-300` to `1e300`, `1e-30` to `1e30` for
/// single precision): the factorization is as accurate relative to `c` as it is for `A`
/// (reconstruction and orthonormality at the unscaled tolerance, singular values equal to
/// `c` times those of `A`). Unscaled, faer's SVD stopped with `NoConvergence` from about
/// `1e155` and returned wrong values from about `1e-165` (`f64`).
#[test]
fn extreme_scales_are_as_accurate_as_unit_scale() {
    for (i, dtype) in DType::ALL.into_iter().enumerate() {
        for (j, &(m, n)) in [(4, 4), (9, 4), (4, 9)].iter().enumerate() {
            let a0 = rand_matrix((i * 10 + j + 500) as u64, dtype, m, n);
            let r0 = svd(&a0, &SvdOptions::default(), &list()).unwrap();
            for c in extreme_scales(dtype) {
                let a = scaled(&a0, c);
                let r = svd(&a, &SvdOptions::default(), &list())
                    .unwrap_or_else(|e| panic!("{dtype} {m}x{n} scale {c:e}: {e}"));
                check_full(&a, &r);
                for (x, y) in r.s.iter().zip(&r0.s) {
                    assert!(
                        (x / c - y).abs() <= tol(dtype) * r0.s[0],
                        "{dtype} {m}x{n} scale {c:e}: s/c = {} vs {y}",
                        x / c
                    );
                }
            }
        }
    }
}

/// The truncation case: diag(1.5e154, 1.3e154, 1) with a discarded-weight target of
/// 0.1 keeps two values (the second carries 43 % of the weight, whose square overflowed).
#[test]
fn discarded_weight_is_right_at_extreme_scales() {
    for (s, c) in [([1.5, 1.3, 1.0 / 1.5e154], 1.5e154), ([1.5, 1.3, 1e-154 / 1.5], 1e-150)] {
        let v: Vec<f64> = s.iter().map(|x| x * c).collect();
        let a = LocalTensor::from_f64(&[3, 3], vec![v[0], 0.0, 0.0, 0.0, v[1], 0.0, 0.0, 0.0, v[2]]).unwrap();
        let r = svd(&a, &opts!(max_discarded_weight: 0.1), &list()).unwrap();
        assert_eq!(r.kept, 2, "scale {c:e}: {:?} | {:?}", r.s, r.discarded);
        assert!((r.s[1] / v[1] - 1.0).abs() < 1e-14 && (r.discarded[0] / v[2] - 1.0).abs() < 1e-14);
        // The weight relative to the largest value: (s2 / s0)^2 / (1 + (s1 / s0)^2).
        let want = (v[2] / v[0]).powi(2) / (1.0 + (v[1] / v[0]).powi(2));
        assert!(
            (r.discarded_weight - want).abs() <= 1e-12 * want,
            "scale {c:e}: {} vs {want}",
            r.discarded_weight
        );
        // max_rank 1 drops 43 % of the weight, and says so.
        let one = svd(&a, &opts!(max_rank: 1), &list()).unwrap();
        let want = (1.3f64 / 1.5).powi(2) / (1.0 + (1.3f64 / 1.5).powi(2));
        assert!((one.discarded_weight - want).abs() < 1e-14, "{}", one.discarded_weight);
    }
}

#[test]
fn threaded_backend_agrees() {
    let a = rand_matrix(7, DType::C64, 120, 90);
    let seq = svd(&a, &SvdOptions::default(), &list()).unwrap();
    let par = svd(&a, &SvdOptions::default(), &SvdBackendList::default_cpu(2)).unwrap();
    check_full(&a, &par);
    for (x, y) in seq.s.iter().zip(&par.s) {
        assert!((x - y).abs() <= 1e-12 * seq.s[0]);
    }
}

#[test]
fn empty_matrices_give_empty_factors() {
    for (m, n) in [(0, 5), (5, 0), (0, 0)] {
        for dtype in DType::ALL {
            let a = LocalTensor::zeros(dtype, &[m, n]).unwrap();
            let r = svd(&a, &opts!(max_rank: 3), &list()).unwrap();
            assert_eq!((r.u.shape(), r.vh.shape()), (&[m, 0][..], &[0, n][..]));
            assert!(r.s.is_empty() && r.discarded.is_empty());
            assert_eq!((r.kept, r.discarded_weight, r.degenerate_split), (0, 0.0, false));
        }
    }
}

/// A matrix with singular values exactly `s`: `s[i]` at row `i`, column `(3 i + 1) mod n`
/// (a permutation when `gcd(3, n) = 1`), times a unit phase for complex dtypes.
fn spectrum(s: &[f64], dtype: DType) -> LocalTensor {
    let n = s.len();
    assert!(!n.is_multiple_of(3));
    let mut v = vec![C64::new(0.0, 0.0); n * n];
    for (i, &x) in s.iter().enumerate() {
        let phase = if dtype.is_complex() {
            C64::from_polar(1.0, 0.7 * i as f64)
        } else {
            C64::new(1.0, 0.0)
        };
        v[i * n + (3 * i + 1) % n] = phase * x;
    }
    from_c64(dtype, &[n, n], &v)
}

fn truncated(s: &[f64], opts: SvdOptions) -> SvdResult {
    let a = spectrum(s, DType::F64);
    let r = svd(&a, &opts, &list()).unwrap();
    // The reported weight is exactly sum(discarded^2) / sum(all^2) of the computed values.
    let total: f64 = r.s.iter().chain(&r.discarded).map(|x| x * x).sum();
    let disc: f64 = r.discarded.iter().map(|x| x * x).sum();
    let expect = if total > 0.0 { disc / total } else { 0.0 };
    assert!(
        (r.discarded_weight - expect).abs() <= 1e-14 * expect,
        "{} vs {expect}",
        r.discarded_weight
    );
    assert_eq!(r.s.len() + r.discarded.len(), s.len());
    assert_eq!(r.kept, r.s.len());
    assert_eq!(r.u.shape(), &[s.len(), r.kept]);
    assert_eq!(r.vh.shape(), &[r.kept, s.len()]);
    r
}

const S: [f64; 8] = [5.0, 4.0, 3.0, 3.0, 3.0, 2.0, 1.0, 0.5];

fn sum_sq(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum()
}

#[test]
fn max_rank_keeps_the_largest_and_reports_the_weight() {
    let r = truncated(&S, opts!(max_rank: 2));
    assert_eq!(r.kept, 2);
    assert!((r.s[0] - 5.0).abs() < 1e-13 && (r.s[1] - 4.0).abs() < 1e-13);
    let w = sum_sq(&S[2..]) / sum_sq(&S);
    assert!((r.discarded_weight - w).abs() < 1e-14, "{} vs {w}", r.discarded_weight);
    // u diag(s) vh is the best rank-2 approximation: the error is the discarded part.
    let a = spectrum(&S, DType::F64);
    let (u, m, k) = mat(&r.u);
    let us: Vec<C64> = u.iter().enumerate().map(|(i, x)| x * r.s[i % k]).collect();
    let rec = matmul(&us, &r.vh.to_c64_vec(), m, k, m);
    let err: f64 = rec.iter().zip(a.to_c64_vec()).map(|(x, y)| (x - y).norm_sqr()).sum();
    assert!((err - sum_sq(&S[2..])).abs() < 1e-12);
}

#[test]
fn max_rank_never_splits_a_multiplet_unless_forced() {
    // The cut at 3 or 4 falls inside {3, 3, 3}: the multiplet is dropped whole.
    for m in [3, 4] {
        let r = truncated(&S, opts!(max_rank: m));
        assert_eq!((r.kept, r.degenerate_split), (2, false), "max_rank {m}");
    }
    assert_eq!(truncated(&S, opts!(max_rank: 5)).kept, 5);
    // A leading multiplet larger than max_rank must be split; this is reported.
    let r = truncated(&[2.0, 2.0, 2.0, 1.0], opts!(max_rank: 2));
    assert_eq!((r.kept, r.degenerate_split), (2, true));
    let w = 5.0 / 13.0;
    assert!((r.discarded_weight - w).abs() < 1e-14);
}

#[test]
fn cutoff_and_weight_keep_whole_multiplets() {
    let near = [5.0, 3.0 * (1.0 + 2e-13), 3.0, 3.0 * (1.0 - 2e-13), 2.0, 1.0, 0.5];
    // The cutoff 3 falls inside the near-degenerate multiplet: all three are kept.
    let r = truncated(&near, opts!(cutoff: 3.0));
    assert_eq!(r.kept, 4);
    // With degeneracy detection off, the cut stays where the cutoff puts it.
    let r = truncated(&near, opts!(cutoff: 3.0 * (1.0 + 1e-13), degeneracy_rtol: 0.0));
    assert_eq!(r.kept, 2);
    // Discarded-weight target exactly met by dropping {2, 1, 0.5}.
    let w = sum_sq(&S[5..]) / sum_sq(&S);
    let r = truncated(&S, opts!(max_discarded_weight: w * (1.0 + 1e-9)));
    assert_eq!(r.kept, 5);
    assert!(r.discarded_weight <= w * (1.0 + 1e-9));
    // Slightly tighter: 2 must stay.
    let r = truncated(&S, opts!(max_discarded_weight: w * (1.0 - 1e-9)));
    assert_eq!(r.kept, 6);
    // A target that would cut inside {3, 3, 3} keeps the whole multiplet.
    let w3 = sum_sq(&S[3..]) / sum_sq(&S);
    let r = truncated(&S, opts!(max_discarded_weight: w3 * (1.0 + 1e-9)));
    assert_eq!(r.kept, 5);
    // Cutoff, weight and rank together: the strictest wins.
    let r = truncated(&S, opts!(cutoff: 0.75, max_discarded_weight: 0.5, max_rank: 6));
    assert_eq!(r.kept, 2);
}

#[test]
fn keeps_at_least_one_unless_zero() {
    let r = truncated(&S, opts!(cutoff: 100.0));
    assert_eq!(r.kept, 1);
    let r = truncated(&S, opts!(max_discarded_weight: 1.0));
    assert_eq!(r.kept, 1);
    for dtype in DType::ALL {
        let z = LocalTensor::zeros(dtype, &[4, 3]).unwrap();
        let r = svd(&z, &opts!(cutoff: 0.0), &list()).unwrap();
        assert_eq!((r.kept, r.discarded_weight), (0, 0.0));
        assert_eq!((r.u.shape(), r.vh.shape()), (&[4, 0][..], &[0, 3][..]));
        assert_eq!(r.discarded, vec![0.0; 3]);
        let full = svd(&z, &SvdOptions::default(), &list()).unwrap();
        assert_eq!(full.s, vec![0.0; 3]);
    }
}

#[test]
fn truncation_works_for_every_dtype() {
    for dtype in DType::ALL {
        let a = spectrum(&S, dtype);
        let r = svd(&a, &opts!(max_rank: 3), &list()).unwrap();
        assert_eq!(r.kept, 2, "{dtype}");
        assert!((r.s[0] - 5.0).abs() < 1e-5 && (r.s[1] - 4.0).abs() < 1e-5, "{dtype}");
        let (u, m, k) = mat(&r.u);
        assert!(column_orthonormality(&u, m, k) < tol(dtype));
        let (vh, k2, n) = mat(&r.vh);
        assert!(row_orthonormality(&vh, k2, n) < tol(dtype));
    }
}

#[test]
fn invalid_options_are_typed_errors() {
    let a = spectrum(&S, DType::F64);
    let cases: [(SvdOptions, &str); 5] = [
        (opts!(max_rank: 0), "max_rank"),
        (opts!(cutoff: -1.0), "cutoff"),
        (opts!(max_discarded_weight: f64::NAN), "max_discarded_weight"),
        (opts!(degeneracy_rtol: f64::INFINITY), "degeneracy_rtol"),
        (opts!(degeneracy_rtol: -1e-3), "degeneracy_rtol"),
    ];
    for (opts, name) in cases {
        match svd(&a, &opts, &list()) {
            Err(DecompError::InvalidOption {
                op: DecompKind::Svd,
                option,
                ..
            }) => assert_eq!(option, name),
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn non_finite_and_non_matrix_inputs_are_typed_errors() {
    let mut v = vec![C64::new(1.0, 0.0); 12];
    v[6] = C64::new(f64::NAN, 0.0);
    for dtype in DType::ALL {
        let a = from_c64(dtype, &[3, 4], &v);
        match svd(&a, &SvdOptions::default(), &list()) {
            Err(DecompError::NonFinite {
                op: DecompKind::Svd,
                row: 1,
                col: 2,
                value,
            }) => assert!(value.re.is_nan()),
            other => panic!("{dtype}: {other:?}"),
        }
    }
    let mut w = vec![C64::new(0.5, 0.5); 6];
    w[5] = C64::new(0.0, f64::NEG_INFINITY);
    w[4] = C64::new(f64::INFINITY, 1.0);
    let a = from_c64(DType::C64, &[2, 3], &w);
    let e = svd(&a, &SvdOptions::default(), &list()).unwrap_err();
    assert_eq!(
        e,
        DecompError::NonFinite {
            op: DecompKind::Svd,
            row: 1,
            col: 1,
            value: C64::new(f64::INFINITY, 1.0)
        }
    );
    assert!(e.to_string().contains("svd: entry (1, 1) is not finite"), "{e}");
    let t = LocalTensor::zeros(DType::F64, &[2, 2, 2]).unwrap();
    assert_eq!(
        svd(&t, &SvdOptions::default(), &list()).unwrap_err(),
        DecompError::NotMatrix {
            op: DecompKind::Svd,
            shape: vec![2, 2, 2]
        }
    );
}
