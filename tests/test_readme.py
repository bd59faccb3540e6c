"""The README's "One minute tour" and its Python examples run as written (slow: ~50
commands, ~1 min warm).

Each line of the tour's code block is run with bash from a scratch folder that links the
repository's ``configs``, ``examples``, ``tests`` and ``benchmarks`` (the files the commands
write - ``r.json``, ``trace.json``, ``sweep.sqlite``, ``nasaic/`` - land there), ``archsim``
as ``python -m archsim``. Property: exit 0, no traceback, and no ``warning:`` line - a tour
command that warns (a model that does not fit the design's memory, an unheard flag) shows a
new user a doubtful result first."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def tour() -> list[str]:
    """The tour's command lines, comments and optional ``[--flag]`` parts removed."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## One minute tour", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    out = []
    for line in block.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        line = re.sub(r"\s*\[--[a-z-]+\]", "", line)
        if line.startswith(("archsim ", "python3 ")):
            out.append(line)
    return out


def test_the_tour_is_found():
    cmds = tour()
    assert len(cmds) >= 20 and cmds[0] == "archsim list configs"


@pytest.mark.slow
@pytest.mark.parametrize("cmd", tour())
def test_tour_command_runs_without_warnings(cmd: str, tmp_path: Path):
    for name in ("configs", "examples", "tests", "benchmarks"):
        (tmp_path / name).symlink_to(ROOT / name)
    py = sys.executable
    line = re.sub(r"(^|&& )(archsim|python3) ",
                  lambda m: m[1] + (f"{py} -m archsim " if m[2] == "archsim" else f"{py} "), cmd)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, (cmd, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, (cmd, proc.stderr[-2000:])
    warns = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]
    assert not warns, (cmd, warns)


def python_blocks() -> list[str]:
    """The README's Python examples."""
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


@pytest.mark.slow
@pytest.mark.parametrize("code", python_blocks())
def test_python_example_runs(code: str, tmp_path: Path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert not [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]
