//! The open sweep engine through `Dmrg::run`: a schedule (bond dimension
//! ramp, mixer lowered to 0), observers (a closure that measures after
//! every sweep; `EnergyConvergence`, which stops the run), against the
//! exact ground energy of the open XX chain (free fermions), from the Neel
//! product state (bond dimension 1); and a product state that plain
//! two-site DMRG cannot leave but the mixer does.

use uni20::tn::measure::{entanglement_entropy, schmidt_spectra};
use uni20::tn::models::xxz;
use uni20::tn::{
    Conserve, Control, Dmrg, DmrgOptions, EnergyConvergence, MpoOptions, Mps, SweepParams, SweepSchedule, SweepStats,
};

mod free_fermions;

use free_fermions::xx_ground_energy;

const L: usize = 8;

/// Runs the schedule (after two measured sweeps at chi 4 and 8); returns
/// the statistics of every sweep, the half-chain entropy after each of the
/// first two and the final energy.
fn run(mixer: f64) -> (Vec<SweepStats>, Vec<f64>, f64) {
    let model = xxz(L, 1, 1.0, 0.0, 0.0, Conserve::None).unwrap();
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let opts = DmrgOptions {
                block: 16,
                ..DmrgOptions::default()
            };
            let mpo = model
                .hamiltonian
                .to_mpo(&model.sites, &MpoOptions::default())
                .unwrap()
                .to_mpo(ctl, opts.block)
                .unwrap();
            let labels: Vec<&str> = (0..L).map(|i| if i % 2 == 0 { "up" } else { "down" }).collect();
            let neel = Mps::product(ctl, &model.sites, &labels, opts.block).unwrap();
            let mut dmrg = Dmrg::new(ctl, mpo, neel, opts).unwrap();
            let base = SweepParams {
                cutoff: 1e-12,
                mixer,
                ..SweepParams::default()
            };
            let mut entropies = Vec::new();
            let mut measure = |_: &SweepStats, mps: &Mps| {
                entropies.push(entanglement_entropy(&schmidt_spectra(ctl, mps, 16).unwrap())[L / 2 - 1]);
                Control::Continue
            };
            let mut stats = dmrg
                .run(ctl, &SweepSchedule::ramp_chi(base, &[4, 8]), &mut measure)
                .unwrap();
            // The mixer lowered tenfold per sweep, then 20 sweeps without it.
            let mut schedule = SweepSchedule::new();
            for k in 1..=3 {
                schedule = schedule.then(SweepParams {
                    chi_max: 16,
                    mixer: mixer / 10f64.powi(k),
                    ..base
                });
            }
            for p in SweepSchedule::constant(
                SweepParams {
                    chi_max: 16,
                    mixer: 0.0,
                    ..base
                },
                20,
            )
            .sweeps()
            {
                schedule = schedule.then(*p);
            }
            let mut stop = EnergyConvergence {
                tol: 1e-11,
                require_converged: true,
            };
            stats.extend(dmrg.run(ctl, &schedule, &mut stop).unwrap());
            let e = dmrg.energy().unwrap();
            (stats, entropies, e)
        })
        .unwrap()
}

#[test]
fn schedule_mixer_and_observers_reach_the_free_fermion_energy() {
    let exact = xx_ground_energy(L);
    for mixer in [0.0, 1e-2] {
        let (stats, entropies, e) = run(mixer);
        eprintln!(
            "mixer {mixer}: {} sweeps, E = {e:.12} (exact {exact:.12}), S(L/2) after sweeps 1, 2: {entropies:?}",
            stats.len()
        );
        assert!((e - exact).abs() < 1e-9, "mixer {mixer}: {e} vs {exact}");
        // The observer measured after each of the two first sweeps, with chi_max
        // 4 and 8: the bonds keep to the caps, the entropy to ln(cap), and both
        // grow along the ramp to the converged state's exact bond 2^(L/2).
        assert_eq!(entropies.len(), 2);
        for (k, cap) in [(0, 4), (1, 8)] {
            assert!(
                stats[k].max_bond <= cap,
                "sweep {k}: bond {} above {cap}",
                stats[k].max_bond
            );
            assert!(
                entropies[k] > 0.1 && entropies[k] <= (cap as f64).ln() + 1e-12,
                "sweep {k}: S = {}",
                entropies[k]
            );
        }
        assert!(stats[0].max_bond < stats[1].max_bond && stats[1].max_bond < stats.last().unwrap().max_bond);
        assert!(entropies[0] < entropies[1], "{entropies:?}");
        // EnergyConvergence stopped the run before the end of the schedule (2 + 23 sweeps).
        assert!(stats.len() < 25, "{} sweeps", stats.len());
        let last = stats.last().unwrap();
        assert!(last.energy_change.abs() < 1e-11 && last.unconverged_steps == 0);
        assert_eq!(last.sweep as usize, stats.len());
    }
}

#[test]
fn bad_sweep_parameters_are_typed_errors() {
    for bad in [
        SweepParams {
            chi_max: 0,
            ..SweepParams::default()
        },
        SweepParams {
            mixer: -1.0,
            ..SweepParams::default()
        },
        SweepParams {
            cutoff: f64::NAN,
            ..SweepParams::default()
        },
    ] {
        assert!(
            matches!(bad.validate(), Err(uni20::tn::TnError::InvalidOption { .. })),
            "{bad:?}"
        );
        assert!(SweepSchedule::constant(bad, 2).validate().is_err());
    }
    assert!(SweepParams::default().validate().is_ok());
}

/// The chain with only next-nearest exchange, `sum_i S_i . S_(i+2)` (two
/// decoupled Heisenberg chains on the even and odd sites), from the product
/// state `up up down down ..` (each sublattice a Neel state): a plain two-site
/// update couples only sites `i, i+1`, which share no term, and the flip
/// terms to `i+2` vanish against the product environment, so plain DMRG
/// stays at the Ising energy `-(L-2)/4`. The mixer puts the flipped states
/// that `H` reaches into the bond bases, and the run reaches twice the
/// ground energy of the open 4-site Heisenberg chain (dense eigh).
#[test]
fn the_mixer_leaves_a_product_state_that_plain_two_site_dmrg_cannot() {
    let l = 8;
    let model = uni20::tn::models::j1j2(l, 0.0, 1.0, Conserve::None).unwrap();
    let half = uni20::tn::models::heisenberg(l / 2, 1, 1.0, Conserve::None).unwrap();
    let dense: Vec<f64> = half
        .hamiltonian
        .to_mpo(&half.sites, &MpoOptions::default())
        .unwrap()
        .dense_matrix()
        .unwrap()
        .iter()
        .map(|z| z.re)
        .collect();
    let n = 1 << (l / 2);
    let e_half = uni20::dispatch::decomp::eigh(
        &uni20::dispatch::LocalTensor::from_f64(&[n, n], dense).unwrap(),
        &Default::default(),
        &uni20::dispatch::decomp::EighBackendList::default_cpu(1),
    )
    .unwrap()
    .values[0];
    let exact = 2.0 * e_half;
    let ising = -((l - 2) as f64) / 4.0;
    let energies: Vec<f64> = [0.0, 1e-2]
        .iter()
        .map(|&mixer| {
            uni20::universe()
                .ranks(2)
                .run(|ctl| {
                    let opts = DmrgOptions {
                        block: 16,
                        ..DmrgOptions::default()
                    };
                    let mpo = model
                        .hamiltonian
                        .to_mpo(&model.sites, &MpoOptions::default())
                        .unwrap()
                        .to_mpo(ctl, opts.block)
                        .unwrap();
                    let labels: Vec<&str> = (0..l).map(|i| if i % 4 < 2 { "up" } else { "down" }).collect();
                    let start = Mps::product(ctl, &model.sites, &labels, opts.block).unwrap();
                    let mut dmrg = Dmrg::new(ctl, mpo, start, opts).unwrap();
                    // Exact: each sublattice chain has Schmidt rank <= 4 at any cut.
                    let base = SweepParams {
                        chi_max: 16,
                        cutoff: 1e-12,
                        ..SweepParams::default()
                    };
                    let mut schedule = SweepSchedule::new();
                    for k in 0..3 {
                        schedule = schedule.then(SweepParams {
                            mixer: mixer / 10f64.powi(k),
                            ..base
                        });
                    }
                    for p in SweepSchedule::constant(base, 12).sweeps() {
                        schedule = schedule.then(*p);
                    }
                    let mut stop = EnergyConvergence {
                        tol: 1e-11,
                        require_converged: false,
                    };
                    dmrg.run(ctl, &schedule, &mut stop).unwrap();
                    dmrg.energy().unwrap()
                })
                .unwrap()
        })
        .collect();
    eprintln!(
        "J2-only chain L = {l}: plain {:.12}, mixer {:.12}; Ising {ising}, exact {exact:.12}",
        energies[0], energies[1]
    );
    assert!((energies[0] - ising).abs() < 1e-10, "plain DMRG moved: {}", energies[0]);
    assert!(
        (energies[1] - exact).abs() < 1e-9,
        "with the mixer: {} vs {exact}",
        energies[1]
    );
}
