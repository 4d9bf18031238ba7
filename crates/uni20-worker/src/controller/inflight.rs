//! Collecting replies on the root: matching each reply to its operation by
//! `op_id`, completing operations, and fail-stop bookkeeping (the first
//! failure completes every operation in flight and aborts the job).

use crate::diag::{Diagnostic, JobError};
use crate::envelope::decode_exact;
use crate::protocol::Reply;
use crate::transport::{TransportError, TAG_REPLY};

use super::{Controller, InFlight, RawReplies};

impl<'a> Controller<'a> {
    /// Blocks until operation `op_id` has completed and returns its raw
    /// replies (for operations submitted with [`Controller::begin`]).
    ///
    /// # Errors
    /// As [`Controller::finish`].
    pub fn wait_op(&self, op_id: u64) -> Result<RawReplies, JobError> {
        loop {
            let done = {
                let mut table = self.inflight.borrow_mut();
                match table.get(&op_id) {
                    None => {
                        return Err(self
                            .stopped()
                            .unwrap_or(JobError::Protocol(format!("unknown op_id {op_id}"))))
                    }
                    Some(e) if e.result.is_some() => table.remove(&op_id).and_then(|e| e.result),
                    Some(_) => None,
                }
            };
            if let Some(r) = done {
                return r;
            }
            self.recv_one_reply()?;
        }
    }
    pub(super) fn recv_one_reply(&self) -> Result<(), JobError> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        let _note = crate::waitnote::enabled().then(|| {
            let table = self.inflight.borrow();
            // The oldest operation still missing replies (a completed one waits
            // in the table until `wait_op` collects it).
            let (op, wire, missing) = table
                .iter()
                .find(|(_, f)| f.remaining > 0)
                .map_or((0, "no operation", 0), |(id, f)| (*id, f.wire_name, f.remaining));
            crate::waitnote::waiting_for_replies(op, wire, missing)
        });
        let t = std::time::Instant::now();
        let received = self.transport.recv_any(TAG_REPLY);
        super::profile::add(&self.counters.wait_ns, super::profile::elapsed_ns(t));
        let (src, bytes) = received.map_err(|e| self.fail_transport(e))?;
        self.handle_reply_bytes(src, &bytes)
    }
    pub(super) fn pump_replies(&self) -> Result<(), JobError> {
        while let Some((src, bytes)) = self
            .transport
            .try_recv(None, TAG_REPLY)
            .map_err(|e| self.fail_transport(e))?
        {
            self.handle_reply_bytes(src, &bytes)?;
        }
        Ok(())
    }
    fn handle_reply_bytes(&self, src: usize, bytes: &[u8]) -> Result<(), JobError> {
        let reply: Reply = decode_exact(bytes, "reply").map_err(|e| {
            let ops: Vec<String> = self
                .inflight
                .borrow()
                .iter()
                .map(|(id, f)| format!("op_id {id} (`{}`)", f.wire_name))
                .collect();
            self.fail_protocol(format!(
                "rank {src} sent an undecodable reply while {} in flight: {e}",
                ops.join(", ")
            ))
        })?;
        match &reply.outcome {
            Err(d) => Err(self.fail((**d).clone())),
            Ok(_) => {
                if !self.inflight.borrow().contains_key(&reply.op_id) {
                    return Err(self.fail_protocol(format!(
                        "rank {src} replied to op_id {}, which is not in flight",
                        reply.op_id
                    )));
                }
                self.accept_reply(src, reply);
                Ok(())
            }
        }
    }
    /// Records one participant's reply; completes the operation when it was
    /// the last one.
    pub(super) fn accept_reply(&self, src: usize, reply: Reply) {
        self.note_busy(src, reply.busy_ns);
        let bytes = match reply.outcome {
            Ok(b) => b.into_vec(),
            Err(d) => {
                let _ = self.fail(*d);
                return;
            }
        };
        let finished = {
            let mut table = self.inflight.borrow_mut();
            let Some(entry) = table.get_mut(&reply.op_id) else {
                return;
            };
            entry.replies.push((src, bytes));
            entry.remaining -= 1;
            if entry.remaining > 0 {
                return;
            }
            entry.replies.sort_by_key(|(r, _)| *r);
            let replies = std::mem::take(&mut entry.replies);
            match entry.on_done.take() {
                Some(cb) => {
                    table.remove(&reply.op_id);
                    Some((cb, reply.op_id, replies))
                }
                None => {
                    entry.result = Some(Ok(replies));
                    None
                }
            }
        };
        if let Some((cb, op_id, replies)) = finished {
            cb(self, op_id, Ok(replies));
        }
    }
    pub(super) fn fail_transport(&self, e: TransportError) -> JobError {
        let e = JobError::Transport(e);
        self.record_failure(&e, None);
        e
    }
    pub(super) fn fail_protocol(&self, why: String) -> JobError {
        let e = JobError::Protocol(why);
        self.record_failure(&e, None);
        self.stop(&e);
        e
    }
    pub(super) fn fail(&self, d: Diagnostic) -> JobError {
        let e = JobError::Command(Box::new(d.clone()));
        self.record_failure(&e, Some((d.op_id, &d)));
        self.stop(&e);
        e
    }
    /// Remembers the first failure and completes every operation in flight:
    /// the failed one with its diagnostic, the others with
    /// [`JobError::Stopped`].
    pub(super) fn record_failure(&self, e: &JobError, failed: Option<(u64, &Diagnostic)>) {
        if self.first_failure.borrow().is_some() {
            return;
        }
        *self.first_failure.borrow_mut() = Some(e.to_string());
        let pending: Vec<(u64, InFlight<'a>)> = std::mem::take(&mut *self.inflight.borrow_mut()).into_iter().collect();
        for (op_id, mut entry) in pending {
            let err = match failed {
                Some((id, d)) if id == op_id => JobError::Command(Box::new(d.clone())),
                _ => JobError::Stopped(e.to_string()),
            };
            match entry.on_done.take() {
                Some(cb) => cb(self, op_id, Err(err)),
                None => {
                    entry.result = Some(Err(err));
                    self.inflight.borrow_mut().insert(op_id, entry);
                }
            }
        }
    }
    pub(super) fn stop(&self, e: &JobError) {
        tracing::warn!("fail-stop: {e}");
        // On MPI `abort` prints the reason once and ends every rank.
        self.transport.abort(&format!("fail-stop:\n{e}"));
    }
}
