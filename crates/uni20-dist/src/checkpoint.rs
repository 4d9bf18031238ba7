//! Checkpoints: a small manifest object naming the block objects of some
//! distributed tensors, committed like any persistent object (design note
//! `persistent_dispatch.md`, not in this repository, "Wavefunction
//! structural sharing": checkpoints
//! become small manifests of object IDs).
//!
//! [`checkpoint`] makes the blocks the checkpoint names durable on their
//! owners ([`flush_checkpoint`]: nothing else of the stores is written, the
//! intermediates of the computation stay written behind), then commits the
//! manifest in the root's store, flushes it and names it as the gc root
//! `checkpoint`. [`restore`] loads it back after a restart (same
//! store directory, any number of ranks: blocks of ranks the new universe
//! lacks are re-placed, see [`crate::redistribute`]), and [`Checkpoint::tensor`]
//! rebuilds each tensor from its manifest. [`retire`] lets the blocks of
//! a superseded checkpoint go.

use serde::{Deserialize, Serialize};
use uni20_persist::{
    decode_postcard, encode_postcard, ObjectId, Persist, PersistError, PersistentPtr, StorageRequest, StorageResponse,
};
use uni20_worker::commands::{Flush, FlushObjects, StorageCommand};
use uni20_worker::ledger::HeldBlock;
use uni20_worker::Controller;

use crate::error::{DistError, Missing};
use crate::redistribute::{redistribute, Redistribution};
use crate::tensor::{DistTensor, Manifest};

/// A checkpoint: named tensor manifests plus user scalars and a step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Free-form label (e.g. the program and its parameters).
    pub label: String,
    /// Progress counter (e.g. the sweep or time step reached).
    pub step: u64,
    /// User scalars (energies, norms, ...).
    pub scalars: Vec<f64>,
    /// Named tensors.
    pub tensors: Vec<(String, Manifest)>,
}

impl Persist for Checkpoint {
    /// v2: manifests carry the symmetric layout ([`Manifest::symmetric`]).
    /// v1 objects (dense only, written before) are still read: see
    /// `load_checkpoint`.
    const TYPE_NAME: &'static str = "uni20.checkpoint.v2";
    fn encode(&self) -> Vec<u8> {
        encode_postcard(self)
    }
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        decode_postcard(bytes)
    }
    fn references(&self) -> Vec<ObjectId> {
        self.tensors
            .iter()
            .flat_map(|(_, m)| m.blocks.iter().map(|b| b.id))
            .collect()
    }
}

uni20_worker::register_store_type!(Checkpoint);

/// The manifest of a checkpoint written as `uni20.checkpoint.v1`, before
/// manifests carried a symmetric layout (all its tensors are dense).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct ManifestV1 {
    shape: Vec<usize>,
    dtype: uni20_dispatch::DType,
    blocking: crate::layout::Blocking,
    blocks: Vec<crate::tensor::BlockRef>,
}

/// A checkpoint as `uni20.checkpoint.v1` stored it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct CheckpointV1 {
    label: String,
    step: u64,
    scalars: Vec<f64>,
    tensors: Vec<(String, ManifestV1)>,
}

impl Persist for CheckpointV1 {
    const TYPE_NAME: &'static str = "uni20.checkpoint.v1";
    fn encode(&self) -> Vec<u8> {
        encode_postcard(self)
    }
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        decode_postcard(bytes)
    }
    fn references(&self) -> Vec<ObjectId> {
        self.tensors
            .iter()
            .flat_map(|(_, m)| m.blocks.iter().map(|b| b.id))
            .collect()
    }
}

uni20_worker::register_store_type!(CheckpointV1);

/// Loads checkpoint `id` from the root's store, of either stored version
/// (`uni20.checkpoint.v2`, or a dense `v1` written by an older build).
///
/// # Errors
/// [`DistError::Store`] when the object is missing, of another type, or
/// does not decode.
pub(crate) fn load_checkpoint(ctl: &Controller<'_>, id: ObjectId) -> Result<Checkpoint, DistError> {
    match ctl.store().load_wait(PersistentPtr::<Checkpoint>::from_id(id)) {
        Ok(v) => Ok((*v).clone()),
        Err(PersistError::TypeMismatch { ref found, .. }) if found == CheckpointV1::TYPE_NAME => {
            let v = ctl.store().load_wait(PersistentPtr::<CheckpointV1>::from_id(id))?;
            Ok(Checkpoint {
                label: v.label.clone(),
                step: v.step,
                scalars: v.scalars.clone(),
                tensors: v
                    .tensors
                    .iter()
                    .map(|(n, m)| {
                        let manifest = Manifest {
                            shape: m.shape.clone(),
                            dtype: m.dtype,
                            blocking: m.blocking.clone(),
                            symmetric: None,
                            blocks: m.blocks.clone(),
                        };
                        (n.clone(), manifest)
                    })
                    .collect(),
            })
        }
        Err(e) => Err(e.into()),
    }
}

impl Checkpoint {
    /// Adds a tensor under `name`, waiting for it to be computed.
    ///
    /// # Errors
    /// As [`DistTensor::manifest`].
    pub fn add(&mut self, ctl: &Controller<'_>, name: &str, t: &DistTensor) -> Result<(), DistError> {
        self.tensors.push((name.to_string(), t.manifest(ctl)?));
        Ok(())
    }

    /// The tensor stored under `name`, as a tensor of the universe of `ctl`
    /// (its blocks stay kept by the checkpoint: dropping it frees nothing).
    ///
    /// # Errors
    /// [`DistError::NotFound`] if there is none; [`DistError::BadManifest`]
    /// if its manifest is invalid or names ranks this universe lacks.
    pub fn tensor(&self, ctl: &Controller<'_>, name: &str) -> Result<DistTensor, DistError> {
        let m = self
            .tensors
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| DistError::NotFound(Missing::CheckpointTensor { name: name.to_string() }))?;
        DistTensor::from_manifest(ctl, m.1.clone())
    }
}

/// Ends the keep that [`checkpoint`] or [`restore`] placed on `cp`'s blocks,
/// once a newer checkpoint supersedes it: every block that no other kept
/// checkpoint and no live tensor names is queued for release on its owner
/// (and, on a disk store, removed from disk when the release arrives), so
/// a job that checkpoints every step keeps only its latest checkpoint's
/// data. Blocks still named by a live tensor are released when that tensor
/// is dropped. The checkpoint object itself stays in the root's store
/// (a few hundred bytes per tensor); call it only after the newer
/// checkpoint has been written, or a crash in between leaves nothing to
/// resume from.
pub fn retire(ctl: &Controller<'_>, cp: &Checkpoint) {
    let held: Vec<HeldBlock> = cp
        .tensors
        .iter()
        .flat_map(|(_, m)| {
            let n = m.stored_blocks();
            m.blocks
                .iter()
                .enumerate()
                .map(move |(b, r)| (r.owner, r.id, if b < n { m.block_bytes(b) } else { 0 }))
        })
        .collect();
    ctl.ledger().unkeep(&held);
}

/// Makes every rank's store durable: one `uni20.flush.v1` to every worker
/// and storage rank plus the root's own store. Returns once all have synced.
///
/// # Errors
/// [`DistError::Job`] if a rank cannot flush (fail-stop).
pub fn flush_all(ctl: &Controller<'_>) -> Result<(), DistError> {
    ctl.drain()?;
    let ranks = ctl.non_root_ranks();
    if ranks != [0] {
        ctl.submit::<Flush>(&(), &ranks)?;
    }
    Ok(ctl.store().flush_all()?)
}

/// Makes what checkpoint `cp` names durable, and nothing else: each owner
/// of blocks of `cp` gets one `uni20.flush_objects.v1` listing its blocks
/// ([`uni20_persist::Store::flush_reachable`]: written if not on disk yet,
/// fsynced, one directory fsync), every other worker and storage rank an
/// empty one (so each rank sees one flush per checkpoint), and the root
/// flushes its own blocks. Returns once all have synced. Objects no
/// checkpoint names (environments, Lanczos vectors, ...) stay in memory,
/// written behind ([`uni20_persist::Store::commit`]).
///
/// # Errors
/// [`DistError::BadManifest`] ([`crate::error::ManifestError::OwnerOutside`]) if a
/// block's owner is outside this universe; [`DistError::Job`] if a rank
/// cannot flush (a block missing from its owner's store included:
/// fail-stop); a store error on the root.
pub fn flush_checkpoint(ctl: &Controller<'_>, cp: &Checkpoint) -> Result<(), DistError> {
    ctl.drain()?;
    let size = ctl.size();
    let mut by_owner: std::collections::BTreeMap<usize, Vec<ObjectId>> = std::collections::BTreeMap::new();
    for (_, m) in &cp.tensors {
        for b in &m.blocks {
            if b.owner >= size {
                return Err(DistError::BadManifest(crate::error::ManifestError::OwnerOutside {
                    id: b.id,
                    owner: b.owner,
                    size,
                }));
            }
            by_owner.entry(b.owner).or_default().push(b.id);
        }
    }
    let mut pending = Vec::new();
    let ranks = ctl.non_root_ranks();
    if ranks != [0] {
        for &r in &ranks {
            let ids = by_owner.remove(&r).unwrap_or_default();
            pending.push(ctl.begin::<FlushObjects>(&ids, &[r])?);
        }
    }
    // The root's own blocks (a lone root owns them all) while the workers sync.
    let root = by_owner.remove(&0).unwrap_or_default();
    let local = ctl.store().flush_reachable(&root);
    for op in pending {
        ctl.finish(op)?;
    }
    local?;
    Ok(())
}

/// Writes a checkpoint: makes its blocks durable on their owners
/// ([`flush_checkpoint`]), commits `cp` in the root's store, flushes it and
/// names it as the root `checkpoint`. The returned pointer's id (printable
/// as `r<origin>:<seq>`) restores it later. Only what `cp` reaches is
/// written to disk.
///
/// # Errors
/// As [`flush_checkpoint`]; a store error on the root.
pub fn checkpoint(ctl: &Controller<'_>, cp: &Checkpoint) -> Result<PersistentPtr<Checkpoint>, DistError> {
    // The checkpoint's blocks are never released by dropping their tensors.
    ctl.ledger().keep(&cp.references());
    flush_checkpoint(ctl, cp)?;
    let p = ctl.store().commit(cp.clone())?;
    ctl.store().flush(p.id())?;
    ctl.store().set_root("checkpoint", p.id())?;
    Ok(p)
}

/// Loads a checkpoint committed by an earlier run from the root's store,
/// as [`restore_redistributed`], and logs the redistribution (if any) at
/// `info` level.
///
/// # Errors
/// As [`restore_redistributed`].
pub fn restore(ctl: &Controller<'_>, id: ObjectId) -> Result<Checkpoint, DistError> {
    let r = restore_redistributed(ctl, id)?;
    if let Some(d) = &r.redistribution {
        tracing::info!(checkpoint = %id, "{d}");
    }
    Ok(r.checkpoint)
}

/// A checkpoint loaded by [`restore_redistributed`], with what was moved
/// to restore it on this universe's rank count.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Restored {
    /// The checkpoint, its manifests naming the blocks' owners in this
    /// universe.
    pub checkpoint: Checkpoint,
    /// `Some` when some blocks were re-placed (the checkpoint was written
    /// with another rank count); its `Display` is a one-line notice.
    pub redistribution: Option<Redistribution>,
}

/// Loads a checkpoint committed by an earlier run from the root's store,
/// on any rank count.
///
/// The restarted run must use the store directory the checkpoint was
/// written to. If it has fewer ranks than the run that wrote the
/// checkpoint (or has workers where that run was a lone root), the blocks
/// on ranks it cannot serve are first re-placed onto its compute ranks
/// ([`redistribute`]: each new owner copies them from the old owner's
/// directory, so the directory must be visible from every rank). Then
/// every block the checkpoint names is checked to be held intact by its
/// owner (one `Verify` storage request per block, all in flight at once:
/// the owner reads the block's file and checks its size, CRC-32 and
/// decoding), so a damaged block is found here, before the run goes on,
/// and told apart from a missing one.
///
/// # Errors
/// A store error if the checkpoint object itself is missing or damaged;
/// the errors of [`redistribute`] when a block cannot be re-placed;
/// [`DistError::DamagedBlock`] naming the first damaged block (in manifest
/// order), its file and the check it failed; [`DistError::NotFound`] naming
/// the first block that is gone (the checkpoint was superseded and
/// [`retire`]d, or the store directory is not the one the checkpoint was
/// written to) when none is damaged; [`DistError::Job`] if a rank cannot
/// answer (an I/O error reading a block's file, for example).
pub fn restore_redistributed(ctl: &Controller<'_>, id: ObjectId) -> Result<Restored, DistError> {
    let mut v = load_checkpoint(ctl, id)?;
    let redistribution = redistribute(ctl, &mut v.tensors)?;
    check_blocks_exist(ctl, id, &v)?;
    ctl.ledger().keep(&v.references());
    Ok(Restored {
        checkpoint: v,
        redistribution,
    })
}

/// Asks every block's owner whether it still holds the block intact (one
/// `uni20.storage.v1` `Verify` per block, all in flight at once): a
/// checkpoint superseded and [`retire`]d keeps its manifest object in the
/// root's store but not its blocks, and a block file damaged on disk is
/// held but fails its checks. A damaged block is reported before a missing
/// one: it is the more specific finding.
fn check_blocks_exist(ctl: &Controller<'_>, id: ObjectId, cp: &Checkpoint) -> Result<(), DistError> {
    let mut pending = Vec::new();
    for (name, m) in &cp.tensors {
        for b in &m.blocks {
            let op = ctl.begin::<StorageCommand>(&StorageRequest::Verify(b.id), &[b.owner])?;
            pending.push((name, b, op));
        }
    }
    let (mut missing, mut damaged, mut unexpected) = (None, None, None);
    for (name, b, op) in pending {
        match ctl.finish(op)?.into_iter().next() {
            Some((_, StorageResponse::Done)) => {}
            Some((_, StorageResponse::Damaged(damage))) => {
                damaged.get_or_insert(DistError::DamagedBlock {
                    checkpoint: id,
                    tensor: name.clone(),
                    rank: b.owner,
                    damage: Box::new(damage),
                });
            }
            Some((_, StorageResponse::NotFound(_))) => {
                missing.get_or_insert_with(|| {
                    DistError::NotFound(Missing::CheckpointBlock {
                        checkpoint: id,
                        tensor: name.clone(),
                        block: b.id,
                        rank: b.owner,
                    })
                });
            }
            other => {
                unexpected.get_or_insert_with(|| {
                    DistError::Protocol(format!(
                        "rank {} answered {other:?} to the verify request for block {} of checkpoint {id}",
                        b.owner, b.id
                    ))
                });
            }
        }
    }
    match unexpected.or(damaged).or(missing) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
