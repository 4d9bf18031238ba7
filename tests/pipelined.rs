//! Pipelined submission on the in-process universe (3 ranks: root + 2
//! workers): a dependent contraction or element-wise operation is planned
//! and sent against its input's named outputs without waiting for the
//! input's replies, so a chain of them is in flight at once; the results
//! equal the unpipelined run and the local reference; a failure in the
//! middle reaches every later operation; a tensor dropped while pipelined
//! operations still read it stays until they are done.

use uni20::dispatch::{contract as local_contract, BackendList};
use uni20::prelude::*;
use uni20::worker::fault::FaultPlan;

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

fn max_diff(a: &LocalTensor, b: &LocalTensor) -> f64 {
    a.max_abs_diff(b).expect("same shape and dtype")
}

fn values(t: &LocalTensor) -> Vec<f64> {
    t.to_c64_vec().iter().map(|z| z.re).collect()
}

const STEPS: usize = 24;

/// `x <- 0.5 (x . m) + 0.25 x` for `STEPS` steps on 2 x 2 blocks spread
/// over both workers (so steps move blocks between them), submitted
/// without waiting; the most operations in flight at once, and the result.
fn chain(ctl: &Controller<'_>, x0: &LocalTensor, m: &LocalTensor) -> (usize, LocalTensor) {
    let m = DistTensor::from_local(ctl, m, 4).unwrap();
    let mut x = DistTensor::from_local(ctl, x0, 4).unwrap();
    x.wait(ctl).unwrap();
    m.wait(ctl).unwrap();
    let mut most = 0;
    for _ in 0..STEPS {
        let y = contract(ctl, "ij,jk->ik", &x, &m).unwrap();
        x = uni20::dist::axpby(ctl, 0.5, &y, 0.25, &x, "ij,ij->ij").unwrap();
        most = most.max(ctl.in_flight());
    }
    (most, x.to_local(ctl).unwrap())
}

fn reference(x0: &LocalTensor, m: &LocalTensor) -> LocalTensor {
    let mut x = values(x0);
    for _ in 0..STEPS {
        let t = LocalTensor::from_f64(&[8, 8], x.clone()).unwrap();
        let y = values(&local_matmul(&t, m));
        x = y.iter().zip(&x).map(|(y, x)| 0.5 * y + 0.25 * x).collect();
    }
    LocalTensor::from_f64(&[8, 8], x).unwrap()
}

#[test]
fn a_pipelined_chain_runs_ahead_and_equals_the_unpipelined_run_and_the_reference() {
    let (x0, m) = (ramp(&[8, 8], 1.0), ramp(&[8, 8], 0.7));
    let want = reference(&x0, &m);
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            assert!(uni20::dist::pipelining(ctl), "on by default");
            let (ahead, piped) = chain(ctl, &x0, &m);
            uni20::dist::set_pipelining(ctl, false);
            let (waited, plain) = chain(ctl, &x0, &m);
            // Pipelined, the whole chain is sent before the first replies
            // are back; unpipelined, a step is planned only once its input
            // has completed, so at most one operation is in flight.
            assert!(ahead >= STEPS, "pipelined: at most {ahead} operations in flight");
            assert!(waited <= 1, "unpipelined: {waited} operations in flight");
            assert_eq!(piped.as_bytes(), plain.as_bytes(), "bit for bit");
            let d = max_diff(&piped, &want);
            assert!(d < 1e-12, "against the local reference: {d:e}");
        })
        .unwrap();
}

/// Commands a run of `prefix` submits before its chain (to place a fault
/// on the chain's `k`-th operation).
fn ops_before_chain(x0: &LocalTensor, m: &LocalTensor) -> u64 {
    let mut ops = 0;
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let m = DistTensor::from_local(ctl, m, 4).unwrap();
            let x = DistTensor::from_local(ctl, x0, 4).unwrap();
            x.wait(ctl).unwrap();
            m.wait(ctl).unwrap();
            ops = ctl.profile().operations;
        })
        .unwrap();
    ops
}

#[test]
fn a_failure_in_the_middle_of_a_pipelined_chain_reaches_every_later_operation() {
    let (x0, m) = (ramp(&[8, 8], 1.0), ramp(&[8, 8], 0.7));
    // Op ids count from 1: the chain's first contraction is op `before + 1`;
    // the fault hits the 7th operation of the chain, on worker 2.
    let failing = ops_before_chain(&x0, &m) + 7;
    let mut outputs_checked = 0;
    let out = uni20::universe()
        .ranks(3)
        .faults(FaultPlan::parse(&format!("error@rank=2,op={failing}")).unwrap())
        .run(|ctl| {
            let m = DistTensor::from_local(ctl, &m, 4).unwrap();
            let mut x = DistTensor::from_local(ctl, &x0, 4).unwrap();
            x.wait(ctl).unwrap();
            m.wait(ctl).unwrap();
            let mut outputs = Vec::new();
            for _ in 0..10 {
                let y = contract(ctl, "ij,jk->ik", &x, &m).unwrap();
                x = uni20::dist::axpby(ctl, 0.5, &y, 0.25, &x, "ij,ij->ij").unwrap();
                outputs.push(y);
                outputs.push(x.clone());
            }
            assert!(ctl.in_flight() > 7, "the chain was sent past the failing operation");
            // Operation k of the chain produced outputs[k - 1].
            for t in &outputs[6..] {
                let e = t.wait(ctl).unwrap_err().to_string();
                assert!(
                    e.contains("injected error") && e.contains(&format!("op_id {failing}")),
                    "a later operation reports the first failure: {e}"
                );
                outputs_checked += 1;
            }
            assert!(outputs[19].to_local(ctl).is_err());
        });
    assert!(out.is_err(), "the universe reports the failure");
    assert_eq!(outputs_checked, 14);
}

#[test]
fn a_tensor_dropped_while_pipelined_operations_read_it_stays_until_they_are_done() {
    let (x0, m) = (ramp(&[8, 8], 1.0), ramp(&[8, 8], 0.7));
    let want = reference(&x0, &m);
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let m = DistTensor::from_local(ctl, &m, 4).unwrap();
            let mut x = DistTensor::from_local(ctl, &x0, 4).unwrap();
            for _ in 0..STEPS {
                let y = contract(ctl, "ij,jk->ik", &x, &m).unwrap();
                // The previous `x` and `y` are dropped here, with the
                // operations reading them still in flight, and the queued
                // releases sent (`collect`) while they are.
                x = uni20::dist::axpby(ctl, 0.5, &y, 0.25, &x, "ij,ij->ij").unwrap();
                drop(y);
                ctl.collect().unwrap();
            }
            assert!(ctl.in_flight() > 0 || x.is_ready());
            let got = x.to_local(ctl).unwrap();
            let d = max_diff(&got, &want);
            assert!(d < 1e-12, "{d:e}");
            // Everything but `x` and `m` is released once the chain is done.
            drop(m);
            drop(x);
            ctl.drain().unwrap();
            ctl.collect().unwrap();
            let held: u64 = ctl.store_stats().unwrap().iter().map(|s| s.objects).sum();
            assert_eq!(held, 0, "blocks left on the ranks");
        })
        .unwrap();
}
