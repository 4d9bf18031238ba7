//! The tuning table: a table entry reorders the backend list for its shape class (and only
//! for it), a measurement on first sight records the fastest backend, a saved table is
//! reloaded with the same entries, and bad files are refused with typed errors.

mod kernels_common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kernels_common::Declining;
use uni20_dispatch::backends::*;
use uni20_dispatch::tune::*;
use uni20_dispatch::view::*;
use uni20_dispatch::*;

/// A backend that computes through the reference backend after sleeping `delay`, counting
/// its runs.
struct Slow {
    name: &'static str,
    delay: Duration,
    runs: AtomicUsize,
}

impl Slow {
    fn new(name: &'static str, millis: u64) -> Arc<Slow> {
        Arc::new(Slow {
            name,
            delay: Duration::from_millis(millis),
            runs: AtomicUsize::new(0),
        })
    }
}

impl ContractBackend for Slow {
    fn name(&self) -> &str {
        self.name
    }
    fn run(&self, p: &ContractProblem<'_>) -> Result<LocalTensor, KernelError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        ReferenceBackend.run(p)
    }
}

fn one() -> C64 {
    C64::new(1.0, 0.0)
}
fn zero() -> C64 {
    C64::new(0.0, 0.0)
}

fn mats(n: usize) -> (LocalTensor, LocalTensor) {
    let a = LocalTensor::from_f64(&[n, n], (0..n * n).map(|x| x as f64).collect()).unwrap();
    let b = LocalTensor::from_f64(&[n, n], (0..n * n).map(|x| 1.0 - x as f64).collect()).unwrap();
    (a, b)
}

fn class_of(n: usize, threads: usize) -> ShapeClass {
    let (a, b) = mats(n);
    let ops = [AnyView::of_tensor(&a), AnyView::of_tensor(&b)];
    let p = ContractProblem::new("ij,jk->ik", one(), &ops, zero(), None).unwrap();
    ShapeClass::of(&p, threads)
}

fn ran(list: &BackendList, n: usize) -> String {
    let (a, b) = mats(n);
    let (out, attempts) = contract_with_attempts("ij,jk->ik", one(), &a, &b, zero(), None, list).unwrap();
    let want = contract("ij,jk->ik", one(), &a, &b, zero(), None, &BackendList::reference_only()).unwrap();
    assert_eq!(out.max_abs_diff(&want), Some(0.0));
    attempts.last().unwrap().backend.clone()
}

#[test]
fn shape_class_of_a_problem() {
    let c = class_of(6, 2);
    assert_eq!(
        (c.dtype, c.m, c.n, c.k, c.batch, c.threads),
        (DType::F64, 8, 8, 8, 1, 2)
    );
    // A batched, permuted contraction: m = a*c, n = e, k = b*d, batch = x.
    let a = LocalTensor::from_f64(&[3, 4, 5, 6, 2], vec![0.0; 720]).unwrap();
    let b = LocalTensor::from_f64(&[6, 4, 7, 2], vec![0.0; 336]).unwrap();
    let ops = [AnyView::of_tensor(&a), AnyView::of_tensor(&b)];
    let p = ContractProblem::new("abcdx,dbex->xace", one(), &ops, zero(), None).unwrap();
    let c = ShapeClass::of(&p, 1);
    assert_eq!((c.m, c.n, c.k, c.batch), (16, 8, 32, 2)); // 15, 7, 24, 2 rounded
}

/// A table entry choosing `backend`, with no timings.
fn entry(backend: &str) -> TuneEntry {
    TuneEntry {
        backend: backend.into(),
        timings: vec![],
    }
}

#[test]
fn table_entry_changes_the_chosen_backend() {
    let fast = Slow::new("fast", 0);
    let slow = Slow::new("slow", 0);
    let list = BackendList::new(vec![slow.clone(), fast.clone()]).with_thread_budget(1);
    // Static order: the first backend.
    assert_eq!(ran(&list, 4), "slow");
    let table = Arc::new(TuneTable::new());
    table.insert(
        class_of(4, 1),
        TuneEntry {
            timings: vec![("fast".into(), 1e-3), ("slow".into(), 2e-3)],
            ..entry("fast")
        },
    );
    let tuned = list.clone().with_tuning(table.clone());
    assert_eq!(ran(&tuned, 4), "fast");
    // Another class is untouched (the table does not measure): static order.
    assert_eq!(ran(&tuned, 32), "slow");
    assert_eq!(table.len(), 1);
    // An entry naming a backend the list lacks leaves the static order.
    table.insert(class_of(32, 1), entry("gone"));
    assert_eq!(ran(&tuned, 32), "slow");
    // The table entry does not override a decline: a backend that declines is passed over.
    let declines = Declining {
        name: "fast",
        reason: "never",
    };
    let declining = BackendList::new(vec![slow.clone(), Arc::new(declines)])
        .with_thread_budget(1)
        .with_tuning(table);
    assert_eq!(ran(&declining, 4), "slow");
}

#[test]
fn first_sight_measurement_records_the_fastest() {
    let fast = Slow::new("fast", 1);
    let slow = Slow::new("slow", 25);
    let table = Arc::new(TuneTable::new().measuring(true));
    let list = BackendList::new(vec![slow.clone(), fast.clone()])
        .with_thread_budget(1)
        .with_tuning(table.clone());
    assert_eq!(ran(&list, 4), "fast");
    let entry = table.get(&class_of(4, 1)).expect("measured on first sight");
    assert_eq!(entry.backend, "fast");
    let names: Vec<&str> = entry.timings.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["fast", "slow"]);
    assert!(entry.timings[0].1 < entry.timings[1].1);
    assert!(entry.timings[1].1 >= 0.025);
    // Measured: a warm-up and at least one timed round each; the result came from the
    // measurement (no extra run).
    let fast_runs = fast.runs.load(Ordering::SeqCst);
    assert!(fast_runs >= 2, "{fast_runs}");
    // The second call of the class uses the table: exactly one more run of `fast`.
    let slow_runs = slow.runs.load(Ordering::SeqCst);
    assert_eq!(ran(&list, 4), "fast");
    assert_eq!(fast.runs.load(Ordering::SeqCst), fast_runs + 1);
    assert_eq!(slow.runs.load(Ordering::SeqCst), slow_runs);
}

#[test]
fn saved_table_is_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tune.json");
    // An opened table measures new classes and saves itself.
    let table = Arc::new(TuneTable::open(&path).unwrap());
    assert!(table.is_empty() && table.measures_new());
    assert_eq!(table.path(), Some(path.as_path()));
    let fast = Slow::new("fast", 1);
    let slow = Slow::new("slow", 20);
    let list = BackendList::new(vec![slow.clone(), fast.clone()])
        .with_thread_budget(1)
        .with_tuning(table.clone());
    assert_eq!(ran(&list, 4), "fast");
    assert!(path.exists(), "saved after the measurement");

    let loaded = TuneTable::load(&path).unwrap();
    assert_eq!(loaded.entries(), table.entries());
    assert!(!loaded.measures_new());
    assert_eq!(loaded.to_string(), table.to_string());
    // A fresh list with the loaded table chooses from it, without measuring.
    let fast2 = Slow::new("fast", 0);
    let slow2 = Slow::new("slow", 0);
    let list2 = BackendList::new(vec![slow2.clone(), fast2.clone()])
        .with_thread_budget(1)
        .with_tuning(Arc::new(loaded));
    assert_eq!(ran(&list2, 4), "fast");
    assert_eq!(
        (fast2.runs.load(Ordering::SeqCst), slow2.runs.load(Ordering::SeqCst)),
        (1, 0)
    );

    // Explicit save and reopen keep entries; open merges what is on disk.
    let other = dir.path().join("other.json");
    table.save(&other).unwrap();
    let reopened = TuneTable::open(&other).unwrap();
    assert_eq!(reopened.entries(), table.entries());

    // Bad files: typed errors.
    let missing = TuneTable::load(dir.path().join("missing.json")).unwrap_err();
    assert!(matches!(missing, TuneError::Io { .. }), "{missing}");
    std::fs::write(dir.path().join("bad.json"), "not json").unwrap();
    let bad = TuneTable::load(dir.path().join("bad.json")).unwrap_err();
    assert!(matches!(bad, TuneError::Format { .. }), "{bad}");
    std::fs::write(dir.path().join("v9.json"), r#"{"version": 9, "entries": []}"#).unwrap();
    let v9 = TuneTable::load(dir.path().join("v9.json")).unwrap_err();
    assert!(v9.to_string().contains("version 9"), "{v9}");
}

#[test]
fn explicit_tune_records_an_entry() {
    let table = Arc::new(TuneTable::new());
    let fast = Slow::new("fast", 1);
    let slow = Slow::new("slow", 15);
    let list = BackendList::new(vec![slow, fast])
        .with_thread_budget(3)
        .with_tuning(table.clone());
    let (a, b) = mats(5);
    let ops = [AnyView::of_tensor(&a), AnyView::of_tensor(&b)];
    let p = ContractProblem::new("ij,jk->ik", one(), &ops, zero(), None).unwrap();
    let entry = list.tune(&p).unwrap();
    assert_eq!(entry.backend, "fast");
    assert_eq!(table.get(&ShapeClass::of(&p, 3)), Some(entry));
    // One candidate (the reference is never timed): nothing to choose, nothing recorded.
    let single = BackendList::new(vec![Slow::new("only", 0), Arc::new(ReferenceBackend)])
        .with_tuning(Arc::new(TuneTable::new()));
    assert_eq!(single.tune(&p), None);
    assert!(single.tuning().unwrap().is_empty());
}

/// With the BLAS feature, the real default list: faer runs in the static order; a table entry
/// for BLAS makes BLAS run that class; a measuring table records one of the two.
#[cfg(feature = "blas")]
#[test]
fn table_switches_between_faer_and_blas() {
    let list = BackendList::default_cpu(1);
    assert_eq!(ran(&list, 16), "faer");
    let table = Arc::new(TuneTable::new());
    table.insert(class_of(16, 1), entry("blas"));
    let tuned = list.clone().with_tuning(table);
    assert_eq!(ran(&tuned, 16), "blas");
    assert_eq!(ran(&tuned, 64), "faer");
    let measuring = Arc::new(TuneTable::new().measuring(true));
    let chosen = ran(&list.clone().with_tuning(measuring.clone()), 48);
    let entry = measuring.get(&class_of(48, 1)).expect("measured");
    assert_eq!(entry.backend, chosen);
    let mut names: Vec<&str> = entry.timings.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["blas", "faer"]);
}

#[test]
fn shared_table_saved_from_several_threads_stays_valid() {
    // In-process ranks share one opened table: concurrent first-sight measurements of
    // different classes each save it; the file is always a whole table with every class.
    // (The slow backend sleeps 20 ms: with four threads on two loaded cores, a 2 ms gap
    // was within the preemption of the fast one, and the measurement picked "slow".)
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.json");
    let table = Arc::new(TuneTable::open(&path).unwrap());
    std::thread::scope(|s| {
        for n in [2usize, 4, 8, 16] {
            let table = table.clone();
            s.spawn(move || {
                let list = BackendList::new(vec![Slow::new("slow", 20), Slow::new("fast", 0)])
                    .with_thread_budget(1)
                    .with_tuning(table);
                assert_eq!(ran(&list, n), "fast");
            });
        }
    });
    assert_eq!(table.len(), 4);
    let loaded = TuneTable::load(&path).unwrap();
    assert_eq!(loaded.entries(), table.entries());
    // No temporary files are left beside it.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["shared.json"]);
}
