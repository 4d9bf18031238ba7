"""Symmetric (block-sparse) tensors: every result is checked against numpy on the dense
embeddings, and the charge rule is computed here from the legs' sectors and directions."""

import itertools

import numpy as np
import pytest

import uni20

U1 = uni20.Symmetry.u1()
U1Z2 = uni20.Symmetry.product(["U1", "Z2"])


def index_charges(leg):
    """The charge tuple of every dense index of `leg`, signed by its direction (+ out, - in)."""
    sign = 1 if leg.direction == "out" else -1
    out = []
    for q, dim in leg.sectors:
        out += [tuple(sign * c for c in q)] * dim
    return out


def allowed_mask(legs, flux):
    """Boolean mask of the dense embedding: True where the charge rule allows an entry."""
    g = legs[0].symmetry
    per_leg = [index_charges(leg) for leg in legs]
    mask = np.zeros([leg.dim for leg in legs], dtype=bool)
    for idx in itertools.product(*[range(leg.dim) for leg in legs]):
        total = g.identity
        for leg_charges, i in zip(per_leg, idx):
            total = g.fuse(total, leg_charges[i])
        mask[idx] = total == g.charge(flux)
    return mask


def u1_leg(direction, sectors, tile=None):
    return uni20.Leg(U1, direction, sectors, tile=tile)


LEG_A = u1_leg("out", [(-1, 2), (0, 3), (1, 2)], tile=2)
LEG_B = u1_leg("in", [(-1, 1), (0, 2), (2, 2)])
LEG_C = u1_leg("out", [(0, 2), (1, 3)], tile=2)


def test_groups_legs_and_charges():
    assert U1.factors == ["U1"] and U1Z2.factors == ["U1", "Z2"]
    assert uni20.Symmetry.zn(3).charge(-1) == (2,)
    assert U1Z2.fuse((1, 1), (2, 1)) == (3, 0)
    assert U1Z2.dual((1, 1)) == (-1, 1)
    assert uni20.Symmetry.trivial().identity == ()
    assert LEG_A.dim == 7 and LEG_A.offsets == [0, 2, 5, 7]
    assert LEG_A.tiles == [[2], [2, 1], [2]]
    assert LEG_A.sectors == [((-1,), 2), ((0,), 3), ((1,), 2)]
    assert LEG_A.dual().direction == "in" and LEG_A.dual().dual() == LEG_A
    assert LEG_A.retiled(1).tiles == [[1, 1], [1, 1, 1], [1, 1]]


def test_sym_random_is_the_masked_dense_random(u):
    legs = [LEG_A, LEG_B, LEG_C]
    for flux, dtype in [(0, "float64"), (1, "complex128")]:
        t = u.sym_random(legs, flux=flux, dtype=dtype, seed=11)
        assert t.is_symmetric and t.flux == (flux,) and t.legs == legs
        assert t.shape == [7, 5, 5] and t.dtype == dtype
        mask = allowed_mask(legs, flux)
        dense = u.random(t.shape, dtype=dtype, block=3, seed=11).to_numpy()
        np.testing.assert_array_equal(t.to_numpy(), np.where(mask, dense, 0))
        assert t.stored_elements == int(mask.sum())
        assert t.norm() == pytest.approx(np.linalg.norm(dense[mask]), rel=1e-12)


def test_from_dense_round_trip_and_blocks(u):
    legs = [LEG_A, LEG_B, LEG_C]
    mask = allowed_mask(legs, 0)
    rng = np.random.default_rng(5)
    arr = np.where(mask, rng.standard_normal(mask.shape), 0.0)
    t = u.from_dense(arr, legs)
    np.testing.assert_array_equal(t.to_numpy(), arr)
    blocks = t.sector_blocks()
    assert len(blocks) == t.stored_blocks
    assert sum(b.size for _, _, b in blocks) == t.stored_elements == int(mask.sum())
    for charges, offsets, block in blocks:
        key = tuple(slice(o, o + n) for o, n in zip(offsets, block.shape))
        np.testing.assert_array_equal(block, arr[key])
        # The block's sectors satisfy the charge rule.
        assert mask[tuple(offsets)]
        signed = [q[0] if leg.direction == "out" else -q[0] for q, leg in zip(charges, legs)]
        assert sum(signed) == 0
    # A dense array that breaks the symmetry is refused, naming the flux.
    bad = arr.copy()
    bad[tuple(np.argwhere(~mask)[0])] = 1.0
    with pytest.raises(uni20.SymmetryError) as e:
        u.from_dense(bad, legs)
    assert "flux" in str(e.value)
    assert isinstance(e.value, ValueError) and isinstance(e.value, uni20.Uni20Error)
    # ... unless the entry is below the tolerance (it is dropped).
    small = arr.copy()
    small[tuple(np.argwhere(~mask)[0])] = 1e-14
    np.testing.assert_array_equal(u.from_dense(small, legs, tol=1e-12).to_numpy(), arr)


def test_einsum_of_symmetric_tensors_matches_numpy(u):
    a = u.sym_random([LEG_A, LEG_B, LEG_C], flux=1, seed=1)
    b = u.sym_random([LEG_C.dual(), LEG_B.dual(), u1_leg("in", [(0, 2), (1, 1)])], flux=-1, seed=2)
    c = uni20.einsum("ijk,kjl->il", a, b)
    assert c.is_symmetric and c.flux == (0,)
    expect = np.einsum("ijk,kjl->il", a.to_numpy(), b.to_numpy())
    np.testing.assert_allclose(c.to_numpy(), expect, atol=1e-12)
    # <a|a> through a conjugated operand: conj flips every direction and the flux.
    z = u.sym_random([LEG_A, LEG_B], flux=0, dtype="complex128", seed=3)
    zc = z.conj()
    assert zc.flux == (0,) and [leg.direction for leg in zc.legs] == ["in", "out"]
    nz = uni20.einsum("ij,ij->", zc, z).to_numpy()
    assert nz == pytest.approx(np.vdot(z.to_numpy(), z.to_numpy()), abs=1e-12)


def test_elementwise_and_reductions_match_numpy(u):
    legs = [LEG_A, LEG_B, LEG_C]
    a = u.sym_random(legs, seed=4)
    b = u.sym_random(legs, seed=5)
    na, nb = a.to_numpy(), b.to_numpy()
    np.testing.assert_allclose((a + b).to_numpy(), na + nb, atol=1e-14)
    np.testing.assert_allclose((2.5 * a - b).to_numpy(), 2.5 * na - nb, atol=1e-14)
    np.testing.assert_allclose(uni20.axpby(0.5, a, -2.0, b).to_numpy(), 0.5 * na - 2.0 * nb, atol=1e-14)
    ab = uni20.lincomb([(0.5, a), (-2.0, b), (1.0, a)])
    assert ab.is_symmetric and ab.legs == legs
    np.testing.assert_allclose(ab.to_numpy(), 1.5 * na - 2.0 * nb, atol=1e-14)
    p = a.transpose([2, 0, 1])
    assert p.is_symmetric and p.legs == [LEG_C, LEG_A, LEG_B]
    np.testing.assert_array_equal(p.to_numpy(), na.transpose(2, 0, 1))
    assert uni20.inner(a, b) == pytest.approx(np.vdot(na, nb), abs=1e-12)
    assert a.max_abs() == pytest.approx(np.abs(na).max(), abs=0)
    # Symmetric and dense operands do not mix.
    with pytest.raises(uni20.SymmetryError):
        uni20.einsum("ijk,ijk->", a, u.tensor(nb, block=4))
    with pytest.raises(uni20.SymmetryError):
        uni20.lincomb([(1.0, a), (1.0, u.tensor(nb, block=4))])
    # Same dense shape, other sectors on the leg: the legs differ.
    x = u.sym_random([u1_leg("in", [(0, 2), (1, 1)])], seed=6)
    y = u.sym_random([u1_leg("in", [(0, 1), (1, 2)])], seed=7)
    assert x.shape == y.shape
    with pytest.raises(uni20.SymmetryError):
        uni20.lincomb([(1.0, x), (1.0, y)])


def test_fuse_and_split_legs(u):
    t = u.sym_random([LEG_A, LEG_B, LEG_C], flux=1, seed=6)
    f, fusion = uni20.fuse_legs(t, 1, 2, direction="in")
    assert f.shape == [7, 25] and f.flux == (1,)
    assert fusion.fused.dim == 25 and fusion.parts == [LEG_B, LEG_C]
    dense = t.to_numpy().reshape(7, 25)
    perm = [fusion.fuse_index([j, k]) for j in range(5) for k in range(5)]
    expect = np.zeros_like(dense)
    expect[:, perm] = dense
    np.testing.assert_array_equal(f.to_numpy(), expect)
    assert fusion.split_index(perm[7]) == [1, 2]
    back = uni20.split_leg(f, 1, fusion)
    assert back.legs == t.legs
    np.testing.assert_array_equal(back.to_numpy(), t.to_numpy())
    # A fusion rebuilt from the same legs splits it too.
    again = uni20.split_leg(f, 1, uni20.Fusion([LEG_B, LEG_C], "in"))
    np.testing.assert_array_equal(again.to_numpy(), t.to_numpy())
    with pytest.raises(uni20.SymmetryError):
        uni20.fuse_legs(u.tensor(np.ones((2, 2)), block=2), 0, 2)


def matrix(t, rows):
    a = t.to_numpy()
    m = int(np.prod(a.shape[:rows]))
    return a.reshape(m, -1)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_svd_by_sector_matches_the_dense_svd(u, dtype):
    t = u.sym_random([LEG_A, LEG_B, LEG_C], flux=0, dtype=dtype, seed=7)
    a = matrix(t, 1)
    exact = np.linalg.svd(a, compute_uv=False)
    res = uni20.svd(t, "a|bc")
    u_, s, vh = res
    assert u_.is_symmetric and vh.is_symmetric
    bond = u_.legs[-1]
    assert [len(v) for _, v in res.sectors] == [dim for _, dim in bond.sectors]
    np.testing.assert_allclose(np.concatenate([v for _, v in res.sectors]), s)
    # The nonzero singular values are those of the dense embedding.
    nz = np.sort(s)[::-1]
    np.testing.assert_allclose(nz, exact[: len(nz)], atol=1e-12)
    assert np.all(exact[len(nz) :] < 1e-12)
    um, vm = matrix(u_, 1), matrix(vh, 1)
    np.testing.assert_allclose(um.conj().T @ um, np.eye(len(s)), atol=1e-12)
    np.testing.assert_allclose((um * s) @ vm, a, atol=1e-12)
    # Truncated to 3 values over all sectors: the 3 largest of the dense SVD.
    tr = uni20.svd(t, "a|bc", max_rank=3)
    np.testing.assert_allclose(np.sort(tr.s)[::-1], exact[:3], atol=1e-12)
    assert tr.discarded_weight == pytest.approx((exact[3:] ** 2).sum() / (exact**2).sum(), rel=1e-9)
    rec = (matrix(tr.u, 1) * tr.s) @ matrix(tr.vh, 1)
    assert np.linalg.norm(rec - a) == pytest.approx(np.sqrt((exact[3:] ** 2).sum()), rel=1e-9)


def test_qr_lq_eigh_by_sector(u):
    t = u.sym_random([LEG_A, LEG_B, LEG_C], flux=1, seed=8)
    a = matrix(t, 2)
    q, r = uni20.qr(t, "ab|c")
    qm, rm = matrix(q, 2), matrix(r, 1)
    np.testing.assert_allclose(qm @ rm, a, atol=1e-12)
    np.testing.assert_allclose(qm.T @ qm, np.eye(qm.shape[1]), atol=1e-12)
    l, q2 = uni20.lq(t, "a|bc")
    np.testing.assert_allclose(matrix(l, 1) @ matrix(q2, 1), matrix(t, 1), atol=1e-12)
    # A Hermitian operator on the fused legs (flux zero, columns the duals of the rows).
    x = u.sym_random([LEG_A, LEG_B, LEG_A.dual(), LEG_B.dual()], dtype="complex128", seed=9)
    h = x + x.transpose([2, 3, 0, 1]).conj()
    hm = matrix(h, 2)
    np.testing.assert_allclose(hm, hm.conj().T, atol=1e-14)
    w, v = uni20.eigh(h, "ab|cd")
    vm = matrix(v, 2)
    np.testing.assert_allclose(np.sort(w), np.linalg.eigvalsh(hm), atol=1e-11)
    np.testing.assert_allclose((vm * w) @ vm.conj().T, hm, atol=1e-11)
    with pytest.raises(uni20.SymmetryError):
        uni20.eigh(u.sym_random([LEG_A, LEG_A.dual()], flux=1, seed=12), "a|b")  # flux 1


def test_product_group_and_identity(u):
    l1 = uni20.Leg(U1Z2, "out", [((0, 0), 1), ((1, 1), 2), ((2, 0), 1)])
    l2 = uni20.Leg(U1Z2, "in", [((0, 0), 2), ((1, 1), 1)])
    t = u.sym_random([l1, l2], flux=(1, 1), seed=10)
    mask = allowed_mask([l1, l2], (1, 1))
    assert t.flux == (1, 1) and (t.to_numpy()[~mask] == 0).all() and (t.to_numpy()[mask] != 0).all()
    i = u.sym_identity([l1, l2])
    assert i.legs == [l1, l2, l1.dual(), l2.dual()]
    np.testing.assert_array_equal(i.to_numpy().reshape(12, 12), np.eye(12))
    z = u.sym_zeros([l1, l2], flux=(1, 1), dtype="complex64")
    assert z.dtype == "complex64" and z.norm() == 0 and z.stored_blocks == t.stored_blocks


def test_symmetry_errors(u):
    with pytest.raises(uni20.SymmetryError):
        uni20.Leg(U1, "out", [(1, 2), (0, 1)])  # charges not sorted
    with pytest.raises(uni20.SymmetryError):
        uni20.Leg(U1, "sideways", [(0, 1)])
    with pytest.raises(uni20.SymmetryError):
        uni20.Leg(U1Z2, "out", [(0, 1)])  # one component for two factors
    with pytest.raises(uni20.SymmetryError):
        uni20.Symmetry.product(["U1", "SU2"])
    with pytest.raises(uni20.SymmetryError):
        uni20.Symmetry.zn(1)
    with pytest.raises(uni20.SymmetryError) as e:
        u.sym_zeros([u1_leg("out", [(0, 1)]), u1_leg("out", [(0, 1)])], flux=5)
    assert "flux" in str(e.value)
    with pytest.raises(uni20.SymmetryError):
        u.sym_zeros([])
    with pytest.raises(uni20.ShapeError):
        u.from_dense(np.zeros((3, 3)), [LEG_A, LEG_B])
    with pytest.raises(uni20.SymmetryError):
        u.tensor(np.ones(3), block=2).sector_blocks()
