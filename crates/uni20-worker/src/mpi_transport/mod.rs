//! The MPI transport (feature `mpi`): one rank per process, rsmpi 0.8.
//!
//! Only the thread that runs the universe communicates; local kernels may
//! use other threads (see `env.rs` for the threading requirement). Nothing
//! here depends on MPI buffering a message: every send is nonblocking
//! (`MPI_Isend`), and every wait (a blocking send, a receive, an exchange, a
//! flush) runs a progress loop that tests its own requests and receives
//! *every* message that has arrived, whatever its source and tag, into a
//! local inbox that later receives take from. So two ranks that send each
//! other large frames at the same time (the root a command envelope, a
//! worker a reply) both complete: each receives the other's frame while it
//! waits. Payloads larger than the chunk size travel as several messages
//! ([`crate::chunk`]); MPI counts a message in `i32`, so no message may
//! reach 2 GiB. Messages to one's own rank go straight to the inbox.
//!
//! Fail-stop depends on who owns the process ([`OnAbort`]). A standalone
//! universe (`launch`) calls `MPI_Abort`. A library-mode universe (a host
//! communicator, duplicated for the universe) sends the reason to every
//! other rank (`TAG_ABORT`); because every wait receives every message, a
//! rank blocked anywhere in the transport, including inside a handler's
//! exchange, sees the frame at its next poll and fails with
//! [`TransportError::Aborted`]. Its own sends in flight are completed first
//! (the peers keep receiving), so no buffer is abandoned. The universe ends
//! with `finish` (`ending.rs`): every rank sends a last `TAG_FIN` frame to
//! every other rank and receives until it has every peer's, so no message of
//! the universe is left unreceived when its communicator is freed.

mod ending;
mod env;

pub(crate) use env::{check_mpi_usable, duplicate_host_communicator};

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use mpi::request::{Request, Scope, StaticScope};
use mpi::topology::{Communicator, SimpleCommunicator};

use crate::chunk::{parts, Reassembly};
use crate::config::{DEFAULT_CHUNK_BYTES, MAX_CHUNK_BYTES, MIN_CHUNK_BYTES};
use crate::transport::{Tag, Transport, TransportError, TransportKind, TAG_ABORT, TAG_FIN};

/// What [`Transport::abort`] does on an MPI rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnAbort {
    /// The universe owns the process (standalone, `launch`): print the
    /// reason and call `MPI_Abort` (code 70) on the communicator.
    EndProcess,
    /// Library mode: send the reason to every other rank and return. The
    /// process is ended with `MPI_Abort` on the universe's communicator only
    /// if this rank's sends in flight, or the ending of the universe, cannot
    /// complete within `timeout` after the abort (a peer that never polls
    /// again: dead, or stuck outside uni20).
    Frames {
        /// How long a rank waits for its peers after an abort.
        timeout: Duration,
    },
}

/// A posted message in flight: the requests of its parts and the payload
/// they read from.
struct Posted {
    requests: Vec<Request<'static, [u8]>>,
    /// Keeps the buffer the requests read alive and in place until every
    /// request has completed.
    _payload: Arc<[u8]>,
}

/// Whole messages received and not yet taken, per `(source, tag)`, each
/// with its arrival number (for receives from any source).
type Inbox = HashMap<(usize, Tag), VecDeque<(u64, Vec<u8>)>>;

#[derive(Default)]
struct State {
    inbox: Inbox,
    arrivals: u64,
    reassembly: Reassembly,
    posted: Vec<Posted>,
    /// Why the universe was aborted, and when this rank learned it.
    aborted: Option<(String, Instant)>,
    /// Ranks whose `TAG_FIN` frame has arrived: they send nothing more.
    fins: Vec<bool>,
    /// Set by `finish`: this rank sends nothing more (not even an abort).
    finishing: bool,
}

/// How long an idle wait spins before it yields and then sleeps.
pub(crate) struct Backoff {
    /// When the wait last made progress (or started).
    active: Instant,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { active: Instant::now() }
    }
}

/// How long a wait polls without yielding the core itself: about the
/// round trip of a short command, so a reply that comes at once is taken at
/// once. A poll that finds nothing still enters MPI's progress engine, and
/// Open MPI's yields the core there when it runs with `mpi_yield_when_idle`
/// (which `mpirun` turns on for oversubscribed nodes), as its own blocking
/// calls do; a yield of ours on top would only double the delay between the
/// arrival of a message and its receipt.
const SPIN: Duration = Duration::from_micros(100);

impl Backoff {
    pub(crate) fn reset(&mut self) {
        self.active = Instant::now();
    }

    /// Between two polls of a wait that saw nothing complete. For the first
    /// [`SPIN`] without progress it only hints the CPU. After that:
    /// `sending`: this rank has messages in flight, which MPI moves only
    /// while this rank calls into it, so it only yields the core (as Open
    /// MPI's own blocking calls do with `mpi_yield_when_idle`). Otherwise it
    /// yields up to the first millisecond without progress, then sleeps
    /// 50 us per poll, and after a second without traffic 500 us: an idle
    /// rank costs almost no CPU, and waiting ranks do not starve working
    /// ones when ranks outnumber cores.
    pub(crate) fn snooze(&mut self, sending: bool) {
        let idle = self.active.elapsed();
        if idle < SPIN {
            std::hint::spin_loop();
        } else if sending || idle < Duration::from_millis(1) {
            std::thread::yield_now();
        } else if idle < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_micros(50));
        } else {
            std::thread::sleep(Duration::from_micros(500));
        }
    }
}

/// Keeps the requests that have not completed yet.
fn pending<'a, S: Scope<'a>>(requests: Vec<Request<'a, [u8], S>>) -> Vec<Request<'a, [u8], S>> {
    requests.into_iter().filter_map(|r| r.test().err()).collect()
}

/// One rank's endpoint of an MPI communicator.
pub struct MpiTransport {
    comm: SimpleCommunicator,
    rank: usize,
    size: usize,
    chunk_bytes: usize,
    on_abort: OnAbort,
    state: RefCell<State>,
    traffic: crate::transport::TrafficCounter,
}

impl MpiTransport {
    /// Wraps a communicator of an initialised MPI universe (a standalone
    /// universe: `abort` calls `MPI_Abort`), with the default chunk size
    /// ([`DEFAULT_CHUNK_BYTES`]).
    pub fn new(comm: SimpleCommunicator) -> MpiTransport {
        MpiTransport::with_chunk_bytes(comm, DEFAULT_CHUNK_BYTES)
    }

    /// Like [`MpiTransport::new`] with messages of at most `chunk_bytes`
    /// bytes (clamped into [`MIN_CHUNK_BYTES`]`..=`[`MAX_CHUNK_BYTES`]).
    /// Every rank must use the same value.
    pub fn with_chunk_bytes(comm: SimpleCommunicator, chunk_bytes: usize) -> MpiTransport {
        MpiTransport::with_policy(comm, chunk_bytes, OnAbort::EndProcess)
    }

    pub(crate) fn with_policy(comm: SimpleCommunicator, chunk_bytes: usize, on_abort: OnAbort) -> MpiTransport {
        let size = comm.size() as usize;
        MpiTransport {
            rank: comm.rank() as usize,
            size,
            comm,
            chunk_bytes: chunk_bytes.clamp(MIN_CHUNK_BYTES, MAX_CHUNK_BYTES),
            on_abort,
            state: RefCell::new(State {
                fins: vec![false; size],
                ..State::default()
            }),
            traffic: Default::default(),
        }
    }

    /// The largest single message this rank sends or accepts.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    fn check_rank(&self, r: usize) -> Result<i32, TransportError> {
        if r < self.size {
            Ok(r as i32)
        } else {
            Err(TransportError::BadRank {
                rank: r,
                size: self.size,
            })
        }
    }

    /// Files one whole received message: abort and fin frames change the
    /// state, everything else goes to the inbox.
    fn deliver(&self, st: &mut State, src: usize, tag: Tag, bytes: Vec<u8>) {
        if src != self.rank {
            self.traffic.received(tag, bytes.len());
        }
        match tag {
            TAG_ABORT => {
                if st.aborted.is_none() {
                    let why = String::from_utf8_lossy(&bytes).into_owned();
                    tracing::warn!(rank = self.rank, from = src, "universe aborted: {why}");
                    st.aborted = Some((why, Instant::now()));
                }
            }
            TAG_FIN => st.fins[src] = true,
            _ => {
                st.arrivals += 1;
                let n = st.arrivals;
                st.inbox.entry((src, tag)).or_default().push_back((n, bytes));
            }
        }
    }

    /// The oldest received message from `src` (any source when `None`) with `tag`.
    fn take(&self, src: Option<usize>, tag: Tag) -> Option<(usize, Vec<u8>)> {
        let mut st = self.state.borrow_mut();
        let key = match src {
            Some(s) => (s, tag),
            None => {
                st.inbox
                    .iter()
                    .filter(|((_, t), _)| *t == tag)
                    .filter_map(|(k, q)| q.front().map(|(n, _)| (*n, *k)))
                    .min()?
                    .1
            }
        };
        let queue = st.inbox.get_mut(&key)?;
        let (_, bytes) = queue.pop_front()?;
        if queue.is_empty() {
            st.inbox.remove(&key);
        }
        Some((key.0, bytes))
    }

    /// The abort reason, as the error every wait returns once it is known.
    fn check_abort(&self) -> Result<(), TransportError> {
        match &self.state.borrow().aborted {
            Some((why, _)) => Err(TransportError::Aborted(why.clone())),
            None => Ok(()),
        }
    }

    /// Retires the posted sends that have completed. True if any did.
    ///
    /// Testing a request that has completed returns at once; only a request
    /// still in flight (a large message) enters MPI's progress engine.
    fn retire_sends(&self) -> bool {
        let mut st = self.state.borrow_mut();
        if st.posted.is_empty() {
            return false;
        }
        let mut moved = false;
        st.posted.retain_mut(|p| {
            let before = p.requests.len();
            p.requests = pending(std::mem::take(&mut p.requests));
            moved |= p.requests.len() < before;
            !p.requests.is_empty()
        });
        moved
    }

    /// One step of progress: retires completed posted sends and receives
    /// at most one message (one part of a chunked payload), whatever its
    /// source and tag. True if anything happened.
    ///
    /// One message per step, so that a wait checks for what it awaits as
    /// soon as a message is in: a probe that finds nothing runs MPI's
    /// progress engine, which may yield the core (`mpi_yield_when_idle`),
    /// and must not stand between the awaited message and its receiver.
    /// Callers loop while it returns true.
    fn progress(&self) -> Result<bool, TransportError> {
        let moved = self.retire_sends();
        let Some(probed) = self.comm.any_process().immediate_matched_probe() else {
            return Ok(moved);
        };
        let (part, status) = probed.matched_receive_vec::<u8>();
        let (src, tag) = (status.source_rank() as usize, status.tag());
        let mut st = self.state.borrow_mut();
        if let Some(whole) = st.reassembly.accept(src, tag, part, self.chunk_bytes)? {
            self.deliver(&mut st, src, tag, whole);
        }
        Ok(true)
    }

    /// Receives every message that has arrived, one at a time.
    ///
    /// A wait that finds a peer's `TAG_FIN` calls this before it concludes
    /// that the peer has left: MPI matches a probe for any source against
    /// the senders in its own order, not in order of arrival, so an abort
    /// frame that came first (naming the failure the peer left for) may
    /// still be unmatched.
    fn drain_arrived(&self) -> Result<(), TransportError> {
        while self.progress()? {}
        Ok(())
    }

    /// In an exchange that waits for a peer whose fin has arrived: drains
    /// what has arrived and says whether the universe is still not aborted
    /// (if it is, the exchange reports the abort instead).
    fn left_without_abort(&self) -> bool {
        if let Err(e) = self.drain_arrived() {
            self.stall(&e.to_string());
        }
        self.state.borrow().aborted.is_none()
    }

    /// A failure this rank found itself while waiting (a malformed message):
    /// in library mode the universe is aborted with it first, so no peer
    /// waits for this rank forever.
    fn broken(&self, e: TransportError) -> TransportError {
        if matches!(self.on_abort, OnAbort::Frames { .. }) {
            self.abort(&format!("rank {}: {e}", self.rank));
        }
        e
    }

    /// Makes progress until `ready` yields a value, or `deadline` passes.
    /// `from`: the only rank the awaited message can come from, if one (its
    /// `TAG_FIN` then means the message never comes).
    fn wait<T>(
        &self,
        deadline: Option<(Instant, Duration)>,
        from: Option<usize>,
        mut ready: impl FnMut() -> Option<T>,
    ) -> Result<T, TransportError> {
        let mut backoff = Backoff::default();
        loop {
            self.check_abort()?;
            if let Some(v) = ready() {
                return Ok(v);
            }
            if let Some(rank) = from.filter(|&r| self.state.borrow().fins[r]) {
                // Why the peer left may already be here: an abort frame from
                // another rank that MPI has not matched yet.
                self.drain_arrived().map_err(|e| self.broken(e))?;
                self.check_abort()?;
                return Err(TransportError::PeerLeft { rank });
            }
            if let Some((d, t)) = deadline {
                if Instant::now() >= d {
                    return Err(TransportError::Timeout(t));
                }
            }
            match self.progress() {
                Ok(true) => backoff.reset(),
                Ok(false) => backoff.snooze(self.sending()),
                Err(e) => return Err(self.broken(e)),
            }
        }
    }

    /// True while messages posted by this rank are in flight.
    fn sending(&self) -> bool {
        !self.state.borrow().posted.is_empty()
    }

    /// Ends the process: requests in flight cannot be abandoned safely.
    /// `MPI_Abort` on this universe's communicator (Open MPI ends every
    /// process of the job).
    fn die(&self, reason: &str) -> ! {
        // One write, so launcher output tagging cannot split the message.
        let text = format!("uni20: rank {} aborting the job: {reason}\n", self.rank);
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), text.as_bytes());
        // Temporary outputs of this rank go before the process does.
        crate::cleanup::run_cleanups();
        self.comm.abort(70)
    }

    /// A wait with requests in flight cannot succeed (`why`). Standalone:
    /// the process ends. Library mode: the universe is aborted and the wait
    /// goes on until its requests complete (the peers keep receiving).
    fn stall(&self, why: &str) {
        match self.on_abort {
            OnAbort::EndProcess => self.die(why),
            OnAbort::Frames { .. } => self.abort(why),
        }
    }

    /// After an abort, a wait that still has requests in flight gives up
    /// (and ends the process) once the abort timeout has passed.
    fn check_abort_deadline(&self, what: &str) {
        let OnAbort::Frames { timeout } = self.on_abort else {
            return;
        };
        let overdue = match &self.state.borrow().aborted {
            Some((_, at)) => at.elapsed() > timeout,
            None => false,
        };
        if overdue {
            self.die(&format!(
                "{what} did not complete within {timeout:?} after the universe was aborted \
                 (UNI20_ABORT_TIMEOUT): a peer no longer receives"
            ));
        }
    }

    fn never_sent(&self, tag: Tag) -> TransportError {
        TransportError::Aborted(format!(
            "rank {} waits for a message to itself (tag {tag}) that was never sent",
            self.rank
        ))
    }

    /// Posts `bytes` to `dest` without the abort check (abort and fin frames).
    fn post_raw(&self, dest: usize, tag: Tag, bytes: Arc<[u8]>) {
        // SAFETY: the requests read from the `Arc`'s heap allocation, which
        // neither moves nor is freed while `Posted::_payload` holds a clone.
        // A `Posted` is dropped only after every one of its requests has
        // completed (`retire_sends`), and the transport completes every
        // posted message before it is dropped (or the process is aborted).
        let view: &'static [u8] = unsafe { &*Arc::as_ptr(&bytes) };
        self.traffic.sent(tag, view.len());
        let process = self.comm.process_at_rank(dest as i32);
        // Not tested here: testing a request still in flight runs MPI's
        // progress engine, which may yield the core between two posts (an
        // abort posted to every rank would reach the last ones late).
        let requests = parts(view, self.chunk_bytes)
            .map(|part| process.immediate_send_with_tag(StaticScope, part, tag))
            .collect();
        self.state.borrow_mut().posted.push(Posted {
            requests,
            _payload: bytes,
        });
    }
}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn kind(&self) -> TransportKind {
        TransportKind::Mpi
    }
    fn send(&self, dest: usize, tag: Tag, bytes: &[u8]) -> Result<(), TransportError> {
        self.send_polling(dest, tag, bytes, &mut || Ok(()))
    }
    fn post(&self, dest: usize, tag: Tag, bytes: Arc<[u8]>) -> Result<(), TransportError> {
        self.check_rank(dest)?;
        self.check_abort()?;
        if dest == self.rank {
            let mut st = self.state.borrow_mut();
            self.deliver(&mut st, dest, tag, bytes.to_vec());
            return Ok(());
        }
        self.post_raw(dest, tag, bytes);
        // Only retire: receiving is for waits, and a probe that finds
        // nothing may yield the core before the caller's next send.
        self.retire_sends();
        Ok(())
    }
    fn flush(&self) -> Result<(), TransportError> {
        self.wait(None, None, || self.state.borrow().posted.is_empty().then_some(()))
    }
    fn recv(&self, src: usize, tag: Tag) -> Result<Vec<u8>, TransportError> {
        self.check_rank(src)?;
        if src == self.rank {
            self.check_abort()?;
            return self
                .take(Some(src), tag)
                .map(|(_, b)| b)
                .ok_or_else(|| self.never_sent(tag));
        }
        self.wait(None, Some(src), || self.take(Some(src), tag).map(|(_, b)| b))
    }
    fn recv_any(&self, tag: Tag) -> Result<(usize, Vec<u8>), TransportError> {
        self.wait(None, None, || self.take(None, tag))
    }
    fn recv_any_timeout(&self, tag: Tag, timeout: Duration) -> Result<(usize, Vec<u8>), TransportError> {
        self.wait(Some((Instant::now() + timeout, timeout)), None, || self.take(None, tag))
    }
    fn try_recv(&self, src: Option<usize>, tag: Tag) -> Result<Option<(usize, Vec<u8>)>, TransportError> {
        if let Some(s) = src {
            self.check_rank(s)?;
        }
        self.check_abort()?;
        if let Some(m) = self.take(src, tag) {
            return Ok(Some(m));
        }
        // Everything that has arrived, one message at a time, until the
        // wanted one is among it.
        while self.progress().map_err(|e| self.broken(e))? {
            self.check_abort()?;
            if let Some(m) = self.take(src, tag) {
                return Ok(Some(m));
            }
        }
        self.check_abort()?;
        Ok(self.take(src, tag))
    }
    fn send_polling(
        &self,
        dest: usize,
        tag: Tag,
        bytes: &[u8],
        poll: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), TransportError> {
        let d = self.check_rank(dest)?;
        self.check_abort()?;
        if dest == self.rank {
            let mut st = self.state.borrow_mut();
            self.deliver(&mut st, dest, tag, bytes.to_vec());
            return Ok(());
        }
        poll().map_err(TransportError::Aborted)?;
        self.traffic.sent(tag, bytes.len());
        let process = self.comm.process_at_rank(d);
        let mut failure: Option<String> = None;
        mpi::request::scope(|scope| {
            let mut requests: Vec<_> = parts(bytes, self.chunk_bytes)
                .map(|part| process.immediate_send_with_tag(scope, part, tag))
                .collect();
            let mut backoff = Backoff::default();
            loop {
                requests = pending(requests);
                if requests.is_empty() {
                    break;
                }
                if self.state.borrow().aborted.is_some() {
                    self.check_abort_deadline("a send");
                } else if let Err(why) = poll() {
                    // The requests cannot be cancelled safely: standalone,
                    // end the job; library mode, abort the universe and let
                    // the peer receive them.
                    self.stall(&why);
                    failure.get_or_insert(why);
                }
                match self.progress() {
                    Ok(true) => backoff.reset(),
                    Ok(false) => backoff.snooze(true),
                    Err(e) => self.stall(&e.to_string()),
                }
            }
        });
        match failure {
            Some(why) => Err(TransportError::Aborted(why)),
            None => self.check_abort(),
        }
    }
    fn exchange(
        &self,
        outgoing: &[(usize, Tag, &[u8])],
        incoming: &[(usize, Tag)],
    ) -> Result<Vec<Vec<u8>>, TransportError> {
        let me = self.rank;
        for (dest, _, _) in outgoing {
            self.check_rank(*dest)?;
        }
        for (src, _) in incoming {
            self.check_rank(*src)?;
        }
        self.check_abort()?;
        {
            let mut st = self.state.borrow_mut();
            for (_, tag, bytes) in outgoing.iter().filter(|(dest, _, _)| *dest == me) {
                self.deliver(&mut st, me, *tag, bytes.to_vec());
            }
            // Every message this rank expects from itself must exist by now.
            let mut needed: HashMap<Tag, usize> = HashMap::new();
            for (_, tag) in incoming.iter().filter(|(src, _)| *src == me) {
                *needed.entry(*tag).or_default() += 1;
            }
            for (tag, n) in needed {
                if st.inbox.get(&(me, tag)).map_or(0, VecDeque::len) < n {
                    return Err(self.never_sent(tag));
                }
            }
        }
        mpi::request::scope(|scope| {
            let mut requests = Vec::new();
            for (dest, tag, bytes) in outgoing.iter().filter(|(dest, _, _)| *dest != me) {
                self.traffic.sent(*tag, bytes.len());
                let process = self.comm.process_at_rank(*dest as i32);
                requests.extend(
                    parts(bytes, self.chunk_bytes).map(|part| process.immediate_send_with_tag(scope, part, *tag)),
                );
            }
            let mut received = Vec::with_capacity(incoming.len());
            let mut backoff = Backoff::default();
            loop {
                requests = pending(requests);
                if let Err(aborted) = self.check_abort() {
                    // Stop receiving; only the sends must complete.
                    if requests.is_empty() {
                        return Err(aborted);
                    }
                    self.check_abort_deadline("an exchange");
                } else {
                    while let Some(&(src, tag)) = incoming.get(received.len()) {
                        match self.take(Some(src), tag) {
                            Some((_, bytes)) => received.push(bytes),
                            None => break,
                        }
                    }
                    if requests.is_empty() && received.len() == incoming.len() {
                        return Ok(received);
                    }
                    if let Some(&(src, _)) = incoming.get(received.len()) {
                        if src != me && self.state.borrow().fins[src] && self.left_without_abort() {
                            // The peer has left: the message never comes.
                            self.stall(&format!(
                                "rank {me} waits in an exchange for rank {src}, which has left the universe"
                            ));
                        }
                    }
                }
                match self.progress() {
                    Ok(true) => backoff.reset(),
                    Ok(false) => backoff.snooze(!requests.is_empty() || self.sending()),
                    // Requests in flight cannot be abandoned: standalone, end
                    // the job; library mode, abort and complete them.
                    Err(e) => self.stall(&e.to_string()),
                }
            }
        })
    }
    fn abort(&self, reason: &str) {
        match self.on_abort {
            OnAbort::EndProcess => self.die(reason),
            OnAbort::Frames { .. } => self.abort_frames(reason),
        }
    }
    fn aborted(&self) -> Option<String> {
        self.state.borrow().aborted.as_ref().map(|(why, _)| why.clone())
    }
    fn traffic(&self) -> crate::transport::Traffic {
        self.traffic.snapshot()
    }
}
