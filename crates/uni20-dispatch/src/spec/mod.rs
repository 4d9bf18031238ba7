//! Einsum specs, parsed once: [`EinsumSpec`] (what the user wrote, numpy grammar: one or two
//! operands, repeated labels, ellipsis, implicit output), [`ResolvedSpec`] (the concrete form
//! with ordinary labels only that kernels consume and descriptors carry, produced by
//! [`EinsumSpec::resolve`] for given shapes), their error type [`SpecError`], and the
//! [`ResolveSpec`] trait through which every entry point accepts either form or a `&str`.

use std::borrow::Cow;

mod error;
mod parse;
mod resolve;
mod resolved;
#[cfg(test)]
mod tests;

pub use error::SpecError;
pub use parse::EinsumSpec;
pub use resolved::ResolvedSpec;

/// The string conversions of each spec type `$T` (which has `parse(&str)` and a canonical
/// `Display`): `FromStr`, `TryFrom<&str>`, `TryFrom<String>` (serde's validating
/// deserialization) and `From<$T> for String` (serde's serialization).
macro_rules! string_forms {
    ($($T:ident),*) => {$(
        impl std::str::FromStr for $T {
            type Err = SpecError;

            #[doc = concat!("Same as [`", stringify!($T), "::parse`].")]
            fn from_str(s: &str) -> Result<$T, SpecError> {
                $T::parse(s)
            }
        }

        impl TryFrom<&str> for $T {
            type Error = SpecError;

            #[doc = concat!("Same as [`", stringify!($T), "::parse`].")]
            fn try_from(s: &str) -> Result<$T, SpecError> {
                $T::parse(s)
            }
        }

        impl TryFrom<String> for $T {
            type Error = SpecError;

            #[doc = concat!("Same as [`", stringify!($T), "::parse`] (also serde's validating deserialization).")]
            fn try_from(s: String) -> Result<$T, SpecError> {
                $T::parse(&s)
            }
        }

        impl From<$T> for String {
            /// The canonical form (serde's serialization).
            fn from(s: $T) -> String {
                s.to_string()
            }
        }
    )*};
}

string_forms!(EinsumSpec, ResolvedSpec);

/// Anything a contraction entry point accepts as its spec: an [`EinsumSpec`], a
/// [`ResolvedSpec`], a `&str` or `String` (parsed as an [`EinsumSpec`]), or a reference to any
/// of these.
///
/// Semantics differ by kind, on purpose: an [`EinsumSpec`] (and a string) is resolved against
/// the operand shapes with numpy's rules ([`EinsumSpec::resolve`]: ellipsis, broadcasting of
/// extent-1 dimensions, implicit output); a [`ResolvedSpec`] is taken literally, and its label
/// extents must match the shapes exactly ([`ResolvedSpec::label_extents`]).
pub trait ResolveSpec {
    /// The concrete spec for operands of the given shapes. A [`ResolvedSpec`] returns itself
    /// without looking at `shapes` (callers check them with
    /// [`ResolvedSpec::label_extents`]).
    ///
    /// # Errors
    /// Parse errors (strings) and [`EinsumSpec::resolve`] errors.
    fn resolve_spec(&self, shapes: &[&[usize]]) -> Result<Cow<'_, ResolvedSpec>, SpecError>;
}

impl ResolveSpec for EinsumSpec {
    fn resolve_spec(&self, shapes: &[&[usize]]) -> Result<Cow<'_, ResolvedSpec>, SpecError> {
        self.resolve(shapes).map(Cow::Owned)
    }
}

impl ResolveSpec for ResolvedSpec {
    fn resolve_spec(&self, _shapes: &[&[usize]]) -> Result<Cow<'_, ResolvedSpec>, SpecError> {
        Ok(Cow::Borrowed(self))
    }
}

impl ResolveSpec for str {
    fn resolve_spec(&self, shapes: &[&[usize]]) -> Result<Cow<'_, ResolvedSpec>, SpecError> {
        EinsumSpec::parse(self)?.resolve(shapes).map(Cow::Owned)
    }
}

impl ResolveSpec for String {
    fn resolve_spec(&self, shapes: &[&[usize]]) -> Result<Cow<'_, ResolvedSpec>, SpecError> {
        self.as_str().resolve_spec(shapes)
    }
}

impl<T: ResolveSpec + ?Sized> ResolveSpec for &T {
    fn resolve_spec(&self, shapes: &[&[usize]]) -> Result<Cow<'_, ResolvedSpec>, SpecError> {
        (**self).resolve_spec(shapes)
    }
}
