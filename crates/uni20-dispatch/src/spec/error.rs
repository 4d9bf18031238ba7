//! [`SpecError`]: every way an einsum spec can be refused, while parsing the subscripts
//! string, while building a [`crate::ResolvedSpec`] from label lists, or while resolving or
//! checking a spec against operand shapes. Variants carry typed fields (labels, operand
//! indices, extents) so callers can match on them.

/// Error parsing an einsum spec, or checking or resolving it against operand shapes.
///
/// Operand indices are 0-based positions in the spec's input list (`0` for the first operand,
/// `1` for the second). Byte positions are offsets in the parsed string.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// `->` occurs more than once.
    #[error("einsum spec has more than one \"->\"")]
    MultipleArrows,
    /// More than two comma-separated input operands; contract them pairwise instead.
    #[error("einsum spec has {count} input operands; at most two are supported (contract more operands pairwise)")]
    TooManyOperands {
        /// Number of operands the spec names.
        count: usize,
    },
    /// [`crate::ResolvedSpec::new`] was given no input operands.
    #[error("einsum spec needs at least one input operand")]
    NoOperands,
    /// A character that is not an ASCII letter, whitespace, `,` (between inputs), `->` or
    /// part of `...`.
    #[error("invalid character {ch:?} at byte {position} in einsum spec (labels are ASCII letters a-z, A-Z)")]
    InvalidChar {
        /// The offending character.
        ch: char,
        /// Byte offset in the input string.
        position: usize,
    },
    /// A `.` that is not part of a `...` ellipsis.
    #[error("'.' at byte {position} of the einsum spec is not part of an ellipsis (\"...\")")]
    StrayDot {
        /// Byte offset of the dot.
        position: usize,
    },
    /// A second ellipsis in one operand (or in the output).
    #[error("second ellipsis at byte {position} of the einsum spec (at most one \"...\" per operand)")]
    RepeatedEllipsis {
        /// Byte offset of the second ellipsis.
        position: usize,
    },
    /// A label given to [`crate::ResolvedSpec::new`] that is not an ASCII letter.
    #[error("invalid einsum label {label:?} (labels are ASCII letters a-z, A-Z)")]
    InvalidLabel {
        /// The offending label.
        label: char,
    },
    /// A label repeated in the output.
    #[error("label '{label}' appears more than once in the einsum output")]
    RepeatedOutputLabel {
        /// The repeated label.
        label: char,
    },
    /// An output label that appears in no input.
    #[error("output label '{label}' does not appear in any input")]
    UnknownOutputLabel {
        /// The label.
        label: char,
    },
    /// [`crate::ResolvedSpec::parse`]: the string has an ellipsis, which needs operand
    /// shapes; use [`crate::EinsumSpec::resolve`].
    #[error("einsum spec contains \"...\"; resolve it against operand shapes first (EinsumSpec::resolve)")]
    Unresolved,
    /// The number of operand shapes differs from the spec's input count.
    #[error("einsum spec has {expected} input operand(s) but {got} were given")]
    OperandCount {
        /// Inputs in the spec.
        expected: usize,
        /// Operands given.
        got: usize,
    },
    /// An operand without ellipsis whose rank differs from its label count.
    #[error("operand {operand} has rank {got}, the einsum spec gives it {expected} label(s)")]
    RankMismatch {
        /// Operand index.
        operand: usize,
        /// Number of labels in the spec.
        expected: usize,
        /// Actual rank.
        got: usize,
    },
    /// An operand with ellipsis whose rank is below its label count.
    #[error("operand {operand} has rank {got}, below the {min} label(s) the einsum spec gives it")]
    RankTooSmall {
        /// Operand index.
        operand: usize,
        /// Number of labels (excluding the ellipsis).
        min: usize,
        /// Actual rank.
        got: usize,
    },
    /// A label repeated within one operand (a diagonal) has different extents there.
    #[error("label '{label}' is repeated in operand {operand} with different extents {first} and {second}")]
    DiagonalMismatch {
        /// Operand index.
        operand: usize,
        /// The repeated label.
        label: char,
        /// Extent at the first occurrence.
        first: usize,
        /// A different extent at a later occurrence.
        second: usize,
    },
    /// A label has different extents in different operands. (An unresolved [`crate::EinsumSpec`]
    /// broadcasts an extent of 1 as numpy does; a [`crate::ResolvedSpec`] requires equality.)
    #[error("label '{label}' has extent {first} in one operand and {second} in another")]
    ExtentMismatch {
        /// The label.
        label: char,
        /// Extent at its first occurrence.
        first: usize,
        /// A different extent in another operand.
        second: usize,
    },
    /// Ellipsis dimensions that do not broadcast (right-aligned, numpy rules: extents must be
    /// equal or 1).
    #[error("ellipsis dimension {axis} does not broadcast: extents {first} and {second}")]
    BroadcastMismatch {
        /// Position within the broadcast ellipsis dimensions, counted from the left of the
        /// broadcast shape (`0` = outermost).
        axis: usize,
        /// One extent.
        first: usize,
        /// A different extent (neither is 1).
        second: usize,
    },
    /// An explicit output without `...` while the inputs' ellipses cover dimensions (numpy
    /// refuses to sum broadcast dimensions implicitly).
    #[error("einsum output has no \"...\" but the inputs' ellipses cover {dims} dimension(s)")]
    MissingOutputEllipsis {
        /// Number of broadcast ellipsis dimensions.
        dims: usize,
    },
    /// Resolving an ellipsis (or a broadcast label) needs more distinct labels than the 52
    /// ASCII letters.
    #[error("einsum spec needs {needed} distinct labels after resolving ellipses; at most 52 exist")]
    TooManyLabels {
        /// Labels needed.
        needed: usize,
    },
}

impl From<std::convert::Infallible> for SpecError {
    fn from(never: std::convert::Infallible) -> SpecError {
        match never {}
    }
}
