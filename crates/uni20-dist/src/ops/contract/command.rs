//! The `uni20.contract.v1` command: its descriptor (the plan, of which
//! each participant receives its own share: ids, shapes and scalars only) and its
//! per-item compute: the item's block products through the local
//! dispatcher (dense), or through one [`PairContraction`] with buffers
//! reused across the item's block pairs (symmetric). The kit's [`handle_items`] exchanges blocks with the other
//! workers, commits the output blocks and replies with their object ids.

use serde::{Deserialize, Serialize};
use uni20_dispatch::{
    contract as local_contract, einsum as local_einsum, ContractError, ContractOptions, DType, EinsumSpec, LocalTensor,
    PairContraction, ResolvedSpec, C64,
};
use uni20_persist::{ObjectId, PersistentPtr};
use uni20_worker::{command, HandlerError, KernelContext};

use crate::ops::kit::{handle_items, item_work_fields, ItemWork};
use crate::tensor::{Block, BlockRef};
use crate::transfer::record::Transfer;

/// One term of a work item: a block of each input operand (one or two),
/// stored inline (a plan has one per block pair, and the plan cache copies
/// its template on every hit). Encoded as a sequence, as a `Vec` is.
pub(crate) type Term = smallvec::SmallVec<[BlockRef; 2]>;

/// One output block's work: `out = alpha * sum_k einsum(A_k, B_k) + beta * C_in`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct WorkItem {
    /// Rank that computes the item.
    pub(crate) rank: usize,
    /// Output block number (row-major in the output tiling).
    pub(crate) out_block: usize,
    /// Output block shape.
    pub(crate) out_shape: Vec<usize>,
    /// The block products to sum: per term, one block of each input operand
    /// (one or two), in operand order.
    pub(crate) terms: Vec<Term>,
    /// The existing output block, when `beta != 0`.
    pub(crate) c_in: Option<BlockRef>,
    /// Multiply-adds of the item (sum over its terms of `m * n * k`).
    pub(crate) flops: u64,
}

/// The `uni20.contract.v1` descriptor: the whole plan on the root; each
/// participant receives its share (the items it computes and the transfers
/// it sends or receives, in plan order; see [`ItemWork::work_mut`]). Holds
/// ids, shapes and scalars only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ContractDescriptorV1 {
    /// The einsum spec, resolved once on the root against the global
    /// shapes; blocks are contracted with it literally.
    pub(crate) spec: ResolvedSpec,
    /// Scale of the product.
    pub(crate) alpha: C64,
    /// Scale of the existing output.
    pub(crate) beta: C64,
    /// Per operand (A, B): read conjugated.
    pub(crate) conj: [bool; 2],
    /// Output element type.
    pub(crate) out_dtype: DType,
    /// One item per output block.
    pub(crate) items: Vec<WorkItem>,
    /// Worker-to-worker block transfers (the `i`-th between one sender and one receiver uses the tags of `i`).
    pub(crate) transfers: Vec<Transfer>,
    /// Output IDs named by the root before submission, one entry per rank
    /// with items (empty: each rank's store issues fresh IDs).
    pub(crate) out_names: Vec<crate::ops::kit::NamedOutputs>,
    /// Keep the replicas this command's transfers deliver after it: the
    /// root records them and releases them later (replicas kept between
    /// commands); `false`: each rank drops them when the command is done.
    pub(crate) hold_replicas: bool,
    /// The terms are block pairs of a symmetric contraction (every label
    /// contracted or free, once per operand): computed by one
    /// [`PairContraction`] per item instead of one dispatch per term.
    pub(crate) block_pairs: bool,
}

command!(
    /// The command `uni20.contract.v1`. Reply of each participant: `(item
    /// index, object id)` of every item it computed.
    pub(crate) ContractV1 = "uni20.contract.v1", schema 5, ContractDescriptorV1 => Vec<(usize, ObjectId)>, handle_items::<ContractDescriptorV1>
);

impl crate::ops::kit::Rebind for ContractDescriptorV1 {
    /// Items in order (each item's terms, then its C_in), then transfers.
    fn ids_mut(&mut self, f: &mut dyn FnMut(&mut ObjectId)) {
        for it in &mut self.items {
            for r in it.terms.iter_mut().flatten().chain(it.c_in.iter_mut()) {
                f(&mut r.id);
            }
        }
        for t in &mut self.transfers {
            f(&mut t.id);
        }
    }
    fn approx_bytes(&self) -> usize {
        use std::mem::size_of;
        let items: usize = self
            .items
            .iter()
            .map(|it| {
                size_of::<WorkItem>()
                    + it.out_shape.len() * size_of::<usize>()
                    + it.terms
                        .iter()
                        // Inline up to two blocks; a longer term spills to the heap.
                        .map(|t| {
                            size_of::<Term>()
                                + if t.spilled() {
                                    t.len() * size_of::<BlockRef>()
                                } else {
                                    0
                                }
                        })
                        .sum::<usize>()
            })
            .sum();
        size_of::<Self>() + items + self.transfers.len() * size_of::<Transfer>() + self.spec.output().len() * 64
    }
}

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
fn scale(c: &LocalTensor, beta: C64, out: DType, ctx: &KernelContext<'_>) -> Result<LocalTensor, HandlerError> {
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

/// A spec, its conjugation flags and their analysed pair kernel.
type CachedPairKernel = (ResolvedSpec, [bool; 2], std::sync::Arc<PairContraction>);

thread_local! {
    /// The last pair kernel analysed on this thread, with its spec and conjugation flags:
    /// every item of a command (and every matvec of a Lanczos run) has the same spec, so the
    /// analysis runs once per thread and spec rather than once per item.
    static LAST_PAIR_KERNEL: std::cell::RefCell<Option<CachedPairKernel>> =
        const { std::cell::RefCell::new(None) };
}

/// The [`PairContraction`] of `spec` and `conj`, from this thread's cache when the last one
/// analysed has the same spec and flags.
fn pair_kernel(spec: &ResolvedSpec, conj: [bool; 2]) -> Result<std::sync::Arc<PairContraction>, HandlerError> {
    LAST_PAIR_KERNEL.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((s, c, k)) = last.as_ref() {
            if s == spec && *c == conj {
                return Ok(k.clone());
            }
        }
        let k = std::sync::Arc::new(PairContraction::new(spec, conj).map_err(kernel_error)?);
        *last = Some((spec.clone(), conj, k.clone()));
        Ok(k)
    })
}

impl ContractDescriptorV1 {
    /// A symmetric item: every block pair through one [`PairContraction`]
    /// (the blocks of all pairs are loaded first; the packing buffers and
    /// the accumulator are shared by the pairs).
    fn compute_pairs<V: std::ops::Deref<Target = Block>>(
        &self,
        ctx: &KernelContext<'_>,
        item: &WorkItem,
        c_in: Option<&LocalTensor>,
        load: &dyn Fn(&BlockRef) -> Result<V, HandlerError>,
    ) -> Result<LocalTensor, HandlerError> {
        let kernel = pair_kernel(&self.spec, self.conj)?;
        let mut blocks = Vec::with_capacity(item.terms.len());
        for term in &item.terms {
            let [a, b] = term.as_slice() else {
                return Err(HandlerError::msg(format!("a block pair has {} blocks", term.len())));
            };
            blocks.push((load(a)?, load(b)?));
        }
        let pairs: Vec<(&LocalTensor, &LocalTensor)> = blocks.iter().map(|(a, b)| (&a.0, &b.0)).collect();
        kernel
            .run(
                self.alpha,
                &pairs,
                self.beta,
                c_in,
                self.out_dtype,
                &item.out_shape,
                ctx.threads(),
            )
            .map_err(kernel_error)
    }
}

impl ItemWork for ContractDescriptorV1 {
    item_work_fields!(WorkItem);
    const OPERATION: &'static str = "contract";
    fn cost(&self, item: &WorkItem) -> Option<u64> {
        let out: u64 = item.out_shape.iter().map(|&n| n as u64).product();
        Some(item.flops.saturating_add(out))
    }
    fn out_elements(&self, item: &WorkItem) -> Option<u64> {
        Some(item.out_shape.iter().map(|&n| n as u64).product())
    }
    fn compute(&self, ctx: &KernelContext<'_>, _: usize, item: &WorkItem) -> Result<LocalTensor, HandlerError> {
        let load = |r: &BlockRef| {
            ctx.store()
                .load_wait(PersistentPtr::<Block>::from_id(r.id))
                .map_err(|e| HandlerError::from(e).with_object(r.id))
        };
        let one = C64::new(1.0, 0.0);
        let c_in = item.c_in.as_ref().map(load).transpose()?;
        if self.block_pairs {
            return self.compute_pairs(ctx, item, c_in.as_ref().map(|b| &b.0), &load);
        }
        let c_in_ref = c_in.as_ref();
        let mut acc: Option<LocalTensor> = None;
        for (k, term) in item.terms.iter().enumerate() {
            let blocks = term.iter().map(load).collect::<Result<Vec<_>, _>>()?;
            let operands: Vec<&LocalTensor> = blocks.iter().map(|b| &b.0).collect();
            let (beta, c) = if k == 0 {
                (self.beta, c_in_ref.map(|v| &v.0))
            } else {
                (one, acc.as_ref())
            };
            let opts = ContractOptions {
                alpha: self.alpha,
                beta,
                c,
                conj: self.conj,
                strict_blocking: true,
            };
            let (r, _) = local_einsum(&self.spec, &operands, &opts, ctx.backends()).map_err(kernel_error)?;
            acc = Some(r);
        }
        let acc = match (acc, c_in) {
            (Some(t), _) => t,
            // An empty product (an operand without elements): beta * C_in, or zeros.
            (None, Some(c)) => scale(&c.0, self.beta, self.out_dtype, ctx)?,
            (None, None) => LocalTensor::zeros(self.out_dtype, &item.out_shape)?,
        };
        let acc = if acc.dtype() == self.out_dtype {
            acc
        } else {
            acc.cast(self.out_dtype)?
        };
        if acc.shape() != item.out_shape.as_slice() {
            return Err(HandlerError::msg(format!(
                "result shape {:?} differs from planned {:?}",
                acc.shape(),
                item.out_shape
            )));
        }
        Ok(acc)
    }
}
