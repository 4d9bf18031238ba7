//! Property tests of the decompositions of symmetric (block-sparse)
//! tensors on 1-3 in-process ranks: random U(1) and U(1) x Z_2 layouts of
//! rank 2-4 (1-3 sectors per leg, tiles of 1-3, random directions and a
//! random reachable flux), random splits (short and reordered long form),
//! all four dtypes, truncations. Each case is checked by
//! `symdecomp_common` against the dense decomposition of the input's dense
//! embedding. Then the bad inputs, each a typed error.

mod decomp_common;
mod symdecomp_common;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use symdecomp_common::{
    check_sym_eigh, check_sym_qr, check_sym_svd, hermitian, random_layout, random_leg, split_of, Rng,
};
use uni20::dist::error::LayoutError;
use uni20::dist::error::SymDecompError;
use uni20::dist::symmetry::{Direction, SymmetricLayout, Symmetry};
use uni20::dist::{sym_random, sym_zeros};
use uni20::prelude::*;
use uni20::SplitError;

#[derive(Clone, Debug)]
struct Case {
    rank: usize,
    seed: u64,
    tile: usize,
    product: bool,
    order: Vec<usize>,
    cut: usize,
    dtype: DType,
    truncation: SvdTruncation,
    k_block: Option<usize>,
    s_diag: bool,
}

fn dtype() -> impl Strategy<Value = DType> {
    prop_oneof![Just(DType::F32), Just(DType::F64), Just(DType::C32), Just(DType::C64)]
}

fn truncation() -> impl Strategy<Value = SvdTruncation> {
    let none = SvdTruncation::default();
    prop_oneof![
        2 => Just(none),
        2 => (1usize..=6).prop_map(move |r| SvdTruncation { max_rank: Some(r), ..none }),
        1 => prop_oneof![Just(0.2), Just(0.7)].prop_map(move |c| SvdTruncation { cutoff: Some(c), ..none }),
        1 => prop_oneof![Just(0.01), Just(0.2)].prop_map(move |w| SvdTruncation { max_discarded_weight: Some(w), ..none }),
        1 => (1usize..=4, Just(0.05)).prop_map(move |(r, w)| SvdTruncation {
            max_rank: Some(r),
            max_discarded_weight: Some(w),
            ..none
        }),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (2usize..=4)
        .prop_flat_map(|rank| {
            (
                Just(rank),
                any::<u64>(),
                1usize..=3,
                any::<bool>(),
                Just((0..rank).collect::<Vec<usize>>()).prop_shuffle(),
                any::<bool>(),
                1..rank,
                dtype(),
                truncation(),
                prop_oneof![Just(None), (1usize..=2).prop_map(Some)],
                any::<bool>(),
            )
        })
        .prop_map(
            |(rank, seed, tile, product, order, shuffle, cut, dtype, truncation, k_block, s_diag)| Case {
                rank,
                seed,
                tile,
                product,
                order: if shuffle { order } else { (0..rank).collect() },
                cut,
                dtype,
                truncation,
                k_block,
                s_diag,
            },
        )
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

#[test]
fn svd_of_symmetric_tensors_equals_the_dense_svd_of_the_embedding() {
    for n in 1..=3 {
        uni20::universe()
            .ranks(n)
            .run(|ctl| {
                runner(24)
                    .run(&case(), |c| {
                        let layout = random_layout(c.seed, c.rank, c.tile, c.product);
                        let t = sym_random(ctl, layout, c.dtype, c.seed).unwrap();
                        let opts = SvdOptions {
                            truncation: c.truncation,
                            s_diag: c.s_diag,
                            k_block: c.k_block,
                            ..Default::default()
                        };
                        let out = check_sym_svd(ctl, &t, &split_of(&c.order, c.cut), &opts);
                        prop_assert_eq!(out.s_diag.is_some(), c.s_diag);
                        Ok(())
                    })
                    .unwrap();
            })
            .unwrap();
    }
}

#[test]
fn qr_and_lq_of_symmetric_tensors_reproduce_and_are_triangular_per_sector() {
    for n in 1..=3 {
        uni20::universe()
            .ranks(n)
            .run(|ctl| {
                runner(16)
                    .run(&(case(), any::<bool>()), |(c, lq)| {
                        let layout = random_layout(c.seed, c.rank, c.tile, c.product);
                        let t = sym_random(ctl, layout, c.dtype, c.seed).unwrap();
                        check_sym_qr(ctl, &t, &split_of(&c.order, c.cut), lq);
                        Ok(())
                    })
                    .unwrap();
            })
            .unwrap();
    }
}

#[test]
fn eigh_of_hermitian_symmetric_operators_gives_the_dense_eigenvalues() {
    for n in 1..=3 {
        uni20::universe()
            .ranks(n)
            .run(|ctl| {
                let strategy = (
                    1usize..=2,
                    any::<u64>(),
                    1usize..=3,
                    any::<bool>(),
                    dtype(),
                    any::<bool>(),
                );
                runner(16)
                    .run(&strategy, |(r, seed, tile, product, dtype, reorder)| {
                        let g = symdecomp_common::group(product);
                        let mut rng = Rng::new(seed);
                        let legs: Vec<_> = (0..r).map(|_| random_leg(&g, &mut rng, tile)).collect();
                        let h = hermitian(ctl, &legs, dtype, seed);
                        let labels: String = "abcd".chars().take(2 * r).collect();
                        // Rows (a, b) with columns (c, d) = their duals; or reordered
                        // as rows (b, a) with columns (d, c).
                        let split = if reorder && r == 2 {
                            format!("{labels}->ba|dc")
                        } else {
                            format!("{}|{}", &labels[..r], &labels[r..])
                        };
                        check_sym_eigh(ctl, &h, &split);
                        Ok(())
                    })
                    .unwrap();
            })
            .unwrap();
    }
}

/// A U(1) leg with sectors `(charge, dim)` in tiles of at most `tile`.
fn leg(dir: Direction, sectors: &[(i64, usize)], tile: usize) -> uni20::dist::symmetry::Leg {
    uni20::dist::symmetry::Leg::u1(dir, sectors, tile).unwrap()
}

/// A truncation that cuts inside one sector and drops a whole sector:
/// exactly the dense truncated SVD's values, and the bond leg loses the
/// dropped sector.
#[test]
fn truncation_across_sectors_keeps_the_dense_values_and_drops_empty_sectors() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            // A(l Out, r In), flux 0: block diagonal with sectors -1 (dim 3), 0 (dim 4), 1 (dim 1).
            let l = leg(Direction::Out, &[(-1, 3), (0, 4), (1, 1)], 2);
            let g = Symmetry::u1();
            let layout = SymmetricLayout::new(g.clone(), vec![l.clone(), l.dual()], g.identity()).unwrap();
            let t = sym_random(ctl, layout, DType::F64, 3).unwrap();
            for max_rank in [1, 2, 3, 5, 8] {
                let opts = SvdOptions {
                    truncation: SvdTruncation {
                        max_rank: Some(max_rank),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                let out = check_sym_svd(ctl, &t, "a|b", &opts);
                assert_eq!(out.kept, max_rank.min(8));
                let bond = out.u.layout().unwrap().legs()[1].clone();
                assert_eq!(bond.sectors().len(), out.sectors.len());
                assert!(out.sectors.iter().all(|s| !s.values.is_empty()));
                if max_rank == 1 {
                    assert_eq!(bond.sectors().len(), 1, "sectors with nothing kept vanish");
                }
            }
        })
        .unwrap();
}

/// Two sectors with the same matrix: every singular value is a multiplet
/// across the sectors, which the truncation keeps or drops whole, as the
/// dense SVD of the embedding does.
#[test]
fn a_multiplet_across_sectors_is_kept_or_dropped_whole() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let g = Symmetry::u1();
            let a = leg(Direction::Out, &[(-1, 3), (1, 3)], 2);
            let layout = SymmetricLayout::new(g.clone(), vec![a.clone(), a.dual()], g.identity()).unwrap();
            let t = sym_random(ctl, layout.clone(), DType::F64, 5).unwrap();
            let mut v = t.to_dense(ctl).unwrap().to_c64_vec();
            for i in 0..3 {
                for j in 0..3 {
                    v[(3 + i) * 6 + 3 + j] = v[i * 6 + j];
                }
            }
            let dense = LocalTensor::from_f64(&[6, 6], v.iter().map(|z| z.re).collect()).unwrap();
            let t = DistTensor::from_dense(ctl, &dense, std::sync::Arc::new(layout), 0.0).unwrap();
            for (max_rank, kept, split) in [(1, 1, true), (2, 2, false), (3, 2, false), (5, 4, false)] {
                let opts = SvdOptions {
                    truncation: SvdTruncation {
                        max_rank: Some(max_rank),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                let out = check_sym_svd(ctl, &t, "a|b", &opts);
                assert_eq!((out.kept, out.degenerate_split), (kept, split), "max_rank {max_rank}");
                if !split {
                    // Both sectors keep the same values.
                    assert_eq!(out.sectors.len(), 2);
                    assert_eq!(out.sectors[0].values.len(), out.sectors[1].values.len());
                }
            }
        })
        .unwrap();
}

/// The Hermiticity tolerance is relative to the largest entry of the whole
/// matrix, as in the dense eigh: a sector of small entries whose rounding
/// asymmetry is large against its own entries but not against the whole
/// matrix is accepted.
#[test]
fn eigh_tolerance_is_relative_to_the_whole_matrix() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let g = Symmetry::u1();
            let a = leg(Direction::Out, &[(0, 2), (1, 2)], 2);
            let layout =
                std::sync::Arc::new(SymmetricLayout::new(g.clone(), vec![a.clone(), a.dual()], g.identity()).unwrap());
            // Sector 0: entries of order 1; sector 1: of order 1e-8, with an asymmetry of
            // 1e-18 (1e-10 of its own entries, 1e-18 of the matrix's).
            let mut v = vec![0.0f64; 16];
            let big = [[2.0, 0.5], [0.5, -1.0]];
            let small = [[3e-8, 1e-8], [1e-8 + 1e-18, -2e-8]];
            for i in 0..2 {
                for j in 0..2 {
                    v[i * 4 + j] = big[i][j];
                    v[(2 + i) * 4 + 2 + j] = small[i][j];
                }
            }
            let h = LocalTensor::from_f64(&[4, 4], v).unwrap();
            let t = DistTensor::from_dense(ctl, &h, layout.clone(), 0.0).unwrap();
            let out = check_sym_eigh(ctl, &t, "a|b");
            assert_eq!(out.sectors.len(), 2);
            // 1e-6 of the whole matrix is refused.
            let mut v = h.to_c64_vec().iter().map(|z| z.re).collect::<Vec<_>>();
            v[2 * 4 + 3] += 2e-6;
            let bad = LocalTensor::from_f64(&[4, 4], v).unwrap();
            let bad = DistTensor::from_dense(ctl, &bad, layout, 0.0).unwrap();
            let e = uni20::dist::eigh(ctl, &bad, "a|b", &EighOptions::default()).unwrap_err();
            assert!(
                matches!(e, DistError::NotHermitian { row: 2, col: 3, max_abs, .. } if max_abs == 2.0),
                "{e:?}"
            );
        })
        .unwrap();
}

#[test]
fn bad_inputs_are_typed_errors() {
    for ranks in [2, 3] {
        uni20::universe()
            .ranks(ranks)
            .run(|ctl| {
                let g = Symmetry::u1();
                let a = leg(Direction::Out, &[(-1, 2), (0, 3), (1, 2)], 2);
                let b = leg(Direction::In, &[(0, 2), (1, 1)], 1);
                let layout =
                    SymmetricLayout::new(g.clone(), vec![a.clone(), b.clone(), a.dual()], g.identity()).unwrap();
                let t = sym_random(ctl, layout.clone(), DType::F64, 1).unwrap();
                // A split naming a label the tensor does not have.
                let e = uni20::dist::svd(ctl, &t, "abc->ab|x", &SvdOptions::default()).unwrap_err();
                assert!(
                    matches!(&e, DistError::Split { error: SplitError::Extra { labels }, .. } if labels == &['x']),
                    "{e:?}"
                );
                let e = uni20::dist::qr(ctl, &t, "ab|cd", &QrOptions::default()).unwrap_err();
                assert!(
                    matches!(
                        e,
                        DistError::Split {
                            error: SplitError::RankMismatch { labels: 4, rank: 3 },
                            ..
                        }
                    ),
                    "{e:?}"
                );
                // eigh: legs that are not each other's duals, and a nonzero flux.
                let e = uni20::dist::eigh(ctl, &t, "ab|c", &EighOptions::default()).unwrap_err();
                assert!(
                    matches!(
                        e,
                        DistError::Split {
                            error: SplitError::NotSquare { .. },
                            ..
                        }
                    ),
                    "{e:?}"
                );
                let op = SymmetricLayout::new(g.clone(), vec![a.clone(), b.clone(), a.dual(), b.clone()], g.identity())
                    .unwrap();
                let x = sym_random(ctl, op, DType::F64, 2).unwrap();
                let e = uni20::dist::eigh(ctl, &x, "ab|cd", &EighOptions::default()).unwrap_err();
                assert!(
                    matches!(
                        e,
                        DistError::SymDecomp(SymDecompError::NotDualLegs {
                            row_mode: 1,
                            col_mode: 3
                        })
                    ),
                    "{e:?}"
                );
                let charged =
                    SymmetricLayout::new(g.clone(), vec![a.clone(), a.dual()], g.charge(&[1]).unwrap()).unwrap();
                let y = sym_random(ctl, charged, DType::F64, 2).unwrap();
                let e = uni20::dist::eigh(ctl, &y, "a|b", &EighOptions::default()).unwrap_err();
                assert!(
                    matches!(e, DistError::SymDecomp(SymDecompError::EighFlux { .. })),
                    "{e}"
                );
                // A non-Hermitian operator: the largest deviation, named by dense matrix position.
                let op = SymmetricLayout::new(g.clone(), vec![a.clone(), a.dual()], g.identity()).unwrap();
                let z = sym_random(ctl, op, DType::C64, 9).unwrap();
                let (m, _, mat) = symdecomp_common::dense_matrix(ctl, &z, "a|b");
                let e = uni20::dist::eigh(ctl, &z, "a|b", &EighOptions::default()).unwrap_err();
                match e {
                    DistError::NotHermitian {
                        row,
                        col,
                        row_index,
                        col_index,
                        deviation,
                        ..
                    } => {
                        let want = (mat[row * m + col] - mat[col * m + row].conj()).norm();
                        assert!(
                            (deviation - want).abs() <= 1e-12,
                            "{deviation} vs {want} at ({row}, {col})"
                        );
                        assert_eq!((row_index, col_index), (vec![row], vec![col]));
                        // The largest deviation of the whole matrix, as the dense eigh names it.
                        let worst = (0..m * m)
                            .map(|x| (mat[x] - mat[(x % m) * m + x / m].conj()).norm())
                            .fold(0.0f64, f64::max);
                        assert_eq!(deviation, worst);
                    }
                    other => panic!("expected NotHermitian, got {other:?}"),
                }
                // Non-finite values in two stored blocks: the first in block order is named,
                // although the other lies in a sector matrix of lower row charge. With the
                // split "ab|c" the row charge is q_a - q_b: block x (a in sector 1, charge 0;
                // b in sector 0, charge 0) has row charge 0, block y (a charge 0, b charge 1)
                // has -1, and y comes after x in block order.
                let find = |sa: usize, sb: usize| {
                    (0..layout.blocks().len())
                        .find(|&k| layout.blocks()[k].sectors[..2] == [sa, sb])
                        .unwrap()
                };
                let (x, y) = (find(1, 0), find(1, 1));
                assert!(x < y);
                let mut v = t.to_dense(ctl).unwrap().to_c64_vec();
                let shape = layout.dense_shape();
                let flat = |o: &[usize]| (o[0] * shape[1] + o[1]) * shape[2] + o[2];
                let (ox, oy) = (layout.block_offsets(x), layout.block_offsets(y));
                v[flat(&oy)] = C64::new(f64::INFINITY, 0.0);
                v[flat(&ox)] = C64::new(f64::NAN, 0.0);
                let bad = LocalTensor::from_f64(&shape, v.iter().map(|z| z.re).collect()).unwrap();
                let bad = DistTensor::from_dense(ctl, &bad, std::sync::Arc::new(layout.clone()), 0.0).unwrap();
                let e = uni20::dist::svd(ctl, &bad, "ab|c", &SvdOptions::default()).unwrap_err();
                assert!(
                    matches!(&e, DistError::NonFinite { block, element, .. } if *block == x && element == &ox),
                    "{e:?}"
                );
                // Over the size limit: the largest sector matrix is named.
                let opts = SvdOptions {
                    max_matrix_bytes: Some(8),
                    ..Default::default()
                };
                let e = uni20::dist::svd(ctl, &t, "ab|c", &opts).unwrap_err();
                assert!(matches!(e, DistError::MatrixTooLarge { .. }), "{e:?}");
                let e = uni20::dist::lq(
                    ctl,
                    &t,
                    "ab|c",
                    &QrOptions {
                        k_block: Some(0),
                        ..Default::default()
                    },
                )
                .unwrap_err();
                assert!(matches!(e, DistError::Blocking(_)), "{e:?}");
                // A zero tensor with a cutoff keeps nothing: no symmetric factor can be built.
                let zero = sym_zeros(ctl, layout.clone(), DType::F64).unwrap();
                let opts = SvdOptions {
                    truncation: SvdTruncation {
                        cutoff: Some(0.1),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                let e = uni20::dist::svd(ctl, &zero, "ab|c", &opts).unwrap_err();
                assert!(
                    matches!(e, DistError::SymDecomp(SymDecompError::NothingKept { .. })),
                    "{e:?}"
                );
                // The job goes on: the same call on good data works.
                let out = uni20::dist::svd(ctl, &t, "ab|c", &SvdOptions::default()).unwrap();
                // The factors are symmetric: mixing them with a dense tensor is refused.
                let dense = uni20::dist::random(ctl, out.u.shape(), DType::F64, 2, 1).unwrap();
                let e = inner(ctl, &out.u, &dense).unwrap_err();
                assert!(matches!(e, DistError::Layout(LayoutError::Mixed { .. })), "{e:?}");
            })
            .unwrap();
    }
}

/// Sector matrices large enough (summed `m n min(m, n)` about 5.3e5) that a
/// rank with a thread budget above 1 factorizes them in parallel, the rank's
/// own thread among the workers: the same singular values as the dense SVD
/// of the embedding for budgets 1-3, on one rank (every sector on it) and two.
#[test]
fn sectors_factorized_in_parallel_match_the_dense_svd() {
    for ranks in [1, 2] {
        for threads in [1, 2, 3] {
            uni20::universe()
                .ranks(ranks)
                .threads_per_rank(threads)
                .run(|ctl| {
                    let l = leg(Direction::Out, &[(-1, 50), (0, 70), (1, 40)], 128);
                    let g = Symmetry::u1();
                    let layout = SymmetricLayout::new(g.clone(), vec![l.clone(), l.dual()], g.identity()).unwrap();
                    let t = sym_random(ctl, layout, DType::F64, 17).unwrap();
                    let out = check_sym_svd(ctl, &t, "a|b", &SvdOptions::default());
                    assert_eq!(out.kept, 160, "ranks {ranks} threads {threads}");
                    assert_eq!(out.sectors.len(), 3, "ranks {ranks} threads {threads}");
                })
                .unwrap();
        }
    }
}
