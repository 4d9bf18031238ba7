//! The `uni20.create.v1` command: its descriptor (recipe, shape, dtype,
//! tiling, the owner of each stored block and, for a symmetric tensor, the
//! tiles of its allowed blocks) and its per-block compute with the
//! local `uni20_dispatch` block functions; the kit's [`handle_items`]
//! commits and replies.

use serde::{Deserialize, Serialize};
use uni20_dispatch::{identity_block, random_block, zeros_block, DType, LocalTensor};
use uni20_persist::ObjectId;
use uni20_worker::{command, HandlerError, KernelContext};

use crate::layout::Blocking;
use crate::ops::kit::{handle_items, ItemWork};
use crate::transfer::record::Transfer;

/// What the blocks of a new tensor hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub(crate) enum Recipe {
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
pub(crate) struct CreateDescV1 {
    /// What the blocks hold.
    pub(crate) recipe: Recipe,
    /// Element type.
    pub(crate) dtype: DType,
    /// Global shape.
    pub(crate) shape: Vec<usize>,
    /// Block tiling.
    pub(crate) blocking: Blocking,
    /// Owner of each stored block.
    pub(crate) owners: Vec<usize>,
    /// For a symmetric tensor, the multi-index in `blocking` of each stored
    /// (charge-allowed) block; empty for a dense tensor, whose stored
    /// blocks are all blocks of `blocking` in row-major order.
    pub(crate) tiles: Vec<Vec<usize>>,
}

command!(
    /// The command `uni20.create.v1`. Reply of each participant: `(block
    /// number, object id)` of every block it created.
    pub(crate) CreateV1 = "uni20.create.v1", schema 1, CreateDescV1 => Vec<(usize, ObjectId)>, handle_items::<CreateDescV1>
);

impl ItemWork for CreateDescV1 {
    /// The owner of each block.
    type Item = usize;
    const OPERATION: &'static str = "create";
    fn work(&self) -> (&[usize], &[Transfer]) {
        (&self.owners, &[])
    }
    fn place(b: usize, owner: &usize) -> (usize, usize) {
        (*owner, b)
    }
    fn compute(&self, _: &KernelContext<'_>, b: usize, _: &usize) -> Result<LocalTensor, HandlerError> {
        let multi = match self.tiles.get(b) {
            Some(t) => t.clone(),
            None => self.blocking.multi(b),
        };
        let (offset, shape) = (self.blocking.block_offset(&multi), self.blocking.block_shape(&multi));
        let t = match self.recipe {
            Recipe::Zeros => zeros_block(self.dtype, &shape),
            Recipe::Random { seed } => random_block(seed, self.dtype, &self.shape, &offset, &shape),
            Recipe::Identity { row_modes } => identity_block(self.dtype, &self.shape, row_modes, &offset, &shape),
        };
        t.map_err(|e| HandlerError::from(e).context(format!("{:?}", self.recipe)))
    }
}
