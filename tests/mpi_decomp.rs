//! MPI integration test of the decompositions (run by `cargo xtask test`
//! under `mpirun -n 2` and `-n 3`): every numpy fixture (svd, qr, lq, eigh;
//! f32, f64, c32, c64) at block sizes 1-3 through distributed `read_npy`
//! and the family's checks (reconstruction and orthonormality through
//! distributed contractions and on the gathered factors, values against
//! numpy and the local kernel, no payload through the root); truncated
//! SVDs of random tensors; and a NaN input, which is a typed error naming
//! the first bad block while the job goes on. A failure panics on the
//! root, which aborts the communicator: non-zero exit.
// uni20-mpi-ranks: 2,3

mod decomp_common;

use decomp_common::{check_svd, fixtures, random_tensor, run_fixture};
use uni20::prelude::*;
use uni20::DistError;

fn main() {
    uni20::init_logging();
    let checked = uni20::universe()
        .run(|ctl| {
            assert_eq!(
                ctl.transport_kind(),
                uni20::worker::transport::TransportKind::Mpi,
                "not launched by mpirun"
            );
            let mut checked = 0;
            for f in fixtures() {
                for block in [1, 2, 3] {
                    run_fixture(ctl, &f, block);
                    checked += 1;
                }
            }
            let mut seed = 7u64;
            for (shape, split, dtype, max_rank) in [
                (vec![3, 4, 5], "abc->ca|b", DType::F64, Some(3)),
                (vec![4, 2, 3, 2], "ab|cd", DType::C64, Some(5)),
                (vec![6, 7], "a|b", DType::C32, None),
            ] {
                let a = random_tensor(dtype, &shape, &mut seed);
                let da = DistTensor::from_local(ctl, &a, 2).unwrap();
                let opts = SvdOptions {
                    truncation: SvdTruncation {
                        max_rank,
                        ..Default::default()
                    },
                    s_diag: true,
                    ..Default::default()
                };
                let out = check_svd(ctl, &a, &da, split, &opts);
                assert_ne!(out.factorizer, 0);
                checked += 1;
            }
            let mut v = vec![1.0; 16];
            v[9] = f64::NAN;
            let bad = DistTensor::from_local(ctl, &LocalTensor::from_f64(&[4, 4], v).unwrap(), 2).unwrap();
            let e = uni20::dist::svd(ctl, &bad, "a|b", &SvdOptions::default()).unwrap_err();
            assert!(
                matches!(&e, DistError::NonFinite { block: 2, element, .. } if element == &[2, 1]),
                "{e}"
            );
            let again = uni20::dist::qr(
                ctl,
                &DistTensor::from_local(ctl, &random_tensor(DType::F64, &[5, 3], &mut seed), 2).unwrap(),
                "a|b",
                &QrOptions::default(),
            );
            assert!(again.is_ok(), "the job goes on after a rejected input");
            println!("mpi_decomp: {checked} decompositions on {} ranks check out", ctl.size());
            checked
        })
        .unwrap();
    assert!(checked >= 17 * 3 + 3, "{checked} runs");
}
