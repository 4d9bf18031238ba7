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
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        Ok(bytes.to_vec())
    }
}

impl Persist for String {
    const TYPE_NAME: &'static str = "uni20.string.v1";
    fn encode(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        String::from_utf8(bytes.to_vec()).map_err(|e| PersistError::Decode(e.to_string()))
    }
}

macro_rules! persist_le_vec {
    ($t:ty, $name:literal) => {
        /// Raw little-endian elements, no header; the length is `size / size_of::<T>()`.
        impl Persist for Vec<$t> {
            const TYPE_NAME: &'static str = $name;
            fn encode(&self) -> Vec<u8> {
                let mut out = Vec::with_capacity(self.len() * std::mem::size_of::<$t>());
                for x in self {
                    out.extend_from_slice(&x.to_le_bytes());
                }
                out
            }
            fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
                const W: usize = std::mem::size_of::<$t>();
                if bytes.len() % W != 0 {
                    return Err(PersistError::Decode(format!(
                        "{}: {} bytes is not a multiple of {}",
                        $name,
                        bytes.len(),
                        W
                    )));
                }
                Ok(bytes
                    .chunks_exact(W)
                    .map(|c| {
                        let mut a = [0u8; W];
                        a.copy_from_slice(c);
                        <$t>::from_le_bytes(a)
                    })
                    .collect())
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
