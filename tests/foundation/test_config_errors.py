"""Negative tests: every kind of bad config input names file, line and key path."""

from __future__ import annotations

import textwrap

import pytest

from archsim import arch
from archsim.workloads.errors import ConfigError

GOOD = """\
name: t
technology: {node_nm: 28}
units:
  - kind: spatial_array
    name: arr
    rows: 8
    cols: 8
    clock_mhz: 500
    global_buffer_kib: 64
    memory: {bandwidth_gbps: 25.6, tech: ddr4}
"""


def load_text(tmp_path, text, overrides=()):
    p = tmp_path / "design.yaml"
    p.write_text(textwrap.dedent(text))
    return arch.load(p, overrides)


def problems(tmp_path, text, overrides=()):
    with pytest.raises(ConfigError) as ei:
        load_text(tmp_path, text, overrides)
    return ei.value.problems


def test_good_config_loads(tmp_path):
    acc = load_text(tmp_path, GOOD)
    assert acc.units[0].spec.rows == 8 and acc.technology.node_nm == 28


def test_duplicate_key(tmp_path):
    (p,) = problems(tmp_path, GOOD.replace("    cols: 8\n", "    cols: 8\n    cols: 9\n"))
    assert p.line == 8 and "duplicate key 'cols'" in p.message and p.file.endswith("design.yaml")


def test_unknown_key_lists_allowed(tmp_path):
    (p,) = problems(tmp_path, GOOD.replace("    cols: 8\n", "    cols: 8\n    colls: 9\n"))
    assert p.path == "units[0].colls" and p.line == 8
    assert "allowed keys:" in p.message and "cols" in p.message


def test_wrong_type(tmp_path):
    (p,) = problems(tmp_path, GOOD.replace("rows: 8", "rows: 1k"))
    assert (p.path, p.line) == ("units[0].rows", 6) and "expected int, got '1k'" in p.message


def test_out_of_range(tmp_path):
    (p,) = problems(tmp_path, GOOD.replace("rows: 8", "rows: 0"))
    assert p.path == "units[0].rows" and ">= 1" in p.message


def test_bad_choice_in_nested_mapping(tmp_path):
    (p,) = problems(tmp_path, GOOD.replace("tech: ddr4", "tech: ddr9"))
    assert p.path == "units[0].memory.tech" and p.line == 10 and "ddr4" in p.message


def test_missing_required(tmp_path):
    (p,) = problems(tmp_path, GOOD.replace("    clock_mhz: 500\n", ""))
    assert p.path == "units[0].clock_mhz" and "missing required key" in p.message


def test_unknown_kind(tmp_path):
    (p,) = problems(tmp_path, GOOD.replace("kind: spatial_array", "kind: warp_drive"))
    assert p.path == "units[0].kind" and "spatial_array" in p.message


def test_bad_format_name(tmp_path):
    (p,) = problems(tmp_path, GOOD.replace("    cols: 8\n", "    cols: 8\n    mac_format: int9\n"))
    assert p.path == "units[0].mac_format" and "unknown number format 'int9'" in p.message


def test_cross_field_rule(tmp_path):
    (p,) = problems(tmp_path, GOOD.replace("tech: ddr4}", "tech: ddr4, model: dram}"))
    assert p.path == "units[0].memory.preset" and "needs a preset" in p.message


def test_all_problems_reported_together(tmp_path):
    bad = GOOD.replace("rows: 8", "rows: x").replace("cols: 8", "cols: -1").replace(
        "tech: ddr4", "tech: nope")
    ps = problems(tmp_path, bad)
    assert {p.path for p in ps} == {"units[0].rows", "units[0].cols", "units[0].memory.tech"}


def test_yaml_syntax_error_has_line(tmp_path):
    (p,) = problems(tmp_path, GOOD.replace("rows: 8", "rows: [8"))
    assert "invalid YAML" in p.message and p.line is not None


def test_missing_file():
    with pytest.raises(ConfigError) as ei:
        arch.load("/nonexistent/design.yaml")
    assert "cannot read file" in str(ei.value)


def test_override_applies_and_validates(tmp_path):
    acc = load_text(tmp_path, GOOD, ["units[0].rows=16", "units[0].memory.bandwidth_gbps=51.2"])
    assert acc.units[0].spec.rows == 16
    assert acc.units[0].spec.memory.bandwidth_gbps == 51.2
    (p,) = problems(tmp_path, GOOD, ["units[0].rows=abc"])
    assert p.file == "--set" and p.path == "units[0].rows" and "expected int" in p.message
    (p,) = problems(tmp_path, GOOD, ["units[0].rowz=3"])
    assert p.file == "--set" and "unknown key 'rowz'" in p.message
    (p,) = problems(tmp_path, GOOD, ["units[3].rows=3"])
    assert p.file == "--set" and "units[3].rows" in p.path
    with pytest.raises(ConfigError):
        load_text(tmp_path, GOOD, ["no_equals_sign"])


def test_error_render_names_file_line_key(tmp_path):
    with pytest.raises(ConfigError) as ei:
        load_text(tmp_path, GOOD.replace("rows: 8", "rows: 1k"))
    text = str(ei.value)
    assert "design.yaml:6 units[0].rows: expected int, got '1k'" in text


def test_config_reference_is_current():
    """docs/configs.md is generated from the spec dataclasses; regenerate with
    `python3 -m archsim.docgen` after changing a spec."""
    from archsim.docgen import render
    from tests.conftest import ROOT

    assert (ROOT / "docs" / "configs.md").read_text() == render()
