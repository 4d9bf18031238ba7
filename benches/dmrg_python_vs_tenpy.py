#!/usr/bin/env python3
"""The same finite two-site DMRG three ways: uni20's Python package, uni20's Rust example
(`examples/dmrg.rs`) and TeNPy, and the overhead of the Python layer over the Rust example.

What it runs (open spin-1/2 Heisenberg chain, L sites, chi_max, cutoff 1e-10, a fixed number
of sweeps with no early stop):

* Python: `uni20` (`pip install ./crates/uni20-py`, the release build) in this process:
  `Universe(ranks=R, threads_per_rank=T)`, `heisenberg_mpo`, `random_mps(seed=1, bond=8)`,
  `Dmrg(...).run(sweeps=N, tol=0, observer=...)`. A sweep's time is the wall time between the
  observer calls as Python sees it (the Rust sweep, the job hand-off to the root thread, the
  GIL, the observer): what a Python user waits for.
* Rust: `target/release/examples/dmrg --sites L --chi-max CHI --sweeps N --tol 0` with
  UNI20_RANKS=R and UNI20_THREADS_PER_RANK=T (built first: `cargo build --release --example
  dmrg`, outside any timing); a sweep's time is the `time = X s` of its line.
* TeNPy (optional: `pip install physics-tenpy`; skipped with a message otherwise): the
  dense TeNPy driver of `benches/dmrg_vs_peers.py` (SpinChain, TwoSiteDMRGEngine, Neel start, the same
  chi_max and cutoff), with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed from the
  environment before numpy is loaded (settings some machines export for uni20's own BLAS
  builds; the peer gets its BLAS's defaults), and the BLAS thread count set to T.
  threadpoolctl's view of the loaded BLAS libraries is printed.

The Python and Rust runs are interleaved `--reps` times (alternating which goes first) so
that a drifting machine hits both alike. The overhead is `median(Python sweep) /
median(Rust sweep) - 1` over sweeps 2..N of every repetition (sweep 1 also builds the
environments). On a loaded machine that figure is dominated by drift between the runs; the
script also prints the Python layer's own cost measured inside the Python runs: the wall
time of a sweep as Python sees it minus the sweep's time measured in Rust
(`SweepStats.seconds`), i.e. the job hand-off to the root thread, the GIL and the observer. Both runs must reach the same energy (to 1e-10): they are the same algorithm
with the same start state.

    python3 benches/dmrg_python_vs_tenpy.py                    # L=100, chi=100, 6 sweeps
    python3 benches/dmrg_python_vs_tenpy.py --sites 32 --chi 64 --sweeps 4 --skip-tenpy

Exit status: 0 on success, 1 if a run failed or the energies differ.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWEEP_RE = re.compile(r"^sweep\s+(\d+)\s+E = (\S+)\s+dE = \S+\s+trunc = \S+\s+chi = (\d+)\s+time = (\S+) s$")
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sites", type=int, default=100)
    p.add_argument("--chi", type=int, default=100)
    p.add_argument("--sweeps", type=int, default=6)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--ranks", type=int, default=1, help="in-process ranks of both uni20 runs")
    p.add_argument("--threads", type=int, default=2, help="kernel threads per rank (and TeNPy's BLAS threads)")
    p.add_argument("--skip-tenpy", action="store_true")
    p.add_argument("--no-build", action="store_true", help="use target/release/examples/dmrg as it is")
    a = p.parse_args()
    if min(a.sites, a.chi, a.sweeps, a.reps, a.ranks, a.threads) < 1 or a.sites < 2 or a.sweeps < 2:
        p.error("--sites >= 2, --sweeps >= 2, the rest >= 1")
    return a


def run_rust(args, exe):
    env = dict(os.environ, UNI20_RANKS=str(args.ranks), UNI20_THREADS_PER_RANK=str(args.threads))
    env["RAYON_NUM_THREADS"] = str(args.threads)
    cmd = [exe, "--sites", str(args.sites), "--chi-max", str(args.chi), "--sweeps", str(args.sweeps), "--tol", "0"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=7200)
    if out.returncode != 0:
        sys.exit("rust example failed (%d): %s" % (out.returncode, out.stderr))
    sweeps = [m for m in (SWEEP_RE.match(line) for line in out.stdout.splitlines()) if m]
    return [(float(m.group(2)), float(m.group(4))) for m in sweeps]


def run_python(args):
    import uni20

    times, energies, inner = [], [], []
    with uni20.Universe(ranks=args.ranks, threads_per_rank=args.threads) as u:
        dmrg = uni20.Dmrg(
            u.heisenberg_mpo(args.sites, block=64),
            u.random_mps(args.sites, d=2, bond=min(8, args.chi), block=64, seed=1),
            chi_max=args.chi,
        )
        last = [time.perf_counter()]

        def observer(d, s):
            now = time.perf_counter()
            times.append(now - last[0])
            energies.append(s.energy)
            inner.append(s.seconds)
            last[0] = now

        last[0] = time.perf_counter()
        dmrg.run(sweeps=args.sweeps, tol=0.0, observer=observer)
    run_python.inner = inner
    return list(zip(energies, times))


def run_tenpy(args):
    sys.path.insert(0, os.path.join(REPO, "benches"))
    try:
        import dmrg_vs_peers as peer
        import tenpy  # noqa: F401
    except ImportError as e:
        print("TeNPy: skipped (%s; pip install physics-tenpy to compare)" % e)
        return None
    targs = peer.parse_args(["--sites", str(args.sites), "--chi", str(args.chi), "--sweeps", str(args.sweeps)])
    t0 = time.perf_counter()
    res = peer.worker_tenpy(targs, None)  # dense; the thread variables are set by main()
    return {"total": time.perf_counter() - t0, "sweeps": res["sweeps"], "setup": res["setup_s"]}


def main():
    args = parse_args()
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        os.environ.pop(var, None)
    for var in THREAD_VARS:
        os.environ[var] = str(args.threads)
    import numpy  # noqa: F401  (after the environment is set)

    try:
        from threadpoolctl import threadpool_info

        for lib in threadpool_info():
            print(
                "BLAS: %s %s (%s, %s threads) %s"
                % (lib.get("internal_api"), lib.get("version"), lib.get("threading_layer"), lib.get("num_threads"), lib.get("filepath"))
            )
    except ImportError:
        print("BLAS: threadpoolctl is not installed (pip install threadpoolctl to see which BLAS numpy loaded)")

    exe = os.path.join(REPO, "target", "release", "examples", "dmrg")
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "dmrg"], cwd=REPO, check=True)
    print(
        "L=%d chi=%d sweeps=%d, %d in-process rank(s) x %d thread(s), %d repetitions"
        % (args.sites, args.chi, args.sweeps, args.ranks, args.threads, args.reps)
    )
    py_all, rs_all, py_total, rs_total = [], [], [], []
    # Per sweep of the Python runs: wall time seen by Python, and the sweep's own time
    # measured inside Rust (SweepStats.seconds): their difference is the Python layer alone,
    # free of the drift between runs.
    layer = []
    e_py = e_rs = None
    for rep in range(args.reps):
        order = ("python", "rust") if rep % 2 == 0 else ("rust", "python")
        for which in order:
            t0 = time.perf_counter()
            sweeps = run_python(args) if which == "python" else run_rust(args, exe)
            total = time.perf_counter() - t0
            if which == "python":
                py_all += [t for _, t in sweeps[1:]]
                layer += [(t, r) for (_, t), r in zip(sweeps[1:], run_python.inner[1:])]
                py_total.append(total)
                e_py = sweeps[-1][0]
            else:
                rs_all += [t for _, t in sweeps[1:]]
                rs_total.append(total)
                e_rs = sweeps[-1][0]
            print(
                "  rep %d %-6s  E = %.12f  sweeps: %s  (whole run %.2f s)"
                % (rep, which, sweeps[-1][0], " ".join("%.3f" % t for _, t in sweeps), total)
            )
    peer = None if args.skip_tenpy else run_tenpy(args)
    py_med, rs_med = statistics.median(py_all), statistics.median(rs_all)
    overhead = 100.0 * (py_med / rs_med - 1.0)
    print()
    print("uni20 Python : median sweep %.3f s (sweeps 2..%d), whole run %.2f s" % (py_med, args.sweeps, min(py_total)))
    print("uni20 Rust   : median sweep %.3f s (sweeps 2..%d), whole run %.2f s" % (rs_med, args.sweeps, min(rs_total)))
    if peer is not None:
        tp = [s["time"] for s in peer["sweeps"][1:]]
        print(
            "TeNPy        : median sweep %.3f s (sweeps 2..%d), whole run %.2f s, E = %.12f"
            % (statistics.median(tp), args.sweeps, peer["total"], peer["sweeps"][-1]["E"])
        )
    print("Python layer overhead over the Rust example: %+.2f %% per sweep (medians of separate runs; goal: under 5 %%)" % overhead)
    wall, rust = sum(t for t, _ in layer), sum(r for _, r in layer)
    print(
        "Python layer within the Python runs: %.4f s per sweep over the sweep's own time (%+.3f %%)"
        % ((wall - rust) / len(layer), 100.0 * (wall / rust - 1.0))
    )
    print("energies: Python %.12f, Rust %.12f, |diff| = %.1e" % (e_py, e_rs, abs(e_py - e_rs)))
    return 0 if abs(e_py - e_rs) <= 1e-10 else 1


if __name__ == "__main__":
    sys.exit(main())
