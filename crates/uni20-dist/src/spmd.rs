//! Distributed operations called collectively in the expert SPMD mode
//! (design note `persistent_dispatch.md`, not in this repository, "Expert
//! SPMD mode"): every rank
//! calls the same function with the same arguments; each rank computes the
//! plan itself, the ranks agree on its digest before any payload moves
//! ([`SpmdContext::agree`]), and each rank then runs its own part with the
//! same handlers the worker loop runs. The result ([`SpmdTensor`]) is the
//! same manifest on every rank.
//!
//! Only what the SPMD tests and examples need: [`scatter`] (from a local
//! tensor every rank holds), [`contract`] / [`contract_with`], and
//! [`to_local`] (every rank gets the whole tensor). Blocks are owned
//! round-robin by every rank (there is no root in SPMD) and stay in the
//! owners' stores until the universe ends. The main mode is the
//! root/worker one (`uni20::launch`); use this one to write collective
//! kernels or to embed uni20 in SPMD code.
//!
//! Every function here is collective. A rank whose arguments differ (a
//! different tensor, block size or spec) makes every rank fail with
//! [`JobError::Disagreement`](uni20_worker::JobError::Disagreement) naming
//! the operation, the op id, the ranks and the first differing plan field.

use serde_bytes::ByteBuf;
use uni20_dispatch::{ContractOptions, LocalTensor, ResolveSpec};
use uni20_persist::{ObjectId, PersistentPtr};
use uni20_worker::spmd::{digest_bytes, plan_digest};
use uni20_worker::{CommandSpec, SpmdContext};

use crate::error::DistError;
use crate::layout::{extract_block, Blocking};
use crate::ops::contract::{plan_contract, ContractPlan, ContractV1};
use crate::tensor::{Block, BlockRef, Manifest};

/// A distributed tensor of an SPMD universe: the same manifest (shape,
/// dtype, tiling, owner and object id of every block) on every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpmdTensor {
    manifest: Manifest,
}

impl SpmdTensor {
    /// The manifest (identical on every rank).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }
    /// Global shape.
    pub fn shape(&self) -> &[usize] {
        &self.manifest.shape
    }
    /// Element type.
    pub fn dtype(&self) -> uni20_dispatch::DType {
        self.manifest.dtype
    }
    /// Block tiling.
    pub fn blocking(&self) -> &Blocking {
        &self.manifest.blocking
    }
}

/// A local error in the middle of a collective operation stops the
/// universe (the other ranks would otherwise wait for this one).
fn local_failure(ctx: &SpmdContext<'_>, what: &str, e: impl std::fmt::Display) -> DistError {
    DistError::Job(ctx.abort(format!("rank {}: {what}: {e}", ctx.rank())))
}

/// Scatters `local`, which every rank holds (the same values on every
/// rank), into blocks of at most `block` elements per mode, block `b` owned
/// by rank `b % size`. Each owner commits its blocks from its own copy; no
/// payload moves. Collective.
///
/// The plan agreed on: shape, dtype, tiling, owners and a digest of the
/// values (FNV-1a over the bytes: one pass over the tensor).
///
/// # Errors
/// [`DistError::Blocking`] (on every rank) for `block == 0` or too many
/// blocks; [`DistError::Job`] with [`JobError::Disagreement`](uni20_worker::JobError::Disagreement) if the ranks
/// pass different tensors or block sizes, or the collective's errors.
pub fn scatter(ctx: &SpmdContext<'_>, local: &LocalTensor, block: usize) -> Result<SpmdTensor, DistError> {
    let blocking = Blocking::regular(local.shape(), block);
    let owners: Vec<usize> = match &blocking {
        Ok(bl) => (0..bl.num_blocks()).map(|b| b % ctx.size()).collect(),
        Err(_) => Vec::new(),
    };
    let fields: Vec<(&str, u64)> = match &blocking {
        Ok(bl) => vec![
            ("shape", plan_digest(local.shape())),
            ("dtype", plan_digest(local.dtype().name())),
            ("blocking", plan_digest(bl)),
            ("owners", plan_digest(&owners)),
            ("values", digest_bytes(local.as_bytes())),
        ],
        Err(e) => vec![("validation error", plan_digest(&e.to_string()))],
    };
    ctx.agree("uni20.spmd.scatter", &fields)?;
    // Every rank agreed: the same tiling, or the same error.
    let blocking = blocking?;
    let me = ctx.rank();
    let mut mine: Vec<(usize, ObjectId)> = Vec::new();
    for b in (0..owners.len()).filter(|&b| owners[b] == me) {
        let blk = extract_block(local, &blocking, b).map_err(|e| local_failure(ctx, "extracting a block", e))?;
        let p = ctx
            .store()
            .commit(Block(blk))
            .map_err(|e| local_failure(ctx, &format!("committing block {b}"), e))?;
        mine.push((b, p.id()));
    }
    let all: Vec<Vec<(usize, ObjectId)>> = ctx.all_gather(&mine)?;
    let mut blocks: Vec<Option<BlockRef>> = vec![None; owners.len()];
    for (owner, list) in all.into_iter().enumerate() {
        for (b, id) in list {
            if let Some(slot) = blocks.get_mut(b) {
                *slot = Some(BlockRef { owner, id });
            }
        }
    }
    let blocks = every_block(blocks, "committed block")?;
    let manifest = Manifest {
        symmetric: None,
        shape: local.shape().to_vec(),
        dtype: local.dtype(),
        blocking,
        blocks,
    };
    manifest.validate()?;
    Ok(SpmdTensor { manifest })
}

/// The reference of every block, in block order; a block no rank reported is a
/// [`DistError::Protocol`] ("no rank `what` `b`").
fn every_block(blocks: Vec<Option<BlockRef>>, what: &str) -> Result<Vec<BlockRef>, DistError> {
    blocks
        .into_iter()
        .enumerate()
        .map(|(b, r)| r.ok_or_else(|| DistError::Protocol(format!("no rank {what} {b}"))))
        .collect()
}

/// `C = einsum(spec, A, B)` collectively; see [`contract_with`].
///
/// # Errors
/// As [`contract_with`].
pub fn contract(
    ctx: &SpmdContext<'_>,
    spec: impl ResolveSpec,
    a: &SpmdTensor,
    b: &SpmdTensor,
) -> Result<SpmdTensor, DistError> {
    contract_with(ctx, spec, a, b, &ContractOptions::default())
}

/// The named parts of a contraction plan, for the agreement.
fn contract_fields(a: &SpmdTensor, b: &SpmdTensor, p: &ContractPlan) -> Vec<(&'static str, u64)> {
    let d = &p.descriptor;
    vec![
        ("operands", plan_digest(&(&a.manifest, &b.manifest))),
        ("spec", plan_digest(&d.spec)),
        ("scalars", plan_digest(&(d.alpha, d.beta, d.conj))),
        ("out_dtype", plan_digest(&d.out_dtype)),
        ("out_shape", plan_digest(&p.out_shape)),
        ("out_blocking", plan_digest(&p.out_blocking)),
        ("items", plan_digest(&d.items)),
        ("transfers", plan_digest(&d.transfers)),
    ]
}

/// `C = alpha * einsum(spec, op(A), op(B)) + beta * C_in` collectively:
/// every rank plans the contraction with [`plan_contract`] over every rank
/// (work items go to the rank owning most of their input bytes), the ranks
/// agree on the plan (operands, spec, scalars, output shape and tiling,
/// items, transfers), and each participant runs `uni20.contract.v1`'s
/// handler: it exchanges blocks directly with the other ranks, contracts
/// its items and commits their output blocks. Every rank then learns every
/// output block's owner and id. `opts.strict_blocking` is ignored (the
/// planner requires equal tilings on shared indices).
///
/// # Errors
/// The planner's validation errors ([`DistError::Spec`],
/// [`DistError::Contract`], [`DistError::BlockingMismatch`],
/// [`DistError::PlanTooLarge`]) on every rank once the ranks agree that
/// they all found it; [`DistError::Job`] with [`JobError::Disagreement`](uni20_worker::JobError::Disagreement) if
/// the plans differ, or with the diagnostic of a failed handler (the
/// universe stops).
pub fn contract_with(
    ctx: &SpmdContext<'_>,
    spec: impl ResolveSpec,
    a: &SpmdTensor,
    b: &SpmdTensor,
    opts: &ContractOptions<'_, SpmdTensor>,
) -> Result<SpmdTensor, DistError> {
    let mopts = ContractOptions {
        alpha: opts.alpha,
        beta: opts.beta,
        c: opts.c.map(|t| &t.manifest),
        conj: opts.conj,
        strict_blocking: opts.strict_blocking,
    };
    let ranks: Vec<usize> = (0..ctx.size()).collect();
    let plan = plan_contract(&ranks, spec, &[&a.manifest, &b.manifest], &mopts);
    let p = match plan {
        Ok(p) => p,
        Err(e) => {
            // The ranks must agree that they all refuse, with the same error.
            let fields = [("validation error", plan_digest(&e.to_string()))];
            ctx.agree(ContractV1::WIRE_NAME, &fields)?;
            return Err(e);
        }
    };
    let fields = contract_fields(a, b, &p);
    let replies = ctx.run_collective::<ContractV1>(&p.descriptor, &p.participants, &fields)?;
    let n = p.out_blocking.num_blocks();
    let mut blocks: Vec<Option<BlockRef>> = vec![None; n];
    for (owner, ids) in replies {
        for (item, id) in ids {
            let out_block = p.descriptor.items.get(item).map(|i| i.out_block);
            match out_block.and_then(|o| blocks.get_mut(o)) {
                Some(slot) => *slot = Some(BlockRef { owner, id }),
                None => return Err(DistError::Protocol(format!("rank {owner} reported item {item} of {n}"))),
            }
        }
    }
    let blocks = every_block(blocks, "computed output block")?;
    let manifest = Manifest {
        symmetric: None,
        shape: p.out_shape.clone(),
        dtype: p.descriptor.out_dtype,
        blocking: p.out_blocking.clone(),
        blocks,
    };
    manifest.validate()?;
    Ok(SpmdTensor { manifest })
}

/// The whole tensor on every rank: each owner contributes its blocks'
/// encoded payloads to one all-gather (every payload reaches every rank).
/// Collective; the ranks first agree on the manifest.
///
/// # Errors
/// [`DistError::Job`] for a disagreement or the collective's errors;
/// [`DistError::BadManifest`] if a block does not have the shape and dtype
/// the manifest says.
pub fn to_local(ctx: &SpmdContext<'_>, t: &SpmdTensor) -> Result<LocalTensor, DistError> {
    let m = &t.manifest;
    ctx.agree("uni20.spmd.to_local", &[("manifest", plan_digest(m))])?;
    let me = ctx.rank();
    let mut mine: Vec<(usize, ByteBuf)> = Vec::new();
    for (b, r) in m.blocks.iter().enumerate().filter(|(_, r)| r.owner == me) {
        let (_, bytes) = ctx
            .store()
            .encoded(r.id)
            .map_err(|e| local_failure(ctx, &format!("reading block {b} ({})", r.id), e))?;
        mine.push((b, ByteBuf::from(bytes.to_vec())));
    }
    let all: Vec<Vec<(usize, ByteBuf)>> = ctx.all_gather(&mine)?;
    let mut bytes = vec![0u8; m.shape.iter().product::<usize>() * m.dtype.size_bytes()];
    let mut seen = vec![false; m.blocks.len()];
    for (b, raw) in all.into_iter().flatten() {
        let blk = LocalTensor::decode(&raw)?;
        m.place_block(&mut bytes, b, &blk)?;
        seen[b] = true;
    }
    if let Some(b) = seen.iter().position(|s| !s) {
        return Err(DistError::Protocol(format!("no rank sent block {b}")));
    }
    Ok(LocalTensor::from_bytes(m.dtype, &m.shape, &bytes)?)
}

/// The block of `t` with number `b`, if this rank owns it (read from this
/// rank's store).
///
/// # Errors
/// [`DistError::Store`] if the store cannot load it.
pub fn local_block(ctx: &SpmdContext<'_>, t: &SpmdTensor, b: usize) -> Result<Option<LocalTensor>, DistError> {
    match t.manifest.blocks.get(b) {
        Some(r) if r.owner == ctx.rank() => {
            let v = ctx.store().load_wait(PersistentPtr::<Block>::from_id(r.id))?;
            Ok(Some(v.0.clone()))
        }
        _ => Ok(None),
    }
}
