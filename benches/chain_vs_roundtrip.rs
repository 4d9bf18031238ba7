//! A chain of 200 dependent tiny contractions (`x <- x . m`, 8 x 8 f64, one
//! block each) submitted without waiting and waited for at the end, against
//! 200 no-op round trips (`ctl.submit::<Noop>` to the compute ranks, each
//! waited for), on 3 in-process ranks (root + 2 workers), with the root's
//! plan cache on (the default) and off, in one criterion group.
//!
//! Run: `cargo bench --bench chain_vs_roundtrip -- --warm-up-time 1 --measurement-time 3`.
//!
//! Afterwards (with `--bench`) the bench times the three itself
//! (interleaved batches, median batch) and prints
//! `ratio chain/noop: R cached, R' uncached (...)`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use uni20::dist::set_plan_cache_capacity;
use uni20::prelude::*;
use uni20::worker::commands::Noop;

/// Ranks of the in-process universe (root + 2 workers).
const RANKS: usize = 3;
/// Operations per measured call.
const STEPS: usize = 200;

/// Runs each function in turn, in batches of `batch` calls (after a
/// warm-up batch each), until `budget` has passed; the median per-call time
/// of each and the batch count.
fn interleaved_medians(fs: &mut [&mut dyn FnMut()], batch: u32, budget: Duration) -> (Vec<Duration>, usize) {
    let time_batch = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        t.elapsed() / batch
    };
    for f in fs.iter_mut() {
        time_batch(*f);
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); fs.len()];
    let start = Instant::now();
    while times[0].len() < 5 || start.elapsed() < budget {
        for (f, t) in fs.iter_mut().zip(&mut times) {
            t.push(time_batch(*f));
        }
    }
    let count = times[0].len();
    let medians = times
        .into_iter()
        .map(|mut v| {
            v.sort_unstable();
            v[v.len() / 2]
        })
        .collect();
    (medians, count)
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .nresamples(10_000)
        .without_plots()
        .configure_from_args();
    let bench_mode = std::env::args().any(|a| a == "--bench");
    uni20::universe()
        .ranks(RANKS)
        .run(|ctl| {
            let workers = ctl.compute_ranks();
            // An orthogonal 8 x 8 matrix (a permutation), so the chain stays bounded.
            let mut perm = vec![0.0f64; 64];
            for i in 0..8 {
                perm[i * 8 + (i * 3 + 1) % 8] = 1.0;
            }
            let bytes: Vec<u8> = perm.iter().flat_map(|v| v.to_le_bytes()).collect();
            let m_local = LocalTensor::from_bytes(DType::F64, &[8, 8], &bytes).expect("matrix");
            let m = DistTensor::from_local(ctl, &m_local, 8).expect("m");
            let x0 = DistTensor::from_local(ctl, &m_local, 8).expect("x0");
            let chain = |cache: usize| {
                set_plan_cache_capacity(ctl, cache);
                let mut x = x0.clone();
                for _ in 0..STEPS {
                    x = uni20::dist::contract(ctl, "ij,jk->ik", &x, &m).expect("contract");
                }
                x.wait(ctl).expect("chain");
                black_box(x);
            };
            let mut cached = || chain(uni20::dist::DEFAULT_PLAN_CACHE_ENTRIES);
            let mut uncached = || chain(0);
            let mut noop = || {
                for _ in 0..STEPS {
                    black_box(ctl.submit::<Noop>(&(), &workers).expect("noop round trip"));
                }
            };
            let mut g = c.benchmark_group("chain200_3ranks");
            g.bench_function("contract_chain_cached", |b| b.iter(&mut cached));
            g.bench_function("contract_chain_uncached", |b| b.iter(&mut uncached));
            g.bench_function("noop_round_trips", |b| b.iter(&mut noop));
            g.finish();
            if bench_mode {
                let (t, count) =
                    interleaved_medians(&mut [&mut cached, &mut uncached, &mut noop], 5, Duration::from_secs(6));
                let us = |d: Duration| d.as_secs_f64() * 1e6 / STEPS as f64;
                println!(
                    "ratio chain/noop: {:.2} cached, {:.2} uncached (per step: chain {:.1} us cached, {:.1} us \
                     uncached, noop {:.1} us; median of {count} batches of 5 x {STEPS})",
                    t[0].as_secs_f64() / t[2].as_secs_f64(),
                    t[1].as_secs_f64() / t[2].as_secs_f64(),
                    us(t[0]),
                    us(t[1]),
                    us(t[2]),
                );
            }
        })
        .expect("universe");
    c.final_summary();
}
