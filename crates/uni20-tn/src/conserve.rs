//! Conserved quantum numbers end to end: symmetric (block-sparse) MPOs,
//! MPSs and boundary environments built from sites that carry charges
//! ([`crate::Site::charges`], [`crate::LocalMpo::bond_charges`]), so that
//! [`crate::Dmrg`] runs in one charge sector, chosen by its initial state.
//!
//! Every tensor here is a symmetric [`DistTensor`] (a
//! [`SymmetricLayout`] with one stored block per charge-allowed block);
//! the algorithms call the same public operations as for dense tensors
//! (`contract`, `svd`, `lq`, `axpby`, `inner`, `norm`, `scale`), which take
//! the symmetric paths of `uni20-dist` for symmetric operands.
//!
//! # Conventions
//!
//! A leg's sectors are sorted by charge (the canonical order of
//! [`Leg`]), so the dense embedding of a leg lists the basis states sector
//! by sector: a [`SectorLeg`] carries the leg and `order`, the original
//! index (site basis state, MPO bond state) at each dense position. Charge
//! flows from left to right; the bond charge of an MPS is the total charge
//! of the sites to its left (the running sum of the site charges):
//!
//! | tensor | legs (direction) | rule (flux 0) |
//! |---|---|---|
//! | MPS site `M[a, s, b]` | `a` In, `s` In, `b` Out | `q_b = q_a + q_s` |
//! | MPO site `W[w, v, s, t]` | `w` Out, `v` In, `s` In, `t` Out | `q_s - q_t = q_w - q_v` |
//! | left environment `L[a, w, c]` | `a` In, `w` In, `c` Out | |
//! | right environment `R[b, x, d]` | `b` Out, `x` Out, `d` In | |
//!
//! The MPO bond charge is the charge of the operators to the right of the
//! bond ([`crate::LocalMpo::bond_charges`]), so the rule of `W` says that
//! the site operator carries `q_w - q_v`. The first MPS bond has charge 0
//! and the last the state's total charge; the environments' bra legs have
//! the direction of the MPS legs they meet through `conj` (which flips
//! directions), the ket and MPO legs the dual ones, so every contraction
//! of the sweep joins an `Out` leg with an `In` leg.

use std::collections::BTreeMap;
use std::sync::Arc;

use uni20_dispatch::{DType, LocalTensor};
use uni20_dist::symmetry::{Charge, Direction, Leg, Sector, SymmetricLayout, Symmetry};
use uni20_dist::{sym_random, DistTensor};
use uni20_worker::Controller;

use crate::error::TnError;
use crate::mpo::Mpo;
use crate::mps::{right_normalize, site_seed, Mps};
use crate::opsum::LocalMpo;
use crate::sites::Site;

/// A leg of a symmetric tensor with the map from its dense positions to
/// the original basis order.
#[derive(Clone, Debug, PartialEq)]
pub struct SectorLeg {
    /// The leg (sectors sorted by charge, tiled).
    pub leg: Leg,
    /// `order[k]`: the original index (site basis state or MPO bond state)
    /// at position `k` of the leg's dense embedding; a permutation of
    /// `0..leg.dim()`.
    pub order: Vec<usize>,
}

impl SectorLeg {
    /// The leg of states with charges `charges` (in their original order),
    /// direction `dir`, sectors tiled into tiles of at most `block` states.
    /// States of one charge keep their relative order.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for no states or `block == 0`;
    /// [`TnError::Symmetry`] for a charge not of `symmetry`.
    pub fn new(symmetry: &Symmetry, charges: &[Charge], dir: Direction, block: usize) -> Result<SectorLeg, TnError> {
        if charges.is_empty() || block == 0 {
            return Err(TnError::InvalidOption {
                name: "sector leg",
                value: format!("{} states, block {block}", charges.len()),
                expected: "at least one state and a block of at least 1",
            });
        }
        let mut order: Vec<usize> = (0..charges.len()).collect();
        order.sort_by(|&a, &b| charges[a].cmp(&charges[b]));
        let mut sectors: Vec<Sector> = Vec::new();
        for &k in &order {
            match sectors.last_mut() {
                Some(s) if s.charge == charges[k] => s.dim += 1,
                _ => sectors.push(Sector {
                    charge: charges[k].clone(),
                    dim: 1,
                }),
            }
        }
        let leg = Leg::tiled(symmetry.clone(), dir, sectors, block)?;
        Ok(SectorLeg { leg, order })
    }

    /// The physical leg of `site` (direction `dir`; In on an MPS site).
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for a site without charges or
    /// `block == 0`.
    pub fn physical(site: &Site, dir: Direction, block: usize) -> Result<SectorLeg, TnError> {
        let (g, q) = site.charges().ok_or_else(|| TnError::InvalidOption {
            name: "site charges",
            value: format!("site type {} has none", site.name()),
            expected: "a site built with a conservation law (Conserve::Sz, N, NSz or Parity)",
        })?;
        SectorLeg::new(g, q, dir, block)
    }

    /// The dense position of original index `i`.
    ///
    /// # Panics
    /// If `i` is not below the leg's dimension.
    pub fn position(&self, i: usize) -> usize {
        self.order
            .iter()
            .position(|&k| k == i)
            .expect("an index of the leg's original order")
    }
}

fn symmetry_of(sites: &[Site]) -> Result<Symmetry, TnError> {
    let mut g: Option<&Symmetry> = None;
    for s in sites {
        let (h, _) = s.charges().ok_or_else(|| TnError::InvalidOption {
            name: "site charges",
            value: format!("site type {} has none", s.name()),
            expected: "every site built with one conservation law",
        })?;
        match g {
            None => g = Some(h),
            Some(g0) if g0 == h => {}
            Some(g0) => {
                return Err(uni20_dist::symmetry::SymmetryError::GroupMismatch {
                    what: "the sites of a symmetric MPS or MPO".into(),
                    first: g0.clone(),
                    second: h.clone(),
                }
                .into())
            }
        }
    }
    g.cloned().ok_or(TnError::InvalidOption {
        name: "sites",
        value: "0".into(),
        expected: "at least one site",
    })
}

/// `out[p0, p1, ..] = t[order0[p0], order1[p1], ..]` for a real tensor.
fn permuted(t: &LocalTensor, orders: &[&[usize]]) -> Result<LocalTensor, TnError> {
    let shape = t.shape().to_vec();
    let src = t.to_c64_vec();
    let n: usize = shape.iter().product();
    let mut out = vec![0.0; n];
    let mut idx = vec![0usize; shape.len()];
    for (p, o) in out.iter_mut().enumerate() {
        let mut rem = p;
        for m in (0..shape.len()).rev() {
            idx[m] = rem % shape[m];
            rem /= shape[m];
        }
        let mut q = 0;
        for m in 0..shape.len() {
            q = q * shape[m] + orders[m][idx[m]];
        }
        *o = src[q].re;
    }
    Ok(LocalTensor::from_f64(&shape, out)?)
}

impl LocalMpo {
    /// The MPO bond legs `0 ..= L` on `sites` as they appear on the left
    /// leg of the site tensors (direction Out; see the module docs), tiled
    /// by `block`: sector order of [`LocalMpo::bond_charges`].
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for an MPO without bond charges, sites
    /// without charges or of another count, or `block == 0`;
    /// [`TnError::Symmetry`] for sites of different groups.
    pub fn bond_legs(&self, sites: &[Site], block: usize) -> Result<Vec<SectorLeg>, TnError> {
        let g = self.check_charged_sites(sites)?;
        let q = self.bond_charges().ok_or(TnError::InvalidOption {
            name: "MPO bond charges",
            value: "none".into(),
            expected: "an MPO built by OpSum::to_mpo from sites with charges",
        })?;
        q.iter().map(|b| SectorLeg::new(&g, b, Direction::Out, block)).collect()
    }

    fn check_charged_sites(&self, sites: &[Site]) -> Result<Symmetry, TnError> {
        if sites.len() != self.len() {
            return Err(TnError::Shape {
                what: "site types of a symmetric MPO (one per site)".into(),
                expected: vec![self.len()],
                got: vec![sites.len()],
            });
        }
        let dims: Vec<usize> = sites.iter().map(Site::dim).collect();
        let want: Vec<usize> = self.sites().iter().map(|w| w.shape()[2]).collect();
        if dims != want {
            return Err(TnError::Shape {
                what: "local dimensions of the site types vs the MPO".into(),
                expected: want,
                got: dims,
            });
        }
        symmetry_of(sites)
    }

    /// Distributes the MPO as symmetric tensors: site `i` is
    /// `W_i[w, v, s, t]` with legs (left bond Out, right bond In, bra spin
    /// In, ket spin Out) and flux 0, its dense embedding the tensor of
    /// [`LocalMpo::sites`] with every leg in sector order
    /// ([`LocalMpo::bond_legs`], [`SectorLeg::physical`]); sectors tiled
    /// by `block`. [`DistTensor::from_dense`] with tolerance 0 checks that
    /// every entry obeys the charge rule. Each distinct site tensor is
    /// scattered once and shared. The boundary vectors are `[1.0]` (the
    /// outer bonds have one state of charge 0); the boundary environments
    /// come from [`left_environment`] and [`right_environment`].
    ///
    /// # Errors
    /// As [`LocalMpo::bond_legs`]; [`TnError::InvalidOption`] for a complex
    /// MPO; [`TnError::Dist`] when an entry breaks the charge rule (an MPO
    /// built from other sites) or the scatter fails.
    pub fn to_symmetric_mpo(&self, ctl: &Controller<'_>, sites: &[Site], block: usize) -> Result<Mpo, TnError> {
        if !self.is_real() {
            return Err(TnError::InvalidOption {
                name: "MPO dtype",
                value: "complex".into(),
                expected: "a real MPO (the DMRG runs in f64)",
            });
        }
        let bonds = self.bond_legs(sites, block)?;
        let g = symmetry_of(sites)?;
        let mut distinct: Vec<(usize, DistTensor)> = Vec::new();
        let mut out = Vec::with_capacity(self.len());
        for (i, w) in self.sites().iter().enumerate() {
            let s_in = SectorLeg::physical(&sites[i], Direction::In, block)?;
            let legs = [
                bonds[i].leg.clone(),
                bonds[i + 1].leg.dual(),
                s_in.leg.clone(),
                s_in.leg.dual(),
            ];
            let same = |j: usize| {
                self.sites()[j] == *w
                    && bonds[j].leg == bonds[i].leg
                    && bonds[j + 1].leg == bonds[i + 1].leg
                    && sites[j] == sites[i]
            };
            if let Some((_, t)) = distinct.iter().find(|(j, _)| same(*j)) {
                out.push(t.clone());
                continue;
            }
            let dense = permuted(w, &[&bonds[i].order, &bonds[i + 1].order, &s_in.order, &s_in.order])?;
            let layout = SymmetricLayout::new(g.clone(), legs.to_vec(), g.identity())?;
            let t = DistTensor::from_dense(ctl, &dense, layout, 0.0)?;
            distinct.push((i, t.clone()));
            out.push(t);
        }
        Mpo::new(out, vec![1.0], vec![1.0])
    }
}

/// The legs of a symmetric tensor, or `None` for a dense one.
fn legs_of(t: &DistTensor) -> Option<&[Leg]> {
    t.layout().map(SymmetricLayout::legs)
}

/// The boundary environment left of site 0 for the run of `mpo` on `mps`:
/// [`Mpo::left_boundary`] for dense tensors; for symmetric ones
/// `L[a, w, c]` with the MPS's first bond leg as `a`, the dual of the
/// MPO's first bond leg as `w` and the dual of the MPS leg as `c`, holding
/// `mpo.left()` (in the dense order of the MPO bond), flux 0.
///
/// # Errors
/// [`TnError::InvalidOption`] when one of `mpo`, `mps` is symmetric and
/// the other is not, or the boundary breaks the charge rule (an outer MPO
/// bond state of nonzero charge); [`TnError::Shape`] for an outer MPS bond
/// that is not 1; the errors of [`DistTensor::from_dense`].
pub fn left_environment(ctl: &Controller<'_>, mpo: &Mpo, mps: &Mps, block: usize) -> Result<DistTensor, TnError> {
    boundary_env(ctl, mpo, mps, block, true)
}

/// The boundary environment right of the last site: [`Mpo::right_boundary`]
/// for dense tensors; for symmetric ones `R[b, x, d]` with the MPS's last
/// bond leg as `b` and the duals of the MPO's and the MPS's last bond legs
/// as `x` and `d` (see [`left_environment`]).
///
/// # Errors
/// As [`left_environment`].
pub fn right_environment(ctl: &Controller<'_>, mpo: &Mpo, mps: &Mps, block: usize) -> Result<DistTensor, TnError> {
    boundary_env(ctl, mpo, mps, block, false)
}

fn boundary_env(ctl: &Controller<'_>, mpo: &Mpo, mps: &Mps, block: usize, left: bool) -> Result<DistTensor, TnError> {
    check_layouts(mpo, mps)?;
    let (w, m, v) = if left {
        (&mpo.sites()[0], mps.site(0), mpo.left())
    } else {
        (&mpo.sites()[mpo.len() - 1], mps.site(mps.len() - 1), mpo.right())
    };
    let (Some(wl), Some(ml)) = (legs_of(w), legs_of(m)) else {
        return if left {
            mpo.left_boundary(ctl, block)
        } else {
            mpo.right_boundary(ctl, block)
        };
    };
    let (wleg, mleg) = if left { (&wl[0], &ml[0]) } else { (&wl[1], &ml[2]) };
    if mleg.dim() != 1 {
        return Err(TnError::Shape {
            what: "outer bond of the MPS".into(),
            expected: vec![1],
            got: vec![mleg.dim()],
        });
    }
    let g = mleg.symmetry().clone();
    let layout =
        SymmetricLayout::new(g.clone(), vec![mleg.clone(), wleg.dual(), mleg.dual()], g.identity()).map_err(|e| {
            TnError::InvalidOption {
                name: "symmetric boundary environment",
                value: e.to_string(),
                expected: "an outer MPO bond state of charge 0",
            }
        })?;
    let t = LocalTensor::from_f64(&[1, v.len(), 1], v.to_vec())?;
    Ok(DistTensor::from_dense(ctl, &t, layout, 0.0)?)
}

/// Checks that `mpo` and `mps` can run together: both dense, or both
/// symmetric of one group with matching physical legs (the MPS's physical
/// leg is the MPO's bra leg, with the same sectors and tiles).
///
/// # Errors
/// [`TnError::InvalidOption`] naming the first site that does not fit;
/// [`TnError::Shape`] for chains of different lengths.
pub fn check_layouts(mpo: &Mpo, mps: &Mps) -> Result<(), TnError> {
    if mpo.len() != mps.len() {
        return Err(TnError::Shape {
            what: "sites of the MPS vs the MPO".into(),
            expected: vec![mpo.len()],
            got: vec![mps.len()],
        });
    }
    for i in 0..mps.len() {
        let (w, m) = (legs_of(&mpo.sites()[i]), legs_of(mps.site(i)));
        let bad = |value: String| TnError::InvalidOption {
            name: "MPS and MPO layouts",
            value,
            expected: "both dense, or both symmetric with the MPS's physical leg equal to the MPO's bra leg",
        };
        match (w, m) {
            (None, None) => {}
            (Some(_), None) => return Err(bad(format!("site {i}: the MPO is symmetric, the MPS dense"))),
            (None, Some(_)) => return Err(bad(format!("site {i}: the MPS is symmetric, the MPO dense"))),
            (Some(w), Some(m)) => {
                if w.len() != 4 || m.len() != 3 || w[2] != m[1] {
                    return Err(bad(format!(
                        "site {i}: physical leg {:?} of the MPS vs bra leg {:?} of the MPO",
                        m.get(1),
                        w.get(2)
                    )));
                }
            }
        }
    }
    Ok(())
}

/// The total charge of a symmetric MPS, or `None` for a dense one (or
/// one with dense sites or a physical leg that is not In).
///
/// Summed over the chain, the sites' charge rules (`sum_Out q - sum_In q =
/// flux`, physical legs In) cancel on every inner bond, so the charge of
/// the physical legs is `s(first left leg) + s(last right leg) - sum_i
/// flux_i` with `s = +q` for an Out leg and `-q` for an In leg, whatever
/// directions the decompositions gave the bonds.
pub fn total_charge(mps: &Mps) -> Option<Charge> {
    let first = legs_of(mps.site(0))?.first()?;
    let last = legs_of(mps.site(mps.len() - 1))?.get(2)?;
    let g = first.symmetry().clone();
    let mut q = g
        .fuse(&first.signed_charge(0).ok()?, &last.signed_charge(0).ok()?)
        .ok()?;
    for m in mps.sites() {
        let lay = m.layout()?;
        q = g.fuse(&q, &g.dual(lay.flux()).ok()?).ok()?;
        if lay.legs().get(1)?.direction() != Direction::In {
            return None;
        }
    }
    Some(q)
}

fn site_layout(g: &Symmetry, left: &Leg, phys: &Leg, right: &Leg) -> Result<SymmetricLayout, TnError> {
    Ok(SymmetricLayout::new(
        g.clone(),
        vec![left.clone(), phys.clone(), right.dual()],
        g.identity(),
    )?)
}

impl Mps {
    /// The symmetric product state `|labels[0]> x |labels[1]> x ...` on
    /// charged `sites`: bond `i` has one state whose charge is the sum of
    /// the charges of `labels[..i]` (bond 0 charge 0), so the state's total
    /// charge ([`total_charge`]) is that of all labels; site `i` is
    /// `M_i[a, s, b]` (legs In, In, Out; flux 0) with a single 1 at the
    /// label's dense position ([`SectorLeg::physical`]); physical sectors
    /// tiled by `block`. Each distinct site tensor is scattered once.
    ///
    /// # Errors
    /// [`TnError::Shape`] when `labels` and `sites` differ in length;
    /// [`TnError::UnknownState`]; [`TnError::InvalidOption`] for sites
    /// without charges, an empty or too long chain or `block == 0`;
    /// [`TnError::Symmetry`] for sites of different groups; the errors of
    /// [`DistTensor::from_dense`].
    pub fn symmetric_product(
        ctl: &Controller<'_>,
        sites: &[Site],
        labels: &[&str],
        block: usize,
    ) -> Result<Mps, TnError> {
        crate::mpo::check_sites(sites.len())?;
        if labels.len() != sites.len() {
            return Err(TnError::Shape {
                what: "product state labels".into(),
                expected: vec![sites.len()],
                got: vec![labels.len()],
            });
        }
        let g = symmetry_of(sites)?;
        let mut q = g.identity();
        let mut made: Vec<((Site, usize, Charge), DistTensor)> = Vec::new();
        let mut out = Vec::with_capacity(sites.len());
        for (site, label) in sites.iter().zip(labels) {
            let s = site.state(label)?;
            let phys = SectorLeg::physical(site, Direction::In, block)?;
            let (_, charges) = site
                .charges()
                .ok_or(TnError::Internal("a checked site without charges"))?;
            let next = g.fuse(&q, &charges[s])?;
            let key = (site.clone(), s, q.clone());
            if let Some((_, t)) = made.iter().find(|(k, _)| *k == key) {
                out.push(t.clone());
                q = next;
                continue;
            }
            let bond = |c: &Charge| {
                Leg::new(
                    g.clone(),
                    Direction::In,
                    vec![Sector {
                        charge: c.clone(),
                        dim: 1,
                    }],
                )
            };
            let layout = site_layout(&g, &bond(&q)?, &phys.leg, &bond(&next)?)?;
            let mut v = vec![0.0; site.dim()];
            v[phys.position(s)] = 1.0;
            let t = DistTensor::from_dense(ctl, &LocalTensor::from_f64(&[1, site.dim(), 1], v)?, layout, 0.0)?;
            made.push((key, t.clone()));
            out.push(t);
            q = next;
        }
        Mps::from_sites(out)
    }

    /// A random symmetric state of total charge `target` on charged
    /// `sites`, right-normalised with the norm in site 0 (as [`Mps::random`]
    /// and as [`crate::Dmrg::new`] expects), f64. The bond sectors are those
    /// of [`bond_sectors`] (every charge that lies on a path from charge 0
    /// to `target`, dimensions capped at `chi` per bond); site `i` is
    /// [`sym_random`] in the layout `(bond i In, physical In, bond i+1
    /// Out)`, seeded by a mix of `seed` and `i`, sectors tiled by `block`;
    /// then brought into right-canonical form by [`uni20_dist::lq`] from
    /// the right, each `L` absorbed into the site before and divided by
    /// its norm (the LQ may shrink a sector whose dimension exceeds what
    /// its neighbours can fill).
    ///
    /// # Errors
    /// As [`bond_sectors`]; [`TnError::InvalidOption`] for `block == 0`;
    /// the errors of the distributed operations (the symmetric paths of
    /// `lq`, `contract`, `norm`, `scale`).
    pub fn symmetric_random(
        ctl: &Controller<'_>,
        sites: &[Site],
        target: &Charge,
        chi: usize,
        block: usize,
        seed: u64,
    ) -> Result<Mps, TnError> {
        let sectors = bond_sectors(sites, target, chi)?;
        let g = symmetry_of(sites)?;
        let legs: Vec<Leg> = sectors
            .into_iter()
            .map(|s| Leg::tiled(g.clone(), Direction::In, s, block))
            .collect::<Result<_, _>>()?;
        let mut out = Vec::with_capacity(sites.len());
        for (i, site) in sites.iter().enumerate() {
            let phys = SectorLeg::physical(site, Direction::In, block)?;
            let layout = site_layout(&g, &legs[i], &phys.leg, &legs[i + 1])?;
            out.push(sym_random(ctl, Arc::new(layout), DType::F64, site_seed(seed, i))?);
        }
        right_normalize(ctl, &mut out, block)?;
        Mps::from_sites(out)
    }
}

/// The bond sectors of a random state of total charge `target` on
/// `sites` (`L + 1` bonds, each a list of sectors sorted by charge).
///
/// A charge `q` is kept at bond `i` when the sites `0..i` can carry `q`
/// and the sites `i..L` can carry `target - q`; its dimension is at most
/// `min(n_left(q), n_right(target - q))`, the numbers of product states of
/// the two parts with those charges (the largest dimension an exact state
/// can need), and at most what its neighbour bonds can reach through one
/// site. With more room than `chi` states, the sectors share `chi`: each
/// gets one state, the rest go one at a time to the sector with the
/// largest bound per state it holds; with more sectors than `chi`, the
/// `chi` sectors of the largest bounds are kept (ties: the lower charge)
/// and sectors left without a path from charge 0 to `target` are dropped.
///
/// # Errors
/// [`TnError::InvalidOption`] for `chi == 0`, sites without charges, or a
/// `target` the sites cannot reach (or cannot reach within `chi` states
/// per bond); [`TnError::Symmetry`] for a charge not of the sites' group.
pub fn bond_sectors(sites: &[Site], target: &Charge, chi: usize) -> Result<Vec<Vec<Sector>>, TnError> {
    crate::mpo::check_sites(sites.len())?;
    if chi == 0 {
        return Err(TnError::InvalidOption {
            name: "chi",
            value: "0".into(),
            expected: "at least 1",
        });
    }
    let g = symmetry_of(sites)?;
    g.check(target)?;
    let l = sites.len();
    let site_q: Vec<Vec<Charge>> = sites
        .iter()
        .map(|s| s.charges().map(|(_, q)| q.to_vec()).unwrap_or_default())
        .collect();
    // Numbers of product states per charge, from the left and from the right.
    let step = |m: &BTreeMap<Charge, f64>, qs: &[Charge], sign: bool| -> Result<BTreeMap<Charge, f64>, TnError> {
        let mut n = BTreeMap::new();
        for (c, k) in m {
            for q in qs {
                let q = if sign { q.clone() } else { g.dual(q)? };
                *n.entry(g.fuse(c, &q)?).or_insert(0.0) += k;
            }
        }
        Ok(n)
    };
    let mut from_left = vec![BTreeMap::from([(g.identity(), 1.0)])];
    for q in &site_q {
        let next = step(from_left.last().unwrap_or(&BTreeMap::new()), q, true)?;
        from_left.push(next);
    }
    // from_right[i]: charges c of bond i from which `target` is reachable
    // (c + sites i..L = target), with the number of ways.
    let mut from_right = vec![BTreeMap::from([(target.clone(), 1.0)])];
    for q in site_q.iter().rev() {
        let next = step(from_right.last().unwrap_or(&BTreeMap::new()), q, false)?;
        from_right.push(next);
    }
    from_right.reverse();
    let mut bonds: Vec<BTreeMap<Charge, (f64, usize)>> = Vec::with_capacity(l + 1);
    for i in 0..=l {
        let mut b = BTreeMap::new();
        for (c, nl) in &from_left[i] {
            if let Some(nr) = from_right[i].get(c) {
                b.insert(c.clone(), (nl.min(*nr), 0usize));
            }
        }
        if b.is_empty() {
            return Err(TnError::InvalidOption {
                name: "target charge",
                value: target.to_string(),
                expected: "a total charge the sites can carry",
            });
        }
        bonds.push(b);
    }
    for b in &mut bonds {
        allocate(b, chi);
    }
    // Connectivity: drop sectors without a neighbour through one site,
    // then cap each dimension by what the neighbours reach.
    loop {
        let mut changed = false;
        for i in 0..l {
            let reach = |from: &BTreeMap<Charge, (f64, usize)>, c: &Charge, fwd: bool| -> Result<usize, TnError> {
                let mut n = 0usize;
                for q in &site_q[i] {
                    let src = if fwd { g.fuse(c, &g.dual(q)?)? } else { g.fuse(c, q)? };
                    n = n.saturating_add(from.get(&src).map_or(0, |x| x.1));
                }
                Ok(n)
            };
            let (a, b) = bonds.split_at_mut(i + 1);
            let (prev, next) = (&mut a[i], &mut b[0]);
            for (c, x) in next.iter_mut() {
                let r = reach(prev, c, true)?;
                if r < x.1 {
                    x.1 = r;
                    changed = true;
                }
            }
            for (c, x) in prev.iter_mut() {
                let r = reach(next, c, false)?;
                if r < x.1 {
                    x.1 = r;
                    changed = true;
                }
            }
        }
        for b in &mut bonds {
            let before = b.len();
            b.retain(|_, x| x.1 > 0);
            changed |= b.len() != before;
        }
        if bonds.iter().any(BTreeMap::is_empty) {
            return Err(TnError::InvalidOption {
                name: "chi",
                value: chi.to_string(),
                expected: "enough states per bond to connect charge 0 with the target",
            });
        }
        if !changed {
            break;
        }
    }
    Ok(bonds
        .into_iter()
        .map(|b| b.into_iter().map(|(charge, (_, dim))| Sector { charge, dim }).collect())
        .collect())
}

/// Shares `chi` states among the sectors of one bond (`(bound, dim)`
/// per charge), as [`bond_sectors`] states.
fn allocate(b: &mut BTreeMap<Charge, (f64, usize)>, chi: usize) {
    if b.len() > chi {
        let mut by: Vec<(Charge, f64)> = b.iter().map(|(c, x)| (c.clone(), x.0)).collect();
        by.sort_by(|x, y| y.1.total_cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
        let keep: std::collections::BTreeSet<Charge> = by.into_iter().take(chi).map(|x| x.0).collect();
        b.retain(|c, _| keep.contains(c));
    }
    for x in b.values_mut() {
        x.1 = 1;
    }
    let mut left = chi - b.len();
    while left > 0 {
        let best = b
            .values_mut()
            .filter(|x| (x.1 as f64) < x.0)
            .max_by(|x, y| (x.0 / x.1 as f64).total_cmp(&(y.0 / y.1 as f64)));
        match best {
            Some(x) => x.1 += 1,
            None => break,
        }
        left -= 1;
    }
}
