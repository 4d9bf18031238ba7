//! The `uni20.reduce.v1` command: its descriptor (the reduction, one item
//! per block of `a`, with the box of `b` for an inner product) and the
//! worker handler. Each rank reduces its items with the local kernels
//! (`uni20_dispatch::{norm_sqr, inner, max_abs}`; several items holding a
//! mebibyte or more run in parallel over the rank's thread budget, the
//! rank's thread among the workers), combines its partials in item
//! order (Neumaier-compensated sum, or maximum), and sends that one scalar to the
//! leader (the lowest participant), which combines the ranks' scalars in
//! rank order and is the only rank to reply with a value: one scalar
//! reaches the root.

use serde::{Deserialize, Serialize};
use uni20_dispatch::par::map_indexed;
use uni20_dispatch::{inner, max_abs, norm_sqr, C64};
use uni20_persist::PersistentPtr;
use uni20_worker::transport::{Tag, TAG_DATA_BASE};
use uni20_worker::{command, HandlerError, WorkerContext};

use crate::ops::kit::BoxSource;
use crate::tensor::{Block, BlockRef};
use crate::transfer::exchange_blocks;
use crate::transfer::record::Transfer;

/// Tag of the partial results sent to the leader (above every transfer tag).
pub(crate) const TAG_PARTIAL: Tag = TAG_DATA_BASE + 30_000;

/// The reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub(crate) enum ReduceOp {
    /// `sum |a_i|^2` (real part of the value).
    NormSqr,
    /// `sum conj(a_i) * b_i`.
    Inner,
    /// `max |a_i|` (real part of the value; NaN if any element is NaN).
    MaxAbs,
}

/// One block of `a` reduced by `rank`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReduceItem {
    /// Rank that reduces the item.
    pub(crate) rank: usize,
    /// The block of `a`.
    pub(crate) a: BlockRef,
    /// For [`ReduceOp::Inner`]: the box of `b` matching `a`'s block.
    pub(crate) b: Option<BoxSource>,
}

/// The `uni20.reduce.v1` descriptor, identical on every participant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReduceDescV1 {
    /// The reduction.
    pub(crate) op: ReduceOp,
    /// One item per block of `a`.
    pub(crate) items: Vec<ReduceItem>,
    /// Worker-to-worker block transfers (the `i`-th between one sender and one receiver uses the tags of `i`).
    pub(crate) transfers: Vec<Transfer>,
    /// Every participant, ascending; the first is the leader.
    pub(crate) participants: Vec<usize>,
    /// Whether the receivers keep what the transfers deliver, as replicas
    /// the root releases later (`docs/architecture.md`, "Replicas kept
    /// between commands"); `false`: dropped after the command.
    pub(crate) hold_replicas: bool,
}

command!(
    /// The command `uni20.reduce.v1`. Reply: the combined value on the leader,
    /// `None` on every other participant.
    pub(crate) ReduceV1 = "uni20.reduce.v1", schema 2, ReduceDescV1 => Option<C64>, handle_reduce
);

/// Neumaier-compensated sum of the real and imaginary parts.
#[derive(Default)]
struct Sum {
    re: (f64, f64),
    im: (f64, f64),
}

fn neumaier(acc: &mut (f64, f64), x: f64) {
    let t = acc.0 + x;
    acc.1 += if acc.0.abs() >= x.abs() {
        (acc.0 - t) + x
    } else {
        (x - t) + acc.0
    };
    acc.0 = t;
}

/// Combines values of one reduction: compensated sums, or the maximum
/// (NaN wins).
pub(crate) struct Combine {
    op: ReduceOp,
    sum: Sum,
    max: f64,
}

impl Combine {
    pub(crate) fn new(op: ReduceOp) -> Combine {
        Combine {
            op,
            sum: Sum::default(),
            max: 0.0,
        }
    }
    pub(crate) fn add(&mut self, v: C64) {
        match self.op {
            ReduceOp::MaxAbs => {
                self.max = if v.re.is_nan() || self.max.is_nan() {
                    f64::NAN
                } else {
                    self.max.max(v.re)
                }
            }
            _ => {
                neumaier(&mut self.sum.re, v.re);
                neumaier(&mut self.sum.im, v.im);
            }
        }
    }
    pub(crate) fn total(&self) -> C64 {
        match self.op {
            ReduceOp::MaxAbs => C64::new(self.max, 0.0),
            _ => C64::new(self.sum.re.0 + self.sum.re.1, self.sum.im.0 + self.sum.im.1),
        }
    }
}

pub(crate) fn encode(v: C64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&v.re.to_le_bytes());
    b[8..].copy_from_slice(&v.im.to_le_bytes());
    b
}

pub(crate) fn decode(b: &[u8], from: usize) -> Result<C64, HandlerError> {
    let arr: [u8; 16] = b
        .try_into()
        .map_err(|_| HandlerError::msg(format!("partial result from rank {from} has {} bytes, not 16", b.len())))?;
    let f = |s: &[u8]| f64::from_le_bytes(s.try_into().unwrap_or([0; 8]));
    Ok(C64::new(f(&arr[..8]), f(&arr[8..])))
}

/// Least encoded size of `a`'s blocks (summed over a rank's items of one reduction) for
/// which the items are reduced in parallel: a reduction streams its operands once, at a few
/// gigabytes a second, so below a mebibyte (2^17 doubles) handing items to a second thread
/// costs more than it saves.
const PARALLEL_MIN_BYTES: u64 = 1 << 20;

/// The combined value of this rank's items of one reduction (`items`:
/// `(item index, item)` of the items it reduces, in item order), with the
/// rank's thread budget `threads`.
pub(crate) fn rank_partial(
    store: &uni20_persist::Store,
    op: ReduceOp,
    items: &[(usize, &ReduceItem)],
    threads: usize,
) -> Result<C64, HandlerError> {
    // One item's partial with `kernel_threads` threads; the kernels give the same bits for
    // any thread count, so the partials (combined below in item order) do not depend on
    // whether the items ran in parallel. Each item loads its block when it runs, so a rank
    // holds only the blocks in flight (a store with a budget may have spilled the others).
    let partial = |k: usize, kernel_threads: usize| -> Result<C64, HandlerError> {
        let (idx, item) = items[k];
        let in_item = |e: HandlerError| e.context(format!("reduction item {idx}"));
        let a = store
            .load_wait(PersistentPtr::<Block>::from_id(item.a.id))
            .map_err(|e| in_item(HandlerError::from(e).with_object(item.a.id)))?;
        Ok(match (op, &item.b) {
            (ReduceOp::NormSqr, _) => C64::new(norm_sqr(&a.0, kernel_threads), 0.0),
            (ReduceOp::MaxAbs, _) => C64::new(max_abs(&a.0, kernel_threads), 0.0),
            (ReduceOp::Inner, Some(src)) => {
                let b = src.assemble(store).map_err(in_item)?;
                inner(&a.0, b.tensor(), kernel_threads).map_err(|e| in_item(HandlerError::from(e)))?
            }
            (ReduceOp::Inner, None) => return Err(in_item(HandlerError::msg("inner product item without b"))),
        })
    };
    // Several items, a thread budget and enough bytes of `a` (the store's sizes, no I/O):
    // the items run in parallel, one thread each, the calling thread among them (one
    // hand-off per command instead of one per block). Otherwise in order on this thread:
    // a single item with the whole budget, several with one thread each (a small
    // reduction does not hand its blocks to the pool one by one either).
    // The sizes are looked up (one store lock per item) only where the answer matters.
    let parallel = threads > 1
        && items.len() > 1
        && items
            .iter()
            .map(|&(_, it)| store.size_of(it.a.id).unwrap_or(0))
            .sum::<u64>()
            >= PARALLEL_MIN_BYTES;
    let partials: Vec<C64> = if parallel {
        map_indexed(items.len(), threads, |k| partial(k, 1))
            .into_iter()
            .collect::<Result<_, _>>()?
    } else {
        let kernel_threads = if items.len() == 1 { threads } else { 1 };
        (0..items.len())
            .map(|k| partial(k, kernel_threads))
            .collect::<Result<_, _>>()?
    };
    let mut mine = Combine::new(op);
    for v in partials {
        mine.add(v);
    }
    Ok(mine.total())
}

fn handle_reduce(ctx: &mut WorkerContext<'_>, d: ReduceDescV1) -> Result<Option<C64>, HandlerError> {
    let me = ctx.rank();
    let store = ctx.store();
    let threads = ctx.threads().max(1);
    let replicas = exchange_blocks(ctx, &d.transfers)?;
    let items: Vec<(usize, &ReduceItem)> = d.items.iter().enumerate().filter(|(_, i)| i.rank == me).collect();
    let count = items.len();
    let mine = rank_partial(store, d.op, &items, threads)?;
    if !d.hold_replicas {
        store
            .release_many(&replicas)
            .map_err(|e| HandlerError::from(e).context("dropping the replicas of this command"))?;
    }
    let leader = d.participants.first().copied().unwrap_or(me);
    tracing::debug!(rank = me, items = count, leader, "reduce: partial computed");
    if me != leader {
        let bytes = encode(mine);
        ctx.transport().exchange(&[(leader, TAG_PARTIAL, &bytes[..])], &[])?;
        return Ok(None);
    }
    let others: Vec<(usize, Tag)> = d
        .participants
        .iter()
        .filter(|&&r| r != me)
        .map(|&r| (r, TAG_PARTIAL))
        .collect();
    let received = ctx.transport().exchange(&[], &others)?;
    let mut total = Combine::new(d.op);
    total.add(mine);
    for ((r, _), b) in others.iter().zip(&received) {
        total.add(decode(b, *r)?);
    }
    Ok(Some(total.total()))
}
