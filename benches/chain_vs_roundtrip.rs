//! A chain of 200 dependent tiny contractions (`x <- x . m`, 8 x 8 f64, one
//! block each) submitted without waiting and waited for at the end, against
//! 200 no-op round trips (`ctl.submit::<Noop>` to the compute ranks, each
//! waited for), on 3 in-process ranks (root + 2 workers), with the root's
//! plan cache on (the default) and off, and with pipelined submission off
//! (`set_pipelining(ctl, false)`: each step planned once its input has
//! replied), in one criterion group. Then ten independent 512 x 512
//! contractions submitted back to back against the same ten each waited
//! for.
//!
//! Run: `cargo bench --bench chain_vs_roundtrip -- --warm-up-time 1 --measurement-time 3`.
//!
//! Afterwards (with `--bench`) the bench times the three itself
//! (interleaved batches, median batch) and prints
//! `ratio chain/noop: R cached, R' uncached, R'' unpipelined (...)` and
//! `ratio ten 512x512 back to back / wait after each: R (...)`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use uni20::dist::{set_pipelining, set_plan_cache_capacity};
use uni20::prelude::*;
use uni20::worker::commands::Noop;

/// Ranks of the in-process universe (root + 2 workers).
const RANKS: usize = 3;
/// Operations per measured call.
const STEPS: usize = 200;
/// Independent 512 x 512 contractions per measured call.
const TEN: usize = 10;

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
            let chain = |cache: usize, pipelined: bool| {
                set_plan_cache_capacity(ctl, cache);
                set_pipelining(ctl, pipelined);
                let mut x = x0.clone();
                for _ in 0..STEPS {
                    x = uni20::dist::contract(ctl, "ij,jk->ik", &x, &m).expect("contract");
                }
                x.wait(ctl).expect("chain");
                black_box(x);
            };
            let mut cached = || chain(uni20::dist::DEFAULT_PLAN_CACHE_ENTRIES, true);
            let mut uncached = || chain(0, true);
            let mut unpipelined = || chain(uni20::dist::DEFAULT_PLAN_CACHE_ENTRIES, false);
            let mut noop = || {
                for _ in 0..STEPS {
                    black_box(ctl.submit::<Noop>(&(), &workers).expect("noop round trip"));
                }
            };
            let mut g = c.benchmark_group("chain200_3ranks");
            g.bench_function("contract_chain_cached", |b| b.iter(&mut cached));
            g.bench_function("contract_chain_uncached", |b| b.iter(&mut uncached));
            g.bench_function("contract_chain_unpipelined", |b| b.iter(&mut unpipelined));
            g.bench_function("noop_round_trips", |b| b.iter(&mut noop));
            g.finish();
            if bench_mode {
                let (t, count) = interleaved_medians(
                    &mut [&mut cached, &mut uncached, &mut unpipelined, &mut noop],
                    5,
                    Duration::from_secs(6),
                );
                let us = |d: Duration| d.as_secs_f64() * 1e6 / STEPS as f64;
                let r = |k: usize| t[k].as_secs_f64() / t[3].as_secs_f64();
                println!(
                    "ratio chain/noop: {:.2} cached, {:.2} uncached, {:.2} unpipelined (per step: chain {:.1} us \
                     cached, {:.1} us uncached, {:.1} us unpipelined, noop {:.1} us; median of {count} batches of \
                     5 x {STEPS})",
                    r(0),
                    r(1),
                    r(2),
                    us(t[0]),
                    us(t[1]),
                    us(t[2]),
                    us(t[3]),
                );
            }
            set_pipelining(ctl, true);
            // Ten independent 512 x 512 contractions (4 blocks each, over
            // both workers), submitted back to back and waited for at the
            // end, against the same ten each waited for.
            let big = |scale: f64| {
                let v: Vec<f64> = (0..512 * 512)
                    .map(|i| scale * ((i % 977) as f64 * 1e-3).sin())
                    .collect();
                DistTensor::from_local(ctl, &LocalTensor::from_f64(&[512, 512], v).expect("512"), 256).expect("big")
            };
            let (a, b) = (big(1.0), big(0.5));
            let mut back_to_back = || {
                let cs: Vec<DistTensor> = (0..TEN)
                    .map(|_| uni20::dist::contract(ctl, "ij,jk->ik", &a, &b).expect("contract"))
                    .collect();
                for c in &cs {
                    c.wait(ctl).expect("wait");
                }
                black_box(cs);
            };
            // Both keep their ten outputs until the end, so both allocate
            // the same fresh memory (dropping each output at once instead
            // lets the next one reuse its pages: on this VM that alone made
            // the waited form 1.14x faster).
            let mut wait_each = || {
                let mut cs = Vec::with_capacity(TEN);
                for _ in 0..TEN {
                    let c = uni20::dist::contract(ctl, "ij,jk->ik", &a, &b).expect("contract");
                    c.wait(ctl).expect("wait");
                    cs.push(c);
                }
                black_box(cs);
            };
            let mut g = c.benchmark_group("ten_512x512_3ranks");
            g.sample_size(10);
            g.bench_function("back_to_back", |b| b.iter(&mut back_to_back));
            g.bench_function("wait_after_each", |b| b.iter(&mut wait_each));
            g.finish();
            if bench_mode {
                let (t, count) =
                    interleaved_medians(&mut [&mut back_to_back, &mut wait_each], 1, Duration::from_secs(8));
                println!(
                    "ratio ten 512x512 back to back / wait after each: {:.3} ({:.1} ms against {:.1} ms; median \
                     of {count} runs)",
                    t[0].as_secs_f64() / t[1].as_secs_f64(),
                    t[0].as_secs_f64() * 1e3,
                    t[1].as_secs_f64() * 1e3,
                );
            }
        })
        .expect("universe");
    c.final_summary();
}
