//! Labelled strided operands and the matricization steps on them: reading a group of labels
//! as one matrix index when its strides collapse, summing out labels, the blocked permuted
//! copy, and the batch walks. Shared by every GEMM-style backend and by any operation
//! family that needs a tensor as a matrix.

use std::borrow::Cow;

use crate::backend::KernelError;
use crate::permute::gather_par;
use crate::problem::ContractProblem;
use crate::scalar::Element;
use crate::tensor::checked_len;
use crate::view::{row_major_strides, AnyView, StridedView};

/// An operand: labels plus a strided layout over borrowed or owned data.
#[derive(Clone, Debug)]
pub(crate) struct Operand<'a, T: Clone> {
    pub(crate) labels: Vec<char>,
    pub(crate) shape: Vec<usize>,
    pub(crate) strides: Vec<isize>,
    pub(crate) offset: usize,
    pub(crate) conj: bool,
    pub(crate) data: Cow<'a, [T]>,
}

impl<'a, T: Element> Operand<'a, T> {
    /// The operand `labels` over the view `v` (borrowed, no copy).
    pub(crate) fn of_view(labels: &[char], v: &StridedView<'a, T>) -> Operand<'a, T> {
        Operand {
            labels: labels.to_vec(),
            shape: v.shape().to_vec(),
            strides: v.strides().to_vec(),
            offset: v.offset(),
            conj: v.is_conj(),
            data: Cow::Borrowed(v.data()),
        }
    }

    /// A contiguous row-major operand owning `data`.
    pub(crate) fn owned(labels: Vec<char>, shape: Vec<usize>, data: Vec<T>) -> Operand<'a, T> {
        Operand {
            labels,
            strides: row_major_strides(&shape),
            shape,
            offset: 0,
            conj: false,
            data: Cow::Owned(data),
        }
    }

    /// A row-major layout with no data, for stride arithmetic on an output buffer.
    pub(crate) fn layout_only(labels: Vec<char>, shape: Vec<usize>) -> Operand<'a, T> {
        Operand::owned(labels, shape, Vec::new())
    }

    pub(crate) fn view(&self) -> Result<StridedView<'_, T>, KernelError> {
        StridedView::new(&self.data, &self.shape, &self.strides, self.offset, self.conj)
            .map_err(|e| KernelError::Failed(format!("internal layout error: {e}")))
    }

    pub(crate) fn pos(&self, l: char) -> Option<usize> {
        self.labels.iter().position(|&x| x == l)
    }

    /// Extent of `l` (1 if absent).
    pub(crate) fn dim(&self, l: char) -> usize {
        self.pos(l).map_or(1, |p| self.shape[p])
    }

    /// Stride of `l` (0 if absent).
    pub(crate) fn stride(&self, l: char) -> isize {
        self.pos(l).map_or(0, |p| self.strides[p])
    }

    pub(crate) fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// The single stride of `group` read as one index (row-major over the group), or `None`
    /// if the group's strides do not collapse. Size-1 modes are ignored; a group of size 1
    /// collapses with stride 1.
    pub(crate) fn collapse(&self, group: &[char]) -> Option<isize> {
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
    /// up to `threads` threads. Labels of `order` absent here are skipped.
    pub(crate) fn permuted(&self, order: &[char], threads: usize) -> Result<Operand<'static, T>, KernelError> {
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
pub(crate) fn reduce<T: Element>(op: &Operand<'_, T>, keep: &[char]) -> Result<Operand<'static, T>, KernelError> {
    let kept: Vec<usize> = (0..op.labels.len()).filter(|&k| keep.contains(&op.labels[k])).collect();
    let new_shape: Vec<usize> = kept.iter().map(|&k| op.shape[k]).collect();
    let n_out = checked_len(&new_shape, T::DTYPE.size_bytes())?;
    let new_strides = row_major_strides(&new_shape);
    let mut dst_strides = vec![0isize; op.labels.len()];
    for (j, &k) in kept.iter().enumerate() {
        dst_strides[k] = new_strides[j];
    }
    let mut out = crate::alloc::zeroed::<T>(n_out);
    let labels = kept.iter().map(|&k| op.labels[k]).collect();
    if op.len() == 0 {
        return Ok(Operand::owned(labels, new_shape, out));
    }
    let v = op.view()?;
    let r = op.shape.len();
    let mut idx = vec![0usize; r];
    let (mut s, mut d) = (0isize, 0isize);
    loop {
        out[d as usize] += v.at(s);
        let mut k = r;
        loop {
            if k == 0 {
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

/// The label lists concatenated.
pub(crate) fn concat(parts: &[&[char]]) -> Vec<char> {
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

/// `labels` sorted by decreasing `|stride|` in `op` (stable), i.e. the order in which `op`
/// stores them.
pub(crate) fn storage_order<T: Element>(op: &Operand<'_, T>, labels: &[char]) -> Vec<char> {
    let mut v = labels.to_vec();
    v.sort_by_key(|&l| std::cmp::Reverse(op.stride(l).unsigned_abs()));
    v
}

/// A matrix layout offered to a backend's [`super::plan::LayoutRules`]: `rows x cols`
/// elements at the given strides (any sign, possibly zero), conjugated on read when `conj`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MatLayout {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) row_stride: isize,
    pub(crate) col_stride: isize,
    pub(crate) conj: bool,
}

/// The row-major work buffer `work` (shape `work_shape`, modes `work_labels`) as a view, and
/// for each output label of `p` the position of its mode in the buffer: what the gather into
/// the output's order reads.
///
/// # Errors
/// [`KernelError::Failed`] if `work` is shorter than `work_shape` (an internal layout error).
pub(crate) fn work_view<'w, T: Element>(
    p: &ContractProblem<'_>,
    work: &'w [T],
    work_shape: &[usize],
    work_labels: &[char],
) -> Result<(StridedView<'w, T>, Vec<usize>), KernelError> {
    let view = StridedView::row_major(work, work_shape)
        .map_err(|e| KernelError::Failed(format!("internal layout error: {e}")))?;
    let order = p
        .out_labels()
        .iter()
        .filter_map(|&l| work_labels.iter().position(|&x| x == l))
        .collect();
    Ok((view, order))
}

/// Calls `f(offsets)` for each multi-index over `dims`, where `offsets[j]` is the offset of
/// that index under `strides[j]`. Nothing is called if some extent is 0.
pub(crate) fn for_each_batch<const N: usize>(dims: &[usize], strides: [&[isize]; N], mut f: impl FnMut([isize; N])) {
    if dims.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; dims.len()];
    let mut off = [0isize; N];
    loop {
        f(off);
        if !advance(dims, &strides, &mut idx, &mut off) {
            return;
        }
    }
}

/// Steps the multi-index `idx` over `dims` to the next one in row-major order, keeping
/// `off[j]` its offset under `strides[j]`. Returns false when `idx` wrapped past the last
/// index (it is then all zeros again).
fn advance<const N: usize>(dims: &[usize], strides: &[&[isize]; N], idx: &mut [usize], off: &mut [isize; N]) -> bool {
    for k in (0..dims.len()).rev() {
        idx[k] += 1;
        for j in 0..N {
            off[j] += strides[j][k];
        }
        if idx[k] < dims[k] {
            return true;
        }
        for j in 0..N {
            off[j] -= strides[j][k] * dims[k] as isize;
        }
        idx[k] = 0;
    }
    false
}

/// Like [`for_each_batch`], over the multi-indices `start..end` (row-major numbering) only.
pub(crate) fn for_each_batch_range<const N: usize>(
    dims: &[usize],
    strides: [&[isize]; N],
    start: usize,
    end: usize,
    mut f: impl FnMut([isize; N]),
) {
    if dims.contains(&0) || start >= end {
        return;
    }
    let mut idx = vec![0usize; dims.len()];
    let mut off = [0isize; N];
    let mut rest = start;
    for k in (0..dims.len()).rev() {
        idx[k] = rest % dims[k];
        rest /= dims[k];
        for j in 0..N {
            off[j] += strides[j][k] * idx[k] as isize;
        }
    }
    for _ in start..end {
        f(off);
        advance(dims, &strides, &mut idx, &mut off);
    }
}

/// The typed view inside `v`, or a kernel failure naming both dtypes.
pub(crate) fn typed<'v, 'a, T: Element>(v: &'v AnyView<'a>) -> Result<&'v StridedView<'a, T>, KernelError> {
    v.typed::<T>()
        .ok_or_else(|| KernelError::Failed(format!("operand dtype {} is not {}", v.dtype(), T::DTYPE)))
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
    fn reduce_sums_dropped_labels() {
        let r = reduce(&op("ij", &[2, 3]), &['i']).unwrap();
        assert_eq!(r.labels, vec!['i']);
        assert_eq!(&*r.data, &[3., 12.]);
        let r = reduce(&op("ij", &[0, 3]), &['j']).unwrap();
        assert_eq!(&*r.data, &[0., 0., 0.]);
    }

    #[test]
    fn batch_offsets() {
        let mut seen = Vec::new();
        for_each_batch(&[2, 3], [&[10, 1], &[-1, 5]], |o| seen.push(o));
        assert_eq!(seen.len(), 6);
        assert_eq!(seen[4], [11, 4]);
        let mut none = 0;
        for_each_batch(&[2, 0], [&[1, 1]], |_| none += 1);
        assert_eq!(none, 0);
        // Any range of the same walk gives the same offsets.
        for (start, end) in [(0, 6), (1, 4), (3, 6), (5, 6), (4, 4)] {
            let mut part = Vec::new();
            for_each_batch_range(&[2, 3], [&[10, 1], &[-1, 5]], start, end, |o| part.push(o));
            assert_eq!(part, seen[start..end].to_vec());
        }
    }
}
