//! The block-sparse layout of a symmetric tensor ([`SymmetricLayout`]): its
//! legs, its flux, and the list of blocks that the charge rule allows,
//! enumerated without visiting the product of all sector combinations.
//!
//! A block is one tile per leg; it exists only when the sectors of its tiles
//! satisfy `sum_l s_l q_l = flux` (`s_l = +1` for `Out`, `-1` for `In`, see
//! [`Direction`]). Absent blocks are exact zeros. The layout's size grows
//! with the number of allowed blocks, not with the product of the legs'
//! tile counts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::group::{Charge, Symmetry, SymmetryError};
use super::leg::{Direction, Leg};
use crate::layout::odometer_step;

/// One allowed block: the tile of each leg and the sector that tile
/// belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SymBlock {
    /// Global tile number along each leg (see [`Leg::tile`]).
    pub tiles: Vec<usize>,
    /// Sector index along each leg.
    pub sectors: Vec<usize>,
}

/// The block-sparse structure of a symmetric tensor: legs, flux and the
/// charge-allowed blocks, sorted by their tile tuples (row-major order).
///
/// Serialized as its group, legs and flux only (what a manifest or a
/// checkpoint stores); the allowed blocks are enumerated again when it is
/// read, so a stored layout cannot disagree with the charge rule.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "LayoutWire")]
pub struct SymmetricLayout {
    symmetry: Symmetry,
    legs: Vec<Leg>,
    flux: Charge,
    blocks: Vec<SymBlock>,
}

#[derive(Serialize, Deserialize)]
struct LayoutWire {
    symmetry: Symmetry,
    legs: Vec<Leg>,
    flux: Charge,
}

impl TryFrom<LayoutWire> for SymmetricLayout {
    type Error = SymmetryError;
    fn try_from(w: LayoutWire) -> Result<SymmetricLayout, SymmetryError> {
        SymmetricLayout::new(w.symmetry, w.legs, w.flux)
    }
}

/// [`LayoutWire`] borrowed: a layout is written without copying its legs
/// and blocks (it is encoded for every descriptor, manifest and plan-cache
/// key that names it). The same encoding as [`LayoutWire`].
#[derive(Serialize)]
struct LayoutWireRef<'a> {
    symmetry: &'a Symmetry,
    legs: &'a [Leg],
    flux: &'a Charge,
}

impl Serialize for SymmetricLayout {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        LayoutWireRef {
            symmetry: &self.symmetry,
            legs: &self.legs,
            flux: &self.flux,
        }
        .serialize(s)
    }
}

/// Checks that every leg has `symmetry` (the first leg's, or `flux_group`
/// for a rank-0 tensor).
fn common_group(legs: &[Leg], flux_group: &Symmetry) -> Result<Symmetry, SymmetryError> {
    for (k, l) in legs.iter().enumerate() {
        if l.symmetry() != flux_group {
            return Err(SymmetryError::GroupMismatch {
                what: format!("leg {k} against the tensor's group"),
                first: l.symmetry().clone(),
                second: flux_group.clone(),
            });
        }
    }
    Ok(flux_group.clone())
}

/// Every sector tuple of `legs` (one sector index per leg) that satisfies
/// the charge rule with flux `flux`, in lexicographic order.
///
/// The search walks the sectors of all legs but the last and finds the one
/// sector of the last leg that completes the rule by binary search, so its
/// cost is the product of the first `r - 1` legs' sector counts (times
/// log), not of all `r`.
///
/// # Errors
/// [`SymmetryError::GroupMismatch`] when a leg's group differs from
/// `symmetry`; [`SymmetryError::Overflow`] from U(1) fusion.
pub fn allowed_sectors(symmetry: &Symmetry, legs: &[Leg], flux: &Charge) -> Result<Vec<Vec<usize>>, SymmetryError> {
    common_group(legs, symmetry)?;
    symmetry.check(flux)?;
    let mut out = Vec::new();
    if legs.is_empty() {
        if *flux == symmetry.identity() {
            out.push(Vec::new());
        }
        return Ok(out);
    }
    let mut prefix = Vec::with_capacity(legs.len());
    walk(symmetry, legs, flux, &symmetry.identity(), &mut prefix, &mut out)?;
    Ok(out)
}

fn walk(
    g: &Symmetry,
    legs: &[Leg],
    flux: &Charge,
    acc: &Charge,
    prefix: &mut Vec<usize>,
    out: &mut Vec<Vec<usize>>,
) -> Result<(), SymmetryError> {
    let k = prefix.len();
    if k + 1 == legs.len() {
        // s_last q_last = flux - acc.
        let need = g.fuse(flux, &g.dual(acc)?)?;
        let q = match legs[k].direction() {
            Direction::Out => need,
            Direction::In => g.dual(&need)?,
        };
        if let Some(s) = legs[k].find_sector(&q) {
            let mut t = prefix.clone();
            t.push(s);
            out.push(t);
        }
        return Ok(());
    }
    for s in 0..legs[k].sectors().len() {
        let next = g.fuse(acc, &legs[k].signed_charge(s)?)?;
        prefix.push(s);
        walk(g, legs, flux, &next, prefix, out)?;
        prefix.pop();
    }
    Ok(())
}

impl SymmetricLayout {
    /// The layout of a tensor with `legs` and total charge `flux`.
    ///
    /// `symmetry` is the group of every leg and of the flux (needed to
    /// type a rank-0 tensor).
    ///
    /// # Errors
    /// [`SymmetryError::GroupMismatch`] when a leg's group differs;
    /// a `flux` that is not of the group ([`SymmetryError::ComponentCount`],
    /// [`SymmetryError::OutOfRange`]); [`SymmetryError::NoAllowedBlock`]
    /// when no sector combination satisfies the charge rule (such a tensor
    /// could only be zero, which is almost always a wrong flux or leg).
    pub fn new(symmetry: Symmetry, legs: Vec<Leg>, flux: Charge) -> Result<SymmetricLayout, SymmetryError> {
        let tuples = allowed_sectors(&symmetry, &legs, &flux)?;
        if tuples.is_empty() {
            return Err(SymmetryError::NoAllowedBlock { flux, legs: legs.len() });
        }
        let mut blocks = Vec::new();
        for sectors in tuples {
            let ranges: Vec<_> = sectors.iter().zip(&legs).map(|(&s, l)| l.tile_range(s)).collect();
            let lo: Vec<usize> = ranges.iter().map(|r| r.start).collect();
            let hi: Vec<usize> = ranges.iter().map(|r| r.end).collect();
            let mut tiles = lo.clone();
            // Every tile tuple of the sector tuple (last leg fastest).
            loop {
                blocks.push(SymBlock {
                    tiles: tiles.clone(),
                    sectors: sectors.clone(),
                });
                if !odometer_step(&mut tiles, &lo, &hi) {
                    break;
                }
            }
        }
        blocks.sort_by(|a, b| a.tiles.cmp(&b.tiles));
        Ok(SymmetricLayout {
            symmetry,
            legs,
            flux,
            blocks,
        })
    }

    /// The symmetry group.
    pub fn symmetry(&self) -> &Symmetry {
        &self.symmetry
    }

    /// The legs, in mode order.
    pub fn legs(&self) -> &[Leg] {
        &self.legs
    }

    /// The total charge.
    pub fn flux(&self) -> &Charge {
        &self.flux
    }

    /// The allowed blocks, sorted by tile tuple.
    pub fn blocks(&self) -> &[SymBlock] {
        &self.blocks
    }

    /// The index of the block with tile tuple `tiles`, or `None` when that
    /// block is not allowed (an exact zero) or out of range.
    pub fn find(&self, tiles: &[usize]) -> Option<usize> {
        self.blocks.binary_search_by(|b| b.tiles.as_slice().cmp(tiles)).ok()
    }

    /// The shape of the dense embedding (each leg's total dimension).
    pub fn dense_shape(&self) -> Vec<usize> {
        self.legs.iter().map(Leg::dim).collect()
    }

    /// The extents of block `b` along each leg. Panics if `b` is out of
    /// range.
    pub fn block_extents(&self, b: usize) -> Vec<usize> {
        self.blocks[b]
            .tiles
            .iter()
            .zip(&self.legs)
            .map(|(&t, l)| l.tile(t).map(|x| x.extent).unwrap_or(0))
            .collect()
    }

    /// The offsets of block `b` in the dense embedding. Panics if `b` is out
    /// of range.
    pub fn block_offsets(&self, b: usize) -> Vec<usize> {
        self.blocks[b]
            .tiles
            .iter()
            .zip(&self.legs)
            .map(|(&t, l)| l.tile(t).map(|x| x.offset).unwrap_or(0))
            .collect()
    }

    /// Number of stored elements (the sum over allowed blocks of their
    /// sizes), against `dense_shape().product()` for the dense embedding.
    pub fn stored_elements(&self) -> usize {
        (0..self.blocks.len())
            .map(|b| self.block_extents(b).iter().product::<usize>())
            .sum()
    }

    /// Stored elements per charge sector tuple, keyed by the sector tuple:
    /// the sizes of the dense matrices a sector-wise kernel works on.
    pub fn sector_sizes(&self) -> BTreeMap<Vec<usize>, usize> {
        let mut m = BTreeMap::new();
        for b in &self.blocks {
            let n: usize = b
                .sectors
                .iter()
                .zip(&self.legs)
                .map(|(&s, l)| l.sectors()[s].dim)
                .product();
            m.insert(b.sectors.clone(), n);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symmetry::u1_test_leg;

    /// The borrowed encoding is the wire struct's, and reads back equal.
    #[test]
    fn encoding_is_the_wire_struct_and_round_trips() {
        let (_, lay) = spin_half_mps_layout();
        let wire = LayoutWire {
            symmetry: lay.symmetry.clone(),
            legs: lay.legs.clone(),
            flux: lay.flux.clone(),
        };
        let bytes = postcard::to_stdvec(&lay).unwrap();
        assert_eq!(bytes, postcard::to_stdvec(&wire).unwrap());
        let back: SymmetricLayout = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, lay);
    }

    /// A(left In, phys In, right Out) with 2Sz charges: right = left + phys.
    fn spin_half_mps_layout() -> (Symmetry, SymmetricLayout) {
        let g = Symmetry::u1();
        let left = u1_test_leg(Direction::In, &[(-1, 2), (1, 2)], 8);
        let phys = u1_test_leg(Direction::In, &[(-1, 1), (1, 1)], 8);
        let right = u1_test_leg(Direction::Out, &[(-2, 1), (0, 3), (2, 1)], 2);
        let lay = SymmetricLayout::new(g.clone(), vec![left, phys, right], g.identity()).unwrap();
        (g, lay)
    }

    #[test]
    fn spin_half_mps_tensor() {
        let (g, lay) = spin_half_mps_layout();
        // Allowed sector tuples: (-1,-1,-2), (-1,1,0), (1,-1,0), (1,1,2).
        assert_eq!(
            allowed_sectors(&g, lay.legs(), lay.flux()).unwrap(),
            vec![vec![0, 0, 0], vec![0, 1, 1], vec![1, 0, 1], vec![1, 1, 2]]
        );
        // Sector 0 of `right` has dim 3 cut into tiles 2 + 1: 2 blocks each for the middle tuples.
        assert_eq!(lay.blocks().len(), 6);
        assert_eq!(lay.dense_shape(), vec![4, 2, 5]);
        assert_eq!(lay.stored_elements(), 2 + 2 * 3 + 2 * 3 + 2);
        let b = lay.find(&[1, 0, 2]).unwrap();
        assert_eq!(lay.block_extents(b), vec![2, 1, 1]);
        assert_eq!(lay.block_offsets(b), vec![2, 0, 3]);
        assert_eq!(lay.find(&[0, 0, 1]), None, "charge-forbidden block");
    }

    #[test]
    fn impossible_flux_and_group_mismatch_are_errors() {
        let g = Symmetry::u1();
        let a = u1_test_leg(Direction::Out, &[(0, 2)], 4);
        assert!(matches!(
            SymmetricLayout::new(g.clone(), vec![a.clone(), a.dual()], g.charge(&[1]).unwrap()),
            Err(SymmetryError::NoAllowedBlock { .. })
        ));
        let z2 = Symmetry::zn(2).unwrap();
        assert!(matches!(
            SymmetricLayout::new(z2.clone(), vec![a], z2.identity()),
            Err(SymmetryError::GroupMismatch { .. })
        ));
        // Rank 0: allowed only with the identity flux.
        assert_eq!(
            SymmetricLayout::new(g.clone(), vec![], g.identity())
                .unwrap()
                .blocks()
                .len(),
            1
        );
        assert!(SymmetricLayout::new(g.clone(), vec![], g.charge(&[2]).unwrap()).is_err());
    }
}
