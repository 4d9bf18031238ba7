//! MPI integration test (run by `cargo xtask test` under `mpirun -n 3`):
//! DMRG with an environment budget (`DmrgOptions::env_budget`) on a root
//! and two workers. The environments' blocks live on the workers, whose
//! in-memory stores offload them into their temporary offload directories;
//! every sweep's energy equals the unbudgeted run's to 1e-12, with and
//! without prefetch, the root counted offloaded, written and prefetched
//! bytes, and the workers' stores hold blocks only on disk at the end.
// uni20-mpi-ranks: 3

use uni20::dist::residency_stats;
use uni20::tn::{Dmrg, DmrgOptions, EnvBudget, Mpo, Mps, SPIN_HALF};
use uni20::Controller;

fn energies(ctl: &Controller<'_>, budget: Option<EnvBudget>) -> (Vec<f64>, uni20::dist::ResidencyStats, u64) {
    let o = DmrgOptions {
        chi_max: 16,
        cutoff: 1e-12,
        block: 4,
        env_budget: budget,
        ..DmrgOptions::default()
    };
    let l = 12;
    let mpo = Mpo::heisenberg(ctl, l, o.block).unwrap();
    let mps = Mps::random(ctl, l, SPIN_HALF, 4, o.block, 21).unwrap();
    let before = residency_stats(ctl);
    let mut d = Dmrg::new(ctl, mpo, mps, o).unwrap();
    let e = (0..4).map(|_| d.sweep(ctl, &mut |_| {}).unwrap().energy).collect();
    ctl.drain().unwrap();
    let moved = residency_stats(ctl).since(&before);
    let on_disk = ctl
        .store_stats()
        .unwrap()
        .iter()
        .filter(|s| s.rank != 0)
        .map(|s| s.bytes_spilled)
        .sum();
    (e, moved, on_disk)
}

fn main() {
    uni20::universe()
        .run(|ctl| {
            assert_eq!(
                ctl.transport_kind(),
                uni20::worker::transport::TransportKind::Mpi,
                "not launched by mpirun"
            );
            assert_eq!(ctl.size(), 3);
            let (plain, moved, _) = energies(ctl, None);
            assert_eq!(moved.bytes_offloaded, 0);
            for (bytes, prefetch) in [(1, true), (20_000, true), (20_000, false)] {
                let (e, moved, on_disk) = energies(ctl, Some(EnvBudget { bytes, prefetch }));
                for (k, (x, y)) in e.iter().zip(&plain).enumerate() {
                    assert!(
                        (x - y).abs() <= 1e-12,
                        "budget {bytes}, prefetch {prefetch}: sweep {}: {x} vs unbudgeted {y}",
                        k + 1
                    );
                }
                assert!(moved.bytes_offloaded > 0 && moved.bytes_written > 0, "{moved:?}");
                assert!(on_disk > 0, "budget {bytes}: the workers hold nothing only on disk");
                if prefetch && bytes > 1 {
                    assert!(moved.bytes_fetched > 0, "{moved:?}");
                }
                if !prefetch {
                    assert_eq!(moved.bytes_fetched, 0, "{moved:?}");
                }
                println!(
                    "mpi_env_budget: budget {bytes} B, prefetch {prefetch}: energies {e:?} as unbudgeted; {} B \
                     offloaded, {} B written, {} B prefetched, {on_disk} B only on the workers' disks",
                    moved.bytes_offloaded, moved.bytes_written, moved.bytes_fetched
                );
            }
        })
        .unwrap();
}
