//! The guide's symmetric-layout program ("Symmetric tensors"): the U(1)
//! block structure of one MPS site tensor, checked against brute force.
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
use uni20::dist::symmetry::{Direction, Leg, Sector, SymmetricLayout, Symmetry};

fn main() -> anyhow::Result<()> {
    let u1 = Symmetry::u1();
    // Sectors as (charge, dimension), in increasing charge order.
    let leg = |dir, sectors: &[(i64, usize)], tile| -> anyhow::Result<Leg> {
        let sectors = sectors
            .iter()
            .map(|&(q, dim)| {
                Ok(Sector {
                    charge: u1.charge(&[q])?,
                    dim,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Leg::tiled(u1.clone(), dir, sectors, tile)?)
    };
    let left = leg(Direction::In, &[(-1, 2), (1, 2)], 4)?;
    let phys = leg(Direction::In, &[(-1, 1), (1, 1)], 1)?;
    // The right bond's largest sector (charge 0, 6 states) is cut into tiles of 4 and 2,
    // so that it can spread over two ranks.
    let right = leg(Direction::Out, &[(-2, 2), (0, 6), (2, 2)], 4)?;
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
    Ok(())
}
// ANCHOR_END: guide
