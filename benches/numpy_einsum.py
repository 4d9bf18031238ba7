#!/usr/bin/env python3
"""numpy.einsum(optimize=True) against uni20's local contract, interleaved call by call.

Cases (f64): "ij,jk->ik" at n = 512, 1024, 2048, "abcd,dbef->acef" with every extent
D = 28 (2 * D**6 = 0.96e9 flops, the shape of `cargo bench -p uni20-dispatch --bench
dispatch_contract`) and D = 32 (2.1e9 flops), and the DMRG-shaped "abc,bdef->adcef" (an
environment chi x w x chi times an MPO tensor w x d x d x w; chi = 100, d = 2, w = 5).

The uni20 side is the timing server `examples/einsum_timing.rs`; this script starts it once
and, for every repetition, times one numpy.einsum call here, then one uni20 `contract`, one
raw faer GEMM of the matricized shape and one uni20 `contract` of the matricized matmul
(`ij,jk->ik`, m x k times k x n, same backends: the contraction without its permutations)
there, rotating which goes first, so all are measured in the same seconds. On a shared machine whose speed drifts by 20-40 % over
tens of seconds this is the only fair comparison; back-to-back runs of two programs are not.

Run (OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE may be set machine-wide; unset them for this
command only so OpenBLAS picks its kernel from the CPU; a uni20 built with `--features blas`
on a system OpenBLAS too old to know the CPU, which `uni20 info` reports as a generic kernel,
needs OPENBLAS_CORETYPE=SkylakeX or Haswell for its BLAS backend to be competitive: the
variable then reaches numpy too, whose own OpenBLAS picks the same kernel for such CPUs):

    cargo build --release --example einsum_timing [--features blas]
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 benches/numpy_einsum.py

Options: `--server LABEL=PATH` or `--server PATH` (repeatable) compares several uni20 builds
at once (default: `uni20=<repository>/target/release/examples/einsum_timing`); `--threads N` is passed to each server
(default: all cores, as numpy/OpenBLAS uses); `--numpy-only` skips the servers; `--reps K`
multiplies the repetition counts; `--sizes 256,512` picks the matmul sizes and
`--no-permuted` skips the abcd,dbef->acef and DMRG cases; `--pause S` (default 0.15) is the idle time before each
timed call, so that neither side's spinning worker threads (OpenBLAS spins for about 2^28
cycles after a call) are charged to the other.

Prints the BLAS library and its detected kernel (via threadpoolctl when installed), then per
case the backend uni20 ran, the median and best of each side, GFLOP/s from the median, the
ratio numpy median / uni20 median (above 1: uni20 is faster), and contract / raw faer GEMM
and contract / uni20 matmul of the matricized shape.
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np


def blas_info():
    """One line per BLAS threadpool, or a note that threadpoolctl is missing."""
    lines = [
        "OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s"
        % (os.environ.get("OPENBLAS_CORETYPE", "<unset>"), os.environ.get("OPENBLAS_L2_SIZE", "<unset>"))
    ]
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        lines.append("threadpoolctl not installed (pip install threadpoolctl): kernel unknown")
        return lines
    for pool in threadpool_info():
        lines.append(
            "%s %s: internal_api=%s architecture=%s threads=%s threading_layer=%s"
            % (
                pool.get("user_api"),
                pool.get("version"),
                pool.get("internal_api"),
                pool.get("architecture"),
                pool.get("num_threads"),
                pool.get("threading_layer"),
            )
        )
    return lines


class Server:
    """One `einsum_timing` process: prepare a case, then time `contract` or `gemm` calls."""

    def __init__(self, label, path, threads):
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            sys.exit(
                "%s is not an executable file: run `cargo build --release --example einsum_timing` "
                "first (or pass --numpy-only)" % path
            )
        cmd = [path] + (["--threads", str(threads)] if threads else [])
        self.label = label
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        except OSError as e:
            sys.exit("cannot start server %s (%s): %s" % (label, path, e))

    def ask(self, line):
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline().strip()
        except OSError:
            reply = ""
        if not reply or reply.startswith("error"):
            sys.exit("server %s: %r -> %r" % (self.label, line, reply or "<exited>"))
        return reply

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def dims(shape):
    return ",".join(str(d) for d in shape)


def run_case(label, spec, a, b, flops, reps, servers, pause):
    """Times numpy.einsum and every server, interleaved; prints one line per side."""
    chosen = {}
    for s in servers:
        reply = s.ask("prepare %s %s %s" % (spec, dims(a.shape), dims(b.shape)))
        chosen[s.label] = dict(w.split("=", 1) for w in reply.split()[1:] if "=" in w).get("backend", "?")
    np.einsum(spec, a, b, optimize=True)

    def numpy_once():
        t = time.perf_counter()
        np.einsum(spec, a, b, optimize=True)
        return time.perf_counter() - t

    sides = [("numpy.einsum", numpy_once)]
    for s in servers:
        sides.append(("%s contract" % s.label, lambda s=s: float(s.ask("contract"))))
        sides.append(("%s raw faer gemm" % s.label, lambda s=s: float(s.ask("gemm"))))
        sides.append(("%s matmul" % s.label, lambda s=s: float(s.ask("matmul"))))
    times = {name: [] for name, _ in sides}
    for r in range(reps):
        k = r % len(sides)
        for name, once in sides[k:] + sides[:k]:
            # Let the other side's worker threads go idle first: OpenBLAS threads spin for
            # about 2^28 cycles after a call, rayon's briefly; on a 2-core machine a spinning
            # neighbour would be charged to whoever runs next.
            time.sleep(pause)
            times[name].append(once())
    print("%s (%.3g flops, %d interleaved repetitions)" % (label, flops, reps))
    med = {name: statistics.median(ts) for name, ts in times.items()}
    for name, ts in times.items():
        print(
            "  %-26s median %9.3f ms  best %9.3f ms  %7.1f GFLOP/s"
            % (name, med[name] * 1e3, min(ts) * 1e3, flops / med[name] / 1e9)
        )
    for s in servers:
        c = med["%s contract" % s.label]
        print(
            "  ratio numpy/%s contract = %.3f (%s, backend %s); contract/raw faer gemm = %.3f; "
            "contract/matmul = %.3f"
            % (
                s.label,
                med["numpy.einsum"] / c,
                "uni20 faster" if med["numpy.einsum"] > c else "numpy faster",
                chosen[s.label],
                c / med["%s raw faer gemm" % s.label],
                c / med["%s matmul" % s.label],
            )
        )
    sys.stdout.flush()


def sizes(text):
    """argparse type: comma-separated positive matrix sizes."""
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected comma-separated integers, got %r" % text)
    if not out or min(out) <= 0:
        raise argparse.ArgumentTypeError("expected positive sizes, got %r" % text)
    return out


def nonnegative(text):
    """argparse type: a float >= 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number, got %r" % text)
    if not v >= 0:
        raise argparse.ArgumentTypeError("expected a number >= 0, got %r" % text)
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", action="append", default=[], help="LABEL=PATH of an einsum_timing binary")
    ap.add_argument("--threads", type=int, default=0, help="thread budget of each server (default: all cores)")
    ap.add_argument("--numpy-only", action="store_true", help="time numpy alone")
    ap.add_argument("--sizes", type=sizes, default=[512, 1024, 2048], help="comma-separated n of the ij,jk->ik cases")
    ap.add_argument("--no-permuted", action="store_true", help="skip the abcd,dbef->acef cases")
    ap.add_argument("--pause", type=nonnegative, default=0.15, help="seconds of idle before each timed call")
    ap.add_argument("--reps", type=nonnegative, default=1.0, help="multiplier of the repetition counts")
    args = ap.parse_args()

    print("numpy %s on %s, python %s, %s cpus" % (np.__version__, platform.machine(), platform.python_version(), os.cpu_count()))
    for line in blas_info():
        print(line)
    servers = []
    if not args.numpy_only:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        specs = args.server or ["uni20=" + os.path.join(root, "target", "release", "examples", "einsum_timing")]
        for item in specs:
            # LABEL=PATH, or a bare PATH labelled by its file name.
            label, sep, path = item.partition("=")
            if not sep:
                label, path = os.path.basename(item), item
            servers.append(Server(label, path, args.threads))
    reps = lambda n: max(3, int(n * args.reps))
    rng = np.random.default_rng(0)
    try:
        for n in args.sizes:
            r = 41 if n <= 512 else (21 if n <= 1024 else 9)
            a = rng.standard_normal((n, n))
            b = rng.standard_normal((n, n))
            run_case("ij,jk->ik n=%d" % n, "ij,jk->ik", a, b, 2.0 * n**3, reps(r), servers, args.pause)
        for d, r in () if args.no_permuted else ((28, 21), (32, 11)):
            a = rng.standard_normal((d, d, d, d))
            b = rng.standard_normal((d, d, d, d))
            run_case("abcd,dbef->acef D=%d" % d, "abcd,dbef->acef", a, b, 2.0 * d**6, reps(r), servers, args.pause)
        if not args.no_permuted:
            path = np.einsum_path("abcd,dbef->acef", a, b, optimize=True)[0]
            print("numpy's einsum path for abcd,dbef->acef: %s" % (path,))
            chi, d, w = 100, 2, 5
            a = rng.standard_normal((chi, w, chi))
            b = rng.standard_normal((w, d, d, w))
            flops = 2.0 * chi * chi * d * d * w * w
            label = "abc,bdef->adcef chi=%d d=%d w=%d" % (chi, d, w)
            run_case(label, "abc,bdef->adcef", a, b, flops, reps(41), servers, args.pause)
    finally:
        for s in servers:
            s.close()


if __name__ == "__main__":
    main()
