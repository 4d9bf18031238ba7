//! Timing server for `benches/numpy_einsum.py`: the script starts this program once and
//! alternates single numpy.einsum calls with single uni20 calls over a pipe, so both sides
//! are measured in the same seconds on the same machine (the CPU of a shared machine drifts
//! by 20-40 % over tens of seconds; back-to-back runs of two programs cannot be compared).
//!
//! Build: `cargo build --release --example einsum_timing`.
//!
//! Protocol (one request per line on stdin, one reply line on stdout):
//!
//! - `prepare <spec> <dims A> <dims B>`, e.g. `prepare ij,jk->ik 1024,1024 1024,1024`:
//!   allocates f64 operands of those shapes (deterministic entries in [-1, 1)) and a raw
//!   faer GEMM problem of the matricized shape (m = free A extents, k = contracted, n = free
//!   B), and runs each once to warm up (with tuning on, this first `contract` measures the
//!   accepting backends for the case's shape class). Reply `ok m=<m> k=<k> n=<n>
//!   backend=<the backend that ran>` or `error <message>` (bad spec or extents, batch labels,
//!   or more than 8 GiB of operands).
//! - `contract`: one `uni20::dispatch::contract(spec, 1, A, B, 0, None, backend list)`,
//!   output allocated fresh as in numpy. Reply: elapsed seconds.
//! - `gemm`: one raw `faer::linalg::matmul::matmul` of the matricized shape into a
//!   preallocated matrix (the faer GEMM floor under `contract`). Reply: elapsed seconds.
//! - `matmul`: one uni20 `contract` of `ij,jk->ik` with the matricized shape (m x k times
//!   k x n, same backend list): the contraction minus its permutations. Reply: elapsed
//!   seconds.
//! - `quit` (or end of input): exit 0.
//!
//! Every other line (empty, not UTF-8, unknown) gets one `error <message>` reply; a failed
//! `prepare` drops the previous case.
//!
//! `--threads N` (default: the machine's available cores) is the thread budget of the uni20
//! backends and of the raw GEMM. `--backends default|faer|blas` picks the list
//! (`BackendList::default_cpu`, faer alone, or BLAS alone; `blas` needs a build with the
//! `blas` feature). With `default`, a tuning table measures each new shape class on first
//! sight (the table of `UNI20_TUNE_FILE` if set, else an in-memory one); `--no-tune` keeps
//! the static order.

use std::io::{BufRead, Write};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
mod shared;
use shared::fill;
use uni20::dispatch::backends::FaerBackend;
use uni20::dispatch::tune::TuneTable;
use uni20::dispatch::{contract_with_attempts, BackendList, EinsumSpec, LocalTensor, C64};

/// Largest total operand memory of one prepared case (8 GiB).
const MAX_CASE_BYTES: usize = 8 << 30;

/// Command-line options.
#[derive(Parser)]
#[command(about = "uni20 contraction timing server for benches/numpy_einsum.py")]
struct Args {
    /// Thread budget of the backends and of the raw GEMM (default: available cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Backend list: default, faer or blas.
    #[arg(long, default_value = "default")]
    backends: String,
    /// Keep the static backend order (no tuning table).
    #[arg(long)]
    no_tune: bool,
}

/// One prepared case.
struct Case {
    spec: EinsumSpec,
    a: LocalTensor,
    b: LocalTensor,
    ga: Mat<f64>,
    gb: Mat<f64>,
    gc: Mat<f64>,
    ma: LocalTensor,
    mb: LocalTensor,
}

fn parse_dims(s: &str) -> Result<Vec<usize>> {
    s.split(',')
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .with_context(|| format!("bad extent {d:?} in {s:?}"))
        })
        .collect()
}

fn prepare(words: &[&str]) -> Result<(Case, String)> {
    let [spec, da, db] = words else {
        bail!("usage: prepare <spec> <dims A> <dims B>");
    };
    let spec = EinsumSpec::parse(spec)?;
    let (da, db) = (parse_dims(da)?, parse_dims(db)?);
    // Validates the spec, ranks and extents.
    let resolved = spec.resolve(&[&da, &db])?;
    let [la, lb] = resolved.inputs() else {
        bail!("the gemm baseline needs two operands");
    };
    let out = resolved.output();
    let dims: Vec<(char, usize)> = la
        .iter()
        .copied()
        .zip(da.iter().copied())
        .chain(lb.iter().copied().zip(db.iter().copied()))
        .collect();
    let extent = |ls: &[char]| -> Option<usize> {
        ls.iter()
            .map(|l| dims.iter().find(|(x, _)| x == l).map_or(1, |&(_, d)| d))
            .try_fold(1usize, |acc, d| acc.checked_mul(d))
    };
    let only = |ls: &[char], not: &[char], out_too: bool| -> Vec<char> {
        ls.iter()
            .copied()
            .filter(|l| !not.contains(l) && out.contains(l) == out_too)
            .collect()
    };
    let batch: Vec<char> = la
        .iter()
        .copied()
        .filter(|l| lb.contains(l) && out.contains(l))
        .collect();
    let (free_a, free_b) = (only(la, lb, true), only(lb, la, true));
    let contracted: Vec<char> = la
        .iter()
        .copied()
        .filter(|l| lb.contains(l) && !out.contains(l))
        .collect();
    let cls = (batch, free_a, contracted, free_b);
    if !cls.0.is_empty() {
        bail!("batch labels are not supported by the gemm baseline");
    }
    // A, B, the result and the GEMM's A, B and C (f64): refuse cases that cannot fit.
    let too_big = || anyhow!("case needs more than {} GiB of operands", MAX_CASE_BYTES >> 30);
    let (m, k, n) = match (extent(&cls.1), extent(&cls.2), extent(&cls.3)) {
        (Some(m), Some(k), Some(n)) => (m, k, n),
        _ => return Err(too_big()),
    };
    let elements = [
        extent(la),
        extent(lb),
        m.checked_mul(k),
        k.checked_mul(n),
        m.checked_mul(n),
    ];
    // 16 bytes per element: the result and the GEMM output are counted once each.
    elements
        .iter()
        .try_fold(0usize, |acc, &e| acc.checked_add(e?.checked_mul(16)?))
        .filter(|&b| b <= MAX_CASE_BYTES)
        .ok_or_else(too_big)?;
    let a = LocalTensor::from_f64(&da, fill(da.iter().product(), 1))?;
    let b = LocalTensor::from_f64(&db, fill(db.iter().product(), 2))?;
    let ga = Mat::<f64>::from_fn(m, k, |i, j| ((i * 7 + j * 3) % 11) as f64 * 0.1 - 0.5);
    let gb = Mat::<f64>::from_fn(k, n, |i, j| ((i * 5 + j * 13) % 17) as f64 * 0.1 - 0.8);
    let gc = Mat::<f64>::zeros(m, n);
    let ma = LocalTensor::from_f64(&[m, k], fill(m * k, 3))?;
    let mb = LocalTensor::from_f64(&[k, n], fill(k * n, 4))?;
    let case = Case {
        spec,
        a,
        b,
        ga,
        gb,
        gc,
        ma,
        mb,
    };
    Ok((case, format!("m={m} k={k} n={n}")))
}

/// Seconds of one `spec` contraction of `a` and `b`, and the backend that ran it.
fn time_contract(spec: &EinsumSpec, a: &LocalTensor, b: &LocalTensor, backends: &BackendList) -> Result<(f64, String)> {
    let one = C64::new(1.0, 0.0);
    let zero = C64::new(0.0, 0.0);
    let t = Instant::now();
    let (out, attempts) = contract_with_attempts(spec, one, a, b, zero, None, backends)?;
    let s = t.elapsed().as_secs_f64();
    std::hint::black_box(out);
    Ok((s, attempts.last().map_or_else(String::new, |a| a.backend.clone())))
}

fn time_gemm(case: &mut Case, par: Par) -> f64 {
    let t = Instant::now();
    matmul(
        case.gc.as_mut(),
        Accum::Replace,
        case.ga.as_ref(),
        case.gb.as_ref(),
        1.0,
        par,
    );
    let s = t.elapsed().as_secs_f64();
    std::hint::black_box(&case.gc);
    s
}

fn main() -> Result<()> {
    let args = Args::parse();
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |c| c.get()));
    let backends = match args.backends.as_str() {
        "default" => BackendList::default_cpu(threads),
        "faer" => BackendList::new(vec![std::sync::Arc::new(FaerBackend::new(threads))]).with_thread_budget(threads),
        #[cfg(feature = "blas")]
        "blas" => BackendList::new(vec![std::sync::Arc::new(
            uni20::dispatch::backends::BlasBackend::new(threads).copying(true),
        )])
        .with_thread_budget(threads),
        other => bail!(
            "unknown --backends {other:?} (default, faer{})",
            if cfg!(feature = "blas") { ", blas" } else { "" }
        ),
    };
    let backends = if args.no_tune || args.backends != "default" {
        backends
    } else {
        let table = TuneTable::from_env()?.unwrap_or_else(|| TuneTable::new().measuring(true));
        backends.with_tuning(std::sync::Arc::new(table))
    };
    let matmul = EinsumSpec::parse("ij,jk->ik")?;
    let par = if threads <= 1 { Par::Seq } else { Par::rayon(threads) };
    let mut case: Option<Case> = None;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for raw in stdin.lock().split(b'\n') {
        let raw = raw.context("reading stdin")?;
        let reply = match std::str::from_utf8(&raw) {
            Err(_) => "error request is not UTF-8".to_string(),
            Ok(line) => {
                let words: Vec<&str> = line.split_whitespace().collect();
                match words.as_slice() {
                    [] => "error empty request".to_string(),
                    ["quit"] => break,
                    ["prepare", rest @ ..] => {
                        // A failed prepare leaves no case, so later timings cannot be stale.
                        case = None;
                        match prepare(rest).and_then(|(mut c, shape)| {
                            let (_, ran) = time_contract(&c.spec, &c.a, &c.b, &backends)?;
                            time_contract(&matmul, &c.ma, &c.mb, &backends)?;
                            time_gemm(&mut c, par);
                            case = Some(c);
                            Ok(format!("ok {shape} backend={ran}"))
                        }) {
                            Ok(reply) => reply,
                            Err(e) => format!("error {e:#}"),
                        }
                    }
                    ["contract"] => match &case {
                        Some(c) => time_contract(&c.spec, &c.a, &c.b, &backends)
                            .map_or_else(|e| format!("error {e:#}"), |(t, _)| format!("{t:.9}")),
                        None => "error no case prepared".to_string(),
                    },
                    ["matmul"] => match &case {
                        Some(c) => time_contract(&matmul, &c.ma, &c.mb, &backends)
                            .map_or_else(|e| format!("error {e:#}"), |(t, _)| format!("{t:.9}")),
                        None => "error no case prepared".to_string(),
                    },
                    ["gemm"] => match &mut case {
                        Some(c) => format!("{:.9}", time_gemm(c, par)),
                        None => "error no case prepared".to_string(),
                    },
                    _ => format!("error unknown request {line:?}"),
                }
            }
        };
        writeln!(out, "{reply}").map_err(|e| anyhow!("stdout: {e}"))?;
        out.flush()?;
    }
    Ok(())
}
