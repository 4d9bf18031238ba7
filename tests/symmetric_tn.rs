//! Symmetric MPOs, MPSs and boundary environments of `uni20::tn::conserve`
//! against values computed independently here:
//!
//! - the dense embedding of every symmetric MPO tensor equals the dense
//!   MPO tensor of `OpSum::to_mpo` with each leg put in sector order (the
//!   order computed here by a stable sort of the states by charge), for
//!   Heisenberg (Sz), spin 1 (Sz), Hubbard (N, Sz) and TFI (parity);
//! - a symmetric product state's dense embedding is the unit vector of its
//!   labels, its bonds the running sums of the labels' charges;
//! - the bond sectors of a random state equal, without a cap, the exact
//!   numbers of product states (counted here by enumeration), and with a
//!   cap stay within it and connected;
//! - a random state in a sector (after its LQs) is normalised,
//!   right-canonical and zero outside its sector on its dense embedding,
//!   and environments grown from the symmetric boundaries equal those grown
//!   from the dense embeddings;
//! - the metadata of one DMRG sweep closes: with the boundary
//!   environments, the MPO and an MPS of those bonds, every contraction of
//!   the sweep (two-site tensor, both matvecs, environment growth) has a
//!   block plan, joins an Out leg with an In leg, and the effective
//!   Hamiltonian maps the two-site layout onto itself (`conj` taken as the
//!   dual legs and flux);
//! - mismatched inputs are typed errors.

use uni20::dist::contract;
use uni20::dist::symmetry::{plan_pairs, Charge, Direction, GroupFactor, Leg, Sector, SymmetricLayout, Symmetry};
use uni20::tn::models::{heisenberg, hubbard, spin1, tfi, Model};
use uni20::tn::{
    bond_sectors, grow_left, grow_left_fused, grow_right, grow_right_fused, left_environment, right_environment,
    total_charge, Conserve, Dmrg, DmrgOptions, LocalMpo, MpoOptions, Mps, Site, TnError,
};
use uni20::{DistTensor, LocalTensor, TensorData};

fn f64s(t: &LocalTensor) -> Vec<f64> {
    match t.data() {
        TensorData::F64(v) => v.clone(),
        other => panic!("expected f64, got {other:?}"),
    }
}

/// The basis indices in sector order: stable sort by charge.
fn sector_order(q: &[Charge]) -> Vec<usize> {
    let mut o: Vec<usize> = (0..q.len()).collect();
    o.sort_by(|&a, &b| q[a].cmp(&q[b]));
    o
}

fn models() -> Vec<(&'static str, Model)> {
    vec![
        ("heisenberg", heisenberg(6, 1, 1.0, Conserve::Sz).unwrap()),
        ("spin1", spin1(5, 1.0, 0.3, Conserve::Sz).unwrap()),
        ("hubbard", hubbard(4, 1.0, 4.0, 0.5, Conserve::NSz).unwrap()),
        ("tfi", tfi(5, 1.0, 0.7, Conserve::Parity).unwrap()),
    ]
}

fn local(m: &Model) -> LocalMpo {
    m.hamiltonian.to_mpo(&m.sites, &MpoOptions::default()).unwrap()
}

#[test]
#[allow(clippy::needless_range_loop)] // four nested index loops read clearer than zipped iterators
fn symmetric_mpo_embeds_the_dense_mpo_in_sector_order() {
    for ranks in [1, 3] {
        uni20::universe()
            .ranks(ranks)
            .run(|ctl| {
                for (name, m) in models() {
                    let lm = local(&m);
                    let mpo = lm.to_symmetric_mpo(ctl, &m.sites, 2).unwrap();
                    let bonds = lm.bond_charges().unwrap();
                    for (i, w) in mpo.sites().iter().enumerate() {
                        let lay = w.layout().expect("a symmetric site tensor");
                        let dirs: Vec<Direction> = lay.legs().iter().map(Leg::direction).collect();
                        assert_eq!(dirs, [Direction::Out, Direction::In, Direction::In, Direction::Out]);
                        assert_eq!(*lay.flux(), lay.symmetry().identity());
                        let dense = f64s(&lm.sites()[i]);
                        let got = f64s(&w.to_dense(ctl).unwrap());
                        let sh = lm.sites()[i].shape().to_vec();
                        assert_eq!(w.shape(), &sh[..]);
                        let (_, pq) = m.sites[i].charges().unwrap();
                        let (oa, ob, op) = (sector_order(&bonds[i]), sector_order(&bonds[i + 1]), sector_order(pq));
                        let mut nonzero = 0;
                        for a in 0..sh[0] {
                            for b in 0..sh[1] {
                                for s in 0..sh[2] {
                                    for t in 0..sh[3] {
                                        let g = ((a * sh[1] + b) * sh[2] + s) * sh[3] + t;
                                        let src = ((oa[a] * sh[1] + ob[b]) * sh[2] + op[s]) * sh[3] + op[t];
                                        assert_eq!(got[g], dense[src], "{name} site {i} at ({a},{b},{s},{t})");
                                        nonzero += usize::from(dense[src] != 0.0);
                                    }
                                }
                            }
                        }
                        assert!(nonzero > 0);
                        // Only charge-allowed blocks are stored.
                        assert!(lay.stored_elements() < sh.iter().product::<usize>(), "{name} site {i}");
                    }
                }
            })
            .unwrap();
    }
}

#[test]
fn product_state_has_running_sum_bonds_and_unit_embeddings() {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let sites = vec![Site::electron(Conserve::NSz).unwrap(); 4];
            let labels = ["up", "updown", "empty", "down"];
            let mps = Mps::symmetric_product(ctl, &sites, &labels, 3).unwrap();
            let (g, q) = sites[0].charges().unwrap();
            let order = sector_order(q);
            let mut running = g.identity();
            for (i, label) in labels.iter().enumerate() {
                let s = sites[i].state(label).unwrap();
                let lay = mps.site(i).layout().unwrap();
                assert_eq!(
                    lay.legs()[0].sectors(),
                    &[Sector {
                        charge: running.clone(),
                        dim: 1
                    }]
                );
                running = g.fuse(&running, &q[s]).unwrap();
                assert_eq!(
                    lay.legs()[2].sectors(),
                    &[Sector {
                        charge: running.clone(),
                        dim: 1
                    }]
                );
                let got = f64s(&mps.site(i).to_dense(ctl).unwrap());
                let want: Vec<f64> = (0..4).map(|p| if order[p] == s { 1.0 } else { 0.0 }).collect();
                assert_eq!(got, want, "site {i}");
            }
            // (N, 2Sz) of up + updown + empty + down = (4, 0).
            assert_eq!(total_charge(&mps), Some(g.charge(&[4, 0]).unwrap()));
            assert_eq!(running, g.charge(&[4, 0]).unwrap());
            let dense = Mps::product(ctl, &sites, &labels, 3).unwrap();
            assert_eq!(total_charge(&dense), None);
            // Errors: unknown label, wrong count, sites without charges.
            assert!(matches!(
                Mps::symmetric_product(ctl, &sites, &["up", "x", "up", "up"], 3),
                Err(TnError::UnknownState { .. })
            ));
            assert!(matches!(
                Mps::symmetric_product(ctl, &sites, &["up"], 3),
                Err(TnError::Shape { .. })
            ));
            let plain = vec![Site::spin(1, Conserve::None).unwrap(); 2];
            assert!(matches!(
                Mps::symmetric_product(ctl, &plain, &["up", "down"], 3),
                Err(TnError::InvalidOption { .. })
            ));
        })
        .unwrap();
}

/// Numbers of product states of `sites[range]` per total charge, by enumeration.
fn enumerate(sites: &[Site], g: &Symmetry) -> std::collections::BTreeMap<Charge, usize> {
    let mut out = std::collections::BTreeMap::new();
    let dims: Vec<usize> = sites.iter().map(Site::dim).collect();
    let n: usize = dims.iter().product();
    for mut k in 0..n {
        let mut c = g.identity();
        for (s, &d) in sites.iter().zip(&dims).rev() {
            c = g.fuse(&c, &s.charges().unwrap().1[k % d]).unwrap();
            k /= d;
        }
        *out.entry(c).or_insert(0) += 1;
    }
    out
}

#[test]
fn bond_sectors_are_the_exact_counts_and_respect_the_cap() {
    let cases: Vec<(Vec<Site>, Vec<i64>)> = vec![
        (vec![Site::spin(1, Conserve::Sz).unwrap(); 6], vec![0]),
        (vec![Site::spin(2, Conserve::Sz).unwrap(); 5], vec![2]),
        (vec![Site::electron(Conserve::NSz).unwrap(); 4], vec![4, 0]),
        (vec![Site::spin(1, Conserve::Parity).unwrap(); 5], vec![1]),
    ];
    for (sites, target) in cases {
        let g = sites[0].charges().unwrap().0.clone();
        let target = g.charge(&target).unwrap();
        let l = sites.len();
        let full = bond_sectors(&sites, &target, usize::MAX / 2).unwrap();
        assert_eq!(full.len(), l + 1);
        for (i, bond) in full.iter().enumerate() {
            let left = enumerate(&sites[..i], &g);
            let right = enumerate(&sites[i..], &g);
            let mut want = Vec::new();
            for (c, nl) in &left {
                let need = g.fuse(&target, &g.dual(c).unwrap()).unwrap();
                if let Some(nr) = right.get(&need) {
                    want.push(Sector {
                        charge: c.clone(),
                        dim: (*nl).min(*nr),
                    });
                }
            }
            assert_eq!(bond, &want, "bond {i} of {} sites, target {target}", l);
        }
        for chi in [1, 2, 3, 5] {
            let capped = bond_sectors(&sites, &target, chi).unwrap();
            assert_eq!(
                capped[0],
                vec![Sector {
                    charge: g.identity(),
                    dim: 1
                }]
            );
            assert_eq!(
                capped[l],
                vec![Sector {
                    charge: target.clone(),
                    dim: 1
                }]
            );
            for (i, bond) in capped.iter().enumerate() {
                let total: usize = bond.iter().map(|s| s.dim).sum();
                assert!(total <= chi && total >= 1, "chi {chi} bond {i}: {total}");
                // Within the exact bounds, and connected through one site both ways.
                for s in bond {
                    let exact = full[i]
                        .iter()
                        .find(|x| x.charge == s.charge)
                        .expect("a reachable charge");
                    assert!(s.dim <= exact.dim);
                    let q = sites.get(i).map(|x| x.charges().unwrap().1.to_vec());
                    if let Some(q) = q {
                        assert!(q.iter().any(|c| {
                            let next = g.fuse(&s.charge, c).unwrap();
                            capped[i + 1].iter().any(|x| x.charge == next)
                        }));
                    }
                }
            }
        }
    }
    // A target the sites cannot carry, chi 0, a charge with another component count.
    let s = vec![Site::spin(1, Conserve::Sz).unwrap(); 3];
    let g = Symmetry::u1();
    assert!(matches!(
        bond_sectors(&s, &g.charge(&[0]).unwrap(), 4),
        Err(TnError::InvalidOption {
            name: "target charge",
            ..
        })
    ));
    assert!(matches!(
        bond_sectors(&s, &g.charge(&[5]).unwrap(), 4),
        Err(TnError::InvalidOption { .. })
    ));
    assert!(bond_sectors(&s, &g.charge(&[1]).unwrap(), 0).is_err());
    assert!(matches!(
        bond_sectors(
            &s,
            &Symmetry::product(vec![GroupFactor::U1, GroupFactor::U1])
                .unwrap()
                .charge(&[1, 0])
                .unwrap(),
            4
        ),
        Err(TnError::Symmetry(_))
    ));
}

fn labels_of(cs: &str) -> Vec<char> {
    cs.chars().collect()
}

/// `C = A B` by the einsum `spec` on layouts (`conj` on A: dual legs and flux).
fn plan(spec: &str, a: &SymmetricLayout, b: &SymmetricLayout, conj_a: bool) -> SymmetricLayout {
    let (ins, out) = spec.split_once("->").unwrap();
    let (la, lb) = ins.split_once(',').unwrap();
    let a = if conj_a {
        let g = a.symmetry().clone();
        SymmetricLayout::new(
            g.clone(),
            a.legs().iter().map(Leg::dual).collect(),
            g.dual(a.flux()).unwrap(),
        )
        .unwrap()
    } else {
        a.clone()
    };
    let p =
        plan_pairs(&a, &labels_of(la), b, &labels_of(lb), &labels_of(out)).unwrap_or_else(|e| panic!("{spec}: {e}"));
    assert!(p.pair_count() > 0, "{spec}: no block pairs");
    p.output
}

fn lay(t: &DistTensor) -> SymmetricLayout {
    t.layout().expect("symmetric").clone()
}

/// The metadata of a sweep over the MPS with the bonds of `bond_sectors`
/// (random sites: the layouts `Mps::symmetric_random` gives its tensors
/// before the LQ) and over a product state.
#[test]
fn sweep_contractions_have_block_plans_and_preserve_the_two_site_layout() {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let m = heisenberg(6, 1, 1.0, Conserve::Sz).unwrap();
            let lm = local(&m);
            let mpo = lm.to_symmetric_mpo(ctl, &m.sites, 2).unwrap();
            let g = Symmetry::u1();
            let target = g.charge(&[0]).unwrap();
            let bonds = bond_sectors(&m.sites, &target, 4).unwrap();
            let phys = Leg::tiled(
                g.clone(),
                Direction::In,
                vec![
                    Sector {
                        charge: g.charge(&[-1]).unwrap(),
                        dim: 1,
                    },
                    Sector {
                        charge: g.charge(&[1]).unwrap(),
                        dim: 1,
                    },
                ],
                2,
            )
            .unwrap();
            let bond_leg = |i: usize| Leg::tiled(g.clone(), Direction::In, bonds[i].clone(), 2).unwrap();
            let random: Vec<SymmetricLayout> = (0..6)
                .map(|i| {
                    SymmetricLayout::new(
                        g.clone(),
                        vec![bond_leg(i), phys.clone(), bond_leg(i + 1).dual()],
                        g.identity(),
                    )
                    .unwrap()
                })
                .collect();
            let product =
                Mps::symmetric_product(ctl, &m.sites, &["up", "down", "up", "down", "up", "down"], 2).unwrap();
            let prod_layouts: Vec<SymmetricLayout> = product.sites().iter().map(lay).collect();
            let w: Vec<SymmetricLayout> = mpo.sites().iter().map(lay).collect();
            let lb = lay(&left_environment(ctl, &mpo, &product, 2).unwrap());
            let rb = lay(&right_environment(ctl, &mpo, &product, 2).unwrap());
            for sites in [&random, &prod_layouts] {
                // Right environments from the right boundary, as Dmrg::new builds them.
                let mut right = vec![rb.clone(); 6];
                for i in (1..6).rev() {
                    let t1 = plan("bxd,cud->bxcu", &right[i], &sites[i], false);
                    let t2 = plan("bxcu,vxru->bcvr", &t1, &w[i], false);
                    right[i - 1] = plan("arb,bcvr->avc", &sites[i], &t2, true);
                }
                let mut left = lb.clone();
                for i in 0..5 {
                    let theta = plan("asb,btc->astc", &sites[i], &sites[i + 1], false);
                    // Sequential matvec.
                    let t1 = plan("awc,ctud->awtud", &left, &theta, false);
                    let t2 = plan("awtud,wvst->asvud", &t1, &w[i], false);
                    let t3 = plan("asvud,vxru->asrxd", &t2, &w[i + 1], false);
                    let h = plan("asrxd,bxd->asrb", &t3, &right[i + 1], false);
                    assert_eq!(h.legs(), theta.legs(), "H theta has the legs of theta at bond {i}");
                    assert_eq!(h.flux(), theta.flux());
                    // Fused matvec.
                    let lw = plan("awc,wvst->asvct", &left, &w[i], false);
                    let wr = plan("vxru,bxd->vudrb", &w[i + 1], &right[i + 1], false);
                    let x = plan("asvct,ctud->asvud", &lw, &theta, false);
                    let hf = plan("asvud,vudrb->asrb", &x, &wr, false);
                    assert_eq!(hf.legs(), theta.legs());
                    // Left environment growth.
                    let e1 = plan("awc,ctd->awtd", &left, &sites[i], false);
                    let e2 = plan("awtd,wvst->asvd", &e1, &w[i], false);
                    left = plan("asb,asvd->bvd", &sites[i], &e2, true);
                    // It meets the right environment of the same bond.
                    let legs_l: Vec<Leg> = left.legs().to_vec();
                    let legs_r: Vec<Leg> = right[i].legs().to_vec();
                    for (a, b) in legs_l.iter().zip(&legs_r) {
                        assert!(a.same_sectors(b) && a.direction() != b.direction(), "bond {}", i + 1);
                    }
                }
            }
        })
        .unwrap();
}

#[test]
fn mixed_and_mismatched_inputs_are_typed_errors() {
    uni20::universe()
        .ranks(1)
        .run(|ctl| {
            let m = heisenberg(4, 1, 1.0, Conserve::Sz).unwrap();
            let lm = local(&m);
            let sym = lm.to_symmetric_mpo(ctl, &m.sites, 4).unwrap();
            let dense = lm.to_mpo(ctl, 4).unwrap();
            let sp = Mps::symmetric_product(ctl, &m.sites, &["up", "down", "up", "down"], 4).unwrap();
            let dp = Mps::product(ctl, &m.sites, &["up", "down", "up", "down"], 4).unwrap();
            let opts = DmrgOptions::default();
            for (mpo, mps) in [(&sym, &dp), (&dense, &sp)] {
                assert!(matches!(
                    Dmrg::new(ctl, mpo.clone(), mps.clone(), opts),
                    Err(TnError::InvalidOption {
                        name: "MPS and MPO layouts",
                        ..
                    })
                ));
            }
            // Another local dimension.
            let sym2 = lm.to_symmetric_mpo(ctl, &m.sites, 2).unwrap();
            let spin1 = vec![Site::spin(2, Conserve::Sz).unwrap(); 4];
            let s1 = Mps::symmetric_product(ctl, &spin1, &["2Sz=2", "2Sz=0", "2Sz=0", "2Sz=-2"], 4).unwrap();
            assert!(Dmrg::new(ctl, sym2, s1, opts).is_err());
            // MPO without charges, sites of another count, sites without charges.
            let plain = heisenberg(4, 1, 1.0, Conserve::None).unwrap();
            let pl = local(&plain);
            assert!(matches!(
                pl.to_symmetric_mpo(ctl, &plain.sites, 4),
                Err(TnError::InvalidOption { .. })
            ));
            assert!(matches!(
                lm.to_symmetric_mpo(ctl, &m.sites[..3], 4),
                Err(TnError::Shape { .. })
            ));
            assert!(matches!(
                lm.to_symmetric_mpo(ctl, &m.sites, 0),
                Err(TnError::InvalidOption { .. })
            ));
        })
        .unwrap();
}

/// The random state in a sector, checked on its dense embeddings: norm 1,
/// sites 1..L right-normalised, every amplitude outside the sector zero,
/// bonds within `bond_sectors`; and the environments grown from the
/// symmetric boundaries equal those grown from the dense embeddings.
#[test]
fn random_state_in_a_sector_and_its_environments_match_the_dense_embeddings() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let m = heisenberg(6, 1, 1.0, Conserve::Sz).unwrap();
            let g = Symmetry::u1();
            let q = g.charge(&[2]).unwrap();
            let mps = Mps::symmetric_random(ctl, &m.sites, &q, 4, 2, 7).unwrap();
            assert_eq!(total_charge(&mps), Some(q.clone()));
            let caps = bond_sectors(&m.sites, &q, 4).unwrap();
            let dense: Vec<LocalTensor> = mps.sites().iter().map(|t| t.to_dense(ctl).unwrap()).collect();
            for (i, t) in mps.sites().iter().enumerate() {
                // The LQ's bonds may carry the charges with the other direction (its
                // new leg is In with the row charges): compare the signed charges.
                let leg = &t.layout().unwrap().legs()[2];
                for (k, s) in leg.sectors().iter().enumerate() {
                    let running = leg.signed_charge(k).unwrap();
                    let cap = caps[i + 1]
                        .iter()
                        .find(|c| c.charge == running)
                        .expect("a planned sector");
                    assert!(s.dim <= cap.dim, "bond {}", i + 1);
                }
            }
            // Right-normalised: sum_(s,b) M[a,s,b] M[a',s,b] = delta for sites 1..L.
            for (i, t) in dense.iter().enumerate().skip(1) {
                let (a, d, b) = (t.shape()[0], t.shape()[1], t.shape()[2]);
                let v = f64s(t);
                for x in 0..a {
                    for y in 0..a {
                        let dot: f64 = (0..d * b).map(|k| v[x * d * b + k] * v[y * d * b + k]).sum();
                        let want = if x == y { 1.0 } else { 0.0 };
                        assert!((dot - want).abs() < 1e-12, "site {i} ({x},{y}): {dot}");
                    }
                }
            }
            // The state vector (sector order: position 0 = down, 2Sz = -1; 1 = up).
            let mut psi = vec![1.0f64];
            let mut bond = 1;
            for t in &dense {
                let (d, b) = (t.shape()[1], t.shape()[2]);
                let v = f64s(t);
                let n = psi.len() / bond;
                let mut next = vec![0.0; n * d * b];
                for p in 0..n {
                    for x in 0..bond {
                        let c = psi[p * bond + x];
                        for s in 0..d {
                            for y in 0..b {
                                next[(p * d + s) * b + y] += c * v[(x * d + s) * b + y];
                            }
                        }
                    }
                }
                psi = next;
                bond = b;
            }
            let norm: f64 = psi.iter().map(|x| x * x).sum::<f64>().sqrt();
            assert!((norm - 1.0).abs() < 1e-12, "norm {norm}");
            for (k, amp) in psi.iter().enumerate() {
                let two_sz: i64 = (0..6).map(|j| if (k >> (5 - j)) & 1 == 1 { 1 } else { -1 }).sum();
                if two_sz != 2 {
                    assert_eq!(*amp, 0.0, "amplitude {k} outside the sector");
                }
            }
            // Environments: symmetric vs dense embeddings, step by step.
            let lm = local(&m);
            let mpo = lm.to_symmetric_mpo(ctl, &m.sites, 2).unwrap();
            let to_dense = |t: &DistTensor| DistTensor::from_local(ctl, &t.to_dense(ctl).unwrap(), 2).unwrap();
            let dsites: Vec<DistTensor> = mps.sites().iter().map(to_dense).collect();
            let dw: Vec<DistTensor> = mpo.sites().iter().map(to_dense).collect();
            let one = LocalTensor::from_f64(&[1, 1, 1], vec![1.0]).unwrap();
            let (mut ls, mut ld) = (
                left_environment(ctl, &mpo, &mps, 2).unwrap(),
                DistTensor::from_local(ctl, &one, 2).unwrap(),
            );
            let (mut rs, mut rd) = (
                right_environment(ctl, &mpo, &mps, 2).unwrap(),
                DistTensor::from_local(ctl, &one, 2).unwrap(),
            );
            let close = |x: &DistTensor, y: &DistTensor| {
                let (a, b) = (f64s(&x.to_dense(ctl).unwrap()), f64s(&y.to_dense(ctl).unwrap()));
                a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-12)
            };
            for i in 0..6 {
                // The same growth from the step's fused L W (as the sweep does).
                let lw = contract(ctl, "awc,wvst->asvct", &ls, &mpo.sites()[i]).unwrap();
                let lf = grow_left_fused(ctl, &lw, mps.site(i)).unwrap();
                ls = grow_left(ctl, &ls, &mpo.sites()[i], mps.site(i)).unwrap();
                assert!(close(&lf, &ls), "fused left env {}", i + 1);
                ld = grow_left(ctl, &ld, &dw[i], &dsites[i]).unwrap();
                assert!(ls.is_symmetric());
                let (a, b) = (f64s(&ls.to_dense(ctl).unwrap()), f64s(&ld.to_local(ctl).unwrap()));
                assert!(
                    a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-12),
                    "left env {}",
                    i + 1
                );
                let j = 5 - i;
                let wr = contract(ctl, "vxru,bxd->vudrb", &mpo.sites()[j], &rs).unwrap();
                let rf = grow_right_fused(ctl, &wr, mps.site(j)).unwrap();
                rs = grow_right(ctl, &rs, &mpo.sites()[j], mps.site(j)).unwrap();
                assert!(close(&rf, &rs), "fused right env {j}");
                rd = grow_right(ctl, &rd, &dw[j], &dsites[j]).unwrap();
                let (a, b) = (f64s(&rs.to_dense(ctl).unwrap()), f64s(&rd.to_local(ctl).unwrap()));
                assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-12), "right env {j}");
            }
            // Fully contracted from either side: <psi|H|psi>, the same number.
            let (el, er) = (f64s(&ls.to_dense(ctl).unwrap()), f64s(&rs.to_dense(ctl).unwrap()));
            assert_eq!((el.len(), er.len()), (1, 1));
            assert!((el[0] - er[0]).abs() < 1e-12);
        })
        .unwrap();
}
