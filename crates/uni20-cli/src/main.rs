//! The `uni20` command-line tool.
//!
//! - `uni20 contract SPEC A.npy [B.npy] -o C.npy [--ranks N] [--block SIZE]`
//!   evaluates a numpy einsum spec over one or two npy files on the
//!   in-process universe, or on MPI when launched by `mpirun` from a build
//!   with feature `mpi`.
//! - `uni20 info` prints the transport, ranks, registered commands, local
//!   backends and the tuning table of `UNI20_TUNE_FILE`.
//! - `uni20 tune [-o FILE] [--sizes ...] [--dtypes ...]` times every local
//!   backend that accepts each standard contraction shape (at the ranks'
//!   thread budget) and saves the fastest per shape class to FILE (default:
//!   `UNI20_TUNE_FILE`), merged with the entries already there.
//!
//! Exit status: 0 on success, 1 with a one-line reason on bad input or a
//! failed job; no output file is written on failure.
//!
//! The output path rule, the temporary file and what a failure leaves are
//! in [`OUTPUT_HELP`] (printed by `uni20 contract --help`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use uni20::prelude::*;

#[derive(Parser)]
#[command(name = "uni20", version, about = "Distributed tensor contractions across MPI ranks")]
struct Cli {
    /// Ranks of the in-process universe (ignored under mpirun). Default: UNI20_RANKS or 4.
    #[arg(long, global = true)]
    ranks: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

/// How `-o` is written, shown by `uni20 contract --help`.
const OUTPUT_HELP: &str = "\
Output (-o): the result goes to a temporary file .NAME.uni20-tmp-PID-N beside
the file to replace and is renamed over it only when complete, so the name
never holds a partial file.
  - a regular file is replaced (its permission bits kept);
  - a new path is created (its directory must exist);
  - a symlink is followed: its final target is replaced (a dangling link's
    target is created) and the link itself stays;
  - a directory, character or block device (e.g. /dev/null), FIFO or socket
    is refused with exit status 1 before any work.

On failure (bad input, a failed or aborted job, a panic, SIGTERM, SIGINT or
SIGHUP, including the launcher's SIGTERM after another MPI rank aborted)
neither the output nor the temporary file remains. Only SIGKILL of the root
rank cannot be handled: it leaves the temporary file, never a file under the
output's name.";

#[derive(Subcommand)]
enum Command {
    /// C = alpha * einsum(SPEC, A[, B]) [+ beta * C_IN], written to OUTPUT.
    #[command(after_help = OUTPUT_HELP)]
    Contract {
        /// numpy einsum spec over one or two operands: "ij,jk->ik", "ij,jk"
        /// (implicit output), "ii->" (trace), "ii->i" (diagonal),
        /// "...ij,...jk->...ik" (ellipsis with broadcasting).
        #[arg(allow_hyphen_values = true)]
        spec: String,
        /// The operands, one per input of SPEC (.npy: f4 f8 c8 c16, little-
        /// or big-endian, C or Fortran order).
        #[arg(required = true, num_args = 1..=2, value_name = "OPERAND")]
        operands: Vec<PathBuf>,
        /// Output file (.npy, little-endian, C order); written only on success (see below).
        #[arg(short, long)]
        output: PathBuf,
        /// Block size per mode of the distributed tensors.
        #[arg(long, default_value_t = 64)]
        block: usize,
        /// Scale of the product (real part).
        #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
        alpha: f64,
        /// Existing output to accumulate into (.npy).
        #[arg(long = "c-in")]
        c_in: Option<PathBuf>,
        /// Scale of C_IN.
        #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
        beta: f64,
        /// Print the plan summary.
        #[arg(long)]
        plan: bool,
    },
    /// Show the transport, ranks, registered commands, local backends and the tuning table.
    Info,
    /// Time the local backends on standard shapes and save the fastest per shape class.
    Tune {
        /// Tuning file to write (merged with its entries). Default: UNI20_TUNE_FILE.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Extents n of the measured shapes: ij,jk->ik (n x n x n), a skinny
        /// ij,jk->ik (8n x n/8 x n) and abc,bd->acd (n x 8 x n times 8 x n/8).
        #[arg(long, value_delimiter = ',', default_values_t = [64usize, 256, 1024])]
        sizes: Vec<usize>,
        /// Element types measured (f32, f64, c32, c64).
        #[arg(long, value_delimiter = ',', default_values_t = ["f64".to_string(), "c64".to_string()])]
        dtypes: Vec<String>,
    },
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let mut builder = uni20::universe();
    if let Some(n) = cli.ranks {
        anyhow::ensure!(n > 0, "--ranks must be at least 1");
        builder = builder.ranks(n);
    }
    builder
        .run(|ctl| -> anyhow::Result<()> {
            match &cli.command {
                Command::Info => info(ctl),
                Command::Tune { output, sizes, dtypes } => tune(ctl, output.as_deref(), sizes, dtypes),
                Command::Contract {
                    spec,
                    operands,
                    output,
                    block,
                    alpha,
                    c_in,
                    beta,
                    plan,
                } => {
                    anyhow::ensure!(*block > 0, "--block must be at least 1");
                    anyhow::ensure!(
                        alpha.is_finite() && beta.is_finite(),
                        "--alpha and --beta must be finite numbers"
                    );
                    anyhow::ensure!(
                        *beta == 0.0 || c_in.is_some(),
                        "--beta needs --c-in (the output to accumulate into)"
                    );
                    // Validate the spec and the output path before touching any file.
                    let parsed = uni20::EinsumSpec::parse(spec).map_err(|e| {
                        anyhow::anyhow!("invalid einsum spec {:?}: {}", clip(spec), clip(&e.to_string()))
                    })?;
                    anyhow::ensure!(
                        parsed.num_inputs() == operands.len(),
                        "einsum spec {:?} has {} input(s), but {} operand file(s) were given",
                        clip(spec),
                        parsed.num_inputs(),
                        operands.len()
                    );
                    uni20::dist::npy::resolve_npy_output(output)?;
                    // On the root: SIGTERM/SIGINT/SIGHUP remove the temporary output file.
                    uni20::worker::cleanup::install_signal_handlers().map_err(anyhow::Error::msg)?;
                    let inputs = operands
                        .iter()
                        .map(|p| read_npy(ctl, p, *block))
                        .collect::<Result<Vec<_>, _>>()?;
                    let tc = match c_in {
                        Some(p) => Some(read_npy(ctl, p, *block)?),
                        None => None,
                    };
                    let opts = ContractOptions {
                        alpha: C64::new(*alpha, 0.0),
                        beta: C64::new(*beta, 0.0),
                        c: tc.as_ref(),
                        ..Default::default()
                    };
                    let refs: Vec<&DistTensor> = inputs.iter().collect();
                    let c = uni20::dist::einsum(ctl, &parsed, &refs, &opts)?;
                    write_npy(ctl, &c, output)?;
                    if let (true, Some(p)) = (*plan, c.plan_summary()) {
                        eprintln!("plan: {p}");
                    }
                    Ok(())
                }
            }
        })
        .map_err(anyhow::Error::from)?
}

fn info(ctl: &Controller<'_>) -> anyhow::Result<()> {
    println!("uni20 {}", env!("CARGO_PKG_VERSION"));
    println!("transport: {}", ctl.transport_kind());
    println!(
        "ranks: {} (root 0, compute ranks {:?}, storage ranks {:?}); universe {:#018x}",
        ctl.size(),
        ctl.compute_ranks(),
        ctl.storage_ranks(),
        ctl.universe_id()
    );
    println!("kernel threads per rank: {}", ctl.threads_per_rank());
    println!("registered commands:");
    for e in ctl.registry().entries() {
        println!(
            "  {:<24} schema v{}  id {:#018x}  ({}, {})",
            e.wire_name, e.schema_version, e.command_id, e.debug_name, e.location
        );
    }
    println!("registry digest: {:#018x}", ctl.registry().digest());
    println!("local contraction backends (available here; selection order is UNI20_BACKENDS: cpu or gpu-first):");
    for (name, avail) in uni20::dispatch::backends::available_backends(ctl.threads_per_rank()) {
        match avail {
            Ok(()) => println!("  {name:<12} available{}", backend_detail(&name)),
            Err(why) => println!("  {name:<12} unavailable: {why}"),
        }
    }
    println!("stores (objects, bytes resident / pinned / spilled, releases pending on the rank / queued at the root):");
    for s in ctl.store_stats()? {
        println!(
            "  rank {:<3} {:>8} objects  {:>12} B resident  {:>12} B pinned  {:>12} B spilled  {} / {} releases pending",
            s.rank,
            s.objects,
            s.bytes_resident,
            s.bytes_pinned,
            s.bytes_spilled,
            s.releases_pending_on_rank,
            s.releases_queued_at_root
        );
    }
    match uni20::dispatch::tune::TuneTable::from_env()? {
        Some(table) => {
            let path = table.path().map(|p| p.display().to_string()).unwrap_or_default();
            println!(
                "tuning table ({}={path}): {} shape class(es); classes without an entry are measured on first sight",
                uni20::dispatch::tune::TUNE_FILE_ENV,
                table.len()
            );
            for line in table.to_string().lines() {
                println!("  {line}");
            }
        }
        None => println!(
            "tuning table: none (static backend order; set {} to a file, or run `uni20 tune -o FILE`)",
            uni20::dispatch::tune::TUNE_FILE_ENV
        ),
    }
    Ok(())
}

/// Extra words after `available` for a backend: the linked BLAS library.
fn backend_detail(name: &str) -> String {
    #[cfg(feature = "blas")]
    if name == "blas" {
        return format!(" ({})", uni20::dispatch::backends::BlasBackend::library());
    }
    let _ = name;
    String::new()
}

/// A tensor of `shape` and `dtype` with small integer entries (period `p`).
fn operand(shape: &[usize], dtype: DType, p: usize) -> anyhow::Result<LocalTensor> {
    use uni20::dispatch::{TensorData, C32};
    let n: usize = shape.iter().product();
    let v = |x: usize| ((x % p) as f64) - (p / 2) as f64;
    let data = match dtype {
        DType::F32 => TensorData::F32((0..n).map(|x| v(x) as f32).collect()),
        DType::F64 => TensorData::F64((0..n).map(v).collect()),
        DType::C32 => TensorData::C32((0..n).map(|x| C32::new(v(x) as f32, v(x + 1) as f32)).collect()),
        _ => TensorData::C64((0..n).map(|x| C64::new(v(x), v(x + 1))).collect()),
    };
    Ok(LocalTensor::from_data(shape, data)?)
}

/// The shapes `uni20 tune` measures for extent `n`: (spec, A shape, B shape).
fn tune_shapes(n: usize) -> Vec<(&'static str, Vec<usize>, Vec<usize>)> {
    let s = (n / 8).max(1);
    vec![
        ("ij,jk->ik", vec![n, n], vec![n, n]),
        ("ij,jk->ik", vec![8 * n, s], vec![s, n]),
        ("abc,bd->acd", vec![n, 8, n], vec![8, s]),
    ]
}

fn tune(
    ctl: &Controller<'_>,
    output: Option<&std::path::Path>,
    sizes: &[usize],
    dtypes: &[String],
) -> anyhow::Result<()> {
    use std::sync::Arc;
    use uni20::dispatch::backends::ContractProblem;
    use uni20::dispatch::tune::TuneTable;
    use uni20::dispatch::view::AnyView;
    let path = match output {
        Some(p) => p.to_path_buf(),
        None => std::env::var_os(uni20::dispatch::tune::TUNE_FILE_ENV)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "no tuning file: pass -o FILE or set {}",
                    uni20::dispatch::tune::TUNE_FILE_ENV
                )
            })?,
    };
    anyhow::ensure!(sizes.iter().all(|&n| n > 0), "--sizes must be positive");
    let dtypes = dtypes
        .iter()
        .map(|d| d.parse::<DType>().map_err(|e| anyhow::anyhow!("--dtypes: {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let table = Arc::new(TuneTable::open(&path)?);
    let list = ctl.backends().clone().with_tuning(table.clone());
    println!(
        "measuring backends {:?} at {} thread(s) per rank",
        list.names(),
        ctl.threads_per_rank()
    );
    let one = C64::new(1.0, 0.0);
    for &dtype in &dtypes {
        for &n in sizes {
            for (spec, sa, sb) in tune_shapes(n) {
                let (a, b) = (operand(&sa, dtype, 7)?, operand(&sb, dtype, 5)?);
                let ops = [AnyView::of_tensor(&a), AnyView::of_tensor(&b)];
                let problem = ContractProblem::new(spec, one, &ops, C64::new(0.0, 0.0), None)?;
                let class = uni20::dispatch::tune::ShapeClass::of(&problem, list.thread_budget());
                match list.tune(&problem) {
                    Some(entry) => println!("  {spec} {sa:?} {sb:?}: {class} -> {entry}"),
                    None => println!(
                        "  {spec} {sa:?} {sb:?}: {class}: fewer than two measurable backends accept; nothing to choose"
                    ),
                }
            }
        }
    }
    table.save(&path)?;
    println!("saved {} shape class(es) to {}", table.len(), path.display());
    Ok(())
}

/// Shortens user text echoed in an error (a spec can be arbitrarily long).
fn clip(text: &str) -> String {
    const MAX: usize = 80;
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}... ({} characters)", &text[..i], text.chars().count()),
        None => text.to_string(),
    }
}

fn main() -> ExitCode {
    uni20::init_logging();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            e.exit()
        }
        Err(e) => {
            // One line, status 1, like every other bad input (`uni20 --help` for usage).
            let text = e.to_string();
            let first = text
                .lines()
                .next()
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ");
            eprintln!("uni20: error: {} (see `uni20 --help`)", clip(first));
            return ExitCode::FAILURE;
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uni20: error: {}", format!("{e:#}").replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}
