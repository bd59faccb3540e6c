"""Models whose blocks differ (gpt-oss: sliding-window and full attention; DeepSeek: dense
then MoE FFNs) are served and planned as one block per kind x its count
(``workloads.parallel.block_kinds``), and every expert's weights are resident."""

from __future__ import annotations

from dataclasses import replace

import pytest

import archsim
from archsim.api import device_build
from archsim.arch.cluster import single_node
from archsim.parallel import evaluate_plan
from archsim.serve import PoolSpec, ServeSetup, serve
from archsim.serve.cost import Batch, IterationCost, _window_keys, model_shape
from archsim.serve.requests import Request
from archsim.workloads.errors import ConfigError
from archsim.workloads.parallel import ParallelPlan, block_graphs, block_kinds
from tests.serve.test_serve_plans import _small_deepseek

GPT_OSS_20B = "tests/data/hf_deployed/gpt-oss-20b"
GPT_OSS_120B = "tests/data/hf_deployed/gpt-oss-120b"
QWEN3_235B = "tests/data/hf_deployed/Qwen3-235B-A22B-FP8"


def test_block_kinds_count_every_block_once(tmp_path):
    # gpt-oss-20b: 24 blocks alternating sliding window 128 / full, every one MoE
    s = model_shape(GPT_OSS_20B)
    kinds = block_kinds(s)
    assert [(k.key, k.count, k.window) for k in kinds] == [("moe.w128", 12, 128),
                                                           ("moe", 12, 0)]
    assert all(k.shape.layers == 1 and k.shape.windows == (k.window,) for k in kinds)
    # a pipeline stage of blocks 3..8: blocks 4, 6, 8 slide (even), 3, 5, 7 do not
    assert [(k.key, k.count) for k in block_kinds(s, 3, 9)] == [("moe", 3), ("moe.w128", 3)]
    # DeepSeek-like: 1 dense block, then 3 MoE
    d = model_shape(_small_deepseek(tmp_path))
    assert [(k.key, k.count, k.moe) for k in block_kinds(d)] == [("dense", 1, False),
                                                                 ("moe", 3, True)]
    # one kind: the model's one block as it always was
    one = model_shape("llama3-8b")
    (k,) = block_kinds(one)
    assert (k.key, k.count, k.shape) == ("dense", 32, replace(one, layers=1))


def test_window_keys_closed_form():
    # sum_{i=1..n} min(i, w), against the plain sum
    for n in (0, 1, 5, 128, 129, 1000):
        assert _window_keys(n, 128) == sum(min(i, 128) for i in range(1, n + 1))


def test_gpt_oss_one_request_is_the_whole_model():
    # serving's per-iteration cost of one request = archsim.evaluate of the whole model
    # (24 blocks, both attention kinds): prefill on a grid length, decodes on grid contexts
    # below, at and above the 128-key window. Prefill agrees to 3e-4 (the groups evaluated
    # apart: -1.3e-4 with the residual adds as kernels of their own, -2.8e-4 with them fused
    # into the norms; not traced further), decodes to float rounding.
    h100 = archsim.load("gpu/h100")
    s = model_shape(GPT_OSS_20B)
    build = device_build(h100)
    cost = IterationCost(h100, GPT_OSS_20B, 1)
    p = 256
    whole = archsim.evaluate(h100, build.graph(s, "prefill", 1, p, None, 1)).latency_s
    assert cost.cost(Batch([(p, 0)], 0, 0, 1)).time_s == pytest.approx(whole, rel=3e-4)
    for ctx in (64, 128, 1024):
        whole = archsim.evaluate(h100, build.graph(s, "decode", 1, None, ctx, 1)).latency_s
        assert cost.cost(Batch([], 1, ctx + 1, 1)).time_s == pytest.approx(whole, rel=1e-12)
    # a sliding block reads its 128 keys whatever the context; a full block reads them all
    slide, full = "", "moe"
    assert cost.decode_attention(1, 4097, slide).time_s == pytest.approx(
        cost.decode_attention(1, 1025, slide).time_s, rel=1e-12)
    assert cost.decode_attention(1, 4097, full).time_s > cost.decode_attention(1, 1025,
                                                                               full).time_s


@pytest.mark.parametrize("phase,seq,ctx", [("prefill", 256, None), ("decode", None, 1024)])
def test_degree_one_plan_of_mixed_blocks_is_the_whole_model(tmp_path, phase, seq, ctx):
    h100 = archsim.load("gpu/h100")
    build = device_build(h100)
    for model in (GPT_OSS_20B, _small_deepseek(tmp_path)):
        s = model_shape(model)
        r = evaluate_plan(single_node(h100, 1), s, ParallelPlan(), phase, batch=1, seq=seq,
                          context=ctx, build=build)
        whole = archsim.evaluate(h100, build.graph(s, phase, 1, seq, ctx, 1)).latency_s
        assert r.step_s == pytest.approx(whole, rel=1e-12)
    graphs = block_graphs(model_shape(GPT_OSS_20B), ParallelPlan(), "decode", 1, None, 64,
                          build)
    assert sorted(graphs) == ["base", "moe", "moe.w128"]


def test_every_expert_is_resident():
    h100 = archsim.load("gpu/h100")
    # gpt-oss-120b: the checkpoint (MXFP4 experts, bf16 rest) is 60.8 GiB (model card)
    w = IterationCost(h100, GPT_OSS_120B, 1).weight_bytes()
    assert w == pytest.approx(60.8 * 2**30, rel=0.02)
    # Qwen3-235B-A22B in bf16: 235.1e9 parameters x 2 bytes, sharded over TP 8
    bf16 = device_build(h100, a_format="bf16", w_format="bf16")
    w8 = IterationCost(h100, QWEN3_235B, 8, build=bf16).weight_bytes()
    assert w8 == pytest.approx(470e9 / 8, rel=0.02)
    # expert parallelism: each of the 8 devices holds 128 / 8 whole experts, the same bytes
    assert IterationCost(h100, QWEN3_235B, 8, build=bf16, ep=8).weight_bytes() == \
        pytest.approx(w8, rel=0.01)
    # the fp8 checkpoint (236 GB) does not fit two 80 GB H100s, whatever a batch routes to
    with pytest.raises(ConfigError, match="weights per device"):
        serve(h100, ServeSetup(QWEN3_235B, PoolSpec(1, 2)), [Request(0, 0.0, 16, 2)])


def test_plan_memory_of_gpt_oss_counts_mxfp4_experts_and_windowed_kv():
    # tp 2 x ep 2, decode of 8 sequences over 4096 cached tokens: weights are the 60.8 GiB
    # checkpoint (MXFP4 experts) halved; KV: 2 bytes x K and V of 8 / 2 heads x 64 for
    # 18 full blocks over 4097 tokens and 18 sliding blocks over their last 128
    h100 = archsim.load("gpu/h100")
    r = evaluate_plan(single_node(h100, 2), model_shape(GPT_OSS_120B), ParallelPlan(tp=2, ep=2),
                      "decode", batch=8, context=4096, build=device_build(h100))
    assert r.memory_bytes["weights"] == pytest.approx(60.8 * 2**30 / 2, rel=0.02)
    per_tok = 2 * 2 * (8 // 2) * 64
    assert r.memory_bytes["kv_cache"] == pytest.approx(8 * per_tok * (18 * 4097 + 18 * 128),
                                                       rel=1e-12)
