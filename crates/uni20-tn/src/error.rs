//! The error type of the tensor-network layer ([`TnError`]): bad options and
//! shapes found before anything is submitted, checkpoints that do not hold
//! what the algorithm needs, and the errors of the distributed operations
//! underneath (passed through unchanged).

use uni20_dispatch::decomp::DecompError;
use uni20_dispatch::TensorError;
use uni20_dist::DistError;

/// Error of an MPS/MPO construction, an eigensolver or a DMRG sweep.
///
/// `InvalidOption`, `Shape`, `BadCheckpoint` and `Tensor` are found on the
/// root before anything is submitted. `Dist` carries the error of a
/// distributed operation: a validation error (nothing ran), or a failed
/// command ([`DistError::Job`], fail-stop).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TnError {
    /// A distributed operation failed or was refused.
    #[error(transparent)]
    Dist(#[from] DistError),
    /// An option is out of its range.
    #[error("invalid {name} = {value}: expected {expected}")]
    InvalidOption {
        /// The option's name, as documented on its struct.
        name: &'static str,
        /// The value given, printed.
        value: String,
        /// The accepted range, in words.
        expected: &'static str,
    },
    /// Tensors that must fit together do not (an MPS bond, an MPO leg, a
    /// boundary vector).
    #[error("{what}: expected shape {expected:?}, got {got:?}")]
    Shape {
        /// Which tensor or leg.
        what: String,
        /// The shape required.
        expected: Vec<usize>,
        /// The shape given.
        got: Vec<usize>,
    },
    /// A checkpoint does not hold what is needed to resume (a missing site
    /// tensor, a chain of another length, a missing scalar).
    #[error("checkpoint: {0}")]
    BadCheckpoint(String),
    /// A root-local tensor could not be built (boundary vectors, the
    /// Krylov-space matrix).
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// The root-local eigensolver of the small Krylov-space matrix failed
    /// (for example on non-finite Lanczos coefficients, which come from a
    /// non-finite operator or start vector).
    #[error("Lanczos: the Krylov-space eigenproblem failed: {0}")]
    Krylov(#[from] DecompError),
    /// A site has no operator of that name.
    #[error("site type {site} has no operator `{op}` (it has: {known})")]
    UnknownOperator {
        /// The operator asked for.
        op: String,
        /// The site type.
        site: String,
        /// The operators it has.
        known: String,
    },
    /// A site has no basis state of that label.
    #[error("site type {site} has no state `{state}` (it has: {known})")]
    UnknownState {
        /// The label asked for.
        state: String,
        /// The site type.
        site: String,
        /// Its basis labels.
        known: String,
    },
    /// An operator does not carry one definite charge under the site's
    /// conservation law (for example `Sx` with `Sz` conserved).
    #[error("operator `{op}` of site type {site} mixes charges {first} and {second}: it does not conserve the site's quantum number (build the site without that conservation law)")]
    ChargeMismatch {
        /// The operator.
        op: String,
        /// The site type.
        site: String,
        /// One charge it carries.
        first: String,
        /// Another.
        second: String,
    },
    /// A term of an operator sum cannot be compiled (a site beyond the
    /// chain, a fermionic operator on a site without a Jordan-Wigner
    /// string, an odd number of fermionic operators, a charged term under a
    /// conservation law, a non-finite coefficient).
    #[error("operator sum term {term}: {reason}")]
    BadTerm {
        /// Index of the term, in the order added.
        term: usize,
        /// What is wrong.
        reason: String,
    },
    /// A charge or leg of the symmetry layer is invalid.
    #[error(transparent)]
    Symmetry(#[from] uni20_dist::symmetry::SymmetryError),
    /// A result of the layer below lacks what this layer asked it for (an
    /// invariant of this crate is broken; please report it).
    #[error("internal: {0}")]
    Internal(&'static str),
}
