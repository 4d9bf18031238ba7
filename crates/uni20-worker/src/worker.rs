//! The worker loop: after the start-up handshake, a worker receives control
//! frames from the root, runs each command through
//! [`execute`](crate::handler::execute) and replies, until shutdown or abort.
//!
//! Workers execute one command at a time, in the order the root sent them,
//! so the data tags of one operation are never confused with another's.

use std::sync::Arc;

use serde_bytes::ByteBuf;
use uni20_dispatch::BackendList;
use uni20_persist::Store;

use crate::config::RankConfig;
use crate::context::WorkerContext;
use crate::envelope::{decode_exact, encode_shared, Envelope};
use crate::handler::{checkpoint_kill, execute, store_failure, undecodable, Executed};
use crate::protocol::{ControlRef, Reply};
use crate::registry::Registry;
use crate::startup::{worker_handshake, NoStart};
use crate::transport::{Transport, TAG_CMD, TAG_REPLY};

/// How a worker loop ended.
#[derive(Debug, PartialEq, Eq)]
pub enum WorkerExit {
    /// The root sent shutdown.
    Shutdown,
    /// The root refused to start (registry mismatch).
    Refused(String),
    /// The job was aborted or communication failed.
    Aborted(String),
    /// This rank died in the middle of an operation (injected `exit`/`kill`
    /// in-process); the reason names rank, op_id and command.
    Died(String),
}

/// The worker loop of one rank: handshake, then execute commands until
/// shutdown or abort.
///
/// `threads` is the rank's kernel thread budget; `config` gives the injected
/// faults and the envelope size limit.
pub(crate) fn worker_loop(
    t: &dyn Transport,
    registry: &Registry,
    store: &Store,
    backends: &BackendList,
    threads: usize,
    config: &RankConfig,
) -> WorkerExit {
    let rank = t.rank();
    let faults = &config.faults;
    // `uni20.flush.v1` and `uni20.flush_objects.v1` commands handled so far (for
    // an injected `ckptkill`).
    let mut flushes = 0u64;
    match worker_handshake(t, registry, config) {
        Ok(()) => {}
        Err(NoStart::Refused(why)) => return WorkerExit::Refused(why),
        Err(NoStart::Aborted(why)) => return WorkerExit::Aborted(why),
    }
    loop {
        let frame = match t.recv(0, TAG_CMD) {
            Ok(f) => f,
            Err(e) => return WorkerExit::Aborted(e.to_string()),
        };
        let started = std::time::Instant::now();
        // The envelope is decoded where it lies in the frame.
        let (op_id, outcome) = match decode_exact::<ControlRef>(&frame, "control frame") {
            Ok(ControlRef::Shutdown) => return WorkerExit::Shutdown,
            Ok(ControlRef::Run { envelope, releases }) => {
                match Envelope::decode_limited(envelope, config.max_envelope_bytes) {
                    Ok(env) => {
                        // Releases first: nothing in flight names them (the
                        // root queues an object only when no handle does).
                        let released = if releases.is_empty() {
                            Ok(())
                        } else {
                            store.release_many(&releases).map(|_| ())
                        };
                        if let Err(e) = released {
                            let why = format!("releasing {} object(s) before the command: {e}", releases.len());
                            (env.op_id, Err(Box::new(store_failure(rank, &env, why))))
                        } else {
                            let mut ctx = WorkerContext {
                                transport: t,
                                store,
                                backends,
                                threads,
                                op_id: env.op_id,
                                storage_ranks: config.storage_ranks,
                                corrupt_sends: false,
                            };
                            if let Some(why) = checkpoint_kill(&ctx, &env, faults, &mut flushes) {
                                return WorkerExit::Died(why);
                            }
                            match execute(registry, &mut ctx, &env, faults) {
                                // Side work of the store (a failed spill or file
                                // deletion) is reported once, as this command's
                                // failure: fail-stop, with the object and path.
                                Executed::Reply(Ok(bytes)) => match store.take_background_error() {
                                    Some(e) => {
                                        let why = format!("the rank's store failed in the background: {e}");
                                        (env.op_id, Err(Box::new(store_failure(rank, &env, why))))
                                    }
                                    None => (env.op_id, Ok(bytes)),
                                },
                                Executed::Reply(r) => (env.op_id, r),
                                Executed::Died(why) => return WorkerExit::Died(why),
                                Executed::BadReply => {
                                    if let Err(e) = t.post(0, TAG_REPLY, Arc::from(&b"\xff\xffnot a reply"[..])) {
                                        return WorkerExit::Aborted(e.to_string());
                                    }
                                    continue;
                                }
                            }
                        }
                    }
                    Err(e) => (0, Err(Box::new(undecodable(rank, e.to_string())))),
                }
            }
            Err(e) => (0, Err(Box::new(undecodable(rank, e.to_string())))),
        };
        if let Err(d) = &outcome {
            tracing::warn!(rank, op_id, "command failed: {}", d.error);
        }
        // Posted, not sent: the root may be busy sending this rank the next
        // (large) command frame, and neither may wait for the other.
        let outcome = outcome.map(ByteBuf::from);
        let busy_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if let Err(e) = t.post(
            0,
            TAG_REPLY,
            encode_shared(&Reply {
                op_id,
                outcome,
                busy_ns,
            }),
        ) {
            return WorkerExit::Aborted(e.to_string());
        }
    }
}
