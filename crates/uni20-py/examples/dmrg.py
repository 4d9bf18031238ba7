"""Heisenberg DMRG (L = 32, chi 64): the defaults and the energy of `cargo run --release --example dmrg`.

    python dmrg.py [L [chi_max]]      # in-process universe
    mpirun -n 3 python dmrg.py        # the same under MPI (the MPI build of the package)
"""
import sys

import uni20

L = int(sys.argv[1]) if len(sys.argv) > 1 else 32
chi = int(sys.argv[2]) if len(sys.argv) > 2 else 64

with uni20.Universe() as u:
    dmrg = uni20.Dmrg(u.heisenberg_mpo(L), u.random_mps(L, d=2, bond=min(8, chi), seed=1), chi_max=chi)
    show = lambda d, s: print(f"sweep {s.sweep:>3}  E = {s.energy:.12f}  dE = {s.energy_change:.3e}  chi = {s.max_bond}")
    dmrg.run(sweeps=20, tol=1e-10, observer=show)
    print(f"final: E = {dmrg.energy:.12f} after {dmrg.sweeps} sweeps ({u.size} ranks, {u.transport})")
