//! Storage ranks on the in-process universe: 3 ranks plus 1 storage rank.

mod storage_common;

#[test]
fn inputs_on_a_storage_rank_are_fetched_by_workers_directly() {
    let bytes = uni20::universe()
        .ranks(4)
        .storage_ranks(1)
        .run(storage_common::contraction_with_inputs_on_storage)
        .unwrap();
    assert!(bytes > 0);
}

#[test]
fn workers_put_and_fetch_through_the_storage_rank_and_the_root_carries_no_payload() {
    let moved = uni20::universe()
        .ranks(4)
        .storage_ranks(1)
        .run(storage_common::put_and_fetch_through_storage)
        .unwrap();
    assert!(moved > 0);
}

#[test]
fn too_many_storage_ranks_is_a_startup_error() {
    let err = uni20::universe().ranks(3).storage_ranks(2).run(|_| ()).unwrap_err();
    assert!(err.to_string().contains("storage rank"), "{err}");
}

#[test]
fn a_storage_rank_that_dies_mid_fetch_stops_the_job_at_once_naming_it_and_the_command() {
    use uni20::prelude::*;
    use uni20::worker::fault::FaultPlan;
    // ops 1, 2: the scatters onto the storage rank 3; op 3: the contraction, in which the
    // workers fetch from rank 3, which dies on receiving it (in-process: its thread ends,
    // which aborts the universe; the workers waiting for it fail with "has left the
    // universe", naming the object, after that first report).
    let checked = std::cell::Cell::new(false);
    let out = uni20::universe()
        .ranks(4)
        .storage_ranks(1)
        .faults(FaultPlan::parse("kill@rank=3,op=3").unwrap())
        .run(|ctl| {
            let la = LocalTensor::from_f64(&[8, 8], (0..64).map(f64::from).collect()).unwrap();
            let a = DistTensor::from_local_on(ctl, &la, 4, &Placement::Storage).unwrap();
            let b = DistTensor::from_local_on(ctl, &la, 4, &Placement::Storage).unwrap();
            let t = std::time::Instant::now();
            let e = contract(ctl, "ij,jk->ik", &a, &b)
                .and_then(|c| c.manifest(ctl))
                .unwrap_err();
            assert!(t.elapsed().as_secs() < 10, "stopped after {:?}", t.elapsed());
            let text = e.to_string();
            assert!(text.contains("rank 3 died during op_id 3"), "{text}");
            assert!(text.contains("uni20.contract.v1"), "{text}");
            // Fail-stop: later operations report the same failure.
            assert!(contract(ctl, "ij,jk->ik", &a, &b)
                .and_then(|c| c.manifest(ctl))
                .is_err());
            checked.set(true);
        });
    assert!(out.is_err() && checked.get());
}
