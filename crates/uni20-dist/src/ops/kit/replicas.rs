//! The root side of replicas kept between commands
//! (`docs/architecture.md`, "Replicas kept between commands"): before an
//! item-per-block command or a reduction is sent, the transfers whose receiver already
//! holds the block as a replica from an earlier command are taken out of
//! its plan, and the command is told to keep what it receives; once it is
//! sent, the root's table ([`uni20_worker::ledger::replicas`]) records
//! those replicas and evicts the least recently used beyond the per-rank
//! budget (`UNI20_REPLICA_BYTES`, [`set_replica_budget`]).

use uni20_worker::ledger::HeldBlock;
use uni20_worker::Controller;

use super::{participants_of, ItemWork};
use crate::summary::PlanSummary;
use crate::transfer::record::Transfer;

/// Takes out of `transfers` those whose receiver holds a replica of the
/// block (they count as used now). Returns the transfers taken out and
/// what the remaining transfers' receivers will hold, for
/// [`record_replicas`] once the command is sent; `None` (nothing changed,
/// the command must drop what it receives as before) in a one-rank
/// universe, with a budget of 0 or without transfers.
pub(crate) fn skip_held(
    ctl: &Controller<'_>,
    transfers: &mut Vec<Transfer>,
) -> Option<(Vec<Transfer>, Vec<HeldBlock>)> {
    let ledger = ctl.ledger();
    if ctl.size() == 1 || ledger.replica_budget() == 0 || transfers.is_empty() {
        return None;
    }
    let held = ledger.use_replicas(transfers.iter().map(|t| (t.id, t.to)));
    let mut skipped = Vec::new();
    if held.iter().any(|&h| h) {
        let mut k = 0;
        transfers.retain(|t| {
            let h = held[k];
            k += 1;
            if h {
                skipped.push(t.clone());
            }
            !h
        });
    }
    let received = transfers.iter().map(|t| (t.to, t.id, t.bytes)).collect();
    Some((skipped, received))
}

/// Takes out of `d`'s transfers those whose receiver holds a replica of
/// the block ([`skip_held`]), updates `participants` and `summary` to
/// match, and marks `d` to keep the replicas it delivers. Returns what the
/// command's receivers will hold, for [`record_replicas`] once it is sent;
/// `None` (nothing changed, replicas dropped after the command as before)
/// as for [`skip_held`], and for a family that cannot carry the switch
/// ([`ItemWork::hold_replicas_mut`]) or splits no transfers
/// ([`ItemWork::work_mut`]).
pub(crate) fn use_replicas<D: ItemWork>(
    ctl: &Controller<'_>,
    d: &mut D,
    participants: &mut Vec<usize>,
    summary: &mut PlanSummary,
) -> Option<Vec<HeldBlock>> {
    d.hold_replicas_mut()?;
    let (_, transfers) = d.work_mut()?;
    let (skipped, received) = skip_held(ctl, transfers)?;
    if !skipped.is_empty() {
        let (items, transfers) = d.work();
        let ranks = items.iter().enumerate().map(|(i, item)| D::place(i, item).0);
        *participants = participants_of(ranks, transfers);
        summary.use_replicas(&skipped, participants);
    }
    if let Some(keep) = d.hold_replicas_mut() {
        *keep = true;
    }
    Some(received)
}

/// Records, after the command is sent, the replicas its receivers keep
/// ([`use_replicas`]); the evictions it causes travel after the command.
pub(crate) fn record_replicas(ctl: &Controller<'_>, received: Option<Vec<HeldBlock>>) {
    if let Some(r) = received.filter(|r| !r.is_empty()) {
        let evicted = ctl.ledger().hold_replicas(&r);
        if evicted > 0 {
            tracing::debug!(evicted, "replicas evicted beyond the per-rank budget");
        }
    }
}

/// Payload bytes of the replicas each rank of `ctl`'s universe keeps
/// between commands (from `UNI20_REPLICA_BYTES` or
/// [`UniverseBuilder::replica_bytes`](uni20_worker::UniverseBuilder::replica_bytes),
/// default 256 MiB); 0: every command drops what it received.
pub fn replica_budget(ctl: &Controller<'_>) -> u64 {
    ctl.ledger().replica_budget()
}

/// Sets the per-rank replica budget of `ctl`'s universe from the next
/// command on: replicas beyond a smaller budget go, least recently used
/// first, when their rank next receives one. 0 keeps no new replica.
pub fn set_replica_budget(ctl: &Controller<'_>, bytes: u64) {
    ctl.ledger().set_replica_budget(bytes);
}
