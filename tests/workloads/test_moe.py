"""Mixture-of-experts and multi-head latent attention: parameter counts against published
figures, active parameters by closed form, expert sharding, and the Hugging Face importer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archsim.workloads import zoo
from archsim.workloads.errors import WorkloadError
from archsim.workloads.hf import from_hf_config
from archsim.workloads.ops import Gemm

HF = Path(__file__).resolve().parent.parent / "data" / "hf_moe"


def _active(name: str) -> float:
    """Parameters one token uses: total minus the routed experts it does not reach
    (3 matrices d x moe_ffn per expert, experts - top_k idle, in every MoE block)."""
    s = zoo.transformer_shape(name)
    idle = (s.experts - s.top_k) * 3 * s.d_model * s.moe_ffn * (s.layers - s.dense_layers)
    return zoo.build(name).parameters - idle


@pytest.mark.parametrize("name,active,source", [
    ("mixtral-8x7b", 12.9e9, "Mistral AI 2023: 12.9B parameters per token"),
    ("deepseek-v3", 37e9, "DeepSeek-V3 report: 37B activated per token"),
    ("qwen3-30b-a3b", 3.3e9, "Qwen3-30B-A3B model card: 3.3B activated"),
])
def test_active_parameters_match_published(name, active, source):
    assert abs(_active(name) / active - 1) <= 0.03, (name, _active(name), source)


def test_mixtral_closed_form_parameter_count():
    # 32 x [attention 4096 x (4096 + 2 x 1024 + 4096) + router 4096 x 8
    #       + 8 experts x 3 x 4096 x 14336 + 2 norms x 4096] + 2 x 32000 x 4096 + 4096
    attn = 4096 * (4096 + 2 * 1024) + 4096 * 4096
    block = attn + 4096 * 8 + 8 * 3 * 4096 * 14336 + 2 * 4096
    assert zoo.build("mixtral-8x7b").parameters == 32 * block + 2 * 32000 * 4096 + 4096


def test_deepseek_mla_block_parameters():
    # MLA: q_a 7168x1536, q_norm 1536, q_b 1536x128x192, kv_a 7168x576, kv_norm 512,
    # kv_b 512x128x256, proj 128x128x7168 (DeepSeek-V2 Sec. 2.1)
    mla = (7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256
           + 128 * 128 * 7168)
    w = zoo.build("deepseek-v3", phase="prefill", seq=8)
    names = ("q_a", "q_norm", "q_b", "kv_a", "kv_norm", "kv_b", "proj")
    from archsim.workloads.models.common import op_parameters
    got = sum(op_parameters(w.op(f"blocks.0.attn.{n}")) for n in names)
    assert got == mla


def test_decode_absorbed_mla_keeps_parameters_and_caches_the_latent():
    pre = zoo.build("deepseek-v3", phase="prefill", seq=8)
    dec = zoo.build("deepseek-v3", phase="decode", batch=2, context=100)
    assert dec.parameters == pre.parameters
    qk = dec.op("blocks.0.attn.qk")
    # the cache operand: 101 keys of 512 + 64 latent dims, one shared "head" per sequence;
    # the 128 heads are packed into the rows (FlashMLA)
    assert (qk.m, qk.k, qk.n, qk.batch, qk.b_shared) == (128, 576, 101, 2, 1)


def test_expert_parallel_shards_experts_and_tokens():
    # 256 experts over ep 8: 32 per device; 512 tokens x top-8 routed to the group of 8
    # devices -> each device's 32 experts get 512 x 8 x 8 / 256 = 128 tokens
    w = zoo.build("deepseek-v3", phase="prefill", batch=1, seq=512, ep=8)
    g = w.op("blocks.3.moe.gate")
    assert isinstance(g, Gemm)
    assert (g.batch, g.m, g.n, g.k) == (32, 128, 2048, 7168)
    assert w.parameters == zoo.build("deepseek-v3", phase="prefill", seq=8).parameters


def test_decode_runs_only_the_reached_experts():
    # batch 4 x top-8 = 32 expert slots of 256: at most 32 experts run, one token each
    w = zoo.build("deepseek-v3", phase="decode", batch=4, context=64)
    g = w.op("blocks.3.moe.gate")
    assert (g.batch, g.m) == (32, 1)


def test_bad_ep_is_named():
    with pytest.raises(WorkloadError, match="ep.*must divide deepseek-v3's 256 experts"):
        zoo.build("deepseek-v3", ep=3)
    with pytest.raises(WorkloadError, match="ep.*llama3-70b has no experts"):
        zoo.build("llama3-70b", ep=2)


@pytest.mark.parametrize("name", ["mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "llama3-70b"])
def test_hf_import_matches_published_parameters(name):
    w = from_hf_config(HF / f"{name}.json", seq=16)
    pub = zoo.model_info(name).published_parameters
    assert abs(w.parameters / pub - 1) <= 0.02


def test_hf_refuses_interleaved_moe_layout(tmp_path):
    cfg = json.loads((HF / "qwen3-30b-a3b.json").read_text())
    cfg["decoder_sparse_step"] = 2
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(WorkloadError, match="config.json decoder_sparse_step"):
        from_hf_config(p)


def test_capacity_factor_pads_each_expert():
    # Mixtral, 1 x 100 tokens, top-2 of 8: 200 assignments, 25 per expert balanced; a capacity
    # factor of 1.25 pads each expert to ceil(1.25 x 25) = 32 tokens
    from dataclasses import replace

    from archsim.workloads.models.transformer import build_transformer
    s = replace(zoo.transformer_shape("mixtral-8x7b"), capacity_factor=1.25)
    w = build_transformer(s, "prefill", 1, 100)
    g = w.op("blocks.0.moe.gate")
    assert (g.batch, g.m) == (8, 32)
    assert zoo.build("mixtral-8x7b", seq=100).op("blocks.0.moe.gate").m == 25
