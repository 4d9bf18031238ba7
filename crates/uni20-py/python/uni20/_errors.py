"""The exception classes of uni20.

Every error of the Rust side reaches Python as one of these (never as a
crash): each derives from :class:`Uni20Error` and from the built-in exception
that fits, so ``except ValueError`` still catches a malformed spec. Every
instance has the attributes ``rank`` and ``command``: for a command that
failed on a worker, the rank it ran on and its wire name (for example
``"uni20.contract.v1"``); ``None`` otherwise.
"""

from typing import Optional


class Uni20Error(Exception):
    """Base class of every uni20 error."""

    rank: Optional[int] = None
    command: Optional[str] = None


class SpecError(Uni20Error, ValueError):
    """A malformed einsum, permutation, label or split spec, or one that does not fit the shapes."""


class ShapeError(Uni20Error, ValueError):
    """Shapes, numbers of modes or blockings that do not fit together."""


class DTypeError(Uni20Error, TypeError):
    """An unsupported element type, mixed element types, or a complex scalar with a real tensor."""


class OptionError(Uni20Error, ValueError):
    """An option out of range (a truncation, a tolerance, a block size, ...)."""


class ModelError(Uni20Error, ValueError):
    """A site, operator sum or model that does not make sense (unknown operator or state, bad term)."""


class SymmetryError(Uni20Error, ValueError):
    """Charges, legs, fluxes or layouts of symmetric tensors that do not fit.

    A charge that is not of the group, a flux that no block can carry, legs that cannot be
    contracted (same direction, other sectors), a dense array that breaks the symmetry
    (``Universe.from_dense``), a symmetric operand mixed with a dense one, or an operation
    that needs the other kind of tensor.
    """


class CheckpointError(Uni20Error):
    """A checkpoint that is missing, damaged or does not hold what is needed."""


class FileError(Uni20Error, OSError):
    """A file (``.npy``, a store) that cannot be read or written."""


class NonFiniteError(Uni20Error, FloatingPointError):
    """NaN or infinity where a finite number is needed."""


class JobError(Uni20Error, RuntimeError):
    """A command failed on a rank, or the job was stopped by an earlier failure (fail-stop).

    ``rank`` and ``command`` name the rank and the command when one failed.
    """


class StartupError(JobError):
    """The universe could not start (configuration, ranks, MPI)."""


class UniverseClosedError(Uni20Error, RuntimeError):
    """The universe is not running (not entered yet, closed, or interrupted by Ctrl-C)."""


class InternalError(Uni20Error, RuntimeError):
    """A panic of uni20's Rust code, caught at the boundary: a bug, please report it."""


__all__ = [
    "Uni20Error",
    "SpecError",
    "ShapeError",
    "DTypeError",
    "OptionError",
    "ModelError",
    "SymmetryError",
    "CheckpointError",
    "FileError",
    "NonFiniteError",
    "JobError",
    "StartupError",
    "UniverseClosedError",
    "InternalError",
]
