//! The decomposition commands and their worker handlers:
//! `uni20.svd.v1`, `uni20.qr.v1` (QR and LQ) and `uni20.eigh.v1` move the
//! input's blocks to the factorizing worker, which assembles the matrix,
//! factorizes it through the local dispatcher (its family's backend list,
//! with the rank's thread budget), commits the factors as blocks and
//! replies with the values and the factors' object ids; then
//! `uni20.distribute_factors.v1` moves factor blocks from the factorizing
//! worker to their owners. Descriptors hold ids, shapes and options only.

use serde::{Deserialize, Serialize};
use uni20_dispatch::decomp::{
    eigh_with_attempts, lq_with_attempts, qr_with_attempts, svd_with_attempts, DecompError, DecompKind,
    EighBackendList, QrBackendList, SvdBackendList,
};
use uni20_dispatch::{DType, KernelAttempt, LocalTensor, C64};
use uni20_persist::ObjectId;
use uni20_worker::{command, HandlerError, WorkerContext};

use super::matrix::{assemble, commit_blocks, diagonal};
use super::plan::{factor_metas, real_dtype, Validated};
use super::split::MatrixSplit;
use crate::layout::Blocking;
use crate::tensor::{BlockRef, TensorMeta};
use crate::transfer::{exchange_blocks, Transfer};

/// The matrix part of every decomposition descriptor: the input, its
/// matrix view, where it is assembled and what moves there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct MatrixDescV1 {
    /// The factorizing worker.
    pub(crate) factorizer: usize,
    /// The input's global shape.
    pub(crate) shape: Vec<usize>,
    /// The input's element type (and the factors').
    pub(crate) dtype: DType,
    /// The input's tiling.
    pub(crate) blocking: Blocking,
    /// The input's block map.
    pub(crate) blocks: Vec<BlockRef>,
    /// Tensor modes forming the rows, slowest first.
    pub(crate) rows: Vec<usize>,
    /// Tensor modes forming the columns, slowest first.
    pub(crate) cols: Vec<usize>,
    /// Block extent of the new index `k`.
    pub(crate) k_block: usize,
    /// Input blocks moving to the factorizing worker (the `i`-th between one sender and one receiver uses the tags of `i`).
    pub(crate) transfers: Vec<Transfer>,
}

impl MatrixDescV1 {
    /// The call this descriptor describes, as the planner validated it.
    fn validated(&self, op: DecompKind) -> Validated {
        let split = MatrixSplit {
            rows: self.rows.clone(),
            cols: self.cols.clone(),
        };
        Validated {
            op,
            rows: split.row_dims(&self.shape).iter().product(),
            cols: split.col_dims(&self.shape).iter().product(),
            split,
            input: TensorMeta {
                symmetric: None,
                shape: self.shape.clone(),
                dtype: self.dtype,
                blocking: self.blocking.clone(),
            },
            k_block: self.k_block,
        }
    }
}

/// SVD truncation options on the wire (see
/// [`SvdTruncation`](crate::SvdTruncation) for their meaning).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct TruncationV1 {
    /// Keep at most this many singular values.
    pub(crate) max_rank: Option<u64>,
    /// Relative discarded weight target.
    pub(crate) max_discarded_weight: Option<f64>,
    /// Absolute cutoff.
    pub(crate) cutoff: Option<f64>,
    /// Relative tolerance of degenerate multiplets.
    pub(crate) degeneracy_rtol: Option<f64>,
}

/// Descriptor of `uni20.svd.v1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SvdDescV1 {
    /// The matrix.
    pub(crate) matrix: MatrixDescV1,
    /// Truncation.
    pub(crate) truncation: TruncationV1,
    /// Also commit the diagonal matrix of the kept singular values.
    pub(crate) s_diag: bool,
}

/// Descriptor of `uni20.qr.v1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct QrDescV1 {
    /// The matrix.
    pub(crate) matrix: MatrixDescV1,
    /// LQ instead of QR.
    pub(crate) lq: bool,
}

/// Descriptor of `uni20.eigh.v1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct EighDescV1 {
    /// The matrix (square).
    pub(crate) matrix: MatrixDescV1,
    /// Relative Hermiticity tolerance (`None`: the kernel's default).
    pub(crate) hermitian_rtol: Option<f64>,
}

/// Why the factorizing worker refused the input (bad data, not a failure
/// of the runtime: the job goes on).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum RejectionV1 {
    /// A block holds NaN or an infinity (the first such block).
    NonFinite {
        /// Block number.
        block: usize,
        /// The element's multi-index in the tensor.
        element: Vec<usize>,
        /// Its value.
        value: C64,
    },
    /// `eigh`: the matrix is not Hermitian within the tolerance.
    NotHermitian {
        /// Matrix row of the largest deviation.
        row: usize,
        /// Matrix column of the largest deviation.
        col: usize,
        /// `|A[row, col] - conj(A[col, row])|`.
        deviation: f64,
        /// `max |A|`.
        max_abs: f64,
        /// The relative tolerance in force.
        tolerance: f64,
    },
}

impl From<super::matrix::BadElement> for RejectionV1 {
    fn from(bad: super::matrix::BadElement) -> RejectionV1 {
        RejectionV1::NonFinite {
            block: bad.block,
            element: bad.element,
            value: bad.value,
        }
    }
}

impl RejectionV1 {
    /// The typed error of a `NonFinite` rejection of `op` on the input `m`
    /// (`None` for another rejection).
    pub(crate) fn non_finite_error(
        &self,
        op: DecompKind,
        m: &crate::tensor::Manifest,
    ) -> Option<crate::error::DistError> {
        match self {
            RejectionV1::NonFinite { block, element, value } => Some(crate::error::DistError::NonFinite {
                op,
                block: *block,
                block_index: if *block < m.blocks.len() {
                    m.stored_multi(*block)
                } else {
                    Vec::new()
                },
                element: element.clone(),
                value: *value,
            }),
            RejectionV1::NotHermitian { .. } => None,
        }
    }
}

/// What the factorizing worker reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct FactoredV1 {
    /// Singular values (non-increasing) or eigenvalues (non-decreasing);
    /// empty for QR and LQ.
    pub(crate) values: Vec<f64>,
    /// SVD: the discarded singular values.
    pub(crate) discarded: Vec<f64>,
    /// SVD: discarded weight `sum discarded s^2 / sum s^2`.
    pub(crate) discarded_weight: f64,
    /// SVD: `max_rank` split the leading degenerate multiplet.
    pub(crate) degenerate_split: bool,
    /// The inner dimension `k` of the factors.
    pub(crate) k: usize,
    /// Object ids of each factor's blocks (in the order of the family's
    /// factors), committed on the factorizing worker.
    pub(crate) factors: Vec<Vec<ObjectId>>,
    /// The local backend attempts, one line each.
    pub(crate) attempts: Vec<String>,
}

/// Reply of every decomposition command.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum DecompReplyV1 {
    /// This rank only sent input blocks.
    Sent,
    /// The factorizing worker refused the input; nothing was committed.
    Rejected(RejectionV1),
    /// The factorizing worker's result.
    Factored(FactoredV1),
}

command!(
    /// The command `uni20.svd.v1`.
    pub(crate) SvdV1 = "uni20.svd.v1", schema 1, SvdDescV1 => DecompReplyV1, handle_svd
);

command!(
    /// The command `uni20.qr.v1` (QR and LQ).
    pub(crate) QrV1 = "uni20.qr.v1", schema 1, QrDescV1 => DecompReplyV1, handle_qr
);

command!(
    /// The command `uni20.eigh.v1`.
    pub(crate) EighV1 = "uni20.eigh.v1", schema 1, EighDescV1 => DecompReplyV1, handle_eigh
);

/// Descriptor of `uni20.distribute_factors.v1`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DistributeFactorsDescV1 {
    /// Factor blocks moving from the factorizing worker to their owners;
    /// the sender drops its copy afterwards. The `i`-th transfer between one sender and one receiver uses the tags of `i`.
    pub(crate) transfers: Vec<Transfer>,
}

command!(
    /// The command `uni20.distribute_factors.v1`. Reply: the number of blocks
    /// the rank received.
    pub(crate) DistributeFactorsV1 = "uni20.distribute_factors.v1", schema 1, DistributeFactorsDescV1 => u64, handle_distribute
);

/// A local factorization's outcome.
struct Local {
    values: Vec<f64>,
    discarded: Vec<f64>,
    discarded_weight: f64,
    degenerate_split: bool,
    factors: Vec<LocalTensor>,
    attempts: Vec<KernelAttempt>,
}

impl Local {
    fn plain(factors: Vec<LocalTensor>, values: Vec<f64>, attempts: Vec<KernelAttempt>) -> Local {
        Local {
            values,
            discarded: Vec::new(),
            discarded_weight: 0.0,
            degenerate_split: false,
            factors,
            attempts,
        }
    }
}

pub(crate) fn attempt_lines(attempts: &[KernelAttempt]) -> Vec<String> {
    attempts
        .iter()
        .map(|a| format!("{}: {}", a.backend, a.outcome))
        .collect()
}

/// A kernel error: data the kernel refuses becomes a rejection, anything
/// else a handler error with the backend attempts (fail-stop).
pub(crate) fn kernel_outcome(e: DecompError) -> Result<RejectionV1, HandlerError> {
    match e {
        DecompError::NotHermitian {
            row,
            col,
            deviation,
            max_abs,
            tolerance,
        } => Ok(RejectionV1::NotHermitian {
            row,
            col,
            deviation,
            max_abs,
            tolerance,
        }),
        DecompError::Dispatch(d) => {
            let lines = attempt_lines(&d.attempts);
            Err(HandlerError::from(d).with_attempts(lines))
        }
        e => Err(HandlerError::from(e)),
    }
}

/// True when the rank's contraction backends put a GPU first: the
/// decomposition lists then do too (the GPU backends decline the families
/// they do not implement, which the attempt log shows).
pub(crate) fn gpu_first(ctx: &WorkerContext<'_>) -> bool {
    ctx.backends().names().contains(&"cuda")
}

/// The decomposition backend list `$List` of the worker `$ctx`, with its thread budget:
/// GPU first when the rank's contraction backends include CUDA, else the CPU list. With
/// `$gpu, $threads` instead of `$ctx`: that choice and budget.
macro_rules! local_list {
    ($List:ident, $ctx:expr) => {
        local_list!($List, gpu_first($ctx), $ctx.threads())
    };
    ($List:ident, $gpu:expr, $threads:expr) => {
        if $gpu {
            $List::default_gpu_first($threads)
        } else {
            $List::default_cpu($threads)
        }
    };
}

pub(crate) use local_list;

type Kernel<'k> =
    Box<dyn FnOnce(&LocalTensor, &WorkerContext<'_>) -> Result<Result<Local, RejectionV1>, HandlerError> + 'k>;

/// The shared handler: exchange, assemble (checking every block), release
/// the fetched copies, factorize, commit the factors' blocks, reply.
fn run(
    ctx: &mut WorkerContext<'_>,
    m: &MatrixDescV1,
    op: DecompKind,
    s_diag: bool,
    kernel: Kernel<'_>,
) -> Result<DecompReplyV1, HandlerError> {
    let store = ctx.store();
    let replicas = exchange_blocks(ctx, &m.transfers)?;
    let release = |ids: &[ObjectId]| {
        store
            .release_many(ids)
            .map(|_| ())
            .map_err(|e| HandlerError::from(e).context("dropping the fetched input blocks"))
    };
    if ctx.rank() != m.factorizer {
        release(&replicas)?;
        return Ok(DecompReplyV1::Sent);
    }
    let start = std::time::Instant::now();
    let assembled = assemble(store, m);
    release(&replicas)?;
    let matrix = match assembled? {
        Ok(t) => t,
        Err(bad) => {
            tracing::debug!(target: "uni20_dist", rank = ctx.rank(), %op, block = bad.block, "input rejected: not finite");
            return Ok(DecompReplyV1::Rejected(bad.into()));
        }
    };
    let assembled_at = start.elapsed();
    let local = match kernel(&matrix, ctx)? {
        Ok(l) => l,
        Err(r) => return Ok(DecompReplyV1::Rejected(r)),
    };
    drop(matrix);
    let factorized_at = start.elapsed();
    let k = local.factors.first().map_or(0, |f| f.shape()[1]);
    let metas = factor_metas(&m.validated(op), k, s_diag)?;
    let mut factors = Vec::with_capacity(metas.len());
    for (i, meta) in metas.iter().enumerate() {
        let ids = match local.factors.get(i) {
            Some(f) => commit_blocks(store, f, meta)?,
            // The diagonal of singular values, built here.
            None => commit_blocks(store, &diagonal(&local.values, real_dtype(m.dtype))?, meta)?,
        };
        factors.push(ids);
    }
    tracing::debug!(
        target: "uni20_dist",
        rank = ctx.rank(),
        %op,
        k,
        assemble_ms = assembled_at.as_secs_f64() * 1e3,
        factorize_ms = (factorized_at - assembled_at).as_secs_f64() * 1e3,
        commit_ms = (start.elapsed() - factorized_at).as_secs_f64() * 1e3,
        "factorized"
    );
    Ok(DecompReplyV1::Factored(FactoredV1 {
        values: local.values,
        discarded: local.discarded,
        discarded_weight: local.discarded_weight,
        degenerate_split: local.degenerate_split,
        k,
        factors,
        attempts: attempt_lines(&local.attempts),
    }))
}

fn handle_svd(ctx: &mut WorkerContext<'_>, d: SvdDescV1) -> Result<DecompReplyV1, HandlerError> {
    let t = d.truncation;
    let opts = uni20_dispatch::decomp::SvdOptions {
        max_rank: t.max_rank.map(|r| usize::try_from(r).unwrap_or(usize::MAX)),
        max_discarded_weight: t.max_discarded_weight,
        cutoff: t.cutoff,
        degeneracy_rtol: t.degeneracy_rtol,
    };
    let kernel: Kernel<'_> = Box::new(move |a, ctx| {
        let list = local_list!(SvdBackendList, ctx);
        match svd_with_attempts(a, &opts, &list) {
            Ok((r, attempts)) => Ok(Ok(Local {
                values: r.s,
                discarded: r.discarded,
                discarded_weight: r.discarded_weight,
                degenerate_split: r.degenerate_split,
                factors: vec![r.u, r.vh],
                attempts,
            })),
            Err(e) => kernel_outcome(e).map(Err),
        }
    });
    run(ctx, &d.matrix, DecompKind::Svd, d.s_diag, kernel)
}

fn handle_qr(ctx: &mut WorkerContext<'_>, d: QrDescV1) -> Result<DecompReplyV1, HandlerError> {
    let lq = d.lq;
    let kernel: Kernel<'_> = Box::new(move |a, ctx| {
        let list = local_list!(QrBackendList, ctx);
        let r = if lq {
            lq_with_attempts(a, &list).map(|(r, at)| Local::plain(vec![r.l, r.q], Vec::new(), at))
        } else {
            qr_with_attempts(a, &list).map(|(r, at)| Local::plain(vec![r.q, r.r], Vec::new(), at))
        };
        match r {
            Ok(l) => Ok(Ok(l)),
            Err(e) => kernel_outcome(e).map(Err),
        }
    });
    let op = if lq { DecompKind::Lq } else { DecompKind::Qr };
    run(ctx, &d.matrix, op, false, kernel)
}

fn handle_eigh(ctx: &mut WorkerContext<'_>, d: EighDescV1) -> Result<DecompReplyV1, HandlerError> {
    let opts = uni20_dispatch::decomp::EighOptions {
        hermitian_rtol: d.hermitian_rtol,
    };
    let kernel: Kernel<'_> = Box::new(move |a, ctx| {
        let list = local_list!(EighBackendList, ctx);
        match eigh_with_attempts(a, &opts, &list) {
            Ok((r, at)) => Ok(Ok(Local::plain(vec![r.vectors], r.values, at))),
            Err(e) => kernel_outcome(e).map(Err),
        }
    });
    run(ctx, &d.matrix, DecompKind::Eigh, false, kernel)
}

fn handle_distribute(ctx: &mut WorkerContext<'_>, d: DistributeFactorsDescV1) -> Result<u64, HandlerError> {
    let me = ctx.rank();
    let received = exchange_blocks(ctx, &d.transfers)?;
    let sent: Vec<ObjectId> = d.transfers.iter().filter(|t| t.from == me).map(|t| t.id).collect();
    ctx.store()
        .release_many(&sent)
        .map_err(|e| HandlerError::from(e).context("dropping the factor blocks handed to their owners"))?;
    Ok(received.len() as u64)
}
