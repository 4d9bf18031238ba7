//! MPI integration test of symmetric tensors through the element-wise
//! family and the layout changes (run by `cargo xtask test` under `mpirun
//! -n 3`, or alone with `cargo xtask mpirun -n 3 --test
//! mpi_symmetric_elementwise`): the property checks of
//! `tests/sym_elementwise_common` (creation, `norm` / `inner` / `max_abs`,
//! `from_dense` / `to_dense`; `axpby` / `scale` / `conj` / `permute`,
//! `fuse_legs` / `split_leg`, `reblock` of random symmetric tensors against
//! the dense operation on the dense embeddings) with blocks on two worker
//! processes, and no payload through the root. A failure panics on the
//! root, which aborts the communicator: non-zero exit.
// uni20-mpi-ranks: 3

mod sym_elementwise_common;

use sym_elementwise_common as common;

fn main() {
    let n = uni20::universe()
        .run(|ctl| {
            assert_eq!(
                ctl.transport_kind(),
                uni20::worker::transport::TransportKind::Mpi,
                "not launched by mpirun"
            );
            common::runner(16)
                .run(&common::create_case(), |c| common::check_create_reduce(ctl, &c))
                .unwrap_or_else(|e| panic!("creation and reductions: {e}"));
            common::runner(16)
                .run(&common::elementwise_case(), |c| common::check_elementwise(ctl, &c))
                .unwrap_or_else(|e| panic!("element-wise: {e}"));
            common::runner(16)
                .run(&common::fuse_case(), |c| common::check_fuse_split(ctl, &c))
                .unwrap_or_else(|e| panic!("fuse/split: {e}"));
            common::runner(12)
                .run(&common::reblock_case(), |c| common::check_reblock(ctl, &c))
                .unwrap_or_else(|e| panic!("reblock: {e}"));
            ctl.size()
        })
        .expect("the universe ran");
    println!("mpi_symmetric_elementwise: creation, reductions, element-wise, fuse/split and reblock properties held on {n} ranks");
}
