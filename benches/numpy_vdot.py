#!/usr/bin/env python3
"""numpy.vdot against uni20's distributed `inner` of two 4096 x 4096 f64 tensors,
interleaved call by call.

The uni20 side is the timing server `examples/inner_timing.rs` (an in-process universe:
the root and `--ranks - 1` workers, each with `--threads` kernel threads; the tensors are
made on the workers by `uni20::random` and stay there). For every repetition this script
times one `numpy.vdot(a, b)` here, one distributed `uni20::inner(ctl, &a, &b)` there (plan,
submission, the workers' block reductions, the combination on the leader worker, the one
scalar back to the root) and one local `uni20::dispatch::inner` of root-local copies (the
kernel floor), rotating which goes first, so all are measured in the same seconds (see
benches/numpy_einsum.py for why).

Run (OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE may be set machine-wide; unset them for this
command only so OpenBLAS picks its kernel from the CPU):

    cargo build --release --example inner_timing
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 benches/numpy_vdot.py

Options: `--n` (default 4096), `--block` (default 1024), `--ranks` (default 3) and
`--threads` (default 1) of the server, `--reps` (default 31), `--pause` seconds of idle
before each timed call (default 0.3), `--server PATH`.

The pause is longer than numpy_einsum.py's 0.15 s on purpose: OpenBLAS's threads spin for
about 2^28 cycles (about 0.1 s here) after each call, and a 4096 x 4096 vdot is only about
10 ms, so with a shorter pause numpy's spinning threads still hold a core while uni20 runs
(uni20's medians then doubled in our runs). With 0.3 s both sides start from idle threads.

Without numpy the script prints a message and exits 0 (nothing to compare against).
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

try:
    import numpy as np
except ImportError:
    print("numpy is not installed: skipping the numpy.vdot comparison (pip install numpy)")
    sys.exit(0)


class Server:
    def __init__(self, path, ranks, threads):
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            sys.exit("%s is not an executable file: run `cargo build --release --example inner_timing` first" % path)
        cmd = [path, "--ranks", str(ranks), "--threads", str(threads)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def ask(self, line):
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline().strip()
        except OSError:
            reply = ""
        if not reply or reply.startswith("error"):
            sys.exit("server: %r -> %r" % (line, reply or "<exited>"))
        return reply

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--server", default=os.path.join(root, "target", "release", "examples", "inner_timing"))
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=31)
    ap.add_argument("--pause", type=float, default=0.3)
    args = ap.parse_args()

    print("numpy %s on %s, python %s, %s cpus, load average %s"
          % (np.__version__, platform.machine(), platform.python_version(), os.cpu_count(),
             " ".join("%.2f" % x for x in os.getloadavg())))
    server = Server(args.server, args.ranks, args.threads)
    try:
        info = server.ask("prepare %d %d" % (args.n, args.block))
        rng = np.random.default_rng(0)
        a = rng.uniform(-1.0, 1.0, (args.n, args.n))
        b = rng.uniform(-1.0, 1.0, (args.n, args.n))
        np.vdot(a, b)

        def numpy_once():
            t = time.perf_counter()
            np.vdot(a, b)
            return time.perf_counter() - t

        sides = [
            ("numpy.vdot", numpy_once),
            ("uni20 inner (distributed)", lambda: float(server.ask("inner"))),
            ("uni20 dispatch::inner (local)", lambda: float(server.ask("local"))),
        ]
        times = {name: [] for name, _ in sides}
        for r in range(args.reps):
            k = r % len(sides)
            for name, once in sides[k:] + sides[:k]:
                time.sleep(args.pause)
                times[name].append(once())
        gb = 2 * 8 * args.n * args.n / 1e9
        print("inner of two %dx%d f64 (%s; %d ranks x %d threads; %d interleaved repetitions)"
              % (args.n, args.n, info, args.ranks, args.threads, args.reps))
        med = {name: statistics.median(ts) for name, ts in times.items()}
        for name, ts in times.items():
            print("  %-30s median %8.3f ms  best %8.3f ms  %6.2f GB/s"
                  % (name, med[name] * 1e3, min(ts) * 1e3, gb / med[name]))
        ratio = med["numpy.vdot"] / med["uni20 inner (distributed)"]
        print("  ratio numpy/uni20 inner = %.3f (%s)" % (ratio, "uni20 faster" if ratio > 1 else "numpy faster"))
        print("  load average after: %s" % " ".join("%.2f" % x for x in os.getloadavg()))
    finally:
        server.close()


if __name__ == "__main__":
    main()
