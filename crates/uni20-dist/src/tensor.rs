//! Distributed tensors: a manifest on the root, payload blocks in the
//! owners' persistent stores (the design's `MpiStorage<Cpu>`).

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use uni20_async::{Async, ReadBuffer, WriteBuffer};
use uni20_dispatch::{DType, LocalTensor};
use uni20_persist::{ObjectId, Persist, PersistError, PersistentPtr};
use uni20_worker::{
    decode_descriptor, encode_reply, register_command, CommandSpec, Controller, Envelope, HandlerError, WorkerContext,
    TAG_ROOT_DATA,
};

use crate::contract::ContractPlan;
use crate::error::DistError;
use crate::layout::{c_strides, copy_box, Grid};

/// One dense block stored as a persistent object.
///
/// Encoding: [`LocalTensor::encode`] (small header + one memcpy of the raw
/// little-endian elements).
#[derive(Clone, Debug, PartialEq)]
pub struct Block(pub LocalTensor);

impl Persist for Block {
    const TYPE_NAME: &'static str = "uni20.block.v1";
    fn encode(&self) -> Vec<u8> {
        self.0.encode()
    }
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        LocalTensor::decode(bytes)
            .map(Block)
            .map_err(|e| PersistError::Decode(e.to_string()))
    }
}

/// Where one block lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockRef {
    /// Owner rank (holds the committed object).
    pub owner: usize,
    /// Object id of the block's payload.
    pub id: ObjectId,
}

/// The root's description of a distributed tensor: global shape, dtype,
/// block grid, and per block its owner and object id. Holds no payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Global shape.
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
    /// Block decomposition.
    pub grid: Grid,
    /// One entry per block, in row-major order of block multi-indices.
    pub blocks: Vec<BlockRef>,
}

impl Manifest {
    /// Bytes of block number `b`.
    pub fn block_bytes(&self, b: usize) -> u64 {
        let shape = self.grid.block_shape(&self.grid.multi(b));
        (shape.iter().product::<usize>() * self.dtype.size_bytes()) as u64
    }
}

/// The static description of a distributed tensor: known as soon as the
/// operation that produces it is submitted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorMeta {
    /// Global shape.
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
    /// Block decomposition.
    pub grid: Grid,
}

impl Manifest {
    /// The static part (shape, dtype, grid).
    pub fn meta(&self) -> TensorMeta {
        TensorMeta {
            shape: self.shape.clone(),
            dtype: self.dtype,
            grid: self.grid.clone(),
        }
    }
}

/// A distributed dense tensor.
///
/// Its static description ([`TensorMeta`]: shape, dtype, block grid) is
/// fixed when the tensor is created; its block map (owner rank and object
/// id of every block) lives behind an [`Async`] and is written when the
/// operation producing the tensor completes, or poisoned when it fails. An
/// operation on the tensor takes a read epoch of that `Async` when it is
/// called (program order is causal order) and runs once the block map is
/// ready. Cloning shares the same tensor.
#[derive(Clone)]
pub struct DistTensor {
    meta: Arc<TensorMeta>,
    blocks: Arc<Async<Vec<BlockRef>>>,
    plan: Arc<OnceLock<ContractPlan>>,
}

impl fmt::Debug for DistTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistTensor")
            .field("shape", &self.meta.shape)
            .field("dtype", &self.meta.dtype)
            .field("blocks", &self.meta.grid.num_blocks())
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl DistTensor {
    /// A tensor whose block map will be written through the returned buffer.
    pub(crate) fn pending(meta: TensorMeta) -> (DistTensor, WriteBuffer<Vec<BlockRef>>) {
        let blocks = Arc::new(Async::empty());
        let w = blocks.write();
        (
            DistTensor {
                meta: Arc::new(meta),
                blocks,
                plan: Arc::new(OnceLock::new()),
            },
            w,
        )
    }

    /// Wraps a manifest (e.g. one restored from a checkpoint); ready at once.
    ///
    /// # Errors
    /// [`DistError::Shape`] if the grid does not tile the shape or the
    /// number of block entries differs from the number of grid blocks.
    pub fn from_manifest(manifest: Manifest) -> Result<DistTensor, DistError> {
        let g = &manifest.grid;
        let tiles = g.extents.len() == manifest.shape.len()
            && g.extents
                .iter()
                .zip(&manifest.shape)
                .all(|(e, &n)| !e.is_empty() && e.iter().sum::<usize>() == n);
        if !tiles {
            return Err(DistError::Shape(format!(
                "manifest grid {:?} does not tile shape {:?}",
                g.extents, manifest.shape
            )));
        }
        if manifest.blocks.len() != g.num_blocks() {
            return Err(DistError::Shape(format!(
                "manifest lists {} blocks, its grid has {}",
                manifest.blocks.len(),
                g.num_blocks()
            )));
        }
        let meta = manifest.meta();
        Ok(DistTensor {
            meta: Arc::new(meta),
            blocks: Arc::new(Async::new(manifest.blocks)),
            plan: Arc::default(),
        })
    }

    /// Shape, dtype and grid.
    pub fn meta(&self) -> &TensorMeta {
        &self.meta
    }
    /// Global shape.
    pub fn shape(&self) -> &[usize] {
        &self.meta.shape
    }
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.meta.dtype
    }
    /// Block grid.
    pub fn grid(&self) -> &Grid {
        &self.meta.grid
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.meta.shape.iter().product()
    }
    /// True if the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True once the producing operation has completed or failed.
    pub fn is_ready(&self) -> bool {
        self.blocks.read().is_ready()
    }

    /// A read epoch of the block map, taken now (for operations that consume
    /// this tensor).
    pub(crate) fn read_blocks(&self) -> ReadBuffer<Vec<BlockRef>> {
        self.blocks.read()
    }

    /// The plan of the contraction that produced this tensor, once it ran.
    pub fn plan(&self) -> Option<ContractPlan> {
        self.plan.get().cloned()
    }

    pub(crate) fn set_plan(&self, plan: ContractPlan) {
        let _ = self.plan.set(plan);
    }

    /// Drives the job until this tensor's producing operation has completed.
    ///
    /// # Errors
    /// The producing operation's failure, or the first failure of the job
    /// (fail-stop), as [`DistError::Async`] / [`DistError::Job`].
    pub fn wait(&self, ctl: &Controller<'_>) -> Result<(), DistError> {
        ctl.wait_until(|| self.is_ready())?;
        self.blocks.read().wait().map(|_| ()).map_err(DistError::from)
    }

    /// The full manifest, waiting for the producing operation.
    ///
    /// # Errors
    /// As [`DistTensor::wait`].
    pub fn manifest(&self, ctl: &Controller<'_>) -> Result<Manifest, DistError> {
        self.wait(ctl)?;
        let blocks = self.blocks.read().get_wait()?;
        Ok(Manifest {
            shape: self.meta.shape.clone(),
            dtype: self.meta.dtype,
            grid: self.meta.grid.clone(),
            blocks,
        })
    }

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
    /// [`DistError::BlockSize`] for `block == 0`; [`DistError::Shape`] for a
    /// placement with no rank or a rank outside the universe;
    /// [`DistError::Job`] if an owner fails to commit a block.
    pub fn from_local_on(
        ctl: &Controller<'_>,
        local: &LocalTensor,
        block: usize,
        placement: &Placement,
    ) -> Result<DistTensor, DistError> {
        if block == 0 {
            return Err(DistError::BlockSize);
        }
        let ranks = placement.ranks(ctl)?;
        let grid = Grid::regular(local.shape(), block);
        let owners: Vec<usize> = (0..grid.num_blocks()).map(|b| ranks[b % ranks.len()]).collect();
        let blocks: Vec<LocalTensor> = (0..grid.num_blocks())
            .map(|b| extract_block(local, &grid, b))
            .collect::<Result<_, _>>()?;
        let refs = if ranks == [0] {
            blocks
                .into_iter()
                .map(|blk| {
                    Ok(BlockRef {
                        owner: 0,
                        id: ctl.store().commit(Block(blk)).map_err(store_err)?.id(),
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
        DistTensor::from_manifest(Manifest {
            shape: local.shape().to_vec(),
            dtype: local.dtype(),
            grid,
            blocks: refs,
        })
    }

    /// Gathers the whole tensor onto the root (explicit materialisation:
    /// the payload passes through the root because the user asked for it),
    /// waiting for the producing operation first.
    ///
    /// # Errors
    /// As [`DistTensor::wait`]; [`DistError::Job`] if an owner cannot serve
    /// a block.
    pub fn to_local(&self, ctl: &Controller<'_>) -> Result<LocalTensor, DistError> {
        let m = self.manifest(ctl)?;
        let elem = m.dtype.size_bytes();
        let total: usize = m.shape.iter().product();
        let mut bytes = vec![0u8; total * elem];
        let gstrides = c_strides(&m.shape);
        let mut place = |b: usize, blk: &LocalTensor| -> Result<(), DistError> {
            let multi = m.grid.multi(b);
            let shape = m.grid.block_shape(&multi);
            if blk.shape() != shape.as_slice() || blk.dtype() != m.dtype {
                return Err(DistError::Shape(format!(
                    "block {b} has shape {:?} {}, manifest says {shape:?} {}",
                    blk.shape(),
                    blk.dtype().name(),
                    m.dtype.name()
                )));
            }
            let off = m.grid.block_offset(&multi);
            let base: usize = off.iter().zip(&gstrides).map(|(o, s)| o * s).sum();
            copy_box(
                blk.as_bytes(),
                &c_strides(&shape),
                0,
                &mut bytes,
                &gstrides,
                base,
                &shape,
                elem,
            );
            Ok(())
        };
        let owners: Vec<usize> = m.blocks.iter().map(|r| r.owner).collect();
        if owners.iter().all(|&o| o == 0) {
            for (b, r) in m.blocks.iter().enumerate() {
                let v = ctl
                    .store()
                    .load_wait(PersistentPtr::<Block>::from_id(r.id))
                    .map_err(store_err)?;
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

/// Which ranks own the blocks of a new tensor (round-robin over them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The compute workers ([`Controller::worker_ranks`]).
    Workers,
    /// The storage ranks ([`Controller::storage_ranks`]); an error if the
    /// universe has none.
    Storage,
    /// Explicit ranks (the root only when it is alone).
    Ranks(Vec<usize>),
}

impl Placement {
    fn ranks(&self, ctl: &Controller<'_>) -> Result<Vec<usize>, DistError> {
        let ranks = match self {
            Placement::Workers => ctl.worker_ranks(),
            Placement::Storage => ctl.storage_ranks(),
            Placement::Ranks(r) => r.clone(),
        };
        if ranks.is_empty() {
            return Err(DistError::Shape(format!("placement {self:?} names no rank")));
        }
        if let Some(bad) = ranks.iter().find(|&&r| r >= ctl.size() || (r == 0 && ctl.size() > 1)) {
            return Err(DistError::Shape(format!(
                "placement {self:?}: rank {bad} cannot own blocks in a universe of {} ranks",
                ctl.size()
            )));
        }
        Ok(ranks)
    }
}

/// Turns `(rank, [(block, id)])` replies into a complete block map.
pub(crate) fn collect_refs(
    replies: Vec<(usize, Vec<(usize, ObjectId)>)>,
    n: usize,
) -> Result<Vec<BlockRef>, DistError> {
    let mut refs = vec![None; n];
    for (rank, ids) in replies {
        for (b, id) in ids {
            match refs.get_mut(b) {
                Some(slot) => *slot = Some(BlockRef { owner: rank, id }),
                None => return Err(DistError::Shape(format!("rank {rank} reported block {b} of {n}"))),
            }
        }
    }
    refs.into_iter()
        .enumerate()
        .map(|(b, r)| r.ok_or_else(|| DistError::Shape(format!("no rank reported block {b}"))))
        .collect()
}

pub(crate) fn store_err(e: PersistError) -> DistError {
    DistError::Store(e)
}

/// Copies block `b` of `grid` out of a dense local tensor.
pub(crate) fn extract_block(local: &LocalTensor, grid: &Grid, b: usize) -> Result<LocalTensor, DistError> {
    let multi = grid.multi(b);
    let shape = grid.block_shape(&multi);
    let off = grid.block_offset(&multi);
    let gstrides = c_strides(local.shape());
    let base: usize = off.iter().zip(&gstrides).map(|(o, s)| o * s).sum();
    let elem = local.dtype().size_bytes();
    let mut out = vec![0u8; shape.iter().product::<usize>() * elem];
    copy_box(
        local.as_bytes(),
        &gstrides,
        base,
        &mut out,
        &c_strides(&shape),
        0,
        &shape,
        elem,
    );
    Ok(LocalTensor::from_bytes(local.dtype(), &shape, &out)?)
}

/// `uni20.put_blocks.v1`: the root streams blocks to their owners, which
/// commit them. Each owner receives its blocks' encoded payloads from the
/// root (`TAG_ROOT_DATA`, block order). Reply: `(block number, object id)`.
pub struct PutBlocksV1;

/// Descriptor of [`PutBlocksV1`].
#[derive(Serialize, Deserialize)]
pub struct PutBlocksDesc {
    /// Owner rank of each block, in block order.
    pub owners: Vec<usize>,
}

impl CommandSpec for PutBlocksV1 {
    const WIRE_NAME: &'static str = "uni20.put_blocks.v1";
    const DEBUG_NAME: &'static str = "put_blocks";
    const SCHEMA_VERSION: u32 = 1;
    type Descriptor = PutBlocksDesc;
    type Reply = Vec<(usize, ObjectId)>;
}

fn handle_put_blocks(ctx: &mut WorkerContext<'_>, env: &Envelope) -> Result<Vec<u8>, HandlerError> {
    let desc = decode_descriptor::<PutBlocksV1>(env)?;
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
    encode_reply::<PutBlocksV1>(&out)
}

register_command! {
    static PUT_BLOCKS_V1 = { wire: "uni20.put_blocks.v1", debug: "put_blocks", schema: 1, handler: handle_put_blocks };
}

/// `uni20.get_blocks.v1`: each owner sends its blocks' encoded payloads to
/// the root (`TAG_ROOT_DATA`, block order). Descriptor: every block ref.
pub struct GetBlocksV1;

/// Descriptor of [`GetBlocksV1`].
#[derive(Serialize, Deserialize)]
pub struct GetBlocksDesc {
    /// Every block, in block order.
    pub blocks: Vec<BlockRef>,
}

impl CommandSpec for GetBlocksV1 {
    const WIRE_NAME: &'static str = "uni20.get_blocks.v1";
    const DEBUG_NAME: &'static str = "get_blocks";
    const SCHEMA_VERSION: u32 = 1;
    type Descriptor = GetBlocksDesc;
    type Reply = ();
}

fn handle_get_blocks(ctx: &mut WorkerContext<'_>, env: &Envelope) -> Result<Vec<u8>, HandlerError> {
    let desc = decode_descriptor::<GetBlocksV1>(env)?;
    let me = ctx.rank();
    for r in desc.blocks.iter().filter(|r| r.owner == me) {
        let (_, bytes) = ctx
            .store()
            .encoded(r.id)
            .map_err(|e| HandlerError::from(e).with_object(r.id))?;
        ctx.transport().send(0, TAG_ROOT_DATA, &bytes)?;
    }
    encode_reply::<GetBlocksV1>(&())
}

register_command! {
    static GET_BLOCKS_V1 = { wire: "uni20.get_blocks.v1", debug: "get_blocks", schema: 1, handler: handle_get_blocks };
}
