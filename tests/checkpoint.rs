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
