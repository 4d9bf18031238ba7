//! Two-site DMRG (`uni20::tn`) against exact results:
//!
//! - L = 16: the DMRG energy equals the exact ground energy, computed here
//!   independently by a Lanczos with full reorthogonalisation on the dense
//!   Sz = 0 sector (12,870 states; the ground state of the open
//!   antiferromagnetic chain of even length is a singlet), to 1e-9;
//! - after each sweep the MPS is normalised and right-canonical, and its
//!   energy `<psi|H|psi>` (contracted here from the MPS and MPO, not taken
//!   from the eigensolver) equals the reported energy;
//! - the same seed gives the same energies on 2 and 4 ranks and with
//!   another block size.

use uni20::dist::{contract, contract_with, ContractOptions, DistTensor};
use uni20::tn::{Dmrg, DmrgOptions, LanczosOptions, Mpo, Mps, SPIN_HALF};
use uni20::Controller;

/// `H = sum_i Sz_i Sz_(i+1) + (S+_i S-_(i+1) + h.c.) / 2` on the states of
/// `l` spins with `l / 2` up (bit set = up), applied to `x`.
struct Sector {
    states: Vec<u32>,
    index: std::collections::HashMap<u32, usize>,
    l: usize,
}

impl Sector {
    fn new(l: usize) -> Sector {
        let states: Vec<u32> = (0u32..1 << l).filter(|s| s.count_ones() as usize == l / 2).collect();
        let index = states.iter().enumerate().map(|(i, &s)| (s, i)).collect();
        Sector { states, index, l }
    }

    fn apply(&self, x: &[f64], y: &mut [f64]) {
        y.iter_mut().for_each(|v| *v = 0.0);
        for (i, &s) in self.states.iter().enumerate() {
            for b in 0..self.l - 1 {
                let (u1, u2) = ((s >> b) & 1, (s >> (b + 1)) & 1);
                if u1 == u2 {
                    y[i] += 0.25 * x[i];
                } else {
                    y[i] -= 0.25 * x[i];
                    let t = s ^ (0b11 << b);
                    y[self.index[&t]] += 0.5 * x[i];
                }
            }
        }
    }
}

/// The lowest eigenvalue of the sector's Hamiltonian by Lanczos with full
/// reorthogonalisation, iterated until the lowest Ritz value is stable to
/// 1e-13.
fn exact_ground_energy(l: usize) -> f64 {
    let h = Sector::new(l);
    let n = h.states.len();
    // A start vector with weight on every state (deterministic).
    let mut v: Vec<f64> = (0..n).map(|i| 1.0 + ((i * 7919) % 97) as f64 / 97.0).collect();
    let nv = v.iter().map(|a| a * a).sum::<f64>().sqrt();
    v.iter_mut().for_each(|a| *a /= nv);
    let mut basis = vec![v];
    let (mut alphas, mut betas) = (Vec::new(), Vec::new());
    let mut w = vec![0.0; n];
    let mut last = f64::INFINITY;
    for j in 0..300 {
        h.apply(&basis[j], &mut w);
        let a: f64 = w.iter().zip(&basis[j]).map(|(p, q)| p * q).sum();
        alphas.push(a);
        for q in &basis {
            let c: f64 = w.iter().zip(q).map(|(p, r)| p * r).sum();
            w.iter_mut().zip(q).for_each(|(p, r)| *p -= c * r);
        }
        let b = w.iter().map(|a| a * a).sum::<f64>().sqrt();
        let k = alphas.len();
        let t = faer::Mat::from_fn(k, k, |r, c| {
            if r == c {
                alphas[r]
            } else if r + 1 == c {
                betas[r]
            } else if c + 1 == r {
                betas[c]
            } else {
                0.0
            }
        });
        let ev = t.as_ref().self_adjoint_eigenvalues(faer::Side::Lower).unwrap();
        if (ev[0] - last).abs() < 1e-13 && j > 20 {
            return ev[0];
        }
        last = ev[0];
        betas.push(b);
        basis.push(w.iter().map(|p| p / b).collect());
    }
    panic!("the reference Lanczos did not converge");
}

fn scalar(ctl: &Controller<'_>, t: &DistTensor) -> f64 {
    t.to_local(ctl).unwrap().to_c64_vec()[0].re
}

/// `<psi|H|psi>` and `<psi|psi>` by contracting the whole chain from the left.
fn expectation(ctl: &Controller<'_>, mps: &Mps, mpo: &Mpo) -> (f64, f64) {
    let conj = ContractOptions {
        conj: [true, false],
        ..ContractOptions::default()
    };
    let mut env = mpo.left_boundary(ctl, 8).unwrap();
    let mut ov = contract(ctl, "a,c->ac", &unit1(ctl), &unit1(ctl)).unwrap();
    for (m, w) in mps.sites().iter().zip(mpo.sites()) {
        let t1 = contract(ctl, "awc,ctd->awtd", &env, m).unwrap();
        let t2 = contract(ctl, "awtd,wvst->asvd", &t1, w).unwrap();
        env = contract_with(ctl, "asb,asvd->bvd", m, &t2, &conj).unwrap();
        let o1 = contract(ctl, "ac,ctd->atd", &ov, m).unwrap();
        ov = contract_with(ctl, "atb,atd->bd", m, &o1, &conj).unwrap();
    }
    let right = mpo.right_boundary(ctl, 8).unwrap();
    (
        scalar(ctl, &contract(ctl, "bvd,bvd->", &env, &right).unwrap()),
        scalar(ctl, &ov),
    )
}

fn unit1(ctl: &Controller<'_>) -> DistTensor {
    DistTensor::from_local(ctl, &uni20::LocalTensor::from_f64(&[1], vec![1.0]).unwrap(), 1).unwrap()
}

/// Runs `sweeps` sweeps of DMRG and returns the per-sweep energies.
fn run_dmrg(ranks: usize, l: usize, opts: DmrgOptions, sweeps: usize, check_state: bool) -> Vec<f64> {
    uni20::universe()
        .ranks(ranks)
        .run(|ctl| {
            let mpo = Mpo::heisenberg(ctl, l, opts.block).unwrap();
            let mps = Mps::random(ctl, l, SPIN_HALF, 4, opts.block, 11).unwrap();
            let mut dmrg = Dmrg::new(ctl, mpo.clone(), mps, opts).unwrap();
            let mut energies = Vec::new();
            for _ in 0..sweeps {
                let s = dmrg.sweep(ctl, &mut |_| {}).unwrap();
                if check_state {
                    let (e, nrm) = expectation(ctl, dmrg.mps(), &mpo);
                    assert!((nrm - 1.0).abs() < 1e-11, "sweep {}: <psi|psi> = {nrm}", s.sweep);
                    assert!(
                        (e - s.energy).abs() < 1e-9,
                        "sweep {}: <psi|H|psi> = {e}, DMRG reported {}",
                        s.sweep,
                        s.energy
                    );
                }
                energies.push(s.energy);
            }
            energies
        })
        .unwrap()
}

/// `<psi|psi>` by contracting the chain from the left (the transfer matrices
/// of a right-normalised MPS keep trace 1, so nothing here can overflow).
fn overlap(ctl: &Controller<'_>, mps: &Mps) -> f64 {
    let conj = ContractOptions {
        conj: [true, false],
        ..ContractOptions::default()
    };
    let mut ov = contract(ctl, "a,c->ac", &unit1(ctl), &unit1(ctl)).unwrap();
    for m in mps.sites() {
        let o1 = contract(ctl, "ac,ctd->atd", &ov, m).unwrap();
        ov = contract_with(ctl, "atb,atd->bd", m, &o1, &conj).unwrap();
    }
    scalar(ctl, &ov)
}

/// A random start of 2000 sites has norm 1 and right-normalised sites of
/// norm `sqrt(chi)`: normalised only at the end of its construction, the
/// product of its LQ factors overflowed near 1000 sites (`lq: ...
/// non-finite value -inf`).
#[test]
fn a_long_random_start_is_finite_and_normalised() {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let l = 2000;
            let mps = Mps::random(ctl, l, SPIN_HALF, 8, 8, 5).unwrap();
            assert_eq!(mps.len(), l);
            let nrm = overlap(ctl, &mps);
            assert!((nrm - 1.0).abs() < 1e-10, "<psi|psi> = {nrm}");
            for i in [1, l / 2, l - 1] {
                let chi = mps.site(i).shape()[0] as f64;
                let n = uni20::dist::norm(ctl, mps.site(i)).unwrap();
                assert!(
                    (n * n - chi).abs() < 1e-10 * chi,
                    "site {i}: |M|^2 = {} vs chi {chi}",
                    n * n
                );
            }
        })
        .unwrap();
}

#[test]
fn l16_matches_exact_diagonalisation() {
    let exact = exact_ground_energy(16);
    // Reference value of the open L = 16 chain (published to 13 digits).
    assert!(
        (exact - (-6.9117371455749)).abs() < 1e-11,
        "reference Lanczos gave {exact}"
    );
    let opts = DmrgOptions {
        chi_max: 64,
        cutoff: 1e-12,
        block: 16,
        ..DmrgOptions::default()
    };
    let e = run_dmrg(3, 16, opts, 4, true);
    let last = *e.last().unwrap();
    assert!(
        (last - exact).abs() < 1e-9,
        "DMRG {last} vs exact {exact} (sweeps {e:?})"
    );
    // Variational: never below the exact ground energy, and non-increasing
    // once the bond dimension has grown.
    assert!(e.iter().all(|&x| x > exact - 1e-10), "{e:?}");
    assert!(e[3] <= e[1] + 1e-10, "{e:?}");
}

#[test]
fn same_energies_on_other_rank_counts_and_blocks() {
    let opts = DmrgOptions {
        chi_max: 32,
        block: 5,
        ..DmrgOptions::default()
    };
    let a = run_dmrg(2, 10, opts, 3, false);
    let b = run_dmrg(4, 10, opts, 3, false);
    let c = run_dmrg(3, 10, DmrgOptions { block: 64, ..opts }, 3, false);
    for (x, y) in a.iter().zip(&b).chain(a.iter().zip(&c)) {
        assert!((x - y).abs() < 1e-10, "{a:?} / {b:?} / {c:?}");
    }
    // The exact L = 10 energy (also checked by examples/heisenberg.rs).
    assert!((a[2] - (-4.258035207283)).abs() < 1e-8, "{a:?}");
}

#[test]
fn bad_options_are_typed_errors() {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let mpo = Mpo::heisenberg(ctl, 4, 4).unwrap();
            let mps = Mps::random(ctl, 4, SPIN_HALF, 2, 4, 1).unwrap();
            for (opts, name) in [
                (
                    DmrgOptions {
                        chi_max: 0,
                        ..Default::default()
                    },
                    "chi_max",
                ),
                (
                    DmrgOptions {
                        cutoff: f64::NAN,
                        ..Default::default()
                    },
                    "cutoff",
                ),
                (
                    DmrgOptions {
                        block: 0,
                        ..Default::default()
                    },
                    "block",
                ),
                (
                    DmrgOptions {
                        tol_to_truncation: -0.1,
                        ..Default::default()
                    },
                    "tol_to_truncation",
                ),
                (
                    DmrgOptions {
                        tol_to_truncation: f64::INFINITY,
                        ..Default::default()
                    },
                    "tol_to_truncation",
                ),
            ] {
                let e = Dmrg::new(ctl, mpo.clone(), mps.clone(), opts).unwrap_err();
                assert!(e.to_string().contains(name), "{e}");
            }
            let short = Mps::random(ctl, 3, SPIN_HALF, 2, 4, 1).unwrap();
            let e = Dmrg::new(ctl, mpo.clone(), short, DmrgOptions::default()).unwrap_err();
            assert!(matches!(e, uni20::tn::TnError::Shape { .. }), "{e}");
            let e = Mps::random(ctl, 0, SPIN_HALF, 2, 4, 1).unwrap_err();
            assert!(e.to_string().contains("sites"), "{e}");
        })
        .unwrap();
}

/// The adaptive eigensolver tolerance (`tol_to_truncation`) needs fewer
/// operator applications once the bond dimension saturates, and the energy
/// moves by a small fraction of the discarded weight (the truncation's own
/// energy scale). L = 20 with chi 16 truncates at every sweep.
#[test]
fn adaptive_tolerance_saves_applications_at_the_same_energy() {
    let run = |c: f64| {
        let opts = DmrgOptions {
            chi_max: 16,
            cutoff: 1e-12,
            block: 8,
            tol_to_truncation: c,
            // The residual rule alone (no energy-change stop, no dense solves).
            lanczos: LanczosOptions::default().residual_only(),
            e_tol_to_truncation: 0.0,
            ..DmrgOptions::default()
        };
        uni20::universe()
            .ranks(2)
            .run(|ctl| {
                let mpo = Mpo::heisenberg(ctl, 20, opts.block).unwrap();
                let mps = Mps::random(ctl, 20, SPIN_HALF, 4, opts.block, 3).unwrap();
                let mut dmrg = Dmrg::new(ctl, mpo, mps, opts).unwrap();
                (0..5)
                    .map(|_| dmrg.sweep(ctl, &mut |_| {}).unwrap())
                    .collect::<Vec<_>>()
            })
            .unwrap()
    };
    let (fixed, adaptive) = (run(0.0), run(0.1));
    let (f, a) = (fixed.last().unwrap(), adaptive.last().unwrap());
    assert!(f.max_truncation > 1e-10, "the case must truncate: {f:?}");
    assert!(
        (f.energy - a.energy).abs() < 0.1 * f.max_truncation,
        "fixed {} vs adaptive {} (discarded weight {:e})",
        f.energy,
        a.energy,
        f.max_truncation
    );
    assert!(a.unconverged_steps == 0 && f.unconverged_steps == 0, "{f:?} {a:?}");
    // The last two sweeps are converged: the adaptive run stops its Lanczos
    // at a residual of about 0.1 sqrt(w) instead of 1e-8.
    for (x, y) in fixed[3..].iter().zip(&adaptive[3..]) {
        assert!(
            (y.lanczos_applications as f64) < 0.8 * x.lanczos_applications as f64,
            "sweep {}: adaptive {} vs fixed {} applications",
            x.sweep,
            y.lanczos_applications,
            x.lanczos_applications
        );
        assert!(y.max_residual > x.max_residual, "{x:?} {y:?}");
    }
}

/// The energy-change stop (`e_tol_to_truncation`) and the dense solves of
/// the small steps near the chain ends (`dense_max`), the defaults, against
/// the residual rule alone: far fewer applications per converged sweep, the
/// energy no higher by more than a fraction of the discarded weight. L = 20, chi 16:
/// the two-site spaces of the bonds (0,1), (1,2), (2,3) and their mirror
/// images have 16, 64 and 256 unknowns (at most the default 256), so a
/// converged sweep solves those 12 of its 38 steps densely.
#[test]
fn energy_change_stop_and_dense_ends_save_applications() {
    let run = |opts: DmrgOptions| {
        uni20::universe()
            .ranks(2)
            .run(|ctl| {
                let mpo = Mpo::heisenberg(ctl, 20, opts.block).unwrap();
                let mps = Mps::random(ctl, 20, SPIN_HALF, 4, opts.block, 3).unwrap();
                let mut dmrg = Dmrg::new(ctl, mpo, mps, opts).unwrap();
                (0..6)
                    .map(|_| dmrg.sweep(ctl, &mut |_| {}).unwrap())
                    .collect::<Vec<_>>()
            })
            .unwrap()
    };
    let base = DmrgOptions {
        chi_max: 16,
        cutoff: 1e-12,
        block: 8,
        ..DmrgOptions::default()
    };
    assert_eq!(base.lanczos.dense_max, 256);
    let old = run(DmrgOptions {
        lanczos: base.lanczos.residual_only(),
        e_tol_to_truncation: 0.0,
        ..base
    });
    let new = run(base);
    let (o, n) = (old.last().unwrap(), new.last().unwrap());
    assert!(o.max_truncation > 1e-10, "the case must truncate: {o:?}");
    assert!(n.unconverged_steps == 0 && o.unconverged_steps == 0, "{o:?} {n:?}");
    // Not worse than the residual rule by a fraction of the discarded weight (lower is
    // better: DMRG is variational; with the default e_tol_to_truncation = 10 the stop
    // lands 6.8e-8 lower here), and not absurdly lower (no broken solve).
    assert!(
        n.energy < o.energy + 0.1 * o.max_truncation && n.energy > o.energy - 10.0 * o.max_truncation,
        "residual rule {} vs energy-change stop {} (discarded weight {:e})",
        o.energy,
        n.energy,
        o.max_truncation
    );
    for (x, y) in old[3..].iter().zip(&new[3..]) {
        assert_eq!(x.dense_steps, 0);
        assert_eq!(y.dense_steps, 12, "{y:?}");
        assert!(
            (y.lanczos_applications as f64) < 0.6 * x.lanczos_applications as f64,
            "sweep {}: {} vs {} applications",
            x.sweep,
            y.lanczos_applications,
            x.lanczos_applications
        );
    }
}
