//! The root's side of block lifetimes: draining the [`ReleaseLedger`]'s
//! queues. Releases normally travel inside the next command frame to their
//! rank (see `send_op`); a queue that passes a batch threshold is sent at
//! once as `uni20.release.v1`, [`Controller::collect`] sends every queue
//! and waits, and the root sends everything before shutdown.
//! [`Controller::store_stats`] reports what every rank's store holds.

use crate::commands::{RankStoreStats, ReleaseV1, StoreStatsV1};
use crate::diag::JobError;
use crate::ledger::ReleaseLedger;

use super::Controller;

/// What [`Controller::collect`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CollectReport {
    /// Ranks that were sent their queued releases.
    pub ranks: usize,
    /// Object ids sent.
    pub objects_sent: u64,
    /// Objects the stores freed (memory and disk).
    pub objects_freed: u64,
    /// Resident bytes the stores freed.
    pub bytes_freed: u64,
}

impl<'a> Controller<'a> {
    /// Frees the root's own queued releases (the root owns blocks only when
    /// it is the only rank).
    pub(super) fn release_on_root(&self) -> (u64, u64) {
        let ids = self.ledger.take_pending(0);
        if ids.is_empty() {
            return (0, 0);
        }
        match self.store.release_many(&ids) {
            Ok(r) => (r.freed, r.bytes_freed),
            Err(e) => {
                tracing::warn!("releasing {} object(s) on the root: {e}", ids.len());
                (0, 0)
            }
        }
    }

    /// Sends, without waiting, the queues that passed a batch threshold.
    pub(super) fn flush_full_release_queues(&self) -> Result<(), JobError> {
        if self.flushing_releases.replace(true) {
            return Ok(()); // the release command being sent is itself a submission
        }
        let result = (|| {
            for rank in self.ledger.over_threshold() {
                if rank == 0 {
                    self.release_on_root();
                    continue;
                }
                let ids = self.ledger.take_pending(rank);
                if !ids.is_empty() {
                    self.ledger.note_release_command();
                    self.submit_nowait::<ReleaseV1>(&ids, &[rank], |_, _| {})?;
                }
            }
            Ok(())
        })();
        self.flushing_releases.set(false);
        result
    }

    /// Sends every queued release now, one `uni20.release.v1` per rank, and
    /// waits until the owners confirm. Operations in flight are not waited
    /// for (their inputs are not queued: they are still alive).
    ///
    /// # Errors
    /// A failure of an owner's store (fail-stop), or [`JobError::Stopped`]
    /// after an earlier failure.
    pub fn collect(&self) -> Result<CollectReport, JobError> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        let mut report = CollectReport::default();
        let (freed, bytes) = self.release_on_root();
        report.objects_freed += freed;
        report.bytes_freed += bytes;
        let mut pending = Vec::new();
        self.flushing_releases.set(true);
        let sent = (|| {
            for rank in self.ledger.pending_ranks().into_iter().filter(|&r| r != 0) {
                let ids = self.ledger.take_pending(rank);
                if ids.is_empty() {
                    continue;
                }
                report.ranks += 1;
                report.objects_sent += ids.len() as u64;
                self.ledger.note_release_command();
                pending.push(self.begin::<ReleaseV1>(&ids, &[rank])?);
            }
            Ok::<(), JobError>(())
        })();
        self.flushing_releases.set(false);
        sent?;
        for op in pending {
            for (_, r) in self.finish(op)? {
                report.objects_freed += r.freed;
                report.bytes_freed += r.bytes_freed;
            }
        }
        Ok(report)
    }

    /// What every rank's store holds (objects, bytes resident, pinned and
    /// spilled, releases pending on the rank and queued at the root), in
    /// rank order. Waits for the workers' answers.
    ///
    /// # Errors
    /// As [`Controller::submit`].
    pub fn store_stats(&self) -> Result<Vec<RankStoreStats>, JobError> {
        let mut all = vec![RankStoreStats::of(0, &self.store)];
        if self.size() > 1 {
            let ranks: Vec<usize> = (1..self.size()).collect();
            all.extend(self.submit::<StoreStatsV1>(&(), &ranks)?.into_iter().map(|(_, s)| s));
        }
        for s in &mut all {
            s.releases_queued_at_root = self.ledger.pending_count(s.rank) as u64;
        }
        Ok(all)
    }

    /// Ends the ledger with the universe (handles that outlive it release
    /// nothing).
    pub(crate) fn close_ledger(&self) {
        ReleaseLedger::close(&self.ledger);
    }
}
