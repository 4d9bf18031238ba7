//! MPI integration test of the symmetric decompositions (run by `cargo
//! xtask test` under `mpirun -n 2` and `-n 3`): SVD (full and truncated,
//! with the diagonal factor), QR, LQ of random U(1) and U(1) x Z_2
//! symmetric tensors in all four dtypes, eigh of Hermitian operators, each
//! checked by `symdecomp_common` against the dense decomposition of the
//! input's embedding (sectors spread over the workers, nothing through the
//! root); and a NaN input, a typed error naming the block while the job
//! goes on. A failure panics on the root, which aborts the communicator:
//! non-zero exit.
// uni20-mpi-ranks: 2,3

mod decomp_common;
mod symdecomp_common;

use symdecomp_common::{
    check_sym_eigh, check_sym_qr, check_sym_svd, hermitian, random_layout, random_leg, split_of, Rng,
};
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
            let dtypes = [DType::F64, DType::C64, DType::F32, DType::C32];
            let mut checked = 0;
            for seed in 0..16u64 {
                let rank = 2 + (seed % 3) as usize;
                let dtype = dtypes[(seed % 4) as usize];
                let layout = random_layout(seed, rank, 1 + (seed % 3) as usize, seed.is_multiple_of(5));
                let t = uni20::dist::sym_random(ctl, layout, dtype, seed).unwrap();
                let mut order: Vec<usize> = (0..rank).collect();
                if seed % 2 == 1 {
                    order.reverse();
                }
                let split = split_of(&order, 1 + (seed as usize % (rank - 1)));
                let opts = SvdOptions {
                    truncation: SvdTruncation {
                        max_rank: (!seed.is_multiple_of(3)).then_some(1 + (seed % 5) as usize),
                        ..Default::default()
                    },
                    s_diag: seed.is_multiple_of(2),
                    ..Default::default()
                };
                check_sym_svd(ctl, &t, &split, &opts);
                check_sym_qr(ctl, &t, &split, seed.is_multiple_of(2));
                checked += 2;
            }
            for seed in 0..6u64 {
                let g = symdecomp_common::group(seed.is_multiple_of(3));
                let mut rng = Rng::new(seed);
                let r = 1 + (seed % 2) as usize;
                let legs: Vec<_> = (0..r).map(|_| random_leg(&g, &mut rng, 2)).collect();
                let h = hermitian(
                    ctl,
                    &legs,
                    [DType::F64, DType::C64, DType::C32][(seed % 3) as usize],
                    seed,
                );
                let split = if r == 2 { "ab|cd" } else { "a|b" };
                check_sym_eigh(ctl, &h, split);
                checked += 1;
            }
            // A NaN in a stored block: a typed error, and the job goes on.
            let layout = random_layout(3, 3, 2, false);
            let t = uni20::dist::sym_random(ctl, layout.clone(), DType::F64, 3).unwrap();
            let mut v: Vec<f64> = t.to_dense(ctl).unwrap().to_c64_vec().iter().map(|z| z.re).collect();
            let shape = layout.dense_shape();
            let first = layout.block_offsets(0);
            v[(first[0] * shape[1] + first[1]) * shape[2] + first[2]] = f64::NAN;
            let bad = LocalTensor::from_f64(&shape, v).unwrap();
            let bad = DistTensor::from_dense(ctl, &bad, std::sync::Arc::new(layout), 0.0).unwrap();
            let e = uni20::dist::svd(ctl, &bad, "ab|c", &SvdOptions::default()).unwrap_err();
            assert!(
                matches!(&e, DistError::NonFinite { block: 0, element, .. } if element == &first),
                "{e}"
            );
            check_sym_svd(ctl, &t, "ab|c", &SvdOptions::default());
            println!(
                "mpi_symmetric_decomp: {} checks on {} ranks pass",
                checked + 1,
                ctl.size()
            );
            checked + 1
        })
        .unwrap();
    assert_eq!(checked, 16 * 2 + 6 + 1, "{checked} checks");
}
