//! The [`Persist`] trait and implementations for common payload types.

use crate::{ObjectId, PersistError};

/// Types that can be stored as persistent objects.
///
/// A value is encoded into a self-describing byte payload: raw bytes plus whatever
/// small header the type needs (a dense tensor should be its shape/layout header and
/// then one `memcpy` of its element buffer). The payload's type is recorded separately
/// in [`ObjectMeta::type_name`](crate::ObjectMeta::type_name) from `TYPE_NAME`.
///
/// Requirements:
/// * `encode` must be deterministic: encoding the same value twice gives the same
///   bytes (the store may re-encode a resident value instead of keeping its bytes,
///   and verifies the checksum when it does).
/// * `decode(&v.encode())` must give a value equal to `v`.
/// * `decode` must not panic on any input: it returns [`PersistError::Decode`] on
///   bytes it cannot interpret.
pub trait Persist: Sized + Send + Sync + 'static {
    /// Stable, versioned name of the encoding, e.g. `"uni20.tensor.v1"`. Must be the
    /// same on every rank and across restarts.
    const TYPE_NAME: &'static str;

    /// Encodes the value into its payload bytes.
    fn encode(&self) -> Vec<u8>;

    /// The encoding as a borrowed view of the value's own memory, when the payload is
    /// exactly that memory (a byte vector, a string, a raw little-endian numeric vector
    /// on a little-endian machine). The store then writes and checksums the value in
    /// place, when it first needs to (a spill, a flush, a transfer, `Store::meta`), not
    /// at commit: no encoding copy at all. The default is `None`
    /// (commit calls [`encode`](Persist::encode)). When `Some`, the bytes must equal
    /// `encode()`.
    fn encode_borrowed(&self) -> Option<&[u8]> {
        None
    }

    /// The encoding as a short owned head followed by a borrowed body, when the
    /// payload is a header and then the value's own memory (a tensor: its shape, then
    /// its elements). The store then checksums the two parts in place, when it first
    /// needs to (not at commit), instead of building the encoding: no copy of the body. Used
    /// only when [`encode_borrowed`](Persist::encode_borrowed) is `None`. The default
    /// is `None`. When `Some((head, body))`, `head ++ body` must equal `encode()`.
    fn encode_split(&self) -> Option<(Vec<u8>, &[u8])> {
        None
    }

    /// Decodes a payload produced by [`encode`](Persist::encode).
    ///
    /// # Errors
    /// [`PersistError::Decode`] if the bytes are not a valid payload.
    fn decode(bytes: &[u8]) -> Result<Self, PersistError>;

    /// IDs of other persistent objects this value refers to (for example the site
    /// tensors of a wavefunction manifest). Used by [`Store::gc`](crate::Store::gc) to
    /// keep everything reachable from the roots. The default is "none".
    fn references(&self) -> Vec<ObjectId> {
        Vec::new()
    }
}

/// Encodes any serde value with postcard: a convenience for small metadata objects
/// (manifests, records) implementing [`Persist`].
pub fn encode_postcard<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // Serializing into a Vec cannot fail for ordinary serde types; a type whose
    // `Serialize` impl reports an error yields an empty payload, which its `decode`
    // then rejects.
    postcard::to_allocvec(value).unwrap_or_default()
}

/// Decodes a postcard payload produced by [`encode_postcard`]; trailing bytes are an error.
///
/// # Errors
/// [`PersistError::Decode`] if the bytes are not a valid encoding of `T`.
pub fn decode_postcard<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, PersistError> {
    let (v, rest) = postcard::take_from_bytes(bytes).map_err(|e| PersistError::Decode(e.to_string()))?;
    if !rest.is_empty() {
        return Err(PersistError::Decode(format!(
            "{} trailing bytes after postcard payload",
            rest.len()
        )));
    }
    Ok(v)
}

impl Persist for Vec<u8> {
    const TYPE_NAME: &'static str = "uni20.bytes.v1";
    fn encode(&self) -> Vec<u8> {
        self.clone()
    }
    fn encode_borrowed(&self) -> Option<&[u8]> {
        Some(self)
    }
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        Ok(bytes.to_vec())
    }
}

impl Persist for String {
    const TYPE_NAME: &'static str = "uni20.string.v1";
    fn encode(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
    fn encode_borrowed(&self) -> Option<&[u8]> {
        Some(self.as_bytes())
    }
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        String::from_utf8(bytes.to_vec()).map_err(|e| PersistError::Decode(e.to_string()))
    }
}

/// Plain numeric element types whose vectors are encoded as raw little-endian bytes.
/// `bytemuck::Pod` gives the byte views (no padding, every bit pattern valid).
trait RawElem: bytemuck::Pod + Default {
    fn to_le(self) -> Self;
}

macro_rules! raw_elem {
    ($($t:ty),*) => {$(
        impl RawElem for $t {
            #[inline]
            fn to_le(self) -> Self {
                <$t>::from_le_bytes(self.to_ne_bytes())
            }
        }
    )*};
}
raw_elem!(f64, f32, i64, u64, i32, u32);

/// Encodes raw little-endian elements: one `memcpy` on little-endian machines.
fn encode_raw<T: RawElem>(v: &[T]) -> Vec<u8> {
    if cfg!(target_endian = "little") {
        bytemuck::cast_slice::<T, u8>(v).to_vec()
    } else {
        let le: Vec<T> = v.iter().map(|x| x.to_le()).collect();
        bytemuck::cast_slice::<T, u8>(&le).to_vec()
    }
}

/// Decodes raw little-endian elements: a zeroed allocation (`calloc`) plus one
/// `memcpy` on little-endian machines. The input need not be aligned.
fn decode_raw<T: RawElem>(bytes: &[u8], name: &str) -> Result<Vec<T>, PersistError> {
    let w = std::mem::size_of::<T>();
    if !bytes.len().is_multiple_of(w) {
        return Err(PersistError::Decode(format!(
            "{name}: {} bytes is not a multiple of {w}",
            bytes.len()
        )));
    }
    let mut out = vec![T::default(); bytes.len() / w];
    bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(bytes);
    if cfg!(target_endian = "big") {
        for x in &mut out {
            *x = x.to_le();
        }
    }
    Ok(out)
}

macro_rules! persist_le_vec {
    ($t:ty, $name:literal) => {
        /// Raw little-endian elements, no header; the length is `size / size_of::<T>()`.
        /// Encoding is one `memcpy` of the element buffer, and `commit` writes the
        /// buffer in place with no copy (on little-endian machines); decoding is one
        /// allocation plus one `memcpy`.
        impl Persist for Vec<$t> {
            const TYPE_NAME: &'static str = $name;
            fn encode(&self) -> Vec<u8> {
                encode_raw(self)
            }
            fn encode_borrowed(&self) -> Option<&[u8]> {
                cfg!(target_endian = "little").then(|| bytemuck::cast_slice(self.as_slice()))
            }
            fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
                decode_raw(bytes, $name)
            }
        }
    };
}

persist_le_vec!(f64, "uni20.vec_f64.v1");
persist_le_vec!(f32, "uni20.vec_f32.v1");
persist_le_vec!(i64, "uni20.vec_i64.v1");
persist_le_vec!(u64, "uni20.vec_u64.v1");
persist_le_vec!(i32, "uni20.vec_i32.v1");
persist_le_vec!(u32, "uni20.vec_u32.v1");

/// A list of object IDs (for example a checkpoint manifest); its
/// [`references`](Persist::references) are its elements, so [`Store::gc`](crate::Store::gc)
/// keeps them alive.
impl Persist for Vec<ObjectId> {
    const TYPE_NAME: &'static str = "uni20.id_list.v1";
    fn encode(&self) -> Vec<u8> {
        encode_postcard(self)
    }
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        decode_postcard(bytes)
    }
    fn references(&self) -> Vec<ObjectId> {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_vectors_are_little_endian_and_round_trip() {
        let v = vec![1.5f64, -0.0, f64::MAX, f64::MIN_POSITIVE, f64::NAN];
        let b = v.encode();
        let expect: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(b, expect);
        let back = <Vec<f64>>::decode(&b).unwrap();
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        let u = vec![1u32, 0xdead_beef, u32::MAX];
        assert_eq!(u.encode(), u.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>());
        assert_eq!(<Vec<u32>>::decode(&u.encode()).unwrap(), u);
        let i = vec![-1i64, i64::MIN, 7];
        assert_eq!(<Vec<i64>>::decode(&i.encode()).unwrap(), i);
        assert!(<Vec<f32>>::decode(&[0u8; 7]).is_err());
        assert!(<Vec<f64>>::decode(&[]).unwrap().is_empty());
        assert_eq!(v.encode_borrowed().unwrap(), &b[..]);
        assert_eq!(u.encode_borrowed().unwrap(), &u.encode()[..]);
        let s = String::from("zero copy");
        assert_eq!(s.encode_borrowed().unwrap(), &s.encode()[..]);
    }

    #[test]
    fn decode_accepts_unaligned_input() {
        let v: Vec<f64> = (0..100).map(|k| k as f64 * 0.25).collect();
        let mut buf = vec![0u8; 1];
        buf.extend_from_slice(&v.encode());
        // `buf[1..]` is not 8-byte aligned.
        assert_eq!(<Vec<f64>>::decode(&buf[1..]).unwrap(), v);
    }
}
