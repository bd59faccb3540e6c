"""Parallel plans of a transformer: the per-device graphs, their communication and their memory.
(Over 600 lines: :class:`DeviceBuild`, the one builder of per-device work, and the plan's
graphs, communication and memory that share it are kept together; the KV-cache graph
mechanisms it applies live in workloads/kvtech.py.)

A :class:`ParallelPlan` splits a step of a transformer over ``tp x pp x dp x cp`` devices
(Megatron-LM rank order: tensor parallel innermost, then context, data, pipeline outermost;
expert parallelism folds over the ``tp x cp x dp`` ranks of a stage, as Megatron-Core's "MoE
parallel folding", Liu et al. 2025):

* ``tp``: Megatron tensor parallelism (Shoeybi et al. 2019), the existing graph shard;
  ``sequence_parallel`` (Korthikanti et al. 2022) turns each all-reduce into a reduce-scatter
  plus an all-gather of the same size and splits norms, dropouts and residuals over ``tp``;
* ``pp``: pipeline stages of ``layers / pp`` blocks (``interleave`` chunks each), run with
  1F1B (Narayanan et al. 2021); ``microbatches`` per step;
* ``dp``: data parallelism with a gradient all-reduce; ``zero`` 1/2/3 shards optimiser
  states / gradients / weights over ``dp`` (Rajbhandari et al. 2020);
* ``ep``: expert parallelism (experts / ep whole experts per device, token all-to-all);
* ``cp``: context parallelism: each device holds ``seq / cp`` tokens; ring attention passes
  K/V blocks around the ``cp`` ring (Liu et al. 2023), overlapped with attention compute.

The per-device compute is the graph of one block (or the embedding and head) built by the
ordinary builder with ``tp``/``ep`` and costed by the device's own unit model
(``archsim.parallel``): this module only builds the graphs and counts bytes.

Memory per device (bytes; :func:`memory_per_device`), training with mixed-precision Adam:
2 (bf16 weights) + 2 (bf16 gradients) + 12 (fp32 master weights, momentum, variance) bytes per
parameter (ZeRO paper, Sec. 3.1, K = 12), the ZeRO stage dividing the sharded terms by ``dp``;
activations by the closed form of Korthikanti et al. 2022, Sec. 4 (``sbh(34 + 5as/h)``
for a GPT block without parallelism), generalised to grouped-query attention, SwiGLU and
experts by counting the same stored tensors (docs/cluster.md); the first pipeline stage keeps
``min(microbatches, pp)`` microbatches in flight (x ``1 + (pp-1)/(pp v)`` interleaved).
Inference: weights plus the KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from archsim.workloads.collectives import (
    AllGather,
    AllToAll,
    Collective,
    GroupAllReduce,
    ReduceScatter,
)
from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.formats import NumberFormat, get_format
from archsim.workloads.graph import Workload
from archsim.workloads.kvtech import KVTechniques, kv_decode_graph, with_cached_prefix
from archsim.workloads.models.transformer import TransformerShape, _tp_heads, build_transformer
from archsim.workloads.ops import (
    ALLREDUCE_IMPLS,
    ALLREDUCE_MIN_BITS,
    ATTENTION_KERNELS,
    AllReduce,
    Attention,
    Sparsity,
)

__all__ = ["ParallelPlan", "RECOMPUTE", "Comm", "DeviceBuild", "check_plan", "block_graphs",
           "BlockKind", "block_kinds", "default_microbatches",
           "layer_comms", "memory_per_device", "block_counts", "BYTES_PER_PARAM",
           "without_collectives"]

RECOMPUTE = ("none", "selective", "full")

#: bytes per parameter of mixed-precision Adam: bf16 weight, bf16 gradient, fp32 master
#: weight + momentum + variance (Rajbhandari et al. 2020, ZeRO, Sec. 3.1: 2 + 2 + K, K = 12)
BYTES_PER_PARAM = {"weights": 2.0, "grads": 2.0, "optimizer": 12.0}


@dataclass(frozen=True)
class ParallelPlan:
    """How one step is split over devices (module doc).

    Attributes:
        tp, pp, dp, ep, cp: tensor, pipeline, data, expert, context parallel degrees.
        microbatches: microbatches per step of each pipeline (gradient accumulation).
        zero: ZeRO stage (0: replicated; 1: optimiser states, 2: + gradients, 3: + weights
            sharded over dp).
        recompute: activation recomputation: ``none``, ``selective`` (attention scores and
            softmax only; Korthikanti et al. 2022) or ``full`` (every block's forward).
        sequence_parallel: Megatron sequence parallelism over the tp group.
        interleave: model chunks per pipeline stage (interleaved 1F1B; 1 = plain 1F1B).
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    cp: int = 1
    microbatches: int = 1
    zero: int = 0
    recompute: str = "none"
    sequence_parallel: bool = False
    interleave: int = 1

    @property
    def devices(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    def label(self) -> str:
        """``tp8 pp4 dp2 ...`` (degrees > 1 only, then the options that are set)."""
        parts = [f"{k}{v}" for k, v in (("tp", self.tp), ("pp", self.pp), ("dp", self.dp),
                                         ("ep", self.ep), ("cp", self.cp)) if v > 1]
        if self.pp > 1 or self.microbatches > 1:
            parts.append(f"mb{self.microbatches}")
        if self.interleave > 1:
            parts.append(f"v{self.interleave}")
        if self.zero:
            parts.append(f"zero{self.zero}")
        if self.recompute != "none":
            parts.append(f"rc-{self.recompute}")
        if self.sequence_parallel:
            parts.append("sp")
        return " ".join(parts) or "single"


@dataclass(frozen=True)
class DeviceBuild:
    """The choices one device's graph is built with, the same wherever it runs (one device,
    a plan's per-device blocks, a serving replica): ``archsim.api.device_build`` resolves
    them for a design, :meth:`graph` builds with them.

    Attributes:
        attention: ``unfused`` (QK, softmax, AV; dense scores) or ``fused`` (one causal
            ``Attention`` op per layer in prefill/train of decoders, as FlashAttention).
        kernels: ``fused`` or ``eager_amp`` (``build_transformer``).
        a_format, w_format: activation / weight formats given by the user (None: the model's).
        kv_format: KV-cache format (None: the activation format; 16-bit when neither is
            given); it sets the cache's bytes in the memory-fit check and the K/V format of
            every ``Attention`` op.
        native: the design's native format applied when no format is given (None: none).
        attention_kernel: how every ``Attention`` op is called (``Attention.kernel``:
            ``sdpa``, or ``paged``: a serving framework's paged-KV backend).
        tp_allreduce: the implementation of every tensor-parallel ``AllReduce`` op of the
            graph (``AllReduce.impl``: ``nccl``, ``custom-graph``, ``custom-eager``); a plan
            prices its collectives on the cluster with ``PlanOptions.tp_allreduce`` instead.
        weight_sparsity: fraction of zero weights in the blocks' linear layers, run as sparse
            loads + dense MMA (``Workload.with_weight_sparsity``; inference only); 0: dense.
        w_group_size, act_order: group-wise weight scales along K and GPTQ act-order as vLLM
            runs it under tensor parallelism (``Workload.with_weight_groups``); 0: none.
        kv: the KV-cache techniques a decode graph is built with (:mod:`workloads.kvtech`,
            the mechanism objects serving uses): K/V rematerialisation adds each block's K/V
            projection over the keys read (``kvtech.remat_op``); top-k block attention reads
            ``kvtech.decode_keys`` keys after a selection pass over ``kvtech.select_keys``
            (the unread cache stays resident: ``Workload.held_bytes``). Prefix caching is a
            prefill after cached tokens (:meth:`graph`'s ``context``); the KV offload is
            priced by the evaluator (a plan: ``archsim.parallel``).
        kv_block_size: tokens per KV block (top-k's blocks; vLLM's default 16).
        moe_routing: None: a MoE block's routed experts as separate expert GEMMs; else one
            ``FusedMoE`` op per block with this routing (``balanced``, ``power_law:ALPHA``):
            the serving framework's fused MoE kernel (vLLM's), in the experts' own format.
    """

    attention: str = "unfused"
    kernels: str = "fused"
    a_format: str | None = None
    w_format: str | None = None
    kv_format: str | None = None
    native: str | None = None
    attention_kernel: str = "sdpa"
    tp_allreduce: str = "nccl"
    weight_sparsity: float = 0.0
    w_group_size: int = 0
    act_order: bool = False
    kv: KVTechniques = KVTechniques()
    kv_block_size: int = 16
    moe_routing: str | None = None

    def __post_init__(self) -> None:
        for flag, v, ok in (("--attention-kernel", self.attention_kernel, ATTENTION_KERNELS),
                            ("--tp-allreduce", self.tp_allreduce, ALLREDUCE_IMPLS)):
            if v not in ok:
                raise WorkloadError(Problem(f"expected one of {', '.join(ok)}, got {v!r}",
                                            flag))

    def graph(self, s: TransformerShape, phase: str | None, batch: int, seq: int | None,
              context: int | None, tp: int = 1, ep: int = 1) -> Workload:
        """The graph of ``s`` with these choices (``build_transformer``'s arguments).

        A ``prefill`` with ``context`` ``p > 0`` is ``seq`` new tokens after ``p`` cached ones
        (prefix caching, a prefill chunk): every op over the new rows, the attention core's
        queries over ``p + seq`` keys (:func:`with_cached_prefix`). A ``decode`` graph takes
        :attr:`kv`'s remat and top-k (:meth:`_decode_kv`).
        """
        if phase == "prefill" and context:
            return with_cached_prefix(self._graph(s, phase, batch, seq, None, tp, ep), context)
        w = self._graph(s, phase, batch, seq, None if phase == "prefill" else context, tp, ep)
        if phase == "decode" and (self.kv.remat or self.kv.topk_blocks):
            return self._decode_kv(w, s, batch, w.context, tp, ep)
        return w

    def _decode_kv(self, w: Workload, s: TransformerShape, batch: int, context: int, tp: int,
                   ep: int) -> Workload:
        """``w`` with :attr:`kv`'s remat and top-k (:func:`kv_decode_graph`)."""
        return kv_decode_graph(w, s, self.kv, self.kv_block_size, tp,
                               lambda c: self._graph(s, "decode", batch, None, c, tp, ep))

    def _graph(self, s: TransformerShape, phase: str | None, batch: int, seq: int | None,
               context: int | None, tp: int = 1, ep: int = 1) -> Workload:
        """:meth:`graph` without the KV-cache techniques."""
        if self.weight_sparsity and phase == "train":
            raise WorkloadError(Problem(
                "sparse weight loads are an inference kernel (Flash-LLM / SpInfer serve a "
                "pruned model); training updates dense weights", "--weight-sparsity"))
        if self.kernels == "eager_amp":     # autocast's policy sets every op's format
            amp = get_format(self.a_format or "bf16", "--a-format").name
            return self.framework_calls(build_transformer(
                replace(s, a_format=amp, w_format=amp), phase, batch, seq, context, tp, ep,
                attention=self.attention, kernels=self.kernels, moe_routing=self.moe_routing
            ).with_weight_sparsity(self.weight_sparsity))
        w = build_transformer(s, phase, batch, seq, context, tp, ep, attention=self.attention,
                              kernels=self.kernels, moe_routing=self.moe_routing)
        if self.a_format or self.w_format:
            w = w.with_formats(get_format(self.a_format, "--a-format") if self.a_format
                               else None,
                               get_format(self.w_format, "--w-format") if self.w_format
                               else None)
        elif self.native:
            w = w.in_format(get_format(self.native))
        return self.framework_calls(w.with_weight_groups(self.w_group_size, self.act_order, tp)
                                    .with_weight_sparsity(self.weight_sparsity))

    def framework_calls(self, w: Workload) -> Workload:
        """``w`` with every ``Attention`` op called by :attr:`attention_kernel` (its K/V in
        :attr:`kv_format` when given) and every ``AllReduce`` by :attr:`tp_allreduce`;
        ``w`` itself when that changes nothing.

        Raises:
            WorkloadError: ``paged`` attention in a training graph (naming the flag).
        """
        if self.attention_kernel == "sdpa" and self.kv_format is None \
                and self.tp_allreduce == "nccl":
            return w
        if self.attention_kernel == "paged" and w.phase == "train":
            raise WorkloadError(Problem("the paged-KV attention call is an inference call "
                                        "(prefill, decode); a training step's attention is "
                                        "an SDPA call: expected --attention-kernel sdpa",
                                        "--attention-kernel"))
        kvf = get_format(self.kv_format, "--kv-format") if self.kv_format else None
        out = Workload(w.name, w.phase, w.batch, w.seq, w.context, w.parameters, w.family,
                       tied=w.tied, devices=w.devices)
        for op in w.ops():
            new = op
            if isinstance(op, Attention):
                new = replace(op, kernel=self.attention_kernel,
                              kv_format=kvf if kvf is not None else op.kv_format)
            elif isinstance(op, AllReduce):
                new = replace(op, impl=self.tp_allreduce)
            out.add(new, w.graph.predecessors(op.name))
        return out

    def weight_bytes(self, s: TransformerShape, phase: str) -> tuple[float, float]:
        """Bytes per parameter of (embedding and head, blocks): training keeps 16-bit weights
        (mixed precision; BYTES_PER_PARAM); inference serves the weights in ``w_format``
        (everywhere, as the graph), else the model's block format with a 16-bit embedding and
        head, else the design's native format."""
        if phase == "train":
            return BYTES_PER_PARAM["weights"], BYTES_PER_PARAM["weights"]
        name = self.w_format or (self.a_format if self.kernels == "eager_amp" else None)
        if name:
            head = blocks = get_format(name).bytes_per_element
        elif self.native and s.w_format == s.a_format:
            head = blocks = get_format(self.native).bytes_per_element
        else:
            head, blocks = BYTES_PER_PARAM["weights"], get_format(s.w_format).bytes_per_element
        if self.w_group_size:        # a scale and a zero point per group (16-bit each)
            blocks += 2 * 2.0 / self.w_group_size
        if self.weight_sparsity:     # the blocks' weights stored bitmap-compressed
            sp = Sparsity(density=1.0 - self.weight_sparsity, encoding="bitmap")
            blocks = sp.stored_bytes_per_element(blocks)
        return head, blocks

    def stream_format(self, s: TransformerShape) -> NumberFormat:
        """Format of the residual stream a plan's collectives move (tp all-reduce, sequence-
        parallel gather/scatter, expert all-to-all, pipeline send): the activation format
        (given, else the design's native one, else the model's; autocast's under
        ``eager_amp``), at least 16-bit (``workloads.ops.ALLREDUCE_MIN_BITS``: quantised
        linear layers write 16-bit outputs, which the frameworks reduce)."""
        name = self.a_format or self.native or s.a_format
        if self.kernels == "eager_amp":
            name = self.a_format or "bf16"
        f = get_format(name)
        return f if f.bits >= ALLREDUCE_MIN_BITS else get_format("bf16")

    def kv_stream_format(self, s: TransformerShape) -> NumberFormat:
        """Format of the K/V blocks context parallelism exchanges: the KV-cache format when
        given, else :meth:`stream_format`."""
        return get_format(self.kv_format) if self.kv_format else self.stream_format(s)
    def expert_weight_bytes(self, s: TransformerShape, phase: str) -> float:
        """Bytes per routed-expert parameter: the model's ``expert_w_format`` (gpt-oss:
        MXFP4) when inference runs the checkpoint's own formats, else the blocks' bytes
        (:meth:`weight_bytes`)."""
        blk = self.weight_bytes(s, phase)[1]
        own = phase != "train" and not self.w_format and self.kernels != "eager_amp"
        return get_format(s.expert_w_format).bytes_per_element if own and \
            s.expert_w_format else blk

    def kv_bytes(self) -> float:
        """Bytes per cached K or V element (attributes)."""
        name = self.kv_format or self.a_format
        return get_format(name).bytes_per_element if name else 2.0


#: a collective of a block (workloads.collectives): its ``kind``, ``payload_bytes()``,
#: ``devices``, ``group`` and ``pass_`` (``fwd``, or ``bwd_data`` for the backward pass)
Comm = Collective | GroupAllReduce


def _bad(msg: str, key: str) -> Problem:
    return Problem(msg, key)


def check_plan(s: TransformerShape, plan: ParallelPlan, phase: str, batch: int,
               seq: int, context: int = 0) -> int:
    """Validate ``plan`` for ``s``; returns the sequences per microbatch. ``seq`` (prefill,
    train) or ``context`` (decode: cached tokens) is the whole sequence: it must fit the
    model's positions whatever the context-parallel degree.

    Raises:
        WorkloadError: every problem, each naming the plan key (``pp``, ``microbatches`` ...)
            and what would be valid.
    """
    probs: list[Problem] = []
    for k in ("tp", "pp", "dp", "ep", "cp", "microbatches", "interleave"):
        v = getattr(plan, k)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            probs.append(_bad(f"expected an int >= 1, got {v!r}", k))
    if probs:
        raise WorkloadError(probs)
    try:
        _tp_heads(s, plan.tp)
    except WorkloadError as e:
        probs.extend(e.problems)
    if plan.zero not in (0, 1, 2, 3):
        probs.append(_bad(f"expected 0, 1, 2 or 3, got {plan.zero!r}", "zero"))
    if plan.recompute not in RECOMPUTE:
        probs.append(_bad(f"expected one of {', '.join(RECOMPUTE)}, got {plan.recompute!r}",
                          "recompute"))
    chunks = plan.pp * plan.interleave
    if s.layers % chunks:
        ok = [p for p in range(1, s.layers + 1) if s.layers % (p * plan.interleave) == 0]
        probs.append(_bad(f"{s.name}'s {s.layers} blocks do not split into {plan.pp} stages x "
                          f"{plan.interleave} chunks; pipeline degrees that do: "
                          f"{', '.join(map(str, ok))}", "pp"))
    if plan.interleave > 1 and plan.microbatches % plan.pp:
        probs.append(_bad(f"the interleaved schedule needs microbatches ({plan.microbatches}) "
                          f"to be a multiple of pp ({plan.pp})", "microbatches"))
    if plan.ep > 1:
        if not s.is_moe or s.experts % plan.ep:
            probs.append(_bad(f"expert-parallel degree {plan.ep} must divide the experts "
                              f"({s.experts})" if s.is_moe else f"{s.name} has no experts",
                              "ep"))
        elif (plan.tp * plan.cp * plan.dp) % plan.ep:
            probs.append(_bad(f"ep {plan.ep} must divide tp x cp x dp = "
                              f"{plan.tp * plan.cp * plan.dp} (experts fold over those ranks)",
                              "ep"))
    # positions: the whole sequence (or cache + the new token), not a device's cp shard
    if s.kind != "vit":
        pos, key = (context + 1, "context") if phase == "decode" else (seq, "seq")
        if pos > s.context:
            probs.append(_bad(f"{key} {pos - (phase == 'decode')} exceeds {s.name}'s "
                              f"{s.context} positions (whatever the cp degree)", key))
    # (decode splits the KV cache over cp, not the one new token)
    if phase != "decode" and plan.cp > 1 and seq % plan.cp:
        probs.append(_bad(f"seq {seq} is not a multiple of cp {plan.cp}", "cp"))
    if plan.sequence_parallel and plan.tp > 1 and phase != "decode" and \
            (seq // max(1, plan.cp)) % plan.tp:
        probs.append(_bad(f"sequence parallelism needs the tokens per device ({seq}) to be a "
                          f"multiple of tp {plan.tp}", "sequence_parallel"))
    per = plan.dp * plan.microbatches
    if batch % per:
        probs.append(_bad(f"the batch of {batch} sequences does not split into dp {plan.dp} x "
                          f"microbatches {plan.microbatches}; use a multiple of {per}",
                          "microbatches"))
    if phase != "train" and (plan.zero or plan.recompute != "none"):
        key = "zero" if plan.zero else "recompute"
        probs.append(_bad(f"{key} applies to training only (phase {phase})", key))
    if probs:
        raise WorkloadError(probs)
    return batch // per


def default_microbatches(pp: int, dp: int, batch: int) -> int:
    """Microbatches per step when none are asked for: a pipeline (``pp > 1``) runs
    micro-batches of one sequence (``batch / dp`` of them; Megatron-LM's usual choice, the
    smallest bubble ``(pp - 1) / m``); without a pipeline, one microbatch."""
    return max(1, batch // dp) if pp > 1 else 1


def block_counts(s: TransformerShape) -> tuple[int, int]:
    """(dense blocks, MoE blocks)."""
    if not s.is_moe:
        return s.layers, 0
    dense = min(s.dense_layers, s.layers)
    return dense, s.layers - dense


@dataclass(frozen=True)
class BlockKind:
    """One kind of block of a model and how many of its blocks are of it.

    Attributes:
        key: ``dense`` or ``moe`` (the FFN), with ``.w<window>`` for a sliding-window
            attention kind (``moe.w128``; gpt-oss).
        shape: a one-block model of this kind (``layers = 1``; its ``windows`` the kind's
            window when the model has per-block windows).
        count: blocks of this kind (in the range asked for).
        moe: the block's FFN is a mixture of experts.
        window: the block's attention window in tokens (0 = full attention).
    """

    key: str
    shape: TransformerShape
    count: int
    moe: bool
    window: int


def block_kinds(s: TransformerShape, lo: int = 0, hi: int | None = None) -> list[BlockKind]:
    """The distinct kinds of blocks ``lo .. hi - 1`` of ``s`` (all by default), in the order
    they first appear: one per (attention window, dense or MoE FFN) combination, each with a
    one-block model and its count. The per-block unit every split of the model shares
    (serving's ``IterationCost``, plans' :func:`block_graphs`): a model is
    ``sum over kinds of count x one block of the kind`` plus the embedding and the head.
    A model with one kind of block gives one kind whose shape is ``layers = 1`` of it."""
    hi = s.layers if hi is None else hi
    counts: dict[tuple[int, bool], int] = {}
    for i in range(lo, hi):
        k = (s.window(i), s.is_moe and i >= s.dense_layers)
        counts[k] = counts.get(k, 0) + 1
    out = []
    for (win, moe), n in counts.items():
        one = replace(s, layers=1)
        if s.is_moe:
            one = replace(one, dense_layers=0 if moe else 1)
        if s.windows:
            one = replace(one, windows=(win,))
        key = ("moe" if moe else "dense") + (f".w{win}" if win else "")
        out.append(BlockKind(key, one, n, moe, win))
    return out


def block_graphs(s: TransformerShape, plan: ParallelPlan, phase: str, micro_batch: int,
                 seq: int | None, context: int | None,
                 build: DeviceBuild = DeviceBuild()) -> dict[str, Workload]:
    """The per-device graphs a plan's step is made of, for one microbatch, each built by
    ``build`` (the single-device choices: attention, kernels, formats):

    ``base`` (embedding, final norm and head, no blocks) and, for each kind of block
    (:func:`block_kinds`: ``dense``, ``moe``, ``moe.w128`` ...), base + one block of that
    kind under its key. Tokens are the device's own (``seq / cp``); decode with ``cp``
    holds ``context / cp`` of the cache.
    """
    seq_l = None if seq is None else seq // plan.cp if phase != "decode" else seq
    ctx_l = None if context is None else max(0, context // plan.cp)
    if phase == "decode" and plan.cp > 1 and ctx_l is None:
        ctx_l = (s.context // 2) // plan.cp
    out: dict[str, Workload] = {}
    zero = replace(s, layers=0, windows=())
    out["base"] = build.graph(zero, phase, micro_batch, seq_l, ctx_l, plan.tp)
    for k in block_kinds(s):
        out[k.key] = build.graph(k.shape, phase, micro_batch, seq_l, ctx_l, plan.tp,
                                 plan.ep if k.moe else 1)
    return out


def without_collectives(w: Workload) -> Workload:
    """A copy of ``w`` without its all-reduce ops (their consumers depend on their producers
    instead): a plan prices collectives on the cluster, and a device family without a link
    model (PIM, FPGA, spatial arrays) can then run a tensor-parallel shard."""

    out = Workload(w.name, w.phase, w.batch, w.seq, w.context, w.parameters, w.family,
                   tied=w.tied, devices=w.devices)
    deps: dict[str, list[str]] = {}
    for op in w.ops():
        pre: list[str] = []
        for p in w.graph.predecessors(op.name):
            pre.extend(deps.get(p, [p]))
        if isinstance(op, AllReduce):
            deps[op.name] = pre
            continue
        out.add(op, list(dict.fromkeys(pre)))
    return out


def layer_comms(s: TransformerShape, plan: ParallelPlan, phase: str, micro_batch: int,
                seq: int, moe: bool, build: DeviceBuild | None = None) -> list[Comm]:
    """Collectives of one block for one microbatch on one device (forward, then backward
    for training; full recomputation repeats the forward tensor-parallel ones), in
    ``build``'s stream format (:meth:`DeviceBuild.stream_format`; the K/V exchange in
    :meth:`DeviceBuild.kv_stream_format`; default 16-bit).

    * tp: two all-reduces of ``tokens x d`` (attention output, FFN output), each an
      all-gather + reduce-scatter pair with sequence parallelism;
    * ep (MoE blocks): dispatch and combine all-to-all of ``tokens/tp x top_k x d``;
    * cp (prefill/train): the ring passes K and V of every other device:
      an all-gather of ``cp x`` the device's K/V block; decode: an all-reduce of the partial
      attention outputs (``tokens x d``).
    """
    tokens = micro_batch * (seq // plan.cp if phase != "decode" else 1)
    out: list[Comm] = []
    passes = ["fwd"] + (["bwd_data"] if phase == "train" else [])
    if phase == "train" and plan.recompute == "full":
        passes.append("bwd_data")   # the recomputed forward runs inside the backward pass
    hl, kvl = _tp_heads(s, plan.tp)
    st = build.stream_format(s) if build is not None else get_format("fp16")
    kvf = build.kv_stream_format(s) if build is not None else st
    for i, p in enumerate(passes):
        grad = i == 1
        if plan.tp > 1:
            full = tokens * s.d_model
            for part in ("attn", "ffn"):
                if plan.sequence_parallel:
                    out.append(AllGather(name=f"{part}.tp.ag", elements=full, devices=plan.tp,
                                         group="tp", pass_=p, a_format=st))
                    out.append(ReduceScatter(name=f"{part}.tp.rs", elements=full,
                                             devices=plan.tp, group="tp", pass_=p,
                                             a_format=st))
                else:
                    out.append(GroupAllReduce(name=f"{part}.tp", elements=full,
                                              devices=plan.tp, group="tp", pass_=p,
                                              a_format=st))
        if moe and plan.ep > 1:
            disp = -(-tokens // plan.tp) * s.top_k * s.d_model
            for nm in ("moe.dispatch", "moe.combine"):
                out.append(AllToAll(name=nm, elements=disp, devices=plan.ep, group="ep",
                                    pass_=p, a_format=st))
        if plan.cp > 1:
            if phase == "decode":
                out.append(GroupAllReduce(name="cp.combine", elements=tokens * s.d_model,
                                          devices=plan.cp, group="cp", pass_=p, a_format=st))
            else:
                kv_dim = (s.kv_lora_rank + s.qk_rope_dim) if s.is_mla else 2 * kvl * s.hd
                block = tokens * kv_dim
                out.append(AllGather(name="cp.kv", elements=block * plan.cp * (2 if grad else 1),
                                     devices=plan.cp, group="cp", pass_=p,
                                     a_format=st if grad else kvf))
    return out


def _layer_activation_bytes(s: TransformerShape, plan: ParallelPlan, micro_batch: int,
                            seq: int, moe: bool) -> float:
    """Stored activations of one block for one microbatch (Korthikanti et al. 2022, Sec. 4,
    generalised; module doc). ``seq`` is the device's tokens per sequence (after cp)."""
    sb = seq * micro_batch
    t = plan.tp
    h = s.d_model
    hl, kvl = _tp_heads(s, t)
    if plan.recompute == "full":
        return 2 * sb * h / (t if plan.sequence_parallel else 1)
    if s.is_mla:
        qd = kd = hl * (s.qk_nope_dim + s.qk_rope_dim)
        vd = pd = hl * s.v_head_dim
    else:
        qd, kd, vd, pd = hl * s.hd, kvl * s.hd, kvl * s.hd, hl * s.hd
    # not split by tp: norm inputs (2 x 2sbh), QKV and FFN inputs (2 x 2sbh), 2 dropout masks
    unsplit = float((4 + 4 + 2) * sb * h)
    if plan.sequence_parallel:
        unsplit /= t
    split = 2 * sb * (qd + kd + vd + pd)          # Q, K, V, projection input (per shard)
    if moe:     # gate, up, activation outputs of the routed and shared experts; scores
        routed = (-(-sb // t) * s.top_k * 3 * s.moe_ffn if plan.ep > 1
                  else sb * s.top_k * 3 * (-(-s.moe_ffn // t)))
        shared = sb * 3 * (-(-s.shared_experts * s.moe_ffn // t))
        split += 2 * (routed + shared + sb * s.experts)
    elif s.ffn_kind == "swiglu":
        split += 2 * sb * 3 * (-(-s.ffn // t))     # gate, up, activation outputs
    else:
        split += 2 * sb * 2 * (-(-s.ffn // t))     # first linear output, activation output
    scores = 0.0
    if plan.recompute == "none":
        keys = seq * plan.cp                        # ring attention: scores over every key
        scores = 5 * hl * seq * keys * micro_batch  # softmax out (2) + dropout mask (1) + ...
    return unsplit + split + scores


def memory_per_device(s: TransformerShape, plan: ParallelPlan, phase: str, batch: int,
                      seq: int, context: int, params: dict[str, int],
                      build: DeviceBuild = DeviceBuild()) -> dict[str, float]:
    """Bytes resident on the most loaded device (module doc).

    Args:
        params: parameter counts ``base`` (embedding + head + final norm), ``dense`` and
            ``moe`` (one block each, experts included) and ``expert`` (the routed experts of
            one MoE block), from the built graphs.
        build: the graphs' formats (:meth:`DeviceBuild.weight_bytes`, ``kv_bytes``).

    Returns:
        ``weights``, ``grads``, ``optimizer``, ``activations``, ``kv_cache`` and ``total``.
    """
    dense, moe = block_counts(s)
    pp, tp = plan.pp, plan.tp
    # the stage with the most blocks and, with pp > 1, the head (the embedding's twin)
    base = params["base"] if pp == 1 else params["base"] / 2
    nonexp = (dense * params.get("dense", 0) + moe * (params.get("moe", 0) - params.get("expert", 0)))
    exp = moe * params.get("expert", 0)
    exp_split = plan.ep if plan.ep > 1 else tp
    per_dev = (base + nonexp / pp) / tp + exp / pp / exp_split
    # training keeps bf16 weights; inference serves them in the graphs' weight format
    wb, blk = build.weight_bytes(s, phase)
    w = (base / tp) * wb + (per_dev - base / tp) * blk
    eb = build.expert_weight_bytes(s, phase)
    if eb != blk:       # the routed experts' share in their own format (gpt-oss: MXFP4)
        w += exp / pp / exp_split * (eb - blk)
    out = {"weights": w, "grads": 0.0, "optimizer": 0.0, "activations": 0.0, "kv_cache": 0.0}
    if phase == "train":
        dp = plan.dp
        out["optimizer"] = per_dev * BYTES_PER_PARAM["optimizer"] / (dp if plan.zero >= 1 else 1)
        out["grads"] = per_dev * BYTES_PER_PARAM["grads"] / (dp if plan.zero >= 2 else 1)
        out["weights"] = w / (dp if plan.zero >= 3 else 1)
        mb = batch // (plan.dp * plan.microbatches)
        seq_l = seq // plan.cp
        per_layer = (dense * _layer_activation_bytes(s, plan, mb, seq_l, False)
                     + moe * _layer_activation_bytes(s, plan, mb, seq_l, True)) / s.layers
        inflight = float(min(plan.microbatches, pp))
        if plan.interleave > 1:
            inflight *= 1 + (pp - 1) / (pp * plan.interleave)
        act = per_layer * (s.layers / pp) * inflight
        if plan.recompute == "full":     # one block's full activations while it recomputes
            act += _layer_activation_bytes(s, replace(plan, recompute="none"), mb, seq_l,
                                           moe > 0)
        # fp32 logits of the vocabulary shard on the last stage
        act += 4 * mb * seq_l * (-(-s.vocab // tp))
        out["activations"] = act
    else:
        b_dev = batch // plan.dp
        # prefill: the new tokens and the cached prefix before them (prefix caching)
        ctx = (context + 1 if phase == "decode" else seq + context) / plan.cp
        _, kvl = _tp_heads(s, tp)
        per_tok = (s.kv_lora_rank + s.qk_rope_dim) if s.is_mla else 2 * kvl * s.hd
        if build.kv.remat:      # X (d_model values, whole on every tp device) for K and V
            per_tok = s.d_model
        # a sliding-window block keeps only its last ``window`` tokens (vLLM's hybrid KV
        # cache manager, TensorRT-LLM's variable sliding window)
        layers = sum(min(ctx, s.window(i) or ctx) for i in range(s.layers)) / ctx \
            if s.windows and ctx > 0 else float(s.layers)
        out["kv_cache"] = build.kv_bytes() * (layers / pp) * b_dev * ctx * per_tok
    out["total"] = sum(out.values())
    return out
