//! The decomposition backend lists: accept/decline in order, the attempt log, terminal
//! failure of a committed backend (including factors that fail the front end's checks),
//! empty lists, and the CUDA entry of the `gpu-first` lists, which declines every family.

use std::sync::Arc;

use uni20_dispatch::backends::*;
use uni20_dispatch::decomp::*;
use uni20_dispatch::*;

/// Declines every dtype, or every problem, with a fixed reason.
struct Decliner {
    types: bool,
}

impl DecompBackend for Decliner {
    fn name(&self) -> &str {
        if self.types {
            "no-types"
        } else {
            "no-problem"
        }
    }
    fn accepts_types(&self, kind: DecompKind, dtype: DType) -> Result<(), String> {
        if self.types {
            Err(format!("{kind} on {dtype} unsupported"))
        } else {
            Ok(())
        }
    }
    fn accepts(&self, p: &MatrixProblem<'_>) -> Result<(), String> {
        Err(format!("{} too small", p.describe()))
    }
}

impl SvdBackend for Decliner {
    fn svd(&self, _: &MatrixProblem<'_>) -> Result<SvdFactors, KernelError> {
        unreachable!("declined backends are never run")
    }
}

/// Accepts everything and returns wrong results.
struct Broken;

impl DecompBackend for Broken {
    fn name(&self) -> &str {
        "broken"
    }
}

impl SvdBackend for Broken {
    fn svd(&self, p: &MatrixProblem<'_>) -> Result<SvdFactors, KernelError> {
        // Right shapes, but ascending singular values.
        let r = p.min_dim();
        Ok(SvdFactors {
            u: LocalTensor::zeros(p.dtype(), &[p.rows, r])?,
            s: (0..r).map(|i| i as f64).collect(),
            vh: LocalTensor::zeros(p.dtype(), &[r, p.cols])?,
        })
    }
}

impl QrBackend for Broken {
    fn qr(&self, p: &MatrixProblem<'_>) -> Result<QrFactors, KernelError> {
        // Wrong dtype of Q.
        let k = p.min_dim();
        Ok(QrFactors {
            q: LocalTensor::zeros(DType::C64, &[p.rows, k])?,
            r: LocalTensor::zeros(p.dtype(), &[k, p.cols])?,
        })
    }
}

impl EighBackend for Broken {
    fn eigh(&self, _: &MatrixProblem<'_>) -> Result<EighFactors, KernelError> {
        Err(KernelError::Failed("no convergence".into()))
    }
}

fn matrix() -> LocalTensor {
    LocalTensor::from_f64(&[2, 2], vec![2.0, 1.0, 1.0, 3.0]).unwrap()
}

#[test]
fn declines_are_logged_in_order_and_the_first_acceptance_runs() {
    let list = SvdBackendList::new(vec![
        Arc::new(Decliner { types: true }),
        Arc::new(Decliner { types: false }),
        Arc::new(FaerDecompBackend::new(1)),
    ]);
    assert_eq!(list.names(), vec!["no-types", "no-problem", "faer"]);
    let (r, attempts) = svd_with_attempts(&matrix(), &SvdOptions::default(), &list).unwrap();
    assert_eq!(r.kept, 2);
    assert_eq!(
        attempts,
        vec![
            KernelAttempt {
                backend: "no-types".into(),
                outcome: AttemptOutcome::DeclinedTypes("svd on f64 unsupported".into())
            },
            KernelAttempt {
                backend: "no-problem".into(),
                outcome: AttemptOutcome::Declined("svd (f64) 2x2 too small".into())
            },
            KernelAttempt {
                backend: "faer".into(),
                outcome: AttemptOutcome::Accepted
            },
        ]
    );
}

#[test]
fn a_committed_failure_is_terminal() {
    let faer = Arc::new(FaerDecompBackend::new(1));
    let svd_list = SvdBackendList::new(vec![Arc::new(Broken), faer.clone()]);
    let Err(DecompError::Dispatch(e)) = svd(&matrix(), &SvdOptions::default(), &svd_list) else {
        panic!("expected a dispatch error");
    };
    assert!(e.committed_failure());
    assert_eq!(e.attempts.len(), 1, "faer after the committed backend must not run");
    let AttemptOutcome::Failed(reason) = &e.attempts[0].outcome else {
        panic!("{e}")
    };
    assert!(reason.contains("not sorted"), "{reason}");
    assert_eq!(e.operation, "svd (f64) 2x2");

    let qr_list = QrBackendList::new(vec![Arc::new(Broken), faer.clone()]);
    let Err(DecompError::Dispatch(e)) = lq(&matrix(), &qr_list) else {
        panic!()
    };
    assert!(e.committed_failure() && e.operation == "lq (f64) 2x2", "{e}");
    assert!(e.to_string().contains("backend returned Q as c64"), "{e}");

    let eigh_list = EighBackendList::new(vec![Arc::new(Broken), faer]);
    let Err(DecompError::Dispatch(e)) = eigh(&matrix(), &EighOptions::default(), &eigh_list) else {
        panic!()
    };
    assert_eq!(e.attempts[0].outcome, AttemptOutcome::Failed("no convergence".into()));
}

#[test]
fn empty_and_all_declining_lists() {
    let Err(DecompError::Dispatch(e)) = qr(&matrix(), &QrBackendList::new(vec![])) else {
        panic!()
    };
    assert!(e.attempts.is_empty() && !e.committed_failure());
    assert!(e.to_string().contains("empty backend list"), "{e}");
    let list = SvdBackendList::new(vec![Arc::new(Decliner { types: true })]);
    let Err(DecompError::Dispatch(e)) = svd(&matrix(), &SvdOptions::default(), &list) else {
        panic!()
    };
    assert!(!e.committed_failure());
    assert!(e.to_string().starts_with("no backend accepted svd (f64) 2x2"), "{e}");
}

#[test]
fn default_lists_name_their_backends() {
    assert_eq!(SvdBackendList::default_cpu(4).names(), vec!["faer"]);
    assert_eq!(QrBackendList::default_cpu(4).names(), vec!["faer"]);
    assert_eq!(EighBackendList::default_cpu(4).names(), vec!["faer"]);
    assert_eq!(FaerDecompBackend::new(3).threads(), 3);
    #[cfg(not(feature = "cuda"))]
    assert_eq!(SvdBackendList::default_gpu_first(2).names(), vec!["faer"]);
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_declines_every_family_in_gpu_first_lists() {
    let declined = |a: &KernelAttempt, family: &str| {
        assert_eq!(a.backend, "cuda");
        assert_eq!(
            a.outcome,
            AttemptOutcome::DeclinedTypes(format!("not implemented for {family}"))
        );
    };
    let (_, at) = svd_with_attempts(&matrix(), &SvdOptions::default(), &SvdBackendList::default_gpu_first(1)).unwrap();
    declined(&at[0], "svd");
    assert_eq!(at[1].outcome, AttemptOutcome::Accepted);
    let (_, at) = qr_with_attempts(&matrix(), &QrBackendList::default_gpu_first(1)).unwrap();
    declined(&at[0], "qr");
    let (_, at) = lq_with_attempts(&matrix(), &QrBackendList::default_gpu_first(1)).unwrap();
    declined(&at[0], "lq");
    let (_, at) = eigh_with_attempts(
        &matrix(),
        &EighOptions::default(),
        &EighBackendList::default_gpu_first(1),
    )
    .unwrap();
    declined(&at[0], "eigh");
    assert!(CudaDecompBackend.availability().is_err());
}
