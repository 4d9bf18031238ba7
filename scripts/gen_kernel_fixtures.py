#!/usr/bin/env python3
"""Generate numpy reference fixtures for the uni20-dispatch decomposition, element-wise and
reduction kernels.

Writes crates/uni20-dispatch/tests/fixtures/kernels/:
  svd_<case>.npy       input matrix;  svd_<case>.s.npy   its singular values (float64,
                       descending), from np.linalg.svd of the input widened to 128-bit
                       complex / float64 (so single-precision cases have an accurate oracle)
  eigh_<case>.npy      Hermitian input; eigh_<case>.w.npy its eigenvalues (np.linalg.eigvalsh,
                       ascending, likewise in double precision)
  axpby_<case>/        a.npy, b.npy, params.txt (perm_a, conj_a, perm_b, conj_b, alpha, beta),
                       out.npy = alpha * op(transpose(a, perm_a)) + beta * op(transpose(b, perm_b));
                       inputs are small multiples of 1/4 so the result is exact in any dtype
  reduce_<case>/       a.npy, b.npy, out.npy = [np.vdot(a, b), sum |a|^2, max |a|] (complex128)
  inner_large.txt      for tensors defined by an integer formula (see formula() below, which the
                       Rust test reproduces exactly): shape, the exactly rounded inner product
                       (error-free products + math.fsum) and numpy's np.vdot, per case

Deterministic: seeded RNG; rerunning rewrites identical files.

Usage: python3 scripts/gen_kernel_fixtures.py   (from anywhere; needs numpy)
"""

import math
import os
import shutil

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "uni20-dispatch",
                    "tests", "fixtures", "kernels")
RNG = np.random.default_rng(20250117)


def rand(shape, dtype):
    dtype = np.dtype(dtype)
    x = RNG.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return np.ascontiguousarray(x.astype(dtype))


def quarters(shape, dtype):
    """Entries k/4 with |k| <= 12: exact in every dtype, products and sums exact too."""
    dtype = np.dtype(dtype)
    x = RNG.integers(-12, 13, size=shape) / 4.0
    if dtype.kind == "c":
        x = x + 1j * (RNG.integers(-12, 13, size=shape) / 4.0)
    return np.ascontiguousarray(x.astype(dtype))


def wide(a):
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def save(name, arr):
    np.save(os.path.join(ROOT, name), np.ascontiguousarray(arr))


def svd_cases():
    cases = [("f64_7x5", (7, 5), "f8"), ("f64_3x8", (3, 8), "f8"), ("c64_6x4", (6, 4), "c16"),
             ("c64_4x9", (4, 9), "c16"), ("f32_6x6", (6, 6), "f4"), ("c32_5x3", (5, 3), "c8"),
             ("f64_1x6", (1, 6), "f8"), ("c64_5x1", (5, 1), "c16")]
    for name, shape, dt in cases:
        a = rand(shape, dt)
        save(f"svd_{name}.npy", a)
        save(f"svd_{name}.s.npy", np.linalg.svd(wide(a), compute_uv=False))


def eigh_cases():
    for name, n, dt in [("f64_8", 8, "f8"), ("c64_6", 6, "c16"), ("f32_5", 5, "f4"), ("c32_4", 4, "c8")]:
        x = rand((n, n), dt)
        h = (x + x.conj().T) / 2  # exactly Hermitian in its own dtype
        h = np.ascontiguousarray(h.astype(dt))
        assert np.array_equal(h, h.conj().T)
        save(f"eigh_{name}.npy", h)
        save(f"eigh_{name}.w.npy", np.linalg.eigvalsh(wide(h)))


def fmt_scalar(z):
    return f"{z.real!r} {z.imag!r}"


def axpby_cases():
    cases = [
        # name, a shape/dtype, perm_a, conj_a, b shape/dtype (or None), perm_b, conj_b, alpha, beta, out dtype
        ("c64_perm_conj", (2, 3, 4), "c16", [1, 2, 0], True, (4, 3, 2), "f8", [1, 0, 2], False,
         0.5 - 1.25j, 2.0 + 0.75j, "c16"),
        ("f64_transpose", (5, 3), "f8", [1, 0], False, (3, 5), "f8", [0, 1], False, 1.5, -0.25, "f8"),
        ("f32_c32_mixed", (2, 2, 3), "f4", [0, 1, 2], False, (2, 3, 2), "c8", [0, 2, 1], True,
         -0.75, 0.5 + 0.5j, "c8"),
        ("c32_scale_only", (3, 4), "c8", [1, 0], True, None, None, None, False, 1.0 + 2.0j, 0.0, "c8"),
    ]
    for name, sa, da, pa, ca, sb, db, pb, cb, alpha, beta, dout in cases:
        d = os.path.join(ROOT, f"axpby_{name}")
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        a = quarters(sa, da)
        np.save(os.path.join(d, "a.npy"), a)
        opa = np.transpose(a, pa)
        if ca:
            opa = opa.conj()
        out = complex(alpha) * wide(opa)
        lines = [f"perm_a {' '.join(map(str, pa))}", f"conj_a {int(ca)}", f"alpha {fmt_scalar(complex(alpha))}",
                 f"beta {fmt_scalar(complex(beta))}", f"out_dtype {np.dtype(dout).str}"]
        if sb is not None:
            b = quarters(sb, db)
            np.save(os.path.join(d, "b.npy"), b)
            opb = np.transpose(b, pb)
            if cb:
                opb = opb.conj()
            out = out + complex(beta) * wide(opb)
            lines += [f"perm_b {' '.join(map(str, pb))}", f"conj_b {int(cb)}"]
        out = out if np.dtype(dout).kind == "c" else out.real
        np.save(os.path.join(d, "out.npy"), np.ascontiguousarray(out.astype(dout)))
        with open(os.path.join(d, "params.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")


def reduce_cases():
    for name, shape, da, db in [("f64_33x47", (33, 47), "f8", "f8"), ("c64_17x5x9", (17, 5, 9), "c16", "c16"),
                                ("f32_c64_40x3", (40, 3), "f4", "c16"), ("c32_1000", (1000,), "c8", "c8")]:
        d = os.path.join(ROOT, f"reduce_{name}")
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        a, b = rand(shape, da), rand(shape, db)
        np.save(os.path.join(d, "a.npy"), a)
        np.save(os.path.join(d, "b.npy"), b)
        wa = wide(a)
        out = np.array([np.vdot(wa, wide(b)), np.sum(np.abs(wa) ** 2), np.max(np.abs(wa))], dtype=np.complex128)
        np.save(os.path.join(d, "out.npy"), out)


def formula(n, mult, mod):
    i = np.arange(n, dtype=np.int64)
    return ((i * mult) % mod - mod // 2).astype(np.float64) / float(mod)


def two_prod(a, b):
    """Error-free product: a * b == p + e exactly (Dekker/Veltkamp splitting)."""
    def split(x):
        c = 134217729.0 * x  # 2^27 + 1
        hi = c - (c - x)
        return hi, x - hi
    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def exact_dot(terms):
    """Correctly rounded sum of the exact products given as (x, y, sign) triples."""
    parts = []
    for x, y, sign in terms:
        p, e = two_prod(x, y)
        parts.append(sign * p)
        parts.append(sign * e)
    return math.fsum(np.concatenate(parts).tolist())


def inner_large():
    lines = []
    # real 4096 x 4096
    n = 4096 * 4096
    x, y = formula(n, 7919, 10007), formula(n, 104729, 10009)
    lines.append(f"real 4096 4096 {exact_dot([(x, y, 1.0)])!r} {float(np.vdot(x, y).real)!r} 0.0 0.0")
    del x, y
    # complex 1024 x 1024: a = xr + i xi, b = yr + i yi; conj(a) b = (xr yr + xi yi) + i (xr yi - xi yr)
    n = 1024 * 1024
    xr, xi = formula(n, 7919, 10007), formula(n, 6007, 10037)
    yr, yi = formula(n, 104729, 10009), formula(n, 3571, 10061)
    re = exact_dot([(xr, yr, 1.0), (xi, yi, 1.0)])
    im = exact_dot([(xr, yi, 1.0), (xi, yr, -1.0)])
    v = np.vdot(xr + 1j * xi, yr + 1j * yi)
    lines.append(f"complex 1024 1024 {re!r} {float(v.real)!r} {im!r} {float(v.imag)!r}")
    with open(os.path.join(ROOT, "inner_large.txt"), "w") as f:
        f.write("# kind rows cols exact_re numpy_vdot_re exact_im numpy_vdot_im\n")
        f.write("\n".join(lines) + "\n")


def main():
    os.makedirs(ROOT, exist_ok=True)
    svd_cases()
    eigh_cases()
    axpby_cases()
    reduce_cases()
    inner_large()


if __name__ == "__main__":
    main()
