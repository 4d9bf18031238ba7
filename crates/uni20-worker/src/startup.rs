//! The start-up handshake: every worker must arrive and agree with the root
//! about the command registry before any command runs.
//!
//! Each worker sends a [`Hello`] with its registry signature (`TAG_HELLO`).
//! The root receives one hello per worker, each within the start-up timeout,
//! compares every signature with its own and answers every worker a [`Start`]
//! verdict (`TAG_START`). A rank that never arrives is a
//! [`JobError::Startup`]; any disagreement is a
//! [`JobError::RegistryMismatch`] on the root and a refusal on the workers.

use std::sync::Arc;

use crate::config::RankConfig;
use crate::diag::JobError;
use crate::envelope::{decode_exact, encode};
use crate::fault::FaultKind;
use crate::protocol::{Hello, Start};
use crate::registry::{diff_signatures, Registry};
use crate::transport::{Transport, TransportError, TAG_HELLO, TAG_START};

/// The root's side: waits for every worker's hello and sends the verdict.
///
/// # Errors
/// [`JobError::Startup`] if a rank does not arrive within the start-up
/// timeout, sends a malformed hello, or uses another chunk size,
/// [`JobError::RegistryMismatch`] if registries differ (every worker has been
/// told to stop),
/// [`JobError::Transport`] if communication fails.
pub(crate) fn root_handshake(t: &dyn Transport, registry: &Registry, config: &RankConfig) -> Result<(), JobError> {
    let n = t.size();
    let timeout = config.startup_timeout;
    let mut settings = Vec::new();
    let mine = registry.signatures();
    let mut differences = Vec::new();
    let mut arrived = vec![false; n];
    arrived[0] = true;
    for _ in 1..n {
        let (src, bytes) = t.recv_any_timeout(TAG_HELLO, timeout).map_err(|e| match e {
            TransportError::Timeout(_) => {
                let missing: Vec<String> = (0..n).filter(|r| !arrived[*r]).map(|r| r.to_string()).collect();
                JobError::Startup(format!(
                    "rank(s) {} did not arrive within {timeout:?} (set UNI20_STARTUP_TIMEOUT to wait longer)",
                    missing.join(", ")
                ))
            }
            other => JobError::Transport(other),
        })?;
        arrived[src] = true;
        let hello: Hello = decode_exact(&bytes, "hello").map_err(|e| {
            JobError::Startup(format!(
                "rank {src} sent a malformed hello ({e}): do all ranks run the same binary with the same \
                 UNI20_CHUNK_BYTES?"
            ))
        })?;
        if hello.chunk_bytes != config.chunk_bytes as u64 {
            settings.push(format!(
                "rank {} splits messages into chunks of {} bytes, rank 0 into chunks of {} bytes \
                 (UNI20_CHUNK_BYTES must be equal on every rank)",
                hello.rank, hello.chunk_bytes, config.chunk_bytes
            ));
        }
        if hello.digest != registry.digest() || hello.signatures != mine {
            differences.extend(diff_signatures(&mine, &hello.signatures, hello.rank));
            if differences.is_empty() {
                differences.push(format!("rank {} reports a different registry digest", hello.rank));
            }
        }
    }
    let verdict = if differences.is_empty() && settings.is_empty() {
        Start::Go
    } else {
        Start::Refuse(
            differences
                .iter()
                .chain(&settings)
                .cloned()
                .collect::<Vec<_>>()
                .join("; "),
        )
    };
    let verdict: Arc<[u8]> = encode(&verdict).into();
    for r in 1..n {
        t.post(r, TAG_START, verdict.clone())?;
    }
    if !differences.is_empty() {
        return Err(JobError::RegistryMismatch { differences });
    }
    if !settings.is_empty() {
        return Err(JobError::Startup(settings.join("; ")));
    }
    Ok(())
}

/// Why a worker did not get the go-ahead.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NoStart {
    /// The root refused to start; the text lists the differences.
    Refused(String),
    /// Communication failed or the job was aborted.
    Aborted(String),
}

/// A worker's side: sends its hello and waits for the verdict.
///
/// # Errors
/// [`NoStart::Refused`] when the root refuses to start,
/// [`NoStart::Aborted`] when communication fails (or the injected
/// `noarrive` fault keeps this rank away until the root gives up).
pub(crate) fn worker_handshake(t: &dyn Transport, registry: &Registry, config: &RankConfig) -> Result<(), NoStart> {
    let rank = t.rank();
    let faults = &config.faults;
    if faults.has(rank, FaultKind::NoArrive) {
        tracing::warn!(rank, "injected fault: never sending the start-up hello");
        // Wait to be aborted by the root's start-up timeout.
        let _ = t.recv(0, TAG_START);
        return Err(NoStart::Aborted("injected noarrive".into()));
    }
    let hello = Hello {
        rank,
        digest: registry.digest(),
        signatures: registry.signatures(),
        chunk_bytes: config.chunk_bytes as u64,
    };
    t.post(0, TAG_HELLO, encode(&hello).into())
        .map_err(|e| NoStart::Aborted(e.to_string()))?;
    match t.recv(0, TAG_START).map(|b| decode_exact::<Start>(&b, "start verdict")) {
        Ok(Ok(Start::Go)) => Ok(()),
        Ok(Ok(Start::Refuse(why))) => Err(NoStart::Refused(why)),
        Ok(Err(e)) => Err(NoStart::Aborted(e.to_string())),
        Err(e) => Err(NoStart::Aborted(e.to_string())),
    }
}
