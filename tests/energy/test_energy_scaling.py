"""Technology scaling (Stillmaker & Baas 2017): identity, table points, monotonicity."""

from __future__ import annotations

import pytest

from archsim.energy import (
    Component,
    Technology,
    area_per_instance_mm2,
    energy_per_action_pj,
    nominal_vdd_v,
    scale,
)

NODES = [180, 130, 90, 65, 45, 40, 32, 28, 22, 20, 16, 14, 12, 10, 7, 5, 4, 3]


@pytest.mark.parametrize("q", ["energy", "area", "delay", "power"])
@pytest.mark.parametrize("node", NODES)
def test_identity_at_same_node(q, node):
    assert scale(3.25, q, node, node) == 3.25


@pytest.mark.parametrize("q", ["energy", "area", "power"])
def test_monotone_in_node_at_nominal_supply(q):
    factors = [scale(1.0, q, 45, n) for n in NODES]  # NODES descend
    assert all(a > b for a, b in zip(factors, factors[1:])), factors


def test_table_points():
    assert scale(1.0, "area", 45, 7) == pytest.approx(0.059)
    assert scale(1.0, "area", 45, 180) == pytest.approx(19.0)
    # energy 45 nm @0.9 V -> 32 nm @0.9 V: ratio of the paper's polynomials
    f45 = 1.018 * 0.81 - 0.3107 * 0.9 + 0.1539
    f32 = 0.8367 * 0.81 - 0.4341 * 0.9 + 0.1701
    assert scale(1.0, "energy", 45, 32) == pytest.approx(f32 / f45)


def test_round_trip_and_voltage():
    x = scale(scale(7.0, "energy", 45, 12), "energy", 12, 45)
    assert x == pytest.approx(7.0, rel=1e-12)
    # lower supply at the same node lowers energy
    assert scale(1.0, "energy", 45, 45, 0.9, 0.8) < 1.0
    assert nominal_vdd_v(45) == 0.9 and nominal_vdd_v(5) == 0.7


def test_extrapolation_below_7nm_is_a_gentle_power_law():
    e5 = scale(1.0, "energy", 7, 5)
    a5 = scale(1.0, "area", 7, 5)
    assert 0.6 < e5 < 0.8  # foundry claims ~30% less power N5 vs N7
    assert 0.5 < a5 < 0.7  # ~1.6-1.8x density


@pytest.mark.parametrize("bad", [2.0, 181.0, 1000.0])
def test_out_of_range_nodes_raise(bad):
    with pytest.raises(ValueError, match="outside the supported range"):
        scale(1.0, "energy", 45, bad)
    with pytest.raises(ValueError):
        Technology(bad)


def test_bad_quantity_and_supply():
    with pytest.raises(ValueError, match="allowed: energy, area, delay, power"):
        scale(1.0, "leakage", 45, 7)
    with pytest.raises(ValueError, match="supply"):
        Technology(45, 2.5)


def test_components_shrink_with_node():
    m = Component("m", "mac", 1, {"format": "bf16"})
    s = Component("s", "sram", 1, {"capacity_bytes": 65536, "width_bits": 64})
    for c, action in ((m, "mac"), (s, "read")):
        e = [energy_per_action_pj(c, action, Technology(n)) for n in (65, 45, 16, 7, 4)]
        a = [area_per_instance_mm2(c, Technology(n)) for n in (65, 45, 16, 7, 4)]
        assert e == sorted(e, reverse=True) and a == sorted(a, reverse=True)
