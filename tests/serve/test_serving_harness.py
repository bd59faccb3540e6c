"""Rows measured by another harness than aiconfigurator's run with that harness's settings
(``HARNESS``; docs/serving.md "Who measured which rows"). Expected values are read off the
harness's scripts (SemiAnalysis InferenceMAX ``benchmarks/70b_fp8_h100_slurm.sh``,
``full-sweep-tmpl.yml``), not off archsim's output.
"""

from __future__ import annotations

import pytest

from archsim.serve.requests import parse_length
from archsim.validation.serving_h100 import (
    HEADROOM_TOKENS,
    INFERENCEMAX_VLLM,
    Deployment,
    engine_for,
    engine_settings,
    harness,
    request_lengths,
)


def _row(model: str, isl: int, osl: int, conc: int, version: str = "") -> Deployment:
    return Deployment("vllm", model, "fp8", "agg", isl, osl, conc, 4, 1, 0, 0, 1.0, 1.0, 2,
                      version=version)


LLAMA70 = "meta-llama/Llama-3.1-70B"


def test_the_unversioned_vllm_llama70b_rows_are_inferencemax_runs():
    assert harness(_row(LLAMA70, 1024, 1024, 16)) is INFERENCEMAX_VLLM
    # the same model with a release, or another unversioned model: aiconfigurator's rules
    assert harness(_row(LLAMA70, 1024, 1024, 16, "0.12.0")) is None
    assert harness(_row("openai/gpt-oss-120b", 1024, 1024, 16)) is None


def test_inferencemax_engine_settings_are_its_scripts():
    # vllm serve --max-num-seqs=$CONC, max-num-batched-tokens: 8192, chunked prefill (V1)
    e = engine_settings(_row(LLAMA70, 8192, 1024, 32))
    assert (e.policy, e.token_budget, e.max_num_seqs) == ("sarathi", 8192, 32)
    # an aiconfigurator vLLM row of the same shape: max_batch_size + isl + 1500
    g = engine_settings(_row("Qwen/Qwen3-32B", 8192, 1024, 32, "0.12.0"))
    assert g.token_budget == 32 + 8192 + HEADROOM_TOKENS
    # async-scheduling: true -> the async engine; an unversioned aiconfigurator row stays sync
    assert engine_for(_row(LLAMA70, 1024, 1024, 4)) == "vllm"
    assert engine_for(_row("Qwen/Qwen3-32B", 1024, 1024, 4)) == "vllm-sync"
    assert INFERENCEMAX_VLLM.kv_format == "fp8_e4m3"      # kv-cache-dtype: fp8


@pytest.mark.parametrize("isl,osl,expect", [
    # --random-range-ratio 0.8: integers in [int(0.8 L), L]; 0.8 x 1024 = 819.2, 0.8 x 8192 =
    # 6553.6
    (1024, 1024, ("uniform:819:1024", "uniform:819:1024")),
    (1024, 8192, ("uniform:819:1024", "uniform:6553:8192")),
    (8192, 1024, ("uniform:6553:8192", "uniform:819:1024")),
])
def test_inferencemax_request_lengths(isl, osl, expect):
    got = request_lengths(_row(LLAMA70, isl, osl, 8))
    assert got == expect
    # mean length 0.9 L (+1/2 token): (819 + 1024) / 2 = 921.5
    assert parse_length(got[0], "--isl").mean == pytest.approx((int(0.8 * isl) + isl) / 2)


def test_other_rows_keep_fixed_lengths():
    assert request_lengths(_row("Qwen/Qwen3-32B", 1024, 128, 8, "0.12.0")) == ("1024", "128")
