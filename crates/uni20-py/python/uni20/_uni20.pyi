"""Type stubs of the extension module ``uni20._uni20`` (re-exported by ``uni20``)."""

import os
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str
MPI_BUILD: bool
"""True when this build has the cargo feature ``mpi`` (one rank per process under mpirun)."""

DTypeLike = Union[str, type, np.dtype]
Scalar = Union[int, float, complex]
PathLike = Union[str, os.PathLike]
SiteList = Union["Site", Sequence["Site"]]
ChargeLike = Union[int, Sequence[int]]
"""A charge: a tuple of ints, one per group factor (a plain int for a group of one factor)."""
Charge = Tuple[int, ...]

def launched_by_mpi() -> bool:
    """True when an MPI launcher (``mpirun``) started this process."""

class Universe:
    """A universe of ranks; rank 0 runs the script, the others serve it.

    ``with Universe(ranks=2, threads_per_rank=1) as u:`` starts it and shuts it down. Under
    ``mpirun -n N`` (MPI build) every rank but 0 becomes a worker in ``__enter__`` and exits
    when rank 0 leaves the block; an exception leaving the block on rank 0 ends every rank
    with status 1 (traceback printed once, by rank 0). Raises ``StartupError`` if it cannot
    start.
    """

    def __init__(
        self,
        ranks: Optional[int] = None,
        threads_per_rank: Optional[int] = None,
        store_dir: Optional[PathLike] = None,
    ) -> None: ...
    def start(self) -> "Universe": ...
    def __enter__(self) -> "Universe": ...
    def __exit__(self, exc_type: Any = None, exc: Any = None, tb: Any = None) -> bool: ...
    def close(self) -> None: ...
    @property
    def running(self) -> bool: ...
    @property
    def size(self) -> int:
        """Number of ranks, root included."""
    @property
    def transport(self) -> str:
        """``"in-process"`` or ``"mpi"``."""
    @property
    def threads_per_rank(self) -> int: ...
    @property
    def compute_ranks(self) -> List[int]: ...
    # Tensors.
    def tensor(self, arr: npt.ArrayLike, block: int = 64) -> "Tensor":
        """A distributed copy of ``arr`` in blocks of ``block`` along every mode."""
    def zeros(self, shape: Sequence[int], dtype: Optional[DTypeLike] = None, block: int = 64) -> "Tensor": ...
    def random(
        self, shape: Sequence[int], dtype: Optional[DTypeLike] = None, block: int = 64, seed: int = 0
    ) -> "Tensor": ...
    def identity(
        self, shape: Sequence[int], row_modes: int, dtype: Optional[DTypeLike] = None, block: int = 64
    ) -> "Tensor": ...
    def read_npy(self, path: PathLike, block: int = 64) -> "Tensor": ...
    # Symmetric tensors.
    def sym_zeros(
        self, legs: Sequence["Leg"], flux: Optional[ChargeLike] = None, dtype: Optional[DTypeLike] = None
    ) -> "Tensor":
        """Zeros with ``legs`` and ``flux`` (default: the identity): only the charge-allowed blocks are stored."""
    def sym_random(
        self,
        legs: Sequence["Leg"],
        flux: Optional[ChargeLike] = None,
        dtype: Optional[DTypeLike] = None,
        seed: int = 0,
    ) -> "Tensor":
        """Dense embedding: ``random(shape, seed=seed)`` with every forbidden block zero."""
    def sym_identity(self, legs: Sequence["Leg"], dtype: Optional[DTypeLike] = None) -> "Tensor":
        """The identity with legs ``legs`` then their duals, flux zero."""
    def from_dense(
        self, arr: npt.ArrayLike, legs: Sequence["Leg"], flux: Optional[ChargeLike] = None, tol: float = 0.0
    ) -> "Tensor":
        """The symmetric tensor whose dense embedding is ``arr``; ``SymmetryError`` if ``arr`` breaks the symmetry."""
    def checkpoint(
        self,
        tensors: Dict[str, "Tensor"],
        label: str = "",
        step: int = 0,
        scalars: Optional[Sequence[float]] = None,
    ) -> str:
        """Writes a checkpoint and returns its id (``"r0:N@<nonce>"``)."""
    def restore(self, id: str) -> Tuple[str, int, np.ndarray, Dict[str, "Tensor"]]:
        """``(label, step, scalars, tensors)`` of the checkpoint ``id``."""
    # The toolkit.
    def heisenberg_mpo(self, length: int, block: int = 64) -> "Mpo": ...
    def mpo(
        self,
        model: Union["Model", "OpSum"],
        sites: Optional[SiteList] = None,
        block: int = 64,
        cutoff: float = 1e-13,
        symmetric: bool = False,
    ) -> "Mpo":
        """The MPO of a model; ``symmetric=True``: symmetric site tensors (sites from ``conserve=``)."""
    def random_mps(self, length: int, d: int = 2, bond: int = 8, block: int = 64, seed: int = 1) -> "Mps": ...
    def product_mps(
        self, sites: SiteList, labels: Sequence[str], block: int = 64, symmetric: bool = False
    ) -> "Mps": ...
    def symmetric_mps(
        self,
        sites: Union["Model", Sequence["Site"]],
        sector: ChargeLike,
        bond: int = 8,
        block: int = 64,
        seed: int = 1,
    ) -> "Mps":
        """A random symmetric state of total charge ``sector`` (``2 Sz``, ``N``, ``(N, 2 Sz)``, parity)."""

class Tensor:
    """A distributed tensor (a handle; its blocks live on the ranks)."""

    @property
    def shape(self) -> List[int]: ...
    @property
    def dtype(self) -> str:
        """``"float32"``, ``"float64"``, ``"complex64"`` or ``"complex128"``."""
    @property
    def ndim(self) -> int: ...
    @property
    def blocks(self) -> List[List[int]]:
        """The block extents of every mode."""
    def to_numpy(self) -> np.ndarray: ...
    def __array__(self, dtype: Optional[DTypeLike] = None, copy: Optional[bool] = None) -> np.ndarray: ...
    def wait(self) -> None: ...
    def norm(self) -> float: ...
    def max_abs(self) -> float: ...
    def conj(self) -> "Tensor": ...
    def transpose(self, axes: Union[None, str, Sequence[int]] = None) -> "Tensor": ...
    def reshape(self, shape: Sequence[int]) -> "Tensor": ...
    def write_npy(self, path: PathLike) -> None: ...
    def __add__(self, other: "Tensor") -> "Tensor": ...
    def __sub__(self, other: "Tensor") -> "Tensor": ...
    def __neg__(self) -> "Tensor": ...
    def __mul__(self, alpha: Scalar) -> "Tensor": ...
    def __rmul__(self, alpha: Scalar) -> "Tensor": ...
    def __truediv__(self, alpha: Scalar) -> "Tensor": ...
    # Symmetric tensors (None / errors for dense ones).
    @property
    def is_symmetric(self) -> bool: ...
    @property
    def legs(self) -> Optional[List["Leg"]]: ...
    @property
    def flux(self) -> Optional[Charge]: ...
    @property
    def symmetry(self) -> Optional["Symmetry"]: ...
    @property
    def stored_blocks(self) -> int: ...
    @property
    def stored_elements(self) -> int: ...
    def sector_blocks(self) -> List[Tuple[Tuple[Charge, ...], List[int], np.ndarray]]:
        """``(charges per leg, dense offsets, block)`` of every stored block."""

class Symmetry:
    """An abelian group: a product of U(1) and Z_n factors."""

    @staticmethod
    def trivial() -> "Symmetry": ...
    @staticmethod
    def u1() -> "Symmetry": ...
    @staticmethod
    def zn(n: int) -> "Symmetry": ...
    @staticmethod
    def product(factors: Sequence[str]) -> "Symmetry":
        """``Symmetry.product(["U1", "Z2"])``."""
    @property
    def factors(self) -> List[str]: ...
    @property
    def identity(self) -> Charge: ...
    def charge(self, c: ChargeLike) -> Charge: ...
    def fuse(self, a: ChargeLike, b: ChargeLike) -> Charge: ...
    def dual(self, a: ChargeLike) -> Charge: ...

class Leg:
    """A leg with sectors ``(charge, dim)`` in increasing charge order, direction ``"in"`` or ``"out"``."""

    def __init__(
        self,
        symmetry: Symmetry,
        direction: str,
        sectors: Sequence[Tuple[ChargeLike, int]],
        tile: Optional[int] = None,
    ) -> None: ...
    @property
    def symmetry(self) -> Symmetry: ...
    @property
    def direction(self) -> str: ...
    @property
    def sectors(self) -> List[Tuple[Charge, int]]: ...
    @property
    def tiles(self) -> List[List[int]]: ...
    @property
    def dim(self) -> int: ...
    @property
    def offsets(self) -> List[int]: ...
    def dual(self) -> "Leg": ...
    def retiled(self, tile: int) -> "Leg": ...

class Fusion:
    """The map between fused legs and the fused leg (from :func:`fuse_legs`)."""

    def __init__(self, parts: Sequence[Leg], direction: str = "out") -> None: ...
    @property
    def parts(self) -> List[Leg]: ...
    @property
    def fused(self) -> Leg: ...
    def fuse_index(self, index: Sequence[int]) -> int: ...
    def split_index(self, f: int) -> List[int]: ...

def fuse_legs(t: Tensor, first: int, count: int, direction: str = "out") -> Tuple[Tensor, Fusion]:
    """Fuses ``count`` adjacent legs of a symmetric tensor from leg ``first``."""

def split_leg(t: Tensor, leg: int, fusion: Fusion) -> Tensor:
    """The inverse of :func:`fuse_legs`."""

def einsum(
    spec: str,
    *operands: Tensor,
    alpha: Optional[Scalar] = None,
    beta: Optional[Scalar] = None,
    c: Optional[Tensor] = None,
) -> Tensor:
    """``alpha * einsum(spec, *operands) + beta * c`` with numpy's semantics (one or two operands)."""

def axpby(alpha: Scalar, a: Tensor, beta: Scalar, b: Tensor, spec: Optional[str] = None) -> Tensor: ...
def lincomb(terms: Sequence[Tuple[Scalar, Tensor]]) -> Tensor:
    """``sum_k c_k * t_k`` over ``(c_k, t_k)`` pairs of one shape, as one element-wise operation."""

def inner(a: Tensor, b: Tensor) -> complex:
    """``numpy.vdot(a, b)``."""

class SvdResult:
    u: Tensor
    s: np.ndarray
    vh: Tensor
    discarded: np.ndarray
    discarded_weight: float
    sectors: List[Tuple[Charge, np.ndarray]]
    """Symmetric input: ``(charge, values)`` of every sector of the bond leg; empty for dense input."""
    def __iter__(self) -> Iterator[Any]: ...

def svd(
    t: Tensor,
    split: str,
    max_rank: Optional[int] = None,
    cutoff: Optional[float] = None,
    max_discarded_weight: Optional[float] = None,
    block: Optional[int] = None,
) -> SvdResult: ...
def qr(t: Tensor, split: str, block: Optional[int] = None) -> Tuple[Tensor, Tensor]: ...
def lq(t: Tensor, split: str, block: Optional[int] = None) -> Tuple[Tensor, Tensor]: ...
def eigh(
    t: Tensor, split: str, hermitian_rtol: Optional[float] = None, block: Optional[int] = None
) -> Tuple[np.ndarray, Tensor]: ...

class Site:
    """A site type: basis states, named operators, optional charges."""

    def __init__(self, name: str, states: Sequence[str]) -> None: ...
    @staticmethod
    def spin(two_s: int = 1, conserve: str = "none") -> "Site": ...
    @staticmethod
    def fermion(conserve: str = "none") -> "Site": ...
    @staticmethod
    def electron(conserve: str = "none") -> "Site": ...
    @staticmethod
    def boson(nmax: int, conserve: str = "none") -> "Site": ...
    def with_op(self, name: str, matrix: npt.ArrayLike, fermionic: bool = False) -> "Site": ...
    @property
    def name(self) -> str: ...
    @property
    def dim(self) -> int: ...
    @property
    def states(self) -> List[str]: ...
    @property
    def op_names(self) -> List[str]: ...
    def op(self, name: str) -> np.ndarray: ...

class OpSum:
    """A sum of products of site operators."""

    def __init__(self) -> None: ...
    def add(self, coeff: Scalar, ops: Sequence[Tuple[str, int]]) -> "OpSum": ...
    @property
    def terms(self) -> List[Tuple[complex, List[Tuple[str, int]]]]: ...
    def __len__(self) -> int: ...
    def mpo_bond_dims(self, sites: Sequence[Site], cutoff: float = 1e-13) -> List[int]: ...

class Model:
    sites: List[Site]
    hamiltonian: OpSum
    def __init__(self, sites: Sequence[Site], hamiltonian: OpSum) -> None: ...
    def __len__(self) -> int: ...

def heisenberg(length: int, two_s: int = 1, j: float = 1.0, conserve: str = "none") -> Model: ...
def xxz(
    length: int, two_s: int = 1, jxy: float = 1.0, jz: float = 1.0, hz: float = 0.0, conserve: str = "none"
) -> Model: ...
def j1j2(length: int, j1: float = 1.0, j2: float = 0.0, conserve: str = "none") -> Model: ...
def spin1(length: int, j: float = 1.0, d: float = 0.0, conserve: str = "none") -> Model: ...
def tfi(length: int, j: float = 1.0, g: float = 1.0, conserve: str = "none") -> Model: ...
def hubbard(length: int, t: float = 1.0, u: float = 4.0, mu: float = 0.0, conserve: str = "none") -> Model: ...

class Mpo:
    def __len__(self) -> int: ...
    @property
    def bond_dims(self) -> List[int]: ...

class Mps:
    def __len__(self) -> int: ...
    @property
    def bond_dims(self) -> List[int]: ...
    @property
    def max_bond(self) -> int: ...
    def site(self, i: int) -> Tensor: ...
    def copy(self) -> "Mps": ...
    def expectation_values(self, sites: SiteList, op: str, block: int = 64) -> np.ndarray: ...
    def correlations(
        self,
        sites: SiteList,
        a: str,
        i: int,
        b: str,
        range: Optional[int] = None,
        string: Optional[str] = None,
        block: int = 64,
    ) -> np.ndarray: ...
    def schmidt_spectra(self, block: int = 64) -> List[np.ndarray]: ...
    def entanglement_entropy(self, block: int = 64) -> np.ndarray: ...
    def expectation(self, mpo: Mpo) -> float: ...
    def energy_variance(self, mpo: Mpo) -> Tuple[float, float]: ...
    def overlap(self, other: "Mps") -> float: ...
    def to_numpy(self, sites: Optional[SiteList] = None) -> np.ndarray:
        """The state in the site basis (length ``d**L``); symmetric states need their site types."""
    @property
    def is_symmetric(self) -> bool: ...
    @property
    def total_charge(self) -> Optional[Charge]: ...

class SweepStats:
    sweep: int
    energy: float
    energy_change: float
    max_truncation: float
    max_bond: int
    lanczos_applications: int
    max_residual: float
    unconverged_steps: int
    seconds: float
    lanczos_seconds: float
    svd_seconds: float

Observer = Callable[["Dmrg", SweepStats], Optional[bool]]

class Dmrg:
    def __init__(
        self,
        mpo: Mpo,
        mps: Mps,
        chi_max: int = 64,
        cutoff: float = 1e-10,
        lanczos_tol: float = 1e-8,
        lanczos_krylov: int = 20,
        lanczos_restarts: int = 1,
        tol_to_truncation: float = 0.1,
        block: int = 64,
    ) -> None: ...
    @staticmethod
    def resume(
        mpo: Mpo,
        checkpoint_id: str,
        chi_max: int = 64,
        cutoff: float = 1e-10,
        lanczos_tol: float = 1e-8,
        lanczos_krylov: int = 20,
        lanczos_restarts: int = 1,
        tol_to_truncation: float = 0.1,
        block: int = 64,
    ) -> "Dmrg": ...
    def sweep(self) -> SweepStats: ...
    def run(self, sweeps: int = 20, tol: float = 1e-10, observer: Optional[Observer] = None) -> List[SweepStats]: ...
    def checkpoint(self) -> str: ...
    @property
    def energy(self) -> Optional[float]: ...
    @property
    def sweeps(self) -> int: ...
    @property
    def mps(self) -> Mps: ...

class TebdStep:
    max_discarded_weight: float
    discarded_weight: float
    max_bond: int

class Tebd:
    def __init__(
        self,
        universe: Universe,
        model: Model,
        dt: float = 0.05,
        imaginary: bool = False,
        chi_max: int = 64,
        cutoff: float = 1e-12,
        block: int = 64,
    ) -> None: ...
    def step(self, mps: Mps) -> TebdStep: ...

class TdvpStep:
    time: float
    discarded_weight: float
    max_discarded_weight: float
    max_bond: int
    energy: float
    applications: int
    max_krylov_error: float
    unconverged: int

TdvpObserver = Callable[["Tdvp", TdvpStep], Optional[bool]]

class Tdvp:
    """Two-site TDVP: real time ``exp(-i H dt)`` or, with ``imaginary=True``, ``exp(-H dt)``."""

    def __init__(
        self,
        mpo: Mpo,
        mps: Mps,
        dt: float = 0.05,
        imaginary: bool = False,
        chi_max: int = 64,
        cutoff: float = 1e-12,
        krylov_tol: float = 1e-12,
        krylov_max: int = 30,
        block: int = 64,
    ) -> None: ...
    def step(self) -> TdvpStep: ...
    def run(self, steps: int, observer: Optional[TdvpObserver] = None) -> List[TdvpStep]: ...
    def set_dt(self, dt: float) -> None: ...
    @property
    def time(self) -> float: ...
    @property
    def mps(self) -> Mps: ...
