//! Decomposition and reduction speed of uni20-dispatch against what it wraps.
//!
//! Groups (f64, thread budget = available cores, the same `Par` on both sides):
//! - `svd_2000`: `svd` of a 2000 x 2000 matrix through the dispatcher (finite check, faer
//!   thin SVD, row-major factors, truncation bookkeeping) against `faer::Mat::thin_svd` on
//!   a column-major `Mat` with faer's global parallelism set to the same budget.
//! - `inner_4096`: `inner` of two 4096 x 4096 tensors (blocked, compensated) against a
//!   plain `zip().map().sum()` over the same slices (one thread, no compensation: the
//!   memory-bandwidth floor for one core). numpy's `vdot` is compared by the lead outside.
//!
//! - `permute_4096x2048`: `permute(a, [1, 0])` (a tiled transpose) of a 4096 x 2048 f64
//!   tensor against `LocalTensor::clone` of the same tensor (a contiguous copy of the same
//!   bytes: the floor any permutation can reach).
//!
//! Run: `cargo bench -p uni20-dispatch --bench decomp [svd|inner|permute]`. Besides criterion's report each
//! group prints a line such as `ratio svd_2000 dispatch/faer 1.01 (faer 2.91 s, median of 3)`
//! from its own interleaved timing (median of N alternating calls).

mod bench_common;

use std::hint::black_box;
use std::time::Duration;

use bench_common::{flat_group, interleaved, par, threads};
use criterion::{BenchmarkId, Criterion};
use faer::Mat;
use uni20_dispatch::decomp::{svd, SvdBackendList, SvdOptions};
use uni20_dispatch::{inner, permute, random_block, DType, LocalTensor, TensorData};

/// True unless a name filter was given on the command line that `group` does not contain
/// (so the interleaved ratio runs only for the groups criterion runs).
fn selected(group: &str) -> bool {
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    filters.is_empty() || filters.iter().any(|f| group.contains(f.as_str()))
}

fn matrix(seed: u64, n: usize) -> LocalTensor {
    random_block(seed, DType::F64, &[n, n], &[0, 0], &[n, n]).expect("random matrix")
}

fn bench_svd(c: &mut Criterion) {
    if !selected("svd_2000") {
        return;
    }
    let th = threads();
    let n = 2000;
    let a = matrix(1, n);
    let TensorData::F64(data) = a.data() else {
        unreachable!()
    };
    let fa = Mat::<f64>::from_fn(n, n, |i, j| data[i * n + j]);
    let list = SvdBackendList::default_cpu(th);
    faer::set_global_parallelism(par(th));
    let opts = SvdOptions::default();

    let mut run_dispatch = || {
        black_box(svd(&a, &opts, &list).expect("svd"));
    };
    let mut run_faer = || {
        black_box(fa.thin_svd().expect("faer svd"));
    };
    let mut g = flat_group(c, "svd_2000", 10, Duration::from_millis(100), Duration::from_secs(5));
    g.bench_function(BenchmarkId::new("dispatch", th), |b| b.iter(&mut run_dispatch));
    g.bench_function(BenchmarkId::new("faer_thin_svd", th), |b| b.iter(&mut run_faer));
    g.finish();
    let reps = 3;
    let t = interleaved(reps, &mut [&mut run_dispatch, &mut run_faer]);
    println!(
        "ratio svd_2000 dispatch/faer {:.3} (faer {:.2} s, dispatch {:.2} s, threads {th}, median of {reps})",
        t[0] / t[1],
        t[1],
        t[0]
    );
}

fn bench_inner(c: &mut Criterion) {
    if !selected("inner_4096") {
        return;
    }
    let th = threads();
    let n = 4096;
    let (a, b) = (matrix(2, n), matrix(3, n));
    let (TensorData::F64(x), TensorData::F64(y)) = (a.data(), b.data()) else {
        unreachable!()
    };
    let mut run_inner = || {
        black_box(inner(&a, &b, th).expect("inner"));
    };
    let mut run_inner_1 = || {
        black_box(inner(&a, &b, 1).expect("inner"));
    };
    let mut run_plain = || {
        black_box(x.iter().zip(y).map(|(p, q)| p * q).sum::<f64>());
    };
    let mut g = flat_group(c, "inner_4096", 20, Duration::from_millis(300), Duration::from_secs(3));
    g.bench_function(BenchmarkId::new("inner", th), |bch| bch.iter(&mut run_inner));
    g.bench_function(BenchmarkId::new("inner", 1), |bch| bch.iter(&mut run_inner_1));
    g.bench_function(BenchmarkId::new("plain_sum", 1), |bch| bch.iter(&mut run_plain));
    g.finish();
    let reps = 9;
    let t = interleaved(reps, &mut [&mut run_inner, &mut run_inner_1, &mut run_plain]);
    println!(
        "ratio inner_4096 inner({th})/plain {:.3} inner(1)/plain {:.3} (plain {:.2} ms = {:.1} GB/s, median of {reps})",
        t[0] / t[2],
        t[1] / t[2],
        t[2] * 1e3,
        (2 * n * n * 8) as f64 / t[2] / 1e9
    );
}

fn bench_permute(c: &mut Criterion) {
    if !selected("permute_4096x2048") {
        return;
    }
    let th = threads();
    let a = random_block(4, DType::F64, &[4096, 2048], &[0, 0], &[4096, 2048]).expect("random tensor");
    let mut run_permute = || {
        black_box(permute(&a, &[1, 0], th).expect("permute"));
    };
    let mut run_clone = || {
        black_box(a.clone());
    };
    let mut g = flat_group(
        c,
        "permute_4096x2048",
        20,
        Duration::from_millis(300),
        Duration::from_secs(3),
    );
    g.bench_function(BenchmarkId::new("permute", th), |bch| bch.iter(&mut run_permute));
    g.bench_function(BenchmarkId::new("clone", 1), |bch| bch.iter(&mut run_clone));
    g.finish();
    let reps = 9;
    let t = interleaved(reps, &mut [&mut run_permute, &mut run_clone]);
    println!(
        "ratio permute_4096x2048 permute({th})/clone {:.3} (clone {:.2} ms, permute {:.2} ms, median of {reps})",
        t[0] / t[1],
        t[1] * 1e3,
        t[0] * 1e3
    );
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_svd(&mut c);
    bench_inner(&mut c);
    bench_permute(&mut c);
    c.final_summary();
}
