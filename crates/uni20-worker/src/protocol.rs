//! The wire types of the root <-> worker protocol, shared by both sides.
//!
//! Start-up: each worker sends an [`Arrival`] (`TAG_HELLO`): its [`Hello`],
//! or the [`StartupFailure`] that kept it from preparing; the root answers a
//! [`Start`] verdict (`TAG_START`). Commands: the root sends a [`Control`]
//! frame (`TAG_CMD`) and each participant answers a [`Reply`] (`TAG_REPLY`).
//! Every type is postcard-encoded and decoded with
//! [`decode_exact`](crate::envelope::decode_exact); byte payloads are serialised as
//! byte strings (`serde_bytes`: on the wire identical to a `u8` sequence, but
//! one copy instead of a serde call per byte, which matters for frames of
//! megabytes). This module depends on nothing but
//! the envelope, diagnostic and registry types, so the controller (root side)
//! and the worker loop both import it and neither imports the other.

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use uni20_persist::ObjectId;

use crate::diag::Diagnostic;
use crate::registry::CommandSignature;

/// Worker -> root at start-up: the worker's registry and transport settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Hello {
    /// The sending rank.
    pub(crate) rank: usize,
    /// [`Registry::digest`](crate::Registry::digest) of its registry.
    pub(crate) digest: u64,
    /// Its sorted registry signatures.
    pub(crate) signatures: Vec<CommandSignature>,
    /// Its chunk size ([`RankConfig::chunk_bytes`](crate::config::RankConfig::chunk_bytes)),
    /// which must equal the root's.
    pub(crate) chunk_bytes: u64,
}

/// A rank whose preparation failed (its store, its registry, its
/// configuration): which rank, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StartupFailure {
    /// The failing rank.
    pub(crate) rank: usize,
    /// What failed, as the rank's own error text.
    pub(crate) error: String,
}

impl StartupFailure {
    /// The line every rank reports: `rank R failed at start-up: <error>`.
    pub(crate) fn describe(&self) -> String {
        format!("rank {} failed at start-up: {}", self.rank, self.error)
    }
}

/// Worker -> root at start-up (`TAG_HELLO`; in SPMD mode, every rank's
/// all-gathered value): ready to run, or failed. A rank that failed still
/// arrives, so that the job ends at once with its error instead of waiting
/// for the start-up timeout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Arrival {
    /// The rank is prepared: its registry and settings.
    Ready(Hello),
    /// The rank could not prepare; it waits for the verdict and stops.
    Failed(StartupFailure),
}

/// Root -> worker at start-up: run, or refuse with the reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Start {
    /// Every rank agrees: enter the command loop.
    Go,
    /// Ranks disagree; the text says how. The worker stops.
    Refuse(String),
}

/// Root -> worker: a control frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Control {
    /// Run the encoded [`Envelope`](crate::Envelope), after releasing the
    /// objects of `releases` (queued by the root's
    /// [`ReleaseLedger`](crate::ledger::ReleaseLedger) for this rank; usually empty).
    Run {
        /// The encoded envelope.
        #[serde(with = "serde_bytes")]
        envelope: Vec<u8>,
        /// Objects this rank owns that no root-side handle names any more.
        releases: Vec<ObjectId>,
    },
    /// Leave the worker loop (clean shutdown).
    Shutdown,
}

/// [`Control`] with the envelope borrowed, for encoding a frame from an
/// envelope the root keeps and decoding one without copying its envelope
/// out of the received bytes. The same wire format: postcard writes an enum
/// as its variant index and a struct variant as its fields in order
/// (`control_ref_encodes_as_control` checks both variants).
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ControlRef<'a> {
    /// [`Control::Run`].
    Run {
        /// The encoded envelope.
        #[serde(borrow, with = "serde_bytes")]
        envelope: &'a [u8],
        /// Objects this rank owns that no root-side handle names any more.
        releases: Vec<ObjectId>,
    },
    /// [`Control::Shutdown`].
    Shutdown,
}

/// Worker -> root: the outcome of one command on one participant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Reply {
    /// The operation replied to.
    pub(crate) op_id: u64,
    /// The handler's encoded reply, or where and why it failed.
    pub(crate) outcome: Result<ByteBuf, Box<Diagnostic>>,
    /// Nanoseconds the participant spent executing the command (its
    /// handler: kernels, block transfers, store access), on its own clock;
    /// the root adds them up per rank for
    /// [`RootProfile`](crate::controller::RootProfile).
    pub(crate) busy_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{decode_exact, encode};

    #[test]
    fn control_ref_encodes_as_control() {
        let envelope = vec![1u8, 7, 0, 255, 3];
        for releases in [Vec::new(), vec![ObjectId::new(3, 9), ObjectId::new(1, 1 << 40)]] {
            let owned = encode(&Control::Run {
                envelope: envelope.clone(),
                releases: releases.clone(),
            });
            let borrowed = encode(&ControlRef::Run {
                envelope: &envelope,
                releases: releases.clone(),
            });
            assert_eq!(owned, borrowed);
            assert_eq!(
                decode_exact::<ControlRef>(&owned, "control frame").unwrap(),
                ControlRef::Run {
                    envelope: &envelope,
                    releases
                }
            );
        }
        assert_eq!(encode(&Control::Shutdown), encode(&ControlRef::Shutdown));
        let shutdown = encode(&Control::Shutdown);
        assert_eq!(
            decode_exact::<ControlRef>(&shutdown, "control frame").unwrap(),
            ControlRef::Shutdown
        );
    }
}
