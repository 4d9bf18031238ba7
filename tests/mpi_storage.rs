//! MPI integration test: 3 ranks plus 1 storage rank (`mpirun -n 4`); a
//! contraction whose inputs live on the storage rank matches the reference
//! and routes no byte through the root; workers put blocks onto the storage
//! rank and fetch them back in plans while the root's MPI transport counts
//! no payload byte.
// uni20-mpi-ranks: 4

mod storage_common;

fn main() {
    let bytes = uni20::universe()
        .storage_ranks(1)
        .run(|ctl| {
            assert_eq!(
                ctl.transport_kind(),
                uni20::worker::transport::TransportKind::Mpi,
                "not launched by mpirun"
            );
            let fetched = storage_common::contraction_with_inputs_on_storage(ctl);
            (fetched, storage_common::put_and_fetch_through_storage(ctl))
        })
        .unwrap();
    println!(
        "mpi_storage: {} bytes fetched by workers directly from the storage rank; {} bytes put and fetched in \
         plans, none through the root",
        bytes.0, bytes.1
    );
}
