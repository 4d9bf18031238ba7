//! Distributed `contract` against committed numpy fixtures
//! (`tests/fixtures/contract`, made by `scripts/gen_fixtures.py`), on the
//! in-process universe with several rank counts and block sizes. Operands
//! are read with the distributed `read_npy` and the result gathered with
//! `to_local`, so npy I/O, planning, transfers and local kernels are all
//! exercised.

mod common;

use uni20::prelude::*;

#[test]
fn every_fixture_matches_numpy_across_ranks_and_blocks() {
    let cases = common::cases();
    assert!(cases.len() >= 14, "fixtures missing: found {}", cases.len());
    for ranks in [1, 2, 4] {
        uni20::universe()
            .ranks(ranks)
            .run(|ctl| {
                for case in &cases {
                    for block in [1, 2, 3, 64] {
                        common::run_case(ctl, case, block);
                    }
                }
            })
            .unwrap();
    }
}

/// The einsum forms numpy users expect (traces, diagonals, one operand,
/// implicit output, ellipsis with broadcasting), distributed.
#[test]
fn every_einsum_form_matches_numpy_across_ranks_and_blocks() {
    let cases = common::einsum_cases();
    assert!(cases.len() >= 30, "einsum fixtures missing: found {}", cases.len());
    for ranks in [1, 2, 4] {
        uni20::universe()
            .ranks(ranks)
            .run(|ctl| {
                for case in &cases {
                    for block in [1, 2, 3, 64] {
                        common::run_case(ctl, case, block);
                    }
                }
            })
            .unwrap();
    }
}

#[test]
fn write_npy_round_trips_every_fixture_output() {
    let dir = tempfile::tempdir().unwrap();
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            for case in common::cases() {
                let t = read_npy(ctl, case.dir.join("out.npy"), 2).unwrap();
                let path = dir.path().join(format!("{}.npy", case.name));
                write_npy(ctl, &t, &path).unwrap();
                let back = read_npy(ctl, &path, 3).unwrap().to_local(ctl).unwrap();
                assert_eq!(back, t.to_local(ctl).unwrap(), "{}", case.name);
                // The bytes on disk equal what numpy wrote, apart from the header.
                let ours = std::fs::read(&path).unwrap();
                let theirs = std::fs::read(case.dir.join("out.npy")).unwrap();
                let n = t.len() * t.dtype().size_bytes();
                assert_eq!(ours[ours.len() - n..], theirs[theirs.len() - n..], "{}", case.name);
            }
        })
        .unwrap();
}
