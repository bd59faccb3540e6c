"""Golden predictions of every reference config (see archsim/golden.py).

A failure means a prediction moved: check the diff, and if the change is intended,
regenerate with `python3 -m pytest tests/reference --update-golden` and update
docs/validation.md in the same commit.
"""

from __future__ import annotations

import pytest
import yaml

import archsim
from archsim import golden

CONFIGS = [c for c in archsim.list_configs() if archsim.load(c).units[0].kind
           in golden.reference_workloads()]


@pytest.mark.parametrize("cfg", CONFIGS, ids=[f"{c.parent.name}/{c.stem}" for c in CONFIGS])
def test_golden(cfg, request):
    path = golden.golden_path(cfg)
    actual = golden.predict(cfg)
    if request.config.getoption("--update-golden"):
        golden.write(cfg, actual)
        pytest.skip("golden file rewritten")
    assert path.exists(), f"no golden file {path}; run pytest tests/reference --update-golden"
    expected = yaml.safe_load(path.read_text())
    problems = golden.diff(expected, actual)
    assert not problems, "predictions moved:\n  " + "\n  ".join(problems)


def test_every_reference_config_is_covered():
    """Every reference config has golden workloads (its kind is in REFERENCE_WORKLOADS)."""
    kinds = {archsim.load(c).units[0].kind for c in archsim.list_configs()}
    assert kinds <= set(golden.reference_workloads()), kinds - set(golden.reference_workloads())


def test_diff_names_key_paths():
    assert golden.diff({"a": {"x": 1.0}}, {"a": {"x": 1.1}}) == [
        "a.x: golden 1, now 1.1 (+10.000%)"]
    assert golden.diff({"a": {"x": 1.0}}, {"a": {}}) == ["a.x: missing in the new prediction"]
