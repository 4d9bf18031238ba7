//! The guide's toolkit program ("The toolkit"): the spin-1 Heisenberg chain
//! from `uni20::tn::models`, its ground state by DMRG, the magnetization
//! profile and entanglement entropy, then the first excited state (the edge
//! triplet) by projecting out the ground state.
//!
//! ```text
//! cargo run --release --example guide_toolkit
//! ```
//!
//! `cargo test` runs it (`test = true`, `harness = false` in Cargo.toml).

// ANCHOR: guide
use uni20::tn::measure::{entanglement_entropy, local_expectations, schmidt_spectra, site_operator};
use uni20::tn::models::heisenberg;
use uni20::tn::{Conserve, Dmrg, DmrgOptions, MpoOptions, Mps};

fn main() -> anyhow::Result<()> {
    let l = 8;
    let model = heisenberg(l, 2, 1.0, Conserve::Sz)?; // 2S = 2: spin 1
    let mpo = model.hamiltonian.to_mpo(&model.sites, &MpoOptions::default())?;
    assert_eq!(mpo.max_bond(), 5);
    let (e0, e1, sz, entropy) = uni20::universe().ranks(2).run(|ctl| -> anyhow::Result<_> {
        let opts = DmrgOptions {
            chi_max: 32,
            ..DmrgOptions::default()
        };
        let h = mpo.to_mpo(ctl, opts.block)?;
        let mut ground = Dmrg::new(ctl, h.clone(), Mps::random(ctl, l, 3, 4, opts.block, 1)?, opts)?;
        for _ in 0..4 {
            ground.sweep(ctl, &mut |_| {})?;
        }
        let psi = ground.mps().clone();
        let ops = model
            .sites
            .iter()
            .map(|s| site_operator(ctl, s, "Sz", 8))
            .collect::<Result<Vec<_>, _>>()?;
        let sz = local_expectations(ctl, &psi, &ops)?;
        let entropy = entanglement_entropy(&schmidt_spectra(ctl, &psi, 8)?);
        let start = Mps::random(ctl, l, 3, 4, opts.block, 2)?;
        let mut excited = Dmrg::new(ctl, h, start, opts)?.orthogonal_to(ctl, vec![psi], 10.0)?;
        for _ in 0..4 {
            excited.sweep(ctl, &mut |_| {})?;
        }
        Ok((ground.energy().unwrap(), excited.energy().unwrap(), sz, entropy))
    })??;
    println!("E0 = {e0:.10}, E1 = {e1:.10}, <Sz_i> = {sz:.4?}, S = {entropy:.4?}");
    assert!(e1 > e0 && entropy.len() == l - 1);
    Ok(())
}
// ANCHOR_END: guide
