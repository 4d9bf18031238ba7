//! Worker-side creation of distributed tensors: [`zeros`], [`random`] and
//! [`identity`], and their command `uni20.create.v1`. The root sends only
//! the shape, dtype, tiling, owners and the recipe; each owner builds its
//! blocks with the local `uni20_dispatch` block functions, which key every
//! value on its global element index, so the tensor does not depend on the
//! tiling or on the number of ranks. No payload passes through the root.
//! The planner is in `plan`, the command in `command`.

mod command;
mod plan;

use std::sync::Arc;

use uni20_dispatch::DType;
use uni20_worker::Controller;

use crate::error::DistError;
use crate::ops::kit::deferred::Output;
use crate::ops::kit::{check_block_bytes, submit_items, Tiling};
use crate::placement::Placement;
use crate::symmetry::{Leg, SymmetricLayout, SymmetryError};
use crate::tensor::{DistTensor, TensorMeta};
use command::{CreateV1, Recipe};
use plan::plan_create;

/// Creates a dense tensor of `shape` and `dtype` whose blocks hold `recipe`,
/// owned round-robin by the compute ranks; returns at once.
fn create(
    ctl: &Controller<'_>,
    shape: &[usize],
    dtype: DType,
    tiling: Tiling,
    recipe: Recipe,
) -> Result<DistTensor, DistError> {
    let blocking = tiling.blocking(shape)?;
    create_meta(ctl, TensorMeta::dense(shape.to_vec(), dtype, blocking), recipe)
}

/// Creates the stored blocks of `meta` (dense or symmetric) holding
/// `recipe`, owned round-robin by the compute ranks; returns at once.
fn create_meta(ctl: &Controller<'_>, meta: TensorMeta, recipe: Recipe) -> Result<DistTensor, DistError> {
    let shape = &meta.shape;
    check_block_bytes(&meta.blocking, meta.dtype, "the new tensor")?;
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
    let owners = Placement::Workers.owners(ctl, meta.stored_blocks())?;
    let plan = plan_create(&meta, recipe, owners);
    let (out, write) = DistTensor::pending(ctl, meta);
    let output = Output {
        tensor: out.clone(),
        write,
    };
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

/// A symmetric tensor of zeros with `layout` (legs, flux) and `dtype`: only
/// its charge-allowed blocks are created, each by its owner (the compute
/// ranks, round-robin). Returns at once.
///
/// # Errors
/// [`DistError::Blocking`] when the layout's tiling has too many blocks;
/// otherwise as [`zeros`].
pub fn sym_zeros(
    ctl: &Controller<'_>,
    layout: impl Into<Arc<SymmetricLayout>>,
    dtype: DType,
) -> Result<DistTensor, DistError> {
    create_meta(ctl, TensorMeta::symmetric(layout.into(), dtype)?, Recipe::Zeros)
}

/// A random symmetric tensor with `layout` (its flux chooses the sector)
/// and `dtype`: an allowed block holds the values [`random`] gives the
/// same positions of the dense embedding with the same `seed`, so the
/// dense embedding is the dense random tensor with every charge-forbidden
/// block set to zero, for every tiling and rank count. Returns at once.
///
/// # Errors
/// As [`sym_zeros`].
pub fn sym_random(
    ctl: &Controller<'_>,
    layout: impl Into<Arc<SymmetricLayout>>,
    dtype: DType,
    seed: u64,
) -> Result<DistTensor, DistError> {
    create_meta(
        ctl,
        TensorMeta::symmetric(layout.into(), dtype)?,
        Recipe::Random { seed },
    )
}

/// The identity on `legs` as a symmetric tensor: its legs are `legs`
/// followed by their duals ([`Leg::dual`]), its flux the group's identity,
/// and its dense embedding is [`identity`] with `row_modes = legs.len()`
/// (every nonzero of that identity lies in a charge-allowed block). Returns
/// at once.
///
/// # Errors
/// [`DistError::Symmetry`] when `legs` is empty (`LegCount`) or the legs'
/// groups differ;
/// otherwise as [`sym_zeros`].
pub fn sym_identity(ctl: &Controller<'_>, legs: &[Leg], dtype: DType) -> Result<DistTensor, DistError> {
    let Some(first) = legs.first() else {
        return Err(SymmetryError::LegCount {
            what: "the legs of sym_identity (at least one)".into(),
            expected: 1,
            got: 0,
        }
        .into());
    };
    let g = first.symmetry().clone();
    let all: Vec<Leg> = legs.iter().cloned().chain(legs.iter().map(Leg::dual)).collect();
    let layout = SymmetricLayout::new(g.clone(), all, g.identity())?;
    create_meta(
        ctl,
        TensorMeta::symmetric(Arc::new(layout), dtype)?,
        Recipe::Identity { row_modes: legs.len() },
    )
}
