//! The contraction planner at scale, without a transport: simulated ranks
//! own the blocks of two dense matrices, and `plan_contract` plans
//! `C(i,k) = sum_j A(i,j) B(j,k)` over them. Prints the planning time, the
//! encoded size of the whole plan's descriptor and of every rank's share
//! (what each participant receives when the plan is submitted), and the
//! time the split takes.
//!
//! Run: `cargo bench -p uni20-dist --bench plan_scale` (defaults: 1,024
//! ranks, 1000 x 1000 output blocks, 2 reduction blocks, tiles of 2, A's
//! and B's blocks owned round-robin), or with other sizes:
//! `cargo bench -p uni20-dist --bench plan_scale -- RANKS OUT_BLOCKS_PER_SIDE REDUCE_BLOCKS REPEATS`.

use std::time::Instant;

use uni20_dispatch::DType;
use uni20_dist::plan::plan_contract;
use uni20_dist::{BlockRef, Blocking, Manifest};
use uni20_persist::ObjectId;

/// Tile extent of every label.
const TILE: usize = 2;

/// A dense `rows x cols` blocks matrix of `TILE` tiles, block `b`
/// (row-major) owned by `workers[b % workers.len()]`, ids `(origin, b)`.
fn matrix(rows: usize, cols: usize, workers: &[usize], origin: u32) -> Manifest {
    let shape = [rows * TILE, cols * TILE];
    let blocking = Blocking::from_extents(&shape, vec![vec![TILE; rows], vec![TILE; cols]]).expect("a valid tiling");
    let blocks = (0..rows * cols)
        .map(|b| BlockRef {
            owner: workers[b % workers.len()],
            id: ObjectId::new(origin, b as u64),
        })
        .collect();
    Manifest {
        shape: shape.to_vec(),
        dtype: DType::F64,
        blocking,
        symmetric: None,
        blocks,
    }
}

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let ranks = arg(0, 1024);
    let side = arg(1, 1000);
    let reduce = arg(2, 2);
    let repeats = arg(3, 3).max(1);
    let workers: Vec<usize> = (1..=ranks).collect();
    let a = matrix(side, reduce, &workers, 1);
    let b = matrix(reduce, side, &workers, 2);
    println!(
        "plan_scale: C(i,k) = A(i,j) B(j,k), {ranks} simulated ranks, {side} x {side} = {} output blocks, \
         {reduce} reduction blocks, tiles of {TILE}, blocks owned round-robin",
        side * side
    );
    let mut times = Vec::new();
    let mut plan = None;
    for _ in 0..repeats {
        drop(plan.take());
        let t = Instant::now();
        let p = plan_contract(&workers, "ij,jk->ik", &[&a, &b], &Default::default()).expect("a valid plan");
        times.push(t.elapsed().as_secs_f64());
        plan = Some(p);
    }
    let plan = plan.expect("planned at least once");
    times.sort_by(f64::total_cmp);
    let s = plan.summary();
    println!(
        "planning: median {:.3} s, min {:.3} s, max {:.3} s of {repeats} (work items {}, block products {}, transfers {}, participants {})",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1],
        s.work_items,
        s.block_products,
        s.transfers,
        plan.participants.len()
    );
    let t = Instant::now();
    let whole = plan.descriptor_bytes();
    let encode_s = t.elapsed().as_secs_f64();
    // `share_bytes` splits a copy of the plan: the copy's time, apart.
    let t = Instant::now();
    let copy = plan.clone();
    let clone_s = t.elapsed().as_secs_f64();
    drop(copy);
    let t = Instant::now();
    let mut shares = plan.share_bytes();
    let split_s = (t.elapsed().as_secs_f64() - clone_s).max(0.0);
    shares.sort_by_key(|&(r, n)| (n, r));
    let (largest_rank, largest) = shares.last().copied().unwrap_or((0, 0));
    let median = shares.get(shares.len() / 2).map_or(0, |s| s.1);
    let total: usize = shares.iter().map(|s| s.1).sum();
    println!("whole descriptor: {whole} bytes (encoded in {encode_s:.3} s)");
    println!(
        "per-rank descriptors: largest {largest} bytes (rank {largest_rank}), median {median}, smallest {}, sum {total} \
         (split and encoded in {split_s:.3} s, besides {clone_s:.3} s copying the plan)",
        shares.first().map_or(0, |s| s.1)
    );
    println!(
        "largest per-rank / whole: {:.5} ({:.2} %); sum of shares / whole: {:.3}",
        largest as f64 / whole as f64,
        100.0 * largest as f64 / whole as f64,
        total as f64 / whole as f64
    );
}
