#!/usr/bin/env python3
"""TeNPy peer of `benches/sym_contract.rs`: `npc.tensordot` of the DMRG-shaped U(1)
contraction L(a, w, b) x theta(b, s, t, c) -> (a, w, s, t, c) on the legs the Rust bench
sends, one timed call per request, so that the bench can interleave it with its own runs.

Protocol (one line each, on stdin / stdout):
  request  {"bond": [[q, d], ...], "mpo": [[q, d], ...], "phys": [[q, d], ...]}
  reply    <seconds of one npc.tensordot call>   (operands built once per leg set, cached)
The thread count is TENPY_THREADS (set by the bench to uni20's), applied with
`threadpoolctl.threadpool_limits`. The first line written is `ready <json of threadpoolctl.threadpool_info()>`, or
`skip <reason>` when TeNPy (or numpy) is missing; then the script exits.

Charge convention (the same as uni20's): qconj +1 for an Out leg, -1 for an In leg; charges
are 2 Sz. L: a In, w Out, b Out; theta: b In, s In, t In, c Out; both have total charge 0.
"""
import json
import os
import sys
import time


def main():
    try:
        import numpy as np
        import tenpy.linalg.np_conserved as npc
    except ImportError as e:  # pragma: no cover - depends on the machine
        print(f"skip TeNPy not installed ({e})", flush=True)
        return
    threads = int(os.environ.get("TENPY_THREADS", "1"))
    try:
        import threadpoolctl

        threadpoolctl.threadpool_limits(threads)
        info = threadpoolctl.threadpool_info()
    except ImportError:
        info = "threadpoolctl not installed"
    print("ready " + json.dumps(info), flush=True)
    chinfo = npc.ChargeInfo([1], ["2*Sz"])
    rng = np.random.default_rng(7)
    cache = {}

    def leg(sectors, qconj):
        slices = [0]
        for _, d in sectors:
            slices.append(slices[-1] + d)
        charges = [[q] for q, _ in sectors]
        return npc.LegCharge.from_qind(chinfo, slices, charges, qconj)

    def rand(legs):
        return npc.Array.from_func(
            lambda size: rng.standard_normal(size), legs, qtotal=[0], shape_kw="size"
        )

    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        if line not in cache:
            req = json.loads(line)
            bond, mpo, phys = req["bond"], req["mpo"], req["phys"]
            L = rand([leg(bond, -1), leg(mpo, +1), leg(bond, +1)])
            th = rand([leg(bond, -1), leg(phys, -1), leg(phys, -1), leg(bond, +1)])
            cache[line] = (L, th)
        L, th = cache[line]
        t = time.perf_counter()
        out = npc.tensordot(L, th, axes=([2], [0]))
        dt = time.perf_counter() - t
        del out
        print(f"{dt:.9f}", flush=True)


if __name__ == "__main__":
    main()
