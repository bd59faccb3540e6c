"""The model zoo: named networks as op graphs, with their published sizes.

``build("llama2-7b", phase="decode", batch=8, context=2048)`` returns a
:class:`~workloads.graph.Workload`. Transformers are built by one builder from a shape record
(:mod:`workloads.models.transformer`, shared with the Hugging Face importer
:mod:`workloads.hf`); CNNs follow torchvision (:mod:`workloads.models.cnn`).

Phases and defaults:

* decoders (GPT-2, GPT-3, LLaMA, OPT, BLOOM, BitNet): ``prefill`` (default; ``seq`` tokens per
  sequence, default 512), ``decode`` (one new token per sequence attending over a KV cache
  of ``context`` tokens, default half the model's context), ``train`` (``seq`` tokens,
  default 512; forward, backward, Adam update);
* encoders: ``bert-base`` ``inference`` (default seq 128) and ``train``; ``vit-b16``
  ``inference`` and ``train`` on 197 tokens (224x224 image, 16x16 patches, class token);
* CNNs (``resnet18``, ``resnet50``, ``vgg16``, ``mobilenet-v2``): ``inference`` (default) and
  ``train`` (momentum SGD) on 224x224 images; ``seq`` and ``context`` are ignored.

Formats: fp16 activations and weights, fp32 accumulation; ``bitnet-b1.58-3b`` runs its
block linear layers with ternary weights, int8 activations and int32 accumulation. Use
``Workload.with_formats`` to change them.

Shapes: ``../shared/reference/models.yaml`` (tag C), checked against the papers and the
released configs; one deviation: GPT-3 XL has 16 heads of 128 (Brown et al. 2020, Table 2.1
lists 24 heads of d_head 128, which does not divide d_model 2048; 2048 = 16 x 128 and the
1.3B parameter count both need an attention width of 2048).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.graph import Workload
from archsim.workloads.models.cnn import CNN_BUILDERS, build_cnn
from archsim.workloads.models.transformer import TransformerShape, build_transformer

__all__ = ["ModelInfo", "model_names", "build", "model_info", "transformer_shape"]


def _gpt2(size: str, L: int, d: int, h: int) -> TransformerShape:
    # HF GPT2Config: activation_function "gelu_new", resid/embd/attn_pdrop 0.1 (tag A)
    return TransformerShape(name=f"gpt2-{size}", kind="decoder", layers=L, d_model=d, heads=h,
                            ffn=4 * d, vocab=50257, context=1024, dropout=True,
                            act_impl="gelu_new")


def _gpt3(size: str, L: int, d: int, h: int) -> TransformerShape:
    return TransformerShape(name=f"gpt3-{size}", kind="decoder", layers=L, d_model=d, heads=h,
                            ffn=4 * d, vocab=50257, context=2048)


def _llama(name: str, L: int, d: int, h: int, kv: int, ffn: int, vocab: int, context: int,
           tied: bool = False, a_format: str = "fp16", w_format: str = "fp16",
           acc_format: str = "fp32") -> TransformerShape:
    return TransformerShape(name=name, kind="decoder", layers=L, d_model=d, heads=h,
                            kv_heads=kv, ffn=ffn, vocab=vocab, context=context,
                            ffn_kind="swiglu", norm="rmsnorm", bias=False, positions="rope",
                            tied_embeddings=tied, a_format=a_format, w_format=w_format,
                            acc_format=acc_format)


def _gpt_oss(name: str, L: int, experts: int) -> TransformerShape:
    return replace(_llama(name, L, 2880, 64, 8, 2880, 201088, 131072), head_dim=64, bias=True,
                   sinks=True, experts=experts, top_k=4, moe_ffn=2880,
                   windows=tuple(128 if i % 2 == 0 else 0 for i in range(L)),
                   expert_w_format="mxfp4")


_SHAPES: dict[str, TransformerShape] = {s.name: s for s in (
    _gpt2("small", 12, 768, 12), _gpt2("medium", 24, 1024, 16), _gpt2("large", 36, 1280, 20),
    _gpt2("xl", 48, 1600, 25),
    _gpt3("small", 12, 768, 12), _gpt3("medium", 24, 1024, 16), _gpt3("large", 24, 1536, 16),
    _gpt3("xl", 24, 2048, 16), _gpt3("175b", 96, 12288, 96),
    _llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
    _llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096),
    _llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
    _llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
    # LLaMA 3 / 3.1 (HF meta-llama/Meta-Llama-3-70B, Llama-3.1-405B config.json)
    _llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
    _llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 131072),
    # Mixtral 8x7B: 8 experts of 14336, top-2 (HF mistralai/Mixtral-8x7B-v0.1 config.json)
    replace(_llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768), experts=8,
            top_k=2, moe_ffn=14336),
    # Qwen3-30B-A3B: 128 experts of 768, top-8, head_dim 128, per-head q/k RMSNorm
    # (HF Qwen/Qwen3-30B-A3B)
    replace(_llama("qwen3-30b-a3b", 48, 2048, 32, 4, 6144, 151936, 40960), head_dim=128,
            experts=128, top_k=8, moe_ffn=768, qk_norm="head"),
    # models deployed in the serving_h100 measurements; each equals the import of its
    # shipped config.json (tests/data/hf_deployed, SOURCE.md there), in the checkpoint's
    # formats. Qwen3-235B-A22B: 128 experts of 1536, top-8 (HF Qwen/Qwen3-235B-A22B)
    replace(_llama("qwen3-235b-a22b", 94, 4096, 64, 4, 12288, 151936, 40960), head_dim=128,
            experts=128, top_k=8, moe_ffn=1536, qk_norm="head"),
    # gpt-oss (OpenAI 2025, HF openai/gpt-oss-120b, -20b): biased attention with sinks,
    # sliding (128) and full attention alternating, experts of 2880 (top-4) in MXFP4
    _gpt_oss("gpt-oss-120b", 36, 128),
    _gpt_oss("gpt-oss-20b", 24, 32),
    # MiniMax-M2 (HF MiniMaxAI/MiniMax-M2): 256 experts of 1536, top-8, q/k RMSNorm over
    # all heads (per_layer); released in FP8 (e4m3 weights, dynamic activations)
    replace(_llama("minimax-m2", 62, 3072, 48, 8, 1536, 200064, 196608, a_format="fp8_e4m3",
                   w_format="fp8_e4m3"), head_dim=128, experts=256, top_k=8, moe_ffn=1536,
            qk_norm="layer"),
    # DeepSeek-V3: MLA + 1 shared and 256 routed experts of 2048 (top-8), the first 3 blocks
    # dense (18432); the multi-token-prediction module is not part of the model
    # (HF deepseek-ai/DeepSeek-V3 config.json; DeepSeek-AI 2024, Sec. 4.2)
    # released in FP8 (e4m3 weights and activations of the block GEMMs, DeepSeek-V3 Sec. 3.3)
    replace(_llama("deepseek-v3", 61, 7168, 128, 128, 18432, 129280, 163840,
                   a_format="fp8_e4m3", w_format="fp8_e4m3"), experts=256,
            top_k=8, shared_experts=1, moe_ffn=2048, dense_layers=3, q_lora_rank=1536,
            kv_lora_rank=512, qk_rope_dim=64, qk_nope_dim=128, v_head_dim=128),
    # serving studies (docs/serving.md): HF config.json of each released checkpoint
    _llama("mistral-7b", 32, 4096, 32, 8, 14336, 32000, 32768),   # sliding window not modelled
    _llama("yi-34b", 60, 7168, 56, 8, 20480, 64000, 4096),
    TransformerShape(name="opt-13b", kind="decoder", layers=40, d_model=5120, heads=40,
                     ffn=20480, vocab=50272, context=2048, position_rows=2050, ffn_kind="relu"),
    # OPT: learned positions with an offset of 2 rows (Zhang et al. 2022; HF OPT), ReLU MLP
    TransformerShape(name="opt-175b", kind="decoder", layers=96, d_model=12288, heads=96,
                     ffn=49152, vocab=50272, context=2048, position_rows=2050, ffn_kind="relu"),
    # BLOOM: ALiBi, layer norm after the embedding, tied head (BigScience 2022)
    TransformerShape(name="bloom-176b", kind="decoder", layers=70, d_model=14336, heads=112,
                     ffn=57344, vocab=250880, context=2048, positions="alibi", embed_norm=True),
    # BitNet b1.58 3B: LLaMA-like, tied embeddings (1bitLLM/bitnet_b1_58-3B config.json)
    _llama("bitnet-b1.58-3b", 26, 3200, 32, 32, 8640, 32002, 2048, tied=True,
           a_format="int8", w_format="ternary", acc_format="int32"),
    # BERT-base: post-norm, learned positions (512) and token types (2), pooler
    TransformerShape(name="bert-base", kind="encoder", layers=12, d_model=768, heads=12,
                     ffn=3072, vocab=30522, context=512, token_types=2, pre_norm=False,
                     final_norm=False, embed_norm=True, pooler=True, default_seq=128),
    # ViT-B/16 (Dosovitskiy et al. 2021), 1000-class head; vocab = classes
    TransformerShape(name="vit-b16", kind="vit", layers=12, d_model=768, heads=12, ffn=3072,
                     vocab=1000, context=197, default_seq=197),
)}

_CNN_NAMES = ("resnet18", "resnet50", "vgg16", "mobilenet-v2")

_NAMES = ("gpt2-small gpt2-medium gpt2-large gpt2-xl gpt3-small gpt3-medium gpt3-large gpt3-xl "
          "gpt3-175b llama2-7b llama2-13b llama2-70b llama3-8b llama3-70b llama3-405b mixtral-8x7b "
          "qwen3-30b-a3b qwen3-235b-a22b gpt-oss-120b gpt-oss-20b minimax-m2 deepseek-v3 "
          "opt-175b bloom-176b "
          "bitnet-b1.58-3b bert-base vit-b16 resnet18 resnet50 vgg16 mobilenet-v2 "
          "mistral-7b yi-34b opt-13b").split()

_TV = "torchvision {} IMAGENET1K_V1 weights card (num_params, GFLOPS = GMACs)"
_GPT3 = "Brown et al. 2020, GPT-3, Table 2.1"

#: name -> (published parameters, source, published MACs per sample at batch 1 or None,
#: source of the MACs)
_PUBLISHED: dict[str, tuple[float, str, float | None, str]] = {
    "gpt2-small": (124e6, "released GPT-2 checkpoint (HF openai-community/gpt2): 124M", None, ""),
    "gpt2-medium": (355e6, "released GPT-2 checkpoint (HF gpt2-medium): 355M", None, ""),
    "gpt2-large": (774e6, "released GPT-2 checkpoint (HF gpt2-large): 774M", None, ""),
    "gpt2-xl": (1558e6, "released GPT-2 checkpoint (HF gpt2-xl): 1558M", None, ""),
    "gpt3-small": (125e6, _GPT3, None, ""),
    "gpt3-medium": (350e6, _GPT3, None, ""),
    "gpt3-large": (760e6, _GPT3, None, ""),
    "gpt3-xl": (1.3e9, _GPT3, None, ""),
    "gpt3-175b": (175e9, _GPT3, None, ""),
    "llama2-7b": (6.74e9, "HF meta-llama/Llama-2-7b-hf checkpoint: 6.74B (Touvron et al. 2023: "
                  "7B nominal)", None, ""),
    "llama2-13b": (13.0e9, "HF meta-llama/Llama-2-13b-hf checkpoint: 13.0B (Touvron et al. "
                   "2023)", None, ""),
    "llama2-70b": (69.0e9, "HF meta-llama/Llama-2-70b-hf checkpoint: 69.0B (Touvron et al. "
                   "2023: 70B nominal)", None, ""),
    "llama3-8b": (8.03e9, "HF meta-llama/Meta-Llama-3-8B checkpoint: 8.03B", None, ""),
    "llama3-405b": (405.85e9, "HF meta-llama/Llama-3.1-405B checkpoint: 405,853,388,800 "
                    "(Llama 3 paper, Dubey et al. 2024: 405B)", None, ""),
    "mixtral-8x7b": (46.7e9, "Mistral AI, 'Mixtral of experts' (2023-12-11): 46.7B total, "
                     "12.9B per token", None, ""),
    "qwen3-30b-a3b": (30.5e9, "HF Qwen/Qwen3-30B-A3B model card: 30.5B total, 3.3B "
                      "activated", None, ""),
    "qwen3-235b-a22b": (235e9, "HF Qwen/Qwen3-235B-A22B model card: 235B total, 22B "
                        "activated", None, ""),
    "gpt-oss-120b": (116.83e9, "OpenAI 2025, gpt-oss-120b & gpt-oss-20b model card, Table 1: "
                     "116.83B total, 5.13B active", None, ""),
    "gpt-oss-20b": (20.91e9, "OpenAI 2025, gpt-oss model card, Table 1: 20.91B total, 3.61B "
                    "active", None, ""),
    "minimax-m2": (230e9, "HF MiniMaxAI/MiniMax-M2 model card: 230B total, 10B active",
                   None, ""),
    "deepseek-v3": (671e9, "DeepSeek-AI 2024, DeepSeek-V3 technical report: 671B total, 37B "
                    "activated (the 685B of the HF checkpoint adds the 14B MTP module)", None,
                    ""),
    "opt-175b": (175e9, "Zhang et al. 2022, OPT, Table 1", None, ""),
    "bloom-176b": (176_247_271_424, "BigScience 2022, bigscience/bloom model card: "
                   "176,247,271,424 parameters", None, ""),
    "bitnet-b1.58-3b": (3.32e9, "HF 1bitLLM/bitnet_b1_58-3B (reproduction of Ma et al. 2024, "
                        "'3B' in its Table 1): 3.32B", None, ""),
    "bert-base": (110e6, "Devlin et al. 2019, BERT, Section 3: 110M", None, ""),
    "vit-b16": (86_567_656, _TV.format("vit_b_16"), 17.56e9, _TV.format("vit_b_16")),
    "resnet18": (11_689_512, _TV.format("resnet18"), 1.81e9, _TV.format("resnet18")),
    "resnet50": (25_557_032, _TV.format("resnet50"), 4.09e9, _TV.format("resnet50")),
    "vgg16": (138_357_544, _TV.format("vgg16"), 15.47e9, _TV.format("vgg16")),
    "mobilenet-v2": (3_504_872, _TV.format("mobilenet_v2"), 300e6,
                     "Sandler et al. 2018, MobileNetV2, Table 4: 300M multiply-adds"),
    "llama3-70b": (70.55e9, "HF meta-llama/Meta-Llama-3-70B checkpoint: 70.55B", None, ""),
    "mistral-7b": (7.24e9, "HF mistralai/Mistral-7B-v0.1 checkpoint: 7.24B (Jiang et al. "
                   "2023)", None, ""),
    "yi-34b": (34.39e9, "HF 01-ai/Yi-34B checkpoint: 34.39B (Young et al. 2024)", None, ""),
    "opt-13b": (12.85e9, "HF facebook/opt-13b checkpoint: 12.85B (Zhang et al. 2022, Table 1: "
                "13B)", None, ""),
}


@dataclass(frozen=True)
class ModelInfo:
    """Shape and published size of one zoo model.

    Attributes:
        name, family: CLI name; ``transformer`` or ``cnn``.
        layers: transformer blocks; for CNNs the conv and fc layers of the graph
            (projection shortcuts included).
        d_model, heads, kv_heads, ffn, vocab, context: transformer hyper-parameters
            (``vocab`` is the class count for ViT); 0 for CNNs.
        parameters: counted from the op shapes of the built graph.
        published_parameters, published_source: the published figure and where it is from.
        published_macs, published_macs_source: published MACs per sample (batch 1,
            inference) where a source gives them, else None and "".
        phases: valid phases, the default first.
    """

    name: str
    family: str
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    context: int
    parameters: int
    published_parameters: float
    published_source: str
    published_macs: float | None
    published_macs_source: str
    phases: tuple[str, ...]


def model_names() -> list[str]:
    """The CLI names of every zoo model."""
    return list(_NAMES)


def _unknown(name: object) -> WorkloadError:
    return WorkloadError(Problem(
        f"unknown model {name!r}; expected one of: {', '.join(_NAMES)}", "model"))


def transformer_shape(name: str) -> TransformerShape:
    """The shape record of a zoo transformer.

    Raises:
        WorkloadError: ``name`` is not a zoo transformer.
    """
    if name not in _SHAPES:
        raise _unknown(name)
    return _SHAPES[name]


def build(name: str, phase: str | None = None, batch: int = 1, seq: int | None = None,
          context: int | None = None, tp: int = 1, ep: int = 1,
          attention: str = "unfused", kernels: str = "fused", amp: str | None = None,
          moe_routing: str | None = None) -> Workload:
    """Build a zoo model's op graph.

    Args:
        name: one of :func:`model_names`.
        phase: see the module docstring; None picks the model's default.
        batch: sequences (images) per step.
        seq: tokens per sequence (prefill/train/inference); ignored for CNNs.
        context: KV-cache tokens for decode; ignored for CNNs.
        tp: tensor-parallel degree (transformers only): one device's shard of the graph.
        ep: expert-parallel degree (mixture-of-experts transformers only).
        attention: transformers: ``unfused`` (QK, softmax, AV ops) or ``fused`` (one
            ``Attention`` op per layer, FlashAttention); ignored for CNNs.
        kernels: transformers: ``fused`` or ``eager_amp`` (``build_transformer``); CNNs:
            ``fused`` only.
        amp: with ``kernels="eager_amp"``: the autocast format of the linear layers (the
            shape's ``a_format`` when None).
        moe_routing: mixture-of-experts transformers: one ``FusedMoE`` op per MoE block
            with this routing (``build_transformer``); None = separate expert ops.

    Returns:
        The workload with ``parameters`` counted from its op shapes.

    Raises:
        WorkloadError: unknown model (path ``model``) or phase (path ``phase``), or a
            batch/seq/context out of range; the message lists the valid values.
    """
    if name in _SHAPES:
        s = _SHAPES[name]
        if amp is not None:
            s = replace(s, a_format=amp, w_format=amp)
        return build_transformer(s, phase, batch, seq, context, tp, ep,
                                 attention=attention, kernels=kernels, moe_routing=moe_routing)
    if name in CNN_BUILDERS:
        if moe_routing is not None:
            raise WorkloadError(Problem(f"a fused MoE layer applies to mixture-of-experts "
                                        f"transformers; {name} is a CNN", "--moe-routing"))
        if ep != 1:
            raise WorkloadError(Problem(f"expert parallelism applies to mixture-of-experts "
                                        f"transformers; {name} is a CNN (use ep 1)", "ep"))
        if tp != 1:
            raise WorkloadError(Problem(f"tensor parallelism applies to transformers; {name} "
                                        "is a CNN (use tp 1)", "tp"))
        if kernels != "fused":
            raise WorkloadError(Problem(f"kernels={kernels!r} applies to transformers; {name} "
                                        "is a CNN (use fused)", "kernels"))
        return build_cnn(name, phase, batch)
    raise _unknown(name)


@cache
def model_info(name: str) -> ModelInfo:
    """Shape, counted parameters and published figures of a zoo model.

    Raises:
        WorkloadError: unknown model.
    """
    if name not in _NAMES:
        raise _unknown(name)
    pub, src, macs, msrc = _PUBLISHED[name]
    if name in _SHAPES:
        s = _SHAPES[name]
        w = build(name, seq=None if s.kind == "vit" else 1)
        return ModelInfo(name, "transformer", s.layers, s.d_model, s.heads, s.kv, s.ffn,
                         s.vocab, s.context, w.parameters, pub, src, macs, msrc, s.phases)
    w = build(name)
    layers = sum(1 for op in w.ops() if op.is_matrix)
    return ModelInfo(name, "cnn", layers, 0, 0, 0, 0, 0, 0, w.parameters, pub, src, macs, msrc,
                     ("inference", "train"))
