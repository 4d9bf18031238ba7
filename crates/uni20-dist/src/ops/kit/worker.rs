//! The worker side of an item-per-block command: [`ItemWork`] (what a
//! family supplies: its items, its transfers, one item's output block) and
//! the one generic handler [`handle_items`], which exchanges the blocks
//! worker to worker, computes and commits the items of this rank, replies
//! `(item index, object id)` per committed block and releases the
//! replicas the command received.

use uni20_dispatch::LocalTensor;
use uni20_persist::ObjectId;
use uni20_worker::{HandlerError, WorkerContext};

use crate::tensor::Block;
use crate::transfer::{exchange_blocks, Transfer};

/// The descriptor of a command whose work is a list of items, one output
/// block each. A family implements it on its descriptor and registers
/// [`handle_items::<Desc>`](handle_items) as the handler:
/// `command!(pub AbsV1 = "example.abs.v1", schema 1, AbsDescV1 => Vec<(usize, ObjectId)>, handle_items::<AbsDescV1>);`.
pub trait ItemWork {
    /// One item (one output block).
    type Item;
    /// The operation, for diagnostics and logs (`"reblock"`).
    const OPERATION: &'static str;
    /// Every item of the command, in item order (the reply's indices),
    /// and the worker-to-worker transfers they need (transfer `i` uses the
    /// tags of `i`).
    fn work(&self) -> (&[Self::Item], &[Transfer]);
    /// Rank that computes and owns item `idx`, and its output block number.
    fn place(idx: usize, item: &Self::Item) -> (usize, usize);
    /// Computes the output block of item `idx` on this rank: its inputs are
    /// in the store (owned, or replicas received by the exchange).
    ///
    /// # Errors
    /// A [`HandlerError`] (the handler adds the item and its block).
    fn compute(&self, ctx: &WorkerContext<'_>, idx: usize, item: &Self::Item) -> Result<LocalTensor, HandlerError>;
}

/// The `Item` type, `work` and `place` of an [`ItemWork`] impl whose
/// descriptor holds `items: Vec<$item>` and `transfers: Vec<Transfer>` and
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
    };
}
pub(crate) use item_work_fields;

/// The handler of every [`ItemWork`] command: exchanges the blocks of
/// `d.work()`, computes the items this rank owns in item order,
/// commits each output block and replies `(item index, object id)` for
/// each; the replicas received for the command are released before the
/// reply.
///
/// # Errors
/// The first failing transfer, item or commit, with the item index and
/// output block in its context.
pub fn handle_items<D: ItemWork>(ctx: &mut WorkerContext<'_>, d: D) -> Result<Vec<(usize, ObjectId)>, HandlerError> {
    let me = ctx.rank();
    let store = ctx.store();
    let (items, transfers) = d.work();
    let replicas = exchange_blocks(ctx, transfers)?;
    let mut out = Vec::new();
    for (idx, item) in items.iter().enumerate() {
        let (rank, out_block) = D::place(idx, item);
        if rank != me {
            continue;
        }
        let in_item = |e: HandlerError| e.context(format!("{} item {idx} (output block {out_block})", D::OPERATION));
        let t = d.compute(ctx, idx, item).map_err(in_item)?;
        let p = store
            .commit(Block(t))
            .map_err(|e| in_item(HandlerError::from(e).context("committing the output block")))?;
        out.push((idx, p.id()));
    }
    tracing::debug!(
        rank = me,
        operation = D::OPERATION,
        blocks = out.len(),
        replicas = replicas.len(),
        "output blocks committed"
    );
    store
        .release_many(&replicas)
        .map_err(|e| HandlerError::from(e).context("dropping the replicas of this command"))?;
    Ok(out)
}
