//! The root's side of a decomposition, synchronous: wait for the input's
//! block map, plan the assembly, submit the family's command and wait for
//! it, turn a rejection into a typed error (the job goes on), then plan
//! and submit the distribution of the factor blocks, and build the factor
//! tensors with their plan summary.

use uni20_worker::{CommandSpec, Controller};

use super::command::{
    DecompReplyV1, DistributeFactorsDescV1, DistributeFactorsV1, FactoredV1, MatrixDescV1, RejectionV1,
};
use super::plan::{factor_metas, plan_assembly, plan_distribution, Validated};
use super::split::MatrixSplit;
use crate::error::DistError;
use crate::summary::PlanSummary;
use crate::tensor::{DistTensor, Manifest};
use crate::transfer::Transfer;

/// A finished factorization as the root sees it.
pub(crate) struct Factorization {
    /// The factorizing worker's report.
    pub(crate) factored: FactoredV1,
    /// The factor tensors, ready, in the family's order.
    pub(crate) tensors: Vec<DistTensor>,
    /// The plan in numbers (also on every factor tensor).
    pub(crate) summary: PlanSummary,
    /// The factorizing worker.
    pub(crate) factorizer: usize,
}

/// Runs command `C` (whose descriptor `desc` builds around the matrix
/// part) for the validated call `v` on `t`, then distributes the factors.
pub(crate) fn factorize<C>(
    ctl: &Controller<'_>,
    t: &DistTensor,
    v: &Validated,
    s_diag: bool,
    desc: impl FnOnce(MatrixDescV1) -> C::Descriptor,
) -> Result<Factorization, DistError>
where
    C: CommandSpec<Reply = DecompReplyV1>,
{
    let m = t.manifest(ctl)?;
    let workers = ctl.compute_ranks();
    let a = plan_assembly(&m, &workers);
    let matrix = MatrixDescV1 {
        factorizer: a.rank,
        shape: m.shape.clone(),
        dtype: m.dtype,
        blocking: m.blocking.clone(),
        blocks: m.blocks.clone(),
        rows: v.split.rows.clone(),
        cols: v.split.cols.clone(),
        k_block: v.k_block,
        transfers: a.transfers.clone(),
    };
    tracing::debug!(
        target: "uni20_dist",
        op = %v.op,
        rows = v.rows,
        cols = v.cols,
        factorizer = a.rank,
        fetched_blocks = a.transfers.len(),
        "decomposition planned"
    );
    let replies = ctl.submit::<C>(&desc(matrix), &a.participants)?;
    let reply = replies
        .into_iter()
        .find(|(r, _)| *r == a.rank)
        .map(|(_, reply)| reply)
        .ok_or_else(|| DistError::Protocol(format!("no reply from the factorizing rank {}", a.rank)))?;
    let factored = match reply {
        DecompReplyV1::Factored(f) => f,
        DecompReplyV1::Rejected(r) => return Err(rejection(v, &m, r)),
        DecompReplyV1::Sent => {
            return Err(DistError::Protocol(format!(
                "the factorizing rank {} did not factorize",
                a.rank
            )))
        }
    };
    for line in &factored.attempts {
        tracing::debug!(target: "uni20_dist", op = %v.op, "backend attempt: {line}");
    }
    let metas = factor_metas(v, factored.k, s_diag)?;
    let (maps, moves) = plan_distribution(&metas, &factored.factors, a.rank, &workers)?;
    let mut senders_and_receivers: Vec<usize> = moves.iter().flat_map(|t| [t.from, t.to]).collect();
    senders_and_receivers.sort_unstable();
    senders_and_receivers.dedup();
    if !moves.is_empty() {
        let replies = ctl.submit::<DistributeFactorsV1>(
            &DistributeFactorsDescV1 {
                transfers: moves.clone(),
            },
            &senders_and_receivers,
        )?;
        for (rank, got) in replies {
            let want = moves.iter().filter(|t| t.to == rank).count() as u64;
            if got != want {
                return Err(DistError::Protocol(format!(
                    "rank {rank} received {got} factor blocks, {want} were sent to it"
                )));
            }
        }
    }
    let summary = summarize(
        v,
        &a.transfers,
        &moves,
        a.rank,
        a.local_bytes,
        &a.participants,
        &factored,
    );
    tracing::debug!(target: "uni20_dist", "{summary}");
    let tensors = metas
        .iter()
        .zip(maps)
        .map(|(meta, map)| {
            let t = DistTensor::from_manifest(ctl, Manifest::new(meta, map))?;
            t.set_plan_summary(summary.clone());
            Ok(t)
        })
        .collect::<Result<Vec<_>, DistError>>()?;
    Ok(Factorization {
        factored,
        tensors,
        summary,
        factorizer: a.rank,
    })
}

/// The typed error of a rejected input.
fn rejection(v: &Validated, m: &Manifest, r: RejectionV1) -> DistError {
    if let Some(e) = r.non_finite_error(v.op, m) {
        return e;
    }
    match r {
        RejectionV1::NonFinite { .. } => DistError::Protocol("a non-finite rejection without its error".into()),
        RejectionV1::NotHermitian {
            row,
            col,
            deviation,
            max_abs,
            tolerance,
        } => {
            let rows = v.split.row_dims(&m.shape);
            let cols = v.split.col_dims(&m.shape);
            DistError::NotHermitian {
                row,
                col,
                row_index: MatrixSplit::unflatten(&rows, row),
                col_index: MatrixSplit::unflatten(&cols, col),
                deviation,
                max_abs,
                tolerance,
            }
        }
    }
}

/// The plan summary of a decomposition: one work item (the factorization),
/// the assembly and distribution transfers, and notes on both.
fn summarize(
    v: &Validated,
    fetch: &[Transfer],
    moves: &[Transfer],
    rank: usize,
    local_bytes: u64,
    participants: &[usize],
    f: &FactoredV1,
) -> PlanSummary {
    let all: Vec<Transfer> = fetch.iter().chain(moves).cloned().collect();
    let mut ranks: Vec<usize> = participants
        .iter()
        .copied()
        .chain(moves.iter().flat_map(|t| [t.from, t.to]))
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    let mut s = PlanSummary::from_parts(v.op.name(), [rank], 0, &all, &ranks);
    let bytes = |ts: &[Transfer]| ts.iter().map(|t| t.bytes).sum::<u64>();
    s.notes.push(format!(
        "{}x{} {} matrix assembled on rank {rank} ({local_bytes} bytes already there, {} blocks = {} bytes fetched)",
        v.rows,
        v.cols,
        v.input.dtype,
        fetch.len(),
        bytes(fetch)
    ));
    s.notes.push(format!("k = {} of {}", f.k, v.rows.min(v.cols)));
    s.notes.push(format!(
        "{} factor blocks = {} bytes moved to their owners",
        moves.len(),
        bytes(moves)
    ));
    s
}
