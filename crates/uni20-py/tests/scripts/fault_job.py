"""A command fails on rank 1 (UNI20_INJECT_FAULT=error@rank=1, set by the test): the script
sees a uni20.JobError naming the rank and the command, then prints them as JSON."""
import json

import numpy as np

import uni20

out = {}
try:
    with uni20.Universe(ranks=3, threads_per_rank=1) as u:
        try:
            a = u.tensor(np.ones((8, 8)), block=2)
            uni20.einsum("ij,jk->ik", a, a).to_numpy()
        except uni20.JobError as e:
            out = {"class": type(e).__name__, "rank": e.rank, "command": e.command, "message": str(e)}
        # The job stopped (fail-stop): later operations say so.
        try:
            u.tensor(np.ones(2))
        except uni20.JobError as e:
            out["later"] = type(e).__name__
except uni20.JobError as e:
    out["at_exit"] = str(e)
print(json.dumps(out), flush=True)
