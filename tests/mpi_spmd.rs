// uni20-mpi-ranks: 1, 2, 3, 4
//! The SPMD mode under MPI (run by `cargo xtask test` under `mpirun -n 1`
//! to `-n 4`), in library mode: the program initialises MPI and runs
//! several SPMD universes one after another on the world (each on its own
//! duplicate): the collectives and the numpy contractions of
//! `tests/spmd_common`, then (from 2 ranks) a rank with another block size
//! and a rank with another spec, which must stop every rank with the
//! disagreement named within 10 s, then a failing handler on the last rank,
//! whose diagnostic every rank must return; from 4 ranks, two universes at
//! the same time on the two halves of the world. The ranks agree on the
//! verdict with the program's own MPI all-reduce. The MPI threading level
//! the program asks for depends on the rank count (1: `Single`, 2:
//! `Funneled`, 3: `Serialized`, 4: `Multiple`), so every level runs.

mod spmd_common;

use std::time::{Duration, Instant};

use spmd_common::*;
use uni20::mpi::collective::SystemOperation;
use uni20::mpi::topology::Color;
use uni20::mpi::traits::*;
use uni20::worker::fault::FaultPlan;

fn builder() -> uni20::UniverseBuilder {
    uni20::universe().threads_per_rank(1)
}

fn main() {
    use uni20::mpi::Threading;
    let launched = uni20::worker::config::LauncherEnv::from_env()
        .world_size
        .map_or(1, |(_, n)| n);
    let asked = [
        Threading::Single,
        Threading::Funneled,
        Threading::Serialized,
        Threading::Multiple,
    ][(launched.clamp(1, 4)) - 1];
    let (mpi_universe, provided) = uni20::mpi::initialize_with_threading(asked).unwrap();
    let world = mpi_universe.world();
    let (rank, size) = (world.rank(), world.size() as usize);
    if rank == 0 {
        println!("mpi_spmd: MPI threading asked {asked:?}, provided {provided:?}");
    }
    let mut failures: Vec<String> = Vec::new();
    let mut check = |what: &str, r: anyhow::Result<()>| {
        if let Err(e) = r {
            failures.push(format!("{what}: {e:#}"));
        }
    };

    // 1. Everything that must succeed.
    let out = builder().spmd_on(&world, |ctx| {
        anyhow::ensure!(
            ctx.transport_kind() == uni20::worker::transport::TransportKind::Mpi,
            "transport {}",
            ctx.transport_kind()
        );
        check_all(ctx)
    });
    check(
        "collectives and contractions",
        match out {
            Ok(Ok(runs)) if runs == 2 * CASES.len() => Ok(()),
            other => Err(anyhow::anyhow!("{other:?}")),
        },
    );

    if size >= 2 {
        // 2. Diverging plans stop every rank, naming the disagreement.
        let start = Instant::now();
        let out = builder().spmd_on(&world, diverging_block);
        check(
            "another block size",
            expect_disagreement(out, &diverging_block_text(size)),
        );
        let took = start.elapsed();
        check(
            "stop within 10 s",
            (took < Duration::from_secs(10))
                .then_some(())
                .ok_or_else(|| anyhow::anyhow!("{took:?}")),
        );
        let others: Vec<String> = (1..size).map(|r| r.to_string()).collect();
        let text = format!(
            "plan disagreement in `uni20.contract.v1` at op_id 3: rank 0 computed one plan, rank{} {} another; \
             first differing plan field: `spec`",
            if size == 2 { "" } else { "s" },
            others.join(", ")
        );
        check(
            "another spec",
            expect_disagreement(builder().spmd_on(&world, diverging_spec), &text),
        );
    }

    // 3. A handler failing on the last rank (op 3: the contraction) stops
    //    every rank with its diagnostic.
    let fault = format!("error@rank={},op=3", size - 1);
    let out = builder()
        .faults(FaultPlan::parse(&fault).unwrap())
        .spmd_on(&world, |ctx| check_contractions(ctx).map(drop));
    check(
        "failing handler",
        match out {
            Err(e) => {
                let text = e.to_string();
                let needles = [format!("rank {}", size - 1), "op_id 3".into(), "injected error".into()];
                match needles.iter().find(|n| !text.contains(n.as_str())) {
                    Some(n) => Err(anyhow::anyhow!("the error lacks {n:?}: {text}")),
                    None => Ok(()),
                }
            }
            Ok(r) => Err(anyhow::anyhow!("the universe did not stop: {r:?}")),
        },
    );

    // 4. Two SPMD universes at the same time on the two halves.
    if size >= 4 {
        let half = world.split_by_color(Color::with_value(rank % 2)).unwrap();
        let out = builder().spmd_on(&half, check_collectives);
        check(
            "collectives on a half",
            out.map_err(anyhow::Error::from).and_then(|r| r),
        );
    }

    for f in &failures {
        eprintln!("mpi_spmd: rank {rank}: FAIL: {f}");
    }
    let mine = i32::from(failures.is_empty());
    let mut all = 0i32;
    world.all_reduce_into(&mine, &mut all, SystemOperation::min());
    if rank == 0 {
        println!(
            "mpi_spmd: {size} rank(s): collectives, {} numpy contractions, diverging plans and a failing handler: {}",
            2 * CASES.len(),
            if all == 1 { "all as expected" } else { "FAILED" }
        );
    }
    drop(world);
    drop(mpi_universe);
    if all != 1 {
        std::process::exit(1);
    }
}
