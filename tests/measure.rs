//! Measurements (`uni20::tn::measure`) against exact values:
//!
//! - the Neel product state of the Heisenberg chain: `<Sz_i> = +-1/2`,
//!   `<Sz_0 Sz_j> = +-1/4`, zero entanglement, `<H> = -(L-1)/4` and the
//!   variance `(L-1)/4` (each bond's flip term gives an orthogonal state of
//!   amplitude 1/2);
//! - the DMRG ground state of the L = 8 chain against the exact ground
//!   vector of the dense Hamiltonian (eigh of the 256 x 256 matrix):
//!   `<Sz_i>`, `<Sz_2 Sz_j>`, the entanglement entropy at every bond (from
//!   the SVD of the reshaped exact vector), `<H>` and a vanishing variance;
//! - the overlap of a state with itself and with an orthogonal product state.

use uni20::dispatch::decomp::{eigh, svd, EighBackendList, SvdBackendList};
use uni20::dispatch::LocalTensor;
use uni20::tn::measure::{
    correlations, energy_variance, entanglement_entropy, expectation, local_expectations, overlap, schmidt_spectra,
    site_operator,
};
use uni20::tn::models::heisenberg;
use uni20::tn::{Conserve, Dmrg, DmrgOptions, MpoOptions, Mps};

#[test]
fn neel_state_exact_values() {
    let l = 8;
    let model = heisenberg(l, 1, 1.0, Conserve::None).unwrap();
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let labels: Vec<&str> = (0..l).map(|i| if i % 2 == 0 { "up" } else { "down" }).collect();
            let neel = Mps::product(ctl, &model.sites, &labels, 4).unwrap();
            let sz: Vec<_> = model
                .sites
                .iter()
                .map(|s| site_operator(ctl, s, "Sz", 4).unwrap())
                .collect();
            let m = local_expectations(ctl, &neel, &sz).unwrap();
            for (i, v) in m.iter().enumerate() {
                assert!((v - if i % 2 == 0 { 0.5 } else { -0.5 }).abs() < 1e-14);
            }
            let c = correlations(ctl, &neel, &sz[0], 0, &sz, None, l).unwrap();
            for (k, v) in c.iter().enumerate() {
                let j = k + 1;
                assert!(
                    (v - if j % 2 == 0 { 0.25 } else { -0.25 }).abs() < 1e-14,
                    "j = {j}: {v}"
                );
            }
            let ent = entanglement_entropy(&schmidt_spectra(ctl, &neel, 4).unwrap());
            assert!(ent.iter().all(|s| s.abs() < 1e-12), "{ent:?}");
            let mpo = model
                .hamiltonian
                .to_mpo(&model.sites, &MpoOptions::default())
                .unwrap()
                .to_mpo(ctl, 4)
                .unwrap();
            let (e, var) = energy_variance(ctl, &neel, &mpo).unwrap();
            assert!((e + (l as f64 - 1.0) / 4.0).abs() < 1e-13, "{e}");
            assert!((var - (l as f64 - 1.0) / 4.0).abs() < 1e-12, "{var}");
            assert!((overlap(ctl, &neel, &neel).unwrap() - 1.0).abs() < 1e-14);
            let flipped: Vec<&str> = labels.iter().map(|s| if *s == "up" { "down" } else { "up" }).collect();
            let other = Mps::product(ctl, &model.sites, &flipped, 4).unwrap();
            assert_eq!(overlap(ctl, &neel, &other).unwrap(), 0.0);
        })
        .unwrap();
}

#[test]
fn ground_state_measurements_match_exact_diagonalisation() {
    let l = 8;
    let model = heisenberg(l, 1, 1.0, Conserve::None).unwrap();
    let local = model.hamiltonian.to_mpo(&model.sites, &MpoOptions::default()).unwrap();
    // Exact ground vector (the open chain of even length has a unique singlet ground state).
    let n = 1 << l;
    let h: Vec<f64> = local.dense_matrix().unwrap().iter().map(|z| z.re).collect();
    let r = eigh(
        &LocalTensor::from_f64(&[n, n], h).unwrap(),
        &Default::default(),
        &EighBackendList::default_cpu(2),
    )
    .unwrap();
    let e0 = r.values[0];
    let vecs = r.vectors.to_c64_vec();
    let psi: Vec<f64> = (0..n).map(|k| vecs[k * n].re).collect();
    // Basis index bits: site 0 is the most significant; bit 1 = down (state index 1).
    let sz = |k: usize, i: usize| if (k >> (l - 1 - i)) & 1 == 0 { 0.5 } else { -0.5 };
    let exact_sz: Vec<f64> = (0..l)
        .map(|i| (0..n).map(|k| psi[k] * psi[k] * sz(k, i)).sum())
        .collect();
    let exact_corr: Vec<f64> = (3..l)
        .map(|j| (0..n).map(|k| psi[k] * psi[k] * sz(k, 2) * sz(k, j)).sum())
        .collect();
    let exact_entropy: Vec<f64> = (1..l)
        .map(|cut| {
            let (rows, cols) = (1 << cut, 1 << (l - cut));
            let s = svd(
                &LocalTensor::from_f64(&[rows, cols], psi.clone()).unwrap(),
                &Default::default(),
                &SvdBackendList::default_cpu(1),
            )
            .unwrap()
            .s;
            s.iter()
                .map(|x| x * x)
                .filter(|&p| p > 1e-300)
                .map(|p| -p * p.ln())
                .sum()
        })
        .collect();
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let opts = DmrgOptions {
                chi_max: 32,
                cutoff: 1e-14,
                ..DmrgOptions::default()
            };
            let mpo = local.to_mpo(ctl, opts.block).unwrap();
            let mps = Mps::random(ctl, l, 2, 4, opts.block, 3).unwrap();
            let mut dmrg = Dmrg::new(ctl, mpo.clone(), mps, opts).unwrap();
            for _ in 0..6 {
                dmrg.sweep(ctl, &mut |_| {}).unwrap();
            }
            let psi = dmrg.mps();
            let ops: Vec<_> = model
                .sites
                .iter()
                .map(|s| site_operator(ctl, s, "Sz", 8).unwrap())
                .collect();
            let m = local_expectations(ctl, psi, &ops).unwrap();
            for (a, b) in m.iter().zip(&exact_sz) {
                assert!((a - b).abs() < 1e-8, "<Sz_i>: {a} vs {b}");
            }
            let c = correlations(ctl, psi, &ops[2], 2, &ops, None, l).unwrap();
            assert_eq!(c.len(), exact_corr.len());
            for (a, b) in c.iter().zip(&exact_corr) {
                assert!((a - b).abs() < 1e-8, "<Sz_2 Sz_j>: {a} vs {b}");
            }
            let ent = entanglement_entropy(&schmidt_spectra(ctl, psi, 8).unwrap());
            for (a, b) in ent.iter().zip(&exact_entropy) {
                assert!((a - b).abs() < 1e-8, "entropy: {a} vs {b}");
            }
            assert!((expectation(ctl, psi, &mpo).unwrap() - e0).abs() < 1e-9);
            let (e, var) = energy_variance(ctl, psi, &mpo).unwrap();
            assert!((e - e0).abs() < 1e-9);
            assert!(var.abs() < 1e-8, "variance {var}");
            assert!((overlap(ctl, psi, psi).unwrap() - 1.0).abs() < 1e-11);
        })
        .unwrap();
}
