#!/usr/bin/env python3
"""Generate numpy reference fixtures for uni20-dispatch contractions.

Writes tests/fixtures/contract/<case>/ with:
  spec.txt   one line, the einsum spec (explicit output)
  a.npy, b.npy
  c.npy + beta.txt   (optional) accumulator and its scale
  alpha.txt          (optional) scale of the product, e.g. "1.5" or "2.5-0.5j"
  out.npy    = alpha * np.einsum(spec, a, b) + beta * c

The expected output is computed in float64/complex128 from the stored inputs and then
rounded once to the result dtype (np.result_type(a, b, c)), so single-precision cases have
an accurate oracle. Deterministic: seeded RNG; rerunning rewrites identical files.

Also writes tests/fixtures/npy_endian/<case>/ (byte-order cases for the .npy reader):
  spec.txt
  a.npy, b.npy        big-endian ('>f8', '>c16', '>f4', '>c8'), some in Fortran order
  a_le.npy, b_le.npy  the same values little-endian, C order
  out.npy             np.einsum(spec, a, b), little-endian
with their own seeded RNG, so the contract fixtures above do not change.

Usage: python3 scripts/gen_fixtures.py   (from the repository root; needs numpy)
"""

import os
import shutil

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "contract")
RNG = np.random.default_rng(20240611)


def rand(shape, dtype):
    dtype = np.dtype(dtype)
    x = RNG.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return np.ascontiguousarray(x.astype(dtype))


def fmt_scalar(z):
    z = complex(z)
    if z.imag == 0:
        return repr(z.real)
    return f"{z.real!r}{z.imag:+}j"


def case(name, spec, a_shape, b_shape, a_dt="f8", b_dt="f8", alpha=None, beta=None, c_dt=None):
    a = rand(a_shape, a_dt)
    b = rand(b_shape, b_dt)
    wide = lambda x: x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    res = np.einsum(spec, wide(a), wide(b))
    out_dt = np.result_type(a, b)
    c = None
    if beta is not None:
        c = rand(res.shape, c_dt or out_dt)
        out_dt = np.result_type(out_dt, c)
    al = 1.0 if alpha is None else alpha
    out = al * res
    if c is not None:
        out = out + beta * wide(c)
    out = np.array(out, dtype=out_dt, order="C")
    d = os.path.join(ROOT, name)
    os.makedirs(d)
    with open(os.path.join(d, "spec.txt"), "w") as f:
        f.write(spec + "\n")
    np.save(os.path.join(d, "a.npy"), a)
    np.save(os.path.join(d, "b.npy"), b)
    if alpha is not None:
        with open(os.path.join(d, "alpha.txt"), "w") as f:
            f.write(fmt_scalar(alpha) + "\n")
    if c is not None:
        np.save(os.path.join(d, "c.npy"), c)
        with open(os.path.join(d, "beta.txt"), "w") as f:
            f.write(fmt_scalar(beta) + "\n")
    np.save(os.path.join(d, "out.npy"), out)
    for fn in os.listdir(d):
        assert os.path.getsize(os.path.join(d, fn)) < 20_000, (name, fn)


ENDIAN_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "npy_endian")
ENDIAN_RNG = np.random.default_rng(20250101)


def endian_case(name, spec, a_shape, b_shape, a_dt, b_dt, a_fortran, b_fortran):
    def make(shape, dt):
        x = ENDIAN_RNG.standard_normal(shape)
        if np.dtype(dt).kind == "c":
            x = x + 1j * ENDIAN_RNG.standard_normal(shape)
        return x.astype("<" + dt)

    a = make(a_shape, a_dt)
    b = make(b_shape, b_dt)
    d = os.path.join(ENDIAN_ROOT, name)
    os.makedirs(d)
    with open(os.path.join(d, "spec.txt"), "w") as f:
        f.write(spec + "\n")
    order = lambda fortran: np.asfortranarray if fortran else np.ascontiguousarray
    np.save(os.path.join(d, "a.npy"), order(a_fortran)(a.astype(">" + a_dt)))
    np.save(os.path.join(d, "b.npy"), order(b_fortran)(b.astype(">" + b_dt)))
    np.save(os.path.join(d, "a_le.npy"), np.ascontiguousarray(a))
    np.save(os.path.join(d, "b_le.npy"), np.ascontiguousarray(b))
    wide = lambda x: x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    out = np.einsum(spec, wide(a), wide(b)).astype(np.result_type(a, b))
    np.save(os.path.join(d, "out.npy"), np.ascontiguousarray(out))
    for fn in ("a.npy", "b.npy"):
        assert np.load(os.path.join(d, fn)).dtype.byteorder == ">", (name, fn)


def endian_fixtures():
    if os.path.isdir(ENDIAN_ROOT):
        shutil.rmtree(ENDIAN_ROOT)
    os.makedirs(ENDIAN_ROOT)
    endian_case("f64_c128", "ijk,kl->lji", (2, 3, 4), (4, 3), "f8", "c16", False, True)
    endian_case("f32_c64", "ij,jk->ik", (3, 4), (4, 5), "f4", "c8", True, False)


def main():
    if os.path.isdir(ROOT):
        shutil.rmtree(ROOT)
    os.makedirs(ROOT)
    case("matmul", "ij,jk->ik", (3, 4), (4, 5))
    case("transposed_out", "ij,jk->ki", (3, 4), (4, 5))
    case("three_index", "abc,bcd->ad", (2, 3, 4), (3, 4, 5))
    case("permuted_contracted", "abcd,dbef->acef", (2, 3, 2, 3), (3, 3, 2, 2))
    case("outer", "i,j->ij", (4,), (3,))
    case("scalar", "ij,ij->", (3, 4), (3, 4))
    case("complex128", "ij,jk->ik", (3, 4), (4, 2), "c16", "c16")
    case("mixed_f64_c128", "ijk,kl->lji", (2, 3, 4), (4, 3), "f8", "c16")
    case("size_one", "aib,bjc->icja", (1, 3, 1), (1, 2, 1))
    case("zero_free", "ij,jk->ik", (0, 3), (3, 2))
    case("zero_contracted", "ij,jk->ik", (2, 0), (0, 3), beta=-0.75)
    case("batch", "bij,bjk->bik", (3, 2, 4), (3, 4, 2))
    case("batch_permuted", "ibj,kjb->kbi", (2, 3, 4), (2, 4, 3))
    case("summed", "ijs,jkt->ki", (2, 3, 2), (3, 4, 2))
    case("float32", "ij,jk->ik", (4, 5), (5, 3), "f4", "f4")
    case("complex64", "abc,cb->a", (3, 2, 4), (4, 2), "c8", "c8")
    case("mixed_f32_c64", "ij,j->i", (3, 4), (4,), "f4", "c8")
    case("alpha_beta_f64", "ij,jk->ik", (3, 4), (4, 2), alpha=1.5, beta=-0.75)
    case("alpha_beta_c128", "ab,bc->ca", (2, 3), (3, 4), "c16", "c16", alpha=2.5 - 0.5j, beta=1.0)
    case("beta_c_promotes", "ij,jk->ik", (2, 3), (3, 2), "f4", "f4", beta=1.0, c_dt="c16")
    endian_fixtures()


if __name__ == "__main__":
    main()
