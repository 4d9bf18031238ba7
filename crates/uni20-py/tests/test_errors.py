"""Errors are Python exceptions of specific classes, never a crash."""

import numpy as np
import pytest

import uni20
from conftest import needs_subprocess


def test_spec_errors(u):
    a = u.tensor(np.ones((3, 4)), block=2)
    with pytest.raises(uni20.SpecError) as e:
        uni20.einsum("ij,jq->ik", a, a)
    assert isinstance(e.value, ValueError) and isinstance(e.value, uni20.Uni20Error)
    assert e.value.rank is None and e.value.command is None
    with pytest.raises(uni20.SpecError):
        uni20.einsum("ij,jk->ik", a, a)  # j is 4 in one operand, 3 in the other
    with pytest.raises(uni20.SpecError):
        uni20.svd(a, "ab|x")
    with pytest.raises(uni20.SpecError):
        a.transpose("ab->aa")


def test_shape_errors(u):
    a = u.tensor(np.ones((3, 4)), block=2)
    b = u.tensor(np.ones((4, 3)), block=2)
    with pytest.raises(uni20.ShapeError):
        a + b
    with pytest.raises(uni20.ShapeError):
        u.tensor(np.ones((2, 3, 4)), block=2).reshape([3, 8])  # not adjacent modes
    with pytest.raises(uni20.ShapeError):
        a.transpose([0, 0])
    with pytest.raises(uni20.ShapeError):
        uni20.einsum("ij,jk->ik", a, b, c=u.tensor(np.ones((4, 4)), block=2))


def test_dtype_errors(u):
    with pytest.raises(uni20.DTypeError) as e:
        u.tensor(np.ones(3, dtype=np.float16))
    assert isinstance(e.value, TypeError)
    with pytest.raises(uni20.DTypeError):
        u.tensor(np.array(["a", "b"]))
    a = u.tensor(np.ones((2, 2)), block=2)
    with pytest.raises(uni20.DTypeError):
        uni20.einsum("ij,jk->ik", a, a, alpha=1j)
    with pytest.raises(uni20.DTypeError):
        u.zeros([2], dtype="int32")


def test_option_and_model_errors(u):
    a = u.tensor(np.ones((3, 3)), block=2)
    with pytest.raises(uni20.OptionError):
        uni20.svd(a, "a|b", max_rank=0)
    with pytest.raises(uni20.OptionError):
        uni20.Dmrg(u.heisenberg_mpo(4, block=8), u.random_mps(4, block=8), chi_max=0)
    with pytest.raises(uni20.OptionError):
        uni20.Site.spin(1, conserve="bogus")
    h = uni20.OpSum().add(1.0, [("Foo", 0), ("Sz", 1)])
    with pytest.raises(uni20.ModelError) as e:
        u.mpo(h, [uni20.Site.spin(1)] * 2)
    assert "Foo" in str(e.value)
    with pytest.raises(uni20.ShapeError):
        uni20.Dmrg(u.heisenberg_mpo(4, block=8), u.random_mps(5, block=8))


def test_checkpoint_errors(u):
    with pytest.raises(uni20.CheckpointError):
        u.restore("garbage")
    cid = u.checkpoint({"a": u.tensor(np.ones(2), block=2)})
    head, nonce = cid.split("@")
    missing = f"r0:{int(head[3:]) + 100000}@{nonce}"
    with pytest.raises(uni20.CheckpointError):
        u.restore(missing)


def test_file_errors(u, tmp_path):
    with pytest.raises(uni20.FileError) as e:
        u.read_npy(tmp_path / "missing.npy")
    assert isinstance(e.value, OSError)


@needs_subprocess
def test_startup_and_closed_errors():
    with pytest.raises(uni20.StartupError):
        uni20.Universe(ranks=0).start()
    with pytest.raises(uni20.StartupError, match="threads_per_rank"):
        uni20.Universe(ranks=1, threads_per_rank=0).start()
    with uni20.Universe(ranks=2, threads_per_rank=1) as v:
        t = v.tensor(np.ones(3), block=2)
    assert not v.running
    with pytest.raises(uni20.UniverseClosedError):
        t.to_numpy()
    with pytest.raises(uni20.UniverseClosedError):
        v.tensor(np.ones(3))


def test_mixing_universes_is_refused(u):
    if uni20.launched_by_mpi():
        pytest.skip("one universe per process under MPI")
    with uni20.Universe(ranks=2, threads_per_rank=1) as v:
        a, b = u.tensor(np.ones(3), block=2), v.tensor(np.ones(3), block=2)
        with pytest.raises(uni20.ShapeError):
            a + b
