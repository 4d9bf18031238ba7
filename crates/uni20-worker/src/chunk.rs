//! Splitting large payloads into bounded messages and putting them back
//! together, so no single message exceeds the chunk size
//! ([`RankConfig::chunk_bytes`](crate::config::RankConfig::chunk_bytes)). MPI counts a
//! message in `i32` elements: a block of 2 GiB or more cannot be one message.
//!
//! Wire rule: a payload of `len` bytes travels as `len / chunk + 1` messages
//! with the same source, destination and tag: `len / chunk` full parts of
//! exactly `chunk` bytes, then one short part of `len % chunk` bytes (possibly
//! empty). A receiver appends parts until it gets one shorter than `chunk`.
//! Payloads below the chunk size are therefore one message, unchanged.
//! Messages between one pair of ranks with one tag never overtake each other,
//! so the parts of one payload arrive in order and before the next payload's.
//! Both ends must use the same chunk size; a part longer than the receiver's
//! chunk size is refused.

use std::collections::HashMap;

use crate::transport::{Tag, TransportError};

/// The parts `bytes` travels as with chunk size `chunk` (> 0): full parts of
/// `chunk` bytes, then the short rest (empty when `chunk` divides the length).
pub(crate) fn parts(bytes: &[u8], chunk: usize) -> impl Iterator<Item = &[u8]> {
    let full = bytes.len() / chunk;
    let (body, rest) = bytes.split_at(full * chunk);
    body.chunks_exact(chunk).chain(std::iter::once(rest))
}

/// Payloads being reassembled, by `(source, tag)`.
#[derive(Debug, Default)]
pub(crate) struct Reassembly {
    partial: HashMap<(usize, Tag), Vec<u8>>,
}

impl Reassembly {
    /// Takes one received part; returns the whole payload once its last
    /// (short) part has arrived.
    ///
    /// # Errors
    /// [`TransportError::Protocol`] for a part longer than `chunk`: the
    /// sender splits with a larger chunk size than this rank.
    pub(crate) fn accept(
        &mut self,
        src: usize,
        tag: Tag,
        part: Vec<u8>,
        chunk: usize,
    ) -> Result<Option<Vec<u8>>, TransportError> {
        if part.len() > chunk {
            return Err(TransportError::Protocol(format!(
                "rank {src} sent a message of {} bytes with tag {tag}, more than this rank's chunk size of {chunk} \
                 bytes (UNI20_CHUNK_BYTES must be equal on every rank)",
                part.len()
            )));
        }
        if part.len() < chunk && self.partial.is_empty() {
            // A whole payload, and nothing in reassembly: no lookup.
            return Ok(Some(part));
        }
        let key = (src, tag);
        if part.len() == chunk {
            self.partial.entry(key).or_default().extend_from_slice(&part);
            return Ok(None);
        }
        Ok(Some(match self.partial.remove(&key) {
            None => part,
            Some(mut whole) => {
                whole.extend_from_slice(&part);
                whole
            }
        }))
    }

    /// Number of payloads with parts received and the last part missing.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.partial.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn part_counts_and_sizes() {
        let sizes = |len: usize, chunk| parts(&vec![7u8; len], chunk).map(<[u8]>::len).collect::<Vec<_>>();
        assert_eq!(sizes(0, 4), vec![0]);
        assert_eq!(sizes(3, 4), vec![3]);
        assert_eq!(sizes(4, 4), vec![4, 0]);
        assert_eq!(sizes(9, 4), vec![4, 4, 1]);
        assert_eq!(sizes(12, 4), vec![4, 4, 4, 0]);
    }

    #[test]
    fn a_part_longer_than_the_chunk_is_refused() {
        let mut r = Reassembly::default();
        let e = r.accept(2, 9, vec![0; 5], 4).unwrap_err();
        assert!(matches!(&e, TransportError::Protocol(m) if m.contains("rank 2") && m.contains("UNI20_CHUNK_BYTES")));
    }

    proptest! {
        /// Several payloads from several (source, tag) streams, their parts
        /// interleaved across streams but in order within each, come back
        /// whole and in order.
        #[test]
        fn interleaved_streams_reassemble(
            chunk in 1usize..9,
            payloads in proptest::collection::vec((0usize..3, 0i32..2, proptest::collection::vec(any::<u8>(), 0..40)), 0..12),
            seed in any::<u64>(),
        ) {
            // One queue of parts per stream, in send order.
            let mut streams: std::collections::BTreeMap<(usize, Tag), std::collections::VecDeque<Vec<u8>>> = Default::default();
            let mut want: std::collections::BTreeMap<(usize, Tag), Vec<Vec<u8>>> = Default::default();
            for (src, tag, bytes) in &payloads {
                let q = streams.entry((*src, *tag)).or_default();
                q.extend(parts(bytes, chunk).map(<[u8]>::to_vec));
                want.entry((*src, *tag)).or_default().push(bytes.clone());
            }
            // Deliver parts round-robin from a pseudo-random stream each time.
            let mut r = Reassembly::default();
            let mut got: std::collections::BTreeMap<(usize, Tag), Vec<Vec<u8>>> = Default::default();
            let mut state = seed | 1;
            loop {
                let live: Vec<(usize, Tag)> = streams.iter().filter(|(_, q)| !q.is_empty()).map(|(k, _)| *k).collect();
                if live.is_empty() {
                    break;
                }
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let key = live[(state % live.len() as u64) as usize];
                let part = streams.get_mut(&key).and_then(|q| q.pop_front()).unwrap();
                if let Some(whole) = r.accept(key.0, key.1, part, chunk).unwrap() {
                    got.entry(key).or_default().push(whole);
                }
            }
            prop_assert_eq!(r.pending(), 0);
            prop_assert_eq!(got, want);
        }
    }
}
