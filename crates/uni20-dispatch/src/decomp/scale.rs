//! Scaling of a decomposition's input into a safe range, the step every backend of every
//! family passes through (the front ends call [`to_safe_range`] before dispatch and
//! [`Scaling`]'s methods on the result).
//!
//! A backend factorizing a matrix whose entries are very large or very small can overflow
//! or underflow in its intermediate sums of squares (faer's SVD stops with `NoConvergence`
//! for a dense `f64` matrix of scale about `1e155` and returns wrong values at about
//! `1e-165`). As LAPACK's drivers (`dgesvd`, `dgeqrf` callers, `dsyevd`) do, the input is
//! therefore scaled when its largest entry lies outside the safe range
//! `[smlnum, bignum]`, `smlnum = sqrt(MIN_POSITIVE) / EPSILON`, `bignum = 1 / smlnum` of the
//! dtype's real type (`f64`: about `[6.7e-139, 1.5e138]`; `f32`: about `[9.1e-13, 1.1e12]`).
//! Unlike LAPACK, which scales to the edge of that range, it is scaled to `[0.5, 1)`, and the
//! factor is a power of two `2^exp`, so that scaling and unscaling are exact (except for
//! entries that become subnormal, which are below `2^-(mantissa bits)` of the largest one
//! and so below the factorization's own rounding). The largest entry is measured as the
//! largest absolute value of a real or imaginary part, which is finite for every finite
//! input (a complex modulus may overflow). Zero matrices and matrices already inside the
//! range are passed on unchanged, without a copy.
//!
//! Unscaling multiplies singular values, eigenvalues and the triangular factors (`R`, `L`)
//! by `2^-exp`; the orthonormal factors (`U`, `Vh`, `Q`, eigenvectors) are unchanged. A
//! result that overflows its type after unscaling (possible only for inputs within a factor
//! `sqrt(m n)` of the type's largest value) is [`DecompError::Overflow`].

use std::borrow::Cow;

use super::{DecompError, DecompKind};
use crate::dtype::with_dtype;
use crate::dtype::{DType, C64};
use crate::tensor::{LocalTensor, TensorError};
use crate::typed::{elems_of, tensor, Lane};

/// The power of two `2^exp` an input was multiplied by before it was factorized (`exp == 0`:
/// not scaled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scaling {
    exp: i32,
}

/// A decomposition input in the safe range: the caller's matrix itself, or a scaled copy.
#[derive(Debug)]
pub(crate) struct Scaled<'a> {
    matrix: Cow<'a, LocalTensor>,
    scaling: Scaling,
}

impl Scaled<'_> {
    /// The matrix to hand to the backends.
    pub(crate) fn matrix(&self) -> &LocalTensor {
        &self.matrix
    }

    /// How it was scaled.
    pub(crate) fn scaling(&self) -> Scaling {
        self.scaling
    }
}

/// `[smlnum, bignum]` of `dtype`'s real type (see the module docs).
fn safe_range(dtype: DType) -> (f64, f64) {
    let small = match dtype {
        DType::F32 | DType::C32 => (f32::MIN_POSITIVE as f64).sqrt() / f32::EPSILON as f64,
        DType::F64 | DType::C64 => f64::MIN_POSITIVE.sqrt() / f64::EPSILON,
    };
    (small, 1.0 / small)
}

/// `e` with `x = f 2^e`, `f` in `[0.5, 1)`, for finite `x > 0` (C's `frexp`).
pub(crate) fn exponent(x: f64) -> i32 {
    let biased = ((x.to_bits() >> 52) & 0x7ff) as i32;
    if biased == 0 {
        // Subnormal: 2^54 makes it normal exactly.
        exponent(x * pow2(54)) - 54
    } else {
        biased - 1022
    }
}

/// `2^e` for `e` in `[-1022, 1023]` (normal powers of two).
fn pow2(e: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&e));
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// `x 2^e` (C's `ldexp`): exact unless the result is subnormal (one rounding) or overflows.
pub(crate) fn mul_pow2(mut x: f64, mut e: i32) -> f64 {
    while e > 1023 {
        x *= pow2(1023);
        e -= 1023;
    }
    while e < -1022 {
        x *= pow2(-1022);
        e += 1022;
    }
    x * pow2(e)
}

/// `x 2^e` for an element (each of its parts), computed in double precision and rounded
/// once to `T`.
fn scale_elem<T: Lane>(x: T, e: i32) -> T {
    let z = T::parts(x.widen());
    T::narrow(T::scalar(C64::new(mul_pow2(z.re, e), mul_pow2(z.im, e))))
}

/// The largest absolute value of a real or imaginary part of `data` (0 for empty).
fn max_part<T: Lane>(data: &[T]) -> f64 {
    data.iter().fold(0.0f64, |m, &x| {
        let z = T::parts(x.widen());
        m.max(z.re.abs()).max(z.im.abs())
    })
}

/// `matrix` (finite, as the front ends check) in the safe range: itself when its largest
/// entry is zero or already in range, otherwise a copy times `2^exp` with the largest entry
/// in `[0.5, 1)`.
///
/// # Errors
/// [`TensorError`] if the copy cannot be built.
pub(crate) fn to_safe_range(matrix: &LocalTensor) -> Result<Scaled<'_>, TensorError> {
    let dtype = matrix.dtype();
    let max = with_dtype!(dtype, T => max_part(elems_of::<T>(matrix)));
    let (small, big) = safe_range(dtype);
    if max == 0.0 || !max.is_finite() || (small..=big).contains(&max) {
        return Ok(Scaled {
            matrix: Cow::Borrowed(matrix),
            scaling: Scaling { exp: 0 },
        });
    }
    let exp = -exponent(max);
    let scaled = with_dtype!(dtype, T => {
        let data = elems_of::<T>(matrix).iter().map(|&x| scale_elem(x, exp)).collect();
        tensor(matrix.shape(), data)?
    });
    Ok(Scaled {
        matrix: Cow::Owned(scaled),
        scaling: Scaling { exp },
    })
}

impl Scaling {
    /// The exponent: the input was multiplied by `2^exp`.
    #[cfg(test)]
    pub(crate) fn exp(self) -> i32 {
        self.exp
    }

    /// Multiplies `values` (singular values or eigenvalues of the scaled matrix) by
    /// `2^-exp`.
    ///
    /// # Errors
    /// [`DecompError::Overflow`] naming `what` if a value overflows `f64`.
    pub(crate) fn unscale_values(self, op: DecompKind, what: &str, values: &mut [f64]) -> Result<(), DecompError> {
        if self.exp == 0 {
            return Ok(());
        }
        for v in values.iter_mut() {
            *v = mul_pow2(*v, -self.exp);
        }
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(DecompError::Overflow {
                op,
                what: format!("{what} {i}"),
                dtype: DType::F64,
            });
        }
        Ok(())
    }

    /// `factor` (a triangular factor of the scaled matrix, `R` or `L`) times `2^-exp`.
    ///
    /// # Errors
    /// [`DecompError::Overflow`] naming `what` if an entry overflows the factor's dtype;
    /// [`DecompError::Tensor`].
    pub(crate) fn unscale_factor(
        self,
        op: DecompKind,
        what: &str,
        factor: LocalTensor,
    ) -> Result<LocalTensor, DecompError> {
        if self.exp == 0 {
            return Ok(factor);
        }
        let dtype = factor.dtype();
        let out = with_dtype!(dtype, T => {
            let data: Vec<T> = elems_of::<T>(&factor).iter().map(|&x| scale_elem(x, -self.exp)).collect();
            if let Some(i) = data.iter().position(|x| !x.is_finite()) {
                let cols = factor.shape().get(1).copied().unwrap_or(1).max(1);
                return Err(DecompError::Overflow {
                    op,
                    what: format!("{what}[{}, {}]", i / cols, i % cols),
                    dtype,
                });
            }
            tensor(factor.shape(), data)?
        });
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponent_and_mul_pow2_match_frexp_and_ldexp() {
        for &(x, e) in &[
            (1.0, 1),
            (0.5, 0),
            (0.75, 0),
            (3.0, 2),
            (f64::MAX, 1024),
            (f64::MIN_POSITIVE, -1021),
        ] {
            assert_eq!(exponent(x), e, "{x}");
            let f = mul_pow2(x, -e);
            assert!((0.5..1.0).contains(&f), "{x}: {f}");
            assert_eq!(mul_pow2(f, e), x);
        }
        // The smallest subnormal, 2^-1074.
        let tiny = f64::from_bits(1);
        assert_eq!(exponent(tiny), -1073);
        assert_eq!(mul_pow2(tiny, 1073), 0.5);
        assert_eq!(mul_pow2(0.5, -1073), tiny);
        assert_eq!(mul_pow2(3.0, 0), 3.0);
        assert_eq!(mul_pow2(1.0, 2000), f64::INFINITY);
    }

    #[test]
    fn inputs_outside_the_safe_range_are_scaled_exactly() {
        for dtype in DType::ALL {
            let (small, big) = safe_range(dtype);
            for (max, scaled) in [
                (1.0, false),
                (small, false),
                (big, false),
                (small / 4.0, true),
                (big * 4.0, true),
            ] {
                let v = [C64::new(max, -max / 3.0), C64::new(-max / 7.0, 0.0)];
                let m = with_dtype!(dtype, T => tensor::<T>(&[1, 2], v.iter().map(|&z| T::narrow(T::scalar(z))).collect()).unwrap());
                let s = to_safe_range(&m).unwrap();
                assert_eq!(s.scaling().exp() != 0, scaled, "{dtype} {max:e}");
                let back = s
                    .scaling()
                    .unscale_factor(DecompKind::Qr, "R", s.matrix().clone())
                    .unwrap();
                assert_eq!(back, m, "{dtype} {max:e}");
                if scaled {
                    let top = with_dtype!(dtype, T => max_part(elems_of::<T>(s.matrix())));
                    assert!((0.5..1.0).contains(&top), "{dtype} {max:e}: {top}");
                }
            }
        }
        let z = LocalTensor::zeros(DType::F64, &[2, 2]).unwrap();
        assert_eq!(to_safe_range(&z).unwrap().scaling().exp(), 0);
    }

    #[test]
    fn unscaled_results_that_overflow_are_typed_errors() {
        let s = Scaling { exp: -1000 };
        let mut v = vec![1.0, 2f64.powi(30)];
        assert!(matches!(
            s.unscale_values(DecompKind::Svd, "singular value", &mut v),
            Err(DecompError::Overflow { .. })
        ));
        let r = LocalTensor::from_data(&[1, 2], crate::TensorData::F32(vec![1.0, 1e30])).unwrap();
        let e = Scaling { exp: -100 }
            .unscale_factor(DecompKind::Qr, "R", r)
            .unwrap_err();
        assert!(e.to_string().contains("R[0, 1]"), "{e}");
    }
}
