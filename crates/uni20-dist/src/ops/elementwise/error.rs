//! The typed errors of a bad element-wise label spec ([`LabelError`]): a
//! leaf module, so the crate-wide `DistError` names it without importing
//! the element-wise planner.

/// Why a label spec is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LabelError {
    /// The spec has no `->`, or more than one.
    #[error("label spec {spec:?}: expected `<labels>-><labels>`")]
    NoArrow {
        /// The spec.
        spec: String,
    },
    /// The spec names more operands than the operation takes.
    #[error("label spec {spec:?} names {got} operands; this operation takes at most {max}")]
    Operands {
        /// The spec.
        spec: String,
        /// Operands named before `->`.
        got: usize,
        /// Most operands allowed.
        max: usize,
    },
    /// A character that is not an ASCII letter.
    #[error("label spec {spec:?}: {ch:?} is not a label (labels are ASCII letters)")]
    BadLabel {
        /// The spec.
        spec: String,
        /// The character.
        ch: char,
    },
    /// A label occurs twice in one operand or in the output.
    #[error("label spec {spec:?}: label `{label}` occurs twice in {operand}")]
    Repeated {
        /// The spec.
        spec: String,
        /// The label.
        label: char,
        /// `"a"`, `"b"` or `"the output"`.
        operand: String,
    },
    /// An operand's labels are not a permutation of the output's.
    #[error(
        "label spec {spec:?}: the labels of {operand} ({labels}) are not a permutation of the output's ({output})"
    )]
    NotAPermutation {
        /// The spec.
        spec: String,
        /// `"a"` or `"b"`.
        operand: String,
        /// The operand's labels.
        labels: String,
        /// The output's labels.
        output: String,
    },
    /// An operand has another rank than its labels.
    #[error("label spec {spec:?}: {operand} has rank {rank} but {labels} labels")]
    Rank {
        /// The spec.
        spec: String,
        /// `"a"` or `"b"`.
        operand: String,
        /// Number of labels given for it.
        labels: usize,
        /// Its rank.
        rank: usize,
    },
}
