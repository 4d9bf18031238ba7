//! The MPI transport (feature `mpi`): one rank per process, rsmpi 0.8.
//!
//! Only the thread that initialised MPI communicates (`MPI_THREAD_FUNNELED`);
//! local kernels may use other threads. Messages to one's own rank go through
//! a local loopback queue, so a blocking self-send can never deadlock.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use mpi::topology::{Communicator, SimpleCommunicator};

use crate::transport::{Tag, Transport, TransportError};

/// One rank's endpoint of the MPI world communicator.
pub struct MpiTransport {
    world: SimpleCommunicator,
    loopback: RefCell<VecDeque<(Tag, Vec<u8>)>>,
}

impl MpiTransport {
    /// Wraps the world communicator of an initialised MPI universe.
    pub fn new(world: SimpleCommunicator) -> MpiTransport {
        MpiTransport {
            world,
            loopback: RefCell::new(VecDeque::new()),
        }
    }

    fn check_rank(&self, r: usize) -> Result<i32, TransportError> {
        if r < self.size() {
            Ok(r as i32)
        } else {
            Err(TransportError::BadRank {
                rank: r,
                size: self.size(),
            })
        }
    }

    fn take_loopback(&self, tag: Tag) -> Option<Vec<u8>> {
        let mut q = self.loopback.borrow_mut();
        let pos = q.iter().position(|(t, _)| *t == tag)?;
        q.remove(pos).map(|(_, b)| b)
    }
}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }
    fn size(&self) -> usize {
        self.world.size() as usize
    }
    fn kind(&self) -> &'static str {
        "mpi"
    }
    fn send(&self, dest: usize, tag: Tag, bytes: &[u8]) -> Result<(), TransportError> {
        let d = self.check_rank(dest)?;
        if dest == self.rank() {
            self.loopback.borrow_mut().push_back((tag, bytes.to_vec()));
            return Ok(());
        }
        self.world.process_at_rank(d).send_with_tag(bytes, tag);
        Ok(())
    }
    fn recv(&self, src: usize, tag: Tag) -> Result<Vec<u8>, TransportError> {
        let s = self.check_rank(src)?;
        if src == self.rank() {
            return self.take_loopback(tag).ok_or_else(|| {
                TransportError::Aborted(format!(
                    "rank {src} waits for a message to itself (tag {tag}) that was never sent"
                ))
            });
        }
        let (v, _) = self.world.process_at_rank(s).receive_vec_with_tag::<u8>(tag);
        Ok(v)
    }
    fn recv_any(&self, tag: Tag) -> Result<(usize, Vec<u8>), TransportError> {
        if let Some(b) = self.take_loopback(tag) {
            return Ok((self.rank(), b));
        }
        let (v, status) = self.world.any_process().receive_vec_with_tag::<u8>(tag);
        Ok((status.source_rank() as usize, v))
    }
    fn recv_any_timeout(&self, tag: Tag, timeout: Duration) -> Result<(usize, Vec<u8>), TransportError> {
        if let Some(b) = self.take_loopback(tag) {
            return Ok((self.rank(), b));
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(probed) = self.world.any_process().immediate_matched_probe_with_tag(tag) {
                let (v, status) = probed.matched_receive_vec::<u8>();
                return Ok((status.source_rank() as usize, v));
            }
            if Instant::now() >= deadline {
                return Err(TransportError::Timeout(timeout));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    fn try_recv(&self, src: Option<usize>, tag: Tag) -> Result<Option<(usize, Vec<u8>)>, TransportError> {
        if src.is_none_or(|s| s == self.rank()) {
            if let Some(b) = self.take_loopback(tag) {
                return Ok(Some((self.rank(), b)));
            }
        }
        let probed = match src {
            Some(s) => self
                .world
                .process_at_rank(self.check_rank(s)?)
                .immediate_matched_probe_with_tag(tag),
            None => self.world.any_process().immediate_matched_probe_with_tag(tag),
        };
        Ok(probed.map(|p| {
            let (v, status) = p.matched_receive_vec::<u8>();
            (status.source_rank() as usize, v)
        }))
    }
    fn send_polling(
        &self,
        dest: usize,
        tag: Tag,
        bytes: &[u8],
        poll: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), TransportError> {
        let d = self.check_rank(dest)?;
        if dest == self.rank() {
            self.loopback.borrow_mut().push_back((tag, bytes.to_vec()));
            return Ok(());
        }
        mpi::request::scope(|scope| {
            let mut req = self.world.process_at_rank(d).immediate_send_with_tag(scope, bytes, tag);
            loop {
                match req.test() {
                    Ok(_) => return Ok(()),
                    Err(pending) => req = pending,
                }
                if let Err(why) = poll() {
                    // The request cannot be cancelled safely: end the job.
                    self.abort(&why);
                }
                std::thread::yield_now();
            }
        })
    }
    fn exchange(
        &self,
        outgoing: &[(usize, Tag, &[u8])],
        incoming: &[(usize, Tag)],
    ) -> Result<Vec<Vec<u8>>, TransportError> {
        let me = self.rank();
        for (dest, tag, bytes) in outgoing {
            self.check_rank(*dest)?;
            if *dest == me {
                self.loopback.borrow_mut().push_back((*tag, bytes.to_vec()));
            }
        }
        for (src, _) in incoming {
            self.check_rank(*src)?;
        }
        mpi::request::scope(|scope| {
            let requests: Vec<_> = outgoing
                .iter()
                .filter(|(dest, _, _)| *dest != me)
                .map(|(dest, tag, bytes)| {
                    self.world
                        .process_at_rank(*dest as i32)
                        .immediate_send_with_tag(scope, *bytes, *tag)
                })
                .collect();
            // Receive everything before waiting on the sends; finish every
            // request even on error (an unfinished request aborts the job).
            let received: Result<Vec<Vec<u8>>, TransportError> =
                incoming.iter().map(|(src, tag)| self.recv(*src, *tag)).collect();
            for r in requests {
                r.wait();
            }
            received
        })
    }
    fn abort(&self, reason: &str) {
        // One write, so launcher output tagging cannot split the message.
        let text = format!("uni20: rank {} aborting the job: {reason}\n", self.rank());
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), text.as_bytes());
        crate::cleanup::run_cleanups();
        self.world.abort(70)
    }
}
