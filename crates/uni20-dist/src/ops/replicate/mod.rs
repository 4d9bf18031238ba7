//! `replicate`: copy a tensor's blocks from their owners to one rank,
//! worker to worker (never through the root). Persistent objects are
//! immutable, so a replica is as good as the original; the storage-rank
//! benchmark uses it with `keep = false`. The planner is in `plan`, the
//! command `uni20.replicate.v1` in `command`.

mod command;
mod plan;

use uni20_worker::Controller;

use crate::error::DistError;
use crate::tensor::DistTensor;
use command::ReplicateV1;
use plan::plan_replicate;

/// Copies every block of `t` that `to` does not own onto rank `to`, straight
/// from the owners; waits for completion and returns the bytes moved.
/// With `keep == false` the copies are verified and dropped again.
///
/// # Errors
/// As [`DistTensor::manifest`]; [`DistError::Job`] if a transfer fails.
pub fn replicate(ctl: &Controller<'_>, t: &DistTensor, to: usize, keep: bool) -> Result<u64, DistError> {
    crate::tensor::dense_only("replicate", &[t])?;
    let m = t.manifest(ctl)?;
    let (desc, participants, bytes) = plan_replicate(&m, to, keep);
    if !participants.is_empty() {
        ctl.submit::<ReplicateV1>(&desc, &participants)?;
    }
    Ok(bytes)
}
