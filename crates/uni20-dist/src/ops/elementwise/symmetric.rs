//! The symmetric paths of the element-wise family, pure: the output layouts
//! of `permute` / `conj` / `axpby` on symmetric tensors, the check that the
//! two operands of an `axpby` have the same legs and flux, and the geometry
//! of fusing adjacent legs ([`fuse_geometry`]) and splitting a fused one
//! ([`split_geometry`]): for every output block, which input blocks it
//! copies and where (strided box copies, see `regroup`).
//!
//! Fusing legs `first .. first + k` into one leg `F` (a [`Fusion`]) maps
//! the input element `(.., i_1 .. i_k, ..)` to the output element
//! `(.., fuse_index(i_1 .. i_k), ..)`. The fused leg has one tile per
//! sector, so an output block is one tile of every other leg times one
//! whole fused sector; an input block (tiles `t_j` of sectors `s_j`) lands
//! in the fused sector of the combination `(s_1 .. s_k)`, at its entry's
//! offset plus the row-major position of the tiles' offsets inside their
//! sectors, with strides `stride(F) * prod_{j' > j} dim(s_j')` along part
//! `j`. Every output block is covered exactly (the charge rule of the
//! fused tensor is the input's), so a fuse and a split are permutations of
//! the stored elements: nothing is computed, nothing is zero-filled.

use super::regroup::{RegroupDescV1, RegroupItem, RegroupPiece};
use crate::error::{DistError, SymLayoutError};
use crate::layout::c_strides;
use crate::ops::kit::{Assigner, ItemPlan};
use crate::symmetry::{Direction, Fusion, Leg, SymmetricLayout, SymmetryError};
use crate::tensor::{Manifest, TensorMeta};
use crate::transfer::TransferSet;

/// A leg in words, for error messages: direction, sectors as
/// `charge x dim`, and the group.
pub(crate) fn describe_leg(l: &Leg) -> String {
    let sectors: Vec<String> = l.sectors().iter().map(|s| format!("{}x{}", s.charge, s.dim)).collect();
    let dir = match l.direction() {
        Direction::In => "In",
        Direction::Out => "Out",
    };
    format!("{dir} [{}] of {}", sectors.join(", "), l.symmetry())
}

/// The layout of `l` with its legs permuted (output leg `k` is leg
/// `perm[k]`), same flux.
///
/// # Errors
/// None in practice (the permuted legs satisfy the rule wherever the
/// original ones do); the layout constructor's errors are passed on.
pub(crate) fn permuted_layout(l: &SymmetricLayout, perm: &[usize]) -> Result<SymmetricLayout, SymmetryError> {
    let legs = perm.iter().map(|&p| l.legs()[p].clone()).collect();
    SymmetricLayout::new(l.symmetry().clone(), legs, l.flux().clone())
}

/// The layout of the complex conjugate: every leg dualized and the flux
/// negated (the allowed tile tuples, and so the block order, are the same).
///
/// # Errors
/// [`SymmetryError::Overflow`] negating a U(1) flux of `i64::MIN`.
pub(crate) fn conj_layout(l: &SymmetricLayout) -> Result<SymmetricLayout, SymmetryError> {
    let g = l.symmetry();
    SymmetricLayout::new(g.clone(), l.legs().iter().map(Leg::dual).collect(), g.dual(l.flux())?)
}

/// Checks that `b` has the legs of `a` up to the label permutation (output
/// mode `k` is leg `perm_a[k]` of `a` and leg `perm_b[k]` of `b`): same
/// group, direction and sectors per leg (tilings may differ), and the same
/// flux.
///
/// # Errors
/// [`SymLayoutError::LegMismatch`] naming the first leg that differs and
/// what; [`SymLayoutError::FluxMismatch`].
pub(crate) fn check_same_legs(
    operation: &'static str,
    a: &SymmetricLayout,
    perm_a: &[usize],
    b: &SymmetricLayout,
    perm_b: &[usize],
) -> Result<(), SymLayoutError> {
    for (&pa, &pb) in perm_a.iter().zip(perm_b) {
        let (la, lb) = (&a.legs()[pa], &b.legs()[pb]);
        let what = if la.symmetry() != lb.symmetry() {
            Some("symmetry")
        } else if la.direction() != lb.direction() {
            Some("direction")
        } else if la.sectors() != lb.sectors() {
            Some("sectors")
        } else {
            None
        };
        if let Some(what) = what {
            return Err(SymLayoutError::LegMismatch {
                operation,
                leg_a: pa,
                leg_b: pb,
                what,
                first: describe_leg(la),
                second: describe_leg(lb),
            });
        }
    }
    if a.symmetry() != b.symmetry() || a.flux() != b.flux() {
        return Err(SymLayoutError::FluxMismatch {
            operation,
            first: format!("{} of {}", a.flux(), a.symmetry()),
            second: format!("{} of {}", b.flux(), b.symmetry()),
        });
    }
    Ok(())
}

/// One strided copy of an input block into an output block (element
/// units): the box `ext`, read at `src_base + sum idx_k src_strides_k` of
/// the input block and written at `dst_base + sum idx_k dst_strides_k` of
/// the output block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Copy {
    /// Stored block number of the input.
    pub(crate) input: usize,
    pub(crate) ext: Vec<usize>,
    pub(crate) src_base: usize,
    pub(crate) src_strides: Vec<usize>,
    pub(crate) dst_base: usize,
    pub(crate) dst_strides: Vec<usize>,
}

/// The geometry of a fuse or split, from the layouts alone: per output
/// block (in the output layout's order) its shape and its copies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// `(output block shape, copies)` per output block.
    pub(crate) blocks: Vec<(Vec<usize>, Vec<Copy>)>,
    /// True for a split (each output block reads one input block: computed
    /// on that block's owner).
    pub(crate) split: bool,
}

fn bad_range(operation: &'static str, first: usize, count: usize, legs: usize) -> DistError {
    SymLayoutError::LegRange {
        operation,
        first,
        count,
        legs,
    }
    .into()
}

/// `dims[j+1] * .. * dims[k-1]` for every `j`: the row-major strides of the
/// parts' inner indices inside one fusion entry.
fn inner_strides(dims: &[usize]) -> Vec<usize> {
    let mut p = vec![1usize; dims.len()];
    for j in (0..dims.len().saturating_sub(1)).rev() {
        p[j] = p[j + 1] * dims[j + 1];
    }
    p
}

/// An internal inconsistency of a layout pair (a bug, never user input):
/// reported as a protocol error instead of a panic.
fn inconsistent(what: &str) -> DistError {
    DistError::Protocol(format!("leg regrouping: {what}"))
}

/// The output layout and the fusion of fusing legs `first .. first + count`
/// of `l` into one leg of `direction` (one tile per fused sector).
///
/// # Errors
/// [`SymLayoutError::LegRange`] when `count` is 0 or the legs run past the
/// last one; the [`Fusion::new`] errors (overflow of a charge or a
/// dimension) as [`DistError::Symmetry`].
pub(crate) fn fused_layout(
    l: &SymmetricLayout,
    first: usize,
    count: usize,
    direction: Direction,
) -> Result<(SymmetricLayout, Fusion), DistError> {
    let r = l.legs().len();
    if count == 0 || first.checked_add(count).is_none_or(|end| end > r) {
        return Err(bad_range("fuse_legs", first, count, r));
    }
    let fusion = Fusion::new(l.legs()[first..first + count].to_vec(), direction)?;
    let mut legs = l.legs()[..first].to_vec();
    legs.push(fusion.fused().clone());
    legs.extend_from_slice(&l.legs()[first + count..]);
    Ok((
        SymmetricLayout::new(l.symmetry().clone(), legs, l.flux().clone())?,
        fusion,
    ))
}

/// The geometry of fusing legs `first .. first + k` of a tensor of layout
/// `lin` into the layout `lout` of [`fused_layout`].
///
/// # Errors
/// [`DistError::Protocol`] if the layouts do not fit each other (a bug).
pub(crate) fn fuse_geometry(
    lin: &SymmetricLayout,
    lout: &SymmetricLayout,
    first: usize,
    fusion: &Fusion,
) -> Result<Geometry, DistError> {
    let k = fusion.parts().len();
    let extents = |lay: &SymmetricLayout, b: usize| lay.block_extents(b);
    let mut blocks: Vec<(Vec<usize>, Vec<Copy>)> = (0..lout.blocks().len())
        .map(|o| (extents(lout, o), Vec::new()))
        .collect();
    for (b, blk) in lin.blocks().iter().enumerate() {
        let in_shape = extents(lin, b);
        let parts = &blk.sectors[first..first + k];
        let e = fusion
            .entry(parts)
            .ok_or_else(|| inconsistent("a sector combination the fusion lacks"))?;
        let mut out_tiles = blk.tiles[..first].to_vec();
        out_tiles.push(lout.legs()[first].tile_range(e.fused_sector).start);
        out_tiles.extend_from_slice(&blk.tiles[first + k..]);
        let o = lout
            .find(&out_tiles)
            .ok_or_else(|| inconsistent("a fused block the charge rule forbids"))?;
        let ostr = c_strides(&blocks[o].0);
        let fs = ostr[first];
        let dims: Vec<usize> = (0..k).map(|j| fusion.parts()[j].sectors()[parts[j]].dim).collect();
        let p = inner_strides(&dims);
        let mut at = e.offset;
        for (j, &pj) in p.iter().enumerate() {
            at += lin.legs()[first + j].tile(blk.tiles[first + j])?.offset_in_sector * pj;
        }
        let mut dst_strides = ostr[..first].to_vec();
        dst_strides.extend(p.iter().map(|&pj| fs * pj));
        dst_strides.extend_from_slice(&ostr[first + 1..]);
        blocks[o].1.push(Copy {
            input: b,
            src_strides: c_strides(&in_shape),
            ext: in_shape,
            src_base: 0,
            dst_base: fs * at,
            dst_strides,
        });
    }
    Ok(Geometry { blocks, split: false })
}

/// The legs that replace leg `leg` of `l` when it is split by `fusion`: the
/// fusion's parts when the leg is the fused leg, their duals when it is the
/// fused leg's dual (a conjugated tensor).
///
/// # Errors
/// [`SymLayoutError::LegRange`] for a leg past the last;
/// [`SymLayoutError::FusionMismatch`] when the leg has another group or
/// other sectors than the fused leg.
pub(crate) fn split_parts(l: &SymmetricLayout, leg: usize, fusion: &Fusion) -> Result<Vec<Leg>, DistError> {
    let r = l.legs().len();
    let Some(have) = l.legs().get(leg) else {
        return Err(bad_range("split_leg", leg, 1, r));
    };
    let fused = fusion.fused();
    if !have.same_sectors(fused) {
        return Err(SymLayoutError::FusionMismatch {
            leg,
            got: describe_leg(have),
            fused: describe_leg(fused),
        }
        .into());
    }
    Ok(if have.direction() == fused.direction() {
        fusion.parts().to_vec()
    } else {
        fusion.parts().iter().map(Leg::dual).collect()
    })
}

/// `l` with leg `leg` one tile per sector (what a split reads), or `None`
/// when it already is.
///
/// # Errors
/// The layout constructor's (not reached for a valid `l`).
pub(crate) fn whole_sectors(l: &SymmetricLayout, leg: usize) -> Result<Option<SymmetricLayout>, DistError> {
    let have = &l.legs()[leg];
    if (0..have.sectors().len()).all(|s| have.sector_tiles(s).len() == 1) {
        return Ok(None);
    }
    let mut legs = l.legs().to_vec();
    legs[leg] = Leg::new(have.symmetry().clone(), have.direction(), have.sectors().to_vec())?;
    Ok(Some(SymmetricLayout::new(
        l.symmetry().clone(),
        legs,
        l.flux().clone(),
    )?))
}

/// The layout of splitting leg `leg` of `l` into `parts`.
///
/// # Errors
/// The layout constructor's (not reached: the parts fuse to the leg).
pub(crate) fn split_layout(l: &SymmetricLayout, leg: usize, parts: &[Leg]) -> Result<SymmetricLayout, DistError> {
    let mut legs = l.legs()[..leg].to_vec();
    legs.extend_from_slice(parts);
    legs.extend_from_slice(&l.legs()[leg + 1..]);
    Ok(SymmetricLayout::new(l.symmetry().clone(), legs, l.flux().clone())?)
}

/// The geometry of splitting leg `leg` of a tensor of layout `lin` (that
/// leg one tile per sector, [`whole_sectors`]) into the layout `lout` of
/// [`split_layout`] by `fusion`.
///
/// # Errors
/// [`DistError::Protocol`] if the layouts do not fit each other (a bug).
pub(crate) fn split_geometry(
    lin: &SymmetricLayout,
    lout: &SymmetricLayout,
    leg: usize,
    fusion: &Fusion,
) -> Result<Geometry, DistError> {
    let k = fusion.parts().len();
    let mut blocks = Vec::with_capacity(lout.blocks().len());
    for (o, blk) in lout.blocks().iter().enumerate() {
        let out_shape = lout.block_extents(o);
        let parts = &blk.sectors[leg..leg + k];
        let e = fusion
            .entry(parts)
            .ok_or_else(|| inconsistent("a sector combination the fusion lacks"))?;
        let mut in_tiles = blk.tiles[..leg].to_vec();
        in_tiles.push(lin.legs()[leg].tile_range(e.fused_sector).start);
        in_tiles.extend_from_slice(&blk.tiles[leg + k..]);
        let b = lin
            .find(&in_tiles)
            .ok_or_else(|| inconsistent("a split block the charge rule forbids"))?;
        let istr = c_strides(&lin.block_extents(b));
        let fs = istr[leg];
        let dims: Vec<usize> = (0..k).map(|j| fusion.parts()[j].sectors()[parts[j]].dim).collect();
        let p = inner_strides(&dims);
        let mut at = e.offset;
        for (j, &pj) in p.iter().enumerate() {
            at += lout.legs()[leg + j].tile(blk.tiles[leg + j])?.offset_in_sector * pj;
        }
        let mut src_strides = istr[..leg].to_vec();
        src_strides.extend(p.iter().map(|&pj| fs * pj));
        src_strides.extend_from_slice(&istr[leg + 1..]);
        let copy = Copy {
            input: b,
            dst_strides: c_strides(&out_shape),
            ext: out_shape.clone(),
            src_base: fs * at,
            src_strides,
            dst_base: 0,
        };
        blocks.push((out_shape, vec![copy]));
    }
    Ok(Geometry { blocks, split: true })
}

/// Plans a fuse or split of the tensor of manifest `m` (its layout is the
/// geometry's input layout) into `out`: one item per output block; a
/// split's item on the owner of the one block it reads, a fuse's on the
/// rank holding most of its input bytes (under a load cap), which fetches
/// the rest.
pub(crate) fn plan_regroup(
    name: &'static str,
    workers: &[usize],
    m: &Manifest,
    out: &TensorMeta,
    g: &Geometry,
) -> ItemPlan<RegroupDescV1> {
    let mut assign = Assigner::new(workers, g.blocks.len());
    let mut set = TransferSet::new();
    let mut items = Vec::with_capacity(g.blocks.len());
    let mut copies = 0;
    for (o, (shape, cs)) in g.blocks.iter().enumerate() {
        let pieces: Vec<RegroupPiece> = cs
            .iter()
            .map(|c| RegroupPiece {
                block: m.blocks[c.input],
                shape: m.blocking.block_shape(&m.stored_multi(c.input)),
                bytes: m.block_bytes(c.input),
                ext: c.ext.clone(),
                src_base: c.src_base,
                src_strides: c.src_strides.clone(),
                dst_base: c.dst_base,
                dst_strides: c.dst_strides.clone(),
            })
            .collect();
        let rank = match (g.split, pieces.first()) {
            (true, Some(p)) => assign.keep(p.block.owner, p.bytes),
            _ => assign.pick(pieces.iter().map(|p| (p.block.owner, p.bytes))),
        };
        for p in &pieces {
            set.need(&p.block, p.bytes, rank);
        }
        copies += pieces.len();
        items.push(RegroupItem {
            rank,
            out_block: o,
            out_shape: shape.clone(),
            pieces,
        });
    }
    let transfers = set.into_vec();
    let ranks: Vec<usize> = items.iter().map(|i| i.rank).collect();
    let n = items.len();
    ItemPlan::new(
        name,
        RegroupDescV1 {
            dtype: out.dtype,
            items,
            transfers: transfers.clone(),
            out_names: Vec::new(),
            hold_replicas: false,
        },
        &ranks,
        (0..n).collect(),
        out.stored_blocks(),
        copies,
        &transfers,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symmetry::{Sector, Symmetry};

    fn leg(dir: Direction, s: &[(i64, usize)], tile: usize) -> Leg {
        let g = Symmetry::u1();
        let sectors = s
            .iter()
            .map(|&(q, dim)| Sector {
                charge: g.charge(&[q]).unwrap(),
                dim,
            })
            .collect();
        Leg::tiled(g, dir, sectors, tile).unwrap()
    }

    #[test]
    fn fuse_then_split_geometry_is_a_bijection_of_the_stored_elements() {
        let g = Symmetry::u1();
        let a = leg(Direction::In, &[(-1, 2), (1, 3)], 2);
        let b = leg(Direction::In, &[(-1, 1), (1, 2)], 1);
        let c = leg(Direction::Out, &[(-2, 1), (0, 4), (2, 2)], 3);
        let lin = SymmetricLayout::new(g.clone(), vec![a, b, c], g.identity()).unwrap();
        let (lout, f) = fused_layout(&lin, 0, 2, Direction::In).unwrap();
        let geo = fuse_geometry(&lin, &lout, 0, &f).unwrap();
        // Every output element is written exactly once.
        let mut written: Vec<Vec<u32>> = geo.blocks.iter().map(|(s, _)| vec![0; s.iter().product()]).collect();
        for (o, (_, cs)) in geo.blocks.iter().enumerate() {
            for c in cs {
                let n: usize = c.ext.iter().product();
                for lin_i in 0..n {
                    let mut rem = lin_i;
                    let mut d = c.dst_base;
                    for k in (0..c.ext.len()).rev() {
                        d += (rem % c.ext[k]) * c.dst_strides[k];
                        rem /= c.ext[k];
                    }
                    written[o][d] += 1;
                }
            }
        }
        assert!(written.iter().flatten().all(|&w| w == 1));
        assert_eq!(lout.stored_elements(), lin.stored_elements());
        let parts = split_parts(&lout, 0, &f).unwrap();
        let back = split_layout(&lout, 0, &parts).unwrap();
        assert_eq!(back, lin);
        assert!(whole_sectors(&lout, 0).unwrap().is_none());
        let sg = split_geometry(&lout, &back, 0, &f).unwrap();
        assert_eq!(sg.blocks.len(), lin.blocks().len());
        // A leg with other sectors is refused, naming both legs.
        let e = split_parts(&lin, 2, &f).unwrap_err();
        assert!(
            matches!(e, DistError::SymLayout(SymLayoutError::FusionMismatch { leg: 2, .. })),
            "{e}"
        );
        assert!(matches!(
            fused_layout(&lin, 2, 2, Direction::Out),
            Err(DistError::SymLayout(SymLayoutError::LegRange { .. }))
        ));
    }
}
