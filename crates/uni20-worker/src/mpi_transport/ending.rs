//! How an MPI universe in library mode stops and ends: abort frames
//! ([`MpiTransport::abort_frames`]) and the closing handshake
//! ([`MpiTransport::finish`]), after which the universe's communicator can be
//! freed with no message of the universe left in flight.
//!
//! Ending: every rank posts an empty `TAG_FIN` frame to every other rank,
//! after everything else it sent on the communicator, and keeps receiving
//! (into a discarded inbox) until (a) it holds every peer's fin and (b) every
//! message it posted has completed. MPI does not let messages from one
//! sender overtake each other when one receive (here: a probe for any source
//! and tag) matches both, so a peer's fin is the last message this rank gets
//! from it; and since every rank receives until it has every fin, every
//! send completes. No rank therefore leaves a message unreceived, and the
//! next universe on a new duplicate of the host communicator (which MPI may
//! give the same context id) can never receive a stale one.

use std::sync::Arc;

use super::{Backoff, MpiTransport, OnAbort};
use crate::transport::{Transport, TAG_ABORT, TAG_FIN};

impl MpiTransport {
    /// Library mode: records `reason` as the abort of the universe and posts
    /// it to every other rank (once; a later abort, or one while finishing,
    /// only records).
    pub(super) fn abort_frames(&self, reason: &str) {
        let send = {
            let mut st = self.state.borrow_mut();
            if st.aborted.is_some() {
                return;
            }
            st.aborted = Some((reason.to_string(), std::time::Instant::now()));
            !st.finishing
        };
        tracing::warn!(rank = self.rank, "aborting the universe: {reason}");
        if send {
            let frame: Arc<[u8]> = reason.as_bytes().into();
            for r in (0..self.size).filter(|&r| r != self.rank) {
                self.post_raw(r, TAG_ABORT, frame.clone());
            }
            // Errors surface at the next wait.
            let _ = self.progress();
        }
    }

    /// Ends this rank's part of a library-mode universe (see the module
    /// docs). Returns the abort reason if the universe was aborted (by any
    /// rank, at any time before every fin had arrived).
    ///
    /// Waits as long as the peers need to finish; after an abort, at most
    /// the abort timeout, then the process ends with `MPI_Abort` on the
    /// universe's communicator (a peer that no longer receives).
    pub(crate) fn finish(&self) -> Option<String> {
        {
            let mut st = self.state.borrow_mut();
            if st.finishing {
                return st.aborted.as_ref().map(|(why, _)| why.clone());
            }
            st.finishing = true;
        }
        let fin: Arc<[u8]> = Arc::from(&[][..]);
        for r in (0..self.size).filter(|&r| r != self.rank) {
            self.post_raw(r, TAG_FIN, fin.clone());
        }
        let mut backoff = Backoff::default();
        loop {
            let moved = match self.progress() {
                Ok(m) => m,
                Err(e) => {
                    // A malformed message now can only be recorded.
                    let mut st = self.state.borrow_mut();
                    if st.aborted.is_none() {
                        st.aborted = Some((format!("rank {}: {e}", self.rank), std::time::Instant::now()));
                    }
                    true
                }
            };
            {
                let mut st = self.state.borrow_mut();
                st.inbox.clear();
                let me = self.rank;
                let all_fins = st.fins.iter().enumerate().all(|(r, &f)| f || r == me);
                if all_fins && st.posted.is_empty() {
                    return st.aborted.as_ref().map(|(why, _)| why.clone());
                }
            }
            let missing: Vec<String> = {
                let st = self.state.borrow();
                (0..self.size)
                    .filter(|&r| r != self.rank && !st.fins[r])
                    .map(|r| r.to_string())
                    .collect()
            };
            self.check_abort_deadline(&format!(
                "ending the universe (waiting for rank(s) {})",
                if missing.is_empty() {
                    "none".into()
                } else {
                    missing.join(", ")
                }
            ));
            if moved {
                backoff.reset();
            } else {
                backoff.snooze(self.sending());
            }
        }
    }
}

impl Drop for MpiTransport {
    /// Completes every posted message before the communicator may be freed
    /// or finalised (a peer may still be receiving the last replies or the
    /// shutdown frames). Library mode: the closing handshake, if it has not
    /// run yet.
    fn drop(&mut self) {
        match self.on_abort {
            OnAbort::Frames { .. } => {
                self.finish();
            }
            OnAbort::EndProcess => {
                if !self.state.borrow().posted.is_empty() {
                    if let Err(e) = self.flush() {
                        self.die(&format!("flushing posted messages: {e}"));
                    }
                }
            }
        }
    }
}
