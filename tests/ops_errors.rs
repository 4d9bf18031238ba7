//! Bad input to the element-wise, reblock, reduction and creation
//! operations gets a typed error on the root before anything is submitted
//! (the job stays usable), and a failing command of these families stops
//! the job with the same diagnostic as a contraction (rank, op_id, wire
//! name, handler location, object).

use uni20::dispatch::{BlockError, ElementwiseError};
use uni20::dist::error::BlockingError;
use uni20::dist::{BlockRef, Manifest};
use uni20::persist::ObjectId;
use uni20::prelude::*;
use uni20::{Blocking, DistError, JobError, LabelError};

fn tensor(ctl: &Controller<'_>, shape: &[usize], block: usize) -> DistTensor {
    let n = shape.iter().product();
    let t = LocalTensor::from_f64(shape, (0..n).map(|i| i as f64).collect()).unwrap();
    DistTensor::from_local(ctl, &t, block).unwrap()
}

/// One refused call: what it was, its outcome, and the error it must give.
type Check<'a> = (&'a str, Result<DistTensor, DistError>, fn(&DistError) -> bool);

/// Asserts that nothing is queued or in flight (the refused call submitted nothing).
fn nothing_submitted(ctl: &Controller<'_>, what: &str) {
    assert_eq!(
        (ctl.in_flight(), ctl.deferred()),
        (0, 0),
        "{what}: something was submitted"
    );
}

#[test]
fn bad_input_is_refused_before_anything_is_submitted() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let a = tensor(ctl, &[2, 3], 2);
            let b = tensor(ctl, &[3, 2], 2);
            let c = tensor(ctl, &[2, 4], 2);
            let checks: Vec<Check<'_>> = vec![
                ("axpby shapes", axpby(ctl, 1.0, &a, 1.0, &c, "ij->ij"), |e| {
                    matches!(e, DistError::ShapeMismatch { expected, got, .. } if expected == &[2, 3] && got == &[2, 4])
                }),
                ("axpby shapes after permutation", axpby(ctl, 1.0, &a, 1.0, &a, "ij->ji"), |e| {
                    matches!(e, DistError::ShapeMismatch { .. })
                }),
                ("not a permutation", axpby(ctl, 1.0, &a, 1.0, &a, "ij->ik"), |e| {
                    matches!(e, DistError::Labels(LabelError::NotAPermutation { .. }))
                }),
                ("repeated label", permute(ctl, &a, "ii->ii"), |e| {
                    matches!(e, DistError::Labels(LabelError::Repeated { label: 'i', .. }))
                }),
                ("no arrow", permute(ctl, &a, "ij"), |e| {
                    matches!(e, DistError::Labels(LabelError::NoArrow { .. }))
                }),
                ("label count vs rank", permute(ctl, &a, "ijk->kij"), |e| {
                    matches!(e, DistError::Labels(LabelError::Rank { labels: 3, rank: 2, .. }))
                }),
                ("bad character", permute(ctl, &a, "i1->1i"), |e| {
                    matches!(e, DistError::Labels(LabelError::BadLabel { ch: '1', .. }))
                }),
                ("two operands to permute", permute(ctl, &a, "ij,ij->ji"), |e| {
                    matches!(e, DistError::Labels(LabelError::Operands { got: 2, max: 1, .. }))
                }),
                ("three operands to axpby", axpby(ctl, 1.0, &a, 1.0, &a, "ij,ij,ij->ij"), |e| {
                    matches!(e, DistError::Labels(LabelError::Operands { got: 3, max: 2, .. }))
                }),
                ("b's labels", axpby(ctl, 1.0, &a, 1.0, &b, "ij,jk->ij"), |e| {
                    matches!(e, DistError::Labels(LabelError::NotAPermutation { operand, .. }) if operand == "b")
                }),
                ("complex alpha, real output", scale(ctl, C64::new(0.0, 1.0), &a), |e| {
                    matches!(e, DistError::Elementwise(ElementwiseError::ComplexScalarForRealOutput { which: "alpha", .. }))
                }),
                ("complex beta, real output", axpby(ctl, 1.0, &a, C64::new(1.0, 1.0), &a, "ij->ij"), |e| {
                    matches!(e, DistError::Elementwise(ElementwiseError::ComplexScalarForRealOutput { which: "beta", .. }))
                }),
                ("reshape of non-adjacent modes", reshape(ctl, &a, &[3, 2]), |e| {
                    matches!(e, DistError::ReshapeNotAdjacent { from, to, .. } if from == &[2, 3] && to == &[3, 2])
                }),
                ("reshape element count", reshape(ctl, &a, &[7]), |e| {
                    matches!(e, DistError::Elementwise(ElementwiseError::ElementCount { from_len: 6, .. }))
                }),
                ("reblock per-mode sizes", reblock(ctl, &a, vec![2]), |e| {
                    matches!(e, DistError::RankMismatch { expected: 2, got: 1, .. })
                }),
                ("reblock block size 0", reblock(ctl, &a, 0), |e| {
                    matches!(e, DistError::Blocking(BlockingError::ZeroBlockSize))
                }),
                (
                    "reblock to another shape's tiling",
                    reblock(ctl, &a, Blocking::regular(&[2, 4], 2).unwrap()),
                    |e| matches!(e, DistError::ShapeMismatch { .. }),
                ),
                ("identity split beyond the rank", identity(ctl, &[3, 3], DType::F64, 2, 3), |e| {
                    matches!(e, DistError::Block(BlockError::BadSplit { row_modes: 3, rank: 2 }))
                }),
                ("a block over 1 TiB", zeros(ctl, &[1 << 21, 1 << 20], DType::F64, 1 << 20), |e| {
                    matches!(e, DistError::PlanTooLarge { .. })
                }),
                ("random with too many blocks", random(ctl, &[1 << 12, 1 << 12], DType::F64, 1, 7), |e| {
                    matches!(e, DistError::Blocking(BlockingError::TooManyBlocks { .. }))
                }),
            ];
            for (what, r, expected) in checks {
                let e = r.err().unwrap_or_else(|| panic!("{what}: accepted"));
                assert!(expected(&e), "{what}: unexpected error {e:?}");
                assert!(!e.to_string().is_empty());
                nothing_submitted(ctl, what);
            }
            let e = inner(ctl, &a, &b).unwrap_err();
            assert!(matches!(e, DistError::ShapeMismatch { .. }), "{e:?}");
            nothing_submitted(ctl, "inner shapes");
            // The job is still usable and right.
            let s = axpby(ctl, 2.0, &a, -1.0, &a, "ij->ij").unwrap().to_local(ctl).unwrap();
            assert_eq!(s.to_c64_vec().iter().map(|z| z.re).collect::<Vec<_>>(), [0., 1., 2., 3., 4., 5.]);
            assert_eq!(inner(ctl, &a, &a).unwrap(), C64::new(55.0, 0.0));
        })
        .unwrap();
}

/// A tensor whose block 1 names an object no rank holds.
fn broken(ctl: &Controller<'_>) -> (DistTensor, DistTensor) {
    let a = tensor(ctl, &[4, 4], 2);
    let mut m: Manifest = a.manifest(ctl).unwrap();
    m.blocks[1] = BlockRef {
        owner: m.blocks[1].owner,
        id: ObjectId::new(9, 999),
    };
    (DistTensor::from_manifest(ctl, m).unwrap(), a)
}

fn assert_diagnostic(err: &DistError, wire: &str, file: &str) {
    let DistError::Job(JobError::Command(d)) = err else {
        panic!("expected a command failure, got {err}")
    };
    assert_eq!(d.wire_name, wire);
    assert!(d.rank >= 1 && d.rank <= 2, "rank {}", d.rank);
    assert!(d.location.contains(file), "{}", d.location);
    let text = err.to_string();
    assert!(
        text.contains("r9:999") && text.contains(&format!("rank {}", d.rank)),
        "{text}"
    );
}

#[test]
fn a_failing_elementwise_command_stops_the_job_with_a_diagnostic() {
    let mut seen = None;
    let outcome = uni20::universe().ranks(3).run(|ctl| {
        let (bad, a) = broken(ctl);
        let err = axpby(ctl, 1.0, &bad, 1.0, &a, "ij->ji")
            .and_then(|c| c.to_local(ctl))
            .unwrap_err();
        let after = scale(ctl, 2.0, &a).and_then(|c| c.to_local(ctl)).unwrap_err();
        seen = Some((err, after));
    });
    assert!(outcome.unwrap_err().to_string().contains("r9:999"));
    let (err, after) = seen.unwrap();
    assert_diagnostic(&err, "uni20.elementwise.v1", "elementwise/command.rs");
    assert!(matches!(after, DistError::Job(JobError::Stopped(_))), "{after}");
}

#[test]
fn a_failing_reduction_stops_the_job_with_a_diagnostic() {
    let mut seen = None;
    let outcome = uni20::universe().ranks(3).run(|ctl| {
        let (bad, a) = broken(ctl);
        seen = Some(inner(ctl, &a, &bad).unwrap_err());
        assert!(matches!(norm(ctl, &a), Err(DistError::Job(JobError::Stopped(_)))));
    });
    assert!(outcome.unwrap_err().to_string().contains("r9:999"));
    assert_diagnostic(&seen.unwrap(), "uni20.reduce.v1", "reduce/command.rs");
}

#[test]
fn a_failing_reblock_poisons_the_contraction_that_needed_it() {
    let mut seen = None;
    let outcome = uni20::universe().ranks(3).run(|ctl| {
        let (bad, _) = broken(ctl);
        let b = tensor(ctl, &[4, 3], 3);
        // j is [2, 2] in `bad` and [3, 1] in b: one of them is reblocked first.
        let c = contract(ctl, "ij,jk->ik", &bad, &b).unwrap();
        seen = Some(c.to_local(ctl).unwrap_err());
    });
    assert!(outcome.is_err());
    let err = seen.unwrap();
    assert!(err.to_string().contains("r9:999"), "{err}");
}
