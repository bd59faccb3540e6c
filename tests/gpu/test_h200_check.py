"""The H200 as a check of mechanisms carried from the H100 (carried, not fitted).

``configs/gpu/h200.yaml`` is the H100's fitted model (every constant carried: same die) with
the H200's published spec (HBM3e capacity and bandwidth, L2; ``docs/gpu.md`` "H200"). The rows of
``tests/data/silicon/h200_2026-11-26*.jsonl`` were measured with the project's harness on a
lent H200 and are never fitted (``tests/data/silicon/SOURCE.md``): this test scores every class
they hold (``archsim.device_check.check_classes``) and asserts, per class, either the issue's
tolerance (GEMM classes <= 10 %, others <= 15 % median |error|) or, where today's model does
not meet it, the measured gap as a ceiling (each gap explained in docs/gpu.md "The H200
check"). The int8 rows are left out: ``torch._int_mm`` took a path without integer tensor
cores on the lent machines (SOURCE.md), a software artefact, not the chip.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from archsim import silicon
from archsim.api import load
from archsim.device_check import check_classes

DATA = Path(__file__).resolve().parents[1] / "data" / "silicon"
ROWS = [r for name in ("h200_2026-11-26.jsonl", "h200_2026-11-26_shapes.jsonl")
        for r in silicon.load_rows(DATA / name)]

#: class -> (ceiling on the median |error|, why the ceiling is not the issue's tolerance)
CEILING = {
    "gemm_bf16": (0.10, ""),
    "gemm_fp16": (0.10, ""),
    "gemm_fp8": (0.10, ""),
    "gemm_small_m": (0.10, ""),
    "bmm": (0.15, ""),
    "attn_prefill": (0.15, ""),
    "attn_decode": (0.50, "gap: the harness passes K and V as one tensor; V re-reads hit L2"),
    "vector": (0.15, ""),
    "copy": (0.15, ""),
    "protocol": (0.15, ""),
    "launch": (0.40, "gap: a one-element kernel has less fixed work than launch_b2b_us"),
    "train_kernels": (0.15, ""),
    "train_wall": (0.15, ""),
    "energy": (0.15, ""),
    "clock": (0.15, ""),
}


@cache
def _scores(overrides: tuple[str, ...] = ()) -> dict[str, silicon.ClassScore]:
    return check_classes(load("gpu/h200", list(overrides)), ROWS)


def test_rows_are_the_h200s_and_every_class_is_scored() -> None:
    assert ROWS[0].data["device"] == "NVIDIA H200"
    assert set(CEILING) <= set(_scores())


@pytest.mark.parametrize("cls", sorted(CEILING))
def test_class_within_tolerance_or_its_stated_gap(cls: str) -> None:
    ceiling, _ = CEILING[cls]
    s = _scores()[cls]
    assert s.median_abs <= ceiling, (cls, s.median_abs, s.errors)


def test_carried_scale_meets_the_gemm_and_energy_tolerance() -> None:
    """The per-action energy scale is the H100 card's (fitted on H100 energy rows): with it
    the H200 GEMM classes meet the 10 % tolerance and the board energy per call is within 5 %
    (a check: nothing is fitted on the H200 rows). With the 3.97 once fitted to gpus.yaml's
    ten-call burst figure the GEMM classes were ~15 % fast and the energy ~13 % low."""
    assert (load("gpu/h200").units[0].spec.power.core_energy_scale
            == load("gpu/h100").units[0].spec.power.core_energy_scale)
    for cls in ("gemm_bf16", "gemm_fp16", "gemm_fp8", "gemm_small_m"):
        assert _scores()[cls].median_abs <= 0.10, (cls, _scores()[cls].median_abs)
    assert _scores()["energy"].median_abs <= 0.05
    burst = _scores(("units[0].power.core_energy_scale=3.97",))
    assert burst["gemm_bf16"].median_abs > 0.10 and burst["energy"].median_abs > 0.10
