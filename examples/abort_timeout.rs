//! The last resort of library mode, on purpose: `cargo xtask test` runs this
//! under `mpirun -n 2` and expects it to FAIL (non-zero exit within 10 s,
//! with the message below).
//!
//! The program runs an SPMD universe on the world with a 1 s abort timeout.
//! After a barrier (both ranks are inside the universe), rank 1 goes off
//! into host code that never calls uni20 again (it sleeps); rank 0 waits
//! 300 ms and stops the universe. Rank 0's abort frame cannot reach rank 1, so
//! rank 0 cannot complete the universe's closing handshake; after the abort
//! timeout it ends the job with `MPI_Abort` on the universe's communicator,
//! printing `uni20: rank 0 aborting the job: ending the universe (waiting for
//! rank(s) 1) did not complete within 1s after the universe was aborted
//! (UNI20_ABORT_TIMEOUT): ...`. This is the only case in which library mode
//! calls `MPI_Abort`.
//!
//! ```text
//! cargo xtask mpirun -n 2 --example abort_timeout   # exits non-zero
//! ```

use std::time::Duration;

fn main() {
    let (mpi, _) = uni20::mpi::initialize_with_threading(uni20::mpi::Threading::Funneled).unwrap();
    let world = mpi.world();
    let out =
        uni20::universe()
            .abort_timeout(Duration::from_secs(1))
            .spmd_on(&world, |ctx| -> Result<(), uni20::JobError> {
                // Both ranks are inside the universe (each rank's start-up may end at
                // a different moment: without this, rank 0's abort could reach rank 1
                // while it is still starting, and rank 1 would stop cleanly).
                ctx.barrier()?;
                if ctx.rank() == 1 {
                    // Host code that never returns to uni20.
                    loop {
                        std::thread::sleep(Duration::from_secs(1));
                    }
                }
                // Give rank 1 time to leave uni20 after the barrier.
                std::thread::sleep(Duration::from_millis(300));
                Err(ctx.abort("deliberate stop while rank 1 is busy outside uni20"))
            });
    // Not reached on rank 0: the abort timeout ends the job first.
    eprintln!("abort_timeout: the universe returned {out:?}");
    std::process::exit(3);
}
