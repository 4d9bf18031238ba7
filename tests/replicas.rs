//! Replicas kept between commands, on the in-process universe (3 ranks:
//! root + 2 workers): a block moved to a worker for one command stays
//! there, so a later command that needs it there moves nothing; the
//! results equal the run that keeps no replica (`replica_bytes(0)`) bit for
//! bit and the local reference; a small budget evicts the least recently
//! used replicas and stays right; the root's table agrees with what the
//! stores hold; dropping a tensor, gc and offload free the copies; a store
//! under a tiny memory budget spills held replicas instead of losing them.

use uni20::dispatch::{contract as local_contract, BackendList};
use uni20::dist::{Placement, PlanSummary};
use uni20::prelude::*;

fn ramp(shape: &[usize], scale: f64) -> LocalTensor {
    let n = shape.iter().product();
    LocalTensor::from_f64(shape, (0..n).map(|i| scale * (i as f64 + 1.0).sin()).collect()).unwrap()
}

fn local_matmul(a: &LocalTensor, b: &LocalTensor) -> LocalTensor {
    local_contract(
        EinsumSpec::parse("ij,jk->ik").unwrap(),
        C64::new(1.0, 0.0),
        a,
        b,
        C64::new(0.0, 0.0),
        None,
        &BackendList::reference_only(),
    )
    .unwrap()
}

/// Objects held by every rank's store.
fn objects_on_ranks(ctl: &Controller<'_>) -> u64 {
    ctl.store_stats().unwrap().iter().map(|s| s.objects).sum()
}

/// Replicas the root's table says the ranks hold.
fn replicas_in_table(ctl: &Controller<'_>) -> u64 {
    (0..ctl.size()).map(|r| ctl.ledger().replica_usage(r).replicas).sum()
}

const STEPS: usize = 6;

/// `STEPS` products `x_k . m`, each waited for: every `x_k` is 64 x 8 in
/// four 16 x 8 blocks over both workers, `m` is one 8 x 8 block on one of
/// them, so each item runs where its block of `x_k` is and `m` moves to
/// the other worker. The plan summaries and the results.
fn products(ctl: &Controller<'_>, m: &LocalTensor) -> Vec<(PlanSummary, LocalTensor)> {
    let md = DistTensor::from_local(ctl, m, 8).unwrap();
    let workers_spilled = || {
        ctl.store_stats()
            .unwrap()
            .iter()
            .skip(1)
            .map(|s| s.bytes_spilled)
            .sum::<u64>()
    };
    (0..STEPS)
        .map(|k| {
            let x = DistTensor::from_local(ctl, &x_of(k), 16).unwrap();
            let y = contract(ctl, "ij,jk->ik", &x, &md).unwrap();
            let local = y.to_local(ctl).unwrap();
            // What the root's table says the workers hold, they hold: every
            // object beyond the blocks of m (1), x and y (4 each) is a
            // replica it recorded (earlier steps' x and y are gone).
            ctl.collect().unwrap();
            assert_eq!(objects_on_ranks(ctl), 9 + replicas_in_table(ctl), "step {k}");
            SPILLED.with(|s| s.set(s.get().max(workers_spilled())));
            (y.plan_summary().unwrap().clone(), local)
        })
        .collect()
}

thread_local! {
    /// The most bytes the workers had spilled after a step of [`products`].
    static SPILLED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn x_of(k: usize) -> LocalTensor {
    ramp(&[64, 8], 1.0 + k as f64)
}

fn run_products(replica_bytes: u64) -> (Vec<(PlanSummary, LocalTensor)>, uni20::worker::ledger::LedgerStats) {
    let m = ramp(&[8, 8], 0.3);
    let mut out = None;
    uni20::universe()
        .ranks(3)
        .replica_bytes(replica_bytes)
        .run(|ctl| {
            let p = products(ctl, &m);
            // Every tensor is dropped: their blocks and every copy go.
            ctl.collect().unwrap();
            assert_eq!((objects_on_ranks(ctl), replicas_in_table(ctl)), (0, 0));
            out = Some((p, ctl.ledger().stats()));
        })
        .unwrap();
    out.unwrap()
}

#[test]
fn a_block_used_again_on_the_same_rank_moves_once() {
    let m = ramp(&[8, 8], 0.3);
    let (kept, stats) = run_products(1 << 20);
    let (dropped, stats0) = run_products(0);
    for (k, ((sk, tk), (s0, t0))) in kept.iter().zip(&dropped).enumerate() {
        let expected = local_matmul(&x_of(k), &m);
        assert!(tk.max_abs_diff(&expected).unwrap() < 1e-12, "step {k}");
        assert_eq!(
            tk.to_c64_vec(),
            t0.to_c64_vec(),
            "step {k}: equal to the run without replicas"
        );
        assert_eq!(s0.replica_hits, 0);
        assert_eq!(sk.bytes_moved + sk.bytes_from_replicas, s0.bytes_moved, "step {k}");
        if k > 0 {
            // m's blocks that moved in step 0 stay where they were used.
            assert!(sk.replica_hits > 0, "step {k}: {sk}");
            assert!(sk.bytes_moved < s0.bytes_moved, "step {k}: {sk} against {s0}");
            assert!(sk.to_string().contains("already held as replicas"), "{sk}");
        }
    }
    assert!(stats.replica_hits >= (STEPS - 1) as u64, "{stats:?}");
    assert_eq!((stats0.replica_hits, stats0.replicas_recorded), (0, 0), "{stats0:?}");
}

#[test]
fn a_small_budget_evicts_the_least_recently_used_replicas_and_stays_right() {
    // Two 8 x 8 operands used in turn; each worker may keep one 512-byte
    // replica, so a worker that receives both evicts one of them.
    let (ma, mb) = (ramp(&[8, 8], 0.3), ramp(&[8, 8], -0.7));
    let budget = 600;
    uni20::universe()
        .ranks(3)
        .replica_bytes(budget)
        .run(|ctl| {
            assert_eq!(uni20::dist::replica_budget(ctl), budget);
            // Both on worker 1, so worker 2 receives both.
            let on1 = uni20::dist::Placement::Ranks(vec![1]);
            let a = DistTensor::from_local_on(ctl, &ma, 8, &on1).unwrap();
            let b = DistTensor::from_local_on(ctl, &mb, 8, &on1).unwrap();
            for k in 0..2 * STEPS {
                let (m, ml) = if k % 2 == 0 { (&a, &ma) } else { (&b, &mb) };
                let x = DistTensor::from_local(ctl, &x_of(k), 16).unwrap();
                let y = contract(ctl, "ij,jk->ik", &x, m).unwrap().to_local(ctl).unwrap();
                assert!(y.max_abs_diff(&local_matmul(&x_of(k), ml)).unwrap() < 1e-12, "step {k}");
                ctl.collect().unwrap();
                for r in 0..ctl.size() {
                    assert!(
                        ctl.ledger().replica_usage(r).bytes <= budget,
                        "rank {r} over the budget"
                    );
                }
                // a, b and x: 6 blocks; the rest are the table's replicas.
                assert_eq!(objects_on_ranks(ctl), 6 + replicas_in_table(ctl), "step {k}");
            }
            let s = ctl.ledger().stats();
            assert!(s.replicas_evicted >= (2 * STEPS - 2) as u64, "{s:?}");
            assert_eq!(s.replica_hits, 0, "each replica was evicted before its next use: {s:?}");
            // With room for both, the same sequence hits.
            uni20::dist::set_replica_budget(ctl, 4096);
            let before = ctl.ledger().stats().replica_hits;
            for k in 0..4 {
                let m = if k % 2 == 0 { &a } else { &b };
                let x = DistTensor::from_local(ctl, &x_of(k), 16).unwrap();
                contract(ctl, "ij,jk->ik", &x, m).unwrap().wait(ctl).unwrap();
            }
            assert!(ctl.ledger().stats().replica_hits - before >= 2);
        })
        .unwrap();
}

#[test]
fn gc_and_offload_free_the_copies_and_later_plans_move_blocks_again() {
    let m = ramp(&[8, 8], 0.3);
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let md = DistTensor::from_local(ctl, &m, 8).unwrap();
            let x = DistTensor::from_local(ctl, &x_of(0), 16).unwrap();
            contract(ctl, "ij,jk->ik", &x, &md).unwrap().wait(ctl).unwrap();
            ctl.collect().unwrap();
            assert!(replicas_in_table(ctl) > 0);
            // gc removes every object no live handle names, copies included.
            uni20::dist::gc(ctl).unwrap();
            assert_eq!(replicas_in_table(ctl), 0);
            assert_eq!(objects_on_ranks(ctl), 5, "the blocks of m and x");
            let y = contract(ctl, "ij,jk->ik", &x, &md).unwrap();
            let yl = y.to_local(ctl).unwrap();
            assert_eq!(y.plan_summary().unwrap().replica_hits, 0, "m moves again after gc");
            assert!(yl.max_abs_diff(&local_matmul(&x_of(0), &m)).unwrap() < 1e-12);
            drop(y);
            // Offloading m drops its copies too (they would keep it in memory).
            ctl.collect().unwrap();
            assert!(replicas_in_table(ctl) > 0);
            uni20::dist::offload(ctl, &md).unwrap();
            ctl.drain().unwrap();
            ctl.collect().unwrap();
            assert_eq!(replicas_in_table(ctl), 0);
            assert_eq!(objects_on_ranks(ctl), 5);
            let y = contract(ctl, "ij,jk->ik", &x, &md).unwrap().to_local(ctl).unwrap();
            assert!(y.max_abs_diff(&local_matmul(&x_of(0), &m)).unwrap() < 1e-12);
        })
        .unwrap();
}

#[test]
fn held_replicas_spill_under_a_tiny_store_budget_and_are_found_again() {
    let m = ramp(&[8, 8], 0.3);
    let dir = tempfile::tempdir().unwrap();
    let mut out = None;
    uni20::universe()
        .ranks(3)
        .store_dir(dir.path())
        .memory_budget(200)
        .run(|ctl| {
            out = Some(products(ctl, &m));
            assert!(SPILLED.with(|s| s.get()) > 0, "the 200-byte budget spills");
        })
        .unwrap();
    let (plain, _) = run_products(0);
    for (k, ((s, t), (_, t0))) in out.unwrap().iter().zip(&plain).enumerate() {
        assert_eq!(t.to_c64_vec(), t0.to_c64_vec(), "step {k}");
        if k > 0 {
            assert!(s.replica_hits > 0, "step {k}: {s}");
        }
    }
}

/// `place` gives a block a new owner under the same object id. A rank that
/// held the block as a replica and then became its owner keeps it as an
/// owned copy: offloading the original (which drops the original's
/// replicas) must not release it.
#[test]
fn a_replica_that_becomes_an_owned_copy_by_place_is_not_released_with_the_original() {
    let m = ramp(&[8, 8], 0.3);
    let x = ramp(&[64, 8], 1.0);
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let base = objects_on_ranks(ctl);
            let md = DistTensor::from_local_on(ctl, &m, 8, &Placement::Ranks(vec![1])).unwrap();
            let xd = DistTensor::from_local(ctl, &x, 16).unwrap();
            contract(ctl, "ij,jk->ik", &xd, &md).unwrap().wait(ctl).unwrap();
            assert_eq!(
                ctl.ledger().replica_usage(2).replicas,
                1,
                "m's block is a replica on rank 2"
            );
            let s = uni20::dist::place(ctl, &md, &Placement::Ranks(vec![2])).unwrap();
            assert_eq!(ctl.ledger().replica_usage(2).replicas, 0, "rank 2 owns the copy now");
            uni20::dist::offload(ctl, &md).unwrap();
            ctl.drain().unwrap();
            ctl.collect().unwrap();
            assert!(s.to_local(ctl).unwrap().max_abs_diff(&m).unwrap() < 1e-12);
            let y = contract(ctl, "ij,jk->ik", &xd, &s).unwrap().to_local(ctl).unwrap();
            assert!(y.max_abs_diff(&local_matmul(&x, &m)).unwrap() < 1e-12);
            drop((md, s, xd));
            ctl.drain().unwrap();
            ctl.collect().unwrap();
            assert_eq!(objects_on_ranks(ctl), base, "{:?}", ctl.store_stats().unwrap());
        })
        .unwrap();
}

/// The other order: the block is owned on rank 2 (by `place`) before a
/// contraction reads the original there. The receiver keeps its own copy
/// and takes nothing in, so the root must not list it as a replica that an
/// eviction may release.
#[test]
fn a_transfer_to_a_rank_that_owns_the_block_records_no_replica() {
    let m = ramp(&[8, 8], 0.3);
    let m2 = ramp(&[8, 8], -0.7);
    let x = ramp(&[64, 8], 1.0);
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let on1 = Placement::Ranks(vec![1]);
            let md = DistTensor::from_local_on(ctl, &m, 8, &on1).unwrap();
            let m2d = DistTensor::from_local_on(ctl, &m2, 8, &on1).unwrap();
            let xd = DistTensor::from_local(ctl, &x, 16).unwrap();
            let s = uni20::dist::place(ctl, &md, &Placement::Ranks(vec![2])).unwrap();
            contract(ctl, "ij,jk->ik", &xd, &md).unwrap().wait(ctl).unwrap();
            assert_eq!(ctl.ledger().replica_usage(2).replicas, 0);
            // A one-byte budget evicts every replica when rank 2 receives m2.
            uni20::dist::set_replica_budget(ctl, 1);
            contract(ctl, "ij,jk->ik", &xd, &m2d).unwrap().wait(ctl).unwrap();
            ctl.drain().unwrap();
            ctl.collect().unwrap();
            assert!(s.to_local(ctl).unwrap().max_abs_diff(&m).unwrap() < 1e-12);
        })
        .unwrap();
}

/// The storage-rank round trip of `place`'s documentation with replicas
/// evicted on the way: the blocks come back right, and once every handle
/// is gone each owner's copy has been released (the copies on the old
/// owners go with the last handle naming them there, not with the last
/// handle of the object id).
#[test]
fn a_storage_round_trip_with_evictions_stays_right_and_leaves_nothing() {
    let m = ramp(&[8, 8], 0.3);
    let m2 = ramp(&[8, 8], -0.7);
    let x = ramp(&[64, 8], 1.0);
    uni20::universe()
        .ranks(4)
        .storage_ranks(1)
        .run(|ctl| {
            let base = objects_on_ranks(ctl);
            let t = DistTensor::from_local(ctl, &m, 8).unwrap();
            let xd = DistTensor::from_local(ctl, &x, 16).unwrap();
            let s = uni20::dist::place(ctl, &t, &Placement::Storage).unwrap();
            drop(t);
            contract(ctl, "ij,jk->ik", &xd, &s).unwrap().wait(ctl).unwrap();
            let w = uni20::dist::place(ctl, &s, &Placement::Workers).unwrap();
            drop(s);
            uni20::dist::set_replica_budget(ctl, 1);
            let m2d = DistTensor::from_local(ctl, &m2, 8).unwrap();
            let m2s = uni20::dist::place(ctl, &m2d, &Placement::Storage).unwrap();
            drop(m2d);
            contract(ctl, "ij,jk->ik", &xd, &m2s).unwrap().wait(ctl).unwrap();
            ctl.drain().unwrap();
            ctl.collect().unwrap();
            assert!(w.to_local(ctl).unwrap().max_abs_diff(&m).unwrap() < 1e-12);
            let y = contract(ctl, "ij,jk->ik", &xd, &w).unwrap().to_local(ctl).unwrap();
            assert!(y.max_abs_diff(&local_matmul(&x, &m)).unwrap() < 1e-12);
            drop((w, m2s, xd));
            ctl.drain().unwrap();
            ctl.collect().unwrap();
            assert_eq!(objects_on_ranks(ctl), base, "{:?}", ctl.store_stats().unwrap());
        })
        .unwrap();
}

/// Reductions keep what they fetch, too: a second `inner` of the same
/// operands moves nothing, an element-wise operation after it finds the
/// blocks in place, `reduce_many` uses the same copies, and everything
/// goes with the handles.
#[test]
fn a_reduction_keeps_what_it_fetched_and_later_operations_find_it() {
    use uni20::dist::{reduce, reduce_many, Reduction};
    let a = ramp(&[64, 8], 1.0);
    let b = ramp(&[64, 8], -0.4);
    let value = |i: usize, scale: f64| scale * (i as f64 + 1.0).sin();
    let dot: f64 = (0..512).map(|i| value(i, 1.0) * value(i, -0.4)).sum();
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let base = objects_on_ranks(ctl);
            let ad = DistTensor::from_local_on(ctl, &a, 16, &Placement::Ranks(vec![1])).unwrap();
            let bd = DistTensor::from_local_on(ctl, &b, 16, &Placement::Ranks(vec![2])).unwrap();
            let first = reduce(ctl, Reduction::Inner(&ad, &bd)).unwrap();
            assert!(first.summary.transfers > 0, "{}", first.summary);
            assert!((first.value.re - dot).abs() < 1e-12 * dot.abs().max(1.0));
            let again = reduce(ctl, Reduction::Inner(&ad, &bd)).unwrap();
            assert_eq!(again.summary.transfers, 0, "{}", again.summary);
            assert_eq!(again.summary.replica_hits, first.summary.transfers);
            assert_eq!(again.value, first.value);
            let fused = reduce_many(ctl, &[Reduction::Inner(&ad, &bd), Reduction::Norm(&ad)]).unwrap();
            assert_eq!(fused[0], first.value);
            // a + b: blocks the inner products fetched are found in place.
            let s = axpby(ctl, 1.0, &ad, 1.0, &bd, "ij->ij").unwrap();
            let sl = s.to_local(ctl).unwrap();
            let want: Vec<f64> = (0..512).map(|i| value(i, 1.0) + value(i, -0.4)).collect();
            assert!(
                sl.max_abs_diff(&LocalTensor::from_f64(&[64, 8], want).unwrap())
                    .unwrap()
                    < 1e-12
            );
            assert!(
                s.plan_summary().unwrap().replica_hits > 0,
                "{}",
                s.plan_summary().unwrap()
            );
            drop((ad, bd, s));
            ctl.drain().unwrap();
            ctl.collect().unwrap();
            assert_eq!(replicas_in_table(ctl), 0);
            assert_eq!(objects_on_ranks(ctl), base, "{:?}", ctl.store_stats().unwrap());
        })
        .unwrap();
}
