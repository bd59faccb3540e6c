"""One transformer builder for every transformer in the zoo and every imported config.
(Over 600 lines: one builder whose closures share the shape, the phase and the kernels
mode; split by variant it would repeat them.)

A :class:`TransformerShape` records the hyper-parameters and the architectural choices that
change the op graph or the parameter count (norm kind, biases, position encoding, tied
embeddings, FFN kind, pre-/post-norm). :func:`build_transformer` turns a shape and a phase
into a :class:`~workloads.graph.Workload`.

Op names: ``embed.tokens``, ``blocks.{i}.ln1``, ``blocks.{i}.attn.qkv``, ``...attn.qk``,
``...attn.softmax``, ``...attn.av``, ``...attn.proj``, ``...attn.residual``, ``...ln2``,
``...ffn.up`` (``...ffn.gate`` for SwiGLU), ``...ffn.act``, ``...ffn.down``,
``...ffn.residual``, ``final_norm``, ``lm_head`` (``layer`` is ``blocks.{i}``).

Counting rules (documented choices):

* attention is dense: prefill/train QK^T covers ``seq x seq`` scores (no causal skipping);
  decode attends one query over ``context + 1`` keys (the cache plus the new token);
* the LM head of a decoder runs on the last token of each sequence in prefill and decode
  (what serving engines compute; earlier logits are never used) and on every token in train;
* RoPE is an ``Elementwise(mul)`` over the query and key columns; ALiBi an ``Elementwise(add)``
  over the attention scores;
* tensor parallelism over ``tp`` devices (Megatron-LM, Shoeybi et al. 2019): the graph is
  one device's shard. Heads are split (``h / tp`` query heads; ``kv / tp`` key/value heads,
  or one replicated KV head when ``tp`` exceeds them), QKV and FFN up/gate are
  column-parallel, the attention output projection and FFN down are row-parallel and each is
  followed by an :class:`~workloads.ops.AllReduce` of the ``tokens x d`` activations; the
  token embedding is vocabulary-parallel (plus one all-reduce) and so is the LM head (its
  logits stay sharded: greedy sampling needs only a max over the shards, not counted).
  Norms, residuals and position tables are replicated. ``parameters`` stays the model's;
* mixture of experts (``experts`` > 0; Shazeer et al. 2017, Mixtral, DeepSeekMoE): from block
  ``dense_layers`` on, the FFN is a router ``Gemm(tokens, experts, d)`` (``...moe.router``), a
  ``Softmax`` over the expert scores (top-k selection is not counted), the routed experts as
  batched SwiGLU GEMMs ``...moe.gate/up/down`` over the experts a device holds (each gets
  ``tokens x top_k / experts`` tokens, balanced; with a ``capacity_factor`` each is padded to
  that many times the balanced load), optional shared experts ``...moe.shared_*`` that see
  every token, and the weighted sum ``...moe.combine``. When a decode batch routes to fewer
  experts than exist, only ``tokens x top_k`` of them run (their weights are read), the idle
  ones still count as parameters. Expert parallelism (``ep``) keeps whole experts, ``experts /
  ep`` per device, and each device's experts receive ``tokens x top_k x ep / experts`` tokens
  from the ``ep`` group (the all-to-all is priced by the plan, :mod:`workloads.parallel`);
* multi-head latent attention (``kv_lora_rank`` > 0; DeepSeek-V2/V3): low-rank query
  (``q_lora_rank``) and key/value (``kv_lora_rank``) projections with their RMSNorms, a
  decoupled RoPE key of ``qk_rope_dim`` shared by the heads, query/key heads of ``qk_nope_dim +
  qk_rope_dim`` and value heads of ``v_head_dim``. Prefill and train expand K and V
  (``...attn.kv_b``); decode runs the weight-absorbed form (the cache holds the latent
  ``kv_lora_rank + qk_rope_dim`` per token, attention is MQA-like over it; DeepSeek-V2 Sec.
  2.1.2), with the same parameters;
* per-block attention (``windows``; gpt-oss): a block with a sliding window of ``w`` keys
  builds its fused ``Attention`` op with ``window=w`` (causal prefill scores only the last
  ``w`` keys of each query); unfused, its decode QK/softmax/AV read only the last ``w``
  cached keys (prefill scores stay dense, as for full blocks). A shape with windows is
  built whole, or one block per kind (``workloads.parallel.block_kinds``: ``layers = 1``
  with that block's window); a part of its blocks with the windows of all is refused;
* q/k RMSNorm (``qk_norm``; Qwen3, GLM, MiniMax-M2): one ``...attn.qk_norm`` Norm after the
  QKV projection over the shard's query and key columns: per head (rows ``tokens x (h +
  kv)``, cols ``head_dim``; two ``head_dim`` gains) or per layer (rows ``tokens``, cols
  ``(h + kv) x head_dim``; one gain per column). Attention sinks (``sinks``; gpt-oss): one
  learned logit per head, one more softmax column (unfused) and ``heads`` parameters;
* attention GEMMs and vector ops stay in fp16 for every model; the shape's formats apply to
  the linear layers of the blocks (BitNet b1.58 keeps embedding and LM head in fp16: Ma et
  al. 2024, answer of the authors on the paper's Hugging Face page, "the lm_head is not
  quantized"), the routed experts' weights ``expert_w_format`` when set (gpt-oss: MXFP4);
  the router stays fp16.

Kernels (``kernels=``): ``fused`` (default) is one kernel per op above, as a tuned engine
runs the model (dropout folded into the residual add); in its inference graphs (prefill,
decode) of a pre-norm RMSNorm model each residual add is fused into the norm after it (the
next block's ``ln1``, the block's ``ln2``, ``final_norm``): one ``Norm(residual=True)``
that reads the branch and the stream and writes the new stream and the normalised output,
as vLLM's ``fused_add_rms_norm`` (SGLang, TensorRT-LLM: the same kernel); no
``...residual`` op is left (one with no norm after it stays an add). Training graphs keep
the add (Megatron fuses bias + dropout + add, not the norm), and so do LayerNorm and
post-norm models (vLLM runs ``nn.LayerNorm`` alone). ``eager_amp`` is what PyTorch eager
runs for the Hugging Face module code under ``torch.autocast(amp)`` with fp32 parameters
(the usual mixed-precision training script): every linear layer's fp32 weight is cast to
``amp`` once per step (``...cast_w``; autocast's cast cache) and its input is cast when it
arrives in fp32 (``...cast_in``); embeddings, the residual stream and the norms are fp32
(``layer_norm`` and ``pow`` are on autocast's fp32 list); dropout is its own kernel
(``...dropout_out``, ``embed.dropout``) in training; attention heads are merged by a copy
(``...attn.merge``: transpose + contiguous); the FFN activation runs the module's
expression kernel by kernel (SwiGLU: ``silu`` then ``mul``; GPT-2's ``gelu_new``, i.e.
``NewGELUActivation``, nine kernels from ``pow`` on, in fp32; ``tanh`` is costed as a
``silu``: one special function per element); training adds the loss as HF computes it
(``logits.float()`` and a log-softmax over the vocabulary; the gather of the label
log-probabilities is not counted). In training the backward is what autograd launches
(``to_training(backward=...)``; sources in the code): ``mul`` of two tensors needing
gradients is two kernels, ``pow`` three, an ``add`` none (the engine casts a gradient to an
input's bf16 and sums the gradients of a tensor used twice, e.g. the residual stream);
bias gradients are column sums of the output gradient; layer norm adds a gain/shift
reduction; dropout writes and reads a 1-byte mask; the split of q, k, v is undone by a
concatenation; ``nll_loss`` zero-fills a gradient of the whole fp32 logits; embedding
backward zero-fills its table's gradient (the tied table then sums two gradients). The
rest follows :func:`~workloads.models.common.to_training`'s one kernel per op.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.formats import NumberFormat, get_format
from archsim.workloads.graph import Workload
from archsim.workloads.models.common import FP16, FP32, GraphBuilder, backward_ops, to_training
from archsim.workloads.ops import (
    AllReduce,
    Attention,
    Conv2d,
    Elementwise,
    Embedding,
    FusedMoE,
    Gemm,
    Norm,
    Op,
    Softmax,
    moe_backend,
)
from archsim.workloads.routing import parse_routing

__all__ = ["TransformerShape", "build_transformer", "resolve_phase", "KERNELS"]

#: How the layer ops become kernels (``build_transformer(kernels=...)``; module doc).
KERNELS = ("fused", "eager_amp")


@dataclass(frozen=True)
class TransformerShape:
    """Hyper-parameters of one transformer.

    Attributes:
        name: model name.
        kind: ``decoder`` (causal LM), ``encoder`` (BERT-style, token inputs) or ``vit``.
        layers, d_model, heads, kv_heads, ffn, vocab: the usual (``kv_heads`` < ``heads`` is
            grouped-query attention; ``vocab`` is the number of classes for ``vit``).
        context: maximum sequence length (positions).
        head_dim: per-head width; 0 means ``d_model // heads``.
        ffn_kind: ``gelu``, ``relu`` (2-matrix MLP) or ``swiglu`` (gate, up, down).
        norm: ``layernorm`` or ``rmsnorm``.
        bias: linear layers (and their biases) carry biases.
        positions: ``learned`` (a table of ``position_rows`` rows), ``rope``, ``alibi``.
        position_rows: rows of the learned position table (0 means ``context``; OPT: +2).
        tied_embeddings: the LM head reuses the token-embedding table.
        pre_norm: norm before attention/FFN (GPT-2 onwards) rather than after (BERT).
        final_norm: a norm after the last block.
        embed_norm: a norm right after the embedding (BLOOM, BERT).
        embed_dim: token-embedding width if projected to ``d_model`` (OPT-350m); 0 = d_model.
        token_types: rows of a token-type table (BERT: 2); 0 = none.
        pooler: a ``d x d`` pooler on the first token (BERT).
        image, patch, channels: ViT input size, patch size, input channels.
        a_format, w_format, acc_format: formats of the blocks' linear layers.
        default_seq: default tokens per sequence for prefill/train/inference.
        experts, top_k, shared_experts, moe_ffn: mixture of experts (0 experts = dense):
            routed experts, experts per token, always-on shared experts, expert FFN width.
        dense_layers: leading blocks with a dense FFN of width ``ffn`` (DeepSeek: 3).
        capacity_factor: expert capacity as a multiple of the balanced load (0 = dropless).
        q_lora_rank, kv_lora_rank, qk_rope_dim, qk_nope_dim, v_head_dim: multi-head latent
            attention (``kv_lora_rank`` 0 = ordinary attention; ``q_lora_rank`` 0 = a full
            query projection).
        qkv_bias: the query/key/value projection carries biases even when ``bias`` is false
            (GLM-4.5: ``attention_bias`` on q, k, v only).
        qk_norm: RMSNorm of the queries and keys after their projection: ``""`` none,
            ``head`` (Qwen3, GLM-4.5: one ``head_dim`` gain for q and one for k, applied to
            every head) or ``layer`` (MiniMax-M2 ``per_layer``: one gain over all query and
            all key columns).
        windows: per-block sliding attention window in tokens (0 = full attention), one
            entry per block; empty = full attention everywhere (gpt-oss: 128 and 0
            alternating, from ``layer_types``).
        sinks: a learned per-head "sink" logit joins each softmax row (gpt-oss).
        expert_w_format: weight format of the routed experts when it differs from
            ``w_format`` (gpt-oss ships its experts in MXFP4); ``""`` = ``w_format``.
    """

    name: str
    kind: str
    layers: int
    d_model: int
    heads: int
    ffn: int
    vocab: int
    context: int
    kv_heads: int = 0
    head_dim: int = 0
    ffn_kind: str = "gelu"
    norm: str = "layernorm"
    bias: bool = True
    positions: str = "learned"
    position_rows: int = 0
    tied_embeddings: bool = True
    pre_norm: bool = True
    final_norm: bool = True
    embed_norm: bool = False
    embed_dim: int = 0
    token_types: int = 0
    pooler: bool = False
    image: int = 224
    patch: int = 16
    channels: int = 3
    a_format: str = "fp16"
    w_format: str = "fp16"
    acc_format: str = "fp32"
    default_seq: int = 512
    experts: int = 0
    top_k: int = 0
    shared_experts: int = 0
    moe_ffn: int = 0
    dense_layers: int = 0
    capacity_factor: float = 0.0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_dim: int = 0
    qk_nope_dim: int = 0
    v_head_dim: int = 0
    dropout: bool = False
    act_impl: str = ""
    qkv_bias: bool = False
    qk_norm: str = ""
    windows: tuple[int, ...] = ()
    sinks: bool = False
    expert_w_format: str = ""

    @property
    def is_moe(self) -> bool:
        """Mixture-of-experts FFNs (from block ``dense_layers`` on)."""
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention."""
        return self.kv_lora_rank > 0

    @property
    def kv(self) -> int:
        """Key/value heads (``heads`` unless grouped-query)."""
        return self.kv_heads or self.heads

    @property
    def hd(self) -> int:
        """Per-head width."""
        return self.head_dim or self.d_model // self.heads

    @property
    def emb(self) -> int:
        """Token-embedding width."""
        return self.embed_dim or self.d_model

    @property
    def phases(self) -> tuple[str, ...]:
        """Valid phases, the default first."""
        return ("prefill", "decode", "train") if self.kind == "decoder" else ("inference", "train")

    @property
    def vit_tokens(self) -> int:
        """Patches plus the class token."""
        return (self.image // self.patch) ** 2 + 1

    def window(self, block: int) -> int:
        """Sliding attention window of block ``block`` in tokens (0 = full attention)."""
        return self.windows[block] if self.windows else 0


def resolve_phase(name: str, phase: str | None, valid: tuple[str, ...]) -> str:
    """The phase to build (default: ``valid[0]``); raises WorkloadError if not valid."""
    if phase is None:
        return valid[0]
    if phase not in valid:
        raise WorkloadError(Problem(
            f"model {name!r} has no phase {phase!r}; expected one of: {', '.join(valid)}",
            "phase"))
    return phase


def _check_int(value: object, key: str, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise WorkloadError(Problem(f"expected an int >= {low}, got {value!r}", key))


def _tokens(s: TransformerShape, phase: str, seq: int | None, context: int | None
            ) -> tuple[int, int, int]:
    """(query tokens per sequence, key tokens per sequence, cached context) for a phase."""
    if s.kind == "vit":
        if seq is not None and seq != s.vit_tokens:
            raise WorkloadError(Problem(
                f"{s.name} always runs {s.vit_tokens} tokens ({s.image}x{s.image} image, "
                f"{s.patch}x{s.patch} patches + class token); got seq={seq}", "seq"))
        if context is not None:
            raise WorkloadError(Problem("context applies to the decode phase only", "context"))
        return s.vit_tokens, s.vit_tokens, 0
    if phase == "decode":
        if seq not in (None, 1):
            raise WorkloadError(Problem(
                f"decode generates one token per sequence; seq must be 1, got {seq!r}", "seq"))
        ctx = s.context // 2 if context is None else context
        _check_int(ctx, "context", 0)
        if ctx + 1 > s.context:
            raise WorkloadError(Problem(
                f"context {ctx} + 1 new token exceeds {s.name}'s {s.context} positions",
                "context"))
        return 1, ctx + 1, ctx
    if context is not None:
        raise WorkloadError(Problem("context applies to the decode phase only", "context"))
    n = s.default_seq if seq is None else seq
    _check_int(n, "seq", 1)
    if n > s.context:
        raise WorkloadError(Problem(f"seq {n} exceeds {s.name}'s {s.context} positions", "seq"))
    return n, n, 0


def build_transformer(s: TransformerShape, phase: str | None = None, batch: int = 1,
                      seq: int | None = None, context: int | None = None,
                      tp: int = 1, ep: int = 1, attention: str = "unfused",
                      kernels: str = "fused", moe_routing: str | None = None) -> Workload:
    """The op graph of transformer ``s`` for one phase.

    Args:
        s: the shape record.
        phase: ``prefill`` (default), ``decode``, ``train`` for decoders; ``inference``
            (default) or ``train`` for encoders and ViT.
        batch: sequences (images for ViT) per step.
        seq: tokens per sequence for prefill/train/inference (default ``s.default_seq``).
        context: KV-cache length for decode (default half the model context).
        tp: tensor-parallel degree (devices); the graph is one device's shard (module doc).
        ep: expert-parallel degree (MoE models): ``experts / ep`` whole experts per device.
        attention: ``unfused`` (QK, softmax and AV ops; dense scores) or ``fused``: one
            ``Attention`` op per layer (``{L}.attn.core``; causal in prefill/train of
            decoders), as FlashAttention runs it (multi-head latent attention stays unfused).
        kernels: ``fused`` (one kernel per layer op, in the shape's formats: what a tuned
            engine runs) or ``eager_amp``: the kernels PyTorch eager runs for the module code
            under ``torch.autocast`` with fp32 parameters (:data:`KERNELS`, module doc).
        moe_routing: None (default): the routed experts as separate ops (module doc); else
            each MoE block's routed experts are one ``FusedMoE`` op (vLLM's fused MoE layer:
            top-k, token sort, grouped expert GEMMs, combine) with this routing
            (``balanced`` or ``power_law:ALPHA``, ``workloads.routing``); the router GEMM
            and shared experts stay separate ops. Dropless: not with a ``capacity_factor``.

    Returns:
        The workload, ``parameters`` counted from the op shapes.

    Raises:
        WorkloadError: unknown phase, or batch/seq/context out of range.
    """
    ph = resolve_phase(s.name, phase, s.phases)
    _check_int(batch, "batch", 1)
    if attention not in ("unfused", "fused"):
        raise WorkloadError(Problem(f"attention must be unfused or fused, got {attention!r}",
                                    "attention"))
    if kernels not in KERNELS:
        raise WorkloadError(Problem(f"kernels must be one of {', '.join(KERNELS)}, got "
                                    f"{kernels!r}", "kernels"))
    eager = kernels == "eager_amp"
    if moe_routing is not None:
        parse_routing(moe_routing, "--moe-routing")
        if not s.is_moe or s.capacity_factor > 0 or eager or ph == "train":
            why = (f"{s.name} has no experts" if not s.is_moe
                   else f"{s.name} has a capacity_factor (the fused layer is dropless)"
                   if s.capacity_factor > 0 else "needs kernels='fused'" if eager
                   else "is a forward (serving) kernel, not for phase train")
            raise WorkloadError(Problem(f"a fused MoE layer: {why}", "--moe-routing"))
    q, keys, ctx = _tokens(s, ph, seq, context)
    hl, kvl = _tp_heads(s, tp)
    _check_ep(s, ep)
    if s.windows and len(s.windows) != s.layers:
        raise WorkloadError(Problem(
            f"{s.name}'s blocks differ in attention (a sliding window on some, full "
            f"attention on others: {len(s.windows)} per-block windows for {s.layers} "
            f"blocks); build it whole, or one block per kind with its window "
            f"(workloads.parallel.block_kinds, as serving and plans do)", "windows"))
    w = Workload(name=s.name, phase=ph, batch=batch, seq=q, context=ctx, family="transformer",
                 devices=tp)
    b = GraphBuilder(w)
    a_fmt, w_fmt, acc_fmt = (get_format(s.a_format), get_format(s.w_format),
                             get_format(s.acc_format))
    ew_fmt = get_format(s.expert_w_format) if s.expert_w_format else w_fmt
    m = batch * q
    d, hd, h, kv = s.d_model, s.hd, hl, kvl          # heads and KV heads of one shard
    ffn, vocab = -(-s.ffn // tp), -(-s.vocab // tp)    # column / vocabulary shards

    # a row-parallel layer's bias is added once, after its all-reduce (not on the shard)
    row_bias: bool | None = None if tp == 1 else False
    # the block being built (the ``block`` tag of every op made now; None outside blocks)
    blk: int | None = None

    def all_reduce(name: str, layer: str, after: Op) -> Op:
        """Sum of the row-parallel partial outputs over the ``tp`` devices (tp > 1)."""
        if tp == 1:
            return after
        return b.add(AllReduce(name=name, elements=m * d, devices=tp, layer=layer, block=blk),
                     [after])

    # eager_amp: autocast runs GEMMs in the activation format (amp) on fp32 parameters and
    # keeps its fp32-list ops (norms, softmax, pow, the loss) and the residual stream in fp32
    amp = a_fmt
    vec = amp if eager else FP16        # vector ops' format (fused: set by with_formats)
    wide = FP32 if eager else vec       # residual stream, norms, embeddings' output

    # eager_amp training: the backward kernels autograd runs where they differ from
    # to_training's one-kernel-per-op rule (forward op -> (input-grad ops, weight-grad ops));
    # each entry names its source: tools/autograd/derivatives.yaml, the autograd engine
    # (torch/csrc/autograd/engine.cpp, input_buffer.cpp), ATen's CUDA kernels
    autograd = eager and ph == "train"
    bwd: dict[str, tuple[list[Op], list[Op]]] = {}

    def grad_op(name: str, layer: str, rows: int, cols: int, fmt: NumberFormat,
                fn: str = "mul", inputs: int = 1, out: NumberFormat | None = None,
                mask: str = "", pass_: str = "bwd_data", *, role: str) -> Elementwise:
        """One backward kernel of ``rows x cols`` elements read in ``fmt``; ``role`` is
        the role of the forward op it belongs to."""
        return Elementwise(name=name, rows=rows, cols=cols, fn=fn, inputs=inputs, a_format=fmt,
                           out_format=out, mask=mask, pass_=pass_, layer=layer, block=blk,
                           role=role)

    def out_fmt(o: Op | str) -> NumberFormat:
        op = w.op(o) if isinstance(o, str) else o
        f = getattr(op, "out_format", None)
        return f if f is not None else op.a_format

    def cast(name: str, layer: str, rows: int, cols: int, src: Op | str,
             dst: NumberFormat, role: str = "elementwise") -> Op | str:
        """autocast's cast of ``src``'s output to ``dst`` (none if it is already ``dst``)."""
        if out_fmt(src) == dst:
            return src
        return b.add(Elementwise(name=name, rows=rows, cols=cols, fn="copy", inputs=1,
                                 a_format=out_fmt(src), out_format=dst, layer=layer,
                                 block=blk, role=role), [src])

    def lin(name: str, layer: str, rows: int, n: int, k: int, role: str,
            after: list[Op | str], bias: bool | None = None, quant: bool = True,
            tied_to: str | None = None) -> Op:
        fa, fw, fc = (a_fmt, w_fmt, acc_fmt) if quant else (FP16, FP16, FP32)
        if eager:   # the fp32 input and the fp32 weight cast to amp (once per step each)
            fa, fw = amp, amp
            after = [cast(f"{name}.cast_in", layer, rows, k, a, amp) for a in after[:1]]
            after.append(b.add(Elementwise(name=f"{name}.cast_w", rows=1, cols=n * k,
                                           fn="copy", inputs=1, a_format=FP32,
                                           out_format=amp, layer=layer, block=blk,
                                           role="elementwise")))
        op = Gemm(name=name, m=rows, n=n, k=k, role=role, layer=layer, block=blk, a_format=fa,
                  w_format=fw, acc_format=fc)
        has_bias = s.bias if bias is None else bias
        if autograd and has_bias:
            # addmm's bias is broadcast over the rows: the engine sums its gradient back to
            # the bias's shape (at::sum_to in validate_outputs), one column reduction reading
            # the whole amp output gradient: ``rows`` inputs of ``n`` elements, ``n`` written
            data, weight = backward_ops(op)
            weight.append(grad_op(f"{name}.bwd_bias", layer, 1, n, amp, fn="add", inputs=rows,
                                  pass_="bwd_weight", role=role))
            bwd[name] = (data, weight)
        return b.add(op, after, bias=n if has_bias else 0, tied_to=tied_to)

    def norm(name: str, layer: str, after: Op) -> Op:
        return norm_cols(name, layer, after, d)

    def norm_cols(name: str, layer: str, after: Op, cols: int, role: str = "norm") -> Op:
        op = b.add(Norm(name=name, rows=m, cols=cols, norm=s.norm, layer=layer, block=blk,
                        role=role, a_format=wide), [after])
        if autograd:
            # native_layer_norm_backward (CUDA): one kernel for the input gradient (reads the
            # output gradient and x, writes dx) and a second for the gain/shift gradients,
            # column sums over the rows of dy * x_hat and dy: it reads dy and x again
            per = 2 if s.norm == "layernorm" else 1
            data, _ = backward_ops(op)
            bwd[name] = (data, [grad_op(f"{name}.bwd_weight", layer, per, cols, wide, fn="add",
                                        inputs=m, pass_="bwd_weight", role=role)])
        return op

    def qk_norm(L: str, qkv: Op) -> Op:
        """RMSNorm of the queries and keys (``s.qk_norm``): per head, rows of ``head_dim``
        (one gain for q and one for k, shared by the heads); per layer, one row of all the
        shard's query and key columns (one gain per column)."""
        if s.qk_norm == "head":
            rows, cols, extra = m * (h + kv), hd, hd
        else:
            rows, cols, extra = m, (h + kv) * hd, 0
        return b.add(Norm(name=f"{L}.attn.qk_norm", rows=rows, cols=cols, norm="rmsnorm",
                          layer=L, block=blk, role="qkv_norm", a_format=wide), [qkv],
                     extra=extra)

    drop = s.dropout and ph == "train"

    def add(name: str, layer: str, rows: int, cols: int, after: list[Op | str],
            fn: str = "add", extra: int = 0, more: int = 0, fmt: NumberFormat | None = None,
            *, role: str) -> Op:
        return b.add(Elementwise(name=name, rows=rows, cols=cols, fn=fn,
                                 inputs=len(after) + more, layer=layer, block=blk, role=role,
                                 a_format=fmt or vec), after, extra=extra)

    def dropout(name: str, layer: str, rows: int, cols: int, x: Op) -> Op:
        """eager_amp: ``nn.Dropout`` as its own kernel (fused: folded into the next add):
        ``native_dropout`` writes the output and a 1-byte bool mask; its backward
        (``native_dropout_backward``: grad * mask * scale) reads the gradient and the mask."""
        if not (eager and drop):
            return x
        fmt = out_fmt(x)
        op = b.add(Elementwise(name=name, rows=rows, cols=cols, fn="mul", inputs=1,
                               mask="write", layer=layer, block=blk, role="elementwise",
                               a_format=fmt), [x])
        bwd[name] = ([grad_op(f"{name}.bwd", layer, rows, cols, fmt, mask="read",
                              role="elementwise")], [])
        return op

    def embedding_backward(op: Op, tied: bool) -> None:
        """eager_amp training: embedding_dense_backward (CUDA) zero-fills a gradient of the
        whole table (at::zeros) before scatter-adding the gathered rows' gradients (the
        index sort's kernels are not counted); a table shared with the LM head then adds this
        gradient to the one the head left in ``.grad`` (AccumulateGrad: one add)."""
        if not autograd or not isinstance(op, Embedding):
            return
        rows_, f = (op.vocab, op.dim), op.w_format
        weight = [grad_op(f"{op.name}.bwd_zero", op.layer, *rows_, f, fn="copy", inputs=0,
                          pass_="bwd_weight", role=op.role), *backward_ops(op)[1]]
        if tied:
            weight.append(grad_op(f"{op.name}.bwd_accumulate", op.layer, *rows_, f, fn="add",
                                  inputs=2, pass_="bwd_weight", role=op.role))
        bwd[op.name] = ([], weight)

    def residual(name: str, layer: str, x: Op, res: Op | str) -> Op:
        if eager:   # amp branch + fp32 stream -> fp32
            if autograd:
                # add's backward passes the gradient on (derivatives.yaml add.Tensor: self:
                # grad); the engine casts the branch's copy to the branch's amp format; the
                # stream ``res`` also feeds the next norm (or, post-norm, the sublayer), so the
                # engine sums its two gradients: one add kernel
                ops: list[Op] = []
                if out_fmt(x) != FP32:
                    ops.append(grad_op(f"{name}.bwd", layer, m, d, FP32, fn="copy",
                                       out=out_fmt(x), role="residual"))
                ops.append(grad_op(f"{name}.bwd_accumulate", layer, m, d, FP32, fn="add",
                                   inputs=2, role="residual"))
                bwd[name] = (ops, [])
            return add(name, layer, m, d, [x, res], fmt=FP32, role="residual")
        return add(name, layer, m, d, [x, res], more=int(drop), role="residual")

    # serving engines run a pre-norm block's residual add and the RMSNorm after it as one
    # kernel (vLLM's fused_add_rms_norm, SGLang, TensorRT-LLM): fused inference graphs defer
    # each such add (name, block, branch, stream) into that norm; eager PyTorch and training
    # (Megatron fuses bias + dropout + add, not the norm) keep the add as its own kernel
    fuse_add = not eager and ph != "train" and s.pre_norm and s.norm == "rmsnorm"
    pending: list[tuple[str, int | None, Op, Op | str]] = []

    def res_add(name: str, layer: str, x: Op, res: Op | str) -> Op:
        """The residual add ``x + res``, or (``fuse_add``) deferred to the next norm."""
        if fuse_add:
            pending.append((name, blk, x, res))
            return x
        return residual(name, layer, x, res)

    def pre_norm(name: str, layer: str, x: Op) -> tuple[Op, Op | str]:
        """(the norm's output, the residual stream after it): a deferred residual add fused
        into the norm (one ``Norm(residual=True)`` reading the branch and the stream,
        writing the new stream and the output), else a plain norm of ``x``. The first norm
        of the stream (block 0's ``ln1``; the final norm of a model without blocks) has no
        add before it and is priced as the fused kernel too (vLLM's first layer runs a plain
        RMSNorm: one hidden vector read and written too many per forward), so that every
        block is priced alike and a model is exactly the sum of its per-block units
        (``workloads.parallel.block_kinds``: serving and plans)."""
        if not fuse_add:
            return norm(name, layer, x), x
        after: list[Op | str] = list(pending.pop()[2:]) if pending else [x]
        op = b.add(Norm(name=name, rows=m, cols=d, norm=s.norm, residual=True, layer=layer,
                        block=blk, role="norm", a_format=wide), after)
        return op, op

    def flush_add() -> Op:
        """The deferred residual add as its own kernel (no norm follows it)."""
        name, bk, branch, stream = pending.pop()
        return b.add(Elementwise(name=name, rows=m, cols=d, fn="add", inputs=2,
                                 layer=f"blocks.{bk}", block=bk, role="residual",
                                 a_format=vec), [branch, stream])

    def activation(L: str, up: Op, gate: Op | None) -> Op:
        """The FFN activation; eager_amp runs the module's expression kernel by kernel."""
        if not eager:
            if gate is not None:
                return add(f"{L}.ffn.act", L, m, ffn, [gate, up], fn="swiglu", role="act")
            return add(f"{L}.ffn.act", L, m, ffn, [up], fn=s.ffn_kind, role="act")
        if gate is not None:     # act(gate) * up: two kernels in amp
            g = add(f"{L}.ffn.act", L, m, ffn, [gate], fn="silu", fmt=amp, role="act")
            if autograd:   # mul.Tensor: grad * up and grad * act, both inputs need grads
                bwd[f"{L}.ffn.act_mul"] = ([
                    grad_op(f"{L}.ffn.act_mul.bwd", L, m, ffn, amp, inputs=2, role="act"),
                    grad_op(f"{L}.ffn.act_mul.bwd_other", L, m, ffn, amp, inputs=2,
                            role="act")], [])
            return add(f"{L}.ffn.act_mul", L, m, ffn, [g, up], fn="mul", fmt=amp, role="act")
        if s.act_impl != "gelu_new":
            return add(f"{L}.ffn.act", L, m, ffn, [up], fn=s.ffn_kind, fmt=amp, role="act")
        # HF NewGELUActivation: 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*pow(x,3)))); pow is on
        # autocast's fp32 list, so x is cast up and every op after it runs in fp32
        x32 = cast(f"{L}.ffn.act.cast", L, m, ffn, up, FP32, role="act")
        cube = add(f"{L}.ffn.act.pow", L, m, ffn, [x32], fn="mul", fmt=FP32, role="act")
        c = add(f"{L}.ffn.act.mul_c", L, m, ffn, [cube], fn="mul", fmt=FP32, role="act")
        inner = add(f"{L}.ffn.act.add_x", L, m, ffn, [up, c], fn="add", fmt=FP32, role="act")
        sc = add(f"{L}.ffn.act.mul_s", L, m, ffn, [inner], fn="mul", fmt=FP32, role="act")
        th = add(f"{L}.ffn.act.tanh", L, m, ffn, [sc], fn="silu", fmt=FP32, role="act")
        one = add(f"{L}.ffn.act.add_1", L, m, ffn, [th], fn="add", fmt=FP32, role="act")
        half = add(f"{L}.ffn.act.mul_h", L, m, ffn, [up], fn="mul", fmt=amp, role="act")
        out = add(f"{L}.ffn.act.mul", L, m, ffn, [half, one], fn="mul", fmt=FP32, role="act")
        if autograd:
            gelu_new_backward(L, x32)
        return out

    def gelu_new_backward(L: str, x32: Op | str) -> None:
        """The kernels autograd runs for NewGELUActivation's backward (derivatives.yaml; the
        engine casts an fp32 gradient to an input's bf16 and sums the gradients of a tensor
        used more than once): 14 kernels of ``m x ffn`` against the nine of the forward."""
        def g(op: str, suffix: str, fmt: NumberFormat, fn: str = "mul", inputs: int = 1,
              out: NumberFormat | None = None) -> Op:
            return grad_op(f"{L}.ffn.act.{op}.{suffix}", L, m, ffn, fmt, fn, inputs, out,
                           role="act")
        cast_back = backward_ops(w.op(x32) if isinstance(x32, str) else x32)[0]
        bwd[f"{L}.ffn.act.cast"] = (cast_back + [   # x feeds the cast, +x and 0.5*x: 2 adds
            g("cast", "bwd_accumulate0", amp, "add", 2),
            g("cast", "bwd_accumulate1", amp, "add", 2)], [])
        bwd[f"{L}.ffn.act.pow"] = ([        # pow_backward: grad * (3 * x.pow(2))
            g("pow", "bwd_square", FP32), g("pow", "bwd_scale", FP32),
            g("pow", "bwd", FP32, inputs=2)], [])
        for op in ("mul_c", "mul_s"):       # a constant times x: grad * constant
            bwd[f"{L}.ffn.act.{op}"] = ([g(op, "bwd", FP32)], [])
        # x + c: the gradient passes on; the engine casts x's copy to bf16
        bwd[f"{L}.ffn.act.add_x"] = ([g("add_x", "bwd", FP32, "copy", out=amp)], [])
        bwd[f"{L}.ffn.act.tanh"] = ([g("tanh", "bwd", FP32, inputs=2)], [])  # tanh_backward
        bwd[f"{L}.ffn.act.add_1"] = ([], [])                           # 1 + t: passes on
        bwd[f"{L}.ffn.act.mul_h"] = ([g("mul_h", "bwd", amp)], [])     # grad * 0.5
        # (0.5 x) * (1 + t): grad * (1 + t) cast to 0.5x's bf16, and grad * 0.5x (its bf16
        # operand counted at fp32: 2 bytes an element high)
        bwd[f"{L}.ffn.act.mul"] = ([
            g("mul", "bwd", FP32, inputs=2), g("mul", "bwd_cast", FP32, "copy", out=amp),
            g("mul", "bwd_other", FP32, inputs=2)], [])

    def bgemm(name: str, layer: str, rows: int, n: int, k: int, batch_: int, role: str,
              after: list[Op | str], extra: int = 0, wf: NumberFormat | None = None,
              held: int = 0) -> Op:
        return b.add(Gemm(name=name, m=rows, n=n, k=k, batch=batch_, role=role, layer=layer,
                          block=blk, a_format=a_fmt, w_format=wf or w_fmt, acc_format=acc_fmt,
                          held=held), after, extra=extra)

    def attn_core(L: str, qk_in: Op, v_in: Op, hk: int, hv: int, groups: int) -> Op:
        """QK^T, softmax, AV over ``h`` heads sharing ``h / groups`` K/V matrices; when every
        head shares one K/V (absorbed MLA decode) the heads are packed into the GEMM rows,
        as FlashMLA does (same MACs, same cache traffic)."""
        mq, bq, g = (q * h, batch, 1) if groups == h else (q, batch * h, groups)
        scores = b.add(Gemm(name=f"{L}.attn.qk", m=mq, n=keys, k=hk, batch=bq,
                            b_is_weight=False, b_shared=g, role="qk", layer=L, block=blk),
                       [qk_in])
        probs = b.add(Softmax(name=f"{L}.attn.softmax", rows=batch * h * q, cols=keys,
                              role="attn", layer=L, block=blk), [scores])
        return b.add(Gemm(name=f"{L}.attn.av", m=mq, n=hv, k=keys, batch=bq,
                          b_is_weight=False, b_shared=g, role="av", layer=L, block=blk),
                     [probs, v_in])

    def mla(L: str, h_in: Op) -> Op:
        """Multi-head latent attention of one block (module doc); returns the projection."""
        nope, rope, vd, r_kv = s.qk_nope_dim, s.qk_rope_dim, s.v_head_dim, s.kv_lora_rank
        if s.q_lora_rank:
            qa = lin(f"{L}.attn.q_a", L, m, s.q_lora_rank, d, "qkv", [h_in], bias=False)
            qa = norm_cols(f"{L}.attn.q_norm", L, qa, s.q_lora_rank, role="qkv_norm")
            qh = lin(f"{L}.attn.q_b", L, m, h * (nope + rope), s.q_lora_rank, "qkv", [qa],
                     bias=False)
        else:
            qh = lin(f"{L}.attn.q", L, m, h * (nope + rope), d, "qkv", [h_in], bias=False)
        kva = lin(f"{L}.attn.kv_a", L, m, r_kv + rope, d, "qkv", [h_in], bias=False)
        kva = norm_cols(f"{L}.attn.kv_norm", L, kva, r_kv, role="qkv_norm")
        rot = add(f"{L}.attn.rope", L, m, h * rope + rope, [qh, kva], fn="mul", role="rope")
        if ph == "decode":
            # weight absorption: q_nope -> latent per head; attention over the latent cache
            # (one shared "KV head" of r_kv + rope); latent -> v per head
            qlat = bgemm(f"{L}.attn.q_absorb", L, batch, r_kv, nope, h, "qkv", [qh, rot])
            ctx_op = attn_core(L, qlat, kva, r_kv + rope, r_kv, h)
            ctx_op = bgemm(f"{L}.attn.v_absorb", L, batch, vd, r_kv, h, "proj", [ctx_op])
        else:
            kv_b = lin(f"{L}.attn.kv_b", L, m, h * (nope + vd), r_kv, "qkv", [kva], bias=False)
            ctx_op = attn_core(L, rot, kv_b, nope + rope, vd, 1)
        return lin(f"{L}.attn.proj", L, m, d, h * vd, "proj", [ctx_op], bias=row_bias)

    def moe(L: str, f_in: Op) -> Op:
        """Mixture-of-experts FFN of one block (module doc); returns the combined output."""
        router = lin(f"{L}.moe.router", L, m, s.experts, d, "router", [f_in], bias=s.bias,
                     quant=False)
        if moe_routing is not None:
            return fused_moe(L, f_in, router)
        scores = b.add(Softmax(name=f"{L}.moe.softmax", rows=m, cols=s.experts, layer=L,
                               block=blk, role="router"), [router])
        if ep > 1:      # whole experts; the tensor-parallel ranks split the tokens
            local, width, tokens = s.experts // ep, s.moe_ffn, -(-m // tp)
        else:           # every expert on every device, its FFN split over tp
            local, width, tokens = s.experts, -(-s.moe_ffn // tp), m
        assigned = tokens * s.top_k * (ep if ep > 1 else 1) * local // s.experts
        assigned = max(1, assigned)
        active = min(local, assigned)
        per = -(-assigned // active)
        if s.capacity_factor > 0:
            per = max(per, math.ceil(s.capacity_factor * assigned / local))
        idle = (local - active) * d * width         # parameters of experts no token reached
        # expert biases (gpt-oss): gate and up of ``width``, down of ``d``, every local expert
        bw, bd = (local * width, local * d) if s.bias else (0, 0)
        # the idle experts stay resident (held), though no token reads them
        gate = bgemm(f"{L}.moe.gate", L, per, width, d, active, "expert_gate", [scores],
                     idle + bw, ew_fmt, local - active)
        up = bgemm(f"{L}.moe.up", L, per, width, d, active, "expert_up", [scores], idle + bw,
                   ew_fmt, local - active)
        act = add(f"{L}.moe.act", L, per * active, width, [gate, up], fn="swiglu",
                  role="expert_act")
        out = bgemm(f"{L}.moe.down", L, per, d, width, active, "expert_down", [act],
                    idle + bd, ew_fmt, local - active)
        parts: list[Op | str] = [out]
        if s.shared_experts:
            parts.append(shared(L, f_in))
        return add(f"{L}.moe.combine", L, m, d, parts, role="combine")

    def shared(L: str, f_in: Op) -> Op:
        """The always-on shared experts of one MoE block (a SwiGLU FFN); returns its down."""
        ws = -(-s.shared_experts * s.moe_ffn // tp)
        sg = lin(f"{L}.moe.shared_gate", L, m, ws, d, "ffn_gate", [f_in], bias=False)
        su = lin(f"{L}.moe.shared_up", L, m, ws, d, "ffn_up", [f_in], bias=False)
        sa = add(f"{L}.moe.shared_act", L, m, ws, [sg, su], fn="swiglu", role="act")
        return lin(f"{L}.moe.shared_down", L, m, d, ws, "ffn_down", [sa], bias=False)

    def fused_moe(L: str, f_in: Op, router: Op) -> Op:
        """The routed experts as one FusedMoE op: every device sees the tokens of the ``ep``
        devices it shares experts with (``tokens x ep``) and holds ``experts / ep``."""
        if ep > 1:
            width, tokens = s.moe_ffn, -(-m // tp) * ep
        else:
            width, tokens = -(-s.moe_ffn // tp), m
        assert moe_routing is not None
        out = b.add(FusedMoE(name=f"{L}.moe.experts", tokens=tokens, hidden=d, width=width,
                             experts=s.experts, top_k=s.top_k, ep=ep, routing=moe_routing,
                             backend=moe_backend(ew_fmt), layer=L, block=blk,
                             a_format=a_fmt, w_format=ew_fmt, acc_format=acc_fmt), [router])
        if not s.shared_experts:
            return out
        return add(f"{L}.moe.combine", L, m, d, [out, shared(L, f_in)], role="combine")

    # --- embeddings ---------------------------------------------------------------------
    if s.kind == "vit":
        conv = Conv2d(name="embed.patch", n=batch, c=s.channels, h=s.image, w=s.image, k=d,
                      r=s.patch, s=s.patch, stride=s.patch, layer="embed", role="embedding")
        b.add(conv, bias=d)
        # class token (d) and learned positions (tokens x d) added to the patch tokens
        x: Op = add("embed.positions", "embed", m, d, [conv], extra=d + s.vit_tokens * d,
                    role="embedding")
    else:
        ef = FP32 if eager else FP16     # fp32 tables under autocast (fused: with_formats)
        tok = b.add(Embedding(name="embed.tokens", tokens=m, dim=s.emb, vocab=vocab,
                              layer="embed", a_format=ef, w_format=ef))
        embedding_backward(tok, s.tied_embeddings and s.kind == "decoder")
        x = all_reduce("embed.allreduce", "embed", tok)
        if s.emb != d:
            x = lin("embed.project_in", "embed", m, d, s.emb, "embedding", [x], bias=False,
                    quant=False)
        parts: list[Op | str] = [x]
        if s.positions == "learned":
            rows = s.position_rows or s.context
            pos = b.add(Embedding(name="embed.positions", tokens=m, dim=d, vocab=rows,
                                  layer="embed", a_format=ef, w_format=ef))
            parts.append(pos)
            embedding_backward(pos, False)
        if s.token_types:
            parts.append(b.add(Embedding(name="embed.token_types", tokens=m, dim=d,
                                         vocab=s.token_types, layer="embed", a_format=ef, w_format=ef)))
        if len(parts) > 1:
            x = add("embed.add", "embed", m, d, parts, fmt=wide, role="embedding")
            if autograd:    # fp32 + fp32: the gradient passes on to both tables, no kernel
                bwd["embed.add"] = ([], [])
        x = dropout("embed.dropout", "embed", m, d, x)
        if s.embed_norm:
            x = norm("embed.norm", "embed", x)

    # --- blocks -------------------------------------------------------------------------
    for i in range(s.layers):
        L = f"blocks.{i}"
        blk = i
        h_in, res = pre_norm(f"{L}.ln1", L, x) if s.pre_norm else (x, x)
        if s.is_mla:
            proj = mla(L, h_in)
        else:
            qkv = lin(f"{L}.attn.qkv", L, m, (h + 2 * kv) * hd, d, "qkv", [h_in],
                      bias=True if s.qkv_bias else None)
            if autograd:
                # q, k, v are split off one projection (GPT-2's c_attn): split_with_sizes'
                # backward concatenates their gradients (at::cat), one copy of the output
                data, weight = bwd.get(qkv.name) or backward_ops(qkv)
                bwd[qkv.name] = ([grad_op(f"{L}.attn.qkv.bwd_split", L, m, (h + 2 * kv) * hd,
                                          amp, fn="copy", role="qkv"), *data], weight)
            qk_in: Op = qkv
            if s.qk_norm:
                qk_in = qk_norm(L, qkv)
            if s.positions == "rope":
                qk_in = add(f"{L}.attn.rope", L, m, (h + kv) * hd, [qk_in], fn="mul",
                            role="rope")
            win = s.window(i)
            sinks = h if s.sinks else 0     # one learned logit per head (parameters)
            if attention == "fused":     # FlashAttention: one kernel, scores stay on chip
                ctx_op: Op = b.add(Attention(
                    name=f"{L}.attn.core", batch=batch, heads=h, kv_heads=kv, q_len=q,
                    kv_len=keys, head_dim=hd, causal=(s.kind == "decoder" and ph != "decode"),
                    window=win, layer=L, block=blk), [qk_in, qkv], extra=sinks)
            else:
                # decode reads only the window's keys; prefill/train scores stay dense
                seen = min(keys, win) if win and ph == "decode" else keys
                scores = b.add(Gemm(name=f"{L}.attn.qk", m=q, n=seen, k=hd, batch=batch * h,
                                    b_is_weight=False, b_shared=h // kv, role="qk", layer=L,
                                    block=blk), [qk_in])
                if s.positions == "alibi":
                    scores = add(f"{L}.attn.alibi", L, batch * h * q, seen, [scores],
                                 role="attn")
                # a sink logit is one more column of each softmax row
                probs = b.add(Softmax(name=f"{L}.attn.softmax", rows=batch * h * q,
                                      cols=seen + (1 if sinks else 0), role="attn", layer=L,
                                      block=blk), [scores], extra=sinks)
                if drop:
                    probs = add(f"{L}.attn.dropout", L, batch * h * q, seen, [probs],
                                fn="mul", more=1, role="attn")
                ctx_op = b.add(Gemm(name=f"{L}.attn.av", m=q, n=hd, k=seen, batch=batch * h,
                                    b_is_weight=False, b_shared=h // kv, role="av", layer=L,
                                    block=blk), [probs, qkv])
            if eager:    # (b, h, q, hd) -> (b, q, h*hd): transpose + contiguous
                ctx_op = add(f"{L}.attn.merge", L, m, h * hd, [ctx_op], fn="copy", fmt=amp,
                             role="elementwise")
                if autograd:    # clone's and permute's backward pass the gradient on
                    bwd[ctx_op.name] = ([], [])
            proj = lin(f"{L}.attn.proj", L, m, d, h * hd, "proj", [ctx_op], bias=row_bias)
        proj = all_reduce(f"{L}.attn.allreduce", L, proj)
        proj = dropout(f"{L}.attn.dropout_out", L, m, d, proj)
        x = res_add(f"{L}.attn.residual", L, proj, res)
        if not s.pre_norm:
            x = norm(f"{L}.ln1", L, x)
        f_in, res = pre_norm(f"{L}.ln2", L, x) if s.pre_norm else (x, x)
        if s.is_moe and i >= s.dense_layers:
            down = moe(L, f_in)
        elif s.ffn_kind == "swiglu":
            gate = lin(f"{L}.ffn.gate", L, m, ffn, d, "ffn_gate", [f_in])
            up = lin(f"{L}.ffn.up", L, m, ffn, d, "ffn_up", [f_in])
            act = activation(L, up, gate)
        else:
            up = lin(f"{L}.ffn.up", L, m, ffn, d, "ffn_up", [f_in])
            act = activation(L, up, None)
        if not (s.is_moe and i >= s.dense_layers):
            down = lin(f"{L}.ffn.down", L, m, d, ffn, "ffn_down", [act], bias=row_bias)
        down = all_reduce(f"{L}.ffn.allreduce", L, down)
        down = dropout(f"{L}.ffn.dropout_out", L, m, d, down)
        x = res_add(f"{L}.ffn.residual", L, down, res)
        if not s.pre_norm:
            x = norm(f"{L}.ln2", L, x)

    # --- head ---------------------------------------------------------------------------
    blk = None
    if s.final_norm:
        x = pre_norm("final_norm", "head", x)[0]
    elif pending:
        x = flush_add()
    if s.kind == "decoder":
        rows = m if ph == "train" else batch
        if s.emb != d:
            x = lin("head.project_out", "head", rows, s.emb, d, "lm_head", [x], bias=False,
                    quant=False)
        tied = "embed.tokens" if s.tied_embeddings else None
        if not eager:
            b.add(Gemm(name="lm_head", m=rows, n=vocab, k=s.emb, role="lm_head",
                       layer="head"), [x], tied_to=tied)
        else:
            logits = lin("lm_head", "head", rows, vocab, s.emb, "lm_head", [x], bias=False,
                         tied_to=tied)
            if ph == "train":   # HF ForCausalLMLoss: logits.float(), then cross_entropy
                lf = cast("head.logits_float", "head", rows, vocab, logits, FP32, role="loss")
                ls = b.add(Softmax(name="head.log_softmax", rows=rows, cols=vocab,
                                   layer="head", role="loss", a_format=FP32), [lf])
                # cross_entropy = log_softmax + nll_loss: nll_loss picks each row's label
                # log-probability and averages them; its backward (CUDA nll_loss_backward)
                # zero-fills a gradient of the whole logits (fp32) and scatters -1/rows
                # into the label column of each row
                b.add(Elementwise(name="head.nll_loss", rows=rows, cols=1, fn="add", inputs=1,
                                  a_format=FP32, layer="head", role="loss"), [ls])
                bwd["head.nll_loss"] = ([
                    grad_op("head.nll_loss.bwd_zero", "head", rows, vocab, FP32, fn="copy",
                            inputs=0, role="loss"),
                    grad_op("head.nll_loss.bwd", "head", rows, 1, FP32, fn="copy",
                            role="loss")], [])
    elif s.kind == "vit":
        b.add(Gemm(name="head", m=batch, n=s.vocab, k=d, role="classifier", layer="head"),
              [x], bias=s.vocab)
    elif s.pooler:
        b.add(Gemm(name="pooler", m=batch, n=d, k=d, role="pooler", layer="head"), [x], bias=d)

    if tp > 1 or ep > 1:       # the model's parameter count, not one shard's
        w.parameters = build_transformer(s, phase, batch, seq, context,
                                         attention=attention).parameters
    if ph == "train":
        return to_training(w, b.params, b.tied, "adam", backward=bwd)
    return w


def _check_ep(s: TransformerShape, ep: int) -> None:
    """Raises WorkloadError unless ``ep`` is 1 or divides the routed experts."""
    _check_int(ep, "ep", 1)
    if ep > 1 and (not s.is_moe or s.experts % ep):
        what = (f"{s.name} has no experts" if not s.is_moe
                else f"must divide {s.name}'s {s.experts} experts")
        raise WorkloadError(Problem(f"expert-parallel degree {ep}: {what}", "ep"))


def _tp_heads(s: TransformerShape, tp: int) -> tuple[int, int]:
    """(query heads, KV heads) of one tensor-parallel shard; KV heads are replicated when
    ``tp`` exceeds them (one per device).

    Raises:
        WorkloadError: ``tp`` does not divide the heads (the message lists valid degrees).
    """
    _check_int(tp, "tp", 1)
    ok = [t for t in range(1, s.heads + 1)
          if s.heads % t == 0 and (s.kv % t == 0 or t % s.kv == 0)]
    if tp not in ok:
        raise WorkloadError(Problem(
            f"tensor-parallel degree {tp} must divide {s.name}'s {s.heads} attention heads "
            f"(and its {s.kv} KV heads, or be a multiple of them); valid: "
            f"{', '.join(map(str, ok))}", "tp"))
    return s.heads // tp, max(1, s.kv // tp)
