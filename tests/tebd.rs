//! TEBD (`uni20::tn::Tebd`) against exact free-fermion dynamics: the Neel
//! state evolved by the XX chain `H = sum (Sx Sx + Sy Sy)`, which maps by
//! Jordan-Wigner to hopping of amplitude 1/2, so `<Sz_i(t)> = sum_k
//! |U_ik(t)|^2 n_k - 1/2` with `U = exp(-i T t)` of the one-particle
//! hopping matrix `T`, computed here from the eigenvectors of `T`
//! (`sin`-modes of the open chain). The second-order Trotter error shrinks
//! as `dt^2`: halving `dt` cuts the error by about 4.

use uni20::tn::measure::{local_expectations, site_operator};
use uni20::tn::models::xxz;
use uni20::tn::{Conserve, Mps, Tebd, TebdOptions};

fn exact_sz(l: usize, t: f64) -> Vec<f64> {
    // T = (1/2) (adjacency of the open chain): modes phi_k(i) = sqrt(2/(L+1)) sin(pi k (i+1)/(L+1)),
    // energies cos(pi k / (L+1)).
    let modes: Vec<(f64, Vec<f64>)> = (1..=l)
        .map(|k| {
            let q = std::f64::consts::PI * k as f64 / (l + 1) as f64;
            let norm = (2.0 / (l + 1) as f64).sqrt();
            (q.cos(), (0..l).map(|i| norm * (q * (i + 1) as f64).sin()).collect())
        })
        .collect();
    (0..l)
        .map(|i| {
            let mut n = 0.0;
            for j in (0..l).step_by(2) {
                // U_ij = sum_k phi_k(i) exp(-i e_k t) phi_k(j); Neel: sites 0, 2, .. are up (occupied).
                let (mut re, mut im) = (0.0, 0.0);
                for (e, phi) in &modes {
                    re += phi[i] * phi[j] * (e * t).cos();
                    im -= phi[i] * phi[j] * (e * t).sin();
                }
                n += re * re + im * im;
            }
            n - 0.5
        })
        .collect()
}

fn evolve(l: usize, dt: f64, t_end: f64) -> f64 {
    let model = xxz(l, 1, 1.0, 0.0, 0.0, Conserve::None).unwrap();
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let labels: Vec<&str> = (0..l).map(|i| if i % 2 == 0 { "up" } else { "down" }).collect();
            let mut psi = Mps::product(ctl, &model.sites, &labels, 16).unwrap();
            let opts = TebdOptions {
                dt,
                chi_max: 64,
                cutoff: 1e-12,
                block: 16,
                ..TebdOptions::default()
            };
            let tebd = Tebd::new(ctl, &model, opts).unwrap();
            let steps = (t_end / dt).round() as usize;
            for _ in 0..steps {
                let s = tebd.step(ctl, &mut psi).unwrap();
                assert!(
                    s.discarded_weight < 1e-10,
                    "chi 64 is exact at L = {l}: {}",
                    s.discarded_weight
                );
            }
            let sz: Vec<_> = model
                .sites
                .iter()
                .map(|s| site_operator(ctl, s, "Sz", 16).unwrap())
                .collect();
            let got = local_expectations(ctl, &psi, &sz).unwrap();
            let want = exact_sz(l, steps as f64 * dt);
            got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max)
        })
        .unwrap()
}

#[test]
fn neel_quench_on_the_xx_chain_follows_free_fermions_with_second_order_error() {
    let l = 8;
    // The magnetization really moves by t = 1 (the check is not of a frozen state).
    let moved = exact_sz(l, 1.0)
        .iter()
        .enumerate()
        .map(|(i, m)| (m - if i % 2 == 0 { 0.5 } else { -0.5 }).abs())
        .fold(0.0, f64::max);
    assert!(moved > 0.3, "{moved}");
    let coarse = evolve(l, 0.2, 1.0);
    let fine = evolve(l, 0.1, 1.0);
    assert!(fine < 2e-3, "error at dt = 0.1: {fine}");
    let ratio = coarse / fine;
    eprintln!("TEBD max error of <Sz_i>: dt 0.2 -> {coarse:e}, dt 0.1 -> {fine:e}");
    assert!(
        (3.0..5.0).contains(&ratio),
        "errors {coarse} (dt 0.2) and {fine} (dt 0.1): ratio {ratio}, expected ~4"
    );
}
