//! Distributed element-wise operations, reductions and contractions of
//! differently blocked operands against committed numpy fixtures
//! (`tests/fixtures/ops`, made by `scripts/gen_ops_fixtures.py`; the
//! contractions reuse `tests/fixtures/contract`), on 1-4 in-process ranks
//! with equal and different tilings of the operands. Element-wise results
//! must equal numpy's bit for bit (the fixtures' inputs are exact in every
//! dtype); reductions must match to 1e-12 relative.

mod common;

use std::path::{Path, PathBuf};

use uni20::prelude::*;
use uni20::{DistError, PlanSummary};

/// One case of `tests/fixtures/ops`.
struct OpCase {
    name: String,
    dir: PathBuf,
    words: Vec<String>,
}

fn op_cases() -> Vec<OpCase> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ops");
    let mut v: Vec<OpCase> = std::fs::read_dir(&root)
        .expect("tests/fixtures/ops: run scripts/gen_ops_fixtures.py")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|dir| {
            let op = std::fs::read_to_string(dir.join("op.txt")).unwrap();
            OpCase {
                name: dir.file_name().unwrap().to_string_lossy().into_owned(),
                words: op.split_whitespace().map(str::to_string).collect(),
                dir,
            }
        })
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// Checks the numbers every distributed operation promises.
fn check_summary(ctl: &Controller<'_>, s: &PlanSummary, what: &str) {
    assert_eq!(s.bytes_through_root, 0, "{what}: payload through the root");
    if ctl.size() > 1 {
        assert!(!s.participants.contains(&0), "{what}: the root took part");
    }
}

/// Runs one element-wise case with `a` tiled by `ba` and `b` by `bb`.
fn run_elementwise(ctl: &Controller<'_>, case: &OpCase, ba: usize, bb: usize) {
    let read = |f: &str, block: usize| read_npy(ctl, case.dir.join(f), block).unwrap();
    let a = read("a.npy", ba);
    let want = read("out.npy", 5).to_local(ctl).unwrap();
    let what = format!("{} ranks={} blocks={ba}/{bb}", case.name, ctl.size());
    let out = match case.words[0].as_str() {
        "axpby" => {
            let b = read("b.npy", bb);
            let (alpha, beta) = (
                common::parse_scalar(&case.words[2]),
                common::parse_scalar(&case.words[3]),
            );
            axpby(ctl, alpha, &a, beta, &b, &case.words[1]).unwrap()
        }
        "permute" => permute(ctl, &a, &case.words[1]).unwrap(),
        "reshape" => {
            let shape: Vec<usize> = case
                .words
                .get(1)
                .map(|s| s.split(',').map(|d| d.parse().unwrap()).collect())
                .unwrap_or_default();
            reshape(ctl, &a, &shape).unwrap()
        }
        other => panic!("{what}: unknown op {other}"),
    };
    let got = out.to_local(ctl).unwrap();
    assert_eq!(got, want, "{what}: differs from numpy");
    let s = out.plan_summary().expect("summary of an executed operation");
    check_summary(ctl, s, &what);
    if case.words[0] == "permute" {
        assert_eq!(s.bytes_moved, 0, "{what}: a permutation moves nothing");
    }
    if case.words[0] == "reshape" && s.notes.is_empty() {
        assert_eq!(s.bytes_moved, 0, "{what}: a reshape without reblock moves nothing");
    }
}

#[test]
fn elementwise_fixtures_match_numpy_exactly() {
    let cases: Vec<OpCase> = op_cases().into_iter().filter(|c| c.words[0] != "reduce").collect();
    assert!(cases.len() >= 18, "fixtures missing: found {}", cases.len());
    for ranks in [1, 2, 3, 4] {
        uni20::universe()
            .ranks(ranks)
            .run(|ctl| {
                for case in &cases {
                    for (ba, bb) in [(1, 1), (2, 3), (3, 2), (4, 4), (64, 64)] {
                        run_elementwise(ctl, case, ba, bb);
                    }
                }
            })
            .unwrap();
    }
}

fn rel_close(got: C64, want: C64, tol: f64, what: &str) {
    let err = (got - want).norm();
    assert!(
        err <= tol * want.norm().max(f64::MIN_POSITIVE),
        "{what}: got {got}, numpy {want} (relative error {:e})",
        err / want.norm()
    );
}

#[test]
fn reductions_match_numpy_to_1e_12() {
    let cases: Vec<OpCase> = op_cases().into_iter().filter(|c| c.words[0] == "reduce").collect();
    assert!(cases.len() >= 5, "fixtures missing: found {}", cases.len());
    for ranks in [1, 2, 3, 4] {
        uni20::universe()
            .ranks(ranks)
            .run(|ctl| {
                for case in &cases {
                    let want = read_npy(ctl, case.dir.join("out.npy"), 3)
                        .unwrap()
                        .to_local(ctl)
                        .unwrap()
                        .to_c64_vec();
                    for (ba, bb) in [(1, 1), (4, 7), (7, 4), (64, 64)] {
                        let what = format!("{} ranks={ranks} blocks={ba}/{bb}", case.name);
                        let a = read_npy(ctl, case.dir.join("a.npy"), ba).unwrap();
                        let b = read_npy(ctl, case.dir.join("b.npy"), bb).unwrap();
                        let r = uni20::dist::reduce(ctl, uni20::dist::Reduction::Inner(&a, &b)).unwrap();
                        rel_close(r.value, want[0], 1e-12, &format!("{what} inner"));
                        check_summary(ctl, &r.summary, &what);
                        if ba == bb {
                            assert_eq!(r.summary.bytes_moved, 0, "{what}: same tiling and owners move nothing");
                        }
                        let n = norm(ctl, &a).unwrap();
                        rel_close(C64::new(n, 0.0), want[1], 1e-12, &format!("{what} norm"));
                        // The maximum is one of the moduli: exact for real dtypes; a
                        // complex modulus may round differently from numpy's hypot.
                        let m = max_abs(ctl, &a).unwrap();
                        if a.dtype().is_complex() {
                            rel_close(C64::new(m, 0.0), want[2], 1e-15, &format!("{what} max_abs"));
                        } else {
                            assert_eq!(m, want[2].re, "{what} max_abs");
                        }
                    }
                }
            })
            .unwrap();
    }
}

/// True if some label shared by the two operands of `spec` is tiled
/// differently by blocks of `ba` and `bb` (so the contraction must reblock).
fn tilings_differ(spec: &str, a: &[usize], b: &[usize], ba: usize, bb: usize) -> bool {
    let (lhs, _) = spec.split_once("->").unwrap();
    let (la, lb) = lhs.split_once(',').unwrap();
    let ext = |n: usize, blk: usize| -> Vec<usize> {
        if n == 0 {
            return vec![0];
        }
        let mut v = vec![blk; n / blk];
        if !n.is_multiple_of(blk) {
            v.push(n % blk);
        }
        v
    };
    let empty = a.contains(&0) || b.contains(&0);
    !empty
        && la.chars().enumerate().any(|(i, l)| {
            lb.chars()
                .position(|m| m == l)
                .is_some_and(|j| ext(a[i], ba) != ext(b[j], bb))
        })
}

#[test]
fn contractions_of_differently_blocked_operands_match_numpy_with_a_reblock_note() {
    let cases = common::cases();
    assert!(cases.len() >= 14);
    for ranks in [1, 2, 4] {
        uni20::universe()
            .ranks(ranks)
            .run(|ctl| {
                let mut reblocked = 0;
                for case in &cases {
                    for (ba, bb) in [(2, 3), (3, 2), (1, 4)] {
                        let what = format!("{} ranks={ranks} blocks={ba}/{bb}", case.name);
                        let read = |f: &str, blk: usize| read_npy(ctl, case.dir.join(f), blk).unwrap();
                        let (a, b) = (read("a.npy", ba), read("b.npy", bb));
                        let c = case.dir.join("c.npy").exists().then(|| read("c.npy", 1));
                        let want = read("out.npy", 3).to_local(ctl).unwrap();
                        let opts = ContractOptions {
                            alpha: case.alpha,
                            beta: case.beta.unwrap_or_default(),
                            c: c.as_ref(),
                            ..Default::default()
                        };
                        let out =
                            contract_with(ctl, &case.spec, &a, &b, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
                        common::assert_close(&out.to_local(ctl).unwrap(), &want, &what);
                        let s = out.plan_summary().unwrap();
                        check_summary(ctl, s, &what);
                        let differ = tilings_differ(&case.spec, a.shape(), b.shape(), ba, bb);
                        let noted = s
                            .notes
                            .iter()
                            .any(|n| n.starts_with("reblocked A") || n.starts_with("reblocked B"));
                        assert_eq!(noted, differ, "{what}: notes {:?}", s.notes);
                        assert!(
                            s.notes.iter().all(|n| n.contains("bytes moved")),
                            "{what}: {:?}",
                            s.notes
                        );
                        reblocked += usize::from(noted);
                        // Strict mode refuses the same operands.
                        let strict = ContractOptions {
                            strict_blocking: true,
                            ..opts
                        };
                        let e = contract_with(ctl, &case.spec, &a, &b, &strict);
                        assert_eq!(
                            matches!(e, Err(DistError::BlockingMismatch { .. })),
                            differ || s.notes.iter().any(|n| n.starts_with("reblocked C_in")),
                            "{what}"
                        );
                    }
                }
                assert!(reblocked >= 20, "only {reblocked} contractions needed a reblock");
            })
            .unwrap();
    }
}

#[test]
fn the_cheaper_operand_is_reblocked_and_named_in_the_summary() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            // A (8x6) has j as [3,3]; B (6x2, fewer bytes) has j as [2,2,2]: B moves.
            let a = random(ctl, &[8, 6], DType::F64, [8, 3], 1).unwrap();
            let b = random(ctl, &[6, 2], DType::F64, 2, 2).unwrap();
            let c = contract(ctl, "ij,jk->ik", &a, &b).unwrap();
            let s = c.plan_summary_wait(ctl);
            assert!(
                s.notes.iter().any(|n| n.starts_with("reblocked B on j to [3, 3]")),
                "{:?}",
                s.notes
            );
            let (la, lb) = (a.to_local(ctl).unwrap(), b.to_local(ctl).unwrap());
            let want = uni20::dispatch::contract(
                "ij,jk->ik",
                C64::new(1.0, 0.0),
                &la,
                &lb,
                C64::new(0.0, 0.0),
                None,
                &uni20::BackendList::reference_only(),
            )
            .unwrap();
            common::assert_close(&c.to_local(ctl).unwrap(), &want, "reblocked B");
            // Swapped roles: A (2x6) is the smaller, A moves.
            let a = random(ctl, &[2, 6], DType::F64, [2, 3], 3).unwrap();
            let b = random(ctl, &[6, 8], DType::F64, 2, 4).unwrap();
            let c = contract(ctl, "ij,jk->ik", &a, &b).unwrap();
            let s = c.plan_summary_wait(ctl);
            assert!(
                s.notes.iter().any(|n| n.starts_with("reblocked A on j to [2, 2, 2]")),
                "{:?}",
                s.notes
            );
        })
        .unwrap();
}

/// Waits for a tensor and returns its plan summary.
trait SummaryWait {
    fn plan_summary_wait(&self, ctl: &Controller<'_>) -> PlanSummary;
}

impl SummaryWait for DistTensor {
    fn plan_summary_wait(&self, ctl: &Controller<'_>) -> PlanSummary {
        self.wait(ctl).unwrap();
        self.plan_summary().unwrap().clone()
    }
}
