//! The commands of a symmetric decomposition and their worker handlers.
//!
//! `uni20.sym_factorize.v1`: the input's blocks move worker to worker to
//! the worker of their sector matrix; each worker assembles its sector
//! matrices (checking every block for NaN and infinities), factorizes
//! each through the local dispatcher (no truncation: the root decides),
//! commits each sector's full factors as objects and replies with the
//! values (the small decision record) and their ids.
//!
//! `uni20.sym_cut.v1`: with the factors' layouts (the bond leg built from
//! the kept counts), each worker cuts the blocks of its sectors out of the
//! full factors (a kept prefix of the bond), commits them (they stay
//! there: the sectors are already spread over the workers by cost), drops
//! the full factors and replies with the blocks' ids. With no layouts it
//! only drops the full factors (the cleanup after a rejected input).

use serde::{Deserialize, Serialize};
use uni20_dispatch::decomp::{
    eigh_with_attempts, hermitian_deviation, lq_with_attempts, qr_with_attempts, svd_with_attempts, EighBackendList,
    EighOptions, QrBackendList, SvdBackendList, SvdOptions,
};
use uni20_dispatch::{DType, LocalTensor, TensorData};
use uni20_persist::{ObjectId, PValue, PersistentPtr, Store};
use uni20_worker::{command, HandlerError, WorkerContext};

use super::command::{attempt_lines, gpu_first, kernel_outcome, local_list, RejectionV1};
use super::matrix::{bytes_mut, load_input_block, zeros};
use super::split::MatrixSplit;
use super::symmetric::{BoxPlace, SectorGeometry};
use crate::layout::{c_strides, copy_box};
use crate::ops::kit::worker::PARALLEL_MIN_COST;
use crate::symmetry::SymmetricLayout;
use crate::tensor::{Block, BlockRef};
use crate::transfer::{exchange_blocks, Transfer};
use uni20_dispatch::par::map_largest_first;

/// The family of a symmetric decomposition on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum SymKindV1 {
    /// SVD (full; the root truncates).
    Svd,
    /// QR.
    Qr,
    /// LQ.
    Lq,
    /// Hermitian eigendecomposition of each sector's Hermitian part; each
    /// sector reports its deviation from Hermitian, and the root applies
    /// the tolerance to the whole matrix.
    Eigh,
}

/// Descriptor of `uni20.sym_factorize.v1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SymFactorizeDescV1 {
    /// The family.
    pub(crate) kind: SymKindV1,
    /// The input's layout.
    pub(crate) layout: SymmetricLayout,
    /// The input's element type.
    pub(crate) dtype: DType,
    /// The input's block map (entry `b`: allowed block `b`).
    pub(crate) blocks: Vec<BlockRef>,
    /// Tensor modes forming the rows.
    pub(crate) rows: Vec<usize>,
    /// Tensor modes forming the columns.
    pub(crate) cols: Vec<usize>,
    /// The worker of each sector matrix.
    pub(crate) workers: Vec<usize>,
    /// The input blocks of each sector matrix.
    pub(crate) sector_blocks: Vec<Vec<usize>>,
    /// Input blocks moving to the sectors' workers (the `i`-th between one sender and one receiver uses the tags of `i`).
    pub(crate) transfers: Vec<Transfer>,
}

/// One factorized sector matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SectorFactoredV1 {
    /// The sector.
    pub(crate) sector: usize,
    /// Singular values (non-increasing) or eigenvalues (non-decreasing);
    /// empty for QR and LQ.
    pub(crate) values: Vec<f64>,
    /// The inner dimension of the full factors.
    pub(crate) k: usize,
    /// The full factors' object ids, in the family's order.
    pub(crate) full: Vec<ObjectId>,
    /// Eigh: the sector matrix's largest deviation from Hermitian
    /// `(deviation, row, col, max |A_s|)`, in the sector's indices.
    pub(crate) hermitian: Option<(f64, usize, usize, f64)>,
    /// The local backend attempts, one line each.
    pub(crate) attempts: Vec<String>,
}

/// Reply of `uni20.sym_factorize.v1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum SymFactorReplyV1 {
    /// This rank factorized these sectors (none if it only sent blocks).
    Factored(Vec<SectorFactoredV1>),
    /// This rank refused the input in `sector` (and committed nothing).
    Rejected {
        /// The sector.
        sector: usize,
        /// Why; a `NotHermitian` row and column are those of the sector matrix.
        rejection: RejectionV1,
    },
}

command!(
    /// The command `uni20.sym_factorize.v1`.
    pub(crate) SymFactorizeV1 = "uni20.sym_factorize.v1", schema 1, SymFactorizeDescV1 => SymFactorReplyV1, handle_factorize
);

/// Where a factor's blocks come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum FactorRoleV1 {
    /// Legs (row legs.., bond): full factor `i` of each sector, `m x k`.
    Left(u8),
    /// Legs (bond, column legs..): full factor `i` of each sector, `k x n`.
    Right(u8),
    /// The diagonal of the sector's values, legs (bond, bond), real.
    Diagonal,
}

/// One factor to cut.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct FactorV1 {
    /// Its layout.
    pub(crate) layout: SymmetricLayout,
    /// Its element type.
    pub(crate) dtype: DType,
    /// Where its blocks come from.
    pub(crate) role: FactorRoleV1,
}

/// One sector's part of the cut.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CutSectorV1 {
    /// The worker holding its full factors.
    pub(crate) worker: usize,
    /// The full factors' ids (dropped after the cut).
    pub(crate) full: Vec<ObjectId>,
    /// The inner dimension of the full factors.
    pub(crate) k: usize,
    /// The kept values (for a diagonal factor).
    pub(crate) values: Vec<f64>,
}

/// Descriptor of `uni20.sym_cut.v1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SymCutDescV1 {
    /// The input's layout.
    pub(crate) layout: SymmetricLayout,
    /// Tensor modes forming the rows.
    pub(crate) rows: Vec<usize>,
    /// Tensor modes forming the columns.
    pub(crate) cols: Vec<usize>,
    /// The factors to cut (none: only drop the full factors).
    pub(crate) factors: Vec<FactorV1>,
    /// Every sector matrix, in order.
    pub(crate) sectors: Vec<CutSectorV1>,
}

command!(
    /// The command `uni20.sym_cut.v1`. Reply: `(factor, block, id)` of each
    /// block this rank committed.
    pub(crate) SymCutV1 = "uni20.sym_cut.v1", schema 1, SymCutDescV1 => Vec<(u32, u64, ObjectId)>, handle_cut
);

fn geometry(layout: &SymmetricLayout, rows: &[usize], cols: &[usize]) -> Result<SectorGeometry, HandlerError> {
    let split = MatrixSplit {
        rows: rows.to_vec(),
        cols: cols.to_vec(),
    };
    SectorGeometry::new(layout, &split).map_err(|e| HandlerError::msg(format!("sector view of the input: {e}")))
}

fn load(store: &Store, id: ObjectId) -> Result<PValue<Block>, HandlerError> {
    store
        .load_wait(PersistentPtr::<Block>::from_id(id))
        .map_err(|e| HandlerError::from(e).with_object(id))
}

/// Copies the box `shape` at `place` out of the row-major `src` into a new tensor.
fn cut_box(src: &LocalTensor, place: &BoxPlace, shape: &[usize]) -> Result<LocalTensor, HandlerError> {
    let mut data = zeros(src.dtype(), shape.iter().product());
    copy_box(
        src.as_bytes(),
        &place.strides,
        place.base,
        bytes_mut(&mut data),
        &c_strides(shape),
        0,
        shape,
        src.dtype().size_bytes(),
    );
    Ok(LocalTensor::from_data(shape, data)?)
}

/// The first non-finite element of a sector's blocks, as a rejection.
type Assembled = Result<LocalTensor, RejectionV1>;

/// Assembles sector `s`'s matrix from its blocks (all local by now).
fn assemble_sector(
    store: &Store,
    d: &SymFactorizeDescV1,
    geo: &SectorGeometry,
    s: usize,
) -> Result<Assembled, HandlerError> {
    let sec = &geo.sectors[s];
    let elem = d.dtype.size_bytes();
    let mut data = zeros(d.dtype, sec.m * sec.n);
    let dst = bytes_mut(&mut data);
    for &b in &d.sector_blocks[s] {
        let r = d
            .blocks
            .get(b)
            .ok_or_else(|| HandlerError::msg(format!("sector {s} names block {b}, the map has {}", d.blocks.len())))?;
        let shape = d.layout.block_extents(b);
        let blk = match load_input_block(store, r.id, b, &shape, &d.layout.block_offsets(b), d.dtype)? {
            Ok(blk) => blk,
            Err(bad) => return Ok(Err(bad.into())),
        };
        let t = &blk.0;
        let place = geo
            .input_place(b)
            .filter(|p| p.sector == s)
            .ok_or_else(|| HandlerError::msg(format!("block {b} is not in sector {s}")))?;
        copy_box(
            t.as_bytes(),
            &c_strides(&shape),
            0,
            dst,
            &place.strides,
            place.base,
            &shape,
            elem,
        );
    }
    Ok(Ok(LocalTensor::from_data(&[sec.m, sec.n], data)?))
}

/// A sector's full factors, its values and the backend attempt lines.
type SectorFactors = (Vec<LocalTensor>, Vec<f64>, Vec<String>);

/// A sector's factors, values, attempt lines and (eigh) Hermiticity
/// `(deviation, row, col, max_abs)`.
type Computed = (
    Vec<LocalTensor>,
    Vec<f64>,
    Vec<String>,
    Option<(f64, usize, usize, f64)>,
);

/// The full factors and values of one sector matrix, or a rejection, by the
/// rank's decomposition backends (GPU first when `gpu`) with `threads`.
fn factorize_sector(
    gpu: bool,
    threads: usize,
    kind: SymKindV1,
    a: &LocalTensor,
) -> Result<Result<SectorFactors, RejectionV1>, HandlerError> {
    let r = match kind {
        SymKindV1::Svd => svd_with_attempts(a, &SvdOptions::default(), &local_list!(SvdBackendList, gpu, threads))
            .map(|(r, at)| (vec![r.u, r.vh], r.s, at)),
        SymKindV1::Qr => qr_with_attempts(a, &local_list!(QrBackendList, gpu, threads))
            .map(|(r, at)| (vec![r.q, r.r], Vec::new(), at)),
        SymKindV1::Lq => lq_with_attempts(a, &local_list!(QrBackendList, gpu, threads))
            .map(|(r, at)| (vec![r.l, r.q], Vec::new(), at)),
        SymKindV1::Eigh => {
            // The tolerance is the root's decision over all sectors (relative to
            // the largest entry of the whole matrix): the kernel accepts any
            // sector and decomposes its Hermitian part.
            let opts = EighOptions {
                hermitian_rtol: Some(f64::MAX),
            };
            eigh_with_attempts(a, &opts, &local_list!(EighBackendList, gpu, threads))
                .map(|(r, at)| (vec![r.vectors], r.values, at))
        }
    };
    match r {
        Ok((f, v, at)) => Ok(Ok((f, v, attempt_lines(&at)))),
        Err(e) => kernel_outcome(e).map(Err),
    }
}

fn release(store: &Store, ids: &[ObjectId], what: &str) -> Result<(), HandlerError> {
    store
        .release_many(ids)
        .map(|_| ())
        .map_err(|e| HandlerError::from(e).context(format!("dropping {what}")))
}

fn handle_factorize(ctx: &mut WorkerContext<'_>, d: SymFactorizeDescV1) -> Result<SymFactorReplyV1, HandlerError> {
    let me = ctx.rank();
    let store = ctx.store();
    let replicas = exchange_blocks(ctx, &d.transfers)?;
    let mine: Vec<usize> = (0..d.workers.len()).filter(|&s| d.workers[s] == me).collect();
    if mine.is_empty() {
        release(store, &replicas, "the fetched input blocks")?;
        return Ok(SymFactorReplyV1::Factored(Vec::new()));
    }
    let geo = geometry(&d.layout, &d.rows, &d.cols)?;
    if d.blocks.len() != d.layout.blocks().len() {
        return Err(HandlerError::msg(format!(
            "a block map of {} entries for a layout of {} allowed blocks",
            d.blocks.len(),
            d.layout.blocks().len()
        )));
    }
    if geo.sectors.len() != d.workers.len() || d.sector_blocks.len() != d.workers.len() {
        return Err(HandlerError::msg(format!(
            "{} sector workers and {} block lists for {} sector matrices",
            d.workers.len(),
            d.sector_blocks.len(),
            geo.sectors.len()
        )));
    }
    // Every block of this rank's sectors is checked before any sector is
    // factorized, so that the first non-finite block (in block order) is named.
    let mut first_bad: Option<(usize, RejectionV1)> = None;
    for &s in &mine {
        for &b in &d.sector_blocks[s] {
            if first_bad
                .as_ref()
                .is_some_and(|(_, r)| matches!(r, RejectionV1::NonFinite { block, .. } if *block < b))
            {
                continue;
            }
            let r = d.blocks.get(b).ok_or_else(|| {
                HandlerError::msg(format!("sector {s} names block {b}, the map has {}", d.blocks.len()))
            })?;
            let shape = d.layout.block_extents(b);
            if let Err(bad) = load_input_block(store, r.id, b, &shape, &d.layout.block_offsets(b), d.dtype)? {
                first_bad = Some((s, bad.into()));
            }
        }
    }
    if let Some((sector, rejection)) = first_bad {
        release(store, &replicas, "the fetched input blocks")?;
        return Ok(SymFactorReplyV1::Rejected { sector, rejection });
    }
    // Each sector: assemble, factorize and (eigh) measure its Hermiticity.
    // Sectors are independent: with a thread budget above 1 and enough work,
    // they run in parallel (the rank's thread and rayon helpers, the largest
    // sectors claimed first, `map_largest_first`)
    // with one thread each; the
    // commits and the reply follow sector order either way, and the first
    // failure in sector order is the one reported.
    let (gpu, threads) = (gpu_first(ctx), ctx.threads());
    let work = |s: usize, threads: usize| -> Result<Result<Computed, RejectionV1>, HandlerError> {
        let start = std::time::Instant::now();
        let matrix = match assemble_sector(store, &d, &geo, s)? {
            Ok(m) => m,
            Err(rej) => return Ok(Err(rej)),
        };
        let (factors, values, attempts) = match factorize_sector(gpu, threads, d.kind, &matrix)? {
            Ok(f) => f,
            Err(rej) => return Ok(Err(rej)),
        };
        let hermitian = match d.kind {
            SymKindV1::Eigh => {
                let h = hermitian_deviation(&matrix).map_err(HandlerError::from)?;
                Some((h.deviation, h.row, h.col, h.max_abs))
            }
            _ => None,
        };
        tracing::debug!(
            target: "uni20_dist",
            rank = me,
            sector = s,
            m = geo.sectors[s].m,
            n = geo.sectors[s].n,
            ms = start.elapsed().as_secs_f64() * 1e3,
            "sector factorized"
        );
        Ok(Ok((factors, values, attempts, hermitian)))
    };
    let costs: Vec<u64> = mine
        .iter()
        .map(|&s| {
            let (m, n) = (geo.sectors[s].m as u64, geo.sectors[s].n as u64);
            m.saturating_mul(n).saturating_mul(m.min(n))
        })
        .collect();
    let cost = costs.iter().copied().fold(0, u64::saturating_add);
    let parallel = threads > 1 && mine.len() > 1 && cost >= PARALLEL_MIN_COST;
    let mut computed: Vec<Option<Result<Result<Computed, RejectionV1>, HandlerError>>> = if parallel {
        // The largest sectors first: the one that costs most starts at once.
        map_largest_first(mine.len(), threads, &costs, |k| Some(work(mine[k], 1)))
    } else {
        Vec::new()
    };
    let mut done: Vec<SectorFactoredV1> = Vec::with_capacity(mine.len());
    let mut outcome = Ok(None);
    for (i, &s) in mine.iter().enumerate() {
        let result = match computed.get_mut(i).and_then(Option::take) {
            Some(r) => r,
            None => work(s, threads),
        };
        let (factors, values, attempts, hermitian) = match result {
            Ok(Ok(c)) => c,
            Ok(Err(rej)) => {
                outcome = Ok(Some((s, rej)));
                break;
            }
            Err(e) => {
                outcome = Err(e);
                break;
            }
        };
        let k = factors.first().map_or(0, |f| f.shape()[1]);
        let mut full = Vec::with_capacity(factors.len());
        for f in factors {
            match store.commit(Block(f)) {
                Ok(p) => full.push(p.id()),
                Err(e) => {
                    outcome = Err(HandlerError::from(e).context(format!("committing sector {s}'s factor")));
                    break;
                }
            }
        }
        done.push(SectorFactoredV1 {
            sector: s,
            values,
            k,
            full,
            hermitian,
            attempts,
        });
        if outcome.is_err() {
            break;
        }
    }
    release(store, &replicas, "the fetched input blocks")?;
    match outcome {
        Ok(None) => Ok(SymFactorReplyV1::Factored(done)),
        other => {
            let ids: Vec<ObjectId> = done.iter().flat_map(|x| x.full.iter().copied()).collect();
            release(store, &ids, "the factors of a refused input")?;
            match other {
                Ok(Some((sector, rejection))) => Ok(SymFactorReplyV1::Rejected { sector, rejection }),
                Err(e) => Err(e),
                Ok(None) => unreachable!("handled above"),
            }
        }
    }
}

/// The `len x len`-block of the diagonal of `values` at offsets `(ra, rb)`
/// inside the sector, shape `shape`, in the real `dtype`.
fn diagonal_block(
    values: &[f64],
    ra: usize,
    rb: usize,
    shape: &[usize],
    dtype: DType,
) -> Result<LocalTensor, HandlerError> {
    let (h, w) = (shape[0], shape[1]);
    let at = |i: usize, j: usize| {
        if ra + i == rb + j {
            values.get(ra + i).copied()
        } else {
            None
        }
    };
    let data = match dtype {
        DType::F32 => TensorData::F32((0..h * w).map(|x| at(x / w, x % w).unwrap_or(0.0) as f32).collect()),
        DType::F64 => TensorData::F64((0..h * w).map(|x| at(x / w, x % w).unwrap_or(0.0)).collect()),
        DType::C32 | DType::C64 => {
            return Err(HandlerError::msg(format!(
                "a diagonal of singular values is real, not {dtype}"
            )))
        }
    };
    Ok(LocalTensor::from_data(shape, data)?)
}

fn handle_cut(ctx: &mut WorkerContext<'_>, d: SymCutDescV1) -> Result<Vec<(u32, u64, ObjectId)>, HandlerError> {
    let me = ctx.rank();
    let store = ctx.store();
    let mine: Vec<usize> = (0..d.sectors.len()).filter(|&s| d.sectors[s].worker == me).collect();
    let mut out = Vec::new();
    if !d.factors.is_empty() && !mine.is_empty() {
        let geo = geometry(&d.layout, &d.rows, &d.cols)?;
        if geo.sectors.len() != d.sectors.len() {
            return Err(HandlerError::msg(format!(
                "{} sectors to cut, the view has {}",
                d.sectors.len(),
                geo.sectors.len()
            )));
        }
        let mut cache: std::collections::BTreeMap<ObjectId, PValue<Block>> = Default::default();
        for (f, factor) in d.factors.iter().enumerate() {
            let lay = &factor.layout;
            for b in 0..lay.blocks().len() {
                let shape = lay.block_extents(b);
                let (sector, blk) = match factor.role {
                    FactorRoleV1::Left(i) => {
                        let p = geo
                            .left_place(lay, b, |s| d.sectors.get(s).map_or(0, |x| x.k))
                            .ok_or_else(|| HandlerError::msg(format!("factor {f} block {b} fits no sector")))?;
                        if d.sectors[p.sector].worker != me {
                            continue;
                        }
                        (p.sector, Some((i, p)))
                    }
                    FactorRoleV1::Right(i) => {
                        let p = geo
                            .right_place(lay, b)
                            .ok_or_else(|| HandlerError::msg(format!("factor {f} block {b} fits no sector")))?;
                        if d.sectors[p.sector].worker != me {
                            continue;
                        }
                        (p.sector, Some((i, p)))
                    }
                    FactorRoleV1::Diagonal => {
                        let legs = lay.legs();
                        if legs.len() != 2 {
                            return Err(HandlerError::msg(format!(
                                "diagonal factor {f} has {} legs",
                                legs.len()
                            )));
                        }
                        let tiles = &lay.blocks()[b].tiles;
                        let tile = |l: usize| {
                            legs[l]
                                .tile(tiles[l])
                                .map_err(|e| HandlerError::msg(format!("factor {f} block {b}: {e}")))
                        };
                        let (ta, tb) = (tile(0)?, tile(1)?);
                        let charge = &legs[0].sectors()[ta.sector].charge;
                        let s = geo
                            .sectors
                            .iter()
                            .position(|x| &x.charge == charge)
                            .ok_or_else(|| HandlerError::msg(format!("factor {f} block {b} fits no sector")))?;
                        if d.sectors[s].worker != me {
                            continue;
                        }
                        let t = diagonal_block(
                            &d.sectors[s].values,
                            ta.offset_in_sector,
                            tb.offset_in_sector,
                            &shape,
                            factor.dtype,
                        )?;
                        let p = store
                            .commit(Block(t))
                            .map_err(|e| HandlerError::from(e).context(format!("committing factor {f} block {b}")))?;
                        out.push((f as u32, b as u64, p.id()));
                        continue;
                    }
                };
                let Some((i, place)) = blk else { continue };
                let id = *d.sectors[sector]
                    .full
                    .get(i as usize)
                    .ok_or_else(|| HandlerError::msg(format!("sector {sector} has no full factor {i}")))?;
                let src = match cache.get(&id) {
                    Some(x) => x.clone(),
                    None => {
                        let x = load(store, id)?;
                        cache.insert(id, x.clone());
                        x
                    }
                };
                let t = cut_box(&src.0, &place, &shape)?;
                if t.dtype() != factor.dtype {
                    return Err(HandlerError::msg(format!(
                        "factor {f} is {}, its source is {}",
                        factor.dtype,
                        t.dtype()
                    )));
                }
                let p = store
                    .commit(Block(t))
                    .map_err(|e| HandlerError::from(e).context(format!("committing factor {f} block {b}")))?;
                out.push((f as u32, b as u64, p.id()));
            }
        }
    }
    let full: Vec<ObjectId> = mine.iter().flat_map(|&s| d.sectors[s].full.iter().copied()).collect();
    release(store, &full, "the full sector factors")?;
    Ok(out)
}
