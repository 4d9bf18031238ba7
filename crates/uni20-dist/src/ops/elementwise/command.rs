//! The `uni20.elementwise.v1` command: its descriptor (the operation, and
//! one item per output block: the block of `a` it comes from and, for an
//! `axpby`, the box of `b` with the blocks overlapping it) and the worker
//! handler, which exchanges blocks worker to worker, computes each output
//! block it owns with the local `uni20_dispatch` kernels, commits it and
//! replies with its id.

use serde::{Deserialize, Serialize};
use uni20_dispatch::{axpby as local_axpby, reshape as local_reshape, DType, C64};
use uni20_persist::{ObjectId, PersistentPtr};
use uni20_worker::{command, HandlerError, WorkerContext};

use crate::ops::reblock::BoxSource;
use crate::tensor::{Block, BlockRef};
use crate::transfer::{exchange_blocks, Transfer};

/// The second operand of an [`ElementwiseOp::Axpby`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SecondOperand {
    /// Its scale (nonzero: a zero `beta` has no second operand).
    pub beta: C64,
    /// Output axis `k` is axis `perm[k]` of `b`.
    pub perm: Vec<usize>,
    /// Read `b` conjugated.
    pub conj: bool,
}

/// What every item computes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ElementwiseOp {
    /// `out = alpha * op(a) + beta * op(b)`, `op` a permutation (output axis
    /// `k` is axis `perm_a[k]` of `a`) and an optional conjugation
    /// (`uni20_dispatch::axpby`).
    Axpby {
        /// Scale of `a`.
        alpha: C64,
        /// Output axis `k` is axis `perm_a[k]` of `a`.
        perm_a: Vec<usize>,
        /// Read `a` conjugated.
        conj_a: bool,
        /// The second operand, if any.
        b: Option<SecondOperand>,
    },
    /// `out` = the block of `a` with the item's output shape (same
    /// row-major data).
    Reshape,
}

/// One output block, computed by `rank`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElementwiseItem {
    /// Rank that computes and owns the output block.
    pub rank: usize,
    /// Output block number.
    pub out_block: usize,
    /// Output block shape.
    pub out_shape: Vec<usize>,
    /// The block of `a` the output block comes from.
    pub a: BlockRef,
    /// The box of `b` (in `b`'s mode order) and its overlapping blocks.
    pub b: Option<BoxSource>,
}

/// The `uni20.elementwise.v1` descriptor, identical on every participant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElementwiseDescV1 {
    /// The operation.
    pub op: ElementwiseOp,
    /// Output element type.
    pub out_dtype: DType,
    /// One item per output block.
    pub items: Vec<ElementwiseItem>,
    /// Worker-to-worker block transfers; transfer `i` uses the tags of `i`.
    pub transfers: Vec<Transfer>,
}

command!(
    /// The command `uni20.elementwise.v1`. Reply of each participant: `(item
    /// index, object id)` of every output block it committed.
    pub ElementwiseV1 = "uni20.elementwise.v1", schema 1, ElementwiseDescV1 => Vec<(usize, ObjectId)>, handle_elementwise
);

fn handle_elementwise(
    ctx: &mut WorkerContext<'_>,
    d: ElementwiseDescV1,
) -> Result<Vec<(usize, ObjectId)>, HandlerError> {
    let me = ctx.rank();
    let store = ctx.store();
    let replicas = exchange_blocks(ctx, &d.transfers)?;
    let mut out = Vec::new();
    for (idx, item) in d.items.iter().enumerate().filter(|(_, i)| i.rank == me) {
        let in_item = |e: HandlerError| e.context(format!("element-wise item {idx} (output block {})", item.out_block));
        let a = store
            .load_wait(PersistentPtr::<Block>::from_id(item.a.id))
            .map_err(|e| in_item(HandlerError::from(e).with_object(item.a.id)))?;
        let r = match &d.op {
            ElementwiseOp::Axpby {
                alpha,
                perm_a,
                conj_a,
                b,
            } => {
                let bt = match (b, &item.b) {
                    (Some(_), Some(src)) => Some(src.assemble(store).map_err(in_item)?),
                    _ => None,
                };
                let second = match (b, &bt) {
                    (Some(s), Some(t)) => Some((t.tensor(), s.perm.as_slice(), s.conj)),
                    _ => None,
                };
                let beta = b.as_ref().map_or(C64::new(0.0, 0.0), |s| s.beta);
                local_axpby(
                    *alpha,
                    &a.0,
                    perm_a,
                    *conj_a,
                    beta,
                    second,
                    Some(d.out_dtype),
                    ctx.threads(),
                )
            }
            ElementwiseOp::Reshape => local_reshape(&a.0, &item.out_shape),
        }
        .map_err(|e| in_item(HandlerError::from(e)))?;
        if r.shape() != item.out_shape.as_slice() || r.dtype() != d.out_dtype {
            return Err(in_item(HandlerError::msg(format!(
                "result {:?} {} differs from the planned {:?} {}",
                r.shape(),
                r.dtype().name(),
                item.out_shape,
                d.out_dtype.name()
            ))));
        }
        let p = store
            .commit(Block(r))
            .map_err(|e| in_item(HandlerError::from(e).context("committing the output block")))?;
        out.push((idx, p.id()));
    }
    tracing::debug!(
        rank = me,
        blocks = out.len(),
        replicas = replicas.len(),
        "elementwise: blocks computed"
    );
    store
        .release_many(&replicas)
        .map_err(|e| HandlerError::from(e).context("dropping the replicas of this command"))?;
    Ok(out)
}
