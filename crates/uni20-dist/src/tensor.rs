//! Distributed tensors as the root sees them: the static description
//! ([`TensorMeta`]: shape, dtype, block tiling), the block map (per block
//! the owner rank and object id, [`BlockRef`]) behind an `Async` epoch, the
//! full [`Manifest`], and the persistent block type ([`Block`]). This file
//! knows nothing about any operation: operations create pending tensors
//! with [`DistTensor::pending`] and fill them from their replies.

use std::fmt;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use serde::{Deserialize, Serialize};
use uni20_async::{Async, ReadBuffer, WriteBuffer};
use uni20_dispatch::{DType, LocalTensor};
use uni20_persist::{ObjectId, Persist, PersistError};
use uni20_worker::ledger::{HeldBlock, ReleaseLedger};
use uni20_worker::{CollectReport, Controller};

use crate::error::{DistError, LayoutError, ManifestError};
use crate::layout::{c_strides, copy_box, Blocking};
use crate::summary::PlanSummary;
use crate::symmetry::SymmetricLayout;

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
    /// The tensor's header, then its elements in place: the store checksums the
    /// block without copying it, when it first needs the checksum.
    fn encode_split(&self) -> Option<(Vec<u8>, &[u8])> {
        Some((self.0.encode_header(), self.0.as_bytes()))
    }
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        LocalTensor::decode(bytes)
            .map(Block)
            .map_err(|e| PersistError::Decode(e.to_string()))
    }
}

uni20_worker::register_store_type!(Block);

/// Where one block lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockRef {
    /// Owner rank (holds the committed object).
    pub owner: usize,
    /// Object id of the block's payload.
    pub id: ObjectId,
}

/// The static description of a distributed tensor: known as soon as the
/// operation that produces it is submitted.
///
/// Two layouts share this type (docs/architecture.md, "Symmetric layout"):
///
/// - **dense** (`symmetric` is `None`): every block of `blocking` is stored;
///   entry `b` of the block map is block `b` of the tiling (row-major).
/// - **symmetric** (`symmetric` is `Some(layout)`): `blocking` is the tiling
///   of the dense embedding by the legs' tiles ([`SymmetricLayout::blocking`])
///   and only the charge-allowed blocks are stored: entry `b` of the block
///   map is `layout.blocks()[b]`, whose tile tuple is its multi-index in
///   `blocking`. Every other block is an exact zero, never stored, sent,
///   planned or computed. `shape` is the dense embedding's shape.
///
/// Use [`TensorMeta::dense`] or [`TensorMeta::symmetric`] to build one; the
/// block-map helpers ([`TensorMeta::stored_blocks`],
/// [`TensorMeta::stored_multi`], [`TensorMeta::stored_shape`]) cover both.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorMeta {
    /// Global shape (for a symmetric tensor: of its dense embedding).
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
    /// Block tiling (its shape equals `shape`).
    pub blocking: Blocking,
    /// The block-sparse layout of a symmetric tensor; `None` for a dense one.
    pub symmetric: Option<Arc<SymmetricLayout>>,
}

/// Block-map indexing shared by [`TensorMeta`] and [`Manifest`].
fn stored_count(blocking: &Blocking, sym: Option<&SymmetricLayout>) -> usize {
    match sym {
        None => blocking.num_blocks(),
        Some(l) => l.blocks().len(),
    }
}

fn stored_multi_of(blocking: &Blocking, sym: Option<&SymmetricLayout>, b: usize) -> Vec<usize> {
    match sym {
        None => blocking.multi(b),
        Some(l) => l.blocks()[b].tiles.clone(),
    }
}

/// Elements of stored block `b` (see [`stored_multi_of`]), without building
/// its multi-index or shape: the block maps of every operation ask this per
/// block.
fn stored_len_of(blocking: &Blocking, sym: Option<&SymmetricLayout>, b: usize) -> usize {
    match sym {
        None => blocking.block_len(b),
        Some(l) => l.blocks()[b]
            .tiles
            .iter()
            .zip(blocking.extents())
            .map(|(&i, e)| e[i])
            .product(),
    }
}

/// Checks that a symmetric layout sits on `blocking` and `shape`.
fn check_symmetric(shape: &[usize], blocking: &Blocking, l: &SymmetricLayout) -> Result<(), DistError> {
    if l.dense_shape() != shape {
        return Err(DistError::BadManifest(ManifestError::TilingShape {
            extents: blocking.extents().to_vec(),
            shape: l.dense_shape(),
        }));
    }
    let tiles = l.blocking()?;
    if &tiles != blocking {
        return Err(DistError::BadManifest(ManifestError::LayoutTiling {
            extents: blocking.extents().to_vec(),
            layout: tiles.extents().to_vec(),
        }));
    }
    Ok(())
}

impl TensorMeta {
    /// A dense tensor's description.
    pub fn dense(shape: Vec<usize>, dtype: DType, blocking: Blocking) -> TensorMeta {
        TensorMeta {
            shape,
            dtype,
            blocking,
            symmetric: None,
        }
    }

    /// A symmetric tensor's description: its dense embedding's shape, the
    /// tiling by the legs' tiles, and the layout.
    ///
    /// # Errors
    /// [`DistError::Blocking`] when the embedding's tiling has more than
    /// [`MAX_BLOCKS`](crate::layout::MAX_BLOCKS) blocks (allowed or not).
    pub fn symmetric(layout: Arc<SymmetricLayout>, dtype: DType) -> Result<TensorMeta, DistError> {
        Ok(TensorMeta {
            shape: layout.dense_shape(),
            dtype,
            blocking: layout.blocking()?,
            symmetric: Some(layout),
        })
    }

    /// The symmetric layout, or `None` for a dense tensor.
    pub fn layout(&self) -> Option<&SymmetricLayout> {
        self.symmetric.as_deref()
    }

    /// Number of stored blocks (entries of the block map): every block of
    /// the tiling for a dense tensor, the allowed blocks for a symmetric one.
    pub fn stored_blocks(&self) -> usize {
        stored_count(&self.blocking, self.layout())
    }

    /// Multi-index in `blocking` of stored block `b`.
    ///
    /// # Panics
    /// If `b` is not below [`TensorMeta::stored_blocks`].
    pub fn stored_multi(&self, b: usize) -> Vec<usize> {
        stored_multi_of(&self.blocking, self.layout(), b)
    }

    /// Shape of stored block `b`.
    ///
    /// # Panics
    /// If `b` is not below [`TensorMeta::stored_blocks`].
    pub fn stored_shape(&self, b: usize) -> Vec<usize> {
        self.blocking.block_shape(&self.stored_multi(b))
    }

    /// Bytes of stored block `b` (elements of the block times the element size).
    ///
    /// # Panics
    /// If `b` is not below [`TensorMeta::stored_blocks`].
    pub fn block_bytes(&self, b: usize) -> u64 {
        (stored_len_of(&self.blocking, self.layout(), b) * self.dtype.size_bytes()) as u64
    }

    /// Number of elements of the (dense embedding of the) tensor.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True if the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The manifest of a distributed tensor: its static description plus, per
/// block, the owner and object id. Holds no payload. This is what
/// checkpoints store and what planners read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Global shape.
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
    /// Block tiling.
    pub blocking: Blocking,
    /// The block-sparse layout of a symmetric tensor (see [`TensorMeta`]);
    /// `None` for a dense one.
    pub symmetric: Option<Arc<SymmetricLayout>>,
    /// One entry per stored block: for a dense tensor every block, in
    /// row-major order of block multi-indices; for a symmetric one the
    /// allowed blocks, in the layout's order.
    pub blocks: Vec<BlockRef>,
}

impl Manifest {
    /// Builds a manifest from a static description and its block map.
    pub fn new(meta: &TensorMeta, blocks: Vec<BlockRef>) -> Manifest {
        Manifest {
            shape: meta.shape.clone(),
            dtype: meta.dtype,
            blocking: meta.blocking.clone(),
            symmetric: meta.symmetric.clone(),
            blocks,
        }
    }

    /// The symmetric layout, or `None` for a dense tensor.
    pub fn layout(&self) -> Option<&SymmetricLayout> {
        self.symmetric.as_deref()
    }

    /// Number of stored blocks (see [`TensorMeta::stored_blocks`]).
    pub fn stored_blocks(&self) -> usize {
        stored_count(&self.blocking, self.layout())
    }

    /// Multi-index in `blocking` of stored block `b`.
    ///
    /// # Panics
    /// If `b` is not below [`Manifest::stored_blocks`].
    pub fn stored_multi(&self, b: usize) -> Vec<usize> {
        stored_multi_of(&self.blocking, self.layout(), b)
    }

    /// Bytes of stored block `b`.
    ///
    /// # Panics
    /// If `b` is not below [`Manifest::stored_blocks`].
    pub fn block_bytes(&self, b: usize) -> u64 {
        (stored_len_of(&self.blocking, self.layout(), b) * self.dtype.size_bytes()) as u64
    }

    /// Copies `blk`, stored block number `b`, into `dense`: the row-major
    /// bytes of the whole tensor (`len * dtype size` bytes; for a symmetric
    /// tensor its dense embedding, whose absent blocks the caller leaves at
    /// zero). The assembly step of every gather (`DistTensor::to_local`,
    /// the SPMD gather).
    ///
    /// # Errors
    /// [`DistError::BadManifest`] if `b` is not a block of the manifest, or
    /// `blk` does not have the block's shape and the manifest's dtype.
    ///
    /// # Panics
    /// If `dense` is shorter than the tensor.
    pub fn place_block(&self, dense: &mut [u8], b: usize, blk: &LocalTensor) -> Result<(), DistError> {
        if b >= self.stored_blocks() || b >= self.blocks.len() {
            return Err(DistError::BadManifest(ManifestError::NoSuchBlock {
                block: b,
                entries: self.blocks.len(),
                blocks: self.stored_blocks(),
            }));
        }
        let multi = self.stored_multi(b);
        let shape = self.blocking.block_shape(&multi);
        if blk.shape() != shape.as_slice() || blk.dtype() != self.dtype {
            return Err(DistError::BadManifest(ManifestError::BlockContents {
                block: b,
                shape: blk.shape().to_vec(),
                dtype: blk.dtype(),
                expected_shape: shape,
                expected_dtype: self.dtype,
            }));
        }
        let gstrides = c_strides(&self.shape);
        let off = self.blocking.block_offset(&multi);
        let base: usize = off.iter().zip(&gstrides).map(|(o, s)| o * s).sum();
        let elem = self.dtype.size_bytes();
        copy_box(
            blk.as_bytes(),
            &c_strides(&shape),
            0,
            dense,
            &gstrides,
            base,
            &shape,
            elem,
        );
        Ok(())
    }

    /// The static part (shape, dtype, tiling, layout).
    pub fn meta(&self) -> TensorMeta {
        TensorMeta {
            shape: self.shape.clone(),
            dtype: self.dtype,
            blocking: self.blocking.clone(),
            symmetric: self.symmetric.clone(),
        }
    }

    /// Checks that the tiling covers the shape, that a symmetric layout sits
    /// on that tiling and shape, and that there is one block entry per
    /// stored block.
    ///
    /// # Errors
    /// [`DistError::BadManifest`] naming what is inconsistent.
    pub fn validate(&self) -> Result<(), DistError> {
        if self.blocking.shape() != self.shape {
            return Err(DistError::BadManifest(ManifestError::TilingShape {
                extents: self.blocking.extents().to_vec(),
                shape: self.shape.clone(),
            }));
        }
        if let Some(l) = self.layout() {
            check_symmetric(&self.shape, &self.blocking, l)?;
        }
        if self.blocks.len() != self.stored_blocks() {
            return Err(DistError::BadManifest(ManifestError::BlockCount {
                entries: self.blocks.len(),
                blocks: self.stored_blocks(),
            }));
        }
        Ok(())
    }
}

/// A distributed tensor, dense or symmetric (block-sparse by charge
/// sector; see [`TensorMeta`]).
///
/// Its static description ([`TensorMeta`]: shape, dtype, block tiling,
/// symmetric layout) is
/// fixed when the tensor is created; its block map (owner rank and object
/// id of every block) lives behind an [`Async`] and is written when the
/// operation producing the tensor completes, or poisoned when it fails;
/// for a pipelined operation (outputs named at submission,
/// [`pipelining`](crate::pipelining)) it is written when the operation is
/// sent, and a later failure is kept with the tensor and reported again
/// by [`DistTensor::wait`]. An
/// operation on the tensor takes a read epoch of that `Async` when it is
/// called (program order is causal order) and runs once the block map is
/// ready. Cloning shares the same tensor.
#[derive(Clone)]
pub struct DistTensor {
    inner: Arc<Inner>,
}

struct Inner {
    meta: TensorMeta,
    blocks: Async<Vec<BlockRef>>,
    summary: OnceLock<PlanSummary>,
    /// The universe this tensor belongs to ([`Controller::universe_id`]).
    universe: u64,
    /// Where its blocks are released when the last handle drops.
    ledger: Arc<ReleaseLedger>,
    /// The blocks this handle set retains in the ledger (once known).
    held: Mutex<Vec<HeldBlock>>,
    /// Whether the operation producing a pipelined tensor has completed
    /// (its block map is written at submission).
    flight: Mutex<Flight>,
}

/// A handle that does not keep a tensor alive (the completion callback of
/// a pipelined command holds one).
pub(crate) struct WeakDistTensor(std::sync::Weak<Inner>);

impl WeakDistTensor {
    /// The tensor, if a handle still names it.
    pub(crate) fn upgrade(&self) -> Option<DistTensor> {
        self.0.upgrade().map(|inner| DistTensor { inner })
    }
}

/// Completion of the operation producing a tensor whose block map was
/// written at submission (pipelined submission).
#[derive(Clone, Debug)]
enum Flight {
    /// Completed, or never pipelined (the block map is written on completion).
    Settled,
    /// Submitted with named outputs; the replies have not all arrived.
    Pending,
    /// The pipelined operation failed after its block map was written.
    Failed(Arc<DistError>),
}

impl Drop for Inner {
    /// The last handle is gone: the blocks are queued for release on their
    /// owners (unless another handle or a checkpoint names them). Never
    /// blocks; nothing happens once the universe has ended.
    fn drop(&mut self) {
        let held = std::mem::take(&mut *self.held.lock());
        if !held.is_empty() {
            self.ledger.drop_refs(&held);
        }
    }
}

impl fmt::Debug for DistTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistTensor")
            .field("shape", &self.inner.meta.shape)
            .field("dtype", &self.inner.meta.dtype)
            .field("blocks", &self.inner.meta.blocking.num_blocks())
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl DistTensor {
    /// A tensor of the universe of `ctl` whose block map will be written
    /// through the returned buffer (by the operation that produces it, which
    /// then calls [`DistTensor::adopt`]).
    pub(crate) fn pending(ctl: &Controller<'_>, meta: TensorMeta) -> (DistTensor, WriteBuffer<Vec<BlockRef>>) {
        let inner = Arc::new(Inner {
            meta,
            blocks: Async::empty(),
            summary: OnceLock::new(),
            universe: ctl.universe_id(),
            ledger: ctl.ledger().clone(),
            held: Mutex::new(Vec::new()),
            flight: Mutex::new(Flight::Settled),
        });
        let w = inner.blocks.write();
        (DistTensor { inner }, w)
    }

    /// Wraps a manifest of objects that live in the universe of `ctl` (for
    /// example one restored from a checkpoint, or another tensor's manifest);
    /// ready at once. The tensor retains its blocks like any other: they are
    /// released when the last handle naming them (of this or any other
    /// tensor) is dropped, unless a checkpoint keeps them.
    ///
    /// # Errors
    /// [`DistError::BadManifest`] if the tiling does not cover the shape or
    /// the number of block entries differs from the number of blocks, or a
    /// block's owner is not a rank of this universe.
    pub fn from_manifest(ctl: &Controller<'_>, manifest: Manifest) -> Result<DistTensor, DistError> {
        manifest.validate()?;
        if let Some(b) = manifest.blocks.iter().find(|b| b.owner >= ctl.size()) {
            return Err(DistError::BadManifest(ManifestError::OwnerOutside {
                id: b.id,
                owner: b.owner,
                size: ctl.size(),
            }));
        }
        let (t, w) = DistTensor::pending(ctl, manifest.meta());
        t.adopt(&manifest.blocks);
        match w.wait() {
            Ok(mut g) => {
                g.set(manifest.blocks);
            }
            Err(e) => return Err(e.into()),
        }
        Ok(t)
    }

    /// Records the tensor's blocks (once its producing operation has filled
    /// its block map): they are retained in the universe's ledger until the
    /// last handle drops.
    pub(crate) fn adopt(&self, blocks: &[BlockRef]) {
        let held: Vec<HeldBlock> = blocks
            .iter()
            .enumerate()
            .map(|(b, r)| (r.owner, r.id, self.inner.meta.block_bytes(b)))
            .collect();
        self.inner.ledger.retain(&held);
        let previous = std::mem::replace(&mut *self.inner.held.lock(), held);
        if !previous.is_empty() {
            self.inner.ledger.drop_refs(&previous);
        }
    }

    /// The identity of the universe this tensor belongs to.
    pub fn universe(&self) -> u64 {
        self.inner.universe
    }

    /// Checks that this tensor belongs to the universe of `ctl`.
    ///
    /// # Errors
    /// [`DistError::WrongUniverse`] naming both universes.
    pub fn check_universe(&self, ctl: &Controller<'_>) -> Result<(), DistError> {
        if self.inner.universe == ctl.universe_id() {
            Ok(())
        } else {
            Err(DistError::WrongUniverse {
                tensor: self.inner.universe,
                this: ctl.universe_id(),
            })
        }
    }

    /// Drops this handle and, if it was the last one naming the tensor's
    /// blocks, frees them on their owners now: sends every queued release
    /// ([`Controller::collect`]) and waits until the owners confirm.
    ///
    /// # Errors
    /// [`DistError::WrongUniverse`]; a failure of an owner's store
    /// (fail-stop).
    pub fn release(self, ctl: &Controller<'_>) -> Result<CollectReport, DistError> {
        self.check_universe(ctl)?;
        drop(self);
        Ok(ctl.collect()?)
    }

    /// Shape, dtype and tiling.
    pub fn meta(&self) -> &TensorMeta {
        &self.inner.meta
    }
    /// Global shape.
    pub fn shape(&self) -> &[usize] {
        &self.inner.meta.shape
    }
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.inner.meta.dtype
    }
    /// Block tiling.
    pub fn blocking(&self) -> &Blocking {
        &self.inner.meta.blocking
    }

    /// The symmetric layout (legs, flux, allowed blocks), or `None` for a
    /// dense tensor.
    pub fn layout(&self) -> Option<&SymmetricLayout> {
        self.inner.meta.layout()
    }

    /// True for a symmetric (block-sparse) tensor.
    pub fn is_symmetric(&self) -> bool {
        self.inner.meta.symmetric.is_some()
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.inner.meta.len()
    }
    /// True if the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True once the producing operation has completed or failed.
    pub fn is_ready(&self) -> bool {
        self.inner.blocks.read().is_ready() && !matches!(*self.inner.flight.lock(), Flight::Pending)
    }

    /// A handle that does not keep the tensor alive.
    pub(crate) fn downgrade(&self) -> WeakDistTensor {
        WeakDistTensor(Arc::downgrade(&self.inner))
    }

    /// Marks the tensor's producing operation as submitted with named
    /// outputs: its block map is written before the operation completes,
    /// and [`DistTensor::is_ready`] waits for [`DistTensor::settle`].
    pub(crate) fn begin_flight(&self) {
        *self.inner.flight.lock() = Flight::Pending;
    }

    /// Records the completion of a pipelined producing operation: `None`
    /// when it succeeded, its error otherwise.
    pub(crate) fn settle(&self, failure: Option<Arc<DistError>>) {
        *self.inner.flight.lock() = match failure {
            None => Flight::Settled,
            Some(e) => Flight::Failed(e),
        };
    }

    /// The failure of the pipelined operation that produced this tensor,
    /// once known.
    pub(crate) fn pipelined_failure(&self) -> Option<Arc<DistError>> {
        match &*self.inner.flight.lock() {
            Flight::Failed(e) => Some(e.clone()),
            _ => None,
        }
    }

    /// A read epoch of the block map, taken now (for operations that consume
    /// this tensor).
    pub(crate) fn read_blocks(&self) -> ReadBuffer<Vec<BlockRef>> {
        self.inner.blocks.read()
    }

    /// The summary of the plan of the operation that produced this tensor
    /// (work items, transfers, bytes moved, bytes through the root), once
    /// that operation was planned. `None` for tensors made by scatter, file
    /// reads or [`DistTensor::from_manifest`].
    pub fn plan_summary(&self) -> Option<&PlanSummary> {
        self.inner.summary.get()
    }

    pub(crate) fn set_plan_summary(&self, summary: PlanSummary) {
        let _ = self.inner.summary.set(summary);
    }

    /// Drives the job until this tensor's producing operation has completed.
    ///
    /// # Errors
    /// [`DistError::WrongUniverse`] for a tensor of another universe; the
    /// producing operation's failure, or the first failure of the job
    /// (fail-stop), as [`DistError::Async`] / [`DistError::Job`]. The
    /// variant does not depend on when the failing reply arrived: for a
    /// pipelined operation (block map written at submission) whose failure
    /// was collected before this call, the same command diagnostic is
    /// returned again; only an error that cannot be copied (an I/O error
    /// on the root) comes back wrapped as [`DistError::Failed`].
    pub fn wait(&self, ctl: &Controller<'_>) -> Result<(), DistError> {
        self.check_universe(ctl)?;
        ctl.wait_until(|| self.is_ready())?;
        if let Some(e) = self.pipelined_failure() {
            return Err(DistError::reissue(&e));
        }
        self.inner.blocks.read().wait().map(|_| ()).map_err(DistError::from)
    }

    /// The full manifest, waiting for the producing operation.
    ///
    /// # Errors
    /// As [`DistTensor::wait`].
    pub fn manifest(&self, ctl: &Controller<'_>) -> Result<Manifest, DistError> {
        self.wait(ctl)?;
        let blocks = self.inner.blocks.read().get_wait()?;
        Ok(Manifest::new(&self.inner.meta, blocks))
    }
}

/// `Err` when `operands` mix symmetric and dense tensors
/// ([`LayoutError::Mixed`]).
pub(crate) fn check_layouts(operation: &'static str, operands: &[&DistTensor]) -> Result<(), DistError> {
    let sym = operands.iter().position(|t| t.is_symmetric());
    let dense = operands.iter().position(|t| !t.is_symmetric());
    match (sym, dense) {
        (Some(symmetric), Some(dense)) => Err(LayoutError::Mixed {
            operation,
            symmetric,
            dense,
        }
        .into()),
        _ => Ok(()),
    }
}

/// `Err` when an operand is symmetric ([`LayoutError::DenseOnly`]) for an
/// operation that takes dense tensors only.
pub(crate) fn dense_only(operation: &'static str, operands: &[&DistTensor]) -> Result<(), DistError> {
    match operands.iter().position(|t| t.is_symmetric()) {
        Some(operand) => Err(LayoutError::DenseOnly {
            operation,
            operand,
            hint: "convert it with DistTensor::to_dense, or from a dense tensor with DistTensor::from_dense",
        }
        .into()),
        None => Ok(()),
    }
}

/// Like [`collect_refs`] for replies that name work items instead of
/// blocks: `(rank, [(item, id)])`, where item `i` produced output block
/// `item_blocks[i]`.
///
/// # Errors
/// As [`collect_refs`]; an item outside `item_blocks` counts as a block
/// outside `0..n`.
pub(crate) fn collect_item_refs(
    replies: Vec<(usize, Vec<(usize, ObjectId)>)>,
    item_blocks: &[usize],
    n: usize,
) -> Result<Vec<BlockRef>, DistError> {
    let by_block = replies
        .into_iter()
        .map(|(rank, ids)| {
            let ids = ids
                .into_iter()
                .map(|(item, id)| (item_blocks.get(item).copied().unwrap_or(usize::MAX), id));
            (rank, ids.collect())
        })
        .collect();
    collect_refs(by_block, n)
}

/// Turns `(rank, [(block, id)])` replies into a complete block map of `n`
/// blocks.
///
/// # Errors
/// [`DistError::Protocol`] if a rank reports a block outside `0..n` or no
/// rank reports some block.
pub(crate) fn collect_refs(
    replies: Vec<(usize, Vec<(usize, ObjectId)>)>,
    n: usize,
) -> Result<Vec<BlockRef>, DistError> {
    let mut refs = vec![None; n];
    for (rank, ids) in replies {
        for (b, id) in ids {
            match refs.get_mut(b) {
                Some(slot) => *slot = Some(BlockRef { owner: rank, id }),
                None => return Err(DistError::Protocol(format!("rank {rank} reported block {b} of {n}"))),
            }
        }
    }
    refs.into_iter()
        .enumerate()
        .map(|(b, r)| r.ok_or_else(|| DistError::Protocol(format!("no rank reported block {b} of {n}"))))
        .collect()
}

/// A manifest for the planners' unit tests: `shape` tiled by `extents`,
/// block `b` owned by rank `owner(b)` with object id `(origin, b)`.
#[cfg(test)]
pub(crate) fn test_manifest(
    shape: &[usize],
    extents: Vec<Vec<usize>>,
    dtype: DType,
    origin: u32,
    owner: impl Fn(usize) -> usize,
) -> Manifest {
    let blocking = Blocking::from_extents(shape, extents).expect("a valid test tiling");
    Manifest {
        shape: shape.to_vec(),
        dtype,
        symmetric: None,
        blocks: (0..blocking.num_blocks())
            .map(|b| BlockRef {
                owner: owner(b),
                id: ObjectId::new(origin, b as u64),
            })
            .collect(),
        blocking,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_errors_carry_typed_fields() {
        let blocking = Blocking::from_extents(&[4], vec![vec![2, 2]]).unwrap();
        let block = BlockRef {
            owner: 1,
            id: ObjectId::new(1, 0),
        };
        let short = Manifest {
            shape: vec![4],
            dtype: DType::F64,
            blocking: blocking.clone(),
            symmetric: None,
            blocks: vec![block],
        };
        assert!(matches!(
            short.validate(),
            Err(DistError::BadManifest(ManifestError::BlockCount {
                entries: 1,
                blocks: 2
            }))
        ));
        let wrong_shape = Manifest {
            shape: vec![5],
            ..short.clone()
        };
        assert!(matches!(
            wrong_shape.validate(),
            Err(DistError::BadManifest(ManifestError::TilingShape { ref shape, .. })) if shape == &[5]
        ));
        let m = Manifest {
            blocks: vec![block, block],
            ..short
        };
        let mut dense = vec![0u8; 32];
        let blk = LocalTensor::from_f64(&[3], vec![1.0, 2.0, 3.0]).unwrap();
        let e = m.place_block(&mut dense, 1, &blk).unwrap_err();
        assert!(
            matches!(
                &e,
                DistError::BadManifest(ManifestError::BlockContents { block: 1, shape, expected_shape, .. })
                    if shape == &[3] && expected_shape == &[2]
            ),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "invalid manifest: block 1 has shape [3] f64, the manifest says [2] f64"
        );
        assert!(matches!(
            m.place_block(&mut dense, 2, &blk),
            Err(DistError::BadManifest(ManifestError::NoSuchBlock {
                block: 2,
                entries: 2,
                blocks: 2
            }))
        ));
    }
}
