//! Property tests on strided operands: every backend against the reference backend on random
//! specs (up to 6 modes, extents 0-6, sometimes a label repeated within an operand), random
//! layouts (permuted storage, padding, negative,
//! zero and size-1 strides), conjugation flags, alpha in {0, 1, 2.5-0.5i}, beta in
//! {0, 1, -0.75}, all four dtypes; both `contract_views` and `contract_into`.

mod kernels_common;

use std::sync::Arc;

use kernels_common::{random_values, Rng};
use proptest::prelude::*;
use uni20_dispatch::backends::*;
use uni20_dispatch::view::*;
use uni20_dispatch::*;
/// A random layout for `shape`: returns (storage length, strides, offset). Storage order is
/// a random permutation with random padding; each mode may be reversed (negative stride) and,
/// if `broadcast` is allowed, may get stride 0.
fn layout(rng: &mut Rng, shape: &[usize], broadcast: bool) -> (usize, Vec<isize>, usize) {
    let r = shape.len();
    let mut order: Vec<usize> = (0..r).collect();
    rng.shuffle(&mut order);
    let mut strides = vec![0isize; r];
    let mut acc = 1 + rng.below(2) as isize;
    for &k in order.iter().rev() {
        strides[k] = acc;
        acc = acc * shape[k].max(1) as isize + rng.below(2) as isize;
    }
    for s in strides.iter_mut() {
        if rng.below(4) == 0 {
            *s = -*s;
        }
        if broadcast && rng.below(8) == 0 {
            *s = 0;
        }
    }
    if shape.contains(&0) {
        return (rng.below(3), strides, 0);
    }
    let (mut min, mut max) = (0isize, 0isize);
    for (&n, &s) in shape.iter().zip(&strides) {
        let span = (n as isize - 1) * s;
        if span < 0 {
            min += span;
        } else {
            max += span;
        }
    }
    ((max - min + 1) as usize, strides, (-min) as usize)
}
/// Backends under test. Each list but one holds one backend, so acceptance is that
/// backend's; with the `blas` feature, BLAS copying odd strides (accepts everything) and
/// `[blas, faer]` with BLAS declining odd strides (either may run).
fn lists(threads: usize) -> Vec<BackendList> {
    #[cfg_attr(not(any(feature = "cuda", feature = "blas")), allow(unused_mut))]
    let mut v = vec![BackendList::new(vec![Arc::new(FaerBackend::new(threads))])];
    #[cfg(feature = "blas")]
    {
        v.push(BackendList::new(vec![Arc::new(
            BlasBackend::new(threads).copying(true),
        )]));
        v.push(BackendList::new(vec![
            Arc::new(BlasBackend::new(threads)),
            Arc::new(FaerBackend::new(threads)),
        ]));
    }
    #[cfg(feature = "cuda")]
    {
        let cuda = CudaBackend::new();
        if cuda.availability().is_ok() {
            v.push(BackendList::new(vec![Arc::new(cuda)]));
        }
    }
    v
}

/// The attempt log of a successful dispatch through `list`: every backend before the last
/// declined with a reason, the last accepted.
fn check_attempts(list: &BackendList, attempts: &[KernelAttempt]) -> Result<(), TestCaseError> {
    let (last, before) = attempts.split_last().expect("a successful dispatch logs its backend");
    prop_assert_eq!(&last.outcome, &AttemptOutcome::Accepted);
    prop_assert!(list.names().contains(&last.backend.as_str()));
    for a in before {
        match &a.outcome {
            AttemptOutcome::Declined(r) => prop_assert!(r.contains("BLAS cannot express"), "{}", r),
            other => prop_assert!(false, "{} {:?}", a.backend, other),
        }
    }
    Ok(())
}

#[derive(Clone, Debug)]
struct Case {
    spec: ResolvedSpec,
    dims: Vec<(char, usize)>,
    seed: u64,
    conj: [bool; 3],
    alpha_i: usize,
    beta_i: usize,
    with_c: bool,
    threads: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((0usize..=6, 1u8..=3, any::<bool>()), 1..=6),
        any::<u64>(),
        any::<[bool; 3]>(),
        0usize..3,
        0usize..3,
        any::<bool>(),
        prop::sample::select(vec![1usize, 2]),
    )
        .prop_map(|(labels, seed, conj, alpha_i, beta_i, with_c, threads)| {
            let mut rng = Rng(seed ^ 0x5EED);
            let names: Vec<char> = "pqrstu".chars().collect();
            let (mut a, mut b, mut out) = (Vec::new(), Vec::new(), Vec::new());
            // Keep the total element count small: extents above 3 only for the first labels.
            let mut dims = Vec::new();
            for (k, &(d, m, o)) in labels.iter().enumerate() {
                let d = if k >= 3 { d.min(3) } else { d };
                dims.push((names[k], d));
                if m & 1 != 0 {
                    a.push(names[k]);
                }
                if m & 2 != 0 {
                    b.push(names[k]);
                }
                if o {
                    out.push(names[k]);
                }
            }
            // Now and then a label repeated within an operand (a diagonal of the strided view).
            for ops in [&mut a, &mut b] {
                if !ops.is_empty() && rng.below(3) == 0 {
                    let l = ops[rng.below(ops.len())];
                    ops.push(l);
                }
            }
            rng.shuffle(&mut a);
            rng.shuffle(&mut b);
            rng.shuffle(&mut out);
            Case {
                spec: ResolvedSpec::new(&[&a, &b], &out).unwrap(),
                dims,
                seed,
                conj,
                alpha_i,
                beta_i,
                with_c,
                threads,
            }
        })
}

fn check<T: Element>(case: &Case) -> Result<(), TestCaseError> {
    let mut rng = Rng(case.seed);
    let spec = &case.spec;
    let dim = |l: &char| case.dims.iter().find(|(x, _)| x == l).map_or(0, |&(_, d)| d);
    let a_shape: Vec<usize> = spec.inputs()[0].iter().map(dim).collect();
    let b_shape: Vec<usize> = spec.inputs()[1].iter().map(dim).collect();
    let out_shape: Vec<usize> = spec.output().iter().map(dim).collect();

    let (na, sa, oa) = layout(&mut rng, &a_shape, true);
    let (nb, sb, ob) = layout(&mut rng, &b_shape, true);
    let (nc, sc, oc) = layout(&mut rng, &out_shape, false);
    let ad: Vec<T> = random_values(&mut rng, na);
    let bd: Vec<T> = random_values(&mut rng, nb);
    let cd: Vec<T> = random_values(&mut rng, nc);
    let a = StridedView::new(&ad, &a_shape, &sa, oa, case.conj[0]).unwrap();
    let b = StridedView::new(&bd, &b_shape, &sb, ob, case.conj[1]).unwrap();
    let c = StridedView::new(&cd, &out_shape, &sc, oc, case.conj[2]).unwrap();
    let complex = T::DTYPE.is_complex();
    let alpha = [
        C64::new(0.0, 0.0),
        C64::new(1.0, 0.0),
        C64::new(2.5, if complex { -0.5 } else { 0.0 }),
    ][case.alpha_i];
    let beta = C64::new([0.0, 1.0, -0.75][case.beta_i], 0.0);
    let c_opt = case.with_c.then_some(&c);

    let reference = BackendList::reference_only();
    let (expected, _) = contract_views(spec, alpha, &a, &b, beta, c_opt, &reference).unwrap();
    prop_assert_eq!(expected.shape(), out_shape.as_slice());
    prop_assert_eq!(expected.dtype(), T::DTYPE);

    // Independent oracle for the reference itself: contiguous copies (conj applied).
    let flat = contract(
        spec,
        alpha,
        &a.to_tensor().unwrap(),
        &b.to_tensor().unwrap(),
        beta,
        c_opt.map(|c| c.to_tensor().unwrap()).as_ref(),
        &reference,
    )
    .unwrap();
    prop_assert_eq!(flat.max_abs_diff(&expected), Some(0.0));
    // And the standalone oracle, which reads repeated labels through summed strides itself
    // (not through the diagonal views the problem builds).
    let naive = reference_contract(spec, alpha, &[&a, &b], beta, c_opt).unwrap();
    let naive = LocalTensor::from_data(&out_shape, T::wrap(naive)).unwrap();
    prop_assert_eq!(naive.max_abs_diff(&expected), Some(0.0));

    let maxabs = |v: &[T]| v.iter().map(|z| z.to_c64().norm()).fold(0.0f64, f64::max);
    let inner: usize = case
        .dims
        .iter()
        .filter(|(l, _)| !spec.output().contains(l))
        .map(|&(_, d)| d)
        .product();
    let scale = 1.0 + alpha.norm() * maxabs(&ad) * maxabs(&bd) * inner as f64 + beta.norm() * maxabs(&cd);
    let tol = if matches!(T::DTYPE, DType::F32 | DType::C32) {
        1e-5
    } else {
        1e-12
    } * scale;

    for list in lists(case.threads) {
        let (got, attempts) = contract_views(spec, alpha, &a, &b, beta, c_opt, &list).unwrap();
        check_attempts(&list, &attempts)?;
        let name = attempts.last().map_or("", |a| a.backend.as_str()).to_string();
        let diff = got.max_abs_diff(&expected).unwrap();
        prop_assert!(diff <= tol, "{} views: spec {} diff {} tol {}", name, spec, diff, tol);

        // In place through a strided C: the view's elements get the result, padding is kept.
        let mut store = cd.clone();
        let before = store.clone();
        let mut cm = StridedViewMut::new(&mut store, &out_shape, &sc, oc).unwrap();
        let c_in = if case.with_c { beta } else { C64::new(0.0, 0.0) };
        // contract_into reads C unconjugated: compare against the reference with conj off.
        let c_plain = StridedView::new(&before, &out_shape, &sc, oc, false).unwrap();
        let (exp_into, _) = contract_views(spec, alpha, &a, &b, c_in, Some(&c_plain), &reference).unwrap();
        let attempts = contract_into(spec, alpha, &a, &b, c_in, &mut cm, &list).unwrap();
        check_attempts(&list, &attempts)?;
        let written = StridedView::new(&store, &out_shape, &sc, oc, false)
            .unwrap()
            .to_tensor()
            .unwrap();
        let diff = written.max_abs_diff(&exp_into).unwrap();
        prop_assert!(diff <= tol, "{} into: spec {} diff {} tol {}", name, spec, diff, tol);
        // Elements outside the view are untouched.
        let mut touched = vec![false; store.len()];
        if !out_shape.contains(&0) {
            let n: usize = out_shape.iter().product();
            let mut idx = vec![0usize; out_shape.len()];
            for _ in 0..n {
                let off = oc as isize + idx.iter().zip(&sc).map(|(&i, &s)| i as isize * s).sum::<isize>();
                touched[off as usize] = true;
                for k in (0..idx.len()).rev() {
                    idx[k] += 1;
                    if idx[k] < out_shape[k] {
                        break;
                    }
                    idx[k] = 0;
                }
            }
        }
        for (i, t) in touched.iter().enumerate() {
            if !t {
                prop_assert_eq!(store[i], before[i]);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn backends_match_reference_on_strided_views(case in case(), dt in prop::sample::select(DType::ALL.to_vec())) {
        match dt {
            DType::F32 => check::<f32>(&case)?,
            DType::F64 => check::<f64>(&case)?,
            DType::C32 => check::<C32>(&case)?,
            DType::C64 => check::<C64>(&case)?,
        }
    }
}

#[test]
fn nan_in_c_with_beta_zero_does_not_leak_in_place() {
    let spec = EinsumSpec::parse("ij,jk->ik").unwrap();
    let a = [1.0f64, 2.0, 3.0, 4.0];
    let b = [1.0f64, 0.0, 0.0, 1.0];
    let av = StridedView::row_major(&a, &[2, 2]).unwrap();
    let bv = StridedView::row_major(&b, &[2, 2]).unwrap();
    for list in lists(1).into_iter().chain([BackendList::reference_only()]) {
        let mut c = [f64::NAN; 4];
        // C transposed through its strides.
        let mut cm = StridedViewMut::new(&mut c, &[2, 2], &[1, 2], 0).unwrap();
        contract_into(&spec, C64::new(1.0, 0.0), &av, &bv, C64::new(0.0, 0.0), &mut cm, &list).unwrap();
        assert_eq!(c, [1.0, 3.0, 2.0, 4.0], "{:?}", list.names());
    }
}

#[test]
fn zero_size_contracted_dim_gives_beta_c_in_place() {
    let spec = EinsumSpec::parse("ij,jk->ik").unwrap();
    let empty: [C64; 0] = [];
    let a = StridedView::row_major(&empty, &[2, 0]).unwrap();
    let b = StridedView::row_major(&empty, &[0, 2]).unwrap();
    for list in lists(1).into_iter().chain([BackendList::reference_only()]) {
        let mut c: Vec<C64> = (0..4).map(|x| C64::new(x as f64, 1.0)).collect();
        let mut cm = StridedViewMut::row_major(&mut c, &[2, 2]).unwrap();
        contract_into(&spec, C64::new(3.0, 0.0), &a, &b, C64::new(0.0, 2.0), &mut cm, &list).unwrap();
        let expect: Vec<C64> = (0..4).map(|x| C64::new(0.0, 2.0) * C64::new(x as f64, 1.0)).collect();
        assert_eq!(c, expect, "{:?}", list.names());
    }
}

#[test]
fn conj_flags_apply() {
    // <x|y> = sum conj(x_i) y_i with x read through a reversed, conjugated view.
    let spec = EinsumSpec::parse("i,i->").unwrap();
    let x = [C64::new(1.0, 1.0), C64::new(0.0, 2.0)];
    let y = [C64::new(3.0, 0.0), C64::new(1.0, -1.0)];
    let xv = StridedView::new(&x, &[2], &[-1], 1, true).unwrap();
    let yv = StridedView::row_major(&y, &[2]).unwrap();
    // reversed x = [(0,2), (1,1)], conj = [(0,-2), (1,-1)]; dot = (0,-6) + (1,-1)(1,-1) = (0,-8).
    for list in lists(2).into_iter().chain([BackendList::reference_only()]) {
        let (r, _) = contract_views(&spec, C64::new(1.0, 0.0), &xv, &yv, C64::new(0.0, 0.0), None, &list).unwrap();
        assert_eq!(r.to_c64_vec(), vec![C64::new(0.0, -8.0)], "{:?}", list.names());
    }
}

#[test]
fn view_errors_and_overlap() {
    let data = [0.0f64; 6];
    assert!(matches!(
        StridedView::new(&data, &[usize::MAX, 3], &[0, 0], 0, false),
        Err(ViewError::Overflow(_))
    ));
    assert!(matches!(
        StridedView::row_major(&data, &[2, 4]),
        Err(ViewError::OutOfBounds { .. })
    ));
    let mut m = [0.0f64; 6];
    assert!(matches!(
        StridedViewMut::new(&mut m, &[3, 2], &[0, 1], 0),
        Err(ViewError::SelfOverlap { .. })
    ));
    assert!(matches!(
        StridedViewMut::new(&mut m, &[2, 3], &[2, 1], 0),
        Err(ViewError::SelfOverlap { .. })
    ));
    assert!(StridedViewMut::new(&mut m, &[2, 3], &[-1, 2], 1).is_ok());
    assert!(StridedViewMut::new(&mut m, &[1, 3], &[0, 2], 0).is_ok());
    // Overlap detection by address range.
    let lo = StridedView::new(&data, &[3], &[1], 0, false).unwrap();
    let hi = StridedView::new(&data, &[3], &[1], 3, false).unwrap();
    let mid = StridedView::new(&data, &[2], &[1], 2, false).unwrap();
    assert!(!lo.overlaps(&hi));
    assert!(lo.overlaps(&mid) && hi.overlaps(&mid));
    let none = StridedView::new(&data, &[0], &[1], 0, false).unwrap();
    assert!(!none.overlaps(&lo));
    // A complex scalar for a real view problem is rejected.
    let spec = EinsumSpec::parse("i,i->").unwrap();
    let (one, cpu) = (C64::new(1.0, 0.0), BackendList::default_cpu(1));
    let r = contract_views(&spec, C64::new(0.0, 1.0), &lo, &hi, C64::new(0.0, 0.0), None, &cpu);
    assert!(matches!(r, Err(ContractError::ComplexScalarForRealOutput { .. })));
    // Wrong C shape.
    let mut c = [0.0f64; 2];
    let mut cm = StridedViewMut::row_major(&mut c, &[2]).unwrap();
    let r = contract_into(&spec, one, &lo, &hi, one, &mut cm, &cpu);
    assert!(matches!(r, Err(ContractError::Shape { .. })));
    assert_eq!(c, [0.0, 0.0]);
}
