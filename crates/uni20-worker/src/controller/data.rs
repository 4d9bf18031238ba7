//! Root-involving data phases: payloads streamed between the root and a
//! participant (`TAG_ROOT_DATA`) while the root keeps watching for failure
//! replies, so a failed peer can never leave the root blocked.

use std::time::Duration;

use crate::diag::JobError;

use super::Controller;

impl<'a> Controller<'a> {
    /// Sends a payload to `dest` in a root-involving data phase (tag
    /// [`TAG_ROOT_DATA`](crate::transport::TAG_ROOT_DATA)), while watching for a failure
    /// reply from any participant: a failed peer that will never receive
    /// must not leave the root blocked.
    ///
    /// # Errors
    /// [`JobError::Command`] if a participant reported a failure meanwhile;
    /// [`JobError::Stopped`] after an earlier failure;
    /// [`JobError::Transport`] if the job was aborted.
    pub fn send_data(&self, dest: usize, bytes: &[u8]) -> Result<(), JobError> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        let mut failure = None;
        let sent = self
            .transport
            .send_polling(dest, crate::transport::TAG_ROOT_DATA, bytes, &mut || {
                self.pump_replies().map_err(|e| {
                    let text = e.to_string();
                    failure = Some(e);
                    text
                })
            });
        if let Some(e) = failure {
            return Err(e);
        }
        sent.map_err(|e| self.fail_transport(e))
    }
    /// Receives a payload from `src` in a root-involving data phase, while
    /// watching for a failure reply from any participant (see
    /// [`Controller::send_data`]).
    ///
    /// # Errors
    /// [`JobError::Command`] if a participant reported a failure before
    /// sending; [`JobError::Stopped`] after an earlier failure;
    /// [`JobError::Transport`] if the job was aborted.
    pub fn recv_data(&self, src: usize) -> Result<Vec<u8>, JobError> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        let mut spins = 0u32;
        loop {
            match self.transport.try_recv(Some(src), crate::transport::TAG_ROOT_DATA) {
                Ok(Some((_, bytes))) => return Ok(bytes),
                Ok(None) => {}
                Err(e) => return Err(self.fail_transport(e)),
            }
            self.pump_replies()?;
            if let Some(e) = self.stopped() {
                return Err(e);
            }
            spins += 1;
            if spins < 1000 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}
