//! Checkpoint and restart on disk-backed stores: a run that stops after a
//! checkpoint, followed by a run that restores it (same store directory,
//! same ranks) and continues, gives bit-identical values to an
//! uninterrupted run.

use uni20::dist::{checkpoint, restore, Checkpoint};
use uni20::persist::ObjectId;
use uni20::prelude::*;

fn matrix(n: usize, seed: f64) -> LocalTensor {
    LocalTensor::from_f64(
        &[n, n],
        (0..n * n)
            .map(|i| ((i as f64 + seed) * 0.37).sin() / n as f64)
            .collect(),
    )
    .unwrap()
}

/// Steps of x <- x . M (with a trace after each step), from `x` at `from`.
fn run_steps(
    ctl: &Controller<'_>,
    x: DistTensor,
    m: &DistTensor,
    range: std::ops::Range<u64>,
) -> (DistTensor, Vec<f64>) {
    let mut x = x;
    let mut traces = Vec::new();
    for _ in range {
        x = contract(ctl, "ij,jk->ik", &x, m).unwrap();
        // The trace (a repeated label) and the squared Frobenius norm.
        let tr = uni20::dist::einsum(ctl, "ii->", &[&x], &Default::default())
            .unwrap()
            .to_local(ctl)
            .unwrap();
        let f = contract(ctl, "ij,ij->", &x, &x).unwrap().to_local(ctl).unwrap();
        traces.push(tr.to_c64_vec()[0].re);
        traces.push(f.to_c64_vec()[0].re);
    }
    (x, traces)
}

#[test]
fn restart_from_a_checkpoint_gives_identical_values() {
    let uninterrupted = tempfile::tempdir().unwrap();
    let split = tempfile::tempdir().unwrap();
    let n = 7;
    let full = uni20::universe()
        .ranks(3)
        .store_dir(uninterrupted.path())
        .run(|ctl| {
            let x = DistTensor::from_local(ctl, &matrix(n, 1.0), 3).unwrap();
            let m = DistTensor::from_local(ctl, &matrix(n, 2.0), 3).unwrap();
            run_steps(ctl, x, &m, 0..8).1
        })
        .unwrap();

    let (id, first) = uni20::universe()
        .ranks(3)
        .store_dir(split.path())
        .run(|ctl| {
            let x = DistTensor::from_local(ctl, &matrix(n, 1.0), 3).unwrap();
            let m = DistTensor::from_local(ctl, &matrix(n, 2.0), 3).unwrap();
            let (x, values) = run_steps(ctl, x, &m, 0..4);
            let mut cp = Checkpoint {
                label: "test".into(),
                step: 4,
                scalars: values.clone(),
                tensors: vec![],
            };
            cp.add(ctl, "x", &x).unwrap();
            cp.add(ctl, "m", &m).unwrap();
            (checkpoint(ctl, &cp).unwrap().id(), values)
        })
        .unwrap();
    // The id printed by the first run restores the state in a new universe.
    let id: ObjectId = id.to_string().parse().unwrap();
    let second = uni20::universe()
        .ranks(3)
        .store_dir(split.path())
        .run(|ctl| {
            let cp = restore(ctl, id).unwrap();
            assert_eq!(cp.step, 4);
            assert_eq!(cp.scalars, first);
            let (x, m) = (cp.tensor(ctl, "x").unwrap(), cp.tensor(ctl, "m").unwrap());
            run_steps(ctl, x, &m, 4..8).1
        })
        .unwrap();
    let resumed: Vec<f64> = first.iter().chain(&second).copied().collect();
    assert_eq!(resumed.len(), 16, "a trace and a norm per step");
    for (i, (a, b)) in resumed.iter().zip(&full).enumerate() {
        assert_eq!(a.to_bits(), b.to_bits(), "step {i}: {a} vs {b}");
    }
}

/// A checkpoint superseded and retired cannot be restored (a typed error
/// naming the missing block, not a failed command later); after a restart
/// the stores know the block type before loading anything, so `gc` on the
/// reopened stores works and keeps exactly what the restored checkpoint
/// needs.
#[test]
fn retired_checkpoints_refuse_and_gc_after_restart_keeps_the_current_one() {
    use uni20::dist::{gc, retire};
    let dir = tempfile::tempdir().unwrap();
    let n = 6;
    let (old_id, new_id, want) = uni20::universe()
        .ranks(3)
        .store_dir(dir.path())
        .run(|ctl| {
            let x = DistTensor::from_local(ctl, &matrix(n, 1.0), 3).unwrap();
            let mut old = Checkpoint::default();
            old.add(ctl, "x", &x).unwrap();
            let old_id = checkpoint(ctl, &old).unwrap().id();
            let m = DistTensor::from_local(ctl, &matrix(n, 2.0), 3).unwrap();
            // Factors of an SVD: committed on the factorizing worker and moved to
            // their owners, where they are kept as received bytes (another origin).
            let y = uni20::dist::svd(
                ctl,
                &contract(ctl, "ij,jk->ik", &x, &m).unwrap(),
                "a|b",
                &Default::default(),
            )
            .unwrap()
            .u;
            drop(x);
            let mut new = Checkpoint::default();
            new.add(ctl, "y", &y).unwrap();
            let new_id = checkpoint(ctl, &new).unwrap().id();
            retire(ctl, &old);
            let want = y.to_local(ctl).unwrap();
            drop(y);
            ctl.collect().unwrap();
            let err = restore(ctl, old_id).unwrap_err();
            let text = err.to_string();
            assert!(
                matches!(
                    &err,
                    uni20::DistError::NotFound(uni20::dist::error::Missing::CheckpointBlock { checkpoint, tensor, .. })
                        if *checkpoint == old_id && tensor == "x"
                ),
                "{err}"
            );
            assert!(text.contains("tensor `x`") && text.contains("superseded"), "{text}");
            (old_id, new_id, want)
        })
        .unwrap();
    uni20::universe()
        .ranks(3)
        .store_dir(dir.path())
        .run(|ctl| {
            let cp = restore(ctl, new_id).unwrap();
            let y = cp.tensor(ctl, "y").unwrap();
            // Right after the restart nothing is loaded: every kept block is an
            // undecoded file whose references gc must still know.
            let totals = gc(ctl).unwrap();
            assert_eq!(totals.ranks, 3);
            let z = contract(ctl, "ij,kj->ik", &y, &y).unwrap();
            let w = want.to_c64_vec();
            let z_want: Vec<f64> = (0..n * n)
                .map(|ik| (0..n).map(|j| w[(ik / n) * n + j].re * w[(ik % n) * n + j].re).sum())
                .collect();
            z.wait(ctl).unwrap();
            // And with blocks received as bytes (factors moved to their owners
            // by an SVD, replicas of a contraction) and never decoded there.
            let f = uni20::dist::svd(ctl, &y, "a|b", &Default::default()).unwrap();
            gc(ctl).unwrap();
            let (u, vh) = (f.u.to_local(ctl).unwrap(), f.vh.to_local(ctl).unwrap());
            assert_eq!((u.shape(), vh.shape()), (&[n, n][..], &[n, n][..]));
            assert_eq!(y.to_local(ctl).unwrap().max_abs_diff(&want).unwrap(), 0.0);
            let z_got = z.to_local(ctl).unwrap().to_c64_vec();
            for (g, e) in z_got.iter().zip(&z_want) {
                assert!((g.re - e).abs() < 1e-12, "{} vs {e}", g.re);
            }
            assert!(restore(ctl, old_id).is_err());
        })
        .unwrap();
}

/// A block file of a checkpoint damaged on disk (truncated, a flipped
/// payload byte) makes the restore fail with a typed error naming the block,
/// its file and the check it failed, not the "not found" of a superseded
/// checkpoint; with the file repaired the same checkpoint restores.
#[test]
fn a_damaged_block_file_is_reported_as_damaged_not_missing() {
    use uni20::persist::FailedCheck;
    let dir = tempfile::tempdir().unwrap();
    let n = 7;
    let (id, block) = uni20::universe()
        .ranks(3)
        .store_dir(dir.path())
        .run(|ctl| {
            let x = DistTensor::from_local(ctl, &matrix(n, 1.0), 3).unwrap();
            let mut cp = Checkpoint::default();
            cp.add(ctl, "x", &x).unwrap();
            let id = checkpoint(ctl, &cp).unwrap().id();
            let block = *cp.tensors[0].1.blocks.iter().find(|b| b.owner == 2).unwrap();
            (id, block)
        })
        .unwrap();
    let b = block.id;
    let file = dir
        .path()
        .join("rank-2")
        .join(format!("{}-{}-{:016x}.obj", b.origin, b.seq, b.nonce));
    let good = std::fs::read(&file).unwrap();
    let restore_err = || {
        uni20::universe()
            .ranks(3)
            .store_dir(dir.path())
            .run(|ctl| restore(ctl, id).map(|_| ()))
            .unwrap()
            .unwrap_err()
    };
    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 0x40;
    for (bytes, check, words) in [
        (&good[..good.len() - 8], FailedCheck::Size, "truncated"),
        (&flipped[..], FailedCheck::Checksum, "CRC-32"),
    ] {
        std::fs::write(&file, bytes).unwrap();
        let err = restore_err();
        let text = err.to_string();
        match &err {
            uni20::DistError::DamagedBlock {
                checkpoint,
                tensor,
                rank,
                damage,
            } => {
                assert_eq!((*checkpoint, tensor.as_str(), *rank), (id, "x", 2), "{text}");
                assert_eq!((damage.id, damage.check), (b, check), "{text}");
                assert_eq!(damage.path.as_deref(), Some(&*file), "{text}");
            }
            other => panic!("expected DamagedBlock, got {other:?}"),
        }
        assert!(
            text.contains(&file.display().to_string()) && text.contains(&check.to_string()) && text.contains(words),
            "{text}"
        );
        assert!(!text.contains("not found") && !text.contains("superseded"), "{text}");
        assert!(!text.contains('\n'), "one line: {text}");
    }
    std::fs::write(&file, &good).unwrap();
    let x = uni20::universe()
        .ranks(3)
        .store_dir(dir.path())
        .run(|ctl| {
            let cp = restore(ctl, id).unwrap();
            cp.tensor(ctl, "x").unwrap().to_local(ctl).unwrap()
        })
        .unwrap();
    assert_eq!(x.max_abs_diff(&matrix(n, 1.0)).unwrap(), 0.0);
}
