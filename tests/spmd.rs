//! The SPMD mode on the in-process transport, 1 to 4 ranks: collectives,
//! scatter / collective contraction / gather against numpy's results, an
//! agreed refusal, and diverging plans (one rank passes another block size,
//! or another spec) that stop every rank with the disagreement named,
//! within 10 s. The same checks run under MPI in `tests/mpi_spmd.rs`.

mod spmd_common;

use std::time::{Duration, Instant};

use spmd_common::*;

fn universe(ranks: usize) -> uni20::UniverseBuilder {
    uni20::universe().ranks(ranks).threads_per_rank(1)
}

#[test]
fn collectives_and_contractions_match_numpy_on_one_to_four_ranks() {
    for n in 1..=4 {
        let out = universe(n).spmd(check_all).unwrap();
        assert_eq!(out.len(), n);
        for (rank, r) in out {
            let runs = r.unwrap().unwrap_or_else(|e| panic!("{n} ranks, rank {rank}: {e:#}"));
            assert_eq!(runs, 2 * CASES.len());
        }
    }
}

#[test]
fn a_rank_with_another_block_size_stops_every_rank() {
    for n in 2..=4 {
        let start = Instant::now();
        let out = universe(n).spmd(diverging_block).unwrap();
        assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
        for (rank, r) in out {
            expect_disagreement(r, &diverging_block_text(n)).unwrap_or_else(|e| panic!("{n} ranks, rank {rank}: {e}"));
        }
    }
}

#[test]
fn a_rank_with_another_spec_stops_every_rank_naming_the_spec() {
    let out = universe(3).spmd(diverging_spec).unwrap();
    let text = "plan disagreement in `uni20.contract.v1` at op_id 3: rank 0 computed one plan, ranks 1, 2 another; \
                first differing plan field: `spec`";
    for (rank, r) in out {
        expect_disagreement(r, text).unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    }
}

#[test]
fn the_one_call_entry_reports_success_and_failure_as_an_exit_status() {
    // The default universe: UNI20_RANKS or 4 ranks.
    assert_eq!(uni20::spmd(check_collectives), std::process::ExitCode::SUCCESS);
    assert_eq!(uni20::spmd(diverging_block), std::process::ExitCode::FAILURE);
}
