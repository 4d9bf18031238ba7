//! The guide's SPMD program ("Running under MPI and embedding"): the same
//! closure on every rank, a collective scatter and contraction, and an
//! all-reduce whose result every rank checks.
//!
//! ```text
//! cargo run --example guide_spmd                     # in-process: ranks as threads
//! cargo xtask mpirun -n 3 --example guide_spmd       # one MPI process per rank
//! ```
//!
//! `cargo test` runs it in-process (`test = true`, `harness = false`).

// ANCHOR: guide
use uni20::spmd::{contract, scatter, to_local};
use uni20::{CollectiveOp, LocalTensor};

fn main() -> std::process::ExitCode {
    uni20::spmd(|ctx| {
        // Every rank holds the same local tensor; each keeps the blocks it owns.
        let a = scatter(ctx, &LocalTensor::from_f64(&[2, 2], vec![1., 2., 3., 4.])?, 1)?;
        let c = to_local(ctx, &contract(ctx, "ij,jk->ik", &a, &a)?)?; // every rank plans, agrees, computes its part
        let trace = c.to_c64_vec()[0].re + c.to_c64_vec()[3].re;
        let total = ctx.all_reduce_num(trace, CollectiveOp::Sum)?;
        // Tr(A A) = 7 + 22 = 29 on each rank.
        anyhow::ensure!(total == 29.0 * ctx.size() as f64, "sum of traces {total}");
        Ok(())
    })
}
// ANCHOR_END: guide
