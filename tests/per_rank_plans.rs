//! Per-rank plans on the in-process universe: a contraction over 3 workers
//! sends each participant only its share of the plan (its items and the
//! transfers it takes part in), so the command frames of one contraction
//! add up to the shares' bytes, not to the whole plan once per rank; the
//! result still equals the local reference, also when the plan comes from
//! the plan cache (re-bound to the new operands' ids, then split).

use uni20::dispatch::{contract as local_contract, BackendList};
use uni20::dist::plan::plan_contract;
use uni20::prelude::*;

fn ramp(shape: &[usize], scale: f64) -> LocalTensor {
    let n = shape.iter().product();
    LocalTensor::from_f64(shape, (0..n).map(|i| scale * (i as f64 + 1.0).sin()).collect()).unwrap()
}

fn local(spec: &str, a: &LocalTensor, b: &LocalTensor) -> LocalTensor {
    let spec = EinsumSpec::parse(spec).unwrap();
    local_contract(
        &spec,
        C64::new(1.0, 0.0),
        a,
        b,
        C64::new(0.0, 0.0),
        None,
        &BackendList::reference_only(),
    )
    .unwrap()
}

/// Control bytes the root has sent so far.
fn control_sent(ctl: &Controller<'_>) -> u64 {
    ctl.transport().traffic().control.bytes_sent
}

#[test]
fn a_contraction_sends_each_rank_its_share_and_matches_the_local_reference() {
    uni20::universe()
        .ranks(4)
        .run(|ctl| {
            let (la, lb) = (ramp(&[16, 12], 1.0), ramp(&[12, 16], 0.5));
            let want = local("ij,jk->ik", &la, &lb);
            for round in 0..2 {
                // Fresh operands each round: the second contraction's plan is
                // the first one's, re-bound from the cache to these ids.
                let a = DistTensor::from_local(ctl, &la, 2).unwrap();
                let b = DistTensor::from_local(ctl, &lb, 2).unwrap();
                let (ma, mb) = (a.manifest(ctl).unwrap(), b.manifest(ctl).unwrap());
                let plan = plan_contract(&ctl.compute_ranks(), "ij,jk->ik", &[&ma, &mb], &Default::default()).unwrap();
                let whole = plan.descriptor_bytes() as u64;
                let shares = plan.share_bytes();
                assert_eq!(plan.participants, [1, 2, 3]);
                assert_eq!(shares.iter().map(|s| s.0).collect::<Vec<_>>(), plan.participants);
                assert!(plan.summary().transfers > 0, "the test plan moves blocks");
                // Queued releases (round 0's tensors) go out now, not in
                // the contraction's frames.
                ctl.drain().unwrap();
                ctl.collect().unwrap();
                let before = control_sent(ctl);
                let c = contract(ctl, "ij,jk->ik", &a, &b).unwrap();
                ctl.drain().unwrap();
                let sent = control_sent(ctl) - before;
                assert_eq!(c.plan_summary().unwrap().cached, round == 1);
                // Three frames (one per participant), each its share plus the
                // envelope's and frame's few dozen bytes.
                let share_total: u64 = shares.iter().map(|s| s.1 as u64).sum();
                assert!(
                    sent >= share_total && sent <= share_total + 3 * 128,
                    "round {round}: sent {sent}, shares {shares:?}"
                );
                assert!(sent < 2 * whole, "round {round}: sent {sent}, whole plan {whole}");
                assert!(shares.iter().all(|s| (s.1 as u64) < whole));
                let got = c.to_local(ctl).unwrap();
                assert!(got.max_abs_diff(&want).unwrap() < 1e-12, "round {round}");
            }
        })
        .unwrap();
}
