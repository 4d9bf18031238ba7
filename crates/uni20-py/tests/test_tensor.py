"""Distributed tensors against numpy: round trips, einsum, element-wise operations,
reductions, .npy and checkpoint I/O."""

import numpy as np
import pytest

import uni20

RNG = np.random.default_rng(20261201)


def rand(shape, dtype=np.float64):
    a = RNG.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * RNG.standard_normal(shape)
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_roundtrip_every_dtype(u, dtype):
    a = rand((5, 7, 3), dtype)
    t = u.tensor(a, block=2)
    assert t.shape == [5, 7, 3]
    assert t.dtype == np.dtype(dtype).name
    assert t.blocks == [[2, 2, 1], [2, 2, 2, 1], [2, 1]]
    back = t.to_numpy()
    assert back.dtype == dtype
    np.testing.assert_array_equal(back, a)
    np.testing.assert_array_equal(np.asarray(t), a)


def test_non_contiguous_and_integer_input(u):
    a = rand((6, 4)).T  # Fortran-ordered view
    np.testing.assert_array_equal(u.tensor(a, block=3).to_numpy(), a)
    i = np.arange(12).reshape(3, 4)
    t = u.tensor(i, block=2)
    assert t.dtype == "float64"
    np.testing.assert_array_equal(t.to_numpy(), i.astype(float))


@pytest.mark.parametrize(
    "spec,shapes",
    [
        ("ij,jk->ik", [(9, 7), (7, 5)]),
        ("abc,cbd->ad", [(4, 5, 6), (6, 5, 3)]),
        ("ij,jk", [(3, 4), (4, 2)]),  # implicit output
        ("ii->", [(6, 6)]),  # trace
        ("ii->i", [(5, 5)]),  # diagonal
        ("...ij,...jk->...ik", [(3, 4, 5), (3, 5, 2)]),  # batched
        ("ij->ji", [(4, 7)]),
        ("i,j->ij", [(4,), (3,)]),  # outer product
    ],
)
def test_einsum_matches_numpy(u, spec, shapes):
    arrays = [rand(s) for s in shapes]
    tensors = [u.tensor(a, block=3) for a in arrays]
    got = uni20.einsum(spec, *tensors).to_numpy()
    np.testing.assert_allclose(got, np.einsum(spec, *arrays), rtol=1e-12, atol=1e-12)


def test_einsum_complex_alpha_beta_c(u):
    a, b, c = rand((4, 6), np.complex128), rand((6, 3), np.complex128), rand((4, 3), np.complex128)
    ta, tb, tc = (u.tensor(x, block=2) for x in (a, b, c))
    got = uni20.einsum("ij,jk->ik", ta, tb, alpha=0.5 - 2j, beta=3.0, c=tc).to_numpy()
    np.testing.assert_allclose(got, (0.5 - 2j) * (a @ b) + 3.0 * c, rtol=1e-12, atol=1e-12)


def test_einsum_operands_blocked_differently(u):
    a, b = rand((8, 6)), rand((6, 5))
    got = uni20.einsum("ij,jk->ik", u.tensor(a, block=4), u.tensor(b, block=3)).to_numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)


def test_elementwise(u):
    a, b = rand((5, 4), np.complex128), rand((5, 4), np.complex128)
    ta, tb = u.tensor(a, block=2), u.tensor(b, block=2)
    np.testing.assert_allclose((ta + tb).to_numpy(), a + b, rtol=1e-14)
    np.testing.assert_allclose((ta - tb).to_numpy(), a - b, rtol=1e-14)
    np.testing.assert_allclose((2.5 * ta).to_numpy(), 2.5 * a, rtol=1e-14)
    np.testing.assert_allclose((ta * (1 - 1j)).to_numpy(), a * (1 - 1j), rtol=1e-14)
    np.testing.assert_allclose((ta / 4).to_numpy(), a / 4, rtol=1e-14)
    np.testing.assert_allclose((-ta).to_numpy(), -a, rtol=1e-14)
    np.testing.assert_array_equal(ta.conj().to_numpy(), a.conj())
    c = rand((4, 5), np.complex128)
    tc = u.tensor(c, block=2)
    got = uni20.axpby(2.0, ta, -1j, tc, "ij,ji->ij").to_numpy()
    np.testing.assert_allclose(got, 2.0 * a - 1j * c.T, rtol=1e-14)


def test_lincomb_matches_numpy(u):
    a, b, c = rand((6, 5)), rand((6, 5), np.complex128), rand((6, 5))
    # Three tilings: the output takes the first tensor's.
    ta, tb, tc = u.tensor(a, block=4), u.tensor(b, block=3), u.tensor(c, block=5)
    got = uni20.lincomb([(2.0, ta), (0.5 - 1j, tb), (-3, tc)])
    assert got.dtype == "complex128" and got.blocks == ta.blocks
    np.testing.assert_allclose(got.to_numpy(), 2.0 * a + (0.5 - 1j) * b - 3 * c, rtol=1e-14, atol=1e-14)
    # One term is a scaled copy; a later zero coefficient drops its term (its infinities too).
    np.testing.assert_allclose(uni20.lincomb([(1.5, ta)]).to_numpy(), 1.5 * a, rtol=1e-15)
    inf = u.tensor(np.full((6, 5), np.inf), block=4)
    np.testing.assert_array_equal(uni20.lincomb([(1.0, ta), (0.0, inf)]).to_numpy(), a)


def test_lincomb_errors_are_typed(u):
    a = rand((3, 4))
    ta = u.tensor(a, block=2)
    with pytest.raises(uni20.ShapeError):
        uni20.lincomb([])
    with pytest.raises(uni20.ShapeError):
        uni20.lincomb([(1.0, ta), (1.0, u.tensor(rand((4, 3)), block=2))])
    with pytest.raises(uni20.DTypeError):
        uni20.lincomb([(1.0, ta), (1j, ta)])
    with pytest.raises(TypeError):
        uni20.lincomb([(ta, 1.0)])
    # A refused call leaves the operand readable and unchanged.
    np.testing.assert_array_equal(ta.to_numpy(), a)


def test_transpose_and_reshape(u):
    a = rand((2, 3, 4))
    t = u.tensor(a, block=2)
    np.testing.assert_array_equal(t.transpose().to_numpy(), a.transpose())
    np.testing.assert_array_equal(t.transpose([1, 2, 0]).to_numpy(), a.transpose(1, 2, 0))
    np.testing.assert_array_equal(t.transpose("abc->cab").to_numpy(), np.einsum("abc->cab", a))
    np.testing.assert_array_equal(t.reshape([6, 4]).to_numpy(), a.reshape(6, 4))
    np.testing.assert_array_equal(t.reshape([2, 3, 2, 2]).to_numpy(), a.reshape(2, 3, 2, 2))


def test_reductions(u):
    a, b = rand((7, 5), np.complex128), rand((7, 5), np.complex128)
    ta, tb = u.tensor(a, block=3), u.tensor(b, block=3)
    assert ta.norm() == pytest.approx(np.linalg.norm(a), rel=1e-13)
    assert ta.max_abs() == pytest.approx(np.abs(a).max(), rel=1e-14)
    assert uni20.inner(ta, tb) == pytest.approx(np.vdot(a, b), rel=1e-12)


def test_creation(u):
    z = u.zeros([3, 4], dtype="complex128", block=2)
    assert z.dtype == "complex128"
    np.testing.assert_array_equal(z.to_numpy(), np.zeros((3, 4), complex))
    i = u.identity([2, 3, 6], row_modes=2, block=4)
    np.testing.assert_array_equal(i.to_numpy(), np.eye(6).reshape(2, 3, 6))
    r1 = u.random([5, 6], block=2, seed=7).to_numpy()
    r2 = u.random([5, 6], block=3, seed=7).to_numpy()
    np.testing.assert_array_equal(r1, r2)  # the seed, not the blocking, decides the values
    assert np.all(np.abs(r1) <= 1.0) and r1.std() > 0.1


def test_npy_roundtrip(u, tmp_path):
    a = rand((6, 5), np.complex64)
    path = tmp_path / "a.npy"
    np.save(path, a)
    t = u.read_npy(path, block=4)
    np.testing.assert_array_equal(t.to_numpy(), a)
    out = tmp_path / "b.npy"
    (t * 2).write_npy(out)
    np.testing.assert_array_equal(np.load(out), 2 * a)


def test_checkpoint_roundtrip(u):
    a, b = rand((4, 4)), rand((3,))
    ta, tb = u.tensor(a, block=2), u.tensor(b, block=2)
    cid = u.checkpoint({"a": ta, "b": tb}, label="test", step=7, scalars=[1.5, -2.0])
    assert isinstance(cid, str) and cid.startswith("r0:")
    label, step, scalars, tensors = u.restore(cid)
    assert (label, step) == ("test", 7)
    np.testing.assert_array_equal(scalars, [1.5, -2.0])
    assert sorted(tensors) == ["a", "b"]
    np.testing.assert_array_equal(tensors["a"].to_numpy(), a)
    np.testing.assert_array_equal(tensors["b"].to_numpy(), b)


def test_universe_properties(u):
    assert u.running
    expected = 3 if not uni20.launched_by_mpi() else None
    if expected is not None:
        assert u.size == expected
        assert u.transport == "in-process"
    else:
        assert u.transport == "mpi"
    assert u.threads_per_rank >= 1
    assert 0 not in u.compute_ranks
