"""A long DMRG that the test interrupts with SIGINT (Ctrl-C) once it prints `ready`."""
import uni20

with uni20.Universe(ranks=2, threads_per_rank=1) as u:
    dmrg = uni20.Dmrg(u.heisenberg_mpo(64, block=32), u.random_mps(64, bond=16, block=32, seed=1), chi_max=96, block=32)
    print("ready", flush=True)
    dmrg.run(sweeps=1000, tol=0.0)
print("not reached")
