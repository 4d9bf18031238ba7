//! Timing server for `benches/numpy_vdot.py`: the script starts this program once and
//! alternates single `numpy.vdot` calls with single uni20 calls over a pipe, so both sides
//! are measured in the same seconds on the same machine (see `examples/einsum_timing.rs`
//! for why back-to-back runs of two programs cannot be compared on a shared machine).
//!
//! Build: `cargo build --release --example inner_timing`.
//!
//! The program starts one in-process universe (`--ranks`, default 3: the root and two
//! workers; `--threads` per rank, default 1) and serves, one request per line on stdin, one
//! reply line on stdout:
//!
//! - `prepare <n> <block>`: creates two `n x n` f64 `DistTensor`s with `uni20::dist::random`
//!   (seeds 1 and 2, blocks of `block`, owned round-robin by the workers, made on the
//!   workers), plus the same two tensors as root-local `LocalTensor`s, and runs each timed
//!   call once to warm up. Reply `ok blocks=<b> value=<inner>` or `error <message>`.
//! - `inner`: one distributed `uni20::dist::inner(ctl, &a, &b)` (planning, submission, the
//!   workers' reductions, the combination on the leader, the reply). Reply: elapsed seconds.
//! - `local`: one local `uni20::dispatch::inner(&a, &b, threads)` on the root-local copies
//!   with the whole thread budget (`ranks - 1` times `--threads`): the kernel floor. Reply:
//!   elapsed seconds.
//! - `quit` (or end of input): exit 0.
//!
//! Every other line gets one `error <message>` reply; a failed `prepare` drops the
//! previous case.

use std::io::{BufRead, Write};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use uni20::dispatch::{inner as local_inner, random_block};
use uni20::prelude::*;

/// Largest `n` accepted by `prepare` (two n x n f64 tensors, twice: 4 * 8 * n^2 bytes).
const MAX_N: usize = 16384;

/// Command-line options.
#[derive(Parser)]
#[command(about = "uni20 inner-product timing server for benches/numpy_vdot.py")]
struct Args {
    /// Ranks of the in-process universe (the root and ranks - 1 workers).
    #[arg(long, default_value_t = 3)]
    ranks: usize,
    /// Thread budget of each rank's local kernels.
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

/// One prepared case.
struct Case {
    a: DistTensor,
    b: DistTensor,
    la: LocalTensor,
    lb: LocalTensor,
}

fn prepare(ctl: &Controller<'_>, words: &[&str]) -> Result<(Case, String)> {
    let [n, block] = words else {
        bail!("usage: prepare <n> <block>");
    };
    let n: usize = n.parse().with_context(|| format!("bad n {n:?}"))?;
    let block: usize = block.parse().with_context(|| format!("bad block {block:?}"))?;
    if n == 0 || n > MAX_N {
        bail!("n must be in 1..={MAX_N}");
    }
    let shape = [n, n];
    let a = random(ctl, &shape, DType::F64, block, 1)?;
    let b = random(ctl, &shape, DType::F64, block, 2)?;
    let la = random_block(1, DType::F64, &shape, &[0, 0], &shape)?;
    let lb = random_block(2, DType::F64, &shape, &[0, 0], &shape)?;
    let v = inner(ctl, &a, &b)?;
    let blocks = a.blocking().num_blocks();
    Ok((Case { a, b, la, lb }, format!("blocks={blocks} value={}", v.re)))
}

fn serve(ctl: &Controller<'_>, threads: usize) -> Result<()> {
    let mut case: Option<Case> = None;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for raw in stdin.lock().split(b'\n') {
        let raw = raw.context("reading stdin")?;
        let reply = match std::str::from_utf8(&raw) {
            Err(_) => "error request is not UTF-8".to_string(),
            Ok(line) => {
                let words: Vec<&str> = line.split_whitespace().collect();
                match (words.as_slice(), &case) {
                    ([], _) => "error empty request".to_string(),
                    (["quit"], _) => break,
                    (["prepare", rest @ ..], _) => {
                        case = None;
                        match prepare(ctl, rest) {
                            Ok((c, text)) => {
                                local_inner(&c.la, &c.lb, threads)?;
                                case = Some(c);
                                format!("ok {text}")
                            }
                            Err(e) => format!("error {e:#}"),
                        }
                    }
                    (["inner"], Some(c)) => {
                        let t = Instant::now();
                        let v = inner(ctl, &c.a, &c.b)?;
                        let s = t.elapsed().as_secs_f64();
                        std::hint::black_box(v);
                        format!("{s:.9}")
                    }
                    (["local"], Some(c)) => {
                        let t = Instant::now();
                        let v = local_inner(&c.la, &c.lb, threads)?;
                        let s = t.elapsed().as_secs_f64();
                        std::hint::black_box(v);
                        format!("{s:.9}")
                    }
                    (["inner" | "local"], None) => "error no case prepared".to_string(),
                    _ => format!("error unknown request {line:?}"),
                }
            }
        };
        writeln!(out, "{reply}").map_err(|e| anyhow!("stdout: {e}"))?;
        out.flush()?;
    }
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.ranks < 2 {
        bail!("--ranks must be at least 2 (the root and one worker)");
    }
    let threads = (args.ranks - 1) * args.threads.max(1);
    uni20::universe()
        .ranks(args.ranks)
        .threads_per_rank(args.threads)
        .run(|ctl| serve(ctl, threads))
        .map_err(|e| anyhow!("{e}"))?
}
