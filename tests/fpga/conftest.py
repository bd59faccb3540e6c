"""Helpers for the nm_sparse_fpga tests."""

from __future__ import annotations

import copy
from typing import Any

import pytest

VU9P = {"name": "xcvu9p", "dsp": 6840, "lut": 1182240, "ff": 2364480, "bram36": 2160,
        "uram": 960, "static_power_w": 3.5}


def make_config(rows: int = 8, cols: int = 8, macs_per_pe: int = 1, mac_format: str = "fp16",
                patterns: tuple[str, ...] = ("1:4", "2:4", "1:8", "2:8", "4:8"),
                sparse: bool = True, buffer_kib: float = 256.0, act_width: int = 4096,
                bandwidth_gbps: float = 1e6, clock_mhz: float = 100.0,
                loop_order: str = "spatial", vector_lanes: int = 0, **unit: Any) -> dict:
    """A small nm_sparse_fpga config tree; three equal buffers, ample bandwidth."""
    u = {
        "kind": "nm_sparse_fpga", "name": "fpga", "part": copy.deepcopy(VU9P),
        "clock_mhz": clock_mhz, "rows": rows, "cols": cols, "macs_per_pe": macs_per_pe,
        "mac_format": mac_format, "sparse": {"enabled": sparse, "patterns": list(patterns)} if sparse
        else {"enabled": False},     # a dense-only design names no patterns (else a warning)
        "act_buffer": {"kib": buffer_kib, "width_bits": act_width, "memory": "uram"},
        "weight_buffer": {"kib": buffer_kib, "width_bits": 512, "memory": "uram"},
        "out_buffer": {"kib": buffer_kib, "width_bits": 512, "memory": "bram"},
        "vector_lanes": vector_lanes, "loop_order": loop_order,
        "memory": {"bandwidth_gbps": bandwidth_gbps, "tech": "ddr4", "efficiency": 1.0},
    }
    u.update(unit)
    return {"name": "test_fpga", "technology": {"node_nm": 16}, "units": [u]}


@pytest.fixture
def fpga_config():
    """The config builder ``make_config(rows=..., cols=..., ...) -> dict``."""
    return make_config
