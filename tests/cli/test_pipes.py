"""A reader that closes the pipe early is not an error (`archsim ... | head`), and
`archsim --version` answers (issue 29, item 7)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import archsim
from archsim.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_output_into_a_closed_pipe_exits_quietly():
    cmd = (f"{sys.executable} -m archsim run tpu_like --model resnet50 | head -1; "
           "echo rc=${PIPESTATUS[0]}")
    r = subprocess.run(cmd, shell=True, executable="/bin/bash", cwd=ROOT, capture_output=True,
                       text=True, timeout=120, check=False)
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[-1] == "rc=0", r.stdout
    assert "Broken pipe" not in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_version(capsys):
    try:
        main(["--version"])
    except SystemExit as e:
        assert e.code == 0
    assert capsys.readouterr().out.strip() == f"archsim {archsim.__version__}"
