"""Evaluate a parallel plan of a transformer on a cluster: step time, its breakdown, memory per
device and energy. (Over 600 lines: one step model -- its breakdown, memory and energy share
the per-block times -- kept in one place; the overlap mechanism lives in mapper/overlap.py.)

The per-device compute comes from the device's own unit model (any family) through
:func:`archsim.evaluate` on three small graphs (:func:`workloads.parallel.block_graphs`):
the embedding and head, one dense block and one MoE block, each for one microbatch on one
device. Their per-op times are split into forward, backward and optimiser update by the ops'
tags (:mod:`workloads.tags`: pass, block, role; never by name); the tensor-parallel
all-reduces in those graphs are dropped and every collective is priced on the cluster by
:mod:`arch.collective` instead (one model for all of them).

Step (training; docs/cluster.md has the derivation):

* per block and microbatch: ``f`` forward and ``b`` backward compute; selective recompute adds
  the attention core's forward (roles ``qk``, ``attn``, ``av`` or the fused ``attention``) to
  ``b``, full recompute the whole forward; sequence parallelism divides a block's norm /
  residual ops by ``tp``; context parallelism multiplies the attention core by ``cp`` (each
  device's queries meet every key); routed-expert ops are scaled by ``moe_imbalance``
  (hottest device / mean);
* communication per block: tp collectives (exposed, or overlapped with the other half of a
  split batch -- TokenWeave / NanoFlow -- when ``tp_overlap``: per block ``2 max(c_half x
  slow, k_half)`` with ``slow = SMs / (SMs - comm_sms)``), the expert all-to-alls, the ring
  attention K/V exchange (hidden behind the attention core, exposed beyond it);
* a stage = ``layers / pp`` blocks (+ the head on the last stage), plus the pipeline
  send/recv of the activations (``tokens x d / tp`` with the scatter/gather optimisation);
  pipeline: :func:`mapper.plan.pipeline_time`;
* data parallelism: the gradient all-reduce (reduce-scatter + all-gather with ZeRO >= 1) of
  the stage's gradients, bucketed and overlapped with the last microbatch's backward
  (exposed: ``max(t_dp / buckets, t_dp - t_b)``; inside a node it shares the links with the
  backward's tensor-parallel collectives: half the bandwidth); ZeRO-3 all-gathers the weights in every
  forward and backward (prefetched: exposed beyond the compute it overlaps);
* the optimiser update once per step (divided by ``dp`` with ZeRO >= 1).

Energy: every device runs its graphs (their energy, static power included, over their busy
time) and idles at its static power for the rest of the step -- the pipeline bubble, exposed
collectives, the wait on the slowest stage; links add their energy per bit. So
``energy = devices x (E_busy + P_static x (step - busy)) + E_links`` (``PlanResult`` keeps each
term). A power cap (``PlanOptions.power_cap``, a fraction of the board's power limit) lowers
the limit of every unit with a DVFS model (``arch/gpu/power.py``): each kernel then runs at the
highest clock whose board power fits, trading time for energy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import archsim.energy as _energy
from archsim.api import VERSION, device_build, evaluate, with_format_hint
from archsim.arch.accelerator import load_data
from archsim.arch.cluster import Cluster
from archsim.arch.collective import collective, multimem_allreduce, place
from archsim.mapper.overlap import Overlap, blocks_makespan, check_overlap
from archsim.mapper.plan import bubble_fraction, pipeline_time
from archsim.offload import (
    Offload,
    offload_memory,
    offload_pipeline,
    offload_time,
    tier_bytes_per_s,
)
from archsim.result import OpResult, Result
from archsim.varlen import Varlen, VarlenStats, varlen_step
from archsim.workloads.errors import ConfigError, MappingError, Problem, WorkloadError
from archsim.workloads.graph import Workload
from archsim.workloads.hf import config_path, shape_from_hf_config
from archsim.workloads.kvtech import (
    KVTechniques,
    check_phase,
    decode_keys,
    offload_exposed_s,
    prefix_hit_tokens,
)
from archsim.workloads.models.transformer import TransformerShape
from archsim.workloads.ops import Attention
from archsim.workloads.parallel import (
    Comm,
    DeviceBuild,
    ParallelPlan,
    block_graphs,
    block_kinds,
    check_plan,
    layer_comms,
    memory_per_device,
    without_collectives,
)
from archsim.workloads.tags import (
    ATTENTION_CORE_ROLES,
    EXPERT_ROLES,
    FUSED_AR_NORM_ROLES,
    SEQUENCE_PARALLEL_ROLES,
)
from archsim.workloads.zoo import model_names, transformer_shape

__all__ = ["PlanOptions", "PlanResult", "evaluate_plan", "shape_of", "cp_scale", "power_capped"]


@dataclass(frozen=True)
class PlanOptions:
    """Modelling options of a plan evaluation.

    Attributes:
        overlap_dp: overlap the gradient all-reduce with the backward pass (bucketed).
        dp_buckets: gradient buckets (Megatron/DDP: ~25-40 MB each; the first is exposed).
        tp_overlap: overlap tensor-parallel collectives with the other half of the batch
            (TokenWeave, Gond et al. 2025; NanoFlow, Zhu et al. 2024).
        comm_sms: SMs (or the compute share, in SMs of the first unit) a collective takes
            while it overlaps compute (TokenWeave: 8 of 132 for its fused all-reduce kernel).
        moe_imbalance: tokens of the busiest expert device / the mean (1 = balanced).
        tp_allreduce: the tensor-parallel all-reduce's implementation (``collective``'s
            ``impl``): ``nccl`` (default), or vLLM's custom all-reduce in a CUDA graph
            (``custom-graph``) or eager (``custom-eager``); inside one node only.
        power_cap: every device's board power limit as a fraction of its own
            (``nvidia-smi -pl``; 1 = as configured): :func:`power_capped`.
        offload: training state offloaded to host DRAM or NVMe (:mod:`archsim.offload`:
            the memory it frees, the exposed transfer and the CPU update it adds).
        varlen: a training step over variable-length documents packed into the sequences
            (:mod:`archsim.varlen`); None: every sequence is one full-length document.
        overlap: overlap inside one device in prefill and decode
            (:class:`mapper.overlap.Overlap`: nano-batching, token-splitting, the fused
            all-reduce + RMSNorm; docs/cluster.md); refused for training and where the design
            cannot run it (:func:`check_overlap`).
    """

    overlap_dp: bool = True
    dp_buckets: int = 8
    tp_overlap: bool = False
    comm_sms: int = 8
    moe_imbalance: float = 1.0
    tp_allreduce: str = "nccl"
    power_cap: float = 1.0
    offload: Offload = Offload()
    varlen: Varlen | None = None
    overlap: Overlap = Overlap()


@dataclass(frozen=True)
class PlanResult:
    """One plan on one cluster.

    Attributes:
        plan: the plan; devices = plan.devices.
        step_s: time of one step (training iteration; prefill of the batch; one decode step).
        breakdown_s: where the step goes (compute, bubble, tp/ep/cp/pp/dp communication,
            optimizer); the parts sum to ``step_s``.
        memory_bytes: per-device memory by kind (``workloads.parallel.memory_per_device``).
        capacity_bytes: the device's memory; ``fits`` = total <= capacity.
        energy_j: all devices and links for one step.
        tokens_per_s: tokens of the step / step_s.
        flops_per_device_s: achieved FLOP/s of one device.
        block: per-block times of the dense (or MoE) block for one microbatch.
        attention_flops: FLOPs of the attention core (roles ``qk``, ``attn``, ``av`` or the
            fused ``attention``; matrix FLOPs, 2 per MAC) one device runs in a step.
        build: the choices the per-device graphs were built with (attention, formats).
        batch, seq: sequences per step and tokens per sequence (1 for decode).
        power_cap: the devices' power limit as a fraction of the board's (``PlanOptions``).
        busy_s: time one device computes in a step (its graphs x microbatches + the update);
            the rest of ``step_s`` it waits (bubble, exposed collectives).
        busy_energy_j: energy of one device over ``busy_s`` (its graphs' energy, static power
            included).
        idle_power_w: one device's static (idle) power, drawn while it waits.
        link_energy_j: energy of the links (all collectives of the step).
        offload: the offload's label (``offload-optimizer@host``; "" = none).
        varlen: what variable-length documents did to the step (:class:`VarlenStats`), or
            None.
        overlap: the overlap inside one device the step ran with (``Overlap.label``).
    """

    model: str
    phase: str
    cluster: str
    plan: ParallelPlan
    step_s: float
    breakdown_s: Mapping[str, float]
    memory_bytes: Mapping[str, float]
    capacity_bytes: float
    fits: bool
    energy_j: float
    tokens_per_s: float
    flops_per_device_s: float
    block: Mapping[str, float] = field(default_factory=dict)
    input_hash: str = ""
    attention_flops: float = 0.0
    build: DeviceBuild = DeviceBuild()
    power_cap: float = 1.0
    batch: int = 0
    seq: int = 0
    busy_s: float = 0.0
    busy_energy_j: float = 0.0
    idle_power_w: float = 0.0
    link_energy_j: float = 0.0
    offload: str = ""
    varlen: VarlenStats | None = None
    overlap: str = "none"

    def label(self) -> str:
        """The plan's label, with the power cap and the offload when there are ones
        (``tp8 cap70%``, ``dp8 offload-optimizer@host``)."""
        cap = f" cap{self.power_cap:.0%}" if self.power_cap != 1.0 else ""
        return self.plan.label() + cap + (f" {self.offload}" if self.offload else "")

    def device_hours(self) -> float:
        """Devices x step time, in device-hours: what a step costs at a price per hour."""
        return self.plan.devices * self.step_s / 3600.0

    def row(self) -> dict[str, Any]:
        """JSON-able summary."""
        return {"plan": self.plan.label(), "devices": self.plan.devices, "step_s": self.step_s,
                "power_cap": self.power_cap, "device_hours": self.device_hours(),
                "tokens_per_s": self.tokens_per_s, "energy_j": self.energy_j,
                "memory_gb": self.memory_bytes["total"] / 1e9,
                "capacity_gb": self.capacity_bytes / 1e9, "fits": self.fits,
                "breakdown_s": dict(self.breakdown_s), "block_s": dict(self.block),
                "attention_flops": self.attention_flops, "build": asdict(self.build),
                **({"varlen": self.varlen.row()} if self.varlen else {}),
                "overlap": self.overlap}


def shape_of(model: str | TransformerShape) -> TransformerShape:
    """The shape of a zoo transformer or of a Hugging Face ``config.json`` (a shape passes)."""
    if isinstance(model, TransformerShape):
        return model
    cfg = config_path(model)
    if cfg is not None:
        return shape_from_hf_config(cfg)

    if model in model_names():
        try:
            return transformer_shape(model)
        except WorkloadError:
            raise WorkloadError(Problem(f"parallel plans apply to transformers; {model} is a "
                                        "CNN", "model")) from None
    return transformer_shape(model)


@dataclass
class _Times:
    fwd: float = 0.0
    bwd: float = 0.0
    upd: float = 0.0
    attn_fwd: float = 0.0
    attn_bwd: float = 0.0
    e_fwd: float = 0.0           # energy (J) of the forward ops, the backward, the update
    e_bwd: float = 0.0
    e_upd: float = 0.0
    e_attn_fwd: float = 0.0      # of the attention core's forward (selective recompute)
    flops: float = 0.0
    attn_flops: float = 0.0
    # causal fused attention cores by window: [fwd s, bwd s, fwd J, bwd J, FLOPs]
    docs: dict[int, list[float]] = field(default_factory=dict)

    def step_energy_j(self, train: bool, recompute: str) -> float:
        """Energy of one microbatch's passes, the recomputed forward included (not the
        update, which runs once per step)."""
        if not train:
            return self.e_fwd
        again = {"selective": self.e_attn_fwd, "full": self.e_fwd}.get(recompute, 0.0)
        return self.e_fwd + self.e_bwd + again


def cp_scale(g: Workload, cp: int, phase: str) -> dict[str, float]:
    """Context parallelism's factor on each attention-core op of a device's graph (ops
    selected by role), keyed by op name to join them with their result rows.

    The graph holds the device's ``q = seq / cp`` tokens; the device's queries meet the keys
    of the whole sequence. Dense scores (unfused ``qk``/``attn``/``av``, encoders): ``cp``.
    A causal fused op: the device's share of the whole sequence's causal pairs (load-balanced
    chunks, as Megatron-Core's CP) over the local ones, ``(seq (seq+1) / 2 / cp) /
    (q (q+1) / 2) = (seq + 1) / (q + 1)`` (``Attention.pairs``). Decode splits the cache
    over ``cp`` (the graph already holds ``context / cp``): 1.
    """
    out: dict[str, float] = {}
    if cp == 1 or phase == "decode":
        return out
    for op in g.ops():
        if op.role not in ATTENTION_CORE_ROLES:
            continue
        if isinstance(op, Attention) and op.causal:
            whole = replace(op, q_len=op.q_len * cp, kv_len=op.kv_len * cp)
            out[op.name] = whole.pairs() / cp / op.pairs()
        else:
            out[op.name] = float(cp)
    return out


def doc_windows(g: Workload) -> dict[str, int]:
    """The causal fused attention cores of a graph (roles selected by tag) and their sliding
    windows (0: none), by op name: the ops a document mask shortens (:mod:`archsim.varlen`;
    dense scores are computed whole and masked, so they do not change)."""
    return {op.name: op.window for op in g.ops()
            if op.role in ATTENTION_CORE_ROLES and isinstance(op, Attention) and op.causal}


def _scaled(o: OpResult, plan: ParallelPlan, imbalance: float, scale: Mapping[str, float]
            ) -> tuple[float, float]:
    """(latency, context-parallel factor) of one op row on a device of ``plan``: sequence
    parallelism divides norms and residuals by ``tp``, context parallelism scales the
    attention core (:func:`cp_scale`), routed experts take the imbalance."""
    lat = o.latency_s
    if plan.sequence_parallel and plan.tp > 1 and o.block is not None \
            and o.role in SEQUENCE_PARALLEL_ROLES:
        lat /= plan.tp
    f_cp = scale.get(o.name, 1.0) if o.role in ATTENTION_CORE_ROLES else 1.0
    lat *= f_cp
    if o.role in EXPERT_ROLES:
        lat *= imbalance
    return lat, f_cp

def _split(res: Result, block: int | None, plan: ParallelPlan, imbalance: float,
           scale: Mapping[str, float], windows: Mapping[str, int] | None = None) -> _Times:
    """Per-pass times of the ops of ``res`` in block ``block`` (None: those outside blocks),
    selected and scaled by their tags (module doc); ``scale``: :func:`cp_scale`;
    ``windows``: :func:`doc_windows` (the ops whose times documents change)."""
    t = _Times()
    windows = windows or {}
    for o in res.ops:
        if o.block != block:
            continue
        if o.role == "collective":         # priced on the cluster (arch.collective)
            continue
        lat, f_cp = _scaled(o, plan, imbalance, scale)
        core = o.role in ATTENTION_CORE_ROLES
        e = o.energy_j * (lat / o.latency_s if o.latency_s > 0 else 1.0)
        t.flops += o.macs * 2 * f_cp
        if core:
            t.attn_flops += o.macs * 2 * f_cp
        if o.name in windows:
            d = t.docs.setdefault(windows[o.name], [0.0] * 5)
            bwd = o.pass_group == "backward"
            d[1 if bwd else 0] += lat
            d[3 if bwd else 2] += e
            d[4] += o.macs * 2 * f_cp
        if o.pass_group == "optimizer":
            t.upd += lat
            t.e_upd += e
        elif o.pass_group == "backward":
            t.bwd += lat
            t.e_bwd += e
            if core:
                t.attn_bwd += lat
        else:
            t.fwd += lat
            t.e_fwd += e
            if core:
                t.attn_fwd += lat
                t.e_attn_fwd += e
    return t


def _stride(plan: ParallelPlan, dim: str) -> tuple[int, int]:
    """(group size, rank stride) of a parallel dimension (module doc of workloads.parallel)."""
    return {"tp": (plan.tp, 1), "cp": (plan.cp, plan.tp), "ep": (plan.ep, 1),
            "dp": (plan.dp, plan.tp * plan.cp), "pp": (plan.pp, plan.tp * plan.cp * plan.dp)
            }[dim]


def evaluate_plan(cluster: Cluster, model: str | TransformerShape, plan: ParallelPlan, phase: str = "train",
                  batch: int = 1, seq: int | None = None, context: int | None = None,
                  options: PlanOptions = PlanOptions(), memo: dict | None = None,
                  build: DeviceBuild | None = None) -> PlanResult:
    """Step time, breakdown, memory and energy of ``plan`` for ``model`` on ``cluster``.

    Each device's graphs are built with the choices a single device makes
    (``build``; default :func:`archsim.api.device_build` of the cluster's device: its
    attention, its native format), so a plan of degree 1 is ``archsim.evaluate`` of the model.

    Args:
        cluster: the cluster (``arch.cluster.load_cluster`` or ``single_node``).
        model: a zoo transformer, a Hugging Face ``config.json`` or a shape record.
        plan: the plan (its devices must not exceed the cluster's).
        phase: ``train``, ``prefill`` or ``decode``.
        batch: global batch (sequences per step).
        seq: tokens per sequence (prefill/train); context: KV-cache tokens (decode).
        options: modelling options.
        memo: a dict shared between calls to reuse the per-device evaluations (plan search).
        build: attention, kernels and formats of the per-device graphs
            (:func:`archsim.api.device_build`).

    Raises:
        WorkloadError: an invalid plan for the model (each problem names the plan key), or a
            plan that needs more devices than the cluster has.
        MappingError: a format the device cannot run (naming the formats it can).
    """
    memo = {} if memo is None else memo
    if options.power_cap != 1.0:
        key_c = ("power_cap", id(cluster), options.power_cap)
        if key_c not in memo:
            memo[key_c] = (cluster, power_capped(cluster, options.power_cap))
        cluster = memo[key_c][1]
    build = device_build(cluster.device) if build is None else build
    s = shape_of(model)
    if phase not in s.phases:
        raise WorkloadError(Problem(f"model {s.name!r} has no phase {phase!r}; expected one "
                                    f"of: {', '.join(s.phases)}", "phase"))
    seq_n = 1 if phase == "decode" else (seq or s.default_seq)
    ctx_n = (s.context // 2 if context is None else context) if phase == "decode" else 0
    mb = check_plan(s, plan, phase, batch, seq_n, ctx_n)
    kv = build.kv
    if kv.any:      # the KV-cache techniques (workloads.kvtech), built into each graph
        kv.check(s, plan.tp, build.kv_block_size)
        check_phase(kv, phase)
        if kv.prefix_hit_rate and plan.cp > 1:
            raise WorkloadError(Problem("prefix caching with context parallelism is not "
                                        "modelled (a cached prefix split over cp ranks); "
                                        "use --cp 1", "--prefix-hit-rate"))
        # a prefill after a cached prefix: seq_n new tokens after ctx_n cached ones
        ctx_n = prefix_hit_tokens(seq_n, kv.prefix_hit_rate) if phase == "prefill" else ctx_n
        seq_n -= ctx_n if phase == "prefill" else 0
    if options.varlen is not None:
        if phase != "train":
            raise ConfigError(Problem(f"documents packed into sequences apply to training "
                                      f"(--phase train), not {phase}; serving takes variable "
                                      f"lengths as requests (archsim serve)", "--doc-lengths"))
        if s.kind != "decoder":
            raise ConfigError(Problem(f"document packing with causal document masks applies "
                                      f"to decoder language models; {s.name} is of kind {s.kind}",
                                      "--doc-lengths"))
        options.varlen.check()
    if plan.devices > cluster.devices:
        raise WorkloadError(Problem(f"the plan needs {plan.devices} devices (tp x pp x dp x cp)"
                                    f"; the cluster {cluster.name!r} has {cluster.devices}",
                                    "devices"))

    def graphs_of(mb_: int) -> dict[str, tuple[Result, int, dict[str, float],
                                                dict[str, int]]]:
        key = (cluster.spec.device, options.power_cap, s, phase, mb_, seq_n, ctx_n, plan.tp,
               plan.ep, plan.cp, build)
        if key not in memo:
            graphs = block_graphs(s, plan, phase, mb_, seq_n if phase != "decode" else None,
                                  ctx_n if phase == "decode" or ctx_n else None, build)
            # the first block's forward ops in order, collectives included (overlap chains)
            memo[key + ("order",)] = {k: [(op.name, op.role) for op in g.ops()
                                          if op.block == 0 and op.pass_ == "fwd"]
                                      for k, g in graphs.items()}
            try:
                memo[key] = {k: (evaluate(cluster.device, without_collectives(g)),
                                 g.parameters, cp_scale(g, plan.cp, phase), doc_windows(g))
                             for k, g in graphs.items()}
            except MappingError as exc:
                hinted = with_format_hint(exc, cluster.device)
                if hinted is exc:
                    raise
                raise hinted from None
        return memo[key]

    results = graphs_of(mb)
    ov = options.overlap
    sms = getattr(getattr(cluster.device.units[0], "spec", None), "sm_count", 0) or 0
    if ov.active:
        if options.tp_overlap:
            raise ConfigError(Problem("--tp-overlap and --overlap both overlap the tp "
                                      "all-reduce; give one", "--overlap"))
        check_overlap(ov, cluster, plan, phase, mb, sms)
    # the overlapped schedule runs each block as two half-batches (smaller GEMMs)
    split = options.tp_overlap and plan.tp > 1 and mb % 2 == 0
    halves = graphs_of(mb // 2) if split else results
    imb = options.moe_imbalance
    base = _split(results["base"][0], None, plan, imb, results["base"][2], results["base"][3])
    # the kinds of blocks (block_kinds: dense / MoE FFN x attention window) and their counts
    kinds = block_kinds(s)
    block_n = {k.key: k.count for k in kinds}
    is_moe = {k.key: k.moe for k in kinds}
    blocks = {k.key: _split(results[k.key][0], 0, plan, imb, results[k.key][2],
                            results[k.key][3]) for k in kinds}
    train = phase == "train"

    # ---- communication of one block, one microbatch ------------------------------------
    link_e = [0.0]

    def comm_time(cs: list[Comm], pass_: str, kind: str) -> dict[str, float]:
        """Times per group of one block's collectives; adds the link energy of every such
        block of the step (``n`` blocks x ``m`` microbatches x the groups of a stage)."""
        out: dict[str, float] = {}
        for c in cs:
            if (c.pass_ == "fwd") != (pass_ == "fwd"):
                continue
            size, stride = _stride(plan, c.group)
            g = place(cluster, size, stride)
            impl = options.tp_allreduce if c.group == "tp" and g.nodes == 1 else "nccl"
            cost = collective(cluster, c.kind, c.payload_bytes(), g, impl=impl,
                              dtype=c.a_format.name)
            out[c.group] = out.get(c.group, 0.0) + cost.time_s
            groups = plan.devices / plan.pp / max(1, size)
            link_e[0] += cost.energy_j * groups * block_n[kind] * plan.microbatches
        return out

    slow = sms / (sms - options.comm_sms) if sms > options.comm_sms else 1.0
    def overlapped(kind: str) -> tuple[float, float]:
        """(compute, exposed tp communication) of one block of ``kind`` under ``ov``: the
        makespan of the stage's chain of such blocks (:func:`mapper.overlap.blocks_makespan`),
        without and with its all-reduces, per block."""
        k = ov.nano_batches
        res = graphs_of(mb // k)
        order = memo[(cluster.spec.device, options.power_cap, s, phase, mb // k, seq_n, ctx_n,
                      plan.tp, plan.ep, plan.cp, build, "order")][kind]
        rows = {o.name: o for o in res[kind][0].ops}
        net = [c for c in layer_comms(s, plan, phase, mb // k, seq_n, kind == "moe")
               if c.group == "tp" and c.pass_ == "fwd"]
        g = place(cluster, plan.tp, 1)
        impl = options.tp_allreduce if g.nodes == 1 else "nccl"
        t_net = sum((multimem_allreduce(cluster, c.payload_bytes(), g) if ov.fused_ar_norm
                     else collective(cluster, c.kind, c.payload_bytes(), g, impl=impl)).time_s
                    for c in net)
        spots = sum(1 for _, role in order if role == "collective") or 1
        chain: list[tuple[str, float]] = []
        for name, role in order:
            if role == "collective":
                chain.append(("network", t_net / spots))
            elif not (ov.fused_ar_norm and role in FUSED_AR_NORM_ROLES):
                o = rows[name]
                chain.append(("compute" if o.bound == "compute" else "memory",
                              _scaled(o, plan, imb, res[kind][2])[0]))
        n = max(1, round(block_n[kind] / plan.pp))
        with_net = blocks_makespan(chain, ov, sms, n)
        alone = blocks_makespan([(c, 0.0 if c == "network" else t) for c, t in chain], ov,
                                sms, n)
        return alone / n, (with_net - alone) / n

    per_block: dict[str, dict[str, float]] = {}
    for kind, t in blocks.items():
        cs = layer_comms(s, plan, phase, mb, seq_n, is_moe[kind], build)
        fwd_c, bwd_c = comm_time(cs, "fwd", kind), comm_time(cs, "bwd", kind)
        f, b = t.fwd, t.bwd
        if train and plan.recompute == "selective":
            b += t.attn_fwd
        elif train and plan.recompute == "full":
            b += t.fwd
        tp_f, tp_b = fwd_c.get("tp", 0.0), bwd_c.get("tp", 0.0)
        if options.tp_overlap and plan.tp > 1:
            # two half-batches: per block 2 max(c/2 x slow, k/2) (module doc); the halves'
            # compute may be slower than the whole batch's (smaller GEMMs)
            hf, hb = f, b                      # one sequence: split nothing
            if split:
                h = _split(halves[kind][0], 0, plan, imb, halves[kind][2])
                hf = 2 * h.fwd
                hb = 2 * (h.bwd + (h.attn_fwd if plan.recompute == "selective"
                                   else h.fwd if plan.recompute == "full" else 0.0))
            exp_f = max(hf * slow, tp_f) - f
            exp_b = max(hb * slow, tp_b) - b if train else 0.0
        else:
            exp_f, exp_b = tp_f, tp_b
        if ov.active:
            f, exp_f = overlapped(kind)
        cp_f = max(0.0, fwd_c.get("cp", 0.0) - t.attn_fwd)
        cp_b = max(0.0, bwd_c.get("cp", 0.0) - t.attn_bwd) if train else 0.0
        ep_f, ep_b = fwd_c.get("ep", 0.0), bwd_c.get("ep", 0.0)
        per_block[kind] = {"fwd": f, "bwd": b if train else 0.0, "tp": exp_f + exp_b,
                           "ep": ep_f + ep_b, "cp": cp_f + cp_b, "upd": t.upd,
                           "cf": exp_f + ep_f + cp_f, "cb": exp_b + ep_b + cp_b,
                           "tp_raw": tp_f + (tp_b if train else 0.0)}

    # ---- one stage, one microbatch -----------------------------------------------------
    per_stage = {k: 0.0 for k in ("fwd", "bwd", "tp", "ep", "cp", "upd", "tp_raw", "cf", "cb")}
    for kind, n in block_n.items():
        for k in per_stage:
            per_stage[k] += per_block[kind][k] * n / plan.pp
    # the embedding and the head: on the one stage, or the head on the last (bottleneck)
    per_stage["fwd"] += base.fwd
    per_stage["bwd"] += base.bwd if train else 0.0
    per_stage["upd"] += base.upd
    tokens_mb = mb * seq_n
    stream = build.stream_format(s)       # the residual stream's format (>= 16-bit)
    stream_b = stream.bytes_per_element
    if plan.tp > 1:       # the vocabulary-parallel embedding's all-reduce (and its backward)
        emb = collective(cluster, "allreduce", tokens_mb / plan.cp * s.d_model * stream_b,
                         place(cluster, plan.tp, 1), dtype=stream.name)
        passes = 2 if train else 1
        per_stage["cf"] += emb.time_s
        per_stage["tp"] += emb.time_s * passes
        per_stage["cb"] += emb.time_s if train else 0.0
        link_e[0] += emb.energy_j * plan.devices / plan.tp / plan.pp * plan.microbatches \
            * passes
    pp_t = 0.0
    if plan.pp > 1:
        size, stride = _stride(plan, "pp")
        nbytes = tokens_mb / plan.cp * s.d_model * stream_b / plan.tp
        c = collective(cluster, "sendrecv", nbytes, place(cluster, 2, stride))
        pp_t = c.time_s * plan.interleave * (2 if train else 1)
        # every device of the first pp-1 stages sends each microbatch (and its gradient back)
        link_e[0] += (c.energy_j * plan.devices / plan.pp * (plan.pp - 1) * plan.microbatches
                      * plan.interleave * (2 if train else 1))
    t_f = per_stage["fwd"] + per_stage["cf"] + pp_t / (2 if train else 1)
    t_b = per_stage["bwd"] + per_stage["cb"] + pp_t / 2 if train else 0.0
    m, p, v = plan.microbatches, plan.pp, plan.interleave
    pipe = pipeline_time(t_f, t_b, p, m, v if train else 1)
    compute = m * (per_stage["fwd"] + per_stage["bwd"])
    bubble = pipe - m * (t_f + t_b)
    # ---- data parallelism and the optimiser -------------------------------------------
    params = {k: g for k, (_, g, _, _) in results.items()}
    pcount = {"base": params["base"]}
    for bk in kinds:    # one block's parameters per FFN kind (a window adds none)
        pcount.setdefault("moe" if bk.moe else "dense", params[bk.key] - params["base"])
        if bk.moe:
            pcount["expert"] = 3 * s.d_model * s.moe_ffn * s.experts
    mem = memory_per_device(s, plan, phase, batch, seq_n, ctx_n, pcount, build)
    off = options.offload
    off_t: dict[str, Any] = {"transfer_s": 0.0, "cpu_update_s": 0.0}
    if off.kinds:
        off_t = _offload(cluster, off, mem, train, t_f, t_b, m, float(min(m, p)))
    # with pipeline stages, every exposed offload pass lengthens its stage's pass in the 1F1B
    # flow shop (archsim.offload.offload_pipeline); one stage: the transfer is added once
    stretch = bool(off.kinds) and p > 1
    docs = None
    if options.varlen is not None:    # unequal microbatches (archsim.varlen)
        att = _doc_attention(blocks, block_n, plan, train)
        docs = varlen_step(options.varlen, att, plan, batch, seq_n, t_f, t_b, train, memo)
        pipe = docs.pipe
        compute += docs.slowest_delta_s
        bubble = pipe - docs.slowest_work_s
        if stretch:
            off_t["transfer_s"] = varlen_step(
                options.varlen, att, plan, batch, seq_n, t_f, t_b, train, memo,
                (off_t["exposed_f"], off_t["exposed_b"])).pipe - pipe
    elif stretch:
        off_t["transfer_s"] = offload_pipeline(t_f, t_b, off_t["exposed_f"], off_t["exposed_b"],
                                               p, v) - pipe
    dp_t = 0.0
    upd = 0.0
    if train:
        per_dev_params = mem["weights"] * (plan.dp if plan.zero >= 3 else 1) / 2.0
        size, stride = _stride(plan, "dp")
        grads = per_dev_params * 2.0
        if plan.dp > 1:
            g = place(cluster, size, stride)
            # link sharing: an overlapped gradient reduction inside a node shares the
            # scale-up links with the backward's tensor-parallel collectives
            share = 2 if (options.overlap_dp and g.nodes == 1 and plan.tp > 1) else 1
            if plan.zero >= 1:
                rs = collective(cluster, "reducescatter", grads, g, share)
                ag = collective(cluster, "allgather", grads, g, share)
                t_dp, e_dp = rs.time_s + ag.time_s, rs.energy_j + ag.energy_j
            else:
                ar = collective(cluster, "allreduce", grads, g, share)
                t_dp, e_dp = ar.time_s, ar.energy_j
            link_e[0] += e_dp * plan.devices / size
            dp_t = max(t_dp / options.dp_buckets, t_dp - t_b) if options.overlap_dp else t_dp
            if plan.zero >= 3:     # weights gathered for every forward and backward
                ag = collective(cluster, "allgather", per_dev_params * 2.0, g)
                dp_t += m * (max(0.0, ag.time_s - t_f) + max(0.0, ag.time_s - t_b))
        upd = per_stage["upd"] / (plan.dp if plan.zero >= 1 and plan.dp > 1 else 1)
    if off.kinds:
        mem = offload_memory(mem, off, sum(block_n.values()) / plan.pp, float(min(m, p)))
        if "optimizer" in off.kinds:       # the CPU runs the update instead of the device
            upd = off_t["cpu_update_s"]
    step = pipe + dp_t + upd + off_t["transfer_s"]
    comm_tp = m * per_stage["tp"]
    breakdown = {"compute": compute, "tp_comm": comm_tp, "ep_comm": m * per_stage["ep"],
                 "cp_comm": m * per_stage["cp"], "pp_comm": m * pp_t, "bubble": bubble,
                 "dp_comm": dp_t, "optimizer": upd}
    if off.kinds:
        breakdown["offload"] = off_t["transfer_s"]
    # ---- memory, energy, rates ----------------------------------------------------------
    caps = [u.memory_capacity_bytes() for u in cluster.device.units]
    cap = float(max(caps)) if caps else 0.0
    if kv.offload_gb:       # KV blocks beyond the device's memory on the host (decode)
        mem, exposed = _kv_offload(cluster, kv, build.kv_block_size, mem, cap, ctx_n, step)
        step += exposed
        breakdown["kv_offload"] = exposed
    fits = cap <= 0 or mem["total"] <= cap
    # busy energy of one device: m microbatches of its stage's passes (the recomputed forward
    # included, as in the stage's time) and the update once (split over dp under ZeRO, as upd)
    stage = [(blocks[k], n / plan.pp, plan.recompute) for k, n in block_n.items()]
    stage.append((base, 1.0, "none"))          # the embedding and head are not recomputed
    e_mb = sum(t.step_energy_j(train, rc) * w for t, w, rc in stage)
    e_upd = sum(t.e_upd * w for t, w, _ in stage) if train else 0.0
    e_upd /= plan.dp if train and plan.zero >= 1 and plan.dp > 1 else 1
    busy = compute + upd
    if "optimizer" in off.kinds:           # the update runs on the host (its energy not counted)
        e_upd, busy = 0.0, compute
    dyn = m * e_mb + e_upd if busy > 0 else 0.0
    if docs is not None:     # the mean replica's attention work, not the slowest's
        busy += docs.mean_delta_s - docs.slowest_delta_s
        dyn += docs.mean_delta_j
    static_w = _static_power(cluster)
    # every device: its graphs' energy while busy, static power while it waits (module doc)
    energy = plan.devices * (dyn + static_w * max(0.0, step - busy)) + link_e[0]
    tokens = batch * seq_n
    flops_dev = m * (sum(blocks[k].flops * n / plan.pp for k, n in block_n.items())
                     + base.flops)
    attn_flops = m * (sum(blocks[k].attn_flops * n / plan.pp for k, n in block_n.items()))
    if docs is not None:
        flops_dev += docs.mean_delta_flops
        attn_flops += docs.mean_delta_flops
    kind0 = kinds[0].key
    blk = {"fwd_s": per_block[kind0]["fwd"], "bwd_s": per_block[kind0]["bwd"],
           "tp_comm_s": per_block[kind0]["tp_raw"], "tp_exposed_s": per_block[kind0]["tp"],
           "bubble_fraction": bubble_fraction(p, m, v) if p > 1 else 0.0}
    digest = hashlib.sha256(repr((cluster.spec, cluster.device.raw, s, plan, phase, batch, seq_n,
                             ctx_n, options, build, VERSION)).encode()).hexdigest()[:16]
    return PlanResult(model=s.name, phase=phase, cluster=cluster.name, plan=plan, step_s=step,
                      breakdown_s=breakdown, memory_bytes=mem, capacity_bytes=cap, fits=fits,
                      energy_j=energy, tokens_per_s=tokens / step if step > 0 else 0.0,
                      flops_per_device_s=flops_dev / step if step > 0 else 0.0, block=blk,
                      input_hash=digest, attention_flops=attn_flops, build=build,
                      power_cap=options.power_cap, batch=batch, seq=seq_n, busy_s=busy, busy_energy_j=dyn,
                      idle_power_w=static_w, link_energy_j=link_e[0], offload=off.label(),
                      varlen=None if docs is None else docs.stats, overlap=ov.label())


def _kv_offload(cluster: Cluster, kv: KVTechniques, block_size: int, mem: Mapping[str, float],
                cap: float, context: int, step_s: float) -> tuple[dict[str, float], float]:
    """KV offload in a decode step (:mod:`workloads.kvtech`, as a serving replica runs it):
    the cache beyond the device's memory, up to ``kv.offload_gb`` per device, lives on the
    host and streams back every step over the host link (``host.link_gbps x
    link_efficiency``) behind the step's compute: ``kvtech.offload_exposed_s`` of the host
    bytes the step reads (top-k: ``decode_keys / (context + 1)`` of them). Returns the memory
    with the host part taken off the device and the exposed time.

    Raises:
        WorkloadError: a cluster without a host link, or a device that declares no memory
            capacity (nothing to offload); naming ``--kv-offload-gb``.
    """
    host = cluster.spec.host
    if host is None:
        raise WorkloadError(Problem(f"{cluster.name!r} describes no host link to keep KV blocks "
                                    f"behind (a cluster's host: section: dgx1, dgx2, "
                                    f"frontier)", "--kv-offload-gb"))
    if cap <= 0:
        raise WorkloadError(Problem(f"{cluster.spec.device} declares no memory capacity (an "
                                    f"unbounded KV cache): nothing to offload to the host",
                                    "--kv-offload-gb"))
    out = dict(mem)
    moved = min(max(0.0, mem["total"] - cap), kv.offload_gb * 1e9, mem.get("kv_cache", 0.0))
    out["kv_cache"] = mem.get("kv_cache", 0.0) - moved
    out["total"] = mem["total"] - moved
    share = decode_keys(context, kv.topk_blocks, block_size) / (context + 1)
    return out, offload_exposed_s(moved * share, host.link_gbps * host.link_efficiency, step_s)


def _offload(cluster: Cluster, off: Offload, mem: Mapping[str, float], train: bool, t_f: float,
             t_b: float, m: int, inflight: float) -> dict[str, Any]:
    """The exposed transfer and CPU update of ``off`` (:func:`archsim.offload.offload_time`);
    refuses an offload outside training or an optimizer offload without a host DRAM spec."""
    if not train:
        raise WorkloadError(Problem("offload applies to training (--phase train): inference "
                                    "holds no optimizer state or saved activations",
                                    "--offload"))
    bw = tier_bytes_per_s(cluster, off)
    host = cluster.spec.host
    if "optimizer" in off.kinds and host is None:
        raise WorkloadError(Problem(f"the optimizer update runs on the host CPU: "
                                    f"{cluster.name!r} needs a host: section (its dram_gbps)",
                                    "--offload"))
    dram = host.dram_gbps * 1e9 if host is not None else 0.0
    return offload_time(mem, off, bw, dram, t_f, t_b, m, inflight)


def _doc_attention(blocks: Mapping[str, _Times], counts: Mapping[str, int], plan: ParallelPlan,
                   train: bool) -> dict[int, tuple[float, float, float, float]]:
    """A stage's causal attention cores per microbatch by window: (forward s, backward s
    with the recomputed forward, energy J, FLOPs) -- what documents change
    (:func:`archsim.varlen.varlen_step`)."""
    again = train and plan.recompute in ("selective", "full")
    out: dict[int, tuple[float, float, float, float]] = {}
    for kind, t in blocks.items():
        share = counts[kind] / plan.pp
        for w, (f, b, ef, eb, fl) in t.docs.items():
            bb, eb2 = (b + (f if again else 0.0), eb + (ef if again else 0.0)) if train \
                else (0.0, 0.0)
            o = out.get(w, (0.0, 0.0, 0.0, 0.0))
            out[w] = (o[0] + share * f, o[1] + share * bb, o[2] + share * (ef + eb2),
                      o[3] + share * fl)
    return out


def power_capped(cluster: Cluster, fraction: float, flag: str = "--power-caps") -> Cluster:
    """``cluster`` with every device's board power limit at ``fraction`` of its own: each
    unit with a DVFS model (a ``power`` section: ``arch/gpu/power.py``) gets
    ``power.power_limit_w x fraction`` (``nvidia-smi -pl``), so every kernel runs at the
    highest clock whose board power fits under it.

    Raises:
        ConfigError: ``fraction`` not in (0, 1], a device without a DVFS model (only the
            configured limit exists), or a limit at or below the board's static power; the
            problem names ``flag``.
    """
    if fraction == 1.0:
        return cluster
    if not 0.0 < fraction <= 1.0:
        raise ConfigError(Problem(f"expected a fraction of the board power limit in (0, 1], "
                                  f"got {fraction:g}", flag))
    sets = []
    for i, u in enumerate(cluster.device.units):
        spec = getattr(u, "spec", None)
        p = getattr(spec, "power", None)
        if p is None:
            continue
        cap_w = p.power_limit_w * fraction
        static_w = getattr(spec, "static_power_w", 0.0)
        if cap_w <= static_w:
            raise ConfigError(Problem(f"a cap of {fraction:.0%} is {cap_w:.4g} W, at or below "
                                      f"the board's static power ({static_w:.4g} W) of "
                                      f"{cluster.spec.device}", flag))
        sets.append(f"units[{i}].power.power_limit_w={cap_w!r}")
    if not sets:
        raise ConfigError(Problem(f"{cluster.spec.device} has no DVFS model (no power section "
                                  f"in its units: arch/gpu/power.py), so a power cap cannot "
                                  f"be priced; the H100 and H200 designs have one",
                                  flag))
    dev = load_data(cluster.device.raw, cluster.device.source or "<config>", sets)
    return replace(cluster, device=dev)


def _static_power(cluster: Cluster) -> float:
    """Idle (static) power of one device: its ``static`` energy components over a second."""

    comps = [c for u in cluster.device.units for c in u.components() if c.cls == "static"]
    if not comps:
        return 0.0
    tech = _energy.Technology(node_nm=cluster.device.technology.node_nm)
    return float(_energy.evaluate(comps, {}, 1.0, tech).total_j)


def to_result(r: PlanResult, cluster: Cluster) -> Result:
    """The plan as a :class:`archsim.Result` (latency = step time; energy and area of every
    device; ``extra`` holds the plan, its breakdown and memory)."""

    comps = [c for u in cluster.device.units for c in u.components()]
    tech = _energy.Technology(node_nm=cluster.device.technology.node_nm)
    area = _energy.area(comps, tech)
    n = r.plan.devices
    clock = cluster.device.units[0].clock_hz
    return Result(
        design=cluster.name, workload=r.model, phase=r.phase, fidelity="analytical",
        latency_s=r.step_s, cycles=int(round(r.step_s * clock)), clock_hz=clock,
        energy_j=r.energy_j, energy_breakdown_j={
            "devices_busy": n * r.busy_energy_j,
            "devices_waiting": r.energy_j - n * r.busy_energy_j - r.link_energy_j,
            "links": r.link_energy_j},
        area_mm2=area.total_mm2 * n,
        area_breakdown_mm2={k: v * n for k, v in area.breakdown_mm2.items()},
        utilization=0.0, tokens_per_s=r.tokens_per_s, samples_per_s=None, ops=(),
        macs=0, flops=int(r.flops_per_device_s * r.step_s * n), dram_bytes=0.0,
        archsim_version=VERSION, input_hash=r.input_hash,
        extra={"devices": n, "plan": r.row(), "memory": {
            "resident_bytes": r.memory_bytes["total"], "capacity_bytes": r.capacity_bytes,
            "fits": r.fits}})

