//! The root side of an item-per-block command: a planned command
//! ([`ItemPlan`]: descriptor, participants, summary, output block of each
//! item), its participants ([`participants_of`]), its submission
//! ([`submit_items`]) and the one deferred planning loop every such family
//! uses ([`defer_items`]: wait for the inputs in program order, plan from
//! their manifests, submit, fill the output).

use std::collections::BTreeSet;

use uni20_persist::ObjectId;
use uni20_worker::{CommandSpec, Controller};

use super::deferred::{submit_filling, Input, OpJob, Output};
use crate::error::DistError;
use crate::summary::PlanSummary;
use crate::tensor::{collect_item_refs, DistTensor, Manifest, TensorMeta};
use crate::transfer::record::Transfer;

/// A planned item-per-block command: what is sent, to whom, the summary,
/// and the output block of each item. Built with [`ItemPlan::new`];
/// submitted by [`defer_items`].
#[derive(Clone, Debug)]
pub struct ItemPlan<D> {
    pub(crate) descriptor: D,
    pub(crate) participants: Vec<usize>,
    pub(crate) summary: PlanSummary,
    pub(crate) out_blocks: Vec<usize>,
    pub(crate) n_blocks: usize,
}

impl<D> ItemPlan<D> {
    /// The plan of `descriptor` for items on `item_ranks` computing output
    /// blocks `out_blocks` (of `n_blocks`) with `transfers`: participants
    /// from [`participants_of`], the summary of `operation` with
    /// `block_products` kernel calls.
    pub fn new(
        operation: &str,
        descriptor: D,
        item_ranks: &[usize],
        out_blocks: Vec<usize>,
        n_blocks: usize,
        block_products: usize,
        transfers: &[Transfer],
    ) -> ItemPlan<D> {
        let participants = participants_of(item_ranks.iter().copied(), transfers);
        let summary = PlanSummary::from_parts(
            operation,
            item_ranks.iter().copied(),
            block_products,
            transfers,
            &participants,
        );
        ItemPlan {
            descriptor,
            participants,
            summary,
            out_blocks,
            n_blocks,
        }
    }

    /// The descriptor every participant receives.
    pub fn descriptor(&self) -> &D {
        &self.descriptor
    }

    /// The ranks that receive the descriptor, ascending.
    pub fn participants(&self) -> &[usize] {
        &self.participants
    }

    /// The plan's summary, to add notes to before submission.
    pub fn summary_mut(&mut self) -> &mut PlanSummary {
        &mut self.summary
    }
}

/// The participants of a plan: the ranks of its items and both ends of
/// every transfer, sorted.
pub fn participants_of(item_ranks: impl IntoIterator<Item = usize>, transfers: &[Transfer]) -> Vec<usize> {
    let mut p: BTreeSet<usize> = item_ranks.into_iter().collect();
    p.extend(transfers.iter().flat_map(|t| [t.from, t.to]));
    p.into_iter().collect()
}

/// Submits an item-per-block command without waiting and fills the one
/// output from the `(item, object id)` replies.
pub(crate) fn submit_items<'c, C>(
    ctl: &Controller<'c>,
    plan: ItemPlan<C::Descriptor>,
    outputs: Vec<Output>,
    keep: Vec<DistTensor>,
) where
    C: CommandSpec<Reply = Vec<(usize, ObjectId)>> + 'c,
{
    let ItemPlan {
        descriptor,
        participants,
        summary,
        out_blocks,
        n_blocks,
    } = plan;
    submit_filling::<C>(
        ctl,
        &descriptor,
        &participants,
        outputs,
        keep,
        summary,
        move |replies| Ok(vec![collect_item_refs(replies, &out_blocks, n_blocks)?]),
    );
}

/// Queues an item-per-block command over `inputs` and returns its pending
/// output of `out`: once the inputs are ready (program order), `plan` gets
/// the compute ranks, the inputs' manifests (in input order) and the input
/// handles (for their plan summaries), and its plan is submitted with
/// `submit_items`. The inputs stay alive until the command completes.
///
/// Validation (universes, shapes, dtypes) is the caller's, before this
/// call: errors found here poison the output instead. `C`'s handler is
/// usually [`handle_items`](super::handle_items).
pub fn defer_items<'c, C>(
    ctl: &Controller<'c>,
    out: TensorMeta,
    inputs: &[&DistTensor],
    plan: impl FnOnce(&[usize], &[Manifest], &[DistTensor]) -> ItemPlan<C::Descriptor> + 'c,
) -> DistTensor
where
    C: CommandSpec<Reply = Vec<(usize, ObjectId)>> + 'c,
{
    defer_items_with::<C>(ctl, out, inputs, move |_, workers, manifests, keep| {
        plan(workers, manifests, keep)
    })
}

/// As [`defer_items`], with the controller passed to `plan` (for the plan
/// cache).
pub(crate) fn defer_items_with<'c, C>(
    ctl: &Controller<'c>,
    out: TensorMeta,
    inputs: &[&DistTensor],
    plan: impl FnOnce(&Controller<'c>, &[usize], &[Manifest], &[DistTensor]) -> ItemPlan<C::Descriptor> + 'c,
) -> DistTensor
where
    C: CommandSpec<Reply = Vec<(usize, ObjectId)>> + 'c,
{
    let (tensor, write) = DistTensor::pending(ctl, out);
    let output = Output {
        tensor: tensor.clone(),
        write,
    };
    let job = OpJob::new(
        inputs.iter().map(|t| Input::of(t)).collect(),
        vec![output],
        Box::new(move |ctl, manifests: Vec<Manifest>, outputs, keep| {
            let p = plan(ctl, &ctl.compute_ranks(), &manifests, &keep);
            submit_items::<C>(ctl, p, outputs, keep);
            Ok::<(), DistError>(())
        }),
    );
    ctl.defer(Box::new(job));
    tensor
}

#[cfg(test)]
mod tests {
    use super::*;
    use uni20_persist::ObjectId;

    #[test]
    fn participants_are_item_ranks_and_transfer_ends() {
        let t = Transfer {
            id: ObjectId::new(1, 7),
            from: 4,
            to: 2,
            bytes: 8,
        };
        assert_eq!(participants_of([3, 1, 3], std::slice::from_ref(&t)), vec![1, 2, 3, 4]);
        let p = ItemPlan::new("x", (), &[1, 1, 3], vec![0, 1, 2], 3, 5, &[t]);
        assert_eq!(p.participants, vec![1, 2, 3, 4]);
        assert_eq!(p.summary.work_items, 3);
        assert_eq!(p.summary.block_products, 5);
        assert_eq!(p.summary.bytes_moved, 8);
    }
}
