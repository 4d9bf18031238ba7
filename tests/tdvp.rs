//! Two-site TDVP (`uni20::tn::Tdvp`) against exact free-fermion values of
//! the open XX chain (`tests/free_fermions`):
//!
//! - real time: the Neel state's `<Sz_i(t)>` (L = 8, t = 0.8) within the
//!   integrator's error, which halving `dt` cuts by at least 4 (second
//!   order; measured: 6.1e-6 at dt = 0.2, 7.6e-7 at dt = 0.1, a factor 8:
//!   with no truncation the leading error term is small here), and `<H>`
//!   conserved to 1e-8 (measured 5e-15);
//! - imaginary time: from a product state to the ground energy of the
//!   gapped transverse-field Ising chain (free fermions), to 1e-9.
//!
//! L = 40 (with TEBD alongside) and a next-nearest coupling (J1-J2 against
//! the dense `exp(-i H t)`) are in `tests/tn_reference.rs` (release).

use uni20::tn::measure::{expectation, local_expectations, site_operator};
use uni20::tn::models::{tfi, xxz};
use uni20::tn::{Conserve, MpoOptions, Mps, Tdvp, TdvpOptions};

mod free_fermions;

use free_fermions::{max_diff, neel_sz, tfi_ground_energy};

/// Max error of `<Sz_i(t_end)>` after TDVP steps of `dt`, and the drift
/// of `<H>`.
fn evolve(l: usize, dt: f64, t_end: f64) -> (f64, f64) {
    let model = xxz(l, 1, 1.0, 0.0, 0.0, Conserve::None).unwrap();
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let labels: Vec<&str> = (0..l).map(|i| if i % 2 == 0 { "up" } else { "down" }).collect();
            let psi = Mps::product(ctl, &model.sites, &labels, 16).unwrap();
            let mpo = model
                .hamiltonian
                .to_mpo(&model.sites, &MpoOptions::default())
                .unwrap()
                .to_mpo(ctl, 16)
                .unwrap();
            let e0 = expectation(ctl, &psi, &mpo).unwrap();
            let opts = TdvpOptions {
                dt,
                chi_max: 64,
                cutoff: 1e-12,
                block: 16,
                ..TdvpOptions::default()
            };
            let mut tdvp = Tdvp::new(ctl, mpo.clone(), psi, opts).unwrap();
            let steps = (t_end / dt).round() as usize;
            let mut drift: f64 = 0.0;
            for _ in 0..steps {
                let s = tdvp.step(ctl).unwrap();
                assert!(
                    s.discarded_weight < 1e-10,
                    "chi 64 is exact at L = {l}: {}",
                    s.discarded_weight
                );
                assert_eq!(s.unconverged, 0);
                drift = drift.max((expectation(ctl, tdvp.mps(), &mpo).unwrap() - e0).abs());
            }
            let sz: Vec<_> = model
                .sites
                .iter()
                .map(|s| site_operator(ctl, s, "Sz", 16).unwrap())
                .collect();
            let got = local_expectations(ctl, tdvp.mps(), &sz).unwrap();
            (max_diff(&got, &neel_sz(l, tdvp.time())), drift)
        })
        .unwrap()
}

#[test]
fn neel_quench_follows_free_fermions_with_second_order_error() {
    let l = 8;
    let (coarse, drift_coarse) = evolve(l, 0.2, 0.8);
    let (fine, drift_fine) = evolve(l, 0.1, 0.8);
    eprintln!("TDVP max error of <Sz_i>: dt 0.2 -> {coarse:e}, dt 0.1 -> {fine:e}; energy drift {drift_coarse:e}, {drift_fine:e}");
    assert!(fine < 1e-5, "error at dt = 0.1: {fine}");
    let ratio = coarse / fine;
    assert!(
        ratio > 3.0,
        "errors {coarse} and {fine}: ratio {ratio}, expected at least ~4"
    );
    assert!(
        drift_coarse < 1e-8 && drift_fine < 1e-8,
        "energy drift {drift_coarse}, {drift_fine}"
    );
}

/// The gapped transverse-field Ising chain (g = 1.5): imaginary time from
/// the all-up state converges as `exp(-2 gap tau)`, gap `2 (g - 1) = 1`.
#[test]
fn imaginary_time_reaches_the_ground_state() {
    let (l, g) = (8, 1.5);
    let model = tfi(l, 1.0, g, Conserve::None).unwrap();
    let e = uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let psi = Mps::product(ctl, &model.sites, &vec!["up"; l], 16).unwrap();
            let mpo = model
                .hamiltonian
                .to_mpo(&model.sites, &MpoOptions::default())
                .unwrap()
                .to_mpo(ctl, 16)
                .unwrap();
            let opts = TdvpOptions {
                dt: 0.5,
                imaginary: true,
                chi_max: 32,
                block: 16,
                ..TdvpOptions::default()
            };
            let mut tdvp = Tdvp::new(ctl, mpo.clone(), psi, opts).unwrap();
            for _ in 0..24 {
                tdvp.step(ctl).unwrap();
            }
            expectation(ctl, tdvp.mps(), &mpo).unwrap()
        })
        .unwrap();
    let exact = tfi_ground_energy(l, 1.0, g);
    eprintln!("imaginary-time TDVP {e:.12}, exact {exact:.12}");
    assert!((e - exact).abs() < 1e-9, "imaginary-time TDVP {e}, exact {exact}");
}
