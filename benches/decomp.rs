//! `uni20::dist::svd` of a 2000 x 2000 f64 `DistTensor` (blocks of 500, 4 in-process ranks: the
//! root and 3 workers) against faer's local thin SVD of the same matrix, in the same run.
//! The distributed side includes everything a user waits for: fetching the blocks
//! worker-to-worker onto the factorizing rank, assembling and checking the matrix, the
//! factorization, cutting and committing the factor blocks, and moving them to their
//! owners. The factorizing rank gets the whole machine's cores as its thread budget (as
//! faer does here): the decomposition is a synchronization point, the other ranks idle.
//!
//! Run: `cargo bench --bench decomp`. Criterion's report is the primary figure; in bench
//! mode the bench also times both sides itself (interleaved, median) and prints a line
//! such as `ratio svd dist/faer n=2000 block=500: 1.05 (...)`. Goal: within 1.3x.
//! Without `--bench` (`cargo test --benches`) it runs a 200 x 200 smoke version.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, SamplingMode};
use faer::diag::Diag;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::svd::{svd, svd_scratch, ComputeSvdVectors};
use faer::{Mat, MatRef, Par};
#[path = "../examples/shared/mod.rs"]
mod shared;
use shared::{bench_mode, fill, interleaved_medians, threads};
use uni20::prelude::SvdOptions;
use uni20::{DistTensor, LocalTensor};

/// Ranks of the in-process universe (root + 3 workers).
const RANKS: usize = 4;

/// faer's thin SVD of a row-major `n x n` matrix, allocating its outputs and workspace as
/// `Mat::thin_svd` does, with an explicit thread budget.
fn faer_thin_svd(a: MatRef<'_, f64>, par: Par) -> (Mat<f64>, Diag<f64>, Mat<f64>) {
    let (m, n) = (a.nrows(), a.ncols());
    let r = m.min(n);
    let mut u = Mat::<f64>::zeros(m, r);
    let mut v = Mat::<f64>::zeros(n, r);
    let mut s = Diag::<f64>::zeros(r);
    let thin = ComputeSvdVectors::Thin;
    let mut buf = MemBuffer::new(svd_scratch::<f64>(m, n, thin, thin, par, Default::default()));
    svd(
        a,
        s.as_mut(),
        Some(u.as_mut()),
        Some(v.as_mut()),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    )
    .expect("faer svd");
    (u, s, v)
}

fn main() {
    uni20::init_logging();
    let threads = threads();
    let (n, block) = if bench_mode() { (2000, 500) } else { (200, 50) };
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(20))
        .nresamples(10_000)
        .without_plots()
        .configure_from_args();
    let data = fill(n * n, 5);
    let a = LocalTensor::from_f64(&[n, n], data.clone()).expect("a");
    let par = if threads <= 1 { Par::Seq } else { Par::rayon(threads) };
    let outcome = uni20::universe().ranks(RANKS).threads_per_rank(threads).run(|ctl| {
        let da = DistTensor::from_local(ctl, &a, block).expect("scatter");
        // Sanity: the same singular values as faer's.
        let out = uni20::dist::svd(ctl, &da, "a|b", &SvdOptions::default()).expect("svd");
        let (_, s, _) = faer_thin_svd(MatRef::from_row_major_slice(&data, n, n), par);
        let worst = out
            .s
            .iter()
            .zip(s.column_vector().iter())
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        assert!(
            worst <= 1e-9 * out.s[0],
            "singular values differ from faer's by {worst}"
        );
        println!("plan: {}", out.summary);

        let mut run_dist = || {
            black_box(uni20::dist::svd(ctl, black_box(&da), "a|b", &SvdOptions::default()).expect("svd"));
        };
        let mut run_faer = || {
            black_box(faer_thin_svd(MatRef::from_row_major_slice(black_box(&data), n, n), par));
        };
        let mut g = c.benchmark_group(format!("svd_n{n}_block{block}"));
        g.sample_size(10).sampling_mode(SamplingMode::Flat);
        g.bench_function(BenchmarkId::new("dist_svd", format!("{RANKS}ranks")), |b| {
            b.iter(&mut run_dist)
        });
        g.bench_function(BenchmarkId::new("faer_thin_svd", format!("{threads}threads")), |b| {
            b.iter(&mut run_faer)
        });
        g.finish();
        if bench_mode() {
            let (td, tf, count) = interleaved_medians(&mut run_dist, &mut run_faer, 9, Duration::from_secs(120));
            println!(
                "ratio svd dist/faer n={n} block={block}: {:.3} (dist {:.1} ms on {RANKS} ranks, factorizing \
                     rank {} with {} threads; faer {:.1} ms with {threads} threads; median of {count})",
                td.as_secs_f64() / tf.as_secs_f64(),
                td.as_secs_f64() * 1e3,
                out.factorizer,
                ctl.threads_per_rank(),
                tf.as_secs_f64() * 1e3,
            );
        }
    });
    outcome.expect("universe");
    c.final_summary();
}
