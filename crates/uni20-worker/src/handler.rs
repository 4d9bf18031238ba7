//! Running one command on one rank: fault injection, registry lookup and
//! schema check, the handler call under `catch_unwind`, and the conversion
//! of an error or panic into a [`Diagnostic`].
//!
//! Both the worker loop (every worker) and the controller (the root, when it
//! is a participant) run commands through [`run_handler`]; neither depends on
//! the other.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::context::WorkerContext;
use crate::diag::{Diagnostic, HandlerError};
use crate::envelope::Envelope;
use crate::fault::{FaultKind, FaultPlan};
use crate::panics::{panic_message, set_in_handler};
use crate::registry::Registry;

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
            FaultKind::Exit,
            FaultKind::Kill,
            FaultKind::BadReply,
            FaultKind::Io,
        ],
    );
    if let Some(f) = injected {
        let why = format!(
            "rank {rank} died during op_id {} (`{}`): injected {f} (UNI20_INJECT_FAULT)",
            env.op_id, env.wire_name
        );
        match f.kind {
            FaultKind::Exit | FaultKind::Kill if ctx.transport.kind() == "mpi" => {
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
    ))
}

/// Looks the command up, checks its schema, runs its handler and turns an
/// error or a panic into a [`Diagnostic`] naming rank, op_id and command.
/// `injected` makes the handler fail (`error`) or panic (`panic`) instead.
pub(crate) fn run_handler(
    registry: &Registry,
    ctx: &mut WorkerContext<'_>,
    env: &Envelope,
    injected: Option<(FaultKind, String)>,
) -> Result<Vec<u8>, Box<Diagnostic>> {
    let rank = ctx.rank();
    let diag = |location: String, error: HandlerError| {
        Box::new(Diagnostic {
            rank,
            op_id: env.op_id,
            debug_name: env.debug_name.clone(),
            wire_name: env.wire_name.clone(),
            command_id: env.command_id,
            schema_version: env.schema_version,
            location,
            error,
        })
    };
    let Some(entry) = registry.get(env.command_id) else {
        return Err(diag(
            "unknown".into(),
            HandlerError::msg(format!(
                "unknown command id {:#018x} (`{}`): not registered on rank {rank}",
                env.command_id, env.wire_name
            )),
        ));
    };
    let location = entry.location.to_string();
    if entry.schema_version != env.schema_version || entry.wire_name != env.wire_name {
        return Err(diag(
            location,
            HandlerError::msg(format!(
                "schema mismatch: envelope `{}` v{}, registered `{}` v{}",
                env.wire_name, env.schema_version, entry.wire_name, entry.schema_version
            )),
        ));
    }
    let _span = tracing::debug_span!("command", rank, op_id = env.op_id, wire = %env.wire_name).entered();
    set_in_handler(true);
    let outcome = catch_unwind(AssertUnwindSafe(|| match &injected {
        Some((FaultKind::Panic, f)) => panic!("injected panic {f} (UNI20_INJECT_FAULT)"),
        Some((FaultKind::Error, f)) => Err(HandlerError::msg(format!("injected error {f} (UNI20_INJECT_FAULT)"))),
        _ => (entry.handler)(ctx, env),
    }));
    set_in_handler(false);
    match outcome {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => Err(diag(location, e)),
        Err(p) => Err(diag(
            location,
            HandlerError::msg(format!("handler panicked: {}", panic_message(&*p))),
        )),
    }
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
