//! MPI integration test of fused reductions (run by `cargo xtask test`
//! under `mpirun -n 2` and `-n 3`, or alone with `cargo xtask mpirun -n 3
//! --test mpi_reduce_many`): the checks of `tests/reduce_many_common`
//! (`reduce_many` against the separate reductions, bit for bit, and the
//! local reference; dense and symmetric operands) with blocks on worker
//! processes. A failure panics on the root, which aborts the communicator:
//! non-zero exit.
// uni20-mpi-ranks: 2,3

mod reduce_many_common;

fn main() {
    let (n, size) = uni20::universe()
        .run(|ctl| {
            assert_eq!(
                ctl.transport_kind(),
                uni20::worker::transport::TransportKind::Mpi,
                "not launched by mpirun"
            );
            (reduce_many_common::check_all(ctl), ctl.size())
        })
        .expect("the universe ran");
    println!("mpi_reduce_many: {n} fused reductions equal the separate ones on {size} ranks");
}
