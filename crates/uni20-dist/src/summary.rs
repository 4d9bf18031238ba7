//! What a plan will do, in numbers: [`PlanSummary`] (work items, block
//! products, transfers, bytes moved, bytes through the root, per-rank
//! shares, notes such as reblocked operands). Every operation family fills
//! one from its plan; the output tensor keeps it for the user
//! ([`DistTensor::plan_summary`](crate::DistTensor::plan_summary)) and
//! `UNI20_LOG=debug` prints it.

use std::collections::BTreeMap;
use std::fmt;

use crate::transfer::record::Transfer;

/// One rank's share of a plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RankShare {
    /// Work items (output blocks) the rank computes.
    pub items: usize,
    /// Payload bytes the rank sends to other ranks.
    pub bytes_sent: u64,
    /// Payload bytes the rank receives from other ranks.
    pub bytes_received: u64,
    /// Multiply-adds of the items the rank computes (0 when the family does
    /// not count them).
    pub flops: u64,
}

/// The numbers of a distributed operation's plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanSummary {
    /// The operation, e.g. `contract`.
    pub operation: String,
    /// Work items (one per output block).
    pub work_items: usize,
    /// Block-level kernel calls (block products of a contraction: for a
    /// symmetric one, the nonzero block pairs, one per pair of
    /// charge-allowed blocks that meet on the contracted legs).
    pub block_products: usize,
    /// Multiply-adds of all work items (for a contraction the sum over block
    /// products of `m * n * k`); 0 when the family does not count them.
    pub flops: u64,
    /// Block transfers between ranks.
    pub transfers: usize,
    /// Payload bytes moved between ranks.
    pub bytes_moved: u64,
    /// Payload bytes sent to or from the root: zero whenever the root is not
    /// the only rank.
    pub bytes_through_root: u64,
    /// Ranks that receive the command.
    pub participants: Vec<usize>,
    /// Per rank: items, bytes sent, bytes received.
    pub per_rank: BTreeMap<usize, RankShare>,
    /// Extra facts worth showing (for example an operand that was reblocked).
    pub notes: Vec<String>,
    /// The plan was reused from the root's plan cache (re-bound to this
    /// operation's object ids) instead of planned again.
    pub cached: bool,
    /// Transfers not made because the receiving rank already held a
    /// replica of the block from an earlier command (replicas kept between
    /// commands); they are not counted in `transfers` and `bytes_moved`.
    pub replica_hits: usize,
    /// Payload bytes of those transfers.
    pub bytes_from_replicas: u64,
}

impl PlanSummary {
    /// A summary of `operation` with the transfer numbers filled in from
    /// `transfers`, the work items from `item_ranks` (the rank of each item)
    /// and the given participants and block products.
    pub(crate) fn from_parts(
        operation: &str,
        item_ranks: impl IntoIterator<Item = usize>,
        block_products: usize,
        transfers: &[Transfer],
        participants: &[usize],
    ) -> PlanSummary {
        let mut per_rank: BTreeMap<usize, RankShare> = BTreeMap::new();
        let mut work_items = 0;
        for r in item_ranks {
            per_rank.entry(r).or_default().items += 1;
            work_items += 1;
        }
        for t in transfers {
            per_rank.entry(t.from).or_default().bytes_sent += t.bytes;
            per_rank.entry(t.to).or_default().bytes_received += t.bytes;
        }
        PlanSummary {
            operation: operation.to_string(),
            work_items,
            block_products,
            flops: 0,
            transfers: transfers.len(),
            bytes_moved: transfers.iter().map(|t| t.bytes).sum(),
            bytes_through_root: transfers
                .iter()
                .filter(|t| t.from == 0 || t.to == 0)
                .map(|t| t.bytes)
                .sum(),
            participants: participants.to_vec(),
            per_rank,
            notes: Vec::new(),
            cached: false,
            replica_hits: 0,
            bytes_from_replicas: 0,
        }
    }

    /// Takes `skipped` (transfers of this plan whose receiver held a
    /// replica) out of the transfer numbers and counts them as replica
    /// hits; `participants` is the plan's new participant list.
    pub(crate) fn use_replicas(&mut self, skipped: &[Transfer], participants: &[usize]) {
        for t in skipped {
            self.transfers = self.transfers.saturating_sub(1);
            self.bytes_moved = self.bytes_moved.saturating_sub(t.bytes);
            if t.from == 0 || t.to == 0 {
                self.bytes_through_root = self.bytes_through_root.saturating_sub(t.bytes);
            }
            if let Some(r) = self.per_rank.get_mut(&t.from) {
                r.bytes_sent = r.bytes_sent.saturating_sub(t.bytes);
            }
            if let Some(r) = self.per_rank.get_mut(&t.to) {
                r.bytes_received = r.bytes_received.saturating_sub(t.bytes);
            }
            self.replica_hits += 1;
            self.bytes_from_replicas += t.bytes;
        }
        self.participants = participants.to_vec();
    }

    /// Sets the multiply-adds of the plan from `(rank, flops)` per work item
    /// (the total and each rank's share).
    pub(crate) fn set_flops(&mut self, items: impl IntoIterator<Item = (usize, u64)>) {
        self.flops = 0;
        for r in self.per_rank.values_mut() {
            r.flops = 0;
        }
        for (rank, f) in items {
            self.flops += f;
            self.per_rank.entry(rank).or_default().flops += f;
        }
    }
}

impl fmt::Display for PlanSummary {
    /// One line: `contract: 4 work items, 8 block products, 6 transfers,
    /// 1536 bytes moved, 0 bytes through the root`, then `, N multiply-adds`
    /// when the family counts them, then `; note` per note, then `; N
    /// blocks (B bytes) already held as replicas` when some were, then
    /// `; plan reused from the cache` when it was.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} work items, {} block products, {} transfers, {} bytes moved, {} bytes through the root",
            self.operation,
            self.work_items,
            self.block_products,
            self.transfers,
            self.bytes_moved,
            self.bytes_through_root
        )?;
        if self.flops > 0 {
            write!(f, ", {} multiply-adds", self.flops)?;
        }
        for n in &self.notes {
            write!(f, "; {n}")?;
        }
        if self.replica_hits > 0 {
            write!(
                f,
                "; {} blocks ({} bytes) already held as replicas",
                self.replica_hits, self.bytes_from_replicas
            )?;
        }
        if self.cached {
            write!(f, "; plan reused from the cache")?;
        }
        Ok(())
    }
}
