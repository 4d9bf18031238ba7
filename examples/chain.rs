//! A long chain of small distributed contractions, the memory pattern of a
//! tensor-network sweep: `x <- normalise(x . m)` for `--steps` steps on
//! 64 x 64 matrices cut into 32 x 32 blocks. Every intermediate lives for
//! one step; when its last handle drops, its blocks are released on their
//! owners, so memory stays bounded however long the chain runs.
//!
//! ```text
//! cargo run --release --example chain -- --steps 10000
//! cargo xtask mpirun -n 3 --release --example chain -- --steps 10000
//! ```
//!
//! Prints the per-rank store figures at `--report` step intervals and the
//! final trace of `x`, which is checked against the same chain computed
//! locally on the root.

use anyhow::ensure;
use clap::Parser;
use uni20::prelude::*;

mod shared;

use shared::orthogonal;

#[derive(Parser)]
#[command(about = "A long chain of small distributed contractions")]
struct Args {
    /// Number of contractions.
    #[arg(long, default_value_t = 2000)]
    steps: usize,
    /// Matrix size.
    #[arg(long, default_value_t = 64)]
    n: usize,
    /// Block size.
    #[arg(long, default_value_t = 32)]
    block: usize,
    /// Print the store figures every this many steps (0: never).
    #[arg(long, default_value_t = 0)]
    report: usize,
}

/// This process's resident set size in KiB (Linux: `/proc/self/statm`;
/// 0 where that file does not exist).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4)
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    uni20::launch(move |ctl| {
        let n = args.n;
        let m_local = LocalTensor::from_f64(&[n, n], orthogonal(n))?;
        let x0: Vec<f64> = (0..n * n).map(|k| if k % (n + 1) == 0 { 1.0 } else { 0.0 }).collect();
        let m = DistTensor::from_local(ctl, &m_local, args.block)?;
        let mut x = DistTensor::from_local(ctl, &LocalTensor::from_f64(&[n, n], x0.clone())?, args.block)?;
        for step in 1..=args.steps {
            x = contract(ctl, "ij,jk->ik", &x, &m)?;
            if args.report > 0 && step % args.report == 0 {
                x.wait(ctl)?;
                let stats = ctl.store_stats()?;
                let line: Vec<String> = stats
                    .iter()
                    .map(|s| format!("r{}: {} obj {} B", s.rank, s.objects, s.bytes_resident))
                    .collect();
                println!("step {step:>6}  process RSS {:>8} KiB  {}", rss_kib(), line.join("  "));
            }
        }
        // The same chain on the root, with the local kernel.
        let backends = uni20::BackendList::default_cpu(1);
        let mut want = LocalTensor::from_f64(&[n, n], x0)?;
        for _ in 0..args.steps {
            want = uni20::dispatch::contract(
                "ij,jk->ik",
                C64::new(1.0, 0.0),
                &want,
                &m_local,
                C64::new(0.0, 0.0),
                None,
                &backends,
            )?;
        }
        let got = x.to_local(ctl)?;
        let diff = got.max_abs_diff(&want).unwrap_or(f64::INFINITY);
        println!(
            "chain of {} contractions on {} ranks: max |diff| vs local = {diff:e}",
            args.steps,
            ctl.size()
        );
        ensure!(diff <= 1e-9, "the distributed chain differs from the local one");
        Ok(())
    })
}
