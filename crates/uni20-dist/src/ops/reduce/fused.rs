//! The `uni20.reduce_many.v1` command: several reductions in one command,
//! so one round trip between the root and the ranks instead of one each.
//! Each reduction is planned as alone (`plan`: its items on the same ranks);
//! the transfers of all of them are exchanged once (a block needed on a rank
//! by two reductions moves once); each rank combines its items' partials per
//! reduction and sends the leader (the lowest participant) one message with
//! all of its partials; the leader combines them per reduction in rank
//! order and replies the values.
//!
//! The values equal those of the reductions run one by one, bit for bit: a
//! rank's partial of a reduction is computed from the same items in the
//! same order, and the leader combines the ranks' partials in ascending
//! rank order either way (a rank taking part only for another reduction
//! contributes the identity, which a compensated sum or a maximum leaves
//! unchanged).

use serde::{Deserialize, Serialize};
use uni20_dispatch::C64;
use uni20_worker::transport::Tag;
use uni20_worker::{command, HandlerError, WorkerContext};

use super::command::{decode, encode, rank_partial, Combine, ReduceDescV1, ReduceItem, ReduceOp, TAG_PARTIAL};
use crate::ops::kit::participants_of;
use crate::transfer::exchange_blocks;
use crate::transfer::record::Transfer;

/// One reduction of a fused command: the reduction and its items.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FusedReduction {
    /// The reduction.
    pub(crate) op: ReduceOp,
    /// One item per stored block of its first operand.
    pub(crate) items: Vec<ReduceItem>,
}

/// The `uni20.reduce_many.v1` descriptor, identical on every participant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReduceManyDescV1 {
    /// The reductions, in the caller's order.
    pub(crate) reductions: Vec<FusedReduction>,
    /// Worker-to-worker block transfers of all the reductions, each
    /// (object, receiver) once (the `i`-th between one sender and one receiver uses the tags of `i`).
    pub(crate) transfers: Vec<Transfer>,
    /// Every participant, ascending; the first is the leader.
    pub(crate) participants: Vec<usize>,
    /// Whether the receivers keep what the transfers deliver, as replicas
    /// (see [`ReduceDescV1::hold_replicas`]).
    pub(crate) hold_replicas: bool,
}

impl ReduceManyDescV1 {
    /// Fuses separately planned reductions: their items as planned, their
    /// transfers without repeats, the union of their participants.
    pub(crate) fn fuse(plans: Vec<ReduceDescV1>) -> ReduceManyDescV1 {
        let mut seen = std::collections::BTreeSet::new();
        let mut transfers = Vec::new();
        let mut participants = std::collections::BTreeSet::new();
        let mut reductions = Vec::with_capacity(plans.len());
        for p in plans {
            for t in p.transfers {
                if seen.insert((t.id, t.to)) {
                    transfers.push(t);
                }
            }
            participants.extend(p.participants);
            reductions.push(FusedReduction {
                op: p.op,
                items: p.items,
            });
        }
        ReduceManyDescV1 {
            reductions,
            transfers,
            participants: participants.into_iter().collect(),
            hold_replicas: false,
        }
    }
}

impl ReduceManyDescV1 {
    /// The participants after transfers were taken out: the ranks of the
    /// items and of the remaining transfers, ascending.
    pub(crate) fn recompute_participants(&mut self) {
        let ranks = self.reductions.iter().flat_map(|r| r.items.iter().map(|i| i.rank));
        self.participants = participants_of(ranks, &self.transfers);
    }
}

command!(
    /// The command `uni20.reduce_many.v1`. Reply: the values of every
    /// reduction on the leader (norms as squared norms), `None` on every
    /// other participant.
    pub(crate) ReduceManyV1 = "uni20.reduce_many.v1", schema 2, ReduceManyDescV1 => Option<Vec<C64>>, handle_reduce_many
);

fn handle_reduce_many(ctx: &mut WorkerContext<'_>, d: ReduceManyDescV1) -> Result<Option<Vec<C64>>, HandlerError> {
    let me = ctx.rank();
    let store = ctx.store();
    let threads = ctx.threads().max(1);
    let replicas = exchange_blocks(ctx, &d.transfers)?;
    let mut mine = Vec::with_capacity(d.reductions.len());
    for (k, r) in d.reductions.iter().enumerate() {
        let items: Vec<(usize, &ReduceItem)> = r.items.iter().enumerate().filter(|(_, i)| i.rank == me).collect();
        mine.push(rank_partial(store, r.op, &items, threads).map_err(|e| e.context(format!("reduction {k}")))?);
    }
    if !d.hold_replicas {
        store
            .release_many(&replicas)
            .map_err(|e| HandlerError::from(e).context("dropping the replicas of this command"))?;
    }
    let leader = d.participants.first().copied().unwrap_or(me);
    if me != leader {
        let bytes: Vec<u8> = mine.iter().flat_map(|&v| encode(v)).collect();
        ctx.transport().exchange(&[(leader, TAG_PARTIAL, &bytes[..])], &[])?;
        return Ok(None);
    }
    let others: Vec<(usize, Tag)> = d
        .participants
        .iter()
        .filter(|&&r| r != me)
        .map(|&r| (r, TAG_PARTIAL))
        .collect();
    let received = ctx.transport().exchange(&[], &others)?;
    let mut totals: Vec<Combine> = d.reductions.iter().map(|r| Combine::new(r.op)).collect();
    for (t, &v) in totals.iter_mut().zip(&mine) {
        t.add(v);
    }
    for ((r, _), b) in others.iter().zip(&received) {
        if b.len() != 16 * totals.len() {
            return Err(HandlerError::msg(format!(
                "partial results from rank {r} have {} bytes, not {} ({} reductions)",
                b.len(),
                16 * totals.len(),
                totals.len()
            )));
        }
        for (t, chunk) in totals.iter_mut().zip(b.chunks_exact(16)) {
            t.add(decode(chunk, *r)?);
        }
    }
    Ok(Some(totals.iter().map(Combine::total).collect()))
}
