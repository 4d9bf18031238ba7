//! Fault-stage fixture of `cargo xtask test`: the root panics outside any
//! command handler while `write_npy` is writing `OUTPUT` (a completion
//! callback of an earlier operation panics when `write_npy` collects
//! replies). Under MPI the panic hook must remove the registered temporary
//! `.OUTPUT.uni20-tmp-*` file before `MPI_Abort`; in-process the unwinding
//! removes it. Either way nothing may remain beside `OUTPUT`.
//!
//! Usage: `root_panic_in_write OUTPUT` (exits non-zero by design).

use uni20::prelude::*;

fn main() -> anyhow::Result<()> {
    let out = std::env::args_os()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: root_panic_in_write OUTPUT"))?;
    uni20::universe().run(|ctl| -> anyhow::Result<()> {
        let local = LocalTensor::from_f64(&[3, 2], vec![1., 2., 3., 4., 5., 6.])?;
        let t = DistTensor::from_local(ctl, &local, 1)?;
        ctl.submit_nowait::<uni20::worker::commands::Noop>(&(), &ctl.compute_ranks(), |_, _| {
            panic!("deliberate root panic during write_npy")
        })?;
        write_npy(ctl, &t, &out)?;
        Ok(())
    })??;
    anyhow::bail!("the deliberate panic did not happen")
}
