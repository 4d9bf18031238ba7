//! The root's plan cache (contract, dense and symmetric): a random sequence
//! of contractions whose operands repeat or change their structure (shape,
//! tiling, owners, dtype, conjugation, aliasing, scalars; symmetric sectors,
//! tiles and flux) run in a universe with the cache and in one without; the
//! results and plan summaries must be equal, and equal to the local
//! reference. Also: the hit rate of a repeated sequence, and the LRU bound.

use proptest::prelude::*;
use uni20::dispatch::{einsum as local_einsum, BackendList, ContractOptions as LocalOptions};
use uni20::dist::symmetry::{Direction, Leg, SymmetricLayout, Symmetry};
use uni20::dist::{
    plan_cache_stats, set_plan_cache_budget, set_plan_cache_capacity, sym_random, ContractOptions, PlanSummary,
};
use uni20::prelude::*;
use uni20::C64;

/// One contraction of the sequence.
#[derive(Clone, Debug)]
enum Op {
    /// Dense `spec` of A (m x k, or k x m when `a_t`) and B (k x n or n x k).
    Dense {
        m: usize,
        k: usize,
        n: usize,
        block: usize,
        /// Owners of A's blocks: the compute workers, or rank 1 only.
        a_on_one: bool,
        complex: bool,
        conj: [bool; 2],
        /// B is A itself ("ij,kj->ik"-style self product), when shapes allow.
        alias: bool,
        alpha: f64,
        /// Accumulate into an existing C with this beta.
        beta: Option<f64>,
    },
    /// Symmetric U(1) "ab,bc->ac": A's legs (Out a, In b) and B's (Out b, In
    /// c) from sector sets `sa`/`sc` and `sb`, tiles of at most `tile`,
    /// fluxes `qa` and `qb`.
    Symmetric {
        sa: usize,
        sb: usize,
        sc: usize,
        tile: usize,
        qa: i64,
        qb: i64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            prop_oneof![Just((4usize, 6usize, 5usize)), Just((6, 4, 5)), Just((4, 4, 4))],
            2usize..=3,
            any::<bool>(),
            any::<bool>(),
            any::<[bool; 2]>(),
            any::<bool>(),
            prop_oneof![Just(1.0), Just(-2.0)],
            prop_oneof![Just(None), Just(Some(0.5))],
        )
            .prop_map(
                |((m, k, n), block, a_on_one, complex, conj, alias, alpha, beta)| Op::Dense {
                    m,
                    k,
                    n,
                    block,
                    a_on_one,
                    complex,
                    conj,
                    alias,
                    alpha,
                    beta,
                }
            ),
        (0usize..4, 0usize..4, 0usize..4, 1usize..=2, -1i64..=1, -1i64..=1).prop_map(|(sa, sb, sc, tile, qa, qb)| {
            Op::Symmetric {
                sa,
                sb,
                sc,
                tile,
                qa,
                qb,
            }
        }),
    ]
}

/// Xorshift values in [-1, 1).
fn values(seed: u64, n: usize) -> Vec<f64> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

fn local(shape: &[usize], complex: bool, seed: u64) -> LocalTensor {
    let n: usize = shape.iter().product();
    let bytes: Vec<u8> = if complex {
        values(seed, 2 * n).iter().flat_map(|v| v.to_le_bytes()).collect()
    } else {
        values(seed, n).iter().flat_map(|v| v.to_le_bytes()).collect()
    };
    let dtype = if complex { DType::C64 } else { DType::F64 };
    LocalTensor::from_bytes(dtype, shape, &bytes).unwrap()
}

/// Sector sets of the symmetric legs. The last has the charges of the
/// first with other dimensions: with tiles of 2 both have one tile per
/// sector (the same block structure, so a cached plan is re-fitted to the
/// new extents), with tiles of 1 they differ.
const SECTORS: [&[(i64, usize)]; 4] = [
    &[(-1, 2), (0, 1), (1, 2)],
    &[(0, 3), (1, 1)],
    &[(-1, 1), (0, 2)],
    &[(-1, 1), (0, 2), (1, 1)],
];

fn leg(dir: Direction, set: usize, tile: usize) -> Leg {
    Leg::u1(dir, SECTORS[set], tile).unwrap()
}

fn layout(legs: Vec<Leg>, q: i64) -> Option<SymmetricLayout> {
    let g = Symmetry::u1();
    SymmetricLayout::new(g.clone(), legs, g.charge(&[q]).unwrap()).ok()
}

/// What one contraction gave: the result (dense embedding) and its plan summary.
type Outcome = Option<(LocalTensor, PlanSummary)>;

/// Runs `ops` in one 3-rank universe whose plan cache holds `capacity`
/// plans; returns each op's outcome (None when its layouts do not exist)
/// and the cache's hits and misses.
fn run_sequence(ops: &[Op], capacity: usize, seed: u64) -> (Vec<Outcome>, (u64, u64)) {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            set_plan_cache_capacity(ctl, capacity);
            let out: Vec<Outcome> = ops
                .iter()
                .enumerate()
                .map(|(i, op)| run_op(ctl, op, seed.wrapping_add(1000 * i as u64)))
                .collect();
            let s = plan_cache_stats(ctl);
            (out, (s.hits, s.misses))
        })
        .unwrap()
}

fn run_op(ctl: &Controller<'_>, op: &Op, seed: u64) -> Outcome {
    match *op {
        Op::Dense {
            m,
            k,
            n,
            block,
            a_on_one,
            complex,
            conj,
            alias,
            alpha,
            beta,
        } => {
            let alias = alias && m == n && k == n;
            let la = local(&[m, k], complex, seed);
            let lb = local(&[n, k], complex, seed + 1);
            let place = if a_on_one {
                Placement::Ranks(vec![1])
            } else {
                Placement::Workers
            };
            let a = DistTensor::from_local_on(ctl, &la, block, &place).unwrap();
            let (b, lb) = if alias {
                (a.clone(), la.clone())
            } else {
                (
                    DistTensor::from_local_on(ctl, &lb, block, &Placement::Workers).unwrap(),
                    lb,
                )
            };
            let spec = "ij,kj->ik";
            let out_dtype = if complex { DType::C64 } else { DType::F64 };
            let lc = beta.map(|_| local(&[m, n], out_dtype == DType::C64, seed + 2));
            let c = lc
                .as_ref()
                .map(|l| DistTensor::from_local_on(ctl, l, block, &Placement::Workers).unwrap());
            let opts = ContractOptions {
                alpha: C64::new(alpha, 0.0),
                beta: C64::new(beta.unwrap_or(0.0), 0.0),
                c: c.as_ref(),
                conj,
                strict_blocking: true,
            };
            let r = uni20::dist::einsum(ctl, spec, &[&a, &b], &opts).unwrap();
            let got = r.to_local(ctl).unwrap();
            let lopts = LocalOptions {
                alpha: opts.alpha,
                beta: opts.beta,
                c: lc.as_ref(),
                conj,
                strict_blocking: true,
            };
            let (want, _) = local_einsum(spec, &[&la, &lb], &lopts, &BackendList::reference_only()).unwrap();
            assert_close(&got, &want, "dense against the local reference");
            Some((got, r.plan_summary().cloned().unwrap()))
        }
        Op::Symmetric {
            sa,
            sb,
            sc,
            tile,
            qa,
            qb,
        } => {
            let la = layout(vec![leg(Direction::Out, sa, tile), leg(Direction::In, sb, tile)], qa)?;
            let lb = layout(vec![leg(Direction::Out, sb, tile), leg(Direction::In, sc, tile)], qb)?;
            let a = sym_random(ctl, la, DType::F64, seed).unwrap();
            let b = sym_random(ctl, lb, DType::F64, seed + 1).unwrap();
            // An output flux no block of the free legs satisfies is refused
            // at validation (nothing is planned): not a case of this test.
            let r = match uni20::dist::contract(ctl, "ab,bc->ac", &a, &b) {
                Err(DistError::SymContract(_)) => return None,
                r => r.unwrap(),
            };
            let got = r.to_dense(ctl).unwrap();
            let (da, db) = (a.to_dense(ctl).unwrap(), b.to_dense(ctl).unwrap());
            let (want, _) = local_einsum(
                "ab,bc->ac",
                &[&da, &db],
                &LocalOptions::default(),
                &BackendList::reference_only(),
            )
            .unwrap();
            assert_close(&got, &want, "symmetric against the dense reference");
            Some((got, r.plan_summary().cloned().unwrap()))
        }
    }
}

fn assert_close(got: &LocalTensor, want: &LocalTensor, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}");
    let (g, w) = (got.to_c64_vec(), want.to_c64_vec());
    let err = g.iter().zip(&w).fold(0.0f64, |m, (x, y)| m.max((x - y).norm()));
    assert!(err <= 1e-12, "{what}: max error {err:e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// With the cache the results and plans are those of the uncached run,
    /// whatever repeats or changes from one operation to the next.
    #[test]
    fn cached_plans_give_the_results_and_plans_of_uncached_ones(
        ops in proptest::collection::vec(op(), 2..8),
        repeat in 1usize..=2,
        seed in any::<u64>(),
    ) {
        let ops: Vec<Op> = ops.iter().cycle().take(ops.len() * repeat).cloned().collect();
        let (cached, (hits, misses)) = run_sequence(&ops, 64, seed);
        let (plain, (h0, m0)) = run_sequence(&ops, 0, seed);
        prop_assert_eq!((h0, m0), (0, 0), "capacity 0 turns the cache off");
        prop_assert!(hits + misses >= cached.iter().flatten().count() as u64);
        for (i, (c, p)) in cached.iter().zip(&plain).enumerate() {
            match (c, p) {
                (Some((tc, sc)), Some((tp, sp))) => {
                    prop_assert_eq!(tc.to_c64_vec(), tp.to_c64_vec(), "op {} ({:?})", i, &ops[i]);
                    prop_assert!(!sp.cached, "op {i}: no cache, no reuse");
                    if matches!(ops[i], Op::Dense { .. }) {
                        let sc_plain = PlanSummary { cached: false, ..sc.clone() };
                        prop_assert_eq!(&sc_plain, sp, "op {} ({:?})", i, &ops[i]);
                    } else {
                        // A symmetric plan re-fitted to other extents keeps the rank
                        // assignment of the structure's first plan: the work is the same.
                        let work = |s: &PlanSummary| (s.operation.clone(), s.work_items, s.block_products, s.flops);
                        prop_assert_eq!(work(sc), work(sp), "op {} ({:?})", i, &ops[i]);
                    }
                }
                (None, None) => {}
                _ => prop_assert!(false, "op {i}: one run contracted, the other did not"),
            }
        }
        if repeat == 2 && cached.iter().any(Option::is_some) {
            prop_assert!(hits > 0, "a repeated sequence hits the cache");
        }
    }
}

/// A structure seen before is a hit; a changed one (tiling, owners, flux,
/// sectors, dtype, conjugation) is a miss, not a wrong plan.
#[test]
fn hit_rate_of_a_repeated_sequence_and_misses_on_changed_structure() {
    let base = Op::Dense {
        m: 4,
        k: 6,
        n: 5,
        block: 2,
        a_on_one: false,
        complex: false,
        conj: [false, false],
        alias: false,
        alpha: 1.0,
        beta: None,
    };
    let sym = Op::Symmetric {
        sa: 0,
        sb: 1,
        sc: 2,
        tile: 2,
        qa: 0,
        qb: 0,
    };
    // Ten rounds of the same two contractions: 2 misses, 18 hits.
    let ops: Vec<Op> = (0..10).flat_map(|_| [base.clone(), sym.clone()]).collect();
    let (out, (hits, misses)) = run_sequence(&ops, 64, 7);
    assert!(out.iter().all(Option::is_some));
    assert_eq!((hits, misses), (18, 2));
    // The summaries say which plans were reused: all but the first two.
    let reused: Vec<bool> = out.iter().map(|o| o.as_ref().unwrap().1.cached).collect();
    assert_eq!(reused, (0..20).map(|i| i >= 2).collect::<Vec<_>>());
    assert!(out[2]
        .as_ref()
        .unwrap()
        .1
        .to_string()
        .ends_with("; plan reused from the cache"));
    // Each change of structure is a new key.
    let changed = |f: &dyn Fn(&mut Op)| {
        let mut o = base.clone();
        f(&mut o);
        o
    };
    let variants = vec![
        base.clone(),
        changed(&|o| {
            if let Op::Dense { block, .. } = o {
                *block = 3
            }
        }),
        changed(&|o| {
            if let Op::Dense { a_on_one, .. } = o {
                *a_on_one = true
            }
        }),
        changed(&|o| {
            if let Op::Dense { complex, .. } = o {
                *complex = true
            }
        }),
        changed(&|o| {
            if let Op::Dense { conj, .. } = o {
                *conj = [false, true]
            }
        }),
        changed(&|o| {
            if let Op::Dense { alpha, .. } = o {
                *alpha = 2.0
            }
        }),
        sym.clone(),
        Op::Symmetric {
            sa: 0,
            sb: 1,
            sc: 2,
            tile: 2,
            qa: 1,
            qb: 0,
        },
        Op::Symmetric {
            sa: 0,
            sb: 1,
            sc: 0,
            tile: 2,
            qa: 0,
            qb: 0,
        },
        Op::Symmetric {
            sa: 0,
            sb: 1,
            sc: 2,
            tile: 1,
            qa: 0,
            qb: 0,
        },
    ];
    let (out, (hits, misses)) = run_sequence(&variants, 64, 11);
    assert!(out.iter().all(Option::is_some));
    assert_eq!((hits, misses), (0, variants.len() as u64));

    // Other extents, the same block structure (charges, tile counts, flux,
    // owners): the plan is reused, re-fitted to the new block shapes (the
    // results are checked against the dense reference in `run_op`), and its
    // work is that of a plan made for them.
    let moved = Op::Symmetric {
        sa: 3,
        sb: 1,
        sc: 3,
        tile: 2,
        qa: 0,
        qb: 0,
    };
    let first = Op::Symmetric {
        sa: 0,
        sb: 1,
        sc: 0,
        tile: 2,
        qa: 0,
        qb: 0,
    };
    let (out, (hits, misses)) = run_sequence(&[first.clone(), moved.clone()], 64, 13);
    assert_eq!((hits, misses), (1, 1));
    let refit = &out[1].as_ref().unwrap().1;
    let fresh = run_sequence(&[moved], 64, 13).0[0].as_ref().unwrap().1.clone();
    assert!(refit.cached && !fresh.cached);
    assert_eq!(
        (refit.work_items, refit.block_products, refit.flops),
        (fresh.work_items, fresh.block_products, fresh.flops)
    );
    let first_summary = run_sequence(&[first], 64, 13).0[0].as_ref().unwrap().1.clone();
    assert_ne!(refit.flops, first_summary.flops, "the extents differ");
}

/// The cache holds at most its capacity, evicting the least recently used.
#[test]
fn the_cache_is_bounded_and_evicts_the_least_recently_used() {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            set_plan_cache_capacity(ctl, 2);
            let op = |k: usize| {
                let a = DistTensor::from_local(ctl, &local(&[3, k], false, k as u64), 2).unwrap();
                let b = DistTensor::from_local(ctl, &local(&[2, k], false, 9), 2).unwrap();
                uni20::dist::contract(ctl, "ij,kj->ik", &a, &b)
                    .unwrap()
                    .wait(ctl)
                    .unwrap();
            };
            op(1);
            op(2);
            op(1); // hit: 1 is now the most recent
            op(3); // miss: evicts 2
            let s = plan_cache_stats(ctl);
            assert_eq!((s.entries, s.capacity, s.hits, s.misses, s.evictions), (2, 2, 1, 3, 1));
            op(1); // still cached
            op(2); // evicted: a miss
            let s = plan_cache_stats(ctl);
            assert_eq!((s.entries, s.hits, s.misses, s.evictions), (2, 2, 4, 2));
            let p = ctl.profile();
            assert_eq!((p.plan_cache_hits, p.plan_cache_misses), (2, 4));
        })
        .unwrap();
}

/// The byte budget bounds what the cache holds: a budget below one plan
/// caches nothing; one that fits a single plan keeps only the latest.
#[test]
fn the_byte_budget_bounds_the_cache() {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let op = |k: usize| {
                let a = DistTensor::from_local(ctl, &local(&[3, k], false, k as u64), 2).unwrap();
                let b = DistTensor::from_local(ctl, &local(&[2, k], false, 9), 2).unwrap();
                uni20::dist::contract(ctl, "ij,kj->ik", &a, &b)
                    .unwrap()
                    .wait(ctl)
                    .unwrap();
            };
            set_plan_cache_capacity(ctl, 64);
            op(4);
            let one = plan_cache_stats(ctl).bytes;
            assert!(one > 0 && plan_cache_stats(ctl).entries == 1);
            // Room for one plan of this size, not two.
            set_plan_cache_budget(ctl, one + one / 2);
            op(5);
            let s = plan_cache_stats(ctl);
            assert_eq!(s.entries, 1, "{s:?}");
            assert!(s.bytes <= s.budget_bytes, "{s:?}");
            assert_eq!(s.evictions, 1);
            op(5);
            assert_eq!(plan_cache_stats(ctl).hits, 1, "the latest plan is kept");
            // Below one plan: nothing is cached, every lookup plans.
            set_plan_cache_budget(ctl, 16);
            op(5);
            let s = plan_cache_stats(ctl);
            assert_eq!((s.entries, s.bytes), (0, 0), "{s:?}");
            assert_eq!(s.hits, 1);
        })
        .unwrap();
}
