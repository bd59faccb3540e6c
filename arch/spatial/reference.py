"""Spatial arrays: golden reference workloads and validation (``arch.reference``)."""

from __future__ import annotations

from archsim.arch.reference import (
    Comparison,
    EvaluationAPI,
    Gap,
    checks,
    reference_workloads,
)

reference_workloads("spatial_array", {
    "gemm_1024": {"gemm": [1024, 1024, 1024], "a_format": "int8"},
    "resnet18": {"model": "resnet18", "a_format": "int8", "w_format": "int8"},
    "gpt2_small_prefill": {"model": "gpt2-small", "phase": "prefill", "seq": 128, "a_format": "int8", "w_format": "int8"},
})


@checks("spatial")
def _spatial(api: EvaluationAPI) -> tuple[list[Comparison], list[Gap]]:
    gaps = [Gap("spatial", "tpu_like, eyeriss_like, nvdla_like, shidiannao_like, "
                "hetero/nvdla_shidiannao",
                "shared/reference has no figure for these designs; their cycle model is "
                "checked against closed-form SCALE-Sim fold counts in tests/arch and against "
                "SCALE-Sim's own per-layer cycles in tests/cycle; the Timeloop Eyeriss "
                "cross-check is in the 'mapper' family")]
    return [], gaps
