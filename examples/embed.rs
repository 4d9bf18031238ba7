//! Embedding uni20 in an existing MPI program (library mode).
//!
//! The program owns MPI: it initialises it, splits the world into two
//! halves (even and odd world ranks), runs one uni20 universe on each half
//! at the same time (each contracting its own tensors), then a third
//! universe on the whole world, then does its own MPI communication on the
//! world and finalises MPI. uni20 never initialises or finalises MPI here,
//! installs no panic hook and never ends the process: every `run_on`
//! returns on every rank.
//!
//! ```text
//! cargo xtask mpirun -n 4 --example embed
//! cargo xtask mpirun -n 6 --example embed
//! ```
//!
//! Exit status 0 when every rank saw the expected outcome (results equal
//! to a naive reference within 1e-12, clean worker shutdowns).

use std::process::ExitCode;

use uni20::mpi::collective::SystemOperation;
use uni20::mpi::topology::Color;
use uni20::mpi::traits::*;
use uni20::prelude::*;
use uni20::{RankExit, WorkerExit};

/// A deterministic `rows x cols` matrix (values differ per `seed`).
fn matrix(rows: usize, cols: usize, seed: usize) -> Vec<f64> {
    (0..rows * cols)
        .map(|i| ((i * 7 + seed * 13) % 11) as f64 - 5.0 + 0.25 * seed as f64)
        .collect()
}

/// The naive product of `a` (`m x k`) and `b` (`k x n`), row-major.
fn naive_matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
        }
    }
    c
}

/// On the root of a universe: `A (m x k) . B (k x n)` through uni20 with
/// blocks of 2, compared with the naive product. Returns the largest
/// relative difference.
fn contract_and_check(ctl: &Controller<'_>, m: usize, k: usize, n: usize, seed: usize) -> anyhow::Result<f64> {
    let (a, b) = (matrix(m, k, seed), matrix(k, n, seed + 1));
    let want = naive_matmul(&a, &b, m, k, n);
    let da = DistTensor::from_local(ctl, &LocalTensor::from_f64(&[m, k], a)?, 2)?;
    let db = DistTensor::from_local(ctl, &LocalTensor::from_f64(&[k, n], b)?, 2)?;
    let c = contract(ctl, "ij,jk->ik", &da, &db)?.to_local(ctl)?;
    let got = c.to_c64_vec();
    let scale = want.iter().fold(1.0f64, |s, v| s.max(v.abs()));
    let diff = got.iter().zip(&want).map(|(g, w)| (g.re - w).abs()).fold(0.0, f64::max) / scale;
    anyhow::ensure!(got.len() == want.len(), "{} values, expected {}", got.len(), want.len());
    Ok(diff)
}

/// Checks one rank's outcome of a universe; prints the root's line.
fn outcome_ok(what: &str, out: Result<RankExit<anyhow::Result<f64>>, uni20::JobError>) -> bool {
    match out {
        Ok(RankExit::Root(Ok(diff))) if diff <= 1e-12 => {
            println!("embed: {what}: result equals the naive product (max rel diff {diff:e})");
            true
        }
        Ok(RankExit::Worker(WorkerExit::Shutdown)) => true,
        other => {
            eprintln!("embed: {what}: unexpected outcome {other:?}");
            false
        }
    }
}

fn main() -> ExitCode {
    // The host program initialises MPI; uni20 only needs the calling thread
    // to be the one that initialised it (Funneled).
    let Some((mpi_universe, threading)) = uni20::mpi::initialize_with_threading(uni20::mpi::Threading::Funneled) else {
        eprintln!("embed: MPI was already initialised");
        return ExitCode::FAILURE;
    };
    let world = mpi_universe.world();
    let (rank, size) = (world.rank(), world.size());
    if rank == 0 {
        println!("embed: {size} ranks, MPI threading {threading:?}");
    }
    let mut ok = true;

    // 1. One universe per half, at the same time: even world ranks form one
    //    half, odd ones the other (a single rank has only the even half).
    let color = rank % 2;
    let half = world
        .split_by_color(Color::with_value(color))
        .expect("every rank has a color");
    let members: Vec<String> = (0..size).filter(|r| r % 2 == color).map(|r| r.to_string()).collect();
    let (m, k, n) = (5 + color as usize, 4, 3 + color as usize);
    let out = uni20::universe()
        .threads_per_rank(1)
        .run_on(&half, |ctl| contract_and_check(ctl, m, k, n, color as usize));
    ok &= outcome_ok(
        &format!("half {color} (world ranks {}): {m}x{k} . {k}x{n}", members.join(", ")),
        out,
    );

    // 2. A third universe on the whole world (the same communicator the
    //    program uses below: the universe runs on its own duplicate).
    let out = uni20::universe()
        .threads_per_rank(1)
        .run_on(&world, |ctl| contract_and_check(ctl, 7, 6, 5, 9));
    ok &= outcome_ok(&format!("whole world ({size} ranks): 7x6 . 6x5"), out);

    // 3. The program's own MPI communication on the world.
    let mine = i32::from(ok);
    let mut all_ok = 0i32;
    world.all_reduce_into(&mine, &mut all_ok, SystemOperation::min());
    let mut ranks_sum = 0i32;
    world.all_reduce_into(&rank, &mut ranks_sum, SystemOperation::sum());
    let all_ok = all_ok == 1 && ranks_sum == size * (size - 1) / 2;
    if rank == 0 {
        println!(
            "embed: own MPI all-reduce after the universes: sum of ranks {ranks_sum}; every rank {}",
            if all_ok { "passed" } else { "did NOT pass" }
        );
    }

    // 4. Finalise MPI (the program's job, not uni20's).
    drop(half);
    drop(world);
    drop(mpi_universe);
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
