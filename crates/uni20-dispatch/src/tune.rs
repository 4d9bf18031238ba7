//! Measured backend choice: a [`ShapeClass`] (dtype, GEMM dimensions m, n, k and batch
//! rounded to powers of two, thread budget), the [`TuneTable`] mapping classes to the fastest
//! backend with the timings that chose it (saved and loaded as JSON, one file per machine,
//! `UNI20_TUNE_FILE`), and the measurement that fills it. [`crate::BackendList::with_tuning`]
//! attaches a table to a list; the table only reorders the list per class, dispatch still
//! commits to the first backend that accepts.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::backend::ContractBackend;
use crate::dtype::DType;
use crate::problem::ContractProblem;
use crate::tensor::LocalTensor;

/// Environment variable naming the per-machine tuning file (see [`TuneTable::from_env`]).
pub const TUNE_FILE_ENV: &str = "UNI20_TUNE_FILE";

/// Version of the JSON file format written by [`TuneTable::save`].
pub const TUNE_FORMAT_VERSION: u32 = 1;

/// The class of a contraction for backend choice: its dtype, its GEMM dimensions (m = product
/// of the A-only output extents, n = B-only, k = contracted, batch = labels in A, B and the
/// output) each rounded to the nearest power of two in log scale ([`ShapeClass::bucket`]), and
/// the thread budget of the backend list (0 when the list was built without one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ShapeClass {
    /// Element type of the problem.
    pub dtype: DType,
    /// Bucket of m (rows of each GEMM).
    pub m: u64,
    /// Bucket of n (columns of each GEMM).
    pub n: u64,
    /// Bucket of k (contracted extent).
    pub k: u64,
    /// Bucket of the batch count.
    pub batch: u64,
    /// Thread budget of the list.
    pub threads: u32,
}

impl ShapeClass {
    /// The class of `problem` for a list with thread budget `threads`. Labels summed in one
    /// operand only do not count.
    pub fn of(problem: &ContractProblem<'_>, threads: usize) -> ShapeClass {
        let cls = problem.classes();
        let prod = |ls: &[char]| {
            ls.iter()
                .map(|&l| problem.dim(l).unwrap_or(1) as u128)
                .fold(1u128, |a, d| a.saturating_mul(d))
        };
        ShapeClass {
            dtype: problem.dtype(),
            m: Self::bucket(prod(&cls.free_a)),
            n: Self::bucket(prod(&cls.free_b)),
            k: Self::bucket(prod(&cls.contracted)),
            batch: Self::bucket(prod(&cls.batch)),
            threads: u32::try_from(threads).unwrap_or(u32::MAX),
        }
    }

    /// `x` rounded to the nearest power of two in log scale (`2^round(log2 x)`, so 3..=5 give
    /// 4, 6..=11 give 8, 724..=1448 give 1024); 0 stays 0; capped at 2^63.
    pub fn bucket(x: u128) -> u64 {
        if x == 0 {
            return 0;
        }
        let lo = 127 - x.leading_zeros(); // floor(log2 x)
                                          // Round up when x >= 2^lo * sqrt(2), i.e. x^2 >= 2^(2 lo + 1).
        let up = x.checked_mul(x).is_none_or(|sq| sq >= 1u128 << (2 * lo + 1));
        1u64 << (lo + u32::from(up)).min(63)
    }
}

impl ShapeClass {
    fn key(&self) -> (usize, u32, u64, u64, u64, u64) {
        let dt = DType::ALL.iter().position(|&d| d == self.dtype).unwrap_or(0);
        (dt, self.threads, self.m, self.n, self.k, self.batch)
    }
}

impl PartialOrd for ShapeClass {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ShapeClass {
    /// By dtype (narrowest first), thread budget, m, n, k, batch.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl fmt::Display for ShapeClass {
    /// `f64 m~1024 n~1024 k~1024 batch~1 threads=2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} m~{} n~{} k~{} batch~{} threads={}",
            self.dtype, self.m, self.n, self.k, self.batch, self.threads
        )
    }
}

/// What the table holds for one class: the backend chosen and the measured median seconds of
/// every backend that accepted the measured problem (fastest first).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneEntry {
    /// Name of the fastest backend ([`ContractBackend::name`]).
    pub backend: String,
    /// `(backend name, median seconds)` of each measured backend, fastest first.
    pub timings: Vec<(String, f64)>,
}

impl fmt::Display for TuneEntry {
    /// `blas (blas 12.300 ms, faer 14.100 ms)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (", self.backend)?;
        for (i, (name, secs)) in self.timings.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{name} {:.3} ms", secs * 1e3)?;
        }
        f.write_str(")")
    }
}

/// Error reading or writing a tuning file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuneError {
    /// The file could not be read or written.
    #[error("tuning file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a tuning table of a known version.
    #[error("tuning file {path} is not a uni20 tuning table: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The JSON file: `{"version": 1, "entries": [{"class": {...}, "entry": {...}}, ...]}`.
#[derive(Serialize, Deserialize)]
struct TuneFile {
    version: u32,
    entries: Vec<FileEntry>,
}

#[derive(Serialize, Deserialize)]
struct FileEntry {
    class: ShapeClass,
    entry: TuneEntry,
}

/// A table of measured backend choices, shared by the lists it is attached to
/// (`Arc<TuneTable>`; interior locking, so dispatch can record new classes).
///
/// For a class with an entry, dispatch tries the entry's backend first and the others in the
/// list's order. For a class without one, a table that [`measures new classes`](Self::measuring)
/// times every accepting backend on the problem ([`measure`]) and records the fastest (saving
/// the table when it was [opened](Self::open) from a file); otherwise the list's static order
/// applies.
#[derive(Debug, Default)]
pub struct TuneTable {
    entries: Mutex<BTreeMap<ShapeClass, TuneEntry>>,
    measure_new: bool,
    path: Option<PathBuf>,
    /// Serialises the merge-and-save of [`record`](Self::record) between threads.
    saving: Mutex<()>,
}

impl TuneTable {
    /// An empty table that does not measure new classes.
    pub fn new() -> TuneTable {
        TuneTable::default()
    }

    /// The same table, measuring classes seen for the first time (`true`) or leaving them to
    /// the static order (`false`).
    pub fn measuring(self, measure_new: bool) -> TuneTable {
        TuneTable { measure_new, ..self }
    }

    /// Whether classes without an entry are measured when first seen.
    pub fn measures_new(&self) -> bool {
        self.measure_new
    }

    /// The table stored at `path` (written by [`save`](Self::save)); it does not measure new
    /// classes and is not written back.
    ///
    /// # Errors
    /// [`TuneError::Io`] if the file cannot be read, [`TuneError::Format`] if it is not a
    /// tuning table of version [`TUNE_FORMAT_VERSION`].
    pub fn load(path: impl AsRef<Path>) -> Result<TuneTable, TuneError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| TuneError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let file: TuneFile = serde_json::from_str(&text).map_err(|e| TuneError::Format {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        if file.version != TUNE_FORMAT_VERSION {
            return Err(TuneError::Format {
                path: path.to_path_buf(),
                reason: format!("version {} (this build reads {TUNE_FORMAT_VERSION})", file.version),
            });
        }
        let entries = file.entries.into_iter().map(|e| (e.class, e.entry)).collect();
        Ok(TuneTable {
            entries: Mutex::new(entries),
            ..TuneTable::default()
        })
    }

    /// The per-machine table at `path`: its entries if the file exists (an empty table if
    /// not), measuring new classes, and saving itself to `path` after each new measurement
    /// (entries another process saved meanwhile are merged in; a failed save is logged as a
    /// warning and does not fail the contraction).
    ///
    /// # Errors
    /// As [`load`](Self::load) for an existing file.
    pub fn open(path: impl AsRef<Path>) -> Result<TuneTable, TuneError> {
        let path = path.as_ref();
        let table = if path.exists() {
            TuneTable::load(path)?
        } else {
            TuneTable::new()
        };
        Ok(TuneTable {
            measure_new: true,
            path: Some(path.to_path_buf()),
            ..table
        })
    }

    /// [`open`](Self::open) of the file named by `UNI20_TUNE_FILE`, or `None` if the variable
    /// is unset or empty.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn from_env() -> Result<Option<TuneTable>, TuneError> {
        match std::env::var_os(TUNE_FILE_ENV) {
            Some(p) if !p.is_empty() => TuneTable::open(PathBuf::from(p)).map(Some),
            _ => Ok(None),
        }
    }

    /// The file this table saves itself to after new measurements, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<ShapeClass, TuneEntry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The entry of `class`, if any.
    pub fn get(&self, class: &ShapeClass) -> Option<TuneEntry> {
        self.lock().get(class).cloned()
    }

    /// Records `entry` for `class` (replacing any earlier one). Does not save.
    pub fn insert(&self, class: ShapeClass, entry: TuneEntry) {
        self.lock().insert(class, entry);
    }

    /// Every entry, ordered by class.
    pub fn entries(&self) -> Vec<(ShapeClass, TuneEntry)> {
        self.lock().iter().map(|(c, e)| (*c, e.clone())).collect()
    }

    /// Number of classes in the table.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True if the table has no entry.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Writes the table to `path` as JSON (format version [`TUNE_FORMAT_VERSION`]) through a
    /// temporary file in the same directory (named after the process and a per-process
    /// counter) renamed over `path`, so readers never see a partial file. Concurrent savers
    /// (threads or processes) each write a whole file; the last rename wins.
    ///
    /// # Errors
    /// [`TuneError::Io`] if the file cannot be written.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), TuneError> {
        let path = path.as_ref();
        let file = TuneFile {
            version: TUNE_FORMAT_VERSION,
            entries: self
                .entries()
                .into_iter()
                .map(|(class, entry)| FileEntry { class, entry })
                .collect(),
        };
        let io = |source| TuneError::Io {
            path: path.to_path_buf(),
            source,
        };
        let text = serde_json::to_string_pretty(&file).map_err(|e| io(std::io::Error::other(e)))?;
        let name = path
            .file_name()
            .map_or_else(|| "tune".into(), |n| n.to_string_lossy().into_owned());
        static SAVES: AtomicU64 = AtomicU64::new(0);
        let n = SAVES.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_file_name(format!(".{name}.tmp-{}-{n}", std::process::id()));
        std::fs::write(&tmp, text + "\n").map_err(io)?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(e)
        })
    }

    /// Records a new measurement and, for an opened table, saves it merged with the file.
    pub(crate) fn record(&self, class: ShapeClass, entry: TuneEntry) {
        self.insert(class, entry);
        let Some(path) = &self.path else {
            return;
        };
        let _one_at_a_time = self.saving.lock().unwrap_or_else(|p| p.into_inner());
        if let Ok(on_disk) = TuneTable::load(path) {
            let mut mine = self.lock();
            for (c, e) in on_disk.entries() {
                mine.entry(c).or_insert(e);
            }
        }
        if let Err(e) = self.save(path) {
            tracing::warn!(target: "uni20_dispatch", error = %e, "could not save the tuning table");
        }
    }
}

impl fmt::Display for TuneTable {
    /// One line per class: `<class> -> <entry>`; `(empty)` for an empty table.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.entries();
        if entries.is_empty() {
            return f.write_str("(empty)");
        }
        for (i, (c, e)) in entries.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{c} -> {e}")?;
        }
        Ok(())
    }
}

/// Timed rounds per backend at most (after one untimed warm-up run each).
const MAX_ROUNDS: usize = 5;
/// Timed rounds stop early once this much time was spent measuring (at least one round).
const ROUND_BUDGET: Duration = Duration::from_millis(300);

/// Times every backend of `backends` that is a [tuning candidate](ContractBackend::tune_candidate)
/// and accepts `problem` on it: one warm-up run each,
/// then interleaved rounds (each backend once per round, up to 5 rounds or until 0.3 s
/// have been spent), keeping each backend's median. A backend whose run fails is left out
/// (logged as a warning). Returns the entry (fastest first) and the fastest backend's last
/// result, or `None` when fewer than two backends accepted and ran.
pub fn measure(
    backends: &[Arc<dyn ContractBackend>],
    problem: &ContractProblem<'_>,
) -> Option<(TuneEntry, LocalTensor)> {
    let accepting: Vec<&Arc<dyn ContractBackend>> = backends
        .iter()
        .filter(|b| b.tune_candidate() && b.accepts_types(problem.dtype()).is_ok() && b.accepts(problem).is_ok())
        .collect();
    if accepting.len() < 2 {
        return None;
    }
    /// A backend being measured: its timings and its last result.
    type Slot<'b> = (&'b Arc<dyn ContractBackend>, Vec<f64>, Option<LocalTensor>);
    let mut alive: Vec<Slot<'_>> = Vec::new();
    for b in accepting {
        match b.run(problem) {
            Ok(t) => alive.push((b, Vec::new(), Some(t))),
            Err(e) => {
                tracing::warn!(target: "uni20_dispatch", backend = %b.name(), error = %e, "backend failed while being measured")
            }
        }
    }
    if alive.len() < 2 {
        return None;
    }
    let start = Instant::now();
    for round in 0..MAX_ROUNDS {
        if round > 0 && start.elapsed() > ROUND_BUDGET {
            break;
        }
        // Rotate the order so no backend always runs right after another.
        let n = alive.len();
        for i in 0..n {
            let slot = &mut alive[(i + round) % n];
            let t = Instant::now();
            if let Ok(out) = slot.0.run(problem) {
                slot.1.push(t.elapsed().as_secs_f64());
                slot.2 = Some(out);
            }
        }
    }
    let mut timed: Vec<(String, f64, Option<LocalTensor>)> = alive
        .into_iter()
        .filter(|(_, ts, _)| !ts.is_empty())
        .map(|(b, mut ts, out)| {
            ts.sort_by(f64::total_cmp);
            (b.name().to_string(), ts[ts.len() / 2], out)
        })
        .collect();
    timed.sort_by(|x, y| x.1.total_cmp(&y.1));
    let mut it = timed.into_iter();
    let (best, best_secs, best_out) = it.next()?;
    let rest: Vec<(String, f64)> = it.map(|(n, s, _)| (n, s)).collect();
    if rest.is_empty() {
        return None;
    }
    let mut timings = vec![(best.clone(), best_secs)];
    timings.extend(rest);
    Some((TuneEntry { backend: best, timings }, best_out?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_round_in_log_scale() {
        let cases = [
            (0u128, 0u64),
            (1, 1),
            (2, 2),
            (3, 4),
            (5, 4),
            (6, 8),
            (11, 8),
            (12, 16),
            (724, 512),
            (725, 1024),
            (1448, 1024),
            (1449, 2048),
        ];
        for (x, b) in cases {
            assert_eq!(ShapeClass::bucket(x), b, "{x}");
        }
        assert_eq!(ShapeClass::bucket(u128::MAX), 1 << 63);
    }

    #[test]
    fn display_forms() {
        let c = ShapeClass {
            dtype: DType::F64,
            m: 1024,
            n: 8,
            k: 2,
            batch: 1,
            threads: 2,
        };
        assert_eq!(c.to_string(), "f64 m~1024 n~8 k~2 batch~1 threads=2");
        let e = TuneEntry {
            backend: "blas".into(),
            timings: vec![("blas".into(), 0.0123), ("faer".into(), 0.0141)],
        };
        assert_eq!(e.to_string(), "blas (blas 12.300 ms, faer 14.100 ms)");
        let t = TuneTable::new();
        assert_eq!(t.to_string(), "(empty)");
        t.insert(c, e);
        assert_eq!(
            t.to_string(),
            "f64 m~1024 n~8 k~2 batch~1 threads=2 -> blas (blas 12.300 ms, faer 14.100 ms)"
        );
    }
}
