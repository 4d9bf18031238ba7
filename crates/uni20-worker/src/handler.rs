//! Running one command on one rank: fault injection, registry lookup and
//! schema check, the handler call under `catch_unwind`, and the conversion
//! of an error or panic into a [`Diagnostic`].
//!
//! Both the worker loop (every worker) and the controller (the root, when it
//! is a participant) run commands through [`run_handler`]; neither depends on
//! the other.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::context::WorkerContext;
use crate::diag::{Diagnostic, HandlerError};
use crate::envelope::Envelope;
use crate::fault::{FaultKind, FaultPlan};
use crate::panics::{panic_message, take_helper_panics, HandlerRunning};
use crate::registry::Registry;
use crate::transport::TransportKind;

/// What running one command on a worker produced.
pub(crate) enum Executed {
    /// The reply to send: the handler's bytes or its diagnostic.
    Reply(Result<Vec<u8>, Box<Diagnostic>>),
    /// Injected `badreply`: send undecodable bytes instead of a reply.
    BadReply,
    /// Injected `exit`/`kill` in-process: the rank dies; the text says why.
    Died(String),
}

/// Runs one command on a worker, applying the worker-side faults injected
/// for this rank and op_id first.
pub(crate) fn execute(
    registry: &Registry,
    ctx: &mut WorkerContext<'_>,
    env: &Envelope,
    faults: &FaultPlan,
) -> Executed {
    let rank = ctx.rank();
    let injected = faults.at(
        rank,
        env.op_id,
        &[
            FaultKind::Error,
            FaultKind::Panic,
            FaultKind::HelperPanic,
            FaultKind::Exit,
            FaultKind::Kill,
            FaultKind::BadReply,
            FaultKind::Io,
            FaultKind::Corrupt,
        ],
    );
    if let Some(f) = injected {
        let why = format!(
            "rank {rank} died during op_id {} (`{}`): injected {f} (UNI20_INJECT_FAULT)",
            env.op_id, env.wire_name
        );
        match f.kind {
            FaultKind::Exit | FaultKind::Kill if ctx.transport.kind() == TransportKind::Mpi => {
                eprintln!("uni20: {why}");
                if f.kind == FaultKind::Kill {
                    // SAFETY: raising a signal on our own process has no memory-safety preconditions.
                    unsafe {
                        libc::raise(libc::SIGKILL);
                    }
                }
                std::process::exit(17);
            }
            FaultKind::Exit | FaultKind::Kill => return Executed::Died(why),
            FaultKind::BadReply => return Executed::BadReply,
            FaultKind::Corrupt => {
                tracing::warn!(
                    rank,
                    op_id = env.op_id,
                    "injected fault {f}: the object payloads this rank sends are corrupted"
                );
                ctx.corrupt_sends = true;
            }
            FaultKind::Io => {
                tracing::warn!(
                    rank,
                    op_id = env.op_id,
                    "injected fault {f}: the next store write fails"
                );
                ctx.store.inject_io_failures(1);
            }
            _ => {}
        }
    }
    Executed::Reply(run_handler(
        registry,
        ctx,
        env,
        injected.map(|f| (f.kind, f.to_string())),
        None,
    ))
}

/// Injected `ckptkill`: when `env` is a `uni20.flush.v1` or a
/// `uni20.flush_objects.v1` (a worker's part of a checkpoint commit), counted in `flushes` (1 for the rank's first), and
/// the plan kills this rank at this flush, makes about half of the store's
/// pending objects durable (at least one when there are any) and then ends
/// the rank as `kill` does: under MPI the process sends itself `SIGKILL`;
/// in-process it returns why the rank died. `None`: no such fault here.
pub(crate) fn checkpoint_kill(
    ctx: &WorkerContext<'_>,
    env: &Envelope,
    faults: &FaultPlan,
    flushes: &mut u64,
) -> Option<String> {
    if env.wire_name != <crate::commands::Flush as crate::CommandSpec>::WIRE_NAME
        && env.wire_name != <crate::commands::FlushObjects as crate::CommandSpec>::WIRE_NAME
    {
        return None;
    }
    *flushes += 1;
    let rank = ctx.rank();
    let f = faults
        .faults()
        .iter()
        .copied()
        .find(|f| f.kind == FaultKind::CkptKill && f.rank == rank && f.op.unwrap_or(1) == *flushes)?;
    let pending = ctx.store.unflushed();
    let part = &pending[..pending.len().div_ceil(2)];
    let flushed = ctx.store.flush_ids(part);
    let failed = flushed
        .err()
        .map(|e| format!(" (that flush failed: {e})"))
        .unwrap_or_default();
    let why = format!(
        "rank {rank} died inside checkpoint flush {} (op_id {}), after making {} of its {} pending objects \
         durable{failed}: injected {f} (UNI20_INJECT_FAULT)",
        *flushes,
        env.op_id,
        part.len(),
        pending.len(),
    );
    if ctx.transport.kind() == crate::transport::TransportKind::Mpi {
        eprintln!("uni20: {why}");
        // SAFETY: raising a signal on our own process has no memory-safety preconditions.
        unsafe {
            libc::raise(libc::SIGKILL);
        }
        std::process::exit(17);
    }
    Some(why)
}

/// Looks the command up, checks its schema, runs its handler and turns an
/// error or a panic into a [`Diagnostic`] naming rank, op_id and command.
/// A panic on a helper thread of the handler (rayon, a scoped thread)
/// reaches the handler's thread and is reported the same way, with the
/// helper's thread, place and message as `caused by` lines. `injected`
/// makes the handler fail (`error`), panic (`panic`) or panic on a helper
/// thread (`helperpanic`) instead. `inline` is the root's own share as a
/// value (then `env` carries no descriptor bytes): it runs through the
/// entry's [`CommandEntry::inline`](crate::CommandEntry::inline) handler,
/// which the caller checked is there.
pub(crate) fn run_handler(
    registry: &Registry,
    ctx: &mut WorkerContext<'_>,
    env: &Envelope,
    injected: Option<(FaultKind, String)>,
    inline: Option<Box<dyn Any>>,
) -> Result<Vec<u8>, Box<Diagnostic>> {
    let rank = ctx.rank();
    let diag = |location: String, error: HandlerError| Box::new(Diagnostic::of(rank, env, location, error));
    let Some(entry) = registry.get(env.command_id) else {
        return Err(diag(
            "unknown".into(),
            HandlerError::msg(format!(
                "unknown command id {:#018x} (`{}`): not registered on rank {rank}",
                env.command_id, env.wire_name
            )),
        ));
    };
    // Formatted only for a diagnostic: a command that succeeds pays nothing.
    let location = || entry.location.to_string();
    if entry.schema_version != env.schema_version || entry.wire_name != env.wire_name {
        return Err(diag(
            location(),
            HandlerError::msg(format!(
                "schema mismatch: envelope `{}` v{}, registered `{}` v{}",
                env.wire_name, env.schema_version, entry.wire_name, entry.schema_version
            )),
        ));
    }
    let _span = tracing::debug_span!("command", rank, op_id = env.op_id, wire = %env.wire_name).entered();
    let running = HandlerRunning::enter();
    let _note = crate::waitnote::running_command(env.op_id, entry.wire_name);
    let outcome = catch_unwind(AssertUnwindSafe(|| match &injected {
        Some((FaultKind::Panic, f)) => panic!("injected panic {f} (UNI20_INJECT_FAULT)"),
        Some((FaultKind::HelperPanic, f)) => std::thread::scope(|s| {
            let helper = std::thread::Builder::new().name(format!("uni20-helper-{rank}"));
            // A spawn failure is an error of its own, not the injected panic.
            helper
                .spawn_scoped(s, || panic!("injected helper panic {f} (UNI20_INJECT_FAULT)"))
                .map(|_| Vec::new())
                .map_err(|e| HandlerError::from(e).context("spawning a helper thread"))
        }),
        Some((FaultKind::Error, f)) => Err(HandlerError::msg(format!("injected error {f} (UNI20_INJECT_FAULT)"))),
        // The root's own share, passed as a value (its envelope carries no
        // descriptor bytes): the entry's inline handler.
        _ => match (inline, entry.inline) {
            (Some(descriptor), Some(run_inline)) => run_inline(ctx, descriptor),
            _ => (entry.handler)(ctx, env),
        },
    }));
    let outcome = match outcome {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => Err(diag(location(), e)),
        Err(p) => {
            let mut error = HandlerError::msg(format!("handler panicked: {}", panic_message(&*p)));
            error.chain.extend(take_helper_panics());
            Err(diag(location(), error))
        }
    };
    drop(running);
    outcome
}

/// The diagnostic of a control frame or envelope that could not be decoded
/// (op_id 0: the operation is unknown).
pub(crate) fn undecodable(rank: usize, why: String) -> Diagnostic {
    Diagnostic {
        rank,
        op_id: 0,
        debug_name: "?".into(),
        wire_name: "?".into(),
        command_id: 0,
        schema_version: 0,
        location: "worker loop".into(),
        error: HandlerError::msg(format!("undecodable command frame: {why}")),
    }
}

/// A failure of the rank's store around a command (releasing the objects
/// the root queued, or side work that failed in the background), reported
/// as that command's diagnostic.
pub(crate) fn store_failure(rank: usize, env: &Envelope, why: String) -> Diagnostic {
    Diagnostic::of(rank, env, "worker loop (rank store)".into(), HandlerError::msg(why))
}

#[cfg(test)]
mod tests {
    use uni20_dispatch::BackendList;
    use uni20_persist::Store;

    use super::*;
    use crate::inproc::{InProcessTransport, Shared};
    use crate::registry::{command_id, CommandEntry, HandlerLocation};

    fn rayon_panic(_: &mut WorkerContext<'_>, _: &Envelope) -> Result<Vec<u8>, HandlerError> {
        let (a, b) = rayon::join(|| 1, || -> i32 { panic!("boom on a rayon worker") });
        Ok(vec![(a + b) as u8])
    }

    fn scoped_panic(_: &mut WorkerContext<'_>, _: &Envelope) -> Result<Vec<u8>, HandlerError> {
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("kernel-helper".into())
                .spawn_scoped(s, || panic!("boom on a scoped thread"))
                .unwrap();
        });
        Ok(Vec::new())
    }

    fn fine(_: &mut WorkerContext<'_>, _: &Envelope) -> Result<Vec<u8>, HandlerError> {
        let (a, b) = rayon::join(|| 20, || 22);
        Ok(vec![a + b])
    }

    fn entry(wire: &'static str, handler: crate::registry::HandlerFn) -> CommandEntry {
        CommandEntry {
            wire_name: wire,
            debug_name: wire,
            schema_version: 1,
            command_id: command_id(wire),
            handler,
            inline: None,
            location: HandlerLocation {
                module_path: "handler::tests",
                file: "handler.rs",
                line: 1,
            },
        }
    }

    /// The tests of this module run handlers one at a time: in-process, a
    /// helper panic is attributed to a handler only while it runs alone.
    static ONE_AT_A_TIME: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

    fn run(
        wire: &'static str,
        registry: &Registry,
        injected: Option<(FaultKind, String)>,
    ) -> Result<Vec<u8>, Box<Diagnostic>> {
        let _alone = ONE_AT_A_TIME.lock();
        crate::panics::install_panic_hook(false);
        let t = InProcessTransport::new(0, Shared::new(1));
        let store = Store::in_memory(0);
        let backends = BackendList::default_cpu(1);
        let mut ctx = WorkerContext {
            transport: &t,
            store: &store,
            backends: &backends,
            threads: 1,
            op_id: 7,
            storage_ranks: 0,
            corrupt_sends: false,
        };
        let env = Envelope {
            op_id: 7,
            command_id: command_id(wire),
            wire_name: wire.into(),
            debug_name: wire.into(),
            schema_version: 1,
            descriptor: Vec::new(),
        };
        run_handler(registry, &mut ctx, &env, injected, None)
    }

    fn registry() -> Registry {
        Registry::from_entries([
            entry("test.rayon_panic.v1", rayon_panic),
            entry("test.scoped_panic.v1", scoped_panic),
            entry("test.fine.v1", fine),
        ])
        .unwrap()
    }

    #[test]
    fn a_panic_on_a_rayon_worker_is_the_handlers_failure() {
        let d = run("test.rayon_panic.v1", &registry(), None).unwrap_err();
        assert_eq!((d.rank, d.op_id, d.wire_name.as_str()), (0, 7, "test.rayon_panic.v1"));
        assert_eq!(d.error.chain[0], "handler panicked: boom on a rayon worker");
        // Rayon may run the closure on the handler's own thread (then there
        // is no helper note) or on a pool thread (then the note names it).
        assert!(
            d.error.chain[1..].iter().all(|c| c.contains("boom on a rayon worker")),
            "{d}"
        );
    }

    #[test]
    fn a_panic_on_a_scoped_thread_names_the_thread_place_and_message() {
        let d = run("test.scoped_panic.v1", &registry(), None).unwrap_err();
        assert_eq!(d.error.chain[0], "handler panicked: a scoped thread panicked");
        let note = d.error.chain.get(1).expect("a helper note");
        assert!(
            note.starts_with("helper thread `kernel-helper` panicked at ")
                && note.contains("handler.rs")
                && note.ends_with(": boom on a scoped thread"),
            "{note}"
        );
        let text = d.to_string();
        assert!(text.contains("caused by: helper thread `kernel-helper`"), "{text}");
    }

    #[test]
    fn injected_helper_panic_and_handlers_that_use_helpers_normally() {
        let reg = registry();
        let d = run(
            "test.fine.v1",
            &reg,
            Some((FaultKind::HelperPanic, "helperpanic@rank=0,op=7".into())),
        )
        .unwrap_err();
        assert_eq!(d.error.chain[0], "handler panicked: a scoped thread panicked");
        assert!(
            d.error.chain[1].contains("injected helper panic helperpanic@rank=0,op=7"),
            "{d}"
        );
        // A handler that uses helpers without panicking, after the failures:
        // no stale note leaks into it, and it succeeds.
        assert_eq!(run("test.fine.v1", &reg, None).unwrap(), vec![42]);
    }
}
