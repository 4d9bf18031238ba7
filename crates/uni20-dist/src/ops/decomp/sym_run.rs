//! The root's side of a symmetric decomposition, synchronous: wait for
//! the input's block map, assign the sector matrices to workers by cost,
//! submit `uni20.sym_factorize.v1`, turn a rejection into a typed error
//! (after dropping what the other sectors committed; the job goes on),
//! decide the kept count of each sector (for the SVD with
//! [`truncate_sectors`] over the sectors' singular values, the only data
//! that reaches the root), build the factors' layouts and submit
//! `uni20.sym_cut.v1`, then build the factor tensors with their plan
//! summary.

use uni20_dispatch::decomp::{DecompKind, EighOptions};
use uni20_worker::Controller;

use super::command::RejectionV1;
use super::sym_command::{
    CutSectorV1, FactorRoleV1, FactorV1, SectorFactoredV1, SymCutDescV1, SymCutV1, SymFactorReplyV1,
    SymFactorizeDescV1, SymFactorizeV1, SymKindV1,
};
use super::symmetric::{factor_layouts, factor_metas, plan_sectors, SectorPlacements, SymValidated};
use crate::error::DistError;
use crate::summary::PlanSummary;
use crate::symmetry::{truncate_sectors, Charge};
use crate::tensor::{BlockRef, DistTensor, Manifest};
use uni20_dispatch::decomp::SvdOptions as SvdTruncation;

/// A finished symmetric factorization as the root sees it.
pub(crate) struct SymFactorization {
    /// The factor tensors, ready, in the family's order.
    pub(crate) tensors: Vec<DistTensor>,
    /// Per sector matrix: its row charge, all its values and how many
    /// it keeps.
    pub(crate) sectors: Vec<(Charge, Vec<f64>, usize)>,
    /// SVD: discarded weight over all sectors.
    pub(crate) discarded_weight: f64,
    /// SVD: `max_rank` split the leading multiplet.
    pub(crate) degenerate_split: bool,
    /// The worker of the costliest sector matrix.
    pub(crate) factorizer: usize,
    /// The plan in numbers (also on every factor tensor).
    pub(crate) summary: PlanSummary,
}

/// The root's options of a symmetric decomposition.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SymRootOptions<'o> {
    /// SVD: the truncation, decided over all sectors.
    pub(crate) truncation: Option<&'o SvdTruncation>,
    /// SVD: also build the diagonal factor.
    pub(crate) s_diag: bool,
    /// Eigh: the Hermiticity tolerance, applied to the whole matrix.
    pub(crate) hermitian: Option<EighOptions>,
}

/// Runs a symmetric decomposition of `t` for the validated call `v`:
/// `kind` on the wire, with the root's decisions in `o`.
pub(crate) fn factorize_symmetric(
    ctl: &Controller<'_>,
    t: &DistTensor,
    v: &SymValidated,
    kind: SymKindV1,
    o: SymRootOptions<'_>,
) -> Result<SymFactorization, DistError> {
    let SymRootOptions {
        truncation,
        s_diag,
        hermitian,
    } = o;
    let m = t.manifest(ctl)?;
    let workers = ctl.compute_ranks();
    let g = &v.geometry;
    let memo_key = SectorPlacements::key(g, &workers);
    let fixed = memo_key
        .as_ref()
        .and_then(|k| ctl.with_root_state(|p: &mut SectorPlacements| p.get(k)));
    let a = plan_sectors(g, &m, &workers, fixed.as_deref())?;
    if let Some(k) = memo_key {
        ctl.with_root_state(|p: &mut SectorPlacements| p.put(k, a.workers.clone()));
    }
    let desc = SymFactorizeDescV1 {
        kind,
        layout: g.layout.clone(),
        dtype: m.dtype,
        blocks: m.blocks.clone(),
        rows: g.split.rows.clone(),
        cols: g.split.cols.clone(),
        workers: a.workers.clone(),
        sector_blocks: a.blocks.clone(),
        transfers: a.transfers.clone(),
    };
    tracing::debug!(
        target: "uni20_dist",
        op = %v.op,
        sectors = g.sectors.len(),
        fetched_blocks = a.transfers.len(),
        "symmetric decomposition planned"
    );
    let replies = ctl.submit_owned::<SymFactorizeV1>(desc, &a.participants)?;
    let mut got: Vec<Option<SectorFactoredV1>> = vec![None; g.sectors.len()];
    let mut rejected: Option<(usize, RejectionV1)> = None;
    for (rank, reply) in replies {
        match reply {
            SymFactorReplyV1::Factored(list) => {
                for f in list {
                    if a.workers.get(f.sector) != Some(&rank) || got[f.sector].is_some() {
                        return Err(DistError::Protocol(format!(
                            "rank {rank} reported sector {} it was not given",
                            f.sector
                        )));
                    }
                    let s = f.sector;
                    got[s] = Some(f);
                }
            }
            SymFactorReplyV1::Rejected { sector, rejection } => {
                // The first non-finite block in block order, else the lowest sector.
                let key = |s: usize, r: &RejectionV1| match r {
                    RejectionV1::NonFinite { block, .. } => (0, *block),
                    RejectionV1::NotHermitian { .. } => (1, s),
                };
                if rejected
                    .as_ref()
                    .is_none_or(|(s, r)| key(sector, &rejection) < key(*s, r))
                {
                    rejected = Some((sector, rejection));
                }
            }
        }
    }
    let cleanup = |got: &[Option<SectorFactoredV1>]| -> Result<(), DistError> {
        let sectors: Vec<CutSectorV1> = got
            .iter()
            .zip(&a.workers)
            .map(|(f, &w)| CutSectorV1 {
                worker: w,
                full: f.as_ref().map(|f| f.full.clone()).unwrap_or_default(),
                k: 0,
                values: Vec::new(),
            })
            .collect();
        let mut ranks: Vec<usize> = got
            .iter()
            .zip(&a.workers)
            .filter(|(f, _)| f.is_some())
            .map(|(_, &w)| w)
            .collect();
        ranks.sort_unstable();
        ranks.dedup();
        if !ranks.is_empty() {
            ctl.submit_owned::<SymCutV1>(
                SymCutDescV1 {
                    layout: g.layout.clone(),
                    rows: g.split.rows.clone(),
                    cols: g.split.cols.clone(),
                    factors: Vec::new(),
                    sectors,
                },
                &ranks,
            )?;
        }
        Ok(())
    };
    if let Some((sector, r)) = rejected {
        cleanup(&got)?;
        return Err(rejection(v, &m, sector, r));
    }
    let got: Vec<SectorFactoredV1> = got
        .into_iter()
        .enumerate()
        .map(|(s, f)| f.ok_or_else(|| DistError::Protocol(format!("no reply for sector matrix {s}"))))
        .collect::<Result<_, _>>()?;
    if let Some(h) = hermitian {
        // max |A - A^H| <= rtol * max |A| over the whole matrix, as the dense eigh.
        let rtol = h.rtol_for(m.dtype);
        let max_abs = got.iter().filter_map(|f| f.hermitian).fold(0.0f64, |a, x| a.max(x.3));
        let worst = got.iter().filter_map(|f| f.hermitian.map(|x| (f.sector, x))).fold(
            None,
            |w: Option<(usize, (f64, usize, usize, f64))>, c| match w {
                Some(b) if b.1 .0 >= c.1 .0 => Some(b),
                _ => Some(c),
            },
        );
        if let Some((sector, (deviation, row, col, _))) = worst.filter(|w| w.1 .0 > rtol * max_abs) {
            let opt: Vec<Option<SectorFactoredV1>> = got.into_iter().map(Some).collect();
            cleanup(&opt)?;
            return Err(rejection(
                v,
                &m,
                sector,
                RejectionV1::NotHermitian {
                    row,
                    col,
                    deviation,
                    max_abs,
                    tolerance: rtol,
                },
            ));
        }
    }
    for f in &got {
        for line in &f.attempts {
            tracing::debug!(target: "uni20_dist", op = %v.op, sector = f.sector, "backend attempt: {line}");
        }
    }
    let (kept, discarded_weight, degenerate_split) = match truncation {
        Some(tr) => {
            let values: Vec<Vec<f64>> = got.iter().map(|f| f.values.clone()).collect();
            match truncate_sectors(&values, tr, m.dtype) {
                Ok(cut) => (cut.kept, cut.discarded_weight, cut.degenerate_split),
                Err(e) => {
                    let opt: Vec<Option<SectorFactoredV1>> = got.into_iter().map(Some).collect();
                    cleanup(&opt)?;
                    return Err(e.into());
                }
            }
        }
        None => (got.iter().map(|f| f.k).collect(), 0.0, false),
    };
    let layouts = match factor_layouts(v, &kept, s_diag).and_then(|l| factor_metas(&l).map(|m| (l, m))) {
        Ok(l) => l,
        Err(e) => {
            let opt: Vec<Option<SectorFactoredV1>> = got.into_iter().map(Some).collect();
            cleanup(&opt)?;
            return Err(e);
        }
    };
    let (layouts, metas) = layouts;
    let roles = match v.op {
        DecompKind::Eigh => vec![FactorRoleV1::Left(0)],
        _ => vec![FactorRoleV1::Left(0), FactorRoleV1::Right(1), FactorRoleV1::Diagonal],
    };
    let factors: Vec<FactorV1> = layouts
        .iter()
        .zip(roles)
        .map(|((layout, dtype), role)| FactorV1 {
            layout: layout.clone(),
            dtype: *dtype,
            role,
        })
        .collect();
    let sectors: Vec<CutSectorV1> = got
        .iter()
        .zip(&a.workers)
        .zip(&kept)
        .map(|((f, &w), &k)| CutSectorV1 {
            worker: w,
            full: f.full.clone(),
            k: f.k,
            values: f.values.iter().copied().take(k).collect(),
        })
        .collect();
    let mut ranks = a.workers.clone();
    ranks.sort_unstable();
    ranks.dedup();
    let replies = ctl.submit_owned::<SymCutV1>(
        SymCutDescV1 {
            layout: g.layout.clone(),
            rows: g.split.rows.clone(),
            cols: g.split.cols.clone(),
            factors,
            sectors,
        },
        &ranks,
    )?;
    let mut maps: Vec<Vec<Option<BlockRef>>> = metas.iter().map(|mt| vec![None; mt.stored_blocks()]).collect();
    for (rank, list) in replies {
        for (f, b, id) in list {
            let slot = maps
                .get_mut(f as usize)
                .and_then(|m| m.get_mut(b as usize))
                .ok_or_else(|| DistError::Protocol(format!("rank {rank} reported factor {f} block {b}")))?;
            if slot.replace(BlockRef { owner: rank, id }).is_some() {
                return Err(DistError::Protocol(format!("factor {f} block {b} reported twice")));
            }
        }
    }
    let costliest = (0..g.sectors.len())
        .max_by_key(|&s| (g.sectors[s].cost(), std::cmp::Reverse(s)))
        .map_or(workers[0], |s| a.workers[s]);
    let mut summary = PlanSummary::from_parts(v.op.name(), a.workers.iter().copied(), 0, &a.transfers, &a.participants);
    let big = g.sectors.iter().max_by_key(|s| s.cost());
    summary.notes.push(format!(
        "{} sector matrices (largest {}x{}) of a {} tensor, factorized on ranks {:?}; {} blocks = {} bytes fetched worker to worker",
        g.sectors.len(),
        big.map_or(0, |s| s.m),
        big.map_or(0, |s| s.n),
        m.dtype,
        ranks,
        a.transfers.len(),
        a.transfers.iter().map(|t| t.bytes).sum::<u64>()
    ));
    summary.notes.push(format!(
        "kept per sector {kept:?}; the factor blocks stay on their sector's rank"
    ));
    tracing::debug!(target: "uni20_dist", "{summary}");
    let mut tensors = Vec::with_capacity(metas.len());
    for (f, (meta, map)) in metas.iter().zip(maps).enumerate() {
        let map = map
            .into_iter()
            .enumerate()
            .map(|(b, r)| r.ok_or_else(|| DistError::Protocol(format!("no rank committed factor {f} block {b}"))))
            .collect::<Result<Vec<_>, _>>()?;
        let t = DistTensor::from_manifest(ctl, Manifest::new(meta, map))?;
        t.set_plan_summary(summary.clone());
        tensors.push(t);
    }
    let sectors = g
        .sectors
        .iter()
        .zip(got)
        .zip(&kept)
        .map(|((s, f), &k)| (s.charge.clone(), f.values, k))
        .collect();
    Ok(SymFactorization {
        tensors,
        sectors,
        discarded_weight,
        degenerate_split,
        factorizer: costliest,
        summary,
    })
}

/// The typed error of an input refused in sector `sector`.
fn rejection(v: &SymValidated, m: &Manifest, sector: usize, r: RejectionV1) -> DistError {
    if let Some(e) = r.non_finite_error(v.op, m) {
        return e;
    }
    match r {
        RejectionV1::NonFinite { .. } => DistError::Protocol("a non-finite rejection without its error".into()),
        RejectionV1::NotHermitian {
            row,
            col,
            deviation,
            max_abs,
            tolerance,
        } => {
            let (row, row_index) = v.geometry.dense_index(sector, row, false);
            let (col, col_index) = v.geometry.dense_index(sector, col, true);
            DistError::NotHermitian {
                row,
                col,
                row_index,
                col_index,
                deviation,
                max_abs,
                tolerance,
            }
        }
    }
}
