//! A new operation family written with the family kit: `abs` (element-wise
//! modulus, one output block per input block) is one folder of three files
//! (`abs/mod.rs`, `abs/plan.rs`, `abs/command.rs`), one `command!` line and
//! one per-item function. The program checks `abs` of random tensors of
//! every dtype, tiling and placement against the modulus of the gathered
//! input computed locally, and of symmetric (block-sparse) tensors against
//! the modulus of their dense embedding: the family names no layout, yet
//! works on both, because it walks the block map and keeps the input's
//! description (`TensorMeta`, which carries the symmetric layout).
//!
//! ```text
//! cargo run --example kit_family                 # in-process universe
//! cargo xtask mpirun -n 3 --example kit_family   # under MPI
//! ```

#[path = "abs/mod.rs"]
pub mod abs;

use std::process::ExitCode;

use uni20::dist::sym_random;
use uni20::dist::symmetry::{Direction, Leg, SymmetricLayout, Symmetry};
use uni20::prelude::*;

/// Checks `abs` of a random tensor of `shape`, `dtype` and `block` against
/// the local modulus of the gathered input (exactly: both compute
/// `|z|` in `f64` and round once to the output dtype); returns the elements
/// checked.
pub fn check(ctl: &Controller<'_>, shape: &[usize], dtype: DType, block: usize, seed: u64) -> anyhow::Result<usize> {
    let t = random(ctl, shape, dtype, block, seed)?;
    let a = abs::abs(ctl, &t)?;
    let single = matches!(dtype, DType::F32 | DType::C32);
    let want: Vec<f64> = t
        .to_local(ctl)?
        .to_c64_vec()
        .iter()
        .map(|z| if single { f64::from(z.norm() as f32) } else { z.norm() })
        .collect();
    let got = a.to_local(ctl)?;
    anyhow::ensure!(got.shape() == shape, "shape {:?}, want {shape:?}", got.shape());
    anyhow::ensure!(got.dtype() == abs::abs_dtype(dtype), "dtype {}", got.dtype().name());
    anyhow::ensure!(a.blocking() == t.blocking(), "the tiling changed");
    for (i, (g, w)) in got.to_c64_vec().iter().zip(&want).enumerate() {
        anyhow::ensure!(g.im == 0.0 && g.re == *w, "element {i}: {g} vs {w}");
    }
    let s = a.plan_summary().cloned().unwrap_or_default();
    anyhow::ensure!(s.operation == "abs" && s.work_items == t.blocking().num_blocks(), "{s}");
    anyhow::ensure!(s.bytes_through_root == 0, "{s}");
    Ok(want.len())
}

/// A U(1) leg with sectors `(charge, dim)` in tiles of at most `tile`.
fn u1_leg(dir: Direction, sectors: &[(i64, usize)], tile: usize) -> anyhow::Result<Leg> {
    Ok(Leg::u1(dir, sectors, tile)?)
}

/// Checks `abs` of a random symmetric tensor (an MPS-like U(1) tensor of
/// flux `flux`, 7 x 2 x 10) against the modulus of its dense embedding:
/// same layout, one work item per allowed block (fewer than the blocks of
/// the embedding's tiling), zeros where the charge rule forbids; returns
/// the elements checked.
pub fn check_symmetric(ctl: &Controller<'_>, dtype: DType, flux: i64, seed: u64) -> anyhow::Result<usize> {
    let g = Symmetry::u1();
    let legs = vec![
        u1_leg(Direction::In, &[(-1, 2), (0, 3), (1, 2)], 2)?,
        u1_leg(Direction::In, &[(-1, 1), (1, 1)], 1)?,
        u1_leg(Direction::Out, &[(-2, 1), (-1, 2), (0, 4), (1, 2), (2, 1)], 3)?,
    ];
    let layout = SymmetricLayout::new(g.clone(), legs, g.charge(&[flux])?)?;
    let t = sym_random(ctl, layout.clone(), dtype, seed)?;
    let a = abs::abs(ctl, &t)?;
    anyhow::ensure!(a.layout() == Some(&layout), "the layout changed");
    let single = matches!(dtype, DType::F32 | DType::C32);
    let want: Vec<f64> = t
        .to_dense(ctl)?
        .to_c64_vec()
        .iter()
        .map(|z| if single { f64::from(z.norm() as f32) } else { z.norm() })
        .collect();
    let got = a.to_dense(ctl)?;
    anyhow::ensure!(got.dtype() == abs::abs_dtype(dtype), "dtype {}", got.dtype().name());
    for (i, (g, w)) in got.to_c64_vec().iter().zip(&want).enumerate() {
        anyhow::ensure!(g.im == 0.0 && g.re == *w, "symmetric element {i}: {g} vs {w}");
    }
    let s = a.plan_summary().cloned().unwrap_or_default();
    let allowed = layout.blocks().len();
    anyhow::ensure!(
        allowed < t.blocking().num_blocks(),
        "every block allowed: no test of sparsity"
    );
    anyhow::ensure!(s.work_items == allowed && s.bytes_through_root == 0, "{s}");
    Ok(want.len())
}

/// Every dtype, three shapes and tilings, and two symmetric tensors;
/// returns the elements checked.
pub fn run(ctl: &Controller<'_>) -> anyhow::Result<usize> {
    let mut n = 0;
    for (k, dtype) in [DType::F64, DType::F32, DType::C64, DType::C32].into_iter().enumerate() {
        n += check(ctl, &[7, 5], dtype, 3, 10 + k as u64)?;
        n += check(ctl, &[4, 3, 2], dtype, 2, 20 + k as u64)?;
        n += check(ctl, &[6], dtype, 6, 30 + k as u64)?;
        n += check_symmetric(ctl, dtype, k as i64 % 2, 40 + k as u64)?;
    }
    println!(
        "kit_family: abs checked on {n} elements (dense and symmetric) over {} ranks: ok",
        ctl.size()
    );
    Ok(n)
}

#[cfg_attr(test, allow(dead_code))]
fn main() -> ExitCode {
    uni20::launch(|ctl| run(ctl).map(drop))
}
