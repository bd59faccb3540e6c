"""Lint and type checks as tests: ``ruff check .`` and ``mypy`` over the packages are clean.

Both run as subprocesses from the repository root with the settings in ``pyproject.toml``;
a test is skipped when its tool is not installed (``pip install -e '.[test]'`` pins both).
mypy keeps its default incremental cache (``.mypy_cache/``), so a rerun takes seconds.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Packages mypy checks (``--follow-imports=silent`` below only silences third-party code).
MYPY_PACKAGES = ["arch", "archsim", "dataflow", "energy", "mapper", "sim", "workloads"]


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(tool) is None:
        pytest.skip(f"{tool} is not installed")
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True,
                          text=True, check=False)


def test_ruff_clean() -> None:
    r = _run("ruff", "check", ".")
    assert r.returncode == 0, f"ruff check . failed:\n{r.stdout}{r.stderr}"


def test_mypy_clean() -> None:
    r = _run("mypy", "--follow-imports=silent", *MYPY_PACKAGES)
    assert r.returncode == 0, f"mypy {' '.join(MYPY_PACKAGES)} failed:\n{r.stdout}{r.stderr}"
