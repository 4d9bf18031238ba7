//! Excited states by projection (`Dmrg::orthogonal_to`): the three lowest
//! levels of the open spin-1 Heisenberg chain at L = 6 against the exact
//! spectrum of the dense Hamiltonian (729 x 729). The ground state is a
//! singlet; the next level is the threefold edge-state triplet, so the
//! second and third states found by projection both have its energy.

use uni20::dispatch::decomp::{eigh, EighBackendList};
use uni20::dispatch::LocalTensor;
use uni20::tn::models::spin1;
use uni20::tn::{Conserve, Dmrg, DmrgOptions, MpoOptions, Mps};

#[test]
fn spin1_chain_lowest_levels_by_projection() {
    let l = 6;
    let model = spin1(l, 1.0, 0.0, Conserve::None).unwrap();
    let local = model.hamiltonian.to_mpo(&model.sites, &MpoOptions::default()).unwrap();
    let n = 729;
    let h: Vec<f64> = local.dense_matrix().unwrap().iter().map(|z| z.re).collect();
    let exact = eigh(
        &LocalTensor::from_f64(&[n, n], h).unwrap(),
        &Default::default(),
        &EighBackendList::default_cpu(2),
    )
    .unwrap()
    .values;
    assert!(
        exact[2] - exact[1] < 1e-10 && exact[1] - exact[0] > 1e-3,
        "singlet, then a triplet: {:?}",
        &exact[..4]
    );
    let found = uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let opts = DmrgOptions {
                chi_max: 32,
                cutoff: 1e-14,
                ..DmrgOptions::default()
            };
            let mpo = local.to_mpo(ctl, opts.block).unwrap();
            let mut states: Vec<Mps> = Vec::new();
            let mut energies = Vec::new();
            for k in 0..3u64 {
                let start = Mps::random(ctl, l, 3, 4, opts.block, 17 + k).unwrap();
                let mut dmrg = Dmrg::new(ctl, mpo.clone(), start, opts)
                    .unwrap()
                    .orthogonal_to(ctl, states.clone(), 20.0)
                    .unwrap();
                let mut e = f64::NAN;
                for _ in 0..10 {
                    let s = dmrg.sweep(ctl, &mut |_| {}).unwrap();
                    let done = (s.energy - e).abs() < 1e-12;
                    e = s.energy;
                    if done {
                        break;
                    }
                }
                energies.push(e);
                states.push(dmrg.mps().clone());
            }
            // The states found are orthogonal to each other.
            for a in 0..3 {
                for b in 0..a {
                    let o = uni20::tn::measure::overlap(ctl, &states[a], &states[b]).unwrap();
                    assert!(o.abs() < 1e-6, "<{a}|{b}> = {o}");
                }
            }
            energies
        })
        .unwrap();
    for k in 0..3 {
        assert!(
            (found[k] - exact[k]).abs() < 1e-8,
            "level {k}: DMRG {} vs exact {}",
            found[k],
            exact[k]
        );
    }
}
