//! Symmetric (block-sparse) contraction on 1-3 in-process ranks: random
//! legs, sectors, fluxes, tilings, label orders, conjugation flags and
//! `alpha`/`beta` with an existing C, in all four dtypes, against the dense
//! contraction of the dense embeddings by the local reference backend
//! (naive loops); the plan's block pairs against an independent brute-force
//! count over all tile tuples; every bad input as a typed error.

#[path = "symmetric_contract_common/mod.rs"]
mod common;

use common::{case, Case};
use proptest::prelude::*;
use uni20::dist::error::LayoutError;
use uni20::dist::symmetry::{Direction, Leg, Sector, SymContractError, SymmetricLayout, Symmetry};
use uni20::dist::{sym_random, ContractOptions};
use uni20::prelude::*;

/// Runs one case in its own in-process universe, with 1-3 threads per rank (from the
/// seed): with more than one, a rank computes its items in parallel (`handle_items`).
fn run_case(c: &Case) -> bool {
    let mut ran = false;
    uni20::universe()
        .ranks(c.ranks)
        .threads_per_rank(1 + (c.seed % 3) as usize)
        .run(|ctl| ran = common::run_in(ctl, c))
        .unwrap();
    ran
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// The dense embedding of the symmetric product equals the dense product of
    /// the embeddings.
    #[test]
    fn symmetric_contraction_matches_the_dense_contraction_of_the_embeddings(c in case()) {
        run_case(&c);
    }
}

/// Most random cases do contract (the property test is not vacuous).
#[test]
fn most_random_cases_reach_the_comparison() {
    let mut ran = 0;
    for seed in 0..12u64 {
        let c = Case {
            seed: seed * 7919 + 1,
            free_a: 1 + (seed % 2) as usize,
            contracted: 1 + (seed % 3 == 0) as usize,
            free_b: 1,
            dtype: [DType::F64, DType::C64][(seed % 2) as usize],
            ranks: 1 + (seed % 3) as usize,
            conj: [seed % 4 == 1, seed % 5 == 2],
            with_c: seed % 2 == 0,
        };
        ran += usize::from(run_case(&c));
    }
    assert!(ran >= 8, "only {ran} of 12 cases contracted");
}

/// A U(1) leg with sectors `(charge, dim)` in tiles of at most `tile`.
fn u1_leg(dir: Direction, sectors: &[(i64, usize)], tile: usize) -> Leg {
    Leg::u1(dir, sectors, tile).unwrap()
}

/// Per tile of a leg built by `u1_leg(dir, sectors, tile)`: its signed
/// charge and extent, computed from the sector list (not from the layout).
fn tiles_of(dir: Direction, sectors: &[(i64, usize)], tile: usize) -> Vec<(i64, usize)> {
    let sign = if dir == Direction::Out { 1 } else { -1 };
    let mut v = Vec::new();
    for &(q, d) in sectors {
        let mut left = d;
        while left > 0 {
            let e = left.min(tile);
            v.push((sign * q, e));
            left -= e;
        }
    }
    v
}

/// All tile tuples of `legs` (each a list of (signed charge, extent)) whose
/// charges add up to `flux`.
fn allowed(legs: &[Vec<(i64, usize)>], flux: i64) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut idx = vec![0usize; legs.len()];
    loop {
        let q: i64 = idx.iter().zip(legs).map(|(&t, l)| l[t].0).sum();
        if q == flux {
            out.push(idx.clone());
        }
        let mut d = legs.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < legs[d].len() {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// A leg given as (direction, sectors `(charge, dim)`, largest tile).
type LegSpec<'a> = (Direction, &'a [(i64, usize)], usize);

/// The plan of a DMRG-like contraction `L(a,w,b) x A(b,s,c) -> (a,w,s,c)`
/// counts exactly the charge-allowed block pairs (brute force over every
/// tile tuple of both operands with the charge rule), their multiply-adds,
/// and one work item per allowed output block; output blocks that no pair
/// reaches are zeros, and nothing is moved on one rank.
#[test]
fn the_plan_counts_exactly_the_charge_allowed_block_pairs() {
    let bond = [(-2, 2), (-1, 3), (0, 5), (1, 3), (2, 2)];
    let mpo = [(-1, 1), (0, 3), (1, 1)];
    let phys = [(-1, 1), (1, 1)];
    let spec_l = [
        (Direction::In, &bond[..], 2),
        (Direction::Out, &mpo[..], 2),
        (Direction::Out, &bond[..], 2),
    ];
    let spec_a = [
        (Direction::In, &bond[..], 2),
        (Direction::In, &phys[..], 1),
        (Direction::Out, &bond[..], 3),
    ];
    let g = Symmetry::u1();
    let lay = |s: &[LegSpec<'_>], flux: i64| {
        SymmetricLayout::new(
            g.clone(),
            s.iter().map(|&(d, sec, t)| u1_leg(d, sec, t)).collect(),
            g.charge(&[flux]).unwrap(),
        )
        .unwrap()
    };
    let tl: Vec<Vec<(i64, usize)>> = spec_l.iter().map(|&(d, s, t)| tiles_of(d, s, t)).collect();
    let ta: Vec<Vec<(i64, usize)>> = spec_a.iter().map(|&(d, s, t)| tiles_of(d, s, t)).collect();
    for (flux_l, flux_a) in [(0, 0), (0, 1), (1, -1)] {
        let (ll, la) = (lay(&spec_l, flux_l), lay(&spec_a, flux_a));
        // Brute force: allowed tile tuples of each operand, pairs that agree on the
        // contracted leg (L's leg 2 with A's leg 0), and their m * n * k.
        let bl = allowed(&tl, flux_l);
        let ba = allowed(&ta, flux_a);
        let mut pairs = 0usize;
        let mut flops = 0u64;
        let mut reached = std::collections::BTreeSet::new();
        for x in &bl {
            for y in &ba {
                if x[2] == y[0] {
                    pairs += 1;
                    let (m, k) = ((tl[0][x[0]].1 * tl[1][x[1]].1) as u64, tl[2][x[2]].1 as u64);
                    let n = (ta[1][y[1]].1 * ta[2][y[2]].1) as u64;
                    flops += m * n * k;
                    reached.insert((x[0], x[1], y[1], y[2]));
                }
            }
        }
        // Output (a, w, s, c): legs of L's a, w and A's s, c, flux = flux_l + flux_a.
        let tout = vec![tl[0].clone(), tl[1].clone(), ta[1].clone(), ta[2].clone()];
        let out_blocks = allowed(&tout, flux_l + flux_a);
        assert!(pairs > 0);
        assert!(reached.len() <= out_blocks.len());
        for ranks in [1, 3] {
            uni20::universe()
                .ranks(ranks)
                .run(|ctl| {
                    let l = sym_random(ctl, ll.clone(), DType::F64, 1).unwrap();
                    let a = sym_random(ctl, la.clone(), DType::F64, 2).unwrap();
                    let r = contract(ctl, "awb,bsc->awsc", &l, &a).unwrap();
                    r.wait(ctl).unwrap();
                    let s = r.plan_summary().unwrap().clone();
                    assert_eq!(s.block_products, pairs, "flux ({flux_l}, {flux_a}): block pairs");
                    assert_eq!(s.flops, flops, "multiply-adds");
                    assert_eq!(s.work_items, out_blocks.len(), "one item per allowed output block");
                    assert_eq!(r.manifest(ctl).unwrap().blocks.len(), out_blocks.len());
                    assert_eq!(s.per_rank.values().map(|r| r.flops).sum::<u64>(), flops);
                    if ranks == 1 {
                        assert_eq!(s.bytes_moved, 0);
                    }
                    // Blocks that no pair reaches are stored as exact zeros.
                    let dense = r.to_dense(ctl).unwrap().to_c64_vec();
                    let shape = r.shape().to_vec();
                    let lay_out = r.layout().unwrap();
                    for (bi, blk) in lay_out.blocks().iter().enumerate() {
                        let t = &blk.tiles;
                        if reached.contains(&(t[0], t[1], t[2], t[3])) {
                            continue;
                        }
                        let (off, ext) = (lay_out.block_offsets(bi), lay_out.block_extents(bi));
                        for i0 in 0..ext[0] {
                            for i1 in 0..ext[1] {
                                for i2 in 0..ext[2] {
                                    for i3 in 0..ext[3] {
                                        let p = (((off[0] + i0) * shape[1] + off[1] + i1) * shape[2] + off[2] + i2)
                                            * shape[3]
                                            + off[3]
                                            + i3;
                                        assert_eq!(dense[p], C64::new(0.0, 0.0));
                                    }
                                }
                            }
                        }
                    }
                })
                .unwrap();
        }
    }
}

/// Items are placed by flops: with one sector far larger than the others, no
/// rank's multiply-adds exceed the larger of the biggest item and 9/8 of the
/// even share (plus the output elements each item also counts).
#[test]
fn items_are_balanced_by_flops_not_by_count() {
    let big = [(-1, 1), (0, 12), (1, 1)];
    let g = Symmetry::u1();
    let legs = |d0: Direction, d1: Direction| vec![u1_leg(d0, &big, 12), u1_leg(d1, &big, 12)];
    let la = SymmetricLayout::new(g.clone(), legs(Direction::In, Direction::Out), g.identity()).unwrap();
    let lb = SymmetricLayout::new(g.clone(), legs(Direction::In, Direction::Out), g.identity()).unwrap();
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let a = sym_random(ctl, la.clone(), DType::F64, 3).unwrap();
            let b = sym_random(ctl, lb.clone(), DType::F64, 4).unwrap();
            let r = contract(ctl, "ij,jk->ik", &a, &b).unwrap();
            r.wait(ctl).unwrap();
            let s = r.plan_summary().unwrap();
            // Items: 12^3 for the big sector, 1 for each small one.
            assert_eq!(s.flops, 12 * 12 * 12 + 2);
            let busiest = s.per_rank.values().map(|r| r.flops).max().unwrap();
            assert_eq!(busiest, 12 * 12 * 12, "the big item's rank gets nothing else");
        })
        .unwrap();
}

/// Every bad input is a typed error naming what is wrong.
#[test]
fn bad_symmetric_contractions_are_typed_errors() {
    let g = Symmetry::u1();
    let s1 = [(-1, 2), (0, 1), (1, 2)];
    let s2 = [(-1, 2), (0, 2), (1, 2)];
    let lay = |legs: Vec<Leg>| SymmetricLayout::new(g.clone(), legs, g.identity()).unwrap();
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let a = sym_random(
                ctl,
                lay(vec![u1_leg(Direction::In, &s1, 2), u1_leg(Direction::Out, &s1, 2)]),
                DType::F64,
                1,
            )
            .unwrap();
            // Mismatched sector lists on the contracted leg: the leg and both lists are named.
            let b = sym_random(
                ctl,
                lay(vec![u1_leg(Direction::In, &s2, 2), u1_leg(Direction::Out, &s2, 2)]),
                DType::F64,
                2,
            )
            .unwrap();
            let e = contract(ctl, "ij,jk->ik", &a, &b).unwrap_err();
            assert!(
                matches!(
                    &e,
                    DistError::SymContract(SymContractError::SectorMismatch { label: 'j', .. })
                ),
                "{e:?}"
            );
            let msg = e.to_string();
            assert!(
                msg.contains("`j`") && msg.contains("[(-1):2, (0):1, (1):2]") && msg.contains("[(-1):2, (0):2, (1):2]"),
                "{msg}"
            );
            // Equal directions on a contracted pair.
            let e = contract(ctl, "ij,kj->ik", &a, &a).unwrap_err();
            assert!(
                matches!(
                    e,
                    DistError::SymContract(SymContractError::SameDirection {
                        label: 'j',
                        direction: Direction::Out
                    })
                ),
                "{e:?}"
            );
            // ... which conjugating one operand fixes (conj dualizes its legs).
            let opts = ContractOptions {
                conj: [false, true],
                ..ContractOptions::default()
            };
            assert!(contract_with(ctl, "ij,kj->ik", &a, &a, &opts).is_ok());
            // Different tiles of the same sectors.
            let t = sym_random(
                ctl,
                lay(vec![u1_leg(Direction::In, &s1, 1), u1_leg(Direction::Out, &s1, 1)]),
                DType::F64,
                3,
            )
            .unwrap();
            let e = contract(ctl, "ij,jk->ik", &a, &t).unwrap_err();
            assert!(
                matches!(e, DistError::SymContract(SymContractError::TileMismatch { .. })),
                "{e:?}"
            );
            // A symmetric operand with a dense one, and a dense C_in.
            let d = zeros(ctl, &[5, 5], DType::F64, 2).unwrap();
            let e = contract(ctl, "ij,jk->ik", &a, &d).unwrap_err();
            assert!(
                matches!(
                    e,
                    DistError::Layout(LayoutError::Mixed {
                        symmetric: 0,
                        dense: 1,
                        ..
                    })
                ),
                "{e:?}"
            );
            let opts = ContractOptions {
                c: Some(&d),
                beta: C64::new(1.0, 0.0),
                ..ContractOptions::default()
            };
            let e = contract_with(ctl, "ij,jk->ik", &a, &a, &opts).unwrap_err();
            assert!(
                matches!(e, DistError::Layout(LayoutError::Mixed { dense: 2, .. })),
                "{e:?}"
            );
            // A symmetric C_in of another layout.
            let c = sym_random(
                ctl,
                SymmetricLayout::new(
                    g.clone(),
                    vec![u1_leg(Direction::In, &s1, 2), u1_leg(Direction::Out, &s1, 2)],
                    g.charge(&[1]).unwrap(),
                )
                .unwrap(),
                DType::F64,
                4,
            )
            .unwrap();
            let opts = ContractOptions {
                c: Some(&c),
                beta: C64::new(1.0, 0.0),
                ..ContractOptions::default()
            };
            let e = contract_with(ctl, "ij,jk->ik", &a, &a, &opts).unwrap_err();
            assert!(
                matches!(e, DistError::SymContract(SymContractError::OutputLayout { .. })),
                "{e:?}"
            );
            // A trace, a batch label, one operand.
            for (spec, label) in [("jj,jk->k", 'j'), ("ij,jk->ijk", 'j')] {
                let e = contract(ctl, spec, &a, &a).unwrap_err();
                assert!(
                    matches!(e, DistError::SymContract(SymContractError::BadLabel { label: l, .. }) if l == label),
                    "{spec}: {e:?}"
                );
            }
            let e = einsum(ctl, "ij->ji", &[&a], &ContractOptions::default()).unwrap_err();
            assert!(
                matches!(e, DistError::SymContract(SymContractError::OperandCount { got: 1 })),
                "{e:?}"
            );
            // A product whose fused flux no output block satisfies: full contraction of
            // flux-0 and flux-1 tensors.
            let opts = ContractOptions {
                conj: [false, true],
                ..ContractOptions::default()
            };
            let e = contract_with(ctl, "ij,ij->", &c, &a, &opts).unwrap_err();
            assert!(
                matches!(e, DistError::SymContract(SymContractError::Symmetry(_))),
                "{e:?}"
            );
        })
        .unwrap();
}

/// The root memoizes the block pairs of a structure (spec, conjugation, layouts): the
/// same contraction again, then one whose operand differs only in its flux, and then
/// one with a conjugated operand (a different key with equal legs), each matches the
/// dense contraction of the embeddings — a memo keyed too coarsely would reuse the
/// first structure's pairs and output layout.
#[test]
fn memoized_block_pairs_never_serve_another_structure() {
    use uni20::dispatch::{einsum as local_einsum, BackendList, ContractOptions as LocalOptions};
    let g = Symmetry::u1();
    let sectors = |dims: &[(i64, usize)]| {
        dims.iter()
            .map(|&(q, dim)| Sector {
                charge: g.charge(&[q]).unwrap(),
                dim,
            })
            .collect::<Vec<_>>()
    };
    let i = Leg::tiled(g.clone(), Direction::In, sectors(&[(-1, 2), (0, 3), (1, 2)]), 2).unwrap();
    let j = Leg::tiled(g.clone(), Direction::Out, sectors(&[(-1, 1), (0, 2), (1, 3)]), 2).unwrap();
    let k = Leg::tiled(g.clone(), Direction::Out, sectors(&[(-1, 2), (0, 1), (1, 2)]), 2).unwrap();
    let layout = |legs: Vec<Leg>, q: i64| SymmetricLayout::new(g.clone(), legs, g.charge(&[q]).unwrap()).unwrap();
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let b = sym_random(ctl, layout(vec![j.dual(), k.clone()], 0), DType::F64, 7).unwrap();
            let bd = b.to_dense(ctl).unwrap();
            let mut blocks = Vec::new();
            for (flux, conj, seed) in [
                (0, false, 1),
                (0, false, 2),
                (1, false, 3),
                (-1, false, 4),
                (0, true, 5),
            ] {
                // With conj, A's legs enter dualized: give it the dual legs so that j still meets B's.
                let a_legs = if conj {
                    vec![i.dual(), j.dual()]
                } else {
                    vec![i.clone(), j.clone()]
                };
                let a = sym_random(ctl, layout(a_legs, flux), DType::F64, seed).unwrap();
                let opts = ContractOptions {
                    conj: [conj, false],
                    ..ContractOptions::default()
                };
                let r = contract_with(ctl, "ij,jk->ik", &a, &b, &opts).unwrap();
                let lopts = LocalOptions {
                    conj: [conj, false],
                    ..LocalOptions::default()
                };
                let ad = a.to_dense(ctl).unwrap();
                let (want, _) = local_einsum("ij,jk->ik", &[&ad, &bd], &lopts, &BackendList::reference_only()).unwrap();
                common::assert_close(
                    &r.to_dense(ctl).unwrap(),
                    &want,
                    1e-12,
                    &format!("flux {flux} conj {conj}"),
                );
                blocks.push(r.layout().unwrap().blocks().len());
            }
            // The fluxes give different outputs (not one memoized layout for all).
            assert_ne!(blocks[0], blocks[2], "{blocks:?}");
        })
        .unwrap();
}

/// An outer product whose one output block (2^20 x 2^20 f64, 8 TiB) is over
/// the block-size limit is refused on the root with `PlanTooLarge`, before
/// anything runs, the first time and again when the block pairs come from
/// the memo; the operands stay usable.
#[test]
fn an_output_block_over_the_size_limit_is_refused_before_anything_runs() {
    let g = Symmetry::u1();
    let n = 1 << 20;
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let vec_of = |seed| {
                let leg = u1_leg(Direction::Out, &[(0, n)], n);
                sym_random(
                    ctl,
                    SymmetricLayout::new(g.clone(), vec![leg], g.identity()).unwrap(),
                    DType::F64,
                    seed,
                )
                .unwrap()
            };
            let (x, y) = (vec_of(1), vec_of(2));
            for attempt in 0..2 {
                let e = contract(ctl, "i,j->ij", &x, &y).unwrap_err();
                assert!(
                    matches!(&e, DistError::PlanTooLarge { what, .. } if what.contains("largest output block")),
                    "attempt {attempt}: {e:?}"
                );
            }
            assert!(norm(ctl, &x).unwrap() > 0.0);
        })
        .unwrap();
}
