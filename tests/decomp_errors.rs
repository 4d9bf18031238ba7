//! Bad input to the distributed decompositions: splits that do not cover
//! the tensor or repeat a label, a non-square or non-Hermitian `eigh`
//! input, NaN and infinities (the error names the operation and the first
//! bad block), a matrix over the size limit, invalid options; each is a
//! typed error and the job goes on. A failing handler is a fail-stop
//! diagnostic naming the decomposition's command.

use uni20::prelude::*;
use uni20::worker::fault::FaultPlan;
use uni20::{DistError, JobError, SplitError};

fn ramp(shape: &[usize]) -> LocalTensor {
    let n: usize = shape.iter().product();
    LocalTensor::from_f64(shape, (0..n).map(|i| (i as f64 * 0.37).sin()).collect()).unwrap()
}

fn split_error(r: Result<impl std::fmt::Debug, DistError>) -> SplitError {
    match r {
        Err(DistError::Split { error, .. }) => error,
        other => panic!("expected a split error, got {other:?}"),
    }
}

#[test]
fn bad_splits_are_typed_errors_before_anything_runs() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let t = DistTensor::from_local(ctl, &ramp(&[2, 3, 4, 5]), 2).unwrap();
            let o = SvdOptions::default();
            assert_eq!(
                split_error(svd(ctl, &t, "abcd->ab|c", &o)),
                SplitError::Missing { labels: vec!['d'] }
            );
            assert_eq!(
                split_error(svd(ctl, &t, "ab|c", &o)),
                SplitError::RankMismatch { labels: 3, rank: 4 }
            );
            assert_eq!(
                split_error(svd(ctl, &t, "ab|bd", &o)),
                SplitError::Repeated { label: 'b' }
            );
            assert_eq!(
                split_error(svd(ctl, &t, "abcd->ab|cdx", &o)),
                SplitError::Extra { labels: vec!['x'] }
            );
            assert_eq!(
                split_error(qr(ctl, &t, "abcd|", &QrOptions::default())),
                SplitError::EmptySide { side: "column" }
            );
            assert!(matches!(
                split_error(lq(ctl, &t, "abcd", &QrOptions::default())),
                SplitError::Syntax { .. }
            ));
            // 6 x 20 is not square.
            let e = eigh(ctl, &t, "ab|cd", &EighOptions::default()).unwrap_err();
            assert!(matches!(
                e,
                DistError::Split {
                    error: SplitError::NotSquare { rows: 6, cols: 20 },
                    ..
                }
            ));
            assert!(e.to_string().starts_with("eigh: split `ab|cd`"), "{e}");
            // The message names the operation, the split and the problem.
            let e = svd(ctl, &t, "abcd->ab|c", &o).unwrap_err().to_string();
            assert!(
                e.contains("svd") && e.contains("abcd->ab|c") && e.contains("'d'"),
                "{e}"
            );
            // Nothing was submitted: the job is fine.
            svd(ctl, &t, "ab|cd", &o).unwrap();
        })
        .unwrap();
}

#[test]
fn limits_and_options_are_checked_on_the_root() {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let t = DistTensor::from_local(ctl, &ramp(&[6, 10]), 4).unwrap();
            let e = svd(
                ctl,
                &t,
                "a|b",
                &SvdOptions {
                    max_matrix_bytes: Some(479),
                    ..Default::default()
                },
            )
            .unwrap_err();
            assert!(
                matches!(
                    e,
                    DistError::MatrixTooLarge {
                        rows: 6,
                        cols: 10,
                        bytes: 480,
                        limit: 479,
                        ..
                    }
                ),
                "{e}"
            );
            assert!(
                e.to_string().contains("480 bytes") && e.to_string().contains("479"),
                "{e}"
            );
            let bad = [
                SvdTruncation {
                    max_rank: Some(0),
                    ..Default::default()
                },
                SvdTruncation {
                    cutoff: Some(f64::NAN),
                    ..Default::default()
                },
                SvdTruncation {
                    max_discarded_weight: Some(-0.1),
                    ..Default::default()
                },
            ];
            for truncation in bad {
                let e = svd(
                    ctl,
                    &t,
                    "a|b",
                    &SvdOptions {
                        truncation,
                        ..Default::default()
                    },
                )
                .unwrap_err();
                assert!(matches!(e, DistError::Decomp(_)), "{e}");
            }
            let e = qr(
                ctl,
                &t,
                "a|b",
                &QrOptions {
                    k_block: Some(0),
                    ..Default::default()
                },
            )
            .unwrap_err();
            assert!(matches!(e, DistError::Blocking(_)), "{e}");
            let e = eigh(
                ctl,
                &DistTensor::from_local(ctl, &ramp(&[3, 3]), 2).unwrap(),
                "a|b",
                &EighOptions {
                    hermitian_rtol: Some(-1.0),
                    ..Default::default()
                },
            )
            .unwrap_err();
            assert!(matches!(e, DistError::Decomp(_)), "{e}");
            assert_eq!(uni20::dist::decomp::DEFAULT_MAX_MATRIX_BYTES, 8 << 30);
        })
        .unwrap();
}

#[test]
fn non_finite_input_names_the_first_bad_block_and_the_job_goes_on() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            // A 6x6 matrix in 2x2 blocks; NaN at (3, 4) in block (1, 2) = 5, an infinity at
            // (5, 0) in block (2, 0) = 6: block 5 comes first.
            let mut v: Vec<f64> = ramp(&[6, 6]).to_c64_vec().iter().map(|z| z.re).collect();
            v[3 * 6 + 4] = f64::NAN;
            v[5 * 6] = f64::INFINITY;
            let t = DistTensor::from_local(ctl, &LocalTensor::from_f64(&[6, 6], v).unwrap(), 2).unwrap();
            let e = svd(ctl, &t, "a|b", &SvdOptions::default()).unwrap_err();
            match &e {
                DistError::NonFinite {
                    op,
                    block,
                    block_index,
                    element,
                    value,
                } => {
                    assert_eq!(op.name(), "svd");
                    assert_eq!(
                        (*block, block_index.as_slice(), element.as_slice()),
                        (5, &[1, 2][..], &[3, 4][..])
                    );
                    assert!(value.re.is_nan());
                }
                other => panic!("{other:?}"),
            }
            let msg = e.to_string();
            assert!(msg.starts_with("svd: block 5") && msg.contains("[3, 4]"), "{msg}");
            // The long form permutes the view but the block and element are the tensor's.
            let e = qr(ctl, &t, "ab->b|a", &QrOptions::default()).unwrap_err();
            assert!(matches!(e, DistError::NonFinite { block: 5, .. }), "{e}");
            // Complex infinity only, in eigh.
            let mut c: Vec<C64> = ramp(&[4, 4]).to_c64_vec();
            c[2 * 4 + 3] = C64::new(1.0, f64::NEG_INFINITY);
            let tc = DistTensor::from_local(ctl, &LocalTensor::from_c64(&[4, 4], c).unwrap(), 2).unwrap();
            let e = eigh(ctl, &tc, "a|b", &EighOptions::default()).unwrap_err();
            assert!(
                matches!(&e, DistError::NonFinite { block: 3, element, .. } if element == &[2, 3]),
                "{e}"
            );
            assert!(e.to_string().starts_with("eigh: block 3"), "{e}");
            // The job goes on: nothing was committed and later calls work.
            let good = DistTensor::from_local(ctl, &ramp(&[6, 6]), 2).unwrap();
            let out = svd(ctl, &good, "a|b", &SvdOptions::default()).unwrap();
            assert_eq!(out.kept, 6);
        })
        .unwrap();
}

#[test]
fn a_non_hermitian_eigh_input_names_the_deviation() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            // A symmetric 2x3 x 2x3 operator with one entry changed: (row 4, col 1) by 0.5.
            let n = 6;
            let mut h = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..n {
                    h[i * n + j] = 1.0 / (1.0 + i as f64 + j as f64);
                }
            }
            h[4 * n + 1] += 0.5;
            let a = LocalTensor::from_f64(&[2, 3, 2, 3], h).unwrap();
            let t = DistTensor::from_local(ctl, &a, 2).unwrap();
            let e = eigh(ctl, &t, "ab|cd", &EighOptions::default()).unwrap_err();
            match &e {
                DistError::NotHermitian {
                    row,
                    col,
                    row_index,
                    col_index,
                    deviation,
                    max_abs,
                    tolerance,
                } => {
                    // The kernel reports the upper-triangle position of the pair.
                    assert_eq!((*row, *col), (1, 4));
                    assert_eq!((row_index.as_slice(), col_index.as_slice()), (&[0, 1][..], &[1, 1][..]));
                    assert!((deviation - 0.5).abs() < 1e-15, "{deviation}");
                    assert!((max_abs - 1.0).abs() < 1e-15 && *tolerance == 1e-12);
                }
                other => panic!("{other:?}"),
            }
            assert!(
                e.to_string().contains("not Hermitian") && e.to_string().contains("5e-1"),
                "{e}"
            );
            // A looser tolerance accepts it (and decomposes the Hermitian part).
            let out = eigh(
                ctl,
                &t,
                "ab|cd",
                &EighOptions {
                    hermitian_rtol: Some(0.6),
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(out.values.len(), 6);
        })
        .unwrap();
}

#[test]
fn a_failing_handler_is_a_fail_stop_diagnostic_naming_the_command() {
    // op 1: the scatter; op 2: the svd, failing on the factorizing rank 1.
    let checked = std::cell::Cell::new(false);
    let out = uni20::universe()
        .ranks(3)
        .faults(FaultPlan::parse("error@rank=1,op=2").unwrap())
        .run(|ctl| {
            let t = DistTensor::from_local_on(ctl, &ramp(&[4, 4]), 4, &Placement::Ranks(vec![1])).unwrap();
            let e = svd(ctl, &t, "a|b", &SvdOptions::default()).unwrap_err();
            let DistError::Job(JobError::Command(d)) = &e else {
                panic!("{e:?}")
            };
            assert_eq!((d.rank, d.wire_name.as_str()), (1, "uni20.svd.v1"));
            assert!(e.to_string().contains("injected error"), "{e}");
            // Fail-stop: later operations report the first failure.
            assert!(svd(ctl, &t, "a|b", &SvdOptions::default()).is_err());
            checked.set(true);
        });
    // The universe reports the failure too.
    assert!(out.is_err() && checked.get());
}
