//! `lincomb` (the k-term linear combination of the Krylov solvers) on 1-3
//! in-process ranks: dense terms in every dtype with different tilings
//! against the local kernel on the gathered terms (bit-identical) and
//! against a naive sum in complex double precision; symmetric terms
//! against the dense operation on their embeddings; a zero coefficient
//! that leaves its term unread; every bad input as a typed error.

use std::sync::Arc;

use uni20::dispatch::{self as local, ElementwiseError};
use uni20::dist::error::{LayoutError, SymLayoutError};
use uni20::dist::symmetry::{Direction, Leg, SymmetricLayout, Symmetry};
use uni20::dist::{lincomb, sym_random};
use uni20::prelude::*;

/// Runs `f` on 1, 2 and 3 in-process ranks (2 threads on 1 and 3 ranks).
fn for_ranks(f: impl Fn(&Controller<'_>, usize) + Copy + Send + Sync) {
    for ranks in 1..=3 {
        uni20::universe()
            .ranks(ranks)
            .threads_per_rank(1 + ranks % 2)
            .run(move |ctl| f(ctl, ranks))
            .unwrap();
    }
}

fn c(re: f64, im: f64) -> C64 {
    C64::new(re, im)
}

/// `sum_k c_k t_k` element by element in complex double precision.
fn naive(terms: &[(C64, &LocalTensor)]) -> Vec<C64> {
    let mut out = vec![c(0.0, 0.0); terms[0].1.len()];
    for &(ck, t) in terms {
        for (o, x) in out.iter_mut().zip(t.to_c64_vec()) {
            *o += ck * x;
        }
    }
    out
}

fn assert_close(got: &LocalTensor, want: &[C64], tol: f64, what: &str) {
    let got = got.to_c64_vec();
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).norm() <= tol * (1.0 + w.norm()),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn dense_terms_with_other_tilings_match_the_local_kernel_and_the_naive_sum() {
    for_ranks(|ctl, ranks| {
        let shape = [5, 7, 3];
        for (d, dtype) in [DType::F32, DType::F64, DType::C32, DType::C64].into_iter().enumerate() {
            let seed = 10 * d as u64;
            let a = random(ctl, &shape, dtype, vec![2, 3, 3], seed).unwrap();
            let b = random(ctl, &shape, dtype, vec![5, 2, 1], seed + 1).unwrap();
            let t = random(ctl, &shape, dtype, vec![3, 7, 2], seed + 2).unwrap();
            let coefs = if dtype.is_complex() {
                [c(0.75, -0.5), c(-1.25, 0.0), c(0.5, 2.0)]
            } else {
                [c(0.75, 0.0), c(-1.25, 0.0), c(0.5, 0.0)]
            };
            let got = lincomb(ctl, &[(coefs[0], &a), (coefs[1], &b), (coefs[2], &t)]).unwrap();
            assert_eq!(got.dtype(), dtype);
            assert_eq!(got.blocking(), a.blocking(), "the first term's tiling");
            let (la, lb, lt) = (
                a.to_local(ctl).unwrap(),
                b.to_local(ctl).unwrap(),
                t.to_local(ctl).unwrap(),
            );
            let terms = [(coefs[0], &la), (coefs[1], &lb), (coefs[2], &lt)];
            let gl = got.to_local(ctl).unwrap();
            assert_eq!(
                gl,
                local::lincomb(&terms, None, 1).unwrap(),
                "ranks={ranks} {}",
                dtype.name()
            );
            let tol = if matches!(dtype, DType::F32 | DType::C32) {
                1e-6
            } else {
                1e-14
            };
            assert_close(&gl, &naive(&terms), tol, &format!("ranks={ranks} {}", dtype.name()));
            assert_eq!(got.plan_summary().unwrap().bytes_through_root, 0);
        }
        // Mixed dtypes promote: f32 + c64 gives c64, in double precision.
        let x = random(ctl, &shape, DType::F32, 4, 7).unwrap();
        let z = random(ctl, &shape, DType::C64, 2, 8).unwrap();
        let got = lincomb(ctl, &[(c(2.0, 0.0), &x), (c(0.0, 1.0), &z)]).unwrap();
        assert_eq!(got.dtype(), DType::C64);
        let (lx, lz) = (x.to_local(ctl).unwrap(), z.to_local(ctl).unwrap());
        assert_close(
            &got.to_local(ctl).unwrap(),
            &naive(&[(c(2.0, 0.0), &lx), (c(0.0, 1.0), &lz)]),
            1e-14,
            "f32 + c64",
        );
        // One term is a scale.
        let one = lincomb(ctl, &[(c(-3.0, 0.0), &x)]).unwrap();
        assert_eq!(one.to_local(ctl).unwrap(), local::scale(c(-3.0, 0.0), &lx, 1).unwrap());
    });
}

/// A U(1) leg with sectors `(charge, dim)` in tiles of at most `tile`.
fn leg(dir: Direction, sectors: &[(i64, usize)], tile: usize) -> Leg {
    Leg::u1(dir, sectors, tile).unwrap()
}

fn layout(flux: i64) -> Arc<SymmetricLayout> {
    layout_tiled(flux, 2)
}

/// The test layout with sector tiles of at most `tile` on the outer legs.
fn layout_tiled(flux: i64, tile: usize) -> Arc<SymmetricLayout> {
    let g = Symmetry::u1();
    let l = leg(Direction::In, &[(-1, 2), (0, 3), (1, 2)], tile);
    let p = leg(Direction::In, &[(-1, 1), (1, 1)], 1);
    let r = leg(Direction::Out, &[(-2, 1), (-1, 2), (0, 3), (1, 2), (2, 1)], tile);
    Arc::new(SymmetricLayout::new(g.clone(), vec![l, p, r], g.charge(&[flux]).unwrap()).unwrap())
}

#[test]
fn symmetric_terms_match_the_dense_combination_of_their_embeddings() {
    for_ranks(|ctl, ranks| {
        for dtype in [DType::F64, DType::C64] {
            let lay = layout(0);
            // The last term's sectors are tiled otherwise: its pieces are cut to the
            // first term's blocks.
            let ts: Vec<DistTensor> = (0..4)
                .map(|s| {
                    let lay = if s == 3 { layout_tiled(0, 1) } else { lay.clone() };
                    sym_random(ctl, lay, dtype, 40 + s).unwrap()
                })
                .collect();
            assert_ne!(ts[3].blocking(), ts[0].blocking());
            let coefs = [c(1.0, 0.0), c(-0.5, 0.0), c(0.25, 0.0), c(2.0, 0.0)];
            let terms: Vec<(C64, &DistTensor)> = coefs.iter().copied().zip(&ts).collect();
            let got = lincomb(ctl, &terms).unwrap();
            assert_eq!(got.layout(), ts[0].layout(), "ranks={ranks}: the first term's layout");
            let dense: Vec<LocalTensor> = ts.iter().map(|t| t.to_dense(ctl).unwrap()).collect();
            let dterms: Vec<(C64, &LocalTensor)> = coefs.iter().copied().zip(&dense).collect();
            assert_close(
                &got.to_dense(ctl).unwrap(),
                &naive(&dterms),
                1e-14,
                &format!("ranks={ranks} {}", dtype.name()),
            );
        }
    });
}

#[test]
fn a_zero_coefficient_leaves_its_term_out() {
    for_ranks(|ctl, _| {
        let shape = [6, 4];
        let a = random(ctl, &shape, DType::F64, 3, 1).unwrap();
        let b = random(ctl, &shape, DType::F64, vec![2, 4], 2).unwrap();
        // A term with a non-finite value: were it read, 0 * inf would make NaN.
        let inf =
            DistTensor::from_local(ctl, &LocalTensor::from_f64(&shape, vec![f64::INFINITY; 24]).unwrap(), 6).unwrap();
        let got = lincomb(ctl, &[(c(1.5, 0.0), &a), (c(0.0, 0.0), &inf), (c(-2.0, 0.0), &b)]).unwrap();
        let (la, lb) = (a.to_local(ctl).unwrap(), b.to_local(ctl).unwrap());
        assert_eq!(
            got.to_local(ctl).unwrap(),
            local::lincomb(&[(c(1.5, 0.0), &la), (c(-2.0, 0.0), &lb)], None, 1).unwrap()
        );
        // A zero first coefficient: the first term fixes the tiling, not the values.
        let got = lincomb(ctl, &[(c(0.0, 0.0), &inf), (c(-2.0, 0.0), &b)]).unwrap();
        assert_eq!(got.blocking(), inf.blocking());
        assert_eq!(got.to_local(ctl).unwrap(), local::scale(c(-2.0, 0.0), &lb, 1).unwrap());
    });
}

#[test]
fn bad_inputs_are_typed_errors() {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let a = random(ctl, &[4, 3], DType::F64, 2, 1).unwrap();
            let e = lincomb(ctl, &[]).unwrap_err();
            assert!(matches!(e, DistError::Elementwise(ElementwiseError::NoTerms)), "{e}");

            let wide = random(ctl, &[4, 4], DType::F64, 2, 2).unwrap();
            let e = lincomb(ctl, &[(c(1.0, 0.0), &a), (c(1.0, 0.0), &wide)]).unwrap_err();
            assert!(
                matches!(&e, DistError::ShapeMismatch { expected, got, .. } if expected == &[4, 3] && got == &[4, 4]),
                "{e}"
            );

            let e = lincomb(ctl, &[(c(1.0, 0.0), &a), (c(0.0, 1.0), &a)]).unwrap_err();
            assert!(
                matches!(
                    e,
                    DistError::Elementwise(ElementwiseError::ComplexScalarForRealOutput {
                        which: "coefficient",
                        ..
                    })
                ),
                "{e}"
            );

            let lay = layout(0);
            let s = sym_random(ctl, lay.clone(), DType::F64, 3).unwrap();
            let d = random(ctl, &lay.dense_shape(), DType::F64, 2, 4).unwrap();
            let e = lincomb(ctl, &[(c(1.0, 0.0), &s), (c(1.0, 0.0), &d)]).unwrap_err();
            assert!(matches!(&e, DistError::Layout(LayoutError::Mixed { .. })), "{e}");

            let shifted = sym_random(ctl, layout(1), DType::F64, 5).unwrap();
            let e = lincomb(ctl, &[(c(1.0, 0.0), &s), (c(1.0, 0.0), &shifted)]).unwrap_err();
            assert!(
                matches!(&e, DistError::SymLayout(SymLayoutError::FluxMismatch { .. })),
                "{e}"
            );

            // Nothing was lost: the operands still read back.
            assert_eq!(a.to_local(ctl).unwrap().shape(), &[4, 3]);
            assert_eq!(s.to_dense(ctl).unwrap().shape(), &[7, 2, 9]);
        })
        .unwrap();
}
