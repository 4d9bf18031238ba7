//! Runtime element types.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Single-precision complex number (`num_complex::Complex<f32>`, same type as `faer::c32`).
pub type C32 = num_complex::Complex<f32>;
/// Double-precision complex number (`num_complex::Complex<f64>`, same type as `faer::c64`).
pub type C64 = num_complex::Complex<f64>;

/// Error from parsing or converting a dtype description.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DTypeError {
    /// The description names a type (or byte order) that uni20 does not support.
    #[error("unsupported dtype `{0}` (supported: <f4, <f8, <c8, <c16: little-endian float32, float64, complex64, complex128)")]
    Unsupported(String),
}

/// Runtime element type of a [`crate::LocalTensor`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 64-bit IEEE float.
    F64,
    /// Complex with two 32-bit floats (re, im), 8 bytes.
    C32,
    /// Complex with two 64-bit floats (re, im), 16 bytes.
    C64,
}

impl DType {
    /// All four dtypes, narrowest first.
    pub const ALL: [DType; 4] = [DType::F32, DType::F64, DType::C32, DType::C64];

    /// Size of one element in bytes: 4, 8, 8, 16.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 | DType::C32 => 8,
            DType::C64 => 16,
        }
    }

    /// True for `C32` and `C64`.
    pub fn is_complex(self) -> bool {
        matches!(self, DType::C32 | DType::C64)
    }

    /// True for the 64-bit-component types `F64` and `C64`.
    fn is_double(self) -> bool {
        matches!(self, DType::F64 | DType::C64)
    }

    /// The smallest dtype both `self` and `other` convert to without loss, following numpy:
    /// f32+f64 -> f64, f32+c32 -> c32, f64+c32 -> c64, anything+c64 -> c64. Symmetric and
    /// idempotent; never fails.
    pub fn promote(self, other: DType) -> DType {
        let complex = self.is_complex() || other.is_complex();
        let double = self.is_double() || other.is_double();
        match (complex, double) {
            (false, false) => DType::F32,
            (false, true) => DType::F64,
            (true, false) => DType::C32,
            (true, true) => DType::C64,
        }
    }

    /// The numpy `.npy` descriptor (little-endian): `"<f4"`, `"<f8"`, `"<c8"`, `"<c16"`.
    pub fn npy_descr(self) -> &'static str {
        match self {
            DType::F32 => "<f4",
            DType::F64 => "<f8",
            DType::C32 => "<c8",
            DType::C64 => "<c16",
        }
    }

    /// Parses a numpy descriptor. Accepts the little-endian (`<`) and native (`=`, which is
    /// little-endian on every supported target) forms of `f4`, `f8`, `c8`, `c16`.
    ///
    /// # Errors
    /// [`DTypeError::Unsupported`] for anything else, e.g. `">f8"`, `"<i4"`, `"|b1"`, `"<f2"`.
    pub fn from_npy_descr(s: &str) -> Result<DType, DTypeError> {
        let unsupported = || DTypeError::Unsupported(s.to_string());
        let rest = s
            .strip_prefix('<')
            .or_else(|| s.strip_prefix('='))
            .ok_or_else(unsupported)?;
        match rest {
            "f4" => Ok(DType::F32),
            "f8" => Ok(DType::F64),
            "c8" => Ok(DType::C32),
            "c16" => Ok(DType::C64),
            _ => Err(unsupported()),
        }
    }

    /// Short name: `"f32"`, `"f64"`, `"c32"`, `"c64"`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::C32 => "c32",
            DType::C64 => "c64",
        }
    }

    /// Stable one-byte code used by [`crate::LocalTensor::encode`].
    pub(crate) fn code(self) -> u8 {
        match self {
            DType::F32 => 1,
            DType::F64 => 2,
            DType::C32 => 3,
            DType::C64 => 4,
        }
    }

    /// Inverse of [`DType::code`]; `None` for unknown codes.
    pub(crate) fn from_code(c: u8) -> Option<DType> {
        match c {
            1 => Some(DType::F32),
            2 => Some(DType::F64),
            3 => Some(DType::C32),
            4 => Some(DType::C64),
            _ => None,
        }
    }
}

impl fmt::Display for DType {
    /// Writes [`DType::name`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = DTypeError;

    /// Accepts `f32`, `f64`, `c32`, `c64`, `float32`, `float64`, `complex64`, `complex128`
    /// (case-sensitive). Anything else is [`DTypeError::Unsupported`].
    fn from_str(s: &str) -> Result<DType, DTypeError> {
        match s {
            "f32" | "float32" => Ok(DType::F32),
            "f64" | "float64" => Ok(DType::F64),
            "c32" | "complex64" => Ok(DType::C32),
            "c64" | "complex128" => Ok(DType::C64),
            _ => Err(DTypeError::Unsupported(s.to_string())),
        }
    }
}

/// Calls `$body` with `$T` bound to the element type of a [`DType`]: the crate's one
/// runtime-dtype dispatch macro (kernels, creation, reductions, decompositions).
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::dtype::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::dtype::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::dtype::DType::C32 => {
                type $T = $crate::dtype::C32;
                $body
            }
            $crate::dtype::DType::C64 => {
                type $T = $crate::dtype::C64;
                $body
            }
        }
    };
}
pub(crate) use with_dtype;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_table() {
        use DType::*;
        let cases = [
            (F32, F32, F32),
            (F32, F64, F64),
            (F32, C32, C32),
            (F32, C64, C64),
            (F64, F64, F64),
            (F64, C32, C64),
            (F64, C64, C64),
            (C32, C32, C32),
            (C32, C64, C64),
            (C64, C64, C64),
        ];
        for (a, b, r) in cases {
            assert_eq!(a.promote(b), r, "{a}+{b}");
            assert_eq!(b.promote(a), r, "{b}+{a}");
        }
    }

    #[test]
    fn npy_descr_round_trip_and_rejects() {
        for d in DType::ALL {
            assert_eq!(DType::from_npy_descr(d.npy_descr()), Ok(d));
            assert_eq!(d.name().parse::<DType>(), Ok(d));
        }
        assert_eq!(DType::from_npy_descr("=f8"), Ok(DType::F64));
        for bad in [">f8", "<i4", "|b1", "<f2", "f8", "", "<c32", "|f4", "<f8 "] {
            assert_eq!(
                DType::from_npy_descr(bad),
                Err(DTypeError::Unsupported(bad.to_string())),
                "{bad:?}"
            );
        }
        assert_eq!("complex128".parse::<DType>(), Ok(DType::C64));
        assert_eq!("complex64".parse::<DType>(), Ok(DType::C32));
        assert_eq!("float32".parse::<DType>(), Ok(DType::F32));
        assert!("int32".parse::<DType>().is_err());
        assert_eq!(DType::C64.size_bytes(), 16);
        assert!(DType::C32.is_complex() && !DType::F64.is_complex());
    }
}
