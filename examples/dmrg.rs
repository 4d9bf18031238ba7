//! The real job: finite two-site DMRG for the spin-1/2 Heisenberg chain
//! `H = sum_i S_i . S_(i+1)` with open ends, on distributed tensors, with a
//! checkpoint after every sweep.
//!
//! Read it as a template: the algorithm itself lives in `uni20::tn`
//! (`Mpo::heisenberg`, `Mps::random`, `Dmrg`), written against the public
//! distributed operations; this file is the command line, the output and
//! the checkpoint/resume logic.
//!
//! ```text
//! cargo run --release --example dmrg                        # L=32, chi 64, in-process
//! cargo xtask mpirun -n 3 --release --example dmrg          # the same under MPI
//! cargo run --release --example dmrg -- --sites 100 --chi-max 100 --sweeps 12
//! cargo run --release --example dmrg -- --checkpoint /tmp/dmrg    # prints `checkpoint: r0:N@<nonce> (after sweep k)`
//! cargo run --release --example dmrg -- --checkpoint /tmp/dmrg --resume r0:N@<nonce>
//! cargo run --release --example dmrg -- --model spin1 --sites 40 --chi-max 100 --excited 1   # singlet and triplet
//! cargo run --release --example dmrg -- --conserve Sz       # symmetric tensors, sector 2Sz = 0
//! cargo run --release --example dmrg -- --sites 100 --chi-max 100 --env-budget 4M --profile   # out-of-core environments
//! cargo run --release --example dmrg -- --model hubbard --conserve N,Sz --sector 8,0 --sites 8
//! ```
//!
//! One line per sweep on stdout:
//! `sweep   3  E = -13.997315618007  dE = -1.234e-05  trunc = 3.210e-11  chi = 64  time = 1.23 s`
//! (energy, its change over the sweep, the largest discarded weight, the
//! largest bond dimension, the sweep's wall time). A progress bar runs
//! within a sweep when stderr is a terminal.

/// mimalloc instead of glibc's malloc: the symmetric sweeps allocate and free many small blocks
/// (sector blocks, plans, descriptors), where glibc's allocator took about a quarter of the
/// samples of a profile (`docs/performance.md`). A program embedding uni20 chooses its own.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use uni20::dist::symmetry::Charge;
use uni20::dist::{gc, residency_stats, restore_redistributed};
use uni20::persist::ObjectId;
use uni20::tn::measure::{energy_variance, entanglement_entropy, local_expectations, schmidt_spectra, site_operator};
use uni20::tn::models::{self, Model};
use uni20::tn::{
    checkpoint_truncation, total_charge, Conserve, Dmrg, DmrgOptions, EnvBudget, LanczosOptions, Mpo, MpoOptions, Mps,
    Site, SweepStats, SPIN_HALF,
};
use uni20::Controller;

#[derive(Parser, Debug)]
#[command(
    about = "Finite two-site DMRG of the open spin-1/2 Heisenberg chain on distributed tensors",
    allow_negative_numbers = true
)]
struct Args {
    /// Chain length L (2 to 1048576, `MAX_SITES`: two-site DMRG needs two).
    #[arg(long, default_value_t = 32,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(2..=uni20::tn::MAX_SITES as u64))]
    sites: usize,
    /// Largest bond dimension kept by each SVD.
    #[arg(long, default_value_t = 64)]
    chi_max: usize,
    /// Drop singular values (of the normalised two-site tensor) at or below this.
    #[arg(long, default_value_t = 1e-10)]
    cutoff: f64,
    /// Most sweeps, counted from the start of the run (a resumed run continues the count).
    #[arg(long, default_value_t = 20)]
    sweeps: u64,
    /// Stop when the energy changes by less than this over a sweep (0: run all sweeps).
    #[arg(long, default_value_t = 1e-10)]
    tol: f64,
    /// Seed of the random initial MPS.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Bond dimension of the random initial MPS (at most --chi-max).
    #[arg(long, default_value_t = 8)]
    init_bond: usize,
    /// Smallest residual tolerance of the Lanczos eigensolver of each step.
    #[arg(long, default_value_t = 1e-8)]
    lanczos_tol: f64,
    /// Adaptive eigensolver tolerance: a step stops its Lanczos at the residual
    /// max(--lanczos-tol, this * sqrt(discarded weight of the previous SVD)), at most 1e-4;
    /// 0 keeps --lanczos-tol for every step.
    #[arg(long, default_value_t = 0.1)]
    tol_to_truncation: f64,
    /// Largest Krylov dimension of one Lanczos pass.
    #[arg(long, default_value_t = 20)]
    lanczos_krylov: usize,
    /// Energy-change stop: a step also stops its Lanczos when the lowest Ritz value changed by
    /// less than max(--lanczos-e-tol, this * largest discarded weight of the previous sweep), at
    /// most 1e-6, after --lanczos-min-krylov steps; 0 (with --lanczos-e-tol 0) turns it off.
    #[arg(long, default_value_t = uni20::tn::DEFAULT_E_TOL_TO_TRUNCATION)]
    e_tol_to_truncation: f64,
    /// Energy-change stop from the sweeps' convergence: a step also stops its Lanczos when the
    /// lowest Ritz value changed by less than this * |dE| / (2 (L - 1)), dE the energy change of
    /// the previous sweep (at most 1e-6; 1e-6 after the first sweep); 0 turns it off.
    #[arg(long, default_value_t = uni20::tn::DEFAULT_E_TOL_TO_ENERGY_CHANGE)]
    e_tol_to_energy_change: f64,
    /// Smallest energy-change tolerance of the Lanczos of each step (0: none).
    #[arg(long, default_value_t = 0.0)]
    lanczos_e_tol: f64,
    /// Fewest Lanczos steps before the energy-change stop may end a pass (at least 2).
    #[arg(long, default_value_t = 2)]
    lanczos_min_krylov: usize,
    /// Steps with at most this many unknowns are solved by diagonalising the effective
    /// Hamiltonian's matrix on the root instead of iterating (0: always iterate).
    #[arg(long, default_value_t = uni20::tn::DEFAULT_DENSE_MAX)]
    dense_max: usize,
    /// Block extent of every mode of the distributed tensors.
    #[arg(long, default_value_t = 64)]
    block: usize,
    /// How the effective Hamiltonian is applied: `sequential` (four contractions per product,
    /// the fewest multiply-adds), `fused` (L W and W R formed once per step, two contractions
    /// per product) or `auto` (fused for --conserve at bonds up to 256, sequential above and
    /// for dense runs: the faster of the two for each).
    #[arg(long, value_enum, default_value_t = MatvecArg::Auto)]
    matvec: MatvecArg,
    /// Directory of the ranks' persistent stores: with it, a checkpoint is written after
    /// every sweep and its id printed (`checkpoint: r0:N@<store nonce> (after sweep k)`).
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Continue from this checkpoint id, as printed (needs --checkpoint with the same
    /// directory and the same number of ranks as the run that wrote it). It becomes the
    /// directory's current checkpoint: objects that an interrupted run left in the stores,
    /// and other checkpoints of the directory, are removed first.
    #[arg(long, requires = "checkpoint")]
    resume: Option<ObjectId>,
    /// Also print, per sweep, where the time went (eigensolver, SVD, the rest) and the
    /// process's peak resident memory.
    #[arg(long)]
    profile: bool,
    /// Keep at most SIZE bytes (K, M, G suffixes: 1024-based) of environments resident per
    /// rank (the engine bounds the sum over ranks by SIZE times the compute ranks); the
    /// others are offloaded to the ranks' disk stores (the --checkpoint directory, else a
    /// temporary directory removed at exit) and fetched back ahead of the step that needs
    /// them. Default: every environment stays in memory.
    #[arg(long, value_parser = parse_size)]
    env_budget: Option<u64>,
    /// With --env-budget: do not prefetch; a step loads its offloaded environments when
    /// its first contraction needs them.
    #[arg(long, requires = "env_budget")]
    no_prefetch: bool,
    /// The model (its parameters below; a resumed run must name the same model).
    #[arg(long, value_enum, default_value_t = ModelName::Heisenberg)]
    model: ModelName,
    /// Spin of heisenberg/xxz, as 2S (1: spin 1/2, 2: spin 1, ...).
    #[arg(long, default_value_t = 1)]
    two_s: u32,
    /// xxz: Ising coupling Jz (Jxy = 1).
    #[arg(long, default_value_t = 1.0)]
    jz: f64,
    /// xxz: field along z.
    #[arg(long, default_value_t = 0.0)]
    hz: f64,
    /// tfi: transverse field g (J = 1).
    #[arg(long, default_value_t = 1.0)]
    g: f64,
    /// spin1: single-ion anisotropy D.
    #[arg(long, default_value_t = 0.0)]
    d: f64,
    /// j1j2: next-nearest coupling J2 (J1 = 1).
    #[arg(long, default_value_t = 0.5)]
    j2: f64,
    /// hubbard: on-site repulsion U (hopping t = 1).
    #[arg(long, default_value_t = 4.0)]
    u: f64,
    /// hubbard: chemical potential (U/2 is half filling).
    #[arg(long, default_value_t = 2.0)]
    mu: f64,
    /// Conserved quantum numbers: none, Sz (spins, hubbard), N or N,Sz (hubbard), parity
    /// (tfi, spins, hubbard). With one, the tensors are symmetric (block-sparse) and the
    /// run stays in the sector of --sector.
    #[arg(long, value_parser = parse_conserve, default_value = "none")]
    conserve: Conserve,
    /// The sector (total charge) of a run with --conserve, comma-separated components:
    /// 2Sz for Sz, N for N, N,2Sz for N,Sz, 0 (even) or 1 for parity. Default: the ground
    /// state's usual sector (2Sz = 0 or 1; half filling N = L; even parity).
    #[arg(long)]
    sector: Option<String>,
    /// After the last sweep, print the local density profile (<Sz_i>, or <n_i> for hubbard),
    /// the entanglement entropy at every bond and the energy variance.
    #[arg(long)]
    measure: bool,
    /// After the ground state, find the next K levels by projection: each is the lowest
    /// state orthogonal to those found before (`Dmrg::orthogonal_to`, weight
    /// --excited-weight), from its own random start (seed + k), with the same sweeps and
    /// tolerance. Printed as `level k: E = ...`. Not with --checkpoint.
    #[arg(long, default_value_t = 0)]
    excited: usize,
    /// Weight of the projectors onto the lower states (larger than the gaps to them).
    #[arg(long, default_value_t = 5.0)]
    excited_weight: f64,
    /// Write sweeps.json (per-sweep statistics), and with --measure profile.npy,
    /// entropy.npy and dmrg.svg (energy convergence and entropy profile), into this
    /// directory (created).
    #[arg(long)]
    output: Option<PathBuf>,
}

/// `--env-budget`: bytes, with an optional K, M or G suffix (1024-based; a trailing
/// `B` or `iB` is allowed).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let u = t.to_ascii_uppercase();
    let u = u.strip_suffix("IB").or_else(|| u.strip_suffix('B')).unwrap_or(&u);
    let (num, mul) = match u.chars().last() {
        Some('K') => (&u[..u.len() - 1], 1u64 << 10),
        Some('M') => (&u[..u.len() - 1], 1 << 20),
        Some('G') => (&u[..u.len() - 1], 1 << 30),
        _ => (u, 1),
    };
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{t}`: expected bytes, e.g. 4000000, 512K, 40M or 1.5G"))?;
    if !(n.is_finite() && n >= 0.0) {
        return Err(format!("`{t}`: expected a size >= 0"));
    }
    Ok((n * mul as f64).round() as u64)
}

/// Bytes as MB (10^6), or kB below 1 MB, for the output.
fn mb(bytes: u64) -> String {
    if bytes < 1_000_000 {
        format!("{:.1} kB", bytes as f64 / 1e3)
    } else {
        format!("{:.2} MB", bytes as f64 / 1e6)
    }
}

/// `--conserve`: none, Sz, N, N,Sz, parity (any case).
fn parse_conserve(s: &str) -> Result<Conserve, String> {
    match s.to_ascii_lowercase().replace(' ', "").as_str() {
        "none" => Ok(Conserve::None),
        "sz" => Ok(Conserve::Sz),
        "n" => Ok(Conserve::N),
        "n,sz" | "nsz" => Ok(Conserve::NSz),
        "parity" => Ok(Conserve::Parity),
        other => Err(format!(
            "unknown conservation law `{other}` (none, Sz, N, N,Sz or parity)"
        )),
    }
}

/// The models of `--model`.
/// `--matvec`: [`uni20::tn::Matvec`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum MatvecArg {
    Auto,
    Sequential,
    Fused,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ModelName {
    /// Spin-S Heisenberg chain (S from --two-s).
    Heisenberg,
    /// XXZ chain with --jz and --hz.
    Xxz,
    /// Transverse-field Ising chain with --g.
    Tfi,
    /// Spin-1 chain with single-ion anisotropy --d.
    Spin1,
    /// J1-J2 chain of spins 1/2 with --j2.
    J1j2,
    /// Hubbard chain with --u and --mu.
    Hubbard,
}

impl Args {
    /// The model and the parameters it uses, in one line (recorded next to the
    /// checkpoints and in `sweeps.json`).
    fn model_description(&self) -> String {
        let m = match self.model {
            ModelName::Heisenberg => format!("heisenberg 2S={}", self.two_s),
            ModelName::Xxz => format!("xxz 2S={} Jxy=1 Jz={} hz={}", self.two_s, self.jz, self.hz),
            ModelName::Tfi => format!("tfi J=1 g={}", self.g),
            ModelName::Spin1 => format!("spin1 J=1 D={}", self.d),
            ModelName::J1j2 => format!("j1j2 J1=1 J2={}", self.j2),
            ModelName::Hubbard => format!("hubbard t=1 U={} mu={}", self.u, self.mu),
        };
        match self.conserve {
            Conserve::None => m,
            c => format!("{m} conserve={c:?}"),
        }
    }

    /// The target sector of a run with `--conserve` on `sites`: `--sector`, or the
    /// usual ground-state sector.
    fn sector(&self, sites: &[Site]) -> anyhow::Result<Charge> {
        let (g, _) = sites[0].charges().context("--conserve needs sites with charges")?;
        let l = self.sites as i64;
        let comps: Vec<i64> = match &self.sector {
            Some(text) => text
                .split(',')
                .map(|c| c.trim().parse::<i64>())
                .collect::<Result<_, _>>()
                .with_context(|| format!("--sector {text}: expected comma-separated integers"))?,
            None => match (self.model, self.conserve) {
                (ModelName::Hubbard, Conserve::N) => vec![l],
                (ModelName::Hubbard, Conserve::NSz) => vec![l, l % 2],
                (ModelName::Hubbard, Conserve::Sz) => vec![l % 2],
                (_, Conserve::Parity) => vec![0],
                // Spins: 2 Sz = 0 when L * 2S is even, else 1.
                _ => vec![(l * i64::from(self.spin_two_s())) % 2],
            },
        };
        g.charge(&comps)
            .with_context(|| format!("--sector {comps:?} is not a charge of {g}"))
    }

    /// 2S of the model's spins.
    fn spin_two_s(&self) -> u32 {
        match self.model {
            ModelName::Heisenberg | ModelName::Xxz => self.two_s,
            ModelName::Spin1 => 2,
            _ => 1,
        }
    }

    /// The model, or `None` for the default spin-1/2 Heisenberg chain (built by
    /// `Mpo::heisenberg`, whose arithmetic the reference energies were taken with).
    fn model(&self) -> anyhow::Result<Option<Model>> {
        let l = self.sites;
        Ok(match self.model {
            ModelName::Heisenberg if self.two_s == 1 && !self.measure && self.conserve == Conserve::None => None,
            ModelName::Heisenberg => Some(models::heisenberg(l, self.two_s, 1.0, self.conserve)?),
            ModelName::Xxz => Some(models::xxz(l, self.two_s, 1.0, self.jz, self.hz, self.conserve)?),
            ModelName::Tfi => Some(models::tfi(l, 1.0, self.g, self.conserve)?),
            ModelName::Spin1 => Some(models::spin1(l, 1.0, self.d, self.conserve)?),
            ModelName::J1j2 => Some(models::j1j2(l, 1.0, self.j2, self.conserve)?),
            ModelName::Hubbard => Some(models::hubbard(l, 1.0, self.u, self.mu, self.conserve)?),
        })
    }
}

/// Refuses to resume checkpoint `id`, whose state is `stored`, in a run that asks
/// for another sector: a symmetric state in another sector than `--sector` (or its
/// default), a symmetric state under `--conserve none`, or a dense state under
/// `--conserve`. A symmetric state whose total charge cannot be read (a physical
/// leg that is not In) is not checked.
fn check_resume_sector(args: &Args, model: Option<&Model>, stored: &Mps, id: ObjectId) -> anyhow::Result<()> {
    let symmetric = stored.site(0).layout().is_some();
    let asked = match model {
        Some(m) if args.conserve != Conserve::None => Some(args.sector(&m.sites)?),
        _ => None,
    };
    match (symmetric, total_charge(stored), asked) {
        (false, _, None) => Ok(()),
        (true, Some(held), Some(asked)) if held == asked => Ok(()),
        (true, None, Some(_)) => Ok(()),
        (true, Some(held), Some(asked)) => {
            bail!(
            "cannot resume {id}: its state is in sector {held}, this run asks for sector {asked} (--conserve {:?}{}); \
             resume with the checkpoint's sector, or start a new run for another one",
            args.conserve,
            args.sector.as_ref().map_or(String::from(", the default sector"), |s| format!(" --sector {s}"))
        )
        }
        (true, held, None) => bail!(
            "cannot resume {id}: its state is symmetric{}, this run asks for --conserve none",
            held.map_or(String::new(), |q| format!(" (sector {q})"))
        ),
        (false, _, Some(asked)) => bail!(
            "cannot resume {id}: its state is dense (written without --conserve), this run asks for --conserve {:?} \
             sector {asked}",
            args.conserve
        ),
    }
}

fn run(ctl: &Controller<'_>, args: &Args) -> anyhow::Result<()> {
    let opts = DmrgOptions {
        chi_max: args.chi_max,
        cutoff: args.cutoff,
        block: args.block,
        lanczos: LanczosOptions {
            tol: args.lanczos_tol,
            max_krylov: args.lanczos_krylov,
            e_tol: args.lanczos_e_tol,
            min_krylov: args.lanczos_min_krylov,
            dense_max: args.dense_max,
            ..LanczosOptions::default()
        },
        tol_to_truncation: args.tol_to_truncation,
        e_tol_to_truncation: args.e_tol_to_truncation,
        e_tol_to_energy_change: args.e_tol_to_energy_change,
        matvec: match args.matvec {
            MatvecArg::Auto => uni20::tn::Matvec::Auto,
            MatvecArg::Sequential => uni20::tn::Matvec::Sequential,
            MatvecArg::Fused => uni20::tn::Matvec::Fused,
        },
        env_budget: args.env_budget.map(|b| EnvBudget {
            bytes: b.saturating_mul(ctl.compute_ranks().len().max(1) as u64),
            prefetch: !args.no_prefetch,
        }),
    };
    opts.validate()?;
    if args.excited > 0 && args.checkpoint.is_some() {
        bail!("--excited does not checkpoint its runs: drop --checkpoint (or --excited)");
    }
    if !(args.tol.is_finite() && args.tol >= 0.0) {
        bail!("invalid --tol {}: expected a finite number >= 0", args.tol);
    }
    if args.conserve == Conserve::None && args.sector.is_some() {
        bail!("--sector needs --conserve");
    }
    if args.conserve != Conserve::None && args.excited > 0 {
        bail!("--excited is not available with --conserve yet (projecting out lower states needs dense overlaps); use --sector to target another sector");
    }
    if args.conserve != Conserve::None && args.measure {
        bail!("--measure is not available with --conserve yet (the measurements build dense operators)");
    }
    println!(
        "uni20 dmrg: L={} chi_max={} cutoff={:e} block={} seed={}; {} ranks ({}), {} kernel threads per rank",
        args.sites,
        args.chi_max,
        args.cutoff,
        args.block,
        args.seed,
        ctl.size(),
        ctl.transport_kind(),
        ctl.threads_per_rank()
    );
    if let Some(b) = args.env_budget {
        println!(
            "env budget: {} per rank ({} bytes), prefetch {}; offloaded environments go to {}",
            mb(b),
            b,
            if args.no_prefetch { "off" } else { "on" },
            match &args.checkpoint {
                Some(d) => format!("the stores in {}", d.display()),
                None => "a temporary directory per rank (removed at exit)".into(),
            }
        );
    }
    // Refuse an unusable --output now, not after the sweeps.
    if let Some(dir) = &args.output {
        std::fs::create_dir_all(dir).with_context(|| format!("creating the --output directory {}", dir.display()))?;
    }
    // The checkpoints hold the state, not the Hamiltonian: record the model next to them
    // and refuse to resume under another one.
    if let Some(dir) = &args.checkpoint {
        let path = dir.join("model.txt");
        let this = args.model_description();
        match (&args.resume, std::fs::read_to_string(&path)) {
            (Some(id), Ok(recorded)) if recorded.trim() != this => bail!(
                "cannot resume {id}: the checkpoints in {} were written for the model `{}`, this run asks for `{this}`",
                dir.display(),
                recorded.trim()
            ),
            (Some(_), _) => {}
            (None, _) => std::fs::write(&path, format!("{this}\n"))
                .with_context(|| format!("recording the model in {}", path.display()))?,
        }
    }
    let model = args.model()?;
    let (mpo, phys) = match &model {
        None => (Mpo::heisenberg(ctl, args.sites, args.block)?, SPIN_HALF),
        Some(m) => {
            let local = m.hamiltonian.to_mpo(&m.sites, &MpoOptions::default())?;
            println!(
                "model: {:?} ({} sites of {}), MPO bond dimension {}",
                args.model,
                args.sites,
                m.sites[0].name(),
                local.max_bond()
            );
            if args.conserve == Conserve::None {
                (local.to_mpo(ctl, args.block)?, m.sites[0].dim())
            } else {
                (local.to_symmetric_mpo(ctl, &m.sites, args.block)?, m.sites[0].dim())
            }
        }
    };
    let mut dmrg = match args.resume {
        Some(id) => {
            let restored = restore_redistributed(ctl, id).with_context(|| format!("restoring checkpoint {id}"))?;
            if let Some(d) = &restored.redistribution {
                println!("resume: {d}");
            }
            let cp = restored.checkpoint;
            // The checkpoint holds the state, and the state its sector: refuse a run
            // that asks for another one (it would silently continue in the stored one).
            let stored =
                Mps::from_checkpoint(ctl, &cp, args.sites).with_context(|| format!("resuming from checkpoint {id}"))?;
            check_resume_sector(args, model.as_ref(), &stored, id)?;
            drop(stored);
            println!("resumed from checkpoint {id} ({}) after sweep {}", cp.label, cp.step);
            // A resumed run may change the truncation; say so, once. Checkpoints
            // written before the options were recorded resume silently.
            if let Some((chi, cutoff)) = checkpoint_truncation(&cp) {
                let mut changed = Vec::new();
                if chi != args.chi_max {
                    changed.push(format!("--chi-max {chi} -> {}", args.chi_max));
                }
                if cutoff != args.cutoff {
                    changed.push(format!("--cutoff {cutoff:e} -> {:e}", args.cutoff));
                }
                if !changed.is_empty() {
                    println!(
                        "resume: options changed from the checkpoint's: {} (the resumed sweeps use the new values)",
                        changed.join(", ")
                    );
                }
            }
            let d =
                Dmrg::resume(ctl, mpo.clone(), cp, opts).with_context(|| format!("resuming from checkpoint {id}"))?;
            // Blocks of the sweep that the interrupted run did not finish are in no
            // checkpoint and named by no tensor: remove them from every rank's store.
            // The resumed checkpoint becomes the store's named root, so gc keeps it
            // (and drops any other checkpoint of this directory).
            ctl.store().set_root("checkpoint", id)?;
            let g = gc(ctl).context("removing what the interrupted run left in the stores")?;
            if g.removed > 0 {
                println!("gc: removed {} objects left by the interrupted run", g.removed);
            }
            d
        }
        None => {
            // The random start never needs a bond above what the sweeps keep.
            let chi0 = args.init_bond.min(args.chi_max);
            let mps = match &model {
                Some(m) if args.conserve != Conserve::None => {
                    let target = args.sector(&m.sites)?;
                    println!("conserve: {:?}, sector {target}", args.conserve);
                    Mps::symmetric_random(ctl, &m.sites, &target, chi0, args.block, args.seed)?
                }
                _ => Mps::random(ctl, args.sites, phys, chi0, args.block, args.seed)?,
            };
            Dmrg::new(ctl, mpo.clone(), mps, opts)?
        }
    };
    let mut history: Vec<SweepStats> = Vec::new();
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = ProgressBar::new(2 * (args.sites as u64 - 1));
        b.set_style(
            ProgressStyle::with_template("sweep {msg} [{bar:40}] {pos}/{len} steps, {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        b
    });
    // Early sweeps stop their eigensolver before convergence as a matter of
    // course (the state is far from the ground state); only the last sweep's
    // count says whether the result is converged.
    let mut last_unconverged = (0usize, 0.0f64);
    while dmrg.sweeps() < args.sweeps {
        if let Some(b) = &bar {
            b.set_message((dmrg.sweeps() + 1).to_string());
            b.reset();
        }
        let before = ctl.profile();
        let moved_before = residency_stats(ctl);
        let s = dmrg.sweep(ctl, &mut |step| {
            if let Some(b) = &bar {
                b.set_position(step.done as u64);
            }
        })?;
        if let Some(b) = &bar {
            b.finish_and_clear();
        }
        println!(
            "sweep {:>3}  E = {:.12}  dE = {:.3e}  trunc = {:.3e}  chi = {}  time = {:.2} s",
            s.sweep, s.energy, s.energy_change, s.max_truncation, s.max_bond, s.seconds
        );
        if args.profile {
            println!(
                "  profile: lanczos {:.2} s ({} applications, {} of {} steps solved densely, largest residual \
                 {:.1e}, {} steps unconverged), svd {:.2} s, other {:.2} s; peak RSS of this process {}",
                s.lanczos_seconds,
                s.lanczos_applications,
                s.dense_steps,
                2 * (args.sites - 1),
                s.max_residual,
                s.unconverged_steps,
                s.svd_seconds,
                s.seconds - s.lanczos_seconds - s.svd_seconds,
                peak_rss().map_or("unknown".to_string(), |kb| format!("{:.1} MB", kb as f64 / 1024.0))
            );
            print_runtime_profile(&ctl.profile().since(&before), s.seconds);
            let moved = residency_stats(ctl).since(&moved_before);
            println!(
                "  environments: {} in all now; offloaded {} (written {}), prefetched {} this sweep",
                mb(dmrg.engine().env_bytes()),
                mb(moved.bytes_offloaded),
                mb(moved.bytes_written),
                mb(moved.bytes_fetched)
            );
            let c = uni20::dist::plan_cache_stats(ctl);
            println!(
                "  plan cache: {} plans, about {:.1} MB (budget {:.0} MB), {} evictions so far",
                c.entries,
                c.bytes as f64 / 1e6,
                c.budget_bytes as f64 / 1e6,
                c.evictions
            );
        }
        last_unconverged = (s.unconverged_steps, s.max_residual);
        history.push(s.clone());
        if args.checkpoint.is_some() {
            let id = dmrg.checkpoint(ctl)?;
            println!("checkpoint: {id} (after sweep {})", s.sweep);
        }
        if !s.energy.is_finite() {
            bail!("the energy is not finite after sweep {}", s.sweep);
        }
        if s.energy_change.abs() < args.tol {
            break;
        }
    }
    if last_unconverged.0 > 0 {
        eprint_once(&format!(
            "dmrg: warning: in the last sweep the eigensolver did not converge in {} steps (largest residual \
             {:.1e}, above its tolerance): the energy is not converged; raise --lanczos-krylov or --sweeps\n",
            last_unconverged.0, last_unconverged.1
        ));
    }
    match dmrg.energy() {
        Some(e) => println!("final: E = {e:.12} after {} sweeps", dmrg.sweeps()),
        None if args.resume.is_some() => println!(
            "final: no sweep run (the checkpoint is already at --sweeps {})",
            args.sweeps
        ),
        None => println!("final: no sweep run (--sweeps {})", args.sweeps),
    }
    let levels = excited_levels(ctl, args, &mpo, phys, opts, dmrg.mps())?;
    let measured = match (&model, args.measure) {
        (Some(m), true) => Some(measure_state(ctl, m, &mpo, dmrg.mps(), args)?),
        _ => None,
    };
    if let Some(dir) = &args.output {
        write_output(dir, args, &history, measured.as_ref(), &levels)?;
        println!("output: {}", dir.display());
    }
    Ok(())
}

/// `--excited K`: the levels above the ground state `ground` by projection,
/// each converged as the ground state was (`--sweeps`, `--tol`); returns
/// every level's energy, the ground state's first (empty without
/// `--excited`).
fn excited_levels(
    ctl: &Controller<'_>,
    args: &Args,
    mpo: &Mpo,
    phys: usize,
    opts: DmrgOptions,
    ground: &Mps,
) -> anyhow::Result<Vec<f64>> {
    if args.excited == 0 {
        return Ok(Vec::new());
    }
    let mut found = vec![ground.clone()];
    let mut levels = vec![uni20::tn::measure::expectation(ctl, ground, mpo)?];
    println!("level 0: E = {:.12}", levels[0]);
    for k in 1..=args.excited {
        let start = Mps::random(
            ctl,
            args.sites,
            phys,
            args.init_bond.min(args.chi_max),
            args.block,
            args.seed.wrapping_add(k as u64),
        )?;
        let mut d = Dmrg::new(ctl, mpo.clone(), start, opts)?.orthogonal_to(ctl, found.clone(), args.excited_weight)?;
        let mut unconverged = 0;
        while d.sweeps() < args.sweeps {
            let s = d.sweep(ctl, &mut |_| {})?;
            println!(
                "level {k} sweep {:>3}  E = {:.12}  dE = {:.3e}  trunc = {:.3e}  chi = {}",
                s.sweep, s.energy, s.energy_change, s.max_truncation, s.max_bond
            );
            unconverged = s.unconverged_steps;
            if s.energy_change.abs() < args.tol {
                break;
            }
        }
        if unconverged > 0 {
            eprint_once(&format!(
                "dmrg: warning: level {k}: {unconverged} eigensolver steps of the last sweep did not converge\n"
            ));
        }
        let e = d.energy().unwrap_or(f64::NAN);
        println!("level {k}: E = {e:.12}  (gap to level 0: {:.6e})", e - levels[0]);
        levels.push(e);
        found.push(d.mps().clone());
    }
    Ok(levels)
}

/// What `--measure` computes on the final state.
struct Measured {
    profile_name: &'static str,
    profile: Vec<f64>,
    entropy: Vec<f64>,
    energy: f64,
    variance: f64,
}

fn measure_state(ctl: &Controller<'_>, m: &Model, mpo: &Mpo, psi: &Mps, args: &Args) -> anyhow::Result<Measured> {
    let (name, op) = if args.model == ModelName::Hubbard {
        ("n", "Ntot")
    } else {
        ("Sz", "Sz")
    };
    let ops = m
        .sites
        .iter()
        .map(|s| site_operator(ctl, s, op, args.block))
        .collect::<Result<Vec<_>, _>>()?;
    let profile = local_expectations(ctl, psi, &ops)?;
    let entropy = entanglement_entropy(&schmidt_spectra(ctl, psi, args.block)?);
    let (energy, variance) = energy_variance(ctl, psi, mpo)?;
    // Values below the printed precision print as 0, not -0.000000.
    let fmt = |v: &[f64]| {
        v.iter()
            .map(|&x| format!("{:.6}", if x.abs() < 5e-7 { 0.0 } else { x }))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!("measure: <{name}_i> = [{}]", fmt(&profile));
    println!("measure: entropy S_i (bond i, i+1) = [{}]", fmt(&entropy));
    println!("measure: <H> = {energy:.12}  <H^2> - <H>^2 = {variance:.3e}");
    Ok(Measured {
        profile_name: name,
        profile,
        entropy,
        energy,
        variance,
    })
}

fn write_npy(path: &std::path::Path, v: &[f64]) -> anyhow::Result<()> {
    use npyz::WriterBuilder;
    let mut w = npyz::WriteOptions::<f64>::new()
        .default_dtype()
        .shape(&[v.len() as u64])
        .writer(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        ))
        .begin_nd()?;
    w.extend(v.iter().copied())?;
    w.finish().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn write_output(
    dir: &std::path::Path,
    args: &Args,
    history: &[SweepStats],
    m: Option<&Measured>,
    levels: &[f64],
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let sweeps: Vec<serde_json::Value> = history
        .iter()
        .map(|s| {
            serde_json::json!({
                "sweep": s.sweep, "energy": s.energy,
                "energy_change": if s.energy_change.is_finite() { Some(s.energy_change) } else { None },
                "max_truncation": s.max_truncation, "max_bond": s.max_bond,
                "lanczos_applications": s.lanczos_applications, "dense_steps": s.dense_steps, "seconds": s.seconds,
            })
        })
        .collect();
    let mut doc = serde_json::json!({
        "model": format!("{:?}", args.model).to_lowercase(), "parameters": args.model_description(),
        "sites": args.sites, "chi_max": args.chi_max, "cutoff": args.cutoff, "seed": args.seed,
        "init_bond": args.init_bond.min(args.chi_max), "sweeps": sweeps,
    });
    if !levels.is_empty() {
        doc["levels"] = serde_json::json!(levels);
    }
    if let Some(m) = m {
        doc["measure"] = serde_json::json!({
            "profile": m.profile_name, "energy": m.energy, "variance": m.variance,
        });
        write_npy(&dir.join("profile.npy"), &m.profile)?;
        write_npy(&dir.join("entropy.npy"), &m.entropy)?;
        plot(&dir.join("dmrg.svg"), history, m)?;
    }
    let json = dir.join("sweeps.json");
    std::fs::write(&json, serde_json::to_string_pretty(&doc)?)
        .with_context(|| format!("writing {}", json.display()))?;
    Ok(())
}

/// Two panels: |E_sweep - E_last| against the sweep (log scale) and the entanglement
/// entropy profile.
fn plot(path: &std::path::Path, history: &[SweepStats], m: &Measured) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (900, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let (a, b) = root.split_horizontally(450);
    let last = history.last().map_or(0.0, |s| s.energy);
    let pts: Vec<(f64, f64)> = history
        .iter()
        .map(|s| (s.sweep as f64, (s.energy - last).abs().max(1e-16)))
        .collect();
    let n = history.len().max(2) as f64;
    let mut c1 = ChartBuilder::on(&a)
        .caption("energy convergence", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0.5..n + 0.5, (1e-16f64..10.0f64).log_scale())?;
    c1.configure_mesh().x_desc("sweep").y_desc("|E - E_final|").draw()?;
    c1.draw_series(LineSeries::new(pts.iter().copied(), &BLUE))?;
    c1.draw_series(pts.iter().map(|&p| Circle::new(p, 3, BLUE.filled())))?;
    let smax = m.entropy.iter().copied().fold(0.1f64, f64::max) * 1.1;
    let mut c2 = ChartBuilder::on(&b)
        .caption("entanglement entropy", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..m.entropy.len().max(1) as f64, 0.0..smax)?;
    c2.configure_mesh().x_desc("bond").y_desc("S").draw()?;
    c2.draw_series(LineSeries::new(
        m.entropy.iter().enumerate().map(|(i, s)| (i as f64 + 0.5, *s)),
        &RED,
    ))?;
    root.present()?;
    Ok(())
}

/// The peak resident set size of this process in KiB (`VmHWM` of
/// `/proc/self/status`; Linux only). In-process, all ranks share it; under
/// MPI it is the root's.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Writes `text` to stderr in one write (a message written piecewise is cut
/// apart by `mpirun --tag-output`).
fn eprint_once(text: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

fn main() -> ExitCode {
    // Freed buffers stay in the process for the next step (see the function's docs).
    uni20::keep_freed_memory();
    let args = Args::parse();
    uni20::init_logging();
    // A resume reads an existing store: refuse a missing directory before the universe
    // starts, which would create an empty one.
    if let (Some(id), Some(dir)) = (&args.resume, &args.checkpoint) {
        let problem = if !dir.exists() {
            Some("does not exist")
        } else if !dir.is_dir() {
            Some("is not a directory")
        } else {
            None
        };
        if let Some(problem) = problem {
            eprint_once(&format!(
                "dmrg: error: cannot resume {id}: checkpoint directory {} {problem}\n",
                dir.display()
            ));
            return ExitCode::FAILURE;
        }
    }
    let mut universe = uni20::universe();
    if let Some(dir) = &args.checkpoint {
        universe = universe.store_dir(dir);
    }
    match universe.run(|ctl| run(ctl, &args)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprint_once(&format!("dmrg: error: {e:#}\n"));
            ExitCode::FAILURE
        }
        Err(e) => {
            eprint_once(&format!("dmrg: {e}\n"));
            ExitCode::FAILURE
        }
    }
}

/// The `--profile` line on where one sweep's wall time went: the workers'
/// busy time (kernels and block transfers; the busiest rank and the mean)
/// against the root's planning, submission and waiting, and the rest of
/// the root's time (the sweep engine itself), with the plan-cache hit rate
/// and the block bytes the sweep's contractions and element-wise steps
/// moved between ranks (and found already held as replicas).
fn print_runtime_profile(p: &uni20::RootProfile, wall: f64) {
    let pct = |x: f64| if wall > 0.0 { 100.0 * x / wall } else { 0.0 };
    let busy = p.worker_busy_max();
    let rest = wall - p.plan_seconds - p.submit_seconds - p.wait_seconds;
    println!(
        "  runtime: {} operations; workers busy {:.2} s ({:.0} %, busiest rank; mean {:.2} s), outside them {:.2} s \
         ({:.0} %); root: plan {:.3} s ({:.0} %), submit {:.3} s ({:.0} %), wait {:.2} s ({:.0} %), other {:.2} s \
         ({:.0} %); plan cache {} hits / {} lookups ({:.1} %); blocks moved {:.1} MB, {:.1} MB found as replicas",
        p.operations,
        busy,
        pct(busy),
        p.worker_busy_mean(),
        wall - busy,
        pct(wall - busy),
        p.plan_seconds,
        pct(p.plan_seconds),
        p.submit_seconds,
        pct(p.submit_seconds),
        p.wait_seconds,
        pct(p.wait_seconds),
        rest,
        pct(rest),
        p.plan_cache_hits,
        p.plan_cache_hits + p.plan_cache_misses,
        100.0 * p.plan_cache_hit_rate(),
        p.bytes_moved as f64 * 1e-6,
        p.bytes_from_replicas as f64 * 1e-6
    );
}
