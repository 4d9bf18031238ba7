//! Shared by `symmetric_contract` (in-process) and `mpi_symmetric_contract`:
//! random symmetric contractions checked against the dense contraction of
//! the dense embeddings by the local reference backend.
#![allow(dead_code)]

use proptest::prelude::*;
use uni20::dispatch::{einsum as local_einsum, BackendList, ContractOptions as LocalOptions};
use uni20::dist::symmetry::{Direction, GroupFactor, Leg, Sector, SymContractError, SymmetricLayout, Symmetry};
use uni20::dist::{sym_random, ContractOptions};
use uni20::prelude::*;

/// Xorshift stream of the test's random choices.
pub struct Rng(u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

/// The groups of the property test: U(1), Z_3, U(1) x Z_2.
pub fn group(k: u64) -> Symmetry {
    match k {
        0 => Symmetry::u1(),
        1 => Symmetry::zn(3).unwrap(),
        _ => Symmetry::product(vec![GroupFactor::U1, GroupFactor::Z(2)]).unwrap(),
    }
}

/// Every charge of `g` with U(1) components in -2..=2.
pub fn charges(g: &Symmetry) -> Vec<Vec<i64>> {
    let mut out: Vec<Vec<i64>> = vec![vec![]];
    for f in g.factors() {
        let range: Vec<i64> = match f {
            GroupFactor::U1 => (-2..=2).collect(),
            GroupFactor::Z(n) => (0..*n as i64).collect(),
        };
        out = out
            .into_iter()
            .flat_map(|p| {
                range.iter().map(move |&q| {
                    let mut p = p.clone();
                    p.push(q);
                    p
                })
            })
            .collect();
    }
    out
}

/// A random leg: a nonempty subset of the charges, dims 1-3, tiles of at most 1-3.
pub fn random_leg(g: &Symmetry, rng: &mut Rng) -> Leg {
    let all = charges(g);
    let mut sectors: Vec<Sector> = Vec::new();
    for q in &all {
        if rng.below(2) == 0 {
            sectors.push(Sector {
                charge: g.charge(q).unwrap(),
                dim: 1 + rng.below(3) as usize,
            });
        }
    }
    if sectors.is_empty() {
        sectors.push(Sector {
            charge: g.identity(),
            dim: 2,
        });
    }
    sectors.sort_by(|a, b| a.charge.cmp(&b.charge));
    let dir = if rng.below(2) == 0 {
        Direction::In
    } else {
        Direction::Out
    };
    Leg::tiled(g.clone(), dir, sectors, 1 + rng.below(3) as usize).unwrap()
}

/// A layout of `legs` with a random flux that some block satisfies, if one
/// is found in a few tries.
pub fn random_layout(g: &Symmetry, legs: Vec<Leg>, rng: &mut Rng) -> Option<SymmetricLayout> {
    let all = charges(g);
    for _ in 0..8 {
        let q = &all[rng.below(all.len() as u64) as usize];
        if let Ok(l) = SymmetricLayout::new(g.clone(), legs.clone(), g.charge(q).unwrap()) {
            return Some(l);
        }
    }
    SymmetricLayout::new(g.clone(), legs, g.identity()).ok()
}

pub fn tolerance(d: DType) -> f64 {
    match d {
        DType::F32 | DType::C32 => 1e-4,
        _ => 1e-12,
    }
}

/// `max |got - want| <= tol * max(1, max |want|)`.
pub fn assert_close(got: &LocalTensor, want: &LocalTensor, tol: f64, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}");
    assert_eq!(got.dtype(), want.dtype(), "{what}");
    let (g, w) = (got.to_c64_vec(), want.to_c64_vec());
    let scale = w.iter().fold(1.0f64, |m, x| m.max(x.norm()));
    let err = g.iter().zip(&w).fold(0.0f64, |m, (x, y)| m.max((x - y).norm()));
    assert!(err <= tol * scale, "{what}: max error {err:e}, scale {scale}");
}

#[derive(Clone, Debug)]
pub struct Case {
    /// Seed of every random choice.
    pub seed: u64,
    /// Free legs of A.
    pub free_a: usize,
    /// Contracted legs.
    pub contracted: usize,
    /// Free legs of B.
    pub free_b: usize,
    /// Element type of both operands and C.
    pub dtype: DType,
    /// In-process ranks (ignored under MPI).
    pub ranks: usize,
    /// Conjugation flags of A and B.
    pub conj: [bool; 2],
    /// Whether an existing C is accumulated into.
    pub with_c: bool,
}

pub fn case() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        0usize..=2,
        1usize..=2,
        0usize..=2,
        prop_oneof![Just(DType::F32), Just(DType::F64), Just(DType::C32), Just(DType::C64)],
        1usize..=3,
        any::<[bool; 2]>(),
        any::<bool>(),
    )
        .prop_map(|(seed, free_a, contracted, free_b, dtype, ranks, conj, with_c)| Case {
            seed,
            free_a,
            contracted,
            free_b,
            dtype,
            ranks,
            conj,
            with_c,
        })
}

/// Runs one case on `ctl`'s universe; returns false when the random fluxes
/// allow no operand or output block (for the output, the typed error is
/// checked then).
pub fn run_in(ctl: &Controller<'_>, c: &Case) -> bool {
    let mut rng = Rng(c.seed | 1);
    let g = group(rng.below(3));
    let fa: Vec<char> = "ab".chars().take(c.free_a).collect();
    let k: Vec<char> = "ij".chars().take(c.contracted).collect();
    let fb: Vec<char> = "xy".chars().take(c.free_b).collect();
    let mut a_labels: Vec<char> = fa.iter().chain(&k).copied().collect();
    let mut b_labels: Vec<char> = k.iter().chain(&fb).copied().collect();
    let mut out: Vec<char> = fa.iter().chain(&fb).copied().collect();
    rng.shuffle(&mut a_labels);
    rng.shuffle(&mut b_labels);
    rng.shuffle(&mut out);
    // One leg per label; B's contracted legs are A's with the direction that makes
    // the effective (after conjugation) directions opposite.
    let mut legs = std::collections::BTreeMap::new();
    for &l in fa.iter().chain(&k).chain(&fb) {
        legs.insert(l, random_leg(&g, &mut rng));
    }
    let a_legs: Vec<Leg> = a_labels.iter().map(|l| legs[l].clone()).collect();
    let b_legs: Vec<Leg> = b_labels
        .iter()
        .map(|l| {
            let leg = legs[l].clone();
            if k.contains(l) && c.conj[0] == c.conj[1] {
                leg.dual()
            } else {
                leg
            }
        })
        .collect();
    let (Some(la), Some(lb)) = (random_layout(&g, a_legs, &mut rng), random_layout(&g, b_legs, &mut rng)) else {
        return false;
    };
    let spec = format!(
        "{},{}->{}",
        a_labels.iter().collect::<String>(),
        b_labels.iter().collect::<String>(),
        out.iter().collect::<String>()
    );
    let complex = matches!(c.dtype, DType::C32 | DType::C64);
    let (alpha, beta) = if complex {
        (C64::new(0.75, -0.5), C64::new(-0.5, 0.25))
    } else {
        (C64::new(0.75, 0.0), C64::new(-0.5, 0.0))
    };
    // The output's layout, built here from its definition: the free legs in output
    // order (a conjugated operand's dualized) and the fused flux.
    let eff = |l: &SymmetricLayout, conj: bool| {
        if conj {
            (
                l.legs().iter().map(Leg::dual).collect::<Vec<_>>(),
                g.dual(l.flux()).unwrap(),
            )
        } else {
            (l.legs().to_vec(), l.flux().clone())
        }
    };
    let (ea, fa_flux) = eff(&la, c.conj[0]);
    let (eb, fb_flux) = eff(&lb, c.conj[1]);
    let out_legs: Vec<Leg> = out
        .iter()
        .map(|l| match a_labels.iter().position(|x| x == l) {
            Some(p) => ea[p].clone(),
            None => eb[b_labels.iter().position(|x| x == l).unwrap()].clone(),
        })
        .collect();
    let out_flux = g.fuse(&fa_flux, &fb_flux).unwrap();
    let out_layout = SymmetricLayout::new(g.clone(), out_legs, out_flux);
    {
        let a = sym_random(ctl, la.clone(), c.dtype, c.seed ^ 1).unwrap();
        let b = sym_random(ctl, lb.clone(), c.dtype, c.seed ^ 2).unwrap();
        let Ok(ol) = out_layout.clone() else {
            // No output block satisfies the fused flux: a typed error, nothing submitted.
            let opts = ContractOptions {
                conj: c.conj,
                ..ContractOptions::default()
            };
            let e = contract_with(ctl, spec.as_str(), &a, &b, &opts).unwrap_err();
            assert!(
                matches!(e, DistError::SymContract(SymContractError::Symmetry(_))),
                "{spec}: {e:?}"
            );
            return false;
        };
        let cin = sym_random(ctl, ol.clone(), c.dtype, c.seed ^ 3).unwrap();
        let opts = ContractOptions {
            alpha,
            beta,
            c: c.with_c.then_some(&cin),
            conj: c.conj,
            strict_blocking: false,
        };
        let r = contract_with(ctl, spec.as_str(), &a, &b, &opts).unwrap();
        assert!(r.is_symmetric());
        assert_eq!(r.layout().unwrap(), &ol, "{spec}: output layout");
        let got = r.to_dense(ctl).unwrap();
        let (ad, bd, cd) = (
            a.to_dense(ctl).unwrap(),
            b.to_dense(ctl).unwrap(),
            cin.to_dense(ctl).unwrap(),
        );
        let lopts = LocalOptions {
            alpha,
            beta,
            c: c.with_c.then_some(&cd),
            conj: c.conj,
            strict_blocking: true,
        };
        let (want, _) = local_einsum(spec.as_str(), &[&ad, &bd], &lopts, &BackendList::reference_only()).unwrap();
        assert_close(&got, &want, tolerance(c.dtype), &format!("{spec} {c:?}"));
        true
    }
}
