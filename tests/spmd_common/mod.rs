//! The SPMD checks shared by the in-process test (`tests/spmd.rs`) and the
//! MPI test (`tests/mpi_spmd.rs`): the same closure runs on every rank of
//! both transports.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use anyhow::{ensure, Context as _};
use uni20::dist::npy::read_npy_header;
use uni20::dist::DistError;
use uni20::spmd::{contract, scatter, to_local, SpmdTensor};
use uni20::{CollectiveOp, JobError, LocalTensor, SpmdContext};

/// The numpy fixture cases the SPMD contraction is checked on.
pub const CASES: &[&str] = &[
    "matmul",
    "permuted_contracted",
    "complex128",
    "mixed_f64_c128",
    "batch_permuted",
];

pub fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/contract")
        .join(case)
}

/// Reads a little-endian, C-order npy file into a local tensor (every rank
/// reads its own copy).
pub fn read_local(path: &Path) -> anyhow::Result<LocalTensor> {
    let h = read_npy_header(path)?;
    ensure!(
        !h.big_endian && !h.fortran,
        "{}: not a little-endian C-order file",
        path.display()
    );
    let bytes = std::fs::read(path)?;
    Ok(LocalTensor::from_bytes(
        h.dtype,
        &h.shape,
        &bytes[h.data_offset as usize..],
    )?)
}

/// Largest |got - want| relative to max |want| (at least 1).
pub fn rel_diff(got: &LocalTensor, want: &LocalTensor) -> anyhow::Result<f64> {
    ensure!(
        got.shape() == want.shape(),
        "shape {:?} vs {:?}",
        got.shape(),
        want.shape()
    );
    ensure!(
        got.dtype() == want.dtype(),
        "dtype {:?} vs {:?}",
        got.dtype(),
        want.dtype()
    );
    let scale = want.to_c64_vec().iter().map(|z| z.norm()).fold(1.0, f64::max);
    Ok(got.max_abs_diff(want).context("comparing values")? / scale)
}

/// Collectives on this universe, values checked against closed forms.
pub fn check_collectives(ctx: &SpmdContext<'_>) -> anyhow::Result<()> {
    let (me, n) = (ctx.rank(), ctx.size());
    ctx.barrier()?;
    for root in 0..n {
        let mut v = if me == root {
            (root as u32, format!("root {root}"))
        } else {
            (0, String::new())
        };
        ctx.broadcast(root, &mut v)?;
        ensure!(
            v == (root as u32, format!("root {root}")),
            "broadcast from {root}: {v:?}"
        );
        let g = ctx.gather(root, &(me as i64 * -3))?;
        let want = (me == root).then(|| (0..n as i64).map(|r| r * -3).collect::<Vec<_>>());
        ensure!(g == want, "gather to {root}: {g:?}");
    }
    let all = ctx.all_gather(&vec![me; me + 1])?;
    ensure!(
        all == (0..n).map(|r| vec![r; r + 1]).collect::<Vec<_>>(),
        "all_gather: {all:?}"
    );
    let sum = ctx.all_reduce_num(0.25 + me as f64, CollectiveOp::Sum)?;
    let want = (0..n).map(|r| 0.25 + r as f64).fold(0.0, |a, b| a + b);
    ensure!(sum.to_bits() == want.to_bits(), "all_reduce sum {sum} != {want}");
    let max = ctx.reduce_num(n - 1, 10 - me as i32, CollectiveOp::Max)?;
    ensure!(max == (me == n - 1).then_some(10), "reduce max: {max:?}");
    let joined = ctx.all_reduce(format!("{me}"), |a, b| format!("{a},{b}"))?;
    let want: Vec<String> = (0..n).map(|r| r.to_string()).collect();
    ensure!(joined == want.join(","), "all_reduce of strings: {joined}");
    Ok(())
}

/// Scatter, collective contraction and gather of every fixture case at
/// block sizes 1 and 2, against numpy's result. Returns the number of runs.
pub fn check_contractions(ctx: &SpmdContext<'_>) -> anyhow::Result<usize> {
    let mut runs = 0;
    for case in CASES {
        let dir = fixture(case);
        let spec = std::fs::read_to_string(dir.join("spec.txt"))?.trim().to_string();
        let (a, b) = (read_local(&dir.join("a.npy"))?, read_local(&dir.join("b.npy"))?);
        let want = read_local(&dir.join("out.npy"))?;
        for block in [1, 2] {
            let what = format!("{case} ({spec}) block {block} on {} ranks", ctx.size());
            let (da, db) = (scatter(ctx, &a, block)?, scatter(ctx, &b, block)?);
            if ctx.size() > 1 && da.manifest().blocks.len() > 1 {
                let owners: Vec<usize> = da.manifest().blocks.iter().map(|r| r.owner).collect();
                ensure!(
                    owners.iter().any(|&o| o != owners[0]),
                    "{what}: one owner for all blocks"
                );
            }
            let c: SpmdTensor = contract(ctx, spec.as_str(), &da, &db).with_context(|| what.clone())?;
            let got = to_local(ctx, &c)?;
            let d = rel_diff(&got, &want)?;
            ensure!(d <= 1e-12, "{what}: relative difference {d:e} from numpy");
            runs += 1;
        }
    }
    Ok(runs)
}

/// A contraction every rank refuses in the same way is an ordinary
/// validation error on every rank, and the universe goes on.
pub fn check_agreed_refusal(ctx: &SpmdContext<'_>) -> anyhow::Result<()> {
    let dir = fixture("matmul");
    let (a, b) = (read_local(&dir.join("a.npy"))?, read_local(&dir.join("b.npy"))?);
    let (da, db) = (scatter(ctx, &a, 2)?, scatter(ctx, &b, 2)?);
    match contract(ctx, "ij,kl->iz", &da, &db) {
        Err(DistError::Spec(_)) => {}
        other => anyhow::bail!("a bad spec on every rank: {other:?}"),
    }
    ensure!(!ctx.has_failed(), "an agreed refusal stopped the universe");
    ctx.barrier()?;
    Ok(())
}

/// Everything that must succeed, in one universe.
pub fn check_all(ctx: &SpmdContext<'_>) -> anyhow::Result<usize> {
    check_collectives(ctx)?;
    let runs = check_contractions(ctx)?;
    check_agreed_refusal(ctx)?;
    Ok(runs)
}

/// One rank (the last) scatters B with another block size: every rank must
/// stop at that scatter.
pub fn diverging_block(ctx: &SpmdContext<'_>) -> anyhow::Result<()> {
    let dir = fixture("matmul");
    let (a, b) = (read_local(&dir.join("a.npy"))?, read_local(&dir.join("b.npy"))?);
    let block = if ctx.rank() + 1 == ctx.size() { 3 } else { 2 };
    let da = scatter(ctx, &a, 2)?;
    let db = scatter(ctx, &b, block)?;
    contract(ctx, "ij,jk->ik", &da, &db)?;
    anyhow::bail!("rank {} passed block {block} and nothing stopped it", ctx.rank())
}

/// The text every rank must report for [`diverging_block`] on `n` ranks.
pub fn diverging_block_text(n: usize) -> String {
    let others: Vec<String> = (0..n - 1).map(|r| r.to_string()).collect();
    format!(
        "plan disagreement in `uni20.spmd.scatter` at op_id 2: rank{} {} computed one plan, rank {} another; \
         first differing plan field: `blocking`",
        if n == 2 { "" } else { "s" },
        others.join(", "),
        n - 1
    )
}

/// Rank 0 asks for a transposed output: every rank must stop at the
/// contraction, naming the spec.
pub fn diverging_spec(ctx: &SpmdContext<'_>) -> anyhow::Result<()> {
    let dir = fixture("matmul");
    let (a, b) = (read_local(&dir.join("a.npy"))?, read_local(&dir.join("b.npy"))?);
    let (da, db) = (scatter(ctx, &a, 2)?, scatter(ctx, &b, 2)?);
    let spec = if ctx.rank() == 0 { "ij,jk->ki" } else { "ij,jk->ik" };
    contract(ctx, spec, &da, &db)?;
    anyhow::bail!("rank {} asked for {spec} and nothing stopped it", ctx.rank())
}

/// Checks the outcome of a diverging universe on one rank: the failure
/// that stopped it is the disagreement, with `text`.
pub fn expect_disagreement(outcome: Result<anyhow::Result<()>, JobError>, text: &str) -> anyhow::Result<()> {
    match outcome {
        Err(JobError::Disagreement(d)) => {
            ensure!(d.to_string() == text, "disagreement text:\n  {d}\nexpected:\n  {text}");
            Ok(())
        }
        other => anyhow::bail!("expected the disagreement `{text}`, got {other:?}"),
    }
}
