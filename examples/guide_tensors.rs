//! The guide's first library program ("Distributed tensors and einsum"):
//! scatter two root-local matrices, contract them, combine with
//! `contract_with`, write and read a `.npy` file, gather the result.
//!
//! ```text
//! cargo run --example guide_tensors
//! ```
//!
//! `cargo test` runs it (`test = true`, `harness = false` in Cargo.toml):
//! it exits non-zero when a value differs from the hand-computed product.

// ANCHOR: guide
use uni20::prelude::*;

fn main() -> std::process::ExitCode {
    uni20::launch(|ctl| {
        // Root-local tensors, scattered into blocks of at most 2 per mode.
        let a = LocalTensor::from_f64(&[2, 3], vec![1., 2., 3., 4., 5., 6.])?;
        let b = LocalTensor::from_f64(&[3, 2], vec![1., 0., 0., 1., 1., 1.])?;
        let a = DistTensor::from_local(ctl, &a, 2)?;
        let b = DistTensor::from_local(ctl, &b, 2)?;

        // C = A B: returns at once; planned on the root, computed by the workers.
        let c = contract(ctl, "ij,jk->ik", &a, &b)?;

        // D = 2 A B - C: queued until C's block map is known.
        let opts = ContractOptions {
            alpha: C64::new(2.0, 0.0),
            beta: C64::new(-1.0, 0.0),
            c: Some(&c),
            ..Default::default()
        };
        let d = contract_with(ctl, "ij,jk->ik", &a, &b, &opts)?;
        d.wait(ctl)?; // drives the job until D is computed (or failed)
        if let Some(plan) = d.plan_summary() {
            println!("{plan}"); // work items, transfers, bytes moved, bytes through the root
        }

        let path = std::env::temp_dir().join(format!("uni20-guide-d-{}.npy", std::process::id()));
        write_npy(ctl, &d, &path)?; // each owner writes its own blocks
        let d2 = read_npy(ctl, &path, 2)?; // returns at once, too
        let values: Vec<f64> = d2.to_local(ctl)?.to_c64_vec().iter().map(|z| z.re).collect(); // waits, then gathers
        std::fs::remove_file(&path)?;
        println!("D = {values:?}");
        // A B = [[1 + 3, 2 + 3], [4 + 6, 5 + 6]], and D = 2 A B - A B.
        anyhow::ensure!(values == [4., 5., 10., 11.], "D = {values:?}, expected [4, 5, 10, 11]");
        Ok(())
    })
}
// ANCHOR_END: guide
