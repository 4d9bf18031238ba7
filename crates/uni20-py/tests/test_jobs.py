"""Whole jobs in subprocesses: a command failing on a worker, a Python exception on rank 0
(in-process and under `mpirun -n 3`), Ctrl-C, and the example script against the Rust example."""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, SCRIPTS, mpi_available, mpirun_command, needs_subprocess, run_script

pytestmark = needs_subprocess


def check_fault(proc):
    assert proc.returncode == 0, proc.stderr
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1]
    out = json.loads(line)
    assert out["class"] == "JobError", out
    assert out["rank"] == 1, out
    assert out["command"] and out["command"].startswith("uni20."), out
    assert "rank 1" in out["message"], out
    assert out["later"] == "JobError", out


def test_worker_failure_is_a_job_error_naming_rank_and_command():
    check_fault(run_script("fault_job.py", env={"UNI20_INJECT_FAULT": "error@rank=1"}))


def test_worker_failure_under_mpi():
    why = mpi_available()
    if why:
        pytest.skip(why)
    check_fault(run_script("fault_job.py", env={"UNI20_INJECT_FAULT": "error@rank=1"}, mpi_ranks=3))


def check_raise(proc, seconds):
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text
    assert seconds < 10, f"the job took {seconds:.1f} s to end"
    assert text.count("Traceback (most recent call last)") == 1, text
    assert text.count("RuntimeError: deliberate failure on rank 0") == 1, text
    assert "norm 8.0" in text


def test_exception_on_root_in_process():
    t0 = time.monotonic()
    proc = run_script("raise_on_root.py")
    check_raise(proc, time.monotonic() - t0)


def test_exception_on_root_stops_every_mpi_rank_within_10_s():
    why = mpi_available()
    if why:
        pytest.skip(why)
    t0 = time.monotonic()
    proc = run_script("raise_on_root.py", mpi_ranks=3, timeout=60)
    check_raise(proc, time.monotonic() - t0)


def test_ctrl_c_stops_the_job():
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPTS / "interrupt.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.0)  # well inside the first sweeps
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        seconds = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in err, err
    assert "not reached" not in out
    assert seconds < 5, f"{seconds:.1f} s from SIGINT to exit"


def rust_example():
    """The `dmrg` example binary: $UNI20_DMRG_EXAMPLE, else a built one under target/."""
    env = os.environ.get("UNI20_DMRG_EXAMPLE")
    if env:
        return pathlib.Path(env)
    for profile in ("release", "debug"):
        p = REPO / "target" / profile / "examples" / "dmrg"
        if p.exists():
            return p
    return None


FINAL = re.compile(r"final: E = (-?\d+\.\d+) after (\d+) sweeps")


def test_example_script_matches_the_rust_example():
    exe = rust_example()
    if exe is None:
        pytest.skip("the Rust dmrg example is not built (cargo build --example dmrg, or set UNI20_DMRG_EXAMPLE)")
    length, chi = os.environ.get("UNI20_DMRG_COMPARE", "12,16").split(",")
    rust = subprocess.run(
        [str(exe), "--sites", length, "--chi-max", chi], capture_output=True, text=True, timeout=600
    )
    assert rust.returncode == 0, rust.stderr
    py = subprocess.run(
        [sys.executable, str(REPO / "crates" / "uni20-py" / "examples" / "dmrg.py"), length, chi],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert py.returncode == 0, py.stderr
    (e_rust, n_rust), (e_py, n_py) = FINAL.search(rust.stdout).groups(), FINAL.search(py.stdout).groups()
    assert n_rust == n_py
    assert abs(float(e_rust) - float(e_py)) <= 1e-10, (e_rust, e_py)
