"""Negative tests: each kind of bad input raises ValueError naming the component and the allowed names."""

from __future__ import annotations

import pytest

from archsim.energy import Component, area, evaluate, validate


def test_unknown_class_names_component_and_allowed():
    with pytest.raises(ValueError, match=r"component 'pe\.x': unknown class 'sramm'; allowed: .*sram"):
        area([Component("pe.x", "sramm", 1, {})])


def test_unknown_attribute_lists_allowed():
    with pytest.raises(ValueError, match=r"component 'pe\.mac' \(class 'mac'\): unknown attribute\(s\) 'fmt'.*allowed: format"):
        validate(Component("pe.mac", "mac", 1, {"fmt": "fp16"}))


def test_missing_attribute():
    with pytest.raises(ValueError, match=r"component 'buf' \(class 'sram'\): missing attribute\(s\) 'width_bits'.*allowed: capacity_bytes, width_bits, ports"):
        validate(Component("buf", "sram", 1, {"capacity_bytes": 1024}))


def test_bad_format_value_lists_formats():
    with pytest.raises(ValueError, match=r"component 'm' \(class 'mac'\): attribute 'format': unknown format 'fp7'; allowed: .*fp16"):
        validate(Component("m", "mac", 1, {"format": "fp7"}))


def test_bad_numeric_attribute():
    with pytest.raises(ValueError, match=r"component 'buf' \(class 'sram'\): attribute 'width_bits'"):
        validate(Component("buf", "sram", 1, {"capacity_bytes": 1024, "width_bits": 0}))
    with pytest.raises(ValueError, match=r"attribute 'entries'"):
        validate(Component("t", "lut", 1, {"entries": 1, "entry_bits": 8}))


def test_unknown_dram_tech():
    with pytest.raises(ValueError, match=r"component 'hbm' \(class 'dram'\): attribute 'tech'.*allowed: ddr4, .*hbm3e"):
        validate(Component("hbm", "dram", 1, {"tech": "hbm4"}))


def test_unknown_action_names_allowed_actions():
    c = Component("buf", "sram", 1, {"capacity_bytes": 1024, "width_bits": 64})
    with pytest.raises(ValueError, match=r"component 'buf' \(class 'sram'\): unknown action 'rd'; allowed: read, write"):
        evaluate([c], {("buf", "rd"): 1}, 0.0)


def test_fixed_needs_source_and_static_has_no_actions():
    with pytest.raises(ValueError, match=r"component 'asic' \(class 'fixed'\): attribute 'source'"):
        validate(Component("asic", "fixed", 1, {"energy_pj": {"op": 1.0}, "area_mm2": 1.0, "leakage_w": 0.0, "source": ""}))
    s = Component("board", "static", 1, {"power_w": 1.0, "source": "x"})
    with pytest.raises(ValueError, match=r"component 'board' \(class 'static'\): unknown action 'op'; allowed: \(none\)"):
        evaluate([s], {("board", "op"): 1}, 0.0)


def test_unknown_component_in_counts_duplicate_names_negative_values():
    m = Component("m", "mac", 1, {"format": "int8"})
    with pytest.raises(ValueError, match=r"unknown component 'x'.*known: m"):
        evaluate([m], {("x", "mac"): 1}, 0.0)
    with pytest.raises(ValueError, match=r"component 'm': duplicate"):
        area([m, m])
    with pytest.raises(ValueError, match=r"component 'm' \(class 'mac'\): action 'mac' count"):
        evaluate([m], {("m", "mac"): -1}, 0.0)
    with pytest.raises(ValueError, match="latency_s"):
        evaluate([m], {}, -1.0)
    with pytest.raises(ValueError, match="count must be an int"):
        Component("m", "mac", -2, {"format": "int8"})
