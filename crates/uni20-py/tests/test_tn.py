"""The toolkit: DMRG energies and measurements against exact diagonalization written here in
numpy, a Python observer, operator sums, and TEBD against exact time evolution."""

import numpy as np
import pytest

import uni20

SZ = np.diag([0.5, -0.5])  # basis: index 0 = up (checked against the site below)
SP = np.array([[0.0, 1.0], [0.0, 0.0]])
SM = SP.T
SX = (SP + SM) / 2


def op_at(op, i, length):
    out = np.eye(1)
    for k in range(length):
        out = np.kron(out, op if k == i else np.eye(2))
    return out


def heisenberg_dense(length, jz=1.0, hz=0.0):
    h = np.zeros((2**length, 2**length))
    for i in range(length - 1):
        h += 0.5 * (op_at(SP, i, length) @ op_at(SM, i + 1, length) + op_at(SM, i, length) @ op_at(SP, i + 1, length))
        h += jz * op_at(SZ, i, length) @ op_at(SZ, i + 1, length)
    for i in range(length):
        h -= hz * op_at(SZ, i, length)
    return h


def tfi_dense(length, j, g):
    """-J sum sx sx - g sum sz with Pauli matrices."""
    h = np.zeros((2**length, 2**length))
    for i in range(length - 1):
        h -= j * op_at(2 * SX, i, length) @ op_at(2 * SX, i + 1, length)
    for i in range(length):
        h -= g * op_at(2 * SZ, i, length)
    return h


def ground(h):
    w, v = np.linalg.eigh(h)
    return w[0], v[:, 0]


def entropies(psi, length):
    out = []
    for cut in range(1, length):
        s = np.linalg.svd(psi.reshape(2**cut, -1), compute_uv=False)
        p = s[s > 1e-15] ** 2
        out.append(float(-(p * np.log(p)).sum()))
    return np.array(out)


def test_site_conventions():
    s = uni20.Site.spin(1)
    assert s.dim == 2
    np.testing.assert_allclose(s.op("Sz"), SZ)
    np.testing.assert_allclose(s.op("Sp"), SP)
    assert {"Sz", "Sp", "Sm", "Id"} <= set(s.op_names)
    s2 = s.with_op("Double", 2 * SZ)
    np.testing.assert_allclose(s2.op("Double"), 2 * SZ)


def test_dmrg_heisenberg_matches_exact_diagonalization(u):
    length = 8
    e0, gs = ground(heisenberg_dense(length))
    mpo = u.heisenberg_mpo(length, block=8)
    dmrg = uni20.Dmrg(mpo, u.random_mps(length, d=2, bond=4, block=8, seed=3), chi_max=32, block=8)
    stats = dmrg.run(sweeps=12, tol=1e-12)
    assert dmrg.energy == pytest.approx(e0, abs=1e-9)
    assert stats[-1].energy == dmrg.energy and dmrg.sweeps == len(stats)
    psi = dmrg.mps
    assert psi.bond_dims[0] == 1 and psi.bond_dims[-1] == 1 and psi.max_bond <= 16
    e, var = psi.energy_variance(mpo)
    assert e == pytest.approx(e0, abs=1e-9) and abs(var) < 1e-8
    assert psi.expectation(mpo) == pytest.approx(e0, abs=1e-9)
    dense = psi.to_numpy()
    assert abs(np.vdot(gs, dense)) / np.linalg.norm(dense) == pytest.approx(1.0, abs=1e-8)
    np.testing.assert_allclose(psi.entanglement_entropy(block=8), entropies(gs, length), atol=1e-7)
    spectra = psi.schmidt_spectra(block=8)
    assert len(spectra) == length - 1
    np.testing.assert_allclose([np.sum(s**2) for s in spectra], 1.0, atol=1e-12)
    site = uni20.Site.spin(1)
    corr = psi.correlations(site, "Sz", 2, "Sz", block=8)
    exact = [gs @ op_at(SZ, 2, length) @ op_at(SZ, j, length) @ gs for j in range(3, length)]
    np.testing.assert_allclose(corr, exact, atol=1e-8)


def test_dmrg_of_a_model_with_observer(u):
    length, g = 8, 0.7
    e0, gs = ground(tfi_dense(length, 1.0, g))
    model = uni20.models.tfi(length, j=1.0, g=g)
    assert len(model) == length and model.sites[0].dim == 2
    mpo = u.mpo(model, block=8)
    seen = []

    def observer(d, stats):
        assert isinstance(stats, uni20.SweepStats)
        # An observer may measure the current state: a numpy array, one value per site.
        sz = d.mps.expectation_values(model.sites, "Sz", block=8)
        assert isinstance(sz, np.ndarray) and sz.shape == (length,)
        seen.append((stats.sweep, stats.energy, sz))

    dmrg = uni20.Dmrg(mpo, u.random_mps(length, d=2, bond=4, block=8, seed=5), chi_max=32, block=8)
    stats = dmrg.run(sweeps=10, tol=1e-12, observer=observer)
    assert [s[0] for s in seen] == [s.sweep for s in stats] == list(range(1, len(stats) + 1))
    assert dmrg.energy == pytest.approx(e0, abs=1e-9)
    exact_sz = [gs @ op_at(SZ, i, length) @ gs for i in range(length)]
    np.testing.assert_allclose(seen[-1][2], exact_sz, atol=1e-7)


def test_observer_stops_the_run_and_its_exception_propagates(u):
    mpo = u.heisenberg_mpo(6, block=8)
    dmrg = uni20.Dmrg(mpo, u.random_mps(6, bond=2, block=8, seed=2), chi_max=8, block=8)
    stats = dmrg.run(sweeps=10, tol=0.0, observer=lambda d, s: s.sweep >= 2)
    assert [s.sweep for s in stats] == [1, 2] and dmrg.sweeps == 2

    class Boom(Exception):
        pass

    def bad(d, s):
        raise Boom("from the observer")

    with pytest.raises(Boom):
        dmrg.run(sweeps=10, observer=bad)
    assert dmrg.sweeps == 3  # the sweep ran; the observer's exception ended the run


def test_opsum_mpo_matches_exact_diagonalization(u):
    length, jz, hz = 6, 0.6, 0.3
    site = uni20.Site.spin(1)
    h = uni20.OpSum()
    for i in range(length - 1):
        h.add(0.5, [("Sp", i), ("Sm", i + 1)]).add(0.5, [("Sm", i), ("Sp", i + 1)])
        h.add(jz, [("Sz", i), ("Sz", i + 1)])
    for i in range(length):
        h.add(-hz, [("Sz", i)])
    assert len(h) == 3 * (length - 1) + length
    assert max(h.mpo_bond_dims([site] * length)) == 5
    mpo = u.mpo(h, [site] * length, block=8)
    dmrg = uni20.Dmrg(mpo, u.random_mps(length, bond=4, block=8, seed=9), chi_max=16, block=8)
    dmrg.run(sweeps=10, tol=1e-12)
    e0, _ = ground(heisenberg_dense(length, jz=jz, hz=hz))
    assert dmrg.energy == pytest.approx(e0, abs=1e-9)


def test_tebd_matches_exact_evolution(u):
    length, dt, steps = 6, 0.02, 10
    site = uni20.Site.spin(1)
    up, dn = site.states[0], site.states[1]
    labels = [up if i % 2 == 0 else dn for i in range(length)]
    psi = u.product_mps(site, labels, block=8)
    tebd = uni20.Tebd(u, uni20.models.heisenberg(length), dt=dt, chi_max=32, block=8)
    for _ in range(steps):
        step = tebd.step(psi)
    assert step.max_bond <= 32 and step.discarded_weight >= 0.0
    h = heisenberg_dense(length)
    w, v = np.linalg.eigh(h)
    psi0 = np.zeros(2**length)
    psi0[int("".join("0" if i % 2 == 0 else "1" for i in range(length)), 2)] = 1.0
    psit = v @ (np.exp(-1j * w * dt * steps) * (v.conj().T @ psi0))
    exact = [np.real(psit.conj() @ op_at(SZ, i, length) @ psit) for i in range(length)]
    got = psi.expectation_values(site, "Sz", block=8)
    # Second-order Trotter: the error is O(dt^2) per unit time.
    np.testing.assert_allclose(got, exact, atol=2e-3)
    assert not np.allclose(got, [0.5, -0.5] * (length // 2), atol=1e-3)  # it did evolve


def test_dmrg_checkpoint_resume(u):
    mpo = u.heisenberg_mpo(6, block=8)
    dmrg = uni20.Dmrg(mpo, u.random_mps(6, bond=2, block=8, seed=4), chi_max=8, block=8)
    dmrg.run(sweeps=2, tol=0.0)
    cid = dmrg.checkpoint()
    again = uni20.Dmrg.resume(mpo, cid, chi_max=8, block=8)
    assert again.sweeps == 2 and again.energy == dmrg.energy
    a = dmrg.sweep()
    b = again.sweep()
    assert a.energy == pytest.approx(b.energy, abs=1e-12)


def test_gil_is_released_while_the_root_waits(u):
    import threading
    import time

    mpo = u.heisenberg_mpo(16, block=8)
    dmrg = uni20.Dmrg(mpo, u.random_mps(16, bond=8, block=8, seed=6), chi_max=16, block=8)
    stamps, done = [], threading.Event()

    def spin():
        n = 0
        while not done.is_set():
            n += 1
            if n % 1000 == 0:
                stamps.append(time.perf_counter())

    t = threading.Thread(target=spin)
    t.start()
    windows = []
    while sum(b - a for a, b in windows) < 0.3 and len(windows) < 200:
        t0 = time.perf_counter()
        dmrg.sweep()  # Rust code: if it held the GIL, `spin` could not run meanwhile
        windows.append((t0 + 0.01, time.perf_counter() - 0.01))
    done.set()
    t.join()
    total = sum(max(0.0, b - a) for a, b in windows)
    # Stamps the other thread took while a sweep ran (margins for the hand-offs): a Python loop
    # makes thousands per second; with the GIL held by the waiting call it would make none.
    inside = sum(1 for s in stamps for a, b in windows if a < s < b)
    assert total > 0.1 and inside > 20 * total, (inside, total, len(windows))
