#!/usr/bin/env python3
"""Generate numpy reference fixtures for uni20-dispatch contractions.

Writes tests/fixtures/contract/<case>/ (two operands, explicit output, distinct labels per
operand: the forms the distributed layer also runs) with:
  spec.txt   one line, the einsum spec (explicit output)
  a.npy, b.npy
  c.npy + beta.txt   (optional) accumulator and its scale
  alpha.txt          (optional) scale of the product, e.g. "1.5" or "2.5-0.5j"
  out.npy    = alpha * np.einsum(spec, a, b) + beta * c

and tests/fixtures/einsum/<case>/ (the other numpy einsum forms: traces and diagonals,
one-operand specs, implicit output, ellipsis with broadcasting, broadcast extent-1 labels)
with the same files, where b.npy is absent for a one-operand spec.

The expected output is computed in float64/complex128 from the stored inputs and then
rounded once to the result dtype (np.result_type(operands, c)), so single-precision cases
have an accurate oracle. Deterministic: seeded RNGs (one per directory, so adding cases to
one set leaves the other's files unchanged); rerunning rewrites identical files.

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

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures")
ROOT = os.path.join(FIXTURES, "contract")
EINSUM_ROOT = os.path.join(FIXTURES, "einsum")
RNG = np.random.default_rng(20240611)
EINSUM_RNG = np.random.default_rng(20250301)


def rand(shape, dtype, rng=None):
    rng = RNG if rng is None else rng
    dtype = np.dtype(dtype)
    x = rng.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    if np.ndim(x) == 0:
        return np.array(x, dtype=dtype)  # ascontiguousarray would make it 1-d
    return np.ascontiguousarray(x.astype(dtype))


def wide(x):
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def fmt_scalar(z):
    z = complex(z)
    if z.imag == 0:
        return repr(z.real)
    return f"{z.real!r}{z.imag:+}j"


def case(name, spec, a_shape, b_shape, a_dt="f8", b_dt="f8", alpha=None, beta=None, c_dt=None):
    a = rand(a_shape, a_dt)
    b = rand(b_shape, b_dt)
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


def einsum_case(name, spec, shapes, dtypes=None, alpha=None, beta=None, c_dt=None):
    """One numpy einsum form over one or two operands (a.npy, optionally b.npy)."""
    dtypes = dtypes or ["f8"] * len(shapes)
    ops = [rand(sh, dt, EINSUM_RNG) for sh, dt in zip(shapes, dtypes)]
    res = np.asarray(np.einsum(spec, *[wide(o) for o in ops]))
    out_dt = np.result_type(*ops)
    c = None
    if beta is not None:
        c = rand(res.shape, c_dt or out_dt, EINSUM_RNG)
        out_dt = np.result_type(out_dt, c)
    al = 1.0 if alpha is None else alpha
    out = al * res
    if c is not None:
        out = out + beta * wide(c)
    out = np.array(out, dtype=out_dt, order="C")
    d = os.path.join(EINSUM_ROOT, name)
    os.makedirs(d)
    with open(os.path.join(d, "spec.txt"), "w") as f:
        f.write(spec + "\n")
    for fname, o in zip(["a.npy", "b.npy"], ops):
        np.save(os.path.join(d, fname), o)
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


def einsum_cases():
    if os.path.isdir(EINSUM_ROOT):
        shutil.rmtree(EINSUM_ROOT)
    os.makedirs(EINSUM_ROOT)
    # Traces and diagonals (labels repeated within an operand).
    einsum_case("trace", "ii->", [(4, 4)])
    einsum_case("trace_implicit_c128", "ii", [(3, 3)], ["c16"])
    einsum_case("diagonal", "ii->i", [(5, 5)])
    einsum_case("diagonal_zero", "ii->i", [(0, 0)])
    einsum_case("double_diagonal", "ijij->ji", [(2, 3, 2, 3)])
    einsum_case("diagonal_summed", "iji->j", [(3, 2, 3)])
    einsum_case("diag_contract", "iij,jk->ik", [(3, 3, 4), (4, 2)])
    einsum_case("diag_contract_implicit", "iij,jk", [(3, 3, 4), (4, 2)])
    einsum_case("diag_both", "ii,ii->i", [(4, 4), (4, 4)])
    einsum_case("diag_mixed_f32_c128", "ii,ij->j", [(3, 3), (3, 2)], ["f4", "c16"])
    # One operand.
    einsum_case("transpose", "ij->ji", [(3, 4)])
    einsum_case("sum_to_last", "ijk->k", [(2, 3, 4)])
    einsum_case("permute3_c64", "ijk->kij", [(2, 3, 4)], ["c8"])
    einsum_case("sum_all_f32", "ij->", [(3, 5)], ["f4"])
    einsum_case("scalar_identity", "->", [()])
    einsum_case("unary_alpha_beta", "ij->ji", [(3, 2)], alpha=1.5, beta=-0.5)
    einsum_case("unary_c128_beta_c", "ii->i", [(3, 3)], ["c8"], alpha=2.0 - 1.0j, beta=0.5, c_dt="f8")
    # Implicit output (labels occurring once, sorted by code point: uppercase first).
    einsum_case("implicit_matmul", "ij,jk", [(2, 3), (3, 4)])
    einsum_case("implicit_unary_upper", "aB", [(2, 3)])
    einsum_case("implicit_upper_first", "Zb,bA", [(2, 3), (3, 4)])
    einsum_case("implicit_three_once", "cAb,bd", [(2, 3, 4), (4, 5)])
    # Ellipsis with numpy broadcasting.
    einsum_case("ellipsis_batch", "...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)])
    einsum_case("ellipsis_broadcast", "...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)])
    einsum_case("ellipsis_size_one", "...ij,...jk->...ik", [(1, 3, 4), (6, 4, 2)])
    einsum_case("ellipsis_rank_broadcast", "i...,i...->...", [(3, 2, 4), (3, 4)])
    einsum_case("ellipsis_implicit", "...ij,...jk", [(3, 2, 4), (4, 5)])
    einsum_case("ellipsis_outer", "...,...", [(2, 1), (3,)])
    einsum_case("ellipsis_unary_perm", "ij...->...ji", [(2, 3, 2, 2)])
    einsum_case("ellipsis_unary_sum", "...i->...", [(2, 3, 4)])
    einsum_case("ellipsis_batched_diag", "...ii->...i", [(2, 3, 3)])
    einsum_case("ellipsis_zero", "...i,...i->...", [(0, 3), (1, 3)])
    einsum_case("ellipsis_mixed_f32_f64", "...ij,...jk", [(2, 2, 3), (3, 2)], ["f4", "f8"])
    einsum_case("ellipsis_alpha_beta_c64", "...ij,...jk->...ik", [(2, 2, 3), (1, 3, 2)], ["c8", "c8"],
                alpha=0.5 + 1.0j, beta=-1.0)
    # Labels of extent 1 broadcast against the same label elsewhere (numpy does this too).
    einsum_case("label_broadcast", "ij,ij->ij", [(2, 1), (2, 3)])
    einsum_case("label_broadcast_contracted", "ij,jk->ik", [(2, 1), (3, 4)])
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
    einsum_cases()
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
