//! Pipelined submission on the in-process universe (3 ranks: root + 2
//! workers): a dependent contraction or element-wise operation is planned
//! and sent against its input's named outputs without waiting for the
//! input's replies, so a chain of them is in flight at once; the results
//! equal the unpipelined run and the local reference; a failure in the
//! middle reaches every later operation; a tensor dropped while pipelined
//! operations still read it stays until they are done; a long chain lets
//! its intermediates go while it is sent; named outputs spill, checkpoint
//! and restore in disk stores, and mix with offload and storage ranks.

use uni20::dispatch::{contract as local_contract, BackendList};
use uni20::dist::{checkpoint, restore, Checkpoint};
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
/// without waiting; the most operations that waited on the root to be
/// planned (deferred) right after a call, and the result.
fn chain(ctl: &Controller<'_>, x0: &LocalTensor, m: &LocalTensor) -> (usize, LocalTensor) {
    let m = DistTensor::from_local(ctl, m, 4).unwrap();
    let mut x = DistTensor::from_local(ctl, x0, 4).unwrap();
    x.wait(ctl).unwrap();
    m.wait(ctl).unwrap();
    let mut most = 0;
    for _ in 0..STEPS {
        let y = contract(ctl, "ij,jk->ik", &x, &m).unwrap();
        x = uni20::dist::axpby(ctl, 0.5, &y, 0.25, &x, "ij,ij->ij").unwrap();
        most = most.max(ctl.deferred());
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
            let (piped_waiting, piped) = chain(ctl, &x0, &m);
            uni20::dist::set_pipelining(ctl, false);
            let (plain_waiting, plain) = chain(ctl, &x0, &m);
            // Pipelined, every step is sent when it is called; unpipelined,
            // a step waits on the root until its input's replies are in.
            assert_eq!(piped_waiting, 0, "pipelined: operations waited to be planned");
            assert!(plain_waiting >= 1, "unpipelined: no operation waited");
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
            // Operation k of the chain produces outputs[k - 1]; a call made
            // after the root has seen the failure returns it at once.
            let mut outputs: Vec<Result<DistTensor, DistError>> = Vec::new();
            for _ in 0..10 {
                let y = contract(ctl, "ij,jk->ik", &x, &m);
                let next = y
                    .as_ref()
                    .map_err(|e| DistError::Protocol(e.to_string()))
                    .and_then(|y| uni20::dist::axpby(ctl, 0.5, y, 0.25, &x, "ij,ij->ij"));
                if let Ok(n) = &next {
                    x = n.clone();
                }
                outputs.push(y);
                outputs.push(next);
            }
            for t in &outputs[6..] {
                let e = match t {
                    Ok(t) => t.wait(ctl).unwrap_err().to_string(),
                    Err(e) => e.to_string(),
                };
                assert!(
                    e.contains("injected error") && e.contains(&format!("op_id {failing}")),
                    "a later operation reports the first failure: {e}"
                );
                outputs_checked += 1;
            }
            if let Ok(last) = &outputs[19] {
                assert!(last.to_local(ctl).is_err());
            }
        });
    assert!(out.is_err(), "the universe reports the failure");
    assert_eq!(outputs_checked, 14);
}

/// The variant [`DistTensor::wait`] returns for a pipelined operation whose
/// command failed, when its failing reply was collected before the wait
/// (`first`) and when the wait collects it.
fn wait_error_of_failed_pipelined_op(collect_first: bool) -> DistError {
    let (x0, m) = (ramp(&[8, 8], 1.0), ramp(&[8, 8], 0.7));
    let failing = ops_before_chain(&x0, &m) + 1;
    let mut seen = None;
    let out = uni20::universe()
        .ranks(3)
        .faults(FaultPlan::parse(&format!("error@rank=2,op={failing}")).unwrap())
        .run(|ctl| {
            let m = DistTensor::from_local(ctl, &m, 4).unwrap();
            let x = DistTensor::from_local(ctl, &x0, 4).unwrap();
            x.wait(ctl).unwrap();
            m.wait(ctl).unwrap();
            let y = contract(ctl, "ij,jk->ik", &x, &m).unwrap();
            if collect_first {
                let start = std::time::Instant::now();
                while !y.is_ready() {
                    assert!(start.elapsed().as_secs() < 30, "the failing reply never came");
                    // Collects replies without blocking; it reports the
                    // failure it collects.
                    let _ = ctl.progress();
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            }
            seen = Some(y.wait(ctl).unwrap_err());
        });
    assert!(out.is_err());
    seen.unwrap()
}

#[test]
fn wait_returns_the_command_failure_whether_its_reply_came_before_or_during_the_wait() {
    for collect_first in [true, false] {
        let e = wait_error_of_failed_pipelined_op(collect_first);
        let DistError::Job(uni20::worker::JobError::Command(d)) = &e else {
            panic!("collected first: {collect_first}: expected a command failure, got {e:?}")
        };
        assert_eq!(d.rank, 2, "{e}");
        assert!(e.to_string().contains("injected error"), "{e}");
    }
}

/// Objects held by every rank's store.
fn objects_on_ranks(ctl: &Controller<'_>) -> u64 {
    ctl.store_stats().unwrap().iter().map(|s| s.objects).sum()
}

#[test]
fn a_long_pipelined_chain_releases_its_intermediates_while_it_is_sent() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let m = DistTensor::from_local(ctl, &ramp(&[16, 16], 0.1), 8).unwrap();
            let mut x = DistTensor::from_local(ctl, &ramp(&[16, 16], 1.0), 8).unwrap();
            x.wait(ctl).unwrap();
            for _ in 0..40 {
                x = contract(ctl, "ij,jk->ik", &x, &m).unwrap();
                // Time for the workers to finish the step: its reply is
                // collected at the next submission and its input released.
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            assert_eq!(ctl.deferred(), 0);
            // The stats command runs on the ranks after the whole chain;
            // before the fix every generation of `x` (41 x 4 blocks) was
            // still there.
            let held = objects_on_ranks(ctl);
            assert!(
                held <= 4 * 6,
                "{held} objects on the ranks (m and a few generations of x expected)"
            );
            x.wait(ctl).unwrap();
        })
        .unwrap();
}

#[test]
fn a_tensor_released_in_flight_is_freed_once_its_command_has_run() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let m = DistTensor::from_local(ctl, &ramp(&[16, 16], 0.1), 8).unwrap();
            let x = DistTensor::from_local(ctl, &ramp(&[16, 16], 1.0), 8).unwrap();
            ctl.drain().unwrap();
            let before = objects_on_ranks(ctl);
            let y = contract(ctl, "ij,jk->ik", &x, &m).unwrap();
            let report = y.release(ctl).unwrap();
            assert_eq!(report.objects_freed, 4, "{report:?}");
            ctl.drain().unwrap();
            // The workers keep the blocks of x and m they received, as the
            // root's replica table says.
            let replicas: u64 = (0..ctl.size()).map(|r| ctl.ledger().replica_usage(r).replicas).sum();
            assert_eq!(objects_on_ranks(ctl), before + replicas);
        })
        .unwrap();
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
            assert_eq!(objects_on_ranks(ctl), 0, "blocks left on the ranks");
        })
        .unwrap();
}

/// `x <- 0.5 (x . m) + 0.25 x`, `steps` times, sent without waiting.
fn steps(ctl: &Controller<'_>, mut x: DistTensor, m: &DistTensor, n: usize) -> DistTensor {
    for _ in 0..n {
        let y = contract(ctl, "ij,jk->ik", &x, m).unwrap();
        x = uni20::dist::axpby(ctl, 0.5, &y, 0.25, &x, "ij,ij->ij").unwrap();
    }
    x
}

/// Named outputs in disk stores under a tiny memory budget (spilled as the
/// stores' own objects), checkpointed, restored by a new universe (whose
/// names carry another nonce) and continued, then collected: the same bytes
/// as the uninterrupted run.
#[test]
fn pipelined_outputs_spill_checkpoint_and_restore_in_disk_stores() {
    let dir = tempfile::tempdir().unwrap();
    let (x0, m0) = (ramp(&[8, 8], 1.0), ramp(&[8, 8], 0.7));
    let mut want = None;
    let id = uni20::universe()
        .ranks(3)
        .store_dir(dir.path())
        .memory_budget(200)
        .run(|ctl| {
            let m = DistTensor::from_local(ctl, &m0, 4).unwrap();
            let x = steps(ctl, DistTensor::from_local(ctl, &x0, 4).unwrap(), &m, 10);
            let mut cp = Checkpoint::default();
            cp.add(ctl, "x", &x).unwrap();
            cp.add(ctl, "m", &m).unwrap();
            let p = checkpoint(ctl, &cp).unwrap();
            want = Some(steps(ctl, x, &m, 5).to_local(ctl).unwrap());
            p.id()
        })
        .unwrap();
    let got = uni20::universe()
        .ranks(3)
        .store_dir(dir.path())
        .memory_budget(200)
        .run(|ctl| {
            let cp = restore(ctl, id).unwrap();
            let (x, m) = (cp.tensor(ctl, "x").unwrap(), cp.tensor(ctl, "m").unwrap());
            let r = steps(ctl, x, &m, 5).to_local(ctl).unwrap();
            uni20::dist::gc(ctl).unwrap();
            r
        })
        .unwrap();
    assert_eq!(got.as_bytes(), want.unwrap().as_bytes());
}

/// With a storage rank, a small budget, and offload/prefetch between
/// pipelined steps: the same bytes as the unpipelined run.
#[test]
fn pipelined_steps_with_offload_and_a_storage_rank_equal_the_unpipelined_run() {
    let (x0, m0) = (ramp(&[8, 8], 1.0), ramp(&[8, 8], 0.7));
    let run = |pipelined: bool| {
        uni20::universe()
            .ranks(4)
            .storage_ranks(1)
            .memory_budget(300)
            .run(|ctl| {
                uni20::dist::set_pipelining(ctl, pipelined);
                let m = DistTensor::from_local(ctl, &m0, 4).unwrap();
                let mut x = DistTensor::from_local(ctl, &x0, 4).unwrap();
                for _ in 0..6 {
                    x = steps(ctl, x, &m, 2);
                    uni20::dist::offload(ctl, &x).unwrap();
                    uni20::dist::prefetch(ctl, &x).unwrap();
                }
                x.to_local(ctl).unwrap()
            })
            .unwrap()
    };
    assert_eq!(run(true).as_bytes(), run(false).as_bytes());
}
