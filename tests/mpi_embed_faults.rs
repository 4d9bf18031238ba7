// uni20-mpi-ranks: 4, 6
//! Library-mode fail-stop under MPI (run by `cargo xtask test` under
//! `mpirun -n 4` and `-n 6`): the program initialises MPI and splits the
//! world into two halves. On the even half a universe runs with a failure
//! injected on its worker rank 1 (`error@rank=1,op=3`, through the builder,
//! so only that universe has it); the odd half runs the same job without a
//! fault, at the same time. Every rank of the failed universe must return
//! the diagnostic (the root as its error, each worker as
//! `WorkerExit::Aborted`), within 10 s, without any process exiting; the
//! other universe must finish normally. Each half then runs a second
//! universe on the same communicator, which must succeed (the aborted
//! universe left nothing behind). Before that: a standalone `run` in a
//! process whose MPI the program initialised must be refused with a
//! start-up error pointing to `run_on`; and `run_on` from a thread other
//! than the one that initialised MPI must be refused under `Single` (the
//! level asked at 4 ranks) and must work under `Multiple` (asked at 6). The ranks agree on
//! the verdict with the program's own MPI all-reduce, and every rank exits
//! non-zero on failure.

use std::time::{Duration, Instant};

use uni20::mpi::collective::SystemOperation;
use uni20::mpi::topology::Color;
use uni20::mpi::traits::*;
use uni20::prelude::*;
use uni20::worker::fault::FaultPlan;
use uni20::{JobError, RankExit, WorkerExit};

/// `A (4x3) . B (3x5)` with blocks of 2; returns the largest absolute error
/// against the naive product. Ops: 1 scatter A, 2 scatter B, 3 contract, 4 gather.
fn job(ctl: &Controller<'_>) -> anyhow::Result<f64> {
    let a: Vec<f64> = (0..12).map(|i| i as f64 - 4.5).collect();
    let b: Vec<f64> = (0..15).map(|i| (i % 4) as f64 * 0.5 + 1.0).collect();
    let da = DistTensor::from_local(ctl, &LocalTensor::from_f64(&[4, 3], a.clone())?, 2)?;
    let db = DistTensor::from_local(ctl, &LocalTensor::from_f64(&[3, 5], b.clone())?, 2)?;
    let c = contract(ctl, "ij,jk->ik", &da, &db)?.to_local(ctl)?.to_c64_vec();
    let mut err = 0.0f64;
    for i in 0..4 {
        for k in 0..5 {
            let want: f64 = (0..3).map(|j| a[i * 3 + j] * b[j * 5 + k]).sum();
            err = err.max((c[i * 5 + k].re - want).abs());
        }
    }
    Ok(err)
}

/// The pieces every rank of the failed universe must report.
const NEEDLES: &[&str] = &["rank 1", "op_id 3", "uni20.contract.v1", "injected error"];

fn check_failed(out: Result<RankExit<anyhow::Result<f64>>, JobError>) -> Result<String, String> {
    let text = match out {
        Err(e) => format!("root: {e}"),
        Ok(RankExit::Root(r)) => return Err(format!("the root of the failed universe returned {r:?}")),
        Ok(RankExit::Worker(WorkerExit::Aborted(why))) => format!("worker: {why}"),
        Ok(RankExit::Worker(other)) => return Err(format!("a worker of the failed universe ended with {other:?}")),
    };
    match NEEDLES.iter().find(|n| !text.contains(*n)) {
        Some(n) => Err(format!("the diagnostic lacks {n:?}: {text}")),
        None => Ok(text),
    }
}

fn check_clean<E: std::fmt::Debug>(out: Result<&RankExit<anyhow::Result<f64>>, E>) -> Result<(), String> {
    match out {
        Ok(RankExit::Root(Ok(err))) if *err < 1e-12 => Ok(()),
        Ok(RankExit::Worker(WorkerExit::Shutdown)) => Ok(()),
        other => Err(format!("unexpected outcome {other:?}")),
    }
}

fn main() {
    use uni20::mpi::Threading;
    let launched = uni20::worker::config::LauncherEnv::from_env()
        .world_size
        .map_or(1, |(_, n)| n);
    let asked = if launched >= 6 {
        Threading::Multiple
    } else {
        Threading::Single
    };
    let (mpi_universe, provided) = uni20::mpi::initialize_with_threading(asked).unwrap();
    let world = mpi_universe.world();
    let (rank, size) = (world.rank(), world.size());
    assert!(
        size >= 4,
        "run with mpirun -n 4 or more (two halves of at least 2 ranks)"
    );
    let mut refusals: Result<(), String> = Ok(());
    match uni20::universe().run(|_| ()) {
        Err(JobError::Startup(m)) if m.contains("already initialised") && m.contains("run_on") => {}
        other => refusals = Err(format!("standalone run in an MPI program: {other:?}")),
    }
    let from_thread = std::thread::scope(|s| {
        s.spawn(|| {
            let world = uni20::mpi::topology::SimpleCommunicator::world();
            uni20::universe().threads_per_rank(1).run_on(&world, job)
        })
        .join()
        .unwrap()
    });
    if rank == 0 {
        println!("mpi_embed_faults: MPI threading asked {asked:?}, provided {provided:?}");
    }
    match (provided, from_thread) {
        (Threading::Single | Threading::Funneled, Err(JobError::Startup(m)))
            if m.contains("only the thread that initialised") => {}
        (Threading::Serialized | Threading::Multiple, out)
            if check_clean(out.as_ref().map_err(|e| e.to_string())).is_ok() => {}
        (level, other) => refusals = Err(format!("run_on from another thread under {level:?}: {other:?}")),
    }
    let color = rank % 2;
    let half = world.split_by_color(Color::with_value(color)).unwrap();
    let faulty = color == 0;

    let start = Instant::now();
    let mut builder = uni20::universe().threads_per_rank(1);
    if faulty {
        builder = builder.faults(FaultPlan::parse("error@rank=1,op=3").unwrap());
    }
    let out = builder.run_on(&half, job);
    let elapsed = start.elapsed();
    let mut verdict = if faulty {
        check_failed(out).map(|text| {
            if half.rank() == 0 {
                println!(
                    "mpi_embed_faults: failed universe, root reports: {}",
                    text.lines().next().unwrap_or("")
                );
            }
        })
    } else {
        check_clean(out.as_ref())
    };
    if verdict.is_ok() && elapsed > Duration::from_secs(10) {
        verdict = Err(format!("the universe took {elapsed:?}"));
    }
    if verdict.is_ok() {
        verdict = refusals;
    }

    // The same communicator serves a fresh universe after the abort.
    let again = uni20::universe().threads_per_rank(1).run_on(&half, job);
    if let (Ok(()), Err(e)) = (&verdict, check_clean(again.as_ref())) {
        verdict = Err(format!("second universe on half {color}: {e}"));
    }

    if let Err(e) = &verdict {
        eprintln!("mpi_embed_faults: world rank {rank} (half {color}): FAIL: {e}");
    }
    let mine = i32::from(verdict.is_ok());
    let mut all = 0i32;
    world.all_reduce_into(&mine, &mut all, SystemOperation::min());
    if rank == 0 {
        println!(
            "mpi_embed_faults: {size} ranks: failed universe returned the diagnostic on every rank, the other half \
             finished normally, both halves reused their communicator: {}",
            if all == 1 { "yes" } else { "NO" }
        );
    }
    drop(half);
    drop(world);
    drop(mpi_universe);
    if all != 1 {
        std::process::exit(1);
    }
}
