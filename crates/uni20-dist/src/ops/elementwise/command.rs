//! The `uni20.elementwise.v1` command: its descriptor (the operation, and
//! one item per output block: the block of `a` it comes from and, for an
//! `axpby`, the box of `b` with the blocks overlapping it; for a linear
//! combination, the box of every further term) and its
//! per-item compute with the local `uni20_dispatch` kernels; the kit's
//! [`handle_items`] exchanges, commits and replies.

use serde::{Deserialize, Serialize};
use uni20_dispatch::{
    axpby as local_axpby, lincomb as local_lincomb, reshape as local_reshape, DType, LocalTensor, C64,
};
use uni20_persist::{ObjectId, PersistentPtr};
use uni20_worker::{command, HandlerError, KernelContext};

use crate::ops::kit::{handle_items, item_work_fields, BoxSource, ItemWork};
use crate::tensor::{Block, BlockRef};
use crate::transfer::record::Transfer;

/// The second operand of an [`ElementwiseOp::Axpby`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SecondOperand {
    /// Its scale (nonzero: a zero `beta` has no second operand).
    pub(crate) beta: C64,
    /// Output axis `k` is axis `perm[k]` of `b`.
    pub(crate) perm: Vec<usize>,
    /// Read `b` conjugated.
    pub(crate) conj: bool,
}

/// What every item computes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub(crate) enum ElementwiseOp {
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
    /// `out = sum_k coefs[k] * x_k`, `x_0` the block of `a` and `x_k` the
    /// box of term `k` (the item's `rest[k - 1]`), all in output order
    /// (`uni20_dispatch::lincomb`).
    Combination {
        /// One coefficient per term, the first for `a`.
        coefs: Vec<C64>,
    },
}

/// One output block, computed by `rank`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ElementwiseItem {
    /// Rank that computes and owns the output block.
    pub(crate) rank: usize,
    /// Output block number.
    pub(crate) out_block: usize,
    /// Output block shape.
    pub(crate) out_shape: Vec<usize>,
    /// The block of `a` the output block comes from.
    pub(crate) a: BlockRef,
    /// The box of `b` (in `b`'s mode order) and its overlapping blocks.
    pub(crate) b: Option<BoxSource>,
    /// For a [`ElementwiseOp::Combination`], the box of each term after
    /// the first (empty otherwise).
    pub(crate) rest: Vec<BoxSource>,
}

/// The `uni20.elementwise.v1` descriptor: the whole plan, of which each participant
/// receives its share (its own items and the transfers it takes part in).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ElementwiseDescV1 {
    /// The operation.
    pub(crate) op: ElementwiseOp,
    /// Output element type.
    pub(crate) out_dtype: DType,
    /// One item per output block.
    pub(crate) items: Vec<ElementwiseItem>,
    /// Worker-to-worker block transfers (the `i`-th between one sender and one receiver uses the tags of `i`).
    pub(crate) transfers: Vec<Transfer>,
    /// Output IDs named by the root before submission, one entry per rank
    /// with items (empty: each rank's store issues fresh IDs).
    pub(crate) out_names: Vec<crate::ops::kit::NamedOutputs>,
    /// Keep the replicas this command's transfers deliver after it: the
    /// root records them and releases them later (replicas kept between
    /// commands); `false`: each rank drops them when the command is done.
    pub(crate) hold_replicas: bool,
}

command!(
    /// The command `uni20.elementwise.v1`. Reply of each participant: `(item
    /// index, object id)` of every output block it committed.
    pub(crate) ElementwiseV1 = "uni20.elementwise.v1", schema 4, ElementwiseDescV1 => Vec<(usize, ObjectId)>, handle_items::<ElementwiseDescV1>
);

impl ItemWork for ElementwiseDescV1 {
    item_work_fields!(ElementwiseItem);
    const OPERATION: &'static str = "element-wise";
    fn cost(&self, item: &ElementwiseItem) -> Option<u64> {
        // A few operations per element written (and per further term read).
        Some(4 * (1 + item.rest.len() as u64) * item.out_shape.iter().map(|&n| n as u64).product::<u64>())
    }
    fn out_elements(&self, item: &ElementwiseItem) -> Option<u64> {
        Some(item.out_shape.iter().map(|&n| n as u64).product())
    }
    fn compute(&self, ctx: &KernelContext<'_>, _: usize, item: &ElementwiseItem) -> Result<LocalTensor, HandlerError> {
        let store = ctx.store();
        let a = store
            .load_wait(PersistentPtr::<Block>::from_id(item.a.id))
            .map_err(|e| HandlerError::from(e).with_object(item.a.id))?;
        let r = match &self.op {
            ElementwiseOp::Axpby {
                alpha,
                perm_a,
                conj_a,
                b,
            } => {
                let bt = match (b, &item.b) {
                    (Some(_), Some(src)) => Some(src.assemble(store)?),
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
                    Some(self.out_dtype),
                    ctx.threads(),
                )
            }
            ElementwiseOp::Reshape => local_reshape(&a.0, &item.out_shape),
            ElementwiseOp::Combination { coefs } => {
                if coefs.len() != 1 + item.rest.len() {
                    return Err(HandlerError::msg(format!(
                        "lincomb item with {} coefficients for {} terms",
                        coefs.len(),
                        1 + item.rest.len()
                    )));
                }
                let rest = item
                    .rest
                    .iter()
                    .map(|src| src.assemble(store))
                    .collect::<Result<Vec<_>, _>>()?;
                let terms: Vec<(C64, &LocalTensor)> = std::iter::once(&a.0)
                    .chain(rest.iter().map(|t| t.tensor()))
                    .zip(coefs)
                    .map(|(t, &c)| (c, t))
                    .collect();
                local_lincomb(&terms, Some(self.out_dtype), ctx.threads())
            }
        }?;
        if r.shape() != item.out_shape.as_slice() || r.dtype() != self.out_dtype {
            return Err(HandlerError::msg(format!(
                "result {:?} {} differs from the planned {:?} {}",
                r.shape(),
                r.dtype().name(),
                item.out_shape,
                self.out_dtype.name()
            )));
        }
        Ok(r)
    }
}
