#!/usr/bin/env python3
"""numpy.einsum(optimize=True) timings, for comparison with `cargo bench --bench contract`.

Cases: "ij,jk->ik" at n = 512, 1024, 2048 (f64), and "abcd,dbef->acef" with every extent
equal to D = 32 (2 * D**6 = 2.1e9 flops, i.e. ~1e9 multiply-adds) and D = 28 (0.96e9 flops,
the shape used by `cargo bench -p uni20-dispatch --bench dispatch_contract`).

Run (OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE may be set machine-wide; unset them for this
command only so OpenBLAS picks its kernel from the CPU):

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 benches/numpy_einsum.py

Prints the BLAS library, its detected kernel (via threadpoolctl when installed) and one line
per case: median and best of N runs, and GFLOP/s from the median.
"""

import os
import platform
import statistics
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


def bench(label, spec, a, b, flops, reps):
    """Times np.einsum(spec, a, b, optimize=True); one warm-up call, then `reps` calls."""
    np.einsum(spec, a, b, optimize=True)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        np.einsum(spec, a, b, optimize=True)
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    print(
        "%-34s median %9.3f ms  best %9.3f ms  %7.1f GFLOP/s  (n=%d)"
        % (label, med * 1e3, min(times) * 1e3, flops / med / 1e9, reps)
    )


def main():
    print("numpy %s on %s, python %s, %s cpus" % (np.__version__, platform.machine(), platform.python_version(), os.cpu_count()))
    for line in blas_info():
        print(line)
    rng = np.random.default_rng(0)
    for n, reps in ((512, 41), (1024, 21), (2048, 7)):
        a = rng.standard_normal((n, n))
        b = rng.standard_normal((n, n))
        bench("ij,jk->ik n=%d" % n, "ij,jk->ik", a, b, 2.0 * n**3, reps)
    d = 32
    a = rng.standard_normal((d, d, d, d))
    b = rng.standard_normal((d, d, d, d))
    path = np.einsum_path("abcd,dbef->acef", a, b, optimize=True)[0]
    bench("abcd,dbef->acef D=%d" % d, "abcd,dbef->acef", a, b, 2.0 * d**6, 11)
    print("einsum path for abcd,dbef->acef: %s" % (path,))
    # D = 28 (2 * 28**6 = 0.96e9 flops): the shape of `cargo bench -p uni20-dispatch --bench
    # dispatch_contract`.
    d = 28
    a = rng.standard_normal((d, d, d, d))
    b = rng.standard_normal((d, d, d, d))
    bench("abcd,dbef->acef D=%d" % d, "abcd,dbef->acef", a, b, 2.0 * d**6, 11)


if __name__ == "__main__":
    main()
