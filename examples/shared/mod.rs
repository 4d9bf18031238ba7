//! Pieces shared by the examples and the root benches: the Heisenberg-chain MPO and a
//! deterministic fill for timing operands.
#![allow(dead_code)]

use uni20::prelude::*;

/// Block size used to cut every distributed tensor (the bond dimension 5
/// splits into blocks 4 + 1, so work items land on different ranks).
pub const BLOCK: usize = 4;
/// MPO bond dimension.
pub const D: usize = uni20::tn::HEISENBERG_BOND;

/// The MPO tensor W[a, b, s, s'] (left bond, right bond, out spin, in spin)
/// in lower-triangular form: left boundary row 4, right boundary column 0
/// (`uni20::tn::heisenberg_tensor`, documented there).
pub fn mpo_tensor() -> anyhow::Result<LocalTensor> {
    Ok(uni20::tn::heisenberg_tensor()?)
}

/// An orthogonal `n x n` matrix (row-major), so its powers neither blow up
/// nor vanish: 2 x 2 rotations (cos 0.6, sin 0.8) on pairs of rows, then a
/// cyclic shift. The step of `examples/chain.rs` and the lifetime tests.
pub fn orthogonal(n: usize) -> Vec<f64> {
    let (c, s) = (0.6, 0.8);
    let mut m = vec![0.0; n * n];
    for i in 0..n {
        let j = (i + 1) % n;
        if i % 2 == 0 && i + 1 < n {
            m[i * n + j] = c;
            m[(i + 1) * n + j] = -s;
        } else if i % 2 == 1 {
            m[(i - 1) * n + j] = s;
            m[i * n + j] = c;
        } else {
            m[i * n + j] = 1.0;
        }
    }
    m
}

/// A unit vector of length `n` with a 1 at `i`.
pub fn unit(n: usize, i: usize) -> anyhow::Result<LocalTensor> {
    let mut v = vec![0.0; n];
    v[i] = 1.0;
    Ok(LocalTensor::from_f64(&[n], v)?)
}

/// `len` deterministic, non-trivial f64 values in [-1, 1) (xorshift64 seeded by `seed`), for
/// benchmark operands whose values do not matter but must not be all equal or zero.
pub fn fill(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// Thread budget of the benches: the machine's available cores.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |c| c.get())
}

/// True when a bench binary runs as a benchmark (`cargo bench`), not as a smoke test.
pub fn bench_mode() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// Runs `a` and `b` alternately (after one warm-up call each) until each has run `n` times or
/// `budget` has passed (at least 3 times each); returns the median time of each and the count.
pub fn interleaved_medians(
    a: &mut dyn FnMut(),
    b: &mut dyn FnMut(),
    n: usize,
    budget: std::time::Duration,
) -> (std::time::Duration, std::time::Duration, usize) {
    use std::time::{Duration, Instant};
    a();
    b();
    let (mut ta, mut tb) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let start = Instant::now();
    while ta.len() < n && (ta.len() < 3 || start.elapsed() < budget) {
        let t = Instant::now();
        a();
        ta.push(t.elapsed());
        let t = Instant::now();
        b();
        tb.push(t.elapsed());
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let count = ta.len();
    (median(&mut ta), median(&mut tb), count)
}
