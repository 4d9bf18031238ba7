"""Conserved quantum numbers: DMRG in one charge sector (symmetric MPO and MPS) against exact
diagonalization of that sector's block of the Hamiltonian, written here in numpy."""

import numpy as np
import pytest

import uni20


def heisenberg_block(length, n_up):
    """The open Heisenberg chain restricted to the states with `n_up` spins up, and those
    states as indices of the full basis (site 0 the most significant digit, digit 0 = up,
    as in ``numpy.kron`` of the site bases)."""
    states = [s for s in range(2**length) if length - bin(s).count("1") == n_up]
    where = {s: k for k, s in enumerate(states)}
    h = np.zeros((len(states), len(states)))
    for k, s in enumerate(states):
        for i in range(length - 1):
            a, b = length - 1 - i, length - 2 - i  # bit positions of sites i and i+1
            sa, sb = (s >> a) & 1, (s >> b) & 1
            h[k, k] += 0.25 if sa == sb else -0.25
            if sa != sb:
                h[where[s ^ (1 << a) ^ (1 << b)], k] += 0.5
    return h, np.array(states)


def lowest(h):
    w, v = np.linalg.eigh(h)
    return w[0], v[:, 0]


def run_sector(u, length, sector, observer=None):
    model = uni20.models.heisenberg(length, conserve="Sz")
    mpo = u.mpo(model, block=64, symmetric=True)
    psi0 = u.symmetric_mps(model, sector=sector, bond=8, block=64, seed=2)
    assert psi0.is_symmetric and psi0.total_charge == (sector,)
    dmrg = uni20.Dmrg(mpo, psi0, chi_max=64, block=64)
    dmrg.run(sweeps=10, tol=1e-12, observer=observer)
    return dmrg


def test_heisenberg_l12_sz0_and_sz1_match_the_sector_blocks(u):
    length = 12
    seen = []

    def observer(dmrg, stats):
        # Runs on the root after every sweep; the state stays in its sector.
        seen.append((stats.energy, dmrg.mps.total_charge))

    dmrg = run_sector(u, length, 0, observer)
    h0, states0 = heisenberg_block(length, length // 2)
    e0, v0 = lowest(h0)
    assert dmrg.energy == pytest.approx(e0, abs=1e-9)
    assert seen and all(q == (0,) for _, q in seen) and seen[-1][0] == dmrg.energy
    psi = dmrg.mps
    assert psi.is_symmetric and psi.total_charge == (0,)
    dense = psi.to_numpy()
    assert dense.shape == (2**length,)
    outside = np.delete(dense, states0)
    assert np.linalg.norm(outside) < 1e-13
    assert abs(np.vdot(v0, dense[states0])) / np.linalg.norm(dense) == pytest.approx(1.0, abs=1e-8)

    # Sz = 1 (sector 2 Sz = 2): one spin flipped up; its block's lowest energy is above e0.
    d1 = run_sector(u, length, 2)
    h1, states1 = heisenberg_block(length, length // 2 + 1)
    e1, v1 = lowest(h1)
    assert e1 > e0 + 0.1
    assert d1.energy == pytest.approx(e1, abs=1e-9)
    dense1 = d1.mps.to_numpy()
    # The weight lies on the states with 7 spins up, in the site basis order (a state put
    # back in the wrong basis order would have 7 spins down).
    assert np.linalg.norm(np.delete(dense1, states1)) < 1e-13
    assert abs(np.vdot(v1, dense1[states1])) / np.linalg.norm(dense1) == pytest.approx(1.0, abs=1e-8)


def test_symmetric_product_state_and_its_sector(u):
    model = uni20.models.heisenberg(6, conserve="Sz")
    labels = ["up", "up", "down", "up", "down", "up"]
    psi = u.product_mps(model.sites, labels, block=4, symmetric=True)
    assert psi.is_symmetric and psi.total_charge == (2,)
    expect = np.zeros(2**6)
    expect[int("".join("0" if s == "up" else "1" for s in labels), 2)] = 1.0
    np.testing.assert_array_equal(psi.to_numpy(), expect)
    # A dense product state carries no charge.
    dense = u.product_mps(uni20.Site.spin(1), labels, block=4)
    assert not dense.is_symmetric and dense.total_charge is None
    np.testing.assert_array_equal(dense.to_numpy(), expect)
    # The site types can also be given at the call (a state from a resumed run).
    np.testing.assert_array_equal(psi.to_numpy(sites=model.sites), expect)


def test_conserve_errors(u):
    plain = uni20.models.heisenberg(4)
    with pytest.raises(uni20.ModelError) as e:
        u.mpo(plain, block=4, symmetric=True)
    assert "conserve" in str(e.value)
    with pytest.raises(uni20.ModelError):
        u.symmetric_mps(plain, sector=0)
    model = uni20.models.heisenberg(4, conserve="Sz")
    with pytest.raises(uni20.SymmetryError):
        u.symmetric_mps(model, sector=(0, 0))  # U(1) has one component
    with pytest.raises(uni20.OptionError):
        u.symmetric_mps(model, sector=10)  # 4 spins reach 2 Sz = 4 at most
    # The measurements are dense-only: a symmetric state says so with a SymmetryError.
    psi = u.symmetric_mps(model, sector=0, bond=4, block=4)
    with pytest.raises(uni20.SymmetryError):
        psi.expectation_values(model.sites, "Sz")
    # A symmetric state does not run with a dense MPO.
    with pytest.raises(uni20.SymmetryError):
        uni20.Dmrg(u.mpo(model, block=4), psi)
