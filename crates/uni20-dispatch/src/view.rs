//! Strided views over element slices: read-only (with a conjugation flag), writable, and
//! runtime-typed ([`AnyView`]).

use crate::dtype::with_dtype;
use crate::scalar::Element;
use crate::tensor::LocalTensor;

/// Error constructing a [`StridedView`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// `shape` and `strides` have different lengths.
    #[error("shape has {shape} dimensions but strides has {strides}")]
    RankMismatch {
        /// `shape.len()`.
        shape: usize,
        /// `strides.len()`.
        strides: usize,
    },
    /// Some element of the (non-empty) view lies outside the slice, or offsets overflow.
    #[error("strided view reaches element offsets {min}..={max}, outside the slice of length {len}")]
    OutOfBounds {
        /// Smallest reachable offset (saturated on overflow).
        min: i128,
        /// Largest reachable offset (saturated on overflow).
        max: i128,
        /// Slice length.
        len: usize,
    },
    /// The tensor's dtype does not match the requested element type.
    #[error("tensor dtype {0} does not match the view element type")]
    DType(crate::DType),
    /// The product of the extents overflows `usize`.
    #[error("view shape {0:?} overflows the addressable size")]
    Overflow(Vec<usize>),
    /// A writable view whose strides may map two distinct indices to one element (for
    /// example a zero stride on an extent > 1).
    #[error("writable view with shape {shape:?} and strides {strides:?} may alias itself")]
    SelfOverlap {
        /// Extents.
        shape: Vec<usize>,
        /// Strides.
        strides: Vec<isize>,
    },
}

/// Checks rank, overflow of the element count, and that every reachable offset lies in
/// `0..len`. Returns the element count.
fn check_layout(len: usize, shape: &[usize], strides: &[isize], offset: usize) -> Result<usize, ViewError> {
    if shape.len() != strides.len() {
        return Err(ViewError::RankMismatch {
            shape: shape.len(),
            strides: strides.len(),
        });
    }
    let count = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| ViewError::Overflow(shape.to_vec()))?;
    if count > 0 {
        let (min, max) = span(shape, strides, offset);
        if min < 0 || max >= len as i128 {
            return Err(ViewError::OutOfBounds { min, max, len });
        }
    }
    Ok(count)
}

/// Smallest and largest reachable offsets of a non-empty layout (saturating).
fn span(shape: &[usize], strides: &[isize], offset: usize) -> (i128, i128) {
    let mut min = offset as i128;
    let mut max = offset as i128;
    for (&n, &s) in shape.iter().zip(strides) {
        let span = (n as i128 - 1).saturating_mul(s as i128);
        if span < 0 {
            min = min.saturating_add(span);
        } else {
            max = max.saturating_add(span);
        }
    }
    (min, max)
}

/// Row-major strides of `shape` (saturating; callers have checked the element count).
pub(crate) fn row_major_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for k in (0..shape.len()).rev() {
        strides[k] = acc;
        acc = acc.saturating_mul(shape[k] as isize);
    }
    strides
}

/// Row-major strides of `shape`, after checking that its element count fits in `isize`.
///
/// # Errors
/// [`ViewError::Overflow`] if the product of `shape` overflows or exceeds `isize::MAX`.
fn checked_row_major_strides(shape: &[usize]) -> Result<Vec<isize>, ViewError> {
    let count = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| ViewError::Overflow(shape.to_vec()))?;
    if count > isize::MAX as usize {
        return Err(ViewError::Overflow(shape.to_vec()));
    }
    Ok(row_major_strides(shape))
}

/// Read-only strided view: element `(i0, .., i{n-1})` is
/// `data[offset + sum(i_k * strides[k])]`, conjugated if `conj`. Strides may be negative,
/// zero (broadcast) or arbitrary; construction checks every reachable offset is inside
/// `data` (nothing is checked for a view with a zero extent, which has no elements).
#[derive(Clone, Debug)]
pub struct StridedView<'a, T> {
    data: &'a [T],
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
    conj: bool,
}

impl<'a, T: Element> StridedView<'a, T> {
    /// A view over `data` with the given layout.
    ///
    /// # Errors
    /// [`ViewError::RankMismatch`] if `shape.len() != strides.len()`;
    /// [`ViewError::Overflow`] if the product of `shape` overflows;
    /// [`ViewError::OutOfBounds`] if a reachable offset is negative or `>= data.len()`.
    pub fn new(
        data: &'a [T],
        shape: &[usize],
        strides: &[isize],
        offset: usize,
        conj: bool,
    ) -> Result<StridedView<'a, T>, ViewError> {
        check_layout(data.len(), shape, strides, offset)?;
        Ok(StridedView {
            data,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset,
            conj,
        })
    }

    /// A row-major, unconjugated view of a whole tensor.
    ///
    /// # Errors
    /// [`ViewError::DType`] if `T` is not `tensor.dtype()`.
    pub fn of_tensor(tensor: &'a LocalTensor) -> Result<StridedView<'a, T>, ViewError> {
        let data = tensor.typed::<T>().ok_or(ViewError::DType(tensor.dtype()))?;
        let shape = tensor.shape();
        // Cannot overflow: the tensor's byte size fits in isize.
        let strides = row_major_strides(shape);
        Ok(StridedView {
            data,
            shape: shape.to_vec(),
            strides,
            offset: 0,
            conj: false,
        })
    }

    /// Extents.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// Offset of element `(0, .., 0)`.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Whether elements are conjugated on read.
    pub fn is_conj(&self) -> bool {
        self.conj
    }

    /// The same view with the conjugation flag flipped.
    pub fn conj(mut self) -> StridedView<'a, T> {
        self.conj = !self.conj;
        self
    }

    /// The same elements with dimensions reordered: new dimension `k` is old `perm[k]`.
    /// Returns `None` if `perm` is not a permutation of `0..rank`.
    pub fn permuted(&self, perm: &[usize]) -> Option<StridedView<'a, T>> {
        let r = self.shape.len();
        if perm.len() != r || (0..r).any(|k| !perm.contains(&k)) {
            return None;
        }
        Some(StridedView {
            data: self.data,
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
            conj: self.conj,
        })
    }

    /// A row-major, unconjugated view of `data` with the given shape.
    ///
    /// # Errors
    /// [`ViewError::Overflow`] if the shape product overflows, [`ViewError::OutOfBounds`] if
    /// `data` is shorter than the product of `shape`.
    pub fn row_major(data: &'a [T], shape: &[usize]) -> Result<StridedView<'a, T>, ViewError> {
        StridedView::new(data, shape, &checked_row_major_strides(shape)?, 0, false)
    }

    /// Number of elements (product of the shape; 1 for rank 0).
    pub fn len(&self) -> usize {
        // Checked at construction.
        self.shape.iter().product()
    }

    /// True if some extent is zero.
    pub fn is_empty(&self) -> bool {
        self.shape.contains(&0)
    }

    /// The element at multi-index `index` (conjugated if the view is), or `None` if `index`
    /// has the wrong rank or is out of range.
    pub fn get(&self, index: &[usize]) -> Option<T> {
        if index.len() != self.shape.len() || index.iter().zip(&self.shape).any(|(&i, &n)| i >= n) {
            return None;
        }
        let rel: isize = index.iter().zip(&self.strides).map(|(&i, &s)| i as isize * s).sum();
        Some(self.at(rel))
    }

    /// Copies the elements (conjugation applied) into a row-major [`LocalTensor`].
    ///
    /// # Errors
    /// [`crate::TensorError::Overflow`] if the byte size of the copy overflows (possible for
    /// a broadcast view with zero strides).
    pub fn to_tensor(&self) -> Result<LocalTensor, crate::TensorError> {
        crate::tensor::checked_len(&self.shape, T::DTYPE.size_bytes())?;
        let out = crate::permute::gather(self, &(0..self.shape.len()).collect::<Vec<_>>());
        LocalTensor::from_data(&self.shape, T::wrap(out))
    }

    /// True if some element reachable through `self` and some element reachable through
    /// `other` occupy overlapping memory (compared by address range, so a conservative
    /// answer for interleaved layouts). Empty views overlap nothing.
    pub fn overlaps<U: Element>(&self, other: &StridedView<'_, U>) -> bool {
        match (self.byte_range(), other.byte_range()) {
            (Some((a0, a1)), Some((b0, b1))) => a0 < b1 && b0 < a1,
            _ => false,
        }
    }

    /// Half-open byte address range `[start, end)` of the reachable elements, `None` if empty.
    pub(crate) fn byte_range(&self) -> Option<(usize, usize)> {
        if self.is_empty() {
            return None;
        }
        let (min, max) = span(&self.shape, &self.strides, self.offset);
        let base = self.data.as_ptr() as usize;
        let size = std::mem::size_of::<T>();
        Some((base + min as usize * size, base + (max as usize + 1) * size))
    }

    /// The view with dimensions merged: new dimension `k` stands for the old dimensions
    /// `groups[k]` (all of one extent, checked by the caller) and walks their diagonal, its
    /// stride being the sum of theirs. Used for labels repeated within one operand.
    ///
    /// # Errors
    /// [`ViewError`] if the merged layout is invalid (it reaches a subset of this view's
    /// elements, so only for a caller that mixed extents).
    pub(crate) fn diagonal(&self, groups: &[Vec<usize>]) -> Result<StridedView<'a, T>, ViewError> {
        let shape: Vec<usize> = groups.iter().map(|g| g.first().map_or(1, |&d| self.shape[d])).collect();
        let strides: Vec<isize> = groups
            .iter()
            .map(|g| g.iter().fold(0isize, |acc, &d| acc.saturating_add(self.strides[d])))
            .collect();
        StridedView::new(self.data, &shape, &strides, self.offset, self.conj)
    }

    /// The underlying slice.
    pub(crate) fn data(&self) -> &'a [T] {
        self.data
    }

    /// Element at the signed linear offset `rel` from `offset` (conjugated if `conj`).
    /// Callers pass only offsets of in-bounds multi-indices.
    #[inline]
    pub(crate) fn at(&self, rel: isize) -> T {
        let v = self.data[(self.offset as isize + rel) as usize];
        if self.conj {
            v.conj()
        } else {
            v
        }
    }

    /// Element at the signed linear offset `rel` from `offset`, as `C64` (conjugated if
    /// `conj`). Callers pass only offsets of in-bounds multi-indices.
    pub(crate) fn get_c64(&self, rel: isize) -> crate::C64 {
        self.at(rel).to_c64()
    }
}

/// Writable strided view (no conjugation flag): element `(i0, .., i{n-1})` is
/// `data[offset + sum(i_k * strides[k])]`. Strides may be negative; construction rejects
/// layouts in which two indices could reach the same element (a zero stride on an extent > 1,
/// or strides too small to separate the modes: the check sorts modes by `|stride|` and
/// requires each to exceed the span of the smaller ones).
#[derive(Debug)]
pub struct StridedViewMut<'a, T> {
    data: &'a mut [T],
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
}

impl<'a, T: Element> StridedViewMut<'a, T> {
    /// A writable view over `data` with the given layout.
    ///
    /// # Errors
    /// As [`StridedView::new`], plus [`ViewError::SelfOverlap`] for a layout that may alias.
    pub fn new(
        data: &'a mut [T],
        shape: &[usize],
        strides: &[isize],
        offset: usize,
    ) -> Result<StridedViewMut<'a, T>, ViewError> {
        let count = check_layout(data.len(), shape, strides, offset)?;
        if count > 0 {
            let mut modes: Vec<(usize, usize)> = shape
                .iter()
                .zip(strides)
                .filter(|(&n, _)| n > 1)
                .map(|(&n, &s)| (n, s.unsigned_abs()))
                .collect();
            modes.sort_by_key(|&(_, s)| s);
            let mut reach: u128 = 0;
            for (n, s) in modes {
                if (s as u128) <= reach {
                    return Err(ViewError::SelfOverlap {
                        shape: shape.to_vec(),
                        strides: strides.to_vec(),
                    });
                }
                reach += (n as u128 - 1) * s as u128;
            }
        }
        Ok(StridedViewMut {
            data,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset,
        })
    }

    /// A row-major view of all of `data` with the given shape.
    ///
    /// # Errors
    /// [`ViewError::Overflow`], or [`ViewError::OutOfBounds`] if `data` is too short.
    pub fn row_major(data: &'a mut [T], shape: &[usize]) -> Result<StridedViewMut<'a, T>, ViewError> {
        StridedViewMut::new(data, shape, &checked_row_major_strides(shape)?, 0)
    }

    /// Extents.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// A read-only, unconjugated view of the same elements.
    pub fn as_view(&self) -> StridedView<'_, T> {
        StridedView {
            data: self.data,
            shape: self.shape.clone(),
            strides: self.strides.clone(),
            offset: self.offset,
            conj: false,
        }
    }

    /// Writes `src` (row-major over `shape`) into the view's elements.
    /// `src.len()` must equal the element count (callers guarantee it).
    pub(crate) fn write_row_major(&mut self, src: &[T]) {
        let r = self.shape.len();
        if src.is_empty() || self.shape.contains(&0) {
            return;
        }
        if self.strides == row_major_strides(&self.shape) {
            // Contiguous: one memcpy.
            self.data[self.offset..self.offset + src.len()].copy_from_slice(src);
            return;
        }
        if r == 0 {
            self.data[self.offset] = src[0];
            return;
        }
        let (ni, si) = (self.shape[r - 1], self.strides[r - 1]);
        let mut idx = vec![0usize; r - 1];
        let mut off = self.offset as isize;
        for row in src.chunks_exact(ni) {
            let mut o = off;
            for &v in row {
                self.data[o as usize] = v;
                o += si;
            }
            // Advance the outer multi-index and the row offset together.
            let mut k = r - 1;
            while k > 0 {
                k -= 1;
                idx[k] += 1;
                off += self.strides[k];
                if idx[k] < self.shape[k] {
                    break;
                }
                off -= self.strides[k] * self.shape[k] as isize;
                idx[k] = 0;
            }
        }
    }
}

/// A [`StridedView`] of any supported element type: the runtime-typed operand handed to
/// backends.
#[derive(Clone, Debug)]
pub enum AnyView<'a> {
    /// `f32` elements.
    F32(StridedView<'a, f32>),
    /// `f64` elements.
    F64(StridedView<'a, f64>),
    /// Single-precision complex elements.
    C32(StridedView<'a, crate::C32>),
    /// Double-precision complex elements.
    C64(StridedView<'a, crate::C64>),
}

macro_rules! any_view {
    ($v:expr, $x:ident => $body:expr) => {
        match $v {
            AnyView::F32($x) => $body,
            AnyView::F64($x) => $body,
            AnyView::C32($x) => $body,
            AnyView::C64($x) => $body,
        }
    };
}

impl<'a> AnyView<'a> {
    /// A row-major, unconjugated view of a whole tensor.
    pub fn of_tensor(t: &'a LocalTensor) -> AnyView<'a> {
        let strides = row_major_strides(t.shape());
        with_dtype!(t.dtype(), T => {
            let data: &[T] = t.typed::<T>().unwrap_or(&[]);
            T::wrap_view(StridedView { data, shape: t.shape().to_vec(), strides, offset: 0, conj: false })
        })
    }

    /// The element type.
    pub fn dtype(&self) -> crate::DType {
        match self {
            AnyView::F32(_) => crate::DType::F32,
            AnyView::F64(_) => crate::DType::F64,
            AnyView::C32(_) => crate::DType::C32,
            AnyView::C64(_) => crate::DType::C64,
        }
    }

    /// Extents.
    pub fn shape(&self) -> &[usize] {
        any_view!(self, x => x.shape())
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[isize] {
        any_view!(self, x => x.strides())
    }

    /// Whether elements are conjugated on read.
    pub fn is_conj(&self) -> bool {
        any_view!(self, x => x.is_conj())
    }

    /// The same view with its conjugation flag toggled (a no-op on the
    /// values of real element types).
    pub fn conj(self) -> AnyView<'a> {
        match self {
            AnyView::F32(x) => AnyView::F32(x.conj()),
            AnyView::F64(x) => AnyView::F64(x.conj()),
            AnyView::C32(x) => AnyView::C32(x.conj()),
            AnyView::C64(x) => AnyView::C64(x.conj()),
        }
    }

    /// The typed view, or `None` if `T` is not this view's element type.
    pub fn typed<T: Element>(&self) -> Option<&StridedView<'a, T>> {
        T::unwrap_view(self)
    }

    /// [`StridedView::diagonal`] of the typed view.
    pub(crate) fn diagonal(&self, groups: &[Vec<usize>]) -> Result<AnyView<'a>, ViewError> {
        Ok(match self {
            AnyView::F32(x) => AnyView::F32(x.diagonal(groups)?),
            AnyView::F64(x) => AnyView::F64(x.diagonal(groups)?),
            AnyView::C32(x) => AnyView::C32(x.diagonal(groups)?),
            AnyView::C64(x) => AnyView::C64(x.diagonal(groups)?),
        })
    }

    /// A rank-0 view of the scalar 1 of `dtype` (the second operand a one-operand
    /// contraction is lowered with).
    pub(crate) fn unit(dtype: crate::DType) -> AnyView<'static> {
        static F32: [f32; 1] = [1.0];
        static F64: [f64; 1] = [1.0];
        static C32: [crate::C32; 1] = [crate::C32::new(1.0, 0.0)];
        static C64: [crate::C64; 1] = [crate::C64::new(1.0, 0.0)];
        fn scalar<T: Element>(data: &'static [T]) -> StridedView<'static, T> {
            StridedView {
                data,
                shape: Vec::new(),
                strides: Vec::new(),
                offset: 0,
                conj: false,
            }
        }
        match dtype {
            crate::DType::F32 => AnyView::F32(scalar(&F32)),
            crate::DType::F64 => AnyView::F64(scalar(&F64)),
            crate::DType::C32 => AnyView::C32(scalar(&C32)),
            crate::DType::C64 => AnyView::C64(scalar(&C64)),
        }
    }
}

impl<'a, T: Element> From<StridedView<'a, T>> for AnyView<'a> {
    fn from(v: StridedView<'a, T>) -> AnyView<'a> {
        T::wrap_view(v)
    }
}
