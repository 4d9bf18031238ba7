"""Raises on rank 0 inside the universe (tests/test_jobs.py): every rank must end, with the
traceback printed once and a non-zero status."""
import numpy as np

import uni20

with uni20.Universe(ranks=3, threads_per_rank=1) as u:
    t = u.tensor(np.ones((8, 8)), block=4)
    print("norm", t.norm(), flush=True)
    raise RuntimeError("deliberate failure on rank 0")
