//! Assignment of work items to ranks ([`Assigner`]): the compute rank
//! holding most of an item's input bytes, under a load cap, for every
//! family that plans one item per output block; [`CostAssigner`] caps each
//! rank's summed cost (flops) instead of its item count, for items whose
//! costs differ by orders of magnitude (sector GEMMs).

use std::collections::BTreeMap;

/// Chooses the rank of each work item: the compute rank holding most of
/// the item's input bytes among those below the load cap (`ceil(items /
/// ranks)`), ties to the less loaded, then the lower rank.
pub struct Assigner {
    workers: Vec<usize>,
    load: BTreeMap<usize, usize>,
    cap: usize,
}

impl Assigner {
    /// For `n_items` items over `workers` (not empty; callers check).
    pub fn new(workers: &[usize], n_items: usize) -> Assigner {
        Assigner {
            workers: workers.to_vec(),
            load: workers.iter().map(|&w| (w, 0)).collect(),
            cap: n_items.div_ceil(workers.len().max(1)).max(1),
        }
    }

    /// The rank for an item whose inputs lie on ranks as `(rank, bytes)`.
    pub fn pick(&mut self, local: impl IntoIterator<Item = (usize, u64)>) -> usize {
        let mut bytes: BTreeMap<usize, u64> = BTreeMap::new();
        for (r, b) in local {
            *bytes.entry(r).or_default() += b;
        }
        let rank = self
            .workers
            .iter()
            .copied()
            .filter(|w| self.load[w] < self.cap)
            .max_by_key(|w| {
                (
                    bytes.get(w).copied().unwrap_or(0),
                    std::cmp::Reverse(self.load[w]),
                    std::cmp::Reverse(*w),
                )
            })
            .unwrap_or(self.workers[0]);
        *self.load.entry(rank).or_default() += 1;
        rank
    }

    /// The owner itself when it is a compute rank (a block-wise item then
    /// moves nothing), otherwise as [`Assigner::pick`].
    pub fn keep(&mut self, owner: usize, bytes: u64) -> usize {
        if self.load.contains_key(&owner) {
            *self.load.entry(owner).or_default() += 1;
            owner
        } else {
            self.pick([(owner, bytes)])
        }
    }
}

/// Chooses the rank of each work item by cost: the compute rank holding
/// most of the item's input bytes among those whose summed cost stays
/// within the cap once the item is added, ties to the less loaded (by
/// cost), then the lower rank; when no rank has room, the least loaded.
///
/// The cap is `max(largest cost, total * 9 / (8 * ranks))`: the even share
/// plus an eighth of slack for locality. Visit the items in decreasing
/// cost (the caller sorts; [`CostAssigner::order`]): placing the largest
/// first is the longest-processing-time rule, so the small items fill the
/// gaps and no rank ends above the cap unless one item alone exceeds the
/// even share.
pub struct CostAssigner {
    workers: Vec<usize>,
    load: BTreeMap<usize, u64>,
    cap: u64,
}

impl CostAssigner {
    /// For items of `costs` over `workers` (not empty; callers check).
    pub fn new(workers: &[usize], costs: &[u64]) -> CostAssigner {
        let n = workers.len().max(1) as u128;
        let total: u128 = costs.iter().map(|&c| c as u128).sum();
        let share = (total * 9).div_ceil(8 * n);
        let cap = share.max(costs.iter().copied().max().unwrap_or(0) as u128).max(1);
        CostAssigner {
            workers: workers.to_vec(),
            load: workers.iter().map(|&w| (w, 0)).collect(),
            cap: u64::try_from(cap).unwrap_or(u64::MAX),
        }
    }

    /// Indices of `costs` in the order to place them: decreasing cost, ties
    /// by index.
    pub fn order(costs: &[u64]) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..costs.len()).collect();
        idx.sort_by_key(|&i| (std::cmp::Reverse(costs[i]), i));
        idx
    }

    /// The cap on each rank's summed cost.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// The rank for an item of `cost` whose inputs lie on ranks as
    /// `(rank, bytes)`.
    pub fn pick(&mut self, cost: u64, local: impl IntoIterator<Item = (usize, u64)>) -> usize {
        let mut bytes: BTreeMap<usize, u64> = BTreeMap::new();
        for (r, b) in local {
            *bytes.entry(r).or_default() += b;
        }
        let least = |load: &BTreeMap<usize, u64>, ws: &[usize]| {
            ws.iter()
                .copied()
                .min_by_key(|w| (load[w], *w))
                .unwrap_or(ws.first().copied().unwrap_or(0))
        };
        let rank = self
            .workers
            .iter()
            .copied()
            .filter(|w| self.load[w].saturating_add(cost) <= self.cap)
            .max_by_key(|w| {
                (
                    bytes.get(w).copied().unwrap_or(0),
                    std::cmp::Reverse(self.load[w]),
                    std::cmp::Reverse(*w),
                )
            })
            .unwrap_or_else(|| least(&self.load, &self.workers));
        let l = self.load.entry(rank).or_default();
        *l = l.saturating_add(cost);
        rank
    }

    /// Summed cost placed on each rank so far.
    pub fn loads(&self) -> &BTreeMap<usize, u64> {
        &self.load
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_assigner_balances_cost_not_count() {
        // One item of cost 90 and nine of cost 10 over two ranks, every input on rank 1:
        // by count rank 1 would get 5 items; by cost it keeps the big one, and the small
        // ones fill rank 2 up to the even share.
        let costs = [10, 10, 90, 10, 10, 10, 10, 10, 10, 10];
        let mut a = CostAssigner::new(&[1, 2], &costs);
        assert_eq!(a.cap(), (180u64 * 9).div_ceil(16));
        let mut ranks = vec![0; costs.len()];
        for i in CostAssigner::order(&costs) {
            ranks[i] = a.pick(costs[i], [(1, 100)]);
        }
        assert_eq!(ranks[2], 1, "the largest item stays with its inputs");
        let load = |r: usize| -> u64 { (0..costs.len()).filter(|&i| ranks[i] == r).map(|i| costs[i]).sum() };
        assert_eq!(load(1) + load(2), 180);
        assert!(load(1) <= a.cap() && load(2) <= a.cap(), "{ranks:?}");
        assert!(load(2) >= 180 - a.cap());
        assert_eq!(a.loads()[&1], load(1));
        // An item larger than the even share: the cap is that item.
        let mut b = CostAssigner::new(&[0, 1, 2], &[1000, 1, 1]);
        assert_eq!(b.cap(), 1000);
        assert_eq!(b.pick(1000, [(2, 8)]), 2);
        assert_eq!(b.pick(1, [(2, 8)]), 0, "rank 2 is full: the least loaded");
    }

    #[test]
    fn assigner_prefers_local_bytes_under_the_cap() {
        let mut a = Assigner::new(&[1, 2], 2);
        assert_eq!(a.pick([(2, 10), (1, 5)]), 2);
        // Rank 2 is at the cap: the next item goes to rank 1 whatever its bytes.
        assert_eq!(a.pick([(2, 10)]), 1);
        let mut k = Assigner::new(&[1, 2], 1);
        assert_eq!(k.keep(2, 8), 2);
        assert_eq!(k.keep(2, 8), 2);
        // A storage rank's block goes to a compute rank.
        assert_eq!(k.keep(3, 8), 1);
    }
}
