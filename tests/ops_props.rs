//! Property tests of the distributed element-wise operations, reblocking,
//! reductions and worker-side creation against the local kernels of
//! `uni20_dispatch` (applied to the gathered tensors), on 1-4 in-process
//! ranks: random shapes, tilings, permutations and dtypes (f32, f64, c32,
//! c64). Element-wise results and reblocks must be bit-identical to the
//! local kernels; reductions must agree to 1e-12 relative; `random` must
//! not depend on the rank count or the tiling.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use uni20::dispatch::{self as local, random_block};
use uni20::prelude::*;

const DTYPES: [DType; 4] = [DType::F32, DType::F64, DType::C32, DType::C64];
const LABELS: &[u8] = b"abcd";

/// A random case: shape, two per-mode tilings, a permutation, a dtype, scalars and seeds.
#[derive(Clone, Debug)]
struct Case {
    shape: Vec<usize>,
    tile_a: Vec<usize>,
    tile_b: Vec<usize>,
    perm: Vec<usize>,
    dtype: DType,
    alpha: f64,
    beta: f64,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (0usize..=4)
        .prop_flat_map(|r| {
            (
                prop::collection::vec(1usize..=5, r),
                prop::collection::vec(1usize..=4, r),
                prop::collection::vec(1usize..=4, r),
                Just((0..r).collect::<Vec<usize>>()).prop_shuffle(),
                0usize..4,
                -4i32..=4,
                -4i32..=4,
                any::<u64>(),
            )
        })
        .prop_map(|(shape, tile_a, tile_b, perm, d, al, be, seed)| Case {
            shape,
            tile_a,
            tile_b,
            perm,
            dtype: DTYPES[d],
            alpha: f64::from(al) * 0.25,
            beta: f64::from(be) * 0.5,
            seed,
        })
}

fn labels(idx: impl IntoIterator<Item = usize>) -> String {
    idx.into_iter().map(|i| LABELS[i] as char).collect()
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

fn check_elementwise(ctl: &Controller<'_>, c: &Case) -> Result<(), TestCaseError> {
    let r = c.shape.len();
    let a = random(ctl, &c.shape, c.dtype, c.tile_a.clone(), c.seed).unwrap();
    let out_shape: Vec<usize> = c.perm.iter().map(|&p| c.shape[p]).collect();
    let tile_b: Vec<usize> = c.perm.iter().map(|&p| c.tile_b[p]).collect();
    let b = random(ctl, &out_shape, c.dtype, tile_b, c.seed ^ 1).unwrap();
    let spec = format!("{}->{}", labels(0..r), labels(c.perm.iter().copied()));
    let (la, lb) = (a.to_local(ctl).unwrap(), b.to_local(ctl).unwrap());
    let id: Vec<usize> = (0..r).collect();
    let (alpha, beta) = (C64::new(c.alpha, 0.0), C64::new(c.beta, 0.0));
    // axpby with a permuted, b in output order (possibly tiled differently).
    let got = axpby(ctl, c.alpha, &a, c.beta, &b, &spec).unwrap();
    let want = local::axpby(alpha, &la, &c.perm, false, beta, Some((&lb, &id, false)), None, 1).unwrap();
    prop_assert_eq!(got.to_local(ctl).unwrap(), want, "axpby {}", spec);
    prop_assert_eq!(got.plan_summary().unwrap().bytes_through_root, 0);
    // permute, scale, conj: block-wise on the owners, nothing moves.
    let p = permute(ctl, &a, &spec).unwrap();
    prop_assert_eq!(p.to_local(ctl).unwrap(), local::permute(&la, &c.perm, 1).unwrap());
    prop_assert_eq!(p.plan_summary().unwrap().bytes_moved, 0);
    let s = scale(ctl, c.alpha, &a).unwrap();
    prop_assert_eq!(s.to_local(ctl).unwrap(), local::scale(alpha, &la, 1).unwrap());
    let j = conj(ctl, &a).unwrap();
    prop_assert_eq!(j.to_local(ctl).unwrap(), local::conj(&la, 1).unwrap());
    // reblock to b's tiling (permuted back): the same values.
    let rb = reblock(ctl, &a, c.tile_b.clone()).unwrap();
    prop_assert_eq!(rb.to_local(ctl).unwrap(), la.clone());
    prop_assert_eq!(
        rb.blocking(),
        &Tiling::from(c.tile_b.clone()).blocking(&c.shape).unwrap()
    );
    if let Some(s) = rb.plan_summary() {
        prop_assert_eq!(s.bytes_through_root, 0);
    }
    // Reductions against the local kernels (a and its reblocked copy).
    let want_inner = local::inner(&la, &local::permute(&lb, &inverse(&c.perm), 1).unwrap(), 1).unwrap();
    let bb = permute(
        ctl,
        &b,
        &format!("{}->{}", labels(c.perm.iter().copied()), labels(0..r)),
    )
    .unwrap();
    let got_inner = inner(ctl, &rb, &bb).unwrap();
    prop_assert!(
        (got_inner - want_inner).norm() <= 1e-12 * want_inner.norm().max(1e-300),
        "inner {} vs {}",
        got_inner,
        want_inner
    );
    let want_norm = local::norm_sqr(&la, 1).sqrt();
    let got_norm = norm(ctl, &a).unwrap();
    prop_assert!((got_norm - want_norm).abs() <= 1e-12 * want_norm.max(1e-300));
    prop_assert_eq!(max_abs(ctl, &a).unwrap(), local::max_abs(&la, 1));
    Ok(())
}

fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (k, &p) in perm.iter().enumerate() {
        inv[p] = k;
    }
    inv
}

#[test]
fn elementwise_reblock_and_reductions_match_the_local_kernels() {
    for ranks in 1..=4 {
        uni20::universe()
            .ranks(ranks)
            .run(|ctl| {
                runner(24)
                    .run(&case(), |c| check_elementwise(ctl, &c))
                    .unwrap_or_else(|e| panic!("ranks={ranks}: {e}"));
            })
            .unwrap();
    }
}

/// A reshape that fuses modes `k..k + len` or splits mode `k`, with tilings.
fn reshape_case() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<usize>, u64, bool)> {
    (
        prop::collection::vec(1usize..=4, 1..=4),
        prop::collection::vec(1usize..=6, 4),
        any::<u64>(),
        any::<bool>(),
        any::<prop::sample::Index>(),
        2usize..=3,
    )
        .prop_map(|(shape, tiles, seed, fuse, at, len)| {
            let r = shape.len();
            let tile: Vec<usize> = tiles[..r].to_vec();
            let k = at.index(r);
            let new = if fuse {
                let end = (k + len).min(r);
                let mut n = shape[..k].to_vec();
                n.push(shape[k..end].iter().product());
                n.extend_from_slice(&shape[end..]);
                n
            } else {
                // Split mode k of extent d into (d / f, f) for a divisor f, or insert a 1.
                let d = shape[k];
                let f = (2..=d).find(|f| d % f == 0).unwrap_or(1);
                let mut n = shape[..k].to_vec();
                n.extend([d / f, f]);
                n.extend_from_slice(&shape[k + 1..]);
                n
            };
            (shape, tile, new, seed, fuse)
        })
}

#[test]
fn reshape_matches_the_local_kernel_and_reblocks_only_when_needed() {
    for ranks in [1, 2, 3] {
        uni20::universe()
            .ranks(ranks)
            .run(|ctl| {
                runner(32)
                    .run(&reshape_case(), |(shape, tile, new, seed, _)| {
                        let a = random(ctl, &shape, DType::C64, tile, seed).unwrap();
                        let la = a.to_local(ctl).unwrap();
                        let got = reshape(ctl, &a, &new).unwrap();
                        prop_assert_eq!(got.to_local(ctl).unwrap(), local::reshape(&la, &new).unwrap());
                        let s = got.plan_summary().unwrap();
                        prop_assert_eq!(s.bytes_through_root, 0);
                        if s.notes.is_empty() {
                            prop_assert_eq!(s.bytes_moved, 0);
                        }
                        // Reshaping back gives the original values.
                        let back = reshape(ctl, &got, &shape).unwrap();
                        prop_assert_eq!(back.to_local(ctl).unwrap(), la);
                        Ok(())
                    })
                    .unwrap_or_else(|e| panic!("ranks={ranks}: {e}"));
            })
            .unwrap();
    }
}

#[test]
fn random_is_identical_for_every_rank_count_and_block_size() {
    let shape = [9usize, 10, 3];
    let mut seen: Vec<(usize, usize, DType, LocalTensor)> = Vec::new();
    for ranks in [1, 2, 4] {
        uni20::universe()
            .ranks(ranks)
            .run(|ctl| {
                for block in [4, 7] {
                    for dtype in DTYPES {
                        let t = random(ctl, &shape, dtype, block, 20250612).unwrap();
                        seen.push((ranks, block, dtype, t.to_local(ctl).unwrap()));
                    }
                }
            })
            .unwrap();
    }
    for (ranks, block, dtype, t) in &seen {
        let want = random_block(20250612, *dtype, &shape, &[0, 0, 0], &shape).unwrap();
        assert_eq!(t, &want, "ranks={ranks} block={block} {dtype:?}");
        // Uniform on [-1, 1): not all equal, within range.
        let v = t.to_c64_vec();
        assert!(v
            .iter()
            .all(|z| (-1.0..1.0).contains(&z.re) && (-1.0..1.0).contains(&z.im)));
        assert!(v.iter().any(|z| z.re != v[0].re));
    }
    assert_eq!(seen.len(), 3 * 2 * 4);
}

#[test]
fn zeros_and_identity_are_created_on_the_workers() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            for dtype in DTYPES {
                let z = zeros(ctl, &[5, 4], dtype, 2).unwrap();
                assert_eq!(z.to_local(ctl).unwrap(), LocalTensor::zeros(dtype, &[5, 4]).unwrap());
                let s = z.plan_summary().unwrap();
                assert_eq!((s.bytes_moved, s.bytes_through_root), (0, 0));
                assert!(!s.participants.contains(&0));
                // A rectangular matrix: numpy's eye(5, 7).
                let e = identity(ctl, &[5, 7], dtype, 3, 1).unwrap().to_local(ctl).unwrap();
                let want: Vec<C64> = (0..35)
                    .map(|i| C64::new(f64::from(u8::from(i / 7 == i % 7)), 0.0))
                    .collect();
                assert_eq!(e.to_c64_vec(), want, "{dtype:?}");
                assert_eq!(e.dtype(), dtype);
                // An operator on modes (2, 3): rows | cols = ab | cd, blocks of 2.
                let op = identity(ctl, &[2, 3, 2, 3], dtype, 2, 2).unwrap();
                let m = reshape(ctl, &reshape(ctl, &op, &[6, 2, 3]).unwrap(), &[6, 6]).unwrap();
                let want: Vec<C64> = (0..36)
                    .map(|i| C64::new(f64::from(u8::from(i / 6 == i % 6)), 0.0))
                    .collect();
                assert_eq!(m.to_local(ctl).unwrap().to_c64_vec(), want);
            }
        })
        .unwrap();
}

/// Reductions on workers with a thread budget run a rank's blocks in parallel; the result
/// must not depend on the budget (bit for bit) and must match the local kernels, including
/// operands tiled differently (so `b` is assembled from pieces on the workers). The small
/// case stays below the size at which a rank's items go to several threads, the large one
/// (about 2.6e5 elements a rank) above it.
#[test]
fn reductions_do_not_depend_on_the_thread_budget() {
    let cases: [([usize; 2], Vec<usize>, Vec<usize>); 2] = [
        // 5 x 4 = 20 blocks of a, 3 x 3 = 9 of b: several items per rank,
        // each b box built from up to four pieces.
        ([37, 29], vec![8, 8], vec![13, 11]),
        // 4 x 4 blocks of a, 3 x 5 of b.
        ([1024, 512], vec![256, 128], vec![384, 110]),
    ];
    for (shape, tile_a, tile_b) in cases {
        for dtype in [DType::F64, DType::C64] {
            let la = random_block(11, dtype, &shape, &[0, 0], &shape).unwrap();
            let lb = random_block(12, dtype, &shape, &[0, 0], &shape).unwrap();
            let want_inner = local::inner(&la, &lb, 1).unwrap();
            let want_norm = local::norm_sqr(&la, 1).sqrt();
            let want_max = local::max_abs(&la, 1);
            for ranks in [2, 3] {
                let mut first: Option<(C64, f64, f64)> = None;
                for threads in [1, 2, 3] {
                    let got = uni20::universe()
                        .ranks(ranks)
                        .threads_per_rank(threads)
                        .run(|ctl| {
                            let a = random(ctl, &shape, dtype, tile_a.clone(), 11).unwrap();
                            let b = random(ctl, &shape, dtype, tile_b.clone(), 12).unwrap();
                            (
                                inner(ctl, &a, &b).unwrap(),
                                norm(ctl, &a).unwrap(),
                                max_abs(ctl, &a).unwrap(),
                            )
                        })
                        .unwrap();
                    let tag = format!("{} {shape:?} ranks={ranks} threads={threads}", dtype.name());
                    assert!((got.0 - want_inner).norm() <= 1e-12 * want_inner.norm(), "inner {tag}");
                    assert!((got.1 - want_norm).abs() <= 1e-12 * want_norm, "norm {tag}");
                    assert_eq!(got.2, want_max, "max_abs {tag}");
                    match first {
                        None => first = Some(got),
                        Some(f) => assert_eq!(f, got, "{tag} differs from threads=1"),
                    }
                }
            }
        }
    }
}
