//! Failure reporting: handler errors on workers and the diagnostics the root
//! prints (design note `persistent_dispatch.md`, not in this repository,
//! "Error handling" and "Failure policy": fail-stop; docs/architecture.md,
//! "Fail-stop as implemented").

use std::fmt;

use serde::{Deserialize, Serialize};

/// An error returned by a command handler.
///
/// Converts from any `std::error::Error` with `?`, keeping the whole source
/// chain as text so it can cross ranks. Like `anyhow::Error`, it deliberately
/// does not implement `std::error::Error` itself (that would conflict with
/// the blanket `From`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandlerError {
    /// The error and its sources, outermost first.
    pub chain: Vec<String>,
    /// The persistent object involved, when a storage operation failed.
    pub object: Option<String>,
    /// The local backend attempts, when a kernel failed (one line each).
    pub backend_attempts: Vec<String>,
}

impl HandlerError {
    /// A handler error with a single message.
    pub fn msg(message: impl Into<String>) -> HandlerError {
        HandlerError {
            chain: vec![message.into()],
            object: None,
            backend_attempts: Vec::new(),
        }
    }

    /// Adds an outer context line.
    pub fn context(mut self, message: impl Into<String>) -> HandlerError {
        self.chain.insert(0, message.into());
        self
    }

    /// Records the object id involved.
    pub fn with_object(mut self, object: impl fmt::Display) -> HandlerError {
        self.object = Some(object.to_string());
        self
    }

    /// Records local kernel attempts.
    pub fn with_attempts(mut self, attempts: Vec<String>) -> HandlerError {
        self.backend_attempts = attempts;
        self
    }
}

impl<E: std::error::Error> From<E> for HandlerError {
    fn from(e: E) -> HandlerError {
        let mut chain = vec![e.to_string()];
        let mut src = e.source();
        while let Some(s) = src {
            chain.push(s.to_string());
            src = s.source();
        }
        HandlerError {
            chain,
            object: None,
            backend_attempts: Vec::new(),
        }
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.chain.join(": "))
    }
}

/// Everything the root needs to say where and why a command failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// Rank on which the failure happened.
    pub rank: usize,
    /// Operation id of the failed command.
    pub op_id: u64,
    /// Debug name of the command.
    pub debug_name: String,
    /// Wire name of the command.
    pub wire_name: String,
    /// Command id.
    pub command_id: u64,
    /// Descriptor schema version.
    pub schema_version: u32,
    /// Handler source location (`module (file:line)`), or `unknown`.
    pub location: String,
    /// The failure.
    pub error: HandlerError,
}

impl Diagnostic {
    /// The diagnostic of the command `env` on `rank`: the envelope's op id,
    /// names, id and schema version, with the handler `location` and the
    /// `error`.
    pub(crate) fn of(
        rank: usize,
        env: &crate::envelope::Envelope,
        location: String,
        error: HandlerError,
    ) -> Diagnostic {
        Diagnostic {
            rank,
            op_id: env.op_id,
            debug_name: env.debug_name.clone(),
            wire_name: env.wire_name.clone(),
            command_id: env.command_id,
            schema_version: env.schema_version,
            location,
            error,
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "command `{}` ({}, id {:#018x}, schema v{}) failed on rank {} at op_id {}",
            self.wire_name, self.debug_name, self.command_id, self.schema_version, self.rank, self.op_id
        )?;
        writeln!(f, "  handler: {}", self.location)?;
        if let Some(o) = &self.error.object {
            writeln!(f, "  object: {o}")?;
        }
        for a in &self.error.backend_attempts {
            writeln!(f, "  backend attempt: {a}")?;
        }
        for (i, c) in self.error.chain.iter().enumerate() {
            if i == 0 {
                writeln!(f, "  cause: {c}")?;
            } else {
                writeln!(f, "    caused by: {c}")?;
            }
        }
        Ok(())
    }
}

/// The ranks of an SPMD universe computed different plans for one
/// collective operation (design note `distributed_kernel_dispatch.md`, not
/// in this repository, "Collective acceptance": a disagreement is a terminal plan-construction
/// error, never a fallback). Every rank computes the same value from the
/// plan digests all ranks exchanged, so every rank reports the same text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
    /// The operation as rank 0 named it (e.g. `uni20.contract.v1`).
    pub operation: String,
    /// Rank 0's op id of the operation.
    pub op_id: u64,
    /// The ranks grouped by identical plan, the group of rank 0 first, each
    /// group in rank order.
    pub groups: Vec<Vec<usize>>,
    /// The first plan field that differs between the first two groups
    /// (`operation` or `op_id` when the ranks are not even at the same
    /// operation), when one can be named.
    pub field: Option<String>,
}

fn rank_list(ranks: &[usize]) -> String {
    let list: Vec<String> = ranks.iter().map(ToString::to_string).collect();
    format!("rank{} {}", if ranks.len() == 1 { "" } else { "s" }, list.join(", "))
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "plan disagreement in `{}` at op_id {}: {} computed one plan",
            self.operation,
            self.op_id,
            rank_list(self.groups.first().map_or(&[][..], Vec::as_slice))
        )?;
        for g in self.groups.iter().skip(1) {
            write!(f, ", {} another", rank_list(g))?;
        }
        match &self.field {
            Some(field) => write!(f, "; first differing plan field: `{field}`"),
            None => Ok(()),
        }
    }
}

/// Root-side error of a distributed job or operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// A command failed on a rank.
    #[error("{0}")]
    Command(Box<Diagnostic>),
    /// Ranks disagree about the command registry; nothing was run.
    #[error("command registries differ between ranks; refusing to run:\n  {}", .differences.join("\n  "))]
    RegistryMismatch {
        /// One line per differing command.
        differences: Vec<String>,
    },
    /// The link-time registry itself is invalid.
    #[error(transparent)]
    Registry(#[from] crate::registry::RegistryError),
    /// Communication failed or the job was aborted.
    #[error(transparent)]
    Transport(#[from] crate::transport::TransportError),
    /// A message could not be decoded.
    #[error(transparent)]
    Decode(#[from] crate::envelope::DecodeError),
    /// The root asked for a command that is not registered.
    #[error("unknown command `{0}`: not in this binary's registry")]
    UnknownCommand(String),
    /// A reply did not match the operation in flight.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The job was stopped by an earlier failure (fail-stop); the text is
    /// that first failure.
    #[error("the job was stopped by an earlier failure: {0}")]
    Stopped(String),
    /// SPMD: the ranks computed different plans for a collective operation;
    /// nothing of it ran, and the universe stopped.
    #[error("{0}")]
    Disagreement(Box<Disagreement>),
    /// Start-up failed (bad configuration, rank count, a rank that could
    /// not be started or never arrived, MPI initialisation).
    #[error("start-up: {0}")]
    Startup(String),
    /// A runtime variable has a malformed value
    /// ([`RankConfig`](crate::config::RankConfig)); nothing was started.
    #[error("{variable}={value:?} is not valid: expected {expected}")]
    Config {
        /// The variable, e.g. `UNI20_RANKS`.
        variable: String,
        /// Its value as found.
        value: String,
        /// The accepted form, e.g. `an integer from 1 to 1024`.
        expected: String,
    },
}
