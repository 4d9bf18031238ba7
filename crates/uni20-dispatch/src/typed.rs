//! Private helpers shared by the decomposition, element-wise, reduction and creation
//! kernels: runtime-dtype dispatch to a typed body, typed access to a [`LocalTensor`]'s
//! elements through its public API, the "wide" (double-precision) arithmetic type of each
//! element type, and Neumaier-compensated summation.
//!
//! These deliberately use only public items of the crate (`LocalTensor::data`,
//! `LocalTensor::from_data`, the [`Element`] trait) so that they do not depend on the
//! private internals of `tensor.rs`.

use std::ops::{Add, Mul, Sub};

use crate::dtype::{C32, C64};
use crate::scalar::Element;
use crate::tensor::{LocalTensor, TensorError};

/// The elements of `t` as a `T` slice, or `None` if `T` is not `t`'s element type.
pub(crate) fn elems<T: Element>(t: &LocalTensor) -> Option<&[T]> {
    T::slice(t.data())
}

/// The elements of `t`, which the caller has checked to be of type `T`.
///
/// Returns an empty slice if the dtype does not match (callers dispatch on `t.dtype()`
/// first, so this does not happen; an empty slice then fails the caller's length checks
/// rather than panicking).
pub(crate) fn elems_of<T: Element>(t: &LocalTensor) -> &[T] {
    elems::<T>(t).unwrap_or(&[])
}

/// A row-major tensor of `shape` holding `data`.
pub(crate) fn tensor<T: Element>(shape: &[usize], data: Vec<T>) -> Result<LocalTensor, TensorError> {
    LocalTensor::from_data(shape, T::wrap(data))
}

/// An element type together with the double-precision type its arithmetic is done in
/// (`f32`, `f64` -> `f64`; `C32`, `C64` -> `C64`). Widening is exact; narrowing rounds once.
pub(crate) trait Lane: Element {
    /// The double-precision arithmetic type.
    type W: Copy
        + Send
        + Sync
        + Add<Output = Self::W>
        + Sub<Output = Self::W>
        + Mul<Output = Self::W>
        + PartialEq
        + std::fmt::Debug;
    /// Exact widening.
    fn widen(self) -> Self::W;
    /// Rounding to `Self` (round to nearest for single precision).
    fn narrow(w: Self::W) -> Self;
    /// A scalar in the wide type: the real part for real types (the caller has checked that
    /// the imaginary part is zero).
    fn scalar(z: C64) -> Self::W;
    /// Complex conjugate in the wide type (identity for real types).
    fn conj_w(w: Self::W) -> Self::W;
    /// Additive identity of the wide type.
    fn zero_w() -> Self::W;
    /// A wide value as `C64` (imaginary part zero for real types).
    fn parts(w: Self::W) -> C64;
    /// `|x|^2` in `f64`.
    fn abs2(self) -> f64;
    /// `|x|` in `f64` (`hypot` for complex).
    fn abs(self) -> f64;
    /// True if every component is finite.
    fn is_finite(self) -> bool;
}

macro_rules! real_lane {
    ($t:ty) => {
        impl Lane for $t {
            type W = f64;
            fn widen(self) -> f64 {
                self as f64
            }
            fn narrow(w: f64) -> Self {
                w as $t
            }
            fn scalar(z: C64) -> f64 {
                z.re
            }
            fn conj_w(w: f64) -> f64 {
                w
            }
            fn zero_w() -> f64 {
                0.0
            }
            fn parts(w: f64) -> C64 {
                C64::new(w, 0.0)
            }
            fn abs2(self) -> f64 {
                let x = self as f64;
                x * x
            }
            fn abs(self) -> f64 {
                (self as f64).abs()
            }
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
        }
    };
}
real_lane!(f32);
real_lane!(f64);

macro_rules! complex_lane {
    ($t:ty) => {
        impl Lane for $t {
            type W = C64;
            fn widen(self) -> C64 {
                self.to_c64()
            }
            fn narrow(w: C64) -> Self {
                <$t as Element>::from_c64(w)
            }
            fn scalar(z: C64) -> C64 {
                z
            }
            fn conj_w(w: C64) -> C64 {
                w.conj()
            }
            fn zero_w() -> C64 {
                C64::new(0.0, 0.0)
            }
            fn parts(w: C64) -> C64 {
                w
            }
            fn abs2(self) -> f64 {
                let z = self.to_c64();
                z.re * z.re + z.im * z.im
            }
            fn abs(self) -> f64 {
                self.to_c64().norm()
            }
            fn is_finite(self) -> bool {
                self.re.is_finite() && self.im.is_finite()
            }
        }
    };
}
complex_lane!(C32);
complex_lane!(C64);

/// Neumaier's compensated sum (Kahan-Babuska): the error of the result does not grow with
/// the number of terms (it is about one rounding of the exact sum plus `eps^2 * n * sum |x|`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Neumaier {
    sum: f64,
    comp: f64,
}

impl Neumaier {
    /// Adds one term.
    pub(crate) fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.comp += (self.sum - t) + x;
        } else {
            self.comp += (x - t) + self.sum;
        }
        self.sum = t;
    }

    /// The compensated total.
    pub(crate) fn total(&self) -> f64 {
        self.sum + self.comp
    }
}

/// The row-major `cols x rows` adjoint (conjugate transpose) of the row-major `rows x cols`
/// matrix `data`.
pub(crate) fn adjoint<T: Element>(data: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(rows * cols);
    for j in 0..cols {
        out.extend((0..rows).map(|i| data[i * cols + j].conj()));
    }
    out
}

/// `(row, col)` of row-major flat index `i` in a matrix with `cols` columns (`cols > 0`).
pub(crate) fn row_col(i: usize, cols: usize) -> (usize, usize) {
    (i / cols, i % cols)
}

/// The first element of `data` with a NaN or infinite component: its flat index and its
/// value widened to `C64`; `None` if every element is finite.
pub(crate) fn first_non_finite<T: Lane>(data: &[T]) -> Option<(usize, C64)> {
    data.iter().position(|&x| !x.is_finite()).map(|i| (i, data[i].to_c64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neumaier_recovers_cancelled_terms() {
        // Naive summation loses the 1.0 entirely; the compensated sum keeps it.
        let v = [1e100, 1.0, -1e100];
        assert_eq!(v.iter().sum::<f64>(), 0.0);
        let mut acc = Neumaier::default();
        v.iter().for_each(|&x| acc.add(x));
        assert_eq!(acc.total(), 1.0);
        assert_eq!(Neumaier::default().total(), 0.0);
    }

    #[test]
    fn lanes_widen_exactly_and_narrow_once() {
        assert_eq!(1.5f32.widen(), 1.5f64);
        assert_eq!(<f32 as Lane>::narrow(0.1f64), 0.1f32);
        assert_eq!(C32::new(1.0, -2.0).widen(), C64::new(1.0, -2.0));
        assert_eq!(<C64 as Lane>::conj_w(C64::new(1.0, 2.0)), C64::new(1.0, -2.0));
        assert_eq!(C64::new(3.0, 4.0).abs(), 5.0);
        assert_eq!(C64::new(3.0, 4.0).abs2(), 25.0);
        assert!(!C32::new(0.0, f32::NAN).is_finite());
        assert_eq!(
            first_non_finite(&[1.0f64, f64::INFINITY, f64::NAN]),
            Some((1, C64::new(f64::INFINITY, 0.0)))
        );
        assert_eq!(row_col(7, 3), (2, 1));
        let m = [
            C64::new(1.0, 1.0),
            C64::new(2.0, 0.0),
            C64::new(3.0, -1.0),
            C64::new(4.0, 0.5),
            C64::new(5.0, 0.0),
            C64::new(6.0, 2.0),
        ];
        let a = adjoint(&m, 2, 3);
        assert_eq!(
            a,
            vec![
                m[0].conj(),
                m[3].conj(),
                m[1].conj(),
                m[4].conj(),
                m[2].conj(),
                m[5].conj()
            ]
        );
    }
}
