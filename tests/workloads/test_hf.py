"""Tests of the Hugging Face config.json importer (configs written to tmp_path)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from archsim.workloads import zoo
from archsim.workloads.errors import WorkloadError
from archsim.workloads.graph import Workload
from archsim.workloads.hf import from_hf_config, shape_from_hf_config

# Published hyper-parameters (the configs of the released checkpoints, keys as in HF).
LLAMA2_7B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "intermediate_size": 11008, "num_attention_heads": 32, "num_hidden_layers": 32,
             "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096,
             "tie_word_embeddings": False, "hidden_act": "silu", "rms_norm_eps": 1e-05}
MISTRAL_7B = {"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
              "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
              "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": 4096}
GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024,
        "n_ctx": 1024, "vocab_size": 50257, "n_inner": None, "activation_function": "gelu_new"}
OPT_125M = {"model_type": "opt", "hidden_size": 768, "num_hidden_layers": 12,
            "num_attention_heads": 12, "ffn_dim": 3072, "vocab_size": 50272,
            "max_position_embeddings": 2048, "word_embed_proj_dim": 768,
            "do_layer_norm_before": True, "activation_function": "relu"}
OPT_350M = dict(OPT_125M, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                ffn_dim=4096, word_embed_proj_dim=512, do_layer_norm_before=False)


def at(w: Workload, name: str) -> Any:
    """The op ``name`` of ``w``, untyped (tests read kind-specific fields)."""
    return w.op(name)


def write(tmp_path: Path, cfg: dict | str, name: str = "config.json") -> Path:
    p = tmp_path / name
    p.write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
    return p


def test_llama2_7b_config_reproduces_parameters(tmp_path: Path) -> None:
    w = from_hf_config(write(tmp_path, LLAMA2_7B))
    # 32 x (4 d^2 + 3 d f + 2 d) + 2 V d + d with d=4096, f=11008, V=32000
    assert w.parameters == 6_738_415_616  # HF meta-llama/Llama-2-7b-hf
    assert w.parameters == zoo.build("llama2-7b").parameters
    # same graph as the zoo model, phase by phase
    for kw in ({"phase": "decode", "batch": 4, "context": 300}, {"seq": 64},
               {"phase": "train", "seq": 16}):
        assert from_hf_config(write(tmp_path, LLAMA2_7B), **kw).macs() == \
            zoo.build("llama2-7b", **kw).macs()


def test_mistral_gqa(tmp_path: Path) -> None:
    w = from_hf_config(write(tmp_path, MISTRAL_7B), phase="decode", context=10)
    assert w.parameters == 7_241_732_096  # HF mistralai/Mistral-7B-v0.1
    assert at(w, "blocks.0.attn.qk").b_shared == 4
    assert w.context == 10


def test_gpt2_config(tmp_path: Path) -> None:
    w = from_hf_config(write(tmp_path, GPT2), seq=32)
    assert w.parameters == 124_439_808  # HF openai-community/gpt2
    assert w.macs() == zoo.build("gpt2-small", seq=32).macs()
    assert from_hf_config(write(tmp_path, GPT2)).seq == 512  # default min(512, positions)


def test_opt_configs(tmp_path: Path) -> None:
    assert from_hf_config(write(tmp_path, OPT_125M)).parameters == 125_239_296  # facebook/opt-125m
    w = from_hf_config(write(tmp_path, OPT_350M), seq=8)
    assert w.parameters == 331_196_416  # facebook/opt-350m: 512-wide embedding, post-norm
    assert "embed.project_in" in w.graph and "head.project_out" in w.graph
    assert "final_norm" not in w.graph
    assert at(w, "lm_head").k == 512


def test_tiny_config_closed_form(tmp_path: Path) -> None:
    cfg = dict(LLAMA2_7B, hidden_size=64, intermediate_size=128, num_attention_heads=4,
               num_key_value_heads=2, num_hidden_layers=2, vocab_size=100,
               max_position_embeddings=32, tie_word_embeddings=True, _name_or_path="tiny")
    w = from_hf_config(write(tmp_path, cfg), seq=8)
    d, f, kvw = 64, 128, 2 * 16  # kv width = kv heads x head dim
    per_block = d * d + 2 * d * kvw + d * d + 3 * d * f + 2 * d  # q, k+v, o, mlp, 2 norms
    assert w.parameters == 2 * per_block + 100 * d + d  # tied head, final norm
    assert w.name == "tiny" and w.seq == 8
    assert shape_from_hf_config(write(tmp_path, cfg)).default_seq == 32


# --- negative ----------------------------------------------------------------------------------

def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError) as e:
        from_hf_config(tmp_path / "nope.json")
    assert "nope.json" in str(e.value)


def test_invalid_json(tmp_path: Path) -> None:
    p = write(tmp_path, '{"model_type": "llama",\n  oops}')
    with pytest.raises(WorkloadError) as e:
        from_hf_config(p)
    prob = e.value.problems[0]
    assert prob.file == str(p) and prob.line == 2 and "invalid JSON" in prob.message


def test_missing_keys_all_reported(tmp_path: Path) -> None:
    cfg = {k: v for k, v in LLAMA2_7B.items() if k not in ("hidden_size", "vocab_size")}
    p = write(tmp_path, cfg)
    with pytest.raises(WorkloadError) as e:
        from_hf_config(p)
    probs = e.value.problems
    assert {q.path for q in probs} == {"hidden_size", "vocab_size"}
    assert all(q.file == str(p) and "missing" in q.message for q in probs)
    assert "config.json hidden_size" in str(e.value)


@pytest.mark.parametrize("key,value", [("num_hidden_layers", 0), ("n_embd", "768"),
                                       ("n_head", True), ("activation_function", "swish")])
def test_bad_values(tmp_path: Path, key: str, value: object) -> None:
    base = LLAMA2_7B if key == "num_hidden_layers" else GPT2
    p = write(tmp_path, dict(base, **{key: value}))
    with pytest.raises(WorkloadError) as e:
        from_hf_config(p)
    assert e.value.problems[0].path == key and e.value.problems[0].file == str(p)


def test_unsupported_model_type(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError) as e:
        from_hf_config(write(tmp_path, {"model_type": "t5", "d_model": 512}))
    assert e.value.problems[0].path == "model_type" and "llama" in e.value.problems[0].message


def test_architecture_fallback(tmp_path: Path) -> None:
    cfg = {k: v for k, v in LLAMA2_7B.items() if k != "model_type"}
    assert from_hf_config(write(tmp_path, cfg), seq=4).parameters == 6_738_415_616


def test_heads_must_divide(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError) as e:
        from_hf_config(write(tmp_path, dict(LLAMA2_7B, num_key_value_heads=5)))
    assert e.value.problems[0].path == "num_key_value_heads"
    with pytest.raises(WorkloadError) as e:
        from_hf_config(write(tmp_path, dict(GPT2, n_head=7)))
    assert e.value.problems[0].path == "n_head"


def test_biases_refused(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError) as e:
        from_hf_config(write(tmp_path, dict(LLAMA2_7B, attention_bias=True)))
    assert e.value.problems[0].path == "attention_bias"


def test_bad_phase_and_seq(tmp_path: Path) -> None:
    p = write(tmp_path, GPT2)
    with pytest.raises(WorkloadError) as e:
        from_hf_config(p, phase="inference")
    assert e.value.problems[0].path == "phase"
    with pytest.raises(WorkloadError) as e:
        from_hf_config(p, seq=4096)
    assert e.value.problems[0].path == "seq"
