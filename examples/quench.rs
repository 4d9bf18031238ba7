//! A quench by TEBD: the Neel state evolved by the XXZ chain
//! `H = sum_i Jxy (Sx_i Sx_(i+1) + Sy_i Sy_(i+1)) + Jz Sz_i Sz_(i+1)` (open
//! ends, spin 1/2), with the staggered magnetization, the half-chain
//! entanglement entropy and the truncation error printed per time step.
//! With `--output DIR` it writes `steps.json` (per-step statistics),
//! `sz.npy` (`<Sz_i(t)>`, shape `steps+1 x L`, f64), `entropy.npy` (the
//! entropy at every bond and time, `steps+1 x L-1`) and `sz.svg` (a plot
//! of the staggered magnetization and the half-chain entropy against time,
//! 800 x 480), as `examples/tdvp.rs` does (`examples/shared/quench_output.rs`).
//!
//! ```text
//! cargo run --release --example quench                              # L = 20, XX chain, t = 0 .. 4
//! cargo run --release --example quench -- --jz 0.5 --output /tmp/q  # XXZ, files in /tmp/q
//! ```
//!
//! At `Jz = 0` the chain is free fermions: `<Sz_i(t)>` is known exactly
//! (`tests/tebd.rs` checks it).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Parser;
use uni20::tn::measure::site_operator;
use uni20::tn::models::xxz;
use uni20::tn::{Conserve, Mps, Tebd, TebdOptions};

#[path = "shared/quench_output.rs"]
mod quench_output;

use quench_output::{measure, neel, print_step, steps, write_outputs, Record};

#[derive(Parser, Debug)]
#[command(about = "Neel-state quench of the XXZ chain by TEBD on distributed tensors")]
struct Args {
    /// Chain length L (at least 2).
    #[arg(long, default_value_t = 20)]
    sites: usize,
    /// In-plane coupling Jxy.
    #[arg(long, default_value_t = 1.0)]
    jxy: f64,
    /// Ising coupling Jz.
    #[arg(long, default_value_t = 0.0)]
    jz: f64,
    /// Time step.
    #[arg(long, default_value_t = 0.05)]
    dt: f64,
    /// Final time.
    #[arg(long, default_value_t = 4.0)]
    time: f64,
    /// Largest bond dimension.
    #[arg(long, default_value_t = 64)]
    chi_max: usize,
    /// Drop singular values at or below this.
    #[arg(long, default_value_t = 1e-10)]
    cutoff: f64,
    /// Block extent of the distributed tensors.
    #[arg(long, default_value_t = 64)]
    block: usize,
    /// Write steps.json, sz.npy, entropy.npy and sz.svg into this directory (created).
    #[arg(long)]
    output: Option<PathBuf>,
}

fn run(args: &Args) -> anyhow::Result<Vec<Record>> {
    if args.sites < 2 {
        bail!("--sites must be at least 2");
    }
    let model = xxz(args.sites, 1, args.jxy, args.jz, 0.0, Conserve::None)?;
    let opts = TebdOptions {
        dt: args.dt,
        chi_max: args.chi_max,
        cutoff: args.cutoff,
        block: args.block,
        imaginary: false,
    };
    let steps = steps(args.time, args.dt)?;
    if let Some(dir) = &args.output {
        std::fs::create_dir_all(dir).with_context(|| format!("creating the --output directory {}", dir.display()))?;
    }
    let recs = uni20::universe()
        .run(|ctl| -> anyhow::Result<Vec<Record>> {
            let mut psi = Mps::product(ctl, &model.sites, &neel(args.sites), args.block)?;
            let tebd = Tebd::new(ctl, &model, opts)?;
            let sz: Vec<_> = model
                .sites
                .iter()
                .map(|s| site_operator(ctl, s, "Sz", args.block))
                .collect::<Result<_, _>>()?;
            let mut recs = vec![measure(ctl, &psi, &sz, args.block, 0.0, 0.0, 1)?];
            for k in 1..=steps {
                let s = tebd.step(ctl, &mut psi)?;
                let r = measure(
                    ctl,
                    &psi,
                    &sz,
                    args.block,
                    k as f64 * args.dt,
                    s.discarded_weight,
                    s.max_bond,
                )?;
                print_step(&r);
                recs.push(r);
            }
            Ok(recs)
        })
        .map_err(|e| anyhow::anyhow!("{e}"))??;
    Ok(recs)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = run(&args).and_then(|recs| {
        if let Some(dir) = &args.output {
            let params = serde_json::json!({
                "sites": args.sites, "jxy": args.jxy, "jz": args.jz, "dt": args.dt, "time": args.time,
                "chi_max": args.chi_max, "cutoff": args.cutoff,
            });
            let title = format!(
                "Neel quench, XXZ L = {} (Jxy = {}, Jz = {})",
                args.sites, args.jxy, args.jz
            );
            write_outputs(dir, params, &recs, &title)?;
        }
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uni20 quench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
