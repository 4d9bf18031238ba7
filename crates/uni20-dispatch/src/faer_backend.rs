//! The faer backend: strided operands as matrix views where possible, a blocked permutation
//! otherwise, then one GEMM per batch element.

use std::borrow::Cow;

use faer::linalg::matmul::matmul_with_conj;
use faer::{Accum, Conj, MatMut, MatRef, Par};

use crate::backend::{ContractBackend, ContractProblem, KernelError};
use crate::dtype::C64;
use crate::permute::{gather, gather_par};
use crate::scalar::Element;
use crate::tensor::{checked_len, with_dtype, LocalTensor};
use crate::view::{row_major_strides, AnyView, StridedView};

/// GEMM backend built on faer 0.24. Accepts every dtype and every valid problem.
///
/// Plan, per operand: labels summed in only one operand are pre-reduced (one pass, a copy);
/// then the operand is read **in place** as a strided matrix (any row/column strides,
/// including negative and zero, with its conjugation flag passed to the GEMM) when its
/// `[free]` labels and its `[contracted]` labels each collapse to a single stride (size-1
/// modes are ignored). Otherwise it is copied once, by a blocked cache-aware permutation, into
/// `[batch][rows][cols]` order. The contracted labels are ordered to let as many operand
/// elements as possible stay in place. The output is written directly when its A-free and
/// B-free labels are each contiguous in the output; otherwise through one permuted copy.
/// Then `faer::linalg::matmul::matmul_with_conj` runs once per batch element; with
/// `beta != 0` the buffer is first filled with `beta * C` and the GEMM accumulates.
///
/// Thread budget: `threads <= 1` runs every GEMM sequentially (`Par::Seq`). Otherwise the
/// output of a GEMM is bisected recursively into up to `threads` blocks: each piece is cut
/// across its own longer side (edges on multiples of 16) while it still has at least
/// [`SPLIT_MIN_MACS`] multiply-adds and 32 rows or columns, and each final block runs as one
/// sequential faer GEMM, the halves in parallel through `rayon::join` on the global rayon
/// pool (at most `threads` tasks). Each block packs its own operands, so the threads never
/// wait for one another inside the GEMM; on the 2-core test machine this measured 0-16 %
/// faster than faer's own `Par::rayon(2)` at n = 1024 and 2048 (criterion `ratio` lines,
/// `docs/performance.md`). A rank running alongside others should pass its share of the
/// cores; any budget is accepted (a huge one is capped by the matrix size).
#[derive(Clone, Copy, Debug)]
pub struct FaerBackend {
    threads: usize,
}

impl FaerBackend {
    /// A faer backend with thread budget `threads` (see the type documentation; `0` and `1`
    /// both mean sequential).
    pub fn new(threads: usize) -> FaerBackend {
        FaerBackend { threads }
    }

    /// The thread budget given to [`FaerBackend::new`].
    pub fn threads(&self) -> usize {
        self.threads
    }
}

/// Smallest GEMM (m * n * k multiply-adds) that [`FaerBackend`] splits across threads; below
/// it the fork/join costs more than it saves (faer's own threading threshold is 48*48*256).
pub const SPLIT_MIN_MACS: usize = 1 << 18;

/// Panel edges are rounded to multiples of this many rows or columns (whole SIMD registers).
const SPLIT_ALIGN: usize = 16;

/// `dst (+)= alpha * op(lhs) * op(rhs)` with `parts` sequential faer GEMMs on disjoint output
/// panels, run in parallel by `rayon::join` (see [`FaerBackend`]).
#[allow(clippy::too_many_arguments)]
fn split_gemm<T: Element + faer::traits::ComplexField>(
    dst: MatMut<'_, T>,
    accum: Accum,
    lhs: MatRef<'_, T>,
    ca: Conj,
    rhs: MatRef<'_, T>,
    cb: Conj,
    alpha: T,
    parts: usize,
) {
    let (m, n) = (dst.nrows(), dst.ncols());
    let macs = m.saturating_mul(n).saturating_mul(lhs.ncols());
    // No more pieces than 16-wide strips of the longer side (also bounds a huge budget).
    let parts = parts.min(m.max(n) / SPLIT_ALIGN);
    if parts <= 1 || macs < SPLIT_MIN_MACS {
        matmul_with_conj(dst, accum, lhs, ca, rhs, cb, alpha, Par::Seq);
        return;
    }
    if m > n {
        // Cut across the longer side: rows of dst are columns of dst^T = op(B)^T op(A)^T.
        return split_gemm(
            dst.transpose_mut(),
            accum,
            rhs.transpose(),
            cb,
            lhs.transpose(),
            ca,
            alpha,
            parts,
        );
    }
    let first = parts / 2;
    // n * first / parts without overflow (first < parts).
    let cut = (n as u128 * first as u128 / parts as u128) as usize;
    let cut = cut
        .div_ceil(SPLIT_ALIGN)
        .saturating_mul(SPLIT_ALIGN)
        .clamp(SPLIT_ALIGN, n - 1);
    let (d0, d1) = dst.split_at_col_mut(cut);
    let (r0, r1) = rhs.split_at_col(cut);
    rayon::join(
        || split_gemm(d0, accum, lhs, ca, r0, cb, alpha, first),
        || split_gemm(d1, accum, lhs, ca, r1, cb, alpha, parts - first),
    );
}

impl ContractBackend for FaerBackend {
    fn name(&self) -> &str {
        "faer"
    }
    fn run(&self, p: &ContractProblem<'_>) -> Result<LocalTensor, KernelError> {
        p.validate().map_err(KernelError::Failed)?;
        let threads = self.threads.max(1);
        with_dtype!(p.dtype, T => run_typed::<T>(p, threads))
    }
}

/// An operand: labels plus a strided layout over borrowed or owned data.
#[derive(Clone, Debug)]
struct Operand<'a, T: Clone> {
    labels: Vec<char>,
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
    conj: bool,
    data: Cow<'a, [T]>,
}

impl<'a, T: Element> Operand<'a, T> {
    fn of_view(labels: &[char], v: &StridedView<'a, T>) -> Operand<'a, T> {
        Operand {
            labels: labels.to_vec(),
            shape: v.shape().to_vec(),
            strides: v.strides().to_vec(),
            offset: v.offset(),
            conj: v.is_conj(),
            data: Cow::Borrowed(v.data()),
        }
    }

    fn owned(labels: Vec<char>, shape: Vec<usize>, data: Vec<T>) -> Operand<'a, T> {
        Operand {
            labels,
            strides: row_major_strides(&shape),
            shape,
            offset: 0,
            conj: false,
            data: Cow::Owned(data),
        }
    }

    fn view(&self) -> Result<StridedView<'_, T>, KernelError> {
        StridedView::new(&self.data, &self.shape, &self.strides, self.offset, self.conj)
            .map_err(|e| KernelError::Failed(format!("internal layout error: {e}")))
    }

    fn pos(&self, l: char) -> Option<usize> {
        self.labels.iter().position(|&x| x == l)
    }

    fn dim(&self, l: char) -> usize {
        self.pos(l).map_or(1, |p| self.shape[p])
    }

    fn stride(&self, l: char) -> isize {
        self.pos(l).map_or(0, |p| self.strides[p])
    }

    fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// The single stride of `group` read as one index (row-major over the group), or `None`
    /// if the group's strides do not collapse. Size-1 modes are ignored; a group of size 1
    /// collapses with stride 1.
    fn collapse(&self, group: &[char]) -> Option<isize> {
        let modes: Vec<(usize, isize)> = group
            .iter()
            .map(|&l| (self.dim(l), self.stride(l)))
            .filter(|&(n, _)| n != 1)
            .collect();
        for w in modes.windows(2) {
            let (_, outer) = w[0];
            let (n, inner) = w[1];
            if inner.checked_mul(n as isize) != Some(outer) {
                return None;
            }
        }
        Some(modes.last().map_or(1, |&(_, s)| s))
    }

    /// Copies into a contiguous row-major operand over `order` (conjugation applied), with
    /// up to `threads` threads.
    fn permuted(&self, order: &[char], threads: usize) -> Result<Operand<'static, T>, KernelError> {
        checked_len(&self.shape, T::DTYPE.size_bytes())?;
        let idx: Vec<usize> = order.iter().filter_map(|&l| self.pos(l)).collect();
        let data = gather_par(&self.view()?, &idx, threads);
        let shape = idx.iter().map(|&k| self.shape[k]).collect();
        Ok(Operand::owned(
            idx.iter().map(|&k| self.labels[k]).collect(),
            shape,
            data,
        ))
    }
}

/// Sums `op` over every label not in `keep` (conjugation applied), keeping the remaining
/// labels in their order; returns a contiguous operand.
fn reduce<T: Element>(op: &Operand<'_, T>, keep: &[char]) -> Result<Operand<'static, T>, KernelError> {
    let kept: Vec<usize> = (0..op.labels.len()).filter(|&k| keep.contains(&op.labels[k])).collect();
    let new_shape: Vec<usize> = kept.iter().map(|&k| op.shape[k]).collect();
    let n_out = checked_len(&new_shape, T::DTYPE.size_bytes())?;
    let new_strides = row_major_strides(&new_shape);
    let mut dst_strides = vec![0isize; op.labels.len()];
    for (j, &k) in kept.iter().enumerate() {
        dst_strides[k] = new_strides[j];
    }
    let mut out = crate::alloc::zeroed::<T>(n_out);
    if op.len() > 0 {
        let v = op.view()?;
        let r = op.shape.len();
        let mut idx = vec![0usize; r];
        let (mut s, mut d) = (0isize, 0isize);
        loop {
            out[d as usize] += v.at(s);
            let mut k = r;
            loop {
                if k == 0 {
                    let labels = kept.iter().map(|&k| op.labels[k]).collect();
                    return Ok(Operand::owned(labels, new_shape, out));
                }
                k -= 1;
                idx[k] += 1;
                s += op.strides[k];
                d += dst_strides[k];
                if idx[k] < op.shape[k] {
                    break;
                }
                s -= op.strides[k] * op.shape[k] as isize;
                d -= dst_strides[k] * op.shape[k] as isize;
                idx[k] = 0;
            }
        }
    }
    let labels = kept.iter().map(|&k| op.labels[k]).collect();
    Ok(Operand::owned(labels, new_shape, out))
}

fn concat(parts: &[&[char]]) -> Vec<char> {
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

/// `labels` sorted by decreasing `|stride|` in `op` (stable), i.e. the order in which `op`
/// stores them.
fn storage_order<T: Element>(op: &Operand<'_, T>, labels: &[char]) -> Vec<char> {
    let mut v = labels.to_vec();
    v.sort_by_key(|&l| std::cmp::Reverse(op.stride(l).unsigned_abs()));
    v
}

/// A matrix operand: data, base offset, strides, conj flag.
struct MatPlan<'a, T: Clone> {
    op: Operand<'a, T>,
    row_stride: isize,
    col_stride: isize,
}

/// `op` as a `[batch][rows][cols]` matrix: in place if rows and cols collapse, else one
/// blocked permuted copy (with up to `threads` threads).
fn plan_matrix<'a, T: Element>(
    op: Operand<'a, T>,
    batch: &[char],
    rows: &[char],
    cols: &[char],
    threads: usize,
) -> Result<MatPlan<'a, T>, KernelError> {
    if let (Some(rs), Some(cs)) = (op.collapse(rows), op.collapse(cols)) {
        return Ok(MatPlan {
            op,
            row_stride: rs,
            col_stride: cs,
        });
    }
    let op = op.permuted(&concat(&[batch, rows, cols]), threads)?;
    let (rs, cs) = (op.collapse(rows).unwrap_or(1), op.collapse(cols).unwrap_or(1));
    Ok(MatPlan {
        op,
        row_stride: rs,
        col_stride: cs,
    })
}

/// Calls `f(offsets)` for each multi-index over `dims`, where `offsets[j]` is the offset of
/// that index under `strides[j]`.
fn for_each_batch<const N: usize>(dims: &[usize], strides: [&[isize]; N], mut f: impl FnMut([isize; N])) {
    if dims.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; dims.len()];
    let mut off = [0isize; N];
    loop {
        f(off);
        let mut k = dims.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            for j in 0..N {
                off[j] += strides[j][k];
            }
            if idx[k] < dims[k] {
                break;
            }
            for j in 0..N {
                off[j] -= strides[j][k] * dims[k] as isize;
            }
            idx[k] = 0;
        }
    }
}

fn typed<'v, 'a, T: Element>(v: &'v AnyView<'a>) -> Result<&'v StridedView<'a, T>, KernelError> {
    v.typed::<T>()
        .ok_or_else(|| KernelError::Failed(format!("operand dtype {} is not {}", v.dtype(), T::DTYPE)))
}

fn conj_flag(c: bool) -> Conj {
    if c {
        Conj::Yes
    } else {
        Conj::No
    }
}

fn run_typed<T: Element + faer::traits::ComplexField>(
    p: &ContractProblem<'_>,
    threads: usize,
) -> Result<LocalTensor, KernelError> {
    let cls = &p.classes;
    let mut a = Operand::of_view(&p.spec.a, typed::<T>(&p.a)?);
    let mut b = Operand::of_view(&p.spec.b, typed::<T>(&p.b)?);
    let zero = C64::new(0.0, 0.0);
    let gemm_needed = p.alpha != zero && !p.label_dims.iter().any(|&(_, d)| d == 0);
    if gemm_needed && !cls.summed_a.is_empty() {
        a = reduce(&a, &concat(&[&cls.batch, &cls.free_a, &cls.contracted]))?;
    }
    if gemm_needed && !cls.summed_b.is_empty() {
        b = reduce(&b, &concat(&[&cls.batch, &cls.free_b, &cls.contracted]))?;
    }

    // Output layout: direct into the row-major result when the free groups are contiguous.
    let out_strides = row_major_strides(&p.out_shape);
    let out_pos = |l: char| p.spec.out.iter().position(|&x| x == l);
    let out_op = Operand::<T> {
        labels: p.spec.out.clone(),
        shape: p.out_shape.clone(),
        strides: out_strides,
        offset: 0,
        conj: false,
        data: Cow::Owned(Vec::new()),
    };
    let direct = out_op.collapse(&cls.free_a).zip(out_op.collapse(&cls.free_b));
    let work_labels = if direct.is_some() {
        p.spec.out.clone()
    } else {
        concat(&[&cls.batch, &cls.free_a, &cls.free_b])
    };
    let work_shape: Vec<usize> = work_labels.iter().map(|&l| p.dim(l).unwrap_or(1)).collect();
    let total = checked_len(&work_shape, T::DTYPE.size_bytes())?;
    let work_order: Vec<usize> = work_labels.iter().filter_map(|&l| out_pos(l)).collect();

    // Initial contents: beta * C (in work order) or zeros.
    let mut buf: Vec<T> = match &p.c {
        Some(c) if total > 0 => {
            let mut v = gather_par(typed::<T>(c)?, &work_order, threads);
            let beta = T::from_c64(p.beta);
            if p.beta != C64::new(1.0, 0.0) {
                for x in &mut v {
                    *x = beta * *x;
                }
            }
            v
        }
        _ => crate::alloc::zeroed(total),
    };
    let accum = if p.c.is_some() { Accum::Add } else { Accum::Replace };

    if gemm_needed && total > 0 {
        // Contracted order: whichever storage order keeps more operand elements in place.
        let cands = [storage_order(&a, &cls.contracted), storage_order(&b, &cls.contracted)];
        let cost = |k: &[char]| {
            let ca = if a.collapse(&cls.free_a).is_some() && a.collapse(k).is_some() {
                0
            } else {
                a.len()
            };
            let cb = if b.collapse(&cls.free_b).is_some() && b.collapse(k).is_some() {
                0
            } else {
                b.len()
            };
            ca + cb
        };
        let k_order = if cost(&cands[1]) < cost(&cands[0]) {
            cands[1].clone()
        } else {
            cands[0].clone()
        };
        let am = plan_matrix(a, &cls.batch, &cls.free_a, &k_order, threads)?;
        let bm = plan_matrix(b, &cls.batch, &k_order, &cls.free_b, threads)?;
        let prod = |ls: &[char]| ls.iter().map(|&l| p.dim(l).unwrap_or(1)).product::<usize>();
        let (m, n, k) = (prod(&cls.free_a), prod(&cls.free_b), prod(&k_order));
        let work = Operand::<T> {
            labels: work_labels.clone(),
            shape: work_shape.clone(),
            strides: row_major_strides(&work_shape),
            offset: 0,
            conj: false,
            data: Cow::Owned(Vec::new()),
        };
        let (drs, dcs) = (
            work.collapse(&cls.free_a).unwrap_or(1),
            work.collapse(&cls.free_b).unwrap_or(1),
        );
        let bdims: Vec<usize> = cls.batch.iter().map(|&l| p.dim(l).unwrap_or(1)).collect();
        let sa: Vec<isize> = cls.batch.iter().map(|&l| am.op.stride(l)).collect();
        let sb: Vec<isize> = cls.batch.iter().map(|&l| bm.op.stride(l)).collect();
        let sd: Vec<isize> = cls.batch.iter().map(|&l| work.stride(l)).collect();
        let alpha = T::from_c64(p.alpha);
        let (a_ptr, b_ptr) = (am.op.data.as_ptr(), bm.op.data.as_ptr());
        let d_ptr = buf.as_mut_ptr();
        let (ca, cb) = (conj_flag(am.op.conj), conj_flag(bm.op.conj));
        let (a_base, b_base) = (am.op.offset as isize, bm.op.offset as isize);
        for_each_batch(&bdims, [&sa, &sb, &sd], |[oa, ob, od]| {
            // SAFETY: every operand is a validated strided layout over its slice (checked by
            // `StridedView::new` or built row-major by `gather`/`reduce`), so each (batch, row,
            // col) index reaches an in-bounds element; the row and column groups were checked
            // to collapse to the strides used here. The destination is a row-major buffer of
            // `total` elements over distinct labels, so distinct (row, col) map to distinct
            // elements and it does not alias the operands (fresh allocation).
            unsafe {
                let lhs = MatRef::<T>::from_raw_parts(a_ptr.offset(a_base + oa), m, k, am.row_stride, am.col_stride);
                let rhs = MatRef::<T>::from_raw_parts(b_ptr.offset(b_base + ob), k, n, bm.row_stride, bm.col_stride);
                let dst = MatMut::<T>::from_raw_parts_mut(d_ptr.offset(od), m, n, drs, dcs);
                split_gemm(dst, accum, lhs, ca, rhs, cb, alpha, threads);
            }
        });
    }
    let out = if direct.is_some() || total == 0 {
        buf
    } else {
        let work = StridedView::row_major(&buf, &work_shape)
            .map_err(|e| KernelError::Failed(format!("internal layout error: {e}")))?;
        let order: Vec<usize> = p
            .spec
            .out
            .iter()
            .filter_map(|&l| work_labels.iter().position(|&x| x == l))
            .collect();
        gather_par(&work, &order, threads)
    };
    Ok(LocalTensor::from_data(&p.out_shape, T::wrap(out))?)
}

/// A problem packed into contiguous row-major buffers for a device GEMM: `a` is
/// `[batch][m][k]`, `b` is `[batch][k][n]`, `c` is `[batch][m][n]` holding `beta * C` (or
/// `None` when there is no accumulator); conjugation and summed labels are applied.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct Packed<T> {
    pub(crate) a: Vec<T>,
    pub(crate) b: Vec<T>,
    pub(crate) c: Option<Vec<T>>,
    pub(crate) batch: usize,
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    /// Labels of the `[batch][m][n]` work layout.
    work_labels: Vec<char>,
    work_shape: Vec<usize>,
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
impl<T: Element> Packed<T> {
    /// Packs `p` (validated by the caller).
    pub(crate) fn new(p: &ContractProblem<'_>) -> Result<Packed<T>, KernelError> {
        let cls = &p.classes;
        let mut a = Operand::of_view(&p.spec.a, typed::<T>(&p.a)?);
        let mut b = Operand::of_view(&p.spec.b, typed::<T>(&p.b)?);
        if !cls.summed_a.is_empty() {
            a = reduce(&a, &concat(&[&cls.batch, &cls.free_a, &cls.contracted]))?;
        }
        if !cls.summed_b.is_empty() {
            b = reduce(&b, &concat(&[&cls.batch, &cls.free_b, &cls.contracted]))?;
        }
        let a = a.permuted(&concat(&[&cls.batch, &cls.free_a, &cls.contracted]), 1)?;
        let b = b.permuted(&concat(&[&cls.batch, &cls.contracted, &cls.free_b]), 1)?;
        let prod = |ls: &[char]| ls.iter().map(|&l| p.dim(l).unwrap_or(1)).product::<usize>();
        let work_labels = concat(&[&cls.batch, &cls.free_a, &cls.free_b]);
        let work_shape: Vec<usize> = work_labels.iter().map(|&l| p.dim(l).unwrap_or(1)).collect();
        checked_len(&work_shape, T::DTYPE.size_bytes())?;
        let c = match &p.c {
            Some(c) => {
                let order: Vec<usize> = work_labels
                    .iter()
                    .filter_map(|&l| p.spec.out.iter().position(|&x| x == l))
                    .collect();
                let beta = T::from_c64(p.beta);
                Some(gather(typed::<T>(c)?, &order).into_iter().map(|x| beta * x).collect())
            }
            None => None,
        };
        Ok(Packed {
            a: a.data.into_owned(),
            b: b.data.into_owned(),
            c,
            batch: prod(&cls.batch),
            m: prod(&cls.free_a),
            n: prod(&cls.free_b),
            k: prod(&cls.contracted),
            work_labels,
            work_shape,
        })
    }

    /// Reorders a `[batch][m][n]` result into the output tensor of `p`.
    pub(crate) fn unpack(&self, p: &ContractProblem<'_>, work: &[T]) -> Result<LocalTensor, KernelError> {
        let v = StridedView::row_major(work, &self.work_shape)
            .map_err(|e| KernelError::Failed(format!("internal layout error: {e}")))?;
        let order: Vec<usize> = p
            .spec
            .out
            .iter()
            .filter_map(|&l| self.work_labels.iter().position(|&x| x == l))
            .collect();
        Ok(LocalTensor::from_data(&p.out_shape, T::wrap(gather(&v, &order)))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(labels: &str, shape: &[usize]) -> Operand<'static, f64> {
        let n: usize = shape.iter().product();
        Operand::owned(
            labels.chars().collect(),
            shape.to_vec(),
            (0..n).map(|x| x as f64).collect(),
        )
    }

    #[test]
    fn matrix_form_avoids_copies_when_grouped() {
        let o = op("bij", &[2, 3, 4]);
        let m = plan_matrix(o.clone(), &['b'], &['i'], &['j'], 1).unwrap();
        assert!(matches!(m.op.data, Cow::Owned(_)));
        let b = Operand {
            data: Cow::Borrowed(&o.data[..]),
            ..o.clone()
        };
        let m = plan_matrix(b.clone(), &['b'], &['i'], &['j'], 1).unwrap();
        assert!(matches!(m.op.data, Cow::Borrowed(_)));
        assert_eq!((m.row_stride, m.col_stride), (4, 1));
        // Transposed use: still in place, column-major strides.
        let m = plan_matrix(b.clone(), &['b'], &['j'], &['i'], 1).unwrap();
        assert!(matches!(m.op.data, Cow::Borrowed(_)));
        assert_eq!((m.row_stride, m.col_stride), (1, 4));
        // Batch not leading: batch walks by stride, still in place.
        let m = plan_matrix(b.clone(), &['i'], &['b'], &['j'], 1).unwrap();
        assert!(matches!(m.op.data, Cow::Borrowed(_)));
        assert_eq!((m.row_stride, m.col_stride), (12, 1));
        // Rows {b, j} are not adjacent: one permuted copy, row-major [i][b j][...].
        let m = plan_matrix(b, &['i'], &['b', 'j'], &[], 1).unwrap();
        assert!(matches!(m.op.data, Cow::Owned(_)));
        assert_eq!(m.op.labels, vec!['i', 'b', 'j']);
        // Element (i=1, b=1, j=2) sits at [1][1][2] = 1*8 + 1*4 + 2 and equals the source
        // element (b=1, i=1, j=2) = 1*12 + 1*4 + 2.
        assert_eq!(m.op.data[14], 18.0);
    }

    #[test]
    fn collapse_rules() {
        let o = op("abc", &[2, 3, 4]);
        assert_eq!(o.collapse(&['a', 'b', 'c']), Some(1));
        assert_eq!(o.collapse(&['a', 'b']), Some(4));
        assert_eq!(o.collapse(&['a', 'c']), None);
        assert_eq!(o.collapse(&['b', 'a']), None);
        assert_eq!(o.collapse(&[]), Some(1));
        let mut neg = o.clone();
        neg.strides = vec![-12, -4, -1];
        assert_eq!(neg.collapse(&['a', 'b', 'c']), Some(-1));
        let ones = op("xay", &[1, 5, 1]);
        assert_eq!(ones.collapse(&['x', 'a', 'y']), Some(1));
    }

    #[test]
    fn packed_round_trip_matches_reference() {
        use crate::{BackendList, DType, EinsumSpec};
        let spec = EinsumSpec::parse("bkis,jbk->jbi").unwrap();
        let a = LocalTensor::from_data(
            &[2, 3, 2, 2],
            crate::TensorData::F64((0..24).map(|x| x as f64).collect()),
        )
        .unwrap();
        let b = LocalTensor::from_data(
            &[4, 2, 3],
            crate::TensorData::F64((0..24).map(|x| 1.0 - x as f64).collect()),
        )
        .unwrap();
        let c =
            LocalTensor::from_data(&[4, 2, 2], crate::TensorData::F64((0..16).map(|x| x as f64).collect())).unwrap();
        let problem = ContractProblem {
            spec: &spec,
            classes: spec.classes(),
            label_dims: spec.label_dims(a.shape(), b.shape()).unwrap(),
            alpha: C64::new(1.0, 0.0),
            beta: C64::new(-0.75, 0.0),
            a: AnyView::of_tensor(&a),
            b: AnyView::of_tensor(&b),
            c: Some(AnyView::of_tensor(&c)),
            dtype: DType::F64,
            out_shape: vec![4, 2, 2],
        };
        let pk = Packed::<f64>::new(&problem).unwrap();
        assert_eq!((pk.batch, pk.m, pk.n, pk.k), (2, 2, 4, 3));
        // Host GEMM over the packed buffers, as the device backend does.
        let mut work = pk.c.clone().unwrap();
        for bi in 0..pk.batch {
            for i in 0..pk.m {
                for j in 0..pk.n {
                    let mut acc = 0.0;
                    for k in 0..pk.k {
                        acc += pk.a[(bi * pk.m + i) * pk.k + k] * pk.b[(bi * pk.k + k) * pk.n + j];
                    }
                    work[(bi * pk.m + i) * pk.n + j] += acc;
                }
            }
        }
        let got = pk.unpack(&problem, &work).unwrap();
        let want = crate::contract(
            &spec,
            C64::new(1.0, 0.0),
            &a,
            &b,
            C64::new(-0.75, 0.0),
            Some(&c),
            &BackendList::reference_only(),
        )
        .unwrap();
        assert!(got.max_abs_diff(&want).unwrap() < 1e-12);
    }

    #[test]
    fn reduce_sums_dropped_labels() {
        let r = reduce(&op("ij", &[2, 3]), &['i']).unwrap();
        assert_eq!(r.labels, vec!['i']);
        assert_eq!(&*r.data, &[3., 12.]);
        let r = reduce(&op("ij", &[0, 3]), &['j']).unwrap();
        assert_eq!(&*r.data, &[0., 0., 0.]);
    }
}
