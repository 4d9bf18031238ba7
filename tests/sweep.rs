//! The open sweep engine through `Dmrg::run`: a schedule (bond dimension
//! ramp, mixer lowered to 0), observers (a closure that measures after
//! every sweep; `EnergyConvergence`, which stops the run), against the
//! exact ground energy of the open XX chain (free fermions), from the Neel
//! product state (bond dimension 1).

use uni20::tn::measure::{entanglement_entropy, schmidt_spectra};
use uni20::tn::models::xxz;
use uni20::tn::{
    Conserve, Control, Dmrg, DmrgOptions, EnergyConvergence, MpoOptions, Mps, SweepParams, SweepSchedule, SweepStats,
};

mod free_fermions;

use free_fermions::xx_ground_energy;

const L: usize = 8;

/// Runs the schedule (after two measured sweeps at chi 2 and 4); returns
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
        // The observer measured after each of the two first sweeps, whose bonds
        // were capped at 2 and 4.
        assert_eq!(entropies.len(), 2);
        assert!(
            entropies.iter().all(|s| *s > 0.1 && *s < (4f64).ln() + 1e-12),
            "{entropies:?}"
        );
        assert!(stats[0].max_bond <= 2 && stats[1].max_bond <= 4);
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
