//! Distributed einsum contraction `C = alpha * einsum(spec, A, B) + beta *
//! C_in`: the public calls ([`contract`], [`contract_with`]) and their
//! options. The pure planner lives in `plan`, the deferred submission in
//! `job`, and the command with its worker handler in `command`.

mod command;
mod job;
mod plan;

pub use command::{ContractDescriptorV1, ContractV1, WorkItem};
pub use plan::{plan_contract, ContractPlan, MAX_BLOCK_BYTES, MAX_BLOCK_PRODUCTS};

use uni20_dispatch::{EinsumSpec, C64};
use uni20_worker::Controller;

use crate::error::DistError;
use crate::tensor::DistTensor;

/// Scalars and accumulator of a contraction `C = alpha * einsum(A, B) + beta * C`.
#[derive(Clone, Copy, Debug)]
pub struct ContractOptions<'a> {
    /// Scale of the product (default 1).
    pub alpha: C64,
    /// Scale of the existing output (default 0; ignored without `c`).
    pub beta: C64,
    /// Existing output to accumulate into (not modified: the result is a new
    /// tensor; objects are immutable).
    pub c: Option<&'a DistTensor>,
}

impl Default for ContractOptions<'_> {
    fn default() -> Self {
        ContractOptions {
            alpha: C64::new(1.0, 0.0),
            beta: C64::new(0.0, 0.0),
            c: None,
        }
    }
}

/// `C = einsum(spec, A, B)` on distributed tensors; see [`contract_with`].
///
/// # Errors
/// As [`contract_with`].
pub fn contract(ctl: &Controller<'_>, spec: &str, a: &DistTensor, b: &DistTensor) -> Result<DistTensor, DistError> {
    contract_with(ctl, spec, a, b, &ContractOptions::default())
}

/// `C = alpha * einsum(spec, A, B) + beta * C_in` on distributed tensors.
///
/// Returns at once. The spec, shapes, dtypes and tilings are checked now
/// (errors here mean nothing was submitted); the contraction itself is
/// planned and submitted as soon as A, B (and C_in) are ready, in program
/// order, and the result's block map is written when the workers reply.
/// A failure of any input's producing operation, or of this contraction,
/// poisons the result with the first error: [`DistTensor::wait`],
/// [`DistTensor::to_local`] and every later operation on it report it.
///
/// Both operands must use the same block extents for each shared index
/// (tensors created with the same block size do). Output blocks are owned
/// by the ranks that computed them; [`DistTensor::plan_summary`] shows the
/// plan in numbers.
///
/// # Errors
/// [`DistError::Spec`], [`DistError::Contract`],
/// [`DistError::BlockingMismatch`], [`DistError::PlanTooLarge`] from
/// validation; [`DistError::Job`] if the job already stopped.
pub fn contract_with(
    ctl: &Controller<'_>,
    spec: &str,
    a: &DistTensor,
    b: &DistTensor,
    opts: &ContractOptions<'_>,
) -> Result<DistTensor, DistError> {
    let spec = EinsumSpec::parse(spec)?;
    let v = plan::validate(
        &spec,
        a.meta(),
        b.meta(),
        opts.c.map(|c| c.meta()),
        opts.alpha,
        opts.beta,
    )?;
    if ctl.has_failed() {
        ctl.progress()?;
    }
    Ok(job::submit_contraction(ctl, v, a, b, opts.c))
}
