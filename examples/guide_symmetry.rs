//! The guide's symmetric-tensor program ("Symmetric tensors"): the U(1)
//! block structure of one MPS site tensor, checked against brute force, then
//! a random symmetric distributed tensor with that layout: only its allowed
//! blocks are stored, its dense embedding is zero outside them, its norm is
//! the embedding's, and `from_dense` takes the embedding back.
//!
//! The tensor has a left bond (`In`), a spin-1/2 physical leg (`In`,
//! charges 2 Sz = -1, +1) and a right bond (`Out`), and flux 0: a block
//! exists only where `q_right - q_left - q_phys = 0`.
//!
//! ```text
//! cargo run --example guide_symmetry
//! ```
//!
//! `cargo test` runs it (`test = true`, `harness = false` in Cargo.toml).

// ANCHOR: guide
use uni20::dist::sym_random;
use uni20::dist::symmetry::{Direction, Leg, SymmetricLayout, Symmetry};
use uni20::prelude::*;

fn main() -> anyhow::Result<()> {
    let u1 = Symmetry::u1();
    // U(1) legs from (charge, dimension) sectors in increasing charge order, tiles of at most
    // the last argument's size.
    let left = Leg::u1(Direction::In, &[(-1, 2), (1, 2)], 4)?;
    let phys = Leg::u1(Direction::In, &[(-1, 1), (1, 1)], 1)?;
    // The right bond's largest sector (charge 0, 6 states) is cut into tiles of 4 and 2,
    // so that it can spread over two ranks.
    let right = Leg::u1(Direction::Out, &[(-2, 2), (0, 6), (2, 2)], 4)?;
    let layout = SymmetricLayout::new(
        u1.clone(),
        vec![left.clone(), phys.clone(), right.clone()],
        u1.identity(),
    )?;

    let dense: usize = layout.dense_shape().iter().product();
    println!(
        "dense shape {:?}: {} elements; {} allowed blocks store {} of them",
        layout.dense_shape(),
        dense,
        layout.blocks().len(),
        layout.stored_elements()
    );
    for (b, block) in layout.blocks().iter().enumerate() {
        println!(
            "  block {b}: tiles {:?}, extents {:?}",
            block.tiles,
            layout.block_extents(b)
        );
    }

    // Brute force: every dense element (i, s, j) whose charges satisfy the rule.
    let charge_of = |leg: &Leg, index: usize| -> i64 {
        let s = (0..leg.sectors().len())
            .rev()
            .find(|&s| leg.sector_offset(s) <= index)
            .expect("index inside the leg");
        leg.sectors()[s].charge.components()[0]
    };
    let mut allowed = 0;
    for i in 0..left.dim() {
        for s in 0..phys.dim() {
            for j in 0..right.dim() {
                if charge_of(&right, j) - charge_of(&left, i) - charge_of(&phys, s) == 0 {
                    allowed += 1;
                }
            }
        }
    }
    anyhow::ensure!(
        allowed == layout.stored_elements(),
        "brute force allows {allowed} elements, the layout stores {}",
        layout.stored_elements()
    );

    // A distributed tensor with this layout: each allowed block lives on one worker.
    let shape = layout.dense_shape();
    uni20::universe().ranks(3).run(|ctl| -> anyhow::Result<()> {
        let t = sym_random(ctl, layout.clone(), DType::F64, 7)?;
        let stored = t.manifest(ctl)?.blocks.len();
        anyhow::ensure!(stored == layout.blocks().len(), "{stored} blocks stored");
        let dense = t.to_dense(ctl)?; // the embedding, gathered onto the root
        let values: Vec<f64> = dense.to_c64_vec().iter().map(|z| z.re).collect();
        let mut sum_sq = 0.0;
        for i in 0..shape[0] {
            for s in 0..shape[1] {
                for j in 0..shape[2] {
                    let x = values[(i * shape[1] + s) * shape[2] + j];
                    let rule = charge_of(&right, j) - charge_of(&left, i) - charge_of(&phys, s) == 0;
                    anyhow::ensure!(
                        rule || x == 0.0,
                        "a nonzero outside the allowed blocks at ({i}, {s}, {j})"
                    );
                    sum_sq += x * x;
                }
            }
        }
        let n = norm(ctl, &t)?; // combined on the workers over the stored blocks
        anyhow::ensure!(
            (n - sum_sq.sqrt()).abs() <= 1e-12 * n,
            "norm {n}, embedding {}",
            sum_sq.sqrt()
        );
        let back = DistTensor::from_dense(ctl, &dense, layout.clone(), 0.0)?;
        anyhow::ensure!(back.to_dense(ctl)? == dense, "from_dense does not round-trip");
        println!(
            "random symmetric tensor: {stored} blocks on {} ranks, norm {n:.6}",
            ctl.size()
        );
        Ok(())
    })??;
    Ok(())
}
// ANCHOR_END: guide
