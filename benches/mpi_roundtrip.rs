//! The no-op command round trip under MPI against a raw MPI round trip of the same
//! pattern, timed in the same run, interleaved.
//!
//! ```text
//! cargo xtask mpirun -n 2 --release --bench mpi_roundtrip     # root + 1 worker
//! cargo xtask mpirun -n 3 --release --bench mpi_roundtrip     # root + 2 workers
//! ```
//!
//! - `noop`: `ctl.submit::<Noop>(&(), &ctl.compute_ranks())`, the runtime's round trip
//!   (root -> every worker -> root, one control frame out and one reply back per worker).
//! - `raw`: the same fan-out/fan-in written with the `mpi` crate directly, on a duplicate
//!   of `MPI_COMM_WORLD` (so the runtime's transport never sees its messages): the root
//!   sends a [`REQUEST_BYTES`]-byte message to each worker (`MPI_Send`), each worker
//!   receives it (`MPI_Mprobe` + `MPI_Mrecv`) and sends back [`REPLY_BYTES`] bytes, and the
//!   root receives one reply from any worker per worker (`MPI_Mprobe` + `MPI_Mrecv`).
//!   The sizes are about those of the runtime's messages for a no-op. The workers run
//!   their side of a batch inside one command (`bench.raw_rounds.v1`), so between the
//!   root's first send and its last receive only raw MPI calls run on every rank.
//!
//! Batches of [`BATCH`] round trips (`UNI20_BENCH_BATCH`) alternate between the two, after
//! a warm-up batch of each, for about 5 s (`UNI20_BENCH_SECS`); the program prints the
//! median per-round-trip time of each, their ratio and the load average (`/proc/loadavg`)
//! before and after. Without `mpirun` (an in-process universe) it says so and exits 0.
//!
//! Then, unless `UNI20_BENCH_CHAIN=0`, the chain of issue 25 under MPI: [`CHAIN_STEPS`]
//! dependent tiny contractions (`x <- x . m`, 8 x 8 f64, one block each) submitted without
//! waiting and waited for at the end, against as many no-op round trips each waited for,
//! in interleaved batches for the same time budget, pipelined (the default) and with
//! pipelined submission off (each step planned once its input has replied); it prints
//! `ratio chain/noop` for both (the in-process form of the same comparison is
//! `benches/chain_vs_roundtrip.rs`).
//!
//! For profiling one side alone (`perf record` on every rank), `UNI20_BENCH_ONLY=noop` or
//! `UNI20_BENCH_ONLY=raw` runs only that side's batches for the time budget and prints
//! its median.

use std::cell::RefCell;
use std::hint::black_box;
use std::mem::ManuallyDrop;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use uni20::mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use uni20::mpi::topology::{Communicator, SimpleCommunicator};
use uni20::worker::commands::Noop;
use uni20::worker::transport::TransportKind;
use uni20::{command, HandlerError, WorkerContext};

/// Round trips per timed batch.
const BATCH: u32 = 2000;
/// Bytes the root sends each worker per raw round trip (a no-op's control frame is
/// about this size).
const REQUEST_BYTES: usize = 40;
/// Bytes each worker sends back per raw round trip (a no-op's reply is about this size).
const REPLY_BYTES: usize = 12;
/// Dependent contractions (and no-op round trips) per timed chain batch.
const CHAIN_STEPS: usize = 200;
/// Tag of the raw messages (on the duplicated communicator, so any tag would do).
const RAW_TAG: i32 = 7;

/// One step of the raw side, run by every worker.
#[derive(Serialize, Deserialize)]
pub enum RawStep {
    /// Duplicate `MPI_COMM_WORLD` (collective with the root) and keep it.
    Open,
    /// Answer this many raw round trips from the root on the duplicate.
    Rounds(u32),
    /// Free the duplicate (collective with the root).
    Close,
}

command!(
    /// The worker side of the raw baseline (`bench.raw_rounds.v1`).
    pub RawRounds = "bench.raw_rounds.v1", schema 1, RawStep => (), handle_raw_rounds
);

thread_local! {
    /// A worker's duplicate of `MPI_COMM_WORLD`, between `Open` and `Close`. Never
    /// dropped otherwise: freeing a communicator after `MPI_Finalize` (a thread-local
    /// destructor at exit, when the root stopped before `Close`) is an MPI error.
    static RAW_COMM: RefCell<Option<ManuallyDrop<SimpleCommunicator>>> = const { RefCell::new(None) };
}

/// The communicator of the runtime: `MPI_COMM_WORLD` in a standalone universe.
fn world() -> SimpleCommunicator {
    SimpleCommunicator::world()
}

fn handle_raw_rounds(_ctx: &mut WorkerContext<'_>, step: RawStep) -> Result<(), HandlerError> {
    RAW_COMM.with(|slot| {
        let mut slot = slot.borrow_mut();
        match step {
            RawStep::Open => *slot = Some(ManuallyDrop::new(world().duplicate())),
            RawStep::Close => drop(slot.take().map(ManuallyDrop::into_inner)),
            RawStep::Rounds(n) => {
                let comm = slot
                    .as_ref()
                    .ok_or_else(|| HandlerError::msg("raw rounds before Open"))?;
                let root = comm.process_at_rank(0);
                let reply = [0u8; REPLY_BYTES];
                for _ in 0..n {
                    let (request, _) = root.matched_probe_with_tag(RAW_TAG).matched_receive_vec::<u8>();
                    black_box(request);
                    root.send_with_tag(&reply[..], RAW_TAG);
                }
            }
        }
        Ok(())
    })
}

/// One raw round trip from the root: a request to every worker, then one reply per
/// worker, from whichever worker answers first.
fn raw_round(comm: &SimpleCommunicator, workers: &[usize], request: &[u8]) {
    for &w in workers {
        comm.process_at_rank(w as i32).send_with_tag(request, RAW_TAG);
    }
    for _ in workers {
        let (reply, _) = comm
            .any_process()
            .matched_probe_with_tag(RAW_TAG)
            .matched_receive_vec::<u8>();
        black_box(reply);
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// [`CHAIN_STEPS`] dependent 8 x 8 contractions waited for at the end against as many
/// no-op round trips, interleaved batches for about `budget`; prints the medians and
/// their ratio.
fn chain_vs_noop(ctl: &uni20::worker::Controller<'_>, budget: Duration) -> anyhow::Result<()> {
    use uni20::prelude::*;
    let workers = ctl.compute_ranks();
    // An orthogonal 8 x 8 matrix (a permutation), so the chain stays bounded.
    let mut perm = vec![0.0f64; 64];
    for i in 0..8 {
        perm[i * 8 + (i * 3 + 1) % 8] = 1.0;
    }
    let m_local = LocalTensor::from_f64(&[8, 8], perm)?;
    let m = DistTensor::from_local(ctl, &m_local, 8)?;
    let x0 = DistTensor::from_local(ctl, &m_local, 8)?;
    let chain = |pipelined: bool| -> anyhow::Result<Duration> {
        uni20::dist::set_pipelining(ctl, pipelined);
        let t = Instant::now();
        let mut x = x0.clone();
        for _ in 0..CHAIN_STEPS {
            x = uni20::dist::contract(ctl, "ij,jk->ik", &x, &m)?;
        }
        x.wait(ctl)?;
        Ok(t.elapsed())
    };
    let noop = || -> anyhow::Result<Duration> {
        let t = Instant::now();
        for _ in 0..CHAIN_STEPS {
            black_box(ctl.submit::<Noop>(&(), &workers)?);
        }
        Ok(t.elapsed())
    };
    chain(true)?;
    chain(false)?;
    noop()?;
    let (mut c, mut u, mut n) = (Vec::new(), Vec::new(), Vec::new());
    let start = Instant::now();
    while c.len() < 5 || start.elapsed() < budget {
        c.push(chain(true)?);
        u.push(chain(false)?);
        n.push(noop()?);
    }
    uni20::dist::set_pipelining(ctl, true);
    let batches = c.len();
    let (c, u, n) = (median(c), median(u), median(n));
    let per = |d: Duration| d.as_secs_f64() * 1e6 / CHAIN_STEPS as f64;
    println!(
        "ratio chain/noop: {:.2} pipelined, {:.2} unpipelined ({CHAIN_STEPS} dependent 8 x 8 contractions \
         {:.1} us per step pipelined, {:.1} us unpipelined, {CHAIN_STEPS} no-op round trips {:.1} us each; \
         median of {batches} interleaved batches); load average {}",
        c.as_secs_f64() / n.as_secs_f64(),
        u.as_secs_f64() / n.as_secs_f64(),
        per(c),
        per(u),
        per(n),
        load_average()
    );
    Ok(())
}

fn main() -> std::process::ExitCode {
    let batch: u32 = env_or("UNI20_BENCH_BATCH", BATCH).max(1);
    let budget = Duration::from_secs_f64(env_or("UNI20_BENCH_SECS", 5.0));
    let result = uni20::universe().run(|ctl| -> anyhow::Result<()> {
        if ctl.transport_kind() != TransportKind::Mpi || ctl.size() < 2 {
            println!(
                "mpi_roundtrip: needs an MPI universe of 2 or more ranks (this one: {} ranks, {}); run \
                 `cargo xtask mpirun -n 2 --release --bench mpi_roundtrip`",
                ctl.size(),
                ctl.transport_kind()
            );
            return Ok(());
        }
        let only = match std::env::var("UNI20_BENCH_ONLY").ok() {
            Some(only) if only != "noop" && only != "raw" => {
                anyhow::bail!("UNI20_BENCH_ONLY={only}: expected `noop` or `raw`")
            }
            only => only,
        };
        let workers = ctl.compute_ranks();
        let load_before = load_average();
        let op = ctl.begin::<RawRounds>(&RawStep::Open, &workers)?;
        let comm = world().duplicate();
        ctl.finish(op)?;
        let request = [1u8; REQUEST_BYTES];
        let raw_batch = || -> anyhow::Result<Duration> {
            let op = ctl.begin::<RawRounds>(&RawStep::Rounds(batch), &workers)?;
            let t = Instant::now();
            for _ in 0..batch {
                raw_round(&comm, &workers, &request);
            }
            let per = t.elapsed() / batch;
            ctl.finish(op)?;
            Ok(per)
        };
        let noop_batch = || -> anyhow::Result<Duration> {
            let t = Instant::now();
            for _ in 0..batch {
                black_box(ctl.submit::<Noop>(&(), &workers)?);
            }
            Ok(t.elapsed() / batch)
        };
        if let Some(only) = only.as_deref() {
            let run: &dyn Fn() -> anyhow::Result<Duration> = if only == "noop" { &noop_batch } else { &raw_batch };
            let mut times = Vec::new();
            let start = Instant::now();
            while times.len() < 5 || start.elapsed() < budget {
                times.push(run()?);
            }
            let op = ctl.begin::<RawRounds>(&RawStep::Close, &workers)?;
            drop(comm);
            ctl.finish(op)?;
            println!(
                "mpi_roundtrip: {} ranks, {only} only: {:.2} us per round trip (median of {} batches of {batch}); \
                 load average {load_before} before, {} after",
                ctl.size(),
                us(median(times.clone())),
                times.len(),
                load_average()
            );
            return Ok(());
        }
        raw_batch()?;
        noop_batch()?;
        let (mut raw, mut noop) = (Vec::new(), Vec::new());
        let start = Instant::now();
        while raw.len() < 5 || start.elapsed() < budget {
            raw.push(raw_batch()?);
            noop.push(noop_batch()?);
        }
        let batches = raw.len();
        let (best_raw, best_noop) = (*raw.iter().min().unwrap(), *noop.iter().min().unwrap());
        let (raw, noop) = (median(raw), median(noop));
        let op = ctl.begin::<RawRounds>(&RawStep::Close, &workers)?;
        drop(comm);
        ctl.finish(op)?;
        println!(
            "mpi_roundtrip: {} ranks (root + {} workers), median of {batches} interleaved batches of {batch}",
            ctl.size(),
            workers.len()
        );
        println!(
            "ratio noop/raw: {:.2} (noop {:.2} us, raw MPI {:.2} us per round trip; best batch {:.2} / {:.2} us); \
             load average {load_before} before, {} after",
            noop.as_secs_f64() / raw.as_secs_f64(),
            us(noop),
            us(raw),
            us(best_noop),
            us(best_raw),
            load_average()
        );
        if env_or("UNI20_BENCH_CHAIN", 1u32) != 0 {
            chain_vs_noop(ctl, budget)?;
        }
        Ok(())
    });
    match result {
        Ok(Ok(())) => std::process::ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("mpi_roundtrip: {e:#}");
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("mpi_roundtrip: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
