//! Checkpoints: a small manifest object naming the block objects of some
//! distributed tensors, committed like any persistent object (design note
//! `persistent_dispatch.md`, "Wavefunction structural sharing": checkpoints
//! become small manifests of object IDs).
//!
//! [`checkpoint`] makes every rank's store durable ([`flush_all`]), then
//! commits the manifest in the root's store, flushes it and names it as the
//! gc root `checkpoint`. [`restore`] loads it back after a restart (same
//! store directory, same number of ranks), and [`Checkpoint::tensor`]
//! rebuilds each tensor from its manifest.

use serde::{Deserialize, Serialize};
use uni20_persist::{decode_postcard, encode_postcard, ObjectId, Persist, PersistError, PersistentPtr};
use uni20_worker::{Controller, Flush};

use crate::error::DistError;
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
            .ok_or_else(|| DistError::NotFound(format!("tensor `{name}` of the checkpoint")))?;
        DistTensor::from_manifest(ctl, m.1.clone())
    }
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

/// Writes a checkpoint: flushes every store, commits `cp` in the root's
/// store, flushes it and names it as the root `checkpoint`. The returned
/// pointer's id (printable as `r<origin>:<seq>`) restores it later.
///
/// # Errors
/// [`DistError::Job`] if a rank cannot flush; a store error on the root.
pub fn checkpoint(ctl: &Controller<'_>, cp: &Checkpoint) -> Result<PersistentPtr<Checkpoint>, DistError> {
    // The checkpoint's blocks are never released by dropping their tensors.
    ctl.ledger().keep(&cp.references());
    flush_all(ctl)?;
    let p = ctl.store().commit(cp.clone())?;
    ctl.store().flush(p.id())?;
    ctl.store().set_root("checkpoint", p.id())?;
    Ok(p)
}

/// Loads a checkpoint committed by an earlier run from the root's store.
///
/// # Errors
/// A store error if the object is missing or damaged; [`DistError::BadRank`]
/// if it places blocks on ranks this universe does not have.
pub fn restore(ctl: &Controller<'_>, id: ObjectId) -> Result<Checkpoint, DistError> {
    let v = ctl.store().load_wait(PersistentPtr::<Checkpoint>::from_id(id))?;
    let highest = v
        .tensors
        .iter()
        .flat_map(|(_, m)| m.blocks.iter().map(|b| b.owner))
        .max();
    if let Some(r) = highest.filter(|&r| r >= ctl.size()) {
        return Err(DistError::BadRank {
            rank: r,
            size: ctl.size(),
            what: format!(
                "checkpoint {id} keeps blocks there; restart with the same number of ranks (and the same store \
                 directory) as the run that wrote it"
            ),
        });
    }
    ctl.ledger().keep(&v.references());
    Ok((*v).clone())
}
