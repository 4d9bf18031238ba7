"""Every ```python block of the crate's README.md (which the user guide includes) and of the
repository's landing page README.md runs."""

import pathlib
import re
import subprocess
import sys

import pytest

from conftest import needs_subprocess

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
ROOT_README = pathlib.Path(__file__).resolve().parents[3] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
ROOT_BLOCKS = re.findall(r"```python\n(.*?)```", ROOT_README.read_text(), flags=re.S)


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 5


@needs_subprocess
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index, tmp_path):
    script = tmp_path / f"block{index}.py"
    script.write_text(BLOCKS[index])
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"README block {index}:\n{BLOCKS[index]}\n--- stderr:\n{proc.stderr}"


def test_root_readme_has_a_python_block():
    assert len(ROOT_BLOCKS) >= 1


@needs_subprocess
@pytest.mark.parametrize("index", range(len(ROOT_BLOCKS)))
def test_root_readme_block_runs(index, tmp_path):
    script = tmp_path / f"root{index}.py"
    script.write_text(ROOT_BLOCKS[index])
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"root README block {index}:\n{ROOT_BLOCKS[index]}\n--- stderr:\n{proc.stderr}"
