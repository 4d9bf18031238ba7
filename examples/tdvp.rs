//! A quench by two-site TDVP (`uni20::tn::Tdvp`): the Neel state evolved
//! by the XXZ chain with an optional next-nearest exchange,
//! `H = sum_i Jxy (Sx_i Sx_(i+1) + Sy_i Sy_(i+1)) + Jz Sz_i Sz_(i+1)
//! + J2 S_i . S_(i+2)` (open ends, spin 1/2; `J2 != 0` is beyond TEBD's
//! nearest-neighbour gates, not beyond TDVP's MPO), with the staggered
//! magnetization, the half-chain entanglement entropy and the truncation
//! error printed per time step. `--output DIR` writes the files of
//! `examples/quench.rs` (the same code, `examples/shared/quench_output.rs`):
//! `steps.json`, `sz.npy`, `entropy.npy` and `sz.svg` (800 x 480).
//!
//! ```text
//! cargo run --release --example tdvp                                # L = 20, XX chain, t = 0 .. 4
//! cargo run --release --example tdvp -- --j2 0.5 --output /tmp/t    # frustrated chain, files in /tmp/t
//! ```
//!
//! At `Jz = J2 = 0` the chain is free fermions: `<Sz_i(t)>` is known exactly
//! (`tests/tdvp.rs` and, at L = 40, `tests/tn_reference.rs` check it).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Parser;
use uni20::tn::measure::site_operator;
use uni20::tn::models::xxz;
use uni20::tn::{Conserve, LanczosOptions, MpoOptions, Mps, Tdvp, TdvpOptions};

#[path = "shared/quench_output.rs"]
mod quench_output;

use quench_output::{measure, neel, print_step, steps, write_outputs, Record};

#[derive(Parser, Debug)]
#[command(about = "Neel-state quench of the XXZ (J1-J2) chain by two-site TDVP on distributed tensors")]
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
    /// Next-nearest Heisenberg coupling J2.
    #[arg(long, default_value_t = 0.0)]
    j2: f64,
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
    /// Error tolerance of each Krylov exponential.
    #[arg(long, default_value_t = 1e-12)]
    krylov_tol: f64,
    /// Most Krylov vectors of each exponential.
    #[arg(long, default_value_t = 30)]
    krylov_max: usize,
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
    if !args.j2.is_finite() {
        bail!("--j2 must be finite");
    }
    let mut model = xxz(args.sites, 1, args.jxy, args.jz, 0.0, Conserve::None)?;
    if args.j2 != 0.0 {
        for i in 0..args.sites.saturating_sub(2) {
            let h = &mut model.hamiltonian;
            h.add(0.5 * args.j2, &[("Sp", i), ("Sm", i + 2)]);
            h.add(0.5 * args.j2, &[("Sm", i), ("Sp", i + 2)]);
            h.add(args.j2, &[("Sz", i), ("Sz", i + 2)]);
        }
    }
    let opts = TdvpOptions {
        dt: args.dt,
        imaginary: false,
        chi_max: args.chi_max,
        cutoff: args.cutoff,
        krylov: LanczosOptions {
            max_krylov: args.krylov_max,
            max_restarts: 0,
            tol: args.krylov_tol,
            ..LanczosOptions::default()
        },
        block: args.block,
        ..TdvpOptions::default()
    };
    opts.validate()?;
    let steps = steps(args.time, args.dt)?;
    if let Some(dir) = &args.output {
        std::fs::create_dir_all(dir).with_context(|| format!("creating the --output directory {}", dir.display()))?;
    }
    let local = model.hamiltonian.to_mpo(&model.sites, &MpoOptions::default())?;
    let recs = uni20::universe()
        .run(|ctl| -> anyhow::Result<Vec<Record>> {
            let psi = Mps::product(ctl, &model.sites, &neel(args.sites), args.block)?;
            let mut tdvp = Tdvp::new(ctl, local.to_mpo(ctl, args.block)?, psi, opts)?;
            let sz: Vec<_> = model
                .sites
                .iter()
                .map(|s| site_operator(ctl, s, "Sz", args.block))
                .collect::<Result<_, _>>()?;
            let mut recs = vec![measure(ctl, tdvp.mps(), &sz, args.block, 0.0, 0.0, 1)?];
            for _ in 1..=steps {
                let s = tdvp.step(ctl)?;
                if s.unconverged > 0 {
                    println!(
                        "warning: t = {:.3}: {} Krylov exponentials above --krylov-tol (raise --krylov-max)",
                        s.time, s.unconverged
                    );
                }
                let r = measure(ctl, tdvp.mps(), &sz, args.block, s.time, s.discarded_weight, s.max_bond)?;
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
                "method": "tdvp", "sites": args.sites, "jxy": args.jxy, "jz": args.jz, "j2": args.j2,
                "dt": args.dt, "time": args.time, "chi_max": args.chi_max, "cutoff": args.cutoff,
            });
            let title = format!(
                "Neel quench by TDVP, L = {} (Jxy = {}, Jz = {}, J2 = {})",
                args.sites, args.jxy, args.jz, args.j2
            );
            write_outputs(dir, params, &recs, &title)?;
        }
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uni20 tdvp: {e:#}");
            ExitCode::FAILURE
        }
    }
}
