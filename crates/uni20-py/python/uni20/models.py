"""Standard lattice models on open chains, as :class:`uni20.Model` (a site type per site and the
Hamiltonian as an :class:`uni20.OpSum`).

========== ==============================================================================
model      Hamiltonian
========== ==============================================================================
heisenberg ``J sum_i S_i . S_(i+1)``, any spin ``two_s / 2``
xxz        ``Jxy (Sx Sx + Sy Sy) + Jz Sz Sz - hz sum Sz``, any spin
j1j2       ``J1 sum S_i . S_(i+1) + J2 sum S_i . S_(i+2)``, spin 1/2
spin1      ``J sum S_i . S_(i+1) + D sum (Sz_i)^2``, spin 1
tfi        ``-J sum sx_i sx_(i+1) - g sum sz_i`` (Pauli matrices)
hubbard    ``-t sum (c+ c + h.c.) + U sum n_up n_dn - mu sum n``
========== ==============================================================================

``conserve`` selects the quantum numbers the sites carry: ``"none"``, ``"Sz"``, ``"N"``,
``"NSz"`` or ``"parity"`` (as the model allows).
"""

from ._uni20 import heisenberg, hubbard, j1j2, spin1, tfi, xxz

__all__ = ["heisenberg", "hubbard", "j1j2", "spin1", "tfi", "xxz"]
