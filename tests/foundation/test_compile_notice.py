"""The "compiling" note of cycle-level runs appears only when Numba actually compiles
(issue 30, item 1): ``archsim.run_request.compile_notice`` listens to Numba's
``numba:compile`` event, which fires on a cache miss and never on a cache load."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from archsim.run_request import compile_notice

KERNEL = textwrap.dedent("""\
    from numba import njit

    @njit(cache=True)
    def add_one(x):
        return x + 1

    @njit(cache=True)
    def twice(x):
        return 2 * x
    """)

PROBE = textwrap.dedent("""\
    import sys
    sys.path[:0] = [{root!r}, {tmp!r}]
    from archsim.run_request import compile_notice
    calls = []
    with compile_notice(lambda: calls.append(1), modules=('kern',)):
        import kern
        kern.add_one(1); kern.twice(3)
    print(len(calls))
    """)


def _probe(tmp: Path) -> int:
    root = str(Path(__file__).resolve().parents[2])
    # the probe's own cache folder, whatever NUMBA_CACHE_DIR the test run has
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp / "nbcache")}
    out = subprocess.run([sys.executable, "-c", PROBE.format(root=root, tmp=str(tmp))],
                         capture_output=True, text=True, check=True, cwd=tmp, env=env)
    return int(out.stdout.split()[-1])


def test_note_once_when_compiling_never_when_cached(tmp_path: Path) -> None:
    """Empty cache: two kernels compile, the callback runs once. Same kernels in a new
    process: both load from the cache, the callback never runs."""
    (tmp_path / "kern.py").write_text(KERNEL)
    assert _probe(tmp_path) == 1
    assert any((tmp_path / "nbcache").rglob("kern.add_one-*.nbi"))   # the cache was written
    assert _probe(tmp_path) == 0


def test_numba_helpers_do_not_count() -> None:
    """A warm cycle-level run still compiles Numba's own small ``typed.List`` helpers in
    every process (the DRAM instance list); they are not archsim's kernels: no note for
    them. Probed here with a typed list built inside the notice."""
    from numba.typed import List

    calls: list[int] = []
    with compile_notice(lambda: calls.append(1)):
        lst = List()
        lst.append((1, 2.5))
    assert calls == []
