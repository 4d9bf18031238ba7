//! Shared checks of the decomposition tests (in-process property tests and
//! the MPI test): the test's own reading of a label split (independent of
//! the library's parser), dense complex matrix helpers, the numpy fixtures
//! (`scripts/gen_decomp_fixtures.py`), and one checker per family that
//! verifies the factors both with distributed contractions (what users do)
//! and on the gathered local tensors.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use uni20::dispatch::decomp::SvdBackendList;
use uni20::dist::decomp::{EighOutput, LqOutput, QrOutput, SvdOutput};
use uni20::prelude::*;
use uni20::{PlanSummary, TensorData, C32};

/// A matrix view as the test reads a split: the tensor's labels, the row
/// labels and the column labels (in the order written).
#[derive(Clone, Debug)]
pub struct View {
    pub labels: Vec<char>,
    pub rows: Vec<char>,
    pub cols: Vec<char>,
}

impl View {
    /// `"ab|cd"` or `"abcd->ca|db"` (well-formed input only).
    pub fn parse(split: &str) -> View {
        let (labels, sides) = match split.split_once("->") {
            Some((l, s)) => (l.chars().collect(), s),
            None => (split.chars().filter(|&c| c != '|').collect(), split),
        };
        let (r, c) = sides.split_once('|').unwrap();
        View {
            labels,
            rows: r.chars().collect(),
            cols: c.chars().collect(),
        }
    }

    fn mode(&self, l: char) -> usize {
        self.labels.iter().position(|&x| x == l).unwrap()
    }

    pub fn row_dims(&self, shape: &[usize]) -> Vec<usize> {
        self.rows.iter().map(|&l| shape[self.mode(l)]).collect()
    }

    pub fn col_dims(&self, shape: &[usize]) -> Vec<usize> {
        self.cols.iter().map(|&l| shape[self.mode(l)]).collect()
    }

    /// `(rows, cols)` of the matrix view.
    pub fn size(&self, shape: &[usize]) -> (usize, usize) {
        (
            self.row_dims(shape).iter().product(),
            self.col_dims(shape).iter().product(),
        )
    }

    /// For each tensor element in row-major order, its (row, column).
    pub fn positions(&self, shape: &[usize]) -> Vec<(usize, usize)> {
        let len: usize = shape.iter().product();
        let mut out = Vec::with_capacity(len);
        let mut idx = vec![0usize; shape.len()];
        for _ in 0..len {
            let flat = |side: &[char]| {
                side.iter()
                    .fold(0, |acc, &l| acc * shape[self.mode(l)] + idx[self.mode(l)])
            };
            out.push((flat(&self.rows), flat(&self.cols)));
            for k in (0..shape.len()).rev() {
                idx[k] += 1;
                if idx[k] < shape[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
        out
    }

    /// The matrix view of `t`, row-major, widened to complex.
    pub fn matrix(&self, t: &LocalTensor) -> Vec<C64> {
        let (_, n) = self.size(t.shape());
        let mut m = vec![C64::new(0.0, 0.0); t.len()];
        for ((r, c), v) in self.positions(t.shape()).into_iter().zip(t.to_c64_vec()) {
            m[r * n + c] = v;
        }
        m
    }

    /// The tensor of `shape` whose matrix view is `m`.
    pub fn tensor(&self, m: &[C64], shape: &[usize], dtype: DType) -> LocalTensor {
        let (_, n) = self.size(shape);
        let vals: Vec<C64> = self.positions(shape).into_iter().map(|(r, c)| m[r * n + c]).collect();
        from_c64(shape, &vals, dtype)
    }

    pub fn row_str(&self) -> String {
        self.rows.iter().collect()
    }

    pub fn col_str(&self) -> String {
        self.cols.iter().collect()
    }

    pub fn label_str(&self) -> String {
        self.labels.iter().collect()
    }

    /// Two labels the tensor does not use (for `k` and its partner).
    pub fn fresh(&self) -> (char, char) {
        let mut free = ('a'..='z').chain('A'..='Z').filter(|c| !self.labels.contains(c));
        (free.next().unwrap(), free.next().unwrap())
    }
}

/// A tensor of `dtype` from complex values (real dtypes take the real part).
pub fn from_c64(shape: &[usize], v: &[C64], dtype: DType) -> LocalTensor {
    let data = match dtype {
        DType::F32 => TensorData::F32(v.iter().map(|z| z.re as f32).collect()),
        DType::F64 => TensorData::F64(v.iter().map(|z| z.re).collect()),
        DType::C32 => TensorData::C32(v.iter().map(|z| C32::new(z.re as f32, z.im as f32)).collect()),
        _ => TensorData::C64(v.to_vec()),
    };
    LocalTensor::from_data(shape, data).unwrap()
}

/// Uniform entries in [-1, 1) from a seeded LCG.
pub fn random_tensor(dtype: DType, shape: &[usize], seed: &mut u64) -> LocalTensor {
    let n: usize = shape.iter().product();
    let mut next = || {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    let v: Vec<C64> = (0..n)
        .map(|_| {
            let re = next();
            C64::new(re, if dtype.is_complex() { next() } else { 0.0 })
        })
        .collect();
    from_c64(shape, &v, dtype)
}

/// `a (m x k) * b (k x n)`.
pub fn matmul(a: &[C64], m: usize, k: usize, b: &[C64], n: usize) -> Vec<C64> {
    let mut c = vec![C64::new(0.0, 0.0); m * n];
    for i in 0..m {
        for p in 0..k {
            let x = a[i * k + p];
            for j in 0..n {
                c[i * n + j] += x * b[p * n + j];
            }
        }
    }
    c
}

/// The adjoint of `a (m x n)`.
pub fn adjoint(a: &[C64], m: usize, n: usize) -> Vec<C64> {
    let mut t = vec![C64::new(0.0, 0.0); m * n];
    for i in 0..m {
        for j in 0..n {
            t[j * m + i] = a[i * n + j].conj();
        }
    }
    t
}

pub fn fro(a: &[C64]) -> f64 {
    a.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt()
}

pub fn diff_max(a: &[C64], b: &[C64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).norm()).fold(0.0, f64::max)
}

pub fn diff_fro(a: &[C64], b: &[C64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).norm_sqr()).sum::<f64>().sqrt()
}

/// `max |G - I|` for a `k x k` matrix `g`.
pub fn identity_error(g: &[C64], k: usize) -> f64 {
    (0..k * k)
        .map(|i| (g[i] - C64::new(if i / k == i % k { 1.0 } else { 0.0 }, 0.0)).norm())
        .fold(0.0, f64::max)
}

/// Relative tolerance of a dtype's factorization checks: `1e-12` for 64-bit
/// types (the figure), `1e-5` for 32-bit ones.
pub fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 | DType::C32 => 1e-5,
        _ => 1e-12,
    }
}

/// The diagonal `k x k` tensor of `s` as a real tensor of `a`'s precision.
fn diag_local(s: &[f64], dtype: DType) -> LocalTensor {
    let k = s.len();
    let mut v = vec![C64::new(0.0, 0.0); k * k];
    for (i, &x) in s.iter().enumerate() {
        v[i * k + i] = C64::new(x, 0.0);
    }
    let real = if matches!(dtype, DType::F32 | DType::C32) {
        DType::F32
    } else {
        DType::F64
    };
    from_c64(&[k, k], &v, real)
}

/// The block extents of `t`'s mode `m`.
fn extents(t: &DistTensor, m: usize) -> Vec<usize> {
    t.blocking().extents()[m].clone()
}

/// Checks that the factor `f` keeps the input's blocking on the modes it
/// shares with it: `pairs` maps factor modes to input modes.
fn check_blocking(f: &DistTensor, a: &DistTensor, pairs: &[(usize, usize)], what: &str) {
    for &(fm, am) in pairs {
        assert_eq!(
            extents(f, fm),
            extents(a, am),
            "{what}: mode {fm} blocked unlike input mode {am}"
        );
    }
}

fn check_summary(ctl: &Controller<'_>, summary: &PlanSummary, t: &DistTensor, what: &str) {
    if ctl.size() > 1 {
        assert_eq!(summary.bytes_through_root, 0, "{what}: {summary}");
        assert!(
            !summary.participants.contains(&0),
            "{what}: the root took part: {summary}"
        );
    }
    assert_eq!(
        t.plan_summary(),
        Some(summary),
        "{what}: the factor carries the plan summary"
    );
    assert_eq!(summary.work_items, 1, "{what}: {summary}");
}

/// The kept rank the truncation rule of `SvdTruncation` gives for the
/// non-increasing values `s` (a naive reading of its documentation).
pub fn expected_kept(s: &[f64], t: &SvdTruncation, rtol: f64) -> usize {
    let r = s.len();
    let s0 = s.first().copied().unwrap_or(0.0);
    let total: f64 = s.iter().map(|x| x * x).sum();
    let weight = |k: usize| {
        if total > 0.0 {
            s[k..].iter().map(|x| x * x).sum::<f64>() / total
        } else {
            0.0
        }
    };
    let same = |i: usize| s[i - 1] - s[i] <= rtol * s0;
    let mut k = r;
    if let Some(c) = t.cutoff {
        k = k.min(s.iter().filter(|&&x| x > c).count());
    }
    if let Some(w) = t.max_discarded_weight {
        k = k.min((0..=r).find(|&j| weight(j) <= w).unwrap());
    }
    if k == 0 && s0 > 0.0 {
        k = 1;
    }
    while k > 0 && k < r && same(k) {
        k += 1;
    }
    if let Some(m) = t.max_rank.filter(|&m| k > m) {
        k = m;
        let mut j = k;
        while j > 0 && j < r && same(j) {
            j -= 1;
        }
        if j > 0 {
            k = j;
        }
    }
    k
}

/// Runs `svd` and checks: shapes and blockings of the factors, `U diag(s) Vh`
/// against the input through distributed contractions and on the gathered
/// factors (to `tol` relative, or, truncated, a squared residual equal to
/// the reported discarded weight), `U^H U = I` and `Vh Vh^H = I` both ways,
/// the singular values against the local faer SVD of the same matrix
/// (kept = the largest, discarded = the rest, the weight recomputed, the
/// kept rank as the documented rule gives), and the plan summary.
pub fn check_svd(ctl: &Controller<'_>, a: &LocalTensor, da: &DistTensor, split: &str, opts: &SvdOptions) -> SvdOutput {
    let view = View::parse(split);
    let dtype = a.dtype();
    let eps = tol(dtype);
    let (m, n) = view.size(a.shape());
    let out = uni20::dist::svd(ctl, da, split, opts).unwrap_or_else(|e| panic!("svd {split}: {e}"));
    let k = out.kept;
    assert_eq!(out.s.len(), k);
    assert!(out.s.windows(2).all(|w| w[0] >= w[1]), "s not sorted: {:?}", out.s);
    let mut ushape = view.row_dims(a.shape());
    ushape.push(k);
    let mut vshape = vec![k];
    vshape.extend(view.col_dims(a.shape()));
    assert_eq!((out.u.shape(), out.vh.shape()), (ushape.as_slice(), vshape.as_slice()));
    assert!(out.u.is_ready() && out.vh.is_ready(), "synchronous: factors are ready");
    if k > 0 && m * n > 0 {
        let rows: Vec<(usize, usize)> = view.rows.iter().enumerate().map(|(i, &l)| (i, view.mode(l))).collect();
        let cols: Vec<(usize, usize)> = view
            .cols
            .iter()
            .enumerate()
            .map(|(i, &l)| (i + 1, view.mode(l)))
            .collect();
        check_blocking(&out.u, da, &rows, "U");
        check_blocking(&out.vh, da, &cols, "Vh");
        assert_eq!(
            extents(&out.u, ushape.len() - 1),
            extents(&out.vh, 0),
            "k blocked alike in U and Vh"
        );
    }
    check_summary(ctl, &out.summary, &out.u, "svd");

    // The oracle: the local faer SVD of the test's own matrix view, untruncated.
    let amat = view.matrix(a);
    let full = uni20::dispatch::decomp::svd(
        &from_c64(&[m, n], &amat, dtype),
        &SvdTruncation::default(),
        &SvdBackendList::default_cpu(1),
    )
    .unwrap()
    .s;
    let s0 = full.first().copied().unwrap_or(0.0);
    for (i, (&got, &want)) in out.s.iter().chain(&out.discarded).zip(&full).enumerate() {
        assert!(
            (got - want).abs() <= 10.0 * eps * s0.max(1e-300),
            "s[{i}] = {got}, oracle {want}"
        );
    }
    assert_eq!(out.s.len() + out.discarded.len(), full.len());
    let rtol = opts.truncation.degeneracy_rtol.unwrap_or(eps);
    assert_eq!(
        k,
        expected_kept(&full, &opts.truncation, rtol),
        "kept rank for {:?} of {full:?}",
        opts.truncation
    );
    let total: f64 = full.iter().map(|x| x * x).sum();
    let dw = if total > 0.0 {
        full[k..].iter().map(|x| x * x).sum::<f64>() / total
    } else {
        0.0
    };
    assert!(
        (out.discarded_weight - dw).abs() <= 10.0 * eps * dw.max(eps),
        "weight {} vs {dw}",
        out.discarded_weight
    );

    // Distributed reconstruction and orthonormality.
    let (kl, ll) = view.fresh();
    let (r, c, all) = (view.row_str(), view.col_str(), view.label_str());
    let sd = match &out.s_diag {
        Some(sd) => {
            let want = diag_local(&out.s, dtype);
            assert_eq!(sd.to_local(ctl).unwrap(), want, "s_diag");
            sd.clone()
        }
        None => {
            let kb = extents(&out.u, ushape.len() - 1)[0].max(1);
            DistTensor::from_local(ctl, &diag_local(&out.s, dtype), kb).unwrap()
        }
    };
    let us = contract(ctl, format!("{r}{kl},{kl}{ll}->{r}{ll}").as_str(), &out.u, &sd).unwrap();
    let rec = contract(ctl, format!("{r}{ll},{ll}{c}->{all}").as_str(), &us, &out.vh).unwrap();
    let rec = rec.to_local(ctl).unwrap().to_c64_vec();
    let av = a.to_c64_vec();
    let (norm, res) = (fro(&av), diff_fro(&rec, &av));
    let check_residual = |res: f64, how: &str| {
        if k == full.len() || total == 0.0 {
            assert!(
                res <= eps * norm.max(1e-300) * 10.0,
                "{how}: |A - U S Vh| = {res:e}, |A| = {norm:e}"
            );
        } else {
            let rel2 = res * res / (norm * norm);
            assert!(
                (rel2 - dw).abs() <= 100.0 * eps,
                "{how}: residual^2 {rel2:e} vs discarded weight {dw:e}"
            );
        }
    };
    check_residual(res, "distributed");
    let gram = |x: &DistTensor, spec: String, conj: [bool; 2]| {
        let o = ContractOptions {
            conj,
            ..Default::default()
        };
        let g = contract_with(ctl, spec.as_str(), x, x, &o)
            .unwrap()
            .to_local(ctl)
            .unwrap();
        identity_error(&g.to_c64_vec(), k)
    };
    let eu = gram(&out.u, format!("{r}{kl},{r}{ll}->{kl}{ll}"), [true, false]);
    let ev = gram(&out.vh, format!("{kl}{c},{ll}{c}->{kl}{ll}"), [false, true]);
    assert!(
        eu <= 10.0 * eps && ev <= 10.0 * eps,
        "orthonormality: U {eu:e}, Vh {ev:e}"
    );

    // The same on the gathered factors.
    let u = out.u.to_local(ctl).unwrap().to_c64_vec();
    let vh = out.vh.to_local(ctl).unwrap().to_c64_vec();
    let us: Vec<C64> = u.iter().enumerate().map(|(i, z)| z * out.s[i % k.max(1)]).collect();
    let rec = matmul(&us, m, k, &vh, n);
    check_residual(diff_fro(&rec, &amat), "gathered");
    let eu = identity_error(&matmul(&adjoint(&u, m, k), k, m, &u, k), k);
    let ev = identity_error(&matmul(&vh, k, n, &adjoint(&vh, k, n), k), k);
    assert!(
        eu <= 10.0 * eps && ev <= 10.0 * eps,
        "gathered orthonormality: U {eu:e}, Vh {ev:e}"
    );
    out
}

/// Runs `qr` (or `lq`) and checks reconstruction (distributed and
/// gathered), orthonormality of Q, the triangular shape and the real
/// non-negative diagonal of R (L).
pub fn check_qr(
    ctl: &Controller<'_>,
    a: &LocalTensor,
    da: &DistTensor,
    split: &str,
    lq: bool,
) -> (DistTensor, DistTensor) {
    let view = View::parse(split);
    let dtype = a.dtype();
    let eps = tol(dtype);
    let (m, n) = view.size(a.shape());
    let k = m.min(n);
    let opts = QrOptions::default();
    let (left, right, summary) = if lq {
        let LqOutput { l, q, summary, .. } =
            uni20::dist::lq(ctl, da, split, &opts).unwrap_or_else(|e| panic!("lq {split}: {e}"));
        (l, q, summary)
    } else {
        let QrOutput { q, r, summary, .. } =
            uni20::dist::qr(ctl, da, split, &opts).unwrap_or_else(|e| panic!("qr {split}: {e}"));
        (q, r, summary)
    };
    check_summary(ctl, &summary, &left, if lq { "lq" } else { "qr" });
    let (kl, ll) = view.fresh();
    let (r, c, all) = (view.row_str(), view.col_str(), view.label_str());
    let rec = contract(ctl, format!("{r}{kl},{kl}{c}->{all}").as_str(), &left, &right).unwrap();
    let av = a.to_c64_vec();
    let res = diff_fro(&rec.to_local(ctl).unwrap().to_c64_vec(), &av);
    assert!(
        res <= 10.0 * eps * fro(&av).max(1e-300),
        "{split}: |A - factors| = {res:e}"
    );
    let (q, spec, conj) = if lq {
        (&right, format!("{kl}{c},{ll}{c}->{kl}{ll}"), [false, true])
    } else {
        (&left, format!("{r}{kl},{r}{ll}->{kl}{ll}"), [true, false])
    };
    let o = ContractOptions {
        conj,
        ..Default::default()
    };
    let g = contract_with(ctl, spec.as_str(), q, q, &o)
        .unwrap()
        .to_local(ctl)
        .unwrap();
    let e = identity_error(&g.to_c64_vec(), k);
    assert!(e <= 10.0 * eps, "{split}: Q orthonormality {e:e}");
    // Triangular factor, gathered: R is k x n (upper), L is m x k (lower).
    let (tri, rows, cols) = if lq { (&left, m, k) } else { (&right, k, n) };
    let t = tri.to_local(ctl).unwrap().to_c64_vec();
    for i in 0..rows {
        for j in 0..cols {
            let below = if lq { j > i } else { j < i };
            if below {
                assert_eq!(
                    t[i * cols + j],
                    C64::new(0.0, 0.0),
                    "{split}: ({i},{j}) off the triangle"
                );
            }
            if i == j {
                assert!(
                    t[i * cols + j].im == 0.0 && t[i * cols + j].re >= 0.0,
                    "{split}: diagonal {}",
                    t[i * cols + j]
                );
            }
        }
    }
    // Gathered reconstruction.
    let lv = left.to_local(ctl).unwrap().to_c64_vec();
    let rv = right.to_local(ctl).unwrap().to_c64_vec();
    let res = diff_fro(&matmul(&lv, m, k, &rv, n), &view.matrix(a));
    assert!(
        res <= 10.0 * eps * fro(&av).max(1e-300),
        "{split}: gathered |A - factors| = {res:e}"
    );
    (left, right)
}

/// Runs `eigh` and checks: values ascending and equal to the local
/// kernel's, `V^H V = I` (distributed), residuals `max |A v - w v|` below
/// `1e-10` (scaled by `max(1, max |w|)`; `1e-4` for 32-bit types) on the
/// gathered vectors and, when the column modes are shaped like the row
/// modes, through a distributed contraction.
pub fn check_eigh(ctl: &Controller<'_>, a: &LocalTensor, da: &DistTensor, split: &str) -> EighOutput {
    let view = View::parse(split);
    let dtype = a.dtype();
    let eps = tol(dtype);
    let (n, _) = view.size(a.shape());
    let out =
        uni20::dist::eigh(ctl, da, split, &EighOptions::default()).unwrap_or_else(|e| panic!("eigh {split}: {e}"));
    check_summary(ctl, &out.summary, &out.vectors, "eigh");
    assert_eq!(out.values.len(), n);
    assert!(
        out.values.windows(2).all(|w| w[0] <= w[1]),
        "not ascending: {:?}",
        out.values
    );
    let scale = out.values.iter().fold(1.0f64, |m, w| m.max(w.abs()));
    let res_tol = if eps > 1e-8 { 1e-4 } else { 1e-10 } * scale;
    let (kl, ll) = view.fresh();
    let r = view.row_str();
    let o = ContractOptions {
        conj: [true, false],
        ..Default::default()
    };
    let spec = format!("{r}{kl},{r}{ll}->{kl}{ll}");
    let g = contract_with(ctl, spec.as_str(), &out.vectors, &out.vectors, &o).unwrap();
    let e = identity_error(&g.to_local(ctl).unwrap().to_c64_vec(), n);
    assert!(e <= 10.0 * eps, "{split}: V orthonormality {e:e}");
    let v = out.vectors.to_local(ctl).unwrap().to_c64_vec();
    let av = matmul(&view.matrix(a), n, n, &v, n);
    let worst = (0..n * n)
        .map(|i| (av[i] - v[i] * out.values[i % n]).norm())
        .fold(0.0, f64::max);
    assert!(worst <= res_tol, "{split}: residual {worst:e}");
    if view.row_dims(a.shape()) == view.col_dims(a.shape()) {
        // A's column modes contracted with V's row modes (relabelled).
        let spec = format!("{},{}{kl}->{r}{kl}", view.label_str(), view.col_str());
        let avd = contract(ctl, spec.as_str(), da, &out.vectors)
            .unwrap()
            .to_local(ctl)
            .unwrap()
            .to_c64_vec();
        let worst = (0..n * n)
            .map(|i| (avd[i] - v[i] * out.values[i % n]).norm())
            .fold(0.0, f64::max);
        assert!(worst <= res_tol, "{split}: distributed residual {worst:e}");
    }
    out
}

/// One numpy fixture of `tests/fixtures/decomp`.
pub struct Fixture {
    pub name: String,
    pub dir: PathBuf,
    pub op: String,
    pub split: String,
}

pub fn fixtures() -> Vec<Fixture> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/decomp");
    let mut v: Vec<Fixture> = std::fs::read_dir(&root)
        .expect("tests/fixtures/decomp (scripts/gen_decomp_fixtures.py)")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|dir| {
            let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap().trim().to_string();
            Fixture {
                name: dir.file_name().unwrap().to_string_lossy().into_owned(),
                op: read("op.txt"),
                split: read("split.txt"),
                dir,
            }
        })
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// Runs one fixture with blocks of `block`: the family's checks, then the
/// values (or R, L) against numpy's. Returns a one-line description.
pub fn run_fixture(ctl: &Controller<'_>, f: &Fixture, block: usize) -> String {
    let da = read_npy(ctl, f.dir.join("a.npy"), block).unwrap();
    let a = da.to_local(ctl).unwrap();
    let eps = tol(a.dtype());
    let want = |name: &str| read_npy(ctl, f.dir.join(name), 4).unwrap().to_local(ctl).unwrap();
    let close = |got: &[f64], want: &[f64], what: &str| {
        let scale = want.iter().fold(1.0f64, |m, x| m.max(x.abs()));
        assert_eq!(got.len(), want.len(), "{}: {what}", f.name);
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= 10.0 * eps * scale,
                "{} {what}[{i}]: {g} vs numpy {w}",
                f.name
            );
        }
    };
    let as_f64 = |t: &LocalTensor| t.to_c64_vec().iter().map(|z| z.re).collect::<Vec<_>>();
    match f.op.as_str() {
        "svd" => {
            let out = check_svd(ctl, &a, &da, &f.split, &SvdOptions::default());
            close(&out.s, &as_f64(&want("s.npy")), "s");
        }
        "eigh" => {
            let out = check_eigh(ctl, &a, &da, &f.split);
            close(&out.values, &as_f64(&want("w.npy")), "eigenvalues");
        }
        op @ ("qr" | "lq") => {
            let lq = op == "lq";
            let (l, r) = check_qr(ctl, &a, &da, &f.split, lq);
            let (got, name) = if lq { (l, "l.npy") } else { (r, "r.npy") };
            let (got, want) = (got.to_local(ctl).unwrap(), want(name));
            assert_eq!(got.shape(), want.shape(), "{}", f.name);
            let d = diff_max(&got.to_c64_vec(), &want.to_c64_vec());
            let scale = want.to_c64_vec().iter().fold(1.0f64, |m, z| m.max(z.norm()));
            assert!(
                d <= 100.0 * eps * scale,
                "{}: {name} differs from numpy by {d:e}",
                f.name
            );
        }
        other => panic!("{}: unknown op {other}", f.name),
    }
    format!("{} ({}, {}) block {block}", f.name, f.op, f.split)
}
