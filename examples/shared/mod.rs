//! Pieces shared by the examples and the root benches: the Heisenberg-chain MPO and a
//! deterministic fill for timing operands.
#![allow(dead_code)]

use uni20::prelude::*;

/// Block size used to cut every distributed tensor (the bond dimension 5
/// splits into blocks 4 + 1, so work items land on different ranks).
pub const BLOCK: usize = 4;
/// MPO bond dimension.
pub const D: usize = 5;

/// The MPO tensor W[a, b, s, s'] (left bond, right bond, out spin, in spin)
/// in lower-triangular form: left boundary row 4, right boundary column 0.
pub fn mpo_tensor() -> anyhow::Result<LocalTensor> {
    let id = [[1.0, 0.0], [0.0, 1.0]];
    let sp = [[0.0, 1.0], [0.0, 0.0]]; // S+
    let sm = [[0.0, 0.0], [1.0, 0.0]]; // S-
    let sz = [[0.5, 0.0], [0.0, -0.5]];
    let mut w = vec![0.0; D * D * 4];
    let mut set = |a: usize, b: usize, op: [[f64; 2]; 2], scale: f64| {
        for s in 0..2 {
            for t in 0..2 {
                w[((a * D + b) * 2 + s) * 2 + t] += scale * op[s][t];
            }
        }
    };
    set(0, 0, id, 1.0);
    set(1, 0, sp, 1.0);
    set(2, 0, sm, 1.0);
    set(3, 0, sz, 1.0);
    set(4, 1, sm, 0.5);
    set(4, 2, sp, 0.5);
    set(4, 3, sz, 1.0);
    set(4, 4, id, 1.0);
    Ok(LocalTensor::from_f64(&[D, D, 2, 2], w)?)
}

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
