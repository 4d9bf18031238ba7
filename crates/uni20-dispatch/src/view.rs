//! Strided, possibly conjugated, read-only views over element slices.

use crate::scalar::Element;
use crate::tensor::LocalTensor;

/// Error constructing a [`StridedView`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
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
    /// [`ViewError::OutOfBounds`] if a reachable offset is negative or `>= data.len()`.
    pub fn new(
        data: &'a [T],
        shape: &[usize],
        strides: &[isize],
        offset: usize,
        conj: bool,
    ) -> Result<StridedView<'a, T>, ViewError> {
        if shape.len() != strides.len() {
            return Err(ViewError::RankMismatch {
                shape: shape.len(),
                strides: strides.len(),
            });
        }
        if !shape.contains(&0) {
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
            if min < 0 || max >= data.len() as i128 {
                return Err(ViewError::OutOfBounds {
                    min,
                    max,
                    len: data.len(),
                });
            }
        }
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
        let mut strides = vec![0isize; shape.len()];
        let mut acc = 1isize;
        for k in (0..shape.len()).rev() {
            strides[k] = acc;
            // Cannot overflow: the tensor's byte size fits in isize.
            acc = acc.saturating_mul(shape[k] as isize);
        }
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

    /// Element at the signed linear offset `rel` from `offset`, as `C64` (conjugated if
    /// `conj`). Callers pass only offsets of in-bounds multi-indices.
    pub(crate) fn get_c64(&self, rel: isize) -> crate::C64 {
        let v = self.data[(self.offset as isize + rel) as usize].to_c64();
        if self.conj {
            v.conj()
        } else {
            v
        }
    }
}
