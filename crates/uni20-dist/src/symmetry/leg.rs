//! Legs of symmetric tensors: a [`Direction`] and an ordered list of
//! [`Sector`]s (charge, dimension), each sector tiled into one or more
//! blocks along the leg so that a large sector can spread over ranks.
//!
//! The dense embedding of a leg lays its sectors out one after the other in
//! charge order, and each sector's tiles one after the other inside it.

use serde::{Deserialize, Serialize};

use super::group::{Charge, Symmetry, SymmetryError};

/// The direction of a leg: whether its charges enter the charge rule with a
/// plus (`Out`) or a minus (`In`) sign.
///
/// A tensor with legs `l` and flux `f` has nonzero blocks only where
/// `sum_{l Out} q_l - sum_{l In} q_l = f` (the convention of ITensor's
/// `Out`/`In` arrows and TeNPy's `qconj`). Two legs can be contracted when
/// they have the same sectors and opposite directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Direction {
    /// Charges count with a minus sign.
    In,
    /// Charges count with a plus sign.
    Out,
}

impl Direction {
    /// The opposite direction.
    pub fn flip(self) -> Direction {
        match self {
            Direction::In => Direction::Out,
            Direction::Out => Direction::In,
        }
    }
}

/// One sector of a leg: the states of charge `charge`, `dim` of them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Sector {
    /// The sector's charge.
    pub charge: Charge,
    /// Number of basis states of that charge (at least 1).
    pub dim: usize,
}

/// A leg of a symmetric tensor: symmetry group, direction, sectors in
/// strictly increasing charge order, and the tiling of each sector into
/// blocks.
///
/// Invariants (checked by every constructor, including deserialization):
/// every charge belongs to the group, charges strictly increase, every
/// sector has a positive dimension, and each sector's tiles are positive
/// and add up to its dimension.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "LegWire", into = "LegWire")]
pub struct Leg {
    symmetry: Symmetry,
    direction: Direction,
    sectors: Vec<Sector>,
    tiles: Vec<Vec<usize>>,
    /// Global tile number of each sector's first tile (length sectors + 1).
    first_tile: Vec<usize>,
    /// Dense offset of each sector (length sectors + 1; the last is the dim).
    sector_offset: Vec<usize>,
}

#[derive(Serialize, Deserialize)]
struct LegWire {
    symmetry: Symmetry,
    direction: Direction,
    sectors: Vec<Sector>,
    tiles: Vec<Vec<usize>>,
}

impl TryFrom<LegWire> for Leg {
    type Error = SymmetryError;
    fn try_from(w: LegWire) -> Result<Leg, SymmetryError> {
        Leg::with_tiles(w.symmetry, w.direction, w.sectors, w.tiles)
    }
}

impl From<Leg> for LegWire {
    fn from(l: Leg) -> LegWire {
        LegWire {
            symmetry: l.symmetry,
            direction: l.direction,
            sectors: l.sectors,
            tiles: l.tiles,
        }
    }
}

/// One block of a leg: tile `tile` (numbered across the whole leg) of
/// sector `sector`, covering dense positions `offset .. offset + extent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LegTile {
    /// Index of the sector in the leg.
    pub sector: usize,
    /// Offset of the tile inside its sector.
    pub offset_in_sector: usize,
    /// Offset of the tile in the leg's dense embedding.
    pub offset: usize,
    /// Number of states in the tile.
    pub extent: usize,
}

impl Leg {
    /// A leg whose sectors are one block each.
    ///
    /// # Errors
    /// [`SymmetryError::UnsortedSectors`], [`SymmetryError::BadSector`] (zero
    /// dimension), or a charge that is not of `symmetry`.
    pub fn new(symmetry: Symmetry, direction: Direction, sectors: Vec<Sector>) -> Result<Leg, SymmetryError> {
        let tiles = sectors.iter().map(|s| vec![s.dim]).collect();
        Leg::with_tiles(symmetry, direction, sectors, tiles)
    }

    /// A leg whose sectors are cut into tiles of at most `max_tile` states
    /// (the last tile of a sector may be smaller).
    ///
    /// # Errors
    /// As [`Leg::new`]; [`SymmetryError::BadSector`] for `max_tile == 0`.
    pub fn tiled(
        symmetry: Symmetry,
        direction: Direction,
        sectors: Vec<Sector>,
        max_tile: usize,
    ) -> Result<Leg, SymmetryError> {
        if max_tile == 0 {
            let charge = sectors.first().map(|s| s.charge.clone()).unwrap_or(symmetry.identity());
            return Err(SymmetryError::BadSector {
                index: 0,
                charge,
                reason: "the tile size must be at least 1".into(),
            });
        }
        let tiles = sectors
            .iter()
            .map(|s| crate::layout::block_extents(s.dim, max_tile))
            .collect();
        Leg::with_tiles(symmetry, direction, sectors, tiles)
    }

    /// A U(1) leg ([`Symmetry::u1`]) from `(charge, dimension)` pairs, in
    /// increasing charge order, each sector cut into tiles of at most
    /// `max_tile` states: the usual way to state a bond or physical leg that
    /// conserves one quantity (2 S^z, particle number). For example, a spin-1/2
    /// site leg is `Leg::u1(Direction::In, &[(-1, 1), (1, 1)], 1)`.
    ///
    /// # Errors
    /// As [`Leg::tiled`]: [`SymmetryError::UnsortedSectors`] when the charges
    /// are not strictly increasing, [`SymmetryError::BadSector`] for a zero
    /// dimension or `max_tile == 0`.
    pub fn u1(direction: Direction, sectors: &[(i64, usize)], max_tile: usize) -> Result<Leg, SymmetryError> {
        let g = Symmetry::u1();
        let sectors = sectors
            .iter()
            .map(|&(q, dim)| {
                Ok(Sector {
                    charge: g.charge(&[q])?,
                    dim,
                })
            })
            .collect::<Result<Vec<_>, SymmetryError>>()?;
        Leg::tiled(g, direction, sectors, max_tile)
    }

    /// A leg with an explicit tiling: `tiles[s]` are the block extents of
    /// sector `s`, in order.
    ///
    /// # Errors
    /// As [`Leg::new`]; [`SymmetryError::LegCount`] when `tiles` does not
    /// have one entry per sector; [`SymmetryError::BadSector`] when a
    /// sector's tiles are empty, contain a zero or do not add up to its
    /// dimension.
    pub fn with_tiles(
        symmetry: Symmetry,
        direction: Direction,
        sectors: Vec<Sector>,
        tiles: Vec<Vec<usize>>,
    ) -> Result<Leg, SymmetryError> {
        if tiles.len() != sectors.len() {
            return Err(SymmetryError::LegCount {
                what: "tiles per sector".into(),
                expected: sectors.len(),
                got: tiles.len(),
            });
        }
        let mut first_tile = Vec::with_capacity(sectors.len() + 1);
        let mut sector_offset = Vec::with_capacity(sectors.len() + 1);
        let (mut t, mut off) = (0usize, 0usize);
        for (index, (s, ts)) in sectors.iter().zip(&tiles).enumerate() {
            symmetry.check(&s.charge)?;
            if index > 0 && sectors[index - 1].charge >= s.charge {
                return Err(SymmetryError::UnsortedSectors {
                    index,
                    charge: s.charge.clone(),
                    previous: sectors[index - 1].charge.clone(),
                });
            }
            let bad = |reason: String| SymmetryError::BadSector {
                index,
                charge: s.charge.clone(),
                reason,
            };
            if s.dim == 0 {
                return Err(bad("dimension 0 (leave the sector out instead)".into()));
            }
            if ts.is_empty() || ts.contains(&0) || ts.iter().try_fold(0usize, |a, &x| a.checked_add(x)) != Some(s.dim) {
                return Err(bad(format!(
                    "tiles {ts:?} do not cut dimension {} into positive parts",
                    s.dim
                )));
            }
            first_tile.push(t);
            sector_offset.push(off);
            t += ts.len();
            off = off
                .checked_add(s.dim)
                .ok_or_else(|| bad("the leg's dimension overflows".into()))?;
        }
        first_tile.push(t);
        sector_offset.push(off);
        Ok(Leg {
            symmetry,
            direction,
            sectors,
            tiles,
            first_tile,
            sector_offset,
        })
    }

    /// The symmetry group of the leg's charges.
    pub fn symmetry(&self) -> &Symmetry {
        &self.symmetry
    }

    /// The leg's direction.
    pub fn direction(&self) -> Direction {
        self.direction
    }

    /// The sectors, in increasing charge order.
    pub fn sectors(&self) -> &[Sector] {
        &self.sectors
    }

    /// The tile extents of sector `s`. Panics if `s` is out of range.
    pub fn sector_tiles(&self, s: usize) -> &[usize] {
        &self.tiles[s]
    }

    /// Total dimension (states over all sectors): the extent of the leg in
    /// the dense embedding.
    pub fn dim(&self) -> usize {
        *self.sector_offset.last().unwrap_or(&0)
    }

    /// Number of tiles (blocks along this leg) over all sectors.
    pub fn tile_count(&self) -> usize {
        *self.first_tile.last().unwrap_or(&0)
    }

    /// Offset of sector `s` in the dense embedding. Panics if `s` is out of
    /// range.
    pub fn sector_offset(&self, s: usize) -> usize {
        self.sector_offset[s]
    }

    /// The sector with charge `q`, if the leg has one (binary search).
    pub fn find_sector(&self, q: &Charge) -> Option<usize> {
        self.sectors.binary_search_by(|s| s.charge.cmp(q)).ok()
    }

    /// The tiles of sector `s`, as global tile numbers `first..last`.
    pub fn tile_range(&self, s: usize) -> std::ops::Range<usize> {
        self.first_tile[s]..self.first_tile[s + 1]
    }

    /// Tile `t` (numbered across the whole leg).
    ///
    /// # Errors
    /// [`SymmetryError::OutOfBounds`] when `t >= tile_count()`.
    pub fn tile(&self, t: usize) -> Result<LegTile, SymmetryError> {
        if t >= self.tile_count() {
            return Err(SymmetryError::OutOfBounds {
                what: "tile",
                index: t,
                len: self.tile_count(),
            });
        }
        // first_tile is sorted; the sector is the last one starting at or before t.
        let sector = self.first_tile.partition_point(|&f| f <= t) - 1;
        let k = t - self.first_tile[sector];
        let offset_in_sector: usize = self.tiles[sector][..k].iter().sum();
        Ok(LegTile {
            sector,
            offset_in_sector,
            offset: self.sector_offset[sector] + offset_in_sector,
            extent: self.tiles[sector][k],
        })
    }

    /// The same leg with the opposite direction (same sectors and tiles):
    /// the leg that can be contracted with this one.
    pub fn dual(&self) -> Leg {
        Leg {
            direction: self.direction.flip(),
            ..self.clone()
        }
    }

    /// The leg with sectors re-tiled into tiles of at most `max_tile`.
    ///
    /// # Errors
    /// [`SymmetryError::BadSector`] for `max_tile == 0`.
    pub fn retiled(&self, max_tile: usize) -> Result<Leg, SymmetryError> {
        Leg::tiled(self.symmetry.clone(), self.direction, self.sectors.clone(), max_tile)
    }

    /// True when `other` has the same group and sector list (charges and
    /// dimensions); tilings and directions may differ.
    pub fn same_sectors(&self, other: &Leg) -> bool {
        self.symmetry == other.symmetry && self.sectors == other.sectors
    }

    /// The signed charge `+q` (Out) or `-q` (In) of sector `s`: its
    /// contribution to the charge rule.
    ///
    /// # Errors
    /// [`SymmetryError::Overflow`] from the negation.
    pub fn signed_charge(&self, s: usize) -> Result<Charge, SymmetryError> {
        let q = &self.sectors[s].charge;
        match self.direction {
            Direction::Out => Ok(q.clone()),
            Direction::In => self.symmetry.dual(q),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symmetry::GroupFactor;

    fn u1_leg(dir: Direction, charges: &[(i64, usize)]) -> Result<Leg, SymmetryError> {
        let g = Symmetry::u1();
        let sectors = charges
            .iter()
            .map(|&(q, d)| Sector {
                charge: g.charge(&[q]).unwrap(),
                dim: d,
            })
            .collect();
        Leg::new(g, dir, sectors)
    }

    #[test]
    fn offsets_tiles_and_lookup() {
        let g = Symmetry::u1();
        let sectors = vec![
            Sector {
                charge: g.charge(&[-1]).unwrap(),
                dim: 3,
            },
            Sector {
                charge: g.charge(&[1]).unwrap(),
                dim: 5,
            },
        ];
        let leg = Leg::tiled(g.clone(), Direction::Out, sectors, 2).unwrap();
        assert_eq!(leg.dim(), 8);
        assert_eq!(leg.tile_count(), 2 + 3);
        assert_eq!(leg.sector_offset(1), 3);
        assert_eq!(leg.tile_range(1), 2..5);
        let t = leg.tile(3).unwrap();
        assert_eq!((t.sector, t.offset_in_sector, t.offset, t.extent), (1, 2, 5, 2));
        let last = leg.tile(4).unwrap();
        assert_eq!((last.offset, last.extent), (7, 1));
        assert!(matches!(leg.tile(5), Err(SymmetryError::OutOfBounds { .. })));
        assert_eq!(leg.find_sector(&g.charge(&[1]).unwrap()), Some(1));
        assert_eq!(leg.find_sector(&g.charge(&[0]).unwrap()), None);
        let d = leg.dual();
        assert_eq!(d.direction(), Direction::In);
        assert!(d.same_sectors(&leg));
        assert_eq!(d.signed_charge(0).unwrap(), g.charge(&[1]).unwrap());
    }

    #[test]
    fn invalid_legs_are_refused() {
        assert!(matches!(
            u1_leg(Direction::In, &[(1, 2), (0, 1)]),
            Err(SymmetryError::UnsortedSectors { index: 1, .. })
        ));
        assert!(matches!(
            u1_leg(Direction::In, &[(0, 2), (0, 1)]),
            Err(SymmetryError::UnsortedSectors { .. })
        ));
        assert!(matches!(
            u1_leg(Direction::In, &[(0, 0)]),
            Err(SymmetryError::BadSector { .. })
        ));
        let g = Symmetry::u1();
        let s = vec![Sector {
            charge: g.charge(&[0]).unwrap(),
            dim: 4,
        }];
        assert!(matches!(
            Leg::with_tiles(g.clone(), Direction::Out, s.clone(), vec![vec![2, 1]]),
            Err(SymmetryError::BadSector { .. })
        ));
        assert!(matches!(
            Leg::with_tiles(g.clone(), Direction::Out, s.clone(), vec![vec![4, 0]]),
            Err(SymmetryError::BadSector { .. })
        ));
        assert!(matches!(
            Leg::with_tiles(g.clone(), Direction::Out, s.clone(), vec![]),
            Err(SymmetryError::LegCount { .. })
        ));
        assert!(Leg::tiled(g.clone(), Direction::Out, s, 0).is_err());
        let z2 = Symmetry::zn(2).unwrap();
        let two = vec![Sector {
            charge: Symmetry::product(vec![GroupFactor::U1, GroupFactor::U1])
                .unwrap()
                .charge(&[0, 0])
                .unwrap(),
            dim: 1,
        }];
        assert!(matches!(
            Leg::new(z2, Direction::Out, two),
            Err(SymmetryError::ComponentCount { .. })
        ));
    }

    #[test]
    fn u1_is_tiled_from_plain_integers() {
        let g = Symmetry::u1();
        let sectors = vec![
            Sector {
                charge: g.charge(&[-2]).unwrap(),
                dim: 3,
            },
            Sector {
                charge: g.charge(&[0]).unwrap(),
                dim: 5,
            },
        ];
        let want = Leg::tiled(g, Direction::In, sectors, 2).unwrap();
        let got = Leg::u1(Direction::In, &[(-2, 3), (0, 5)], 2).unwrap();
        assert_eq!(got, want);
        assert_eq!(got.tile_count(), 2 + 3);
        assert!(matches!(
            Leg::u1(Direction::In, &[(1, 2), (0, 1)], 1),
            Err(SymmetryError::UnsortedSectors { index: 1, .. })
        ));
        assert!(matches!(
            Leg::u1(Direction::In, &[(0, 0)], 1),
            Err(SymmetryError::BadSector { .. })
        ));
        assert!(matches!(
            Leg::u1(Direction::In, &[(0, 2)], 0),
            Err(SymmetryError::BadSector { .. })
        ));
    }

    #[test]
    fn wire_form_is_checked_on_decode() {
        let leg = u1_leg(Direction::Out, &[(-2, 1), (0, 2), (2, 1)]).unwrap();
        let bytes = postcard::to_allocvec(&leg).unwrap();
        let back: Leg = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, leg);
        assert_eq!(back.sector_offset(2), 3);
        // Tamper: swap the sector order in the wire form.
        let mut w = LegWire::from(leg);
        w.sectors.swap(0, 2);
        let bad = postcard::to_allocvec(&w).unwrap();
        assert!(postcard::from_bytes::<Leg>(&bad).is_err());
    }
}
