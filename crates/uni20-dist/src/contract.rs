//! Distributed einsum contraction: root-side planning, the
//! `uni20.contract.v1` descriptor, and its worker handler.
//!
//! The root validates the spec against the manifests, builds one work item
//! per output block, assigns each to a rank (preferring the rank that already
//! owns most of the item's input bytes, under a load cap), and lists every
//! block that must move between workers. Workers exchange those blocks
//! directly with each other, contract locally through `uni20-dispatch`,
//! commit each output block and reply with its object id. The root never
//! receives a payload.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use uni20_async::{ReadBuffer, WriteBuffer};
use uni20_dispatch::{contract as local_contract, ContractError, DType, EinsumSpec, LocalTensor, C64};
use uni20_persist::{ObjectId, ObjectMeta, PersistentPtr};
use uni20_worker::{
    data_tag, decode_descriptor, encode_reply, register_command, CommandSpec, Controller, DeferredJob, Envelope,
    HandlerError, JobError, Tag, WorkerContext,
};

use crate::error::DistError;
use crate::layout::Grid;
use crate::tensor::{collect_refs, Block, BlockRef, DistTensor, Manifest, TensorMeta};

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

/// One output block's work: `out = alpha * sum_k A_k * B_k + beta * C_in`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkItem {
    /// Rank that computes the item.
    pub rank: usize,
    /// Output block number (row-major in the output grid).
    pub out_block: usize,
    /// Output block shape.
    pub out_shape: Vec<usize>,
    /// The block pairs to contract and sum.
    pub terms: Vec<(BlockRef, BlockRef)>,
    /// The existing output block, when `beta != 0`.
    pub c_in: Option<BlockRef>,
}

/// One block moving from its owner to the rank that needs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    /// The object.
    pub id: ObjectId,
    /// Sending rank (the owner).
    pub from: usize,
    /// Receiving rank.
    pub to: usize,
    /// Payload bytes.
    pub bytes: u64,
}

/// The `uni20.contract.v1` descriptor: the whole plan, identical on every
/// participant. Holds ids, shapes and scalars only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContractDescriptorV1 {
    /// The einsum spec.
    pub spec: EinsumSpec,
    /// Scale of the product.
    pub alpha: C64,
    /// Scale of the existing output.
    pub beta: C64,
    /// Output element type.
    pub out_dtype: DType,
    /// One item per output block.
    pub items: Vec<WorkItem>,
    /// Worker-to-worker block transfers; transfer `i` uses tag `data_tag(i)`.
    pub transfers: Vec<Transfer>,
}

/// The command `uni20.contract.v1`.
pub struct ContractV1;

impl CommandSpec for ContractV1 {
    const WIRE_NAME: &'static str = "uni20.contract.v1";
    const DEBUG_NAME: &'static str = "contract";
    const SCHEMA_VERSION: u32 = 1;
    type Descriptor = ContractDescriptorV1;
    type Reply = Vec<(usize, ObjectId)>;
}

/// A validated, rank-assigned contraction plan.
#[derive(Clone, Debug, PartialEq)]
pub struct ContractPlan {
    /// What is sent to the workers.
    pub descriptor: ContractDescriptorV1,
    /// Global output shape.
    pub out_shape: Vec<usize>,
    /// Output block grid.
    pub out_grid: Grid,
    /// Ranks that receive the descriptor.
    pub participants: Vec<usize>,
}

impl ContractPlan {
    /// Total payload bytes moved between ranks.
    pub fn bytes_moved(&self) -> u64 {
        self.descriptor.transfers.iter().map(|t| t.bytes).sum()
    }

    /// Payload bytes sent to or from the root (zero whenever the root is not
    /// also the only worker).
    pub fn bytes_through_root(&self) -> u64 {
        self.descriptor
            .transfers
            .iter()
            .filter(|t| t.from == 0 || t.to == 0)
            .map(|t| t.bytes)
            .sum()
    }

    /// One-line summary: items, terms, transfers, bytes.
    pub fn summary(&self) -> String {
        let terms: usize = self.descriptor.items.iter().map(|i| i.terms.len()).sum();
        format!(
            "{} work items, {} block products, {} transfers, {} bytes moved, {} bytes through the root",
            self.descriptor.items.len(),
            terms,
            self.descriptor.transfers.len(),
            self.bytes_moved(),
            self.bytes_through_root()
        )
    }
}

fn label_extents(labels: &[char], grid: &Grid, map: &mut BTreeMap<char, Vec<usize>>) -> Result<(), DistError> {
    for (l, e) in labels.iter().zip(&grid.extents) {
        match map.get(l) {
            Some(prev) if prev != e => {
                return Err(DistError::Blocking {
                    label: *l,
                    first: prev.clone(),
                    second: e.clone(),
                })
            }
            Some(_) => {}
            None => {
                map.insert(*l, e.clone());
            }
        }
    }
    Ok(())
}

/// A contraction validated against its operands' static descriptions.
#[derive(Clone, Debug)]
struct Validated {
    spec: EinsumSpec,
    out: TensorMeta,
    reduce: Vec<char>,
    reduce_grid: Grid,
    alpha: C64,
    beta: C64,
    use_c: bool,
}

/// Checks a contraction using only shapes, dtypes and grids (known before
/// the operands' producing operations complete).
fn validate(
    spec: &str,
    a: &TensorMeta,
    b: &TensorMeta,
    c: Option<&TensorMeta>,
    alpha: C64,
    beta: C64,
) -> Result<Validated, DistError> {
    let spec = EinsumSpec::parse(spec)?;
    let out_shape = spec.output_shape(&a.shape, &b.shape)?;
    let mut out_dtype = a.dtype.promote(b.dtype);
    if let Some(c) = c {
        out_dtype = out_dtype.promote(c.dtype);
        if c.shape != out_shape {
            return Err(ContractError::Shape {
                expected: out_shape,
                got: c.shape.clone(),
            }
            .into());
        }
    }
    if !out_dtype.is_complex() {
        if alpha.im != 0.0 {
            return Err(ContractError::ComplexScalarForRealOutput {
                which: "alpha",
                value: alpha,
                dtype: out_dtype,
            }
            .into());
        }
        if c.is_some() && beta.im != 0.0 {
            return Err(ContractError::ComplexScalarForRealOutput {
                which: "beta",
                value: beta,
                dtype: out_dtype,
            }
            .into());
        }
    }
    let mut ext = BTreeMap::new();
    label_extents(&spec.a, &a.grid, &mut ext)?;
    label_extents(&spec.b, &b.grid, &mut ext)?;
    if let Some(c) = c {
        label_extents(&spec.out, &c.grid, &mut ext)?;
    }
    let out_grid = Grid {
        extents: spec.out.iter().map(|l| ext[l].clone()).collect(),
    };
    let reduce: Vec<char> = ext.keys().copied().filter(|l| !spec.out.contains(l)).collect();
    let reduce_grid = Grid {
        extents: reduce.iter().map(|l| ext[l].clone()).collect(),
    };
    let use_c = c.is_some() && beta != C64::new(0.0, 0.0);
    Ok(Validated {
        out: TensorMeta {
            shape: out_shape,
            dtype: out_dtype,
            grid: out_grid,
        },
        spec,
        reduce,
        reduce_grid,
        alpha,
        beta,
        use_c,
    })
}

/// Builds the plan of a validated contraction from the operands' block maps.
fn plan(v: &Validated, workers: &[usize], am: &Manifest, bm: &Manifest, cm: Option<&Manifest>) -> ContractPlan {
    let spec = &v.spec;
    let out_grid = &v.out.grid;
    let block_index = |labels: &[char], m: &Manifest, o: &[usize], r: &[usize]| -> (BlockRef, u64) {
        let multi: Vec<usize> = labels
            .iter()
            .map(|l| match spec.out.iter().position(|x| x == l) {
                Some(p) => o[p],
                None => r[v.reduce.iter().position(|x| x == l).unwrap_or(0)],
            })
            .collect();
        let lin = m.grid.linear(&multi);
        (m.blocks[lin], m.block_bytes(lin))
    };
    let cm = cm.filter(|_| v.use_c);
    let n_out = out_grid.num_blocks();
    let cap = n_out.div_ceil(workers.len());
    let mut load: BTreeMap<usize, usize> = workers.iter().map(|&w| (w, 0)).collect();
    let mut items = Vec::with_capacity(n_out);
    let mut sizes: BTreeMap<ObjectId, u64> = BTreeMap::new();
    for o_lin in 0..n_out {
        let o = out_grid.multi(o_lin);
        let mut terms = Vec::new();
        for r_lin in 0..v.reduce_grid.num_blocks() {
            let r = v.reduce_grid.multi(r_lin);
            let (ra, sa) = block_index(&spec.a, am, &o, &r);
            let (rb, sb) = block_index(&spec.b, bm, &o, &r);
            sizes.insert(ra.id, sa);
            sizes.insert(rb.id, sb);
            terms.push((ra, rb));
        }
        let c_in = cm.map(|c| {
            sizes.insert(c.blocks[o_lin].id, c.block_bytes(o_lin));
            c.blocks[o_lin]
        });
        // Locality: bytes of this item's inputs already on each rank.
        let mut local: BTreeMap<usize, u64> = BTreeMap::new();
        let mut seen = BTreeSet::new();
        for r in terms.iter().flat_map(|(x, y)| [x, y]).chain(c_in.iter()) {
            if seen.insert(r.id) {
                *local.entry(r.owner).or_default() += sizes[&r.id];
            }
        }
        let rank = workers
            .iter()
            .copied()
            .filter(|w| load[w] < cap)
            .max_by_key(|w| {
                (
                    local.get(w).copied().unwrap_or(0),
                    std::cmp::Reverse(load[w]),
                    std::cmp::Reverse(*w),
                )
            })
            .unwrap_or(workers[o_lin % workers.len()]);
        *load.entry(rank).or_default() += 1;
        items.push(WorkItem {
            rank,
            out_block: o_lin,
            out_shape: out_grid.block_shape(&o),
            terms,
            c_in,
        });
    }
    let mut transfers = Vec::new();
    let mut planned = BTreeSet::new();
    for it in &items {
        for r in it.terms.iter().flat_map(|(x, y)| [x, y]).chain(it.c_in.iter()) {
            if r.owner != it.rank && planned.insert((r.id, it.rank)) {
                transfers.push(Transfer {
                    id: r.id,
                    from: r.owner,
                    to: it.rank,
                    bytes: sizes[&r.id],
                });
            }
        }
    }
    let mut participants: BTreeSet<usize> = items.iter().map(|i| i.rank).collect();
    participants.extend(transfers.iter().flat_map(|t| [t.from, t.to]));
    let descriptor = ContractDescriptorV1 {
        spec: spec.clone(),
        alpha: v.alpha,
        beta: if v.use_c { v.beta } else { C64::new(0.0, 0.0) },
        out_dtype: v.out.dtype,
        items,
        transfers,
    };
    ContractPlan {
        descriptor,
        out_shape: v.out.shape.clone(),
        out_grid: out_grid.clone(),
        participants: participants.into_iter().collect(),
    }
}

/// Validates a contraction of two manifests and builds its plan, without
/// submitting anything. `workers` are the ranks that may compute (see
/// [`Controller::worker_ranks`]); `c` is the existing output for `beta`.
///
/// # Errors
/// [`DistError::Spec`] for a malformed spec or a shape that does not fit it;
/// [`DistError::Contract`] for a C of the wrong shape or a complex scalar
/// with a real output; [`DistError::Blocking`] if an index is blocked
/// differently in two operands; [`DistError::Shape`] for no workers.
pub fn plan_contract(
    workers: &[usize],
    spec: &str,
    a: &Manifest,
    b: &Manifest,
    alpha: C64,
    beta: C64,
    c: Option<&Manifest>,
) -> Result<ContractPlan, DistError> {
    if workers.is_empty() {
        return Err(DistError::Shape("no worker ranks".into()));
    }
    let cmeta = c.map(Manifest::meta);
    let v = validate(spec, &a.meta(), &b.meta(), cmeta.as_ref(), alpha, beta)?;
    Ok(plan(&v, workers, a, b, c))
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
/// Returns at once. The spec, shapes, dtypes and blockings are checked now
/// (errors here mean nothing was submitted); the contraction itself is
/// planned and submitted as soon as A, B (and C_in) are ready, in program
/// order, and the result's block map is written when the workers reply.
/// A failure of any input's producing operation, or of this contraction,
/// poisons the result with the first error: [`DistTensor::wait`],
/// [`DistTensor::to_local`] and every later operation on it report it.
///
/// Both operands must use the same block extents for each shared index
/// (tensors created with the same block size do). Output blocks are owned
/// by the ranks that computed them; [`DistTensor::plan`] shows the plan.
///
/// # Errors
/// [`DistError::Spec`], [`DistError::Contract`], [`DistError::Blocking`]
/// from validation; [`DistError::Job`] if the job already stopped.
pub fn contract_with(
    ctl: &Controller<'_>,
    spec: &str,
    a: &DistTensor,
    b: &DistTensor,
    opts: &ContractOptions<'_>,
) -> Result<DistTensor, DistError> {
    let v = validate(
        spec,
        a.meta(),
        b.meta(),
        opts.c.map(|c| c.meta()),
        opts.alpha,
        opts.beta,
    )?;
    if ctl.has_failed() {
        ctl.progress()?;
    }
    let (out, write) = DistTensor::pending(v.out.clone());
    let job = ContractJob {
        ra: a.read_blocks(),
        rb: b.read_blocks(),
        rc: opts.c.filter(|_| v.use_c).map(|c| (c.read_blocks(), c.meta().clone())),
        a: a.meta().clone(),
        b: b.meta().clone(),
        v,
        out: out.clone(),
        write,
    };
    ctl.defer(Box::new(job));
    Ok(out)
}

/// A contraction waiting for its operands' block maps.
struct ContractJob {
    ra: ReadBuffer<Vec<BlockRef>>,
    rb: ReadBuffer<Vec<BlockRef>>,
    rc: Option<(ReadBuffer<Vec<BlockRef>>, TensorMeta)>,
    a: TensorMeta,
    b: TensorMeta,
    v: Validated,
    out: DistTensor,
    write: WriteBuffer<Vec<BlockRef>>,
}

fn manifest_of(meta: &TensorMeta, r: &ReadBuffer<Vec<BlockRef>>) -> Result<Manifest, uni20_async::AsyncError> {
    let blocks = r.wait()?.clone();
    Ok(Manifest {
        shape: meta.shape.clone(),
        dtype: meta.dtype,
        grid: meta.grid.clone(),
        blocks,
    })
}

impl<'c> DeferredJob<'c> for ContractJob {
    fn ready(&self) -> bool {
        self.ra.is_ready() && self.rb.is_ready() && self.rc.as_ref().is_none_or(|(r, _)| r.is_ready())
    }

    fn run(self: Box<Self>, ctl: &Controller<'c>) {
        let ContractJob {
            ra,
            rb,
            rc,
            a,
            b,
            v,
            out,
            write,
        } = *self;
        let inputs = (|| -> Result<_, uni20_async::AsyncError> {
            let am = manifest_of(&a, &ra)?;
            let bm = manifest_of(&b, &rb)?;
            let cm = rc.as_ref().map(|(r, m)| manifest_of(m, r)).transpose()?;
            Ok((am, bm, cm))
        })();
        drop((ra, rb, rc));
        let (am, bm, cm) = match inputs {
            Ok(x) => x,
            Err(e) => return write.fail(e),
        };
        let p = plan(&v, &ctl.worker_ranks(), &am, &bm, cm.as_ref());
        tracing::debug!(spec = %v.spec, "{}", p.summary());
        out.set_plan(p.clone());
        let items: Vec<usize> = p.descriptor.items.iter().map(|i| i.out_block).collect();
        let n = p.out_grid.num_blocks();
        // Shared between the completion callback and this function, so a
        // submission failure can poison the output with its error.
        let slot = Rc::new(RefCell::new(Some(write)));
        let cb_slot = slot.clone();
        let submitted = ctl.submit_nowait::<ContractV1>(&p.descriptor, &p.participants, move |_, replies| {
            let Some(w) = cb_slot.borrow_mut().take() else { return };
            let blocks = replies.map_err(DistError::from).and_then(|replies| {
                let by_block = replies
                    .into_iter()
                    .map(|(rank, ids)| {
                        let ids = ids
                            .into_iter()
                            .map(|(item, id)| (items.get(item).copied().unwrap_or(usize::MAX), id));
                        (rank, ids.collect())
                    })
                    .collect();
                collect_refs(by_block, n)
            });
            match blocks {
                Ok(blocks) => match w.wait() {
                    Ok(mut g) => {
                        g.set(blocks);
                    }
                    Err(e) => tracing::error!("output epoch unavailable: {e}"),
                },
                Err(e) => w.fail(e),
            }
        });
        if let Err(e) = submitted {
            if let Some(w) = slot.borrow_mut().take() {
                w.fail(e);
            }
        }
    }

    fn abandon(self: Box<Self>, error: JobError) {
        self.write.fail(error);
    }
}

/// Tags of transfer `i`: its metadata message and its payload message.
fn transfer_tags(i: usize) -> (Tag, Tag) {
    let base = data_tag(2 * (i % 15_000));
    (base, base + 1)
}

/// Executes this rank's part of `transfers`: sends the objects it owns
/// (metadata, then the payload straight from the store's bytes: no copy)
/// and receives the ones it needs, inserting each as a replica after
/// checking its size and checksum. Returns the ids of the new replicas.
///
/// # Errors
/// A [`HandlerError`] naming the object if a send, a receive or the
/// replica check fails.
pub(crate) fn exchange_blocks(ctx: &WorkerContext<'_>, transfers: &[Transfer]) -> Result<Vec<ObjectId>, HandlerError> {
    let me = ctx.rank();
    let store = ctx.store();
    let mut outgoing_data = Vec::new();
    for (i, t) in transfers.iter().enumerate().filter(|(_, t)| t.from == me) {
        let (meta, bytes) = store
            .encoded_for_transfer(t.id)
            .map_err(|e| HandlerError::from(e).with_object(t.id))?;
        let meta = postcard::to_stdvec(&meta).map_err(|e| HandlerError::msg(e.to_string()))?;
        outgoing_data.push((t.to, transfer_tags(i), meta, bytes));
    }
    let mut outgoing: Vec<(usize, Tag, &[u8])> = Vec::with_capacity(2 * outgoing_data.len());
    for (to, (tm, tp), meta, bytes) in &outgoing_data {
        outgoing.push((*to, *tm, meta.as_slice()));
        outgoing.push((*to, *tp, &bytes[..]));
    }
    let mut incoming = Vec::new();
    for (i, t) in transfers.iter().enumerate().filter(|(_, t)| t.to == me) {
        let (tm, tp) = transfer_tags(i);
        incoming.push((t.from, tm));
        incoming.push((t.from, tp));
    }
    let mut received = ctx.transport().exchange(&outgoing, &incoming)?.into_iter();
    drop(outgoing);
    drop(outgoing_data);
    let mut replicas = Vec::new();
    while let (Some(meta), Some(bytes)) = (received.next(), received.next()) {
        let meta: ObjectMeta = uni20_worker::decode_exact(&meta, "object metadata")?;
        let id = meta.id;
        if !store.contains(id) {
            store
                .insert_replica(meta, bytes)
                .map_err(|e| HandlerError::from(e).with_object(id))?;
            replicas.push(id);
        }
    }
    Ok(replicas)
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

fn handle_contract(ctx: &mut WorkerContext<'_>, env: &Envelope) -> Result<Vec<u8>, HandlerError> {
    let d = decode_descriptor::<ContractV1>(env)?;
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
        let mut acc: Option<LocalTensor> = None;
        for (k, (ra, rb)) in item.terms.iter().enumerate() {
            let (a, b) = (load(ra)?, load(rb)?);
            let (beta, c) = if k == 0 {
                (d.beta, c_in.as_ref().map(|v| &v.0))
            } else {
                (one, acc.as_ref())
            };
            let r = local_contract(&d.spec, d.alpha, &a.0, &b.0, beta, c, ctx.backends()).map_err(kernel_error)?;
            acc = Some(r);
        }
        let acc = match acc {
            Some(t) => t,
            None => return Err(HandlerError::msg(format!("work item {idx} has no block products"))),
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
    for id in replicas {
        store.evict(id);
    }
    encode_reply::<ContractV1>(&out)
}

register_command! {
    static CONTRACT_V1 = { wire: "uni20.contract.v1", debug: "contract", schema: 1, handler: handle_contract };
}

/// `uni20.replicate.v1`: copies objects from their owners to other ranks,
/// directly (never through the root). Persistent objects are immutable, so
/// a replica is as good as the original.
pub struct ReplicateV1;

/// Descriptor of [`ReplicateV1`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicateDesc {
    /// The copies to make; transfer `i` uses the tags of `i`.
    pub transfers: Vec<Transfer>,
    /// Drop the new replicas again after verifying them (for benchmarks:
    /// every repetition then moves the bytes again).
    pub release_after: bool,
}

impl CommandSpec for ReplicateV1 {
    const WIRE_NAME: &'static str = "uni20.replicate.v1";
    const DEBUG_NAME: &'static str = "replicate";
    const SCHEMA_VERSION: u32 = 1;
    type Descriptor = ReplicateDesc;
    /// Number of replicas created on the replying rank.
    type Reply = u64;
}

fn handle_replicate(ctx: &mut WorkerContext<'_>, env: &Envelope) -> Result<Vec<u8>, HandlerError> {
    let d = decode_descriptor::<ReplicateV1>(env)?;
    let replicas = exchange_blocks(ctx, &d.transfers)?;
    if d.release_after {
        for id in &replicas {
            ctx.store().evict(*id);
        }
    }
    encode_reply::<ReplicateV1>(&(replicas.len() as u64))
}

register_command! {
    static REPLICATE_V1 = { wire: "uni20.replicate.v1", debug: "replicate", schema: 1, handler: handle_replicate };
}

/// Copies every block of `t` that `to` does not own onto rank `to`, straight
/// from the owners; waits for completion and returns the bytes moved.
/// With `keep == false` the copies are verified and dropped again.
///
/// # Errors
/// As [`DistTensor::manifest`]; [`DistError::Job`] if a transfer fails.
pub fn replicate(ctl: &Controller<'_>, t: &DistTensor, to: usize, keep: bool) -> Result<u64, DistError> {
    let m = t.manifest(ctl)?;
    let transfers: Vec<Transfer> = m
        .blocks
        .iter()
        .enumerate()
        .filter(|(_, r)| r.owner != to)
        .map(|(b, r)| Transfer {
            id: r.id,
            from: r.owner,
            to,
            bytes: m.block_bytes(b),
        })
        .collect();
    let bytes = transfers.iter().map(|t| t.bytes).sum();
    let mut participants: Vec<usize> = transfers.iter().flat_map(|t| [t.from, t.to]).collect();
    participants.sort_unstable();
    participants.dedup();
    if !participants.is_empty() {
        ctl.submit::<ReplicateV1>(
            &ReplicateDesc {
                transfers,
                release_after: !keep,
            },
            &participants,
        )?;
    }
    Ok(bytes)
}
