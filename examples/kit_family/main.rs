//! A new operation family written with the family kit: `abs` (element-wise
//! modulus, one output block per input block) is one folder of three files
//! (`abs/mod.rs`, `abs/plan.rs`, `abs/command.rs`), one `command!` line and
//! one per-item function. The program checks `abs` of random tensors of
//! every dtype, tiling and placement against the modulus of the gathered
//! input computed locally.
//!
//! ```text
//! cargo run --example kit_family                 # in-process universe
//! cargo xtask mpirun -n 3 --example kit_family   # under MPI
//! ```

#[path = "abs/mod.rs"]
pub mod abs;

use std::process::ExitCode;

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

/// Every dtype, three shapes and tilings; returns the elements checked.
pub fn run(ctl: &Controller<'_>) -> anyhow::Result<usize> {
    let mut n = 0;
    for (k, dtype) in [DType::F64, DType::F32, DType::C64, DType::C32].into_iter().enumerate() {
        n += check(ctl, &[7, 5], dtype, 3, 10 + k as u64)?;
        n += check(ctl, &[4, 3, 2], dtype, 2, 20 + k as u64)?;
        n += check(ctl, &[6], dtype, 6, 30 + k as u64)?;
    }
    println!("kit_family: abs checked on {n} elements over {} ranks: ok", ctl.size());
    Ok(n)
}

#[cfg_attr(test, allow(dead_code))]
fn main() -> ExitCode {
    uni20::launch(|ctl| run(ctl).map(drop))
}
