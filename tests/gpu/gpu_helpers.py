"""Helpers shared by the GPU-family tests."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from archsim import arch, silicon
from archsim.arch.gpu import TensorCoreGpu
from archsim.kernel_tables import shape_half

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "gpu"
SHARED_REF = ROOT.parent / "shared" / "reference"
GPUS = ("a100", "h100", "h200", "t4", "b200", "gb200")


@cache
def gpu(name: str) -> TensorCoreGpu:
    """The ``tensor_core_gpu`` unit of ``configs/gpu/<name>.yaml``."""
    unit = arch.load(CONFIGS / f"{name}.yaml").units[0]
    assert isinstance(unit, TensorCoreGpu)
    return unit


def assert_class_medians(unit: object, rows: list, limits: dict[str, dict[str, float]],
                         min_rows: int) -> None:
    """Score ``rows`` (``silicon.Row``) on ``unit`` per half (``kernel_tables.shape_half``)
    and assert one class per half, at least ``min_rows`` rows in it and its median |error|
    within ``limits[half][class]``."""
    for half, by_class in limits.items():
        scores = silicon.score(unit, [r for r in rows if shape_half(r.data) == half])
        assert len(scores) == 1
        for cls, sc in scores.items():
            assert len(sc.errors) > min_rows
            assert sc.median_abs <= by_class[cls], (half, cls, sc.median_abs)
