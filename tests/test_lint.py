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

#: The one import root as installed: archsim's own files plus one folder per layer
#: (pyproject's package-dir). mypy cannot follow setuptools' package-dir mapping, so the test
#: lays out that tree as links under ``.mypy_tree/`` (git-ignored) and checks ``-p archsim``.
LAYERS = {"arch": "arch", "dataflow": "dataflow", "energy": "energy", "mapper": "mapper",
          "sim": "sim", "workloads": "workloads"}


def _run(tool: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(tool) is None:
        pytest.skip(f"{tool} is not installed")
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=cwd, capture_output=True,
                          text=True, check=False)


def _installed_layout() -> Path:
    """``.mypy_tree/archsim`` = links to ``archsim/*`` and to each layer folder."""
    tree = ROOT / ".mypy_tree"
    pkg = tree / "archsim"
    pkg.mkdir(parents=True, exist_ok=True)
    want = {p.name: p for p in (ROOT / "archsim").iterdir() if p.name != "__pycache__"}
    want.update({name: ROOT / folder for name, folder in LAYERS.items()})
    for link in pkg.iterdir():
        if link.name not in want or link.resolve() != want[link.name].resolve():
            link.unlink()
    for name, target in want.items():
        if not (pkg / name).is_symlink():
            (pkg / name).symlink_to(target)
    return tree


def test_ruff_clean() -> None:
    r = _run("ruff", "check", ".")
    assert r.returncode == 0, f"ruff check . failed:\n{r.stdout}{r.stderr}"


def test_mypy_clean() -> None:
    tree = _installed_layout()
    r = _run("mypy", "--config-file", str(ROOT / "pyproject.toml"), "--follow-imports=silent",
             "-p", "archsim", cwd=tree)
    assert r.returncode == 0, f"mypy -p archsim failed:\n{r.stdout}{r.stderr}"
