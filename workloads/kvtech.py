"""KV-cache techniques, each a switch, the same mechanism objects wherever they run: a serving
replica (``archsim serve``, :class:`archsim.serve.cost.IterationCost`) and one device's graph
of ``archsim run`` / plans (``DeviceBuild.kv``, :meth:`workloads.parallel.DeviceBuild.graph`)
(docs/serving.md, "KV-cache techniques"):

* **prefix caching** (``prefix_hit_rate`` h; SGLang's RadixAttention, Zheng et al. 2024;
  vLLM automatic prefix caching): the first ``floor(h x prompt)`` tokens of every prompt
  (at most ``prompt - 1``: the last prompt token is always computed, it emits the first
  token) are found in the cache. Their prefill is skipped (no QKV/FFN rows, no KV write);
  the computed tokens still attend over them (a chunk of ``c`` tokens after ``p`` cached
  ones). Their whole blocks are shared with the other requests of the prefix: the request
  allocates only its own blocks (the best case of sharing, a shared block counted once
  for a prefix that many requests use).
* **K/V rematerialisation** (``remat``; XQuant, Tomar et al. 2025; the KV-recompute
  family): the cache stores each layer's input activation X (``d_model`` values per token,
  whole on every tensor-parallel device, since each device projects its own K/V heads from
  all of X) instead of K and V (``2 x kv_heads / tp x head_dim``); every decode step
  recomputes K and V of each cached token with the K/V projection GEMM,
  ``2 x d_model x 2 x kv_heads / tp x head_dim`` FLOPs per cached token and layer, priced
  by the design's own model (the ``qkv`` projection op scaled to its K/V columns), then
  attends as before. Refused where X is not smaller than K and V (GQA, MLA, high TP).
* **top-k block attention** (``topk_blocks`` k; Quest, Tang et al. ICML'24): a decode step
  attends to the ``k`` most relevant KV blocks of its context (``min(context, k x
  block_size)`` keys) after a selection pass that reads one min and one max key vector per
  block (Quest's page metadata): the bytes of one key + value per block, priced as a decode
  attention over ``ceil(context / block_size)`` keys.
* **KV offload to host memory** (``offload_gb`` per device; FlexGen, Sheng et al. ICML'23;
  InfiniGen/ShadowKV-style CPU-resident KV): the cache grows by the host blocks; blocks
  beyond the device's are on the host and every iteration with decodes streams them back
  over the host link (``SchedulerSpec.host_gbps``, PCIe 5.0 x16 one way), layer by layer
  behind the compute: ``exposed = max(0, host bytes / link rate - iteration compute)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.graph import Workload
from archsim.workloads.models.transformer import TransformerShape
from archsim.workloads.ops import Attention, Gemm
from archsim.workloads.tags import ATTENTION_CORE_ROLES

__all__ = ["KVTechniques", "prefix_hit_tokens", "offload_exposed_s", "decode_keys", "select_keys",
           "remat_op", "check_phase", "kv_decode_graph", "with_cached_prefix", "KV_FLAGS"]

#: the flag of each technique (``KVTechniques`` field -> command-line flag)
KV_FLAGS = {"prefix_hit_rate": "--prefix-hit-rate", "remat": "--kv-remat",
            "topk_blocks": "--topk-blocks", "offload_gb": "--kv-offload-gb"}
#: the phase each technique changes: prefix caching skips prompt tokens; the others act on
#: the cache a decode step reads
_PHASE = {"prefix_hit_rate": "prefill", "remat": "decode", "topk_blocks": "decode",
          "offload_gb": "decode"}


@dataclass(frozen=True)
class KVTechniques:
    """The KV-cache techniques a replica runs with (all off by default).

    Attributes:
        prefix_hit_rate: share of every prompt found in the prefix cache, in [0, 1).
        remat: store X, recompute K and V at every decode step.
        topk_blocks: KV blocks a decode step attends to (0: all).
        offload_gb: host memory per device for KV blocks beyond the device's (GB; 0: none).
    """

    prefix_hit_rate: float = 0.0
    remat: bool = False
    topk_blocks: int = 0
    offload_gb: float = 0.0

    @property
    def any(self) -> bool:
        return self != KVTechniques()

    def check(self, s: TransformerShape, tp: int, block_size: int) -> None:
        """Refuse a technique the model or deployment cannot use, with the reason.

        Raises:
            WorkloadError: one line naming the flag.
        """
        h = self.prefix_hit_rate
        if not (isinstance(h, (int, float)) and 0 <= h < 1):
            raise WorkloadError(Problem(f"expected a hit rate in [0, 1), got {h!r} (the last "
                                        "prompt token is always computed)",
                                        "--prefix-hit-rate"))
        k = self.topk_blocks
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise WorkloadError(Problem(f"expected a block count >= 0, got {k!r}",
                                        "--topk-blocks"))
        if k and k * block_size >= s.context:
            raise WorkloadError(Problem(
                f"{k} blocks x {block_size} tokens cover {s.name}'s whole {s.context}-token "
                "context: every block is always selected, top-k has nothing to skip",
                "--topk-blocks"))
        g = self.offload_gb
        if not (isinstance(g, (int, float)) and math.isfinite(g) and g >= 0):
            raise WorkloadError(Problem(f"expected host GB >= 0, got {g!r}", "--kv-offload-gb"))
        if self.remat:
            if s.is_mla:
                raise WorkloadError(Problem(
                    f"{s.name} caches a compressed latent ({s.kv_lora_rank + s.qk_rope_dim} "
                    f"values per layer), already smaller than X ({s.d_model}): "
                    "rematerialising from X would grow the cache", "--kv-remat"))
            kv = 2 * max(1, s.kv // tp) * s.hd
            if s.d_model >= kv:
                raise WorkloadError(Problem(
                    f"X ({s.d_model} values per token and layer, whole on every device) is "
                    f"not smaller than {s.name}'s K and V per device (2 x {max(1, s.kv // tp)} "
                    f"heads x {s.hd} = {kv} at tp {tp}): rematerialising saves no memory; "
                    "it pays off for multi-head attention at low tensor parallelism",
                    "--kv-remat"))


def prefix_hit_tokens(prompt: int, rate: float) -> int:
    """Prompt tokens found in the prefix cache: ``floor(rate x prompt)``, at most
    ``prompt - 1`` (the last prompt token is computed: it emits the first output token)."""
    if rate <= 0 or prompt <= 1:
        return 0
    return min(prompt - 1, int(math.floor(rate * prompt)))


def offload_exposed_s(host_bytes: float, link_gbps: float, compute_s: float) -> float:
    """Time the host-to-device streaming of ``host_bytes`` adds to an iteration whose
    compute takes ``compute_s``: layer ``l + 1``'s blocks stream while layer ``l`` computes,
    so only the excess shows, ``max(0, host_bytes / rate - compute_s)``."""
    if host_bytes <= 0:
        return 0.0
    return max(0.0, host_bytes / (link_gbps * 1e9) - compute_s)


def check_phase(kv: KVTechniques, phase: str) -> None:
    """Refuse a technique that changes nothing in ``phase`` (one step of ``archsim run`` or a
    plan; a serving run has both phases): prefix caching acts on a prefill, the others on
    the cache a decode step reads; training uses none.

    Raises:
        WorkloadError: naming the technique's flag and the phase it needs.
    """
    for key, flag in KV_FLAGS.items():
        if getattr(kv, key) and _PHASE[key] != phase:
            what = ("prefix caching skips prompt tokens of a prefill" if key == "prefix_hit_rate"
                    else "it acts on the KV cache a decode step reads")
            raise WorkloadError(Problem(f"{what}; expected --phase {_PHASE[key]}, got {phase}",
                                        flag))


def decode_keys(context: int, k: int, block_size: int) -> int:
    """Keys one decode step attends to over ``context`` cached tokens (it appends one):
    ``context + 1``, with top-k block attention at most ``k x block_size`` (Quest)."""
    n = context + 1
    return min(n, k * block_size) if k else n


def select_keys(context: int, block_size: int) -> int:
    """Key pairs top-k block attention's selection pass scores for one decode step: one
    min/max key pair per block of its ``context + 1`` tokens, ``ceil((context + 1) /
    block_size)`` (priced as a decode attention over that many keys)."""
    return -(-(context + 1) // block_size)


def remat_op(qkv: Gemm, s: TransformerShape, tp: int, keys: int) -> Gemm:
    """K/V rematerialisation's extra GEMM in one block: the K and V projections of ``keys``
    cached tokens from their stored X, ``keys x (2 x max(1, kv / tp) x head_dim) x
    d_model`` (the block's ``qkv`` op restricted to its K/V columns: same formats and
    kernel choices), role ``kv_remat``."""
    return replace(qkv, name=f"{qkv.name}.kv_remat", m=keys, n=2 * max(1, s.kv // tp) * s.hd,
                   role="kv_remat")


def kv_decode_graph(w: Workload, s: TransformerShape, kv: KVTechniques, block_size: int, tp: int,
                    at: Callable[[int], Workload]) -> Workload:
    """``w`` (a decode step over ``w.context`` cached tokens) with top-k block attention and
    K/V rematerialisation (:mod:`workloads.kvtech`): every block's attention core reads
    ``decode_keys`` keys (the ops of ``at(keys - 1)``, the same graph built at that context),
    after the selection pass (the core ops of ``at(select_keys - 1)``, named ``.select``) and
    after the K/V projection of the keys read (``remat_op`` from the block's ``qkv``)."""
    context, batch, bs = w.context, w.batch, block_size
    keys = decode_keys(context, kv.topk_blocks, bs)
    att = at(keys - 1) if keys < context + 1 else None
    sel = at(select_keys(context, bs) - 1) if kv.topk_blocks else None
    out = Workload(w.name, w.phase, w.batch, w.seq, w.context, w.parameters, w.family,
                   tied=w.tied, devices=w.devices, held_bytes=w.held_bytes)
    qkv: dict[int | None, Gemm] = {}
    seen: set[int | None] = set()
    for op in w.ops():
        preds = list(w.predecessors(op.name))
        if isinstance(op, Gemm) and op.role == "qkv" and op.block not in qkv:
            qkv[op.block] = op
        if op.role in ATTENTION_CORE_ROLES and op.block not in seen:
            seen.add(op.block)
            if sel is not None:      # the selection pass: one min/max key pair per block
                for o in sel.ops():
                    if o.block == op.block and o.role in ATTENTION_CORE_ROLES:
                        out.add(replace(o, name=f"{o.name}.select"), preds)
                        preds = [f"{o.name}.select"]
            if kv.remat and op.block in qkv:
                r = remat_op(qkv[op.block], s, tp, batch * keys)
                out.add(r, [qkv[op.block].name])
                preds = preds + [r.name]
        new = op
        if att is not None and op.role in ATTENTION_CORE_ROLES:
            new = att.op(op.name)
            if isinstance(op, Gemm) and isinstance(new, Gemm) and not op.b_is_weight:
                out.held_bytes += op.b_bytes() - new.b_bytes()   # the unread cache stays
        out.add(new, preds)
    return out


def with_cached_prefix(w: Workload, past: int) -> Workload:
    """A prefill of ``w.seq`` new tokens after ``past`` cached ones: ``w`` (built for the new
    tokens) with every attention-core op's keys (an ``Attention`` op's ``kv_len``, the QK
    GEMM's ``n``, the AV GEMM's ``k``, a score op's ``cols``) over ``past + w.seq`` keys; its
    queries stay the new tokens (a causal op skips their masked triangle, ``Attention.pairs``).

    Raises:
        WorkloadError: an attention-core op without a key dimension of ``w.seq`` (naming
            ``--prefix-hit-rate``).
    """
    c, keys = w.seq, past + w.seq
    out = Workload(w.name, w.phase, w.batch, w.seq, past, w.parameters, w.family,
                   tied=w.tied, devices=w.devices, held_bytes=w.held_bytes)
    for op in w.ops():
        new = op
        if op.role in ATTENTION_CORE_ROLES:
            key = ("kv_len" if isinstance(op, Attention) else
                   "n" if isinstance(op, Gemm) and op.role == "qk" else
                   "k" if isinstance(op, Gemm) and op.role == "av" else
                   "cols" if hasattr(op, "cols") else "")
            if not key or getattr(op, key) != c:
                raise WorkloadError(Problem(f"op {op.name} ({op.kind}) has no key dimension of "
                                            f"{c} tokens to extend over a cached prefix",
                                            "--prefix-hit-rate"))
            more: dict[str, Any] = {key: keys}
            new = replace(op, **more)
        out.add(new, w.predecessors(op.name))
    return out
