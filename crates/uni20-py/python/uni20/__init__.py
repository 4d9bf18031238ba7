"""uni20: tensor-network code on distributed tensors, in-process or across MPI ranks.

::

    import numpy as np
    import uni20

    with uni20.Universe(ranks=2, threads_per_rank=1) as u:
        a = u.tensor(np.random.rand(64, 32), block=16)
        b = u.tensor(np.random.rand(32, 48), block=16)
        c = uni20.einsum("ij,jk->ik", a, b)
        print(np.allclose(c.to_numpy(), a.to_numpy() @ b.to_numpy()))

Under ``mpirun -n N python script.py`` (with the MPI build), rank 0 runs the
script and the other ranks serve as workers from ``Universe.__enter__`` on.
See ``README.md`` of the ``uni20-py`` crate for the whole API.
"""

from ._errors import (
    CheckpointError,
    DTypeError,
    FileError,
    InternalError,
    JobError,
    ModelError,
    NonFiniteError,
    OptionError,
    ShapeError,
    SpecError,
    StartupError,
    SymmetryError,
    Uni20Error,
    UniverseClosedError,
)
from ._uni20 import (
    MPI_BUILD,
    Dmrg,
    Fusion,
    Leg,
    Model,
    Mpo,
    Mps,
    OpSum,
    Site,
    SvdResult,
    SweepStats,
    Symmetry,
    Tdvp,
    TdvpStep,
    Tebd,
    TebdStep,
    Tensor,
    Universe,
    __version__,
    axpby,
    eigh,
    einsum,
    fuse_legs,
    inner,
    launched_by_mpi,
    lincomb,
    lq,
    qr,
    split_leg,
    svd,
)
from . import models

__all__ = [
    "MPI_BUILD",
    "CheckpointError",
    "DTypeError",
    "Dmrg",
    "FileError",
    "Fusion",
    "InternalError",
    "JobError",
    "Leg",
    "Model",
    "ModelError",
    "Mpo",
    "Mps",
    "NonFiniteError",
    "OpSum",
    "OptionError",
    "ShapeError",
    "Site",
    "SpecError",
    "StartupError",
    "SvdResult",
    "SweepStats",
    "Symmetry",
    "SymmetryError",
    "Tdvp",
    "TdvpStep",
    "Tebd",
    "TebdStep",
    "Tensor",
    "Uni20Error",
    "Universe",
    "UniverseClosedError",
    "__version__",
    "axpby",
    "eigh",
    "einsum",
    "fuse_legs",
    "inner",
    "launched_by_mpi",
    "lincomb",
    "lq",
    "models",
    "qr",
    "split_leg",
    "svd",
]
