//! The root side of an item-per-block command: a planned command
//! ([`ItemPlan`]: descriptor, participants, summary, output block of each
//! item), its participants ([`participants_of`]), its submission
//! ([`submit_items`]) and the one deferred planning loop every such family
//! uses ([`defer_items`]: wait for the inputs in program order, plan from
//! their manifests, submit, fill the output).

use std::collections::BTreeSet;

use uni20_persist::ObjectId;
use uni20_worker::{CommandSpec, Controller};

use super::deferred::{submit_filling_with, submit_pipelined, Input, OpJob, Output, Sending};
use super::worker::{ItemWork, NamedOutputs};
use crate::error::DistError;
use crate::summary::PlanSummary;
use crate::tensor::{collect_item_refs, BlockRef, DistTensor, Manifest, TensorMeta};
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

    /// The whole plan's descriptor. Families whose descriptor gives its
    /// work lists ([`ItemWork::work_mut`]) send each participant only its
    /// share of it ([`ItemPlan::shares`]); others send it whole.
    pub fn descriptor(&self) -> &D {
        &self.descriptor
    }

    /// The ranks that receive the descriptor (or their share), ascending.
    pub fn participants(&self) -> &[usize] {
        &self.participants
    }

    /// The plan's summary, to add notes to before submission.
    pub fn summary_mut(&mut self) -> &mut PlanSummary {
        &mut self.summary
    }
}

impl<D: ItemWork + Clone> ItemPlan<D> {
    /// The plan split per participant, as it is submitted: for each
    /// participant (ascending) a copy of the descriptor holding only the
    /// items it computes and the transfers it sends or receives, both in
    /// plan order, and the plan's index of each of its items. `None` when
    /// the family's descriptor is sent whole ([`ItemWork::work_mut`] gives
    /// `None`), the plan has one participant (its share would be the whole
    /// plan) or an item or transfer names a rank outside the participants.
    pub fn shares(&self) -> Option<Shares<D>> {
        split_shares(self.descriptor.clone(), &self.participants).ok()
    }
}

/// A plan split per rank ([`ItemPlan::shares`]).
#[derive(Clone, Debug)]
pub struct Shares<D> {
    /// `(rank, descriptor share)` per participant, ascending by rank.
    pub shares: Vec<(usize, D)>,
    /// Per participant (same order), the plan's item index of each item of
    /// its share: a reply's item `i` of rank `shares[k].0` is the plan's
    /// item `items[k][i]`.
    pub items: Vec<Vec<usize>>,
}

/// Splits `d` per participant (see [`ItemPlan::shares`]); gives `d` back
/// unchanged when it cannot be split.
pub(crate) fn split_shares<D: ItemWork + Clone>(mut d: D, participants: &[usize]) -> Result<Shares<D>, D> {
    const NONE: usize = usize::MAX;
    // One participant: its share is the whole plan, sent as it is (no copy
    // of the descriptor, no index map for its reply).
    if participants.len() < 2 {
        return Err(d);
    }
    let Some(&max) = participants.iter().max() else {
        return Err(d);
    };
    let mut slot = vec![NONE; max + 1];
    for (k, &r) in participants.iter().enumerate() {
        if slot[r] != NONE {
            return Err(d);
        }
        slot[r] = k;
    }
    let slot_of = |r: usize| slot.get(r).copied().filter(|&k| k != NONE);
    let fits = {
        let (items, transfers) = d.work();
        items
            .iter()
            .enumerate()
            .all(|(idx, item)| slot_of(D::place(idx, item).0).is_some())
            && transfers
                .iter()
                .all(|t| slot_of(t.from).is_some() && slot_of(t.to).is_some())
    };
    let (items, transfers) = match (fits, d.work_mut()) {
        (true, Some((items, transfers))) => (std::mem::take(items), std::mem::take(transfers)),
        _ => return Err(d),
    };
    let n = participants.len();
    let mut share_items: Vec<Vec<D::Item>> = (0..n).map(|_| Vec::new()).collect();
    let mut indices: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (idx, item) in items.into_iter().enumerate() {
        let k = slot[D::place(idx, &item).0];
        share_items[k].push(item);
        indices[k].push(idx);
    }
    let mut share_transfers: Vec<Vec<Transfer>> = vec![Vec::new(); n];
    for t in transfers {
        let (a, b) = (slot[t.from], slot[t.to]);
        if a != b {
            share_transfers[a].push(t.clone());
        }
        share_transfers[b].push(t);
    }
    let shares = participants
        .iter()
        .zip(share_items.into_iter().zip(share_transfers))
        .map(|(&r, (items, transfers))| {
            let mut share = d.clone();
            if let Some((i, t)) = share.work_mut() {
                *i = items;
                *t = transfers;
            }
            if let Some(names) = share.out_names_mut() {
                names.retain(|n| n.rank == r);
            }
            (r, share)
        })
        .collect();
    Ok(Shares { shares, items: indices })
}

/// The participants of a plan: the ranks of its items and both ends of
/// every transfer, sorted.
pub fn participants_of(item_ranks: impl IntoIterator<Item = usize>, transfers: &[Transfer]) -> Vec<usize> {
    let mut p: BTreeSet<usize> = item_ranks.into_iter().collect();
    p.extend(transfers.iter().flat_map(|t| [t.from, t.to]));
    p.into_iter().collect()
}

/// Turns a command's replies into its outputs' block maps.
type Collect<'c, R> = Box<dyn FnOnce(Vec<(usize, R)>) -> Result<Vec<Vec<BlockRef>>, DistError> + 'c>;

/// Submits an item-per-block command without waiting and fills the one
/// output from the `(item, object id)` replies, or at submission when the
/// outputs are named (pipelined submission, [`pipelining`]). The plan is split per rank
/// when the family allows it ([`ItemWork::work_mut`]): each participant
/// receives its own items and transfers, and the item indices of its reply
/// are mapped back to the plan's.
pub(crate) fn submit_items<'c, C>(
    ctl: &Controller<'c>,
    plan: ItemPlan<C::Descriptor>,
    outputs: Vec<Output>,
    keep: Vec<DistTensor>,
) where
    C: CommandSpec<Reply = Vec<(usize, ObjectId)>> + 'c,
    C::Descriptor: ItemWork + Clone,
{
    let ItemPlan {
        mut descriptor,
        mut participants,
        mut summary,
        out_blocks,
        n_blocks,
    } = plan;
    let held = super::replicas::use_replicas(ctl, &mut descriptor, &mut participants, &mut summary);
    ctl.note_transfers(summary.bytes_moved, summary.bytes_from_replicas);
    let early = name_outputs(ctl, &mut descriptor, n_blocks);
    // Named outputs: the output's block map is written at submission.
    let submit = move |sending: Sending<'_, C::Descriptor>, collect: Collect<'c, C::Reply>| match early {
        Some(blocks) => submit_pipelined::<C>(ctl, sending, outputs, keep, summary, blocks, collect),
        None => submit_filling_with::<C>(ctl, sending, outputs, keep, summary, collect),
    };
    match split_shares(descriptor, &participants) {
        Ok(Shares { shares, items }) => submit(
            Sending::Each(shares),
            Box::new(move |replies| {
                let replies = to_plan_items(replies, &participants, &items);
                Ok(vec![collect_item_refs(replies, &out_blocks, n_blocks)?])
            }),
        ),
        Err(descriptor) => submit(
            Sending::WholeOwned(descriptor, &participants),
            Box::new(move |replies| Ok(vec![collect_item_refs(replies, &out_blocks, n_blocks)?])),
        ),
    }
    // After the command is sent: an eviction's release travels after it.
    super::replicas::record_replicas(ctl, held);
}

/// Whether this universe names outputs at submission (pipelined
/// submission, on by default): a dependent item-per-block operation is
/// then planned and sent without waiting for its inputs' replies. The
/// default comes from `UNI20_PIPELINE` (`0` turns it off: every dependent
/// operation waits for its inputs' replies, as before 2026-12-05);
/// [`set_pipelining`] changes it for the universe of `ctl`.
pub fn pipelining(ctl: &Controller<'_>) -> bool {
    ctl.with_root_state(|s: &mut PipelineSwitch| *s.on.get_or_insert_with(pipelining_default))
}

/// Turns pipelined submission on or off for the universe of `ctl` from
/// the next operation planned on; operations already submitted are not
/// affected (see [`pipelining`]).
pub fn set_pipelining(ctl: &Controller<'_>, on: bool) {
    ctl.with_root_state(|s: &mut PipelineSwitch| s.on = Some(on));
}

/// `UNI20_PIPELINE`, read once per process: anything but `0` (or unset) is on.
fn pipelining_default() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("UNI20_PIPELINE").map_or(true, |v| v.trim() != "0"))
}

/// The universe's pipelining switch (root state).
#[derive(Default)]
struct PipelineSwitch {
    on: Option<bool>,
}

/// The sequence numbers of output IDs named by the root (root state of
/// the universe): the next one to give.
#[derive(Default)]
struct NameCounter {
    next: u64,
}

/// Names the outputs of `d` before submission when pipelining is on and
/// the family carries names ([`ItemWork::out_names_mut`]), writes the
/// names into the descriptor and returns the output block map they give.
/// A name is `ObjectId::with_nonce(owner, universe id, seq)`, `seq` from
/// the universe's counter: the universe's identity is random and never a
/// store's nonce, so the names never collide with IDs a store issues
/// ([`uni20_persist::Store::commit_as`]) nor with another universe's.
/// `None`: the outputs are known only from the replies (pipelining off, a
/// one-rank universe, where the root runs every command at once, a family
/// without names, or items that do not cover every output block exactly
/// once).
fn name_outputs<D: ItemWork>(ctl: &Controller<'_>, d: &mut D, n_blocks: usize) -> Option<Vec<BlockRef>> {
    if ctl.size() == 1 || d.out_names_mut().is_none() || !pipelining(ctl) {
        return None;
    }
    let mut counts: std::collections::BTreeMap<usize, usize> = std::collections::BTreeMap::new();
    let mut slots: Vec<Option<(usize, usize)>> = vec![None; n_blocks];
    for (idx, item) in d.work().0.iter().enumerate() {
        let (rank, block) = D::place(idx, item);
        let k = counts.entry(rank).or_insert(0);
        match slots.get_mut(block) {
            Some(slot @ None) => *slot = Some((rank, *k)),
            _ => return None,
        }
        *k += 1;
    }
    if slots.iter().any(Option::is_none) {
        return None;
    }
    let nonce = ctl.universe_id();
    let names: Vec<NamedOutputs> = ctl.with_root_state(|c: &mut NameCounter| {
        counts
            .iter()
            .map(|(&rank, &n)| {
                let first = c.next;
                c.next += n as u64;
                NamedOutputs { rank, nonce, first }
            })
            .collect()
    });
    let blocks = slots
        .into_iter()
        .flatten()
        .map(|(rank, k)| {
            let n = names[names.partition_point(|n| n.rank < rank)];
            BlockRef {
                owner: rank,
                id: n.id(k),
            }
        })
        .collect();
    if let Some(slot) = d.out_names_mut() {
        *slot = names;
    }
    Some(blocks)
}

/// The replies of a split plan with the plan's item indices: rank
/// `participants[k]`'s item `i` is the plan's item `items[k][i]`. An index
/// outside its share (or a rank outside the participants) becomes
/// `usize::MAX`, which [`collect_item_refs`] reports as a protocol error.
fn to_plan_items(
    replies: Vec<(usize, Vec<(usize, ObjectId)>)>,
    participants: &[usize],
    items: &[Vec<usize>],
) -> Vec<(usize, Vec<(usize, ObjectId)>)> {
    let slot: std::collections::HashMap<usize, usize> = participants.iter().enumerate().map(|(k, &r)| (r, k)).collect();
    replies
        .into_iter()
        .map(|(rank, ids)| {
            let share = slot
                .get(&rank)
                .and_then(|&k| items.get(k))
                .map_or(&[][..], Vec::as_slice);
            let ids = ids
                .into_iter()
                .map(|(i, id)| (share.get(i).copied().unwrap_or(usize::MAX), id))
                .collect();
            (rank, ids)
        })
        .collect()
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
    C::Descriptor: ItemWork + Clone,
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
    C::Descriptor: ItemWork + Clone,
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

    use crate::ops::contract::ContractDescriptorV1;
    use crate::ops::kit::Rebind;
    use crate::tensor::test_manifest;
    use crate::transfer::pair_positions;
    use uni20_dispatch::DType;

    /// A simulated matrix product over `workers`: A (12 x 8, blocks 2 x 4)
    /// block-cyclic over the workers, B (8 x 12, blocks 4 x 3) owned by
    /// the workers in reverse order, so items need transfers both ways.
    fn simulated(workers: &[usize]) -> ItemPlan<ContractDescriptorV1> {
        let w = workers.to_vec();
        let a = test_manifest(&[12, 8], vec![vec![2; 6], vec![4; 2]], DType::F64, 1, |b| {
            w[b % w.len()]
        });
        let w = workers.to_vec();
        let b = test_manifest(&[8, 12], vec![vec![4; 2], vec![3; 4]], DType::F64, 2, |b| {
            w[w.len() - 1 - b % w.len()]
        });
        let p = crate::ops::contract::plan_contract(workers, "ij,jk->ik", &[&a, &b], &Default::default()).unwrap();
        p.into_items(24)
    }

    /// Each rank's share holds exactly the items it computes and the
    /// transfers it sends or receives, both in plan order, with everything
    /// else of the descriptor unchanged; the indices map back to the plan's
    /// items; both ends of every transfer number it alike (its tags).
    fn check_shares(plan: &ItemPlan<ContractDescriptorV1>) {
        let whole = &plan.descriptor;
        let split = plan.shares().expect("a contraction plan splits");
        let ranks: Vec<usize> = split.shares.iter().map(|(r, _)| *r).collect();
        assert_eq!(ranks, plan.participants);
        assert!(!whole.transfers.is_empty(), "the test plan moves blocks");
        let mut seen_items = 0;
        for ((r, share), idx) in split.shares.iter().zip(&split.items) {
            let want: Vec<usize> = (0..whole.items.len()).filter(|&i| whole.items[i].rank == *r).collect();
            assert_eq!(idx, &want, "rank {r}'s items");
            let items: Vec<_> = want.iter().map(|&i| whole.items[i].clone()).collect();
            assert_eq!(share.items, items);
            let transfers: Vec<_> = whole
                .transfers
                .iter()
                .filter(|t| t.from == *r || t.to == *r)
                .cloned()
                .collect();
            assert_eq!(share.transfers, transfers, "rank {r}'s transfers");
            let mut shell = whole.clone();
            shell.items = share.items.clone();
            shell.transfers = share.transfers.clone();
            assert_eq!(&shell, share);
            // What the handler does with the share is what it did with the plan.
            for sending in [true, false] {
                let from_whole: Vec<_> = pair_positions(&whole.transfers, *r, sending)
                    .into_iter()
                    .flatten()
                    .collect();
                let from_share: Vec<_> = pair_positions(&share.transfers, *r, sending)
                    .into_iter()
                    .flatten()
                    .collect();
                assert_eq!(from_share, from_whole, "rank {r}'s transfer tags");
            }
            seen_items += idx.len();
        }
        assert_eq!(seen_items, whole.items.len());
        // The sender's and the receiver's numbering of each transfer agree.
        for t in &whole.transfers {
            let position = |r: usize, sending: bool| {
                let (_, share) = split.shares.iter().find(|(q, _)| *q == r).unwrap();
                let k = share.transfers.iter().position(|u| u == t).unwrap();
                pair_positions(&share.transfers, r, sending)[k]
            };
            assert_eq!(position(t.from, true), position(t.to, false));
            assert!(position(t.from, true).is_some());
        }
    }

    #[test]
    fn a_split_plan_gives_each_rank_its_items_and_transfers() {
        check_shares(&simulated(&[1, 2, 3, 4]));
        check_shares(&simulated(&[1, 2, 3, 4, 5, 6, 7]));
        // One worker: its share would be the whole plan, so the plan is
        // sent as it is, unsplit.
        let one = simulated(&[1]);
        assert!(one.shares().is_none());
        assert_eq!(
            split_shares(one.descriptor.clone(), &one.participants).unwrap_err(),
            one.descriptor
        );
    }

    #[test]
    fn a_rebound_plan_splits_with_its_new_ids() {
        let mut plan = simulated(&[1, 2, 3]);
        plan.descriptor
            .ids_mut(&mut |id| *id = ObjectId::new(id.origin + 10, id.seq + 100));
        check_shares(&plan);
        let split = plan.shares().unwrap();
        let mut ids = Vec::new();
        for (_, s) in &split.shares {
            let mut s = s.clone();
            s.ids_mut(&mut |id| ids.push(*id));
        }
        assert!(
            !ids.is_empty() && ids.iter().all(|id| id.origin > 10 && id.seq >= 100),
            "{ids:?}"
        );
    }

    #[test]
    fn replies_of_a_share_map_back_to_the_plans_items() {
        let id = |n| ObjectId::new(1, n);
        let items = vec![vec![0, 3], vec![1, 2]];
        let replies = vec![(2, vec![(0, id(5)), (1, id(6))]), (5, vec![(1, id(7)), (0, id(8))])];
        assert_eq!(
            to_plan_items(replies, &[2, 5], &items),
            vec![(2, vec![(0, id(5)), (3, id(6))]), (5, vec![(2, id(7)), (1, id(8))])]
        );
        // An index outside the share, or a rank that had none.
        let bad = to_plan_items(vec![(2, vec![(2, id(1))]), (4, vec![(0, id(2))])], &[2, 5], &items);
        assert_eq!(
            bad,
            vec![(2, vec![(usize::MAX, id(1))]), (4, vec![(usize::MAX, id(2))])]
        );
        assert!(collect_item_refs(bad, &[0, 1, 2, 3], 4).is_err());
    }

    #[test]
    fn a_plan_naming_a_rank_outside_its_participants_is_sent_whole() {
        let mut plan = simulated(&[1, 2]);
        plan.participants = vec![1];
        assert!(plan.shares().is_none());
        let whole = plan.descriptor.clone();
        assert_eq!(split_shares(whole.clone(), &plan.participants).unwrap_err(), whole);
    }
}
