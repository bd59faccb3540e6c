"""Property tests: energy and area are positive, additive over components, linear in counts/time."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.energy import Component, Technology, allowed_actions, area, evaluate

FORMATS = ["fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int8", "int6", "int4", "int3", "int2", "ternary", "int1", "mxfp4", "mxint8"]

attrs_by_class = {
    "mac": st.fixed_dictionaries({"format": st.sampled_from(FORMATS)}),
    "multiplier": st.fixed_dictionaries({"format": st.sampled_from(FORMATS)}),
    "adder": st.fixed_dictionaries({"format": st.sampled_from(FORMATS)}),
    "vector": st.fixed_dictionaries({"format": st.sampled_from(FORMATS)}),
    "sram": st.fixed_dictionaries(
        {"capacity_bytes": st.integers(64, 64 << 20), "width_bits": st.sampled_from([8, 32, 64, 128, 512])},
        optional={"ports": st.integers(1, 4)},
    ),
    "regfile": st.fixed_dictionaries({"capacity_bytes": st.integers(64, 1 << 20), "width_bits": st.sampled_from([16, 32, 64])}),
    "lut": st.fixed_dictionaries({"entries": st.integers(2, 256), "entry_bits": st.integers(1, 32)}),
    "dram": st.fixed_dictionaries({"tech": st.sampled_from(["ddr4", "lpddr4", "lpddr5", "gddr6", "hbm2", "hbm2e", "hbm3", "hbm3e"])}),
    "wire": st.fixed_dictionaries({"length_mm": st.floats(0.01, 50), "width_bits": st.integers(1, 1024)}),
    "fixed": st.fixed_dictionaries(
        {"energy_pj": st.fixed_dictionaries({"op": st.floats(0.01, 1e3)}), "area_mm2": st.floats(0.001, 10), "leakage_w": st.floats(0, 1), "source": st.just("paper")}
    ),
    "static": st.fixed_dictionaries({"power_w": st.floats(0.01, 100), "source": st.just("board")}),
}


@st.composite
def components(draw, prefix: str = "c"):
    n = draw(st.integers(1, 6))
    out = []
    for i in range(n):
        cls = draw(st.sampled_from(sorted(attrs_by_class)))
        out.append(Component(f"{prefix}{i}.{cls}", cls, draw(st.integers(1, 4096)), draw(attrs_by_class[cls])))
    return out


def counts_for(comps, draw):
    counts = {}
    for c in comps:
        for a in allowed_actions(c):
            counts[(c.name, a)] = draw(st.floats(0, 1e9))
    return counts


technologies = st.sampled_from([Technology(), Technology(7), Technology(16), Technology(4), Technology(28, 0.8)])


@settings(max_examples=60, deadline=None)
@given(a=components("a"), b=components("b"), tech=technologies, latency=st.floats(0, 10), data=st.data())
def test_energy_and_area_positive_and_additive(a, b, tech, latency, data):
    ca, cb = counts_for(a, data.draw), counts_for(b, data.draw)
    ea, eb = evaluate(a, ca, latency, tech), evaluate(b, cb, latency, tech)
    eab = evaluate(a + b, {**ca, **cb}, latency, tech)
    for r in (ea, eb, eab):
        assert r.dynamic_j >= 0 and r.leakage_j >= 0 and r.total_j >= 0
        assert all(v >= 0 for v in r.breakdown_j.values())
        assert math.isclose(r.total_j, math.fsum(r.breakdown_j.values()), rel_tol=1e-9, abs_tol=1e-30)
    assert math.isclose(eab.total_j, ea.total_j + eb.total_j, rel_tol=1e-9, abs_tol=1e-30)
    aa, ab, aab = area(a, tech), area(b, tech), area(a + b, tech)
    assert aa.total_mm2 >= 0 and ab.total_mm2 >= 0
    assert math.isclose(aab.total_mm2, aa.total_mm2 + ab.total_mm2, rel_tol=1e-9, abs_tol=1e-30)


@settings(max_examples=40, deadline=None)
@given(comps=components(), tech=technologies, k=st.floats(0.0, 100.0), data=st.data())
def test_dynamic_linear_in_counts_leakage_linear_in_time(comps, tech, k, data):
    counts = counts_for(comps, data.draw)
    base = evaluate(comps, counts, 1.0, tech)
    scaled = evaluate(comps, {key: v * k for key, v in counts.items()}, k, tech)
    assert math.isclose(scaled.dynamic_j, k * base.dynamic_j, rel_tol=1e-9, abs_tol=1e-30)
    assert math.isclose(scaled.leakage_j, k * base.leakage_j, rel_tol=1e-9, abs_tol=1e-30)


@settings(max_examples=40, deadline=None)
@given(comps=components(), tech=technologies)
def test_every_action_costs_positive_energy_except_free(comps, tech):
    for c in comps:
        for a in allowed_actions(c):
            r = evaluate([c], {(c.name, a): 1.0}, 0.0, tech)
            assert r.dynamic_j > 0
