"""Each Numba kernel compiles once per run (issue 30, cold start).

Numba compiles a jitted callee once per distinct argument *type*, and a literal argument
(``issue(..., C_PREA, ch, 0, ...)``) has its own type per value: before this test the PIM
stream compiled ``sim.dram_kernel.issue`` 9 times and the DRAM entry points compiled the
~10 CPU-s controller ``_core`` 3 times (cold first runs of 25-40 CPU-s). A cold run into an
empty ``NUMBA_CACHE_DIR`` writes one ``<module>.<function>-<line>.pyXY.<k>.nbc`` file per
compiled signature; this test counts them.
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The cycle-level paths that reach every compiled kernel of sim/ and arch/pim: the PIM
#: command stream, the DRAM-timing memory model under the event engine.
COMMANDS = [
    ["gemm", "pim_gpt", "--m", "1", "--n", "512", "--k", "512", "--fidelity", "cycle"],
    ["gemm", "tpu_like", "--m", "64", "--n", "64", "--k", "64", "--fidelity", "cycle",
     "--set", "units[0].memory.model=dram", "--set", "units[0].memory.preset=DDR4-2400"],
]


@pytest.mark.slow
def test_each_kernel_compiles_one_signature(tmp_path: Path) -> None:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    for argv in COMMANDS:
        p = subprocess.run([sys.executable, "-m", "archsim", *argv], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
    per_function: collections.Counter[str] = collections.Counter()
    for f in tmp_path.rglob("*.nbc"):
        m = re.match(r"(.+)\.py\d+\.\d+\.nbc$", f.name)
        assert m, f.name
        per_function[str(f.parent / m.group(1))] += 1
    assert per_function, "no kernel was compiled into the empty cache"
    names = {Path(k).name for k in per_function}
    assert any(n.startswith("dram_kernel.core") for n in names), names
    assert any(n.startswith("kernel.run_channel") for n in names), names
    several = {k: n for k, n in per_function.items() if n > 1}
    assert not several, f"kernels compiled for more than one signature: {several}"
