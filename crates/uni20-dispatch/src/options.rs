//! [`ContractOptions`]: the scalars, accumulator and conjugation flags of a
//! contraction `C = alpha * einsum(spec, op(A), op(B)) + beta * C`, one
//! type for the local contraction (`T = LocalTensor`, [`crate::einsum`])
//! and the distributed one (`T = DistTensor` in `uni20-dist`).

use std::fmt;

use crate::dtype::C64;

/// Options of `C = alpha * einsum(spec, op(A), op(B)) + beta * C_in`, where
/// `op(X)` is `conj(X)` when the operand's `conj` flag is set.
///
/// `T` is the tensor type: [`crate::LocalTensor`] locally, `DistTensor` in
/// the distributed layer. `C_in` is never modified: the result is a new
/// tensor.
pub struct ContractOptions<'a, T> {
    /// Scale of the product (default 1). Must be real for a real output.
    pub alpha: C64,
    /// Scale of the existing output (default 0; ignored without `c`). Must
    /// be real for a real output.
    pub beta: C64,
    /// Existing output to accumulate into, of the output's shape.
    pub c: Option<&'a T>,
    /// Per operand (A, B): read its elements conjugated (default: no).
    /// Real operands are unchanged by it.
    pub conj: [bool; 2],
    /// Distributed contractions only: refuse operands blocked differently on
    /// a shared index (`DistError::BlockingMismatch`) instead of reblocking
    /// the cheaper operand (default: reblock). Local contractions ignore it.
    pub strict_blocking: bool,
}

impl<T> ContractOptions<'_, T> {
    /// `alpha = 1`, `beta = 0`, no C, no conjugation, reblocking allowed.
    pub fn new() -> Self {
        ContractOptions {
            alpha: C64::new(1.0, 0.0),
            beta: C64::new(0.0, 0.0),
            c: None,
            conj: [false; 2],
            strict_blocking: false,
        }
    }
}

impl<T> Default for ContractOptions<'_, T> {
    fn default() -> Self {
        ContractOptions::new()
    }
}

impl<T> Clone for ContractOptions<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ContractOptions<'_, T> {}

impl<T> fmt::Debug for ContractOptions<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContractOptions")
            .field("alpha", &self.alpha)
            .field("beta", &self.beta)
            .field("c", &self.c.is_some())
            .field("conj", &self.conj)
            .field("strict_blocking", &self.strict_blocking)
            .finish()
    }
}
