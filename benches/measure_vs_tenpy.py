#!/usr/bin/env python3
"""Measurements of uni20 (`examples/dmrg.rs --measure --output`) against TeNPy on the same state.

What it compares
----------------
Both programs find the ground state of the open transverse-field Ising chain

    H = -J sum_i sx_i sx_(i+1) - g sum_i sz_i        (Pauli matrices, J = 1)

(`--g`, default 1.5: the gapped paramagnet, whose ground state is unique, so both programs
hold the same state up to their truncation) by two-site DMRG at the same bond dimension and
cutoff, and measure it:

* the energy <H> and the variance <H^2> - <H>^2 (uni20: `sweeps.json`, `measure`; TeNPy:
  `MPO.expectation_value` and `MPO.variance`);
* the transverse magnetization on every site (uni20: `profile.npy` holds <Sz_i> = <sz_i>/2;
  TeNPy: `expectation_value('Sigmaz')`);
* the entanglement entropy at every bond (natural log; uni20: `entropy.npy`; TeNPy:
  `entanglement_entropy()`).

Every pair must agree to `--tol` (default 1e-8); the energy is also checked against the exact
free-fermion value, minus the sum of the singular values of the L x L matrix with g on the
diagonal and J above it (numpy). Exit status 1 on a disagreement, 0 otherwise.

TeNPy is optional (`pip install physics-tenpy`): without it the script prints what it skipped,
still runs and checks uni20 against the exact energy, and exits 0. The BLAS that numpy (and so
TeNPy) uses is printed through threadpoolctl when it is installed. OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE are removed from this process's environment before numpy is imported (they
tune uni20's optional OpenBLAS backend, not the peer's), and passed unchanged to the uni20
subprocess.

Usage:
    python3 benches/measure_vs_tenpy.py                       # L = 24, chi 32, g = 1.5
    python3 benches/measure_vs_tenpy.py --sites 40 --g 1.2 --chi 48
    python3 benches/measure_vs_tenpy.py --no-build            # use target/release/examples/dmrg
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

UNI20_ENV = dict(os.environ)
for _name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_name, None)

import numpy as np  # noqa: E402  (after the environment is cleaned for the peer)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def blas_info():
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        print("threadpoolctl: not installed (pip install threadpoolctl); numpy's BLAS not shown")
        return
    for pool in threadpool_info():
        print(
            "peer BLAS: {internal_api} {version} ({filepath}), {num_threads} threads".format(
                internal_api=pool.get("internal_api"),
                version=pool.get("version"),
                filepath=pool.get("filepath"),
                num_threads=pool.get("num_threads"),
            )
        )


def exact_energy(l, g):
    a = np.diag(np.full(l, g)) + np.diag(np.ones(l - 1), 1)
    return -np.linalg.svd(a, compute_uv=False).sum()


def read_npy(path):
    return np.load(path)


def run_uni20(args):
    exe = os.path.join(ROOT, "target", "release", "examples", "dmrg")
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--example", "dmrg"], cwd=ROOT, check=True)
    out = tempfile.mkdtemp(prefix="uni20-measure-")
    cmd = [
        exe, "--model", "tfi", "--g", repr(args.g), "--sites", str(args.sites),
        "--chi-max", str(args.chi), "--cutoff", repr(args.cutoff), "--sweeps", "40",
        "--tol", "1e-13", "--lanczos-tol", "1e-10", "--block", "32", "--measure", "--output", out,
    ]
    env = dict(UNI20_ENV)
    env.setdefault("UNI20_RANKS", "1")
    env.setdefault("UNI20_THREADS_PER_RANK", str(args.threads))
    print("uni20:", " ".join(cmd))
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "sweeps.json")) as f:
        doc = json.load(f)
    return {
        "energy": doc["measure"]["energy"],
        "variance": doc["measure"]["variance"],
        "sz": 2.0 * read_npy(os.path.join(out, "profile.npy")),
        "entropy": read_npy(os.path.join(out, "entropy.npy")),
    }


def run_tenpy(args):
    try:
        from tenpy.algorithms import dmrg
        from tenpy.models.tf_ising import TFIChain
        from tenpy.networks.mps import MPS
    except ImportError:
        return None
    model = TFIChain({"L": args.sites, "J": 1.0, "g": args.g, "bc_MPS": "finite", "conserve": None})
    psi = MPS.from_product_state(model.lat.mps_sites(), ["up"] * args.sites, bc="finite")
    info = dmrg.run(
        psi,
        model,
        {
            "trunc_params": {"chi_max": args.chi, "svd_min": args.cutoff},
            "mixer": None,
            "max_E_err": 1e-13,
            "max_sweeps": 40,
        },
    )
    return {
        "energy": model.H_MPO.expectation_value(psi),
        "variance": model.H_MPO.variance(psi),
        "sz": np.asarray(psi.expectation_value("Sigmaz")),
        "entropy": np.asarray(psi.entanglement_entropy()),
        "dmrg_energy": info["E"],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sites", type=int, default=24)
    p.add_argument("--g", type=float, default=1.5)
    p.add_argument("--chi", type=int, default=32)
    p.add_argument("--cutoff", type=float, default=1e-12)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--tol", type=float, default=1e-8)
    p.add_argument("--no-build", action="store_true")
    args = p.parse_args()

    blas_info()
    exact = exact_energy(args.sites, args.g)
    u = run_uni20(args)
    failures = []

    def check(name, a, b):
        d = float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
        ok = d <= args.tol
        print(f"{name:<40} max |difference| = {d:.3e}  {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(name)

    print(f"exact free-fermion energy {exact:.12f}; uni20 <H> {u['energy']:.12f}, variance {u['variance']:.3e}")
    check("energy: uni20 vs free fermions", u["energy"], exact)
    t = run_tenpy(args)
    if t is None:
        print("TeNPy not installed (pip install physics-tenpy): the comparison with TeNPy is skipped")
    else:
        import tenpy

        print(f"TeNPy {tenpy.__version__}: <H> {t['energy']:.12f}, variance {t['variance']:.3e}")
        check("energy: uni20 vs TeNPy", u["energy"], t["energy"])
        check("variance: uni20 vs TeNPy", u["variance"], t["variance"])
        check("<sz_i>: uni20 vs TeNPy", u["sz"], t["sz"])
        check("entanglement entropy: uni20 vs TeNPy", u["entropy"], t["entropy"])
    if failures:
        print("disagreements:", ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
