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

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    fn zero() -> Self {
        0.0
    }
    fn to_c64(self) -> C64 {
        C64::new(self as f64, 0.0)
    }
    fn from_c64(v: C64) -> Self {
        v.re as f32
    }
    fn slice(data: &TensorData) -> Option<&[Self]> {
        match data {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(v: Vec<Self>) -> TensorData {
        TensorData::F32(v)
    }
    fn conj(self) -> Self {
        self
    }
    fn wrap_view(v: StridedView<'_, Self>) -> AnyView<'_> {
        AnyView::F32(v)
    }
    fn unwrap_view<'v, 'a>(v: &'v AnyView<'a>) -> Option<&'v StridedView<'a, Self>> {
        match v {
            AnyView::F32(x) => Some(x),
            _ => None,
        }
    }
}

impl Element for f64 {
    const DTYPE: DType = DType::F64;
    fn zero() -> Self {
        0.0
    }
    fn to_c64(self) -> C64 {
        C64::new(self, 0.0)
    }
    fn from_c64(v: C64) -> Self {
        v.re
    }
    fn slice(data: &TensorData) -> Option<&[Self]> {
        match data {
            TensorData::F64(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(v: Vec<Self>) -> TensorData {
        TensorData::F64(v)
    }
    fn conj(self) -> Self {
        self
    }
    fn wrap_view(v: StridedView<'_, Self>) -> AnyView<'_> {
        AnyView::F64(v)
    }
    fn unwrap_view<'v, 'a>(v: &'v AnyView<'a>) -> Option<&'v StridedView<'a, Self>> {
        match v {
            AnyView::F64(x) => Some(x),
            _ => None,
        }
    }
}

impl Element for C32 {
    const DTYPE: DType = DType::C32;
    fn zero() -> Self {
        C32::new(0.0, 0.0)
    }
    fn to_c64(self) -> C64 {
        C64::new(self.re as f64, self.im as f64)
    }
    fn from_c64(v: C64) -> Self {
        C32::new(v.re as f32, v.im as f32)
    }
    fn slice(data: &TensorData) -> Option<&[Self]> {
        match data {
            TensorData::C32(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(v: Vec<Self>) -> TensorData {
        TensorData::C32(v)
    }
    fn conj(self) -> Self {
        num_complex::Complex::conj(&self)
    }
    fn wrap_view(v: StridedView<'_, Self>) -> AnyView<'_> {
        AnyView::C32(v)
    }
    fn unwrap_view<'v, 'a>(v: &'v AnyView<'a>) -> Option<&'v StridedView<'a, Self>> {
        match v {
            AnyView::C32(x) => Some(x),
            _ => None,
        }
    }
}

impl Element for C64 {
    const DTYPE: DType = DType::C64;
    fn zero() -> Self {
        C64::new(0.0, 0.0)
    }
    fn to_c64(self) -> C64 {
        self
    }
    fn from_c64(v: C64) -> Self {
        v
    }
    fn slice(data: &TensorData) -> Option<&[Self]> {
        match data {
            TensorData::C64(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(v: Vec<Self>) -> TensorData {
        TensorData::C64(v)
    }
    fn conj(self) -> Self {
        num_complex::Complex::conj(&self)
    }
    fn wrap_view(v: StridedView<'_, Self>) -> AnyView<'_> {
        AnyView::C64(v)
    }
    fn unwrap_view<'v, 'a>(v: &'v AnyView<'a>) -> Option<&'v StridedView<'a, Self>> {
        match v {
            AnyView::C64(x) => Some(x),
            _ => None,
        }
    }
}
