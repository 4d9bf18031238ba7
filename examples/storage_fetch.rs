//! Benchmark: a worker fetching a block from a storage rank (object
//! transfer: store encode, send, checksum check, replica insert) against a
//! raw transport send of the same number of bytes between the same ranks
//! (`uni20.sendrecv.v1`), in the same run. Prints median times, throughputs
//! and the ratio (goal in the project's issue 4: fetch at >= 80% of the raw
//! send for 64 MiB objects).
//!
//! ```text
//! cargo xtask mpirun -n 3 --release --example storage_fetch    # MPI: root, 1 worker, 1 storage rank
//! cargo run --release --example storage_fetch                  # in-process (4 ranks)
//! ```

use std::time::{Duration, Instant};

use uni20::dist::{replicate, Placement};
use uni20::prelude::*;
use uni20::worker::commands::{SendRecv, SendRecvDesc};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> std::process::ExitCode {
    uni20::init_logging();
    let reps: usize = std::env::var("UNI20_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    let result = uni20::universe().storage_ranks(1).run(|ctl| -> anyhow::Result<()> {
        let storage = ctl.storage_ranks()[0];
        let worker = ctl.compute_ranks()[0];
        println!(
            "storage_fetch: {} ranks ({}), storage rank {storage} -> worker {worker}, {reps} repetitions, medians",
            ctl.size(),
            ctl.transport_kind()
        );
        println!(
            "{:>9} {:>12} {:>12} {:>11} {:>11} {:>7}",
            "size", "fetch", "raw send", "fetch GB/s", "raw GB/s", "ratio"
        );
        for mib in [1usize, 16, 64] {
            let n = mib * (1 << 20) / 8;
            let data = LocalTensor::from_f64(&[n], (0..n).map(|i| i as f64).collect())?;
            let t = DistTensor::from_local_on(ctl, &data, n, &Placement::Storage)?;
            let bytes = replicate(ctl, &t, worker, false)?; // warm-up
            let desc = SendRecvDesc {
                from: storage,
                to: worker,
                bytes,
            };
            ctl.submit::<SendRecv>(&desc, &[storage, worker])?;
            let (mut fetch, mut raw) = (Vec::new(), Vec::new());
            for _ in 0..reps {
                let s = Instant::now();
                replicate(ctl, &t, worker, false)?;
                fetch.push(s.elapsed());
                let s = Instant::now();
                ctl.submit::<SendRecv>(&desc, &[storage, worker])?;
                raw.push(s.elapsed());
            }
            let (f, r) = (median(fetch), median(raw));
            let gbs = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e9;
            println!(
                "{:>5} MiB {:>10.2}ms {:>10.2}ms {:>11.2} {:>11.2} {:>6.0}%",
                mib,
                f.as_secs_f64() * 1e3,
                r.as_secs_f64() * 1e3,
                gbs(f),
                gbs(r),
                100.0 * r.as_secs_f64() / f.as_secs_f64()
            );
        }
        Ok(())
    });
    match result {
        Ok(Ok(())) => std::process::ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("storage_fetch: {e:#}");
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("storage_fetch: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
