"""TDVP from Python against the exact evolution ``exp(-i H t)`` computed here with numpy
(``eigh`` of the dense Hamiltonian), with the measurements of the evolved states."""

import numpy as np
import pytest

import uni20

from test_tn import SZ, heisenberg_dense, op_at, tfi_dense

L = 8
NEEL = ["up" if i % 2 == 0 else "down" for i in range(L)]


def basis_index(labels):
    return int("".join("0" if s == "up" else "1" for s in labels), 2)


def exact_evolution(h, psi0, t):
    w, v = np.linalg.eigh(h)
    return v @ (np.exp(-1j * w * t) * (v.conj().T @ psi0))


def neel_state():
    psi = np.zeros(2**L)
    psi[basis_index(NEEL)] = 1.0
    return psi


def entropies(psi):
    out = []
    for cut in range(1, L):
        s = np.linalg.svd(psi.reshape(2**cut, -1), compute_uv=False)
        p = s[s > 1e-15] ** 2
        out.append(float(-(p * np.log(p)).sum()))
    return np.array(out)


def test_real_time_neel_quench_matches_exact_evolution(u):
    model = uni20.models.heisenberg(L)
    mpo = u.mpo(model, block=16)
    psi0 = u.product_mps(model.sites, NEEL, block=16)
    e0 = psi0.expectation(mpo)
    tdvp = uni20.Tdvp(mpo, psi0, dt=0.1, chi_max=64, cutoff=1e-12, block=16)
    seen = []
    steps = tdvp.run(8, observer=lambda t, s: seen.append((t.time, s.energy)))
    assert len(steps) == 8 and tdvp.time == pytest.approx(0.8)
    assert [t for t, _ in seen] == pytest.approx([0.1 * (k + 1) for k in range(8)])
    assert all(s.discarded_weight < 1e-10 and s.unconverged == 0 for s in steps)
    # <H> is conserved (the Rust TDVP test: 1e-8).
    assert max(abs(e - e0) for _, e in seen) < 1e-8
    psi = tdvp.mps
    assert psi.expectation(mpo) == pytest.approx(e0, abs=1e-8)
    exact = exact_evolution(heisenberg_dense(L), neel_state(), 0.8)
    # <Sz_i(t)> to the accuracy of the Rust TDVP test at dt = 0.1 (1e-5).
    sz = psi.expectation_values(model.sites, "Sz")
    exact_sz = np.array([np.vdot(exact, op_at(SZ, i, L) @ exact).real for i in range(L)])
    err = np.abs(sz - exact_sz).max()
    assert err < 1e-5
    assert np.abs(exact_sz - 0.5 * (-1) ** np.arange(L)).max() > 0.1, "the state moved"
    # The state itself, its correlations and entanglement.
    dense = psi.to_numpy()
    assert abs(np.vdot(exact, dense)) == pytest.approx(1.0, abs=1e-5)
    corr = psi.correlations(model.sites, "Sz", 0, "Sz")
    exact_corr = [np.vdot(exact, op_at(SZ, 0, L) @ op_at(SZ, j, L) @ exact).real for j in range(1, L)]
    np.testing.assert_allclose(corr, exact_corr, atol=1e-5)
    np.testing.assert_allclose(psi.entanglement_entropy(block=16), entropies(exact), atol=1e-4)
    # Doubling dt multiplies the error by about 4 or more (second order; the Rust test: > 3).
    coarse = uni20.Tdvp(mpo, psi0, dt=0.2, chi_max=64, block=16)
    coarse.run(4)
    coarse_err = np.abs(coarse.mps.expectation_values(model.sites, "Sz") - exact_sz).max()
    assert coarse_err > 3 * err


def test_imaginary_time_reaches_the_ground_state(u):
    # Gap 2 (g - 1) = 3: after tau = 4 the excited states' weight is ~exp(-24).
    g = 2.5
    model = uni20.models.tfi(L, j=1.0, g=g)
    mpo = u.mpo(model, block=16)
    tdvp = uni20.Tdvp(mpo, u.product_mps(model.sites, ["up"] * L, block=16), dt=0.5, imaginary=True, chi_max=32, block=16)
    tdvp.run(8)
    e0 = np.linalg.eigvalsh(tfi_dense(L, 1.0, g))[0]
    assert tdvp.mps.expectation(mpo) == pytest.approx(e0, abs=1e-9)
    tdvp.set_dt(0.25)
    assert tdvp.step().time == pytest.approx(8 * 0.5 + 0.25)


def test_symmetric_imaginary_time_tdvp_stays_in_its_sector(u):
    model = uni20.models.heisenberg(L, conserve="Sz")
    mpo = u.mpo(model, block=16, symmetric=True)
    psi0 = u.product_mps(model.sites, NEEL, block=16, symmetric=True)
    tdvp = uni20.Tdvp(mpo, psi0, dt=0.2, imaginary=True, chi_max=64, block=16)
    tdvp.run(2)
    psi = tdvp.mps
    assert psi.is_symmetric and psi.total_charge == (0,)
    w, v = np.linalg.eigh(heisenberg_dense(L))
    exact = v @ (np.exp(-w * 0.4) * (v.T @ neel_state()))
    exact /= np.linalg.norm(exact)
    assert abs(exact[basis_index(NEEL)]) < 0.95, "the state moved"
    dense = psi.to_numpy()
    assert np.linalg.norm(dense) == pytest.approx(1.0, abs=1e-10)
    assert abs(np.vdot(exact, dense)) == pytest.approx(1.0, abs=1e-5)


def test_symmetric_real_time_tdvp_matches_exact_evolution(u):
    # A real symmetric start evolved in real time becomes complex, sector by sector.
    model = uni20.models.heisenberg(L, conserve="Sz")
    mpo = u.mpo(model, block=16, symmetric=True)
    psi0 = u.product_mps(model.sites, NEEL, block=16, symmetric=True)
    tdvp = uni20.Tdvp(mpo, psi0, dt=0.1, chi_max=64, block=16)
    tdvp.run(3)
    psi = tdvp.mps
    assert psi.is_symmetric and psi.total_charge == (0,)
    w, v = np.linalg.eigh(heisenberg_dense(L))
    exact = v @ (np.exp(-1j * w * 0.3) * (v.T @ neel_state()))
    dense = psi.to_numpy()
    assert np.iscomplexobj(dense)
    assert abs(exact[basis_index(NEEL)]) < 0.95, "the state moved"
    assert np.linalg.norm(dense) == pytest.approx(1.0, abs=1e-10)
    assert 1.0 - abs(np.vdot(exact, dense)) < 1e-7
    # Entanglement of a symmetric state (the README: these measurements take one).
    np.testing.assert_allclose(psi.entanglement_entropy(block=16), entropies(exact), atol=1e-6)
    spectra = psi.schmidt_spectra(block=16)
    assert len(spectra) == L - 1
    assert all(abs(float(np.sum(np.asarray(s) ** 2)) - 1.0) < 1e-8 for s in spectra)


def test_tdvp_errors(u):
    mpo = u.heisenberg_mpo(4, block=8)
    psi = u.random_mps(4, block=8)
    with pytest.raises(uni20.OptionError):
        uni20.Tdvp(mpo, psi, dt=0.0)
    with pytest.raises(uni20.OptionError):
        uni20.Tdvp(mpo, psi, chi_max=0)
    t = uni20.Tdvp(mpo, psi)
    with pytest.raises(uni20.OptionError):
        t.set_dt(float("nan"))
    with pytest.raises(uni20.ShapeError):
        uni20.Tdvp(mpo, u.random_mps(5, block=8))
