"""Plausibility bounds on spec fields (arch/spec.py) and the YAML number/nesting rules."""

from __future__ import annotations

import dataclasses
import typing
import warnings

import pytest

import archsim
import archsim.arch.registry  # noqa: F401  (registers the families)
from archsim.arch.accelerator import TechnologySpec, load_data
from archsim.arch.base import UNIT_KINDS
from archsim.arch.spec import PlausibilityWarning, field_bounds, spec_fields
from archsim.workloads.errors import ConfigError
from archsim.workloads.formats import NumberFormat
from archsim.workloads.yamlio import MAX_DEPTH, parse_yaml_text
from tests.conftest import spatial_config


def _numeric_fields() -> list[tuple[str, dataclasses.Field, type]]:
    out, seen = [], set()

    def walk(cls: type, prefix: str) -> None:
        if cls in seen:
            return
        seen.add(cls)
        for f, tp in spec_fields(cls):
            t = ([a for a in typing.get_args(tp) if a is not type(None)] or [tp])[0]
            if t is NumberFormat:
                continue
            if dataclasses.is_dataclass(t):
                walk(t, f"{prefix}{f.name}.")
            elif typing.get_origin(t) is tuple and dataclasses.is_dataclass(typing.get_args(t)[0]):
                walk(typing.get_args(t)[0], f"{prefix}{f.name}[].")
            elif t in (int, float):
                out.append((f"{cls.__name__}.{prefix}{f.name}", f, t))

    for kind in sorted(UNIT_KINDS):
        walk(UNIT_KINDS[kind].Spec, "")
    walk(TechnologySpec, "")
    return out


def test_every_numeric_field_has_a_hard_range():
    fields = _numeric_fields()
    assert len(fields) > 50
    open_ = [name for name, f, t in fields if not f.metadata.get("choices")
             and None in field_bounds(f, t)[:2]]
    assert open_ == []


def test_reference_designs_are_within_real_hardware_ranges():
    for p in archsim.list_configs():
        with warnings.catch_warnings():
            warnings.simplefilter("error", PlausibilityWarning)
            archsim.load(p)           # a warning would raise here


def test_clock_bounds_closed_form():
    from archsim.arch.spatial import SpatialArraySpec

    f = next(f for f, _ in spec_fields(SpatialArraySpec) if f.name == "clock_mhz")
    # declared: > 0 MHz; unit MHz: hard 1e-3 .. 1e6 MHz, typical 10 .. 6000 MHz
    assert field_bounds(f, float) == (1e-3, 1e6, 10.0, 6000.0)


def _load(**unit):
    cfg = spatial_config(bandwidth_gbps=100.0)
    cfg["units"][0].update(unit)
    return load_data(cfg, "t.yaml")


def test_counts_error_above_2_31_and_warn_above_2_24():
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlausibilityWarning)
        _load(rows=2**24)                                 # the typical maximum: silent
    with pytest.warns(PlausibilityWarning, match=r"t.yaml units\[0\].rows: 1.67772e\+07"):
        _load(rows=2**24 + 1)
    with pytest.warns(PlausibilityWarning):
        _load(rows=2**31)                                 # the hard maximum: still loads
    with pytest.raises(ConfigError, match=r"units\[0\].rows: 2.14748e\+09 is outside any "
                       r"hardware; expected 1 to 2,147,483,648"):
        _load(rows=2**31 + 1)


def test_zero_stays_the_off_value_where_declared():
    acc = _load(memory={"bandwidth_gbps": 100.0, "tech": "ddr4", "capacity_gb": 0})
    assert acc.units[0].memory_capacity_bytes() == 0.0
    with pytest.raises(ConfigError, match="1e-300 GB is outside any hardware"):
        _load(memory={"bandwidth_gbps": 100.0, "tech": "ddr4", "capacity_gb": 1e-300})


@pytest.mark.parametrize("text, value", [
    ("1e3", 1000.0), ("4.5e2", 450.0), ("-2E-3", -0.002), ("1.5", 1.5), (".5", 0.5),
    ("1_000.5", 1000.5), ("7", 7), ("1e", "1e"), ("e3", "e3"), ("2**70", "2**70"),
])
def test_yaml_numbers(text, value):
    data, problems = parse_yaml_text(f"a: {text}")
    assert problems == [] and data["a"] == value and type(data["a"]) is type(value)


def test_nesting_limit_is_exact():
    ok, problems = parse_yaml_text("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert problems == []
    _, problems = parse_yaml_text("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "f.yaml")
    assert len(problems) == 1 and problems[0].file == "f.yaml"
    assert "nested more than 100 levels deep" in problems[0].message
