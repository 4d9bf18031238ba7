//! The bond-by-bond compression of normal-form terms into channels and
//! the MPO site tensors (see the parent module's docs).

use std::collections::HashMap;

use uni20_dispatch::decomp::{svd, SvdBackendList, SvdOptions};
use uni20_dispatch::{DType, LocalTensor, C64};
use uni20_dist::symmetry::{Charge, Symmetry};

use crate::error::TnError;
use crate::sites::Site;

use super::local_mpo::LocalMpo;
use super::normal::{local_charge, NormalTerm, OpTable};
use super::MpoOptions;

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

pub(super) fn build(
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
