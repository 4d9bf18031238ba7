//! Internal element trait tying a Rust type to its [`DType`] and [`TensorData`] variant.

use crate::dtype::{DType, C32, C64};
use crate::tensor::TensorData;
use crate::view::{AnyView, StridedView};

/// An element type usable in a [`crate::LocalTensor`]. Sealed: implemented for
/// `f32`, `f64`, [`C32`], [`C64`] only.
pub trait Element:
    Copy
    + Send
    + Sync
    + PartialEq
    + std::fmt::Debug
    + bytemuck::Pod
    + std::ops::Add<Output = Self>
    + std::ops::AddAssign
    + std::ops::Mul<Output = Self>
    + sealed::Sealed
    + 'static
{
    /// The runtime dtype of this element type.
    const DTYPE: DType;
    /// Additive identity.
    fn zero() -> Self;
    /// Widen to `C64` (exact for every supported type).
    fn to_c64(self) -> C64;
    /// Narrow from `C64`: takes the real part for real types and rounds to `f32` for
    /// single precision.
    fn from_c64(v: C64) -> Self;
    /// Borrow the matching variant of `data`, or `None` if the variant differs.
    fn slice(data: &TensorData) -> Option<&[Self]>;
    /// Wrap a vector in the matching [`TensorData`] variant.
    fn wrap(v: Vec<Self>) -> TensorData;
    /// Complex conjugate (identity for real types).
    fn conj(self) -> Self;
    /// Wrap a typed view in the matching [`AnyView`] variant.
    fn wrap_view(v: StridedView<'_, Self>) -> AnyView<'_>;
    /// Borrow the matching variant of `v`, or `None` if the variant differs.
    fn unwrap_view<'v, 'a>(v: &'v AnyView<'a>) -> Option<&'v StridedView<'a, Self>>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for super::C32 {}
    impl Sealed for super::C64 {}
}

/// The [`Element`] impl of each element type `$T` with [`DType`], [`TensorData`] and
/// [`AnyView`] variant `$V`; the four per-type operations are given as expressions of a
/// bound name (`zero`, widening, narrowing, conjugation).
macro_rules! element_impls {
    ($($T:ty => $V:ident {
        zero: $zero:expr,
        to_c64: |$s:ident| $to:expr,
        from_c64: |$v:ident| $from:expr,
        conj: |$c:ident| $conj:expr $(,)?
    }),* $(,)?) => {$(
        impl Element for $T {
            const DTYPE: DType = DType::$V;
            fn zero() -> Self {
                $zero
            }
            fn to_c64(self) -> C64 {
                let $s = self;
                $to
            }
            fn from_c64($v: C64) -> Self {
                $from
            }
            fn slice(data: &TensorData) -> Option<&[Self]> {
                match data {
                    TensorData::$V(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(v: Vec<Self>) -> TensorData {
                TensorData::$V(v)
            }
            fn conj(self) -> Self {
                let $c = self;
                $conj
            }
            fn wrap_view(v: StridedView<'_, Self>) -> AnyView<'_> {
                AnyView::$V(v)
            }
            fn unwrap_view<'v, 'a>(v: &'v AnyView<'a>) -> Option<&'v StridedView<'a, Self>> {
                match v {
                    AnyView::$V(x) => Some(x),
                    _ => None,
                }
            }
        }
    )*};
}

element_impls! {
    f32 => F32 {
        zero: 0.0,
        to_c64: |x| C64::new(x as f64, 0.0),
        from_c64: |v| v.re as f32,
        conj: |x| x,
    },
    f64 => F64 {
        zero: 0.0,
        to_c64: |x| C64::new(x, 0.0),
        from_c64: |v| v.re,
        conj: |x| x,
    },
    C32 => C32 {
        zero: C32::new(0.0, 0.0),
        to_c64: |x| C64::new(x.re as f64, x.im as f64),
        from_c64: |v| C32::new(v.re as f32, v.im as f32),
        conj: |x| num_complex::Complex::conj(&x),
    },
    C64 => C64 {
        zero: C64::new(0.0, 0.0),
        to_c64: |x| x,
        from_c64: |v| v,
        conj: |x| num_complex::Complex::conj(&x),
    },
}
