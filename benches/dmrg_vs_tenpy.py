#!/usr/bin/env python3
"""Finite two-site DMRG: TeNPy against uni20's `examples/dmrg.rs`, interleaved run by run.

What it measures
----------------
Both programs find the ground state of the open spin-1/2 Heisenberg chain

    H = sum_{i=0}^{L-2} S_i . S_{i+1}        (J = 1, no field)

by finite two-site DMRG with the same number of sites L, the same largest bond dimension
chi_max, the same truncation cutoff and the same number of sweeps (no early stop), and this
script records for every sweep the energy and the wall time of that sweep.

* TeNPy (optional: `pip install physics-tenpy`; without it the TeNPy side is skipped, and
  with `--skip-uni20` too the script says so and exits 0) runs in this process:
  `tenpy.models.spins.SpinChain` (S = 1/2, Jx = Jy = Jz = 1, hz = 0, bc_MPS = 'finite',
  conserve = None, i.e. dense tensors with no charge blocks), a Neel product state (or
  `--init random`: a seeded random product state of real spins in the x-z plane),
  `TwoSiteDMRGEngine` with trunc_params {'chi_max': chi, 'svd_min': cutoff,
  'trunc_cut': None} (`--tenpy-cutoff trunc_cut` swaps the roles: discarded weight
  sum s^2 <= cutoff^2), mixer off and TeNPy's default Lanczos settings. The script drives
  the engine itself, the way `engine.run()` does (`pre_run_initialize()`, then one
  `run_iteration()` per sweep: with N_sweeps_check = 1 that is one `sweep()` plus TeNPy's
  statistics), and times each iteration with `time.perf_counter()`. The energy of a sweep is
  `sweep_stats['E'][-1]` (the Lanczos energy of the sweep's last two-site update, before its
  truncation), with `max_trunc_err`, `max_chi`, the number of two-site updates (and of those
  TeNPy solved by exact diagonalization, H_eff dimension < 400) and the sum of their Lanczos
  steps (the eigensolvers' iteration counts differ between the programs, so seconds per
  sweep compare whole sweeps, not one matvec). Building the model, the MPS and the engine is
  timed separately ("setup"); the first sweep still includes building the right
  environments, which TeNPy makes lazily.
* uni20 runs as a subprocess, `<command> --sites L --chi-max CHI --cutoff CUT --sweeps N
  --tol 0`, in one or both of two layouts (`--uni20-mode`, default both):
    - `inproc`: one process, one rank (UNI20_RANKS=1: the root computes its own blocks),
      UNI20_THREADS_PER_RANK = RAYON_NUM_THREADS = --threads (`--inproc-ranks` changes the
      rank count);
    - `mpi3`: `cargo xtask mpirun -n 3 --timeout T --exe <binary built with --features mpi>
      -- <args>` (root + 2 workers), UNI20_THREADS_PER_RANK = RAYON_NUM_THREADS =
      max(1, --threads // 2), so that the two workers together have --threads threads.
  Both binaries are built first, outside any timing: `cargo build --release --example dmrg`
  and `cargo build --release --features mpi --example dmrg`, each copied to
  `target/release/examples/dmrg-bench-{inproc,mpi}` because cargo gives both feature sets
  the same output path (running `cargo run` / `cargo xtask mpirun --example` alternately
  would relink the example before every run); the xtask is built then too. `--no-build`
  uses the copies of an earlier run.
  The example prints one line per sweep on stdout,
      sweep   3  E = -44.127739869812  dE = -1.234e-05  trunc = 3.210e-11  chi = 100  time = 12.34 s
  which this script parses (other lines, and lines of ranks other than 0 under mpirun's
  `--tag-output`, are ignored). `time` is taken as the wall time of that sweep alone; pass
  `--uni20-time cumulative` if the example prints the time since its start instead.
  `--uni20-cmd CMD` replaces the inproc command (and the mpi3 one, unless `--uni20-mpi-cmd`
  is given) with CMD (split like a shell would; the DMRG arguments are appended) and skips
  the build: use it to test the parsing with a stand-in program, or to run another build.

Interleaving: on a shared machine whose speed drifts over minutes, back-to-back runs of two
programs are not comparable. For each of `--reps` repetitions the script runs every tool
once, rotating which goes first (rep 0: TeNPy, uni20 inproc, uni20 mpi3; rep 1: uni20
inproc, uni20 mpi3, TeNPy; ...), so drift hits all of them alike.

Threads: OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS (and the others below) are
set to `--threads` (default 2) before numpy is imported, so TeNPy's BLAS gets the same thread
budget as uni20. The uni20 subprocesses inherit them too.

Output: a per-sweep table (sweep, E and seconds of TeNPy, uni20 inproc, uni20 mpi3; with
several repetitions, energies of the first repetition and the median seconds), then a
summary: final energies, |E - E_ref| where a reference is known (L = 16: exact
diagonalization, -6.9117371455749; L = 100: DMRG, -44.127739; `--e-ref` sets one), mean
seconds per sweep per tool over all sweeps and over sweeps 2..N, and the ratios
uni20 / TeNPy (above 1: uni20 is slower). `--json OUT` writes every raw number, the
commands, the environment and the versions.

Run (from the repository root):

    python3 benches/dmrg_vs_tenpy.py                      # L=100, chi=100, 10 sweeps, both layouts
    python3 benches/dmrg_vs_tenpy.py --sites 16 --chi 32 --sweeps 4 --skip-uni20
    python3 benches/dmrg_vs_tenpy.py --uni20-mode inproc --reps 3 --json dmrg.json

Exit status: 0 when every requested run succeeded (or TeNPy is missing and only TeNPy was
requested: skipped), 1 when a uni20 run failed or printed no sweep line, 2 on bad arguments.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Reference ground-state energies of the open spin-1/2 Heisenberg chain (J = 1).
E_REF = {
    16: -6.9117371455749,  # exact diagonalization
    100: -44.127739,  # DMRG, converged in chi; 6 decimals, so |E - E_ref| < 1e-6 is not resolved
}

SWEEP_RE = re.compile(r"^sweep\s+(\d+)\s+E = (\S+)\s+dE = (\S+)\s+trunc = (\S+)\s+chi = (\d+)\s+time = (\S+) s$")
# Rank tags of mpirun: Open MPI `--tag-output` writes "[jobid,rank]<stdout>:", MPICH
# `-prepend-rank` writes "[rank] ".
MPI_TAG_RE = re.compile(r"^\[(?:\d+,)?(\d+)\](?:<stdout>:)?\s?")

THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)

TOOLS = ("tenpy", "inproc", "mpi3")
LABEL = {"tenpy": "TeNPy", "inproc": "uni20 inproc", "mpi3": "uni20 mpi3"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Finite two-site DMRG on the open Heisenberg chain: TeNPy vs uni20, interleaved.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--sites", type=int, default=100, help="chain length L")
    p.add_argument("--chi", type=int, default=100, help="largest bond dimension chi_max")
    p.add_argument("--cutoff", type=float, default=1e-10, help="truncation cutoff")
    p.add_argument("--sweeps", type=int, default=10, help="number of sweeps (no early stop)")
    p.add_argument("--reps", type=int, default=1, help="repetitions of the whole interleaved set")
    p.add_argument("--threads", type=int, default=2, help="thread budget of each tool")
    p.add_argument("--inproc-ranks", type=int, default=1, help="UNI20_RANKS of the inproc mode (default 1)")
    p.add_argument("--uni20-mode", choices=("inproc", "mpi3", "both"), default="both")
    p.add_argument("--skip-uni20", action="store_true", help="run TeNPy only")
    p.add_argument("--skip-tenpy", action="store_true", help="run uni20 only")
    p.add_argument(
        "--uni20-cmd",
        help="command (shell-split) replacing the inproc one (and the mpi3 one unless "
        "--uni20-mpi-cmd is given); the DMRG arguments are appended; implies --no-build",
    )
    p.add_argument("--uni20-mpi-cmd", help="command (shell-split) replacing the mpi3 one; implies --no-build")
    p.add_argument("--no-build", action="store_true", help="use the binaries already copied by an earlier run")
    p.add_argument(
        "--uni20-time",
        choices=("per-sweep", "cumulative"),
        default="per-sweep",
        help="meaning of the example's `time = X s`",
    )
    p.add_argument("--uni20-timeout", type=float, default=7200.0, help="seconds before a uni20 run is killed")
    p.add_argument("--init", choices=("neel", "random"), default="neel", help="TeNPy initial product state")
    p.add_argument("--seed", type=int, default=1, help="seed of --init random")
    p.add_argument(
        "--tenpy-cutoff",
        choices=("svd_min", "trunc_cut"),
        default="svd_min",
        help="TeNPy truncation parameter that gets --cutoff (the other is None)",
    )
    p.add_argument("--e-ref", type=float, help="reference energy (default: known value for L=16 and L=100)")
    p.add_argument("--json", metavar="OUT", help="write every raw number to this JSON file")
    args = p.parse_args(argv)
    for name in ("sites", "chi", "sweeps", "reps", "threads"):
        if getattr(args, name) < 1:
            p.error("--%s must be at least 1" % name)
    if args.sites < 2:
        p.error("--sites must be at least 2")
    if args.uni20_timeout <= 0:
        p.error("--uni20-timeout must be positive")
    if args.cutoff < 0:
        p.error("--cutoff must be non-negative")
    if args.skip_uni20 and args.skip_tenpy:
        p.error("--skip-uni20 and --skip-tenpy leave nothing to run")
    return args


def uni20_modes(args):
    if args.skip_uni20:
        return []
    return ["inproc", "mpi3"] if args.uni20_mode == "both" else [args.uni20_mode]


# ----------------------------------------------------------------------------------------
# TeNPy


def run_tenpy(args):
    """One TeNPy DMRG run; returns a dict of per-sweep lists and metadata."""
    import numpy as np
    from tenpy.algorithms.dmrg import TwoSiteDMRGEngine
    from tenpy.models.spins import SpinChain
    from tenpy.networks.mps import MPS

    t_setup = time.perf_counter()
    model = SpinChain(
        {
            "L": args.sites,
            "S": 0.5,
            "Jx": 1.0,
            "Jy": 1.0,
            "Jz": 1.0,
            "hz": 0.0,
            "bc_MPS": "finite",
            "conserve": None,
        }
    )
    sites = model.lat.mps_sites()
    if args.init == "neel":
        p_state = ["up" if i % 2 == 0 else "down" for i in range(args.sites)]
    else:
        rng = np.random.default_rng(args.seed)
        theta = rng.uniform(0.0, np.pi, size=args.sites)
        p_state = [np.array([np.cos(t / 2), np.sin(t / 2)]) for t in theta]
    try:  # unit_cell_width: TeNPy >= 1.0 warns without it (one site per unit cell in a chain)
        psi = MPS.from_product_state(sites, p_state, bc="finite", unit_cell_width=1)
    except TypeError:
        psi = MPS.from_product_state(sites, p_state, bc="finite")
    trunc = {"chi_max": args.chi, "svd_min": None, "trunc_cut": None}
    trunc[args.tenpy_cutoff] = args.cutoff
    # The loop below fixes the number of sweeps, so TeNPy's stopping criteria (max_sweeps,
    # max_E_err) never run; min_sweeps = --sweeps says the same to the engine.
    options = {
        "trunc_params": trunc,
        "mixer": False,
        "min_sweeps": args.sweeps,
        "N_sweeps_check": 1,
    }
    engine = TwoSiteDMRGEngine(psi, model, options)
    engine.pre_run_initialize()
    setup_s = time.perf_counter() - t_setup

    sweeps = []
    for k in range(args.sweeps):
        n_before = len(engine.update_stats["N_lanczos"])
        t0 = time.perf_counter()
        engine.run_iteration()
        dt = time.perf_counter() - t0
        n_lanczos = engine.update_stats["N_lanczos"][n_before:]
        st = engine.sweep_stats
        sweeps.append(
            {
                "sweep": k + 1,
                "E": float(st["E"][-1]),
                "dE": None if np.isnan(st["Delta_E"][-1]) else float(st["Delta_E"][-1]),  # NaN after sweep 1
                "trunc": float(st["max_trunc_err"][-1]),
                "chi": int(st["max_chi"][-1]),
                "time": dt,
                "updates": len(n_lanczos),
                # N_lanczos is -1 where TeNPy diagonalized H_eff exactly (dimension < 400)
                "ed_updates": sum(1 for n in n_lanczos if n < 0),
                "lanczos_iters": int(sum(n for n in n_lanczos if n > 0)),
            }
        )
        print(
            "  [TeNPy] sweep %3d  E = %.12f  trunc = %.3e  chi = %d  time = %.2f s  "
            "(%d updates, %d by exact diagonalization, %d Lanczos steps)"
            % (
                k + 1,
                sweeps[-1]["E"],
                sweeps[-1]["trunc"],
                sweeps[-1]["chi"],
                dt,
                len(n_lanczos),
                sweeps[-1]["ed_updates"],
                sweeps[-1]["lanczos_iters"],
            ),
            flush=True,
        )
    return {
        "ok": True,
        "setup_s": setup_s,
        "sweeps": sweeps,
        "H_dtype": str(model.H_MPO.dtype),
        "psi_dtype": str(psi.dtype),
        "lanczos_params": {k: _plain(v) for k, v in engine.lanczos_params.as_dict().items()},
        "trunc_params": trunc,
    }


def _finite(obj):
    """A copy of `obj` with every non-finite float (NaN, inf: for example TeNPy options that
    default to infinity) replaced by None, so the JSON stays strict."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _plain(v):
    """A JSON-friendly copy of a TeNPy option value."""
    return v if isinstance(v, (bool, int, float, str, type(None))) else repr(v)


# ----------------------------------------------------------------------------------------
# uni20


def dmrg_args(args):
    return [
        "--sites", str(args.sites),
        "--chi-max", str(args.chi),
        "--cutoff", repr(args.cutoff),
        "--sweeps", str(args.sweeps),
        "--tol", "0",
    ]  # fmt: skip


def bench_binary(mode):
    return os.path.join(REPO, "target", "release", "examples", "dmrg-bench-%s" % ("mpi" if mode == "mpi3" else mode))


def build_uni20(modes):
    """Build the example for each mode (outside any timing) and copy it aside."""
    for mode in modes:
        cmd = ["cargo", "build", "--release", "--example", "dmrg"]
        if mode == "mpi3":
            cmd[2:2] = ["--features", "mpi"]
        print("$ " + " ".join(cmd), flush=True)
        subprocess.run(cmd, cwd=REPO, check=True)
        shutil.copy2(os.path.join(REPO, "target", "release", "examples", "dmrg"), bench_binary(mode))
        if mode == "mpi3":  # `cargo xtask` compiles the xtask on first use: do it here, untimed
            subprocess.run(["cargo", "build", "--quiet", "--package", "xtask"], cwd=REPO, check=True)


def uni20_command(args, mode):
    """The argv and extra environment of one uni20 run."""
    if mode == "inproc":
        prefix = shlex.split(args.uni20_cmd) if args.uni20_cmd else [bench_binary("inproc")]
        per_rank = args.threads
        env = {"UNI20_RANKS": str(args.inproc_ranks)}
    else:
        custom = args.uni20_mpi_cmd or args.uni20_cmd
        if custom:
            prefix = shlex.split(custom)
        else:
            prefix = ["cargo", "xtask", "mpirun", "-n", "3", "--timeout", str(int(args.uni20_timeout)),
                      "--exe", bench_binary("mpi3"), "--"]  # fmt: skip
        per_rank = max(1, args.threads // 2)
        env = {}
    env.update({"UNI20_THREADS_PER_RANK": str(per_rank), "RAYON_NUM_THREADS": str(per_rank)})
    return prefix + dmrg_args(args), env


def parse_sweep_line(line):
    """The fields of one sweep line, or None. Lines of ranks other than 0 give None."""
    line = line.rstrip("\r\n")
    tag = MPI_TAG_RE.match(line)
    if tag:
        if int(tag.group(1)) != 0:
            return None
        line = line[tag.end() :]
    m = SWEEP_RE.match(line.strip())
    if not m:
        return None
    return {
        "sweep": int(m.group(1)),
        "E": float(m.group(2)),
        "dE": float(m.group(3)),
        "trunc": float(m.group(4)),
        "chi": int(m.group(5)),
        "time_printed": float(m.group(6)),
    }


def run_uni20(args, mode):
    """One uni20 run as a subprocess; its stdout is echoed and parsed line by line."""
    argv, extra_env = uni20_command(args, mode)
    env = dict(os.environ, **extra_env)
    print("$ " + " ".join("%s=%s" % kv for kv in sorted(extra_env.items())) + " " + shlex.join(argv), flush=True)
    sweeps = []
    t0 = time.perf_counter()
    try:
        # Own process group, so a timeout or Ctrl-C ends mpirun and every rank with it.
        proc = subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True, bufsize=1, start_new_session=True
        )
    except OSError as err:
        return {
            "ok": False,
            "error": "cannot start %s: %s" % (argv[0], err),
            "argv": argv,
            "env": extra_env,
            "sweeps": [],
        }
    timed_out = threading.Event()

    def kill_group():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def on_timeout():
        timed_out.set()
        kill_group()

    # A little later than the xtask's own --timeout, which ends mpirun cleanly (exit 124).
    timer = threading.Timer(args.uni20_timeout + 30.0, on_timeout)
    timer.start()
    try:
        for line in proc.stdout:
            print("  [%s] %s" % (LABEL[mode], line.rstrip("\n")), flush=True)
            rec = parse_sweep_line(line)
            if rec is not None:
                sweeps.append(rec)
        rc = proc.wait()
    except KeyboardInterrupt:
        kill_group()
        raise
    finally:
        timer.cancel()
    wall = time.perf_counter() - t0
    prev = 0.0
    for rec in sweeps:
        if args.uni20_time == "cumulative":
            rec["time"] = rec["time_printed"] - prev
            prev = rec["time_printed"]
        else:
            rec["time"] = rec["time_printed"]
    error = None
    if timed_out.is_set():
        error = "timed out after %.0f s" % args.uni20_timeout
    elif rc != 0:
        error = "exit status %d%s" % (rc, " (timed out)" if rc == 124 else "")
    elif not sweeps:
        error = "printed no sweep line"
    elif len(sweeps) != args.sweeps:
        print("  [%s] note: %d sweep lines, %d requested" % (LABEL[mode], len(sweeps), args.sweeps), flush=True)
    return {
        "ok": error is None,
        "error": error,
        "returncode": rc,
        "wall_s": wall,
        "argv": argv,
        "env": extra_env,
        "sweeps": sweeps,
    }


# ----------------------------------------------------------------------------------------
# Report


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def per_sweep(runs, tool, k):
    """(energy of the first successful repetition, median seconds over repetitions) of sweep k."""
    es, ts = [], []
    for run in runs[tool]:
        if run.get("ok") and k < len(run["sweeps"]):
            es.append(run["sweeps"][k]["E"])
            ts.append(run["sweeps"][k]["time"])
    return (es[0] if es else None, statistics.median(ts) if ts else None)


def mean_seconds(runs, tool, skip_first):
    """Mean seconds per sweep, over repetitions, of the successful runs of `tool`."""
    ts = []
    for run in runs[tool]:
        if run.get("ok"):
            ts.extend(s["time"] for s in run["sweeps"][1 if skip_first else 0 :])
    return statistics.fmean(ts) if ts else None


def report(args, tools, runs, e_ref):
    n = max([len(r["sweeps"]) for t in tools for r in runs[t] if r.get("ok")] or [0])
    print()
    print(
        "Per sweep (L=%d, chi=%d, cutoff=%g, %d thread(s); energies of the first repetition, "
        "median seconds over %d repetition(s)):" % (args.sites, args.chi, args.cutoff, args.threads, args.reps)
    )
    head = "%5s" % "sweep"
    for t in tools:
        head += "  %20s %9s" % ("E " + LABEL[t], "t [s]")
    print(head)
    for k in range(n):
        row = "%5d" % (k + 1)
        for t in tools:
            e, s = per_sweep(runs, t, k)
            row += "  %20s %9s" % (fmt(e, ".12f"), fmt(s, ".3f"))
        print(row)

    print()
    print("Summary:")
    summary = {}
    for t in tools:
        ok = [r for r in runs[t] if r.get("ok")]
        final = ok[0]["sweeps"][-1]["E"] if ok else None
        summary[t] = {
            "final_E": final,
            "abs_err": abs(final - e_ref) if (final is not None and e_ref is not None) else None,
            "mean_s_per_sweep": mean_seconds(runs, t, False),
            "mean_s_per_sweep_after_first": mean_seconds(runs, t, True),
            "failed_runs": [r.get("error") for r in runs[t] if not r.get("ok")],
        }
        s = summary[t]
        line = "  %-13s final E = %s" % (LABEL[t], fmt(final, ".12f"))
        if e_ref is not None:
            line += "  |E - (%.13g)| = %s" % (e_ref, fmt(s["abs_err"], ".3e"))
        line += "  mean s/sweep = %s (sweeps 2..: %s)" % (
            fmt(s["mean_s_per_sweep"], ".3f"),
            fmt(s["mean_s_per_sweep_after_first"], ".3f"),
        )
        if t == "tenpy" and ok:
            line += "  setup = %.3f s" % statistics.fmean(r["setup_s"] for r in ok)
        if t != "tenpy" and ok:
            line += "  process wall = %.2f s" % statistics.fmean(r["wall_s"] for r in ok)
        print(line)
        for err in s["failed_runs"]:
            print("  %-13s FAILED: %s" % (LABEL[t], err))
    if "tenpy" in summary:
        base = summary["tenpy"]
        for t in tools:
            if t == "tenpy":
                continue
            ratio = {}
            for key in ("mean_s_per_sweep", "mean_s_per_sweep_after_first"):
                a, b = summary[t][key], base[key]
                ratio[key] = a / b if (a is not None and b) else None
            summary[t]["ratio_to_tenpy"] = ratio
            print(
                "  %s / TeNPy seconds per sweep: %s (sweeps 2..: %s)  [above 1: uni20 is slower]"
                % (LABEL[t], fmt(ratio["mean_s_per_sweep"], ".3f"), fmt(ratio["mean_s_per_sweep_after_first"], ".3f"))
            )
    return summary


def versions(have_tenpy):
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    try:
        import numpy

        out["numpy"] = numpy.__version__
    except ImportError:
        pass
    if have_tenpy:
        import tenpy

        out["tenpy"] = tenpy.__version__
    try:
        from threadpoolctl import threadpool_info

        out["blas"] = [
            {k: d.get(k) for k in ("internal_api", "version", "num_threads", "architecture")} for d in threadpool_info()
        ]
    except ImportError:
        out["blas"] = "threadpoolctl not installed"
    return out


def main(argv=None):
    args = parse_args(argv)
    for var in THREAD_VARS:  # before numpy is imported (TeNPy imports it)
        os.environ[var] = str(args.threads)

    have_tenpy = False
    if not args.skip_tenpy:
        try:
            import tenpy  # noqa: F401

            have_tenpy = True
        except ImportError as err:
            print(
                "TeNPy is not installed (%s): skipping the TeNPy side. Install it with "
                "`pip install physics-tenpy`." % err,
                flush=True,
            )
    modes = uni20_modes(args)
    tools = (["tenpy"] if have_tenpy else []) + modes
    if not tools:
        print("Nothing left to run: skipped.")
        return 0

    if modes and not (args.uni20_cmd or args.no_build):
        build_modes = [m for m in modes if not (m == "mpi3" and args.uni20_mpi_cmd)]
        try:
            build_uni20(build_modes)
        except (subprocess.CalledProcessError, OSError) as err:
            print("building uni20's dmrg example failed: %s" % err, file=sys.stderr)
            return 1

    e_ref = args.e_ref if args.e_ref is not None else E_REF.get(args.sites)
    ver = versions(have_tenpy)
    print("versions: %s" % json.dumps(ver), flush=True)

    runs = {t: [] for t in tools}
    for rep in range(args.reps):
        order = tools[rep % len(tools) :] + tools[: rep % len(tools)]
        print("\n=== repetition %d/%d: %s ===" % (rep + 1, args.reps, ", ".join(LABEL[t] for t in order)), flush=True)
        for t in order:
            if t == "tenpy":
                runs[t].append(run_tenpy(args))
            else:
                run = run_uni20(args, t)
                if not run["ok"]:
                    print("  [%s] FAILED: %s" % (LABEL[t], run["error"]), flush=True)
                runs[t].append(run)

    summary = report(args, tools, runs, e_ref)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                _finite({
                    "date": datetime.datetime.now().isoformat(timespec="seconds"),
                    "args": vars(args),
                    "e_ref": e_ref,
                    "thread_env": {v: os.environ[v] for v in THREAD_VARS},
                    "versions": ver,
                    "tools": tools,
                    "runs": runs,
                    "summary": summary,
                }),
                f,
                indent=1,
                allow_nan=False,
            )
        print("wrote %s" % args.json)
    failed = any(not r.get("ok") for t in tools for r in runs[t])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
