//! Property tests of the decompositions on random matrices of random shape and dtype: the
//! truncated SVD's invariants under random options (ordering, orthonormality, the
//! Eckart-Young error, the exact discarded weight, cutoff and weight targets, multiplets
//! never split unless reported), QR/LQ reconstruction, and eigh residuals; and the same
//! decompositions of `c A` for a random scale `c` over the dtype's normal range (`1e-307`
//! to `1e307`, `1e-37` to `1e37` in single precision), which must equal `c` times those of
//! `A` (values and triangular factors) at the unscaled tolerance.

mod kernels_common;

use kernels_common::*;
use proptest::prelude::*;
use uni20_dispatch::decomp::*;
use uni20_dispatch::*;

fn tol(dtype: DType) -> f64 {
    if eps(dtype) > 1e-10 {
        5e-5
    } else {
        1e-11
    }
}

fn arb_opts() -> impl Strategy<Value = SvdOptions> {
    (
        proptest::option::of(1usize..8),
        proptest::option::of(0.0f64..0.5),
        proptest::option::of(0.0f64..2.0),
        proptest::option::of(prop_oneof![Just(0.0), Just(1e-3), Just(0.2)]),
    )
        .prop_map(|(max_rank, max_discarded_weight, cutoff, degeneracy_rtol)| SvdOptions {
            max_rank,
            max_discarded_weight,
            cutoff,
            degeneracy_rtol,
        })
}

/// `10^t` for `t` in `-307..=307`, mapped onto `-37..=37` for single precision.
fn scale_of(dtype: DType, t: i32) -> f64 {
    let t = if eps(dtype) > 1e-10 { t * 37 / 307 } else { t };
    format!("1e{t}").parse().unwrap()
}

/// Max `|x / c - y|` relative to `max |y|`.
fn rel_scaled_diff(x: &LocalTensor, c: f64, y: &LocalTensor) -> f64 {
    let (x, y) = (x.to_c64_vec(), y.to_c64_vec());
    let d = x.iter().zip(&y).map(|(a, b)| (a / c - b).norm()).fold(0.0, f64::max);
    d / max_norm(&y)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn decompositions_commute_with_scaling(m in 1usize..10, n in 1usize..10, d in 0usize..4, seed in any::<u64>(), t in -307i32..=307) {
        let dtype = DType::ALL[d];
        let c = scale_of(dtype, t);
        let a0 = rand_matrix(seed, dtype, m, n);
        let a = scaled(&a0, c);
        let (av, _, _) = mat(&a);
        let k = m.min(n);
        // SVD: singular values c s(A), reconstruction and orthonormality.
        let svds = SvdBackendList::default_cpu(1);
        let (r0, r) = (svd(&a0, &SvdOptions::default(), &svds).unwrap(), svd(&a, &SvdOptions::default(), &svds).unwrap());
        for (x, y) in r.s.iter().zip(&r0.s) {
            prop_assert!((x / c - y).abs() <= tol(dtype) * r0.s[0], "scale {:e}: {} vs {}", c, x / c, y);
        }
        let (u, _, _) = mat(&r.u);
        let us: Vec<C64> = u.iter().enumerate().map(|(i, x)| x * r.s[i % k]).collect();
        let rec = max_diff(&matmul(&us, &mat(&r.vh).0, m, k, n), &av) / max_norm(&av);
        prop_assert!(rec <= tol(dtype), "scale {:e}: SVD reconstruction {}", c, rec);
        prop_assert!(column_orthonormality(&u, m, k) <= tol(dtype));
        // QR and LQ: R = c R(A), L = c L(A) (unique: a random matrix has full rank), to the
        // unscaled tolerance times the condition number (the first-order perturbation bound
        // of the factors for the rounding of c A).
        let cond = (r0.s[0] / r0.s[k - 1]).max(1.0);
        let qrs = QrBackendList::default_cpu(1);
        let (q0, q) = (qr(&a0, &qrs).unwrap(), qr(&a, &qrs).unwrap());
        prop_assert!(rel_scaled_diff(&q.r, c, &q0.r) <= tol(dtype) * cond, "scale {:e}: R", c);
        let rec = max_diff(&matmul(&mat(&q.q).0, &mat(&q.r).0, m, k, n), &av) / max_norm(&av);
        prop_assert!(rec <= tol(dtype), "scale {:e}: QR reconstruction {}", c, rec);
        let (l0, l) = (lq(&a0, &qrs).unwrap(), lq(&a, &qrs).unwrap());
        prop_assert!(rel_scaled_diff(&l.l, c, &l0.l) <= tol(dtype) * cond, "scale {:e}: L", c);
        // eigh of the Hermitian part of the square corner: eigenvalues c lambda(H).
        let x = rand_matrix(seed ^ 1, dtype, m, m).to_c64_vec();
        let h: Vec<C64> = (0..m * m).map(|k| (x[k] + x[(k % m) * m + k / m].conj()) * 0.5).collect();
        let h0 = from_c64(dtype, &[m, m], &h);
        let eighs = EighBackendList::default_cpu(1);
        let e0 = eigh(&h0, &EighOptions::default(), &eighs).unwrap();
        let e = eigh(&scaled(&h0, c), &EighOptions::default(), &eighs).unwrap();
        let top = e0.values.iter().fold(0.0f64, |acc, v| acc.max(v.abs()));
        for (x, y) in e.values.iter().zip(&e0.values) {
            prop_assert!((x / c - y).abs() <= tol(dtype) * top, "scale {:e}: {} vs {}", c, x / c, y);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn truncated_svd_invariants(m in 1usize..10, n in 1usize..10, d in 0usize..4, seed in any::<u64>(), opts in arb_opts()) {
        let dtype = DType::ALL[d];
        let a = rand_matrix(seed, dtype, m, n);
        let r = svd(&a, &opts, &SvdBackendList::default_cpu(1)).unwrap();
        let full = m.min(n);
        let k = r.kept;
        prop_assert!(k >= 1 && k <= full);
        prop_assert_eq!(r.s.len() + r.discarded.len(), full);
        if let Some(mr) = opts.max_rank { prop_assert!(k <= mr); }
        let all: Vec<f64> = r.s.iter().chain(&r.discarded).copied().collect();
        prop_assert!(all.windows(2).all(|w| w[0] >= w[1]));
        let total: f64 = all.iter().map(|x| x * x).sum();
        let disc: f64 = r.discarded.iter().map(|x| x * x).sum();
        prop_assert!((r.discarded_weight - disc / total).abs() <= 1e-13 * (disc / total) + 1e-300);
        // Each criterion alone (without max_rank) is met; together, each dropped value was
        // dropped by at least one of them.
        match (opts.max_rank, opts.cutoff, opts.max_discarded_weight) {
            (None, Some(c), None) => prop_assert!(r.discarded.iter().all(|&x| x <= c)),
            (None, None, Some(w)) => prop_assert!(r.discarded_weight <= w),
            (None, Some(c), Some(w)) => {
                let beyond_cut = r.discarded.iter().filter(|&&x| x > c).map(|x| x * x).sum::<f64>();
                prop_assert!(beyond_cut / total <= w * (1.0 + 1e-12));
            }
            _ => {}
        }
        let rtol = opts.degeneracy_rtol.unwrap_or(if eps(dtype) > 1e-10 { 1e-5 } else { 1e-12 });
        if !r.degenerate_split && k < full {
            prop_assert!(all[k - 1] - all[k] > rtol * all[0], "cut inside a multiplet: {:?} at {}", all, k);
        }
        // Orthonormal factors and the Eckart-Young error: |A - U S Vh|_F^2 = sum discarded^2.
        let (u, _, _) = mat(&r.u);
        let (vh, _, _) = mat(&r.vh);
        prop_assert!(column_orthonormality(&u, m, k) <= tol(dtype));
        prop_assert!(row_orthonormality(&vh, k, n) <= tol(dtype));
        let us: Vec<C64> = u.iter().enumerate().map(|(i, x)| x * r.s[i % k]).collect();
        let rec = matmul(&us, &vh, m, k, n);
        let err: f64 = rec.iter().zip(a.to_c64_vec()).map(|(x, y)| (x - y).norm_sqr()).sum();
        prop_assert!((err - disc).abs() <= tol(dtype) * total, "{} vs {}", err, disc);
    }

    #[test]
    fn qr_lq_reconstruct(m in 1usize..12, n in 1usize..12, d in 0usize..4, seed in any::<u64>()) {
        let dtype = DType::ALL[d];
        let a = rand_matrix(seed, dtype, m, n);
        let (av, _, _) = mat(&a);
        let k = m.min(n);
        let list = QrBackendList::default_cpu(1);
        let q = qr(&a, &list).unwrap();
        let (qq, _, _) = mat(&q.q);
        let (rr, _, _) = mat(&q.r);
        prop_assert!(max_diff(&matmul(&qq, &rr, m, k, n), &av) <= tol(dtype));
        prop_assert!(column_orthonormality(&qq, m, k) <= tol(dtype));
        let l = lq(&a, &list).unwrap();
        let (ll, _, _) = mat(&l.l);
        let (lq_q, _, _) = mat(&l.q);
        prop_assert!(max_diff(&matmul(&ll, &lq_q, m, k, n), &av) <= tol(dtype));
        prop_assert!(row_orthonormality(&lq_q, k, n) <= tol(dtype));
    }

    #[test]
    fn eigh_residuals(n in 1usize..12, d in 0usize..4, seed in any::<u64>()) {
        let dtype = DType::ALL[d];
        let x = rand_matrix(seed, dtype, n, n).to_c64_vec();
        let h: Vec<C64> = (0..n * n).map(|k| (x[k] + x[(k % n) * n + k / n].conj()) * 0.5).collect();
        let a = from_c64(dtype, &[n, n], &h);
        let (av, _, _) = mat(&a);
        let r = eigh(&a, &EighOptions::default(), &EighBackendList::default_cpu(1)).unwrap();
        prop_assert!(r.values.windows(2).all(|w| w[0] <= w[1]));
        let (v, _, _) = mat(&r.vectors);
        let avv = matmul(&av, &v, n, n, n);
        let lv: Vec<C64> = v.iter().enumerate().map(|(i, z)| z * r.values[i % n]).collect();
        let bound = if eps(dtype) > 1e-10 { 1e-4 } else { 1e-10 };
        prop_assert!(max_diff(&avv, &lv) <= bound);
        prop_assert!(column_orthonormality(&v, n, n) <= tol(dtype));
    }
}
