// uni20-mpi-ranks: 2, 3
//! Start-up failures under MPI in library mode and SPMD mode (run by
//! `cargo xtask test` under `mpirun -n 2` and `-n 3`; the standalone cases
//! are the start-up stage of the xtask). The program initialises MPI and
//! runs universes on the world one after another, each with one rank's
//! preparation failing: the last rank's store directory a plain file (two
//! universes in a row), the root's store directory a plain file, the
//! root's store directory held by another process (the last rank's process
//! opens it first), the last rank's configuration invalid (a chunk size out
//! of range, set on that rank only), and in SPMD mode the last rank's and
//! the root's store directory a plain file. The start-up timeout is 60 s:
//! every universe must end within 5 s on every rank, every rank returning
//! the failing rank's own message (`rank R failed at start-up: ...`; the
//! root and the failing rank as their error, the other workers as
//! `WorkerExit::Refused` / `Aborted`). A last universe on the same
//! communicator with an undamaged directory must run. The ranks agree on
//! the verdict with the program's own MPI all-reduce, and every rank exits
//! non-zero on failure.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use uni20::mpi::collective::SystemOperation;
use uni20::mpi::topology::SimpleCommunicator;
use uni20::mpi::traits::*;
use uni20::{JobError, RankExit, WorkerExit};

/// Every universe here must end within this bound on every rank.
const BOUND: Duration = Duration::from_secs(5);

fn builder(dir: &Path) -> uni20::UniverseBuilder {
    uni20::universe()
        .threads_per_rank(1)
        .startup_timeout(Duration::from_secs(60))
        .store_dir(dir)
}

/// The text a rank returned from a library-mode universe, if it is the
/// start-up failure of `failing` with `cause`.
fn check_library(out: Result<RankExit<usize>, JobError>, me: usize, failing: usize, cause: &str) -> Result<(), String> {
    let want = format!("rank {failing} failed at start-up: ");
    let text = match out {
        Err(JobError::Startup(m)) if me == 0 || me == failing => m,
        Ok(RankExit::Worker(WorkerExit::Refused(m) | WorkerExit::Aborted(m))) if me != 0 && me != failing => m,
        other => return Err(format!("unexpected outcome {other:?}")),
    };
    if text.contains(&want) && text.contains(cause) {
        Ok(())
    } else {
        Err(format!("{text:?} lacks {want:?} or {cause:?}"))
    }
}

fn check_spmd(out: Result<usize, JobError>, failing: usize, cause: &str) -> Result<(), String> {
    let want = format!("rank {failing} failed at start-up: ");
    match out {
        Err(JobError::Startup(m)) if m.contains(&want) && m.contains(cause) => Ok(()),
        other => Err(format!("unexpected outcome {other:?} (wanted {want:?} and {cause:?})")),
    }
}

/// Runs one case on every rank: `prepare` (rank 0 damages the directory;
/// `held` keeps what the case holds until the universe has ended), then
/// `run`, bounded by [`BOUND`].
fn case<H>(
    world: &SimpleCommunicator,
    name: &str,
    prepare: impl FnOnce() -> H,
    run: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    let held = prepare();
    world.barrier();
    let start = Instant::now();
    let verdict = run();
    let elapsed = start.elapsed();
    drop(held);
    world.barrier();
    let verdict = verdict.and_then(|()| {
        if elapsed < BOUND {
            Ok(())
        } else {
            Err(format!("the universe took {elapsed:?}"))
        }
    });
    if world.rank() == 0 {
        println!("mpi_startup: {name}: {:.2} s on rank 0", elapsed.as_secs_f64());
    }
    verdict.map_err(|e| format!("{name}: {e}"))
}

fn plain_file(dir: &Path, rank: usize, me: usize) {
    if me == 0 {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(format!("rank-{rank}")), b"not a directory").unwrap();
    }
}

fn main() {
    let (mpi_universe, _) = uni20::mpi::initialize_with_threading(uni20::mpi::Threading::Funneled).unwrap();
    let world = mpi_universe.world();
    let (me, size) = (world.rank() as usize, world.size() as usize);
    assert!(size >= 2, "run with mpirun -n 2 or more");
    let last = size - 1;
    // One scratch directory for the job, named after rank 0's process.
    let mut pid = std::process::id();
    world.process_at_rank(0).broadcast_into(&mut pid);
    let scratch = std::env::temp_dir().join(format!("uni20-mpi-startup-{pid}"));
    let dir = |name: &str| -> PathBuf { scratch.join(name) };
    let store = "opening the store in";

    let mut results: Vec<Result<(), String>> = Vec::new();
    for round in 1..=2 {
        let d = dir("worker-plain");
        results.push(case(
            &world,
            &format!("library mode, rank {last}'s store directory a plain file (universe {round})"),
            || {
                if round == 1 {
                    plain_file(&d, last, me)
                }
            },
            || check_library(builder(&d).run_on(&world, |ctl| ctl.size()), me, last, store),
        ));
    }
    let d = dir("root-plain");
    results.push(case(
        &world,
        "library mode, the root's store directory a plain file",
        || plain_file(&d, 0, me),
        || check_library(builder(&d).run_on(&world, |ctl| ctl.size()), me, 0, store),
    ));
    let d = dir("root-held");
    results.push(case(
        &world,
        "library mode, the root's store directory held by another process",
        || {
            // The last rank's process holds rank 0's directory.
            (me == last).then(|| uni20::persist::Store::open(&d, 0, uni20::persist::StoreOptions::new()).unwrap())
        },
        || {
            check_library(
                builder(&d).run_on(&world, |ctl| ctl.size()),
                me,
                0,
                "held by another process",
            )
        },
    ));
    let d = dir("config");
    results.push(case(
        &world,
        &format!("library mode, rank {last}'s configuration invalid"),
        || (),
        || {
            let mut b = builder(&d);
            if me == last {
                b = b.chunk_bytes(1);
            }
            check_library(
                b.run_on(&world, |ctl| ctl.size()),
                me,
                last,
                "chunk size 1 B is out of range",
            )
        },
    ));
    for failing in [last, 0] {
        let d = dir(&format!("spmd-plain-{failing}"));
        results.push(case(
            &world,
            &format!("SPMD mode, rank {failing}'s store directory a plain file"),
            || plain_file(&d, failing, me),
            || check_spmd(builder(&d).spmd_on(&world, |ctx| ctx.size()), failing, store),
        ));
    }
    let d = dir("clean");
    results.push(case(
        &world,
        "library mode, an undamaged directory on the same communicator",
        || (),
        || match builder(&d).run_on(&world, |ctl| ctl.size()) {
            Ok(RankExit::Root(n)) if n == size => Ok(()),
            Ok(RankExit::Worker(WorkerExit::Shutdown)) if me != 0 => Ok(()),
            other => Err(format!("unexpected outcome {other:?}")),
        },
    ));

    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    for e in &failures {
        eprintln!("mpi_startup: rank {me}: FAIL: {e}");
    }
    let mine = i32::from(failures.is_empty());
    let mut all = 0i32;
    world.all_reduce_into(&mine, &mut all, SystemOperation::min());
    if me == 0 {
        let _ = std::fs::remove_dir_all(&scratch);
        println!(
            "mpi_startup: {size} ranks, {} cases: every start-up failure ended every rank within {BOUND:?} with \
             the failing rank's message: {}",
            results.len(),
            if all == 1 { "yes" } else { "NO" }
        );
    }
    drop(world);
    drop(mpi_universe);
    if all != 1 {
        std::process::exit(1);
    }
}
