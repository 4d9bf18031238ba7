//! Worker-side creation of distributed tensors: [`zeros`], [`random`] and
//! [`identity`], and their command `uni20.create.v1`. The root sends only
//! the shape, dtype, tiling, owners and the recipe; each owner builds its
//! blocks with the local `uni20_dispatch` block functions, which key every
//! value on its global element index, so the tensor does not depend on the
//! tiling or on the number of ranks. No payload passes through the root.

use serde::{Deserialize, Serialize};
use uni20_dispatch::{identity_block, random_block, zeros_block, DType};
use uni20_persist::ObjectId;
use uni20_worker::{command, Controller, HandlerError, WorkerContext};

use crate::error::DistError;
use crate::layout::Blocking;
use crate::ops::deferred::Output;
use crate::ops::reblock::{check_block_bytes, participants_of, submit_items, ItemPlan, Tiling};
use crate::placement::Placement;
use crate::summary::PlanSummary;
use crate::tensor::{Block, DistTensor, TensorMeta};

/// What the blocks of a new tensor hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Recipe {
    /// Zeros.
    Zeros,
    /// Uniform values on `[-1, 1)` (independent real and imaginary parts)
    /// drawn by [`uni20_dispatch::random_block`] with this seed.
    Random {
        /// The seed.
        seed: u64,
    },
    /// The identity between the fused index of the first `row_modes` modes
    /// and that of the others ([`uni20_dispatch::identity_block`]).
    Identity {
        /// Number of leading modes that form the rows.
        row_modes: usize,
    },
}

/// The `uni20.create.v1` descriptor, identical on every participant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateDescV1 {
    /// What the blocks hold.
    pub recipe: Recipe,
    /// Element type.
    pub dtype: DType,
    /// Global shape.
    pub shape: Vec<usize>,
    /// Block tiling.
    pub blocking: Blocking,
    /// Owner of each block (row-major block order).
    pub owners: Vec<usize>,
}

command!(
    /// The command `uni20.create.v1`. Reply of each participant: `(block
    /// number, object id)` of every block it created.
    pub CreateV1 = "uni20.create.v1", schema 1, CreateDescV1 => Vec<(usize, ObjectId)>, handle_create
);

fn handle_create(ctx: &mut WorkerContext<'_>, d: CreateDescV1) -> Result<Vec<(usize, ObjectId)>, HandlerError> {
    let me = ctx.rank();
    let mut out = Vec::new();
    for (b, _) in d.owners.iter().enumerate().filter(|(_, &o)| o == me) {
        let multi = d.blocking.multi(b);
        let (offset, shape) = (d.blocking.block_offset(&multi), d.blocking.block_shape(&multi));
        let t = match d.recipe {
            Recipe::Zeros => zeros_block(d.dtype, &shape),
            Recipe::Random { seed } => random_block(seed, d.dtype, &d.shape, &offset, &shape),
            Recipe::Identity { row_modes } => identity_block(d.dtype, &d.shape, row_modes, &offset, &shape),
        }
        .map_err(|e| HandlerError::from(e).context(format!("creating block {b} ({:?})", d.recipe)))?;
        let p = ctx
            .store()
            .commit(Block(t))
            .map_err(|e| HandlerError::from(e).context(format!("committing block {b}")))?;
        out.push((b, p.id()));
    }
    tracing::debug!(rank = me, blocks = out.len(), recipe = ?d.recipe, "create: blocks committed");
    Ok(out)
}

/// Creates a tensor of `shape` and `dtype` whose blocks hold `recipe`,
/// owned round-robin by the compute ranks; returns at once.
fn create(
    ctl: &Controller<'_>,
    shape: &[usize],
    dtype: DType,
    tiling: Tiling,
    recipe: Recipe,
) -> Result<DistTensor, DistError> {
    let blocking = tiling.blocking(shape)?;
    check_block_bytes(&blocking, dtype, "the new tensor")?;
    if let Recipe::Identity { row_modes } = recipe {
        if row_modes > shape.len() {
            return Err(uni20_dispatch::BlockError::BadSplit {
                row_modes,
                rank: shape.len(),
            }
            .into());
        }
    }
    if ctl.has_failed() {
        ctl.progress()?;
    }
    let n = blocking.num_blocks();
    let owners = Placement::Workers.owners(ctl, n)?;
    let participants = participants_of(owners.iter().copied(), &[]);
    let mut summary = PlanSummary::from_parts("create", owners.iter().copied(), 0, &[], &participants);
    summary.notes.push(format!("{recipe:?}"));
    let meta = TensorMeta {
        shape: shape.to_vec(),
        dtype,
        blocking: blocking.clone(),
    };
    let (out, write) = DistTensor::pending(ctl, meta);
    let plan = ItemPlan {
        descriptor: CreateDescV1 {
            recipe,
            dtype,
            shape: shape.to_vec(),
            blocking,
            owners,
        },
        participants,
        summary,
        out_blocks: (0..n).collect(),
        n_blocks: n,
    };
    let output = Output {
        tensor: out.clone(),
        write,
    };
    submit_items::<CreateV1>(ctl, plan, vec![output], Vec::new());
    Ok(out)
}

/// A tensor of zeros of `shape` and `dtype`, tiled by `block` (a block size,
/// per-mode sizes or a [`Blocking`]; see [`Tiling`]), each block created by
/// its owner (the compute ranks, round-robin). Returns at once; the blocks
/// exist once the workers reply.
///
/// # Errors
/// Before anything is submitted: the errors of [`Tiling::blocking`];
/// [`DistError::PlanTooLarge`] for a block over
/// [`MAX_BLOCK_BYTES`](crate::MAX_BLOCK_BYTES); [`DistError::Job`] if the
/// job already stopped.
pub fn zeros(
    ctl: &Controller<'_>,
    shape: &[usize],
    dtype: DType,
    block: impl Into<Tiling>,
) -> Result<DistTensor, DistError> {
    create(ctl, shape, dtype, block.into(), Recipe::Zeros)
}

/// A random tensor of `shape` and `dtype`: element with global row-major
/// index `g` is `uni20_dispatch::random_block`'s value for `(seed, g)`
/// (ChaCha8 seeked to the element; real and imaginary parts uniform on
/// `[-1, 1)`; a real dtype takes the real part), so the tensor is the same,
/// bit for bit, for every tiling and every number of ranks, and equals
/// `random_block(seed, dtype, shape, &[0; r], shape)` computed locally.
/// Each block is created by its owner; returns at once.
///
/// # Errors
/// As [`zeros`].
pub fn random(
    ctl: &Controller<'_>,
    shape: &[usize],
    dtype: DType,
    block: impl Into<Tiling>,
    seed: u64,
) -> Result<DistTensor, DistError> {
    create(ctl, shape, dtype, block.into(), Recipe::Random { seed })
}

/// The identity of `shape` viewed as a matrix whose rows are the first
/// `row_modes` modes and whose columns are the others: element
/// `(i_0, .., i_{r-1})` is 1 when the row-major fused index of
/// `(i_0 .. i_{row_modes-1})` equals that of `(i_{row_modes} .. i_{r-1})`,
/// else 0. For a matrix: `identity(ctl, &[n, m], dtype, block, 1)` (numpy's
/// `eye(n, m)`); for an operator on modes `ab`: `identity(ctl, &[a, b, a, b],
/// dtype, block, 2)`. Each block is created by its owner; returns at once.
///
/// # Errors
/// As [`zeros`]; [`DistError::Block`] (`BlockError::BadSplit`) if
/// `row_modes` exceeds the rank.
pub fn identity(
    ctl: &Controller<'_>,
    shape: &[usize],
    dtype: DType,
    block: impl Into<Tiling>,
    row_modes: usize,
) -> Result<DistTensor, DistError> {
    create(ctl, shape, dtype, block.into(), Recipe::Identity { row_modes })
}
