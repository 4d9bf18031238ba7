//! The `uni20.contract.v1` command: its descriptor (the whole plan,
//! identical on every participant: ids, shapes and scalars only) and the
//! worker handler, which exchanges blocks with the other workers,
//! contracts its work items through the local dispatcher, commits the
//! output blocks and replies with their object ids.

use serde::{Deserialize, Serialize};
use uni20_dispatch::{
    contract as local_contract, einsum as local_einsum, ContractError, ContractOptions, DType, EinsumSpec, LocalTensor,
    ResolvedSpec, C64,
};
use uni20_persist::{ObjectId, PersistentPtr};
use uni20_worker::{command, HandlerError, WorkerContext};

use crate::tensor::{Block, BlockRef};
use crate::transfer::{exchange_blocks, Transfer};

/// One output block's work: `out = alpha * sum_k einsum(A_k, B_k) + beta * C_in`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkItem {
    /// Rank that computes the item.
    pub rank: usize,
    /// Output block number (row-major in the output tiling).
    pub out_block: usize,
    /// Output block shape.
    pub out_shape: Vec<usize>,
    /// The block products to sum: per term, one block of each input operand
    /// (one or two), in operand order.
    pub terms: Vec<Vec<BlockRef>>,
    /// The existing output block, when `beta != 0`.
    pub c_in: Option<BlockRef>,
}

/// The `uni20.contract.v1` descriptor: the whole plan, identical on every
/// participant. Holds ids, shapes and scalars only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContractDescriptorV1 {
    /// The einsum spec, resolved once on the root against the global
    /// shapes; blocks are contracted with it literally.
    pub spec: ResolvedSpec,
    /// Scale of the product.
    pub alpha: C64,
    /// Scale of the existing output.
    pub beta: C64,
    /// Per operand (A, B): read conjugated.
    pub conj: [bool; 2],
    /// Output element type.
    pub out_dtype: DType,
    /// One item per output block.
    pub items: Vec<WorkItem>,
    /// Worker-to-worker block transfers; transfer `i` uses the tags of `i`.
    pub transfers: Vec<Transfer>,
}

command!(
    /// The command `uni20.contract.v1`. Reply of each participant: `(item
    /// index, object id)` of every item it computed.
    pub ContractV1 = "uni20.contract.v1", schema 2, ContractDescriptorV1 => Vec<(usize, ObjectId)>, handle_contract
);

fn kernel_error(e: ContractError) -> HandlerError {
    let attempts = match &e {
        ContractError::Dispatch(d) => d
            .attempts
            .iter()
            .map(|a| format!("{}: {:?}", a.backend, a.outcome))
            .collect(),
        _ => Vec::new(),
    };
    HandlerError::from(e).with_attempts(attempts)
}

/// `beta * c` through the local dispatcher (a product with the scalar 1).
fn scale(c: &LocalTensor, beta: C64, out: DType, ctx: &WorkerContext<'_>) -> Result<LocalTensor, HandlerError> {
    let widened;
    let c = if c.dtype() == out {
        c
    } else {
        widened = c.cast(out)?;
        &widened
    };
    const LETTERS: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let labels: String = LETTERS.chars().take(c.rank()).collect();
    let spec = EinsumSpec::parse(&format!("{labels},->{labels}"))?;
    let one_bytes: Vec<u8> = match c.dtype() {
        DType::F32 => 1.0f32.to_le_bytes().to_vec(),
        DType::F64 => 1.0f64.to_le_bytes().to_vec(),
        DType::C32 => [1.0f32.to_le_bytes(), 0.0f32.to_le_bytes()].concat(),
        DType::C64 => [1.0f64.to_le_bytes(), 0.0f64.to_le_bytes()].concat(),
    };
    let one = LocalTensor::from_bytes(c.dtype(), &[], &one_bytes)?;
    local_contract(&spec, beta, c, &one, C64::new(0.0, 0.0), None, ctx.backends()).map_err(kernel_error)
}

fn handle_contract(
    ctx: &mut WorkerContext<'_>,
    d: ContractDescriptorV1,
) -> Result<Vec<(usize, ObjectId)>, HandlerError> {
    let me = ctx.rank();
    let store = ctx.store();
    // 1. Exchange blocks directly with the other workers.
    let replicas = exchange_blocks(ctx, &d.transfers)?;
    // 2. Compute this rank's items.
    let load = |r: &BlockRef| {
        store
            .load_wait(PersistentPtr::<Block>::from_id(r.id))
            .map_err(|e| HandlerError::from(e).with_object(r.id))
    };
    let one = C64::new(1.0, 0.0);
    let mut out = Vec::new();
    for (idx, item) in d.items.iter().enumerate().filter(|(_, i)| i.rank == me) {
        let c_in = item.c_in.as_ref().map(load).transpose()?;
        let c_in_ref = c_in.as_ref();
        let mut acc: Option<LocalTensor> = None;
        for (k, term) in item.terms.iter().enumerate() {
            let blocks = term.iter().map(load).collect::<Result<Vec<_>, _>>()?;
            let operands: Vec<&LocalTensor> = blocks.iter().map(|b| &b.0).collect();
            let (beta, c) = if k == 0 {
                (d.beta, c_in_ref.map(|v| &v.0))
            } else {
                (one, acc.as_ref())
            };
            let opts = ContractOptions {
                alpha: d.alpha,
                beta,
                c,
                conj: d.conj,
                strict_blocking: true,
            };
            let (r, _) = local_einsum(&d.spec, &operands, &opts, ctx.backends()).map_err(kernel_error)?;
            acc = Some(r);
        }
        let acc = match (acc, c_in) {
            (Some(t), _) => t,
            // An empty product (an operand without elements): beta * C_in, or zeros.
            (None, Some(c)) => scale(&c.0, d.beta, d.out_dtype, ctx)?,
            (None, None) => LocalTensor::zeros(d.out_dtype, &item.out_shape)?,
        };
        let acc = if acc.dtype() == d.out_dtype {
            acc
        } else {
            acc.cast(d.out_dtype)?
        };
        if acc.shape() != item.out_shape.as_slice() {
            return Err(HandlerError::msg(format!(
                "work item {idx}: result shape {:?} differs from planned {:?}",
                acc.shape(),
                item.out_shape
            )));
        }
        let p = store
            .commit(Block(acc))
            .map_err(|e| HandlerError::from(e).context(format!("committing item {idx}")))?;
        out.push((idx, p.id()));
    }
    // 3. The replicas were needed only for this command.
    store
        .release_many(&replicas)
        .map_err(|e| HandlerError::from(e).context("dropping the replicas of this command"))?;
    Ok(out)
}
