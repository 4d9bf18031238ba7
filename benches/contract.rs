//! Local `uni20_dispatch::contract` of `"ij,jk->ik"` (f64) through
//! `BackendList::default_cpu(threads)` against a raw faer matmul into a preallocated `Mat`,
//! with the same thread count, in the same criterion group per size (n = 256, 512, 1024,
//! 2048); then `uni20::dist::contract` on the in-process universe (4 ranks, n = 512, block 256)
//! against the local contract of the same size, to show the distribution overhead.
//!
//! Run: `cargo bench --bench contract -- --warm-up-time 1 --measurement-time 3`.
//!
//! Criterion's report is the primary figure. After each group the bench also times both
//! sides itself (interleaved, median of N calls) and prints a line such as
//! `ratio contract/faer n=1024: 1.02 (contract 61.2 ms, faer 60.0 ms, median of 21)`.
//! The goal of the project is contract >= 90% of raw faer speed, i.e. a ratio <= 1.11.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, SamplingMode};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
#[path = "../examples/shared/mod.rs"]
mod shared;
use shared::{bench_mode, fill, interleaved_medians, threads};
use uni20::dispatch::{contract, BackendList, EinsumSpec, LocalTensor, C64};
use uni20::DistTensor;

/// Matrix sizes of the local comparison.
const SIZES: [usize; 4] = [256, 512, 1024, 2048];
/// Size and block extent of the distributed comparison.
const DIST_N: usize = 512;
/// Block extent of the distributed operands.
const DIST_BLOCK: usize = 256;
/// Ranks of the in-process universe (root + 3 workers).
const DIST_RANKS: usize = 4;

/// `Par` matching `FaerBackend::new(threads)`.
fn par(threads: usize) -> Par {
    if threads <= 1 {
        Par::Seq
    } else {
        Par::rayon(threads)
    }
}

/// Milliseconds with two decimals.
fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Local contract vs raw faer matmul, one group per size.
fn local_groups(c: &mut Criterion, threads: usize) {
    let spec = EinsumSpec::parse("ij,jk->ik").expect("spec");
    let backends = BackendList::default_cpu(threads);
    let one = C64::new(1.0, 0.0);
    let zero = C64::new(0.0, 0.0);
    for n in SIZES {
        let (av, bv) = (fill(n * n, 1), fill(n * n, 2));
        let a = LocalTensor::from_f64(&[n, n], av.clone()).expect("a");
        let b = LocalTensor::from_f64(&[n, n], bv.clone()).expect("b");
        // faer's own matrices (column-major), filled with the same row-major data.
        let fa = Mat::<f64>::from_fn(n, n, |i, j| av[i * n + j]);
        let fb = Mat::<f64>::from_fn(n, n, |i, j| bv[i * n + j]);
        let mut fc = Mat::<f64>::zeros(n, n);
        let p = par(threads);

        let mut run_contract = || {
            black_box(contract(&spec, one, black_box(&a), black_box(&b), zero, None, &backends).expect("contract"));
        };
        let mut run_faer = || {
            matmul(
                fc.as_mut(),
                Accum::Replace,
                black_box(fa.as_ref()),
                black_box(fb.as_ref()),
                1.0,
                p,
            );
            black_box(&fc);
        };

        let mut g = c.benchmark_group(format!("matmul_n{n}"));
        g.sample_size(10).sampling_mode(SamplingMode::Flat);
        g.throughput(criterion::Throughput::Elements((2 * n * n * n) as u64));
        g.bench_function(BenchmarkId::new("contract", format!("{n}x{n}x{n}")), |bch| {
            bch.iter(&mut run_contract)
        });
        g.bench_function(BenchmarkId::new("faer", format!("{n}x{n}x{n}")), |bch| {
            bch.iter(&mut run_faer)
        });
        g.finish();

        if bench_mode() {
            let reps = if n >= 2048 { 7 } else { 41 };
            let (tc, tf, count) = interleaved_medians(&mut run_contract, &mut run_faer, reps, Duration::from_secs(3));
            let gflops = |d: Duration| 2.0 * (n as f64).powi(3) / d.as_secs_f64() / 1e9;
            println!(
                "ratio contract/faer n={n}: {:.3} (contract {} = {:.1} GFLOP/s, faer {} = {:.1} GFLOP/s, \
                 median of {count}, threads {threads})",
                tc.as_secs_f64() / tf.as_secs_f64(),
                ms(tc),
                gflops(tc),
                ms(tf),
                gflops(tf),
            );
        }
    }
}

/// `uni20::dist::contract` on the in-process universe vs the local contract of the same size.
fn dist_group(c: &mut Criterion, threads: usize) {
    let n = DIST_N;
    let spec = EinsumSpec::parse("ij,jk->ik").expect("spec");
    let backends = BackendList::default_cpu(threads);
    let one = C64::new(1.0, 0.0);
    let zero = C64::new(0.0, 0.0);
    let a = LocalTensor::from_f64(&[n, n], fill(n * n, 3)).expect("a");
    let b = LocalTensor::from_f64(&[n, n], fill(n * n, 4)).expect("b");
    let outcome = uni20::universe().ranks(DIST_RANKS).run(|ctl| {
        let da = DistTensor::from_local(ctl, &a, DIST_BLOCK).expect("scatter a");
        let db = DistTensor::from_local(ctl, &b, DIST_BLOCK).expect("scatter b");
        // Sanity: the distributed result equals the local one.
        let want = contract(&spec, one, &a, &b, zero, None, &backends).expect("local");
        let got = uni20::dist::contract(ctl, "ij,jk->ik", &da, &db)
            .expect("dist")
            .to_local(ctl)
            .expect("gather");
        let err = got.max_abs_diff(&want).expect("same shape");
        assert!(err < 1e-9, "distributed result differs from local by {err}");

        // `uni20::dist::contract` returns at once; `wait` drives the job until the workers replied.
        let mut run_dist = || {
            let c = uni20::dist::contract(ctl, "ij,jk->ik", black_box(&da), black_box(&db)).expect("dist contract");
            c.wait(ctl).expect("dist contract finished");
            black_box(c);
        };
        let mut run_local = || {
            black_box(contract(&spec, one, black_box(&a), black_box(&b), zero, None, &backends).expect("contract"));
        };
        let mut g = c.benchmark_group(format!("dist_n{n}_block{DIST_BLOCK}"));
        g.sample_size(10).sampling_mode(SamplingMode::Flat);
        g.bench_function(BenchmarkId::new("dist_contract", format!("{DIST_RANKS}ranks")), |bch| {
            bch.iter(&mut run_dist)
        });
        g.bench_function(BenchmarkId::new("local_contract", format!("{threads}threads")), |bch| {
            bch.iter(&mut run_local)
        });
        g.finish();
        if bench_mode() {
            let (td, tl, count) = interleaved_medians(&mut run_dist, &mut run_local, 41, Duration::from_secs(3));
            println!(
                "ratio dist/local n={n} block={DIST_BLOCK}: {:.3} (dist {} on {DIST_RANKS} ranks x {} thread(s), \
                 local {} on {threads} threads, median of {count})",
                td.as_secs_f64() / tl.as_secs_f64(),
                ms(td),
                ctl.threads_per_rank(),
                ms(tl),
            );
        }
    });
    outcome.expect("universe");
}

fn main() {
    let threads = threads();
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        // The default 100k bootstrap resamples plus plot rendering take over a minute per
        // benchmark on a busy 2-core machine; the medians do not need them.
        .nresamples(10_000)
        .without_plots()
        .configure_from_args();
    local_groups(&mut c, threads);
    dist_group(&mut c, threads);
    c.final_summary();
}
