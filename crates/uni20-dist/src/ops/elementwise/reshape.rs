//! The blocking rule of a distributed reshape ([`ReshapeRule`]), pure.
//!
//! A reshape keeps the row-major order of the elements. It may only fuse
//! adjacent modes into one or split one mode into adjacent modes: the old
//! and new shapes are cut into consecutive groups of equal products (at
//! every prefix product the two shapes share); within a group, after
//! ignoring modes of extent 1, either one old mode becomes several new
//! modes (a split), several old modes become one new mode (a fuse), or one
//! becomes one. A group with several modes on both sides (`[2, 3] -> [3,
//! 2]`) is refused ([`DistError::ReshapeNotAdjacent`]).
//!
//! Blocks must map to blocks, so:
//! - **fuse** `(m_0, m_1, .., m_k) -> n`: the inner modes `m_1..m_k` must
//!   each be one block; then the blocks of `n` are the blocks of `m_0`
//!   times `P = m_1 * .. * m_k`. Otherwise the input is first reblocked with
//!   the inner modes whole (and `m_0` as it was).
//! - **split** `m -> (n_0, n_1, .., n_k)`: every block extent of `m` must be
//!   a multiple of `P = n_1 * .. * n_k`; then the blocks of `n_0` are those
//!   extents divided by `P` and `n_1..n_k` are one block each. Otherwise the
//!   input is first reblocked with blocks of `P * max(1, e / P)` elements
//!   along `m` (`e`: its largest old block extent).
//! - modes of extent 1 are one block; a one-to-one group keeps its tiling.
//!
//! Each new block is then the reshape of exactly one old block, done by
//! its owner: no data moves after the optional reblock.

use crate::error::DistError;
use crate::layout::{block_extents, Blocking};
use uni20_dispatch::ElementwiseError;

/// One group of the reshape: old modes `old`, new modes `new`, and the
/// modes (old, new) whose blocks correspond (none for a group of ones).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Group {
    main: Option<(usize, usize)>,
}

/// How a reshape maps tilings: the input tiling it needs (equal to the
/// tensor's when no reblock is needed) and the output tiling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReshapeRule {
    /// The tiling the input must have.
    pub(crate) input: Blocking,
    /// The output tiling.
    pub(crate) output: Blocking,
    groups: Vec<Group>,
}

impl ReshapeRule {
    /// The rule for reshaping a tensor tiled by `from` to `to`.
    ///
    /// # Errors
    /// [`DistError::Elementwise`] (`ElementCount`) if the element counts
    /// differ; [`DistError::ReshapeNotAdjacent`] for a group that is
    /// neither a fuse nor a split; [`DistError::Blocking`] if the needed
    /// tilings have too many blocks.
    pub(crate) fn new(from: &Blocking, to: &[usize]) -> Result<ReshapeRule, DistError> {
        let old = from.shape();
        let count = |s: &[usize]| s.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
        let n = count(&old);
        if n != count(to) {
            return Err(ElementwiseError::ElementCount {
                from_len: n.unwrap_or(usize::MAX),
                from: old,
                to: to.to_vec(),
            }
            .into());
        }
        if n == Some(0) {
            // No elements: one (empty) block each side.
            return Ok(ReshapeRule {
                input: from.clone(),
                output: Blocking::regular(to, 1)?,
                groups: Vec::new(),
            });
        }
        let prefix = |s: &[usize]| -> Vec<usize> {
            let mut p = vec![1usize; s.len() + 1];
            for i in 0..s.len() {
                p[i + 1] = p[i] * s[i];
            }
            p
        };
        let (po, pn) = (prefix(&old), prefix(to));
        // Cuts: the first position of each prefix product (of an inner
        // position) that both shapes share.
        let mut cuts = vec![(0usize, 0usize)];
        for i in 1..old.len() {
            if po[i] == po[i - 1] && i > 1 {
                continue; // not the first position of this value
            }
            if let Some(j) = (1..to.len()).find(|&j| pn[j] == po[i]) {
                if cuts.last().is_some_and(|&(ci, cj)| i > ci && j > cj) {
                    cuts.push((i, j));
                }
            }
        }
        cuts.push((old.len(), to.len()));
        let mut input: Vec<Vec<usize>> = from.extents().to_vec();
        let mut output: Vec<Vec<usize>> = to.iter().map(|&d| vec![d]).collect();
        let mut groups = Vec::new();
        for w in cuts.windows(2) {
            let ((i0, j0), (i1, j1)) = (w[0], w[1]);
            let big_old: Vec<usize> = (i0..i1).filter(|&k| old[k] != 1).collect();
            let big_new: Vec<usize> = (j0..j1).filter(|&k| to[k] != 1).collect();
            if big_old.len() > 1 && big_new.len() > 1 {
                return Err(DistError::ReshapeNotAdjacent {
                    from: old.clone(),
                    to: to.to_vec(),
                    old_modes: (i0..i1).collect(),
                    new_modes: (j0..j1).collect(),
                });
            }
            let main = match (big_old.as_slice(), big_new.as_slice()) {
                ([], _) => None,
                (&[m], news) => {
                    // Split (or one-to-one): blocks of m must be multiples of P.
                    let p: usize = news[1..].iter().map(|&k| to[k]).product();
                    if input[m].iter().any(|e| e % p != 0) {
                        let e = input[m].iter().copied().max().unwrap_or(1);
                        input[m] = block_extents(old[m], p * (e / p).max(1));
                    }
                    output[news[0]] = input[m].iter().map(|e| e / p).collect();
                    Some((m, news[0]))
                }
                (olds, &[nn]) => {
                    // Fuse: the inner modes must be whole.
                    for &k in &olds[1..] {
                        input[k] = vec![old[k]];
                    }
                    let p: usize = olds[1..].iter().map(|&k| old[k]).product();
                    output[nn] = input[olds[0]].iter().map(|e| e * p).collect();
                    Some((olds[0], nn))
                }
                _ => None, // several old, several new: refused above
            };
            groups.push(Group { main });
        }
        Ok(ReshapeRule {
            input: Blocking::from_extents(&old, input)?,
            output: Blocking::from_extents(to, output)?,
            groups,
        })
    }

    /// Output block number of input block `b` (of [`ReshapeRule::input`]).
    pub(crate) fn out_block(&self, b: usize) -> usize {
        let m = self.input.multi(b);
        let mut n = vec![0usize; self.output.rank()];
        for g in &self.groups {
            if let Some((o, k)) = g.main {
                n[k] = m[o];
            }
        }
        self.output.linear(&n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(shape: &[usize], e: Vec<Vec<usize>>) -> Blocking {
        Blocking::from_extents(shape, e).unwrap()
    }

    #[test]
    fn fuse_with_whole_inner_modes_keeps_the_tiling() {
        let from = ext(&[4, 3, 2], vec![vec![2, 2], vec![3], vec![1, 1]]);
        let r = ReshapeRule::new(&from, &[12, 2]).unwrap();
        assert_eq!(r.input, from);
        assert_eq!(r.output.extents(), &[vec![6, 6], vec![1, 1]]);
        assert_eq!(r.out_block(3), 3);
    }

    #[test]
    fn fuse_of_blocked_inner_modes_reblocks_them_whole() {
        let from = Blocking::regular(&[4, 6], 2).unwrap();
        let r = ReshapeRule::new(&from, &[24]).unwrap();
        assert_eq!(r.input.extents(), &[vec![2, 2], vec![6]]);
        assert_eq!(r.output.extents(), &[vec![12, 12]]);
    }

    #[test]
    fn split_uses_multiples_of_the_inner_product() {
        let from = ext(&[12, 5], vec![vec![6, 6], vec![5]]);
        let r = ReshapeRule::new(&from, &[2, 2, 3, 5]).unwrap();
        assert_eq!(r.input, from);
        assert_eq!(r.output.extents(), &[vec![1, 1], vec![2], vec![3], vec![5]]);
        // Blocks of 4 along a mode split as (.., 3): reblocked to blocks of 3.
        let from = Blocking::regular(&[12], 4).unwrap();
        let r = ReshapeRule::new(&from, &[4, 3]).unwrap();
        assert_eq!(r.input.extents(), &[vec![3, 3, 3, 3]]);
        assert_eq!(r.output.extents(), &[vec![1, 1, 1, 1], vec![3]]);
        assert_eq!(r.out_block(2), 2);
    }

    #[test]
    fn ones_are_free_and_groups_follow_shared_prefix_products() {
        let from = Blocking::regular(&[2, 1, 3, 4], 2).unwrap();
        let r = ReshapeRule::new(&from, &[2, 3, 1, 4, 1]).unwrap();
        assert_eq!(r.input, from);
        assert_eq!(r.output.extents(), &[vec![2], vec![2, 1], vec![1], vec![2, 2], vec![1]]);
        let from = Blocking::regular(&[2, 1], 1).unwrap();
        assert!(ReshapeRule::new(&from, &[1, 2]).is_ok());
    }

    #[test]
    fn non_adjacent_and_wrong_counts_are_refused() {
        let from = Blocking::regular(&[2, 3], 1).unwrap();
        assert!(matches!(
            ReshapeRule::new(&from, &[3, 2]),
            Err(DistError::ReshapeNotAdjacent { .. })
        ));
        assert!(matches!(
            ReshapeRule::new(&from, &[7]),
            Err(DistError::Elementwise(ElementwiseError::ElementCount { .. }))
        ));
        let from = Blocking::regular(&[6, 4], 2).unwrap();
        assert!(matches!(
            ReshapeRule::new(&from, &[2, 12]),
            Err(DistError::ReshapeNotAdjacent { .. })
        ));
        let empty = Blocking::regular(&[0, 3], 2).unwrap();
        assert_eq!(ReshapeRule::new(&empty, &[3, 0]).unwrap().output.num_blocks(), 1);
    }
}
