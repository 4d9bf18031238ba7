//! The planner of a symmetric decomposition, pure: the matrix view of a
//! symmetric tensor by a label split, sector by sector.
//!
//! The row legs fuse into one leg of direction `Out` (fused charge `q_R =
//! sum_rows s_l q_l`) and the column legs into one of direction `In`
//! (`q_C = -sum_cols s_l q_l`), each with [`Fusion`]; the charge rule
//! `q_R - q_C = flux` makes the matrix block diagonal: one sector matrix
//! per row charge `q_R` whose column charge `q_R - flux` exists, `m` rows
//! (the fused row sector's states) by `n` columns. Every stored block of
//! the tensor is one box of one sector matrix ([`SectorGeometry`]).
//!
//! The factors are symmetric tensors: the left factor (`U`, `Q` of QR, `L`
//! of LQ, the eigenvectors) has the row legs and a new bond leg of
//! direction `In` whose sectors carry the row charges `q_R` (flux zero);
//! the right factor (`Vh`, `R`, `Q` of LQ) has the bond leg's dual (`Out`)
//! and the column legs and carries the input's flux. A bond sector has as
//! many states as the sector keeps (`min(m, n)` for QR and LQ, the kept
//! singular values for the SVD, `n` for eigh); a sector that keeps nothing
//! has no bond sector.

use std::collections::HashMap;

use uni20_dispatch::decomp::DecompKind;
use uni20_dispatch::DType;

use super::error::{SplitError, SymDecompError};
use super::split::MatrixSplit;
use crate::error::DistError;
use crate::symmetry::{Charge, Direction, Fusion, Leg, Sector, SymmetricLayout};
use crate::tensor::{Manifest, TensorMeta};
use crate::transfer::{Transfer, TransferSet};

/// One sector matrix of the block-diagonal view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SectorMatrix {
    /// Sector of the fused row leg (its charge is the bond charge).
    pub(crate) row_sector: usize,
    /// Sector of the fused column leg.
    pub(crate) col_sector: usize,
    /// The row charge `q_R`.
    pub(crate) charge: Charge,
    /// Rows.
    pub(crate) m: usize,
    /// Columns.
    pub(crate) n: usize,
}

impl SectorMatrix {
    /// The cost of factorizing it, `m n min(m, n)` (flops up to a constant).
    pub(crate) fn cost(&self) -> u128 {
        self.m as u128 * self.n as u128 * self.m.min(self.n) as u128
    }
}

/// The block-diagonal matrix view of a symmetric layout by a split: the
/// two fusions and the sector matrices. Built identically on the root and
/// on the workers (from the layout and the split alone).
#[derive(Clone, Debug)]
pub(crate) struct SectorGeometry {
    /// The input's layout.
    pub(crate) layout: SymmetricLayout,
    /// The split.
    pub(crate) split: MatrixSplit,
    /// The row legs fused (`Out`).
    pub(crate) rows: Fusion,
    /// The column legs fused (`In`).
    pub(crate) cols: Fusion,
    /// The sector matrices, by increasing row charge.
    pub(crate) sectors: Vec<SectorMatrix>,
}

/// Where a box of a tensor block lies in a sector matrix: the sector, the
/// flat offset of its first element and the element stride of each of the
/// block's modes, in a row-major `m x width` matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BoxPlace {
    /// Index into [`SectorGeometry::sectors`].
    pub(crate) sector: usize,
    /// Offset of the first element.
    pub(crate) base: usize,
    /// Stride of each mode of the box.
    pub(crate) strides: Vec<usize>,
}

impl SectorGeometry {
    /// The view of `layout` by `split`.
    ///
    /// # Errors
    /// [`DistError::Symmetry`] if the fusions cannot be built (dimension
    /// overflow).
    pub(crate) fn new(layout: &SymmetricLayout, split: &MatrixSplit) -> Result<SectorGeometry, DistError> {
        let legs = layout.legs();
        let pick = |modes: &[usize]| modes.iter().map(|&k| legs[k].clone()).collect::<Vec<Leg>>();
        let rows = Fusion::new(pick(&split.rows), Direction::Out)?;
        let cols = Fusion::new(pick(&split.cols), Direction::In)?;
        let g = layout.symmetry();
        let minus_flux = g.dual(layout.flux())?;
        let mut sectors = Vec::new();
        for (r, s) in rows.fused().sectors().iter().enumerate() {
            let qc = g.fuse(&s.charge, &minus_flux)?;
            if let Some(c) = cols.fused().find_sector(&qc) {
                sectors.push(SectorMatrix {
                    row_sector: r,
                    col_sector: c,
                    charge: s.charge.clone(),
                    m: s.dim,
                    n: cols.fused().sectors()[c].dim,
                });
            }
        }
        Ok(SectorGeometry {
            layout: layout.clone(),
            split: split.clone(),
            rows,
            cols,
            sectors,
        })
    }

    /// The sector matrix with row sector `r`.
    pub(crate) fn sector_of_row(&self, r: usize) -> Option<usize> {
        self.sectors.binary_search_by_key(&r, |s| s.row_sector).ok()
    }

    /// For tiles `tiles` of the legs `legs` (one side's legs, in the side's
    /// order) with sector indices `sectors`: the fused sector, the offset
    /// of the box's first state in it, and each leg's stride (row-major
    /// inside the sector combination).
    fn side(fusion: &Fusion, legs: &[&Leg], tiles: &[usize], sectors: &[usize]) -> Option<(usize, usize, Vec<usize>)> {
        let e = fusion.entry(sectors)?;
        let mut strides = vec![0usize; legs.len()];
        let mut s = 1usize;
        for i in (0..legs.len()).rev() {
            strides[i] = s;
            s *= legs[i].sectors()[sectors[i]].dim;
        }
        let mut off = e.offset;
        for i in 0..legs.len() {
            off += legs[i].tile(tiles[i]).ok()?.offset_in_sector * strides[i];
        }
        Some((e.fused_sector, off, strides))
    }

    /// Where block `b` of the input layout lies in its sector matrix
    /// (`m x n`, row-major); the strides are per input mode.
    pub(crate) fn input_place(&self, b: usize) -> Option<BoxPlace> {
        let blk = self.layout.blocks().get(b)?;
        let legs = self.layout.legs();
        let side = |modes: &[usize], f: &Fusion| {
            let l: Vec<&Leg> = modes.iter().map(|&k| &legs[k]).collect();
            let t: Vec<usize> = modes.iter().map(|&k| blk.tiles[k]).collect();
            let s: Vec<usize> = modes.iter().map(|&k| blk.sectors[k]).collect();
            Self::side(f, &l, &t, &s)
        };
        let (r, row_off, rs) = side(&self.split.rows, &self.rows)?;
        let (c, col_off, cs) = side(&self.split.cols, &self.cols)?;
        let sector = self.sector_of_row(r)?;
        if self.sectors[sector].col_sector != c {
            return None;
        }
        let n = self.sectors[sector].n;
        let mut strides = vec![0usize; legs.len()];
        for (i, &k) in self.split.rows.iter().enumerate() {
            strides[k] = rs[i] * n;
        }
        for (i, &k) in self.split.cols.iter().enumerate() {
            strides[k] = cs[i];
        }
        Some(BoxPlace {
            sector,
            base: row_off * n + col_off,
            strides,
        })
    }

    /// Where block `b` of a left factor (legs: the row legs, then the
    /// bond) lies in its sector's full factor (`m x width`, row-major).
    pub(crate) fn left_place(
        &self,
        factor: &SymmetricLayout,
        b: usize,
        width: impl Fn(usize) -> usize,
    ) -> Option<BoxPlace> {
        let blk = factor.blocks().get(b)?;
        let legs: Vec<&Leg> = factor.legs().iter().collect();
        let nr = legs.len().checked_sub(1)?;
        let (r, row_off, rs) = Self::side(&self.rows, &legs[..nr], &blk.tiles[..nr], &blk.sectors[..nr])?;
        let sector = self.sector_of_row(r)?;
        let w = width(sector);
        let k_off = legs[nr].tile(blk.tiles[nr]).ok()?.offset_in_sector;
        let mut strides: Vec<usize> = rs.iter().map(|s| s * w).collect();
        strides.push(1);
        Some(BoxPlace {
            sector,
            base: row_off * w + k_off,
            strides,
        })
    }

    /// Where block `b` of a right factor (legs: the bond, then the column
    /// legs) lies in its sector's full factor (`height x n`, row-major).
    /// The bond sector is found by its charge (the row charge).
    pub(crate) fn right_place(&self, factor: &SymmetricLayout, b: usize) -> Option<BoxPlace> {
        let blk = factor.blocks().get(b)?;
        let legs: Vec<&Leg> = factor.legs().iter().collect();
        let bond = legs.first()?.tile(blk.tiles[0]).ok()?;
        let charge = &legs[0].sectors()[bond.sector].charge;
        let sector = self.sectors.iter().position(|s| &s.charge == charge)?;
        let (c, col_off, cs) = Self::side(&self.cols, &legs[1..], &blk.tiles[1..], &blk.sectors[1..])?;
        if self.sectors[sector].col_sector != c {
            return None;
        }
        let n = self.sectors[sector].n;
        let mut strides = vec![n];
        strides.extend(cs);
        Some(BoxPlace {
            sector,
            base: bond.offset_in_sector * n + col_off,
            strides,
        })
    }

    /// The dense row-major flat row (or, with `cols`, column) index of the
    /// dense matrix view for row `i` of sector `sector`'s matrix (used to
    /// name an element in an error), and its multi-index over the side's
    /// modes.
    pub(crate) fn dense_index(&self, sector: usize, i: usize, cols: bool) -> (usize, Vec<usize>) {
        let (fusion, fused_sector) = if cols {
            (&self.cols, self.sectors[sector].col_sector)
        } else {
            (&self.rows, self.sectors[sector].row_sector)
        };
        let f = fusion.fused().sector_offset(fused_sector) + i;
        let multi = fusion.split_index(f).unwrap_or_default();
        let flat = multi
            .iter()
            .zip(fusion.parts())
            .fold(0usize, |acc, (&x, l)| acc * l.dim() + x);
        (flat, multi)
    }
}

/// A symmetric decomposition call checked against its input's metadata.
#[derive(Clone, Debug)]
pub(crate) struct SymValidated {
    /// The family.
    pub(crate) op: DecompKind,
    /// The input's description.
    pub(crate) input: TensorMeta,
    /// The sector view.
    pub(crate) geometry: SectorGeometry,
    /// Block extent of the bond leg's tiles.
    pub(crate) k_block: usize,
}

/// Checks a call of `op` on the symmetric tensor described by `input`
/// (whose layout is `layout`): the split (as the dense call), the largest
/// sector matrix against `max_matrix_bytes`, `k_block` (default: the
/// input's largest tile extent), and for eigh a flux of zero and column
/// legs that are the duals of the row legs, in order.
pub(crate) fn validate(
    op: DecompKind,
    input: &TensorMeta,
    layout: &SymmetricLayout,
    split: &str,
    k_block: Option<usize>,
    max_matrix_bytes: Option<u64>,
) -> Result<SymValidated, DistError> {
    let split_err = |error: SplitError| DistError::Split {
        op,
        split: split.to_string(),
        error,
    };
    let s = MatrixSplit::parse(split, input.shape.len()).map_err(split_err)?;
    let legs = layout.legs();
    if op == DecompKind::Eigh {
        if *layout.flux() != layout.symmetry().identity() {
            return Err(SymDecompError::EighFlux {
                flux: layout.flux().clone(),
            }
            .into());
        }
        if s.rows.len() != s.cols.len() {
            let (rows, cols) = s.matrix_size(&input.shape);
            return Err(split_err(SplitError::NotSquare {
                rows: usize::try_from(rows).unwrap_or(usize::MAX),
                cols: usize::try_from(cols).unwrap_or(usize::MAX),
            }));
        }
        for (&r, &c) in s.rows.iter().zip(&s.cols) {
            let (a, b) = (&legs[r], &legs[c]);
            if a.sectors() != b.sectors() || a.direction() == b.direction() {
                return Err(SymDecompError::NotDualLegs {
                    row_mode: r,
                    col_mode: c,
                }
                .into());
            }
        }
    }
    let geometry = SectorGeometry::new(layout, &s)?;
    if let Some(big) = geometry.sectors.iter().max_by_key(|x| x.m as u128 * x.n as u128) {
        super::plan::check_matrix_bytes(op, big.m as u128, big.n as u128, input.dtype, max_matrix_bytes)?;
    }
    let k_block = super::plan::resolve_k_block(input, k_block)?;
    Ok(SymValidated {
        op,
        input: input.clone(),
        geometry,
        k_block,
    })
}

/// The factors' layouts for the kept counts `kept` (one per sector
/// matrix, in order), in reply order: svd `[U, Vh]` and `S` (legs: the
/// dual of U's bond, the dual of Vh's bond; real dtype) with `s_diag`; qr
/// `[Q, R]`; lq `[L, Q]`; eigh `[V]`. With their dtypes.
///
/// # Errors
/// [`SymDecompError::NothingKept`] when every count is zero;
/// [`DistError::Symmetry`] from the layouts.
pub(crate) fn factor_layouts(
    v: &SymValidated,
    kept: &[usize],
    s_diag: bool,
) -> Result<Vec<(SymmetricLayout, DType)>, DistError> {
    let g = &v.geometry;
    let lay = &g.layout;
    let sym = lay.symmetry().clone();
    let sectors: Vec<Sector> = g
        .sectors
        .iter()
        .zip(kept)
        .filter(|(_, &k)| k > 0)
        .map(|(s, &k)| Sector {
            charge: s.charge.clone(),
            dim: k,
        })
        .collect();
    if sectors.is_empty() {
        return Err(SymDecompError::NothingKept { op: v.op }.into());
    }
    let bond = Leg::tiled(sym.clone(), Direction::In, sectors, v.k_block)?;
    let mut left: Vec<Leg> = g.split.rows.iter().map(|&k| lay.legs()[k].clone()).collect();
    left.push(bond.clone());
    let mut out = vec![(SymmetricLayout::new(sym.clone(), left, sym.identity())?, v.input.dtype)];
    if v.op != DecompKind::Eigh {
        let mut right = vec![bond.dual()];
        right.extend(g.split.cols.iter().map(|&k| lay.legs()[k].clone()));
        out.push((
            SymmetricLayout::new(sym.clone(), right, lay.flux().clone())?,
            v.input.dtype,
        ));
    }
    if v.op == DecompKind::Svd && s_diag {
        out.push((
            SymmetricLayout::new(sym.clone(), vec![bond.dual(), bond], sym.identity())?,
            super::plan::real_dtype(v.input.dtype),
        ));
    }
    Ok(out)
}

/// The factor metadata of `layouts` (as [`factor_layouts`] returns).
///
/// # Errors
/// [`DistError::Blocking`] when a layout's tiling cannot be built.
pub(crate) fn factor_metas(layouts: &[(SymmetricLayout, DType)]) -> Result<Vec<TensorMeta>, DistError> {
    layouts
        .iter()
        .map(|(l, d)| TensorMeta::symmetric(std::sync::Arc::new(l.clone()), *d))
        .collect()
}

/// Where each sector matrix is factorized and what moves there.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SectorAssembly {
    /// The worker of each sector matrix.
    pub(crate) workers: Vec<usize>,
    /// The input blocks of each sector matrix.
    pub(crate) blocks: Vec<Vec<usize>>,
    /// Input blocks moving to the sectors' workers.
    pub(crate) transfers: Vec<Transfer>,
    /// Ranks that receive the factorize command (workers of a sector and
    /// senders).
    pub(crate) participants: Vec<usize>,
}

/// Assigns the sector matrices to `workers` (not empty), balanced by
/// cost: largest first, each to the least loaded worker (ties: the one
/// holding most of the sector's bytes, then the lower rank); and lists the
/// input blocks each must fetch. `fixed`: an earlier assignment of a
/// decomposition of the same block structure ([`SectorPlacements`]), used
/// as it is when it names one of `workers` per sector.
///
/// # Errors
/// [`DistError::Protocol`] if a block of the manifest fits no sector (a
/// layout that breaks its own charge rule).
pub(crate) fn plan_sectors(
    g: &SectorGeometry,
    m: &Manifest,
    workers: &[usize],
    fixed: Option<&[usize]>,
) -> Result<SectorAssembly, DistError> {
    let mut blocks = vec![Vec::new(); g.sectors.len()];
    for b in 0..m.blocks.len() {
        let p = g
            .input_place(b)
            .ok_or_else(|| DistError::Protocol(format!("block {b} of a symmetric tensor fits no sector matrix")))?;
        blocks[p.sector].push(b);
    }
    let fixed = fixed.filter(|f| f.len() == g.sectors.len() && f.iter().all(|w| workers.contains(w)));
    let assigned = match fixed {
        Some(f) => f.to_vec(),
        None => balance_sectors(g, m, workers, &blocks),
    };
    let mut set = TransferSet::new();
    for (s, bs) in blocks.iter().enumerate() {
        for &b in bs {
            set.need(&m.blocks[b], m.block_bytes(b), assigned[s]);
        }
    }
    let transfers = set.into_vec();
    let mut participants: Vec<usize> = transfers
        .iter()
        .map(|t| t.from)
        .chain(assigned.iter().copied())
        .collect();
    participants.sort_unstable();
    participants.dedup();
    Ok(SectorAssembly {
        workers: assigned,
        blocks,
        transfers,
        participants,
    })
}

/// The cost-balanced assignment of [`plan_sectors`].
fn balance_sectors(g: &SectorGeometry, m: &Manifest, workers: &[usize], blocks: &[Vec<usize>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..g.sectors.len()).collect();
    order.sort_by_key(|&s| (std::cmp::Reverse(g.sectors[s].cost()), s));
    let mut load: Vec<u128> = vec![0; workers.len()];
    let mut assigned = vec![workers[0]; g.sectors.len()];
    for s in order {
        let local = |w: usize| -> u64 {
            blocks[s]
                .iter()
                .filter(|&&b| m.blocks[b].owner == w)
                .map(|&b| m.block_bytes(b))
                .sum()
        };
        let i = (0..workers.len())
            .min_by_key(|&i| (load[i], std::cmp::Reverse(local(workers[i])), workers[i]))
            .unwrap_or(0);
        load[i] += g.sectors[s].cost().max(1);
        assigned[s] = workers[i];
    }
    assigned
}

/// Most block structures whose sector assignment [`SectorPlacements`]
/// remembers.
const SECTOR_PLACEMENTS: usize = 4096;

/// The root's memory of sector assignments, by block structure (the
/// input's charges and tile counts without extents, the split, the
/// workers): a decomposition whose structure recurs gets the assignment of
/// the last one, so its factors keep their owners from sweep to sweep even
/// when a sector's dimension moves by one, and the contractions that read
/// them find their cached plans (`ops::kit::cache`). Balance is by the cost
/// the structure had when first seen. Bounded: the least recently used
/// half is forgotten beyond [`SECTOR_PLACEMENTS`] entries.
#[derive(Default)]
pub(crate) struct SectorPlacements {
    map: HashMap<Vec<u8>, (Vec<usize>, u64)>,
    tick: u64,
}

impl SectorPlacements {
    /// The key of a decomposition of `g` over `workers`; `None` when the
    /// layout cannot be encoded (nothing is remembered then).
    pub(crate) fn key(g: &SectorGeometry, workers: &[usize]) -> Option<Vec<u8>> {
        let mut key = Vec::with_capacity(128);
        crate::ops::kit::write_structure(&mut key, &g.layout)?;
        for list in [&g.split.rows[..], &g.split.cols[..], workers] {
            key.extend_from_slice(&(list.len() as u32).to_le_bytes());
            for &x in list.iter() {
                key.extend_from_slice(&(x as u64).to_le_bytes());
            }
        }
        Some(key)
    }

    /// The remembered assignment of `key`.
    pub(crate) fn get(&mut self, key: &[u8]) -> Option<Vec<usize>> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(key).map(|(a, t)| {
            *t = tick;
            a.clone()
        })
    }

    /// Remembers `assigned` for `key`.
    pub(crate) fn put(&mut self, key: Vec<u8>, assigned: Vec<usize>) {
        self.tick += 1;
        if self.map.len() >= SECTOR_PLACEMENTS && !self.map.contains_key(&key) {
            let mut ticks: Vec<u64> = self.map.values().map(|v| v.1).collect();
            ticks.sort_unstable();
            let cut = ticks[ticks.len() / 2];
            self.map.retain(|_, v| v.1 > cut);
        }
        self.map.insert(key, (assigned, self.tick));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symmetry::Symmetry;
    use crate::tensor::BlockRef;
    use uni20_persist::ObjectId;

    use crate::symmetry::u1_test_leg as leg;

    #[test]
    fn sectors_of_an_mps_tensor_and_their_boxes() {
        // A(l In, p In, r Out), flux 0, split "ab|c": q_R = -l - p, q_C = -r; rule q_R - q_C = 0.
        let g = Symmetry::u1();
        let l = leg(Direction::In, &[(-1, 2), (1, 2)], 1);
        let p = leg(Direction::In, &[(-1, 1), (1, 1)], 1);
        let r = leg(Direction::Out, &[(-2, 1), (0, 3), (2, 1)], 2);
        let lay = SymmetricLayout::new(g.clone(), vec![l, p, r], g.identity()).unwrap();
        let split = MatrixSplit::parse("ab|c", 3).unwrap();
        let geo = SectorGeometry::new(&lay, &split).unwrap();
        // Row charges -l-p: 2 (l=-1,p=-1: dim 2), 0 (2 + 2 = 4), -2 (2); columns -r: -2, 0, 2.
        let dims: Vec<(i64, usize, usize)> = geo
            .sectors
            .iter()
            .map(|s| (s.charge.components()[0], s.m, s.n))
            .collect();
        assert_eq!(dims, vec![(-2, 2, 1), (0, 4, 3), (2, 2, 1)]);
        // Every block lands in one box; the boxes of a sector tile it exactly.
        let mut cover: Vec<Vec<u32>> = geo.sectors.iter().map(|s| vec![0; s.m * s.n]).collect();
        for b in 0..lay.blocks().len() {
            let p = geo.input_place(b).unwrap();
            let ext = lay.block_extents(b);
            let mut idx = vec![0usize; ext.len()];
            loop {
                let at = p.base + idx.iter().zip(&p.strides).map(|(i, s)| i * s).sum::<usize>();
                cover[p.sector][at] += 1;
                if !crate::layout::odometer_step(&mut idx, &vec![0; ext.len()], &ext) {
                    break;
                }
            }
        }
        assert!(cover.iter().flatten().all(|&c| c == 1), "{cover:?}");
        // Dense index of row 3 of the q_R = 0 sector: combinations (l=-1, p=1) then (l=1, p=-1);
        // row 3 is (l=1 second state, p=-1): dense l index 3, p index 0: flat 3*2+0 = 6.
        assert_eq!(geo.dense_index(1, 3, false), (6, vec![3, 0]));
    }

    #[test]
    fn sectors_are_balanced_by_cost() {
        let g = Symmetry::u1();
        let a = leg(Direction::Out, &[(0, 4), (1, 2), (2, 1), (3, 1)], 8);
        let lay = SymmetricLayout::new(g.clone(), vec![a.clone(), a.dual()], g.identity()).unwrap();
        let split = MatrixSplit::parse("a|b", 2).unwrap();
        let geo = SectorGeometry::new(&lay, &split).unwrap();
        let costs: Vec<u128> = geo.sectors.iter().map(SectorMatrix::cost).collect();
        assert_eq!(costs, vec![64, 8, 1, 1]);
        let meta = TensorMeta::symmetric(std::sync::Arc::new(lay.clone()), DType::F64).unwrap();
        let blocks = (0..lay.blocks().len())
            .map(|b| BlockRef {
                owner: 1,
                id: ObjectId::new(1, b as u64),
            })
            .collect();
        let man = Manifest::new(&meta, blocks);
        let a = plan_sectors(&geo, &man, &[1, 2], None).unwrap();
        // 64 -> rank 1 (holds the bytes), 8 -> rank 2, 1 -> rank 2, 1 -> rank 2.
        assert_eq!(a.workers, vec![1, 2, 2, 2]);
        assert_eq!(a.transfers.len(), 3);
        assert!(a.transfers.iter().all(|t| t.from == 1 && t.to == 2));
        assert_eq!(a.participants, vec![1, 2]);
    }

    /// A remembered assignment is used as it is, for any structure with
    /// the same charges and tile counts (other extents); the key tells
    /// other structures, splits and workers apart; a remembered assignment
    /// that does not fit is ignored.
    #[test]
    fn sector_assignments_are_remembered_by_structure() {
        let g = Symmetry::u1();
        let geometry = |sectors: &[(i64, usize)], split: &str| {
            let a = leg(Direction::Out, sectors, 8);
            let lay = SymmetricLayout::new(g.clone(), vec![a.clone(), a.dual()], g.identity()).unwrap();
            SectorGeometry::new(&lay, &MatrixSplit::parse(split, 2).unwrap()).unwrap()
        };
        let manifest = |geo: &SectorGeometry| {
            let meta = TensorMeta::symmetric(std::sync::Arc::new(geo.layout.clone()), DType::F64).unwrap();
            let blocks = (0..geo.layout.blocks().len())
                .map(|b| BlockRef {
                    owner: 1,
                    id: ObjectId::new(1, b as u64),
                })
                .collect();
            Manifest::new(&meta, blocks)
        };
        let first = geometry(&[(0, 4), (1, 2), (2, 1), (3, 1)], "a|b");
        let moved = geometry(&[(0, 1), (1, 2), (2, 4), (3, 1)], "a|b");
        let key = SectorPlacements::key(&first, &[1, 2]).unwrap();
        assert_eq!(SectorPlacements::key(&moved, &[1, 2]).unwrap(), key);
        for other in [
            SectorPlacements::key(&geometry(&[(0, 4), (1, 2), (2, 1)], "a|b"), &[1, 2]),
            SectorPlacements::key(&geometry(&[(0, 4), (1, 2), (2, 1), (4, 1)], "a|b"), &[1, 2]),
            SectorPlacements::key(&geometry(&[(0, 4), (1, 2), (2, 1), (3, 1)], "ab->b|a"), &[1, 2]),
            SectorPlacements::key(&first, &[1, 2, 3]),
        ] {
            assert_ne!(other.unwrap(), key);
        }
        let mut memo = SectorPlacements::default();
        let a = plan_sectors(&first, &manifest(&first), &[1, 2], None).unwrap();
        memo.put(key.clone(), a.workers.clone());
        let fixed = memo.get(&key).unwrap();
        // Balanced afresh, the moved sizes would go elsewhere; remembered, they keep the owners.
        let fresh = plan_sectors(&moved, &manifest(&moved), &[1, 2], None).unwrap();
        assert_ne!(fresh.workers, a.workers);
        let kept = plan_sectors(&moved, &manifest(&moved), &[1, 2], Some(&fixed)).unwrap();
        assert_eq!(kept.workers, a.workers);
        // An assignment naming a rank outside the workers, or of another length, is ignored.
        let bad = plan_sectors(&moved, &manifest(&moved), &[1, 2], Some(&[1, 2, 3, 1])).unwrap();
        assert_eq!(bad.workers, fresh.workers);
        let short = plan_sectors(&moved, &manifest(&moved), &[1, 2], Some(&[1, 2])).unwrap();
        assert_eq!(short.workers, fresh.workers);
        // Bounded: beyond the limit the least recently used half goes.
        for k in 0..SECTOR_PLACEMENTS as u64 {
            memo.put(k.to_le_bytes().to_vec(), vec![1]);
        }
        assert!(memo.map.len() <= SECTOR_PLACEMENTS);
        assert!(memo.get(&key).is_none(), "the oldest entry was forgotten");
        assert!(memo.get(&(SECTOR_PLACEMENTS as u64 - 1).to_le_bytes()).is_some());
    }
}
