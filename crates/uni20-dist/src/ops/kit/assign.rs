//! Assignment of work items to ranks ([`Assigner`]): the compute rank
//! holding most of an item's input bytes, under a load cap, for every
//! family that plans one item per output block.

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

#[cfg(test)]
mod tests {
    use super::*;

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
