//! MPI integration test (run by `cargo xtask test` under `mpirun -n 3`):
//! 10,000 chained 64 x 64 contractions (block 32); every rank's resident
//! store bytes after step 10,000 are within 2x of those after step 100,
//! releases travel mostly inside command frames, and the replicas the
//! ranks keep are those the root's table records.
// uni20-mpi-ranks: 3

use uni20::prelude::*;

#[path = "../examples/shared/mod.rs"]
mod shared;

/// The orthogonal matrix of `examples/chain.rs` (powers stay bounded).
fn orthogonal(n: usize) -> LocalTensor {
    LocalTensor::from_f64(&[n, n], shared::orthogonal(n)).unwrap()
}

fn main() {
    uni20::universe()
        .run(|ctl| {
            assert_eq!(ctl.transport_kind(), uni20::worker::transport::TransportKind::Mpi, "not launched by mpirun");
            let n = 64;
            let eye = LocalTensor::from_f64(&[n, n], (0..n * n).map(|k| if k % (n + 1) == 0 { 1.0 } else { 0.0 }).collect())
                .unwrap();
            let m = DistTensor::from_local(ctl, &orthogonal(n), 32).unwrap();
            let mut x = DistTensor::from_local(ctl, &eye, 32).unwrap();
            let resident = |ctl: &Controller<'_>| -> Vec<u64> {
                ctl.store_stats().unwrap().iter().map(|s| s.bytes_resident).collect()
            };
            let mut at_100 = Vec::new();
            for step in 1..=10_000 {
                x = contract(ctl, "ij,jk->ik", &x, &m).unwrap();
                if step == 100 {
                    x.wait(ctl).unwrap();
                    at_100 = resident(ctl);
                }
            }
            x.wait(ctl).unwrap();
            let at_10000 = resident(ctl);
            for (r, (a, b)) in at_100.iter().zip(&at_10000).enumerate() {
                assert!(*b <= 2 * a.max(&1), "rank {r}: {b} bytes resident after 10,000 steps, {a} after 100");
            }
            let s = ctl.ledger().stats();
            assert!(s.release_commands * 50 <= s.drops, "{s:?}");
            // Each step moves blocks of the new x (m stays where it is
            // used), so replicas save nothing here; but every one was
            // released with its x, and what the root's table records, the
            // ranks hold (beyond the 4 blocks each of m and x).
            assert_eq!(s.replicas_recorded, s.replicas_released + s.replicas_evicted + (0..ctl.size()).map(|r| ctl.ledger().replica_usage(r).replicas).sum::<u64>(), "{s:?}");
            ctl.collect().unwrap();
            let objects: u64 = ctl.store_stats().unwrap().iter().map(|s| s.objects).sum();
            let replicas: u64 = (0..ctl.size()).map(|r| ctl.ledger().replica_usage(r).replicas).sum();
            assert_eq!(objects, 8 + replicas, "{s:?}");
            // M^10000 for the orthogonal M: compare with the root's local chain.
            let backends = uni20::BackendList::default_cpu(1);
            let (mm, mut want) = (orthogonal(n), eye);
            for _ in 0..10_000 {
                want = uni20::dispatch::contract("ij,jk->ik", C64::new(1.0, 0.0), &want, &mm, C64::new(0.0, 0.0), None, &backends)
                    .unwrap();
            }
            assert!(x.to_local(ctl).unwrap().max_abs_diff(&want).unwrap() < 1e-9);
            println!(
                "mpi_lifetimes: 10,000 steps on {} ranks; resident bytes per rank after 100: {at_100:?}, after 10,000: {at_10000:?}; {} drops, {} release messages, {} piggybacked frames, {} transfers saved by replicas ({} bytes)",
                ctl.size(),
                s.drops,
                s.release_commands,
                s.piggybacked_frames,
                s.replica_hits,
                s.replica_bytes_saved
            );
        })
        .unwrap();
}
