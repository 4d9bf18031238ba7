"""Decompositions against numpy.linalg."""

import numpy as np
import pytest

import uni20

RNG = np.random.default_rng(7)


def test_svd_reconstructs_and_matches_numpy(u):
    a = RNG.standard_normal((6, 4, 5))
    res = uni20.svd(u.tensor(a, block=3), "ab|c")
    m = a.reshape(24, 5)
    np.testing.assert_allclose(res.s, np.linalg.svd(m, compute_uv=False), rtol=1e-12)
    uu, vh = res.u.to_numpy(), res.vh.to_numpy()
    assert uu.shape == (6, 4, 5) and vh.shape == (5, 5)
    np.testing.assert_allclose(np.einsum("abk,k,kc->abc", uu, res.s, vh), a, atol=1e-12)
    flat = uu.reshape(24, 5)
    np.testing.assert_allclose(flat.T @ flat, np.eye(5), atol=1e-12)
    assert res.discarded_weight == 0.0
    u2, s2, vh2 = res  # unpacks as a triple
    assert s2 is not None and u2 is not None and vh2 is not None


def test_svd_reordered_split(u):
    a = RNG.standard_normal((3, 4, 5))
    res = uni20.svd(u.tensor(a, block=2), "abc->ca|b")
    m = a.transpose(2, 0, 1).reshape(15, 4)
    np.testing.assert_allclose(res.s, np.linalg.svd(m, compute_uv=False), rtol=1e-12)


def test_truncated_svd(u):
    # A matrix with known singular values 10, 5, 1, 0.1, 0.01.
    q1, _ = np.linalg.qr(RNG.standard_normal((8, 5)))
    q2, _ = np.linalg.qr(RNG.standard_normal((6, 5)))
    s = np.array([10.0, 5.0, 1.0, 0.1, 0.01])
    a = q1 @ np.diag(s) @ q2.T
    t = u.tensor(a, block=4)
    res = uni20.svd(t, "a|b", max_rank=3)
    np.testing.assert_allclose(res.s, s[:3], rtol=1e-12)
    # 8x6: min(8, 6) = 6 values, the sixth is zero.
    assert len(res.discarded) == 3 and abs(res.discarded[2]) < 1e-12
    np.testing.assert_allclose(res.discarded[:2], s[3:], rtol=1e-10)
    assert res.discarded_weight == pytest.approx((s[3:] ** 2).sum() / (s**2).sum(), rel=1e-10)
    best = (q1[:, :3] * s[:3]) @ q2[:, :3].T  # Eckart-Young: the best rank-3 approximation
    got = res.u.to_numpy() @ np.diag(res.s) @ res.vh.to_numpy()
    np.testing.assert_allclose(got, best, atol=1e-12)
    res2 = uni20.svd(t, "a|b", cutoff=0.5)
    np.testing.assert_allclose(res2.s, s[:3], rtol=1e-12)


def test_qr_and_lq(u):
    a = RNG.standard_normal((7, 4)) + 1j * RNG.standard_normal((7, 4))
    q, r = uni20.qr(u.tensor(a, block=3), "a|b")
    qn, rn = q.to_numpy(), r.to_numpy()
    np.testing.assert_allclose(qn @ rn, a, atol=1e-12)
    np.testing.assert_allclose(qn.conj().T @ qn, np.eye(4), atol=1e-12)
    np.testing.assert_allclose(np.tril(rn, -1), 0, atol=1e-14)
    assert np.all(np.diag(rn).real >= 0) and np.allclose(np.diag(rn).imag, 0)
    l, q2 = uni20.lq(u.tensor(a.T, block=3), "a|b")
    ln, qn2 = l.to_numpy(), q2.to_numpy()
    np.testing.assert_allclose(ln @ qn2, a.T, atol=1e-12)
    np.testing.assert_allclose(qn2 @ qn2.conj().T, np.eye(4), atol=1e-12)


def test_eigh(u):
    x = RNG.standard_normal((6, 6)) + 1j * RNG.standard_normal((6, 6))
    h = x + x.conj().T
    w, v = uni20.eigh(u.tensor(h, block=4), "a|b")
    np.testing.assert_allclose(w, np.linalg.eigvalsh(h), rtol=1e-12, atol=1e-12)
    vn = v.to_numpy()
    np.testing.assert_allclose(h @ vn, vn * w, atol=1e-11)
