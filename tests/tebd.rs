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

mod free_fermions;

use free_fermions::neel_sz as exact_sz;

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
