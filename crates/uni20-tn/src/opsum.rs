//! Operator sums ([`OpSum`]) compiled into exact, compressed MPOs
//! ([`LocalMpo`]).
//!
//! A term is a coefficient times a product of named site operators
//! (`0.5 * Sp_3 Sm_7`). [`OpSum::to_mpo`] first brings each term into a
//! product of one local operator per site: the operators are sorted by
//! site (a stable sort; swapping two fermionic operators on different
//! sites gives a minus sign), operators on one site are multiplied in the
//! order written, and the Jordan-Wigner string is inserted (a site gets the
//! site's `F` on the right of its operator when an odd number of fermionic
//! operators stand further right). Then, at every bond, the terms that
//! cross it give a coefficient matrix `M[left string, right string]`
//! whose singular value decomposition (per charge block, when the sites
//! carry charges) gives the bond's channels: the construction of ITensor's
//! `OpSum -> MPO` and of the finite-state-automaton MPOs of TeNPy, with the
//! bond dimension `2 + rank(M)`. Standard models come out at their minimal
//! bond dimensions (Heisenberg 5, transverse-field Ising 3, Hubbard 6), an
//! exponentially decaying coupling at a bond dimension independent of the
//! length, and a power law to the tolerance [`MpoOptions::cutoff`].
//!
//! The bond states are, in order: `0` = the term is complete (identity to
//! the right), `1 ..= K` = the channels, `K + 1` = no operator placed yet
//! (identity to the left). The first bond has only the last kind and the
//! final bond only the first, so the boundary vectors are `[1.0]`.

use std::collections::HashMap;

use uni20_dispatch::decomp::{svd, SvdBackendList, SvdOptions};
use uni20_dispatch::{DType, LocalTensor, C64};
use uni20_dist::symmetry::{Charge, Symmetry};
use uni20_dist::DistTensor;
use uni20_worker::Controller;

use crate::error::TnError;
use crate::mpo::{check_sites, Mpo};
use crate::sites::{matmul, Site};

/// One term: `coeff * ops[0] ops[1] ...` (operator name, site index), in
/// the order written.
#[derive(Clone, Debug, PartialEq)]
pub struct OpTerm {
    /// The coefficient.
    pub coeff: C64,
    /// The operators and their sites, as written.
    pub ops: Vec<(String, usize)>,
}

/// A sum of products of site operators: a Hamiltonian, or any operator to
/// measure.
///
/// ```
/// use uni20_tn::{Conserve, OpSum, Site};
/// // The open Heisenberg chain of 6 spins 1/2.
/// let sites = vec![Site::spin(1, Conserve::Sz).unwrap(); 6];
/// let mut h = OpSum::new();
/// for i in 0..5 {
///     h.add(0.5, &[("Sp", i), ("Sm", i + 1)]);
///     h.add(0.5, &[("Sm", i), ("Sp", i + 1)]);
///     h.add(1.0, &[("Sz", i), ("Sz", i + 1)]);
/// }
/// let mpo = h.to_mpo(&sites, &Default::default()).unwrap();
/// assert_eq!(mpo.max_bond(), 5);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpSum {
    terms: Vec<OpTerm>,
}

/// Options of [`OpSum::to_mpo`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MpoOptions {
    /// Relative cutoff of the bond compression: at every bond, singular
    /// values of the coefficient matrix at or below `cutoff` times its
    /// largest are dropped (finite, `>= 0`). `1e-13` keeps the MPO exact to
    /// rounding; a larger value compresses power-law couplings.
    pub cutoff: f64,
}

impl Default for MpoOptions {
    fn default() -> Self {
        MpoOptions { cutoff: 1e-13 }
    }
}

/// An MPO on the root, before it is distributed: per site `W[a, b, s, t]`
/// (left bond, right bond, outgoing, incoming), f64 when every entry is
/// real, complex otherwise; boundary vectors `[1.0]`; the charge of every
/// bond state when the sites carry charges.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalMpo {
    sites: Vec<LocalTensor>,
    bond_charges: Option<Vec<Vec<Charge>>>,
    discarded: f64,
}

impl OpSum {
    /// An empty sum.
    pub fn new() -> OpSum {
        OpSum::default()
    }

    /// Adds `coeff * ops[0] ops[1] ...`; `ops` are (operator name, site)
    /// pairs in the order of the product. Names and sites are checked by
    /// [`OpSum::to_mpo`].
    pub fn add(&mut self, coeff: impl Into<C64>, ops: &[(&str, usize)]) -> &mut OpSum {
        self.terms.push(OpTerm {
            coeff: coeff.into(),
            ops: ops.iter().map(|&(n, i)| (n.to_string(), i)).collect(),
        });
        self
    }

    /// The terms, in the order added.
    pub fn terms(&self) -> &[OpTerm] {
        &self.terms
    }

    /// Compiles the sum into an MPO on `sites` (one site type per site).
    ///
    /// # Errors
    /// [`TnError::UnknownOperator`]; [`TnError::BadTerm`] for a term with
    /// no operators, a site beyond the chain, a non-finite coefficient, an
    /// odd number of fermionic operators, a fermionic operator whose string
    /// crosses a site without `F`, or (on charged sites) a term that
    /// changes the total charge; [`TnError::ChargeMismatch`] for an
    /// operator without a definite charge; [`TnError::InvalidOption`] for a
    /// bad cutoff or chain length; [`TnError::Krylov`] if a compression SVD
    /// fails.
    pub fn to_mpo(&self, sites: &[Site], opts: &MpoOptions) -> Result<LocalMpo, TnError> {
        check_sites(sites.len())?;
        if !(opts.cutoff.is_finite() && opts.cutoff >= 0.0) {
            return Err(TnError::InvalidOption {
                name: "cutoff",
                value: opts.cutoff.to_string(),
                expected: "finite and >= 0",
            });
        }
        let symmetry = common_symmetry(sites)?;
        let mut table = OpTable::new(sites);
        let mut terms = Vec::with_capacity(self.terms.len());
        for (k, t) in self.terms.iter().enumerate() {
            if let Some(n) = normalize(k, t, sites, &mut table, symmetry.as_ref())? {
                terms.push(n);
            }
        }
        build(sites, &table, &terms, opts, symmetry.as_ref())
    }
}

/// The group shared by all sites, or `None` when no site has charges.
fn common_symmetry(sites: &[Site]) -> Result<Option<Symmetry>, TnError> {
    let with: Vec<_> = sites.iter().filter_map(|s| s.charges()).collect();
    if with.is_empty() {
        return Ok(None);
    }
    if with.len() != sites.len() {
        return Err(TnError::InvalidOption {
            name: "site charges",
            value: "some sites with charges, some without".into(),
            expected: "all sites with charges of one group, or none",
        });
    }
    let g = with[0].0.clone();
    if let Some((h, _)) = with.iter().find(|(h, _)| **h != g) {
        return Err(uni20_dist::symmetry::SymmetryError::GroupMismatch {
            what: "the sites of an MPO".into(),
            first: g,
            second: (*h).clone(),
        }
        .into());
    }
    Ok(Some(g))
}

/// Local operators interned per site: id 0 is the identity.
struct OpTable {
    mats: Vec<Vec<Vec<C64>>>,
    index: Vec<HashMap<Vec<(u64, u64)>, usize>>,
}

fn key(m: &[C64]) -> Vec<(u64, u64)> {
    m.iter()
        .map(|z| ((z.re + 0.0).to_bits(), (z.im + 0.0).to_bits()))
        .collect()
}

impl OpTable {
    fn new(sites: &[Site]) -> OpTable {
        let mut t = OpTable {
            mats: vec![Vec::new(); sites.len()],
            index: vec![HashMap::new(); sites.len()],
        };
        for (i, s) in sites.iter().enumerate() {
            let id = s.op("Id").map(|o| o.matrix.clone()).unwrap_or_default();
            t.intern(i, id);
        }
        t
    }

    fn intern(&mut self, site: usize, m: Vec<C64>) -> usize {
        let k = key(&m);
        if let Some(&id) = self.index[site].get(&k) {
            return id;
        }
        let id = self.mats[site].len();
        self.mats[site].push(m);
        self.index[site].insert(k, id);
        id
    }
}

/// A term brought into normal form: one local operator id per site from
/// `first` to `first + ops.len() - 1`.
struct NormalTerm {
    coeff: C64,
    first: usize,
    ops: Vec<usize>,
}

fn bad(term: usize, reason: String) -> TnError {
    TnError::BadTerm { term, reason }
}

fn normalize(
    k: usize,
    t: &OpTerm,
    sites: &[Site],
    table: &mut OpTable,
    symmetry: Option<&Symmetry>,
) -> Result<Option<NormalTerm>, TnError> {
    if !(t.coeff.re.is_finite() && t.coeff.im.is_finite()) {
        return Err(bad(k, format!("coefficient {} is not finite", t.coeff)));
    }
    if t.ops.is_empty() {
        return Err(bad(
            k,
            "no operators (add a constant as a multiple of Id on a site)".into(),
        ));
    }
    let l = sites.len();
    let mut ops = Vec::with_capacity(t.ops.len());
    for (name, i) in &t.ops {
        if *i >= l {
            return Err(bad(
                k,
                format!("operator {name} on site {i}, but the chain has {l} sites"),
            ));
        }
        ops.push((name.as_str(), *i, sites[*i].op(name)?));
    }
    if t.coeff == C64::new(0.0, 0.0) {
        return Ok(None);
    }
    // Sign of the stable sort by site: each pair of fermionic operators in the wrong order.
    let mut sign = 1.0;
    for p in 0..ops.len() {
        for q in p + 1..ops.len() {
            if ops[p].2.fermionic && ops[q].2.fermionic && ops[p].1 > ops[q].1 {
                sign = -sign;
            }
        }
    }
    let fermionic = ops.iter().filter(|o| o.2.fermionic).count();
    if fermionic % 2 == 1 {
        return Err(bad(
            k,
            "an odd number of fermionic operators (the term changes fermion parity)".into(),
        ));
    }
    let mut sorted = ops.clone();
    sorted.sort_by_key(|o| o.1);
    let first = sorted[0].1;
    let last = sorted[sorted.len() - 1].1;
    let mut local = Vec::with_capacity(last - first + 1);
    let mut total: Option<Charge> = symmetry.map(Symmetry::identity);
    for (site, site_type) in sites.iter().enumerate().take(last + 1).skip(first) {
        let d = site_type.dim();
        let mut m: Option<Vec<C64>> = None;
        for o in sorted.iter().filter(|o| o.1 == site) {
            m = Some(match m {
                None => o.2.matrix.clone(),
                Some(prev) => matmul(d, &prev, &o.2.matrix),
            });
            if let (Some(g), Some(acc)) = (symmetry, total.as_mut()) {
                let q = site_type.op_charge(o.0)?.unwrap_or_else(|| g.identity());
                *acc = g.fuse(acc, &q)?;
            }
        }
        let right = sorted.iter().filter(|o| o.1 > site && o.2.fermionic).count();
        if right % 2 == 1 {
            let f = site_type.jw_string().ok_or_else(|| {
                bad(
                    k,
                    format!(
                        "a fermionic operator's Jordan-Wigner string crosses site {site} ({}), which has no F operator",
                        site_type.name()
                    ),
                )
            })?;
            m = Some(match m {
                None => f.matrix.clone(),
                Some(prev) => matmul(d, &prev, &f.matrix),
            });
        }
        local.push(match m {
            None => 0,
            Some(m) => table.intern(site, m),
        });
    }
    if let (Some(g), Some(q)) = (symmetry, &total) {
        if *q != g.identity() {
            return Err(bad(
                k,
                format!("the term carries charge {q}; an MPO under a conservation law must be neutral"),
            ));
        }
    }
    Ok(Some(NormalTerm {
        coeff: t.coeff * sign,
        first,
        ops: local,
    }))
}

/// The charge of an interned local operator (identity when it is zero).
fn local_charge(site: &Site, g: &Symmetry, m: &[C64]) -> Result<Charge, TnError> {
    Ok(site
        .matrix_charge("(a product of operators)", m)?
        .unwrap_or_else(|| g.identity()))
}

/// One bond's compression: the distinct right strings and the channels.
struct BondChannels {
    /// Right string (operator ids from the site after the bond) -> column.
    cols: HashMap<Vec<usize>, usize>,
    /// `v[col][channel]`: the channels' right-singular vectors.
    v: Vec<Vec<C64>>,
    /// Charge of each channel.
    charges: Vec<Charge>,
    /// Left strings that start at the site before the bond: row -> (op id, row of M V).
    starts: Vec<(usize, Vec<C64>)>,
}

fn build(
    sites: &[Site],
    table: &OpTable,
    terms: &[NormalTerm],
    opts: &MpoOptions,
    symmetry: Option<&Symmetry>,
) -> Result<LocalMpo, TnError> {
    let l = sites.len();
    let backends = SvdBackendList::default_cpu(1);
    // bonds[b] for b = 1 .. l-1 (between sites b-1 and b); index b.
    let mut bonds: Vec<Option<BondChannels>> = (0..=l).map(|_| None).collect();
    let mut discarded = 0.0;
    for (b, slot) in bonds.iter_mut().enumerate().take(l).skip(1) {
        // Terms crossing bond b: first < b <= last.
        let mut rows: HashMap<(usize, Vec<usize>), usize> = HashMap::new();
        let mut cols: HashMap<Vec<usize>, usize> = HashMap::new();
        let mut entries: Vec<(usize, usize, C64)> = Vec::new();
        let mut col_charge: Vec<Charge> = Vec::new();
        for t in terms {
            let last = t.first + t.ops.len() - 1;
            if !(t.first < b && b <= last) {
                continue;
            }
            let split = b - t.first;
            let lkey = (t.first, t.ops[..split].to_vec());
            let rkey = t.ops[split..].to_vec();
            let nr = rows.len();
            let r = *rows.entry(lkey).or_insert(nr);
            let nc = cols.len();
            let c = *cols.entry(rkey.clone()).or_insert(nc);
            if c == col_charge.len() {
                let q = match symmetry {
                    None => Symmetry::trivial().identity(),
                    Some(g) => {
                        let mut acc = g.identity();
                        for (j, &id) in rkey.iter().enumerate() {
                            let site = b + j;
                            acc = g.fuse(&acc, &local_charge(&sites[site], g, &table.mats[site][id])?)?;
                        }
                        acc
                    }
                };
                col_charge.push(q);
            }
            entries.push((r, c, t.coeff));
        }
        let (nr, nc) = (rows.len(), cols.len());
        let mut m = vec![C64::new(0.0, 0.0); nr * nc];
        for (r, c, x) in entries {
            m[r * nc + c] += x;
        }
        // SVD per charge block of the columns (rows follow: a row's entries share one charge).
        let mut blocks: Vec<(Charge, Vec<usize>)> = Vec::new();
        for (c, q) in col_charge.iter().enumerate() {
            match blocks.iter_mut().find(|(p, _)| p == q) {
                Some((_, v)) => v.push(c),
                None => blocks.push((q.clone(), vec![c])),
            }
        }
        blocks.sort_by(|a, b| a.0.cmp(&b.0));
        // Every block's SVD first: the cutoff is relative to the bond's largest value.
        let mut svds = Vec::with_capacity(blocks.len());
        for (q, bcols) in &blocks {
            let brows: Vec<usize> = (0..nr)
                .filter(|&r| bcols.iter().any(|&c| m[r * nc + c] != C64::new(0.0, 0.0)))
                .collect();
            if brows.is_empty() {
                continue;
            }
            let (vb, sv) = right_vectors(&m, nc, &brows, bcols, &backends)?;
            svds.push((q.clone(), bcols.clone(), vb, sv));
        }
        let smax = svds.iter().flat_map(|x| x.3.iter().copied()).fold(0.0f64, f64::max);
        let kept: Vec<usize> = svds
            .iter()
            .map(|x| x.3.iter().filter(|&&v| v > opts.cutoff * smax && v > 0.0).count())
            .collect();
        let kc: usize = kept.iter().sum();
        let mut v: Vec<Vec<C64>> = vec![vec![C64::new(0.0, 0.0); kc]; nc];
        let mut charges = Vec::with_capacity(kc);
        let mut dropped = 0.0;
        for ((q, bcols, vb, sv), &keep) in svds.iter().zip(&kept) {
            let r = sv.len();
            dropped += sv[keep..].iter().map(|x| x * x).sum::<f64>();
            for k in 0..keep {
                let ch = charges.len();
                for (j, &c) in bcols.iter().enumerate() {
                    v[c][ch] = vb[j * r + k];
                }
                charges.push(q.clone());
            }
        }
        // Start transitions: rows whose left string is one operator at site b-1.
        let mut starts = Vec::new();
        for ((first, ops), &r) in &rows {
            if *first == b - 1 && ops.len() == 1 {
                let mut mv = vec![C64::new(0.0, 0.0); kc];
                for c in 0..nc {
                    let x = m[r * nc + c];
                    if x != C64::new(0.0, 0.0) {
                        for (k, slot) in mv.iter_mut().enumerate() {
                            *slot += x * v[c][k];
                        }
                    }
                }
                starts.push((ops[0], mv));
            }
        }
        discarded += dropped;
        *slot = Some(BondChannels {
            cols,
            v,
            charges,
            starts,
        });
    }

    // Bond sizes: bond 0 = [start], bond l = [done], else [done, channels.., start].
    let size = |b: usize| -> usize {
        if b == 0 || b == l {
            1
        } else {
            bonds[b].as_ref().map_or(0, |x| x.charges.len()) + 2
        }
    };
    let done = |b: usize| -> Option<usize> { (b != 0).then_some(0) };
    let start = |b: usize| -> Option<usize> {
        if b == l {
            None
        } else if b == 0 {
            Some(0)
        } else {
            Some(size(b) - 1)
        }
    };
    let mut out = Vec::with_capacity(l);
    for n in 0..l {
        let d = sites[n].dim();
        let (dl, dr) = (size(n), size(n + 1));
        let mut w = vec![C64::new(0.0, 0.0); dl * dr * d * d];
        let mut add = |a: usize, bb: usize, op: &[C64], x: C64| {
            for s in 0..d {
                for t in 0..d {
                    w[((a * dr + bb) * d + s) * d + t] += x * op[s * d + t];
                }
            }
        };
        let id = &table.mats[n][0];
        let one = C64::new(1.0, 0.0);
        if let (Some(a), Some(bb)) = (start(n), start(n + 1)) {
            add(a, bb, id, one);
        }
        if let (Some(a), Some(bb)) = (done(n), done(n + 1)) {
            add(a, bb, id, one);
        }
        // On-site terms.
        if let (Some(a), Some(bb)) = (start(n), done(n + 1)) {
            for t in terms.iter().filter(|t| t.first == n && t.ops.len() == 1) {
                add(a, bb, &table.mats[n][t.ops[0]], t.coeff);
            }
        }
        // Terms starting here: start -> channel of bond n+1.
        if let (Some(a), Some(next)) = (start(n), bonds[n + 1].as_ref()) {
            for (op, mv) in &next.starts {
                for (k, x) in mv.iter().enumerate() {
                    if *x != C64::new(0.0, 0.0) {
                        add(a, 1 + k, &table.mats[n][*op], *x);
                    }
                }
            }
        }
        // Channels of bond n continue or end here.
        if let Some(cur) = bonds[n].as_ref() {
            for (rkey, &c) in &cur.cols {
                let op = &table.mats[n][rkey[0]];
                let rest = &rkey[1..];
                for (k, vk) in cur.v[c].iter().enumerate() {
                    let x = vk.conj();
                    if x == C64::new(0.0, 0.0) {
                        continue;
                    }
                    if rest.is_empty() {
                        add(1 + k, 0, op, x);
                    } else {
                        let next = bonds[n + 1]
                            .as_ref()
                            .ok_or(TnError::Internal("a term continues past the chain"))?;
                        let c2 = *next
                            .cols
                            .get(rest)
                            .ok_or(TnError::Internal("a right string is missing at the next bond"))?;
                        for (k2, v2) in next.v[c2].iter().enumerate() {
                            if *v2 != C64::new(0.0, 0.0) {
                                add(1 + k, 1 + k2, op, x * v2);
                            }
                        }
                    }
                }
            }
        }
        let realv = w.iter().all(|z| z.im.abs() <= 1e-14 * (1.0 + z.re.abs()));
        let shape = [dl, dr, d, d];
        out.push(if realv {
            LocalTensor::from_f64(&shape, w.iter().map(|z| z.re).collect())?
        } else {
            LocalTensor::from_c64(&shape, w)?
        });
    }
    let bond_charges = symmetry.map(|g| {
        (0..=l)
            .map(|b| {
                let mut v = Vec::with_capacity(size(b));
                if b == 0 || b == l {
                    v.push(g.identity());
                } else {
                    v.push(g.identity());
                    if let Some(x) = bonds[b].as_ref() {
                        v.extend(x.charges.iter().cloned());
                    }
                    v.push(g.identity());
                }
                v
            })
            .collect()
    });
    Ok(LocalMpo {
        sites: out,
        bond_charges,
        discarded,
    })
}

/// Right singular vectors of the block `rows x cols` of `m` (`nc` columns
/// in all): returns `V` as `cols.len() x r` row-major (`M = U S V^dagger`)
/// and the `r` singular values.
fn right_vectors(
    m: &[C64],
    nc: usize,
    rows: &[usize],
    cols: &[usize],
    backends: &SvdBackendList,
) -> Result<(Vec<C64>, Vec<f64>), TnError> {
    let (p, q) = (rows.len(), cols.len());
    let mut blk = Vec::with_capacity(p * q);
    for &r in rows {
        for &c in cols {
            blk.push(m[r * nc + c]);
        }
    }
    let real = blk.iter().all(|z| z.im == 0.0);
    let t = if real {
        LocalTensor::from_f64(&[p, q], blk.iter().map(|z| z.re).collect())?
    } else {
        LocalTensor::from_c64(&[p, q], blk)?
    };
    let res = svd(&t, &SvdOptions::default(), backends)?;
    let r = res.s.len();
    let vh = res.vh.to_c64_vec(); // r x q
    let mut v = vec![C64::new(0.0, 0.0); q * r];
    for k in 0..r {
        for j in 0..q {
            v[j * r + k] = vh[k * q + j].conj();
        }
    }
    debug_assert!(res.vh.dtype() == DType::F64 || res.vh.dtype() == DType::C64);
    Ok((v, res.s))
}

impl LocalMpo {
    /// The site tensors `W_i[a, b, s, t]`.
    pub fn sites(&self) -> &[LocalTensor] {
        &self.sites
    }

    /// Number of sites.
    pub fn len(&self) -> usize {
        self.sites.len()
    }

    /// Always false (an MPO has at least one site).
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    /// Bond dimensions `D_0 .. D_L` (`D_0 = D_L = 1`).
    pub fn bond_dims(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.sites.iter().map(|w| w.shape()[0]).collect();
        v.push(self.sites.last().map_or(1, |w| w.shape()[1]));
        v
    }

    /// The largest bond dimension.
    pub fn max_bond(&self) -> usize {
        self.bond_dims().into_iter().max().unwrap_or(1)
    }

    /// The charges of the bond states (per bond, per state), when the sites
    /// carry charges: each channel carries the charge of the operators to
    /// its right.
    pub fn bond_charges(&self) -> Option<&[Vec<Charge>]> {
        self.bond_charges.as_deref()
    }

    /// Sum over bonds of the squared singular values that the compression
    /// dropped (0 for an exact MPO): the squared Frobenius norm of what was
    /// left out, bond by bond, in units of the coefficients squared.
    pub fn discarded(&self) -> f64 {
        self.discarded
    }

    /// True when every site tensor is real (f64).
    pub fn is_real(&self) -> bool {
        self.sites.iter().all(|w| w.dtype() == DType::F64)
    }

    /// The operator as a dense `d^L x d^L` matrix (row-major, the first site
    /// the most significant), for checks against exact diagonalisation.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] when `d^L` exceeds 4096.
    pub fn dense_matrix(&self) -> Result<Vec<C64>, TnError> {
        let dims: Vec<usize> = self.sites.iter().map(|w| w.shape()[2]).collect();
        let n = dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&n| n <= 4096);
        let Some(n) = n else {
            return Err(TnError::InvalidOption {
                name: "dense MPO size",
                value: format!("{dims:?}"),
                expected: "a product of site dimensions of at most 4096",
            });
        };
        // T[a, (s), (t)] grown site by site: rows = bond state x ket/bra strings.
        let mut cur: Vec<C64> = vec![C64::new(1.0, 0.0)]; // [a=1][s=1][t=1]
        let (mut rows, mut a) = (1usize, 1usize);
        for w in &self.sites {
            let (dl, dr, d) = (w.shape()[0], w.shape()[1], w.shape()[2]);
            debug_assert_eq!(dl, a);
            let wd = w.to_c64_vec();
            let nrows = rows * d;
            let mut next = vec![C64::new(0.0, 0.0); dr * nrows * nrows];
            for x in 0..a {
                for s0 in 0..rows {
                    for t0 in 0..rows {
                        let v = cur[(x * rows + s0) * rows + t0];
                        if v == C64::new(0.0, 0.0) {
                            continue;
                        }
                        for y in 0..dr {
                            for s in 0..d {
                                for t in 0..d {
                                    let wv = wd[((x * dr + y) * d + s) * d + t];
                                    if wv != C64::new(0.0, 0.0) {
                                        next[(y * nrows + s0 * d + s) * nrows + t0 * d + t] += v * wv;
                                    }
                                }
                            }
                        }
                    }
                }
            }
            cur = next;
            rows = nrows;
            a = dr;
        }
        debug_assert_eq!(rows, n);
        Ok(cur)
    }

    /// Distributes the MPO: each distinct site tensor is scattered once
    /// (blocks of `block` elements per mode) and shared by the sites that
    /// have it.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for a complex MPO (the DMRG of this crate
    /// is real); the errors of [`DistTensor::from_local`] and [`Mpo::new`].
    pub fn to_mpo(&self, ctl: &Controller<'_>, block: usize) -> Result<Mpo, TnError> {
        if !self.is_real() {
            return Err(TnError::InvalidOption {
                name: "MPO dtype",
                value: "complex".into(),
                expected: "a real MPO (the DMRG runs in f64)",
            });
        }
        let mut distinct: Vec<(usize, DistTensor)> = Vec::new();
        let mut sites = Vec::with_capacity(self.sites.len());
        for (i, w) in self.sites.iter().enumerate() {
            if let Some((_, t)) = distinct.iter().find(|(j, _)| self.sites[*j] == *w) {
                sites.push(t.clone());
                continue;
            }
            let t = DistTensor::from_local(ctl, w, block)?;
            distinct.push((i, t.clone()));
            sites.push(t);
        }
        Mpo::new(sites, vec![1.0], vec![1.0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sites::Conserve;

    /// The operator of `ops` as a full matrix, built independently of the MPO builder:
    /// every fermionic operator at site j is F_0 ... F_(j-1) o_j (its own Jordan-Wigner
    /// string), and the term is the plain matrix product in the order written.
    fn exact(sum: &OpSum, sites: &[Site]) -> Vec<C64> {
        let dims: Vec<usize> = sites.iter().map(Site::dim).collect();
        let n: usize = dims.iter().product();
        let kron_site = |j: usize, o: &[C64], fermionic: bool| -> Vec<C64> {
            // (X_0 x X_1 x ... ) with X_k = F (k < j, fermionic), o (k = j), Id otherwise.
            let mut full = vec![C64::new(1.0, 0.0)];
            let mut size = 1;
            for (k, s) in sites.iter().enumerate() {
                let d = s.dim();
                let x: Vec<C64> = if k == j {
                    o.to_vec()
                } else if k < j && fermionic {
                    s.jw_string().unwrap().matrix.clone()
                } else {
                    s.op("Id").unwrap().matrix.clone()
                };
                let ns = size * d;
                let mut next = vec![C64::new(0.0, 0.0); ns * ns];
                for r in 0..size {
                    for c in 0..size {
                        for a in 0..d {
                            for b in 0..d {
                                next[(r * d + a) * ns + c * d + b] = full[r * size + c] * x[a * d + b];
                            }
                        }
                    }
                }
                full = next;
                size = ns;
            }
            full
        };
        let mut h = vec![C64::new(0.0, 0.0); n * n];
        for t in sum.terms() {
            let mut p: Vec<C64> = (0..n * n)
                .map(|k| C64::new(if k % (n + 1) == 0 { 1.0 } else { 0.0 }, 0.0))
                .collect();
            for (name, j) in &t.ops {
                let op = sites[*j].op(name).unwrap();
                p = matmul(n, &p, &kron_site(*j, &op.matrix, op.fermionic));
            }
            for (x, y) in h.iter_mut().zip(p) {
                *x += t.coeff * y;
            }
        }
        h
    }

    fn assert_same(mpo: &LocalMpo, sum: &OpSum, sites: &[Site], tol: f64) {
        let a = mpo.dense_matrix().unwrap();
        let b = exact(sum, sites);
        let err = a.iter().zip(&b).map(|(x, y)| (x - y).norm()).fold(0.0, f64::max);
        assert!(err <= tol, "max |MPO - exact| = {err:e}");
    }

    fn heisenberg(l: usize, conserve: Conserve) -> (Vec<Site>, OpSum) {
        let sites = vec![Site::spin(1, conserve).unwrap(); l];
        let mut h = OpSum::new();
        for i in 0..l - 1 {
            h.add(0.5, &[("Sp", i), ("Sm", i + 1)]);
            h.add(0.5, &[("Sm", i), ("Sp", i + 1)]);
            h.add(1.0, &[("Sz", i), ("Sz", i + 1)]);
        }
        (sites, h)
    }

    #[test]
    fn heisenberg_is_exact_with_bond_five_and_charged_bonds() {
        for conserve in [Conserve::None, Conserve::Sz] {
            let (sites, h) = heisenberg(6, conserve);
            let mpo = h.to_mpo(&sites, &MpoOptions::default()).unwrap();
            assert_eq!(mpo.bond_dims(), vec![1, 5, 5, 5, 5, 5, 1]);
            assert!(mpo.is_real());
            assert_same(&mpo, &h, &sites, 1e-13);
            if conserve == Conserve::Sz {
                let q = &mpo.bond_charges().unwrap()[3];
                let mut c: Vec<i64> = q.iter().map(|x| x.components()[0]).collect();
                c.sort();
                assert_eq!(c, vec![-2, 0, 0, 0, 2], "channels of S-, Sz, S+ and the two identities");
            }
        }
    }

    #[test]
    fn transverse_field_ising_has_bond_three() {
        let l = 7;
        let sites = vec![Site::spin(1, Conserve::None).unwrap(); l];
        let mut h = OpSum::new();
        for i in 0..l {
            if i + 1 < l {
                h.add(-4.0, &[("Sx", i), ("Sx", i + 1)]);
            }
            h.add(-2.0 * 0.7, &[("Sz", i)]);
        }
        let mpo = h.to_mpo(&sites, &MpoOptions::default()).unwrap();
        assert_eq!(mpo.max_bond(), 3);
        assert_same(&mpo, &h, &sites, 1e-13);
    }

    /// Hubbard chain: hopping of both spins with Jordan-Wigner strings, U n_up n_dn.
    #[test]
    fn hubbard_is_exact_with_bond_six() {
        let l = 4;
        for conserve in [Conserve::None, Conserve::NSz] {
            let sites = vec![Site::electron(conserve).unwrap(); l];
            let mut h = OpSum::new();
            for i in 0..l {
                if i + 1 < l {
                    for (cd, c) in [("Cdagup", "Cup"), ("Cdagdn", "Cdn")] {
                        h.add(-1.0, &[(cd, i), (c, i + 1)]);
                        h.add(-1.0, &[(cd, i + 1), (c, i)]);
                    }
                }
                h.add(4.0, &[("NupNdn", i)]);
            }
            let mpo = h.to_mpo(&sites, &MpoOptions::default()).unwrap();
            assert_eq!(mpo.max_bond(), 6, "{conserve:?}");
            assert_same(&mpo, &h, &sites, 1e-13);
        }
    }

    /// Long-range fermion hopping, terms written out of site order, and operators
    /// repeated on one site: the signs and strings of the builder against explicit strings.
    #[test]
    fn fermion_signs_and_strings_match_explicit_jordan_wigner() {
        let l = 5;
        let sites = vec![Site::fermion(Conserve::N).unwrap(); l];
        let mut h = OpSum::new();
        h.add(0.3, &[("Cdag", 0), ("C", 3)]);
        h.add(0.3, &[("Cdag", 3), ("C", 0)]);
        h.add(-0.7, &[("C", 4), ("Cdag", 1)]);
        h.add(-0.7, &[("C", 1), ("Cdag", 4)]);
        h.add(0.25, &[("Cdag", 2), ("Cdag", 0), ("C", 0), ("C", 2)]);
        h.add(1.1, &[("N", 2), ("Cdag", 1), ("C", 1)]);
        h.add(0.5, &[("Cdag", 1), ("C", 3), ("N", 4)]);
        h.add(0.5, &[("N", 4), ("Cdag", 3), ("C", 1)]);
        let mpo = h.to_mpo(&sites, &MpoOptions::default()).unwrap();
        assert_same(&mpo, &h, &sites, 1e-13);
    }

    /// exp(-r/xi) Sz_i Sz_j has bond dimension 3 whatever the length; 1/r^2 is compressed
    /// to the stated tolerance.
    #[test]
    fn long_range_couplings_compress() {
        for l in [6usize, 12, 24] {
            let sites = vec![Site::spin(1, Conserve::Sz).unwrap(); l];
            let mut h = OpSum::new();
            for i in 0..l {
                for j in i + 1..l {
                    h.add(0.6f64.powi((j - i) as i32), &[("Sz", i), ("Sz", j)]);
                }
            }
            let mpo = h.to_mpo(&sites, &MpoOptions::default()).unwrap();
            assert_eq!(mpo.max_bond(), 3, "L = {l}");
            if l == 6 {
                assert_same(&mpo, &h, &sites, 1e-12);
            }
        }
        let l = 8;
        let sites = vec![Site::spin(1, Conserve::None).unwrap(); l];
        let mut h = OpSum::new();
        for i in 0..l {
            for j in i + 1..l {
                h.add(1.0 / ((j - i) * (j - i)) as f64, &[("Sz", i), ("Sz", j)]);
            }
        }
        let exact_mpo = h.to_mpo(&sites, &MpoOptions::default()).unwrap();
        assert_same(&exact_mpo, &h, &sites, 1e-12);
        let loose = h.to_mpo(&sites, &MpoOptions { cutoff: 1e-3 }).unwrap();
        assert!(
            loose.max_bond() < exact_mpo.max_bond(),
            "{} vs {}",
            loose.max_bond(),
            exact_mpo.max_bond()
        );
        // Dropping singular values below 1e-3 of the largest changes H by a small amount.
        assert_same(&loose, &h, &sites, 0.05);
    }

    #[test]
    fn bad_terms_are_typed_errors() {
        let sites = vec![Site::spin(1, Conserve::Sz).unwrap(); 3];
        let err = |h: &OpSum| h.to_mpo(&sites, &MpoOptions::default()).unwrap_err();
        assert!(matches!(
            err(OpSum::new().add(1.0, &[("Sz", 3)])),
            TnError::BadTerm { term: 0, .. }
        ));
        assert!(matches!(
            err(OpSum::new().add(1.0, &[("Q", 0)])),
            TnError::UnknownOperator { .. }
        ));
        assert!(
            matches!(err(OpSum::new().add(1.0, &[("Sp", 0)])), TnError::BadTerm { .. }),
            "charged term"
        );
        assert!(matches!(
            err(OpSum::new().add(1.0, &[("Sx", 0)])),
            TnError::ChargeMismatch { .. }
        ));
        assert!(matches!(
            err(OpSum::new().add(f64::NAN, &[("Sz", 0)])),
            TnError::BadTerm { .. }
        ));
        assert!(matches!(err(OpSum::new().add(1.0, &[])), TnError::BadTerm { .. }));
        let f = vec![Site::fermion(Conserve::None).unwrap(); 2];
        assert!(matches!(
            OpSum::new().add(1.0, &[("C", 0)]).to_mpo(&f, &MpoOptions::default()),
            Err(TnError::BadTerm { .. })
        ));
        let mixed = vec![
            Site::spin(1, Conserve::None).unwrap(),
            Site::fermion(Conserve::None).unwrap(),
            Site::fermion(Conserve::None).unwrap(),
        ];
        // No string crosses the spin (site 0, which has no F): fine.
        assert!(OpSum::new()
            .add(1.0, &[("Cdag", 1), ("C", 2)])
            .to_mpo(&mixed, &MpoOptions::default())
            .is_ok());
        assert!(matches!(
            OpSum::new()
                .add(1.0, &[("Sz", 0)])
                .to_mpo(&sites, &MpoOptions { cutoff: -1.0 }),
            Err(TnError::InvalidOption { .. })
        ));
    }
}
