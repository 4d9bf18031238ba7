//! Worker-to-worker block transfers, shared by every operation family:
//! the plan side ([`Transfer`], a plain record in the leaf module `record`; [`TransferSet`], which lists each
//! (object, receiver) pair once) and the worker side ([`exchange_blocks`],
//! which sends the blocks a rank owns straight from its store and inserts
//! the ones it receives as verified replicas). Payloads never pass through
//! the root.

use std::collections::HashSet;

use uni20_persist::{ObjectId, ObjectMeta};
use uni20_worker::transport::{data_tag, Tag, TransportError};
use uni20_worker::{HandlerError, WorkerContext};

use crate::tensor::BlockRef;

pub(crate) mod record;

pub(crate) use record::Transfer;

/// The hasher of the planners' maps of object ids and ranks: rustc's
/// `FxHasher` (keys come from the root's own manifests, not from an
/// adversary, so a fast non-cryptographic hash is safe).
pub(crate) type FastHash = rustc_hash::FxBuildHasher;

/// Builds a plan's transfer list: each (object, receiver) pair at most
/// once, in the order first requested; blocks already on the receiver
/// are skipped.
#[derive(Debug, Default)]
pub struct TransferSet {
    planned: HashSet<(ObjectId, usize), FastHash>,
    transfers: Vec<Transfer>,
}

impl TransferSet {
    /// An empty set.
    pub fn new() -> TransferSet {
        TransferSet::default()
    }

    /// Requests block `r` (of `bytes` payload bytes) on rank `to`.
    pub fn need(&mut self, r: &BlockRef, bytes: u64, to: usize) {
        if r.owner != to && self.planned.insert((r.id, to)) {
            self.transfers.push(Transfer {
                id: r.id,
                from: r.owner,
                to,
                bytes,
            });
        }
    }

    /// The transfers, in request order (the `i`-th between one sender and
    /// one receiver uses the tags of `i`).
    pub fn into_vec(self) -> Vec<Transfer> {
        self.transfers
    }
}

/// Tags of the `i`-th transfer between one sender and one receiver (in
/// list order): its metadata message and its payload message.
fn transfer_tags(i: usize) -> (Tag, Tag) {
    let base = data_tag(2 * (i % 15_000));
    (base, base + 1)
}

/// How a diagnostic names `rank`: "storage rank" or "rank".
fn role_of(ctx: &WorkerContext<'_>, rank: usize) -> &'static str {
    if ctx.is_storage_rank(rank) {
        "storage rank"
    } else {
        "rank"
    }
}

/// The error of a failed exchange: when the rank waited for a peer that is
/// gone, it names the first object this rank awaited from that peer and
/// whether the peer is a storage rank (the requesting rank and the command
/// are added by the runtime's diagnostic).
fn exchange_failure(ctx: &WorkerContext<'_>, transfers: &[Transfer], e: TransportError) -> HandlerError {
    let me = ctx.rank();
    let TransportError::PeerLeft { rank } = e else {
        return HandlerError::from(e).context("exchanging blocks");
    };
    let role = role_of(ctx, rank);
    let mut awaited = transfers.iter().filter(|t| t.to == me && t.from == rank);
    match awaited.next() {
        Some(t) => {
            let more = match awaited.count() {
                0 => String::new(),
                n => format!(" (the first of {} awaited from it)", n + 1),
            };
            HandlerError::from(e)
                .context(format!("receiving object {}{more} from {role} {rank}", t.id))
                .with_object(t.id)
        }
        None => HandlerError::from(e).context(format!("exchanging blocks with {role} {rank}")),
    }
}

/// Numbers each transfer of `transfers` that `me` sends (`sending`) or
/// receives by its position among the transfers of the same sender and
/// receiver, in list order; `None` for the others.
pub(crate) fn pair_positions(transfers: &[Transfer], me: usize, sending: bool) -> Vec<Option<usize>> {
    let mut next: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    transfers
        .iter()
        .map(|t| {
            let peer = match (sending, t.from == me, t.to == me) {
                (true, true, _) => t.to,
                (false, _, true) => t.from,
                _ => return None,
            };
            let n = next.entry(peer).or_default();
            *n += 1;
            Some(*n - 1)
        })
        .collect()
}

/// Executes this rank's part of `transfers`: sends the objects it owns
/// (metadata, then the payload straight from the store's bytes: no copy)
/// and receives the ones it needs, inserting each as a replica after
/// checking its size and checksum. Returns the ids of the new replicas
/// (the caller releases them when it is done with them).
///
/// The `i`-th transfer from one rank to another (in list order) uses the
/// tags of `i`: sender and receiver agree whether each holds the whole
/// list or only the transfers it takes part in (a plan split per rank),
/// as long as the order is kept.
///
/// # Errors
/// A [`HandlerError`] naming the object if a send, a receive or the
/// replica check fails.
pub(crate) fn exchange_blocks(ctx: &WorkerContext<'_>, transfers: &[Transfer]) -> Result<Vec<ObjectId>, HandlerError> {
    let me = ctx.rank();
    let store = ctx.store();
    let mut outgoing_data = Vec::new();
    let sent = pair_positions(transfers, me, true);
    for (i, t) in transfers.iter().zip(&sent).filter_map(|(t, i)| i.map(|i| (i, t))) {
        let (meta, bytes) = store
            .encoded_for_transfer(t.id)
            .map_err(|e| HandlerError::from(e).with_object(t.id))?;
        let meta = postcard::to_stdvec(&meta).map_err(|e| HandlerError::msg(e.to_string()))?;
        let bytes = if ctx.corrupt_sends() {
            // Injected `corrupt` fault: one byte flipped, the receiver's check fails.
            let mut bad = bytes.as_ref().clone();
            if let Some(b) = bad.first_mut() {
                *b ^= 0x5a;
            }
            std::sync::Arc::new(bad)
        } else {
            bytes
        };
        outgoing_data.push((t.to, transfer_tags(i), meta, bytes));
    }
    let mut outgoing: Vec<(usize, Tag, &[u8])> = Vec::with_capacity(2 * outgoing_data.len());
    for (to, (tm, tp), meta, bytes) in &outgoing_data {
        outgoing.push((*to, *tm, meta.as_slice()));
        outgoing.push((*to, *tp, &bytes[..]));
    }
    let mut incoming = Vec::new();
    let received_at = pair_positions(transfers, me, false);
    for (i, t) in transfers
        .iter()
        .zip(&received_at)
        .filter_map(|(t, i)| i.map(|i| (i, t)))
    {
        let (tm, tp) = transfer_tags(i);
        incoming.push((t.from, tm));
        incoming.push((t.from, tp));
    }
    let awaited = || transfers.iter().filter(|t| t.to == me);
    // What this rank waits for, for the note a SIGTERM handler writes when the
    // launcher ends the job after a peer died (MPI; a no-op elsewhere).
    let note = uni20_worker::waitnote::waiting_for_objects(awaited().map(|t| (t.from, t.id)));
    let received = ctx
        .transport()
        .exchange(&outgoing, &incoming)
        .map_err(|e| exchange_failure(ctx, transfers, e))?;
    drop(note);
    drop(outgoing);
    drop(outgoing_data);
    let mut replicas = Vec::new();
    let mut received = received.into_iter();
    for t in awaited() {
        let (Some(meta), Some(bytes)) = (received.next(), received.next()) else {
            break;
        };
        // A sender that answers with a corrupt object is named with it.
        let from = |e: HandlerError| {
            e.context(format!(
                "receiving object {} from {} {}",
                t.id,
                role_of(ctx, t.from),
                t.from
            ))
            .with_object(t.id)
        };
        let meta: ObjectMeta =
            uni20_worker::envelope::decode_exact(&meta, "object metadata").map_err(|e| from(e.into()))?;
        let id = meta.id;
        if id != t.id {
            return Err(from(HandlerError::msg(format!(
                "the sender's metadata names object {id} instead"
            ))));
        }
        if !store.contains(id) {
            store.insert_replica(meta, bytes).map_err(|e| from(e.into()))?;
            replicas.push(id);
        }
    }
    Ok(replicas)
}
