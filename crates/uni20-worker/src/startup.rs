//! The start-up handshake: every worker must arrive and agree with the root
//! about the command registry before any command runs.
//!
//! Each worker sends an [`Arrival`] (`TAG_HELLO`): its [`Hello`] with its
//! registry signature, or, when its preparation failed (store, lock,
//! registry, configuration), the [`StartupFailure`] saying why
//! ([`worker_failed_handshake`]). The root receives one arrival per worker,
//! each within the start-up timeout, compares every signature with its own
//! and answers every worker a [`Start`] verdict (`TAG_START`). A failed
//! arrival ends the wait at once: the root refuses to start with
//! `rank R failed at start-up: <error>` (a [`JobError::Startup`]), so the
//! start-up timeout applies only to ranks that never arrive. Any
//! disagreement is a [`JobError::RegistryMismatch`] on the root and a
//! refusal on the workers.

use std::sync::Arc;

use crate::config::RankConfig;
use crate::diag::JobError;
use crate::envelope::{decode_exact, encode};
use crate::fault::FaultKind;
use crate::protocol::{Arrival, Hello, Start, StartupFailure};
use crate::registry::{diff_signatures, Registry};
use crate::transport::{Transport, TransportError, TAG_HELLO, TAG_START};

/// The failure of `rank`'s preparation as it travels to the root: the
/// error's own text (without the `start-up:` prefix of
/// [`JobError::Startup`]).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn failure_of(rank: usize, e: JobError) -> StartupFailure {
    let error = match e {
        JobError::Startup(m) => m,
        other => other.to_string(),
    };
    StartupFailure { rank, error }
}

impl StartupFailure {
    /// The failure as the error a launch returns:
    /// `JobError::Startup("rank R failed at start-up: <error>")`.
    pub(crate) fn into_error(self) -> JobError {
        JobError::Startup(self.describe())
    }
}

/// The root's side: waits for every worker's arrival and sends the verdict.
///
/// # Errors
/// [`JobError::Startup`] if a worker reports a start-up failure (the text
/// is `rank R failed at start-up: <error>`, one per failed rank that has
/// arrived; the root stops waiting for the others at once), a rank does
/// not arrive within the start-up timeout, sends a malformed hello, or
/// uses another chunk size,
/// [`JobError::RegistryMismatch`] if registries differ (every worker has been
/// told to stop),
/// [`JobError::Transport`] if communication fails.
pub(crate) fn root_handshake(t: &dyn Transport, registry: &Registry, config: &RankConfig) -> Result<(), JobError> {
    let n = t.size();
    let timeout = config.startup_timeout;
    let mut settings = Vec::new();
    let mine = registry.signatures();
    let mut differences = Vec::new();
    let mut failures: Vec<StartupFailure> = Vec::new();
    let mut arrived = vec![false; n];
    arrived[0] = true;
    for _ in 1..n {
        let next = if failures.is_empty() {
            t.recv_any_timeout(TAG_HELLO, timeout).map(Some)
        } else {
            // The job will not run: report the failures that have already
            // arrived with the first, and wait for nobody.
            t.try_recv(None, TAG_HELLO)
        };
        let Some((src, bytes)) = next.map_err(|e| match e {
            TransportError::Timeout(_) => {
                let missing: Vec<String> = (0..n).filter(|r| !arrived[*r]).map(|r| r.to_string()).collect();
                JobError::Startup(format!(
                    "rank(s) {} did not arrive within {timeout:?} (set UNI20_STARTUP_TIMEOUT to wait longer)",
                    missing.join(", ")
                ))
            }
            other => JobError::Transport(other),
        })?
        else {
            break;
        };
        arrived[src] = true;
        let arrival: Arrival = decode_exact(&bytes, "hello").map_err(|e| {
            JobError::Startup(format!(
                "rank {src} sent a malformed hello ({e}): do all ranks run the same binary with the same \
                 UNI20_CHUNK_BYTES?"
            ))
        })?;
        let hello = match arrival {
            Arrival::Ready(hello) => hello,
            Arrival::Failed(failure) => {
                failures.push(failure);
                continue;
            }
        };
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
    let failed = failures
        .iter()
        .map(StartupFailure::describe)
        .collect::<Vec<_>>()
        .join("; ");
    let verdict = if !failures.is_empty() {
        Start::Refuse(failed.clone())
    } else if differences.is_empty() && settings.is_empty() {
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
    if !failures.is_empty() {
        return Err(JobError::Startup(failed));
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
    t.post(0, TAG_HELLO, encode(&Arrival::Ready(hello)).into())
        .map_err(|e| NoStart::Aborted(e.to_string()))?;
    match t.recv(0, TAG_START).map(|b| decode_exact::<Start>(&b, "start verdict")) {
        Ok(Ok(Start::Go)) => Ok(()),
        Ok(Ok(Start::Refuse(why))) => Err(NoStart::Refused(why)),
        Ok(Err(e)) => Err(NoStart::Aborted(e.to_string())),
        Err(e) => Err(NoStart::Aborted(e.to_string())),
    }
}

/// A worker whose preparation failed: arrives anyway, with `failure`, and
/// waits for the root's verdict, which is then a refusal naming this rank
/// (or the abort of the job), so that the root ends the job at once with
/// this rank's error instead of waiting for the start-up timeout. Returns
/// how the wait ended (the refusal's text, or the abort), for the log.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn worker_failed_handshake(t: &dyn Transport, failure: &StartupFailure) -> String {
    tracing::error!(rank = t.rank(), "{}", failure.describe());
    let arrival: Arc<[u8]> = encode(&Arrival::Failed(failure.clone())).into();
    if let Err(e) = t.post(0, TAG_HELLO, arrival) {
        return e.to_string();
    }
    match t.recv(0, TAG_START).map(|b| decode_exact::<Start>(&b, "start verdict")) {
        Ok(Ok(Start::Refuse(why))) => why,
        Ok(Ok(Start::Go)) => "the root answered go to a failed rank".into(),
        Ok(Err(e)) => e.to_string(),
        Err(e) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::inproc::{InProcessTransport, Shared};

    fn failure(rank: usize) -> StartupFailure {
        StartupFailure {
            rank,
            error: format!("opening the store in /data/rank-{rank}: Not a directory"),
        }
    }

    /// A worker whose preparation failed arrives with its failure: the root
    /// refuses at once (not after the 60 s start-up timeout) with that
    /// rank's error, and every worker, the one that never arrived included,
    /// gets the refusal naming it.
    #[test]
    fn a_failed_worker_ends_the_start_up_at_once_with_its_error() {
        let shared = Shared::new(4);
        let registry = Registry::linked().unwrap();
        let config = RankConfig {
            startup_timeout: Duration::from_secs(60),
            ..RankConfig::default()
        };
        let start = Instant::now();
        let (root, ready, failed, late) = std::thread::scope(|s| {
            let ready = s.spawn(|| worker_handshake(&InProcessTransport::new(1, shared.clone()), &registry, &config));
            let failed = s.spawn(|| worker_failed_handshake(&InProcessTransport::new(2, shared.clone()), &failure(2)));
            let root = root_handshake(&InProcessTransport::new(0, shared.clone()), &registry, &config);
            // Rank 3 arrives only after the root has given its verdict.
            let late = worker_handshake(&InProcessTransport::new(3, shared.clone()), &registry, &config);
            (root, ready.join().unwrap(), failed.join().unwrap(), late)
        });
        assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
        let want = "rank 2 failed at start-up: opening the store in /data/rank-2: Not a directory";
        match root {
            Err(JobError::Startup(m)) => assert_eq!(m, want),
            other => panic!("{other:?}"),
        }
        assert_eq!(ready, Err(NoStart::Refused(want.into())));
        assert_eq!(late, Err(NoStart::Refused(want.into())));
        assert_eq!(failed, want);
    }

    /// Failures that have arrived together are all reported; a rank that
    /// neither arrives nor fails is still waited for only until the
    /// start-up timeout.
    #[test]
    fn every_failure_that_has_arrived_is_reported_and_silence_still_times_out() {
        let shared = Shared::new(3);
        let registry = Registry::linked().unwrap();
        let config = RankConfig::default();
        for r in [1, 2] {
            let arrival: Arc<[u8]> = encode(&Arrival::Failed(failure(r))).into();
            InProcessTransport::new(r, shared.clone())
                .post(0, TAG_HELLO, arrival)
                .unwrap();
        }
        let root = root_handshake(&InProcessTransport::new(0, shared), &registry, &config);
        let Err(JobError::Startup(m)) = root else {
            panic!("{root:?}")
        };
        assert!(
            m.contains("rank 1 failed at start-up") && m.contains("rank 2 failed at start-up"),
            "{m}"
        );

        let shared = Shared::new(2);
        let config = RankConfig {
            startup_timeout: Duration::from_millis(200),
            ..RankConfig::default()
        };
        let root = root_handshake(&InProcessTransport::new(0, shared), &registry, &config);
        let Err(JobError::Startup(m)) = root else {
            panic!("{root:?}")
        };
        assert!(m.starts_with("rank(s) 1 did not arrive within 200ms"), "{m}");
    }

    /// The error of a failed preparation travels as its text, without the
    /// `start-up:` prefix of the error's display.
    #[test]
    fn a_failure_keeps_the_error_text() {
        let f = failure_of(3, JobError::Startup("no such thing".into()));
        assert_eq!(f.describe(), "rank 3 failed at start-up: no such thing");
        let f = failure_of(1, JobError::UnknownCommand("x.v1".into()));
        assert_eq!(
            f.into_error().to_string(),
            "start-up: rank 1 failed at start-up: unknown command `x.v1`: not in this binary's registry"
        );
    }
}
