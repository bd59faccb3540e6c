"""Parity with Timeloop on its own published reference outputs.

Source of tests/data/timeloop/: Accelergy-Project/timeloop-accelergy-exercises (MIT),
commit 2d5510807128e9bd5f1cad0705cdf2ec4612fd4e, workspace/example_designs/example_designs/
<design>/ and ref_outputs/default_problem/ (see tests/data/timeloop/SOURCE.md). For each design
we read the same arch, problem, ERT and the mapper's chosen mapping, and compare with the
numbers Timeloop printed in timeloop-mapper.stats.txt: per-level scalar reads, fills and
updates must be equal; cycles equal; total energy within 1% (it agrees to < 0.001%).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from arch.timeloop import load_dir
from dataflow.nest import analyse

DATA = Path(__file__).resolve().parents[1] / "data" / "timeloop"
DESIGNS = ["eyeriss_like", "simba_like", "simple_output_stationary", "simple_weight_stationary"]


def _stats(path: Path) -> tuple[dict[tuple[str, str], dict[str, int]], int, float]:
    counts: dict[tuple[str, str], dict[str, int]] = {}
    level = space = None
    cycles, energy_uj = 0, 0.0
    for line in path.read_text().splitlines():
        if m := re.match(r"=== (\S+) ===", line):
            level, space = m.group(1), None
        elif m := re.match(r"    (\w+):$", line):
            space = m.group(1)
        elif (m := re.match(r"\s+Scalar (reads|fills|updates) \(per-instance\)\s+: (\d+)", line)) \
                and level and space:
            counts.setdefault((level, space), {})[m.group(1)] = int(m.group(2))
        elif m := re.match(r"^Cycles: (\d+)", line):
            cycles = int(m.group(1))
        elif m := re.match(r"^Energy: ([\d.]+) uJ", line):
            energy_uj = float(m.group(1))
    return counts, cycles, energy_uj


@pytest.mark.parametrize("design", DESIGNS)
def test_parity_with_timeloop(design: str) -> None:
    des = load_dir(DATA / design, DATA / "default_problem.yaml")
    assert des.problem is not None and des.mapping is not None
    res = analyse(des.problem, des.hierarchy, des.mapping)
    ref, cycles, energy_uj = _stats(DATA / design / "timeloop-mapper.stats.txt")
    assert res.feasible, res.reasons
    ours = {(lv, ds): {"reads": st.reads, "fills": st.fills, "updates": st.updates}
            for lv, per in res.stats.items() for ds, st in per.items()}
    assert ours == ref
    assert res.cycles == cycles
    assert res.energy_pj / 1e6 == pytest.approx(energy_uj, rel=0.01)
    # the stats print energy rounded to 0.01 uJ: agreement is to that rounding
    assert abs(res.energy_pj / 1e6 - energy_uj) <= 0.005 + 1e-9
