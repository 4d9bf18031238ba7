//! The runtime's built-in commands, registered at link time like any
//! other: `uni20.noop.v1` (round-trip baseline), `uni20.flush.v1` (make the
//! store durable), `uni20.flush_objects.v1` (make what a checkpoint names
//! durable), `uni20.storage.v1` (one object-server request),
//! `uni20.sendrecv.v1` (raw transfer baseline), and the block-lifetime
//! commands `uni20.release.v1` (free objects no root-side handle names),
//! `uni20.store_stats.v1` (what a rank's store holds) and `uni20.gc.v1`
//! (keep only the named objects and the rank's named roots).

use serde::{Deserialize, Serialize};
use uni20_persist::ObjectId;

use crate::command;
use crate::context::WorkerContext;
use crate::diag::HandlerError;
use crate::transport::data_tag;

command!(
    /// The no-op command `uni20.noop.v1`: every participant replies at once.
    /// Used to measure the command round trip (root -> workers -> root).
    pub Noop = "uni20.noop.v1", schema 1, () => (), handle_noop
);

fn handle_noop(_ctx: &mut WorkerContext<'_>, (): ()) -> Result<(), HandlerError> {
    Ok(())
}

command!(
    /// `uni20.flush.v1`: every participant makes its whole store durable
    /// ([`uni20_persist::Store::flush_all`]: object files and directory
    /// fsynced, one batch). Reply: the number of objects the store holds.
    pub Flush = "uni20.flush.v1", schema 1, () => u64, handle_flush
);

fn handle_flush(ctx: &mut WorkerContext<'_>, (): ()) -> Result<u64, HandlerError> {
    ctx.store()
        .flush_all()
        .map_err(|e| HandlerError::from(e).context("flushing the store"))?;
    Ok(ctx.store().ids().len() as u64)
}

command!(
    /// `uni20.flush_objects.v1`: the participant makes the listed objects, and
    /// the objects of its store they reach, durable as one batch
    /// ([`uni20_persist::Store::flush_reachable`]); nothing else of its store is
    /// written. A checkpoint sends each rank the blocks it owns (possibly none).
    /// Reply: the number of objects the batch covered.
    pub FlushObjects = "uni20.flush_objects.v1", schema 1, Vec<ObjectId> => u64, handle_flush_objects
);

fn handle_flush_objects(ctx: &mut WorkerContext<'_>, ids: Vec<ObjectId>) -> Result<u64, HandlerError> {
    let n = ctx.store().flush_reachable(&ids).map_err(|e| {
        HandlerError::from(e).context(format!("making the {} objects of a checkpoint durable", ids.len()))
    })?;
    Ok(n as u64)
}

command!(
    /// `uni20.storage.v1`: one object-server request (get, put, pin, release,
    /// has) answered by the participant's store ([`uni20_persist::Store::serve`]).
    /// Storage ranks are the intended targets; any rank can answer.
    pub StorageCommand = "uni20.storage.v1", schema 1, uni20_persist::StorageRequest => uni20_persist::StorageResponse, handle_storage
);

fn handle_storage(
    ctx: &mut WorkerContext<'_>,
    req: uni20_persist::StorageRequest,
) -> Result<uni20_persist::StorageResponse, HandlerError> {
    let resp = ctx.store().serve(req);
    if let uni20_persist::StorageResponse::Failed { message, fatal: true } = &resp {
        return Err(HandlerError::msg(message.clone()).context("storage request"));
    }
    Ok(resp)
}

command!(
    /// `uni20.sendrecv.v1`: rank `from` sends `bytes` raw bytes to rank `to`
    /// over the transport, nothing else (no store, no checksum). The baseline
    /// against which object transfers are measured.
    ///
    /// Reply: the bytes received on the replying rank (0 on the sender).
    pub SendRecv = "uni20.sendrecv.v1", schema 1, SendRecvDesc => u64, handle_sendrecv
);

/// Descriptor of [`SendRecv`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendRecvDesc {
    /// Sending rank.
    pub from: usize,
    /// Receiving rank.
    pub to: usize,
    /// Message size in bytes.
    pub bytes: u64,
}

fn handle_sendrecv(ctx: &mut WorkerContext<'_>, d: SendRecvDesc) -> Result<u64, HandlerError> {
    let me = ctx.rank();
    let tag = data_tag(0);
    let mut got = 0u64;
    if me == d.from {
        let len = usize::try_from(d.bytes).map_err(|_| HandlerError::msg("message size does not fit in memory"))?;
        let payload = vec![0x5au8; len];
        ctx.transport().exchange(&[(d.to, tag, &payload)], &[])?;
    }
    if me == d.to {
        got = ctx
            .transport()
            .exchange(&[], &[(d.from, tag)])?
            .iter()
            .map(|m| m.len() as u64)
            .sum();
    }
    Ok(got)
}

command!(
    /// `uni20.release.v1`: the participant frees the listed objects it owns
    /// ([`uni20_persist::Store::release_many`]: from memory and disk, unless
    /// pinned or reachable from one of its named roots). Sent by the root when
    /// a rank's release queue passes a batch threshold, by
    /// [`Controller::collect`](crate::Controller::collect) and before shutdown;
    /// most releases travel inside ordinary command frames instead.
    pub ReleaseV1 = "uni20.release.v1", schema 1, Vec<ObjectId> => ReleaseSummary, handle_release
);

/// Reply of [`ReleaseV1`]: what the rank's store did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseSummary {
    /// IDs of the request that the store held.
    pub released: u64,
    /// Objects removed from memory and disk (including earlier releases
    /// that became free).
    pub freed: u64,
    /// Resident bytes freed.
    pub bytes_freed: u64,
    /// Object files deleted.
    pub files_removed: u64,
}

fn handle_release(ctx: &mut WorkerContext<'_>, ids: Vec<ObjectId>) -> Result<ReleaseSummary, HandlerError> {
    let r = ctx
        .store()
        .release_many(&ids)
        .map_err(|e| HandlerError::from(e).context(format!("releasing {} object(s)", ids.len())))?;
    Ok(ReleaseSummary {
        released: r.released,
        freed: r.freed,
        bytes_freed: r.bytes_freed,
        files_removed: r.files_removed,
    })
}

/// What one rank's store holds, as reported by `uni20.store_stats.v1`
/// (sizes are encoded payload bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankStoreStats {
    /// The rank.
    pub rank: usize,
    /// Objects the store can serve.
    pub objects: u64,
    /// Bytes of resident forms (what a memory budget bounds).
    pub bytes_resident: u64,
    /// Bytes of pinned objects (not evictable).
    pub bytes_pinned: u64,
    /// Bytes of objects only on disk.
    pub bytes_spilled: u64,
    /// Objects released but still held (pinned, being loaded or reachable
    /// from a named root of the rank).
    pub releases_pending_on_rank: u64,
    /// Objects the root has queued for release on this rank and not sent
    /// yet (filled in by the root).
    pub releases_queued_at_root: u64,
    /// Objects freed by releases since the store was opened.
    pub objects_released: u64,
}

impl RankStoreStats {
    /// The figures of `store` on `rank` (queued releases: 0; the root fills
    /// them in).
    pub fn of(rank: usize, store: &uni20_persist::Store) -> RankStoreStats {
        let s = store.stats();
        RankStoreStats {
            rank,
            objects: s.objects,
            bytes_resident: s.bytes_resident,
            bytes_pinned: s.bytes_pinned,
            bytes_spilled: s.bytes_spilled,
            releases_pending_on_rank: s.releases_pending,
            releases_queued_at_root: 0,
            objects_released: s.releases,
        }
    }
}

command!(
    /// `uni20.store_stats.v1`: each participant reports [`RankStoreStats`].
    pub StoreStatsV1 = "uni20.store_stats.v1", schema 1, () => RankStoreStats, handle_store_stats
);

fn handle_store_stats(ctx: &mut WorkerContext<'_>, (): ()) -> Result<RankStoreStats, HandlerError> {
    Ok(RankStoreStats::of(ctx.rank(), ctx.store()))
}

command!(
    /// `uni20.gc.v1`: the participant keeps the objects of `keep` it holds
    /// (and everything they reference, its named roots and pinned objects) and
    /// removes every other object from memory and disk
    /// ([`uni20_persist::Store::gc`]). The root computes `keep` per rank from
    /// the live handles, the checkpoints and the named roots.
    pub GcV1 = "uni20.gc.v1", schema 1, GcDesc => GcSummary, handle_gc
);

/// Descriptor of [`GcV1`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcDesc {
    /// Per rank, the objects it must keep.
    pub keep: Vec<(usize, Vec<ObjectId>)>,
}

/// Reply of [`GcV1`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcSummary {
    /// Objects kept.
    pub kept: u64,
    /// Objects removed.
    pub removed: u64,
    /// Resident bytes freed.
    pub bytes_freed: u64,
    /// Object files deleted.
    pub files_removed: u64,
}

fn handle_gc(ctx: &mut WorkerContext<'_>, d: GcDesc) -> Result<GcSummary, HandlerError> {
    let me = ctx.rank();
    let keep: Vec<ObjectId> = d
        .keep
        .into_iter()
        .filter(|(r, _)| *r == me)
        .flat_map(|(_, ids)| ids)
        .collect();
    let r = ctx
        .store()
        .gc(&keep)
        .map_err(|e| HandlerError::from(e).context("collecting garbage"))?;
    Ok(GcSummary {
        kept: r.kept,
        removed: r.removed,
        bytes_freed: r.bytes_freed,
        files_removed: r.files_removed,
    })
}
