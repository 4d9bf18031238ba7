//! Dispatch-protocol tests with test-only backends, plus basic contract semantics.

mod kernels_common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kernels_common::mats;
use uni20_dispatch::backends::*;
use uni20_dispatch::view::*;
use uni20_dispatch::*;

fn c(re: f64, im: f64) -> C64 {
    C64::new(re, im)
}

/// A backend with scripted behaviour that counts calls.
struct Scripted {
    name: &'static str,
    types: Result<(), String>,
    accept: Result<(), String>,
    /// `None`: delegate to the reference backend; `Some(reason)`: fail.
    fail: Option<String>,
    runs: AtomicUsize,
    accepts_calls: AtomicUsize,
}

impl Scripted {
    fn new(name: &'static str) -> Scripted {
        Scripted {
            name,
            types: Ok(()),
            accept: Ok(()),
            fail: None,
            runs: AtomicUsize::new(0),
            accepts_calls: AtomicUsize::new(0),
        }
    }
}

impl ContractBackend for Scripted {
    fn name(&self) -> &str {
        self.name
    }
    fn availability(&self) -> Result<(), String> {
        Ok(())
    }
    fn accepts_types(&self, _dtype: DType) -> Result<(), String> {
        self.types.clone()
    }
    fn accepts(&self, _p: &ContractProblem<'_>) -> Result<(), String> {
        self.accepts_calls.fetch_add(1, Ordering::SeqCst);
        self.accept.clone()
    }
    fn run(&self, p: &ContractProblem<'_>) -> Result<LocalTensor, KernelError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        match &self.fail {
            Some(r) => Err(KernelError::Failed(r.clone())),
            None => ReferenceBackend.run(p),
        }
    }
}
#[test]
fn first_acceptance_commits() {
    let (spec, a, b) = mats();
    let first = Arc::new(Scripted::new("first"));
    let second = Arc::new(Scripted::new("second"));
    let list = BackendList::new(vec![first.clone(), second.clone()]);
    assert_eq!(list.names(), vec!["first", "second"]);
    let (out, attempts) = contract_with_attempts(&spec, c(1., 0.), &a, &b, c(0., 0.), None, &list).unwrap();
    assert_eq!(out.to_c64_vec(), vec![c(4., 0.), c(5., 0.), c(10., 0.), c(11., 0.)]);
    assert_eq!(first.runs.load(Ordering::SeqCst), 1);
    assert_eq!(second.runs.load(Ordering::SeqCst), 0);
    assert_eq!(second.accepts_calls.load(Ordering::SeqCst), 0);
    assert_eq!(
        attempts,
        vec![KernelAttempt {
            backend: "first".into(),
            outcome: AttemptOutcome::Accepted
        }]
    );
}

#[test]
fn decline_chain_lists_all_attempts_in_order() {
    let (spec, a, b) = mats();
    let mut t = Scripted::new("gpu");
    t.types = Err("no f64 on this device".into());
    let mut d = Scripted::new("blas");
    d.accept = Err("operands not contiguous".into());
    let list = BackendList::new(vec![Arc::new(t), Arc::new(d)]);
    let err = contract(&spec, c(1., 0.), &a, &b, c(0., 0.), None, &list).unwrap_err();
    let ContractError::Dispatch(e) = err else {
        panic!("expected dispatch error, got {err:?}")
    };
    assert_eq!(
        e.attempts,
        vec![
            KernelAttempt {
                backend: "gpu".into(),
                outcome: AttemptOutcome::DeclinedTypes("no f64 on this device".into())
            },
            KernelAttempt {
                backend: "blas".into(),
                outcome: AttemptOutcome::Declined("operands not contiguous".into())
            },
        ]
    );
    assert!(!e.committed_failure());
    let text = e.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].contains("ij,jk->ik"), "{text}");
    assert!(lines[1].contains("gpu") && lines[1].contains("no f64 on this device"));
    assert!(lines[2].contains("blas") && lines[2].contains("operands not contiguous"));

    // Declines followed by an acceptance: the log keeps the declines.
    let mut d = Scripted::new("picky");
    d.accept = Err("too small".into());
    let list = BackendList::new(vec![Arc::new(d), Arc::new(ReferenceBackend)]);
    let (_, attempts) = contract_with_attempts(&spec, c(1., 0.), &a, &b, c(0., 0.), None, &list).unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[1].backend, "reference");
    assert_eq!(attempts[1].outcome, AttemptOutcome::Accepted);
}

#[test]
fn failure_after_acceptance_is_terminal() {
    let (spec, a, b) = mats();
    let mut broken = Scripted::new("broken");
    broken.fail = Some("device lost".into());
    let broken = Arc::new(broken);
    let fallback = Arc::new(Scripted::new("fallback"));
    let list = BackendList::new(vec![broken.clone(), fallback.clone()]);
    let err = contract(&spec, c(1., 0.), &a, &b, c(0., 0.), None, &list).unwrap_err();
    let ContractError::Dispatch(e) = err else {
        panic!("expected dispatch error")
    };
    assert_eq!(
        e.attempts,
        vec![KernelAttempt {
            backend: "broken".into(),
            outcome: AttemptOutcome::Failed("device lost".into())
        }]
    );
    assert!(e.committed_failure());
    assert_eq!(broken.runs.load(Ordering::SeqCst), 1);
    assert_eq!(fallback.runs.load(Ordering::SeqCst), 0);
    assert_eq!(fallback.accepts_calls.load(Ordering::SeqCst), 0);
}

/// A backend that returns a tensor of the wrong shape is treated as a committed failure.
struct WrongShape;
impl ContractBackend for WrongShape {
    fn name(&self) -> &str {
        "wrong"
    }
    fn availability(&self) -> Result<(), String> {
        Ok(())
    }
    fn accepts_types(&self, _: DType) -> Result<(), String> {
        Ok(())
    }
    fn accepts(&self, _: &ContractProblem<'_>) -> Result<(), String> {
        Ok(())
    }
    fn run(&self, p: &ContractProblem<'_>) -> Result<LocalTensor, KernelError> {
        Ok(LocalTensor::zeros(p.dtype(), &[1])?)
    }
}

#[test]
fn wrong_output_shape_is_failure() {
    let (spec, a, b) = mats();
    let list = BackendList::new(vec![Arc::new(WrongShape), Arc::new(ReferenceBackend)]);
    let err = contract(&spec, c(1., 0.), &a, &b, c(0., 0.), None, &list).unwrap_err();
    let ContractError::Dispatch(e) = err else { panic!() };
    assert_eq!(e.attempts.len(), 1);
    assert!(matches!(&e.attempts[0].outcome, AttemptOutcome::Failed(r) if r.contains("[1]")));
}

#[test]
fn empty_list_errors() {
    let (spec, a, b) = mats();
    let err = contract(&spec, c(1., 0.), &a, &b, c(0., 0.), None, &BackendList::new(vec![])).unwrap_err();
    assert!(matches!(err, ContractError::Dispatch(ref e) if e.attempts.is_empty()));
}

#[test]
fn default_lists() {
    let cpu: Vec<&str> = if cfg!(feature = "blas") {
        vec!["faer", "blas", "reference"]
    } else {
        vec!["faer", "reference"]
    };
    assert_eq!(BackendList::default_cpu(2).names(), cpu);
    assert_eq!(BackendList::default_cpu(2).thread_budget(), 2);
    assert!(BackendList::default_cpu(2).tuning().is_none());
    assert_eq!(BackendList::reference_only().names(), vec!["reference"]);
    let info = available_backends(1);
    assert_eq!(info.len(), 4);
    assert_eq!(info[1].0, "faer");
    assert_eq!(info[2].0, "blas");
    assert!(info[1].1.is_ok() && info[3].1.is_ok());
}

fn all_lists() -> Vec<BackendList> {
    vec![
        BackendList::reference_only(),
        BackendList::default_cpu(1),
        BackendList::default_cpu(2),
    ]
}

#[test]
fn front_end_errors() {
    let (spec, a, b) = mats();
    let list = BackendList::reference_only();
    let bad_b = LocalTensor::from_f64(&[4, 2], vec![0.; 8]).unwrap();
    assert_eq!(
        contract(&spec, c(1., 0.), &a, &bad_b, c(0., 0.), None, &list),
        Err(ContractError::Spec(SpecError::ExtentMismatch {
            label: 'j',
            first: 3,
            second: 4
        }))
    );
    let bad_c = LocalTensor::zeros(DType::F64, &[2, 3]).unwrap();
    assert!(matches!(
        contract(&spec, c(1., 0.), &a, &b, c(1., 0.), Some(&bad_c), &list),
        Err(ContractError::Shape { .. })
    ));
    assert!(matches!(
        contract(&spec, c(1., 1.), &a, &b, c(0., 0.), None, &list),
        Err(ContractError::ComplexScalarForRealOutput {
            which: ScalarRole::Alpha,
            ..
        })
    ));
    let c_ok = LocalTensor::zeros(DType::F64, &[2, 2]).unwrap();
    assert!(matches!(
        contract(&spec, c(1., 0.), &a, &b, c(0., 2.), Some(&c_ok), &list),
        Err(ContractError::ComplexScalarForRealOutput {
            which: ScalarRole::Beta,
            ..
        })
    ));
    // beta is ignored without C, even if complex.
    assert!(contract(&spec, c(1., 0.), &a, &b, c(0., 2.), None, &list).is_ok());
    // Complex C makes the output complex, so complex scalars are fine.
    let c_cplx = LocalTensor::zeros(DType::C32, &[2, 2]).unwrap();
    let r = contract(&spec, c(1., 1.), &a, &b, c(0., 2.), Some(&c_cplx), &list).unwrap();
    assert_eq!(r.dtype(), DType::C64);
    // A diagonal of a non-square operand; a spec refused by the parser.
    assert_eq!(
        contract("ii,jk->", c(1., 0.), &a, &b, c(0., 0.), None, &list),
        Err(ContractError::Spec(SpecError::DiagonalMismatch {
            operand: 0,
            label: 'i',
            first: 2,
            second: 3
        }))
    );
    assert_eq!(
        contract("ij,jk,kl->il", c(1., 0.), &a, &b, c(0., 0.), None, &list),
        Err(ContractError::Spec(SpecError::TooManyOperands { count: 3 }))
    );
    assert_eq!(
        contract("ij->ji", c(1., 0.), &a, &b, c(0., 0.), None, &list),
        Err(ContractError::Spec(SpecError::OperandCount { expected: 1, got: 2 }))
    );
    assert_eq!(
        contract_unary("ij,jk->ik", c(1., 0.), &a, c(0., 0.), None, &list),
        Err(ContractError::Spec(SpecError::OperandCount { expected: 2, got: 1 }))
    );
    assert_eq!(
        contract_unary("ii", c(1., 0.), &a, c(0., 0.), None, &list),
        Err(ContractError::Spec(SpecError::DiagonalMismatch {
            operand: 0,
            label: 'i',
            first: 2,
            second: 3
        }))
    );
    // Ellipsis dims (2) and (3) do not broadcast; a 3-operand spec names the limit.
    let x = LocalTensor::zeros(DType::F64, &[2, 4]).unwrap();
    let y = LocalTensor::zeros(DType::F64, &[3, 4]).unwrap();
    assert_eq!(
        contract("...i,...i", c(1., 0.), &x, &y, c(0., 0.), None, &list),
        Err(ContractError::Spec(SpecError::BroadcastMismatch {
            axis: 0,
            first: 2,
            second: 3
        }))
    );
    let e = contract("ij,jk,kl", c(1., 0.), &a, &b, c(0., 0.), None, &list).unwrap_err();
    assert!(e.to_string().contains("at most two"), "{e}");
    // C's shape is checked against the resolved (broadcast) output shape.
    let z = LocalTensor::zeros(DType::F64, &[1, 4]).unwrap();
    let c_wrong = LocalTensor::zeros(DType::F64, &[1]).unwrap();
    assert_eq!(
        contract("...i,...i", c(1., 0.), &x, &z, c(1., 0.), Some(&c_wrong), &list),
        Err(ContractError::Shape {
            expected: vec![2],
            got: vec![1]
        })
    );
}

#[test]
fn beta_zero_never_reads_c() {
    let (spec, a, b) = mats();
    let nan_c = LocalTensor::from_f64(&[2, 2], vec![f64::NAN; 4]).unwrap();
    for list in all_lists() {
        let r = contract(&spec, c(1., 0.), &a, &b, c(0., 0.), Some(&nan_c), &list).unwrap();
        assert_eq!(r.to_c64_vec(), vec![c(4., 0.), c(5., 0.), c(10., 0.), c(11., 0.)]);
        let r = contract(&spec, c(2., 0.), &a, &b, c(-1., 0.), Some(&r), &list).unwrap();
        assert_eq!(r.to_c64_vec(), vec![c(4., 0.), c(5., 0.), c(10., 0.), c(11., 0.)]);
    }
}

#[test]
fn scalar_outer_and_zero_size() {
    for list in all_lists() {
        let s = EinsumSpec::parse("ij,ij->").unwrap();
        let a = LocalTensor::from_f64(&[2, 2], vec![1., 2., 3., 4.]).unwrap();
        let r = contract(&s, c(1., 0.), &a, &a, c(0., 0.), None, &list).unwrap();
        assert_eq!(r.shape(), &[] as &[usize]);
        assert_eq!(r.to_c64_vec(), vec![c(30., 0.)]);

        let s = EinsumSpec::parse("i,j->ij").unwrap();
        let x = LocalTensor::from_f64(&[2], vec![1., 2.]).unwrap();
        let y = LocalTensor::from_c64(&[3], vec![c(1., 1.), c(0., 1.), c(2., 0.)]).unwrap();
        let r = contract(&s, c(1., 0.), &x, &y, c(0., 0.), None, &list).unwrap();
        assert_eq!(r.dtype(), DType::C64);
        assert_eq!(
            r.to_c64_vec(),
            vec![c(1., 1.), c(0., 1.), c(2., 0.), c(2., 2.), c(0., 2.), c(4., 0.)]
        );

        // Zero-size contracted dim: result is beta*C.
        let s = EinsumSpec::parse("ij,jk->ik").unwrap();
        let a0 = LocalTensor::zeros(DType::F32, &[2, 0]).unwrap();
        let b0 = LocalTensor::zeros(DType::F32, &[0, 2]).unwrap();
        let cc = LocalTensor::from_f64(&[2, 2], vec![1., 2., 3., 4.]).unwrap();
        let r = contract(&s, c(1., 0.), &a0, &b0, c(-0.5, 0.), Some(&cc), &list).unwrap();
        assert_eq!(r.dtype(), DType::F64);
        assert_eq!(r.to_c64_vec(), vec![c(-0.5, 0.), c(-1., 0.), c(-1.5, 0.), c(-2., 0.)]);
        let r = contract(&s, c(1., 0.), &a0, &b0, c(0., 0.), None, &list).unwrap();
        assert_eq!(r.to_c64_vec(), vec![c(0., 0.); 4]);

        // Zero-size free dim: empty output.
        let a0 = LocalTensor::zeros(DType::F64, &[0, 3]).unwrap();
        let b = LocalTensor::zeros(DType::F64, &[3, 2]).unwrap();
        let r = contract(&s, c(1., 0.), &a0, &b, c(0., 0.), None, &list).unwrap();
        assert_eq!(r.shape(), &[0, 2]);

        // Summed labels (only in one operand): "ij,k->ik" sums j.
        let s = EinsumSpec::parse("ij,k->ik").unwrap();
        let a = LocalTensor::from_f64(&[2, 2], vec![1., 2., 3., 4.]).unwrap();
        let b = LocalTensor::from_f64(&[1], vec![10.]).unwrap();
        let r = contract(&s, c(1., 0.), &a, &b, c(0., 0.), None, &list).unwrap();
        assert_eq!(r.to_c64_vec(), vec![c(30., 0.), c(70., 0.)]);
    }
}

#[test]
fn reference_on_strided_views() {
    // A = [[1,2],[3,4]] stored transposed and read through negative strides.
    let storage = [4.0f64, 2.0, 3.0, 1.0]; // reversed column-major of A
    let a = StridedView::new(&storage, &[2, 2], &[-1, -2], 3, false).unwrap();
    let id = [1.0f64, 0.0, 0.0, 1.0];
    let b = StridedView::new(&id, &[2, 2], &[2, 1], 0, false).unwrap();
    let s = ResolvedSpec::parse("ij,jk->ik").unwrap();
    let r = reference_contract(&s, c(1., 0.), &[&a, &b], c(0., 0.), None).unwrap();
    assert_eq!(r, vec![1., 2., 3., 4.]);
    // Zero stride broadcasts; conjugation applies.
    let z = [C64::new(1., 2.)];
    let v = StridedView::new(&z, &[3], &[0], 0, true).unwrap();
    let w = StridedView::new(&z, &[3], &[0], 0, false).unwrap();
    let s = ResolvedSpec::parse("i,i->").unwrap();
    let r = reference_contract(&s, c(1., 0.), &[&v, &w], c(0., 0.), None).unwrap();
    assert_eq!(r, vec![C64::new(15., 0.)]);
    // One operand with a repeated label: the trace of A, read through the summed strides.
    let s = ResolvedSpec::parse("ii->").unwrap();
    let r = reference_contract(&s, c(1., 0.), &[&a], c(0., 0.), None).unwrap();
    assert_eq!(r, vec![5.]);
    assert!(matches!(
        reference_contract(&s, c(1., 0.), &[&a, &b], c(0., 0.), None),
        Err(ContractError::Spec(SpecError::OperandCount { expected: 1, got: 2 }))
    ));
    assert!(matches!(
        StridedView::new(&storage, &[2, 2], &[-1, -2], 2, false),
        Err(ViewError::OutOfBounds { .. })
    ));
    assert!(StridedView::new(&storage, &[0, 9], &[100, 100], 0, false).is_ok());
}

#[test]
fn contract_problem_is_checked_once_at_construction() {
    let (spec, a, b) = mats();
    let views = [AnyView::of_tensor(&a), AnyView::of_tensor(&b)];
    let good = ContractProblem::new(&spec, c(1., 0.), &views, c(0., 0.), None).unwrap();
    assert_eq!(good.dim('j'), Some(3));
    assert_eq!(good.label_dims(), &[('i', 2), ('j', 3), ('k', 2)]);
    assert_eq!(good.out_shape(), &[2, 2]);
    assert_eq!(good.dtype(), DType::F64);
    assert_eq!(good.classes().contracted, vec!['j']);
    assert_eq!(
        (good.a_labels(), good.b_labels(), good.out_labels()),
        (&['i', 'j'][..], &['j', 'k'][..], &['i', 'k'][..])
    );
    assert_eq!(good.macs(), 12);
    assert!(good.c().is_none());
    assert!(good.describe().contains("ij,jk->ik"), "{}", good.describe());
    let want = vec![c(4., 0.), c(5., 0.), c(10., 0.), c(11., 0.)];
    assert_eq!(FaerBackend::new(1).run(&good).unwrap().to_c64_vec(), want);
    assert_eq!(ReferenceBackend.run(&good).unwrap().to_c64_vec(), want);

    // beta == 0 drops C (its shape still checked); without C, beta is reported as 0.
    let c_ok = LocalTensor::zeros(DType::F64, &[2, 2]).unwrap();
    let p = ContractProblem::new(&spec, c(1., 0.), &views, c(0., 0.), Some(AnyView::of_tensor(&c_ok))).unwrap();
    assert!(p.c().is_none());
    let p = ContractProblem::new(&spec, c(1., 0.), &views, c(3., 0.), None).unwrap();
    assert_eq!(p.beta(), c(0., 0.));

    let wrong_b = LocalTensor::from_f64(&[2, 2], vec![0.; 4]).unwrap();
    let a64 = a.cast(DType::C64).unwrap();
    let c_bad = LocalTensor::zeros(DType::F64, &[3]).unwrap();
    let err = |ops: &[AnyView<'_>], alpha: C64, cc: Option<&LocalTensor>| {
        ContractProblem::new(&spec, alpha, ops, c(1., 0.), cc.map(AnyView::of_tensor)).unwrap_err()
    };
    assert!(matches!(
        err(&[AnyView::of_tensor(&a), AnyView::of_tensor(&wrong_b)], c(1., 0.), None),
        ContractError::Spec(SpecError::ExtentMismatch { label: 'j', .. })
    ));
    assert_eq!(
        err(&[AnyView::of_tensor(&a64), AnyView::of_tensor(&b)], c(1., 0.), None),
        ContractError::MixedDTypes {
            dtypes: vec![DType::C64, DType::F64]
        }
    );
    assert!(matches!(
        err(&views, c(1., 0.), Some(&c_bad)),
        ContractError::Shape { .. }
    ));
    assert!(matches!(
        err(&views, c(0., 1.), None),
        ContractError::ComplexScalarForRealOutput { .. }
    ));
    assert!(matches!(
        err(&views[..1], c(1., 0.), None),
        ContractError::Spec(SpecError::OperandCount { expected: 2, got: 1 })
    ));

    // One operand with a repeated label: the kernel spec is the two-operand diagonal form.
    let sq = LocalTensor::from_f64(&[3, 3], (0..9).map(f64::from).collect()).unwrap();
    let p = ContractProblem::new("ii->i", c(1., 0.), &[AnyView::of_tensor(&sq)], c(0., 0.), None).unwrap();
    assert_eq!(p.spec().to_string(), "i,->i");
    assert_eq!(p.source_spec().to_string(), "ii->i");
    assert_eq!(p.a().strides(), &[4]);
    assert_eq!(p.b().shape(), &[] as &[usize]);
    assert_eq!(
        FaerBackend::new(1).run(&p).unwrap().to_c64_vec(),
        vec![c(0., 0.), c(4., 0.), c(8., 0.)]
    );
}

#[test]
fn available_backends_lists_cuda_with_reason() {
    let listed = available_backends(2);
    let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["cuda", "faer", "blas", "reference"]);
    assert_eq!(listed[1].1, Ok(()));
    assert_eq!(listed[3].1, Ok(()));
    if cfg!(feature = "blas") {
        assert_eq!(listed[2].1, Ok(()));
    } else {
        let reason = listed[2].1.clone().unwrap_err();
        assert!(reason.contains("feature `blas`"), "{reason}");
    }
    if cfg!(not(feature = "cuda")) {
        let reason = listed[0].1.clone().unwrap_err();
        assert!(reason.contains("feature `cuda`"), "{reason}");
        assert_eq!(
            BackendList::default_gpu_first(1).names(),
            BackendList::default_cpu(1).names()
        );
    }
}
