//! What `examples/quench.rs` (TEBD) and `examples/tdvp.rs` (TDVP) share:
//! the Neel start, the per-step measurement and line, and the `--output`
//! files: `steps.json` (per-step statistics), `sz.npy` (`<Sz_i(t)>`, shape
//! `steps+1 x L`, f64), `entropy.npy` (the entropy at every bond and time,
//! `steps+1 x L-1`) and `sz.svg` (the staggered magnetization and the
//! half-chain entropy against time, 800 x 480).

use std::path::Path;

use anyhow::{bail, Context};
use npyz::WriterBuilder;
use plotters::prelude::*;
use uni20::tn::measure::{entanglement_entropy, local_expectations, schmidt_spectra};
use uni20::tn::Mps;
use uni20::{Controller, DistTensor};

/// The measurements after one time step.
pub struct Record {
    /// Time.
    pub t: f64,
    /// `<Sz_i>` on every site.
    pub sz: Vec<f64>,
    /// Entanglement entropy at every bond.
    pub entropy: Vec<f64>,
    /// Discarded weight of the step.
    pub trunc: f64,
    /// Largest bond dimension after the step.
    pub chi: usize,
}

/// The Neel labels `up down up ..` of `l` sites.
pub fn neel(l: usize) -> Vec<&'static str> {
    (0..l).map(|i| if i % 2 == 0 { "up" } else { "down" }).collect()
}

/// `(1/L) sum_i (-1)^i <Sz_i>`.
pub fn staggered(sz: &[f64]) -> f64 {
    sz.iter()
        .enumerate()
        .map(|(i, m)| if i % 2 == 0 { *m } else { -*m })
        .sum::<f64>()
        / sz.len() as f64
}

/// The number of steps of `dt` to `time`, checked (at most 1e6; a note when
/// `time` is not a multiple of `dt`).
pub fn steps(time: f64, dt: f64) -> anyhow::Result<usize> {
    if !(time.is_finite() && time >= 0.0) {
        bail!("--time must be finite and >= 0");
    }
    if !(dt.is_finite() && dt > 0.0) {
        bail!("--dt must be finite and > 0");
    }
    let steps_f = (time / dt).round();
    if steps_f > 1e6 {
        bail!("--time / --dt gives {steps_f:e} steps; at most 1e6 are allowed (every step is measured and kept)");
    }
    let steps = steps_f as usize;
    if ((steps as f64) * dt - time).abs() > 1e-9 * time.max(1.0) {
        println!(
            "note: --time {time} is not a multiple of --dt {dt}: {steps} steps end at t = {}",
            steps as f64 * dt
        );
    }
    Ok(steps)
}

/// Measures `psi` (`sz`: the `Sz` of every site) at time `t`.
pub fn measure(
    ctl: &Controller<'_>,
    psi: &Mps,
    sz: &[DistTensor],
    block: usize,
    t: f64,
    trunc: f64,
    chi: usize,
) -> anyhow::Result<Record> {
    Ok(Record {
        t,
        sz: local_expectations(ctl, psi, sz)?,
        entropy: entanglement_entropy(&schmidt_spectra(ctl, psi, block)?),
        trunc,
        chi,
    })
}

/// The line printed per step.
pub fn print_step(r: &Record) {
    println!(
        "t = {:7.3}  m_stag = {:+.10}  S_half = {:.10}  trunc = {:.3e}  chi = {}",
        r.t,
        staggered(&r.sz),
        r.entropy[r.entropy.len() / 2],
        r.trunc,
        r.chi
    );
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

/// Writes the `--output` files (module docs) into `dir` (created):
/// `params` (a JSON object of the run's parameters) with the per-step list
/// added as `"steps"`.
pub fn write_outputs(dir: &Path, mut params: serde_json::Value, recs: &[Record], title: &str) -> anyhow::Result<()> {
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
    params["steps"] = serde_json::Value::Array(steps);
    std::fs::write(dir.join("steps.json"), serde_json::to_string_pretty(&params)?)?;
    write_npy(
        &dir.join("sz.npy"),
        &recs.iter().map(|r| r.sz.clone()).collect::<Vec<_>>(),
    )?;
    write_npy(
        &dir.join("entropy.npy"),
        &recs.iter().map(|r| r.entropy.clone()).collect::<Vec<_>>(),
    )?;
    plot(&dir.join("sz.svg"), recs, title)?;
    println!("wrote steps.json, sz.npy, entropy.npy, sz.svg to {}", dir.display());
    Ok(())
}
