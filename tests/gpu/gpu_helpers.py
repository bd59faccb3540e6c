"""Helpers shared by the GPU-family tests."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from archsim import arch
from archsim.arch.gpu import TensorCoreGpu

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
