//! The BLAS backend's accept/decline rules on fixed layouts (feature `blas`): plain and
//! transposed operands and `A^H B` are accepted; a reversed operand and a conjugated operand
//! BLAS would have to read untransposed are declined with a reason by default and copied by
//! `BlasBackend::copying(true)`; results match the reference backend for all four dtypes.
#![cfg(feature = "blas")]

mod kernels_common;

use std::sync::Arc;

use uni20_dispatch::backends::*;
use uni20_dispatch::view::*;
use uni20_dispatch::*;

fn vals<T: Element>(n: usize, seed: f64) -> Vec<T> {
    (0..n)
        .map(|x| T::from_c64(C64::new((x as f64 * 0.37 + seed).sin(), (x as f64 * 0.11 - seed).cos())))
        .collect()
}

fn blas(copying: bool) -> BackendList {
    BackendList::new(vec![Arc::new(BlasBackend::new(2).copying(copying))])
}

/// Runs `spec` on the views through the declining and the copying BLAS backend: the declining
/// one accepts iff `accept`, both (when they run) match the reference.
fn check<T: Element>(spec: &str, a: &StridedView<'_, T>, b: &StridedView<'_, T>, accept: bool) {
    let alpha = if T::DTYPE.is_complex() {
        C64::new(0.5, -2.0)
    } else {
        C64::new(1.5, 0.0)
    };
    let zero = C64::new(0.0, 0.0);
    let (want, _) = contract_views(spec, alpha, a, b, zero, None, &BackendList::reference_only()).unwrap();
    let tol = if matches!(T::DTYPE, DType::F32 | DType::C32) {
        1e-4
    } else {
        1e-12
    };
    match contract_views(spec, alpha, a, b, zero, None, &blas(false)) {
        Ok((got, _)) => {
            assert!(accept, "{spec} {}: accepted, expected a decline", T::DTYPE);
            assert!(got.max_abs_diff(&want).unwrap() < tol, "{spec} {}", T::DTYPE);
        }
        Err(ContractError::Dispatch(e)) => {
            assert!(!accept, "{spec} {}: declined: {e}", T::DTYPE);
            assert!(!e.committed_failure());
            let reason = e.attempts[0].outcome.to_string();
            assert!(reason.contains("BLAS cannot express"), "{reason}");
        }
        Err(e) => panic!("{spec}: {e}"),
    }
    let (got, attempts) = contract_views(spec, alpha, a, b, zero, None, &blas(true)).unwrap();
    assert_eq!(attempts.last().unwrap().backend, "blas");
    assert!(got.max_abs_diff(&want).unwrap() < tol, "{spec} {} copying", T::DTYPE);
}

fn layouts<T: Element>() {
    let (m, k, n) = (37usize, 23usize, 41usize);
    let ad: Vec<T> = vals(m * k, 0.3);
    let bd: Vec<T> = vals(k * n, 1.7);
    let a = StridedView::row_major(&ad, &[m, k]).unwrap();
    let b = StridedView::row_major(&bd, &[k, n]).unwrap();
    // Plain, and the output transposed (a column-major C).
    check("ij,jk->ik", &a, &b, true);
    check("ij,jk->ki", &a, &b, true);
    // A read transposed: "ji" over a row-major (k x m) buffer.
    let at = StridedView::row_major(&ad, &[k, m]).unwrap();
    check("ji,jk->ik", &at, &b, true);
    // Reversed rows of A (negative stride): declined, copied.
    let rev = StridedView::new(&ad, &[m, k], &[-(k as isize), 1], (m - 1) * k, false).unwrap();
    check("ij,jk->ik", &rev, &b, false);
    // Every other column (two non-unit strides): declined, copied.
    let wide: Vec<T> = vals(m * k * 2, 0.9);
    let gap = StridedView::new(&wide, &[m, k], &[2 * k as isize, 2], 0, false).unwrap();
    check("ij,jk->ik", &gap, &b, false);
    // A broadcast row (zero stride): declined, copied.
    let bc = StridedView::new(&ad, &[m, k], &[0, 1], 0, false).unwrap();
    check("ij,jk->ik", &bc, &b, false);
    if T::DTYPE.is_complex() {
        // A^H B over a row-major (k x m) A: read as ConjTrans, accepted.
        check("ji,jk->ik", &at.clone().conj(), &b, true);
        // conj(A) B with A row-major and a row-major C: BLAS would need conj without
        // transpose: declined, copied.
        check("ij,jk->ik", &a.clone().conj(), &b, false);
        // With a column-major C the same operand is read transposed: accepted.
        check("ij,jk->ki", &a.clone().conj(), &b, true);
        // Both conjugated.
        check("ji,jk->ki", &at.conj(), &b.clone().conj(), false);
    }
}

#[test]
fn accept_and_decline_rules_all_dtypes() {
    each_dtype!(layouts);
}

#[test]
fn batched_and_large_split_gemm() {
    // A batched contraction with a permuted operand, and a GEMM large enough to be split
    // across the thread budget (m * n * k >= 2^18), against the reference.
    let x: Vec<f64> = vals(3 * 40 * 50, 0.1);
    let y: Vec<f64> = vals(50 * 3 * 60, 0.2);
    let a = StridedView::row_major(&x, &[3, 40, 50]).unwrap();
    let b = StridedView::row_major(&y, &[50, 3, 60]).unwrap();
    check("bik,kbj->bij", &a, &b, true);
    let n = 96;
    let p: Vec<C64> = vals(n * n, 0.4);
    let q: Vec<C64> = vals(n * n, 0.8);
    let a = StridedView::row_major(&p, &[n, n]).unwrap();
    let b = StridedView::row_major(&q, &[n, n]).unwrap();
    check("ij,jk->ik", &a, &b, true);
}

#[test]
fn library_is_reported() {
    let info = BlasBackend::library();
    assert!(info.starts_with("OpenBLAS"), "{info}");
    assert!(info.contains("core: "), "{info}");
    let listed = available_backends(1);
    assert!(listed.iter().any(|(n, r)| n == "blas" && r.is_ok()));
}
