//! Explicit data movement between the root and the workers, which the user
//! asks for by name: scatter a root-local tensor into blocks
//! ([`DistTensor::from_local`]; into the charge-allowed blocks of a
//! symmetric layout, [`DistTensor::from_dense`]; command
//! `uni20.put_blocks.v1`) and gather a distributed tensor onto the root
//! ([`DistTensor::to_local`], [`DistTensor::to_dense`],
//! `uni20.get_blocks.v1`). These are the only paths on which block payloads
//! pass through the root.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uni20_dispatch::LocalTensor;
use uni20_persist::{ObjectId, PersistentPtr};
use uni20_worker::transport::TAG_ROOT_DATA;
use uni20_worker::{command, Controller, HandlerError, WorkerContext};

use crate::error::DistError;
use crate::layout::{extract_block, Blocking};
use crate::placement::Placement;
use crate::symmetry::{split_dense, SymmetricLayout};
use crate::tensor::{collect_refs, Block, BlockRef, DistTensor, Manifest, TensorMeta};

impl DistTensor {
    /// Scatters a root-local tensor into blocks of at most `block` elements
    /// per mode, owned round-robin by the compute workers. The payload passes
    /// through the root because the user asked for it. Returns once every
    /// block is committed.
    ///
    /// # Errors
    /// As [`DistTensor::from_local_on`].
    pub fn from_local(ctl: &Controller<'_>, local: &LocalTensor, block: usize) -> Result<DistTensor, DistError> {
        DistTensor::from_local_on(ctl, local, block, &Placement::Workers)
    }

    /// Scatters a root-local tensor into blocks of at most `block` elements
    /// per mode, owned round-robin by the ranks of `placement`.
    ///
    /// # Errors
    /// [`DistError::Blocking`] for `block == 0` or too many blocks; the
    /// errors of [`Placement::ranks`]; [`DistError::Job`] if an owner fails
    /// to commit a block.
    pub fn from_local_on(
        ctl: &Controller<'_>,
        local: &LocalTensor,
        block: usize,
        placement: &Placement,
    ) -> Result<DistTensor, DistError> {
        let blocking = Blocking::regular(local.shape(), block)?;
        let owners = placement.owners(ctl, blocking.num_blocks())?;
        let blocks: Vec<LocalTensor> = (0..blocking.num_blocks())
            .map(|b| extract_block(local, &blocking, b).map_err(DistError::from))
            .collect::<Result<_, _>>()?;
        let meta = TensorMeta::dense(local.shape().to_vec(), local.dtype(), blocking);
        put_blocks(ctl, meta, blocks, owners)
    }

    /// Scatters a root-local dense tensor into the charge-allowed blocks of
    /// `layout`, owned round-robin by the compute workers: a symmetric
    /// tensor whose dense embedding is `local`. Every element outside the
    /// allowed blocks must be at most `tol` in magnitude (it is dropped).
    /// The payload passes through the root because the user asked for it.
    /// Returns once every block is committed.
    ///
    /// # Errors
    /// [`DistError::DenseEmbedding`]: `BrokenSymmetry` naming the first
    /// forbidden block (tiles, charges, flux) with an element above `tol`
    /// (or NaN), `Shape` when `local` is not the layout's dense shape,
    /// `Tolerance` for a negative or non-finite `tol`; [`DistError::Blocking`]
    /// when the layout's tiling has too many blocks; as
    /// [`DistTensor::from_local_on`] otherwise. Nothing is submitted on a
    /// validation error.
    pub fn from_dense(
        ctl: &Controller<'_>,
        local: &LocalTensor,
        layout: impl Into<Arc<SymmetricLayout>>,
        tol: f64,
    ) -> Result<DistTensor, DistError> {
        let layout = layout.into();
        let blocks = split_dense(&layout, local, tol)?;
        let meta = TensorMeta::symmetric(layout, local.dtype())?;
        let owners = Placement::Workers.owners(ctl, blocks.len())?;
        put_blocks(ctl, meta, blocks, owners)
    }

    /// The dense embedding of the tensor gathered onto the root: for a
    /// dense tensor the same as [`DistTensor::to_local`]; for a symmetric
    /// one, its stored blocks placed in a dense tensor of
    /// [`SymmetricLayout::dense_shape`], zero everywhere else.
    ///
    /// # Errors
    /// As [`DistTensor::to_local`].
    pub fn to_dense(&self, ctl: &Controller<'_>) -> Result<LocalTensor, DistError> {
        self.to_local(ctl)
    }

    /// Gathers the whole tensor onto the root (explicit materialisation:
    /// the payload passes through the root because the user asked for it),
    /// waiting for the producing operation first.
    ///
    /// # Errors
    /// As [`DistTensor::wait`]; [`DistError::Job`] if an owner cannot serve
    /// a block; [`DistError::BadManifest`] if a block does not have the shape
    /// and dtype the manifest says.
    pub fn to_local(&self, ctl: &Controller<'_>) -> Result<LocalTensor, DistError> {
        let m = self.manifest(ctl)?;
        let elem = m.dtype.size_bytes();
        let total: usize = m.shape.iter().product();
        let mut bytes = vec![0u8; total * elem];
        let mut place = |b: usize, blk: &LocalTensor| m.place_block(&mut bytes, b, blk);
        let owners: Vec<usize> = m.blocks.iter().map(|r| r.owner).collect();
        if owners.iter().all(|&o| o == 0) {
            for (b, r) in m.blocks.iter().enumerate() {
                let v = ctl.store().load_wait(PersistentPtr::<Block>::from_id(r.id))?;
                place(b, &v.0)?;
            }
        } else {
            let mut participants: Vec<usize> = owners.clone();
            participants.sort_unstable();
            participants.dedup();
            let desc = GetBlocksDesc {
                blocks: m.blocks.clone(),
            };
            let op = ctl.begin::<GetBlocksV1>(&desc, &participants)?;
            for (b, r) in m.blocks.iter().enumerate() {
                let raw = ctl.recv_data(r.owner)?;
                let blk = LocalTensor::decode(&raw)?;
                place(b, &blk)?;
            }
            ctl.finish(op)?;
        }
        Ok(LocalTensor::from_bytes(m.dtype, &m.shape, &bytes)?)
    }
}

/// Commits `blocks` (stored block `b` on rank `owners[b]`) and wraps them
/// as a tensor described by `meta`.
fn put_blocks(
    ctl: &Controller<'_>,
    meta: TensorMeta,
    blocks: Vec<LocalTensor>,
    owners: Vec<usize>,
) -> Result<DistTensor, DistError> {
    let refs = if owners.iter().all(|&o| o == 0) {
        blocks
            .into_iter()
            .map(|blk| {
                Ok(BlockRef {
                    owner: 0,
                    id: ctl.store().commit(Block(blk))?.id(),
                })
            })
            .collect::<Result<Vec<_>, DistError>>()?
    } else {
        let mut participants = owners.clone();
        participants.sort_unstable();
        participants.dedup();
        let desc = PutBlocksDesc { owners: owners.clone() };
        let op = ctl.begin::<PutBlocksV1>(&desc, &participants)?;
        for (blk, &owner) in blocks.iter().zip(&owners) {
            ctl.send_data(owner, &blk.encode())?;
        }
        collect_refs(ctl.finish(op)?, owners.len())?
    };
    DistTensor::from_manifest(ctl, Manifest::new(&meta, refs))
}

command!(
    /// `uni20.put_blocks.v1`: the root streams blocks to their owners, which
    /// commit them. Each owner receives its blocks' encoded payloads from the
    /// root (`TAG_ROOT_DATA`, block order). Reply: `(block number, object id)`.
    pub(crate) PutBlocksV1 = "uni20.put_blocks.v1", schema 1, PutBlocksDesc => Vec<(usize, ObjectId)>, handle_put_blocks
);

/// Descriptor of [`PutBlocksV1`].
#[derive(Serialize, Deserialize)]
pub(crate) struct PutBlocksDesc {
    /// Owner rank of each block, in block order.
    pub(crate) owners: Vec<usize>,
}

fn handle_put_blocks(ctx: &mut WorkerContext<'_>, desc: PutBlocksDesc) -> Result<Vec<(usize, ObjectId)>, HandlerError> {
    let me = ctx.rank();
    let mut out = Vec::new();
    for (b, &owner) in desc.owners.iter().enumerate() {
        if owner != me {
            continue;
        }
        let raw = ctx.transport().recv(0, TAG_ROOT_DATA)?;
        let blk = LocalTensor::decode(&raw).map_err(|e| HandlerError::from(e).context(format!("block {b}")))?;
        let p = ctx
            .store()
            .commit(Block(blk))
            .map_err(|e| HandlerError::from(e).context(format!("committing block {b}")))?;
        out.push((b, p.id()));
    }
    Ok(out)
}

command!(
    /// `uni20.get_blocks.v1`: each owner sends its blocks' encoded payloads to
    /// the root (`TAG_ROOT_DATA`, block order). Descriptor: every block ref.
    pub(crate) GetBlocksV1 = "uni20.get_blocks.v1", schema 1, GetBlocksDesc => (), handle_get_blocks
);

/// Descriptor of [`GetBlocksV1`].
#[derive(Serialize, Deserialize)]
pub(crate) struct GetBlocksDesc {
    /// Every block, in block order.
    pub(crate) blocks: Vec<BlockRef>,
}

fn handle_get_blocks(ctx: &mut WorkerContext<'_>, desc: GetBlocksDesc) -> Result<(), HandlerError> {
    let me = ctx.rank();
    for r in desc.blocks.iter().filter(|r| r.owner == me) {
        let (_, bytes) = ctx
            .store()
            .encoded(r.id)
            .map_err(|e| HandlerError::from(e).with_object(r.id))?;
        ctx.transport().send(0, TAG_ROOT_DATA, &bytes)?;
    }
    Ok(())
}
