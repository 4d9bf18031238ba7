//! The typed errors of a bad label split ([`SplitError`]): a leaf module,
//! so the crate-wide `DistError` names it without importing the
//! decomposition planner.

/// Why a label split cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SplitError {
    /// The text is not of the form `rows|cols` or `labels->rows|cols`.
    #[error("expected `rows|cols` (e.g. `ab|cd`) or `labels->rows|cols` (e.g. `abcd->ac|bd`): {reason}")]
    Syntax {
        /// What is wrong.
        reason: String,
    },
    /// The split labels a different number of modes than the tensor has.
    #[error("the split labels {labels} modes but the tensor has rank {rank}")]
    RankMismatch {
        /// Modes the split labels.
        labels: usize,
        /// The tensor's rank.
        rank: usize,
    },
    /// A label appears twice (in the labelling, or across the two sides).
    #[error("label `{label}` appears more than once")]
    Repeated {
        /// The label.
        label: char,
    },
    /// Modes of the tensor that neither side names.
    #[error("labels {labels:?} of the tensor are on neither side")]
    Missing {
        /// The labels, in the tensor's mode order.
        labels: Vec<char>,
    },
    /// Labels on a side that name no mode of the tensor.
    #[error("labels {labels:?} name no mode of the tensor")]
    Extra {
        /// The labels, in the order written.
        labels: Vec<char>,
    },
    /// A side of the split is empty.
    #[error("the {side} side is empty; each side needs at least one mode")]
    EmptySide {
        /// `"row"` or `"column"`.
        side: &'static str,
    },
    /// `eigh` needs as many rows as columns.
    #[error("eigh needs a square matrix, the split gives {rows}x{cols}")]
    NotSquare {
        /// Rows of the matrix view.
        rows: usize,
        /// Columns of the matrix view.
        cols: usize,
    },
}

/// Why a decomposition of a symmetric tensor cannot run (beyond a bad
/// split, [`SplitError`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SymDecompError {
    /// `eigh` of a symmetric tensor needs flux zero (an operator maps a
    /// charge sector to itself).
    #[error("eigh of a symmetric tensor needs flux zero (the identity charge), the tensor has flux {flux}")]
    EighFlux {
        /// The tensor's flux.
        flux: crate::symmetry::Charge,
    },
    /// `eigh` of a symmetric tensor needs the `i`-th column leg to be the
    /// dual of the `i`-th row leg (same sectors, opposite direction), so
    /// that rows and columns are indexed alike.
    #[error("eigh: column mode {col_mode} is not the dual of row mode {row_mode} (same sectors, opposite direction)")]
    NotDualLegs {
        /// The row mode (tensor mode number).
        row_mode: usize,
        /// The column mode paired with it.
        col_mode: usize,
    },
    /// The truncation keeps no singular value in any sector (a zero
    /// tensor with a cutoff): a symmetric factor needs at least one block.
    #[error("{op}: the truncation keeps no value in any sector; a symmetric factor needs at least one bond sector")]
    NothingKept {
        /// The decomposition.
        op: uni20_dispatch::decomp::DecompKind,
    },
}
