//! MPI integration test (run by `cargo xtask test` under `mpirun -n 1..3`):
//! every numpy fixture (two-operand contractions and the einsum forms:
//! traces, diagonals, one operand, implicit output, ellipsis) through
//! distributed `read_npy`, `einsum`,
//! `to_local` and `write_npy`, with no payload through the root.
//! A failure panics on the root, which aborts the communicator: non-zero exit.

mod common;

use uni20::prelude::*;

fn main() {
    let dir = std::env::temp_dir().join(format!("uni20-mpi-contract-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let checked = uni20::universe()
        .run(|ctl| {
            assert_eq!(
                ctl.transport_kind(),
                uni20::worker::transport::TransportKind::Mpi,
                "not launched by mpirun"
            );
            let mut checked = 0;
            for case in common::cases().into_iter().chain(common::einsum_cases()) {
                for block in [1, 2, 3] {
                    let (out, want) = common::run_case(ctl, &case, block);
                    let path = dir.join(format!("{}-{block}.npy", case.name));
                    write_npy(ctl, &out, &path).unwrap();
                    let back = read_npy(ctl, &path, 2).unwrap().to_local(ctl).unwrap();
                    common::assert_close(&back, &want, &format!("{} written and re-read", case.name));
                    checked += 1;
                }
            }
            println!(
                "mpi_contract: {checked} fixture runs on {} ranks match numpy",
                ctl.size()
            );
            checked
        })
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert!(checked >= 42 + 90, "{checked} fixture runs");
}
