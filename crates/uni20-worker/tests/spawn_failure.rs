//! A rank thread that cannot be started stops the ranks already started and
//! returns a start-up error (it used to leave the job waiting for ever), and
//! the in-process rank count is bounded.

use std::sync::mpsc;
use std::time::Duration;

use uni20_worker::config::MAX_IN_PROCESS_RANKS;
use uni20_worker::fault::FaultPlan;
use uni20_worker::{JobError, TransportChoice, UniverseBuilder};

/// Runs `b` on another thread; `None` if it has not returned within 20 s.
fn run_bounded(b: UniverseBuilder) -> Option<Result<usize, JobError>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(b.run(|ctl| ctl.size()));
    });
    rx.recv_timeout(Duration::from_secs(20)).ok()
}

#[test]
fn a_failed_spawn_stops_the_started_ranks_and_returns() {
    for (ranks, failing) in [(6, 4), (3, 1), (8, 7)] {
        let b = UniverseBuilder::new()
            .ranks(ranks)
            .transport(TransportChoice::InProcess)
            .faults(FaultPlan::parse(&format!("spawn@rank={failing}")).unwrap());
        let out = run_bounded(b).expect("the universe hung after a failed spawn");
        let Err(JobError::Startup(m)) = out else {
            panic!("{out:?}")
        };
        assert!(
            m.contains(&format!("cannot start the thread of rank {failing} of {ranks}"))
                && m.contains("injected spawn failure")
                && m.contains(&format!("the {} rank(s) already started were stopped", failing - 1)),
            "{m}"
        );
    }
}

#[test]
fn the_in_process_rank_count_is_bounded() {
    let b = UniverseBuilder::new()
        .ranks(MAX_IN_PROCESS_RANKS + 1)
        .transport(TransportChoice::InProcess);
    let out = run_bounded(b).expect("returned");
    assert!(
        matches!(&out, Err(JobError::Startup(m)) if m.contains("at most 1024")),
        "{out:?}"
    );
}
