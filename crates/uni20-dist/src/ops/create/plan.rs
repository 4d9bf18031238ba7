//! The creation planner, pure: the descriptor and summary of a new tensor
//! whose blocks are owned by `owners` (every item computed by its owner;
//! nothing moves).

use uni20_dispatch::DType;

use super::command::{CreateDescV1, Recipe};
use crate::layout::Blocking;
use crate::ops::kit::ItemPlan;

/// The plan creating a tensor of `shape`, `dtype` and `blocking` holding
/// `recipe`, block `b` on rank `owners[b]`.
pub(crate) fn plan_create(
    shape: &[usize],
    dtype: DType,
    blocking: Blocking,
    recipe: Recipe,
    owners: Vec<usize>,
) -> ItemPlan<CreateDescV1> {
    let n = blocking.num_blocks();
    let ranks = owners.clone();
    let mut plan = ItemPlan::new(
        "create",
        CreateDescV1 {
            recipe,
            dtype,
            shape: shape.to_vec(),
            blocking,
            owners,
        },
        &ranks,
        (0..n).collect(),
        n,
        0,
        &[],
    );
    plan.summary.notes.push(format!("{recipe:?}"));
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_block_is_made_by_its_owner() {
        let blocking = Blocking::regular(&[5, 3], 2).unwrap();
        let p = plan_create(
            &[5, 3],
            DType::F32,
            blocking,
            Recipe::Random { seed: 7 },
            vec![1, 2, 1, 2, 1, 2],
        );
        assert_eq!(p.participants, vec![1, 2]);
        assert_eq!(p.out_blocks, (0..6).collect::<Vec<_>>());
        assert_eq!(p.n_blocks, 6);
        assert_eq!(p.summary.work_items, 6);
        assert_eq!(p.summary.per_rank[&1].items, 3);
        assert_eq!(p.summary.transfers, 0);
        assert_eq!(p.summary.notes, vec!["Random { seed: 7 }".to_string()]);
    }
}
