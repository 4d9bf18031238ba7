//! Shared checks of the symmetric decomposition tests (in-process property
//! tests and the MPI test): random symmetric layouts from a seed (U(1) or
//! U(1) x Z_2 legs, 1-3 sectors of 1-3 states, tiles of 1-3, a flux that
//! some block satisfies), and one checker per family that compares the
//! dense embedding of the symmetric factors with the dense matrix view of
//! the input's embedding: reconstruction, isometry, the values against the
//! local dense kernel on the embedding, the truncation against the dense
//! truncated SVD of the embedding, triangularity per sector.
#![allow(dead_code)]

use uni20::dispatch::decomp::{EighBackendList, SvdBackendList};
use uni20::dist::decomp::{EighOutput, SvdOutput};
use uni20::dist::symmetry::{Charge, Direction, Fusion, GroupFactor, Leg, Sector, SymmetricLayout, Symmetry};
use uni20::prelude::*;
use uni20::PlanSummary;

use crate::decomp_common::{adjoint, diff_fro, fro, from_c64, identity_error, matmul, tol, View};

/// A deterministic generator (xorshift) for layouts and values.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

/// The group of a case: U(1) or U(1) x Z_2.
pub fn group(product: bool) -> Symmetry {
    if product {
        Symmetry::product(vec![GroupFactor::U1, GroupFactor::Z(2)]).unwrap()
    } else {
        Symmetry::u1()
    }
}

/// A random leg: 1-3 distinct charges (U(1) in -2..=2, Z_2 in 0..=1), 1-3
/// states each, tiles of at most `tile`.
pub fn random_leg(g: &Symmetry, rng: &mut Rng, tile: usize) -> Leg {
    let product = g.factors().len() == 2;
    let n = rng.range(1, 3) as usize;
    let mut charges: Vec<Charge> = Vec::new();
    while charges.len() < n {
        let q = rng.range(-2, 2);
        let c = if product {
            g.charge(&[q, rng.range(0, 1)]).unwrap()
        } else {
            g.charge(&[q]).unwrap()
        };
        if !charges.contains(&c) {
            charges.push(c);
        }
    }
    charges.sort();
    let sectors = charges
        .into_iter()
        .map(|charge| Sector {
            charge,
            dim: rng.range(1, 3) as usize,
        })
        .collect();
    let dir = if rng.next().is_multiple_of(2) {
        Direction::In
    } else {
        Direction::Out
    };
    Leg::tiled(g.clone(), dir, sectors, tile).unwrap()
}

/// The signed charge of sector `s` of `leg` (`+q` Out, `-q` In).
pub fn signed(g: &Symmetry, leg: &Leg, s: usize) -> Charge {
    let q = leg.sectors()[s].charge.clone();
    match leg.direction() {
        Direction::Out => q,
        Direction::In => g.dual(&q).unwrap(),
    }
}

/// A random layout of `rank` legs whose flux is the charge of a random
/// sector tuple (so that at least one block exists).
pub fn random_layout(seed: u64, rank: usize, tile: usize, product: bool) -> SymmetricLayout {
    let g = group(product);
    let mut rng = Rng::new(seed);
    let legs: Vec<Leg> = (0..rank).map(|_| random_leg(&g, &mut rng, tile)).collect();
    let mut flux = g.identity();
    for l in &legs {
        let s = (rng.next() % l.sectors().len() as u64) as usize;
        flux = g.fuse(&flux, &signed(&g, l, s)).unwrap();
    }
    SymmetricLayout::new(g, legs, flux).unwrap()
}

/// A split of `rank` modes: `order` the modes in split order, the first
/// `cut` are the rows (the short form when `order` is the identity).
pub fn split_of(order: &[usize], cut: usize) -> String {
    let labels: Vec<char> = "abcdef".chars().take(order.len()).collect();
    let side = |r: &[usize]| r.iter().map(|&m| labels[m]).collect::<String>();
    let (rows, cols) = (side(&order[..cut]), side(&order[cut..]));
    if order.iter().enumerate().all(|(i, &m)| i == m) {
        format!("{rows}|{cols}")
    } else {
        format!("{}->{rows}|{cols}", labels.iter().collect::<String>())
    }
}

/// The dense matrix view `(rows, cols, values)` of `t`'s embedding by `split`.
pub fn dense_matrix(ctl: &Controller<'_>, t: &DistTensor, split: &str) -> (usize, usize, Vec<C64>) {
    let dense = t.to_dense(ctl).unwrap();
    let view = View::parse(split);
    let (m, n) = view.size(dense.shape());
    (m, n, view.matrix(&dense))
}

/// The dense embedding of a factor, flattened row-major (its modes are
/// already in matrix order: row modes then the bond, or the bond then the
/// column modes).
fn flat(ctl: &Controller<'_>, t: &DistTensor) -> Vec<C64> {
    t.to_dense(ctl).unwrap().to_c64_vec()
}

/// The bond leg's dense dimension and each bond index's sector.
fn bond_sectors(leg: &Leg) -> Vec<usize> {
    (0..leg.sectors().len())
        .flat_map(|s| std::iter::repeat_n(s, leg.sectors()[s].dim))
        .collect()
}

/// Position inside its sector of each dense index of `leg`.
fn in_sector(leg: &Leg) -> Vec<usize> {
    leg.sectors().iter().flat_map(|s| 0..s.dim).collect()
}

/// For each dense flat index of a matrix side (legs `legs` fused with
/// direction `dir`, flattened row-major), its position inside its fused
/// sector, and the fused sector's charge.
fn fused_positions(legs: &[Leg], dir: Direction) -> Vec<(usize, Charge)> {
    let f = Fusion::new(legs.to_vec(), dir).unwrap();
    let dims: Vec<usize> = legs.iter().map(Leg::dim).collect();
    let len: usize = dims.iter().product();
    (0..len)
        .map(|mut x| {
            let mut idx = vec![0; dims.len()];
            for k in (0..dims.len()).rev() {
                idx[k] = x % dims[k];
                x /= dims[k];
            }
            let fi = f.fuse_index(&idx).unwrap();
            let fused = f.fused();
            let s = (0..fused.sectors().len())
                .rev()
                .find(|&s| fused.sector_offset(s) <= fi)
                .unwrap();
            (fi - fused.sector_offset(s), fused.sectors()[s].charge.clone())
        })
        .collect()
}

/// The legs of one side of `split` on `layout`.
fn side_legs(layout: &SymmetricLayout, split: &str, rows: bool) -> Vec<Leg> {
    let v = View::parse(split);
    let side = if rows { &v.rows } else { &v.cols };
    side.iter()
        .map(|l| layout.legs()[v.labels.iter().position(|x| x == l).unwrap()].clone())
        .collect()
}

/// Checks the structure of a left factor (row legs then an `In` bond,
/// flux zero) and a right factor (the `Out` dual bond then the column legs,
/// the input's flux).
fn check_factor_layouts(
    a: &SymmetricLayout,
    left: &DistTensor,
    right: Option<&DistTensor>,
    split: &str,
    k_block: usize,
) {
    let g = a.symmetry();
    let l = left.layout().expect("the left factor is symmetric");
    let rows = side_legs(a, split, true);
    assert_eq!(
        &l.legs()[..rows.len()],
        rows.as_slice(),
        "left factor keeps the row legs"
    );
    let bond = l.legs().last().unwrap();
    assert_eq!(bond.direction(), Direction::In);
    assert_eq!(*l.flux(), g.identity(), "the left factor has flux zero");
    assert!((0..bond.sectors().len()).all(|s| bond.sector_tiles(s).iter().all(|&t| t <= k_block)));
    if let Some(r) = right {
        let r = r.layout().expect("the right factor is symmetric");
        let cols = side_legs(a, split, false);
        assert_eq!(
            r.legs()[0],
            bond.dual(),
            "the right factor's bond is the dual of the left one's"
        );
        assert_eq!(&r.legs()[1..], cols.as_slice());
        assert_eq!(r.flux(), a.flux(), "the flux sits on the right factor");
    }
}

/// Checks the plan summary of a symmetric decomposition: one item per
/// sector matrix, nothing through the root on more than one rank.
fn check_summary(ctl: &Controller<'_>, s: &PlanSummary, sectors: usize) {
    assert_eq!(s.work_items, sectors, "{s}");
    if ctl.size() > 1 {
        assert_eq!(s.bytes_through_root, 0, "{s}");
        assert!(!s.per_rank.contains_key(&0) || s.per_rank[&0].items == 0, "{s}");
    }
    if ctl.compute_ranks().len() > 1 && sectors > 1 {
        let busy = s.per_rank.values().filter(|r| r.items > 0).count();
        assert!(busy > 1, "sectors spread over the workers: {s}");
    }
}

/// The number of sector matrices of `a` by `split` (computed from the
/// fused sides' charges: a row charge pairs with a column charge when
/// `q_R - q_C = flux`).
pub fn sector_count(a: &SymmetricLayout, split: &str) -> usize {
    let g = a.symmetry();
    let r = Fusion::new(side_legs(a, split, true), Direction::Out).unwrap();
    let c = Fusion::new(side_legs(a, split, false), Direction::In).unwrap();
    r.fused()
        .sectors()
        .iter()
        .filter(|s| {
            let qc = g.fuse(&s.charge, &g.dual(a.flux()).unwrap()).unwrap();
            c.fused().find_sector(&qc).is_some()
        })
        .count()
}

/// Runs and checks a (possibly truncated) SVD of the symmetric `t` by
/// `split` against the dense SVD of its embedding.
pub fn check_sym_svd(ctl: &Controller<'_>, t: &DistTensor, split: &str, opts: &SvdOptions) -> SvdOutput {
    let layout = t.layout().unwrap().clone();
    let dtype = t.dtype();
    let tl = tol(dtype);
    let (m, n, a) = dense_matrix(ctl, t, split);
    let out = uni20::dist::svd(ctl, t, split, opts).unwrap();
    let k_block = opts
        .k_block
        .unwrap_or_else(|| t.blocking().extents().iter().flatten().copied().max().unwrap());
    check_factor_layouts(&layout, &out.u, Some(&out.vh), split, k_block);
    check_summary(ctl, &out.summary, sector_count(&layout, split));
    let bond = out.u.layout().unwrap().legs().last().unwrap().clone();
    let k = bond.dim();
    assert_eq!(k, out.kept);
    assert_eq!(out.sectors.len(), bond.sectors().len());
    for (b, s) in out.sectors.iter().zip(bond.sectors()) {
        assert_eq!((&b.charge, b.values.len()), (&s.charge, s.dim));
    }
    // The values of the bond index, sector after sector.
    let s_emb: Vec<f64> = out.sectors.iter().flat_map(|b| b.values.iter().copied()).collect();
    let mut sorted = s_emb.clone();
    sorted.sort_by(|x, y| y.total_cmp(x));
    assert_eq!(sorted, out.s, "s is every sector's kept values, non-increasing");
    let u = flat(ctl, &out.u);
    let vh = flat(ctl, &out.vh);
    assert_eq!((u.len(), vh.len()), (m * k, k * n));
    // U and Vh isometric.
    assert!(identity_error(&matmul(&adjoint(&u, m, k), k, m, &u, k), k) <= 10.0 * tl);
    assert!(identity_error(&matmul(&vh, k, n, &adjoint(&vh, k, n), k), k) <= 10.0 * tl);
    // U diag(s) Vh reproduces A up to the discarded weight.
    let mut us = u.clone();
    for i in 0..m {
        for j in 0..k {
            us[i * k + j] *= s_emb[j];
        }
    }
    let rec = matmul(&us, m, k, &vh, n);
    let na = fro(&a).max(f64::MIN_POSITIVE);
    let disc = out.discarded.iter().map(|x| x * x).sum::<f64>().sqrt();
    let err = diff_fro(&a, &rec);
    assert!(
        (err - disc).abs() <= 10.0 * tl * na.max(1.0),
        "|A - U S Vh| = {err}, discarded {disc}, |A| = {na}"
    );
    // The dense SVD of the embedding, with the same truncation.
    let local = from_c64(&[m, n], &a, dtype);
    let all = SvdBackendList::default_cpu(1);
    let full = uni20::dispatch::decomp::svd(&local, &Default::default(), &all).unwrap();
    let dense = uni20::dispatch::decomp::svd(&local, &opts.truncation, &all).unwrap();
    let noise = 100.0 * tl * full.s.first().copied().unwrap_or(0.0);
    // Untruncated: the sectors' values are the embedding's nonzero singular values.
    let mut all_sym: Vec<f64> = out.s.iter().chain(&out.discarded).copied().collect();
    all_sym.sort_by(|x, y| y.total_cmp(x));
    let full_nz: Vec<f64> = full.s.iter().copied().filter(|&x| x > noise).collect();
    let sym_nz: Vec<f64> = all_sym.iter().copied().filter(|&x| x > noise).collect();
    assert_eq!(sym_nz.len(), full_nz.len(), "sym {all_sym:?} dense {:?}", full.s);
    for (x, y) in all_sym.iter().zip(&full.s) {
        assert!((x - y).abs() <= 10.0 * tl * full.s[0].max(1.0), "{x} vs {y}");
    }
    // Truncated: the same kept values as the dense truncated SVD of the embedding
    // (whose extra zero values, beyond the sectors, are left out).
    let dense_kept: Vec<f64> = dense.s.iter().copied().filter(|&x| x > noise).collect();
    let sym_kept: Vec<f64> = out.s.iter().copied().filter(|&x| x > noise).collect();
    assert_eq!(
        sym_kept.len(),
        dense_kept.len(),
        "kept {:?} vs dense {:?} ({:?})",
        out.s,
        dense.s,
        opts.truncation
    );
    for (x, y) in sym_kept.iter().zip(&dense_kept) {
        assert!((x - y).abs() <= 10.0 * tl * full.s[0].max(1.0), "{x} vs {y}");
    }
    assert!((out.discarded_weight - dense.discarded_weight).abs() <= 10.0 * tl);
    assert_eq!(
        out.degenerate_split, dense.degenerate_split,
        "the multiplet rule as the dense SVD's"
    );
    if let Some(sd) = &out.s_diag {
        let lay = sd.layout().unwrap();
        assert_eq!(lay.legs(), &[bond.dual(), bond.clone()]);
        let d = flat(ctl, sd);
        for i in 0..k {
            for j in 0..k {
                let want = if i == j { s_emb[i] } else { 0.0 };
                assert!((d[i * k + j].re - want).abs() <= tl * want.max(1.0) && d[i * k + j].im == 0.0);
            }
        }
    }
    out
}

/// Runs and checks QR (or LQ) of the symmetric `t` by `split`: `A = Q R`
/// (`L Q`), the orthonormal factor isometric, the triangular factor
/// triangular inside each sector (in the fused order of its legs) with a
/// real non-negative diagonal.
pub fn check_sym_qr(ctl: &Controller<'_>, t: &DistTensor, split: &str, lq: bool) {
    let layout = t.layout().unwrap().clone();
    let tl = tol(t.dtype());
    let (m, n, a) = dense_matrix(ctl, t, split);
    let opts = QrOptions::default();
    let (left, right, summary) = if lq {
        let o = uni20::dist::lq(ctl, t, split, &opts).unwrap();
        (o.l, o.q, o.summary)
    } else {
        let o = uni20::dist::qr(ctl, t, split, &opts).unwrap();
        (o.q, o.r, o.summary)
    };
    let k_block = t.blocking().extents().iter().flatten().copied().max().unwrap();
    check_factor_layouts(&layout, &left, Some(&right), split, k_block);
    check_summary(ctl, &summary, sector_count(&layout, split));
    let bond = left.layout().unwrap().legs().last().unwrap().clone();
    let k = bond.dim();
    let (l, r) = (flat(ctl, &left), flat(ctl, &right));
    let na = fro(&a).max(1.0);
    assert!(
        diff_fro(&a, &matmul(&l, m, k, &r, n)) <= 10.0 * tl * na,
        "A = left right"
    );
    if lq {
        assert!(identity_error(&matmul(&r, k, n, &adjoint(&r, k, n), k), k) <= 10.0 * tl);
    } else {
        assert!(identity_error(&matmul(&adjoint(&l, m, k), k, m, &l, k), k) <= 10.0 * tl);
    }
    let kpos = in_sector(&bond);
    let ksec = bond_sectors(&bond);
    // Each sector has min(m_s, n_s) bond states.
    assert_eq!(ksec.len(), k);
    if lq {
        // L[i, kb] = 0 unless the bond position q <= the row position p.
        let rows = fused_positions(&side_legs(&layout, split, true), Direction::Out);
        for i in 0..m {
            for j in 0..k {
                let x = l[i * k + j];
                if x.norm() > tl * na {
                    assert!(kpos[j] <= rows[i].0, "L not lower triangular at ({i}, {j})");
                    assert_eq!(rows[i].1, bond.sectors()[ksec[j]].charge);
                }
                if kpos[j] == rows[i].0 && rows[i].1 == bond.sectors()[ksec[j]].charge {
                    assert!(x.re >= -tl * na && x.im.abs() <= tl * na, "diagonal of L: {x}");
                }
            }
        }
    } else {
        let cols = fused_positions(&side_legs(&layout, split, false), Direction::In);
        let g = layout.symmetry();
        for j in 0..k {
            let qc = g
                .fuse(&bond.sectors()[ksec[j]].charge, &g.dual(layout.flux()).unwrap())
                .unwrap();
            for c in 0..n {
                let x = r[j * n + c];
                if x.norm() > tl * na {
                    assert!(cols[c].0 >= kpos[j], "R not upper triangular at ({j}, {c})");
                    assert_eq!(cols[c].1, qc);
                }
                if cols[c].0 == kpos[j] && cols[c].1 == qc {
                    assert!(x.re >= -tl * na && x.im.abs() <= tl * na, "diagonal of R: {x}");
                }
            }
        }
    }
}

/// A Hermitian symmetric operator: legs `legs` then their duals (flux
/// zero), `(X + X^H) / 2` of a random `X`; with the dense matrix.
pub fn hermitian(ctl: &Controller<'_>, legs: &[Leg], dtype: DType, seed: u64) -> DistTensor {
    let g = legs[0].symmetry().clone();
    let mut all = legs.to_vec();
    all.extend(legs.iter().map(Leg::dual));
    let layout = SymmetricLayout::new(g.clone(), all, g.identity()).unwrap();
    let x = uni20::dist::sym_random(ctl, layout.clone(), dtype, seed).unwrap();
    let r = legs.len();
    let labels: String = "abcdef".chars().take(2 * r).collect();
    let split = format!("{}|{}", &labels[..r], &labels[r..]);
    let (m, _, a) = dense_matrix(ctl, &x, &split);
    let ah = adjoint(&a, m, m);
    let h: Vec<C64> = a.iter().zip(&ah).map(|(p, q)| (p + q) * 0.5).collect();
    let shape = layout.dense_shape();
    let dense = View::parse(&split).tensor(&h, &shape, dtype);
    DistTensor::from_dense(ctl, &dense, std::sync::Arc::new(layout), 0.0).unwrap()
}

/// Runs and checks eigh of the Hermitian symmetric `t` by `split`: the
/// eigenvalues against the dense eigh of the embedding, `A V = V diag`,
/// `V` isometric.
pub fn check_sym_eigh(ctl: &Controller<'_>, t: &DistTensor, split: &str) -> EighOutput {
    let layout = t.layout().unwrap().clone();
    let dtype = t.dtype();
    let tl = tol(dtype);
    let (m, n, a) = dense_matrix(ctl, t, split);
    assert_eq!(m, n);
    let out = uni20::dist::eigh(ctl, t, split, &EighOptions::default()).unwrap();
    let k_block = t.blocking().extents().iter().flatten().copied().max().unwrap();
    check_factor_layouts(&layout, &out.vectors, None, split, k_block);
    check_summary(ctl, &out.summary, sector_count(&layout, split));
    let bond = out.vectors.layout().unwrap().legs().last().unwrap().clone();
    assert_eq!(bond.dim(), m, "every row sector pairs with its column sector");
    let lam: Vec<f64> = out.sectors.iter().flat_map(|b| b.values.iter().copied()).collect();
    let mut sorted = lam.clone();
    sorted.sort_by(|x, y| x.total_cmp(y));
    assert_eq!(sorted, out.values);
    let dense = uni20::dispatch::decomp::eigh(
        &from_c64(&[m, m], &a, dtype),
        &Default::default(),
        &EighBackendList::default_cpu(1),
    )
    .unwrap();
    let na = fro(&a).max(1.0);
    for (x, y) in out.values.iter().zip(&dense.values) {
        assert!((x - y).abs() <= 10.0 * tl * na, "eigenvalue {x} vs dense {y}");
    }
    let v = flat(ctl, &out.vectors);
    assert!(identity_error(&matmul(&adjoint(&v, m, m), m, m, &v, m), m) <= 10.0 * tl);
    let av = matmul(&a, m, m, &v, m);
    let mut vl = v.clone();
    for i in 0..m {
        for j in 0..m {
            vl[i * m + j] *= lam[j];
        }
    }
    assert!(diff_fro(&av, &vl) <= 10.0 * tl * na, "A V = V diag(values)");
    out
}
