//! A scripted in-memory [`Transport`] for unit tests of the root: the test
//! plays the workers by queueing the messages they "send" to the root, and
//! inspects every message the root sent. Blocking receives never block: a
//! receive the script cannot satisfy fails with
//! [`TransportError::Aborted`], so a broken protocol fails a test instead of
//! hanging it.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::diag::{Diagnostic, HandlerError};
use crate::envelope::{decode_exact, encode, Envelope};
use crate::protocol::{Control, Reply};
use crate::transport::{Tag, Transport, TransportError, TransportKind};

/// One message the root sent.
#[derive(Clone, Debug)]
pub(crate) struct Sent {
    pub(crate) dest: usize,
    pub(crate) tag: Tag,
    pub(crate) bytes: Vec<u8>,
    /// How many scripted messages the root had received when it sent this.
    pub(crate) after_received: usize,
}

impl Sent {
    /// The command frame, decoded.
    pub(crate) fn control(&self) -> Control {
        decode_exact(&self.bytes, "control frame").expect("a control frame")
    }

    /// The op_id of a `Control::Run` frame.
    pub(crate) fn op_id(&self) -> Option<u64> {
        match self.control() {
            Control::Run { envelope, .. } => Some(Envelope::decode(&envelope).expect("an envelope").op_id),
            Control::Shutdown => None,
        }
    }
}

/// Rank 0's end of a universe whose other ranks are a script.
pub(crate) struct Scripted {
    size: usize,
    incoming: RefCell<VecDeque<(usize, Tag, Vec<u8>)>>,
    received: Cell<usize>,
    sent: RefCell<Vec<Sent>>,
    polls: Cell<usize>,
    aborted: RefCell<Option<String>>,
    traffic: crate::transport::TrafficCounter,
}

/// Polls of `try_recv` after which the script declares the root stuck.
const MAX_POLLS: usize = 100_000;

impl Scripted {
    pub(crate) fn new(size: usize) -> Scripted {
        Scripted {
            size,
            incoming: RefCell::new(VecDeque::new()),
            received: Cell::new(0),
            sent: RefCell::new(Vec::new()),
            polls: Cell::new(0),
            aborted: RefCell::new(None),
            traffic: Default::default(),
        }
    }

    /// Queues a message from `src` to the root.
    pub(crate) fn deliver(&self, src: usize, tag: Tag, bytes: Vec<u8>) {
        self.incoming.borrow_mut().push_back((src, tag, bytes));
    }

    /// Queues `src`'s successful reply to `op_id` with the encoded `reply`.
    pub(crate) fn reply<T: serde::Serialize>(&self, src: usize, op_id: u64, reply: &T) {
        self.reply_busy(src, op_id, reply, 0);
    }

    /// As [`Scripted::reply`], reporting `busy_ns` nanoseconds of handler time.
    pub(crate) fn reply_busy<T: serde::Serialize>(&self, src: usize, op_id: u64, reply: &T, busy_ns: u64) {
        let r = Reply {
            op_id,
            outcome: Ok(encode(reply).into()),
            busy_ns,
        };
        self.deliver(src, crate::transport::TAG_REPLY, encode(&r));
    }

    /// Queues `src`'s failure reply to `op_id` of `wire_name`.
    pub(crate) fn fail(&self, src: usize, op_id: u64, wire_name: &str, why: &str) {
        let d = Diagnostic {
            rank: src,
            op_id,
            debug_name: wire_name.into(),
            wire_name: wire_name.into(),
            command_id: crate::command_id(wire_name),
            schema_version: 1,
            location: "scripted".into(),
            error: HandlerError::msg(why),
        };
        let r = Reply {
            op_id,
            outcome: Err(Box::new(d)),
            busy_ns: 0,
        };
        self.deliver(src, crate::transport::TAG_REPLY, encode(&r));
    }

    /// Every message the root sent, in order.
    pub(crate) fn sent(&self) -> Vec<Sent> {
        self.sent.borrow().clone()
    }

    /// The reason the root aborted the job, if it did.
    pub(crate) fn aborted(&self) -> Option<String> {
        self.aborted.borrow().clone()
    }

    /// Messages queued and not yet received by the root.
    pub(crate) fn unread(&self) -> usize {
        self.incoming.borrow().len()
    }

    fn check(&self) -> Result<(), TransportError> {
        match &*self.aborted.borrow() {
            Some(r) => Err(TransportError::Aborted(r.clone())),
            None => Ok(()),
        }
    }

    fn take(&self, src: Option<usize>, tag: Tag) -> Option<(usize, Vec<u8>)> {
        let mut q = self.incoming.borrow_mut();
        let pos = q
            .iter()
            .position(|(s, t, _)| *t == tag && src.is_none_or(|x| x == *s))?;
        let (s, t, b) = q.remove(pos)?;
        self.received.set(self.received.get() + 1);
        if s != 0 {
            self.traffic.received(t, b.len());
        }
        Some((s, b))
    }

    fn starved(&self, tag: Tag) -> TransportError {
        TransportError::Aborted(format!(
            "script: the root waits for a message with tag {tag} that the script never sends"
        ))
    }
}

impl Transport for Scripted {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        self.size
    }
    fn kind(&self) -> TransportKind {
        // A scripted transport stands in for the in-process one in unit tests.
        TransportKind::InProcess
    }
    fn send(&self, dest: usize, tag: Tag, bytes: &[u8]) -> Result<(), TransportError> {
        self.check()?;
        if dest >= self.size {
            return Err(TransportError::BadRank {
                rank: dest,
                size: self.size,
            });
        }
        if dest != 0 {
            self.traffic.sent(tag, bytes.len());
        }
        self.sent.borrow_mut().push(Sent {
            dest,
            tag,
            bytes: bytes.to_vec(),
            after_received: self.received.get(),
        });
        Ok(())
    }
    fn post(&self, dest: usize, tag: Tag, bytes: Arc<[u8]>) -> Result<(), TransportError> {
        self.send(dest, tag, &bytes)
    }
    fn recv(&self, src: usize, tag: Tag) -> Result<Vec<u8>, TransportError> {
        self.check()?;
        self.take(Some(src), tag)
            .map(|(_, b)| b)
            .ok_or_else(|| self.starved(tag))
    }
    fn recv_any(&self, tag: Tag) -> Result<(usize, Vec<u8>), TransportError> {
        self.check()?;
        self.take(None, tag).ok_or_else(|| self.starved(tag))
    }
    fn recv_any_timeout(&self, tag: Tag, timeout: Duration) -> Result<(usize, Vec<u8>), TransportError> {
        self.check()?;
        self.take(None, tag).ok_or(TransportError::Timeout(timeout))
    }
    fn exchange(
        &self,
        outgoing: &[(usize, Tag, &[u8])],
        incoming: &[(usize, Tag)],
    ) -> Result<Vec<Vec<u8>>, TransportError> {
        for (d, t, b) in outgoing {
            self.send(*d, *t, b)?;
        }
        incoming.iter().map(|(s, t)| self.recv(*s, *t)).collect()
    }
    fn try_recv(&self, src: Option<usize>, tag: Tag) -> Result<Option<(usize, Vec<u8>)>, TransportError> {
        self.check()?;
        let polls = self.polls.get() + 1;
        self.polls.set(polls);
        if polls > MAX_POLLS {
            return Err(TransportError::Aborted("script: the root polls forever".into()));
        }
        Ok(self.take(src, tag))
    }
    fn traffic(&self) -> crate::transport::Traffic {
        self.traffic.snapshot()
    }
    fn abort(&self, reason: &str) {
        let mut a = self.aborted.borrow_mut();
        if a.is_none() {
            *a = Some(reason.to_string());
        }
    }
}
