"""Shared fixtures: one universe for the whole session.

Under ``mpirun -n 3 python -m pytest`` (the MPI build) every rank runs pytest; ranks 1 and 2
become workers when the session fixture starts the universe and exit when rank 0 closes it,
so the tests themselves run on rank 0 only. A process can start one MPI universe, hence the
session scope; tests that need a universe of their own run a script in a subprocess
(in-process sessions only).
"""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import uni20

HERE = pathlib.Path(__file__).resolve().parent
SCRIPTS = HERE / "scripts"
REPO = HERE.parents[2]
UNDER_MPI = uni20.launched_by_mpi()


@pytest.fixture(scope="session")
def u():
    with uni20.Universe(ranks=3, threads_per_rank=1) as universe:
        yield universe


def run_script(name, *args, env=None, timeout=120, mpi_ranks=None):
    """Runs tests/scripts/<name> in a fresh interpreter (under ``mpirun -n mpi_ranks`` when
    given) and returns the CompletedProcess (text output)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    cmd = [sys.executable, str(SCRIPTS / name), *map(str, args)]
    if mpi_ranks is not None:
        cmd = mpirun_command(mpi_ranks) + cmd
    return subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout)


def mpirun_command(n):
    """``mpirun -n N`` with what this machine needs (root, oversubscription)."""
    cmd = [shutil.which("mpirun") or "mpirun", "-n", str(n), "--oversubscribe", "--mca", "mpi_yield_when_idle", "1"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd


def mpi_available():
    """Why MPI subprocess tests cannot run here, or None if they can."""
    if not uni20.MPI_BUILD:
        return "this uni20 was built without the `mpi` feature"
    if shutil.which("mpirun") is None:
        return "mpirun is not on PATH"
    return None


needs_subprocess = pytest.mark.skipif(
    UNDER_MPI, reason="starts its own universe in a subprocess: runs in the in-process session only"
)
