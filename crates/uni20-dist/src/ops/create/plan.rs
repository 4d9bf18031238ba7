//! The creation planner, pure: the descriptor and summary of a new tensor
//! whose blocks are owned by `owners` (every item computed by its owner;
//! nothing moves).

use super::command::{CreateDescV1, Recipe};
use crate::ops::kit::ItemPlan;
use crate::tensor::TensorMeta;

/// The plan creating a tensor described by `meta` holding `recipe`,
/// stored block `b` on rank `owners[b]`. Only stored blocks are made: for a
/// symmetric tensor, the charge-allowed ones.
pub(crate) fn plan_create(meta: &TensorMeta, recipe: Recipe, owners: Vec<usize>) -> ItemPlan<CreateDescV1> {
    let n = meta.stored_blocks();
    let tiles = match meta.layout() {
        Some(l) => l.blocks().iter().map(|b| b.tiles.clone()).collect(),
        None => Vec::new(),
    };
    let ranks = owners.clone();
    let mut plan = ItemPlan::new(
        "create",
        CreateDescV1 {
            recipe,
            dtype: meta.dtype,
            shape: meta.shape.clone(),
            blocking: meta.blocking.clone(),
            owners,
            tiles,
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
    use crate::layout::Blocking;
    use uni20_dispatch::DType;

    #[test]
    fn every_block_is_made_by_its_owner() {
        let blocking = Blocking::regular(&[5, 3], 2).unwrap();
        let meta = TensorMeta::dense(vec![5, 3], DType::F32, blocking);
        let p = plan_create(&meta, Recipe::Random { seed: 7 }, vec![1, 2, 1, 2, 1, 2]);
        assert_eq!(p.participants, vec![1, 2]);
        assert_eq!(p.out_blocks, (0..6).collect::<Vec<_>>());
        assert_eq!(p.n_blocks, 6);
        assert_eq!(p.summary.work_items, 6);
        assert_eq!(p.summary.per_rank[&1].items, 3);
        assert_eq!(p.summary.transfers, 0);
        assert_eq!(p.summary.notes, vec!["Random { seed: 7 }".to_string()]);
    }
}
