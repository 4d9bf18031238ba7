//! QR, LQ and Hermitian eigendecomposition through the dispatcher: reconstruction,
//! orthonormality, triangular structure with a real non-negative diagonal, eigen-residuals
//! and order, empty matrices, inputs scaled from 1e-300 to 1e300 (1e-30 to 1e30 in single
//! precision), and the typed errors (NaN/Inf, not square, not Hermitian).

mod kernels_common;

use kernels_common::*;
use uni20_dispatch::decomp::*;
use uni20_dispatch::*;

fn tol(dtype: DType) -> f64 {
    if eps(dtype) > 1e-10 {
        2e-5
    } else {
        1e-12
    }
}

/// Asserts that `left (m x k)` times `right (k x n)` reproduces the `m x n` matrix `a`
/// to `tol` of its dtype, relative to `max |a|`.
fn assert_product_is(left: &[C64], right: &[C64], k: usize, a: &LocalTensor) {
    let (av, m, n) = mat(a);
    let dtype = a.dtype();
    assert!(
        max_diff(&matmul(left, right, m, k, n), &av) <= tol(dtype) * max_norm(&av),
        "{dtype} {m}x{n}"
    );
}

/// Asserts that `left (m x k)` times `right (k x n)` reproduces the `m x n` matrix `a` to
/// `t` relative to `max |a|`; `what` and `name` label a failure.
fn assert_reconstructs(what: &str, name: &str, left: &[C64], right: &[C64], k: usize, a: &LocalTensor, t: f64) {
    let (av, m, n) = mat(a);
    let rec = max_diff(&matmul(left, right, m, k, n), &av) / max_norm(&av);
    assert!(rec <= t, "{what}: {name} reconstruction {rec}");
}

const SHAPES: [(usize, usize); 8] = [(1, 1), (1, 6), (6, 1), (5, 5), (9, 4), (4, 9), (33, 20), (20, 33)];

#[test]
fn qr_reconstructs_with_orthonormal_q_and_upper_r() {
    let list = QrBackendList::default_cpu(1);
    for (i, dtype) in DType::ALL.into_iter().enumerate() {
        for (j, &(m, n)) in SHAPES.iter().enumerate() {
            let a = rand_matrix((i * 50 + j) as u64, dtype, m, n);
            let (r, attempts) = qr_with_attempts(&a, &list).unwrap();
            assert_eq!(attempts.len(), 1);
            let k = m.min(n);
            assert_eq!((r.q.shape(), r.r.shape()), (&[m, k][..], &[k, n][..]));
            assert_eq!((r.q.dtype(), r.r.dtype()), (dtype, dtype));
            let (q, rr) = (mat(&r.q).0, mat(&r.r).0);
            assert_product_is(&q, &rr, k, &a);
            let t = tol(dtype);
            assert!(column_orthonormality(&q, m, k) <= t);
            for row in 0..k {
                for col in 0..row.min(n) {
                    assert_eq!(rr[row * n + col], C64::new(0.0, 0.0), "R below the diagonal");
                }
                let d = rr[row * n + row];
                assert!(d.im == 0.0 && d.re >= 0.0, "R diagonal {d}");
            }
        }
    }
}

#[test]
fn lq_reconstructs_with_lower_l_and_orthonormal_rows() {
    let list = QrBackendList::default_cpu(1);
    for (i, dtype) in DType::ALL.into_iter().enumerate() {
        for (j, &(m, n)) in SHAPES.iter().enumerate() {
            let a = rand_matrix((i * 70 + j + 1000) as u64, dtype, m, n);
            let (r, attempts) = lq_with_attempts(&a, &list).unwrap();
            assert_eq!(attempts[0].outcome, AttemptOutcome::Accepted);
            let k = m.min(n);
            assert_eq!((r.l.shape(), r.q.shape()), (&[m, k][..], &[k, n][..]));
            let (l, q) = (mat(&r.l).0, mat(&r.q).0);
            assert_product_is(&l, &q, k, &a);
            let t = tol(dtype);
            assert!(row_orthonormality(&q, k, n) <= t);
            for row in 0..m {
                for col in (row + 1)..k {
                    assert_eq!(l[row * k + col], C64::new(0.0, 0.0), "L above the diagonal");
                }
                if row < k {
                    let d = l[row * k + row];
                    assert!(d.im == 0.0 && d.re >= 0.0, "L diagonal {d}");
                }
            }
        }
    }
}

/// Max `|x / c - y|` over two factors, relative to `max |y|`.
fn scaled_diff(x: &[C64], c: f64, y: &[C64]) -> f64 {
    let d = x.iter().zip(y).map(|(a, b)| (a / c - b).norm()).fold(0.0, f64::max);
    d / max_norm(y)
}

/// QR and LQ of `c A` for `c` from `1e-300` to `1e300` (`1e-30` to `1e30` in single
/// precision): reconstruction and orthonormality at the unscaled tolerance, and (the
/// factors being unique for full rank) `R = c R_A`, `L = c L_A`, `Q = Q_A`.
#[test]
fn qr_lq_at_extreme_scales() {
    let list = QrBackendList::default_cpu(1);
    for (i, dtype) in DType::ALL.into_iter().enumerate() {
        for (j, &(m, n)) in [(4, 4), (9, 4), (4, 9)].iter().enumerate() {
            let a0 = rand_matrix((i * 10 + j + 700) as u64, dtype, m, n);
            let (q0, r0) = (qr(&a0, &list).unwrap(), lq(&a0, &list).unwrap());
            let k = m.min(n);
            let t = tol(dtype);
            for c in extreme_scales(dtype) {
                let a = scaled(&a0, c);
                let what = format!("{dtype} {m}x{n} scale {c:e}");
                let f = qr(&a, &list).unwrap_or_else(|e| panic!("{what}: {e}"));
                let (q, rr) = (mat(&f.q).0, mat(&f.r).0);
                assert_reconstructs(&what, "QR", &q, &rr, k, &a, t);
                assert!(column_orthonormality(&q, m, k) <= t, "{what}");
                assert!(scaled_diff(&rr, c, &mat(&q0.r).0) <= t, "{what}: R");
                assert!(scaled_diff(&q, 1.0, &mat(&q0.q).0) <= t, "{what}: Q");
                let f = lq(&a, &list).unwrap_or_else(|e| panic!("{what}: {e}"));
                let (l, lqq) = (mat(&f.l).0, mat(&f.q).0);
                assert_reconstructs(&what, "LQ", &l, &lqq, k, &a, t);
                assert!(row_orthonormality(&lqq, k, n) <= t, "{what}");
                assert!(scaled_diff(&l, c, &mat(&r0.l).0) <= t, "{what}: L");
            }
        }
    }
}

/// eigh of `c A` over the same scales: eigenvalues `c` times those of `A` and residuals
/// `|A v - lambda v|` at the unscaled tolerance relative to `max |c A|`.
#[test]
fn eigh_at_extreme_scales() {
    let list = EighBackendList::default_cpu(1);
    for (i, dtype) in DType::ALL.into_iter().enumerate() {
        for n in [2, 4, 9] {
            let a0 = hermitian((i * 10 + n + 900) as u64, dtype, n);
            let e0 = eigh(&a0, &EighOptions::default(), &list).unwrap();
            let top = e0.values.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            let res_tol = if eps(dtype) > 1e-10 { 1e-4 } else { 1e-10 };
            for c in extreme_scales(dtype) {
                let a = scaled(&a0, c);
                let what = format!("{dtype} n={n} scale {c:e}");
                let r = eigh(&a, &EighOptions::default(), &list).unwrap_or_else(|e| panic!("{what}: {e}"));
                for (x, y) in r.values.iter().zip(&e0.values) {
                    assert!((x / c - y).abs() <= tol(dtype) * top, "{what}: {} vs {y}", x / c);
                }
                let (v, _, _) = mat(&r.vectors);
                let (av, _, _) = mat(&a);
                let av_v = matmul(&av, &v, n, n, n);
                let scale = max_norm(&av);
                for j in 0..n {
                    for row in 0..n {
                        let res = (av_v[row * n + j] - v[row * n + j] * r.values[j]).norm();
                        assert!(
                            res <= res_tol * scale,
                            "{what}: residual {} of eigenpair {j}",
                            res / scale
                        );
                    }
                }
                assert!(column_orthonormality(&v, n, n) <= tol(dtype), "{what}");
            }
        }
    }
}

#[test]
fn qr_is_unique_for_full_rank_input_across_thread_budgets() {
    let a = rand_matrix(3, DType::C64, 80, 50);
    let r1 = qr(&a, &QrBackendList::default_cpu(1)).unwrap();
    let r2 = qr(&a, &QrBackendList::default_cpu(2)).unwrap();
    assert!(r1.q.max_abs_diff(&r2.q).unwrap() < 1e-12);
    assert!(r1.r.max_abs_diff(&r2.r).unwrap() < 1e-12);
}

#[test]
fn empty_qr_lq_eigh() {
    for dtype in DType::ALL {
        for (m, n) in [(0, 4), (4, 0), (0, 0)] {
            let a = LocalTensor::zeros(dtype, &[m, n]).unwrap();
            let r = qr(&a, &QrBackendList::default_cpu(1)).unwrap();
            assert_eq!((r.q.shape(), r.r.shape()), (&[m, 0][..], &[0, n][..]));
            let r = lq(&a, &QrBackendList::default_cpu(1)).unwrap();
            assert_eq!((r.l.shape(), r.q.shape()), (&[m, 0][..], &[0, n][..]));
        }
        let e = eigh(
            &LocalTensor::zeros(dtype, &[0, 0]).unwrap(),
            &EighOptions::default(),
            &EighBackendList::default_cpu(1),
        )
        .unwrap();
        assert!(e.values.is_empty());
        assert_eq!(e.vectors.shape(), &[0, 0]);
    }
}

/// A Hermitian `n x n` matrix of `dtype`: `(X + X^H) / 2` of a random `X`, exact in `dtype`.
fn hermitian(seed: u64, dtype: DType, n: usize) -> LocalTensor {
    let x = rand_matrix(seed, dtype, n, n).to_c64_vec();
    let h: Vec<C64> = (0..n * n)
        .map(|k| {
            let (i, j) = (k / n, k % n);
            (x[i * n + j] + x[j * n + i].conj()) * 0.5
        })
        .collect();
    from_c64(dtype, &[n, n], &h)
}

#[test]
fn eigh_residuals_order_and_orthonormality() {
    let list = EighBackendList::default_cpu(1);
    for (i, dtype) in DType::ALL.into_iter().enumerate() {
        for n in [1, 2, 7, 40] {
            let a = hermitian((i * 10 + n) as u64, dtype, n);
            let (r, attempts) = eigh_with_attempts(&a, &EighOptions::default(), &list).unwrap();
            assert_eq!(attempts[0].backend, "faer");
            assert_eq!(r.values.len(), n);
            assert!(r.values.windows(2).all(|w| w[0] <= w[1]), "{:?}", r.values);
            assert_eq!((r.vectors.shape(), r.vectors.dtype()), (&[n, n][..], dtype));
            let (v, _, _) = mat(&r.vectors);
            let (av, _, _) = mat(&a);
            let av_v = matmul(&av, &v, n, n, n);
            let scale = max_norm(&av).max(1.0);
            let res_tol = if eps(dtype) > 1e-10 { 1e-4 } else { 1e-10 };
            for j in 0..n {
                for row in 0..n {
                    let res = (av_v[row * n + j] - v[row * n + j] * r.values[j]).norm();
                    assert!(res <= res_tol * scale, "{dtype} n={n}: residual {res} of eigenpair {j}");
                }
            }
            assert!(column_orthonormality(&v, n, n) <= tol(dtype));
        }
    }
}

#[test]
fn eigh_known_spectrum() {
    // diag(2, 3, -1): eigenvalues -1, 2, 3 in ascending order.
    let a = LocalTensor::from_f64(&[3, 3], vec![2.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, -1.0]).unwrap();
    let r = eigh(&a, &EighOptions::default(), &EighBackendList::default_cpu(1)).unwrap();
    for (x, y) in r.values.iter().zip([-1.0, 2.0, 3.0]) {
        assert!((x - y).abs() < 1e-14, "{:?}", r.values);
    }
    // [[2, i], [-i, 2]] has eigenvalues 1 and 3.
    let c = LocalTensor::from_c64(
        &[2, 2],
        vec![
            C64::new(2.0, 0.0),
            C64::new(0.0, 1.0),
            C64::new(0.0, -1.0),
            C64::new(2.0, 0.0),
        ],
    )
    .unwrap();
    let r = eigh(&c, &EighOptions::default(), &EighBackendList::default_cpu(1)).unwrap();
    assert!((r.values[0] - 1.0).abs() < 1e-14 && (r.values[1] - 3.0).abs() < 1e-14);
}

#[test]
fn eigh_rejects_non_hermitian_naming_the_deviation() {
    let list = EighBackendList::default_cpu(1);
    let mut v = hermitian(5, DType::F64, 6).to_c64_vec();
    v[4 * 6 + 1] += 1e-6; // A[4, 1] no longer matches A[1, 4]
    let a = from_c64(DType::F64, &[6, 6], &v);
    match eigh(&a, &EighOptions::default(), &list) {
        Err(DecompError::NotHermitian {
            row,
            col,
            deviation,
            tolerance,
            max_abs,
        }) => {
            assert_eq!((row, col), (1, 4));
            assert!((deviation - 1e-6).abs() < 1e-12, "{deviation}");
            assert_eq!(tolerance, 1e-12);
            assert!(max_abs > 0.0);
        }
        other => panic!("{other:?}"),
    }
    // A looser tolerance accepts it (and decomposes the Hermitian part).
    let loose = EighOptions {
        hermitian_rtol: Some(1e-3),
    };
    assert_eq!(eigh(&a, &loose, &list).unwrap().values.len(), 6);
    // A complex diagonal entry with an imaginary part deviates by 2 |Im|.
    let mut w = hermitian(6, DType::C64, 3).to_c64_vec();
    w[2 * 3 + 2] += C64::new(0.0, 0.25);
    let a = from_c64(DType::C64, &[3, 3], &w);
    let e = eigh(&a, &EighOptions::default(), &list).unwrap_err();
    assert!(
        matches!(e, DecompError::NotHermitian { row: 2, col: 2, deviation, .. } if (deviation - 0.5).abs() < 1e-15),
        "{e:?}"
    );
    assert!(e.to_string().contains("not Hermitian"), "{e}");
}

#[test]
fn eigh_input_errors() {
    let list = EighBackendList::default_cpu(1);
    let r = LocalTensor::zeros(DType::C64, &[2, 3]).unwrap();
    assert_eq!(
        eigh(&r, &EighOptions::default(), &list).unwrap_err(),
        DecompError::NotSquare {
            op: DecompKind::Eigh,
            rows: 2,
            cols: 3
        }
    );
    let mut v = vec![C64::new(0.0, 0.0); 4];
    v[3] = C64::new(f64::NAN, 0.0);
    let a = from_c64(DType::F32, &[2, 2], &v);
    assert!(matches!(
        eigh(&a, &EighOptions::default(), &list),
        Err(DecompError::NonFinite {
            op: DecompKind::Eigh,
            row: 1,
            col: 1,
            ..
        })
    ));
    let bad = EighOptions {
        hermitian_rtol: Some(f64::NAN),
    };
    assert!(matches!(
        eigh(&hermitian(1, DType::F64, 2), &bad, &list),
        Err(DecompError::InvalidOption {
            option: "hermitian_rtol",
            ..
        })
    ));
}

#[test]
fn qr_and_lq_reject_non_finite_input() {
    let list = QrBackendList::default_cpu(1);
    let mut v = vec![C64::new(1.0, 0.0); 6];
    v[2] = C64::new(f64::INFINITY, 0.0);
    for dtype in DType::ALL {
        let a = from_c64(dtype, &[2, 3], &v);
        for (kind, r) in [
            (DecompKind::Qr, qr(&a, &list).map(drop)),
            (DecompKind::Lq, lq(&a, &list).map(drop)),
        ] {
            assert!(
                matches!(r, Err(DecompError::NonFinite { op, row: 0, col: 2, .. }) if op == kind),
                "{dtype} {kind:?}: {r:?}"
            );
        }
    }
    let v = LocalTensor::zeros(DType::F64, &[5]).unwrap();
    assert!(matches!(
        qr(&v, &list),
        Err(DecompError::NotMatrix { op: DecompKind::Qr, .. })
    ));
}

/// `sum_i |x_i|^2` square-rooted.
fn norm2(x: &[C64]) -> f64 {
    x.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt()
}

#[test]
fn eigh_lowest_matches_the_full_decomposition() {
    let list = EighBackendList::default_cpu(1);
    for (i, dtype) in [DType::F64, DType::C64].into_iter().enumerate() {
        for n in [1, 2, 7, 40, 200] {
            let a = hermitian((100 + i * 10 + n) as u64, dtype, n);
            let start = rand_matrix(7 + n as u64, dtype, n, 1).to_c64_vec();
            for threads in [1, 2] {
                let p = eigh_lowest(&a, &start, &EighOptions::default(), threads)
                    .unwrap()
                    .expect("a random Hermitian matrix and start");
                let full = eigh(&a, &EighOptions::default(), &list).unwrap();
                let (av, _, _) = mat(&a);
                let scale = max_norm(&av).max(1.0) * n as f64;
                assert!(
                    (p.value - full.values[0]).abs() <= 1e-12 * scale,
                    "{dtype} n={n}: {} vs {}",
                    p.value,
                    full.values[0]
                );
                // Unit norm, and the residual recomputed here.
                assert!((norm2(&p.vector) - 1.0).abs() < 1e-12);
                let ay = matmul(&av, &p.vector, n, n, 1);
                let r: Vec<C64> = ay.iter().zip(&p.vector).map(|(w, v)| w - v * p.value).collect();
                assert!(norm2(&r) <= 1e-11 * scale, "{dtype} n={n}: residual {}", norm2(&r));
                // The same eigenvector as the full decomposition's (up to phase).
                let (v, _, _) = mat(&full.vectors);
                let overlap: C64 = (0..n).map(|k| v[k * n].conj() * p.vector[k]).sum();
                assert!((overlap.norm() - 1.0).abs() < 1e-9, "{dtype} n={n}: overlap {overlap}");
                if dtype == DType::F64 {
                    assert!(p.vector.iter().all(|z| z.im == 0.0), "real in, real out");
                }
            }
        }
    }
}

#[test]
fn eigh_lowest_declines_a_degenerate_lowest_level_and_resolves_a_close_one() {
    // A = V diag(d) V^H for a random unitary V.
    let n = 12;
    for dtype in [DType::F64, DType::C64] {
        let basis = eigh(
            &hermitian(5, dtype, n),
            &EighOptions::default(),
            &EighBackendList::default_cpu(1),
        )
        .unwrap();
        let (v, _, _) = mat(&basis.vectors);
        let with_spectrum = |d: &[f64]| {
            let h: Vec<C64> = (0..n * n)
                .map(|idx| {
                    let (i, j) = (idx / n, idx % n);
                    (0..n).map(|k| v[i * n + k] * d[k] * v[j * n + k].conj()).sum()
                })
                .collect();
            from_c64(dtype, &[n, n], &h)
        };
        let start = rand_matrix(11, dtype, n, 1).to_c64_vec();
        // Three-fold lowest level: declined (the caller picks a vector in it).
        let d: Vec<f64> = (0..n)
            .map(|k| if k < 3 { -1.0 } else { 0.5 * (k - 2) as f64 })
            .collect();
        assert_eq!(
            eigh_lowest(&with_spectrum(&d), &start, &EighOptions::default(), 1).unwrap(),
            None
        );
        // A gap of 1e-8: resolved, the first column of V up to phase.
        let mut d2 = d.clone();
        d2[1] = -1.0 + 1e-8;
        d2[2] = -1.0 + 2e-8;
        let p = eigh_lowest(&with_spectrum(&d2), &start, &EighOptions::default(), 1)
            .unwrap()
            .unwrap();
        assert!((p.value + 1.0).abs() < 1e-12, "{dtype}: {}", p.value);
        let overlap: C64 = (0..n).map(|k| v[k * n].conj() * p.vector[k]).sum();
        assert!((overlap.norm() - 1.0).abs() < 1e-9, "{dtype}: overlap {overlap}");
    }
}

#[test]
fn eigh_lowest_declines_or_reports_bad_input() {
    let a = hermitian(3, DType::F64, 4);
    let start = vec![C64::new(1.0, 0.0); 4];
    // The wrong start length, a non-Hermitian matrix: typed errors.
    let e = eigh_lowest(&a, &start[..3], &EighOptions::default(), 1).unwrap_err();
    assert!(matches!(e, DecompError::InvalidOption { option: "start", .. }), "{e}");
    let mut x = a.to_c64_vec();
    x[1] += C64::new(0.5, 0.0);
    let e = eigh_lowest(&from_c64(DType::F64, &[4, 4], &x), &start, &EighOptions::default(), 1).unwrap_err();
    assert!(matches!(e, DecompError::NotHermitian { row: 0, col: 1, .. }), "{e}");
    // Single precision, a zero start, an empty matrix: not handled, use eigh.
    let f = hermitian(3, DType::F32, 4);
    assert_eq!(eigh_lowest(&f, &start, &EighOptions::default(), 1).unwrap(), None);
    let zero = vec![C64::new(0.0, 0.0); 4];
    assert_eq!(eigh_lowest(&a, &zero, &EighOptions::default(), 1).unwrap(), None);
    let empty = LocalTensor::zeros(DType::F64, &[0, 0]).unwrap();
    assert_eq!(eigh_lowest(&empty, &[], &EighOptions::default(), 1).unwrap(), None);
}

#[test]
fn eigh_lowest_takes_the_phase_of_the_starts_overlap() {
    // <start, y> real and positive: a real matrix with a real and with a complex start
    // (iterated in complex arithmetic), a complex matrix with a complex start.
    let n = 9;
    for (dtype, complex_start) in [(DType::F64, false), (DType::F64, true), (DType::C64, true)] {
        let a = hermitian(21, dtype, n);
        let start = rand_matrix(22, if complex_start { DType::C64 } else { DType::F64 }, n, 1).to_c64_vec();
        let p = eigh_lowest(&a, &start, &EighOptions::default(), 1).unwrap().unwrap();
        let overlap: C64 = start.iter().zip(&p.vector).map(|(s, y)| s.conj() * y).sum();
        assert!(
            overlap.re > 0.0,
            "{dtype} complex start {complex_start}: overlap {overlap}"
        );
        assert!(
            overlap.im.abs() <= 1e-12 * overlap.norm(),
            "{dtype} complex start {complex_start}: overlap {overlap}"
        );
        let full = eigh(&a, &EighOptions::default(), &EighBackendList::default_cpu(1)).unwrap();
        assert!((p.value - full.values[0]).abs() < 1e-12 * n as f64 * max_norm(&mat(&a).0).max(1.0));
        if complex_start && dtype == DType::F64 {
            assert!(
                p.vector.iter().any(|z| z.im != 0.0),
                "the complex start's phase is kept"
            );
        }
    }
}
