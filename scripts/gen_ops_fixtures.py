#!/usr/bin/env python3
"""Generate numpy reference fixtures for the distributed element-wise operations and
reductions of uni20-dist (tests/ops_fixtures.rs).

Writes tests/fixtures/ops/<case>/ with
  op.txt       one line: `axpby <spec> <alpha> <beta>`, `permute <spec>`,
               `reshape <d0,d1,..>` (new shape; empty for rank 0) or `reduce`
  a.npy        first operand
  b.npy        second operand (axpby, reduce)
  out.npy      axpby:   alpha * transpose(a -> out) + beta * transpose(b -> out)
               permute: transpose(a, spec)
               reshape: a.reshape(shape) (C order)
               reduce:  complex128 [np.vdot(a, b), np.linalg.norm(a), np.max(np.abs(a))]

Element-wise inputs are multiples of 1/4 with |k| <= 12 and the scalars are dyadic, so
every result is exact in every dtype: the Rust test compares bit for bit. axpby results
are computed in float64/complex128 and rounded once to np.result_type(a, b), which is what
uni20 does. Reduction inputs are standard normal (the test allows 1e-12 relative).

Deterministic: seeded RNG; rerunning rewrites identical files.

Usage: python3 scripts/gen_ops_fixtures.py   (from anywhere; needs numpy)
"""

import os
import shutil

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "ops")
RNG = np.random.default_rng(20250612)


def quarters(shape, dtype):
    dtype = np.dtype(dtype)
    x = RNG.integers(-12, 13, size=shape) / 4.0
    if dtype.kind == "c":
        x = x + 1j * (RNG.integers(-12, 13, size=shape) / 4.0)
    return np.array(x, dtype=dtype)


def normal(shape, dtype):
    dtype = np.dtype(dtype)
    x = RNG.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return np.array(x, dtype=dtype)


def wide(x):
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def fmt_scalar(z):
    z = complex(z)
    if z.imag == 0:
        return repr(z.real)
    return f"{z.real!r}{z.imag:+}j"


def write(name, op, a, b=None, out=None):
    d = os.path.join(ROOT, name)
    os.makedirs(d)
    with open(os.path.join(d, "op.txt"), "w") as f:
        f.write(op + "\n")
    np.save(os.path.join(d, "a.npy"), np.ascontiguousarray(a) if a.ndim else a)
    if b is not None:
        np.save(os.path.join(d, "b.npy"), np.ascontiguousarray(b) if b.ndim else b)
    np.save(os.path.join(d, "out.npy"), np.ascontiguousarray(out) if out.ndim else out)
    for fn in os.listdir(d):
        assert os.path.getsize(os.path.join(d, fn)) < 40_000, (name, fn)


def parse(spec):
    lhs, out = spec.replace(" ", "").split("->")
    groups = lhs.split(",")
    a = groups[0]
    b = groups[1] if len(groups) > 1 else out
    return a, b, out


def to_out(x, labels, out):
    return np.transpose(x, [labels.index(c) for c in out]) if out else x


def axpby(name, spec, a_shape, a_dt, b_dt, alpha, beta):
    la, lb, lo = parse(spec)
    a = quarters(a_shape, a_dt)
    out_shape = [a_shape[la.index(c)] for c in lo]
    b_shape = tuple(out_shape[lo.index(c)] for c in lb)
    b = quarters(b_shape, b_dt)
    res = alpha * to_out(wide(a), la, lo) + beta * to_out(wide(b), lb, lo)
    out = np.array(res, dtype=np.result_type(a, b))
    write(name, "axpby %s %s %s" % (spec, fmt_scalar(alpha), fmt_scalar(beta)), a, b, out)


def permute(name, spec, shape, dt):
    la, _, lo = parse(spec)
    a = quarters(shape, dt)
    write(name, "permute " + spec, a, out=np.ascontiguousarray(to_out(a, la, lo)))


def reshape(name, shape, new, dt):
    a = quarters(shape, dt)
    write(name, "reshape " + ",".join(str(d) for d in new), a, out=a.reshape(new))


def reduce(name, shape, a_dt, b_dt):
    a = normal(shape, a_dt)
    b = normal(shape, b_dt)
    wa, wb = wide(a), wide(b)
    out = np.array(
        [np.vdot(wa, wb), np.linalg.norm(wa.ravel()), np.max(np.abs(wa)) if wa.size else 0.0],
        dtype=np.complex128,
    )
    write(name, "reduce", a, b, out)


def main():
    if os.path.isdir(ROOT):
        shutil.rmtree(ROOT)
    os.makedirs(ROOT)
    axpby("axpby_same_f64", "ijk->ijk", (3, 4, 5), "f8", "f8", 1.5, -0.25)
    axpby("axpby_perm_a_f64", "ijk->kij", (3, 4, 5), "f8", "f8", 1.0, 1.0)
    axpby("axpby_both_perm_c128", "ijk,jki->kji", (4, 3, 5), "c16", "c16", 0.5 - 2.0j, 1.25 + 0.5j)
    axpby("axpby_mixed_f64_c128", "ij,ji->ij", (5, 6), "f8", "c16", -2.0, 0.75)
    axpby("axpby_f32", "ij->ji", (6, 7), "f4", "f4", 0.5, 2.0)
    axpby("axpby_c64", "abcd,dcba->badc", (2, 3, 4, 3), "c8", "c8", 1.0 + 1.0j, -1.0)
    axpby("axpby_rank0", "->", (), "f8", "f8", 3.0, -0.5)
    axpby("axpby_zero_size", "ij->ji", (0, 3), "f8", "f8", 1.0, 1.0)
    permute("permute_c128", "ijk->kij", (3, 4, 5), "c16")
    permute("permute_f64_rank4", "ijkl->ljik", (2, 3, 4, 5), "f8")
    permute("permute_f32", "ab->ba", (7, 3), "f4")
    permute("permute_c64", "abc->bca", (2, 5, 3), "c8")
    reshape("reshape_fuse_f64", (2, 3, 4), (6, 4), "f8")
    reshape("reshape_split_f64", (6, 4), (2, 3, 4), "f8")
    reshape("reshape_split_c128", (12, 5), (2, 2, 3, 5), "c16")
    reshape("reshape_fuse_all_f32", (4, 6), (24,), "f4")
    reshape("reshape_ones_c128", (2, 1, 3, 4), (2, 3, 1, 4, 1), "c16")
    reshape("reshape_to_rank0_c64", (1, 1), (), "c8")
    reduce("reduce_f64", (37, 41), "f8", "f8")
    reduce("reduce_c128", (5, 6, 7), "c16", "c16")
    reduce("reduce_mixed_f64_c128", (9, 11), "f8", "c16")
    reduce("reduce_f32", (20, 30), "f4", "f4")
    reduce("reduce_c64", (13, 17), "c8", "c8")


if __name__ == "__main__":
    main()
