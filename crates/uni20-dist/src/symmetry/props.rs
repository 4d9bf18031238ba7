//! Property tests of the symmetry layer against brute force: the allowed
//! blocks are exactly the tile tuples whose charges satisfy the rule, the
//! stored elements are exactly the dense positions whose charges do, and
//! fusion is a bijection that keeps the charge rule.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

/// Random groups: U(1), Z_2, Z_3, U(1) x Z_2.
fn group() -> impl Strategy<Value = Symmetry> {
    prop_oneof![
        Just(Symmetry::u1()),
        Just(Symmetry::zn(2).unwrap()),
        Just(Symmetry::zn(3).unwrap()),
        Just(Symmetry::product(vec![GroupFactor::U1, GroupFactor::Z(2)]).unwrap()),
    ]
}

/// Raw components of a charge (reduced by the group later).
fn raw_charge(n: usize) -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(-2i64..=2, n)
}

/// A leg: 1-3 sectors of dims 1-3, a tile size 1-3, a direction.
fn leg(g: Symmetry) -> impl Strategy<Value = Leg> {
    let n = g.factors().len();
    (
        prop::collection::vec((raw_charge(n), 1usize..=3), 1..=3),
        1usize..=3,
        any::<bool>(),
    )
        .prop_map(move |(raw, tile, out)| {
            let mut sectors: Vec<Sector> = raw
                .into_iter()
                .map(|(q, dim)| Sector {
                    charge: g.charge(&q).unwrap(),
                    dim,
                })
                .collect();
            sectors.sort_by(|a, b| a.charge.cmp(&b.charge));
            sectors.dedup_by(|a, b| a.charge == b.charge);
            let dir = if out { Direction::Out } else { Direction::In };
            Leg::tiled(g.clone(), dir, sectors, tile).unwrap()
        })
}

fn case() -> impl Strategy<Value = (Symmetry, Vec<Leg>, Vec<i64>)> {
    group().prop_flat_map(|g| {
        let n = g.factors().len();
        (Just(g.clone()), prop::collection::vec(leg(g), 1..=4), raw_charge(n))
    })
}

/// The charge rule by plain integer arithmetic, independent of
/// `Symmetry::fuse`: sum of +q (Out) and -q (In) per component, reduced
/// modulo n for Z_n components, equals the flux.
fn satisfies(g: &Symmetry, charges: &[(&Charge, Direction)], flux: &Charge) -> bool {
    let mut sum = vec![0i64; g.factors().len()];
    for (q, d) in charges {
        for (k, v) in q.components().iter().enumerate() {
            sum[k] += if *d == Direction::Out { *v } else { -*v };
        }
    }
    g.factors().iter().enumerate().all(|(k, f)| match f {
        GroupFactor::U1 => sum[k] == flux.components()[k],
        GroupFactor::Z(n) => sum[k].rem_euclid(i64::from(*n)) == flux.components()[k],
    })
}

/// The sector of dense index `i` along `leg`, by scanning the dims.
fn sector_of(leg: &Leg, mut i: usize) -> usize {
    for (s, sec) in leg.sectors().iter().enumerate() {
        if i < sec.dim {
            return s;
        }
        i -= sec.dim;
    }
    unreachable!("index beyond the leg")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn allowed_blocks_equal_the_brute_force_filter((g, legs, raw) in case()) {
        let flux = g.charge(&raw).unwrap();
        let mut expected = BTreeSet::new();
        let counts: Vec<usize> = legs.iter().map(Leg::tile_count).collect();
        let total: usize = counts.iter().product();
        for mut flat in 0..total {
            let mut tiles = vec![0usize; legs.len()];
            for k in (0..legs.len()).rev() {
                tiles[k] = flat % counts[k];
                flat /= counts[k];
            }
            let charges: Vec<_> = tiles
                .iter()
                .zip(&legs)
                .map(|(&t, l)| (&l.sectors()[l.tile(t).unwrap().sector].charge, l.direction()))
                .collect();
            if satisfies(&g, &charges, &flux) {
                expected.insert(tiles);
            }
        }
        match SymmetricLayout::new(g.clone(), legs.clone(), flux.clone()) {
            Ok(lay) => {
                let got: Vec<Vec<usize>> = lay.blocks().iter().map(|b| b.tiles.clone()).collect();
                let mut sorted = got.clone();
                sorted.sort();
                prop_assert_eq!(&got, &sorted, "blocks are sorted by tile tuple");
                prop_assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), expected.clone());
                for (b, blk) in lay.blocks().iter().enumerate() {
                    prop_assert_eq!(lay.find(&blk.tiles), Some(b));
                }
                // Stored elements: the dense positions whose charges satisfy the rule.
                let shape = lay.dense_shape();
                let n: usize = shape.iter().product();
                let mut allowed = 0usize;
                for mut flat in 0..n {
                    let mut charges = Vec::with_capacity(legs.len());
                    for k in (0..legs.len()).rev() {
                        let i = flat % shape[k];
                        flat /= shape[k];
                        charges.push((&legs[k].sectors()[sector_of(&legs[k], i)].charge, legs[k].direction()));
                    }
                    if satisfies(&g, &charges, &flux) {
                        allowed += 1;
                    }
                }
                prop_assert_eq!(lay.stored_elements(), allowed);
            }
            Err(SymmetryError::NoAllowedBlock { .. }) => prop_assert!(expected.is_empty()),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }

    #[test]
    fn fusion_is_a_charge_preserving_bijection((g, legs, _raw) in case(), out in any::<bool>()) {
        let dir = if out { Direction::Out } else { Direction::In };
        let f = Fusion::new(legs.clone(), dir).unwrap();
        let fused = f.fused();
        let total: usize = legs.iter().map(Leg::dim).product();
        prop_assert_eq!(fused.dim(), total);
        let mut seen = vec![false; total];
        let dims: Vec<usize> = legs.iter().map(Leg::dim).collect();
        for mut flat in 0..total {
            let mut idx = vec![0usize; legs.len()];
            for k in (0..legs.len()).rev() {
                idx[k] = flat % dims[k];
                flat /= dims[k];
            }
            let j = f.fuse_index(&idx).unwrap();
            prop_assert!(!seen[j], "fuse_index is injective");
            seen[j] = true;
            prop_assert_eq!(f.split_index(j).unwrap(), idx.clone());
            // The fused state's charge with the fused leg's sign equals the parts' signed sum:
            // the pair (parts..., fused.dual()) satisfies the rule with the identity flux.
            let mut charges: Vec<_> = idx
                .iter()
                .zip(&legs)
                .map(|(&i, l)| (&l.sectors()[sector_of(l, i)].charge, l.direction()))
                .collect();
            let fq = &fused.sectors()[sector_of(fused, j)].charge;
            charges.push((fq, fused.direction().flip()));
            prop_assert!(satisfies(&g, &charges, &g.identity()));
        }
        prop_assert!(f.fuse_index(&vec![0; legs.len() + 1]).is_err());
        prop_assert!(f.split_index(total).is_err());
    }

    #[test]
    fn group_laws((g, _legs, a) in case(), b in raw_charge(2), c in raw_charge(2)) {
        let n = g.factors().len();
        let a = g.charge(&a).unwrap();
        let b = g.charge(&b[..n]).unwrap();
        let c = g.charge(&c[..n]).unwrap();
        prop_assert_eq!(g.fuse(&a, &b).unwrap(), g.fuse(&b, &a).unwrap());
        prop_assert_eq!(
            g.fuse(&g.fuse(&a, &b).unwrap(), &c).unwrap(),
            g.fuse(&a, &g.fuse(&b, &c).unwrap()).unwrap()
        );
        prop_assert_eq!(g.fuse(&a, &g.identity()).unwrap(), a.clone());
        prop_assert_eq!(g.fuse(&a, &g.dual(&a).unwrap()).unwrap(), g.identity());
        prop_assert_eq!(g.dual(&g.dual(&a).unwrap()).unwrap(), a.clone());
        prop_assert!(g.check(&a).is_ok());
    }
}

/// Dense embedding of block data: `data[b]` holds block `b` in row-major
/// order; every other element is zero.
fn embed(lay: &SymmetricLayout, data: &[Vec<f64>]) -> Vec<f64> {
    let shape = lay.dense_shape();
    let strides: Vec<usize> = (0..shape.len()).map(|k| shape[k + 1..].iter().product()).collect();
    let mut out = vec![0.0; shape.iter().product()];
    for (b, vals) in data.iter().enumerate() {
        let ext = lay.block_extents(b);
        let off = lay.block_offsets(b);
        for (flat, v) in vals.iter().enumerate() {
            let mut rem = flat;
            let mut pos = 0;
            for k in (0..ext.len()).rev() {
                pos += (off[k] + rem % ext[k]) * strides[k];
                rem /= ext[k];
            }
            out[pos] = *v;
        }
    }
    out
}

/// Naive dense contraction `C[c] = sum A[a] B[b]` over label lists.
fn dense_contract(a: &[f64], sa: &[usize], la: &[char], b: &[f64], sb: &[usize], lb: &[char], lc: &[char]) -> Vec<f64> {
    let mut labels: Vec<char> = la.to_vec();
    for c in lb {
        if !labels.contains(c) {
            labels.push(*c);
        }
    }
    let dim = |c: char| {
        la.iter()
            .position(|&x| x == c)
            .map(|i| sa[i])
            .or_else(|| lb.iter().position(|&x| x == c).map(|j| sb[j]))
            .unwrap()
    };
    let dims: Vec<usize> = labels.iter().map(|&c| dim(c)).collect();
    let sc: Vec<usize> = lc.iter().map(|&c| dim(c)).collect();
    let flat = |shape: &[usize], ls: &[char], val: &[usize]| {
        ls.iter().enumerate().fold(0usize, |acc, (k, c)| {
            acc * shape[k] + val[labels.iter().position(|x| x == c).unwrap()]
        })
    };
    let mut c = vec![0.0; sc.iter().product()];
    let total: usize = dims.iter().product();
    for mut f in 0..total {
        let mut val = vec![0usize; dims.len()];
        for k in (0..dims.len()).rev() {
            val[k] = f % dims[k];
            f /= dims[k];
        }
        c[flat(&sc, lc, &val)] += a[flat(sa, la, &val)] * b[flat(sb, lb, &val)];
    }
    c
}

/// A contraction case: A has 1-3 legs, B shares the first `nc` of A's legs
/// (dualised, in a shuffled position) and has 0-2 free legs of its own.
/// Group, A's legs, B's free legs, contracted count, A's and B's raw fluxes, reversed B.
type ContractionCase = (Symmetry, Vec<Leg>, Vec<Leg>, usize, Vec<i64>, Vec<i64>, bool);

fn contraction_case() -> impl Strategy<Value = ContractionCase> {
    group().prop_flat_map(|g| {
        let n = g.factors().len();
        (
            Just(g.clone()),
            prop::collection::vec(leg(g.clone()), 1..=3),
            prop::collection::vec(leg(g), 0..=2),
            0usize..=3,
            raw_charge(n),
            raw_charge(n),
            any::<bool>(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn pairs_are_exactly_the_allowed_pairs_and_reproduce_the_dense_contraction(
        (g, a_legs, b_free, nc, fa, fb, flip) in contraction_case(),
        seed in any::<u64>(),
    ) {
        let nc = nc.min(a_legs.len());
        let mut b_legs: Vec<Leg> = a_legs[..nc].iter().map(Leg::dual).collect();
        b_legs.extend(b_free.iter().cloned());
        if flip {
            b_legs.reverse();
        }
        let la: Vec<char> = ('a'..).take(a_legs.len()).collect();
        let mut lb: Vec<char> = la[..nc].to_vec();
        lb.extend(('p'..).take(b_free.len()));
        if flip {
            lb.reverse();
        }
        let lc: Vec<char> = la[nc..].iter().chain(lb.iter().filter(|c| !la.contains(c))).copied().collect();
        let (Ok(a), Ok(b)) = (
            SymmetricLayout::new(g.clone(), a_legs.clone(), g.charge(&fa).unwrap()),
            SymmetricLayout::new(g.clone(), b_legs.clone(), g.charge(&fb).unwrap()),
        ) else {
            return Ok(()); // a flux no block satisfies: covered by the layout test
        };
        let plan = match plan_pairs(&a, &la, &b, &lb, &lc) {
            Ok(p) => p,
            // The output flux can leave no allowed output block.
            Err(SymContractError::Symmetry(SymmetryError::NoAllowedBlock { .. })) => {
                return Ok(());
            }
            Err(e) => return Err(TestCaseError::fail(format!("unexpected {e}"))),
        };
        // Independent count: all block pairs whose contracted tiles agree.
        let mut expected = 0usize;
        for x in a.blocks() {
            for y in b.blocks() {
                let agree = la.iter().enumerate().all(|(i, c)| match lb.iter().position(|d| d == c) {
                    Some(j) => x.tiles[i] == y.tiles[j],
                    None => true,
                });
                if agree {
                    expected += 1;
                }
            }
        }
        prop_assert_eq!(plan.pair_count(), expected);
        // Numbers: block-sparse GEMMs summed per output block against the dense contraction.
        let mut rnd = super::test_values(seed);
        let fill = |lay: &SymmetricLayout, rnd: &mut dyn FnMut() -> f64| -> Vec<Vec<f64>> {
            (0..lay.blocks().len())
                .map(|b| (0..lay.block_extents(b).iter().product::<usize>()).map(|_| rnd()).collect())
                .collect()
        };
        let da = fill(&a, &mut rnd);
        let db = fill(&b, &mut rnd);
        let mut dc: Vec<Vec<f64>> = (0..plan.output.blocks().len())
            .map(|o| vec![0.0; plan.output.block_extents(o).iter().product()])
            .collect();
        for item in &plan.items {
            for &(x, y) in &item.pairs {
                let part = dense_contract(
                    &da[x], &a.block_extents(x), &la, &db[y], &b.block_extents(y), &lb, &lc,
                );
                for (o, v) in dc[item.out_block].iter_mut().zip(part) {
                    *o += v;
                }
            }
        }
        let want = dense_contract(
            &embed(&a, &da), &a.dense_shape(), &la, &embed(&b, &db), &b.dense_shape(), &lb, &lc,
        );
        let got = embed(&plan.output, &dc);
        // The library's embedding and split agree with the naive one.
        let tensors: Vec<uni20_dispatch::LocalTensor> = dc
            .iter()
            .enumerate()
            .map(|(o, v)| uni20_dispatch::LocalTensor::from_f64(&plan.output.block_extents(o), v.clone()).unwrap())
            .collect();
        let lib = embed_blocks(&plan.output, &tensors).unwrap();
        prop_assert_eq!(lib.data(), &uni20_dispatch::TensorData::F64(got.clone()));
        prop_assert_eq!(split_dense(&plan.output, &lib, 0.0).unwrap(), tensors);
        prop_assert_eq!(got.len(), want.len());
        for (x, y) in got.iter().zip(&want) {
            prop_assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{} vs {}", x, y);
        }
    }
}

#[test]
fn contraction_errors_name_the_leg() {
    let g = Symmetry::u1();
    let mk = |dir, qs: &[(i64, usize)]| {
        Leg::new(
            g.clone(),
            dir,
            qs.iter()
                .map(|&(q, d)| Sector {
                    charge: g.charge(&[q]).unwrap(),
                    dim: d,
                })
                .collect(),
        )
        .unwrap()
    };
    let x = mk(Direction::Out, &[(-1, 1), (1, 1)]);
    let y = mk(Direction::In, &[(-1, 1), (1, 2)]);
    let a = SymmetricLayout::new(g.clone(), vec![x.clone(), x.dual()], g.identity()).unwrap();
    let b = SymmetricLayout::new(g.clone(), vec![y.clone(), y.dual()], g.identity()).unwrap();
    let err = plan_pairs(&a, &['i', 'j'], &b, &['j', 'k'], &['i', 'k']).unwrap_err();
    assert!(
        matches!(err, SymContractError::SectorMismatch { label: 'j', .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("[(-1):1, (1):1]") && err.to_string().contains("[(-1):1, (1):2]"),
        "{err}"
    );
    let same = SymmetricLayout::new(g.clone(), vec![x.clone(), x.dual()], g.identity()).unwrap();
    let err = plan_pairs(&a, &['i', 'j'], &same, &['k', 'j'], &['i', 'k']).unwrap_err();
    assert!(
        matches!(err, SymContractError::SameDirection { label: 'j', .. }),
        "{err}"
    );
    let z2 = Symmetry::zn(2).unwrap();
    let zl = Leg::new(
        z2.clone(),
        Direction::Out,
        vec![Sector {
            charge: z2.identity(),
            dim: 1,
        }],
    )
    .unwrap();
    let c = SymmetricLayout::new(z2.clone(), vec![zl], z2.identity()).unwrap();
    assert!(matches!(
        plan_pairs(&a, &['i', 'j'], &c, &['k'], &['i', 'j', 'k']),
        Err(SymContractError::Symmetry(SymmetryError::GroupMismatch { .. }))
    ));
    assert!(matches!(
        plan_pairs(&a, &['i', 'i'], &a, &['j', 'k'], &['j', 'k']),
        Err(SymContractError::BadLabel { label: 'i', .. })
    ));
    assert!(matches!(
        plan_pairs(&a, &['i', 'j'], &a, &['k', 'l'], &['i', 'k', 'l']),
        Err(SymContractError::BadLabel { label: 'j', .. })
    ));
}
