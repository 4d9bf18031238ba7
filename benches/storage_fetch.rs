//! Storage-rank fetch against a raw transport send of the same bytes, on the
//! in-process universe (root, two workers, one storage rank), in one
//! criterion group per size: `replicate` (owner encodes, sends metadata and
//! payload, the worker verifies the checksum and inserts a replica, then
//! drops it so every iteration moves the bytes again) vs `uni20.sendrecv.v1`
//! (the same two ranks exchange raw bytes, no store). The MPI figures come
//! from `examples/storage_fetch.rs` under `cargo xtask bench`.
//!
//! Run: `cargo bench --bench storage_fetch -- --warm-up-time 1 --measurement-time 3`.

use criterion::{BenchmarkId, Criterion, Throughput};
use uni20::dist::{replicate, Placement};
use uni20::prelude::*;
use uni20::worker::commands::{SendRecv, SendRecvDesc};

fn main() {
    let mut c = Criterion::default().configure_from_args().sample_size(10);
    uni20::universe()
        .ranks(4)
        .storage_ranks(1)
        .run(|ctl| {
            let (storage, worker) = (ctl.storage_ranks()[0], ctl.compute_ranks()[0]);
            for mib in [1usize, 64] {
                let n = mib * (1 << 20) / 8;
                let data = LocalTensor::from_f64(&[n], (0..n).map(|i| i as f64).collect()).unwrap();
                let t = DistTensor::from_local_on(ctl, &data, n, &Placement::Storage).unwrap();
                let bytes = replicate(ctl, &t, worker, false).unwrap();
                let desc = SendRecvDesc {
                    from: storage,
                    to: worker,
                    bytes,
                };
                let mut g = c.benchmark_group("storage_fetch");
                g.throughput(Throughput::Bytes(bytes));
                g.bench_function(BenchmarkId::new("fetch", format!("{mib}MiB")), |b| {
                    b.iter(|| replicate(ctl, &t, worker, false).unwrap())
                });
                g.bench_function(BenchmarkId::new("raw_send", format!("{mib}MiB")), |b| {
                    b.iter(|| ctl.submit::<SendRecv>(&desc, &[storage, worker]).unwrap())
                });
                g.finish();
            }
        })
        .unwrap();
    c.final_summary();
}
