//! CUDA backend tests (feature `cuda`). The decline test runs everywhere; the others skip,
//! printing why, when no usable GPU is present.
#![cfg(feature = "cuda")]

mod kernels_common;

use std::sync::Arc;

use kernels_common::mats;
use uni20_dispatch::backends::*;
use uni20_dispatch::view::*;
use uni20_dispatch::*;

#[test]
fn cuda_declines_cleanly_without_gpu() {
    let cuda = CudaBackend::new();
    let (spec, a, b) = mats();
    let one = C64::new(1.0, 0.0);
    let zero = C64::new(0.0, 0.0);
    let listed = available_backends(1);
    assert_eq!(listed[0].0, "cuda");
    match cuda.availability() {
        Err(reason) => {
            println!("cuda unavailable (decline path tested): {reason}");
            assert!(!reason.is_empty());
            assert_eq!(listed[0].1, Err(reason.clone()));
            for d in DType::ALL {
                assert_eq!(cuda.accepts_types(d), Err(reason.clone()));
            }
            assert!(cuda.device_name().is_err());
            assert!(cuda.gemm_gflops(DType::F64, 8, 1).is_err());
            let list = BackendList::new(vec![Arc::new(CudaBackend::new()), Arc::new(ReferenceBackend)]);
            let (out, attempts) = contract_with_attempts(&spec, one, &a, &b, zero, None, &list).unwrap();
            assert_eq!(out.to_c64_vec()[0], C64::new(4.0, 0.0));
            assert_eq!(
                attempts,
                vec![
                    KernelAttempt {
                        backend: "cuda".into(),
                        outcome: AttemptOutcome::DeclinedTypes(reason.clone())
                    },
                    KernelAttempt {
                        backend: "reference".into(),
                        outcome: AttemptOutcome::Accepted
                    },
                ]
            );
            // Alone in a list: an all-declined error naming cuda and the reason.
            let only = BackendList::new(vec![Arc::new(CudaBackend::new())]);
            let Err(ContractError::Dispatch(e)) = contract(&spec, one, &a, &b, zero, None, &only) else {
                panic!("expected a dispatch error");
            };
            assert!(!e.committed_failure());
            assert!(e.to_string().contains(&reason), "{e}");
            // The GPU-first default list falls through to faer.
            let (_, attempts) =
                contract_with_attempts(&spec, one, &a, &b, zero, None, &BackendList::default_gpu_first(1)).unwrap();
            assert_eq!(attempts.last().unwrap().backend, "faer");
        }
        Ok(()) => {
            println!("cuda available: {}", cuda.device_name().unwrap());
            assert_eq!(listed[0].1, Ok(()));
            let list = BackendList::new(vec![Arc::new(CudaBackend::new()), Arc::new(ReferenceBackend)]);
            let (out, attempts) = contract_with_attempts(&spec, one, &a, &b, zero, None, &list).unwrap();
            assert_eq!(attempts.len(), 1);
            assert_eq!(attempts[0].backend, "cuda");
            assert_eq!(out.to_c64_vec()[0], C64::new(4.0, 0.0));
            // Small problems decline under a threshold, with the reason.
            let picky = CudaBackend::new().with_min_macs(1 << 30);
            let list = BackendList::new(vec![Arc::new(picky), Arc::new(ReferenceBackend)]);
            let (_, attempts) = contract_with_attempts(&spec, one, &a, &b, zero, None, &list).unwrap();
            assert!(matches!(&attempts[0].outcome, AttemptOutcome::Declined(r) if r.contains("too small")));
        }
    }
}

/// Deterministic values in [-1, 1).
fn fill(n: usize, seed: u64) -> Vec<C64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    };
    (0..n).map(|_| C64::new(next(), next())).collect()
}

fn tensor(d: DType, shape: &[usize], seed: u64) -> LocalTensor {
    let n = shape.iter().product();
    let v = fill(n, seed);
    let data = match d {
        DType::F32 => TensorData::F32(v.iter().map(|z| z.re as f32).collect()),
        DType::F64 => TensorData::F64(v.iter().map(|z| z.re).collect()),
        DType::C32 => TensorData::C32(v.iter().map(|z| C32::new(z.re as f32, z.im as f32)).collect()),
        DType::C64 => TensorData::C64(v),
    };
    LocalTensor::from_data(shape, data).unwrap()
}

#[test]
#[ignore = "needs an NVIDIA GPU, its driver and cuBLAS: run by scripts/device-check.sh (--include-ignored)"]
fn cuda_matches_reference() {
    let cuda = CudaBackend::new();
    if let Err(reason) = cuda.availability() {
        panic!("cuda_matches_reference needs a usable CUDA device: {reason}");
    }
    let gpu = BackendList::new(vec![Arc::new(CudaBackend::new())]);
    let reference = BackendList::reference_only();
    let cases: [(&str, &[usize], &[usize]); 5] = [
        ("ij,jk->ik", &[64, 48], &[48, 80]),
        ("ij,jk->ki", &[33, 17], &[17, 5]),
        ("abcd,dbef->acef", &[5, 4, 3, 6], &[6, 4, 2, 7]),
        ("bij,bjk->bik", &[3, 9, 10], &[3, 10, 11]),
        ("ijx,jky->kiy", &[4, 0, 2], &[0, 3, 5]),
    ];
    for d in DType::ALL {
        let tol = if matches!(d, DType::F32 | DType::C32) {
            1e-3
        } else {
            1e-10
        };
        for (k, (s, sa, sb)) in cases.iter().enumerate() {
            let spec = EinsumSpec::parse(s).unwrap();
            let a = tensor(d, sa, 2 * k as u64 + 1);
            let b = tensor(d, sb, 2 * k as u64 + 2);
            let out_shape = spec.output_shape(&[sa, sb]).unwrap();
            let c = tensor(d, &out_shape, 99);
            let alpha = if d.is_complex() {
                C64::new(2.5, -0.5)
            } else {
                C64::new(2.5, 0.0)
            };
            for beta in [C64::new(0.0, 0.0), C64::new(-0.75, 0.0)] {
                let want = contract(&spec, alpha, &a, &b, beta, Some(&c), &reference).unwrap();
                let (got, att) = contract_with_attempts(&spec, alpha, &a, &b, beta, Some(&c), &gpu).unwrap();
                assert_eq!(att.last().unwrap().backend, "cuda");
                let diff = got.max_abs_diff(&want).unwrap();
                assert!(diff <= tol * 10.0, "{d} {s} beta {beta}: diff {diff}");
            }
        }
        // Strided, conjugated views.
        let spec = EinsumSpec::parse("ij,jk->ik").unwrap();
        let a = tensor(DType::C64, &[6, 5], 7);
        let TensorData::C64(ad) = a.data() else { unreachable!() };
        let av = StridedView::new(ad, &[5, 6], &[1, -5], 25, true).unwrap();
        let bv = StridedView::new(ad, &[6, 5], &[5, 1], 0, false).unwrap();
        let (want, _) = contract_views(
            &spec,
            C64::new(1.0, 0.0),
            &av,
            &bv,
            C64::new(0.0, 0.0),
            None,
            &reference,
        )
        .unwrap();
        let (got, _) = contract_views(&spec, C64::new(1.0, 0.0), &av, &bv, C64::new(0.0, 0.0), None, &gpu).unwrap();
        assert!(got.max_abs_diff(&want).unwrap() < 1e-10);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU, its driver and cuBLAS: run by scripts/device-check.sh (--include-ignored)"]
fn cuda_gemm_throughput() {
    let cuda = CudaBackend::new();
    if let Err(reason) = cuda.availability() {
        panic!("cuda_gemm_throughput needs a usable CUDA device: {reason}");
    }
    for d in DType::ALL {
        let g = cuda.gemm_gflops(d, 4096, 10).unwrap();
        println!(
            "cuda gemm {d} n=4096: {g:.0} GFLOP/s on {}",
            cuda.device_name().unwrap()
        );
        assert!(g > 0.0);
    }
}
