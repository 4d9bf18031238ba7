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
