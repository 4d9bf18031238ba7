//! The `uni20` command-line tool.
//!
//! - `uni20 contract SPEC A.npy [B.npy] -o C.npy [--ranks N] [--block SIZE]`
//!   evaluates a numpy einsum spec over one or two npy files on the
//!   in-process universe, or on MPI when launched by `mpirun` from a build
//!   with feature `mpi`.
//! - `uni20 info` prints the transport, ranks, registered commands and local
//!   backends.
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
    /// Show the transport, ranks, registered commands and local backends.
    Info,
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
                    uni20::dist::resolve_npy_output(output)?;
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
    for (name, avail) in uni20::dispatch::available_backends(ctl.threads_per_rank()) {
        match avail {
            Ok(()) => println!("  {name:<12} available"),
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
