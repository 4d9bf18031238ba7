//! Symmetric (U(1) block-sparse) contraction, two parts, one run:
//!
//! 1. **Per-call overhead of small sectors**: one work item of `P = 64` block pairs
//!    `"ij,jk->ik"` with square `s x s` blocks (s = 1 .. 128), summed into one output block,
//!    (a) as the dense contract command did per term, one `uni20_dispatch::einsum` per pair
//!    accumulating with beta = 1 (a new output tensor per pair), against (b) one
//!    [`PairContraction`] for the item (buffers reused across pairs), interleaved; printed as
//!    ns per pair and GFLOP/s (2 s^3 flops per pair).
//! 2. **DMRG-shaped contraction**: the left environment L(a, w, b) with the two-site tensor
//!    theta(b, s, t, c), `"awb,bstc->awstc"`, d = 2, MPO bond w = 5, chi = 200 and 500, one
//!    in-process rank: uni20's block-sparse `contract` of the symmetric tensors, its own
//!    dense `contract` of their dense embeddings (one block per tensor), and TeNPy's
//!    `npc.tensordot` on the same legs (`benches/sym_contract_tenpy.py`, a long-lived peer
//!    process fed one request per timed call; skipped with a message without TeNPy), all
//!    three interleaved round by round; medians and every ratio printed.
//!
//! Sectors (charges 2 Sz): bond leg charges -12, -10, ..., 12 with dimensions proportional
//! to `exp(-(Sz)^2 / (2 * 1.6^2))` (Sz = q / 2), rounded to sum to chi (largest remainders),
//! empty sectors dropped: the Gaussian-like Sz distribution of the Schmidt states at the
//! middle bond of a converged Heisenberg chain (width ~1.6 in Sz for chains of ~100 sites).
//! MPO bond (Heisenberg W: 1, S+, S-, Sz, 1): charges {-2: 1, 0: 3, 2: 1}; physical leg
//! {-1: 1, 1: 1}. L: a In, w Out, b Out; theta: b In, s In, t In, c Out; flux 0.
//!
//! Threads: `UNI20_THREADS_PER_RANK` (default 1) for uni20; the TeNPy peer gets the same
//! count through OMP/OPENBLAS/MKL_NUM_THREADS and `threadpoolctl.threadpool_limits`, and
//! has OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed from its environment.
//!
//! Run: `UNI20_THREADS_PER_RANK=1 RAYON_NUM_THREADS=1 cargo bench --bench sym_contract`
//! (`cargo test --benches` runs it once, small, as a smoke test).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../examples/shared/mod.rs"]
mod shared;
use shared::{bench_mode, fill, interleaved_medians};
use uni20::dispatch::{
    einsum as local_einsum, BackendList, ContractOptions as LocalOptions, LocalTensor, PairContraction, ResolvedSpec,
    C64,
};
use uni20::dist::sym_random;
use uni20::dist::symmetry::{Direction, Leg, Sector, SymmetricLayout, Symmetry};
use uni20::prelude::*;

fn threads() -> usize {
    std::env::var("UNI20_THREADS_PER_RANK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Part 1: per-pair overhead.
fn small_sectors(threads: usize, full: bool) {
    let spec = ResolvedSpec::parse("ij,jk->ik").expect("spec");
    let kernel = PairContraction::new(&spec, [false; 2]).expect("kernel");
    let backends = BackendList::default_cpu(threads);
    let one = C64::new(1.0, 0.0);
    let pairs_per_item = 64;
    let sizes: &[usize] = if full { &[1, 2, 4, 8, 16, 32, 64, 128] } else { &[2, 16] };
    println!("part 1: one item of {pairs_per_item} pairs ij,jk->ik of s x s blocks (f64, {threads} thread(s))");
    for &s in sizes {
        let blocks: Vec<(LocalTensor, LocalTensor)> = (0..pairs_per_item as u64)
            .map(|p| {
                (
                    LocalTensor::from_f64(&[s, s], fill(s * s, 2 * p + 1)).expect("a"),
                    LocalTensor::from_f64(&[s, s], fill(s * s, 2 * p + 2)).expect("b"),
                )
            })
            .collect();
        let refs: Vec<(&LocalTensor, &LocalTensor)> = blocks.iter().map(|(a, b)| (a, b)).collect();
        let mut per_term = || {
            let mut acc: Option<LocalTensor> = None;
            for (a, b) in &blocks {
                let opts = LocalOptions {
                    alpha: one,
                    beta: one,
                    c: acc.as_ref(),
                    conj: [false; 2],
                    strict_blocking: true,
                };
                acc = Some(local_einsum(&spec, &[a, b], &opts, &backends).expect("einsum").0);
            }
            std::hint::black_box(acc);
        };
        let mut pairs = || {
            let r = kernel
                .run(one, &refs, C64::new(0.0, 0.0), None, DType::F64, &[s, s], threads)
                .expect("pairs");
            std::hint::black_box(r);
        };
        let n = if full { 41 } else { 3 };
        let (t_term, t_pairs, count) = interleaved_medians(&mut per_term, &mut pairs, n, Duration::from_secs(3));
        let per = |t: Duration| t.as_secs_f64() * 1e9 / pairs_per_item as f64;
        let gflops = |t: Duration| 2.0 * (s * s * s * pairs_per_item) as f64 / t.as_secs_f64() / 1e9;
        println!(
            "  s = {s:4}: per-term einsum {:9.0} ns/pair ({:6.2} GFLOP/s), pair kernel {:9.0} ns/pair ({:6.2} GFLOP/s), ratio {:.2} (median of {count})",
            per(t_term),
            gflops(t_term),
            per(t_pairs),
            gflops(t_pairs),
            t_term.as_secs_f64() / t_pairs.as_secs_f64()
        );
    }
}

/// Gaussian-like 2Sz sectors summing to `chi`.
fn bond_sectors(chi: usize) -> Vec<(i64, usize)> {
    let qs: Vec<i64> = (-6..=6).map(|m| 2 * m).collect();
    let w: Vec<f64> = qs
        .iter()
        .map(|&q| {
            let sz = q as f64 / 2.0;
            (-(sz * sz) / (2.0 * 1.6 * 1.6)).exp()
        })
        .collect();
    let total: f64 = w.iter().sum();
    let exact: Vec<f64> = w.iter().map(|x| x / total * chi as f64).collect();
    let mut dims: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let mut order: Vec<usize> = (0..qs.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    let short = chi - dims.iter().sum::<usize>();
    for &i in order.iter().take(short) {
        dims[i] += 1;
    }
    qs.into_iter().zip(dims).filter(|&(_, d)| d > 0).collect()
}

fn leg(dir: Direction, sectors: &[(i64, usize)]) -> Leg {
    let g = Symmetry::u1();
    let s = sectors
        .iter()
        .map(|&(q, dim)| Sector {
            charge: g.charge(&[q]).expect("charge"),
            dim,
        })
        .collect();
    Leg::new(g, dir, s).expect("leg")
}

/// The TeNPy peer process, or why it is not available.
struct Peer {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Peer {
    fn start(threads: usize) -> Result<Peer, String> {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/sym_contract_tenpy.py");
        let t = threads.to_string();
        let mut child = Command::new("python3")
            .arg(script)
            .env("OMP_NUM_THREADS", &t)
            .env("OPENBLAS_NUM_THREADS", &t)
            .env("MKL_NUM_THREADS", &t)
            .env("TENPY_THREADS", &t)
            .env_remove("OPENBLAS_CORETYPE")
            .env_remove("OPENBLAS_L2_SIZE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("python3 not started: {e}"))?;
        let input = child.stdin.take().ok_or("no stdin")?;
        let mut output = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut first = String::new();
        output.read_line(&mut first).map_err(|e| e.to_string())?;
        if let Some(info) = first.strip_prefix("ready ") {
            println!("TeNPy peer threadpoolctl info: {}", info.trim());
            Ok(Peer { child, input, output })
        } else {
            let _ = child.wait();
            Err(first.trim().trim_start_matches("skip ").to_string())
        }
    }

    fn time(&mut self, request: &str) -> Duration {
        writeln!(self.input, "{request}").expect("peer request");
        let mut line = String::new();
        self.output.read_line(&mut line).expect("peer reply");
        Duration::from_secs_f64(line.trim().parse().expect("peer seconds"))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn json(sectors: &[(i64, usize)]) -> String {
    let parts: Vec<String> = sectors.iter().map(|(q, d)| format!("[{q}, {d}]")).collect();
    format!("[{}]", parts.join(", "))
}

/// Part 2: the DMRG-shaped contraction.
fn dmrg_shaped(threads: usize, full: bool) {
    let mpo = [(-2, 1), (0, 3), (2, 1)];
    let phys = [(-1, 1), (1, 1)];
    let mut peer = match Peer::start(threads) {
        Ok(p) => Some(p),
        Err(why) => {
            println!("TeNPy comparison skipped: {why}");
            None
        }
    };
    let chis: &[usize] = if full { &[200, 500] } else { &[40] };
    let rounds = if full { 11 } else { 2 };
    println!("part 2: L(a,w,b) x theta(b,s,t,c) -> (a,w,s,t,c), d = 2, w = 5, one rank, {threads} thread(s)");
    for &chi in chis {
        let bond = bond_sectors(chi);
        let g = Symmetry::u1();
        let ll = Arc::new(
            SymmetricLayout::new(
                g.clone(),
                vec![
                    leg(Direction::In, &bond),
                    leg(Direction::Out, &mpo),
                    leg(Direction::Out, &bond),
                ],
                g.identity(),
            )
            .expect("L layout"),
        );
        let lt = Arc::new(
            SymmetricLayout::new(
                g.clone(),
                vec![
                    leg(Direction::In, &bond),
                    leg(Direction::In, &phys),
                    leg(Direction::In, &phys),
                    leg(Direction::Out, &bond),
                ],
                g.identity(),
            )
            .expect("theta layout"),
        );
        let request = format!(
            "{{\"bond\": {}, \"mpo\": {}, \"phys\": {}}}",
            json(&bond),
            json(&mpo),
            json(&phys)
        );
        println!("  chi = {chi}: bond sectors (2Sz: dim) {bond:?}");
        uni20::universe()
            .ranks(1)
            .run(|ctl| {
                let l = sym_random(ctl, ll.clone(), DType::F64, 1).expect("L");
                let th = sym_random(ctl, lt.clone(), DType::F64, 2).expect("theta");
                let ld = l.to_dense(ctl).expect("dense L");
                let td = th.to_dense(ctl).expect("dense theta");
                // One block per dense tensor (chi is the largest extent).
                let dl = DistTensor::from_local(ctl, &ld, chi).expect("dense L");
                let dt = DistTensor::from_local(ctl, &td, chi).expect("dense theta");
                let spec = "awb,bstc->awstc";
                let run_sym = || {
                    let t = Instant::now();
                    let r = contract(ctl, spec, &l, &th).expect("sym");
                    r.wait(ctl).expect("sym wait");
                    let e = t.elapsed();
                    (e, r)
                };
                let run_dense = || {
                    let t = Instant::now();
                    let r = contract(ctl, spec, &dl, &dt).expect("dense");
                    r.wait(ctl).expect("dense wait");
                    (t.elapsed(), r)
                };
                // Warm-up, and the check that both give the same tensor.
                let (_, rs) = run_sym();
                let (_, rd) = run_dense();
                let (a, b) = (rs.to_dense(ctl).expect("a"), rd.to_local(ctl).expect("b"));
                let (a, b) = (a.to_c64_vec(), b.to_c64_vec());
                let scale = b.iter().fold(1.0f64, |m, x| m.max(x.norm()));
                let err = a.iter().zip(&b).fold(0.0f64, |m, (x, y)| m.max((x - y).norm()));
                assert!(err <= 1e-10 * scale, "block-sparse and dense differ by {err:e}");
                let summary = rs.plan_summary().expect("summary").clone();
                let stored = lt.stored_elements() as f64 / lt.dense_shape().iter().product::<usize>() as f64;
                println!("    {summary}; theta stores {:.1} % of its embedding", 100.0 * stored);
                drop((rs, rd));
                if let Some(p) = peer.as_mut() {
                    p.time(&request);
                }
                let (mut ts, mut td_, mut tp) = (Vec::new(), Vec::new(), Vec::new());
                for _ in 0..rounds {
                    ts.push(run_sym().0);
                    td_.push(run_dense().0);
                    if let Some(p) = peer.as_mut() {
                        tp.push(p.time(&request));
                    }
                }
                let (ms, md) = (median(&mut ts), median(&mut td_));
                let f = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
                println!(
                    "    uni20 block-sparse {}, uni20 dense {}: dense / block-sparse = {:.1} (median of {rounds}, interleaved)",
                    f(ms),
                    f(md),
                    md.as_secs_f64() / ms.as_secs_f64()
                );
                if !tp.is_empty() {
                    let mp = median(&mut tp);
                    println!(
                        "    TeNPy npc.tensordot {}: TeNPy / uni20 block-sparse = {:.2}, uni20 dense / TeNPy = {:.1}",
                        f(mp),
                        mp.as_secs_f64() / ms.as_secs_f64(),
                        md.as_secs_f64() / mp.as_secs_f64()
                    );
                }
            })
            .expect("universe");
    }
}

fn main() {
    let full = bench_mode();
    let t = threads();
    small_sectors(t, full);
    dmrg_shaped(t, full);
}
