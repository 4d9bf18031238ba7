//! Symmetric tensors through the element-wise family and the layout
//! changes, on 1-3 in-process ranks: `axpby` / `scale` / `conj` /
//! `permute`, `fuse_legs` / `split_leg` and `reblock` against the dense
//! operation on the dense embeddings (property tests over random groups,
//! legs, sectors, fluxes, tilings and dtypes; see
//! `tests/sym_elementwise_common`), a fuse checked element by element by
//! hand, and every bad input as a typed error. The same properties run
//! under MPI in `tests/mpi_symmetric_elementwise.rs`.

mod sym_elementwise_common;

use std::sync::Arc;

use sym_elementwise_common as common;
use uni20::dist::error::{LayoutError, SymLayoutError};
use uni20::dist::symmetry::{Direction, Fusion, Leg, Sector, SymmetricLayout, Symmetry};
use uni20::dist::{fuse_legs, split_leg, sym_random, Blocking};
use uni20::prelude::*;

/// Runs `f` on 1, 2 and 3 in-process ranks; 1 and 3 ranks with 2 threads per rank, so that
/// the items of a command also run in parallel on a rank's pool (`handle_items`).
fn for_ranks(f: impl Fn(&Controller<'_>, usize) + Copy + Send + Sync) {
    for ranks in 1..=3 {
        uni20::universe()
            .ranks(ranks)
            .threads_per_rank(1 + ranks % 2)
            .run(move |ctl| f(ctl, ranks))
            .unwrap();
    }
}

#[test]
fn creation_and_reductions_match_the_masked_dense_tensor() {
    for_ranks(|ctl, ranks| {
        common::runner(24)
            .run(&common::create_case(), |c| common::check_create_reduce(ctl, &c))
            .unwrap_or_else(|e| panic!("ranks={ranks}: {e}"));
    });
}

#[test]
fn elementwise_operations_match_the_dense_operation_on_the_embeddings() {
    for_ranks(|ctl, ranks| {
        common::runner(24)
            .run(&common::elementwise_case(), |c| common::check_elementwise(ctl, &c))
            .unwrap_or_else(|e| panic!("ranks={ranks}: {e}"));
    });
}

#[test]
fn fuse_permutes_the_fused_index_and_split_inverts_it_exactly() {
    for_ranks(|ctl, ranks| {
        common::runner(24)
            .run(&common::fuse_case(), |c| common::check_fuse_split(ctl, &c))
            .unwrap_or_else(|e| panic!("ranks={ranks}: {e}"));
    });
}

#[test]
fn reblock_retiles_the_sectors_and_keeps_the_embedding() {
    for_ranks(|ctl, ranks| {
        common::runner(16)
            .run(&common::reblock_case(), |c| common::check_reblock(ctl, &c))
            .unwrap_or_else(|e| panic!("ranks={ranks}: {e}"));
    });
}

/// A U(1) leg with sectors `(charge, dim)` in tiles of at most `tile`.
fn leg(dir: Direction, sectors: &[(i64, usize)], tile: usize) -> Leg {
    Leg::u1(dir, sectors, tile).unwrap()
}

#[test]
fn a_fused_leg_groups_its_states_by_charge_not_row_major() {
    // t[i, j, k] with a, b = Out [0, 1] (one state each) and c = In [0, 1, 2]:
    // allowed where k = i + j. Fusing a, b into an In leg gives charges
    // -2: (1,1); -1: (0,1), (1,0); 0: (0,0): fused index F = 0..3 holds
    // (i, j) = (1,1), (0,1), (1,0), (0,0), not the row-major (0,0), (0,1), ...
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let g = Symmetry::u1();
            let a = leg(Direction::Out, &[(0, 1), (1, 1)], 1);
            let c = leg(Direction::In, &[(0, 1), (1, 1), (2, 1)], 1);
            let lay = Arc::new(SymmetricLayout::new(g.clone(), vec![a.clone(), a.clone(), c], g.identity()).unwrap());
            let mut v = vec![0.0; 12];
            for (i, j) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                v[(i * 2 + j) * 3 + i + j] = (10 * i + j + 1) as f64;
            }
            let t =
                DistTensor::from_dense(ctl, &LocalTensor::from_f64(&[2, 2, 3], v.clone()).unwrap(), lay, 0.0).unwrap();
            let (f, fusion) = fuse_legs(ctl, &t, 0, 2, Direction::In).unwrap();
            let charges: Vec<i64> = fusion
                .fused()
                .sectors()
                .iter()
                .map(|s| s.charge.components()[0])
                .collect();
            assert_eq!(charges, vec![-2, -1, 0]);
            let mut want = vec![0.0; 12];
            for (fi, (i, j)) in [(1, 1), (0, 1), (1, 0), (0, 0)].into_iter().enumerate() {
                want[fi * 3 + i + j] = (10 * i + j + 1) as f64;
            }
            assert_eq!(f.to_dense(ctl).unwrap(), LocalTensor::from_f64(&[4, 3], want).unwrap());
            // The plain reshape would be v itself: not the fuse.
            assert_ne!(f.to_dense(ctl).unwrap(), LocalTensor::from_f64(&[4, 3], v).unwrap());
            let back = split_leg(ctl, &f, 0, &fusion).unwrap();
            assert_eq!(back.to_dense(ctl).unwrap(), t.to_dense(ctl).unwrap());
            assert_eq!(back.layout(), t.layout());
        })
        .unwrap();
}

#[test]
fn bad_inputs_are_typed_errors() {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let g = Symmetry::u1();
            let l = leg(Direction::In, &[(-1, 2), (0, 1), (1, 2)], 2);
            let p = leg(Direction::In, &[(-1, 1), (1, 1)], 1);
            let r = leg(Direction::Out, &[(-2, 1), (-1, 2), (0, 3), (1, 2), (2, 1)], 2);
            let lay = SymmetricLayout::new(g.clone(), vec![l.clone(), p.clone(), r.clone()], g.identity()).unwrap();
            let t = sym_random(ctl, lay.clone(), DType::F64, 1).unwrap();
            let d = random(ctl, &lay.dense_shape(), DType::F64, 2, 1).unwrap();

            // Mixing a symmetric and a dense operand.
            for (x, y, sym, dense) in [(&t, &d, 0, 1), (&d, &t, 1, 0)] {
                let e = axpby(ctl, 1.0, x, 1.0, y, "abc->abc").unwrap_err();
                assert!(
                    matches!(&e, DistError::Layout(LayoutError::Mixed { operation: "axpby", symmetric, dense: dn })
                        if *symmetric == sym && *dn == dense),
                    "{e:?}"
                );
            }
            // fuse / split of a dense tensor; reshape of a symmetric one points to them.
            let e = fuse_legs(ctl, &d, 0, 2, Direction::Out).unwrap_err();
            assert!(
                matches!(
                    e,
                    DistError::Layout(LayoutError::SymmetricOnly {
                        operation: "fuse_legs",
                        ..
                    })
                ),
                "{e:?}"
            );
            let (f, fusion) = fuse_legs(ctl, &t, 0, 2, Direction::In).unwrap();
            let e = split_leg(ctl, &d, 0, &fusion).unwrap_err();
            assert!(
                matches!(
                    e,
                    DistError::Layout(LayoutError::SymmetricOnly {
                        operation: "split_leg",
                        ..
                    })
                ),
                "{e:?}"
            );
            let e = reshape(ctl, &t, &[10, 9]).unwrap_err();
            assert!(
                matches!(
                    e,
                    DistError::Layout(LayoutError::DenseOnly {
                        operation: "reshape",
                        ..
                    })
                ),
                "{e:?}"
            );
            assert!(e.to_string().contains("fuse_legs"), "{e}");

            // axpby of operands with other legs: direction, sectors, group, flux.
            let other = |legs: Vec<Leg>, flux: i64| {
                let lay = SymmetricLayout::new(g.clone(), legs, g.charge(&[flux]).unwrap()).unwrap();
                sym_random(ctl, lay, DType::F64, 2).unwrap()
            };
            let flipped = other(vec![l.clone(), p.dual(), r.clone()], -2);
            let e = axpby(ctl, 1.0, &t, 1.0, &flipped, "abc->abc").unwrap_err();
            assert!(
                matches!(
                    &e,
                    DistError::SymLayout(SymLayoutError::LegMismatch {
                        what: "direction",
                        leg_a: 1,
                        leg_b: 1,
                        ..
                    })
                ),
                "{e:?}"
            );
            let l2 = leg(Direction::In, &[(-1, 2), (0, 2), (1, 1)], 2);
            let resized = other(vec![l2, p.clone(), r.clone()], 0);
            let e = axpby(ctl, 1.0, &t, 1.0, &resized, "abc->abc").unwrap_err();
            assert!(
                matches!(
                    &e,
                    DistError::SymLayout(SymLayoutError::LegMismatch {
                        what: "sectors",
                        leg_a: 0,
                        ..
                    })
                ),
                "{e:?}"
            );
            assert!(
                e.to_string().contains("(0)x1") && e.to_string().contains("(0)x2"),
                "{e}"
            );
            // The label permutation is applied before comparing: b = t permuted is fine,
            // b in a's order under a permuting spec is not.
            let tp = permute(ctl, &t, "abc->cab").unwrap();
            let sum = axpby(ctl, 1.0, &t, -1.0, &tp, "abc,cab->abc").unwrap();
            assert_eq!(norm(ctl, &sum).unwrap(), 0.0);
            let e = axpby(ctl, 1.0, &t, 1.0, &t, "abc,cab->abc").unwrap_err();
            assert!(
                matches!(&e, DistError::SymLayout(SymLayoutError::LegMismatch { .. })),
                "{e:?}"
            );
            let shifted = other(vec![l.clone(), p.clone(), r.clone()], 1);
            let e = axpby(ctl, 1.0, &t, 1.0, &shifted, "abc->abc").unwrap_err();
            assert!(
                matches!(&e, DistError::SymLayout(SymLayoutError::FluxMismatch { .. })),
                "{e:?}"
            );
            let z2 = Symmetry::zn(2).unwrap();
            let zl = Leg::new(
                z2.clone(),
                Direction::Out,
                vec![Sector {
                    charge: z2.identity(),
                    dim: 10,
                }],
            )
            .unwrap();
            let zt = sym_random(
                ctl,
                SymmetricLayout::new(z2.clone(), vec![zl.clone()], z2.identity()).unwrap(),
                DType::F64,
                1,
            )
            .unwrap();
            let ut = sym_random(
                ctl,
                SymmetricLayout::new(g.clone(), vec![leg(Direction::Out, &[(0, 10)], 4)], g.identity()).unwrap(),
                DType::F64,
                1,
            )
            .unwrap();
            let e = axpby(ctl, 1.0, &ut, 1.0, &zt, "a->a").unwrap_err();
            assert!(
                matches!(
                    &e,
                    DistError::SymLayout(SymLayoutError::LegMismatch { what: "symmetry", .. })
                ),
                "{e:?}"
            );

            // Fusing legs that are not there.
            for (first, count) in [(0, 0), (2, 2), (3, 1), (usize::MAX, 2)] {
                let e = fuse_legs(ctl, &t, first, count, Direction::Out).unwrap_err();
                assert!(
                    matches!(&e, DistError::SymLayout(SymLayoutError::LegRange { .. })),
                    "{first} {count}: {e:?}"
                );
                // The message is built without overflow (usize::MAX + 2 panicked in debug).
                assert!(e.to_string().contains(&format!("legs {first}..")), "{e}");
            }
            // A split that does not match the fused leg: another leg, another fusion, past the end.
            let e = split_leg(ctl, &f, 1, &fusion).unwrap_err();
            assert!(
                matches!(&e, DistError::SymLayout(SymLayoutError::FusionMismatch { leg: 1, .. })),
                "{e:?}"
            );
            let other_fusion = Fusion::new(vec![l.clone(), l.clone()], Direction::In).unwrap();
            let e = split_leg(ctl, &f, 0, &other_fusion).unwrap_err();
            assert!(
                matches!(&e, DistError::SymLayout(SymLayoutError::FusionMismatch { leg: 0, .. })),
                "{e:?}"
            );
            let e = split_leg(ctl, &f, 2, &fusion).unwrap_err();
            assert!(
                matches!(&e, DistError::SymLayout(SymLayoutError::LegRange { .. })),
                "{e:?}"
            );

            // Explicit tiles across a sector boundary (l's sectors end at 2, 3, 5).
            let shape = lay.dense_shape();
            let bad = Blocking::from_extents(&shape, vec![vec![3, 2], vec![1, 1], vec![1, 2, 3, 2, 1]]).unwrap();
            let e = reblock(ctl, &t, bad).unwrap_err();
            assert!(
                matches!(
                    &e,
                    DistError::SymLayout(SymLayoutError::TileCrossesSector {
                        leg: 0,
                        offset: 0,
                        extent: 3,
                        sector: 0,
                        sector_end: 2
                    })
                ),
                "{e:?}"
            );
            let e = reblock(ctl, &t, 0).unwrap_err();
            assert!(matches!(&e, DistError::Blocking(_)), "{e:?}");
            let e = reblock(ctl, &t, vec![1, 2]).unwrap_err();
            assert!(matches!(&e, DistError::RankMismatch { .. }), "{e:?}");
            // The job goes on after every refusal.
            assert!(norm(ctl, &f).unwrap() > 0.0);
        })
        .unwrap();
}
