//! Fault injection, for tests and for users debugging their own handlers.
//!
//! `UNI20_INJECT_FAULT=KIND@rank=R[,op=N]` makes rank `R` fail at operation
//! `N` (every operation when `op` is omitted). Several faults may be given,
//! separated by `;`. Kinds:
//!
//! | kind | where | effect |
//! |---|---|---|
//! | `error` | worker | the handler returns an error |
//! | `panic` | worker | the handler panics |
//! | `helperpanic` | worker | the handler panics on a helper thread it spawned (the panic reaches the handler as a scoped thread's) |
//! | `exit` | worker | the rank dies without replying (MPI: `exit(17)`; in-process: the rank thread ends) |
//! | `kill` | worker | MPI: the process sends itself `SIGKILL`; in-process: as `exit` |
//! | `ckptkill` | worker | inside a checkpoint commit: at the rank's `N`-th checkpoint flush, `uni20.flush.v1` or `uni20.flush_objects.v1` (`op` counts the flushes this rank has handled, 1 for the first; omitted: the first), after making about half of its store's pending objects durable and before the root commits the checkpoint record, the rank dies as with `kill` |
//! | `corrupt` | worker | every block the rank sends in a plan's transfers (worker to worker, storage rank to worker) in the operation has one byte flipped (the receiver's checksum check fails, naming the object and the sender); gathers to the root are not affected |
//! | `io` | worker | the rank's persistent store fails its next commit with an I/O error (`ENOSPC`) |
//! | `badreply` | worker | the rank replies with undecodable bytes |
//! | `noarrive` | worker | the rank never sends its start-up hello |
//! | `registry` | worker | the rank drops one command from its registry (a different build) |
//! | `spawn` | worker | in-process only: starting the rank's thread fails, as when the OS refuses a thread |
//! | `unknowncmd` | root | op `N` is sent with a command id no rank knows |
//! | `schema` | root | op `N` is sent with a descriptor schema version one too high |
//! | `garbage` | root | op `N` is sent with a garbage descriptor |
//! | `trailing` | root | op `N`'s descriptor gets a trailing byte |
//!
//! Malformed specifications are a start-up error: a typo must not silently
//! disable the fault a test relies on.

use std::fmt;

/// What an injected fault does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Handler returns an error.
    Error,
    /// Handler panics.
    Panic,
    /// Handler panics on a helper thread it spawned.
    HelperPanic,
    /// Rank dies without replying.
    Exit,
    /// Process kills itself with SIGKILL (MPI).
    Kill,
    /// The rank dies as with `Kill` inside a checkpoint commit: at its
    /// `op`-th flush, after part of its store is durable.
    CkptKill,
    /// Object payloads sent to other ranks have one byte flipped.
    Corrupt,
    /// Store write fails with an I/O error.
    Io,
    /// Reply is garbage.
    BadReply,
    /// Rank never arrives at start-up.
    NoArrive,
    /// Rank's registry lacks one command.
    Registry,
    /// The rank's thread cannot be spawned (in-process universe only).
    Spawn,
    /// Root sends an unknown command id.
    UnknownCmd,
    /// Root sends a wrong schema version.
    Schema,
    /// Root sends a garbage descriptor.
    Garbage,
    /// Root appends a trailing byte to the descriptor.
    Trailing,
}

impl FaultKind {
    fn parse(s: &str) -> Option<FaultKind> {
        Some(match s {
            "error" => FaultKind::Error,
            "panic" => FaultKind::Panic,
            "helperpanic" => FaultKind::HelperPanic,
            "exit" => FaultKind::Exit,
            "kill" => FaultKind::Kill,
            "ckptkill" => FaultKind::CkptKill,
            "corrupt" => FaultKind::Corrupt,
            "io" => FaultKind::Io,
            "badreply" => FaultKind::BadReply,
            "noarrive" => FaultKind::NoArrive,
            "registry" => FaultKind::Registry,
            "spawn" => FaultKind::Spawn,
            "unknowncmd" => FaultKind::UnknownCmd,
            "schema" => FaultKind::Schema,
            "garbage" => FaultKind::Garbage,
            "trailing" => FaultKind::Trailing,
            _ => return None,
        })
    }
}

/// One injected fault: a kind, a rank, and optionally an operation id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What happens.
    pub kind: FaultKind,
    /// Rank on which it happens.
    pub rank: usize,
    /// Operation at which it happens (`None`: every operation).
    pub op: Option<u64>,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = format!("{:?}", self.kind).to_lowercase();
        match self.op {
            Some(op) => write!(f, "{kind}@rank={},op={op}", self.rank),
            None => write!(f, "{kind}@rank={}", self.rank),
        }
    }
}

/// The faults configured for this process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    faults: Vec<Fault>,
}

impl FaultPlan {
    /// Parses `UNI20_INJECT_FAULT` (empty plan when unset).
    ///
    /// # Errors
    /// A one-line reason for a malformed specification.
    pub fn from_env() -> Result<FaultPlan, String> {
        match std::env::var("UNI20_INJECT_FAULT") {
            Ok(s) => FaultPlan::parse(&s),
            Err(_) => Ok(FaultPlan::default()),
        }
    }

    /// Parses a specification such as `panic@rank=1,op=2;io@rank=2`.
    ///
    /// # Errors
    /// A one-line reason for a malformed specification.
    pub fn parse(spec: &str) -> Result<FaultPlan, String> {
        let mut faults = Vec::new();
        for item in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let bad = |why: &str| format!("UNI20_INJECT_FAULT: `{item}`: {why} (expected KIND@rank=R[,op=N])");
            let (kind, rest) = item.split_once('@').ok_or_else(|| bad("missing `@`"))?;
            let kind = FaultKind::parse(kind.trim()).ok_or_else(|| bad("unknown kind"))?;
            let (mut rank, mut op) = (None, None);
            for kv in rest.split(',') {
                let (k, v) = kv.split_once('=').ok_or_else(|| bad("expected key=value"))?;
                let v: u64 = v.trim().parse().map_err(|_| bad("value is not a number"))?;
                match k.trim() {
                    "rank" => rank = Some(v as usize),
                    "op" => op = Some(v),
                    _ => return Err(bad("unknown key")),
                }
            }
            faults.push(Fault {
                kind,
                rank: rank.ok_or_else(|| bad("missing rank"))?,
                op,
            });
        }
        Ok(FaultPlan { faults })
    }

    /// Checks the plan against a universe of `size` ranks: every rank must
    /// exist, root-side kinds (`unknowncmd`, `schema`, `garbage`,
    /// `trailing`) must name rank 0 and worker-side kinds a worker
    /// (`ckptkill` a rank >= 1 even in a one-rank universe, whose root
    /// flushes its own store without a command), so a fault a test relies
    /// on can never be silently ignored.
    ///
    /// # Errors
    /// A one-line reason naming the offending fault.
    pub fn validate(&self, size: usize) -> Result<(), String> {
        for f in &self.faults {
            let root_kind = matches!(
                f.kind,
                FaultKind::UnknownCmd | FaultKind::Schema | FaultKind::Garbage | FaultKind::Trailing
            );
            let why = if f.rank >= size {
                format!("rank {} does not exist in a universe of {size} ranks", f.rank)
            } else if root_kind && f.rank != 0 {
                "this kind is injected by the root: use rank=0".to_string()
            } else if !root_kind && f.rank == 0 && (size > 1 || f.kind == FaultKind::CkptKill) {
                "this kind is injected on a worker: use a rank >= 1".to_string()
            } else {
                continue;
            };
            return Err(format!("UNI20_INJECT_FAULT: `{f}`: {why}"));
        }
        Ok(())
    }

    /// The fault of one of `kinds` that applies to `rank` at `op`, if any.
    pub fn at(&self, rank: usize, op: u64, kinds: &[FaultKind]) -> Option<Fault> {
        self.faults
            .iter()
            .copied()
            .find(|f| f.rank == rank && f.op.is_none_or(|o| o == op) && kinds.contains(&f.kind))
    }

    /// True if `kind` is injected on `rank` (at any operation).
    pub fn has(&self, rank: usize, kind: FaultKind) -> bool {
        self.faults.iter().any(|f| f.rank == rank && f.kind == kind)
    }

    /// True if `kind` is injected on any rank.
    pub fn has_kind(&self, kind: FaultKind) -> bool {
        self.faults.iter().any(|f| f.kind == kind)
    }

    /// Every configured fault, in the order given.
    pub fn faults(&self) -> &[Fault] {
        &self.faults
    }

    /// True if no fault is configured.
    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_matches() {
        let p = FaultPlan::parse("panic@rank=1,op=2; io@rank=2").unwrap();
        assert_eq!(
            p.at(1, 2, &[FaultKind::Panic]).unwrap().to_string(),
            "panic@rank=1,op=2"
        );
        assert!(p.at(1, 3, &[FaultKind::Panic]).is_none());
        assert!(p.at(2, 99, &[FaultKind::Io]).is_some());
        assert!(p.has(2, FaultKind::Io));
        assert!(FaultPlan::parse("").unwrap().is_empty());
        let k = FaultPlan::parse("ckptkill@rank=2,op=3").unwrap();
        assert_eq!(k.faults()[0].kind, FaultKind::CkptKill);
        assert_eq!(k.faults()[0].to_string(), "ckptkill@rank=2,op=3");
        assert!(k.validate(3).is_ok());
        assert!(k.validate(2).is_err());
        assert!(FaultPlan::parse("ckptkill@rank=0").unwrap().validate(1).is_err());
        for bad in [
            "panic",
            "boom@rank=1",
            "panic@rank=x",
            "panic@op=1",
            "panic@rank=1,when=2",
        ] {
            assert!(FaultPlan::parse(bad).is_err(), "{bad}");
        }
    }
}
