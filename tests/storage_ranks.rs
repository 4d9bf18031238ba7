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
