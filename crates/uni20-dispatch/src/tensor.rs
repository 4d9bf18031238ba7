//! Dense, owned, row-major local tensors with a runtime dtype.

use crate::dtype::with_dtype;
use crate::dtype::{DType, C32, C64};
use crate::scalar::Element;

#[cfg(target_endian = "big")]
compile_error!("uni20-dispatch stores raw little-endian element bytes and supports little-endian targets only");

/// Error constructing, converting or decoding a [`LocalTensor`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TensorError {
    /// The product of the shape (or the byte size) does not fit in `usize`/`isize`.
    #[error("tensor shape {shape:?} overflows the addressable size")]
    Overflow {
        /// The offending shape.
        shape: Vec<usize>,
    },
    /// The number of elements supplied does not match the product of the shape.
    #[error("shape {shape:?} needs {expected} elements, got {got}")]
    LenMismatch {
        /// The requested shape.
        shape: Vec<usize>,
        /// Product of the shape.
        expected: usize,
        /// Elements supplied.
        got: usize,
    },
    /// The number of bytes supplied does not match shape and dtype.
    #[error("shape {shape:?} of {dtype} needs {expected} bytes, got {got}")]
    ByteLenMismatch {
        /// Element type.
        dtype: DType,
        /// The requested shape.
        shape: Vec<usize>,
        /// Bytes required.
        expected: usize,
        /// Bytes supplied.
        got: usize,
    },
    /// A cast would lose information (complex to real, or double to single precision).
    #[error("cast from {from} to {to} would narrow (only widening casts are allowed)")]
    NarrowingCast {
        /// Source dtype.
        from: DType,
        /// Requested dtype.
        to: DType,
    },
    /// `decode`: the buffer does not start with the tensor magic.
    #[error("not an encoded uni20 tensor (bad magic)")]
    BadMagic,
    /// `decode`: the format version is not supported.
    #[error("unsupported tensor encoding version {0}")]
    UnsupportedVersion(u16),
    /// `decode`: unknown dtype code.
    #[error("unknown dtype code {0} in encoded tensor")]
    UnknownDTypeCode(u8),
    /// `decode`: the buffer ends before the header or payload is complete.
    #[error("encoded tensor truncated: need {needed} bytes, have {have}")]
    Truncated {
        /// Bytes needed so far.
        needed: usize,
        /// Bytes available.
        have: usize,
    },
    /// `decode`: bytes remain after the payload.
    #[error("{0} trailing bytes after encoded tensor")]
    TrailingBytes(usize),
}

/// Typed element storage of a [`LocalTensor`].
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    /// `f32` elements.
    F32(Vec<f32>),
    /// `f64` elements.
    F64(Vec<f64>),
    /// Single-precision complex elements.
    C32(Vec<C32>),
    /// Double-precision complex elements.
    C64(Vec<C64>),
}

/// Calls `$body` with `$v` bound to the typed vector inside a [`TensorData`] and `$T` to
/// its element type.
macro_rules! with_data {
    ($data:expr, $v:ident, $T:ident => $body:expr) => {
        match $data {
            $crate::tensor::TensorData::F32($v) => {
                #[allow(dead_code)]
                type $T = f32;
                $body
            }
            $crate::tensor::TensorData::F64($v) => {
                #[allow(dead_code)]
                type $T = f64;
                $body
            }
            $crate::tensor::TensorData::C32($v) => {
                #[allow(dead_code)]
                type $T = $crate::dtype::C32;
                $body
            }
            $crate::tensor::TensorData::C64($v) => {
                #[allow(dead_code)]
                type $T = $crate::dtype::C64;
                $body
            }
        }
    };
}

impl TensorData {
    /// The dtype of the stored elements.
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::F32(_) => DType::F32,
            TensorData::F64(_) => DType::F64,
            TensorData::C32(_) => DType::C32,
            TensorData::C64(_) => DType::C64,
        }
    }

    /// Number of stored elements.
    pub fn len(&self) -> usize {
        with_data!(self, v, T => v.len())
    }

    /// True if no elements are stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Magic bytes at the start of [`LocalTensor::encode`] output.
const MAGIC: [u8; 4] = *b"U20T";
/// Current encoding version.
const VERSION: u16 = 1;
/// Fixed header: magic(4) version(u16) dtype(u8) reserved(u8) rank(u32).
const FIXED_HEADER: usize = 12;

/// Dense owned tensor, row-major (C order): element `(i0, .., i{n-1})` lives at
/// `sum(i_k * stride_k)` with C strides (`stride_{n-1} = 1`, `stride_k = stride_{k+1} *
/// shape_{k+1}`). A rank-0 tensor (shape `[]`) holds exactly one element. Invariant:
/// `data.len() == shape.iter().product()` and the byte size fits in `isize`.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalTensor {
    shape: Vec<usize>,
    data: TensorData,
}

/// Product of `shape`, checking that `product * elem_bytes` fits in `isize`.
pub(crate) fn checked_len(shape: &[usize], elem_bytes: usize) -> Result<usize, TensorError> {
    let overflow = || TensorError::Overflow { shape: shape.to_vec() };
    let n = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(overflow)?;
    let bytes = n.checked_mul(elem_bytes.max(1)).ok_or_else(overflow)?;
    if bytes > isize::MAX as usize {
        return Err(overflow());
    }
    Ok(n)
}

impl LocalTensor {
    /// A tensor of the given dtype and shape filled with zeros.
    ///
    /// # Errors
    /// [`TensorError::Overflow`] if the element count or byte size overflows.
    pub fn zeros(dtype: DType, shape: &[usize]) -> Result<LocalTensor, TensorError> {
        let n = checked_len(shape, dtype.size_bytes())?;
        let data = with_dtype!(dtype, T => T::wrap(vec![T::zero(); n]));
        Ok(LocalTensor {
            shape: shape.to_vec(),
            data,
        })
    }

    /// Wraps row-major `data` with the given shape (no copy).
    ///
    /// # Errors
    /// [`TensorError::Overflow`] if the shape product overflows; [`TensorError::LenMismatch`]
    /// if `data.len() != product(shape)`.
    pub fn from_data(shape: &[usize], data: TensorData) -> Result<LocalTensor, TensorError> {
        let n = checked_len(shape, data.dtype().size_bytes())?;
        if n != data.len() {
            return Err(TensorError::LenMismatch {
                shape: shape.to_vec(),
                expected: n,
                got: data.len(),
            });
        }
        Ok(LocalTensor {
            shape: shape.to_vec(),
            data,
        })
    }

    /// Shorthand for [`LocalTensor::from_data`] with [`TensorData::F64`].
    ///
    /// # Errors
    /// As [`LocalTensor::from_data`].
    pub fn from_f64(shape: &[usize], data: Vec<f64>) -> Result<LocalTensor, TensorError> {
        Self::from_data(shape, TensorData::F64(data))
    }

    /// Shorthand for [`LocalTensor::from_data`] with [`TensorData::C64`].
    ///
    /// # Errors
    /// As [`LocalTensor::from_data`].
    pub fn from_c64(shape: &[usize], data: Vec<C64>) -> Result<LocalTensor, TensorError> {
        Self::from_data(shape, TensorData::C64(data))
    }

    /// The shape (extent of each dimension); empty for a rank-0 tensor.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The rank (number of dimensions).
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// Number of elements (`product(shape)`; 1 for rank 0).
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True if the tensor has no elements (some dimension is 0).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The typed element storage, row-major.
    pub fn data(&self) -> &TensorData {
        &self.data
    }

    /// Consumes the tensor, returning its storage.
    pub fn into_data(self) -> TensorData {
        self.data
    }

    /// Typed slice of the elements, or `None` if `T` is not this tensor's element type.
    pub(crate) fn typed<T: Element>(&self) -> Option<&[T]> {
        T::slice(&self.data)
    }

    /// Converts to dtype `to`. Only widening is allowed: `self.dtype().promote(to) == to`.
    /// Casting to the same dtype clones.
    ///
    /// # Errors
    /// [`TensorError::NarrowingCast`] for complex -> real or double -> single precision.
    pub fn cast(&self, to: DType) -> Result<LocalTensor, TensorError> {
        let from = self.dtype();
        if from.promote(to) != to {
            return Err(TensorError::NarrowingCast { from, to });
        }
        if from == to {
            return Ok(self.clone());
        }
        let data = with_dtype!(to, U => {
            let out: Vec<U> = with_data!(&self.data, v, T => v.iter().map(|&x| U::from_c64(x.to_c64())).collect());
            U::wrap(out)
        });
        Ok(LocalTensor {
            shape: self.shape.clone(),
            data,
        })
    }

    /// The raw element bytes (little-endian; complex as interleaved re, im), zero-copy.
    /// Length is `len() * dtype().size_bytes()`.
    pub fn as_bytes(&self) -> &[u8] {
        with_data!(&self.data, v, T => bytemuck::cast_slice::<T, u8>(v))
    }

    /// Builds a tensor from raw little-endian element bytes with one copy; `bytes` need not
    /// be aligned.
    ///
    /// # Errors
    /// [`TensorError::Overflow`] if the shape overflows; [`TensorError::ByteLenMismatch`] if
    /// `bytes.len() != product(shape) * dtype.size_bytes()`.
    pub fn from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<LocalTensor, TensorError> {
        let n = checked_len(shape, dtype.size_bytes())?;
        let expected = n * dtype.size_bytes();
        if bytes.len() != expected {
            return Err(TensorError::ByteLenMismatch {
                dtype,
                shape: shape.to_vec(),
                expected,
                got: bytes.len(),
            });
        }
        // One copy into a fresh, aligned vector (bytes may be unaligned).
        let data = with_dtype!(dtype, T => T::wrap(bytemuck::pod_collect_to_vec::<u8, T>(bytes)));
        Ok(LocalTensor {
            shape: shape.to_vec(),
            data,
        })
    }

    /// Every element widened to `C64`, row-major (for tests and comparisons).
    pub fn to_c64_vec(&self) -> Vec<C64> {
        with_data!(&self.data, v, T => v.iter().map(|&x| x.to_c64()).collect())
    }

    /// Serializes as a small header followed by the raw element bytes (one copy of the
    /// payload). Layout (all little-endian): magic `b"U20T"`, version `u16` (= 1), dtype code
    /// `u8` (1=f32, 2=f64, 3=c32, 4=c64), reserved `u8` (0), rank `u32`, `rank` x `u64`
    /// extents, then `len() * size_bytes` payload bytes.
    pub fn encode(&self) -> Vec<u8> {
        let payload = self.as_bytes();
        let mut out = self.encode_header_with_capacity(payload.len());
        out.extend_from_slice(payload);
        out
    }

    /// The header of [`LocalTensor::encode`] (magic, version, dtype, rank, extents):
    /// `encode() == encode_header() ++ as_bytes()`.
    pub fn encode_header(&self) -> Vec<u8> {
        self.encode_header_with_capacity(0)
    }

    fn encode_header_with_capacity(&self, extra: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(FIXED_HEADER + 8 * self.shape.len() + extra);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.push(self.dtype().code());
        out.push(0);
        // Rank always fits in u32: each extent >= 1 or the tensor is empty, and the Vec itself
        // is bounded by memory; saturate defensively.
        let rank = u32::try_from(self.shape.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&rank.to_le_bytes());
        for &d in &self.shape {
            out.extend_from_slice(&(d as u64).to_le_bytes());
        }
        out
    }

    /// Inverse of [`LocalTensor::encode`]. Never panics and never allocates more than
    /// `bytes.len()` justifies (the shape vector is allocated only after the header is known
    /// to be present, and the payload only after its exact length is checked).
    ///
    /// # Errors
    /// [`TensorError::BadMagic`], [`TensorError::UnsupportedVersion`],
    /// [`TensorError::UnknownDTypeCode`], [`TensorError::Truncated`],
    /// [`TensorError::TrailingBytes`], [`TensorError::Overflow`] (extents whose product
    /// overflows).
    pub fn decode(bytes: &[u8]) -> Result<LocalTensor, TensorError> {
        let truncated = |needed: usize| TensorError::Truncated {
            needed,
            have: bytes.len(),
        };
        if bytes.len() < 4 {
            return Err(if MAGIC.starts_with(bytes) {
                truncated(FIXED_HEADER)
            } else {
                TensorError::BadMagic
            });
        }
        if bytes[..4] != MAGIC {
            return Err(TensorError::BadMagic);
        }
        if bytes.len() < FIXED_HEADER {
            return Err(truncated(FIXED_HEADER));
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version != VERSION {
            return Err(TensorError::UnsupportedVersion(version));
        }
        let dtype = DType::from_code(bytes[6]).ok_or(TensorError::UnknownDTypeCode(bytes[6]))?;
        let rank = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
        let header = rank
            .checked_mul(8)
            .and_then(|s| s.checked_add(FIXED_HEADER))
            .ok_or_else(|| truncated(usize::MAX))?;
        if bytes.len() < header {
            return Err(truncated(header));
        }
        // The header is present, so this allocation is bounded by `bytes.len()`.
        let extents: Vec<u64> = bytemuck::pod_collect_to_vec(&bytes[FIXED_HEADER..header]);
        let mut shape = Vec::with_capacity(rank);
        for d in extents {
            let d = usize::try_from(d).map_err(|_| TensorError::Overflow { shape: shape.clone() })?;
            shape.push(d);
        }
        let n = checked_len(&shape, dtype.size_bytes())?;
        let payload_len = n * dtype.size_bytes();
        let payload = &bytes[header..];
        if payload.len() < payload_len {
            return Err(truncated(header.saturating_add(payload_len)));
        }
        if payload.len() > payload_len {
            return Err(TensorError::TrailingBytes(payload.len() - payload_len));
        }
        LocalTensor::from_bytes(dtype, &shape, payload)
    }

    /// Largest `|self[i] - other[i]|` over all elements, computed in `C64` (so tensors of
    /// different dtypes can be compared). `Some(0.0)` for empty tensors; `Some(NaN)` if any
    /// difference is NaN. `None` if the shapes differ.
    pub fn max_abs_diff(&self, other: &LocalTensor) -> Option<f64> {
        if self.shape != other.shape {
            return None;
        }
        let a = self.to_c64_vec();
        let b = other.to_c64_vec();
        let mut m = 0.0f64;
        for (x, y) in a.iter().zip(&b) {
            let d = (x - y).norm();
            if d.is_nan() {
                return Some(f64::NAN);
            }
            m = m.max(d);
        }
        Some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_is_header_then_elements() {
        for dtype in [DType::F32, DType::F64, DType::C32, DType::C64] {
            for shape in [&[][..], &[0][..], &[3, 2][..], &[2, 1, 4][..]] {
                let t = sample(dtype, shape);
                let mut joined = t.encode_header();
                joined.extend_from_slice(t.as_bytes());
                assert_eq!(joined, t.encode(), "{dtype:?} {shape:?}");
            }
        }
    }

    fn sample(dtype: DType, shape: &[usize]) -> LocalTensor {
        let n: usize = shape.iter().product();
        let vals: Vec<C64> = (0..n)
            .map(|i| C64::new(i as f64 * 0.5 - 1.0, 0.25 * i as f64))
            .collect();
        let t = LocalTensor::from_c64(shape, vals).unwrap();
        // Build in the target dtype by narrowing manually.
        let data = with_dtype!(dtype, T => T::wrap(t.to_c64_vec().into_iter().map(T::from_c64).collect()));
        LocalTensor::from_data(shape, data).unwrap()
    }

    #[test]
    fn constructors_check_lengths() {
        assert!(matches!(
            LocalTensor::from_f64(&[2, 3], vec![0.0; 5]),
            Err(TensorError::LenMismatch {
                expected: 6,
                got: 5,
                ..
            })
        ));
        let s = LocalTensor::from_f64(&[], vec![3.0]).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s.rank(), 0);
        let e = LocalTensor::zeros(DType::C32, &[3, 0, 2]).unwrap();
        assert!(e.is_empty());
        assert_eq!(e.as_bytes().len(), 0);
        assert!(matches!(
            LocalTensor::zeros(DType::F64, &[usize::MAX, 2]),
            Err(TensorError::Overflow { .. })
        ));
        assert!(matches!(
            LocalTensor::zeros(DType::C64, &[usize::MAX / 8]),
            Err(TensorError::Overflow { .. })
        ));
    }

    #[test]
    fn cast_widening_only() {
        let t = sample(DType::F32, &[2, 2]);
        let w = t.cast(DType::C64).unwrap();
        assert_eq!(w.dtype(), DType::C64);
        assert_eq!(w.to_c64_vec(), t.to_c64_vec());
        assert_eq!(t.cast(DType::F32).unwrap(), t, "identity cast must be a clone");
        let c = sample(DType::C32, &[2]);
        assert_eq!(
            c.cast(DType::F64),
            Err(TensorError::NarrowingCast {
                from: DType::C32,
                to: DType::F64
            })
        );
        assert!(sample(DType::F64, &[1]).cast(DType::F32).is_err());
        assert!(sample(DType::F64, &[1]).cast(DType::C32).is_err());
        assert!(sample(DType::C64, &[1]).cast(DType::C32).is_err());
    }

    #[test]
    fn bytes_round_trip() {
        for d in DType::ALL {
            let t = sample(d, &[3, 2]);
            assert_eq!(t.as_bytes().len(), 6 * d.size_bytes());
            let back = LocalTensor::from_bytes(d, &[3, 2], t.as_bytes()).unwrap();
            assert_eq!(back, t);
            // Unaligned input must work.
            let mut shifted = vec![0u8];
            shifted.extend_from_slice(t.as_bytes());
            assert_eq!(LocalTensor::from_bytes(d, &[3, 2], &shifted[1..]).unwrap(), t);
            assert!(matches!(
                LocalTensor::from_bytes(d, &[3, 2], &shifted),
                Err(TensorError::ByteLenMismatch { .. })
            ));
        }
        let t = LocalTensor::from_f64(&[2], vec![1.0, -2.5]).unwrap();
        assert_eq!(&t.as_bytes()[8..], &(-2.5f64).to_le_bytes());
    }

    #[test]
    fn encode_decode_round_trip() {
        for d in DType::ALL {
            for shape in [&[][..], &[0][..], &[4][..], &[2, 3, 1][..], &[1, 0, 5][..]] {
                let t = sample(d, shape);
                let enc = t.encode();
                assert_eq!(enc.len(), 12 + 8 * shape.len() + t.as_bytes().len());
                assert_eq!(LocalTensor::decode(&enc).unwrap(), t);
            }
        }
    }

    #[test]
    fn decode_rejects() {
        let t = sample(DType::C64, &[2, 3]);
        let enc = t.encode();
        // Every strict prefix is rejected as truncated (or bad magic for very short ones).
        for k in 0..enc.len() {
            let r = LocalTensor::decode(&enc[..k]);
            assert!(matches!(r, Err(TensorError::Truncated { .. })), "prefix {k}: {r:?}");
        }
        let mut trailing = enc.clone();
        trailing.push(0);
        assert_eq!(LocalTensor::decode(&trailing), Err(TensorError::TrailingBytes(1)));
        let mut bad = enc.clone();
        bad[0] = b'X';
        assert_eq!(LocalTensor::decode(&bad), Err(TensorError::BadMagic));
        assert_eq!(LocalTensor::decode(b"ab"), Err(TensorError::BadMagic));
        let mut ver = enc.clone();
        ver[4] = 9;
        assert_eq!(LocalTensor::decode(&ver), Err(TensorError::UnsupportedVersion(9)));
        let mut dt = enc.clone();
        dt[6] = 77;
        assert_eq!(LocalTensor::decode(&dt), Err(TensorError::UnknownDTypeCode(77)));
        // Huge rank with tiny buffer: must fail without allocating.
        let mut huge = enc[..12].to_vec();
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(LocalTensor::decode(&huge), Err(TensorError::Truncated { .. })));
        // Huge extents: overflow or truncated, never allocation.
        let mut big = enc[..12].to_vec();
        big[8..12].copy_from_slice(&2u32.to_le_bytes());
        big.extend_from_slice(&(u64::MAX).to_le_bytes());
        big.extend_from_slice(&(u64::MAX).to_le_bytes());
        assert!(LocalTensor::decode(&big).is_err());
        let mut big1 = enc[..12].to_vec();
        big1[8..12].copy_from_slice(&1u32.to_le_bytes());
        big1.extend_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(matches!(LocalTensor::decode(&big1), Err(TensorError::Truncated { .. })));
    }

    #[test]
    fn max_abs_diff_behaviour() {
        let a = LocalTensor::from_f64(&[2], vec![1.0, 2.0]).unwrap();
        let b = LocalTensor::from_c64(&[2], vec![C64::new(1.0, 0.0), C64::new(2.0, 0.5)]).unwrap();
        assert_eq!(a.max_abs_diff(&b), Some(0.5));
        let c = LocalTensor::from_f64(&[1, 2], vec![1.0, 2.0]).unwrap();
        assert_eq!(a.max_abs_diff(&c), None);
        let n = LocalTensor::from_f64(&[2], vec![1.0, f64::NAN]).unwrap();
        assert!(a.max_abs_diff(&n).unwrap().is_nan());
    }
}
