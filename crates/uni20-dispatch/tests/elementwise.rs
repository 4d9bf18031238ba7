//! Element-wise kernels against a naive reference (exact equality), their typed errors,
//! thread-budget invariance, and the reductions against naive sums.

mod kernels_common;

use kernels_common::*;
use proptest::prelude::*;
use uni20_dispatch::*;

/// Naive `alpha * op(a) + beta * op(b)`: for every output index in row-major order, the
/// operand element at the permuted index, computed in `C64` and narrowed to `out`.
fn naive(
    alpha: C64,
    a: &LocalTensor,
    pa: &[usize],
    ca: bool,
    beta: C64,
    b: Option<(&LocalTensor, &[usize], bool)>,
    out: DType,
) -> LocalTensor {
    let shape: Vec<usize> = pa.iter().map(|&p| a.shape()[p]).collect();
    let n: usize = shape.iter().product();
    let (av, bv) = (a.to_c64_vec(), b.map(|(t, _, _)| t.to_c64_vec()));
    let at = |t: &LocalTensor, v: &[C64], perm: &[usize], idx: &[usize]| -> C64 {
        let mut src = vec![0; idx.len()];
        for (k, &p) in perm.iter().enumerate() {
            src[p] = idx[k];
        }
        let flat = src.iter().zip(t.shape()).fold(0, |acc, (&i, &d)| acc * d + i);
        v[flat]
    };
    let mut vals = Vec::with_capacity(n);
    for flat in 0..n {
        let mut idx = vec![0; shape.len()];
        let mut rem = flat;
        for d in (0..shape.len()).rev() {
            idx[d] = rem % shape[d];
            rem /= shape[d];
        }
        let x = at(a, &av, pa, &idx);
        let mut v = alpha * if ca { x.conj() } else { x };
        if let Some((bt, pb, cb)) = b {
            if beta != C64::new(0.0, 0.0) {
                let y = at(bt, bv.as_deref().unwrap_or(&[]), pb, &idx);
                v += beta * if cb { y.conj() } else { y };
            }
        }
        vals.push(v);
    }
    from_c64(out, &shape, &vals)
}

fn tensor(seed: u64, dtype: DType, shape: &[usize]) -> LocalTensor {
    let zero = vec![0; shape.len()];
    random_block(seed, dtype, shape, &zero, shape).unwrap()
}

/// (shape of a, perm_a, perm_b, dtype index of a, of b, conj_a, conj_b, seed).
type Case = (Vec<usize>, Vec<usize>, Vec<usize>, usize, usize, bool, bool, u64);

fn arb_case() -> impl Strategy<Value = Case> {
    (0usize..=4).prop_flat_map(|rank| {
        (
            proptest::collection::vec(0usize..4, rank),
            Just((0..rank).collect::<Vec<_>>()).prop_shuffle(),
            Just((0..rank).collect::<Vec<_>>()).prop_shuffle(),
            0usize..4,
            0usize..4,
            any::<bool>(),
            any::<bool>(),
            any::<u64>(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// axpby equals the naive reference bit for bit, for every dtype pair, permutation
    /// and conjugation.
    #[test]
    fn axpby_matches_naive((shape, pa, pb, da, db, ca, cb, seed) in arb_case()) {
        let (da, db) = (DType::ALL[da], DType::ALL[db]);
        let a = tensor(seed, da, &shape);
        // b's stored shape is such that permuting it by pb gives op(a)'s shape.
        let out_shape: Vec<usize> = pa.iter().map(|&p| shape[p]).collect();
        let mut b_shape = vec![0; shape.len()];
        for (k, &p) in pb.iter().enumerate() {
            b_shape[p] = out_shape[k];
        }
        let b = tensor(seed ^ 1, db, &b_shape);
        let out = da.promote(db);
        let (alpha, beta) = if out.is_complex() {
            (C64::new(0.75, -1.5), C64::new(-2.0, 0.25))
        } else {
            (C64::new(0.75, 0.0), C64::new(-2.0, 0.0))
        };
        let got = axpby(alpha, &a, &pa, ca, beta, Some((&b, &pb, cb)), None, 2).unwrap();
        prop_assert_eq!(&got, &naive(alpha, &a, &pa, ca, beta, Some((&b, &pb, cb)), out));
        let got = axpby(alpha, &a, &pa, ca, beta, None, Some(DType::C64), 1).unwrap();
        prop_assert_eq!(&got, &naive(alpha, &a, &pa, ca, beta, None, DType::C64));
        prop_assert_eq!(permute(&a, &pa, 1).unwrap(), naive(C64::new(1.0, 0.0), &a, &pa, false, beta, None, da));
    }
}

#[test]
fn thread_budget_does_not_change_results() {
    let a = tensor(1, DType::C64, &[64, 33, 40]);
    let b = tensor(2, DType::F32, &[40, 64, 33]);
    let (alpha, beta) = (C64::new(0.5, 0.5), C64::new(1.5, 0.0));
    let run = |t| {
        axpby(
            alpha,
            &a,
            &[2, 0, 1],
            true,
            beta,
            Some((&b, &[0, 1, 2][..], false)),
            None,
            t,
        )
        .unwrap()
    };
    let one = run(1);
    assert_eq!(
        one,
        naive(
            alpha,
            &a,
            &[2, 0, 1],
            true,
            beta,
            Some((&b, &[0, 1, 2], false)),
            DType::C64
        )
    );
    for t in [2, 3, 7, 64] {
        assert_eq!(run(t), one, "threads {t}");
    }
    let big = tensor(3, DType::F64, &[300, 257]);
    let n1 = norm_sqr(&big, 1);
    let i1 = inner(&big, &big, 1).unwrap();
    let m1 = max_abs(&big, 1);
    for t in [2, 5] {
        assert_eq!(norm_sqr(&big, t), n1);
        assert_eq!(inner(&big, &big, t).unwrap(), i1);
        assert_eq!(max_abs(&big, t), m1);
    }
}

#[test]
fn tiled_transposes_match_naive() {
    let cases: [(&[usize], &[usize], &[usize]); 6] = [
        (&[70, 45], &[1, 0], &[0, 1]),
        (&[3, 40, 37], &[2, 0, 1], &[1, 2, 0]),
        (&[3, 40, 37], &[1, 2, 0], &[0, 1, 2]),
        (&[5, 33, 2, 35], &[3, 1, 0, 2], &[2, 1, 3, 0]),
        (&[5, 33, 2, 35], &[0, 3, 2, 1], &[0, 1, 2, 3]),
        // Large enough to be split across threads, contiguous axis in the middle.
        (&[40, 30, 33], &[1, 2, 0], &[2, 0, 1]),
    ];
    for (k, (shape, pa, pb)) in cases.into_iter().enumerate() {
        let a = tensor(k as u64, DType::C64, shape);
        let out: Vec<usize> = pa.iter().map(|&p| shape[p]).collect();
        let mut b_shape = vec![0; shape.len()];
        for (i, &p) in pb.iter().enumerate() {
            b_shape[p] = out[i];
        }
        let b = tensor(50 + k as u64, DType::F64, &b_shape);
        let (alpha, beta) = (C64::new(0.5, -0.25), C64::new(2.0, 1.0));
        let want = naive(alpha, &a, pa, true, beta, Some((&b, pb, false)), DType::C64);
        for t in [1, 2, 3] {
            let got = axpby(alpha, &a, pa, true, beta, Some((&b, pb, false)), None, t).unwrap();
            assert_eq!(got, want, "case {k}, threads {t}");
        }
        let want = naive(C64::new(1.0, 0.0), &b, pb, false, beta, None, DType::F64);
        assert_eq!(permute(&b, pb, 2).unwrap(), want, "permute case {k}");
    }
}

#[test]
fn wrappers_scale_conj_permute() {
    let c = LocalTensor::from_c64(&[2, 1], vec![C64::new(1.0, 2.0), C64::new(-3.0, 0.5)]).unwrap();
    assert_eq!(
        conj(&c, 1).unwrap(),
        LocalTensor::from_c64(&[2, 1], vec![C64::new(1.0, -2.0), C64::new(-3.0, -0.5)]).unwrap()
    );
    assert_eq!(
        scale(C64::new(0.0, 1.0), &c, 1).unwrap(),
        LocalTensor::from_c64(&[2, 1], vec![C64::new(-2.0, 1.0), C64::new(-0.5, -3.0)]).unwrap()
    );
    let r = LocalTensor::from_f64(&[2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    assert_eq!(
        permute(&r, &[1, 0], 1).unwrap(),
        LocalTensor::from_f64(&[3, 2], vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]).unwrap()
    );
    assert_eq!(conj(&r, 1).unwrap(), r);
    assert_eq!(
        scale(C64::new(-0.5, 0.0), &r, 1).unwrap().to_c64_vec()[5],
        C64::new(-2.5, 0.0)
    );
    let s = LocalTensor::from_f64(&[], vec![4.0]).unwrap();
    assert_eq!(
        scale(C64::new(0.25, 0.0), &s, 1).unwrap(),
        LocalTensor::from_f64(&[], vec![1.0]).unwrap()
    );
    let e = LocalTensor::zeros(DType::C32, &[3, 0]).unwrap();
    assert_eq!(permute(&e, &[1, 0], 4).unwrap().shape(), &[0, 3]);
}

#[test]
fn axpby_errors_are_typed() {
    let a = LocalTensor::from_f64(&[2, 3], vec![1.0; 6]).unwrap();
    let b = LocalTensor::from_f64(&[2, 3], vec![1.0; 6]).unwrap();
    let one = C64::new(1.0, 0.0);
    assert_eq!(
        scale(C64::new(0.0, 1.0), &a, 1).unwrap_err(),
        ElementwiseError::ComplexScalarForRealOutput {
            which: "alpha",
            value: C64::new(0.0, 1.0),
            dtype: DType::F64
        }
    );
    // A complex beta with `b` present, into the output dtype `out`.
    let complex_beta = |out: Option<DType>| {
        axpby(
            one,
            &a,
            &[0, 1],
            false,
            C64::new(1.0, -1.0),
            Some((&b, &[0, 1], false)),
            out,
            1,
        )
    };
    assert!(matches!(
        complex_beta(None),
        Err(ElementwiseError::ComplexScalarForRealOutput { which: "beta", .. })
    ));
    // A complex beta is fine when b is absent (beta is ignored) or the output is complex.
    assert!(axpby(one, &a, &[0, 1], false, C64::new(1.0, -1.0), None, None, 1).is_ok());
    assert!(complex_beta(Some(DType::C32)).is_err());
    assert!(complex_beta(Some(DType::C64)).is_ok());
    assert_eq!(
        axpby(one, &a, &[0, 1], false, one, Some((&b, &[1, 0], false)), None, 1).unwrap_err(),
        ElementwiseError::ShapeMismatch {
            expected: vec![2, 3],
            got: vec![3, 2]
        }
    );
    for bad in [&[0, 0][..], &[0][..], &[0, 2][..], &[0, 1, 2][..]] {
        assert!(matches!(
            permute(&a, bad, 1),
            Err(ElementwiseError::BadPermutation {
                operand: 'a',
                rank: 2,
                ..
            })
        ));
    }
    assert!(matches!(
        axpby(one, &a, &[0, 1], false, one, Some((&b, &[1, 1], false)), None, 1),
        Err(ElementwiseError::BadPermutation { operand: 'b', .. })
    ));
    assert_eq!(
        axpby(one, &a, &[0, 1], false, one, None, Some(DType::F32), 1).unwrap_err(),
        ElementwiseError::NarrowingOutput {
            from: DType::F64,
            to: DType::F32
        }
    );
    // beta == 0: b is not read, so a NaN there does not leak.
    let nan = LocalTensor::from_f64(&[2, 3], vec![f64::NAN; 6]).unwrap();
    let got = axpby(
        one,
        &a,
        &[0, 1],
        false,
        C64::new(0.0, 0.0),
        Some((&nan, &[0, 1], false)),
        None,
        1,
    )
    .unwrap();
    assert_eq!(got, a);
}

#[test]
fn reshape_fuses_and_splits_without_touching_data() {
    let t = tensor(9, DType::C32, &[2, 3, 4]);
    let fused = reshape(&t, &[6, 4]).unwrap();
    assert_eq!(fused.shape(), &[6, 4]);
    assert_eq!(fused.as_bytes(), t.as_bytes());
    let split = reshape_owned(fused, &[2, 3, 2, 2]).unwrap();
    assert_eq!(split.as_bytes(), t.as_bytes());
    assert_eq!(reshape(&t, &[24]).unwrap().to_c64_vec(), t.to_c64_vec());
    assert_eq!(
        reshape(&t, &[5, 5]).unwrap_err(),
        ElementwiseError::ElementCount {
            from: vec![2, 3, 4],
            from_len: 24,
            to: vec![5, 5]
        }
    );
    assert!(reshape(&t, &[usize::MAX, 3]).is_err());
    let one = LocalTensor::from_f64(&[1, 1], vec![7.0]).unwrap();
    assert_eq!(
        reshape(&one, &[]).unwrap(),
        LocalTensor::from_f64(&[], vec![7.0]).unwrap()
    );
    let empty = LocalTensor::zeros(DType::F64, &[0, 5]).unwrap();
    assert_eq!(reshape(&empty, &[5, 0, 2]).unwrap().shape(), &[5, 0, 2]);
}

#[test]
fn reductions_match_naive_sums() {
    for (i, dtype) in DType::ALL.into_iter().enumerate() {
        let a = tensor(i as u64, dtype, &[37, 29]);
        let b = tensor(100 + i as u64, DType::C64, &[37, 29]);
        let (x, y) = (a.to_c64_vec(), b.to_c64_vec());
        let dot: C64 = x.iter().zip(&y).map(|(p, q)| p.conj() * q).sum();
        let got = inner(&a, &b, 1).unwrap();
        assert!((got - dot).norm() <= 1e-13 * dot.norm().max(1.0), "{dtype}");
        let nsq: f64 = x.iter().map(|p| p.norm_sqr()).sum();
        assert!((norm_sqr(&a, 1) - nsq).abs() <= 1e-13 * nsq);
        assert_eq!(max_abs(&a, 1), x.iter().map(|p| p.norm()).fold(0.0, f64::max));
        // inner(a, a) is real and equals norm_sqr.
        let aa = inner(&a, &a, 1).unwrap();
        assert_eq!(aa.im, 0.0);
        assert!((aa.re - norm_sqr(&a, 1)).abs() <= 1e-14 * nsq);
    }
    let e = LocalTensor::zeros(DType::F32, &[0, 3]).unwrap();
    assert_eq!((norm_sqr(&e, 2), max_abs(&e, 2)), (0.0, 0.0));
    assert_eq!(inner(&e, &e, 1).unwrap(), C64::new(0.0, 0.0));
    let a = LocalTensor::zeros(DType::F64, &[2, 3]).unwrap();
    let b = LocalTensor::zeros(DType::F64, &[3, 2]).unwrap();
    assert_eq!(
        inner(&a, &b, 1).unwrap_err(),
        ElementwiseError::ShapeMismatch {
            expected: vec![2, 3],
            got: vec![3, 2]
        }
    );
    let mut v = vec![C64::new(1.0, 0.0); 3000];
    v[2500] = C64::new(0.0, f64::NAN);
    let nan = from_c64(DType::C64, &[3000], &v);
    assert!(max_abs(&nan, 1).is_nan() && max_abs(&nan, 3).is_nan());
    assert!(norm_sqr(&nan, 1).is_nan());
}

/// Naive `sum_k c_k x_k` in `C64`, narrowed to `out`.
fn naive_lincomb(terms: &[(C64, &LocalTensor)], out: DType) -> LocalTensor {
    let shape = terms[0].1.shape().to_vec();
    let mut vals = vec![C64::new(0.0, 0.0); shape.iter().product()];
    for (c, t) in terms {
        for (v, x) in vals.iter_mut().zip(t.to_c64_vec()) {
            *v += c * x;
        }
    }
    from_c64(out, &shape, &vals)
}

#[test]
fn lincomb_matches_the_naive_sum_for_every_thread_budget() {
    let c = |re: f64, im: f64| C64::new(re, im);
    // Large enough to be split into parallel chunks (2^15 elements and more).
    for shape in [vec![3, 5], vec![64, 40, 16], vec![7], vec![]] {
        for (dt, coefs) in [
            (DType::F64, vec![c(0.5, 0.0), c(-1.25, 0.0), c(3.0, 0.0)]),
            (DType::F32, vec![c(1.0 / 3.0, 0.0), c(2.0, 0.0)]),
            (DType::C64, vec![c(0.5, -2.0), c(-1.0, 0.25), c(0.0, 1.0), c(2.0, 0.0)]),
        ] {
            let ts: Vec<LocalTensor> = (0..coefs.len()).map(|k| tensor(40 + k as u64, dt, &shape)).collect();
            let terms: Vec<(C64, &LocalTensor)> = coefs.iter().copied().zip(&ts).collect();
            let want = naive_lincomb(&terms, dt);
            for threads in [1, 2, 3] {
                let got = lincomb(&terms, None, threads).unwrap();
                assert_eq!(got, want, "{shape:?} {dt:?} threads {threads}");
            }
        }
    }
    // Mixed dtypes promote (f32 + c64 -> c64), and an explicit wider output is honoured.
    let (a, b) = (tensor(1, DType::F32, &[4, 4]), tensor(2, DType::C64, &[4, 4]));
    let terms = [(c(2.0, 0.0), &a), (c(0.0, -1.0), &b)];
    assert_eq!(lincomb(&terms, None, 1).unwrap(), naive_lincomb(&terms, DType::C64));
    let one = [(c(1.5, 0.0), &a)];
    assert_eq!(
        lincomb(&one, Some(DType::F64), 1).unwrap(),
        naive_lincomb(&one, DType::F64)
    );
}

#[test]
fn lincomb_skips_zero_terms_and_reports_typed_errors() {
    let c = |re: f64, im: f64| C64::new(re, im);
    let a = tensor(3, DType::F64, &[2, 3]);
    let nan = from_c64(DType::F64, &[2, 3], &[C64::new(f64::NAN, 0.0); 6]);
    // A zero coefficient does not read its term: no NaN leaks.
    let got = lincomb(&[(c(2.0, 0.0), &a), (c(0.0, 0.0), &nan)], None, 1).unwrap();
    assert_eq!(got, naive_lincomb(&[(c(2.0, 0.0), &a)], DType::F64));
    // Nor does a zero first coefficient (the first term still fixes shape and dtype).
    let got = lincomb(&[(c(0.0, 0.0), &nan), (c(-1.5, 0.0), &a)], None, 1).unwrap();
    assert_eq!(got, naive_lincomb(&[(c(-1.5, 0.0), &a)], DType::F64));
    let big_nan = from_c64(DType::C64, &[300, 300], &vec![C64::new(f64::NAN, 0.0); 90_000]);
    let big = tensor(5, DType::C64, &[300, 300]);
    for threads in [1, 2, 3] {
        let got = lincomb(&[(c(0.0, 0.0), &big_nan), (c(0.5, 1.0), &big)], None, threads).unwrap();
        assert_eq!(
            got,
            naive_lincomb(&[(c(0.5, 1.0), &big)], DType::C64),
            "threads={threads}"
        );
    }
    assert_eq!(lincomb(&[], None, 1), Err(ElementwiseError::NoTerms));
    let wrong = tensor(4, DType::F64, &[3, 2]);
    assert_eq!(
        lincomb(&[(c(1.0, 0.0), &a), (c(1.0, 0.0), &wrong)], None, 1),
        Err(ElementwiseError::ShapeMismatch {
            expected: vec![2, 3],
            got: vec![3, 2]
        })
    );
    assert!(matches!(
        lincomb(&[(c(1.0, 0.0), &a), (c(0.0, 1.0), &a)], None, 1),
        Err(ElementwiseError::ComplexScalarForRealOutput {
            which: "coefficient",
            ..
        })
    ));
    assert!(matches!(
        lincomb(&[(c(1.0, 0.0), &a)], Some(DType::F32), 1),
        Err(ElementwiseError::NarrowingOutput {
            from: DType::F64,
            to: DType::F32
        })
    ));
}
