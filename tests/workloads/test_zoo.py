"""Tests of the model zoo: identity (published sizes), structure, phases, formats, errors.

Reference figures carry their source next to them; tolerance 2 % unless stated. Parameters
are always counted from the built graph's op shapes (``Workload.parameters``), never typed in.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.workloads import zoo
from archsim.workloads.errors import WorkloadError
from archsim.workloads.formats import FORMATS
from archsim.workloads.graph import Workload
from archsim.workloads.ops import Conv2d, Elementwise, Gemm

TOL = 0.02

NAMES = ("gpt2-small gpt2-medium gpt2-large gpt2-xl gpt3-small gpt3-medium gpt3-large gpt3-xl "
         "gpt3-175b llama2-7b llama2-13b llama2-70b llama3-8b llama3-70b llama3-405b mixtral-8x7b "
         "qwen3-30b-a3b qwen3-235b-a22b gpt-oss-120b gpt-oss-20b minimax-m2 deepseek-v3 "
         "opt-175b bloom-176b "
         "bitnet-b1.58-3b bert-base vit-b16 resnet18 resnet50 vgg16 mobilenet-v2 "
         "mistral-7b yi-34b opt-13b").split()

# (model, published parameters, source)
PUBLISHED_PARAMS = [
    ("gpt2-small", 124e6, "released GPT-2 checkpoint, HF openai-community/gpt2"),
    ("gpt2-medium", 355e6, "released GPT-2 checkpoint, HF gpt2-medium"),
    ("gpt2-large", 774e6, "released GPT-2 checkpoint, HF gpt2-large"),
    ("gpt2-xl", 1558e6, "released GPT-2 checkpoint, HF gpt2-xl"),
    ("gpt3-small", 125e6, "Brown et al. 2020, Table 2.1"),
    ("gpt3-medium", 350e6, "Brown et al. 2020, Table 2.1"),
    ("gpt3-large", 760e6, "Brown et al. 2020, Table 2.1"),
    ("gpt3-xl", 1.3e9, "Brown et al. 2020, Table 2.1"),
    ("gpt3-175b", 175e9, "Brown et al. 2020, Table 2.1"),
    ("llama2-7b", 6.74e9, "HF meta-llama/Llama-2-7b-hf (Touvron et al. 2023)"),
    ("llama2-13b", 13.0e9, "HF meta-llama/Llama-2-13b-hf (Touvron et al. 2023)"),
    ("llama2-70b", 69.0e9, "HF meta-llama/Llama-2-70b-hf (Touvron et al. 2023)"),
    ("llama3-8b", 8.03e9, "HF meta-llama/Meta-Llama-3-8B"),
    ("llama3-70b", 70.55e9, "HF meta-llama/Meta-Llama-3-70B: 70,553,706,496"),
    ("llama3-405b", 405.85e9, "HF meta-llama/Llama-3.1-405B (Dubey et al. 2024: 405B)"),
    ("mixtral-8x7b", 46.7e9, "Mistral AI 2023, 'Mixtral of experts': 46.7B total"),
    ("qwen3-30b-a3b", 30.5e9, "HF Qwen/Qwen3-30B-A3B model card: 30.5B total"),
    ("qwen3-235b-a22b", 235e9, "HF Qwen/Qwen3-235B-A22B model card: 235B total"),
    ("gpt-oss-120b", 116.83e9, "OpenAI 2025, gpt-oss model card, Table 1: 116.83B total"),
    ("gpt-oss-20b", 20.91e9, "OpenAI 2025, gpt-oss model card, Table 1: 20.91B total"),
    ("minimax-m2", 230e9, "HF MiniMaxAI/MiniMax-M2 model card: 230B total"),
    ("deepseek-v3", 671e9, "DeepSeek-V3 technical report: 671B total (without MTP)"),
    ("opt-175b", 175e9, "Zhang et al. 2022, OPT, Table 1"),
    ("bloom-176b", 176_247_271_424, "bigscience/bloom model card"),
    ("bitnet-b1.58-3b", 3.32e9, "HF 1bitLLM/bitnet_b1_58-3B (Ma et al. 2024 reproduction)"),
    ("bert-base", 110e6, "Devlin et al. 2019, BERT, Section 3"),
    ("vit-b16", 86_567_656, "torchvision vit_b_16 IMAGENET1K_V1 num_params"),
    ("resnet18", 11_689_512, "torchvision resnet18 IMAGENET1K_V1 num_params"),
    ("resnet50", 25_557_032, "torchvision resnet50 IMAGENET1K_V1 num_params"),
    ("vgg16", 138_357_544, "torchvision vgg16 IMAGENET1K_V1 num_params"),
    ("mobilenet-v2", 3_504_872, "torchvision mobilenet_v2 IMAGENET1K_V1 num_params"),
    ("mistral-7b", 7.24e9, "HF mistralai/Mistral-7B-v0.1: 7,241,732,096"),
    ("yi-34b", 34.39e9, "HF 01-ai/Yi-34B: 34,388,917,248"),
    ("opt-13b", 12.85e9, "HF facebook/opt-13b: 12,853,473,280"),
]

# (model, published MACs per image at batch 1, source). torchvision's "GFLOPS" column counts
# multiply-accumulates (ResNet-50: 4.09 "GFLOPS" = 4.1 GMACs of He et al. 2016).
PUBLISHED_MACS = [
    ("vit-b16", 17.56e9, "torchvision vit_b_16 IMAGENET1K_V1 GFLOPS"),
    ("resnet18", 1.81e9, "torchvision resnet18 IMAGENET1K_V1 GFLOPS"),
    ("resnet50", 4.09e9, "torchvision resnet50 IMAGENET1K_V1 GFLOPS; He et al. 2016: 3.8e9"
                         " FLOPs for v1 (stride on 1x1)"),
    ("vgg16", 15.47e9, "torchvision vgg16 IMAGENET1K_V1 GFLOPS (Simonyan 2015: 15.5G)"),
    ("mobilenet-v2", 300e6, "Sandler et al. 2018, MobileNetV2, Table 4: 300M multiply-adds"),
]


def at(w: Workload, name: str) -> Any:
    """The op ``name`` of ``w``, untyped (tests read kind-specific fields)."""
    return w.op(name)


def rel(ours: float, ref: float) -> float:
    return abs(ours / ref - 1.0)


# --- names and info --------------------------------------------------------------------------

def test_model_names_exact() -> None:
    assert zoo.model_names() == NAMES


def test_published_table_covers_every_model() -> None:
    assert [n for n, _, _ in PUBLISHED_PARAMS] == NAMES


@pytest.mark.parametrize("name,published,source", PUBLISHED_PARAMS)
def test_parameters_match_published(name: str, published: float, source: str) -> None:
    counted = zoo.build(name).parameters
    assert rel(counted, published) <= TOL, f"{name}: {counted} vs {published} ({source})"
    info = zoo.model_info(name)
    assert info.parameters == counted
    assert info.published_parameters == pytest.approx(published)
    assert info.published_source


@pytest.mark.parametrize("name,published,source", PUBLISHED_MACS)
def test_macs_match_published(name: str, published: float, source: str) -> None:
    ours = zoo.build(name, batch=1).macs()
    assert rel(ours, published) <= TOL, f"{name}: {ours} vs {published} ({source})"
    assert zoo.model_info(name).published_macs == pytest.approx(published)


def test_gpt2_small_parameters_closed_form() -> None:
    # per block: ln1 2d + qkv 3d^2+3d + proj d^2+d + ln2 2d + fc 4d^2+4d + proj 4d^2+d
    #          = 12 d^2 + 13 d; tied head; wte V d; wpe 1024 d; ln_f 2d
    d, L, V = 768, 12, 50257
    expected = L * (12 * d * d + 13 * d) + V * d + 1024 * d + 2 * d
    assert expected == 124_439_808  # HF openai-community/gpt2 model.num_parameters()
    assert zoo.build("gpt2-small").parameters == expected


def test_llama2_7b_parameters_exact() -> None:
    # per block: q,k,v,o 4 d^2 + gate,up,down 3 d f + 2 rmsnorm d; embed + untied head 2 V d
    d, f, L, V = 4096, 11008, 32, 32000
    expected = L * (4 * d * d + 3 * d * f + 2 * d) + 2 * V * d + d
    assert expected == 6_738_415_616  # HF meta-llama/Llama-2-7b-hf
    assert zoo.build("llama2-7b").parameters == expected


def test_bloom_parameters_exact() -> None:
    # bigscience/bloom model card: 176,247,271,424 parameters
    assert zoo.build("bloom-176b").parameters == 176_247_271_424


def test_gpt3_175b_training_compute() -> None:
    """Brown et al. 2020, Table D.1: GPT-3 175B trained 300B tokens with 3.14e23 FLOPs,
    counted as 6 N per token with attention ignored. Our train step at seq 2048: (non-attention
    matrix FLOPs per token) x 300e9 tokens."""
    w = zoo.build("gpt3-175b", phase="train", seq=2048)
    macs = sum(op.macs() for op in w.ops() if getattr(op, "role", "") not in ("qk", "av"))
    total = 2 * macs / w.tokens * 300e9
    assert rel(total, 3.14e23) <= TOL


def test_model_info_fields() -> None:
    i = zoo.model_info("llama2-70b")
    assert (i.family, i.layers, i.d_model, i.heads, i.kv_heads, i.ffn, i.vocab, i.context) == \
        ("transformer", 80, 8192, 64, 8, 28672, 32000, 4096)
    assert i.phases[0] == "prefill"
    c = zoo.model_info("vgg16")
    assert c.family == "cnn" and c.layers == 16 and c.phases == ("inference", "train")
    assert zoo.model_info("resnet18").layers == 18 + 3  # 17 conv + fc + 3 projections


# --- structure --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_graph_is_connected_dag(name: str) -> None:
    w = zoo.build(name)
    g = w.graph
    assert nx.is_directed_acyclic_graph(g)
    assert nx.is_weakly_connected(g)
    pos = {op.name: i for i, op in enumerate(w.ops())}
    assert len(pos) == len(g) and all(pos[u] < pos[v] for u, v in g.edges)
    assert w.family == ("cnn" if name in ("resnet18", "resnet50", "vgg16", "mobilenet-v2")
                        else "transformer")


def test_decoder_block_ops_and_residual_edges() -> None:
    w = zoo.build("gpt2-small", seq=64, batch=2)
    names = {op.name for op in w.ops()}
    for suffix in ("ln1", "attn.qkv", "attn.qk", "attn.softmax", "attn.av", "attn.proj",
                   "attn.residual", "ln2", "ffn.up", "ffn.act", "ffn.down", "ffn.residual"):
        assert f"blocks.3.{suffix}" in names
    assert at(w, "blocks.3.attn.qkv").layer == "blocks.3"
    # residual: the block input (previous block's output) feeds the attention residual add
    assert set(w.predecessors("blocks.3.attn.residual")) == {"blocks.3.attn.proj",
                                                             "blocks.2.ffn.residual"}
    assert set(w.predecessors("blocks.3.ffn.residual")) == {"blocks.3.ffn.down",
                                                            "blocks.3.attn.residual"}
    assert set(w.predecessors("blocks.0.ln1")) == {"embed.add"}
    qk = at(w, "blocks.3.attn.qk")
    assert isinstance(qk, Gemm) and not qk.b_is_weight
    assert (qk.batch, qk.m, qk.n, qk.k, qk.role) == (2 * 12, 64, 64, 64, "qk")
    assert at(w, "blocks.3.ffn.act").fn == "gelu"


def test_llama_swiglu_block() -> None:
    w = zoo.build("llama2-7b", seq=16)
    for role, n, k in (("ffn.gate", 11008, 4096), ("ffn.up", 11008, 4096),
                       ("ffn.down", 4096, 11008)):
        op = at(w, f"blocks.0.{role}")
        assert (op.m, op.n, op.k) == (16, n, k)
    act = at(w, "blocks.0.ffn.act")
    assert isinstance(act, Elementwise) and act.fn == "swiglu" and act.inputs == 2
    assert set(w.predecessors("blocks.0.ffn.act")) == {"blocks.0.ffn.gate", "blocks.0.ffn.up"}
    assert at(w, "blocks.0.ln1").norm == "rmsnorm"


def test_gqa_b_shared() -> None:
    w = zoo.build("llama2-70b", phase="decode", batch=3, context=100)
    qk, av, qkv = at(w, "blocks.0.attn.qk"), at(w, "blocks.0.attn.av"), at(w, "blocks.0.attn.qkv")
    assert qk.b_shared == av.b_shared == 64 // 8
    assert qk.batch == av.batch == 3 * 64
    assert qkv.n == (64 + 2 * 8) * 128  # q heads + k and v heads of 128
    # the distinct K matrices are batch x kv_heads: the KV cache read once
    assert qk.b_bytes() == 3 * 8 * 128 * 101 * 2
    assert at(zoo.build("llama2-7b"), "blocks.0.attn.qk").b_shared == 1
    assert at(zoo.build("llama3-8b"), "blocks.0.attn.qk").b_shared == 4


def test_decode_attends_context_plus_one() -> None:
    ctx, batch = 777, 4
    w = zoo.build("llama2-7b", phase="decode", batch=batch, context=ctx)
    assert (w.phase, w.seq, w.context, w.tokens) == ("decode", 1, ctx, batch)
    qk, av, sm = at(w, "blocks.5.attn.qk"), at(w, "blocks.5.attn.av"), at(w, "blocks.5.attn.softmax")
    assert (qk.m, qk.n, qk.k) == (1, ctx + 1, 128)
    assert (av.m, av.n, av.k) == (1, 128, ctx + 1)
    assert (sm.rows, sm.cols) == (batch * 32, ctx + 1)
    assert at(w, "blocks.5.attn.qkv").m == batch
    assert at(w, "lm_head").m == batch


def test_default_seq_and_context() -> None:
    assert zoo.build("gpt2-small").seq == 512
    assert zoo.build("gpt2-small", phase="decode").context == 512  # half of 1024 positions
    assert zoo.build("llama2-7b", phase="decode").context == 2048
    assert zoo.build("bert-base").seq == 128
    assert zoo.build("vit-b16").seq == 197


def test_prefill_lm_head_last_token_train_all_tokens() -> None:
    assert at(zoo.build("gpt2-small", seq=32, batch=2), "lm_head").m == 2
    assert at(zoo.build("gpt2-small", phase="train", seq=32, batch=2), "lm_head").m == 64


def test_vit_patch_embedding() -> None:
    w = zoo.build("vit-b16", batch=2)
    conv = at(w, "embed.patch")
    assert isinstance(conv, Conv2d)
    assert (conv.r, conv.stride, conv.p * conv.q, conv.k) == (16, 16, 196, 768)
    assert at(w, "blocks.0.attn.qk").n == 197


def test_bloom_alibi_and_opt_relu() -> None:
    assert "blocks.0.attn.alibi" in zoo.build("bloom-176b", seq=8).graph
    assert at(zoo.build("opt-175b", seq=8), "blocks.0.ffn.act").fn == "relu"


@settings(max_examples=15, deadline=None)
@given(batch=st.integers(1, 8), seq=st.integers(1, 256))
def test_prefill_macs_linear_in_batch(batch: int, seq: int) -> None:
    one = zoo.build("gpt2-small", batch=1, seq=seq).macs()
    assert zoo.build("gpt2-small", batch=batch, seq=seq).macs() == batch * one


# --- training ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["gpt2-small", "llama3-8b", "bert-base", "vit-b16",
                                  "resnet18", "mobilenet-v2", "bitnet-b1.58-3b"])
def test_train_is_three_times_forward_matrix_macs(name: str) -> None:
    kw = {} if name in ("vit-b16", "resnet18", "mobilenet-v2") else {"seq": 64}
    w = zoo.build(name, phase="train", batch=2, **kw)
    fwd = sum(op.macs() for op in w.ops() if op.pass_ == "fwd")
    assert w.macs() == 3 * fwd
    for p in ("bwd_data", "bwd_weight"):
        assert sum(op.macs() for op in w.ops() if op.pass_ == p) == fwd
    assert nx.is_directed_acyclic_graph(w.graph)
    assert nx.is_weakly_connected(w.graph)


def test_train_forward_equals_inference_plus_full_lm_head() -> None:
    # CNN: the forward part of train is exactly the inference graph
    inf = zoo.build("resnet50", batch=2)
    tr = zoo.build("resnet50", phase="train", batch=2)
    assert sum(op.macs() for op in tr.ops() if op.pass_ == "fwd") == inf.macs()
    # decoder: prefill computes the head on the last token only; train on all seq tokens
    b, s, d, V = 2, 32, 768, 50257
    pre = zoo.build("gpt2-small", batch=b, seq=s).macs()
    tr = zoo.build("gpt2-small", phase="train", batch=b, seq=s)
    assert sum(op.macs() for op in tr.ops() if op.pass_ == "fwd") == pre + b * (s - 1) * d * V


@pytest.mark.parametrize("name,opt", [("gpt2-small", "adam"), ("resnet18", "sgd")])
def test_train_updates_every_parameter_once(name: str, opt: str) -> None:
    w = zoo.build(name, phase="train", **({"seq": 16} if opt == "adam" else {}))
    updates = [op for op in w.ops() if isinstance(op, Elementwise) and op.pass_ == "update"]
    assert updates and all(u.fn == opt for u in updates)
    assert len(updates) == sum(op.pass_ == "update" for op in w.ops())
    assert sum(u.elements for u in updates) == w.parameters
    # the tied GPT-2 embedding is updated after the LM head's weight gradient too
    if name == "gpt2-small":
        assert "lm_head.bwd_weight" in w.predecessors("embed.tokens.update")


def test_train_backward_edges() -> None:
    w = zoo.build("gpt2-small", phase="train", seq=8)
    # weight gradient needs the output gradient (from the successor's input gradient) and the
    # stashed input activation
    assert set(w.predecessors("blocks.11.ffn.down.bwd_weight")) == {
        "blocks.11.ffn.residual.bwd", "blocks.11.ffn.act"}
    assert at(w, "blocks.11.ffn.down.bwd_data").pass_ == "bwd_data"
    assert at(w, "blocks.0.attn.softmax.bwd").fn == "mul"


# --- formats ---------------------------------------------------------------------------------

def test_default_formats_fp16() -> None:
    for op in zoo.build("llama2-7b", seq=8).ops():
        assert op.a_format == FORMATS["fp16"]
        if op.is_matrix:
            assert op.w_format == FORMATS["fp16"] and op.acc_format == FORMATS["fp32"]


def test_bitnet_formats() -> None:
    w = zoo.build("bitnet-b1.58-3b", seq=8)
    linears = [op for op in w.ops() if isinstance(op, Gemm) and op.b_is_weight
               and op.name.startswith("blocks.")]
    assert len(linears) == 26 * 5  # qkv, proj, gate, up, down
    for op in linears:
        assert (op.w_format.name, op.a_format.name, op.acc_format.name) == \
            ("ternary", "int8", "int32")
    # embedding and LM head stay high precision (Ma et al. 2024: lm_head not quantised)
    assert at(w, "lm_head").w_format.name == "fp16"
    w4 = w.with_formats(a_format=FORMATS["fp16"], w_format=FORMATS["int4"])
    assert at(w4, "blocks.0.attn.qkv").w_format.name == "int4"
    assert w4.parameters == w.parameters


# --- errors ------------------------------------------------------------------------------------

def test_unknown_model_lists_names() -> None:
    with pytest.raises(WorkloadError) as e:
        zoo.build("gpt5")
    p = e.value.problems[0]
    assert p.path == "model" and "gpt5" in p.message and "llama2-7b" in p.message
    with pytest.raises(WorkloadError):
        zoo.model_info("nope")


@pytest.mark.parametrize("name,phase", [("gpt2-small", "inference"), ("resnet18", "decode"),
                                        ("bert-base", "prefill"), ("llama2-7b", "training")])
def test_unknown_phase_lists_phases(name: str, phase: str) -> None:
    with pytest.raises(WorkloadError) as e:
        zoo.build(name, phase=phase)
    p = e.value.problems[0]
    assert p.path == "phase" and repr(phase) in p.message and "train" in p.message


@pytest.mark.parametrize("kw,path", [
    ({"seq": 0}, "seq"), ({"seq": 2048}, "seq"), ({"batch": 0}, "batch"),
    ({"phase": "decode", "context": 1024}, "context"), ({"phase": "decode", "seq": 4}, "seq"),
    ({"context": 10}, "context"),
])
def test_bad_sizes(kw: dict, path: str) -> None:
    with pytest.raises(WorkloadError) as e:
        zoo.build("gpt2-small", **kw)
    assert e.value.problems[0].path == path


def test_vit_fixed_tokens() -> None:
    with pytest.raises(WorkloadError) as e:
        zoo.build("vit-b16", seq=100)
    assert e.value.problems[0].path == "seq"
