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
        // One buffer of about the final size: the fixed fields take at most
        // 1 + 10 + 10 + 5 bytes, each length prefix at most 5.
        let mut out = Vec::with_capacity(48 + self.wire_name.len() + self.debug_name.len() + self.descriptor.len());
        out.push(ENVELOPE_FORMAT_VERSION);
        // Serialising plain owned data into a Vec cannot fail.
        postcard::to_extend(self, out).unwrap_or_else(|_| vec![ENVELOPE_FORMAT_VERSION])
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

/// Encodes a serialisable value with postcard.
///
/// The buffer starts with room for 64 bytes, which holds the runtime's
/// small messages (control frames, replies) without growing it.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    postcard::to_extend(value, Vec::with_capacity(64)).unwrap_or_default()
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
