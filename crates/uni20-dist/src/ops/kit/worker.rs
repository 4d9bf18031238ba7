//! The worker side of an item-per-block command: [`ItemWork`] (what a
//! family supplies: its items, its transfers, one item's output block) and
//! the one generic handler [`handle_items`], which exchanges the blocks
//! worker to worker, computes the items of this rank (in parallel with
//! `uni20_dispatch::par::map_largest_first`, the rank's thread and rayon helpers,
//! when it has several items, several threads and enough work), commits
//! them in item order, replies `(item index, object id)` per committed
//! block and releases the replicas the command received.

use uni20_dispatch::par::map_largest_first;
use uni20_dispatch::LocalTensor;
use uni20_persist::ObjectId;
use uni20_worker::{HandlerError, KernelContext, WorkerContext};

use crate::tensor::Block;
use crate::transfer::{exchange_blocks, Transfer};

/// The descriptor of a command whose work is a list of items, one output
/// block each. A family implements it on its descriptor and registers
/// [`handle_items::<Desc>`](handle_items) as the handler:
/// `command!(pub AbsV1 = "example.abs.v1", schema 1, AbsDescV1 => Vec<(usize, ObjectId)>, handle_items::<AbsDescV1>);`.
pub trait ItemWork: Sync {
    /// One item (one output block).
    type Item: Sync;
    /// The operation, for diagnostics and logs (`"reblock"`).
    const OPERATION: &'static str;
    /// Every item of the command, in item order (the reply's indices),
    /// and the worker-to-worker transfers they need (the `i`-th transfer
    /// between one sender and one receiver uses the tags of `i`).
    fn work(&self) -> (&[Self::Item], &[Transfer]);
    /// Rank that computes and owns item `idx`, and its output block number.
    fn place(idx: usize, item: &Self::Item) -> (usize, usize);
    /// Computes the output block of item `idx` on this rank: its inputs are
    /// in the store (owned, or replicas received by the exchange). Items of
    /// one command may be computed at the same time on the rank's thread
    /// pool; `ctx.threads()` is this item's share of the rank's budget
    /// (1 when the items run in parallel), the bound to pass to kernels
    /// that take a thread count.
    ///
    /// # Errors
    /// A [`HandlerError`] (the handler adds the item and its block).
    fn compute(&self, ctx: &KernelContext<'_>, idx: usize, item: &Self::Item) -> Result<LocalTensor, HandlerError>;

    /// Estimated work of `item` (multiply-adds plus elements written), for
    /// the choice between running this rank's items in parallel and one
    /// after the other; `None` (the default): unknown, run in parallel when
    /// there are several items and threads.
    fn cost(&self, item: &Self::Item) -> Option<u64> {
        let _ = item;
        None
    }

    /// Elements of the item's output block, when known: bounds the bytes
    /// of the outputs a rank holds before their commits when its items run
    /// in parallel. `None` (the default): unknown, so chunks stay short.
    fn out_elements(&self, item: &Self::Item) -> Option<u64> {
        let _ = item;
        None
    }

    /// The descriptor's item list and transfer list, for the root to split
    /// the plan into per-rank shares at submission: each participant then
    /// receives a copy of the descriptor holding only the items it computes
    /// (in item order) and the transfers it sends or receives (in transfer
    /// order), and the root maps its reply's item indices back. A family
    /// returns them only when its `place` and `compute` do not depend on
    /// the item's index (the share renumbers items from 0) and every other
    /// field is the same for every rank. `None` (the default): every
    /// participant receives the whole descriptor.
    fn work_mut(&mut self) -> Option<(&mut Vec<Self::Item>, &mut Vec<Transfer>)> {
        None
    }

    /// The object IDs the root named for this command's outputs before
    /// submitting it (pipelined submission, [`NamedOutputs`]); empty: each
    /// rank's store issues fresh IDs (the default).
    fn out_names(&self) -> &[NamedOutputs] {
        &[]
    }

    /// The descriptor's list of named outputs, for the root to fill at
    /// submission; `None` (the default): the family cannot carry names,
    /// and its outputs are known only from the replies.
    fn out_names_mut(&mut self) -> Option<&mut Vec<NamedOutputs>> {
        None
    }

    /// Whether each rank keeps the replicas this command's transfers
    /// deliver after the command, for the root to release later (replicas
    /// kept between commands, `docs/architecture.md`); `false` (the
    /// default): [`handle_items`] drops them before it replies.
    fn hold_replicas(&self) -> bool {
        false
    }

    /// The descriptor's replica switch, for the root to set at submission;
    /// `None` (the default): the family cannot carry it, and its replicas
    /// are dropped after each command.
    fn hold_replicas_mut(&mut self) -> Option<&mut bool> {
        None
    }
}

/// Output IDs named by the root for one rank of an item-per-block command
/// before the command runs, so that a dependent operation can be planned
/// and sent without waiting for this one's replies (pipelined submission,
/// `docs/architecture.md`, "Operations in flight"). The rank commits the
/// `k`-th of its items (in the item order of the descriptor it received,
/// which is the plan's order restricted to its items) under
/// `ObjectId::with_nonce(rank, nonce, first + k)`
/// ([`uni20_persist::Store::commit_as`]); the nonce is the universe's
/// identity, which no store issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NamedOutputs {
    /// The rank whose items these are.
    pub rank: usize,
    /// The namer's nonce (the universe's identity).
    pub nonce: u64,
    /// The sequence number of the rank's first item.
    pub first: u64,
}

impl NamedOutputs {
    /// The ID of the rank's `k`-th item.
    pub fn id(&self, k: usize) -> ObjectId {
        ObjectId::with_nonce(self.rank as u32, self.nonce, self.first + k as u64)
    }
}

/// Least estimated work ([`ItemWork::cost`], summed over a rank's items of
/// one command) for which the items run in parallel (the rank's thread and
/// rayon helpers): below it, waking a pool thread costs more than it saves (2^18, as
/// the threshold of a split GEMM). A symmetric DMRG step is thousands of
/// commands of a few small sector blocks each: with 2 threads on 2 cores
/// running those in parallel made an L = 60, chi = 100 run 2.1x slower
/// than with one thread (`docs/performance.md`).
pub(crate) const PARALLEL_MIN_COST: u64 = 1 << 18;

/// The `Item` type, `work`, `place`, `work_mut` (the plan is split per
/// rank at submission), `out_names` and `out_names_mut` (outputs named at
/// submission), `hold_replicas` and `hold_replicas_mut` (replicas kept
/// between commands) of an [`ItemWork`] impl whose descriptor holds
/// `items: Vec<$item>`, `transfers: Vec<Transfer>`,
/// `out_names: Vec<NamedOutputs>` and `hold_replicas: bool`, and
/// whose items carry the `rank` that computes them and their `out_block`.
/// Used inside the impl block; the family writes `OPERATION` and `compute`.
macro_rules! item_work_fields {
    ($item:ty) => {
        type Item = $item;
        fn work(&self) -> (&[$item], &[$crate::transfer::Transfer]) {
            (&self.items, &self.transfers)
        }
        fn place(_: usize, item: &$item) -> (usize, usize) {
            (item.rank, item.out_block)
        }
        fn work_mut(&mut self) -> Option<(&mut Vec<$item>, &mut Vec<$crate::transfer::Transfer>)> {
            Some((&mut self.items, &mut self.transfers))
        }
        fn out_names(&self) -> &[$crate::ops::kit::NamedOutputs] {
            &self.out_names
        }
        fn out_names_mut(&mut self) -> Option<&mut Vec<$crate::ops::kit::NamedOutputs>> {
            Some(&mut self.out_names)
        }
        fn hold_replicas(&self) -> bool {
            self.hold_replicas
        }
        fn hold_replicas_mut(&mut self) -> Option<&mut bool> {
            Some(&mut self.hold_replicas)
        }
    };
}
pub(crate) use item_work_fields;

/// How many of `items` (at least one) the next parallel chunk takes: at
/// most `PARALLEL_CHUNK_PER_THREAD * threads` items whose outputs (16
/// bytes an element, the widest element type) stay within
/// `PARALLEL_CHUNK_BYTES` (a first item always fits); with an output size
/// unknown, at most `UNSIZED_CHUNK_PER_THREAD * threads` items.
fn chunk_len<I>(items: &[(usize, usize, &I)], threads: usize, out_elements: impl Fn(&I) -> Option<u64>) -> usize {
    let mut bytes = 0u64;
    for (k, &(_, _, item)) in items.iter().enumerate() {
        if k == PARALLEL_CHUNK_PER_THREAD * threads {
            return k;
        }
        let Some(n) = out_elements(item) else {
            return items.len().min(UNSIZED_CHUNK_PER_THREAD * threads).max(1);
        };
        bytes = bytes.saturating_add(n.saturating_mul(16));
        if k > 0 && bytes > PARALLEL_CHUNK_BYTES {
            return k;
        }
    }
    items.len()
}

/// Most output bytes held by one parallel chunk before its commits (the
/// store's budget is enforced at commit): 64 MiB.
const PARALLEL_CHUNK_BYTES: u64 = 64 << 20;

/// Items per thread of a chunk when the family does not say how large its
/// outputs are.
const UNSIZED_CHUNK_PER_THREAD: usize = 8;

/// Items per thread computed at once before their commits, when a
/// command's items run in parallel (and their outputs fit
/// `PARALLEL_CHUNK_BYTES`). Each chunk ends in a join (the rank's
/// thread waits for the helpers' last items), which costs tens of
/// microseconds on the 2-core guest of `docs/performance.md`; at 8 items
/// per thread a chunk of sector blocks held only 25-100 us of kernels at
/// chi = 400, and one rank with 2 threads took 1.14x as long per converged
/// sweep as at 64 (L = 100, chi = 400, Sz). A command's outputs at that
/// size are a few megabytes, well within `PARALLEL_CHUNK_BYTES`.
const PARALLEL_CHUNK_PER_THREAD: usize = 64;

/// The handler of every [`ItemWork`] command: exchanges the blocks of
/// `d.work()`, computes the items this rank owns, commits each output block
/// in item order and replies `(item index, object id)` for each; the
/// replicas received for the command are released before the reply, or
/// kept when [`ItemWork::hold_replicas`] says so (the root then releases
/// them later, see `uni20_worker::ledger::replicas`).
///
/// `d` is the whole plan or this rank's share of it ([`ItemWork::work_mut`]):
/// the item indices of the reply are indices into `d`'s items, which the
/// root maps back to the plan's for a share.
///
/// With a thread budget above 1, several items on this rank and a summed
/// cost of at least `PARALLEL_MIN_COST` (2^18; or an unknown cost), the items run
/// in parallel, the rank's thread and `threads - 1` rayon helpers claiming
/// the costliest items first (`map_largest_first`), each item
/// with a budget of one thread (many small sector blocks: one hand-off per
/// chunk of up to `64 * threads` items and 64 MiB of outputs rather than one per kernel); a single item
/// gets the whole budget. The object ids and
/// the reply do not depend on that: the commits follow item order.
///
/// # Errors
/// The first failing transfer, item (in item order) or commit, with the
/// output block and the item's index in `d` in its context.
pub fn handle_items<D: ItemWork>(ctx: &mut WorkerContext<'_>, d: D) -> Result<Vec<(usize, ObjectId)>, HandlerError> {
    let me = ctx.rank();
    let store = ctx.store();
    let (items, transfers) = d.work();
    let replicas = exchange_blocks(ctx, transfers)?;
    let mine: Vec<(usize, usize, &D::Item)> = items
        .iter()
        .enumerate()
        .filter_map(|(idx, item)| {
            let (rank, out_block) = D::place(idx, item);
            (rank == me).then_some((idx, out_block, item))
        })
        .collect();
    let kernels = ctx.kernels();
    let in_item = |idx: usize, out_block: usize| {
        // `idx` indexes the descriptor this rank received (its share of a
        // split plan); the output block is the plan's.
        move |e: HandlerError| {
            e.context(format!(
                "{} output block {out_block} (item {idx} of this rank's descriptor)",
                D::OPERATION
            ))
        }
    };
    // Outputs named by the root: the k-th item of this rank commits under
    // its k-th name.
    let named = d.out_names().iter().find(|n| n.rank == me).copied();
    let commit = |k: usize, idx: usize, out_block: usize, t: LocalTensor| {
        match named {
            Some(n) => store.commit_as(n.id(k), Block(t)),
            None => store.commit(Block(t)),
        }
        .map(|p| (idx, p.id()))
        .map_err(|e| in_item(idx, out_block)(HandlerError::from(e).context("committing the output block")))
    };
    let threads = kernels.threads();
    let mut out = Vec::with_capacity(mine.len());
    let known: Option<u64> = mine
        .iter()
        .map(|&(_, _, item)| d.cost(item))
        .try_fold(0u64, |acc, c| c.map(|c| acc.saturating_add(c)));
    if threads > 1 && mine.len() > 1 && known.is_none_or(|c| c >= PARALLEL_MIN_COST) {
        // A bounded number of items and output bytes in flight
        // (`chunk_len`), so that the outputs held before their commit
        // (which enforces the store's budget) stay bounded.
        let one = kernels.with_threads(1);
        let mut rest: &[(usize, usize, &D::Item)] = &mine;
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at(chunk_len(rest, threads, |item| d.out_elements(item)));
            rest = tail;
            // Costliest first (the families give a cost for every item or
            // for none; none keeps item order), so that the largest sector
            // block does not start last.
            let costs: Vec<u64> = chunk.iter().map(|&(_, _, item)| d.cost(item).unwrap_or(0)).collect();
            let computed: Vec<Result<LocalTensor, HandlerError>> =
                map_largest_first(chunk.len(), threads, &costs, |k| {
                    let (idx, out_block, item) = chunk[k];
                    d.compute(&one, idx, item).map_err(in_item(idx, out_block))
                });
            for (&(idx, out_block, _), t) in chunk.iter().zip(computed) {
                out.push(commit(out.len(), idx, out_block, t?)?);
            }
        }
    } else {
        for &(idx, out_block, item) in &mine {
            let t = d.compute(&kernels, idx, item).map_err(in_item(idx, out_block))?;
            out.push(commit(out.len(), idx, out_block, t)?);
        }
    }
    tracing::debug!(
        rank = me,
        operation = D::OPERATION,
        blocks = out.len(),
        replicas = replicas.len(),
        "output blocks committed"
    );
    if !d.hold_replicas() {
        store
            .release_many(&replicas)
            .map_err(|e| HandlerError::from(e).context("dropping the replicas of this command"))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(sizes: &[u64]) -> Vec<(usize, usize, &u64)> {
        sizes.iter().enumerate().map(|(i, s)| (i, i, s)).collect()
    }

    #[test]
    fn chunks_are_bounded_by_count_and_bytes() {
        let elems = |n: &u64| Some(*n);
        // Small outputs: the count bound (64 per thread).
        let small = vec![10u64; 1000];
        assert_eq!(chunk_len(&items(&small), 2, elems), 128);
        assert_eq!(chunk_len(&items(&small[..50]), 2, elems), 50);
        // 16 MiB outputs (1 Mi elements of 16 bytes): four fit in 64 MiB.
        let big = vec![1u64 << 20; 10];
        assert_eq!(chunk_len(&items(&big), 2, elems), 4);
        // One output above the bound still runs, alone.
        let huge = vec![1u64 << 30; 3];
        assert_eq!(chunk_len(&items(&huge), 2, elems), 1);
        // Unknown output sizes: 8 per thread.
        assert_eq!(chunk_len(&items(&small), 2, |_: &u64| None), 16);
        assert_eq!(chunk_len(&items(&small[..3]), 2, |_: &u64| None), 3);
    }
}
