//! Property tests of the distributed decompositions on 1-4 in-process
//! ranks: random tensors of rank 2-4 (extents 0-5, all four dtypes),
//! random splits (short form and reordered long form), block sizes 1-4,
//! `k` block sizes, and truncations (maximum rank, cutoff, discarded
//! weight). Each case is checked by `decomp_common` (reconstruction and
//! orthonormality through distributed contractions and on the gathered
//! factors, values against the local faer kernel, the truncation rule,
//! the plan summary); the numpy fixtures run at block sizes 1-3.

mod decomp_common;

use decomp_common::{check_eigh, check_qr, check_svd, fixtures, random_tensor, run_fixture, View};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use uni20::prelude::*;

const LABELS: &str = "abcd";

#[derive(Clone, Debug)]
struct Case {
    shape: Vec<usize>,
    /// Order of the modes in the split (identity: the short form).
    order: Vec<usize>,
    /// Number of row modes.
    cut: usize,
    dtype: DType,
    block: usize,
    k_block: Option<usize>,
    truncation: SvdTruncation,
    s_diag: bool,
    seed: u64,
}

impl Case {
    fn split(&self) -> String {
        let labels: Vec<char> = LABELS.chars().take(self.shape.len()).collect();
        let side = |r: std::ops::Range<usize>| self.order[r].iter().map(|&m| labels[m]).collect::<String>();
        let (rows, cols) = (side(0..self.cut), side(self.cut..self.order.len()));
        if self.order.iter().enumerate().all(|(i, &m)| i == m) {
            format!("{rows}|{cols}")
        } else {
            format!("{}->{rows}|{cols}", labels.iter().collect::<String>())
        }
    }
}

fn dtype() -> impl Strategy<Value = DType> {
    prop_oneof![Just(DType::F32), Just(DType::F64), Just(DType::C32), Just(DType::C64)]
}

fn extent() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 14 => 1usize..=5]
}

fn truncation() -> impl Strategy<Value = SvdTruncation> {
    let none = SvdTruncation::default();
    prop_oneof![
        2 => Just(none),
        1 => (1usize..=4).prop_map(move |r| SvdTruncation { max_rank: Some(r), ..none }),
        1 => prop_oneof![Just(0.3), Just(1.0)].prop_map(move |c| SvdTruncation { cutoff: Some(c), ..none }),
        1 => prop_oneof![Just(0.01), Just(0.2)].prop_map(move |w| SvdTruncation { max_discarded_weight: Some(w), ..none }),
        1 => (1usize..=3, Just(0.05)).prop_map(move |(r, w)| SvdTruncation {
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
                proptest::collection::vec(extent(), rank),
                Just((0..rank).collect::<Vec<usize>>()).prop_shuffle(),
                any::<bool>(),
                1..rank,
                dtype(),
                1usize..=4,
                prop_oneof![Just(None), (1usize..=3).prop_map(Some)],
                truncation(),
                any::<bool>(),
                any::<u64>(),
            )
        })
        .prop_map(
            |(shape, order, shuffle, cut, dtype, block, k_block, truncation, s_diag, seed)| Case {
                order: if shuffle { order } else { (0..shape.len()).collect() },
                shape,
                cut,
                dtype,
                block,
                k_block,
                truncation,
                s_diag,
                seed,
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

fn ranks() -> [usize; 4] {
    [1, 2, 3, 4]
}

#[test]
fn svd_properties_on_1_to_4_ranks() {
    for n in ranks() {
        uni20::universe()
            .ranks(n)
            .run(|ctl| {
                runner(20)
                    .run(&case(), |c| {
                        let mut seed = c.seed;
                        let a = random_tensor(c.dtype, &c.shape, &mut seed);
                        let da = DistTensor::from_local(ctl, &a, c.block).unwrap();
                        let opts = SvdOptions {
                            truncation: c.truncation,
                            s_diag: c.s_diag,
                            k_block: c.k_block,
                            ..Default::default()
                        };
                        let out = check_svd(ctl, &a, &da, &c.split(), &opts);
                        if let Some(kb) = c.k_block.filter(|_| out.kept > 0) {
                            let k_mode = out.u.shape().len() - 1;
                            prop_assert!(out.u.blocking().mode(k_mode).iter().all(|&e| e <= kb));
                        }
                        Ok(())
                    })
                    .unwrap();
            })
            .unwrap();
    }
}

#[test]
fn qr_and_lq_properties_on_1_to_4_ranks() {
    for n in ranks() {
        uni20::universe()
            .ranks(n)
            .run(|ctl| {
                runner(12)
                    .run(&(case(), any::<bool>()), |(c, lq)| {
                        let mut seed = c.seed;
                        let a = random_tensor(c.dtype, &c.shape, &mut seed);
                        let da = DistTensor::from_local(ctl, &a, c.block).unwrap();
                        check_qr(ctl, &a, &da, &c.split(), lq);
                        Ok(())
                    })
                    .unwrap();
            })
            .unwrap();
    }
}

/// A Hermitian tensor: row modes of `dims`, column modes the same or
/// reversed (a square matrix whose column modes are shaped unlike the rows).
fn hermitian_case() -> impl Strategy<Value = (Vec<usize>, bool, bool, DType, usize, u64)> {
    (
        proptest::collection::vec(1usize..=4, 1..=2),
        any::<bool>(),
        any::<bool>(),
        dtype(),
        1usize..=4,
        any::<u64>(),
    )
}

#[test]
fn eigh_properties_on_1_to_4_ranks() {
    for n in ranks() {
        uni20::universe()
            .ranks(n)
            .run(|ctl| {
                runner(12)
                    .run(&hermitian_case(), |(dims, reversed, reorder, dtype, block, seed)| {
                        let r = dims.len();
                        let mut shape = dims.clone();
                        if reversed {
                            shape.extend(dims.iter().rev());
                        } else {
                            shape.extend(&dims);
                        }
                        let labels: String = LABELS.chars().take(2 * r).collect();
                        let (rows, cols) = labels.split_at(r);
                        // The long form, with the last modes as the rows.
                        let split = if reorder {
                            format!("{labels}->{cols}|{rows}")
                        } else {
                            format!("{rows}|{cols}")
                        };
                        let view = View::parse(&split);
                        let (m, _) = view.size(&shape);
                        let mut s = seed;
                        let x = random_tensor(dtype, &[m, m], &mut s).to_c64_vec();
                        let h: Vec<C64> = (0..m * m)
                            .map(|i| (x[i] + x[(i % m) * m + i / m].conj()) * 0.5)
                            .collect();
                        let a = view.tensor(&h, &shape, dtype);
                        let da = DistTensor::from_local(ctl, &a, block).unwrap();
                        check_eigh(ctl, &a, &da, &split);
                        Ok(())
                    })
                    .unwrap();
            })
            .unwrap();
    }
}

#[test]
fn numpy_fixtures_on_1_to_4_ranks() {
    let all = fixtures();
    assert!(all.len() >= 17, "{} fixtures", all.len());
    for n in ranks() {
        uni20::universe()
            .ranks(n)
            .run(|ctl| {
                for f in &all {
                    for block in [1, 2, 3] {
                        run_fixture(ctl, f, block);
                    }
                }
            })
            .unwrap();
    }
}

/// The degenerate fixture (singular values 3, 2, 2, 2, 1): cuts that fall
/// inside the multiplet keep it whole or drop it whole, as documented.
#[test]
fn truncation_at_a_degenerate_multiplet() {
    let f = fixtures().into_iter().find(|f| f.name == "svd_f64_degenerate").unwrap();
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let da = read_npy(ctl, f.dir.join("a.npy"), 2).unwrap();
            let a = da.to_local(ctl).unwrap();
            let none = SvdTruncation::default();
            let total = 9.0 + 3.0 * 4.0 + 1.0;
            for (t, kept, weight) in [
                (
                    SvdTruncation {
                        max_rank: Some(3),
                        ..none
                    },
                    1,
                    13.0 / total,
                ),
                (
                    SvdTruncation {
                        max_rank: Some(4),
                        ..none
                    },
                    4,
                    1.0 / total,
                ),
                (
                    SvdTruncation {
                        cutoff: Some(1.5),
                        ..none
                    },
                    4,
                    1.0 / total,
                ),
                (
                    SvdTruncation {
                        cutoff: Some(2.5),
                        ..none
                    },
                    1,
                    13.0 / total,
                ),
                // Dropping 2, 1 meets the target, but 2 is part of the multiplet: keep it.
                (
                    SvdTruncation {
                        max_discarded_weight: Some(5.0 / total),
                        ..none
                    },
                    4,
                    1.0 / total,
                ),
                (
                    SvdTruncation {
                        max_discarded_weight: Some(0.5 / total),
                        ..none
                    },
                    5,
                    0.0,
                ),
            ] {
                let opts = SvdOptions {
                    truncation: t,
                    s_diag: true,
                    ..Default::default()
                };
                let out = check_svd(ctl, &a, &da, &f.split, &opts);
                assert_eq!(out.kept, kept, "{t:?}");
                assert!(
                    (out.discarded_weight - weight).abs() < 1e-14,
                    "{t:?}: {}",
                    out.discarded_weight
                );
                assert!(!out.degenerate_split);
            }
            // A leading multiplet larger than max_rank must be split, and says so.
            let d = LocalTensor::from_f64(&[3, 3], vec![2.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 1.0]).unwrap();
            let dd = DistTensor::from_local(ctl, &d, 2).unwrap();
            let out = uni20::dist::svd(
                ctl,
                &dd,
                "a|b",
                &SvdOptions {
                    truncation: SvdTruncation {
                        max_rank: Some(1),
                        ..none
                    },
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!((out.kept, out.degenerate_split), (1, true));
            assert!((out.s[0] - 2.0).abs() < 1e-14 && (out.discarded_weight - 5.0 / 9.0).abs() < 1e-14);
        })
        .unwrap();
}

/// Extreme scales through the distributed SVD: diag(1.5e154, 1.3e154, 1)
/// (blocked 2, so three ranks hold blocks) with a discarded-weight target
/// of 0.1 keeps two values (the squares of the first two overflow, and
/// the weight was 0, so one was kept while 43 % of the weight was
/// dropped), and a dense 4x4 matrix at 1e200 and 1e-200 factorizes with the
/// values of the unscaled matrix times the scale (faer alone stopped with
/// NoConvergence from about 1e155 and was wrong from about 1e-165).
#[test]
fn distributed_svd_at_extreme_scales() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let d = LocalTensor::from_f64(&[3, 3], vec![1.5e154, 0.0, 0.0, 0.0, 1.3e154, 0.0, 0.0, 0.0, 1.0]).unwrap();
            let dd = DistTensor::from_local(ctl, &d, 2).unwrap();
            let opts = SvdOptions {
                truncation: SvdTruncation {
                    max_discarded_weight: Some(0.1),
                    ..SvdTruncation::default()
                },
                ..Default::default()
            };
            let out = uni20::dist::svd(ctl, &dd, "a|b", &opts).unwrap();
            assert_eq!(out.kept, 2, "{:?} | {:?}", out.s, out.discarded);
            let want = (1.0 / 1.5e154f64).powi(2) / (1.0 + (1.3f64 / 1.5).powi(2));
            assert!(
                (out.discarded_weight - want).abs() <= 1e-12 * want,
                "{}",
                out.discarded_weight
            );
            let a0 = random(ctl, &[4, 4], DType::F64, 2, 9).unwrap().to_local(ctl).unwrap();
            let s0 = uni20::dist::svd(
                ctl,
                &DistTensor::from_local(ctl, &a0, 2).unwrap(),
                "a|b",
                &SvdOptions::default(),
            )
            .unwrap()
            .s;
            for c in [1e200, 1e-200] {
                let v: Vec<f64> = a0.to_c64_vec().iter().map(|z| z.re * c).collect();
                let a = DistTensor::from_local(ctl, &LocalTensor::from_f64(&[4, 4], v).unwrap(), 2).unwrap();
                let out = uni20::dist::svd(ctl, &a, "a|b", &SvdOptions::default()).unwrap();
                for (x, y) in out.s.iter().zip(&s0) {
                    assert!((x / c - y).abs() <= 1e-12 * s0[0], "scale {c:e}: {} vs {y}", x / c);
                }
            }
        })
        .unwrap();
}

/// Placement: the matrix is assembled on the compute worker owning most of
/// the input (never the root, never a storage rank), the factor blocks end
/// up round-robin on the compute workers, and no payload passes the root.
#[test]
fn placement_follows_the_input_and_avoids_root_and_storage_ranks() {
    uni20::universe()
        .ranks(5)
        .storage_ranks(1)
        .run(|ctl| {
            assert_eq!((ctl.compute_ranks(), ctl.storage_ranks()), (vec![1, 2, 3], vec![4]));
            let mut seed = 3;
            let a = random_tensor(DType::F64, &[8, 6], &mut seed);
            // Most of the input on rank 3.
            let da = DistTensor::from_local_on(ctl, &a, 4, &Placement::Ranks(vec![3, 3, 3, 1])).unwrap();
            let out = check_svd(ctl, &a, &da, "a|b", &SvdOptions::default());
            assert_eq!(out.factorizer, 3);
            let owners =
                |t: &DistTensor| -> Vec<usize> { t.manifest(ctl).unwrap().blocks.iter().map(|b| b.owner).collect() };
            let mut all = owners(&out.u);
            all.extend(owners(&out.vh));
            assert_eq!(
                all,
                vec![1, 2, 3, 1, 2, 3, 1, 2],
                "round-robin over the compute workers"
            );
            assert_eq!(out.summary.bytes_through_root, 0);
            assert_eq!(out.summary.participants, vec![1, 2, 3]);
            // Input on the storage rank only: a compute worker fetches it all.
            let ds = DistTensor::from_local_on(ctl, &a, 4, &Placement::Storage).unwrap();
            let out = check_svd(ctl, &a, &ds, "a|b", &SvdOptions::default());
            assert_eq!(out.factorizer, 1);
            assert!(out.summary.participants.contains(&4) && !out.summary.participants.contains(&0));
            assert_eq!(out.summary.per_rank[&4].bytes_sent, 8 * 6 * 8);
            let q = check_qr(ctl, &a, &ds, "a|b", false);
            assert!(owners(&q.0).iter().chain(&owners(&q.1)).all(|r| [1, 2, 3].contains(r)));
        })
        .unwrap();
}
