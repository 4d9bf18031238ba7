//! uni20-dispatch contraction speed against the raw faer GEMM under it.
//!
//! Groups (f64, thread budget = available cores, the same `Par` for both sides):
//! - `ij,jk->ik` at n = 512, 1024, 2048: `contract` (allocates the output) and
//!   `contract_into` (preallocated C) against `faer::linalg::matmul::matmul` into a
//!   preallocated `Mat`. Target: time ratio <= 1.11 (>= 90% of faer).
//! - `abcd,dbef->acef` with every extent 28 (2 * 784^3 = 0.96e9 flops) against the raw
//!   matmul of its matricized shape (784 x 784 x 784). Target: ratio <= 1.67 (>= 60%).
//!
//! Run: `cargo bench -p uni20-dispatch --bench dispatch_contract`. Besides criterion's
//! report, each group prints a line such as
//! `ratio ij,jk->ik n=1024 contract/faer 1.02 contract_into/faer 1.01 (faer 61.2 ms, median of 9)`
//! from its own interleaved timing (median of N alternating calls).

mod bench_common;

use std::hint::black_box;
use std::time::Duration;

use bench_common::{flat_group, interleaved, par, threads};
use criterion::{BenchmarkId, Criterion};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat};
use uni20_dispatch::view::{StridedView, StridedViewMut};
use uni20_dispatch::{contract, contract_into, BackendList, EinsumSpec, LocalTensor, TensorData, C64};

/// Deterministic entries in [-1, 1).
fn fill(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// One comparison: `spec` on operands of the given shapes vs a raw `m x k x n` matmul.
fn compare(c: &mut Criterion, label: &str, spec: &str, sa: &[usize], sb: &[usize], (m, k, n): (usize, usize, usize)) {
    let th = threads();
    let p = par(th);
    let list = BackendList::default_cpu(th);
    let spec = EinsumSpec::parse(spec).expect("bench spec");
    let na: usize = sa.iter().product();
    let nb: usize = sb.iter().product();
    let a = LocalTensor::from_data(sa, TensorData::F64(fill(na, 1))).expect("A");
    let b = LocalTensor::from_data(sb, TensorData::F64(fill(nb, 2))).expect("B");
    let out_shape = spec.output_shape(&[sa, sb]).expect("shapes");
    let mut c_buf = vec![0.0f64; out_shape.iter().product()];
    let fa = Mat::<f64>::from_fn(m, k, |i, j| ((i * 7 + j * 3) % 11) as f64 - 5.0);
    let fb = Mat::<f64>::from_fn(k, n, |i, j| ((i * 5 + j * 2) % 13) as f64 - 6.0);
    let mut fc = Mat::<f64>::zeros(m, n);
    let (one, zero) = (C64::new(1.0, 0.0), C64::new(0.0, 0.0));
    let TensorData::F64(ad) = a.data() else { unreachable!() };
    let TensorData::F64(bd) = b.data() else { unreachable!() };
    let av = StridedView::row_major(ad, sa).expect("A view");
    let bv = StridedView::row_major(bd, sb).expect("B view");

    let mut run_contract = || {
        black_box(contract(&spec, one, &a, &b, zero, None, &list).expect("contract"));
    };
    let mut run_into = || {
        let mut cv = StridedViewMut::row_major(&mut c_buf, &out_shape).expect("C view");
        contract_into(&spec, one, &av, &bv, zero, &mut cv, &list).expect("contract_into");
        black_box(&c_buf);
    };
    let mut run_faer = || {
        matmul(fc.as_mut(), Accum::Replace, fa.as_ref(), fb.as_ref(), 1.0, p);
        black_box(&fc);
    };

    let mut g = flat_group(c, label, 10, Duration::from_millis(500), Duration::from_secs(2));
    g.bench_function(BenchmarkId::new("contract", th), |bch| bch.iter(&mut run_contract));
    g.bench_function(BenchmarkId::new("contract_into", th), |bch| bch.iter(&mut run_into));
    g.bench_function(BenchmarkId::new("faer_matmul", th), |bch| bch.iter(&mut run_faer));
    g.finish();

    let flops = 2.0 * (m * n * k) as f64;
    let reps = if flops > 5e9 { 5 } else { 9 };
    let t = interleaved(reps, &mut [&mut run_contract, &mut run_into, &mut run_faer]);
    println!(
        "ratio {label} contract/faer {:.3} contract_into/faer {:.3} (faer {:.2} ms = {:.1} GFLOP/s, \
         contract {:.2} ms, contract_into {:.2} ms, {th} threads, median of {reps})",
        t[0] / t[2],
        t[1] / t[2],
        t[2] * 1e3,
        flops / t[2] / 1e9,
        t[0] * 1e3,
        t[1] * 1e3,
    );
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    for n in [512usize, 1024, 2048] {
        compare(
            &mut c,
            &format!("ij,jk->ik n={n}"),
            "ij,jk->ik",
            &[n, n],
            &[n, n],
            (n, n, n),
        );
    }
    let d = 28usize;
    let mk = d * d;
    compare(
        &mut c,
        "abcd,dbef->acef d=28",
        "abcd,dbef->acef",
        &[d, d, d, d],
        &[d, d, d, d],
        (mk, mk, mk),
    );
    c.final_summary();
}
