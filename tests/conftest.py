"""Shared test helpers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SHARED = ROOT.parent / "shared"

# CI (CI=true) replays the same hypothesis examples on every run, so a landing is never
# decided by a random draw; local runs keep exploring new examples (the default profile).
if os.environ.get("CI"):
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, deadline=None)
    settings.load_profile("ci")


def spatial_config(rows: int = 4, cols: int = 4, bandwidth_gbps: float = 1e9,
                   glb_kib: float = 1024.0, dataflow: str = "ws", clock_mhz: float = 100.0,
                   mac_format: str = "fp16") -> dict:
    """A small spatial-array config tree (dict) for tests."""
    return {
        "name": "test_array",
        "technology": {"node_nm": 45},
        "units": [{
            "kind": "spatial_array", "name": "arr", "rows": rows, "cols": cols,
            "clock_mhz": clock_mhz, "dataflow": dataflow, "mac_format": mac_format,
            "global_buffer_kib": glb_kib,
            "memory": {"bandwidth_gbps": bandwidth_gbps, "tech": "ddr4", "efficiency": 1.0},
        }],
    }


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.exists():
        pytest.skip("../shared/ not present")
    return SHARED


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/reference/golden/*.yaml from today's predictions")
