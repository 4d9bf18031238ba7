//! Distributed operations ordered by epochs (uni20-async): `contract`
//! returns at once with a tensor whose block map is written when the
//! workers reply, or at submission when the outputs are named (pipelined
//! submission, the default); dependent operations wait on read epochs;
//! failures poison every dependent tensor with the first error.

use uni20::dispatch::{contract as local_contract, BackendList};
use uni20::dist::{BlockRef, Manifest};
use uni20::persist::ObjectId;
use uni20::prelude::*;
use uni20::DistError;

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

#[test]
fn chained_contractions_are_submitted_without_waiting() {
    uni20::universe()
        .ranks(4)
        .run(|ctl| {
            let (la, lb, ld) = (ramp(&[6, 5], 1.0), ramp(&[5, 7], 0.5), ramp(&[7, 4], 2.0));
            let a = DistTensor::from_local(ctl, &la, 2).unwrap();
            let b = DistTensor::from_local(ctl, &lb, 2).unwrap();
            let d = DistTensor::from_local(ctl, &ld, 2).unwrap();
            // Unpipelined first: E is planned only once C has completed.
            uni20::dist::set_pipelining(ctl, false);
            let c = contract(ctl, "ij,jk->ik", &a, &b).unwrap();
            // C's contraction is on the wire, not finished: E cannot be planned yet.
            assert_eq!(ctl.in_flight(), 1);
            assert!(!c.is_ready() || ctl.in_flight() == 0);
            let e = contract(ctl, "ik,kl->il", &c, &d).unwrap();
            assert!(!e.is_ready());
            assert_eq!(ctl.deferred(), 1, "E waits for C's epoch");
            assert_eq!(e.shape(), &[6, 4]);
            let want = local("ik,kl->il", &local("ij,jk->ik", &la, &lb), &ld);
            assert!(e.to_local(ctl).unwrap().max_abs_diff(&want).unwrap() < 1e-12);
            // Pipelined (the default): C's outputs are named at submission,
            // so E is planned and sent at once, before C's replies.
            uni20::dist::set_pipelining(ctl, true);
            let sent = ctl.profile().operations;
            let c = contract(ctl, "ij,jk->ik", &a, &b).unwrap();
            let e = contract(ctl, "ik,kl->il", &c, &d).unwrap();
            assert_eq!(ctl.deferred(), 0, "E did not wait for C");
            assert_eq!(ctl.profile().operations - sent, 2, "C and E are both sent");
            // Reading E drives both operations, in program order.
            let got = e.to_local(ctl).unwrap();
            let want = local("ik,kl->il", &local("ij,jk->ik", &la, &lb), &ld);
            assert!(got.max_abs_diff(&want).unwrap() < 1e-12);
            assert!(c.is_ready() && e.is_ready());
            assert_eq!((ctl.in_flight(), ctl.deferred()), (0, 0));
            // A long chain, submitted before anything is read.
            let mut x = a.clone();
            let mut lx = la.clone();
            let sq = DistTensor::from_local(ctl, &ramp(&[5, 5], 0.3), 2).unwrap();
            let lsq = ramp(&[5, 5], 0.3);
            let mut pending = Vec::new();
            for _ in 0..6 {
                x = contract(ctl, "ij,jk->ik", &x, &sq).unwrap();
                lx = local("ij,jk->ik", &lx, &lsq);
                pending.push(x.clone());
            }
            assert_eq!(ctl.deferred(), 0, "dependent operations are sent at once");
            let got = x.to_local(ctl).unwrap();
            assert!(got.max_abs_diff(&lx).unwrap() < 1e-10);
            assert!(pending.iter().all(DistTensor::is_ready));
        })
        .unwrap();
}

#[test]
fn a_failed_first_contraction_fails_the_dependent_one_with_the_first_error() {
    let mut seen = None;
    let started = std::time::Instant::now();
    let outcome = uni20::universe().ranks(3).run(|ctl| {
        let a = DistTensor::from_local(ctl, &ramp(&[4, 4], 1.0), 2).unwrap();
        let mut m: Manifest = a.manifest(ctl).unwrap();
        m.blocks[2] = BlockRef {
            owner: m.blocks[2].owner,
            id: ObjectId::new(7, 4242),
        };
        let bad = DistTensor::from_manifest(ctl, m).unwrap();
        let c = contract(ctl, "ij,jk->ik", &bad, &a).unwrap();
        // Pipelined, E and F are sent behind C; if the root has already
        // collected C's failure (it collects the replies in after each
        // submission), the call itself returns it.
        let e = contract(ctl, "ik,kl->il", &c, &a);
        let f = e.as_ref().ok().map(|e| contract(ctl, "il,lm->im", e, &a));
        // Read the last one first: it must fail with C's error, not hang.
        let ef = match f {
            Some(Ok(f)) => f.to_local(ctl).unwrap_err(),
            Some(Err(err)) => err,
            None => contract(ctl, "il,lm->im", &c, &a).unwrap_err(),
        };
        let ee = match e {
            Ok(e) => e.wait(ctl).unwrap_err(),
            Err(err) => err,
        };
        let ec = c.to_local(ctl).unwrap_err();
        seen = Some((ec, ee, ef));
    });
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert!(outcome.is_err(), "the job must report the failure");
    let (ec, ee, ef) = seen.unwrap();
    for (name, err) in [("C", &ec), ("E", &ee), ("F", &ef)] {
        let text = err.to_string();
        assert!(
            text.contains("r7:4242") && text.contains("uni20.contract.v1"),
            "{name}: {text}"
        );
        assert!(
            text.contains("op_id 2"),
            "{name} must carry the first failure (op 2): {text}"
        );
    }
    assert!(
        matches!(ef, DistError::Job(_) | DistError::Async(_) | DistError::Failed(_)),
        "{ef:?}"
    );
}
