//! The MPI transport (feature `mpi`): one rank per process, rsmpi 0.8.
//!
//! Only the thread that initialised MPI communicates (`MPI_THREAD_FUNNELED`);
//! local kernels may use other threads. Nothing here depends on MPI
//! buffering a message: every send is nonblocking (`MPI_Isend`), and every
//! wait (a blocking send, a receive, an exchange, a flush) runs a progress
//! loop that tests its own requests and receives *every* message that has
//! arrived, whatever its source and tag, into a local inbox that later
//! receives take from. So two ranks that send each other large frames at the
//! same time (the root a command envelope, a worker a reply) both complete:
//! each receives the other's frame while it waits. Payloads larger than the
//! chunk size travel as several messages ([`crate::chunk`]); MPI counts a
//! message in `i32`, so no message may reach 2 GiB. Messages to one's own
//! rank go straight to the inbox.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use mpi::request::{Request, Scope, StaticScope};
use mpi::topology::{Communicator, SimpleCommunicator};

use crate::chunk::{parts, Reassembly};
use crate::config::{DEFAULT_CHUNK_BYTES, MAX_CHUNK_BYTES, MIN_CHUNK_BYTES};
use crate::transport::{Tag, Transport, TransportError};

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
}

/// How long an idle wait spins before it sleeps.
struct Backoff {
    /// When the wait last made progress (or started).
    active: Instant,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { active: Instant::now() }
    }
}

impl Backoff {
    fn reset(&mut self) {
        self.active = Instant::now();
    }

    /// Between two polls of a wait that saw nothing complete. `sending`:
    /// this rank has messages in flight, which MPI moves only while this
    /// rank calls into it, so it only yields the core (as Open MPI's own
    /// blocking calls do with `mpi_yield_when_idle`). Otherwise it yields
    /// for the first millisecond without progress, then sleeps 50 us per
    /// poll, and after a second without traffic 500 us: an idle rank costs
    /// almost no CPU, and waiting ranks do not starve working ones when
    /// ranks outnumber cores.
    fn snooze(&mut self, sending: bool) {
        let idle = self.active.elapsed();
        if sending || idle < Duration::from_millis(1) {
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

/// One rank's endpoint of the MPI world communicator.
pub struct MpiTransport {
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
    chunk_bytes: usize,
    state: RefCell<State>,
}

impl MpiTransport {
    /// Wraps the world communicator of an initialised MPI universe, with the
    /// default chunk size ([`DEFAULT_CHUNK_BYTES`]).
    pub fn new(world: SimpleCommunicator) -> MpiTransport {
        MpiTransport::with_chunk_bytes(world, DEFAULT_CHUNK_BYTES)
    }

    /// Like [`MpiTransport::new`] with messages of at most `chunk_bytes`
    /// bytes (clamped into [`MIN_CHUNK_BYTES`]`..=`[`MAX_CHUNK_BYTES`]).
    /// Every rank must use the same value.
    pub fn with_chunk_bytes(world: SimpleCommunicator, chunk_bytes: usize) -> MpiTransport {
        MpiTransport {
            rank: world.rank() as usize,
            size: world.size() as usize,
            world,
            chunk_bytes: chunk_bytes.clamp(MIN_CHUNK_BYTES, MAX_CHUNK_BYTES),
            state: RefCell::new(State::default()),
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

    fn deliver(&self, st: &mut State, src: usize, tag: Tag, bytes: Vec<u8>) {
        st.arrivals += 1;
        let n = st.arrivals;
        st.inbox.entry((src, tag)).or_default().push_back((n, bytes));
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

    /// One round of progress: retires completed posted sends and receives
    /// every message that has arrived. True if anything happened.
    fn progress(&self) -> Result<bool, TransportError> {
        let mut moved = false;
        {
            let mut st = self.state.borrow_mut();
            if !st.posted.is_empty() {
                for mut p in std::mem::take(&mut st.posted) {
                    let before = p.requests.len();
                    p.requests = pending(p.requests);
                    moved |= p.requests.len() < before;
                    if !p.requests.is_empty() {
                        st.posted.push(p);
                    }
                }
            }
        }
        while let Some(probed) = self.world.any_process().immediate_matched_probe() {
            let (part, status) = probed.matched_receive_vec::<u8>();
            let (src, tag) = (status.source_rank() as usize, status.tag());
            let mut st = self.state.borrow_mut();
            if let Some(whole) = st.reassembly.accept(src, tag, part, self.chunk_bytes)? {
                self.deliver(&mut st, src, tag, whole);
            }
            moved = true;
        }
        Ok(moved)
    }

    /// Makes progress until `ready` yields a value, or `deadline` passes.
    fn wait<T>(
        &self,
        deadline: Option<(Instant, Duration)>,
        mut ready: impl FnMut() -> Option<T>,
    ) -> Result<T, TransportError> {
        let mut backoff = Backoff::default();
        loop {
            if let Some(v) = ready() {
                return Ok(v);
            }
            if let Some((d, t)) = deadline {
                if Instant::now() >= d {
                    return Err(TransportError::Timeout(t));
                }
            }
            if self.progress()? {
                backoff.reset();
            } else {
                backoff.snooze(self.sending());
            }
        }
    }

    /// True while messages posted by this rank are in flight.
    fn sending(&self) -> bool {
        !self.state.borrow().posted.is_empty()
    }

    /// Ends the job: requests in flight cannot be abandoned safely.
    fn die(&self, reason: &str) -> ! {
        // One write, so launcher output tagging cannot split the message.
        let text = format!("uni20: rank {} aborting the job: {reason}\n", self.rank);
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), text.as_bytes());
        // Temporary outputs of this rank go before the process does.
        crate::cleanup::run_cleanups();
        self.world.abort(70)
    }

    fn never_sent(&self, tag: Tag) -> TransportError {
        TransportError::Aborted(format!(
            "rank {} waits for a message to itself (tag {tag}) that was never sent",
            self.rank
        ))
    }
}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn kind(&self) -> &'static str {
        "mpi"
    }
    fn send(&self, dest: usize, tag: Tag, bytes: &[u8]) -> Result<(), TransportError> {
        self.send_polling(dest, tag, bytes, &mut || Ok(()))
    }
    fn post(&self, dest: usize, tag: Tag, bytes: Arc<[u8]>) -> Result<(), TransportError> {
        let d = self.check_rank(dest)?;
        if dest == self.rank {
            let mut st = self.state.borrow_mut();
            self.deliver(&mut st, dest, tag, bytes.to_vec());
            return Ok(());
        }
        // SAFETY: the requests read from the `Arc`'s heap allocation, which
        // neither moves nor is freed while `Posted::_payload` holds a clone.
        // A `Posted` is dropped only after every one of its requests has
        // completed (`progress`), and the transport flushes every posted
        // message before it is dropped (or the job is aborted).
        let view: &'static [u8] = unsafe { &*Arc::as_ptr(&bytes) };
        let process = self.world.process_at_rank(d);
        let requests = parts(view, self.chunk_bytes)
            .map(|part| process.immediate_send_with_tag(StaticScope, part, tag))
            .collect();
        self.state.borrow_mut().posted.push(Posted {
            requests,
            _payload: bytes,
        });
        self.progress().map(|_| ())
    }
    fn flush(&self) -> Result<(), TransportError> {
        self.wait(None, || self.state.borrow().posted.is_empty().then_some(()))
    }
    fn recv(&self, src: usize, tag: Tag) -> Result<Vec<u8>, TransportError> {
        self.check_rank(src)?;
        if src == self.rank {
            return self
                .take(Some(src), tag)
                .map(|(_, b)| b)
                .ok_or_else(|| self.never_sent(tag));
        }
        self.wait(None, || self.take(Some(src), tag).map(|(_, b)| b))
    }
    fn recv_any(&self, tag: Tag) -> Result<(usize, Vec<u8>), TransportError> {
        self.wait(None, || self.take(None, tag))
    }
    fn recv_any_timeout(&self, tag: Tag, timeout: Duration) -> Result<(usize, Vec<u8>), TransportError> {
        self.wait(Some((Instant::now() + timeout, timeout)), || self.take(None, tag))
    }
    fn try_recv(&self, src: Option<usize>, tag: Tag) -> Result<Option<(usize, Vec<u8>)>, TransportError> {
        if let Some(s) = src {
            self.check_rank(s)?;
        }
        if let Some(m) = self.take(src, tag) {
            return Ok(Some(m));
        }
        self.progress()?;
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
        if dest == self.rank {
            let mut st = self.state.borrow_mut();
            self.deliver(&mut st, dest, tag, bytes.to_vec());
            return Ok(());
        }
        poll().map_err(TransportError::Aborted)?;
        let process = self.world.process_at_rank(d);
        mpi::request::scope(|scope| {
            let mut requests: Vec<_> = parts(bytes, self.chunk_bytes)
                .map(|part| process.immediate_send_with_tag(scope, part, tag))
                .collect();
            let mut backoff = Backoff::default();
            loop {
                requests = pending(requests);
                if requests.is_empty() {
                    return Ok(());
                }
                if let Err(why) = poll() {
                    // The requests cannot be cancelled safely: end the job.
                    self.die(&why);
                }
                match self.progress() {
                    Ok(true) => backoff.reset(),
                    Ok(false) => backoff.snooze(true),
                    Err(e) => self.die(&e.to_string()),
                }
            }
        })
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
                let process = self.world.process_at_rank(*dest as i32);
                requests.extend(
                    parts(bytes, self.chunk_bytes).map(|part| process.immediate_send_with_tag(scope, part, *tag)),
                );
            }
            let mut received = Vec::with_capacity(incoming.len());
            let mut backoff = Backoff::default();
            loop {
                requests = pending(requests);
                while let Some(&(src, tag)) = incoming.get(received.len()) {
                    match self.take(Some(src), tag) {
                        Some((_, bytes)) => received.push(bytes),
                        None => break,
                    }
                }
                if requests.is_empty() && received.len() == incoming.len() {
                    return Ok(received);
                }
                match self.progress() {
                    Ok(true) => backoff.reset(),
                    Ok(false) => backoff.snooze(!requests.is_empty() || self.sending()),
                    // Requests in flight cannot be abandoned: end the job.
                    Err(e) => self.die(&e.to_string()),
                }
            }
        })
    }
    fn abort(&self, reason: &str) {
        self.die(reason)
    }
}

impl Drop for MpiTransport {
    /// Completes every posted message before the communicator may be
    /// finalised (a peer may still be receiving the last replies or the
    /// shutdown frames).
    fn drop(&mut self) {
        if !self.state.borrow().posted.is_empty() {
            if let Err(e) = self.flush() {
                self.die(&format!("flushing posted messages: {e}"));
            }
        }
    }
}
