//! Distributed einsum contraction `C = alpha * einsum(spec, A, B) + beta *
//! C_in`: the public calls ([`contract`], [`contract_with`], [`einsum`]) and their
//! options, one type with the local contraction's. The pure planner lives in `plan`, the deferred submission in
//! `job`, and the command with its worker handler in `command`.

mod command;
mod job;
mod plan;

pub use command::{ContractDescriptorV1, ContractV1, WorkItem};
pub use plan::{plan_contract, ContractPlan, MAX_BLOCK_BYTES, MAX_BLOCK_PRODUCTS};

use uni20_dispatch::ResolveSpec;
use uni20_worker::Controller;

use crate::error::DistError;
use crate::tensor::DistTensor;

/// Scalars, accumulator and conjugation flags of a distributed contraction
/// `C = alpha * einsum(spec, op(A), op(B)) + beta * C_in`: the options type
/// of the local contraction, with distributed tensors.
pub type ContractOptions<'a> = uni20_dispatch::ContractOptions<'a, DistTensor>;

/// `C = einsum(spec, A, B)` on distributed tensors; see [`einsum`].
///
/// # Errors
/// As [`einsum`].
pub fn contract(
    ctl: &Controller<'_>,
    spec: impl ResolveSpec,
    a: &DistTensor,
    b: &DistTensor,
) -> Result<DistTensor, DistError> {
    einsum(ctl, spec, &[a, b], &ContractOptions::default())
}

/// `C = alpha * einsum(spec, op(A), op(B)) + beta * C_in` on distributed
/// tensors; see [`einsum`].
///
/// # Errors
/// As [`einsum`].
pub fn contract_with(
    ctl: &Controller<'_>,
    spec: impl ResolveSpec,
    a: &DistTensor,
    b: &DistTensor,
    opts: &ContractOptions<'_>,
) -> Result<DistTensor, DistError> {
    einsum(ctl, spec, &[a, b], opts)
}

/// `C = alpha * einsum(spec, op(A)[, op(B)]) + beta * C_in` on one or two
/// distributed tensors, with numpy's einsum semantics: repeated labels in
/// an operand (traces `"ii->"`, diagonals `"ii->i"`), ellipsis with
/// broadcasting (`"...ij,...jk->...ik"`), implicit output (`"ij,jk"`), and
/// extent-1 broadcasting. `spec` is a `&str`, an
/// [`EinsumSpec`](uni20_dispatch::EinsumSpec) (both resolved against the
/// global shapes) or a [`ResolvedSpec`](uni20_dispatch::ResolvedSpec)
/// (taken literally).
///
/// Returns at once. The spec, shapes, dtypes and tilings are checked now
/// (errors here mean nothing was submitted); the contraction itself is
/// planned and submitted as soon as the operands (and C_in) are ready, in
/// program order, and the result's block map is written when the workers
/// reply. A failure of any input's producing operation, or of this
/// contraction, poisons the result with the first error:
/// [`DistTensor::wait`], [`DistTensor::to_local`] and every later
/// operation on it report it. The operands stay alive until the
/// contraction has completed, even if the caller drops them.
///
/// Operands must use the same block extents for each shared index
/// (tensors created with the same block size do). Output blocks are owned
/// by the ranks that computed them; [`DistTensor::plan_summary`] shows the
/// plan in numbers.
///
/// # Errors
/// [`DistError::WrongUniverse`] for an operand of another universe;
/// [`DistError::Spec`] (malformed spec, more than two operands, ranks,
/// extents, broadcasting), [`DistError::Contract`] (C's shape, a complex
/// scalar with a real output), [`DistError::BlockingMismatch`],
/// [`DistError::PlanTooLarge`] from validation; [`DistError::Job`] if the
/// job already stopped.
pub fn einsum(
    ctl: &Controller<'_>,
    spec: impl ResolveSpec,
    operands: &[&DistTensor],
    opts: &ContractOptions<'_>,
) -> Result<DistTensor, DistError> {
    for t in operands.iter().copied().chain(opts.c) {
        t.check_universe(ctl)?;
    }
    let metas: Vec<&crate::TensorMeta> = operands.iter().map(|t| t.meta()).collect();
    let v = plan::validate(spec, &metas, opts.c.map(|c| c.meta()), opts.alpha, opts.beta, opts.conj)?;
    if ctl.has_failed() {
        ctl.progress()?;
    }
    Ok(job::submit_contraction(ctl, v, operands, opts.c))
}
