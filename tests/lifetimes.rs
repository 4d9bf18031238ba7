//! Block lifetimes: dropping the last handle of a distributed tensor
//! releases its blocks on their owners, in batches; operations in flight
//! keep their inputs alive; checkpoints keep theirs through drops, gc and
//! restart; object ids and tensors never cross universes.

use uni20::dist::{checkpoint, gc, restore, Checkpoint, DistError};
use uni20::persist::ObjectId;
use uni20::prelude::*;

#[path = "../examples/shared/mod.rs"]
mod shared;

/// The orthogonal matrix of `examples/chain.rs` (powers stay bounded).
fn orthogonal(n: usize) -> LocalTensor {
    LocalTensor::from_f64(&[n, n], shared::orthogonal(n)).unwrap()
}

fn identity(n: usize) -> LocalTensor {
    LocalTensor::from_f64(
        &[n, n],
        (0..n * n).map(|k| if k % (n + 1) == 0 { 1.0 } else { 0.0 }).collect(),
    )
    .unwrap()
}

/// Resident bytes of every rank's store.
fn resident(ctl: &Controller<'_>) -> Vec<u64> {
    ctl.store_stats().unwrap().iter().map(|s| s.bytes_resident).collect()
}

#[test]
fn ten_thousand_chained_contractions_keep_every_store_bounded() {
    uni20::universe()
        .ranks(4)
        .run(|ctl| {
            let m = DistTensor::from_local(ctl, &orthogonal(64), 32).unwrap();
            let mut x = DistTensor::from_local(ctl, &identity(64), 32).unwrap();
            let mut at_100 = Vec::new();
            for step in 1..=10_000 {
                x = contract(ctl, "ij,jk->ik", &x, &m).unwrap();
                if step == 100 {
                    x.wait(ctl).unwrap();
                    at_100 = resident(ctl);
                }
            }
            x.wait(ctl).unwrap();
            let at_10000 = resident(ctl);
            for (r, (a, b)) in at_100.iter().zip(&at_10000).enumerate() {
                assert!(
                    *b <= 2 * a.max(&1),
                    "rank {r}: {b} bytes resident after 10,000 steps, {a} after 100"
                );
            }
            // x and m: 8 blocks of 32 x 32 f64, plus the replicas of m's
            // blocks kept on the ranks that read them (at most one copy of
            // each of m's 4 blocks on each of the other 3 ranks), nothing else.
            let objects: u64 = ctl.store_stats().unwrap().iter().map(|s| s.objects).sum();
            let replicas: u64 = (0..ctl.size()).map(|r| ctl.ledger().replica_usage(r).replicas).sum();
            assert!(replicas <= 4 * 3, "{replicas} replicas");
            assert_eq!(objects, 8 + replicas, "{:?}", ctl.store_stats().unwrap());
            // And the values are right: M^10000 (orthogonal, so exact up to rounding).
            let mut want = identity(64);
            let backends = uni20::BackendList::default_cpu(1);
            let mm = orthogonal(64);
            for _ in 0..10_000 {
                want = uni20::dispatch::contract(
                    "ij,jk->ik",
                    C64::new(1.0, 0.0),
                    &want,
                    &mm,
                    C64::new(0.0, 0.0),
                    None,
                    &backends,
                )
                .unwrap();
            }
            assert!(x.to_local(ctl).unwrap().max_abs_diff(&want).unwrap() < 1e-9);
        })
        .unwrap();
}

#[test]
fn releases_are_batched_far_below_one_message_per_drop() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let m = DistTensor::from_local(ctl, &orthogonal(16), 8).unwrap();
            let mut x = DistTensor::from_local(ctl, &identity(16), 8).unwrap();
            let before = ctl.ledger().stats();
            for _ in 0..1000 {
                x = contract(ctl, "ij,jk->ik", &x, &m).unwrap();
            }
            x.wait(ctl).unwrap();
            let s = ctl.ledger().stats();
            let drops = s.drops - before.drops;
            let messages = s.release_commands - before.release_commands;
            assert!(drops >= 999, "{s:?}");
            assert!(s.objects_queued >= 3996, "every intermediate's 4 blocks queued: {s:?}");
            assert!(
                messages * 50 <= drops,
                "{messages} release messages for {drops} drops: {s:?}"
            );
            assert!(s.piggybacked_frames > 0, "releases travel with command frames: {s:?}");
            let objects: u64 = ctl.store_stats().unwrap().iter().map(|s| s.objects).sum();
            assert!(objects <= 8 + 4, "{objects} objects left");
        })
        .unwrap();
}

#[test]
fn inputs_dropped_while_their_consumer_is_in_flight_stay_alive_until_it_completes() {
    uni20::universe()
        .ranks(4)
        .run(|ctl| {
            let a_local = LocalTensor::from_f64(&[6, 5], (0..30).map(|v| v as f64 - 7.0).collect()).unwrap();
            let b_local = LocalTensor::from_f64(&[5, 4], (0..20).map(|v| 0.5 * v as f64).collect()).unwrap();
            let want = uni20::dispatch::contract(
                "ij,jk->ik",
                C64::new(1.0, 0.0),
                &a_local,
                &b_local,
                C64::new(0.0, 0.0),
                None,
                &uni20::BackendList::reference_only(),
            )
            .unwrap();
            for _ in 0..20 {
                let a = DistTensor::from_local(ctl, &a_local, 2).unwrap();
                let b = DistTensor::from_local(ctl, &b_local, 2).unwrap();
                // A chain whose later steps are still queued when the inputs go.
                let t = contract(ctl, "ij,jk->ik", &a, &b).unwrap();
                let u = contract(ctl, "ik,jk->ij", &t, &b).unwrap();
                let c = contract(ctl, "ij,jk->ik", &u, &b).unwrap();
                drop((a, b, t, u));
                ctl.collect().unwrap();
                let got = c.to_local(ctl).unwrap();
                // c = (A B) B^T B
                let bt_b = uni20::dispatch::contract(
                    "jk,jl->kl",
                    C64::new(1.0, 0.0),
                    &b_local,
                    &b_local,
                    C64::new(0.0, 0.0),
                    None,
                    &uni20::BackendList::reference_only(),
                )
                .unwrap();
                let want_c = uni20::dispatch::contract(
                    "ik,kl->il",
                    C64::new(1.0, 0.0),
                    &want,
                    &bt_b,
                    C64::new(0.0, 0.0),
                    None,
                    &uni20::BackendList::reference_only(),
                )
                .unwrap();
                assert!(got.max_abs_diff(&want_c).unwrap() < 1e-9);
            }
        })
        .unwrap();
}

#[test]
fn release_waits_for_the_owners_and_frees_the_blocks() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let base: u64 = ctl.store_stats().unwrap().iter().map(|s| s.objects).sum();
            let t = DistTensor::from_local(ctl, &identity(8), 2).unwrap();
            let alias = DistTensor::from_manifest(ctl, t.manifest(ctl).unwrap()).unwrap();
            let held: u64 = ctl.store_stats().unwrap().iter().map(|s| s.objects).sum();
            assert_eq!(held, base + 16);
            // Another handle still names the blocks: nothing is freed.
            let r = t.release(ctl).unwrap();
            assert_eq!(r.objects_freed, 0);
            assert_eq!(alias.to_local(ctl).unwrap(), identity(8));
            let r = alias.release(ctl).unwrap();
            assert_eq!(r.objects_freed, 16, "{r:?}");
            let after: u64 = ctl.store_stats().unwrap().iter().map(|s| s.objects).sum();
            assert_eq!(after, base);
        })
        .unwrap();
}

#[test]
fn checkpointed_blocks_survive_drops_gc_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let m = orthogonal(12);
    let (id, want) = uni20::universe()
        .ranks(3)
        .store_dir(dir.path())
        .run(|ctl| {
            let t = contract(
                ctl,
                "ij,jk->ik",
                &DistTensor::from_local(ctl, &m, 5).unwrap(),
                &DistTensor::from_local(ctl, &m, 5).unwrap(),
            )
            .unwrap();
            let mut cp = Checkpoint {
                label: "lifetimes".into(),
                ..Checkpoint::default()
            };
            cp.add(ctl, "t", &t).unwrap();
            let id = checkpoint(ctl, &cp).unwrap().id();
            let want = t.to_local(ctl).unwrap();
            // A temporary that nothing keeps, then every handle dropped.
            let scratch = DistTensor::from_local(ctl, &m, 5).unwrap();
            drop((t, scratch));
            ctl.collect().unwrap();
            let totals = gc(ctl).unwrap();
            assert_eq!(totals.ranks, 3);
            // Only the checkpoint's 9 blocks (12x12 in 5x5 blocks) and the
            // checkpoint object remain.
            let objects: u64 = ctl.store_stats().unwrap().iter().map(|s| s.objects).sum();
            assert_eq!(objects, 9 + 1, "{:?}", ctl.store_stats().unwrap());
            (id, want)
        })
        .unwrap();
    let got = uni20::universe()
        .ranks(3)
        .store_dir(dir.path())
        .run(|ctl| {
            // A fresh universe: gc first, then restore.
            gc(ctl).unwrap();
            let cp = restore(ctl, id).unwrap();
            let t = cp.tensor(ctl, "t").unwrap();
            let v = t.to_local(ctl).unwrap();
            // Dropping the restored tensor frees nothing the checkpoint keeps.
            drop(t);
            ctl.collect().unwrap();
            let again = cp.tensor(ctl, "t").unwrap().to_local(ctl).unwrap();
            assert_eq!(v, again);
            v
        })
        .unwrap();
    assert_eq!(got, want);
}

#[test]
fn ids_of_successive_universes_differ_and_tensors_do_not_cross_them() {
    let ids = |t: &DistTensor, ctl: &Controller<'_>| -> Vec<ObjectId> {
        t.manifest(ctl).unwrap().blocks.iter().map(|b| b.id).collect()
    };
    let (first, foreign) = uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let t = DistTensor::from_local(ctl, &identity(4), 2).unwrap();
            (ids(&t, ctl), t)
        })
        .unwrap();
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let t = DistTensor::from_local(ctl, &identity(4), 2).unwrap();
            let second = ids(&t, ctl);
            assert!(second.iter().all(|id| !first.contains(id)), "{first:?} vs {second:?}");
            let e = contract(ctl, "ij,jk->ik", &foreign, &t).unwrap_err();
            assert!(matches!(e, DistError::WrongUniverse { .. }), "{e}");
            let e = foreign.to_local(ctl).unwrap_err();
            assert!(matches!(e, DistError::WrongUniverse { .. }), "{e}");
            // The job is not stopped by it: nothing was submitted.
            assert_eq!(t.to_local(ctl).unwrap(), identity(4));
        })
        .unwrap();
}

#[test]
fn in_memory_stores_with_a_budget_spill_and_read_back_within_it() {
    // 3 in-process ranks with in-memory stores (no store directory) and a budget
    // of 16 KiB each: ten 64x64 tensors in blocks of 16 (2 KiB each, 16 blocks a
    // tensor on two workers: about 160 KiB per worker) cannot all stay resident.
    let budget = 16 * 1024;
    let n = 64;
    uni20::universe()
        .ranks(3)
        .memory_budget(budget)
        .run(|ctl| {
            let q = orthogonal(n);
            let tensors: Vec<DistTensor> = (0..10)
                .map(|k| {
                    let scaled = LocalTensor::from_f64(
                        &[n, n],
                        q.to_c64_vec().iter().map(|z| z.re * (k as f64 + 1.0)).collect(),
                    )
                    .unwrap();
                    DistTensor::from_local(ctl, &scaled, 16).unwrap()
                })
                .collect();
            let stats = ctl.store_stats().unwrap();
            for s in &stats {
                assert!(s.bytes_resident <= budget, "rank {}: {s:?}", s.rank);
            }
            let spilled: u64 = stats.iter().map(|s| s.bytes_spilled).sum();
            assert!(spilled > 0, "nothing spilled: {stats:?}");
            // Each tensor reads back as scattered: k * Q, and (k Q)^T (k Q) = k^2 I.
            for (k, t) in tensors.iter().enumerate() {
                let back = t.to_local(ctl).unwrap().to_c64_vec();
                let want = q.to_c64_vec();
                let f = k as f64 + 1.0;
                assert!(
                    back.iter().zip(&want).all(|(a, b)| (a.re - f * b.re).abs() < 1e-12),
                    "tensor {k}"
                );
                let g = contract(ctl, "ji,jk->ik", t, t)
                    .unwrap()
                    .to_local(ctl)
                    .unwrap()
                    .to_c64_vec();
                let id = identity(n).to_c64_vec();
                let err = g
                    .iter()
                    .zip(&id)
                    .map(|(a, b)| (a.re - f * f * b.re).abs())
                    .fold(0.0, f64::max);
                assert!(err < 1e-9 * f * f, "tensor {k}: |G - k^2 I| = {err}");
            }
        })
        .unwrap();
}
