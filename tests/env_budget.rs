//! Out-of-core DMRG environments (`DmrgOptions::env_budget`): with a budget
//! the sweep engine offloads the environments farthest from the next bond
//! to their owners' disk stores (an in-memory store's temporary offload
//! directory here) and fetches them back when needed. The energies of
//! every sweep equal those of the unbudgeted run to 1e-12 (dense on 1 and
//! 3 ranks, symmetric with `Conserve::Sz`, with and without prefetch), the
//! offloads really happened (the root's byte counts and the stores'
//! counters), and the environment blocks the root's store holds resident
//! stay within the budget (residency asked of the store, block by block).

use uni20::dist::{residency_stats, DistTensor};
use uni20::tn::models::heisenberg;
use uni20::tn::{Conserve, Dmrg, DmrgOptions, EnvBudget, LanczosOptions, Mpo, MpoOptions, Mps, SPIN_HALF};
use uni20::Controller;

fn opts(budget: Option<EnvBudget>) -> DmrgOptions {
    DmrgOptions {
        chi_max: 8,
        cutoff: 1e-12,
        block: 4,
        lanczos: LanczosOptions {
            tol: 1e-10,
            ..LanczosOptions::default()
        },
        env_budget: budget,
        ..DmrgOptions::default()
    }
}

const SWEEPS: usize = 3;

/// The energies of `SWEEPS` sweeps, the bytes the root counted offloaded
/// and fetched, and the bytes the ranks' stores hold only on disk at the end.
struct Run {
    energies: Vec<f64>,
    offloaded: u64,
    written: u64,
    fetched: u64,
    on_disk: u64,
}

fn sweep_all(ctl: &Controller<'_>, mut dmrg: Dmrg) -> Run {
    let before = residency_stats(ctl);
    let energies = (0..SWEEPS)
        .map(|_| dmrg.sweep(ctl, &mut |_| {}).unwrap().energy)
        .collect();
    ctl.drain().unwrap();
    let r = residency_stats(ctl).since(&before);
    let on_disk = ctl.store_stats().unwrap().iter().map(|s| s.bytes_spilled).sum();
    Run {
        energies,
        offloaded: r.bytes_offloaded,
        written: r.bytes_written,
        fetched: r.bytes_fetched,
        on_disk,
    }
}

fn dense(ranks: usize, budget: Option<EnvBudget>) -> Run {
    uni20::universe()
        .ranks(ranks)
        .run(|ctl| {
            let o = opts(budget);
            let mpo = Mpo::heisenberg(ctl, 8, o.block).unwrap();
            let mps = Mps::random(ctl, 8, SPIN_HALF, 4, o.block, 5).unwrap();
            sweep_all(ctl, Dmrg::new(ctl, mpo, mps, o).unwrap())
        })
        .unwrap()
}

fn symmetric(budget: Option<EnvBudget>) -> Run {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let o = opts(budget);
            let m = heisenberg(8, 1, 1.0, Conserve::Sz).unwrap();
            let local = m.hamiltonian.to_mpo(&m.sites, &MpoOptions::default()).unwrap();
            let mpo = local.to_symmetric_mpo(ctl, &m.sites, o.block).unwrap();
            let q = m.sites[0].charges().unwrap().0.charge(&[0]).unwrap();
            let mps = Mps::symmetric_random(ctl, &m.sites, &q, 4, o.block, 7).unwrap();
            sweep_all(ctl, Dmrg::new(ctl, mpo, mps, o).unwrap())
        })
        .unwrap()
}

fn same_energies(a: &Run, b: &Run, what: &str) {
    assert_eq!(a.energies.len(), b.energies.len());
    for (k, (x, y)) in a.energies.iter().zip(&b.energies).enumerate() {
        assert!((x - y).abs() <= 1e-12, "{what}: sweep {}: {x} vs unbudgeted {y}", k + 1);
    }
}

fn offloaded(r: &Run, what: &str, prefetch: bool) {
    assert!(r.offloaded > 0 && r.written > 0, "{what}: nothing offloaded");
    assert!(r.on_disk > 0, "{what}: the stores hold nothing only on disk");
    if prefetch {
        assert!(r.fetched > 0, "{what}: nothing prefetched");
    } else {
        assert_eq!(r.fetched, 0, "{what}: prefetched without prefetch");
    }
}

#[test]
fn a_tiny_budget_repeats_the_dense_energies_on_one_and_three_ranks() {
    for ranks in [1, 3] {
        let plain = dense(ranks, None);
        assert_eq!((plain.offloaded, plain.on_disk), (0, 0));
        for prefetch in [true, false] {
            // One byte: every environment is offloaded after each step and
            // loaded by the step that needs it.
            let tiny = dense(ranks, Some(EnvBudget { bytes: 1, prefetch }));
            let what = format!("{ranks} ranks, 1 byte, prefetch {prefetch}");
            same_energies(&tiny, &plain, &what);
            assert!(tiny.offloaded > 0 && tiny.on_disk > 0, "{what}: nothing offloaded");
            // A few environments' worth: some stay, the others come back by prefetch.
            let some = dense(ranks, Some(EnvBudget { bytes: 3_000, prefetch }));
            let what = format!("{ranks} ranks, 3 kB, prefetch {prefetch}");
            same_energies(&some, &plain, &what);
            offloaded(&some, &what, prefetch);
        }
    }
}

#[test]
fn a_tiny_budget_repeats_the_symmetric_energies() {
    let plain = symmetric(None);
    for prefetch in [true, false] {
        let what = format!("Sz, prefetch {prefetch}");
        let tiny = symmetric(Some(EnvBudget { bytes: 1, prefetch }));
        same_energies(&tiny, &plain, &what);
        assert!(tiny.offloaded > 0, "{what}: nothing offloaded");
        let some = symmetric(Some(EnvBudget { bytes: 2_000, prefetch }));
        same_energies(&some, &plain, &what);
        offloaded(&some, &what, prefetch);
    }
}

/// Payload bytes of the blocks of `t` that the root's store holds resident.
fn resident_bytes(ctl: &Controller<'_>, t: &DistTensor) -> (u64, u64) {
    let m = t.manifest(ctl).unwrap();
    let mut resident = 0;
    let mut total = 0;
    for (b, r) in m.blocks.iter().enumerate() {
        assert_eq!(r.owner, 0, "one rank: the root owns every block");
        total += m.block_bytes(b);
        if ctl.store().is_resident(r.id) {
            resident += m.block_bytes(b);
        }
    }
    (resident, total)
}

#[test]
fn resident_environment_bytes_stay_within_the_budget() {
    uni20::universe()
        .ranks(1)
        .run(|ctl| {
            let l = 10;
            let run = |budget| {
                let o = DmrgOptions {
                    block: 8,
                    ..opts(budget)
                };
                let mpo = Mpo::heisenberg(ctl, l, o.block).unwrap();
                let mps = Mps::random(ctl, l, SPIN_HALF, 4, o.block, 3).unwrap();
                Dmrg::new(ctl, mpo, mps, o).unwrap()
            };
            // The environments' total once the bond dimension has grown.
            let mut plain = run(None);
            for _ in 0..2 {
                plain.sweep(ctl, &mut |_| {}).unwrap();
            }
            let total = plain.engine().env_bytes();
            drop(plain);
            let budget = total / 4;
            assert!(budget > 0);
            for prefetch in [true, false] {
                let mut d = run(Some(EnvBudget {
                    bytes: budget,
                    prefetch,
                }));
                for sweep in 1..=3 {
                    d.sweep(ctl, &mut |_| {}).unwrap();
                    ctl.drain().unwrap();
                    // Prefetched loads may still run on the store's load pool:
                    // look several times while they land.
                    for look in 0..10 {
                        let (left, right) = d.engine().environments();
                        let (mut resident, mut all) = (0, 0);
                        for t in left.iter().chain(right).flatten() {
                            let (r, a) = resident_bytes(ctl, t);
                            resident += r;
                            all += a;
                        }
                        assert!(
                            resident <= budget,
                            "prefetch {prefetch}, sweep {sweep}, look {look}: {resident} resident environment bytes \
                             of {all}, budget {budget}"
                        );
                        if sweep > 2 {
                            assert!(all > budget, "the environments ({all} bytes) fit the budget anyway");
                            assert!(resident > 0, "nothing resident: the budget is not used");
                        }
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                }
            }
        })
        .unwrap();
}
