//! The guide's library-mode program ("Running under MPI and embedding"):
//! the host program owns MPI, splits the world into two halves and runs one
//! universe on each half at the same time.
//!
//! ```text
//! cargo xtask mpirun -n 4 --example guide_library_mode
//! ```
//!
//! `cargo xtask test` runs it at 4 ranks; it exits non-zero when a root's
//! product differs from A A = [[7, 10], [15, 22]] or the universe fails.

// ANCHOR: guide
use uni20::mpi::topology::Color;
use uni20::mpi::traits::*;
use uni20::prelude::*;

fn main() -> std::process::ExitCode {
    let (mpi, _) = uni20::mpi::initialize_with_threading(uni20::mpi::Threading::Funneled).unwrap();
    let world = mpi.world();
    let half = world.split_by_color(Color::with_value(world.rank() % 2)).unwrap();
    let out = uni20::universe().run_on(&half, |ctl| -> anyhow::Result<Vec<f64>> {
        let a = DistTensor::from_local(ctl, &LocalTensor::from_f64(&[2, 2], vec![1., 2., 3., 4.])?, 1)?;
        Ok(contract(ctl, "ij,jk->ik", &a, &a)?
            .to_local(ctl)?
            .to_c64_vec()
            .iter()
            .map(|z| z.re)
            .collect())
    });
    let ok = match out {
        Ok(uni20::RankExit::Root(Ok(c))) => {
            println!("root of half {}: {c:?}", world.rank() % 2);
            c == [7., 10., 15., 22.]
        }
        Ok(uni20::RankExit::Root(Err(e))) => {
            eprintln!("the closure failed: {e:#}");
            false
        }
        Ok(uni20::RankExit::Worker(exit)) => matches!(exit, uni20::WorkerExit::Shutdown), // or Aborted(diagnostic)
        Err(e) => {
            eprintln!("the universe failed: {e}"); // on the root, or at start-up on any rank
            false
        }
    };
    // ... the program's own MPI on `world`: here, every rank learns whether all went well.
    let mut all_ok = 0i32;
    world.all_reduce_into(
        &i32::from(ok),
        &mut all_ok,
        uni20::mpi::collective::SystemOperation::min(),
    );
    if all_ok == 1 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    } // MPI is finalised when `mpi` drops.
}
// ANCHOR_END: guide
