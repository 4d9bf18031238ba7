//! Bad input gets a typed error on the root before anything is submitted,
//! registries that differ stop the job at start-up, and a failing command
//! stops the job with a diagnostic naming rank, op_id and wire name.

use uni20::dispatch::{ContractError, SpecError};
use uni20::dist::{BlockRef, Manifest};
use uni20::persist::ObjectId;
use uni20::prelude::*;
use uni20::worker::{CommandEntry, Registry};
use uni20::{DistError, JobError};

fn tensor(ctl: &Controller<'_>, shape: &[usize], block: usize) -> DistTensor {
    let n = shape.iter().product();
    let t = LocalTensor::from_f64(shape, (0..n).map(|i| i as f64).collect()).unwrap();
    DistTensor::from_local(ctl, &t, block).unwrap()
}

#[test]
fn validation_errors_are_typed_and_leave_the_job_usable() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let a = tensor(ctl, &[2, 3], 2);
            let b = tensor(ctl, &[3, 4], 2);
            let e = contract(ctl, "ij,jk->ik->", &a, &b).unwrap_err();
            assert!(matches!(e, DistError::Spec(_)), "{e}");
            let e = contract(ctl, "ij,jk,kl->il", &a, &b).unwrap_err();
            assert!(matches!(e, DistError::Spec(SpecError::TooManyOperands { .. })), "{e:?}");
            let e = contract(ctl, "ij,jk->iz", &a, &b).unwrap_err();
            assert!(
                matches!(e, DistError::Spec(SpecError::UnknownOutputLabel { .. })),
                "{e:?}"
            );
            let e = contract(ctl, "ijk,jk->ik", &a, &b).unwrap_err();
            assert!(matches!(e, DistError::Spec(SpecError::RankMismatch { .. })), "{e:?}");
            let e = contract(ctl, "ij,ik->jk", &a, &b).unwrap_err();
            assert!(matches!(e, DistError::Spec(SpecError::ExtentMismatch { .. })), "{e:?}");
            let e = contract(ctl, "i1,jk->ik", &a, &b).unwrap_err();
            assert!(matches!(e, DistError::Spec(_)), "{e:?}");
            // Same extents, different blocking: refused in strict mode (by
            // default the cheaper operand is reblocked; see tests/ops_fixtures.rs).
            let b3 = tensor(ctl, &[3, 4], 3);
            let strict = ContractOptions {
                strict_blocking: true,
                ..Default::default()
            };
            let e = contract_with(ctl, "ij,jk->ik", &a, &b3, &strict).unwrap_err();
            assert!(matches!(e, DistError::BlockingMismatch { label: 'j', .. }), "{e:?}");
            // Complex alpha with a real output.
            let opts = ContractOptions {
                alpha: C64::new(1.0, 1.0),
                ..Default::default()
            };
            let e = contract_with(ctl, "ij,jk->ik", &a, &b, &opts).unwrap_err();
            assert!(
                matches!(e, DistError::Contract(ContractError::ComplexScalarForRealOutput { .. })),
                "{e:?}"
            );
            // C of the wrong shape.
            let c = tensor(ctl, &[2, 3], 2);
            let opts = ContractOptions {
                beta: C64::new(1.0, 0.0),
                c: Some(&c),
                ..Default::default()
            };
            let e = contract_with(ctl, "ij,jk->ik", &a, &b, &opts).unwrap_err();
            assert!(matches!(e, DistError::Contract(ContractError::Shape { .. })), "{e:?}");
            assert!(matches!(
                DistTensor::from_local(ctl, &LocalTensor::zeros(DType::F64, &[2]).unwrap(), 0),
                Err(DistError::Blocking(uni20::dist::error::BlockingError::ZeroBlockSize))
            ));
            // Nothing was submitted: the job still works and gives the right answer.
            let c = contract(ctl, "ij,jk->ik", &a, &b).unwrap().to_local(ctl).unwrap();
            // a = [[0,1,2],[3,4,5]], b = 0..12 as 3x4
            let want = [20.0, 23.0, 26.0, 29.0, 56.0, 68.0, 80.0, 92.0];
            assert_eq!(c.to_c64_vec().iter().map(|z| z.re).collect::<Vec<_>>(), want);
        })
        .unwrap();
}

#[test]
fn ranks_with_different_registries_refuse_to_run() {
    let linked = Registry::linked().unwrap();
    let without_contract: Vec<CommandEntry> = linked
        .entries()
        .into_iter()
        .filter(|e| e.wire_name != "uni20.contract.v1")
        .copied()
        .collect();
    let mut ran = false;
    let err = uni20::universe()
        .ranks(3)
        .registry_for_rank(2, without_contract)
        .run(|_| ran = true)
        .unwrap_err();
    assert!(!ran, "user code ran despite a registry mismatch");
    match &err {
        JobError::RegistryMismatch { differences } => {
            assert_eq!(differences.len(), 1, "{differences:?}");
            assert!(
                differences[0].contains("uni20.contract.v1") && differences[0].contains("rank 2"),
                "{differences:?}"
            );
        }
        other => panic!("expected a registry mismatch, got {other}"),
    }
    assert!(err.to_string().contains("uni20.contract.v1"));

    // A schema-version difference is named too.
    let mut bumped: Vec<CommandEntry> = linked.entries().into_iter().copied().collect();
    let mut read_schema = 0;
    for e in &mut bumped {
        if e.wire_name == "uni20.npy_read.v1" {
            read_schema = e.schema_version;
            e.schema_version += 1;
        }
    }
    let err = uni20::universe()
        .ranks(2)
        .registry_for_rank(1, bumped)
        .run(|_| ())
        .unwrap_err();
    let expected = format!(
        "`uni20.npy_read.v1` has schema v{read_schema} on rank 0 but v{} on rank 1",
        read_schema + 1
    );
    assert!(err.to_string().contains(&expected), "{err}");
}

#[test]
fn a_failing_command_stops_the_job_with_a_diagnostic() {
    let mut seen = None;
    let outcome = uni20::universe().ranks(3).run(|ctl| {
        let a = tensor(ctl, &[4, 4], 2);
        // A manifest naming an object no rank holds.
        let mut m: Manifest = a.manifest(ctl).unwrap();
        m.blocks[1] = BlockRef {
            owner: m.blocks[1].owner,
            id: ObjectId::new(9, 999),
        };
        let bad = DistTensor::from_manifest(ctl, m).unwrap();
        let err = contract(ctl, "ij,jk->ik", &bad, &a)
            .and_then(|c| c.to_local(ctl))
            .unwrap_err();
        // Later operations are refused: the job was stopped.
        let after = contract(ctl, "ij,jk->ik", &a, &a)
            .and_then(|c| c.to_local(ctl))
            .unwrap_err();
        seen = Some((err, after));
    });
    // The job as a whole failed (fail-stop), even though the closure returned.
    let job_err = outcome.unwrap_err();
    assert!(job_err.to_string().contains("r9:999"), "{job_err}");
    let (err, after) = seen.unwrap();
    let DistError::Job(JobError::Command(d)) = &err else {
        panic!("expected a command failure, got {err}")
    };
    assert_eq!(d.wire_name, "uni20.contract.v1");
    assert!(d.rank >= 1 && d.rank <= 2);
    assert_eq!(d.op_id, 2, "op 1 scattered A, op 2 is the contraction");
    assert!(d.location.contains("contract/command.rs"), "{}", d.location);
    let text = err.to_string();
    assert!(
        text.contains("r9:999") && text.contains(&format!("rank {}", d.rank)),
        "{text}"
    );
    assert!(matches!(after, DistError::Job(JobError::Stopped(_))), "{after}");
}
