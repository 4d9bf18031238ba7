//! Worker-side creation of distributed tensors: [`zeros`], [`random`] and
//! [`identity`], and their command `uni20.create.v1`. The root sends only
//! the shape, dtype, tiling, owners and the recipe; each owner builds its
//! blocks with the local `uni20_dispatch` block functions, which key every
//! value on its global element index, so the tensor does not depend on the
//! tiling or on the number of ranks. No payload passes through the root.
//! The planner is in `plan`, the command in `command`.

mod command;
mod plan;

use uni20_dispatch::DType;
use uni20_worker::Controller;

use crate::error::DistError;
use crate::ops::kit::deferred::Output;
use crate::ops::kit::{check_block_bytes, submit_items, Tiling};
use crate::placement::Placement;
use crate::tensor::{DistTensor, TensorMeta};
use command::{CreateV1, Recipe};
use plan::plan_create;

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
    let owners = Placement::Workers.owners(ctl, blocking.num_blocks())?;
    let meta = TensorMeta {
        shape: shape.to_vec(),
        dtype,
        blocking: blocking.clone(),
    };
    let (out, write) = DistTensor::pending(ctl, meta);
    let output = Output {
        tensor: out.clone(),
        write,
    };
    let plan = plan_create(shape, dtype, blocking, recipe, owners);
    submit_items::<CreateV1>(ctl, plan, vec![output], Vec::new());
    Ok(out)
}

/// A tensor of zeros of `shape` and `dtype`, tiled by `block` (a block size,
/// per-mode sizes or a [`Blocking`](crate::Blocking); see [`Tiling`]), each block created by
/// its owner (the compute ranks, round-robin). Returns at once; the blocks
/// exist once the workers reply.
///
/// # Errors
/// Before anything is submitted: the errors of [`Tiling::blocking`];
/// [`DistError::PlanTooLarge`] for a block over
/// [`MAX_BLOCK_BYTES`](crate::plan::MAX_BLOCK_BYTES); [`DistError::Job`] if the
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
