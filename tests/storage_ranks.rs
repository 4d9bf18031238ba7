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

/// Runs `job` on 3 in-process ranks plus storage rank 3 with `fault` injected;
/// `job` must reach its end, and the universe must then report the failure.
fn with_a_faulty_storage_rank(fault: &str, job: impl FnOnce(&uni20::Controller<'_>)) {
    let checked = std::cell::Cell::new(false);
    let out = uni20::universe()
        .ranks(4)
        .storage_ranks(1)
        .faults(uni20::worker::fault::FaultPlan::parse(fault).unwrap())
        .run(|ctl| {
            job(ctl);
            checked.set(true);
        });
    assert!(out.is_err() && checked.get());
}

/// True when `text` says the failure happened on one of the two workers at `op`.
fn failed_on_a_worker(text: &str, op: u64) -> bool {
    (1..=2).any(|r| text.contains(&format!("failed on rank {r} at op_id {op}")))
}

#[test]
fn a_storage_rank_that_dies_mid_fetch_stops_the_job_at_once_naming_it_the_object_and_the_requesting_rank() {
    use uni20::prelude::*;
    // ops 1, 2: the scatters onto the storage rank 3; op 3: the contraction, in which the
    // workers fetch from rank 3, which dies on receiving it. In-process, a dead rank leaves
    // silently as an MPI process would: the workers waiting for its blocks fail, naming
    // what they awaited, and the root stops the job on the first such report.
    with_a_faulty_storage_rank("kill@rank=3,op=3", |ctl| {
        let la = LocalTensor::from_f64(&[8, 8], (0..64).map(f64::from).collect()).unwrap();
        let a = DistTensor::from_local_on(ctl, &la, 4, &Placement::Storage).unwrap();
        let b = DistTensor::from_local_on(ctl, &la, 4, &Placement::Storage).unwrap();
        let on_storage: Vec<String> = a
            .manifest(ctl)
            .unwrap()
            .blocks
            .iter()
            .chain(b.manifest(ctl).unwrap().blocks.iter())
            .map(|blk| blk.id.to_string())
            .collect();
        let t = std::time::Instant::now();
        let e = contract(ctl, "ij,jk->ik", &a, &b)
            .and_then(|c| c.manifest(ctl))
            .unwrap_err();
        assert!(t.elapsed().as_secs() < 10, "stopped after {:?}", t.elapsed());
        let text = e.to_string();
        // The requesting rank (one of the two workers), the op and the command.
        assert!(failed_on_a_worker(&text, 3), "{text}");
        assert!(text.contains("uni20.contract.v1"), "{text}");
        // The storage rank and the object awaited from it (one of the blocks placed there).
        assert!(text.contains("from storage rank 3"), "{text}");
        assert!(text.contains("has left the universe"), "{text}");
        assert!(
            on_storage
                .iter()
                .any(|id| text.contains(&format!("receiving object {id} "))),
            "{text}\nnames none of {on_storage:?}"
        );
        // Fail-stop: later operations report the same failure.
        assert!(contract(ctl, "ij,jk->ik", &a, &b)
            .and_then(|c| c.manifest(ctl))
            .is_err());
    });
}

#[test]
fn a_storage_rank_that_answers_with_a_corrupt_object_stops_the_job_naming_it_the_object_and_the_requesting_rank() {
    use uni20::prelude::*;
    // op 1 scatters onto storage rank 3; in op 2, the contraction, it sends its blocks with a
    // byte flipped.
    with_a_faulty_storage_rank("corrupt@rank=3,op=2", |ctl| {
        let la = LocalTensor::from_f64(&[8, 8], (0..64).map(f64::from).collect()).unwrap();
        let a = DistTensor::from_local_on(ctl, &la, 4, &Placement::Storage).unwrap();
        let e = contract(ctl, "ij,jk->ik", &a, &a)
            .and_then(|c| c.manifest(ctl))
            .unwrap_err();
        let text = e.to_string();
        assert!(failed_on_a_worker(&text, 2), "{text}");
        assert!(
            text.contains("uni20.contract.v1") && text.contains("checksum"),
            "{text}"
        );
        let named = a.manifest(ctl).map(|m| {
            m.blocks
                .iter()
                .any(|b| text.contains(&format!("receiving object {} from storage rank 3", b.id)))
        });
        // The manifest is the root's record: readable after the failure.
        assert!(named.unwrap_or(false), "{text}");
    });
}
