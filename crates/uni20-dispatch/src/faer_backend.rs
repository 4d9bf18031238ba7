//! The faer backend: permute operands into matrix form and run one GEMM per batch element.

use std::borrow::Cow;

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};

use crate::backend::{ContractBackend, ContractProblem, KernelError};
use crate::dtype::DType;
use crate::scalar::Element;
use crate::tensor::{with_dtype, LocalTensor};

/// GEMM backend built on faer 0.24. Accepts every dtype and problem:
/// labels summed in only one operand are pre-reduced; each operand is used in place when its
/// labels are already grouped as `[batch][free][contracted]` (or `[batch][contracted][free]`,
/// read column-major), and otherwise permuted once into a contiguous buffer; then one
/// `faer::linalg::matmul::matmul` runs per batch element.
#[derive(Clone, Copy, Debug)]
pub struct FaerBackend {
    threads: usize,
}

impl FaerBackend {
    /// A faer backend with an explicit thread budget: `threads <= 1` runs sequentially
    /// (`Par::Seq`), otherwise each GEMM uses `Par::rayon(threads)` on the global rayon pool.
    pub fn new(threads: usize) -> FaerBackend {
        FaerBackend { threads }
    }

    /// The thread budget given to [`FaerBackend::new`].
    pub fn threads(&self) -> usize {
        self.threads
    }

    fn par(&self) -> Par {
        if self.threads <= 1 {
            Par::Seq
        } else {
            Par::rayon(self.threads)
        }
    }
}

impl ContractBackend for FaerBackend {
    fn name(&self) -> &str {
        "faer"
    }
    fn availability(&self) -> Result<(), String> {
        Ok(())
    }
    fn accepts_types(&self, _dtype: DType) -> Result<(), String> {
        Ok(())
    }
    fn accepts(&self, _problem: &ContractProblem<'_>) -> Result<(), String> {
        Ok(())
    }
    fn run(&self, p: &ContractProblem<'_>) -> Result<LocalTensor, KernelError> {
        p.validate().map_err(KernelError::Failed)?;
        let par = self.par();
        with_dtype!(p.dtype, T => run_typed::<T>(p, par))
    }
}

/// An operand as labels, shape and row-major data (borrowed when untouched).
struct Operand<'a, T: Clone> {
    labels: Vec<char>,
    shape: Vec<usize>,
    data: Cow<'a, [T]>,
}

impl<T: Clone> Operand<'_, T> {
    fn dim(&self, l: char) -> usize {
        self.labels.iter().position(|&x| x == l).map_or(1, |p| self.shape[p])
    }
}

fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    s
}

/// Copies `src` (row-major over `labels`/`shape`) into a new row-major buffer over
/// `dst_labels` (a permutation of `labels`).
fn permute<T: Copy>(src: &[T], labels: &[char], shape: &[usize], dst_labels: &[char]) -> Vec<T> {
    let src_strides = row_major_strides(shape);
    let pos = |l: char| labels.iter().position(|&x| x == l).unwrap_or(0);
    let dims: Vec<usize> = dst_labels.iter().map(|&l| shape[pos(l)]).collect();
    let strides: Vec<usize> = dst_labels.iter().map(|&l| src_strides[pos(l)]).collect();
    let n: usize = dims.iter().product();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    if dims.is_empty() {
        out.push(src[0]);
        return out;
    }
    let r = dims.len();
    let (last_n, last_s) = (dims[r - 1], strides[r - 1]);
    let mut idx = vec![0usize; r - 1];
    loop {
        let base: usize = idx.iter().zip(&strides).map(|(&i, &s)| i * s).sum();
        out.extend((0..last_n).map(|j| src[base + j * last_s]));
        let mut k = r - 1;
        loop {
            if k == 0 {
                return out;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// Sums `op` over every label not in `keep`, keeping the remaining labels in their order.
fn reduce<'a, T: Element>(op: Operand<'a, T>, keep: &[char]) -> Operand<'a, T> {
    if op.labels.iter().all(|l| keep.contains(l)) {
        return op;
    }
    let kept: Vec<usize> = (0..op.labels.len()).filter(|&k| keep.contains(&op.labels[k])).collect();
    let new_shape: Vec<usize> = kept.iter().map(|&k| op.shape[k]).collect();
    let new_strides = row_major_strides(&new_shape);
    let mut dst_strides = vec![0usize; op.labels.len()];
    for (j, &k) in kept.iter().enumerate() {
        dst_strides[k] = new_strides[j];
    }
    let n_out: usize = new_shape.iter().product();
    let mut out = vec![T::zero(); n_out];
    if !op.data.is_empty() {
        let mut idx = vec![0usize; op.labels.len()];
        for &v in op.data.iter() {
            let off: usize = idx.iter().zip(&dst_strides).map(|(&i, &s)| i * s).sum();
            out[off] += v;
            for k in (0..idx.len()).rev() {
                idx[k] += 1;
                if idx[k] < op.shape[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
    }
    Operand {
        labels: kept.iter().map(|&k| op.labels[k]).collect(),
        shape: new_shape,
        data: Cow::Owned(out),
    }
}

fn concat(parts: &[&[char]]) -> Vec<char> {
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

/// Puts `op` in matrix form `[batch][rows][cols]`; returns the data and whether each batch
/// block is row-major `rows x cols` (true) or column-major (false).
fn as_matrix<'a, T: Copy>(op: Operand<'a, T>, batch: &[char], rows: &[char], cols: &[char]) -> (Cow<'a, [T]>, bool) {
    let row_major = concat(&[batch, rows, cols]);
    if op.labels == row_major {
        return (op.data, true);
    }
    if op.labels == concat(&[batch, cols, rows]) {
        return (op.data, false);
    }
    let data = permute(&op.data, &op.labels, &op.shape, &row_major);
    (Cow::Owned(data), true)
}

fn mat_ref<T>(s: &[T], nrows: usize, ncols: usize, row_major: bool) -> MatRef<'_, T> {
    if row_major {
        MatRef::from_row_major_slice(s, nrows, ncols)
    } else {
        MatRef::from_column_major_slice(s, nrows, ncols)
    }
}

fn typed<T: Element>(t: &LocalTensor) -> Result<&[T], KernelError> {
    t.typed::<T>()
        .ok_or_else(|| KernelError::Failed(format!("operand dtype {} is not {}", t.dtype(), T::DTYPE)))
}

fn run_typed<T: Element + faer::traits::ComplexField>(
    p: &ContractProblem<'_>,
    par: Par,
) -> Result<LocalTensor, KernelError> {
    let cls = &p.classes;
    let a = Operand {
        labels: p.spec.a.clone(),
        shape: p.a.shape().to_vec(),
        data: Cow::Borrowed(typed::<T>(p.a)?),
    };
    let b = Operand {
        labels: p.spec.b.clone(),
        shape: p.b.shape().to_vec(),
        data: Cow::Borrowed(typed::<T>(p.b)?),
    };
    let keep_a = concat(&[&cls.batch, &cls.free_a, &cls.contracted]);
    let keep_b = concat(&[&cls.batch, &cls.free_b, &cls.contracted]);
    let a = reduce(a, &keep_a);
    let b = reduce(b, &keep_b);

    let prod = |op: &Operand<'_, T>, ls: &[char]| ls.iter().map(|&l| op.dim(l)).product::<usize>();
    let nb = prod(&a, &cls.batch);
    let m = prod(&a, &cls.free_a);
    let k = prod(&a, &cls.contracted);
    let n = prod(&b, &cls.free_b);

    let (a_data, a_rm) = as_matrix(a, &cls.batch, &cls.free_a, &cls.contracted);
    let (b_data, b_rm) = as_matrix(b, &cls.batch, &cls.contracted, &cls.free_b);

    let mn_order = concat(&[&cls.batch, &cls.free_a, &cls.free_b]);
    let (dst_rm, direct) = if p.spec.out == mn_order {
        (true, true)
    } else if p.spec.out == concat(&[&cls.batch, &cls.free_b, &cls.free_a]) {
        (false, true)
    } else {
        (true, false)
    };
    let total = nb * m * n;
    let mut buf = vec![T::zero(); total];
    let alpha = T::from_c64(p.alpha);
    if m > 0 && n > 0 && k > 0 {
        for bi in 0..nb {
            let lhs = mat_ref(&a_data[bi * m * k..(bi + 1) * m * k], m, k, a_rm);
            let rhs = mat_ref(&b_data[bi * k * n..(bi + 1) * k * n], k, n, b_rm);
            let block = &mut buf[bi * m * n..(bi + 1) * m * n];
            let dst = if dst_rm {
                MatMut::from_row_major_slice_mut(block, m, n)
            } else {
                MatMut::from_column_major_slice_mut(block, m, n)
            };
            matmul(dst, Accum::Replace, lhs, rhs, alpha, par);
        }
    }
    let mut out = if direct {
        buf
    } else {
        let mut shape = Vec::with_capacity(mn_order.len());
        for &l in &mn_order {
            shape.push(p.dim(l).unwrap_or(1));
        }
        permute(&buf, &mn_order, &shape, &p.spec.out)
    };
    if let Some(c) = p.c {
        let c = typed::<T>(c)?;
        let beta = T::from_c64(p.beta);
        if c.len() != out.len() {
            return Err(KernelError::Failed(format!(
                "accumulator has {} elements, output {}",
                c.len(),
                out.len()
            )));
        }
        for (o, &cv) in out.iter_mut().zip(c) {
            *o += beta * cv;
        }
    }
    Ok(LocalTensor::from_data(&p.out_shape, T::wrap(out))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(labels: &str, shape: &[usize]) -> Operand<'static, f64> {
        let n: usize = shape.iter().product();
        Operand {
            labels: labels.chars().collect(),
            shape: shape.to_vec(),
            data: Cow::Owned((0..n).map(|x| x as f64).collect()),
        }
    }

    fn borrowed_view<'a>(op: &'a Operand<'_, f64>) -> Operand<'a, f64> {
        Operand {
            labels: op.labels.clone(),
            shape: op.shape.clone(),
            data: Cow::Borrowed(&op.data),
        }
    }

    #[test]
    fn matrix_form_avoids_copies_when_grouped() {
        let o = op("bij", &[2, 3, 4]);
        let (d, rm) = as_matrix(borrowed_view(&o), &['b'], &['i'], &['j']);
        assert!(matches!(d, Cow::Borrowed(_)) && rm);
        let (d, rm) = as_matrix(borrowed_view(&o), &['b'], &['j'], &['i']);
        assert!(matches!(d, Cow::Borrowed(_)) && !rm);
        // Batch not leading: one permuted copy, row-major [b][rows][cols].
        let (d, rm) = as_matrix(borrowed_view(&o), &['i'], &['b'], &['j']);
        assert!(matches!(d, Cow::Owned(_)) && rm);
        // Element (i=1, b=1, j=2) sits at row-major [1][1][2] = 1*8 + 1*4 + 2 and equals
        // the source element (b=1, i=1, j=2) = 1*12 + 1*4 + 2.
        assert_eq!(d[14], 18.0);
    }

    #[test]
    fn permute_and_reduce() {
        let o = op("ij", &[2, 3]);
        assert_eq!(
            permute(&o.data, &o.labels, &o.shape, &['j', 'i']),
            vec![0., 3., 1., 4., 2., 5.]
        );
        let r = reduce(op("ij", &[2, 3]), &['i']);
        assert_eq!(r.labels, vec!['i']);
        assert_eq!(&*r.data, &[3., 12.]);
        let r = reduce(op("ij", &[0, 3]), &['j']);
        assert_eq!(&*r.data, &[0., 0., 0.]);
    }
}
