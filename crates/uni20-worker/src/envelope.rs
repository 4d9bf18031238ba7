//! Command envelopes: the versioned frame around every descriptor the root
//! submits (docs/architecture.md, "The protocol").
//!
//! Wire layout: one format-version byte ([`ENVELOPE_FORMAT_VERSION`]) followed
//! by the postcard encoding of [`Envelope`]. Decoding rejects an unknown
//! version, malformed postcard and trailing bytes, and never allocates more
//! than the input length justifies (postcard borrows or bounds every
//! allocation by the remaining input).

use serde::{Deserialize, Serialize};

/// Current envelope format version (the first byte on the wire).
pub const ENVELOPE_FORMAT_VERSION: u8 = 1;

/// Default largest envelope a rank accepts, in bytes (256 MiB); a universe
/// uses [`RankConfig::max_envelope_bytes`](crate::config::RankConfig::max_envelope_bytes)
/// (`UNI20_MAX_ENVELOPE_BYTES`). Decoding allocates at most about the input
/// length, so this bounds the memory a malformed message can claim.
pub const DEFAULT_MAX_ENVELOPE_BYTES: usize = 256 << 20;

/// One command submission from the root to a worker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// Monotonic operation id assigned by the root (starts at 1).
    pub op_id: u64,
    /// [`command_id`](crate::command_id) of `wire_name`.
    pub command_id: u64,
    /// Versioned wire name, e.g. `uni20.contract.v1`.
    pub wire_name: String,
    /// Debug name for diagnostics.
    pub debug_name: String,
    /// Descriptor schema version.
    pub schema_version: u32,
    /// postcard-encoded descriptor (serialised as one byte string, which
    /// postcard writes exactly like a sequence of `u8`, only without a call
    /// per byte).
    #[serde(with = "serde_bytes")]
    pub descriptor: Vec<u8>,
}

/// An [`Envelope`] with its names and descriptor borrowed, which the root
/// encodes for every command without copying its static names. The same
/// fields in the same order, so the same wire format (`envelope_ref_encodes_as_envelope`).
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct EnvelopeRef<'a> {
    pub(crate) op_id: u64,
    pub(crate) command_id: u64,
    pub(crate) wire_name: &'a str,
    pub(crate) debug_name: &'a str,
    pub(crate) schema_version: u32,
    #[serde(with = "serde_bytes")]
    pub(crate) descriptor: &'a [u8],
}

impl EnvelopeRef<'_> {
    /// Encodes the envelope: version byte + postcard body, into a buffer of
    /// exactly its size.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let len = postcard::experimental::serialized_size(self).unwrap_or(0);
        let mut out = Vec::with_capacity(1 + len);
        out.push(ENVELOPE_FORMAT_VERSION);
        // Serialising plain data into a Vec cannot fail.
        postcard::to_extend(self, out).unwrap_or_else(|_| vec![ENVELOPE_FORMAT_VERSION])
    }

    /// The owned envelope (for the root's own share of a command).
    pub(crate) fn to_envelope(self) -> Envelope {
        Envelope {
            op_id: self.op_id,
            command_id: self.command_id,
            wire_name: self.wire_name.into(),
            debug_name: self.debug_name.into(),
            schema_version: self.schema_version,
            descriptor: self.descriptor.to_vec(),
        }
    }
}

/// Why an envelope or descriptor could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// Empty input.
    #[error("empty envelope")]
    Empty,
    /// The input exceeds the configured size limit.
    #[error("envelope of {len} bytes exceeds the limit of {limit} bytes (UNI20_MAX_ENVELOPE_BYTES)")]
    TooLarge {
        /// Input length.
        len: usize,
        /// Configured limit.
        limit: usize,
    },
    /// The version byte is not one this build understands.
    #[error("unknown envelope format version {found} (this build understands {expected})")]
    UnknownVersion {
        /// Version byte found.
        found: u8,
        /// Version this build writes.
        expected: u8,
    },
    /// postcard could not decode the body.
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// What was being decoded.
        what: &'static str,
        /// postcard's reason.
        reason: String,
    },
    /// Bytes left after a complete value.
    #[error("{count} trailing bytes after {what}")]
    TrailingBytes {
        /// What was being decoded.
        what: &'static str,
        /// How many bytes were left.
        count: usize,
    },
    /// The descriptor's schema version does not match the handler's.
    #[error("schema mismatch for `{wire_name}`: descriptor v{found}, handler v{expected}")]
    SchemaMismatch {
        /// Wire name.
        wire_name: String,
        /// Version in the envelope.
        found: u32,
        /// Version of the registered handler.
        expected: u32,
    },
}

impl Envelope {
    /// Encodes the envelope: version byte + postcard body.
    pub fn encode(&self) -> Vec<u8> {
        EnvelopeRef {
            op_id: self.op_id,
            command_id: self.command_id,
            wire_name: &self.wire_name,
            debug_name: &self.debug_name,
            schema_version: self.schema_version,
            descriptor: &self.descriptor,
        }
        .encode()
    }

    /// Decodes an envelope of at most [`DEFAULT_MAX_ENVELOPE_BYTES`] bytes.
    ///
    /// # Errors
    /// [`DecodeError::Empty`], [`DecodeError::TooLarge`],
    /// [`DecodeError::UnknownVersion`], [`DecodeError::Malformed`] or
    /// [`DecodeError::TrailingBytes`].
    pub fn decode(bytes: &[u8]) -> Result<Envelope, DecodeError> {
        Envelope::decode_limited(bytes, DEFAULT_MAX_ENVELOPE_BYTES)
    }

    /// Decodes an envelope of at most `limit` bytes.
    ///
    /// # Errors
    /// As [`Envelope::decode`].
    pub fn decode_limited(bytes: &[u8], limit: usize) -> Result<Envelope, DecodeError> {
        if bytes.len() > limit {
            return Err(DecodeError::TooLarge {
                len: bytes.len(),
                limit,
            });
        }
        let (&version, body) = bytes.split_first().ok_or(DecodeError::Empty)?;
        if version != ENVELOPE_FORMAT_VERSION {
            return Err(DecodeError::UnknownVersion {
                found: version,
                expected: ENVELOPE_FORMAT_VERSION,
            });
        }
        decode_exact(body, "envelope")
    }
}

/// Decodes a postcard value that must use every byte of `bytes` (a value
/// that borrows from `bytes`, such as a `&[u8]` field, points into it).
///
/// # Errors
/// [`DecodeError::Malformed`] or [`DecodeError::TrailingBytes`].
pub fn decode_exact<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8], what: &'static str) -> Result<T, DecodeError> {
    let (value, rest) = postcard::take_from_bytes::<T>(bytes).map_err(|e| DecodeError::Malformed {
        what,
        reason: e.to_string(),
    })?;
    if !rest.is_empty() {
        return Err(DecodeError::TrailingBytes {
            what,
            count: rest.len(),
        });
    }
    Ok(value)
}

/// Encodes a serialisable value with postcard, into a buffer of exactly its
/// size: a counting pass first, so the buffer never grows (and an empty
/// encoding, such as `()`'s, allocates nothing).
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let len = postcard::experimental::serialized_size(value).unwrap_or(0);
    postcard::to_extend(value, Vec::with_capacity(len)).unwrap_or_default()
}

/// As [`encode`], into a shared buffer allocated once at its final size: a
/// frame posted to several ranks, or a reply (a `Vec` turned into an
/// `Arc<[u8]>` is copied into a second allocation).
pub(crate) fn encode_shared<T: Serialize + ?Sized>(value: &T) -> std::sync::Arc<[u8]> {
    let len = postcard::experimental::serialized_size(value).unwrap_or(0);
    let mut shared: std::sync::Arc<[u8]> = std::iter::repeat_n(0u8, len).collect();
    match std::sync::Arc::get_mut(&mut shared).map(|buf| postcard::to_slice(value, buf).map(|b| b.len())) {
        Some(Ok(n)) if n == len => shared,
        _ => encode(value).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Envelope {
        Envelope {
            op_id: 7,
            command_id: crate::command_id("uni20.contract.v1"),
            wire_name: "uni20.contract.v1".into(),
            debug_name: "contract".into(),
            schema_version: 1,
            descriptor: vec![1, 2, 3],
        }
    }

    #[test]
    fn envelope_ref_encodes_as_envelope() {
        let e = sample();
        let r = EnvelopeRef {
            op_id: e.op_id,
            command_id: e.command_id,
            wire_name: &e.wire_name,
            debug_name: &e.debug_name,
            schema_version: e.schema_version,
            descriptor: &e.descriptor,
        };
        let mut by_hand = vec![ENVELOPE_FORMAT_VERSION];
        by_hand.extend(postcard::to_stdvec(&e).unwrap());
        assert_eq!(r.encode(), by_hand);
        assert_eq!(e.encode(), by_hand);
        assert_eq!(r.to_envelope(), e);
    }

    #[test]
    fn encodings_are_exact_and_shared_ones_equal() {
        let e = sample();
        for bytes in [encode(&e), encode(&()), encode(&vec![7u8; 300]), encode(&u64::MAX)] {
            assert_eq!(bytes.capacity(), bytes.len());
        }
        assert_eq!(encode(&e), postcard::to_stdvec(&e).unwrap());
        assert_eq!(&*encode_shared(&e), &encode(&e)[..]);
        assert!(encode_shared(&()).is_empty());
    }

    #[test]
    fn round_trip() {
        let e = sample();
        assert_eq!(Envelope::decode(&e.encode()).unwrap(), e);
    }

    #[test]
    fn rejects_unknown_version_and_trailing_bytes() {
        let mut b = sample().encode();
        b[0] = 9;
        assert_eq!(
            Envelope::decode(&b),
            Err(DecodeError::UnknownVersion { found: 9, expected: 1 })
        );
        let mut b = sample().encode();
        b.push(0);
        assert_eq!(
            Envelope::decode(&b),
            Err(DecodeError::TrailingBytes {
                what: "envelope",
                count: 1
            })
        );
        assert_eq!(Envelope::decode(&[]), Err(DecodeError::Empty));
        let b = sample().encode();
        assert!(matches!(
            Envelope::decode(&b[..b.len() - 2]),
            Err(DecodeError::Malformed { .. })
        ));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = Envelope::decode(&bytes);
        }
    }
}
