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
