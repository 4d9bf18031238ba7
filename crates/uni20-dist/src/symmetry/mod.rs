//! Abelian symmetries for block-sparse tensors: groups and charges
//! ([`Symmetry`], [`Charge`]), legs with sectors and tilings ([`Leg`]), the
//! charge rule and the allowed blocks ([`SymmetricLayout`]), and fusion of
//! adjacent legs ([`Fusion`]), and the block pairs of a contraction
//! ([`plan_pairs`]), the dense embedding both ways ([`embed_blocks`],
//! [`split_dense`]), and the root's truncation decision for a sector-wise
//! SVD ([`truncate_sectors`]).
//!
//! A charge sector is a block: a symmetric tensor stores only the blocks
//! whose sectors satisfy `sum_l s_l q_l = flux`; every other block is an
//! exact zero and is never stored, sent, planned or computed. The dense
//! tensor is the special case of the trivial group (one sector per leg).
//! This module is the metadata layer (pure values, no ranks) that the
//! root plans from; see docs/architecture.md, "Symmetric layout".

mod dense;
mod fuse;
mod group;
mod layout;
mod leg;
mod pairs;
mod truncate;

pub use dense::{embed_blocks, split_dense, DenseEmbeddingError};
pub use fuse::{Fusion, FusionEntry};
pub use group::{Charge, GroupFactor, Symmetry, SymmetryError};
pub use layout::{allowed_sectors, SymBlock, SymmetricLayout};
pub use leg::{Direction, Leg, LegTile, Sector};
pub use pairs::{plan_pairs, PairItem, PairPlan, SymContractError};
pub use truncate::{truncate_sectors, SectorCut};

#[cfg(test)]
mod props;

/// Deterministic test values in `[-1, 1]` (xorshift of `seed`, three
/// decimals), shared by the property tests of this module.
#[cfg(test)]
fn test_values(seed: u64) -> impl FnMut() -> f64 {
    let mut state = seed | 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 2001) as f64 / 1000.0 - 1.0
    }
}

/// A U(1) leg with sectors `(charge, dim)` in tiles of at most `tile`, for
/// the tests of this crate.
#[cfg(test)]
pub(crate) fn u1_test_leg(dir: Direction, sectors: &[(i64, usize)], tile: usize) -> Leg {
    Leg::u1(dir, sectors, tile).unwrap()
}
