//! Offload and prefetch of a tensor's blocks on their owner ranks, as
//! explicit steps of the job: [`offload`] (`uni20.offload.v1`) writes every
//! block to its owner's disk store if it is not there yet and drops its
//! resident bytes ([`uni20_persist::Store::offload`]); [`prefetch`]
//! (`uni20.prefetch.v1`) starts loading every block back into memory on its
//! owner's load pool ([`uni20_persist::Store::prefetch`]), so that the
//! kernel of a later operation finds it resident. Both are deferred like
//! every operation (they run once the tensor's block map is ready, in
//! program order) and return at once; the root counts the bytes of both
//! ([`residency_stats`]). Neither changes the tensor: an offloaded block is
//! loaded from its file by the next operation that reads it, with or
//! without a prefetch.

use std::collections::BTreeSet;
use std::marker::PhantomData;

use serde::{Deserialize, Serialize};
use uni20_async::ReadBuffer;
use uni20_persist::{ObjectId, PersistError, PersistentPtr};
use uni20_worker::{command, Controller, DeferredJob, HandlerError, JobError, WorkerContext};

use crate::error::DistError;
use crate::tensor::{Block, BlockRef, DistTensor};

command!(
    /// `uni20.offload.v1`: each participant offloads the listed blocks it
    /// owns ([`uni20_persist::Store::offload`]); blocks it no longer holds
    /// (released meanwhile) are skipped.
    ///
    /// The rank then returns free memory to the operating system
    /// ([`uni20_worker::trim_freed_memory`]).
    ///
    /// Reply: `(resident bytes dropped, bytes written to disk)` on the rank.
    pub(crate) OffloadV1 = "uni20.offload.v1", schema 1, ResidencyDesc => (u64, u64), handle_offload
);

command!(
    /// `uni20.prefetch.v1`: each participant starts loading the listed
    /// blocks it owns that are not resident ([`uni20_persist::Store::prefetch`])
    /// and replies at once, while the loads run on its store's load pool.
    ///
    /// Reply: `(blocks whose load started, their encoded bytes)` on the rank.
    pub(crate) PrefetchV1 = "uni20.prefetch.v1", schema 1, ResidencyDesc => (u64, u64), handle_prefetch
);

/// Descriptor of [`OffloadV1`] and [`PrefetchV1`]: `(owner rank, block)`
/// pairs; each participant acts on those it owns.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ResidencyDesc {
    pub(crate) blocks: Vec<(u32, ObjectId)>,
}

fn mine(ctx: &WorkerContext<'_>, d: &ResidencyDesc) -> Vec<ObjectId> {
    let me = ctx.store().rank();
    d.blocks.iter().filter(|(o, _)| *o == me).map(|&(_, id)| id).collect()
}

fn handle_offload(ctx: &mut WorkerContext<'_>, d: ResidencyDesc) -> Result<(u64, u64), HandlerError> {
    let (mut dropped, mut written) = (0, 0);
    for id in mine(ctx, &d) {
        match ctx.store().offload(id) {
            Ok(o) => {
                dropped += o.bytes_dropped;
                written += o.bytes_written;
            }
            Err(PersistError::NotFound(_)) => {}
            Err(e) => return Err(HandlerError::from(e).context(format!("offloading block {id} to this rank's disk"))),
        }
    }
    if dropped > 0 {
        // The dropped blocks' memory leaves the rank's resident set now,
        // not only when the allocator reuses it.
        uni20_worker::trim_freed_memory();
    }
    Ok((dropped, written))
}

fn handle_prefetch(ctx: &mut WorkerContext<'_>, d: ResidencyDesc) -> Result<(u64, u64), HandlerError> {
    let (mut blocks, mut bytes) = (0, 0);
    for id in mine(ctx, &d) {
        if let Some(size) = ctx.store().prefetch(PersistentPtr::<Block>::from_id(id)) {
            blocks += 1;
            bytes += size;
        }
    }
    Ok((blocks, bytes))
}

/// What the root counted of [`offload`] and [`prefetch`] since the universe
/// started ([`residency_stats`]), summed over the owner ranks; subtract two
/// snapshots ([`ResidencyStats::since`]) for one stretch of work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResidencyStats {
    /// `offload` calls whose command completed.
    pub offloads: u64,
    /// Resident block bytes they dropped (encoded sizes).
    pub bytes_offloaded: u64,
    /// Bytes they wrote to the owners' disks (blocks with no file yet).
    pub bytes_written: u64,
    /// `prefetch` calls whose command completed.
    pub prefetches: u64,
    /// Blocks whose load a prefetch started (they were not resident).
    pub blocks_fetched: u64,
    /// Their encoded bytes.
    pub bytes_fetched: u64,
}

impl ResidencyStats {
    /// The counts accumulated after `earlier` (a snapshot of the same
    /// universe taken before this one).
    pub fn since(&self, earlier: &ResidencyStats) -> ResidencyStats {
        ResidencyStats {
            offloads: self.offloads.saturating_sub(earlier.offloads),
            bytes_offloaded: self.bytes_offloaded.saturating_sub(earlier.bytes_offloaded),
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
            prefetches: self.prefetches.saturating_sub(earlier.prefetches),
            blocks_fetched: self.blocks_fetched.saturating_sub(earlier.blocks_fetched),
            bytes_fetched: self.bytes_fetched.saturating_sub(earlier.bytes_fetched),
        }
    }
}

/// The counts of [`offload`] and [`prefetch`] so far (commands still in
/// flight are not counted yet; [`Controller::drain`] first for exact
/// figures).
pub fn residency_stats(ctl: &Controller<'_>) -> ResidencyStats {
    ctl.with_root_state(|s: &mut ResidencyStats| *s)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Offload,
    Prefetch,
}

/// The deferred job of one [`offload`] or [`prefetch`].
struct ResidencyJob<'c> {
    read: ReadBuffer<Vec<BlockRef>>,
    tensor: DistTensor,
    kind: Kind,
    _c: PhantomData<&'c ()>,
}

impl<'c> DeferredJob<'c> for ResidencyJob<'c> {
    fn ready(&self) -> bool {
        self.read.is_ready()
    }

    fn run(self: Box<Self>, ctl: &Controller<'c>) {
        let ResidencyJob { read, tensor, kind, .. } = *self;
        let blocks = match read.wait() {
            Ok(b) => b.clone(),
            // The producing operation failed: that failure is the job's
            // (fail-stop); there is nothing to move.
            Err(_) => return,
        };
        drop(read);
        let mut owners = BTreeSet::new();
        let mut desc = ResidencyDesc::default();
        for b in &blocks {
            let Ok(owner) = u32::try_from(b.owner) else { continue };
            owners.insert(b.owner);
            desc.blocks.push((owner, b.id));
        }
        if owners.is_empty() {
            return;
        }
        let participants: Vec<usize> = owners.into_iter().collect();
        // The tensor stays alive until the owners replied: its blocks are
        // not released under the command.
        let r = match kind {
            Kind::Offload => ctl.submit_nowait::<OffloadV1>(&desc, &participants, move |ctl, r| {
                drop(tensor);
                if let Ok(replies) = r {
                    ctl.with_root_state(|s: &mut ResidencyStats| {
                        s.offloads += 1;
                        for (_, (dropped, written)) in replies {
                            s.bytes_offloaded += dropped;
                            s.bytes_written += written;
                        }
                    });
                }
            }),
            Kind::Prefetch => ctl.submit_nowait::<PrefetchV1>(&desc, &participants, move |ctl, r| {
                drop(tensor);
                if let Ok(replies) = r {
                    ctl.with_root_state(|s: &mut ResidencyStats| {
                        s.prefetches += 1;
                        for (_, (blocks, bytes)) in replies {
                            s.blocks_fetched += blocks;
                            s.bytes_fetched += bytes;
                        }
                    });
                }
            }),
        };
        if let Err(e) = r {
            tracing::debug!("residency command not submitted: {e}");
        }
        if kind == Kind::Offload {
            // Copies held on other ranks would keep the blocks in memory
            // there: they go too (after every command already sent).
            let ids: Vec<_> = blocks.iter().map(|b| b.id).collect();
            ctl.ledger().drop_replicas(&ids);
        }
    }

    fn abandon(self: Box<Self>, _error: JobError) {}
}

fn defer(ctl: &Controller<'_>, t: &DistTensor, kind: Kind) -> Result<(), DistError> {
    t.check_universe(ctl)?;
    ctl.defer(Box::new(ResidencyJob {
        read: t.read_blocks(),
        tensor: t.clone(),
        kind,
        _c: PhantomData,
    }));
    Ok(())
}

/// Offloads every block of `t` on its owner rank: written to the owner's
/// disk store if it has no file there yet (the rank's store directory, or
/// for an in-memory store its offload directory: the one given with
/// [`uni20_persist::Store::set_offload_dir`], else a temporary directory
/// removed with the store), then dropped from memory once no kernel holds
/// it. The tensor stays valid: a later operation reading it loads the
/// blocks back from disk (or finds them resident after a [`prefetch`]).
/// Deferred: runs once `t` is computed, after every operation called
/// before it, and returns at once; the bytes are counted in
/// [`residency_stats`].
///
/// # Errors
/// [`DistError::WrongUniverse`] for a tensor of another universe. A failed
/// write (a full disk) fails the job with the owner's diagnostic
/// (fail-stop), reported by the next operation that waits.
pub fn offload(ctl: &Controller<'_>, t: &DistTensor) -> Result<(), DistError> {
    defer(ctl, t, Kind::Offload)
}

/// Starts loading every block of `t` that is not resident back into its
/// owner's memory, on the owner's store load pool, and returns at once
/// (deferred like [`offload`]); the next operation that reads a block finds
/// it resident, or waits for its load in progress. Blocks already resident
/// cost nothing. A failed load is reported by the operation that needs the
/// block.
///
/// # Errors
/// [`DistError::WrongUniverse`] for a tensor of another universe.
pub fn prefetch(ctl: &Controller<'_>, t: &DistTensor) -> Result<(), DistError> {
    defer(ctl, t, Kind::Prefetch)
}
