#!/usr/bin/env python3
"""Generate numpy reference fixtures for the distributed decompositions (uni20::svd, qr, lq, eigh).

Writes tests/fixtures/decomp/<case>/ with:
  op.txt     svd | qr | lq | eigh
  split.txt  the label split given to the call, e.g. "ab|cd" or "abc->ca|b"
  a.npy      the input tensor (C order)
  and, computed by numpy in float64 / complex128 from the stored input (so single-precision
  cases have an accurate oracle):
  s.npy      svd:  the singular values of the matrix view, descending (np.linalg.svd)
  w.npy      eigh: the eigenvalues, ascending (np.linalg.eigvalsh)
  r.npy      qr:   R of the matrix view, shape (k, column modes..), diagonal made real >= 0
  l.npy      lq:   L of the matrix view, shape (row modes.., k), diagonal made real >= 0

The matrix view follows uni20's rule: "ab|cd" labels the modes in order (rows first);
"abcd->ca|db" labels them on the left and lists rows | columns in any order; rows and
columns are flattened row-major in the order written.

Special cases: svd_f64_degenerate has singular values exactly (3, 2, 2, 2, 1) up to
rounding (a diagonal mixed by random orthogonal matrices), for the truncation rule at a
degenerate cut; svd_f64_lowrank has rank 3.

Deterministic: seeded RNG; rerunning rewrites identical files.

Usage: python3 scripts/gen_decomp_fixtures.py   (from anywhere; needs numpy)
"""

import os
import shutil

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "decomp")
RNG = np.random.default_rng(20251203)


def rand(shape, dtype):
    dtype = np.dtype(dtype)
    x = RNG.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return np.ascontiguousarray(x.astype(dtype))


def wide(a):
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def view(a, split):
    """The matrix view of `a` under `split` (uni20's rule), plus the row and column dims."""
    if "->" in split:
        labels, sides = split.split("->")
    else:
        labels, sides = split.replace("|", ""), split
    rows, cols = sides.split("|")
    perm = [labels.index(c) for c in rows + cols]
    t = np.transpose(a, perm)
    rdims = [a.shape[labels.index(c)] for c in rows]
    cdims = [a.shape[labels.index(c)] for c in cols]
    return t.reshape(int(np.prod(rdims)), int(np.prod(cdims))), rdims, cdims


def normalized_qr(m):
    q, r = np.linalg.qr(m)
    d = np.diagonal(r).copy()
    phase = np.where(np.abs(d) == 0, 1, d / np.where(np.abs(d) == 0, 1, np.abs(d)))
    return q * phase[np.newaxis, :], r * np.conj(phase)[:, np.newaxis]


def write(name, op, split, a, **outs):
    d = os.path.join(ROOT, name)
    os.makedirs(d)
    with open(os.path.join(d, "op.txt"), "w") as f:
        f.write(op + "\n")
    with open(os.path.join(d, "split.txt"), "w") as f:
        f.write(split + "\n")
    np.save(os.path.join(d, "a.npy"), np.ascontiguousarray(a))
    for k, v in outs.items():
        np.save(os.path.join(d, k + ".npy"), np.ascontiguousarray(v))


def svd_case(name, shape, dtype, split, a=None):
    a = rand(shape, dtype) if a is None else a
    m, _, _ = view(wide(a), split)
    write(name, "svd", split, a, s=np.linalg.svd(m, compute_uv=False).astype(np.float64))


def qr_case(name, shape, dtype, split, lq=False):
    a = rand(shape, dtype)
    m, rdims, cdims = view(wide(a), split)
    k = min(m.shape)
    if lq:
        q, r = normalized_qr(m.conj().T)
        write(name, "lq", split, a, l=r.conj().T.reshape(rdims + [k]))
    else:
        _, r = normalized_qr(m)
        write(name, "qr", split, a, r=r.reshape([k] + cdims))


def eigh_case(name, row_shape, dtype, split="ab|cd"):
    n = int(np.prod(row_shape))
    x = wide(rand((n, n), dtype))
    h = (x + x.conj().T) / 2
    a = h.astype(dtype)
    # Rounding to single precision keeps the matrix exactly Hermitian (both triangles round alike).
    w = np.linalg.eigvalsh(wide(a))
    write(name, "eigh", split, a.reshape(list(row_shape) + list(row_shape)), w=w)


def main():
    if os.path.exists(ROOT):
        shutil.rmtree(ROOT)
    os.makedirs(ROOT)
    svd_case("svd_f64_2x3x4x5", (2, 3, 4, 5), "f8", "ab|cd")
    svd_case("svd_c64_3x4x5", (3, 4, 5), "c16", "abc->ca|b")
    svd_case("svd_f32_6x8", (6, 8), "f4", "a|b")
    svd_case("svd_c32_4x3x2", (4, 3, 2), "c8", "a|bc")
    svd_case("svd_f64_wide_2x9x3", (2, 9, 3), "f8", "abc->b|ca")
    # Rank 3: three singular values at rounding level.
    lr = rand((8, 3), "f8") @ rand((3, 6), "f8")
    svd_case("svd_f64_lowrank", None, "f8", "a|b", a=np.ascontiguousarray(lr))
    # Singular values 3, 2, 2, 2, 1: a degenerate multiplet at the cut.
    u, _ = np.linalg.qr(rand((6, 5), "f8"))
    v, _ = np.linalg.qr(rand((5, 5), "f8"))
    deg = (u * np.array([3.0, 2.0, 2.0, 2.0, 1.0])) @ v.T
    # (a 2x3x5 tensor split "ab|c": the 6x5 matrix above)
    svd_case("svd_f64_degenerate", None, "f8", "ab|c", a=np.ascontiguousarray(deg.reshape(2, 3, 5)))
    qr_case("qr_f64_4x3x5", (4, 3, 5), "f8", "ab|c")
    qr_case("qr_c64_3x4x5", (3, 4, 5), "c16", "a|bc")
    qr_case("qr_f32_7x5", (7, 5), "f4", "a|b")
    lq_cases = [("lq_f64_3x4x5", (3, 4, 5), "f8", "a|bc"), ("lq_c64_4x3x2", (4, 3, 2), "c16", "abc->cb|a"),
                ("lq_c32_5x6", (5, 6), "c8", "a|b")]
    for name, shape, dt, split in lq_cases:
        qr_case(name, shape, dt, split, lq=True)
    eigh_case("eigh_f64_3x4", (3, 4), "f8")
    eigh_case("eigh_c64_2x3", (2, 3), "c16")
    eigh_case("eigh_f32_5", (5,), "f4", "a|b")
    eigh_case("eigh_c32_2x2", (2, 2), "c8")


if __name__ == "__main__":
    main()
