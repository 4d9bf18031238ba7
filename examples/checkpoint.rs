//! Checkpoint and restart: Tr H^2 of the Heisenberg chain for growing
//! lengths L = 1..=STEPS, by sweeping a distributed transfer-matrix
//! environment (exact: Tr H^2 = 3 (L-1) 2^(L-4)), on disk-backed stores.
//!
//! ```text
//! # uninterrupted
//! cargo run --release --example checkpoint -- --store /tmp/ck-a --steps 16
//! # stop after 8 sites: flushes every rank's store, commits a manifest object, prints its id
//! cargo run --release --example checkpoint -- --store /tmp/ck-b --steps 16 --stop-after 8
//! # restart from that id (same store directory, same number of ranks) and finish
//! cargo run --release --example checkpoint -- --store /tmp/ck-b --steps 16 --resume r0:NNN
//! ```
//! The printed `L=... Tr H^2=...` lines of the two halves equal those of the
//! uninterrupted run, digit for digit. Exits non-zero if a value differs from
//! the exact formula.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Parser;
use uni20::dist::{checkpoint, restore, Checkpoint};
use uni20::persist::ObjectId;
use uni20::prelude::*;

mod shared;

use shared::{mpo_tensor, unit, BLOCK, D};

#[derive(Parser)]
#[command(about = "Tr H^2 sweep with checkpoint/restart on disk-backed stores")]
struct Args {
    /// Directory of the ranks' persistent stores (one `rank-<r>` each).
    #[arg(long)]
    store: PathBuf,
    /// Final chain length.
    #[arg(long, default_value_t = 16)]
    steps: u64,
    /// Write a checkpoint after this many sites and exit.
    #[arg(long)]
    stop_after: Option<u64>,
    /// Continue from the checkpoint with this id (printed by `--stop-after`).
    #[arg(long)]
    resume: Option<ObjectId>,
}

fn exact(l: u64) -> f64 {
    3.0 * (l as f64 - 1.0) * 2f64.powi(l as i32 - 4)
}

fn main() -> ExitCode {
    let args = Args::parse();
    uni20::init_logging();
    let result = uni20::universe()
        .store_dir(&args.store)
        .run(|ctl| -> anyhow::Result<()> {
            let (mut env, x, ends, start) = match args.resume {
                Some(id) => {
                    let cp = restore(ctl, id).with_context(|| format!("restoring checkpoint {id}"))?;
                    if cp.step >= args.steps {
                        bail!(
                            "checkpoint {id} is at L={}, already at or past --steps {}",
                            cp.step,
                            args.steps
                        );
                    }
                    println!("resumed {} at L={} from checkpoint {id}", cp.label, cp.step);
                    (
                        cp.tensor(ctl, "env")?,
                        cp.tensor(ctl, "x")?,
                        cp.tensor(ctl, "ends")?,
                        cp.step,
                    )
                }
                None => {
                    let w = DistTensor::from_local(ctl, &mpo_tensor()?, BLOCK)?;
                    let left = DistTensor::from_local(ctl, &unit(D, 4)?, BLOCK)?;
                    let right = DistTensor::from_local(ctl, &unit(D, 0)?, BLOCK)?;
                    // X[a,c,b,d] = sum_{s,t} W[a,b,s,t] W[c,d,t,s]: one site of Tr(H.H).
                    let x = contract(ctl, "abst,cdts->acbd", &w, &w)?;
                    let env = contract(ctl, "a,c->ac", &left, &left)?;
                    let ends = contract(ctl, "b,d->bd", &right, &right)?;
                    (env, x, ends, 0)
                }
            };
            let mut failures = 0;
            for l in start + 1..=args.steps {
                env = contract(ctl, "ac,acbd->bd", &env, &x)?;
                let tr = contract(ctl, "bd,bd->", &env, &ends)?.to_local(ctl)?.to_c64_vec()[0].re;
                let ok = (tr - exact(l)).abs() <= 1e-12 * exact(l).abs().max(1.0);
                failures += usize::from(!ok);
                println!(
                    "L={l:<3} Tr H^2={tr:<24} exact={:<24} {}",
                    exact(l),
                    if ok { "ok" } else { "MISMATCH" }
                );
                if Some(l) == args.stop_after {
                    let mut cp = Checkpoint {
                        label: "heisenberg Tr H^2".into(),
                        step: l,
                        ..Default::default()
                    };
                    cp.add(ctl, "env", &env)?;
                    cp.add(ctl, "x", &x)?;
                    cp.add(ctl, "ends", &ends)?;
                    let p = checkpoint(ctl, &cp)?;
                    println!("checkpoint: {}", p.id());
                    return Ok(());
                }
            }
            if failures > 0 {
                bail!("{failures} value(s) differ from the exact formula");
            }
            Ok(())
        });
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("checkpoint: error: {e:#}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("checkpoint: {e}");
            ExitCode::FAILURE
        }
    }
}
