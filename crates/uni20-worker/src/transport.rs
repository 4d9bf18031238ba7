//! Point-to-point transports: one protocol over two engines.
//!
//! [`Transport`] is the only thing the runtime needs from a communicator:
//! tagged byte messages of any size between ranks, sends that never wait on
//! the peer ([`Transport::post`]), and a deadlock-free pairwise exchange.
//! The in-process transport ([`TransportKind::InProcess`]) runs ranks as
//! threads of one process; the MPI transport (feature `mpi`) runs one rank per process.
//!
//! No send may depend on the transport buffering it: a rank that waits in any
//! transport call (a blocking send, a receive, an exchange, a flush) keeps
//! accepting incoming messages meanwhile, so two ranks that send each other
//! large messages at the same time both complete. Payloads larger than the
//! chunk size travel as several messages and are reassembled
//! ([`crate::config::RankConfig::chunk_bytes`]); callers always see whole messages.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Message tag (MPI tags are non-negative `i32`; at least 32767 is valid).
pub type Tag = i32;

/// Worker -> root: registry signature at start-up.
pub const TAG_HELLO: Tag = 1;
/// Root -> worker: start-up verdict.
pub const TAG_START: Tag = 2;
/// Root -> worker: a control frame (command envelope or shutdown).
pub const TAG_CMD: Tag = 3;
/// Worker -> root: a command reply.
pub const TAG_REPLY: Tag = 4;
/// Root <-> worker: payload messages of root-involving data phases
/// (scatter from / gather to the root, explicitly requested by the user).
pub const TAG_ROOT_DATA: Tag = 5;
/// Any rank <-> any rank: the messages of SPMD collectives (barrier,
/// broadcast, gather, reduce, plan agreement), each framed with the
/// collective's sequence number and kind ([`crate::SpmdContext`]).
pub const TAG_COLL: Tag = 6;
/// Any rank -> every other rank: the universe is aborted; the payload is the
/// reason (UTF-8). Library mode only: a rank that receives it fails every
/// later wait with [`TransportError::Aborted`].
pub const TAG_ABORT: Tag = 7;
/// Any rank -> every other rank, last message of a library-mode universe:
/// this rank sends nothing more on the universe's communicator.
pub const TAG_FIN: Tag = 8;
/// First tag of worker <-> worker block transfers.
pub const TAG_DATA_BASE: Tag = 1000;

/// Tag of the `index`-th transfer of a plan (wraps within the valid range;
/// messages between one pair of ranks with one tag never overtake).
pub fn data_tag(index: usize) -> Tag {
    TAG_DATA_BASE + (index % 30_000) as Tag
}

/// What a message carries, by its tag: the classes [`Traffic`] counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TrafficClass {
    /// Start-up, command envelopes, replies, abort and fin frames
    /// ([`TAG_HELLO`], [`TAG_START`], [`TAG_CMD`], [`TAG_REPLY`],
    /// [`TAG_ABORT`], [`TAG_FIN`]).
    Control,
    /// Payloads of root-involving data phases ([`TAG_ROOT_DATA`]: scatter
    /// from and gather to the root).
    RootData,
    /// SPMD collectives ([`TAG_COLL`]).
    Collective,
    /// Rank-to-rank block transfers of plans (tags from [`TAG_DATA_BASE`]).
    BlockData,
}

impl TrafficClass {
    /// Every class, in the order of [`Traffic`]'s fields.
    pub const ALL: [TrafficClass; 4] = [
        TrafficClass::Control,
        TrafficClass::RootData,
        TrafficClass::Collective,
        TrafficClass::BlockData,
    ];

    /// The class of a message with `tag`.
    pub fn of(tag: Tag) -> TrafficClass {
        match tag {
            TAG_ROOT_DATA => TrafficClass::RootData,
            TAG_COLL => TrafficClass::Collective,
            t if t >= TAG_DATA_BASE => TrafficClass::BlockData,
            _ => TrafficClass::Control,
        }
    }

    fn index(self) -> usize {
        match self {
            TrafficClass::Control => 0,
            TrafficClass::RootData => 1,
            TrafficClass::Collective => 2,
            TrafficClass::BlockData => 3,
        }
    }
}

/// Messages and bytes of one [`TrafficClass`] that one rank sent and received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flow {
    /// Whole messages sent to other ranks.
    pub messages_sent: u64,
    /// Payload bytes of those messages.
    pub bytes_sent: u64,
    /// Whole messages received from other ranks.
    pub messages_received: u64,
    /// Payload bytes of those messages.
    pub bytes_received: u64,
}

/// What one rank's transport carried since it was created, counted by the
/// transport itself as messages leave and arrive (not derived from plans):
/// [`Transport::traffic`]. Messages a rank sends to itself are not counted
/// (they cross no wire). A message counts once, whatever number of parts
/// the chunk size splits it into; bytes are payload bytes (no MPI headers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// [`TrafficClass::Control`].
    pub control: Flow,
    /// [`TrafficClass::RootData`].
    pub root_data: Flow,
    /// [`TrafficClass::Collective`].
    pub collective: Flow,
    /// [`TrafficClass::BlockData`].
    pub block_data: Flow,
}

impl Traffic {
    /// The flow of one class.
    pub fn class(&self, c: TrafficClass) -> Flow {
        match c {
            TrafficClass::Control => self.control,
            TrafficClass::RootData => self.root_data,
            TrafficClass::Collective => self.collective,
            TrafficClass::BlockData => self.block_data,
        }
    }

    /// Payload bytes sent plus received, over every class.
    pub fn total_bytes(&self) -> u64 {
        TrafficClass::ALL
            .iter()
            .map(|&c| self.class(c).bytes_sent + self.class(c).bytes_received)
            .sum()
    }
}

/// The counters behind [`Traffic`], shared by the transports (relaxed atomics:
/// a snapshot taken while messages move may mix before and after).
#[derive(Debug, Default)]
pub(crate) struct TrafficCounter {
    /// Per class: messages sent, bytes sent, messages received, bytes received.
    cells: [[AtomicU64; 4]; 4],
}

impl TrafficCounter {
    /// Counts one message of `bytes` bytes with `tag` sent to another rank.
    pub(crate) fn sent(&self, tag: Tag, bytes: usize) {
        let c = &self.cells[TrafficClass::of(tag).index()];
        c[0].fetch_add(1, Ordering::Relaxed);
        c[1].fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Counts one whole message of `bytes` bytes with `tag` received from another rank.
    pub(crate) fn received(&self, tag: Tag, bytes: usize) {
        let c = &self.cells[TrafficClass::of(tag).index()];
        c[2].fetch_add(1, Ordering::Relaxed);
        c[3].fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// A snapshot.
    pub(crate) fn snapshot(&self) -> Traffic {
        let flow = |c: TrafficClass| {
            let v = &self.cells[c.index()];
            Flow {
                messages_sent: v[0].load(Ordering::Relaxed),
                bytes_sent: v[1].load(Ordering::Relaxed),
                messages_received: v[2].load(Ordering::Relaxed),
                bytes_received: v[3].load(Ordering::Relaxed),
            }
        };
        Traffic {
            control: flow(TrafficClass::Control),
            root_data: flow(TrafficClass::RootData),
            collective: flow(TrafficClass::Collective),
            block_data: flow(TrafficClass::BlockData),
        }
    }
}

/// Communication failure.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportError {
    /// The job was aborted (fail-stop) while this rank was communicating.
    #[error("job aborted: {0}")]
    Aborted(String),
    /// A rank outside `0..size` was addressed.
    #[error("rank {rank} out of range for a universe of {size} ranks")]
    BadRank {
        /// Addressed rank.
        rank: usize,
        /// Universe size.
        size: usize,
    },
    /// A timed wait expired.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// This rank waits for a message from `rank`, which has already left the
    /// universe (its SPMD closure or worker loop returned, or, in-process, it
    /// died of an injected `exit` or `kill`): the message will never come.
    #[error("rank {rank} has left the universe; the message this rank waits for will never come")]
    PeerLeft {
        /// The rank that left.
        rank: usize,
    },
    /// A message arrived in a form this rank cannot accept (for example a
    /// part larger than its chunk size: the ranks disagree about
    /// `UNI20_CHUNK_BYTES`).
    #[error("transport protocol violation: {0}")]
    Protocol(String),
}

/// Which transport carries a universe's messages, as [`Transport::kind`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportKind {
    /// Ranks are threads of one process (the in-process transport, the default).
    InProcess,
    /// Ranks are MPI processes (`MpiTransport`, feature `mpi`).
    Mpi,
}

impl TransportKind {
    /// `"in-process"` or `"mpi"`: the name `uni20 info` and the examples print.
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::InProcess => "in-process",
            TransportKind::Mpi => "mpi",
        }
    }
}

impl fmt::Display for TransportKind {
    /// Writes [`TransportKind::name`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Tagged point-to-point messaging between the ranks of one universe.
///
/// Messages from one source with one tag arrive in send order; messages are
/// matched by `(source, tag)`. Sending to one's own rank is allowed. A
/// message may have any length; the transport splits and reassembles what
/// its engine cannot carry in one piece.
pub trait Transport {
    /// This rank, in `0..size()`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Which transport this is ([`TransportKind::name`] is what `uni20 info` prints).
    fn kind(&self) -> TransportKind;
    /// Sends `bytes` to `dest` with `tag` and returns once `bytes` may be
    /// reused: in-process at once, under MPI when `dest` has received the
    /// message. While it waits, this rank keeps receiving, so a peer that
    /// sends to this rank at the same time is never blocked by it.
    ///
    /// # Errors
    /// [`TransportError`] if the job was aborted or `dest` is out of range.
    fn send(&self, dest: usize, tag: Tag, bytes: &[u8]) -> Result<(), TransportError>;
    /// Sends an owned payload without waiting for `dest` to receive it: the
    /// message completes in the background, progressed by this rank's later
    /// transport calls. Posts to one destination with one tag arrive in
    /// order, also relative to [`Transport::send`]. Sharing one `Arc` among
    /// several destinations costs no copy on MPI. Use it for control frames
    /// and replies, which must never wait on a busy peer.
    ///
    /// # Errors
    /// [`TransportError`] if the job was aborted or `dest` is out of range.
    fn post(&self, dest: usize, tag: Tag, bytes: Arc<[u8]>) -> Result<(), TransportError>;
    /// Waits until every message posted by this rank has been received,
    /// receiving meanwhile. Call it before the transport is dropped (the MPI
    /// transport also flushes on drop).
    ///
    /// # Errors
    /// [`TransportError`] if the job was aborted.
    fn flush(&self) -> Result<(), TransportError> {
        Ok(())
    }
    /// Receives the next message from `src` with `tag` (blocking).
    ///
    /// # Errors
    /// [`TransportError::Aborted`] if the job is aborted while waiting.
    fn recv(&self, src: usize, tag: Tag) -> Result<Vec<u8>, TransportError>;
    /// Receives the next message with `tag` from any rank (blocking).
    ///
    /// # Errors
    /// [`TransportError::Aborted`] if the job is aborted while waiting.
    fn recv_any(&self, tag: Tag) -> Result<(usize, Vec<u8>), TransportError>;
    /// Like [`Transport::recv_any`] but gives up after `timeout`.
    ///
    /// # Errors
    /// [`TransportError::Timeout`] or [`TransportError::Aborted`].
    fn recv_any_timeout(&self, tag: Tag, timeout: Duration) -> Result<(usize, Vec<u8>), TransportError>;
    /// Starts every outgoing message without blocking, receives every
    /// incoming one (returned in the order given), and returns once the
    /// outgoing buffers may be reused. Deadlock-free for any pattern in
    /// which every incoming entry is matched by a peer's outgoing entry.
    ///
    /// # Errors
    /// [`TransportError`] as for `send`/`recv`.
    fn exchange(
        &self,
        outgoing: &[(usize, Tag, &[u8])],
        incoming: &[(usize, Tag)],
    ) -> Result<Vec<Vec<u8>>, TransportError>;
    /// Receives a message with `tag` from `src` (any rank when `None`) if
    /// one is already waiting; never blocks.
    ///
    /// # Errors
    /// [`TransportError::Aborted`] if the job was aborted.
    fn try_recv(&self, src: Option<usize>, tag: Tag) -> Result<Option<(usize, Vec<u8>)>, TransportError>;
    /// Sends like [`Transport::send`], calling `poll` repeatedly while the
    /// message is in flight (an MPI send completes only when the peer
    /// receives it). If `poll` fails, the job is aborted: a peer that will
    /// never receive must not leave this rank blocked.
    ///
    /// # Errors
    /// As [`Transport::send`]; the error of `poll` as
    /// [`TransportError::Aborted`].
    fn send_polling(
        &self,
        dest: usize,
        tag: Tag,
        bytes: &[u8],
        poll: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), TransportError> {
        poll().map_err(TransportError::Aborted)?;
        self.send(dest, tag, bytes)
    }
    /// Fail-stop: ends the universe. In-process it wakes every blocked rank
    /// with [`TransportError::Aborted`]. On MPI it depends on who owns the
    /// process: in a standalone universe (`launch`, [`UniverseBuilder::run`](crate::UniverseBuilder::run))
    /// it calls `MPI_Abort` and does not return; in library mode (a host
    /// communicator) it sends `reason` to every other rank ([`TAG_ABORT`])
    /// and returns, and every later wait of every rank fails with
    /// [`TransportError::Aborted`].
    fn abort(&self, reason: &str);
    /// The reason the universe was aborted, once it was (by this rank or,
    /// in library mode, by a frame from another rank); `None` before.
    fn aborted(&self) -> Option<String> {
        None
    }
    /// What this rank's transport has sent and received so far, by class,
    /// counted as messages leave and arrive.
    fn traffic(&self) -> Traffic;
}
