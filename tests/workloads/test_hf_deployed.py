"""The model families deployed today, imported from their published ``config.json``
(``tests/data/hf_deployed``, provenance in its SOURCE.md): parameter counts from the graph
against the published totals and active counts, gpt-oss's per-block attention windows and
MXFP4 experts, q/k norms, the zoo names, the one ``--model`` resolver, and the errors."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from archsim.cli import main
from archsim.parallel import shape_of
from archsim.serve.cost import model_shape
from archsim.workloads import zoo
from archsim.workloads.errors import WorkloadError
from archsim.workloads.hf import config_path, from_hf_config, shape_from_hf_config
from archsim.workloads.models.common import op_parameters
from archsim.workloads.models.transformer import build_transformer
from archsim.workloads.ops import Attention, Embedding, Gemm, Norm, Softmax

HF = Path(__file__).resolve().parent.parent / "data" / "hf_deployed"


def _cfg(name: str) -> Path:
    return HF / name / "config.json"


def _active(name: str | Path) -> int:
    """Weights one token reads: the weight elements of a one-token decode graph (the
    experts its router reaches, one row of the embedding table, the LM head), from the
    graph's ops (biases and sinks, under 0.1 %, are not op shapes)."""
    w = from_hf_config(_cfg(name) if isinstance(name, str) else name, phase="decode",
                       batch=1, context=64)
    return sum(op.tokens * op.dim if isinstance(op, Embedding) else op_parameters(op)
               for op in w.ops())


# (config, published total, published active, tolerance on the active count, source).
# Tolerance: 2 %, or half a unit of the published figure's last digit when that is more
# ("22B" is 21.5-22.5B: 2.3 %; "10B" is 9.5-10.5B: 5 %).
PUBLISHED = [
    ("Qwen3-235B-A22B-FP8", 235e9, 22e9, 0.5 / 22, "HF Qwen/Qwen3-235B-A22B: 235B / 22B"),
    ("DeepSeek-V3", 671e9, 37e9, 0.02, "DeepSeek-V3 report: 671B / 37B (MTP excluded)"),
    ("DeepSeek-R1", 671e9, 37e9, 0.02, "DeepSeek-R1 report: 671B / 37B, V3's architecture"),
    ("gpt-oss-120b", 116.83e9, 5.13e9, 0.02, "OpenAI gpt-oss model card, Table 1"),
    ("gpt-oss-20b", 20.91e9, 3.61e9, 0.02, "OpenAI gpt-oss model card, Table 1"),
    ("MiniMax-M2.5", 230e9, 10e9, 0.05, "HF MiniMaxAI/MiniMax-M2: 230B / 10B"),
]


@pytest.mark.parametrize("name,total,active,tol,source", PUBLISHED)
def test_parameters_match_published(name, total, active, tol, source):
    w = from_hf_config(_cfg(name), seq=8)
    assert abs(w.parameters / total - 1) <= 0.02, (name, w.parameters, source)
    assert abs(_active(name) / active - 1) <= tol, (name, _active(name), source)


def test_glm45_total_matches_published():
    # zai-org/GLM-4.5 model card: 355B total (the multi-token-prediction layer not counted
    # here). Its "32B active" excludes the LM head; ours, with it, is 32.85B (docs)
    w = from_hf_config(_cfg("GLM-4.5"), seq=8)
    assert abs(w.parameters / 355e9 - 1) <= 0.02


def test_gpt_oss_checkpoint_bytes_match_the_model_card():
    # gpt-oss model card, Table 1: gpt-oss-120b checkpoint 60.8 GiB (MXFP4 experts: 4-bit
    # elements + one 8-bit scale per 32 = 4.25 bits; everything else bf16). Graph: every
    # op's weight bytes with whole embedding tables, 512 tokens so that every expert runs
    w = from_hf_config(_cfg("gpt-oss-120b"), seq=512)
    assert all(op.w_format.name == "mxfp4" for op in w.ops() if op.role.startswith("expert_")
               and isinstance(op, Gemm))
    assert all(op.batch == 128 for op in w.ops() if op.role == "expert_gate")
    total = sum(op.vocab * op.dim * op.w_format.bytes_per_element if isinstance(op, Embedding)
                else op.weight_bytes() for op in w.ops())
    assert abs(total / (60.8 * 2**30) - 1) <= 0.02


def test_gpt_oss_windows_follow_layer_types():
    cfg = json.loads(_cfg("gpt-oss-120b").read_text())
    expect = [128 if t == "sliding_attention" else 0 for t in cfg["layer_types"]]
    assert expect[:4] == [128, 0, 128, 0] and len(expect) == 36
    w = from_hf_config(_cfg("gpt-oss-120b"), seq=512, attention="fused")
    got = [op.window for op in w.ops() if isinstance(op, Attention)]
    assert got == expect
    # causal prefill of 512 tokens: a full block scores 512 x 513 / 2 pairs per head, a
    # window of 128 keys 128 x 129 / 2 + (512 - 128) x 128
    pairs = [op.pairs() for op in w.ops() if isinstance(op, Attention)][:2]
    assert pairs == [128 * 129 // 2 + 384 * 128, 512 * 513 // 2]
    # unfused decode over 1000 cached tokens: windowed blocks read only 128 keys
    d = from_hf_config(_cfg("gpt-oss-120b"), phase="decode", context=1000)
    assert [d.op(f"blocks.{i}.attn.qk").n for i in range(4)] == [128, 1001, 128, 1001]
    # without layer_types the family default is the same alternation (GptOssConfig)
    assert shape_from_hf_config(_cfg("gpt-oss-20b")).windows == tuple(expect[:24])


def test_gpt_oss_attention_block_parameters_closed_form():
    # q 2880 x 64 x 64, k and v 2880 x 8 x 64 each, with biases; o 4096 x 2880 + bias;
    # one sink logit per head (64)
    qkv = 2880 * 80 * 64 + 80 * 64
    o = 64 * 64 * 2880 + 2880
    w = from_hf_config(_cfg("gpt-oss-120b"), seq=8)
    assert w.op("blocks.0.attn.qkv").n == 80 * 64
    s = shape_from_hf_config(_cfg("gpt-oss-120b"))
    one = replace(s, layers=2, windows=s.windows[:2])
    two = build_transformer(one, "prefill", seq=8)
    zero = build_transformer(replace(one, layers=1, windows=(128,)), "prefill", seq=8)
    block = two.parameters - zero.parameters     # block 1: attention + norms + MoE
    moe = 128 * 2880 + 128 + 128 * (3 * 2880 * 2880 + 2 * 2880 + 2880)   # router, experts
    assert block == qkv + o + 64 + 2 * 2880 + moe
    assert w.parameters == zoo.build("gpt-oss-120b", seq=8).parameters


def test_qk_norm_ops():
    # Qwen3: per head, one RMSNorm over head_dim for every query and key head (rows
    # tokens x (64 + 4) heads), gains 2 x 128; MiniMax-M2 per_layer: one row of all
    # (48 + 8) x 128 query and key columns per token, one gain per column
    q = from_hf_config(_cfg("Qwen3-235B-A22B-FP8"), seq=16).op("blocks.0.attn.qk_norm")
    assert isinstance(q, Norm) and (q.rows, q.cols) == (16 * 68, 128)
    m = from_hf_config(_cfg("MiniMax-M2.5"), seq=16).op("blocks.0.attn.qk_norm")
    assert (m.rows, m.cols, op_parameters(m)) == (16, 56 * 128, 56 * 128)


def test_checkpoint_formats_from_quantization_config():
    qwen = from_hf_config(_cfg("Qwen3-235B-A22B-FP8"), seq=8)
    g = qwen.op("blocks.0.moe.gate")
    assert (g.a_format.name, g.w_format.name) == ("fp8_e4m3", "fp8_e4m3")
    assert qwen.op("lm_head").w_format.name == "fp16"          # not converted
    oss = from_hf_config(_cfg("gpt-oss-120b"), seq=8)
    assert oss.op("blocks.0.attn.qkv").w_format.name == "fp16"
    assert oss.op("blocks.0.moe.down").w_format.name == "mxfp4"


@pytest.mark.parametrize("zoo_name,config", [
    ("qwen3-235b-a22b", "Qwen3-235B-A22B-FP8"), ("gpt-oss-120b", "gpt-oss-120b"),
    ("gpt-oss-20b", "gpt-oss-20b"), ("minimax-m2", "MiniMax-M2.5"),
    ("deepseek-v3", "DeepSeek-V3")])
def test_zoo_names_are_the_shipped_configs(zoo_name, config):
    imported = shape_from_hf_config(_cfg(config))
    z = zoo.transformer_shape(zoo_name)
    fmt = {}
    if zoo_name == "qwen3-235b-a22b":   # the zoo is the bf16 release, the config the FP8 one
        fmt = {"a_format": "fp16", "w_format": "fp16"}
    assert replace(imported, name=z.name, default_seq=z.default_seq, **fmt) == z


def test_one_resolver_for_file_folder_and_zoo(tmp_path):
    folder = HF / "gpt-oss-20b"
    assert config_path(folder) == folder / "config.json"
    assert config_path(str(folder / "config.json")) == folder / "config.json"
    assert config_path("gpt-oss-20b") is None                  # the zoo name
    assert model_shape(str(folder)) == shape_of(str(folder)) == shape_from_hf_config(
        folder / "config.json")
    with pytest.raises(WorkloadError, match="--model.*holds no config.json"):
        config_path(tmp_path)


def test_run_accepts_a_model_folder(capsys):
    code = main(["run", "gpu/h100", "--model", str(HF / "gpt-oss-20b"), "--phase", "decode",
                 "--context", "256", "--json"])
    out = capsys.readouterr().out
    assert code == 0 and "gpt-oss-20b" in out


def _bad(tmp_path: Path, base: str, **changes: object) -> str:
    cfg = json.loads(_cfg(base).read_text())
    cfg.update(changes)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(WorkloadError) as e:
        shape_from_hf_config(p)
    return str(e.value)


def test_bad_keys_name_the_file_and_key(tmp_path):
    msg = _bad(tmp_path, "gpt-oss-120b", layer_types=["sliding_attention"] * 3)
    assert "config.json layer_types: expected a list of 36 entries" in msg
    msg = _bad(tmp_path, "MiniMax-M2.5", attn_type_list=[0, 1] * 31)
    assert "config.json attn_type_list: lightning (linear) attention" in msg
    msg = _bad(tmp_path, "Qwen3-235B-A22B-FP8", quantization_config={"quant_method": "awq"})
    assert "config.json quantization_config.quant_method: expected one of: fp8, mxfp4" in msg
    msg = _bad(tmp_path, "gpt-oss-120b", sliding_window=None)
    assert "config.json sliding_window: missing required key" in msg
    msg = _bad(tmp_path, "GLM-4.5", num_experts_per_tok=500)
    assert "config.json num_experts_per_tok: 500 experts per token exceed" in msg


@pytest.mark.parametrize("model_type", ["minimax", "minimax_m1"])
def test_lightning_attention_is_refused(tmp_path, model_type):
    msg = _bad(tmp_path, "MiniMax-M2.5", model_type=model_type)
    assert f"config.json model_type: '{model_type}' is not supported" in msg
    assert "lightning attention is not modelled" in msg


def test_sinks_add_a_softmax_column_and_their_parameters():
    w = from_hf_config(_cfg("gpt-oss-20b"), phase="decode", context=1000)
    sm = w.op("blocks.1.attn.softmax")
    assert isinstance(sm, Softmax) and sm.cols == 1001 + 1


def test_kimi_k2_is_deepseek_v3_with_its_sizes(tmp_path):
    # moonshotai/Kimi-K2-Instruct config.json: DeepSeek-V3's architecture (model_type
    # kimi_k2) with 64 heads, 384 routed experts, one dense first block, a 163,840-token
    # vocabulary. Kimi K2 report: "32 billion activated parameters and 1 trillion total"
    # (rounded: 0.95-1.05 T)
    cfg = json.loads(_cfg("DeepSeek-V3").read_text())
    cfg.update(model_type="kimi_k2", num_attention_heads=64, num_key_value_heads=64,
               n_routed_experts=384, first_k_dense_replace=1, vocab_size=163840,
               max_position_embeddings=131072)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    w = from_hf_config(tmp_path / "config.json", seq=8)
    assert abs(w.parameters / 1e12 - 1) <= 0.05
    assert abs(_active(tmp_path / "config.json") / 32e9 - 1) <= 0.02
