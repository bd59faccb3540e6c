"""Run the ``nojit``-marked subset of tests/sim again with NUMBA_DISABLE_JIT=1.

The kernels must stay valid plain Python (no Numba-only behaviour); this runs them as
such in a subprocess, so the rest of the session keeps its compiled kernels.
"""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1",
                    reason="already running without JIT")
def test_nojit_subset_passes() -> None:
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", HERE, "-m", "nojit", "-q", "-p", "no:cacheprovider",
         "--hypothesis-seed=0"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "[100%]" in proc.stdout  # at least one nojit test was collected and ran
