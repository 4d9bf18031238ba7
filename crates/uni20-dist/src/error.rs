//! Errors of distributed operations ([`DistError`]): validation errors
//! found on the root before anything is submitted, and failures of
//! submitted commands (fail-stop); with the typed errors its variants
//! carry (each family's in a leaf file of its folder).

use std::path::PathBuf;

use uni20_dispatch::decomp::{DecompError, DecompKind};
use uni20_dispatch::{BlockError, ContractError, DType, DTypeError, ElementwiseError, SpecError, TensorError, C64};
use uni20_persist::ObjectId;
use uni20_worker::JobError;

pub use crate::layout::BlockingError;
pub use crate::ops::decomp::error::{SplitError, SymDecompError};
pub use crate::ops::elementwise::error::LabelError;
use crate::symmetry::{DenseEmbeddingError, SymContractError, SymmetryError};

/// Error of a distributed tensor operation.
///
/// Validation errors (`Spec`, `ShapeMismatch`, `BlockingMismatch`,
/// `Blocking`, `PlanTooLarge`, `Npy`, ...) are detected on the root before
/// anything is submitted: nothing ran and nothing was lost. `Job` means a
/// submitted command failed (fail-stop).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DistError {
    /// The einsum spec is malformed or does not fit the operands.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A charge, leg or symmetric layout is not valid (symmetric tensors).
    #[error(transparent)]
    Symmetry(#[from] SymmetryError),
    /// Two symmetric operands cannot be contracted as asked (sector lists,
    /// directions, tiles or labels of the contracted legs).
    #[error(transparent)]
    SymContract(#[from] SymContractError),
    /// A dense tensor does not respect a symmetric layout, or a dense
    /// embedding cannot be built.
    #[error(transparent)]
    DenseEmbedding(#[from] DenseEmbeddingError),
    /// An operation got operands of the wrong layout: a symmetric and a dense
    /// operand mixed, or a symmetric operand where only dense ones are taken.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// Symmetric operands whose legs or fluxes do not fit an element-wise
    /// operation, legs that cannot be fused or split as asked, or a tiling
    /// that cuts across sectors.
    #[error(transparent)]
    SymLayout(#[from] SymLayoutError),
    /// Root-side validation of the local contraction rules failed (C of the
    /// wrong shape, complex scalar with a real output, ...).
    #[error(transparent)]
    Contract(#[from] ContractError),
    /// A block tiling cannot be built (block size zero, too many blocks).
    #[error(transparent)]
    Blocking(#[from] BlockingError),
    /// An index is blocked differently in two operands of an operation that
    /// requires the same blocking (strict mode).
    #[error(
        "index `{label}` is blocked as {first:?} in one operand and {second:?} in another; use the same block size"
    )]
    BlockingMismatch {
        /// The index label.
        label: char,
        /// Block extents in the first operand.
        first: Vec<usize>,
        /// Block extents in the other operand.
        second: Vec<usize>,
    },
    /// Two shapes that must agree do not.
    #[error("{what}: expected shape {expected:?}, got {got:?}")]
    ShapeMismatch {
        /// Which operand or argument.
        what: String,
        /// The shape required.
        expected: Vec<usize>,
        /// The shape given.
        got: Vec<usize>,
    },
    /// A list that needs one entry per mode has another length (per-mode
    /// block sizes, a tiling of another rank).
    #[error("{what}: expected {expected} entries (one per mode), got {got}")]
    RankMismatch {
        /// Which argument.
        what: String,
        /// The rank of the tensor.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// The label spec of an element-wise operation is malformed or does not
    /// fit the operands.
    #[error(transparent)]
    Labels(#[from] LabelError),
    /// Root-side validation of an element-wise rule failed (element count
    /// of a reshape, a complex scalar with a real output, ...).
    #[error(transparent)]
    Elementwise(#[from] ElementwiseError),
    /// A reshape that neither fuses adjacent modes into one nor splits one
    /// mode into adjacent modes.
    #[error(
        "cannot reshape {from:?} to {to:?}: modes {old_modes:?} would become modes {new_modes:?}; a distributed \
         reshape may only fuse adjacent modes into one or split one mode into adjacent modes"
    )]
    ReshapeNotAdjacent {
        /// The tensor's shape.
        from: Vec<usize>,
        /// The requested shape.
        to: Vec<usize>,
        /// The old modes of the offending group.
        old_modes: Vec<usize>,
        /// The new modes of the offending group.
        new_modes: Vec<usize>,
    },
    /// A worker-side creation recipe does not fit the shape (an identity
    /// split beyond the rank).
    #[error(transparent)]
    Block(#[from] BlockError),
    /// A plan would exceed a size limit (blocks, block products, bytes of
    /// one block); nothing was allocated or submitted.
    #[error("{what}: {count} exceeds the limit of {limit}; {hint}")]
    PlanTooLarge {
        /// What was counted.
        what: String,
        /// The count (saturated at `u128::MAX`).
        count: u128,
        /// The limit.
        limit: u128,
        /// What the user can do (for example "use a larger block size").
        hint: String,
    },
    /// An operation names no rank to run on.
    #[error("{0} names no rank")]
    NoRanks(String),
    /// A rank outside the universe, or one that cannot play the role asked.
    #[error("{what}: rank {rank} in a universe of {size} ranks")]
    BadRank {
        /// The rank.
        rank: usize,
        /// The universe size.
        size: usize,
        /// What the rank was asked to do.
        what: String,
    },
    /// A manifest is inconsistent (tiling vs shape, block count, block
    /// contents, owners).
    #[error("invalid manifest: {0}")]
    BadManifest(ManifestError),
    /// A tensor of one universe was used in another (each universe has its
    /// own objects; a tensor's blocks do not exist elsewhere).
    #[error("a tensor of universe {tensor:#018x} was used in universe {this:#018x}")]
    WrongUniverse {
        /// The tensor's universe.
        tensor: u64,
        /// The universe it was used in.
        this: u64,
    },
    /// A named item (a tensor of a checkpoint, a block a checkpoint keeps)
    /// does not exist.
    #[error("{0} not found")]
    NotFound(Missing),
    /// A block that a checkpoint names is held by its owner, but its file
    /// (or bytes) failed an integrity check: truncated, a CRC-32 mismatch,
    /// a foreign format or an undecodable payload. `damage` names the file
    /// and the check ([`restore`](crate::restore); the checkpoint cannot be
    /// resumed as it is).
    #[error("block {} of tensor `{tensor}` of checkpoint {checkpoint} on rank {rank} is damaged: {damage}", damage.id)]
    DamagedBlock {
        /// The checkpoint being restored.
        checkpoint: uni20_persist::ObjectId,
        /// The tensor the block belongs to.
        tensor: String,
        /// The rank that owns the block.
        rank: usize,
        /// The block (`damage.id`), its file, the failed check and what it found.
        damage: Box<uni20_persist::Damage>,
    },
    /// A local tensor could not be built.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// Unsupported dtype.
    #[error(transparent)]
    DType(#[from] DTypeError),
    /// An npy file is malformed, truncated or unsupported.
    #[error("{}: {reason}", path.display())]
    Npy {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// An I/O error on the root (the message names the file and the OS
    /// error; the error is not chained again as a source).
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// An operand's producing operation failed (its epoch is poisoned with
    /// the first error), or it has no value.
    #[error(transparent)]
    Async(#[from] uni20_async::AsyncError),
    /// A persistent-store operation on the root failed.
    #[error(transparent)]
    Store(#[from] uni20_persist::PersistError),
    /// A submitted command failed, or the job was aborted.
    #[error(transparent)]
    Job(#[from] JobError),
    /// The pipelined operation that produced the tensor failed after its
    /// block map was already written (`docs/architecture.md`, "Pipelined
    /// submission"): the error its completion reported, shared by every
    /// handle of the tensor. [`DistTensor::wait`](crate::DistTensor::wait)
    /// returns a copy of a command failure or fail-stop error instead, so
    /// this wraps only errors that cannot be copied (I/O, store).
    #[error(transparent)]
    Failed(std::sync::Arc<DistError>),
    /// Replies that do not fit the plan (a rank reported a block it was not
    /// asked for, or none reported some block): a runtime bug.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// A decomposition's label split does not fit the tensor (checked
    /// before anything runs).
    #[error("{op}: split `{split}`: {error}")]
    Split {
        /// The decomposition.
        op: DecompKind,
        /// The split as given.
        split: String,
        /// What is wrong.
        error: SplitError,
    },
    /// A decomposition's matrix is larger than one rank may assemble
    /// (checked before anything runs).
    #[error(
        "{op}: the {rows}x{cols} {dtype} matrix needs {bytes} bytes on one rank, over the limit of {limit} bytes \
         (max_matrix_bytes); a rank-distributed factorization is not built yet"
    )]
    MatrixTooLarge {
        /// The decomposition.
        op: DecompKind,
        /// Rows of the matrix view.
        rows: u128,
        /// Columns of the matrix view.
        cols: u128,
        /// Element type.
        dtype: DType,
        /// Bytes of the matrix (saturated at `u128::MAX`).
        bytes: u128,
        /// The limit in force.
        limit: u64,
    },
    /// A decomposition option is invalid, or the local kernel refused the
    /// call (checked on the root before anything runs).
    #[error(transparent)]
    Decomp(#[from] DecompError),
    /// A decomposition's input holds NaN or an infinity: the first block
    /// (in block order) that does, and its first such element. Nothing was
    /// committed; the job goes on.
    #[error(
        "{op}: block {block} (block index {block_index:?}) holds the non-finite value {value} at element {element:?}"
    )]
    NonFinite {
        /// The decomposition.
        op: DecompKind,
        /// Block number (row-major in the input's tiling).
        block: usize,
        /// The block's multi-index.
        block_index: Vec<usize>,
        /// The element's multi-index in the tensor.
        element: Vec<usize>,
        /// Its value.
        value: C64,
    },
    /// `eigh`: the matrix view is not Hermitian within the tolerance: the
    /// largest deviation and where it is. Nothing was committed; the job
    /// goes on.
    #[error(
        "eigh: the matrix is not Hermitian: |A[{row},{col}] - conj(A[{col},{row}])| = {deviation:e} \
         (row index {row_index:?}, column index {col_index:?}) exceeds {tolerance:e} * max|A| = {tolerance:e} * {max_abs:e}"
    )]
    NotHermitian {
        /// Matrix row of the largest deviation.
        row: usize,
        /// Matrix column of the largest deviation.
        col: usize,
        /// `row` as a multi-index over the row modes.
        row_index: Vec<usize>,
        /// `col` as a multi-index over the column modes.
        col_index: Vec<usize>,
        /// `|A[row, col] - conj(A[col, row])|`.
        deviation: f64,
        /// `max |A|`.
        max_abs: f64,
        /// The relative tolerance in force.
        tolerance: f64,
    },
    /// A decomposition of a symmetric tensor cannot run as asked (eigh
    /// flux or legs, a truncation that keeps nothing).
    #[error(transparent)]
    SymDecomp(#[from] SymDecompError),
}

impl DistError {
    /// The error to report again for a failure kept on a tensor (a
    /// pipelined operation's completion, shared by every handle): a copy
    /// where the error can be copied, so that callers see the same variant
    /// whether the failing reply arrived before or during their wait;
    /// [`DistError::Failed`] around the shared error otherwise.
    pub(crate) fn reissue(shared: &std::sync::Arc<DistError>) -> DistError {
        match &**shared {
            DistError::Job(JobError::Command(d)) => DistError::Job(JobError::Command(d.clone())),
            DistError::Job(JobError::Stopped(s)) => DistError::Job(JobError::Stopped(s.clone())),
            DistError::Job(JobError::Disagreement(d)) => DistError::Job(JobError::Disagreement(d.clone())),
            DistError::Job(JobError::Protocol(s)) => DistError::Job(JobError::Protocol(s.clone())),
            DistError::Async(e) => DistError::Async(e.clone()),
            DistError::Protocol(s) => DistError::Protocol(s.clone()),
            DistError::Failed(inner) => DistError::reissue(inner),
            _ => DistError::Failed(shared.clone()),
        }
    }
}

/// Operands of the wrong layout ([`DistError::Layout`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// A symmetric and a dense operand were given to one operation.
    #[error("{operation}: operand {symmetric} is symmetric but operand {dense} is dense; convert one (to_dense / from_dense) first")]
    Mixed {
        /// The operation.
        operation: &'static str,
        /// Position of a symmetric operand.
        symmetric: usize,
        /// Position of a dense operand.
        dense: usize,
    },
    /// An operation that takes only dense operands got a symmetric one.
    #[error("{operation} takes dense tensors only; operand {operand} is symmetric ({hint})")]
    DenseOnly {
        /// The operation.
        operation: &'static str,
        /// Position of the symmetric operand.
        operand: usize,
        /// What to use instead.
        hint: &'static str,
    },
    /// An operation that takes only symmetric operands got a dense one.
    #[error("{operation} takes symmetric tensors only; operand {operand} is dense")]
    SymmetricOnly {
        /// The operation.
        operation: &'static str,
        /// Position of the dense operand.
        operand: usize,
    },
}

/// Why symmetric operands or a leg regrouping do not fit an element-wise
/// operation, a fuse or split of legs, or a retiling ([`DistError::SymLayout`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SymLayoutError {
    /// Two operands that must have the same legs (up to the label
    /// permutation) differ on one: `what` is `"symmetry"`, `"direction"` or
    /// `"sectors"`; `first` / `second` describe the two legs.
    #[error("{operation}: leg {leg_a} of a ({first}) and leg {leg_b} of b ({second}) have different {what}; the operands need the same legs and flux (tilings may differ)")]
    LegMismatch {
        /// The operation.
        operation: &'static str,
        /// The leg of `a` (in `a`'s mode order).
        leg_a: usize,
        /// The matching leg of `b` (in `b`'s mode order).
        leg_b: usize,
        /// What differs.
        what: &'static str,
        /// `a`'s leg.
        first: String,
        /// `b`'s leg.
        second: String,
    },
    /// Two operands that must have the same flux do not.
    #[error("{operation}: a has flux {first} but b has flux {second}; the operands need the same legs and flux")]
    FluxMismatch {
        /// The operation.
        operation: &'static str,
        /// `a`'s flux.
        first: String,
        /// `b`'s flux.
        second: String,
    },
    /// The legs to fuse (or the leg to split) are not legs of the tensor.
    #[error("{operation}: legs {first}..{end} (count {count}) are not adjacent legs of a tensor with {legs} legs (count must be at least 1)", end = first.saturating_add(*count))]
    LegRange {
        /// `"fuse_legs"` or `"split_leg"`.
        operation: &'static str,
        /// The first leg asked for.
        first: usize,
        /// How many legs (1 for a split).
        count: usize,
        /// Legs of the tensor.
        legs: usize,
    },
    /// The leg to split is not the fused leg of the fusion given: another
    /// group or other sectors (its direction may be the fused leg's or the
    /// opposite one).
    #[error("split_leg: leg {leg} ({got}) is not the fusion's fused leg ({fused}) or its dual")]
    FusionMismatch {
        /// The leg of the tensor.
        leg: usize,
        /// The tensor's leg.
        got: String,
        /// The fusion's fused leg.
        fused: String,
    },
    /// An explicit tiling of a symmetric tensor has a block that crosses a
    /// sector boundary of its leg (a block of a symmetric tensor lies in one
    /// sector per leg).
    #[error("leg {leg}: the block at {offset} of extent {extent} crosses the end of sector {sector} at {sector_end}; blocks must lie inside one sector")]
    TileCrossesSector {
        /// The leg (mode).
        leg: usize,
        /// Dense offset of the block along the leg.
        offset: usize,
        /// Its extent.
        extent: usize,
        /// The sector it starts in.
        sector: usize,
        /// Dense offset where that sector ends.
        sector_end: usize,
    },
}

/// What is inconsistent in a manifest ([`DistError::BadManifest`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The tiling does not cover the tensor's shape.
    #[error("tiling {extents:?} does not cover shape {shape:?}")]
    TilingShape {
        /// The tiling's block extents, per mode.
        extents: Vec<Vec<usize>>,
        /// The tensor's shape.
        shape: Vec<usize>,
    },
    /// A symmetric manifest's tiling is not the one its legs' tiles give.
    #[error("tiling {extents:?} is not the tiling {layout:?} of the symmetric layout's legs")]
    LayoutTiling {
        /// The manifest's extents.
        extents: Vec<Vec<usize>>,
        /// The extents of the layout's leg tiles.
        layout: Vec<Vec<usize>>,
    },
    /// The number of block entries differs from the number of stored blocks.
    #[error("{entries} block entries for a tiling of {blocks} blocks")]
    BlockCount {
        /// Block entries of the manifest.
        entries: usize,
        /// Blocks of the tiling.
        blocks: usize,
    },
    /// A block number outside the manifest.
    #[error("block {block} of a manifest of {entries} blocks (tiling of {blocks})")]
    NoSuchBlock {
        /// The block number asked for.
        block: usize,
        /// Block entries of the manifest.
        entries: usize,
        /// Blocks of the tiling.
        blocks: usize,
    },
    /// A block's payload has another shape or dtype than the manifest says.
    #[error(
        "block {block} has shape {shape:?} {}, the manifest says {expected_shape:?} {}",
        dtype.name(),
        expected_dtype.name()
    )]
    BlockContents {
        /// The block number.
        block: usize,
        /// The payload's shape.
        shape: Vec<usize>,
        /// The payload's dtype.
        dtype: DType,
        /// The shape the manifest gives the block.
        expected_shape: Vec<usize>,
        /// The manifest's dtype.
        expected_dtype: DType,
    },
    /// A block is owned by a rank outside the universe.
    #[error("block {id} is owned by rank {owner}, outside this universe of {size} ranks")]
    OwnerOutside {
        /// The block's object id.
        id: ObjectId,
        /// Its owner.
        owner: usize,
        /// The universe size.
        size: usize,
    },
}

/// What a [`DistError::NotFound`] names.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Missing {
    /// A checkpoint has no tensor of this name.
    #[error("tensor `{name}` of the checkpoint")]
    CheckpointTensor {
        /// The name asked for.
        name: String,
    },
    /// A block a checkpoint keeps is gone from its owner's store.
    #[error(
        "block {block} of tensor `{tensor}` of checkpoint {checkpoint} on rank {rank} (a newer checkpoint \
         superseded this one and its blocks were released, or the store directory differs from the run that \
         wrote it)"
    )]
    CheckpointBlock {
        /// The checkpoint's object id.
        checkpoint: ObjectId,
        /// The tensor of the checkpoint the block belongs to.
        tensor: String,
        /// The block's object id.
        block: ObjectId,
        /// The rank that should hold it.
        rank: usize,
    },
}
