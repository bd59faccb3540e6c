"""Import a transformer from a local Hugging Face ``config.json`` (hyper-parameters only,
no weights) into the zoo's transformer builder.

Supported families (chosen by ``model_type``, else by ``architectures[0]``):

* llama-style (``llama``, ``mistral``, ``qwen3``; ``LlamaForCausalLM``,
  ``MistralForCausalLM``, ``Qwen3ForCausalLM``): required
  ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``, ``intermediate_size``,
  ``vocab_size``, ``max_position_embeddings``; optional ``num_key_value_heads`` (default: the
  attention heads, as in transformers), ``head_dim``, ``tie_word_embeddings`` (default
  false). RMSNorm, RoPE, SwiGLU, no biases (``attention_bias``/``mlp_bias`` true is refused:
  not modelled). Mistral's ``sliding_window`` is not modelled (attention spans all keys).
  Qwen3 (and ``qwen3_moe``) normalise queries and keys per head (``q_norm``, ``k_norm``:
  RMSNorm over ``head_dim``): one ``...attn.qk_norm`` op per block; ``use_sliding_window``
  true is refused; ``layer_types`` (if given) sets per-block windows.
* mixture-of-experts llama-style: ``mixtral`` (``MixtralForCausalLM``: required
  ``num_local_experts``, ``num_experts_per_tok``; experts of ``intermediate_size``) and
  ``qwen3_moe`` (``Qwen3MoeForCausalLM``: required ``num_experts``, ``num_experts_per_tok``,
  ``moe_intermediate_size``; ``decoder_sparse_step`` must be 1 and ``mlp_only_layers`` empty,
  other layouts are refused). Llama 3 / 3.1 configs are ``llama`` (``rope_scaling`` does not
  change the op graph).
* ``deepseek_v3`` and ``kimi_k2`` (``DeepseekV3ForCausalLM``; Kimi-K2 is DeepSeek-V3's
  architecture with other sizes): required ``hidden_size``, ``num_hidden_layers``,
  ``num_attention_heads``, ``intermediate_size`` (dense blocks), ``moe_intermediate_size``,
  ``n_routed_experts``, ``n_shared_experts``, ``num_experts_per_tok``,
  ``first_k_dense_replace``, ``kv_lora_rank``, ``qk_rope_head_dim``, ``qk_nope_head_dim``,
  ``v_head_dim``, ``vocab_size``, ``max_position_embeddings``; optional ``q_lora_rank``
  (null = a full query projection), ``moe_layer_freq`` (must be 1), ``attention_bias`` (must
  be false). The multi-token prediction module (``num_nextn_predict_layers``) and the
  router's grouping (``n_group``, ``topk_group``) are not modelled.
* ``gpt_oss`` (``GptOssForCausalLM``): required ``hidden_size``, ``num_hidden_layers``,
  ``num_attention_heads``, ``head_dim``, ``intermediate_size`` (each expert's width),
  ``num_local_experts``, ``num_experts_per_tok``, ``vocab_size``,
  ``max_position_embeddings``, ``sliding_window`` (when a block slides); optional
  ``num_key_value_heads``, ``layer_types`` (``sliding_attention`` / ``full_attention`` per
  block; default alternating from a sliding block 0, as transformers' ``GptOssConfig``),
  ``attention_bias`` (must be true). Every block is MoE; q/k/v and the output projection,
  the router and the experts carry biases; each head has a learned sink logit (one more
  softmax column, ``heads`` parameters per block). ``swiglu_limit`` (a clamp) and YaRN
  ``rope_scaling`` do not change the op graph.
* ``glm4_moe`` (``Glm4MoeForCausalLM``, GLM-4.5 / 4.6): required ``hidden_size``,
  ``num_hidden_layers``, ``num_attention_heads``, ``intermediate_size`` (dense blocks),
  ``moe_intermediate_size``, ``n_routed_experts``, ``n_shared_experts``,
  ``num_experts_per_tok``, ``first_k_dense_replace``, ``vocab_size``,
  ``max_position_embeddings``; optional ``num_key_value_heads``, ``head_dim``,
  ``attention_bias`` (biases on q, k, v only), ``use_qk_norm`` (per-head q/k RMSNorm).
  ``partial_rotary_factor`` (RoPE on half the head, an elementwise op under 0.1 % of a
  block) and the MTP layer are not modelled.
* ``minimax_m2`` (``MiniMaxM2ForCausalLM``): required ``hidden_size``,
  ``num_hidden_layers``, ``num_attention_heads``, ``intermediate_size`` (each expert's
  width), ``num_local_experts``, ``num_experts_per_tok``, ``vocab_size``,
  ``max_position_embeddings``; optional ``num_key_value_heads``, ``head_dim``,
  ``use_qk_norm`` with ``qk_norm_type`` (``per_layer``: one RMSNorm over all query columns
  and one over all key columns; ``per_head``), ``attn_type_list`` (every entry must be 1:
  full softmax attention), ``shared_intermediate_size`` (must be 0). MiniMax-Text-01 and
  MiniMax-M1 (``minimax``, ``minimax_m1``: lightning attention) are refused by name.
* ``quantization_config`` (any family): ``quant_method`` ``fp8`` (``fmt`` e4m3 /
  float8_e4m3fn; fp8 weights and dynamically quantised fp8 inputs of the blocks' linear
  layers; the 128 x 128 blocks' fp32 scales are not counted) or ``mxfp4`` (the routed
  experts' weights in MXFP4: 4-bit elements plus an 8-bit scale per 32); others are refused.
* gpt2-style (``gpt2``; ``GPT2LMHeadModel``): required ``n_embd``, ``n_layer``, ``n_head``,
  ``n_positions``, ``vocab_size``; optional ``n_inner`` (default 4 x n_embd),
  ``activation_function`` (gelu family or relu), ``tie_word_embeddings`` (default true).
* opt-style (``opt``; ``OPTForCausalLM``): required ``hidden_size``, ``num_hidden_layers``,
  ``num_attention_heads``, ``ffn_dim``, ``vocab_size``, ``max_position_embeddings``; optional
  ``word_embed_proj_dim`` (default hidden_size; otherwise project_in/out layers),
  ``do_layer_norm_before`` (default true; false = post-norm without a final norm),
  ``enable_bias`` (default true), ``activation_function`` (relu or gelu family),
  ``tie_word_embeddings`` (default true). Learned positions have 2 extra rows (HF OPT).

Every problem found in the file is reported together, each naming the file and the key.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.graph import Workload
from archsim.workloads.models.transformer import TransformerShape, build_transformer
from archsim.workloads.zoo import model_names

__all__ = ["from_hf_config", "shape_from_hf_config", "config_path"]

_FAMILY_BY_TYPE = {"llama": "llama", "mistral": "llama", "gpt2": "gpt2", "opt": "opt",
                   "mixtral": "llama", "qwen3": "llama", "qwen3_moe": "llama",
                   "deepseek_v3": "deepseek_v3", "kimi_k2": "deepseek_v3",
                   "gpt_oss": "gpt_oss", "glm4_moe": "glm4_moe", "minimax_m2": "minimax_m2"}
_FAMILY_BY_ARCH = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "llama",
                   "GPT2LMHeadModel": "gpt2", "OPTForCausalLM": "opt",
                   "MixtralForCausalLM": "llama", "Qwen3ForCausalLM": "llama",
                   "Qwen3MoeForCausalLM": "llama",
                   "DeepseekV3ForCausalLM": "deepseek_v3", "GptOssForCausalLM": "gpt_oss",
                   "Glm4MoeForCausalLM": "glm4_moe", "MiniMaxM2ForCausalLM": "minimax_m2"}
#: Families recognised and refused, with the reason (``model_type`` or architectures[0]).
_REFUSED = {
    "minimax": "MiniMax-Text-01 / MiniMax-M1 interleave lightning (linear) attention blocks "
               "with softmax attention; lightning attention is not modelled (MiniMax-M2, "
               "model_type minimax_m2, is)",
    "minimax_m1": "MiniMax-M1 interleaves lightning (linear) attention blocks with softmax "
                  "attention; lightning attention is not modelled (MiniMax-M2, model_type "
                  "minimax_m2, is)",
    "minimax_text_01": "MiniMax-Text-01 interleaves lightning (linear) attention blocks; "
                       "lightning attention is not modelled",
    "MiniMaxForCausalLM": "MiniMax-Text-01 / MiniMax-M1 lightning (linear) attention is not "
                          "modelled",
    "MiniMaxM1ForCausalLM": "MiniMax-M1 lightning (linear) attention is not modelled",
    "MiniMaxText01ForCausalLM": "MiniMax-Text-01 lightning (linear) attention is not "
                                "modelled"}
_GELU = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "quick_gelu")


#: Largest value accepted per key: ~8x beyond the largest published decoder, so that a
#: typo (10**7 layers) is refused before a graph of tens of millions of ops is built.
#: Largest published (2024-25): 126 layers (Llama 3.1 405B), width 18,432 (Nemotron-4
#: 340B), 128 heads, FFN 73,728 (Nemotron-4 340B), vocabulary 262,144 (Gemma 3), context
#: 10 M tokens (Llama 4 Scout).
_MAX = {"num_hidden_layers": 1024, "n_layer": 1024,
        "hidden_size": 2**18, "n_embd": 2**18, "word_embed_proj_dim": 2**18, "head_dim": 2**14,
        "num_attention_heads": 4096, "n_head": 4096, "num_key_value_heads": 4096,
        "intermediate_size": 2**20, "n_inner": 2**20, "ffn_dim": 2**20,
        "vocab_size": 2**22, "max_position_embeddings": 2**27, "n_positions": 2**27}


class _Reader:
    """Typed access to config keys, collecting problems instead of stopping at the first."""

    def __init__(self, cfg: dict[str, Any], file: str) -> None:
        self.cfg, self.file = cfg, file
        self.problems: list[Problem] = []

    def _bad(self, key: str, msg: str) -> None:
        self.problems.append(Problem(msg, key, self.file))

    def int(self, key: str, default: int | None = None) -> int:
        """A positive int; ``default`` when absent (or null) and a default exists."""
        if key not in self.cfg or self.cfg[key] is None:
            if default is None:
                self._bad(key, "missing required key; expected an int >= 1")
                return 1
            return default
        v = self.cfg[key]
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            self._bad(key, f"expected an int >= 1, got {v!r}")
            return 1
        hi = _MAX.get(key)
        if hi is not None and v > hi:
            self._bad(key, f"expected an int <= {hi:,} (far beyond any published model), "
                      f"got {v:,}")
            return 1
        return v

    def bool(self, key: str, default: bool) -> bool:
        v = self.cfg.get(key, default)
        if not isinstance(v, bool):
            self._bad(key, f"expected true or false, got {v!r}")
            return default
        return v

    def choice(self, key: str, default: str, allowed: tuple[str, ...]) -> str:
        v = self.cfg.get(key, default)
        if v not in allowed:
            self._bad(key, f"expected one of: {', '.join(allowed)}; got {v!r}")
            return default
        return str(v)


def _load(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise WorkloadError(Problem(f"cannot read the file: {e.strerror or e}", "", str(path))
                            ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise WorkloadError(Problem(f"not a text file (byte 0x{raw[e.start]:02x} at offset "
                                    f"{e.start} is not UTF-8); expected a Hugging Face "
                                    f"config.json", "", str(path))) from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise WorkloadError(Problem(f"invalid JSON: {e.msg}", "", str(path), e.lineno)) from None
    except RecursionError:
        raise WorkloadError(Problem("JSON nested too deeply; expected a flat config.json", "",
                                    str(path))) from None
    if not isinstance(cfg, dict):
        raise WorkloadError(Problem("expected a JSON object at the top level", "", str(path)))
    return cfg


def _family(cfg: dict[str, Any], file: str) -> str:
    mt = cfg.get("model_type")
    archs = cfg.get("architectures")
    arch0 = archs[0] if isinstance(archs, list) and archs else None
    for key, v in (("model_type", mt), ("architectures", arch0)):
        if isinstance(v, str) and v in _REFUSED:
            raise WorkloadError(Problem(f"{v!r} is not supported: {_REFUSED[v]}", key, file))
    if mt in _FAMILY_BY_TYPE:
        return _FAMILY_BY_TYPE[mt]
    if mt is None and arch0 in _FAMILY_BY_ARCH:
        return _FAMILY_BY_ARCH[str(arch0)]
    raise WorkloadError(Problem(
        f"unsupported or missing model_type {mt!r}; expected one of: "
        f"{', '.join(_FAMILY_BY_TYPE)} (or architectures[0] one of: "
        f"{', '.join(_FAMILY_BY_ARCH)})", "model_type", file))


def _nonneg(r: _Reader, key: str) -> int:
    """A required int >= 0."""
    v = r.cfg.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        r._bad(key, f"{'missing required key; ' if v is None else ''}expected an int >= 0, "
                    f"got {v!r}")
        return 0
    return v


def _positive_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def _act(r: _Reader, default: str) -> str:
    act = r.choice("activation_function", default, _GELU + ("relu",))
    return "relu" if act == "relu" else "gelu"


def _windows(r: _Reader, layers: int, default: list[str] | None = None) -> tuple[int, ...]:
    """Per-block attention windows from ``layer_types`` (``sliding_attention`` blocks get
    ``sliding_window`` tokens, ``full_attention`` blocks 0); ``()`` when every block is
    full. ``default``: the family's layer types when the key is absent."""
    types = r.cfg.get("layer_types", default)
    if types is None:
        return ()
    kinds = ("sliding_attention", "full_attention")
    if (not isinstance(types, list) or len(types) != layers
            or any(k not in kinds for k in types)):
        r._bad("layer_types", f"expected a list of {layers} entries (num_hidden_layers), each "
                              f"one of: {', '.join(kinds)}; got {types!r}")
        return ()
    if "sliding_attention" not in types:
        return ()
    win = r.int("sliding_window")
    return tuple(win if k == "sliding_attention" else 0 for k in types)


#: ``quantization_config.quant_method`` -> the checkpoint's formats (``fmt`` of fp8:
#: ``e4m3`` or ``float8_e4m3fn``). fp8 checkpoints (DeepSeek-V3, Qwen3-*-FP8, MiniMax-M2)
#: quantise the blocks' linear layers' weights and, dynamically, their inputs; the 128 x 128
#: blocks' fp32 scales (4 bytes per 16,384 weights) are not counted. mxfp4 (gpt-oss) holds
#: only the routed experts' weights in MXFP4 (``modules_to_not_convert``: attention, router,
#: embeddings, head).
_QUANT = ("fp8", "mxfp4")


def _quant(r: _Reader, moe: bool) -> dict[str, Any]:
    """The shape's formats from ``quantization_config`` (absent: 16-bit, as released)."""
    q = r.cfg.get("quantization_config")
    if q is None:
        return {}
    if not isinstance(q, dict):
        r._bad("quantization_config", f"expected an object, got {q!r}")
        return {}
    method = q.get("quant_method")
    if method == "fp8":
        fmt = q.get("fmt", "e4m3")
        if fmt not in ("e4m3", "float8_e4m3fn"):
            r._bad("quantization_config.fmt", f"expected e4m3 or float8_e4m3fn, got {fmt!r}")
        return {"a_format": "fp8_e4m3", "w_format": "fp8_e4m3"}
    if method == "mxfp4":
        if not moe:
            r._bad("quantization_config.quant_method", "mxfp4 is modelled on the routed "
                                                       "experts of a mixture-of-experts model")
        return {"expert_w_format": "mxfp4"}
    r._bad("quantization_config.quant_method", f"expected one of: {', '.join(_QUANT)}; got "
                                               f"{method!r}")
    return {}


def _attention(r: _Reader, heads: int) -> dict[str, Any]:
    """Keys shared by the ordinary-attention families."""
    return dict(kv_heads=r.int("num_key_value_heads", heads),
                head_dim=r.int("head_dim") if r.cfg.get("head_dim") is not None else 0)


def _llama(r: _Reader, mt: str, arch0: str) -> dict[str, Any]:
    heads = r.int("num_attention_heads")
    kw: dict[str, Any] = dict(
        layers=r.int("num_hidden_layers"), d_model=r.int("hidden_size"), heads=heads,
        ffn=r.int("intermediate_size"), vocab=r.int("vocab_size"),
        context=r.int("max_position_embeddings"),
        tied_embeddings=r.bool("tie_word_embeddings", False), ffn_kind="swiglu",
        norm="rmsnorm", bias=False, positions="rope", **_attention(r, heads))
    for key in ("attention_bias", "mlp_bias"):
        if r.bool(key, False):
            r._bad(key, "biases in llama-style layers are not modelled; expected false")
    r.choice("hidden_act", "silu", ("silu",))
    if mt in ("qwen3", "qwen3_moe") or arch0 in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):
        kw["qk_norm"] = "head"          # Qwen3Attention: q_norm, k_norm over head_dim
        if r.bool("use_sliding_window", False):
            r._bad("use_sliding_window", "Qwen's sliding-window layers are not modelled; "
                                         "expected false")
        kw["windows"] = _windows(r, kw["layers"])
    if mt == "mixtral" or arch0 == "MixtralForCausalLM":
        kw.update(experts=r.int("num_local_experts"), top_k=r.int("num_experts_per_tok"),
                  moe_ffn=kw["ffn"])
    elif mt == "qwen3_moe" or arch0 == "Qwen3MoeForCausalLM":
        kw.update(experts=r.int("num_experts"), top_k=r.int("num_experts_per_tok"),
                  moe_ffn=r.int("moe_intermediate_size"))
        if r.int("decoder_sparse_step", 1) != 1:
            r._bad("decoder_sparse_step", "only every-layer MoE is modelled; expected 1")
        if r.cfg.get("mlp_only_layers"):
            r._bad("mlp_only_layers", "dense layers among MoE layers are not modelled; "
                                      "expected []")
    kw.update(_quant(r, "experts" in kw))
    return kw


def _gpt_oss(r: _Reader) -> dict[str, Any]:
    """gpt-oss (OpenAI 2025): every block MoE with biased experts and router, biased
    attention with per-head sinks, sliding (``sliding_window``) and full attention blocks
    alternating per ``layer_types`` (default: sliding on even blocks, as transformers'
    GptOssConfig)."""
    heads, layers = r.int("num_attention_heads"), r.int("num_hidden_layers")
    width = r.int("intermediate_size")
    if not r.bool("attention_bias", True):
        r._bad("attention_bias", "gpt-oss attention carries biases; expected true")
    r.choice("hidden_act", "silu", ("silu",))
    default = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
    kw = dict(layers=layers, d_model=r.int("hidden_size"), heads=heads, ffn=width,
              vocab=r.int("vocab_size"), context=r.int("max_position_embeddings"),
              tied_embeddings=r.bool("tie_word_embeddings", False), ffn_kind="swiglu",
              norm="rmsnorm", bias=True, positions="rope", sinks=True,
              experts=r.int("num_local_experts"), top_k=r.int("num_experts_per_tok"),
              moe_ffn=width, windows=_windows(r, layers, default), **_attention(r, heads))
    kw.update(_quant(r, True))
    return kw


def _glm4_moe(r: _Reader) -> dict[str, Any]:
    """GLM-4.5 / 4.6 (``glm4_moe``): DeepSeek-style MoE (shared experts, dense first blocks)
    over grouped-query attention with biased q/k/v and optional per-head q/k norms."""
    heads = r.int("num_attention_heads")
    kw = dict(layers=r.int("num_hidden_layers"), d_model=r.int("hidden_size"), heads=heads,
              ffn=r.int("intermediate_size"), vocab=r.int("vocab_size"),
              context=r.int("max_position_embeddings"),
              tied_embeddings=r.bool("tie_word_embeddings", False), ffn_kind="swiglu",
              norm="rmsnorm", bias=False, positions="rope",
              qkv_bias=r.bool("attention_bias", False),
              qk_norm="head" if r.bool("use_qk_norm", False) else "",
              experts=r.int("n_routed_experts"), top_k=r.int("num_experts_per_tok"),
              shared_experts=_nonneg(r, "n_shared_experts"),
              moe_ffn=r.int("moe_intermediate_size"),
              dense_layers=_nonneg(r, "first_k_dense_replace"), **_attention(r, heads))
    r.choice("hidden_act", "silu", ("silu",))
    kw.update(_quant(r, True))
    return kw


def _minimax_m2(r: _Reader) -> dict[str, Any]:
    """MiniMax-M2 (``minimax_m2``): every block MoE (``num_local_experts`` of
    ``intermediate_size``) over full grouped-query attention with q/k norms; blocks of
    lightning (linear) attention (``attn_type_list`` 0, MiniMax-M1/Text-01) are refused."""
    heads, layers = r.int("num_attention_heads"), r.int("num_hidden_layers")
    width = r.int("intermediate_size")
    types = r.cfg.get("attn_type_list")
    if types is not None and (not isinstance(types, list) or any(t != 1 for t in types)):
        r._bad("attn_type_list", "lightning (linear) attention blocks (0) are not modelled; "
                                 "expected every entry 1 (full softmax attention)")
    if r.cfg.get("shared_intermediate_size", 0):
        r._bad("shared_intermediate_size", "MiniMax shared experts are not modelled; "
                                           "expected 0")
    qk = ""
    if r.bool("use_qk_norm", False):
        qk = {"per_layer": "layer", "per_head": "head"}.get(
            r.choice("qk_norm_type", "per_layer", ("per_layer", "per_head")), "layer")
    r.choice("hidden_act", "silu", ("silu",))
    kw = dict(layers=layers, d_model=r.int("hidden_size"), heads=heads, ffn=width,
              vocab=r.int("vocab_size"), context=r.int("max_position_embeddings"),
              tied_embeddings=r.bool("tie_word_embeddings", False), ffn_kind="swiglu",
              norm="rmsnorm", bias=False, positions="rope", qk_norm=qk,
              experts=r.int("num_local_experts"), top_k=r.int("num_experts_per_tok"),
              moe_ffn=width, **_attention(r, heads))
    kw.update(_quant(r, True))
    return kw


def _deepseek_v3(r: _Reader) -> dict[str, Any]:
    cfg = r.cfg
    heads = r.int("num_attention_heads")
    kw = dict(layers=r.int("num_hidden_layers"), d_model=r.int("hidden_size"), heads=heads,
              kv_heads=r.int("num_key_value_heads", heads), ffn=r.int("intermediate_size"),
              vocab=r.int("vocab_size"), context=r.int("max_position_embeddings"),
              tied_embeddings=r.bool("tie_word_embeddings", False), ffn_kind="swiglu",
              norm="rmsnorm", bias=False, positions="rope",
              experts=r.int("n_routed_experts"), top_k=r.int("num_experts_per_tok"),
              shared_experts=r.int("n_shared_experts"),
              moe_ffn=r.int("moe_intermediate_size"),
              dense_layers=_nonneg(r, "first_k_dense_replace"),
              q_lora_rank=(r.int("q_lora_rank") if cfg.get("q_lora_rank") is not None
                           else 0),
              kv_lora_rank=r.int("kv_lora_rank"), qk_rope_dim=r.int("qk_rope_head_dim"),
              qk_nope_dim=r.int("qk_nope_head_dim"), v_head_dim=r.int("v_head_dim"))
    if r.int("moe_layer_freq", 1) != 1:
        r._bad("moe_layer_freq", "only every-layer MoE is modelled; expected 1")
    if r.bool("attention_bias", False):
        r._bad("attention_bias", "biases in MLA projections are not modelled; expected false")
    r.choice("hidden_act", "silu", ("silu",))
    kw.update(_quant(r, True))
    return kw


def config_path(model: str | Path) -> Path | None:
    """The Hugging Face ``config.json`` that a ``--model`` value names, or None when it names
    none (a zoo model, an ONNX file, anything else: the caller decides). The one resolver of
    ``run``, ``plan``, ``serve`` and the library: a zoo name stays a zoo name; a path ending
    in ``.json`` is the config; a folder is a model folder holding ``config.json``.

    Raises:
        WorkloadError: a folder without ``config.json`` (path ``--model``).
    """
    if str(model) in model_names():
        return None
    p = Path(model)
    if p.suffix == ".json":
        return p
    if p.is_dir():
        cfg = p / "config.json"
        if not cfg.is_file():
            raise WorkloadError(Problem(f"folder {str(p)!r} holds no config.json; expected a "
                                        "zoo model name, a Hugging Face config.json or a "
                                        "folder holding one", "--model"))
        return cfg
    return None


def shape_from_hf_config(path: str | Path) -> TransformerShape:
    """The :class:`TransformerShape` described by a Hugging Face ``config.json``.

    Raises:
        WorkloadError: unreadable file, invalid JSON, unsupported ``model_type``, or missing
            / invalid keys (all reported together, each with the file and key).
    """
    p = Path(path)
    file = str(p)
    cfg = _load(p)
    fam = _family(cfg, file)
    r = _Reader(cfg, file)
    name = cfg.get("_name_or_path") or p.parent.name or p.stem
    if not isinstance(name, str):
        name = p.stem
    mt = cfg.get("model_type") or ""
    archs = cfg.get("architectures")
    arch0 = archs[0] if isinstance(archs, list) and archs else ""
    if fam == "llama":
        kw = _llama(r, mt, arch0)
    elif fam == "deepseek_v3":
        kw = _deepseek_v3(r)
    elif fam == "gpt_oss":
        kw = _gpt_oss(r)
    elif fam == "glm4_moe":
        kw = _glm4_moe(r)
    elif fam == "minimax_m2":
        kw = _minimax_m2(r)
    elif fam == "gpt2":
        d = r.int("n_embd")
        kw = dict(layers=r.int("n_layer"), d_model=d, heads=r.int("n_head"),
                  ffn=r.int("n_inner", 4 * d), vocab=r.int("vocab_size"),
                  context=r.int("n_positions"), ffn_kind=_act(r, "gelu_new"),
                  tied_embeddings=r.bool("tie_word_embeddings", True),
                  act_impl=str(r.cfg.get("activation_function", "gelu_new")),
                  dropout=any(_positive_number(r.cfg.get(k, 0.1))    # HF default 0.1
                              for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop")))
    else:  # opt
        d = r.int("hidden_size")
        pre = r.bool("do_layer_norm_before", True)
        ctx = r.int("max_position_embeddings")
        kw = dict(layers=r.int("num_hidden_layers"), d_model=d,
                  heads=r.int("num_attention_heads"), ffn=r.int("ffn_dim"),
                  vocab=r.int("vocab_size"), context=ctx, position_rows=ctx + 2,
                  embed_dim=r.int("word_embed_proj_dim", d), ffn_kind=_act(r, "relu"),
                  bias=r.bool("enable_bias", True), pre_norm=pre,
                  final_norm=pre and not r.bool("_remove_final_layer_norm", False),
                  tied_embeddings=r.bool("tie_word_embeddings", True))
        if kw["embed_dim"] == d:
            kw["embed_dim"] = 0
    if not r.problems:
        heads, kv, hd = kw["heads"], kw.get("kv_heads", 0) or kw["heads"], kw.get("head_dim", 0)
        hkey = "num_attention_heads" if fam != "gpt2" else "n_head"
        if not hd and kw["d_model"] % heads and not kw.get("kv_lora_rank"):
            r._bad(hkey, f"{heads} heads do not divide the model width {kw['d_model']}")
        if heads % kv:
            r._bad("num_key_value_heads", f"{kv} key/value heads do not divide {heads} heads")
        if kw.get("experts") and kw.get("top_k", 0) > kw["experts"]:
            r._bad("num_experts_per_tok", f"{kw['top_k']} experts per token exceed the "
                                          f"{kw['experts']} experts")
        if kw.get("dense_layers", 0) > kw["layers"]:
            r._bad("first_k_dense_replace", f"{kw['dense_layers']} dense blocks exceed the "
                                            f"{kw['layers']} blocks")
    if r.problems:
        raise WorkloadError(r.problems)
    return TransformerShape(name=name, kind="decoder",
                            default_seq=min(512, kw["context"]), **kw)


def from_hf_config(path: str | Path, phase: str | None = None, batch: int = 1,
                   seq: int | None = None, context: int | None = None,
                   tp: int = 1, ep: int = 1, attention: str = "unfused",
                   kernels: str = "fused", amp: str | None = None) -> Workload:
    """Build a decoder workload from a local Hugging Face ``config.json``.

    Args:
        path: the ``config.json`` file.
        phase: ``prefill`` (default), ``decode`` or ``train`` (as :func:`workloads.zoo.build`).
        batch: sequences per step.
        seq: tokens per sequence for prefill/train (default min(512, context)).
        context: KV-cache tokens for decode (default half the maximum positions).
        attention, kernels: as :func:`workloads.models.transformer.build_transformer`.
        amp: with ``kernels="eager_amp"``: the autocast format of the linear layers.

    Returns:
        The workload, parameters counted from its op shapes; fp16 activations and weights.

    Raises:
        WorkloadError: a bad file or key (naming the file and the key), or a bad phase,
            batch, seq or context.
    """
    s = shape_from_hf_config(path)
    if amp is not None:
        s = replace(s, a_format=amp, w_format=amp)
    return build_transformer(s, phase, batch, seq, context, tp, ep, attention=attention,
                             kernels=kernels)
