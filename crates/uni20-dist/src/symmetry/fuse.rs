//! Fusing adjacent legs into one ([`Fusion`]) and splitting it back.
//!
//! Fusing legs `l_1 .. l_k` into a leg of direction `d` gives a leg whose
//! sectors are the distinct fused charges `q_F` (with `s_d q_F = sum_i s_i
//! q_i`, so the charge rule of the tensor is unchanged), sorted. Inside the
//! sector of charge `q_F`, the sector combinations `(s_1 .. s_k)` of that
//! charge follow each other in lexicographic order, and the states of one
//! combination are in row-major order of the parts' inner indices. The map
//! is kept, so that [`Fusion::split_index`] inverts [`Fusion::fuse_index`]
//! exactly. Note that the fused dense index is a permutation of the
//! row-major reshape of the parts' dense indices (states are grouped by
//! charge), not the reshape itself.

use std::collections::BTreeMap;

use super::group::{Charge, SymmetryError};
use super::leg::{Direction, Leg, Sector};
use crate::layout::odometer_step;

/// One sector combination of the parts and where it lands in the fused
/// leg.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusionEntry {
    /// Sector index along each part.
    pub sectors: Vec<usize>,
    /// Sector of the fused leg.
    pub fused_sector: usize,
    /// Offset of this combination inside the fused sector.
    pub offset: usize,
    /// Number of states of the combination (product of the sector dims).
    pub dim: usize,
}

/// The fusion of several legs into one, with the map between them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fusion {
    parts: Vec<Leg>,
    fused: Leg,
    /// Sorted by `sectors` (lexicographic).
    entries: Vec<FusionEntry>,
}

impl Fusion {
    /// Fuses `parts` (at least one leg, all of one group) into a leg of
    /// direction `direction` whose sectors are one tile each (use
    /// [`Leg::retiled`] on [`Fusion::fused`] for another tiling).
    ///
    /// The cost is the product of the parts' sector counts.
    ///
    /// # Errors
    /// [`SymmetryError::LegCount`] for no parts;
    /// [`SymmetryError::GroupMismatch`] for parts of different groups;
    /// [`SymmetryError::Overflow`] from U(1) fusion or a dimension overflow
    /// ([`SymmetryError::BadSector`]).
    pub fn new(parts: Vec<Leg>, direction: Direction) -> Result<Fusion, SymmetryError> {
        let Some(first) = parts.first() else {
            return Err(SymmetryError::LegCount {
                what: "legs to fuse".into(),
                expected: 1,
                got: 0,
            });
        };
        let g = first.symmetry().clone();
        for (k, p) in parts.iter().enumerate() {
            if *p.symmetry() != g {
                return Err(SymmetryError::GroupMismatch {
                    what: format!("fusing leg {k} with leg 0"),
                    first: p.symmetry().clone(),
                    second: g,
                });
            }
        }
        // Every sector combination, lexicographic, with its fused charge.
        let mut combos: Vec<(Vec<usize>, Charge, usize)> = Vec::new();
        let mut idx = vec![0usize; parts.len()];
        let lo = vec![0usize; parts.len()];
        let hi: Vec<usize> = parts.iter().map(|p| p.sectors().len()).collect();
        'all: loop {
            let mut acc = g.identity();
            let mut dim = 1usize;
            for (p, &s) in parts.iter().zip(&idx) {
                acc = g.fuse(&acc, &p.signed_charge(s)?)?;
                dim = dim
                    .checked_mul(p.sectors()[s].dim)
                    .ok_or_else(|| SymmetryError::BadSector {
                        index: s,
                        charge: p.sectors()[s].charge.clone(),
                        reason: "the fused dimension overflows".into(),
                    })?;
            }
            let q = match direction {
                Direction::Out => acc,
                Direction::In => g.dual(&acc)?,
            };
            combos.push((idx.clone(), q, dim));
            if !odometer_step(&mut idx, &lo, &hi) {
                break 'all;
            }
        }
        let mut by_charge: BTreeMap<Charge, usize> = BTreeMap::new();
        for (_, q, d) in &combos {
            let e = by_charge.entry(q.clone()).or_insert(0);
            *e = e.checked_add(*d).ok_or_else(|| SymmetryError::BadSector {
                index: 0,
                charge: q.clone(),
                reason: "the fused dimension overflows".into(),
            })?;
        }
        let sectors: Vec<Sector> = by_charge
            .iter()
            .map(|(q, &dim)| Sector { charge: q.clone(), dim })
            .collect();
        let mut fill = vec![0usize; sectors.len()];
        let mut entries = Vec::with_capacity(combos.len());
        for (sec, q, dim) in combos {
            let fused_sector = sectors.binary_search_by(|s| s.charge.cmp(&q)).unwrap_or(0);
            entries.push(FusionEntry {
                sectors: sec,
                fused_sector,
                offset: fill[fused_sector],
                dim,
            });
            fill[fused_sector] += dim;
        }
        let fused = Leg::new(g, direction, sectors)?;
        Ok(Fusion { parts, fused, entries })
    }

    /// The legs that were fused, in order.
    pub fn parts(&self) -> &[Leg] {
        &self.parts
    }

    /// The fused leg.
    pub fn fused(&self) -> &Leg {
        &self.fused
    }

    /// Every sector combination of the parts, in lexicographic order, with
    /// its place in the fused leg.
    pub fn entries(&self) -> &[FusionEntry] {
        &self.entries
    }

    /// The entry of the sector combination `sectors`.
    pub fn entry(&self, sectors: &[usize]) -> Option<&FusionEntry> {
        self.entries
            .binary_search_by(|e| e.sectors.as_slice().cmp(sectors))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// The dense index along the fused leg of the state with dense indices
    /// `index` along the parts.
    ///
    /// # Errors
    /// [`SymmetryError::LegCount`] for a wrong number of indices;
    /// [`SymmetryError::OutOfBounds`] for an index beyond its leg.
    pub fn fuse_index(&self, index: &[usize]) -> Result<usize, SymmetryError> {
        if index.len() != self.parts.len() {
            return Err(SymmetryError::LegCount {
                what: "indices to fuse".into(),
                expected: self.parts.len(),
                got: index.len(),
            });
        }
        let mut sectors = Vec::with_capacity(index.len());
        let mut inner = 0usize;
        for (p, &i) in self.parts.iter().zip(index) {
            if i >= p.dim() {
                return Err(SymmetryError::OutOfBounds {
                    what: "index along a fused leg",
                    index: i,
                    len: p.dim(),
                });
            }
            let s = (0..p.sectors().len())
                .rev()
                .find(|&s| p.sector_offset(s) <= i)
                .unwrap_or(0);
            inner = inner * p.sectors()[s].dim + (i - p.sector_offset(s));
            sectors.push(s);
        }
        let e = self.entry(&sectors).ok_or(SymmetryError::OutOfBounds {
            what: "sector combination",
            index: 0,
            len: self.entries.len(),
        })?;
        Ok(self.fused.sector_offset(e.fused_sector) + e.offset + inner)
    }

    /// The dense indices along the parts of the state at dense index `f` of
    /// the fused leg: the inverse of [`Fusion::fuse_index`].
    ///
    /// # Errors
    /// [`SymmetryError::OutOfBounds`] when `f` is beyond the fused leg.
    pub fn split_index(&self, f: usize) -> Result<Vec<usize>, SymmetryError> {
        if f >= self.fused.dim() {
            return Err(SymmetryError::OutOfBounds {
                what: "index along the fused leg",
                index: f,
                len: self.fused.dim(),
            });
        }
        let fs = (0..self.fused.sectors().len())
            .rev()
            .find(|&s| self.fused.sector_offset(s) <= f)
            .unwrap_or(0);
        let within = f - self.fused.sector_offset(fs);
        let e = self
            .entries
            .iter()
            .find(|e| e.fused_sector == fs && e.offset <= within && within < e.offset + e.dim)
            .ok_or(SymmetryError::OutOfBounds {
                what: "index along the fused leg",
                index: f,
                len: self.fused.dim(),
            })?;
        let mut inner = within - e.offset;
        let mut out = vec![0usize; self.parts.len()];
        for k in (0..self.parts.len()).rev() {
            let p = &self.parts[k];
            let d = p.sectors()[e.sectors[k]].dim;
            out[k] = p.sector_offset(e.sectors[k]) + inner % d;
            inner /= d;
        }
        Ok(out)
    }
}
