"""Energy and area through evaluate: positive, additive over components and over ops."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import archsim
from archsim.arch import load_data
from archsim.workloads.graph import Workload
from archsim.workloads.ops import Gemm, Softmax
from tests.conftest import spatial_config


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 200), n=st.integers(1, 200), k=st.integers(1, 200),
       rows=st.sampled_from([4, 16]), df=st.sampled_from(["ws", "os", "is"]))
def test_energy_area_positive_and_additive(m, n, k, rows, df):
    acc = load_data(spatial_config(rows=rows, cols=rows, dataflow=df, bandwidth_gbps=10.0))
    w = Workload("two")
    a = w.add(Gemm(name="a", m=m, n=n, k=k))
    w.add(Softmax(name="s", rows=m, cols=n), [a])
    res = archsim.evaluate(acc, w)
    assert res.energy_j > 0 and res.area_mm2 > 0
    assert all(v >= 0 for v in res.energy_breakdown_j.values())
    assert sum(res.energy_breakdown_j.values()) == pytest.approx(res.energy_j)
    assert sum(res.area_breakdown_mm2.values()) == pytest.approx(res.area_mm2)
    # ops run back to back: latency and energy add over ops
    assert sum(o.latency_s for o in res.ops) == pytest.approx(res.latency_s)
    assert sum(o.energy_j for o in res.ops) == pytest.approx(res.energy_j, rel=1e-9)
    # and a bigger array never has less area
    big = load_data(spatial_config(rows=2 * rows, cols=2 * rows, dataflow=df))
    assert archsim.evaluate(big, w).area_mm2 > res.area_mm2
