"""Unit tests: closed-form expectations worked out by hand (45 nm, 0.9 V unless stated)."""

from __future__ import annotations

import math

import pytest

from archsim.energy import (
    Component,
    Technology,
    allowed_actions,
    area,
    area_per_instance_mm2,
    energy_per_action_pj,
    evaluate,
    leakage_per_instance_w,
    scale,
)

REL = 1e-12
FA_PJ = 0.03 / 8  # Horowitz 8-bit add = 8 full adders


def mac(fmt: str, name: str = "m", count: int = 1) -> Component:
    return Component(name, "mac", count, {"format": fmt})


def test_1000_fp16_macs_at_45nm():
    # 1000 x (1.1 pJ fp16 mult + 0.4 pJ fp16 add) = 1500 pJ = 1.5e-9 J
    rep = evaluate([mac("fp16")], {("m", "mac"): 1000}, latency_s=0.0)
    assert rep.dynamic_j == pytest.approx(1000 * (1.1 + 0.4) * 1e-12, rel=REL)
    assert rep.leakage_j == 0.0
    assert rep.total_j == rep.dynamic_j
    assert rep.breakdown_j == {"m": rep.total_j}


@pytest.mark.parametrize(
    "fmt, expected_pj",
    [
        ("fp32", 3.7 + 0.9),
        ("int8", 0.2 + 0.03),
        ("int4", 0.2 * (4 / 8) ** 2 + 0.03 * 4 / 8),  # mult ~ bits², add ~ bits
        ("int2", 0.2 * (2 / 8) ** 2 + 0.03 * 2 / 8),
        ("ternary", 0.2 * (2 / 8) ** 2 + 0.03 * 2 / 8),  # modelled as int2
        ("int6", 0.2 * (6 / 8) ** 2 + 0.03 * 6 / 8),
        ("int1", FA_PJ * 1.596 / 4.256 + FA_PJ),  # XNOR + one popcount full adder
        ("mxint8", 0.2 + 0.03 + 0.03 / 32),  # int8 MAC + 8-bit scale add / 32-element block
        ("fp8_e4m3", None),  # checked against the fit below
    ],
)
def test_mac_energy_per_format(fmt, expected_pj):
    e = energy_per_action_pj(mac(fmt), "mac")
    if expected_pj is None:
        # float multiplier fit a m² + b w through fp16 (11, 16 -> 1.1) and fp32 (24, 32 -> 3.7)
        a = (1.1 * 32 - 3.7 * 16) / (121 * 32 - 576 * 16)
        b = (121 * 3.7 - 576 * 1.1) / (121 * 32 - 576 * 16)
        expected_pj = a * 4**2 + b * 8 + 0.4 * 8 / 16  # e4m3: m = 4, w = 8; add linear in width
    assert e == pytest.approx(expected_pj, rel=1e-12)


def test_float_mult_fit_reproduces_table_points_and_orders_bf16():
    mult = lambda f: energy_per_action_pj(Component("x", "multiplier", 1, {"format": f}), "op")  # noqa: E731
    assert mult("fp16") == pytest.approx(1.1)
    assert mult("fp32") == pytest.approx(3.7)
    assert mult("fp8_e5m2") < mult("fp8_e4m3") < mult("bf16") < mult("fp16") < mult("tf32") < mult("fp32")


def test_adder_and_multiplier_table_points():
    add = lambda f: energy_per_action_pj(Component("x", "adder", 1, {"format": f}), "op")  # noqa: E731
    mul = lambda f: energy_per_action_pj(Component("x", "multiplier", 1, {"format": f}), "op")  # noqa: E731
    assert add("int8") == pytest.approx(0.03)
    assert add("int16") == pytest.approx(0.05)
    assert add("int32") == pytest.approx(0.1)
    assert add("fp16") == pytest.approx(0.4)
    assert add("fp32") == pytest.approx(0.9)
    assert mul("int8") == pytest.approx(0.2)
    assert mul("int32") == pytest.approx(3.1)
    # areas (um² -> mm²): fp16 MAC = 1640 + 1360 um²
    assert area_per_instance_mm2(mac("fp16")) == pytest.approx((1640 + 1360) * 1e-6)
    assert area_per_instance_mm2(mac("int8")) == pytest.approx((282 + 36) * 1e-6)


def sram(cap: int, width: int, ports: int = 1, cls: str = "sram") -> Component:
    attrs = {"capacity_bytes": cap, "width_bits": width}
    if ports != 1:
        attrs["ports"] = ports
    return Component("s", cls, 1, attrs)


@pytest.mark.parametrize("cap, e64", [(8 * 1024, 10.0), (32 * 1024, 20.0), (1024 * 1024, 100.0)])
def test_sram_reads_hit_horowitz_points(cap, e64):
    assert energy_per_action_pj(sram(cap, 64), "read") == pytest.approx(e64)
    # 128 bits = 2 x the 64-bit figure; write costs the same as read
    assert energy_per_action_pj(sram(cap, 128), "read") == pytest.approx(2 * e64)
    assert energy_per_action_pj(sram(cap, 128), "write") == pytest.approx(2 * e64)


def test_sram_fit_between_and_beyond_points():
    # 16 KB lies on the 8 KB -> 32 KB segment, E ~ C^0.5: 10 x sqrt(2)
    assert energy_per_action_pj(sram(16 * 1024, 64), "read") == pytest.approx(10 * math.sqrt(2))
    # 2 KB extends the first segment: 10 x sqrt(1/4) = 5
    assert energy_per_action_pj(sram(2 * 1024, 64), "read") == pytest.approx(5.0)
    # 4 MB extends the last segment: 100 x 4^(ln 5 / ln 32)
    assert energy_per_action_pj(sram(4 * 1024 * 1024, 64), "read") == pytest.approx(
        100 * 4 ** (math.log(5) / math.log(32))
    )


def test_sram_area_leakage_and_ports():
    one_mb = sram(1024 * 1024, 64)
    # 8 Mbit x 0.346 um² / 0.6 array efficiency
    a = 1024 * 1024 * 8 * 0.346 / 0.6 * 1e-6
    assert area_per_instance_mm2(one_mb) == pytest.approx(a)
    assert leakage_per_instance_w(one_mb) == pytest.approx(a * 0.02)
    two = sram(1024 * 1024, 64, ports=2)
    assert energy_per_action_pj(two, "read") == pytest.approx(2 * 100.0)
    assert area_per_instance_mm2(two) == pytest.approx(4 * a)


def test_regfile_same_energy_law_denser_cost():
    rf = sram(8 * 1024, 32, cls="regfile")
    assert energy_per_action_pj(rf, "read") == pytest.approx(10.0 * 32 / 64)
    assert area_per_instance_mm2(rf) == pytest.approx(8 * 1024 * 8 * 0.346 * 2.0 / 0.5 * 1e-6)


def test_dram_per_byte_and_not_node_scaled():
    d = Component("d", "dram", 1, {"tech": "hbm2"})
    assert allowed_actions(d) == ("read", "write", "activate", "mac")
    assert energy_per_action_pj(d, "read") == pytest.approx(3.9 * 8)
    assert energy_per_action_pj(d, "read", Technology(7)) == energy_per_action_pj(d, "read")
    # activation: 0.093 pJ per row bit x 1 KB row x (1.2 V / 1.2 V)²
    assert energy_per_action_pj(d, "activate") == pytest.approx(0.093 * 1024 * 8)
    # PIM MAC: bf16 MAC at 45 nm x (1.2 V / 0.9 V)²
    bf16_mac = energy_per_action_pj(mac("bf16"), "mac")
    assert energy_per_action_pj(d, "mac") == pytest.approx(bf16_mac * (1.2 / 0.9) ** 2)
    g = Component("g", "dram", 1, {"tech": "gddr6"})
    assert energy_per_action_pj(g, "write") == pytest.approx(7.5 * 8)
    assert area_per_instance_mm2(g) == 0.0 and leakage_per_instance_w(g) == 0.0


def test_wire_energy():
    w = Component("w", "wire", 1, {"length_mm": 2.0, "width_bits": 64})
    # 0.5 activity x 0.2 pF/mm x 0.9² V² = 0.081 pJ/bit/mm; x 64 bits x 2 mm
    assert energy_per_action_pj(w, "transfer") == pytest.approx(0.081 * 64 * 2)
    # only the supply changes with the node: 7 nm at 0.7 V
    assert energy_per_action_pj(w, "transfer", Technology(7)) == pytest.approx(0.5 * 0.2 * 0.7**2 * 64 * 2)


def test_lut_lookup_and_area():
    lut = Component("l", "lut", 1, {"entries": 16, "entry_bits": 8})
    e_mux = FA_PJ * 1.862 / 4.256
    assert energy_per_action_pj(lut, "lookup") == pytest.approx(0.5 * 8 * 15 * e_mux)
    assert energy_per_action_pj(lut, "write") == pytest.approx(8 * FA_PJ * 4.522 / 4.256)
    assert area_per_instance_mm2(lut) == pytest.approx((16 * 8 * 4.522 + 8 * 15 * 1.862) * 1e-6)


def test_vector_op():
    v = Component("v", "vector", 1, {"format": "fp32"})
    # fp32 MAC + 3 reads + 1 write of 32 bits from an 8 KB bank (10 pJ / 64 b) + 70 pJ / 32 lanes
    assert energy_per_action_pj(v, "op") == pytest.approx(4.6 + 4 * 10 * 32 / 64 + 70 / 32)


def test_fixed_and_static():
    f = Component("f", "fixed", 2, {"energy_pj": {"softmax": 12.5}, "area_mm2": 0.3, "leakage_w": 0.01, "source": "paper X"})
    s = Component("s", "static", 1, {"power_w": 5.0, "source": "board"})
    rep = evaluate([f, s], {("f", "softmax"): 4}, latency_s=2.0)
    assert rep.dynamic_j == pytest.approx(4 * 12.5e-12)
    # leakage: 2 instances x 0.01 W x 2 s + 5 W x 2 s
    assert rep.leakage_j == pytest.approx(2 * 0.01 * 2 + 5.0 * 2)
    assert area([f, s]).total_mm2 == pytest.approx(0.6)
    # with node_nm the figures are scaled to the technology
    f7 = Component("f", "fixed", 1, {"energy_pj": {"x": 10.0}, "area_mm2": 1.0, "leakage_w": 0.0, "source": "p", "node_nm": 45})
    t = Technology(7)
    assert energy_per_action_pj(f7, "x", t) == pytest.approx(scale(10.0, "energy", 45, 7))
    assert area_per_instance_mm2(f7, t) == pytest.approx(0.059)


def test_leakage_times_latency_and_count():
    m = mac("fp16", count=10)
    rep = evaluate([m], {}, latency_s=2.0)
    # 10 instances x (3000 um² x 0.02 W/mm²) x 2 s
    assert rep.leakage_j == pytest.approx(10 * 3000e-6 * 0.02 * 2.0)
    assert rep.dynamic_j == 0.0
    assert area([m]).total_mm2 == pytest.approx(10 * 3000e-6)


def test_component_technology_overrides_default():
    m45 = mac("fp16", "a")
    m7 = Component("b", "mac", 1, {"format": "fp16"}, technology=Technology(7))
    rep = evaluate([m45, m7], {("a", "mac"): 1, ("b", "mac"): 1}, 0.0)
    assert rep.dynamic_breakdown_j["a"] == pytest.approx(1.5e-12)
    assert rep.dynamic_breakdown_j["b"] == pytest.approx(scale(1.5, "energy", 45, 7) * 1e-12)
    assert rep.dynamic_breakdown_j["b"] < rep.dynamic_breakdown_j["a"]


def test_report_to_dict_and_hashable_component():
    m = mac("fp16")
    assert hash(m) == hash(mac("fp16"))
    d = evaluate([m], {("m", "mac"): 2}, 1e-3).to_dict()
    assert set(d) >= {"total_j", "dynamic_j", "leakage_j", "breakdown_j"}
    assert area([m]).to_dict()["breakdown_mm2"] == {"m": pytest.approx(3000e-6)}
    assert Technology().effective_vdd_v == 0.9
