"""Parity with Timeloop on its own published reference outputs.

Source of tests/data/timeloop/: Accelergy-Project/timeloop-accelergy-exercises (MIT),
commit 2d5510807128e9bd5f1cad0705cdf2ec4612fd4e, workspace/example_designs/example_designs/
<design>/ and ref_outputs/default_problem/ (see tests/data/timeloop/SOURCE.md). For each design
we read the same arch, problem, ERT and the mapper's chosen mapping, and compare with the
numbers Timeloop printed in timeloop-mapper.stats.txt: per-level scalar reads, fills and
updates must be equal; cycles equal; total energy within 1% (it agrees to < 0.001%).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archsim.arch.timeloop import load_dir, read_stats
from archsim.dataflow.nest import analyse

DATA = Path(__file__).resolve().parents[1] / "data" / "timeloop"
DESIGNS = ["eyeriss_like", "simba_like", "simple_output_stationary", "simple_weight_stationary"]


@pytest.mark.parametrize("design", DESIGNS)
def test_parity_with_timeloop(design: str) -> None:
    des = load_dir(DATA / design, DATA / "default_problem.yaml")
    assert des.problem is not None and des.mapping is not None
    res = analyse(des.problem, des.hierarchy, des.mapping)
    st = read_stats(DATA / design / "timeloop-mapper.stats.txt")
    ref, cycles, energy_uj = st.counts, st.cycles, st.energy_uj
    assert res.feasible, res.reasons
    ours = {(lv, ds): {"reads": st.reads, "fills": st.fills, "updates": st.updates}
            for lv, per in res.stats.items() for ds, st in per.items()}
    assert ours == ref
    assert res.cycles == cycles
    assert res.energy_pj / 1e6 == pytest.approx(energy_uj, rel=0.01)
    # the stats print energy rounded to 0.01 uJ: agreement is to that rounding
    assert abs(res.energy_pj / 1e6 - energy_uj) <= 0.005 + 1e-9


@pytest.mark.parametrize("design", DESIGNS)
def test_per_level_energy_and_fj_per_compute(design: str) -> None:
    des = load_dir(DATA / design)
    assert des.problem is not None and des.mapping is not None
    res = analyse(des.problem, des.hierarchy, des.mapping)
    st = read_stats(DATA / design / "timeloop-mapper.stats.txt")
    for (lv, ds), e in st.energy_pj.items():           # printed to 0.01 pJ
        assert res.stats[lv][ds].energy_pj == pytest.approx(e, abs=0.006)
    for name, fj in st.fj_per_compute.items():          # printed to 0.01 fJ
        ours = res.fj_per_compute if name == "Total" else \
            1000 * res.energy_by_level_pj[name] / res.macs
        assert ours == pytest.approx(fj, abs=0.006)
    assert res.utilization == pytest.approx(st.utilization, abs=5e-5)
