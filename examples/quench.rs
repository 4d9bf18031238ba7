//! A quench by TEBD: the Neel state evolved by the XXZ chain
//! `H = sum_i Jxy (Sx_i Sx_(i+1) + Sy_i Sy_(i+1)) + Jz Sz_i Sz_(i+1)` (open
//! ends, spin 1/2), with the staggered magnetization, the half-chain
//! entanglement entropy and the truncation error printed per time step.
//! With `--output DIR` it writes `steps.json` (per-step statistics),
//! `sz.npy` (`<Sz_i(t)>`, shape `steps+1 x L`, f64), `entropy.npy` (the
//! entropy at every bond and time, `steps+1 x L-1`) and `sz.svg` (a plot
//! of the staggered magnetization and the half-chain entropy against time,
//! 800 x 480).
//!
//! ```text
//! cargo run --release --example quench                              # L = 20, XX chain, t = 0 .. 4
//! cargo run --release --example quench -- --jz 0.5 --output /tmp/q  # XXZ, files in /tmp/q
//! ```
//!
//! At `Jz = 0` the chain is free fermions: `<Sz_i(t)>` is known exactly
//! (`tests/tebd.rs` checks it).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Parser;
use npyz::WriterBuilder;
use plotters::prelude::*;
use uni20::tn::measure::{entanglement_entropy, local_expectations, schmidt_spectra, site_operator};
use uni20::tn::models::xxz;
use uni20::tn::{Conserve, Mps, Tebd, TebdOptions};

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

struct Record {
    t: f64,
    sz: Vec<f64>,
    entropy: Vec<f64>,
    trunc: f64,
    chi: usize,
}

fn staggered(sz: &[f64]) -> f64 {
    sz.iter()
        .enumerate()
        .map(|(i, m)| if i % 2 == 0 { *m } else { -*m })
        .sum::<f64>()
        / sz.len() as f64
}

fn write_npy(path: &Path, rows: &[Vec<f64>]) -> anyhow::Result<()> {
    let cols = rows.first().map_or(0, Vec::len);
    let mut w = npyz::WriteOptions::<f64>::new()
        .default_dtype()
        .shape(&[rows.len() as u64, cols as u64])
        .writer(std::io::BufWriter::new(std::fs::File::create(path)?))
        .begin_nd()?;
    for r in rows {
        w.extend(r.iter().copied())?;
    }
    w.finish()?;
    Ok(())
}

fn plot(path: &Path, recs: &[Record], title: &str) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let t_end = recs.last().map_or(1.0, |r| r.t).max(1e-9);
    let s_max = recs
        .iter()
        .map(|r| r.entropy.get(r.entropy.len() / 2).copied().unwrap_or(0.0))
        .fold(1.0f64, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0.0..t_end, -0.55..s_max.max(0.55))?;
    chart.configure_mesh().x_desc("t").y_desc("value").draw()?;
    chart
        .draw_series(LineSeries::new(recs.iter().map(|r| (r.t, staggered(&r.sz))), &BLUE))?
        .label("staggered magnetization")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    chart
        .draw_series(LineSeries::new(
            recs.iter()
                .map(|r| (r.t, r.entropy.get(r.entropy.len() / 2).copied().unwrap_or(0.0))),
            &RED,
        ))?
        .label("half-chain entropy")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    chart
        .configure_series_labels()
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn run(args: &Args) -> anyhow::Result<Vec<Record>> {
    if args.sites < 2 {
        bail!("--sites must be at least 2");
    }
    if !(args.time.is_finite() && args.time >= 0.0) {
        bail!("--time must be finite and >= 0");
    }
    let model = xxz(args.sites, 1, args.jxy, args.jz, 0.0, Conserve::None)?;
    let opts = TebdOptions {
        dt: args.dt,
        chi_max: args.chi_max,
        cutoff: args.cutoff,
        block: args.block,
        imaginary: false,
    };
    if !(args.dt.is_finite() && args.dt > 0.0) {
        bail!("--dt must be finite and > 0");
    }
    let steps_f = (args.time / args.dt).round();
    if steps_f > 1e6 {
        bail!("--time / --dt gives {steps_f:e} steps; at most 1e6 are allowed (every step is measured and kept)");
    }
    let steps = steps_f as usize;
    if ((steps as f64) * args.dt - args.time).abs() > 1e-9 * args.time.max(1.0) {
        println!(
            "note: --time {} is not a multiple of --dt {}: {steps} steps end at t = {}",
            args.time,
            args.dt,
            steps as f64 * args.dt
        );
    }
    if let Some(dir) = &args.output {
        std::fs::create_dir_all(dir).with_context(|| format!("creating the --output directory {}", dir.display()))?;
    }
    let recs = uni20::universe()
        .run(|ctl| -> anyhow::Result<Vec<Record>> {
            let labels: Vec<&str> = (0..args.sites)
                .map(|i| if i % 2 == 0 { "up" } else { "down" })
                .collect();
            let mut psi = Mps::product(ctl, &model.sites, &labels, args.block)?;
            let tebd = Tebd::new(ctl, &model, opts)?;
            let sz: Vec<_> = model
                .sites
                .iter()
                .map(|s| site_operator(ctl, s, "Sz", args.block))
                .collect::<Result<_, _>>()?;
            let measure = |psi: &Mps, t: f64, trunc: f64, chi: usize| -> anyhow::Result<Record> {
                Ok(Record {
                    t,
                    sz: local_expectations(ctl, psi, &sz)?,
                    entropy: entanglement_entropy(&schmidt_spectra(ctl, psi, args.block)?),
                    trunc,
                    chi,
                })
            };
            let mut recs = vec![measure(&psi, 0.0, 0.0, 1)?];
            for k in 1..=steps {
                let s = tebd.step(ctl, &mut psi)?;
                let r = measure(&psi, k as f64 * args.dt, s.discarded_weight, s.max_bond)?;
                println!(
                    "t = {:7.3}  m_stag = {:+.10}  S_half = {:.10}  trunc = {:.3e}  chi = {}",
                    r.t,
                    staggered(&r.sz),
                    r.entropy[r.entropy.len() / 2],
                    r.trunc,
                    r.chi
                );
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
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let steps: Vec<serde_json::Value> = recs
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "t": r.t,
                        "staggered_magnetization": staggered(&r.sz),
                        "half_chain_entropy": r.entropy[r.entropy.len() / 2],
                        "discarded_weight": r.trunc,
                        "max_bond": r.chi,
                    })
                })
                .collect();
            let doc = serde_json::json!({
                "sites": args.sites, "jxy": args.jxy, "jz": args.jz, "dt": args.dt, "time": args.time,
                "chi_max": args.chi_max, "cutoff": args.cutoff,
                "steps": steps,
            });
            std::fs::write(dir.join("steps.json"), serde_json::to_string_pretty(&doc)?)?;
            write_npy(
                &dir.join("sz.npy"),
                &recs.iter().map(|r| r.sz.clone()).collect::<Vec<_>>(),
            )?;
            write_npy(
                &dir.join("entropy.npy"),
                &recs.iter().map(|r| r.entropy.clone()).collect::<Vec<_>>(),
            )?;
            plot(
                &dir.join("sz.svg"),
                &recs,
                &format!(
                    "Neel quench, XXZ L = {} (Jxy = {}, Jz = {})",
                    args.sites, args.jxy, args.jz
                ),
            )?;
            println!("wrote steps.json, sz.npy, entropy.npy, sz.svg to {}", dir.display());
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
