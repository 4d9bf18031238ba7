#!/usr/bin/env python3
"""Finite two-site DMRG: uni20 (dense and symmetric) against TeNPy and block2, interleaved.

Every tool finds the ground state of the open spin-1/2 Heisenberg chain

    H = sum_{i=0}^{L-2} S_i . S_{i+1}        (J = 1, no field)

by finite two-site DMRG with the same number of sites L, the same largest bond dimension
chi_max, the same truncation cutoff and the same number of full sweeps (right, then left;
no early stop), and this script records for every sweep the energy, the wall time, the
operator applications where the tool reports them, and the peak resident memory of the run.

Quick start (from the repository root; the first line once):

    python3 -m venv --system-site-packages target/peers-venv      # TeNPy stays visible
    target/peers-venv/bin/pip install block2==0.5.4 threadpoolctl  # never into the system Python
    target/peers-venv/bin/python benches/dmrg_vs_peers.py --sites 32 --chi 64 --sweeps 4 --threads 1
    target/peers-venv/bin/python benches/dmrg_vs_peers.py --sites 100 --chi 100 --sweeps 10 --threads 1 2 \\
        --json dmrg-peers.json

The tools (`--tools`, default all; each peer is optional and skipped with a message when
its package is missing; TeNPy: `pip install physics-tenpy`):

* `uni20-dense`, `uni20-sym`: `examples/dmrg.rs --sites L --chi-max CHI --cutoff CUT
  --sweeps N --tol 0 --profile` (`uni20-sym` adds `--conserve Sz`: block-sparse tensors in
  the sector 2Sz = 0), one process with one rank: `UNI20_RANKS=1
  UNI20_THREADS_PER_RANK=T target/release/examples/dmrg-bench-inproc ...`.
* `uni20-dense-mpi3`, `uni20-sym-mpi3`: the same under `cargo xtask mpirun -n 3` (run as
  `target/debug/xtask mpirun -n 3 --exe target/release/examples/dmrg-bench-mpi -- ...`: a
  root and two workers, the binary built with `--features uni20/mpi`, no cargo in the
  process tree) with UNI20_THREADS_PER_RANK =
  max(1, T // 2), so that the two workers together have the thread budget T (at T = 1 they
  have two threads: there is no smaller split).
  Both binaries are built first, outside any timing (`cargo build --release --example dmrg`,
  with and without `--features uni20/mpi`), and copied to
  `target/release/examples/dmrg-bench-{inproc,mpi}` because both feature sets share one
  output path; the xtask is built then too. `--no-build` reuses the copies.
  uni20 starts from a seeded random MPS (`--seed 1`); applications per sweep are the
  `N applications` of its `--profile` line.
* `tenpy-dense`, `tenpy-sz`: TeNPy's `SpinChain` (S = 1/2, Jx = Jy = Jz = 1, conserve None
  or 'Sz'), a Neel product state (sector Sz = 0), `TwoSiteDMRGEngine` with trunc_params
  {'chi_max': CHI, 'svd_min': CUT, 'trunc_cut': None}, mixer off, TeNPy's default Lanczos;
  one `run_iteration()` per sweep (N_sweeps_check = 1), each timed. Applications are counted
  by wrapping the effective Hamiltonian's `matvec` (TeNPy solves an H_eff of dimension below
  400 by exact diagonalization instead: those updates are counted apart).
* `block2`: pyblock2's `DMRGDriver` with `SymmetryTypes.SGB` (U(1): the sector 2Sz = 0 of
  `initialize_system(heis_twos=1, heis_twosz=0)`), the chain built with its expression
  builder (0.5 S+S- + 0.5 S-S+ + SzSz), `n_threads=T`, a random MPS of bond CHI,
  `dmrg(bond_dims=[CHI], noises=[0], thrds=[1e-10], cutoff=CUT**2, tol=0)` (block2 cuts
  density-matrix eigenvalues, the squares of the singular values). block2 counts a sweep
  per direction: one full sweep here is two of its sweeps (seconds added, the energy of the
  second, read from its `iprint=2` log with its 10 decimals); applications are the sums of
  its Davidson iterations (`Ndav`).

Each run is a child process of its own (the Python peers run this script with `--worker`):
its peak resident memory is the `ru_maxrss` that `os.wait4` returns for it (for mpirun, that
of its largest descendant: one rank). Interleaving: on a shared machine whose speed drifts,
back-to-back runs are not comparable; for each thread count and each of `--reps` repetitions
every tool runs once, the order rotated between repetitions, so drift hits all alike.

Threads: every child gets OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = MKL_NUM_THREADS = ... =
RAYON_NUM_THREADS = T (uni20: UNI20_THREADS_PER_RANK as above; block2: n_threads = T).
`--threads 1 2` runs the whole set at each count. Where the environment sets
OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE (settings some machines export for uni20's own BLAS),
both are removed for the numpy-based peers only, in their child's environment, and every
peer prints the BLAS it loaded (threadpoolctl's `threadpool_info()`: library, version,
threads, `architecture`, the kernel it runs), so that no peer is measured on a slow
fallback kernel.

Output: per thread count, a per-sweep table (energy and seconds of each tool), then per tool
the final energy, |E - E_ref| where a reference is known (L = 16: exact diagonalization;
L = 100: -44.127739, six decimals), seconds per converged sweep (the median of the last half
of the sweeps, over every repetition), applications per converged sweep (the same median),
time to solution (the sum of the sweep times until the first sweep that ends within
`--solution-tol`, default 1e-8, of the lowest final energy of all tools at that thread count:
the figure that counts when the sweeps of one tool still converge while another's already
repeat the converged state), peak memory, and the ratios of the issue's goals (TeNPy Sz / uni20 sym, uni20 sym / block2,
uni20 sym mpi3 / uni20 sym, one thread / two threads, applications uni20 sym / TeNPy Sz) and
each tool's seconds relative to uni20 sym. `--json OUT` writes every raw number.

Energy check: every tool's final energy must lie within `--e-tol` (default 1e-6, the
resolution of the L = 100 reference) of the median of the final energies, and not below
the reference where one is known by more than that (DMRG is variational: at a small chi
every tool lies above the exact energy by its truncation error, which is printed, not
failed); a tool that diverges fails the run.

Exit status: 0 when every requested run that could start succeeded and the energies agree;
1 when a run failed, printed no sweep, or an energy diverged; 2 on bad arguments.
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

# Ground-state energies of the open spin-1/2 Heisenberg chain (J = 1).
E_REF = {
    16: -6.9117371455749,  # exact diagonalization
    100: -44.127739,  # DMRG, converged in chi; six decimals
}

THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "RAYON_NUM_THREADS",
)
# Removed from the numpy-based peers' environment (see the module docstring).
BLAS_TUNING_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
# The xtask binary (`cargo xtask mpirun` without cargo in the process tree).
XTASK = os.path.join(REPO, "target", "debug", "xtask")

UNI20_TOOLS = ("uni20-dense", "uni20-sym", "uni20-dense-mpi3", "uni20-sym-mpi3")
PEER_TOOLS = ("tenpy-dense", "tenpy-sz", "block2")
TOOLS = UNI20_TOOLS + PEER_TOOLS
LABEL = {
    "uni20-dense": "uni20 dense",
    "uni20-sym": "uni20 Sz",
    "uni20-dense-mpi3": "uni20 dense mpi3",
    "uni20-sym-mpi3": "uni20 Sz mpi3",
    "tenpy-dense": "TeNPy dense",
    "tenpy-sz": "TeNPy Sz",
    "block2": "block2 U(1)",
}

SWEEP_RE = re.compile(r"^sweep\s+(\d+)\s+E = (\S+)\s+dE = (\S+)\s+trunc = (\S+)\s+chi = (\d+)\s+time = (\S+) s$")
PROFILE_RE = re.compile(r"profile: lanczos \S+ s \((\d+) applications")
# Open MPI `--tag-output`: "[jobid,rank]<stdout>:"; MPICH `-prepend-rank`: "[rank] ".
MPI_TAG_RE = re.compile(r"^\[(?:\d+,)?(\d+)\](?:<stdout>:)?\s?")
RESULT_PREFIX = "DMRG-PEERS-RESULT "


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Finite two-site DMRG on the open Heisenberg chain: uni20 vs TeNPy vs block2, interleaved.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--sites", type=int, default=100, help="chain length L")
    p.add_argument("--chi", type=int, default=100, help="largest bond dimension chi_max")
    p.add_argument("--cutoff", type=float, default=1e-10, help="truncation cutoff (singular values below it)")
    p.add_argument("--sweeps", type=int, default=10, help="full sweeps (no early stop)")
    p.add_argument("--reps", type=int, default=1, help="repetitions of the interleaved set")
    p.add_argument("--threads", type=int, nargs="+", default=[1], help="thread budgets T; the set runs at each")
    p.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS), metavar="TOOL",
                   help="tools to run: " + ", ".join(TOOLS))  # fmt: skip
    p.add_argument("--solution-tol", type=float, default=1e-8, help="time to solution: wall seconds from the start until a sweep ends within this of the lowest final energy of all tools at that thread count")
    p.add_argument("--e-tol", type=float, default=1e-6, help="largest allowed distance of a final energy from the median of all tools' (and largest allowed amount below the reference energy)")
    p.add_argument("--e-ref", type=float, help="reference energy (default: known for L = 16 and 100)")
    p.add_argument("--no-build", action="store_true", help="reuse the uni20 binaries copied by an earlier run")
    p.add_argument("--timeout", type=float, default=7200.0, help="seconds before one run is killed")
    p.add_argument("--json", metavar="OUT", help="write every raw number to this JSON file")
    p.add_argument("--worker", choices=PEER_TOOLS, help=argparse.SUPPRESS)  # one peer run, in a child
    p.add_argument("--worker-threads", type=int, default=1, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.sites < 4:
        p.error("--sites must be at least 4")
    for name in ("chi", "sweeps", "reps"):
        if getattr(args, name) < 1:
            p.error("--%s must be at least 1" % name)
    if min(args.threads) < 1:
        p.error("--threads must be at least 1")
    if args.cutoff < 0 or args.e_tol <= 0 or args.timeout <= 0:
        p.error("--cutoff must be non-negative, --e-tol and --timeout positive")
    return args


# ----------------------------------------------------------------------------------------
# Workers: one peer run in this (child) process; per-sweep lines, then one result line.


def blas_info():
    """The BLAS libraries loaded in this process, as threadpoolctl sees them."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl is not installed (pip install threadpoolctl)"
    keys = ("user_api", "internal_api", "version", "num_threads", "threading_layer", "architecture", "filepath")
    return [{k: d.get(k) for k in keys} for d in threadpool_info()]


def worker_tenpy(args, conserve):
    from tenpy.algorithms.dmrg import TwoSiteDMRGEngine
    from tenpy.models.spins import SpinChain
    from tenpy.networks.mps import MPS

    t_setup = time.perf_counter()
    model = SpinChain({"L": args.sites, "S": 0.5, "Jx": 1.0, "Jy": 1.0, "Jz": 1.0, "hz": 0.0,
                       "bc_MPS": "finite", "conserve": conserve})  # fmt: skip
    p_state = ["up" if i % 2 == 0 else "down" for i in range(args.sites)]
    try:  # unit_cell_width: TeNPy >= 1.0 warns without it
        psi = MPS.from_product_state(model.lat.mps_sites(), p_state, bc="finite", unit_cell_width=1)
    except TypeError:
        psi = MPS.from_product_state(model.lat.mps_sites(), p_state, bc="finite")
    options = {
        "trunc_params": {"chi_max": args.chi, "svd_min": args.cutoff, "trunc_cut": None},
        "mixer": False,
        "min_sweeps": args.sweeps,
        "N_sweeps_check": 1,
    }
    engine = TwoSiteDMRGEngine(psi, model, options)
    heff = engine.EffectiveH
    counter = [0]
    matvec = heff.matvec

    def counting_matvec(self, theta):
        counter[0] += 1
        return matvec(self, theta)

    heff.matvec = counting_matvec
    engine.pre_run_initialize()
    setup_s = time.perf_counter() - t_setup
    print("  BLAS: %s" % json.dumps(blas_info()), flush=True)
    sweeps = []
    for k in range(args.sweeps):
        n_before, c_before = len(engine.update_stats["N_lanczos"]), counter[0]
        t0 = time.perf_counter()
        engine.run_iteration()
        dt = time.perf_counter() - t0
        n_lanczos = engine.update_stats["N_lanczos"][n_before:]
        st = engine.sweep_stats
        rec = {
            "sweep": k + 1,
            "E": float(st["E"][-1]),
            "trunc": float(st["max_trunc_err"][-1]),
            "chi": int(st["max_chi"][-1]),
            "time": dt,
            "applications": counter[0] - c_before,
            "ed_updates": sum(1 for n in n_lanczos if n < 0),  # N_lanczos = -1: exact diagonalization
        }
        sweeps.append(rec)
        print("  sweep %3d  E = %.12f  trunc = %.3e  chi = %d  time = %.3f s  applications = %d (%d updates by ED)"
              % (rec["sweep"], rec["E"], rec["trunc"], rec["chi"], dt, rec["applications"], rec["ed_updates"]),
              flush=True)  # fmt: skip
    return {"setup_s": setup_s, "sweeps": sweeps, "blas": blas_info()}


BLOCK2_SWEEP_RE = re.compile(r"^Sweep =\s*(\d+)\s*\|\s*Direction =\s*(\w+)")
BLOCK2_NDAV_RE = re.compile(r"Ndav =\s*(\d+)")
BLOCK2_ELAPSED_RE = re.compile(r"^Time elapsed =\s*(\S+)\s*\|\s*E =\s*(\S+)")
BLOCK2_TSWEEP_RE = re.compile(r"^Time sweep =\s*(\S+)")
BLOCK2_DW_RE = re.compile(r"DW =\s*(\S+)")


def parse_block2_log(text):
    """block2's half sweeps from its `iprint=2` output: [{E, time, applications, dw}]."""
    halves, cur = [], None
    for line in text.splitlines():
        line = line.strip()
        if BLOCK2_SWEEP_RE.match(line):
            cur = {"applications": 0, "E": None, "time": None, "dw": None}
            halves.append(cur)
        elif cur is None:
            continue
        elif line.startswith(("-->", "<--")):
            m = BLOCK2_NDAV_RE.search(line)
            if m:
                cur["applications"] += int(m.group(1))
        elif BLOCK2_ELAPSED_RE.match(line):
            cur["E"] = float(BLOCK2_ELAPSED_RE.match(line).group(2))
            m = BLOCK2_DW_RE.search(line)
            cur["dw"] = float(m.group(1)) if m else None
        elif BLOCK2_TSWEEP_RE.match(line):
            cur["time"] = float(BLOCK2_TSWEEP_RE.match(line).group(1))
    return [h for h in halves if h["E"] is not None and h["time"] is not None]


def worker_block2(args, threads):
    import tempfile

    from pyblock2.driver.core import DMRGDriver, MPOAlgorithmTypes, SymmetryTypes

    scratch = tempfile.mkdtemp(prefix="dmrg-peers-block2-")
    t_setup = time.perf_counter()
    driver = DMRGDriver(scratch=scratch, symm_type=SymmetryTypes.SGB, n_threads=threads)
    driver.initialize_system(n_sites=args.sites, heis_twos=1, heis_twosz=0)
    b = driver.expr_builder()
    for i in range(args.sites - 1):
        b.add_term("PM", [i, i + 1], 0.5)
        b.add_term("MP", [i, i + 1], 0.5)
        b.add_term("ZZ", [i, i + 1], 1.0)
    mpo = driver.get_mpo(b.finalize(adjust_order=True, fermionic_ops=""),
                         algo_type=MPOAlgorithmTypes.FastBipartite, iprint=0)  # fmt: skip
    ket = driver.get_random_mps(tag="KET", bond_dim=args.chi, nroots=1)
    setup_s = time.perf_counter() - t_setup
    print("  BLAS: %s" % json.dumps(blas_info()), flush=True)
    # block2 prints from C++ straight to file descriptor 1: capture it in a file.
    log_path = os.path.join(scratch, "dmrg.log")
    sys.stdout.flush()
    saved = os.dup(1)
    with open(log_path, "w") as log:
        os.dup2(log.fileno(), 1)
        try:
            n = 2 * args.sweeps
            driver.dmrg(mpo, ket, n_sweeps=n, bond_dims=[args.chi] * n, noises=[0.0] * n, thrds=[1e-10] * n,
                        cutoff=args.cutoff**2, tol=0.0, iprint=2)  # fmt: skip
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
    with open(log_path) as f:
        halves = parse_block2_log(f.read())
    shutil.rmtree(scratch, ignore_errors=True)
    sweeps = []
    for k in range(len(halves) // 2):
        a, c = halves[2 * k], halves[2 * k + 1]
        rec = {
            "sweep": k + 1,
            "E": c["E"],
            "trunc": c["dw"],
            "time": a["time"] + c["time"],
            "applications": a["applications"] + c["applications"],
        }
        sweeps.append(rec)
        print("  sweep %3d  E = %.12f  discarded = %s  time = %.3f s  applications = %d"
              % (rec["sweep"], rec["E"], rec["trunc"], rec["time"], rec["applications"]), flush=True)  # fmt: skip
    return {"setup_s": setup_s, "sweeps": sweeps, "blas": blas_info(), "half_sweeps": len(halves)}


def run_worker(args):
    """`--worker TOOL`: one peer run; prints the result as JSON on its last line."""
    if args.worker == "block2":
        res = worker_block2(args, args.worker_threads)
    else:
        res = worker_tenpy(args, "Sz" if args.worker == "tenpy-sz" else None)
    print(RESULT_PREFIX + json.dumps(_finite(res)), flush=True)
    return 0


def _finite(obj):
    """`obj` with every non-finite float replaced by None (strict JSON)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


# ----------------------------------------------------------------------------------------
# The parent: building, launching, parsing.


def bench_binary(mpi):
    return os.path.join(REPO, "target", "release", "examples", "dmrg-bench-%s" % ("mpi" if mpi else "inproc"))


def build_uni20(need_inproc, need_mpi):
    """Build the example (outside any timing) for each layout and copy it aside."""
    for mpi, need in ((False, need_inproc), (True, need_mpi)):
        if not need:
            continue
        cmd = ["cargo", "build", "--release", "--example", "dmrg"]
        if mpi:
            cmd[2:2] = ["--features", "uni20/mpi"]
        print("$ " + " ".join(cmd), flush=True)
        subprocess.run(cmd, cwd=REPO, check=True)
        shutil.copy2(os.path.join(REPO, "target", "release", "examples", "dmrg"), bench_binary(mpi))
        if mpi:  # the launcher of `cargo xtask mpirun`, run as its binary (see `run_one`)
            subprocess.run(["cargo", "build", "--quiet", "--package", "xtask"], cwd=REPO, check=True)


def peer_available(tool):
    """None when the peer's package imports, else the reason (checked in a child, so that
    this process loads no BLAS)."""
    module = "pyblock2.driver.core" if tool == "block2" else "tenpy"
    out = subprocess.run([sys.executable, "-c", "import " + module], capture_output=True, text=True)
    if out.returncode == 0:
        return None
    hint = "pip install block2" if tool == "block2" else "pip install physics-tenpy"
    return "%s does not import (%s); install it with `%s`" % (
        module, (out.stderr.strip().splitlines() or ["?"])[-1], hint)  # fmt: skip


def command_of(args, tool, threads):
    """(argv, environment) of one run."""
    env = dict(os.environ)
    for var in THREAD_VARS:
        env[var] = str(threads)
    if tool in PEER_TOOLS:
        for var in BLAS_TUNING_VARS:
            env.pop(var, None)
        argv = [sys.executable, os.path.abspath(__file__), "--worker", tool, "--worker-threads", str(threads),
                "--sites", str(args.sites), "--chi", str(args.chi), "--cutoff", repr(args.cutoff),
                "--sweeps", str(args.sweeps)]  # fmt: skip
        return argv, env
    dmrg = ["--sites", str(args.sites), "--chi-max", str(args.chi), "--cutoff", repr(args.cutoff),
            "--sweeps", str(args.sweeps), "--tol", "0", "--seed", "1", "--profile"]  # fmt: skip
    if tool.startswith("uni20-sym"):
        dmrg += ["--conserve", "Sz"]
    if tool.endswith("-mpi3"):
        per_rank = max(1, threads // 2)
        argv = [XTASK, "mpirun", "-n", "3", "--timeout", str(int(args.timeout)),
                "--exe", bench_binary(True), "--"] + dmrg  # fmt: skip
    else:
        per_rank = threads
        env["UNI20_RANKS"] = "1"
        argv = [bench_binary(False)] + dmrg
    env["UNI20_THREADS_PER_RANK"] = env["RAYON_NUM_THREADS"] = str(per_rank)
    return argv, env


def parse_uni20(lines):
    """Per-sweep records of the example's rank-0 output, with the profile's applications."""
    sweeps = []
    for line in lines:
        tag = MPI_TAG_RE.match(line)
        if tag:
            if int(tag.group(1)) != 0:
                continue
            line = line[tag.end() :]
        line = line.strip()
        m = SWEEP_RE.match(line)
        if m:
            sweeps.append({"sweep": int(m.group(1)), "E": float(m.group(2)), "trunc": float(m.group(4)),
                           "chi": int(m.group(5)), "time": float(m.group(6)), "applications": None})  # fmt: skip
            continue
        m = PROFILE_RE.search(line)
        if m and sweeps:
            sweeps[-1]["applications"] = int(m.group(1))
    return sweeps


def run_one(args, tool, threads):
    """One run as a child process; its output is echoed and parsed. Its peak memory is the
    ru_maxrss that wait4 reports for it: the largest of the child and the descendants it
    waited for (under mpirun: the largest rank). Linux counts the forked copy of this
    process before exec too, which is why this process imports no peer."""
    argv, env = command_of(args, tool, threads)
    shown = {k: env[k] for k in sorted(env) if k.startswith("UNI20_") or k in ("OMP_NUM_THREADS",)}
    print("$ " + " ".join("%s=%s" % kv for kv in shown.items()) + " " + shlex.join(argv), flush=True)
    t0 = time.perf_counter()
    try:
        # Own process group, so a timeout or Ctrl-C ends mpirun and every rank with it.
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1, start_new_session=True)  # fmt: skip
    except OSError as err:
        return {"ok": False, "error": "cannot start %s: %s" % (argv[0], err), "argv": argv, "sweeps": []}
    timed_out = threading.Event()

    def kill_group():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def on_timeout():
        timed_out.set()
        kill_group()

    timer = threading.Timer(args.timeout + 30.0, on_timeout)
    timer.start()
    lines = []
    try:
        for line in proc.stdout:
            line = line.rstrip("\n")
            lines.append(line)
            if not line.startswith(RESULT_PREFIX):
                print("  [%s] %s" % (LABEL[tool], line), flush=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    except KeyboardInterrupt:
        kill_group()
        raise
    finally:
        timer.cancel()
    wall = time.perf_counter() - t0
    rc = proc.returncode
    rss_mb = usage.ru_maxrss / 1024.0  # kilobytes on Linux
    res = {"argv": argv, "threads": threads, "returncode": rc, "wall_s": wall, "peak_rss_mb": rss_mb}
    if tool in PEER_TOOLS:
        payload = [l[len(RESULT_PREFIX) :] for l in lines if l.startswith(RESULT_PREFIX)]
        res.update(json.loads(payload[-1]) if payload else {"sweeps": []})
    else:
        res["sweeps"] = parse_uni20(lines)
    error = None
    if timed_out.is_set():
        error = "timed out after %.0f s" % args.timeout
    elif rc != 0:
        error = "exit status %d" % rc
    elif len(res["sweeps"]) != args.sweeps:
        error = "%d sweep lines, %d requested" % (len(res["sweeps"]), args.sweeps)
    res["ok"] = error is None
    res["error"] = error
    if error:
        print("  [%s] FAILED: %s" % (LABEL[tool], error), flush=True)
    return res


# ----------------------------------------------------------------------------------------
# Report


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def time_to_solution(sweeps, target, tol):
    """(seconds, sweeps) from the start until the first sweep that ends within `tol` of
    `target` (the sum of the sweep times up to and including it); (None, None) if none does."""
    total = 0.0
    for k, s in enumerate(sweeps):
        total += s["time"]
        if s["E"] - target <= tol:
            return total, k + 1
    return None, None


def summarize(args, tools, runs, e_ref):
    """Per tool: final E, seconds and applications per converged sweep, time to solution,
    peak memory."""
    out = {}
    finals = [r["sweeps"][-1]["E"] for t in tools for r in runs[t] if r.get("ok") and r["sweeps"]]
    target = min(finals) if finals else None
    for t in tools:
        ok = [r for r in runs[t] if r.get("ok")]
        secs, apps = [], []
        for r in ok:
            tail = r["sweeps"][len(r["sweeps"]) // 2 :]
            secs += [s["time"] for s in tail]
            apps += [s["applications"] for s in tail if s.get("applications") is not None]
        final = ok[0]["sweeps"][-1]["E"] if ok else None
        tts = [time_to_solution(r["sweeps"], target, args.solution_tol) for r in ok] if target is not None else []
        tts_s = [x for x, _ in tts if x is not None]
        tts_n = [n for _, n in tts if n is not None]
        out[t] = {
            "solution_target_E": target,
            "time_to_solution_s": statistics.median(tts_s) if len(tts_s) == len(ok) and ok else None,
            "sweeps_to_solution": statistics.median(tts_n) if len(tts_n) == len(ok) and ok else None,
            "final_E": final,
            "abs_err_ref": abs(final - e_ref) if (final is not None and e_ref is not None) else None,
            "s_per_converged_sweep": statistics.median(secs) if secs else None,
            "applications_per_converged_sweep": statistics.median(apps) if apps else None,
            "peak_rss_mb": max(r["peak_rss_mb"] for r in ok) if ok else None,
            "first_sweep_s": statistics.median(r["sweeps"][0]["time"] for r in ok) if ok else None,
            "failed": [r.get("error") for r in runs[t] if not r.get("ok")],
        }
    return out


def ratio(a, b):
    return a / b if (a is not None and b) else None


def report(args, threads, tools, runs, e_ref):
    n = args.sweeps
    print()
    print("Per sweep at %d thread(s) (L=%d, chi=%d, cutoff=%g; energies of the first repetition, median seconds "
          "over %d repetition(s)):" % (threads, args.sites, args.chi, args.cutoff, args.reps))  # fmt: skip
    print("%5s" % "sweep" + "".join("  %22s %8s" % ("E " + LABEL[t], "t [s]") for t in tools))
    for k in range(n):
        row = "%5d" % (k + 1)
        for t in tools:
            good = [r for r in runs[t] if r.get("ok") and k < len(r["sweeps"])]
            e = good[0]["sweeps"][k]["E"] if good else None
            s = statistics.median(r["sweeps"][k]["time"] for r in good) if good else None
            row += "  %22s %8s" % (fmt(e, ".12f"), fmt(s, ".3f"))
        print(row)
    summary = summarize(args, tools, runs, e_ref)
    print()
    print("Summary at %d thread(s) (converged sweep: median of sweeps %d..%d of every repetition):"
          % (threads, n // 2 + 1, n))  # fmt: skip
    for t in tools:
        s = summary[t]
        line = "  %-17s E = %s" % (LABEL[t], fmt(s["final_E"], ".12f"))
        if e_ref is not None:
            line += "  |E - E_ref| = %s" % fmt(s["abs_err_ref"], ".1e")
        line += "  s/sweep = %s (first %s)  applications/sweep = %s  to solution %s s (%s sweeps)  peak RSS = %s MB" % (
            fmt(s["s_per_converged_sweep"], ".3f"), fmt(s["first_sweep_s"], ".2f"),
            fmt(s["applications_per_converged_sweep"], ".0f"), fmt(s["time_to_solution_s"], ".2f"),
            fmt(s["sweeps_to_solution"], ".0f"), fmt(s["peak_rss_mb"], ".1f"))  # fmt: skip
        print(line)
        for err in s["failed"]:
            print("  %-17s FAILED: %s" % (LABEL[t], err))
    sec = {t: summary[t]["s_per_converged_sweep"] for t in tools}
    base = sec.get("uni20-sym")
    if base:
        print("  seconds per converged sweep relative to uni20 Sz (above 1: slower than uni20 Sz):")
        for t in tools:
            print("    %-17s %s" % (LABEL[t], fmt(ratio(sec[t], base), ".2f")))
    goals = [
        ("TeNPy Sz / uni20 Sz seconds (goal >= 3)", sec.get("tenpy-sz"), sec.get("uni20-sym")),
        ("uni20 Sz / block2 seconds (goal <= 1.5 at chi 400)", sec.get("uni20-sym"), sec.get("block2")),
        ("uni20 Sz mpi3 / uni20 Sz seconds (goal <= 1.2)", sec.get("uni20-sym-mpi3"), sec.get("uni20-sym")),
        ("uni20 dense mpi3 / uni20 dense seconds", sec.get("uni20-dense-mpi3"), sec.get("uni20-dense")),
        ("uni20 Sz / uni20 dense seconds", sec.get("uni20-sym"), sec.get("uni20-dense")),
        ("TeNPy dense / TeNPy Sz seconds", sec.get("tenpy-dense"), sec.get("tenpy-sz")),
        ("uni20 Sz / TeNPy Sz applications (goal <= 1)",
         summary.get("uni20-sym", {}).get("applications_per_converged_sweep"),
         summary.get("tenpy-sz", {}).get("applications_per_converged_sweep")),
    ]  # fmt: skip
    tts = {t: summary[t]["time_to_solution_s"] for t in tools}
    goals += [
        ("TeNPy Sz / uni20 Sz seconds to solution", tts.get("tenpy-sz"), tts.get("uni20-sym")),
        ("uni20 Sz / block2 seconds to solution", tts.get("uni20-sym"), tts.get("block2")),
    ]  # fmt: skip
    shown = [(name, ratio(a, b)) for name, a, b in goals if ratio(a, b) is not None]
    if shown:
        print("  ratios:")
        for name, r in shown:
            print("    %-52s %.2f" % (name, r))
    return summary


def energy_check(args, summaries, e_ref):
    """Names of the (tool, threads) whose final energy is off the median or the reference."""
    finals = [(t, T, s["final_E"]) for T, per in summaries.items() for t, s in per.items() if s["final_E"] is not None]
    if not finals:
        return []
    med = statistics.median(e for _, _, e in finals)
    bad = []
    print()
    print("Energy check (tolerance %.0e; median of the final energies %.12f%s):"
          % (args.e_tol, med, "" if e_ref is None else ", reference %.13g" % e_ref))  # fmt: skip
    for t, T, e in finals:
        # The tools must agree with each other; against the reference (variational: a
        # finite chi lies above it by its truncation error) only an energy below it fails.
        spread = abs(e - med)
        below = (e_ref - e) if e_ref is not None else 0.0
        ok = spread <= args.e_tol and below <= args.e_tol
        if not ok:
            bad.append("%s at %d thread(s)" % (LABEL[t], T))
        ref = "" if e_ref is None else "  E - E_ref = %+.1e" % (e - e_ref)
        print("  %-17s %d thread(s)  E = %.12f  off the median by %.1e%s  %s"
              % (LABEL[t], T, e, spread, ref, "ok" if ok else "DIVERGES"))  # fmt: skip
    return bad


def versions():
    """Versions of Python and of the peers' packages, read from their metadata (this process
    imports none of them: it stays small, see `run_one`, and loads no BLAS)."""
    from importlib import metadata

    out = {"python": sys.version.split()[0], "platform": platform.platform(), "executable": sys.executable}
    for dist in ("numpy", "physics-tenpy", "block2", "threadpoolctl"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return run_worker(args)
    tools = []
    for t in args.tools:
        if t in PEER_TOOLS:
            why = peer_available(t)
            if why:
                print("%s: skipped: %s" % (LABEL[t], why), flush=True)
                continue
        tools.append(t)
    if not tools:
        print("Nothing left to run: skipped.")
        return 0
    need_inproc = any(t in ("uni20-dense", "uni20-sym") for t in tools)
    need_mpi = any(t.endswith("-mpi3") for t in tools)
    if need_mpi and shutil.which("mpirun") is None:
        print("uni20 mpi3: skipped: mpirun is not installed", flush=True)
        tools = [t for t in tools if not t.endswith("-mpi3")]
        need_mpi = False
    if (need_inproc or need_mpi) and not args.no_build:
        try:
            build_uni20(need_inproc, need_mpi)
        except (subprocess.CalledProcessError, OSError) as err:
            print("building uni20's dmrg example failed: %s" % err, file=sys.stderr)
            return 1
    e_ref = args.e_ref if args.e_ref is not None else E_REF.get(args.sites)
    ver = versions()
    print("versions: %s" % json.dumps(ver), flush=True)
    for var in BLAS_TUNING_VARS:
        if var in os.environ:
            print("%s=%s is set: removed for the numpy-based peers" % (var, os.environ[var]), flush=True)

    runs, summaries = {}, {}
    for threads in args.threads:
        runs[threads] = {t: [] for t in tools}
        for rep in range(args.reps):
            k = rep % len(tools)
            order = tools[k:] + tools[:k]
            print("\n=== %d thread(s), repetition %d/%d: %s ===" % (threads, rep + 1, args.reps,
                  ", ".join(LABEL[t] for t in order)), flush=True)  # fmt: skip
            for t in order:
                runs[threads][t].append(run_one(args, t, threads))
        summaries[threads] = report(args, threads, tools, runs[threads], e_ref)
    if len(args.threads) > 1:
        print()
        print("Threads: seconds per converged sweep at %d thread(s) / at each other count (above 1: threads pay):"
              % args.threads[0])  # fmt: skip
        for t in tools:
            a = summaries[args.threads[0]][t]["s_per_converged_sweep"]
            cells = ["%d: %s" % (T, fmt(ratio(a, summaries[T][t]["s_per_converged_sweep"]), ".2f"))
                     for T in args.threads[1:]]  # fmt: skip
            print("  %-17s %s" % (LABEL[t], "  ".join(cells)))
    diverged = energy_check(args, summaries, e_ref)
    failed = [(T, t) for T in runs for t in tools for r in runs[T][t] if not r.get("ok")]
    if args.json:
        with open(args.json, "w") as f:
            record = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "args": vars(args),
                      "e_ref": e_ref, "versions": ver, "tools": tools,
                      "runs": {str(T): v for T, v in runs.items()},
                      "summary": {str(T): v for T, v in summaries.items()}, "diverged": diverged}  # fmt: skip
            json.dump(_finite(record), f, indent=1, allow_nan=False)
        print("wrote %s" % args.json)
    if diverged:
        print("FAILED: the energies diverge: %s" % ", ".join(diverged))
    if failed:
        print("FAILED: %d run(s) failed" % len(failed))
    return 1 if (diverged or failed) else 0


if __name__ == "__main__":
    sys.exit(main())
