//! The faer backend's threaded GEMM cuts the output into one panel per thread (along the
//! longer side, see `FaerBackend`). The property tests use extents up to 6, far below
//! `SPLIT_MIN_MACS`, so they never reach that path; these cases are large enough to split,
//! in both orientations, with odd extents (panel edges not on the 16-alignment), batch
//! labels, transposed and reversed operand layouts, operand and result copies large enough
//! for the parallel permutation, conjugation, alpha and beta, for all four dtypes and 2, 3
//! and 4 threads, each compared with the reference backend.

mod kernels_common;

use kernels_common::{random_values, Rng};
use uni20_dispatch::backends::*;
use uni20_dispatch::view::*;
use uni20_dispatch::*;
/// One case: spec, extents of A and B (row-major storage), the macs of one batch element.
struct Case {
    spec: &'static str,
    a: Vec<usize>,
    b: Vec<usize>,
}

fn cases() -> Vec<Case> {
    let c = |spec, a: &[usize], b: &[usize]| Case {
        spec,
        a: a.to_vec(),
        b: b.to_vec(),
    };
    vec![
        // n >= m: split along the output's columns.
        c("ik,kj->ij", &[40, 64], &[64, 130]),
        // m > n: split along the rows.
        c("ik,kj->ij", &[150, 64], &[64, 36]),
        // Odd extents: 33 * 97 * 83 = 265,683 multiply-adds, just above the threshold.
        c("ik,kj->ij", &[33, 83], &[83, 97]),
        // Transposed operands and a permuted output (copies on the way in and out).
        c("ki,jk->ji", &[71, 45], &[90, 71]),
        // Batch label and two-label groups.
        c("bxik,bkjy->bxijy", &[2, 3, 21, 52], &[2, 52, 17, 5]),
        // A's free labels (a, c) are not adjacent: A (69,120 elements) is copied by the
        // parallel permutation (`GATHER_PAR_MIN` = 65,536).
        c("abcd,dbef->acef", &[10, 16, 12, 36], &[36, 16, 2, 2]),
        // Output groups interleaved: the result (67,200 elements) and beta * C go through the
        // parallel permutation.
        c("abk,kcd->acbd", &[16, 20, 12], &[12, 15, 14]),
    ]
}
/// Every case, with operands read (a) as stored, (b) A reversed along its first mode and
/// conjugated, through `contract_views` on faer with 2, 3 and 4 threads, against the
/// reference backend (computed once per case and layout).
fn check<T: Element>() {
    let complex = T::DTYPE.is_complex();
    let alpha = if complex {
        C64::new(2.5, -0.5)
    } else {
        C64::new(2.5, 0.0)
    };
    let beta = C64::new(-0.75, 0.0);
    let tol = if matches!(T::DTYPE, DType::F32 | DType::C32) {
        1e-4
    } else {
        1e-11
    };
    let mut rng = Rng(1000 + T::DTYPE as u64);
    for case in cases() {
        let spec = ResolvedSpec::parse(case.spec).unwrap();
        let out_shape = spec.output_shape(&[&case.a, &case.b]).unwrap();
        let a_data = random_values::<T>(&mut rng, case.a.iter().product());
        let b_data = random_values::<T>(&mut rng, case.b.iter().product());
        let c_data = random_values::<T>(&mut rng, out_shape.iter().product());
        let inner: usize = spec.inputs()[0]
            .iter()
            .zip(&case.a)
            .filter(|(l, _)| !spec.output().contains(l))
            .map(|(_, &d)| d)
            .product();
        let c_view = StridedView::row_major(&c_data, &out_shape).unwrap();
        let b_view = StridedView::row_major(&b_data, &case.b).unwrap();
        let plain = StridedView::row_major(&a_data, &case.a).unwrap();
        // A reversed along mode 0: negative leading stride, offset at the last slab.
        let mut strides: Vec<isize> = plain.strides().to_vec();
        let offset = (case.a[0] - 1) * strides[0] as usize;
        strides[0] = -strides[0];
        let reversed = StridedView::new(&a_data, &case.a, &strides, offset, complex).unwrap();
        for (what, a_view) in [("plain", plain), ("reversed+conj", reversed)] {
            let (slow, _) = contract_views(
                &spec,
                alpha,
                &a_view,
                &b_view,
                beta,
                Some(&c_view),
                &BackendList::reference_only(),
            )
            .unwrap();
            for threads in [2, 3, 4] {
                let faer = BackendList::new(vec![std::sync::Arc::new(FaerBackend::new(threads))]);
                let (fast, attempts) =
                    contract_views(&spec, alpha, &a_view, &b_view, beta, Some(&c_view), &faer).unwrap();
                assert_eq!(attempts.last().unwrap().backend, "faer");
                assert_eq!(fast.shape(), out_shape.as_slice());
                let scale = 1.0 + 2.6 * 8.0 * inner as f64 + 0.75 * 3.0;
                let diff = fast.max_abs_diff(&slow).unwrap();
                assert!(
                    diff <= tol * scale,
                    "{} {} {what} threads={threads}: max |faer - reference| = {diff:e} > {:e}",
                    case.spec,
                    T::DTYPE,
                    tol * scale
                );
            }
        }
    }
}

#[test]
fn split_gemm_matches_reference_all_dtypes() {
    each_dtype!(check);
}

/// A thread budget far beyond the matrix (e.g. `UNI20_THREADS_PER_RANK` set absurdly high)
/// is capped, not an arithmetic overflow, and the result is still exact.
#[test]
fn huge_thread_budget_is_capped() {
    let spec = EinsumSpec::parse("ik,kj->ij").unwrap();
    let mut rng = Rng(7);
    let a = LocalTensor::from_f64(&[64, 80], (0..64 * 80).map(|_| rng.val()).collect()).unwrap();
    let b = LocalTensor::from_f64(&[80, 96], (0..80 * 96).map(|_| rng.val()).collect()).unwrap();
    let one = C64::new(1.0, 0.0);
    let zero = C64::new(0.0, 0.0);
    let want = contract(&spec, one, &a, &b, zero, None, &BackendList::reference_only()).unwrap();
    for threads in [usize::MAX, 1 << 60, 1000] {
        let got = contract(&spec, one, &a, &b, zero, None, &BackendList::default_cpu(threads)).unwrap();
        let diff = got.max_abs_diff(&want).unwrap();
        assert!(diff <= 1e-11 * 80.0 * 4.0, "threads={threads}: diff {diff:e}");
    }
}
