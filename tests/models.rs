//! DMRG on models built from operator sums (`uni20::tn::models`, `OpSum`)
//! against values computed independently:
//!
//! - the open transverse-field Ising chain at the critical point and in the
//!   ordered phase: the free-fermion ground energy (minus the sum of the
//!   singular values of the L x L matrix with g on the diagonal and J above
//!   it), to 1e-9;
//! - the open XX chain (free fermions by Jordan-Wigner): minus the sum of
//!   the negative eigenvalues of the hopping matrix, to 1e-9;
//! - the same models with their symmetry's charges on the sites give the
//!   same MPO (the dense DMRG ignores the charges) and the same energy.

use uni20::tn::models::{tfi, xxz, Model};
use uni20::tn::{Conserve, Dmrg, DmrgOptions, MpoOptions, Mps};

fn dmrg_energy(model: &Model, chi: usize, sweeps: usize) -> f64 {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let opts = DmrgOptions {
                chi_max: chi,
                cutoff: 1e-12,
                ..DmrgOptions::default()
            };
            let local = model.hamiltonian.to_mpo(&model.sites, &MpoOptions::default()).unwrap();
            let mpo = local.to_mpo(ctl, opts.block).unwrap();
            let l = model.sites.len();
            let mps = Mps::random(ctl, l, model.sites[0].dim(), 4, opts.block, 5).unwrap();
            let mut dmrg = Dmrg::new(ctl, mpo, mps, opts).unwrap();
            let mut e = f64::NAN;
            for _ in 0..sweeps {
                let s = dmrg.sweep(ctl, &mut |_| {}).unwrap();
                if (s.energy - e).abs() < 1e-12 {
                    e = s.energy;
                    break;
                }
                e = s.energy;
            }
            e
        })
        .unwrap()
}

fn singular_values(a: Vec<f64>, n: usize) -> Vec<f64> {
    let t = uni20::dispatch::LocalTensor::from_f64(&[n, n], a).unwrap();
    uni20::dispatch::decomp::svd(
        &t,
        &Default::default(),
        &uni20::dispatch::decomp::SvdBackendList::default_cpu(1),
    )
    .unwrap()
    .s
}

fn tfi_exact(l: usize, j: f64, g: f64) -> f64 {
    let mut a = vec![0.0; l * l];
    for i in 0..l {
        a[i * l + i] = g;
        if i + 1 < l {
            a[i * l + i + 1] = j;
        }
    }
    -singular_values(a, l).iter().sum::<f64>()
}

#[test]
fn transverse_field_ising_matches_free_fermions() {
    let l = 16;
    for (g, conserve) in [(1.0, Conserve::None), (0.5, Conserve::Parity)] {
        let e = dmrg_energy(&tfi(l, 1.0, g, conserve).unwrap(), 32, 8);
        let exact = tfi_exact(l, 1.0, g);
        assert!((e - exact).abs() < 1e-9, "g = {g}: DMRG {e}, exact {exact}");
    }
}

#[test]
fn xx_chain_matches_free_fermions() {
    // H = sum (Sx Sx + Sy Sy) = sum (c+_i c_(i+1) + h.c.) / 2: one-particle energies
    // cos(pi k / (L + 1)); the ground state fills the negative ones.
    let l = 12;
    let exact: f64 = (1..=l)
        .map(|k| (std::f64::consts::PI * k as f64 / (l + 1) as f64).cos())
        .filter(|&x| x < 0.0)
        .sum();
    let e = dmrg_energy(&xxz(l, 1, 1.0, 0.0, 0.0, Conserve::Sz).unwrap(), 32, 8);
    assert!((e - exact).abs() < 1e-9, "DMRG {e}, exact {exact}");
}
