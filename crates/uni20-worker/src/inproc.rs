//! The in-process universe: ranks are threads, links are mailboxes.
//!
//! Every send appends to the destination's mailbox (an unbounded queue) and
//! returns at once, so a send never waits on its receiver; messages are kept
//! whole, whatever their size. A shared abort flag wakes every waiting rank
//! (fail-stop), and a rank that has left the universe is marked departed, so
//! a peer that waits for a message from it fails with
//! [`TransportError::PeerLeft`] instead of waiting forever.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::transport::{Tag, Transport, TransportError, TransportKind};

struct Message {
    src: usize,
    tag: Tag,
    bytes: Vec<u8>,
}

#[derive(Default)]
struct Mailbox {
    queue: Mutex<Vec<Message>>,
    cv: Condvar,
}

/// State shared by every rank of one in-process universe.
pub(crate) struct Shared {
    mailboxes: Vec<Mailbox>,
    aborted: Mutex<Option<String>>,
    departed: Vec<AtomicBool>,
}

impl Shared {
    pub(crate) fn new(size: usize) -> Arc<Shared> {
        Arc::new(Shared {
            mailboxes: (0..size).map(|_| Mailbox::default()).collect(),
            aborted: Mutex::new(None),
            departed: (0..size).map(|_| AtomicBool::new(false)).collect(),
        })
    }
}

/// One rank's endpoint of an in-process universe.
pub(crate) struct InProcessTransport {
    rank: usize,
    shared: Arc<Shared>,
    traffic: crate::transport::TrafficCounter,
}

impl InProcessTransport {
    pub(crate) fn new(rank: usize, shared: Arc<Shared>) -> InProcessTransport {
        InProcessTransport {
            rank,
            shared,
            traffic: Default::default(),
        }
    }

    /// Marks this rank as gone: it sends nothing more, and peers waiting for
    /// a message from it are woken with [`TransportError::PeerLeft`].
    pub(crate) fn depart(&self) {
        self.shared.departed[self.rank].store(true, Ordering::SeqCst);
        for mb in &self.shared.mailboxes {
            let _guard = mb.queue.lock();
            mb.cv.notify_all();
        }
    }

    fn check_abort(&self) -> Result<(), TransportError> {
        match &*self.shared.aborted.lock() {
            Some(r) => Err(TransportError::Aborted(r.clone())),
            None => Ok(()),
        }
    }

    /// Takes the first message that `matches`, waiting for it; `from`: the
    /// only rank it can come from, if one.
    fn take(
        &self,
        matches: impl Fn(&Message) -> bool,
        from: Option<usize>,
        deadline: Option<(Instant, Duration)>,
    ) -> Result<(usize, Vec<u8>), TransportError> {
        let mb = &self.shared.mailboxes[self.rank];
        let mut q = mb.queue.lock();
        loop {
            if let Some(pos) = q.iter().position(&matches) {
                let m = q.remove(pos);
                if m.src != self.rank {
                    self.traffic.received(m.tag, m.bytes.len());
                }
                return Ok((m.src, m.bytes));
            }
            self.check_abort()?;
            if let Some(rank) = from.filter(|&r| r != self.rank && self.shared.departed[r].load(Ordering::SeqCst)) {
                return Err(TransportError::PeerLeft { rank });
            }
            let wait = Duration::from_millis(50);
            if let Some((d, t)) = deadline {
                let now = Instant::now();
                if now >= d {
                    return Err(TransportError::Timeout(t));
                }
                mb.cv.wait_for(&mut q, wait.min(d - now));
            } else {
                mb.cv.wait_for(&mut q, wait);
            }
        }
    }
}

impl Transport for InProcessTransport {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.shared.mailboxes.len()
    }
    fn kind(&self) -> TransportKind {
        TransportKind::InProcess
    }
    fn send(&self, dest: usize, tag: Tag, bytes: &[u8]) -> Result<(), TransportError> {
        self.check_abort()?;
        let mb = self.shared.mailboxes.get(dest).ok_or(TransportError::BadRank {
            rank: dest,
            size: self.size(),
        })?;
        if dest != self.rank {
            self.traffic.sent(tag, bytes.len());
        }
        mb.queue.lock().push(Message {
            src: self.rank,
            tag,
            bytes: bytes.to_vec(),
        });
        mb.cv.notify_all();
        Ok(())
    }
    fn post(&self, dest: usize, tag: Tag, bytes: Arc<[u8]>) -> Result<(), TransportError> {
        // A mailbox never blocks: posting is sending.
        self.send(dest, tag, &bytes)
    }
    fn recv(&self, src: usize, tag: Tag) -> Result<Vec<u8>, TransportError> {
        if src >= self.size() {
            return Err(TransportError::BadRank {
                rank: src,
                size: self.size(),
            });
        }
        self.take(|m| m.src == src && m.tag == tag, Some(src), None)
            .map(|(_, b)| b)
    }
    fn recv_any(&self, tag: Tag) -> Result<(usize, Vec<u8>), TransportError> {
        self.take(|m| m.tag == tag, None, None)
    }
    fn recv_any_timeout(&self, tag: Tag, timeout: Duration) -> Result<(usize, Vec<u8>), TransportError> {
        self.take(|m| m.tag == tag, None, Some((Instant::now() + timeout, timeout)))
    }
    fn try_recv(&self, src: Option<usize>, tag: Tag) -> Result<Option<(usize, Vec<u8>)>, TransportError> {
        self.check_abort()?;
        let mut q = self.shared.mailboxes[self.rank].queue.lock();
        Ok(q.iter()
            .position(|m| m.tag == tag && src.is_none_or(|s| s == m.src))
            .map(|pos| {
                let m = q.remove(pos);
                if m.src != self.rank {
                    self.traffic.received(m.tag, m.bytes.len());
                }
                (m.src, m.bytes)
            }))
    }
    fn exchange(
        &self,
        outgoing: &[(usize, Tag, &[u8])],
        incoming: &[(usize, Tag)],
    ) -> Result<Vec<Vec<u8>>, TransportError> {
        for (dest, tag, bytes) in outgoing {
            self.send(*dest, *tag, bytes)?;
        }
        incoming.iter().map(|(src, tag)| self.recv(*src, *tag)).collect()
    }
    fn aborted(&self) -> Option<String> {
        self.shared.aborted.lock().clone()
    }
    fn traffic(&self) -> crate::transport::Traffic {
        self.traffic.snapshot()
    }
    fn abort(&self, reason: &str) {
        {
            let mut a = self.shared.aborted.lock();
            if a.is_none() {
                *a = Some(reason.to_string());
            }
        }
        for mb in &self.shared.mailboxes {
            let _guard = mb.queue.lock();
            mb.cv.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_by_source_and_tag_and_aborts() {
        let shared = Shared::new(3);
        let t0 = InProcessTransport::new(0, shared.clone());
        let t1 = InProcessTransport::new(1, shared.clone());
        let t2 = InProcessTransport::new(2, shared.clone());
        t1.send(0, 7, b"one").unwrap();
        t2.send(0, 7, b"two").unwrap();
        t2.send(0, 8, b"eight").unwrap();
        assert_eq!(t0.recv(2, 8).unwrap(), b"eight");
        assert_eq!(t0.recv(2, 7).unwrap(), b"two");
        assert_eq!(t0.recv_any(7).unwrap(), (1, b"one".to_vec()));
        assert_eq!(
            t0.recv_any_timeout(7, Duration::from_millis(20)),
            Err(TransportError::Timeout(Duration::from_millis(20)))
        );
        let h = std::thread::spawn(move || t0.recv(1, 9));
        std::thread::sleep(Duration::from_millis(30));
        t1.abort("boom");
        assert_eq!(h.join().unwrap(), Err(TransportError::Aborted("boom".into())));
    }

    #[test]
    fn traffic_is_counted_by_class_on_both_ends_and_self_messages_are_not() {
        use crate::transport::{data_tag, Flow, TAG_CMD, TAG_COLL, TAG_ROOT_DATA};
        let shared = Shared::new(2);
        let t0 = InProcessTransport::new(0, shared.clone());
        let t1 = InProcessTransport::new(1, shared.clone());
        t0.send(1, TAG_CMD, &[0; 10]).unwrap();
        t0.post(1, TAG_CMD, Arc::from(vec![0u8; 5])).unwrap();
        t0.send(1, TAG_ROOT_DATA, &[0; 300]).unwrap();
        t0.exchange(
            &[(1, data_tag(3), &[0u8; 1000][..]), (0, data_tag(4), &[0u8; 77][..])],
            &[(0, data_tag(4))],
        )
        .unwrap();
        t1.send(0, TAG_COLL, &[0; 7]).unwrap();
        assert_eq!(t1.recv(0, TAG_CMD).unwrap().len(), 10);
        assert_eq!(t1.try_recv(Some(0), TAG_CMD).unwrap().unwrap().1.len(), 5);
        assert_eq!(t1.recv_any(TAG_ROOT_DATA).unwrap().1.len(), 300);
        assert_eq!(t1.recv(0, data_tag(3)).unwrap().len(), 1000);
        let a = t0.traffic();
        let sent = |m, b| Flow {
            messages_sent: m,
            bytes_sent: b,
            ..Flow::default()
        };
        assert_eq!(a.control, sent(2, 15));
        assert_eq!(a.root_data, sent(1, 300));
        assert_eq!(a.block_data, sent(1, 1000), "the message to itself is not counted");
        assert_eq!(a.collective, Flow::default(), "not received yet");
        let b = t1.traffic();
        assert_eq!((b.control.messages_received, b.control.bytes_received), (2, 15));
        assert_eq!((b.root_data.messages_received, b.root_data.bytes_received), (1, 300));
        assert_eq!((b.block_data.messages_received, b.block_data.bytes_received), (1, 1000));
        assert_eq!((b.collective.messages_sent, b.collective.bytes_sent), (1, 7));
        assert_eq!(b.total_bytes(), 15 + 300 + 1000 + 7);
    }

    #[test]
    fn waiting_for_a_departed_rank_fails_but_its_last_messages_are_kept() {
        let shared = Shared::new(2);
        let t0 = InProcessTransport::new(0, shared.clone());
        let t1 = InProcessTransport::new(1, shared.clone());
        t1.send(0, 5, b"last words").unwrap();
        let h = std::thread::spawn(move || {
            (
                t0.recv(1, 5),
                t0.recv(1, 5),
                t0.recv_any_timeout(5, Duration::from_millis(10)),
            )
        });
        std::thread::sleep(Duration::from_millis(30));
        t1.depart();
        let (first, second, any) = h.join().unwrap();
        assert_eq!(first.unwrap(), b"last words");
        assert_eq!(second, Err(TransportError::PeerLeft { rank: 1 }));
        // A wait for any source is not affected (other ranks may still send).
        assert_eq!(any, Err(TransportError::Timeout(Duration::from_millis(10))));
    }
}
