"""The cost of one serving iteration, from the design's own model (``archsim.evaluate``).

An iteration runs one forward pass over a *mixed batch*: prefill chunks (``c`` new prompt
tokens of a request whose first ``p`` tokens are already cached) and decode tokens (one per
running request, each over its own context). The transformer's ops split into groups whose
cost depends on different batch quantities (selected by the ops' tags, :mod:`workloads.tags`,
never by name):

* ``dense`` — one block's QKV/out projections, FFN, norms, residuals, RoPE and the
  tensor-parallel all-reduces: ``m = T`` rows, T = all tokens of the iteration (prefill chunk
  tokens + one per decode). Linear layers do not care which request a row belongs to.
* ``attn`` — one block's attention core (roles ``qk``, ``attn``, ``av``, or the fused
  ``attention``: QK^T, softmax, ALiBi, AV): per request group, since every
  request attends over its own keys. Decodes: one query over ``ctx + 1`` keys each; a
  prefill chunk: ``c`` queries over ``p + c`` keys.
* ``embed`` — token (and position) embeddings of the ``T`` tokens: the ops outside the
  blocks (``block`` None) that run before the first block.
* ``head`` — final norm and LM head on one row per sequence that emits a token: the ops
  outside the blocks that run after them.

Iteration time = ``embed(T) + L x [dense(T) + sum_g attn(g)] + head(S)`` with ``L`` blocks.
Each group is priced by calling :func:`archsim.evaluate` on a sub-workload made of the
zoo builder's own ops for that group (a one-block model of the same shape, tensor-parallel
shard included), so every family — GPU, LUT tensor core, DRAM PIM, spatial arrays,
multi-unit designs — serves through its own ``Unit.estimate`` with no special case.

Memoisation (docs/serving.md, "Cost model"):

* ``dense``, ``embed``: evaluated on a geometric grid of token counts (ratio ``2^(1/4)``)
  and interpolated linearly between the two neighbours (exact on grid points);
* ``head``: the same grid over the number of emitting sequences;
* decode ``attn``: the zoo's decode attention at the nearest grid point ``(B_g, c_g)``
  (B on powers of two, context on a ``sqrt(2)`` grid), scaled by the actual key count
  ``K = sum (ctx_i + 1)`` over ``B_g (c_g + 1)`` (decode attention reads every cached key
  once: its bytes and MACs are linear in ``K``);
* prefill-chunk ``attn``: the zoo's prefill attention of ``s_g`` tokens (nearest grid point
  to ``s = p + c``), scaled by the chunk's (query, key) pairs over the grid prompt's: dense
  scores (unfused, MLA) ``c s / s_g^2``; a causal fused kernel ``(f(s) - f(p)) / f(s_g)``,
  ``f(n) = n (n + 1) / 2`` (``Attention.pairs``; windowed: ``sum min(i, w)``).

Energy is scaled the same way; every evaluated sub-workload's energy already includes the
leakage of all devices over its own latency, so the sum does too.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, replace
from typing import Any

from archsim.api import device_build, evaluate, memory_check
from archsim.arch.accelerator import Accelerator
from archsim.arch.cluster import single_node
from archsim.arch.collective import collective, multimem_allreduce, place
from archsim.mapper.constraints import load_constraints
from archsim.mapper.overlap import Overlap, blocks_makespan, check_overlap
from archsim.serve.kv import KVLayout, kv_layout
from archsim.workloads.errors import ConfigError, Problem, WorkloadError
from archsim.workloads.formats import get_format
from archsim.workloads.graph import Workload
from archsim.workloads.hf import config_path, shape_from_hf_config
from archsim.workloads.kvtech import KVTechniques, remat_op
from archsim.workloads.models.transformer import TransformerShape
from archsim.workloads.ops import Gemm
from archsim.workloads.parallel import DeviceBuild, ParallelPlan, block_kinds, layer_comms
from archsim.workloads.tags import ATTENTION_CORE_ROLES, FUSED_AR_NORM_ROLES
from archsim.workloads.zoo import model_names, transformer_shape

__all__ = ["Cost", "IterationCost", "Batch", "model_shape", "kv_bytes_per_token", "span_layout"]

_GRID = 2 ** 0.25          # dense/embed/head token grid ratio
_CTX_GRID = 2 ** 0.5       # attention key grid ratio


@dataclass(frozen=True)
class Cost:
    """Time and energy of a piece of an iteration (all devices of the replica).

    Attributes:
        time_s: latency (s).
        energy_j: energy of all ``devices`` (J), leakage included.
        flops: operations of one device's shard.
        dram_bytes: off-chip bytes of one device.
    """

    time_s: float = 0.0
    energy_j: float = 0.0
    flops: float = 0.0
    dram_bytes: float = 0.0

    def __add__(self, o: Cost) -> Cost:
        return _cost(self.time_s + o.time_s, self.energy_j + o.energy_j, self.flops + o.flops,
                     self.dram_bytes + o.dram_bytes)

    def scale(self, k: float) -> Cost:
        return _cost(self.time_s * k, self.energy_j * k, self.flops * k, self.dram_bytes * k)


_new = object.__new__


def _cost(time_s: float, energy_j: float, flops: float, dram_bytes: float) -> Cost:
    """``Cost(time_s, energy_j, flops, dram_bytes)`` without the frozen dataclass's
    ``__init__`` (four ``object.__setattr__`` calls): the serving loop adds and scales a
    few costs per simulated iteration, hundreds of thousands of times per run."""
    c = _new(Cost)
    d = c.__dict__
    d["time_s"] = time_s
    d["energy_j"] = energy_j
    d["flops"] = flops
    d["dram_bytes"] = dram_bytes
    return c


@dataclass
class Batch:
    """One iteration's work.

    Attributes:
        chunks: ``(new tokens, cached tokens before them)`` per prefill chunk.
        decodes: decode requests (one token each).
        decode_keys: sum over decodes of ``context + 1`` keys attended.
        emit: sequences that produce a token this iteration (LM-head rows).
        select_keys: top-k block attention (``KVTechniques.topk_blocks``): KV blocks the
            decodes' selection pass scores, one min/max key pair each (0: no selection).
    """

    chunks: list[tuple[int, int]]
    decodes: int
    decode_keys: int
    emit: int
    select_keys: int = 0

    @property
    def tokens(self) -> int:
        return sum(c for c, _ in self.chunks) + self.decodes


def model_shape(model: str) -> TransformerShape:
    """The decoder shape of ``model``: a zoo name, or a Hugging Face ``config.json`` (a
    ``.json`` path, or a folder holding one; :func:`workloads.hf.shape_from_hf_config`).

    Raises:
        WorkloadError: not a zoo decoder or a readable config (path ``--model``).
    """
    cfg = config_path(model)
    if cfg is not None:
        return shape_from_hf_config(cfg)
    try:
        s = transformer_shape(model)
    except WorkloadError:

        dec = [n for n in model_names() if _is_decoder(n)]
        raise WorkloadError(Problem(f"serving needs a zoo decoder model; expected one of "
                                    f"{', '.join(dec)}, got {model!r}", "--model")) from None
    if s.kind != "decoder":
        raise WorkloadError(Problem(f"{model} is an {s.kind}; serving needs a decoder "
                                    "(prefill + decode)", "--model"))
    return s


def kv_bytes_per_token(s: TransformerShape, build: DeviceBuild, tp: int = 1,
                       pp: int = 1) -> float:
    """KV-cache bytes per token on one device of a ``tp`` x ``pp`` replica: K and V of the
    device's ``layers / pp`` blocks and ``max(1, kv_heads / tp)`` heads, in the KV-cache
    format (``DeviceBuild.kv_bytes``; 16-bit unless a format is given); multi-head latent
    attention caches one latent of ``kv_lora_rank + qk_rope_dim`` values per layer, whole
    on every tensor-parallel device (as ``workloads.parallel.memory_per_device``; DeepSeek-V2
    Sec. 2.1). ``tp = pp = 1``: the whole model's (what a disaggregated hand-off moves)."""
    if s.is_mla:
        return float((s.layers // pp) * (s.kv_lora_rank + s.qk_rope_dim) * build.kv_bytes())
    kvl = max(1, s.kv // tp)
    return 2.0 * (s.layers // pp) * kvl * s.hd * build.kv_bytes()


def span_layout(s: TransformerShape) -> KVLayout:
    """The KV pool's pages for ``s``'s attention spans (``serve.kv.KVLayout``: sliding-window
    layers keep only their window's blocks, as vLLM's hybrid manager; one span: page =
    block)."""
    counts: dict[int, int] = {}
    for k in block_kinds(s):
        counts[k.window] = counts.get(k.window, 0) + k.count
    return kv_layout(counts)


def _window_keys(n: int, w: int) -> int:
    """Keys the first ``n`` causal queries score under a sliding window of ``w``:
    ``sum_{i=1..n} min(i, w)``."""
    return n * (n + 1) // 2 if n <= w else w * (w + 1) // 2 + (n - w) * w


def _is_decoder(name: str) -> bool:

    try:
        return transformer_shape(name).kind == "decoder"
    except WorkloadError:
        return False


def _check_replica(s: TransformerShape, tp: int, pp: int, ep: int) -> None:
    """A replica's pipeline and expert degrees against the model (one error per flag).

    Raises:
        WorkloadError: ``pp`` does not divide the blocks, or ``ep`` is not 1 for a dense
            model, does not divide the routed experts, or does not divide ``tp`` (the experts
            spread over a stage's tensor-parallel devices, as vLLM's ``--enable-expert-
            parallel`` inside one replica).
    """
    for flag, v in (("--pp", pp), ("--ep", ep)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise WorkloadError(Problem(f"expected an integer >= 1, got {v!r}", flag))
    if s.layers % pp:
        ok = [str(p) for p in range(1, s.layers + 1) if s.layers % p == 0]
        raise WorkloadError(Problem(f"{s.name}'s {s.layers} blocks do not split into {pp} "
                                    f"pipeline stages; degrees that do: {', '.join(ok)}",
                                    "--pp"))
    if ep > 1:
        if not s.is_moe or s.experts % ep:
            why = (f"must divide the {s.experts} routed experts" if s.is_moe
                   else f"{s.name} has no experts")
            raise WorkloadError(Problem(f"expert-parallel degree {ep}: {why}", "--ep"))
        if tp % ep:
            raise WorkloadError(Problem(f"expert-parallel degree {ep} must divide --tp {tp} "
                                        "(the experts spread over a stage's tensor-parallel "
                                        "devices)", "--ep"))


def _constraints(c: Any) -> Any:
    """A ``mapper.constraints.Constraints`` from a YAML path (None stays None)."""
    if c is None or hasattr(c, "for_op"):
        return c

    return load_constraints(c)


def _grid(ratio: float, hi: int) -> list[int]:
    pts = {1}
    x = 1.0
    while x < hi:
        x *= ratio
        pts.add(min(hi, int(round(x))))
    return sorted(pts)


def _groups(w: Workload) -> dict[str, str]:
    """Op name -> ``attn``, ``dense``, ``embed`` or ``head`` (module doc), by the ops' tags
    and their order: ops outside the blocks before the first block op are the embedding."""
    out: dict[str, str] = {}
    seen_block = False
    for op in w.ops():
        if op.block is not None:
            seen_block = True
            out[op.name] = "attn" if op.role in ATTENTION_CORE_ROLES else "dense"
        else:
            out[op.name] = "head" if seen_block else "embed"
    return out


class IterationCost:
    """Prices iterations of ``model`` (tensor-parallel over ``tp`` devices) on ``acc``.

    Contract: ``cost(batch)`` is a pure function of the batch's composition (memoised);
    on grid points it equals the sum of ``archsim.evaluate`` over the group sub-workloads
    (``L`` x block groups + embed + head) — tests/serve checks one request against a
    full-model ``evaluate`` of prefill and decode.
    """

    def __init__(self, acc: Accelerator, model: str, tp: int = 1,
                 fidelity: str = "analytical", constraints: Any = None,
                 decode_constraints: Any = None, attention: str | None = None,
                 build: DeviceBuild | None = None, pp: int = 1, ep: int = 1,
                 kv: KVTechniques | None = None, overlap: Overlap | None = None) -> None:

        self.acc = acc
        # the choices one device builds its graphs with (archsim.api.device_build, as
        # ``archsim run`` and plans): the attention kernels the engine runs (``fused``, one
        # FlashAttention-style op per block, or ``unfused``: QK, softmax, AV; default what the
        # design prefers), the formats (else the design's native one)
        self.build = device_build(acc) if build is None else build
        if attention is not None:
            self.build = replace(self.build, attention=attention)
        self.attention = self.build.attention
        # op -> unit rules for multi-unit designs: ``constraints`` for every evaluation,
        # ``decode_constraints`` (if given) instead for decode attention (AttAcc: decode
        # attention on PIM, prefill attention and linear layers on the GPU)
        self.constraints = _constraints(constraints)
        self.decode_constraints = _constraints(decode_constraints) or self.constraints
        self.model = model
        self.tp = tp
        self.pp = pp
        self.ep = ep
        self.fidelity = fidelity
        self.shape = model_shape(model)
        # one-block models by kind (workloads.parallel.block_kinds, the unit plans share:
        # dense / MoE FFN x attention window): "" the first block's kind, the others by their
        # key ("moe" for DeepSeek's MoE blocks after 3 dense ones; gpt-oss: "" the sliding-
        # window blocks, "moe" the full-attention ones)
        kinds = block_kinds(self.shape)
        self._key = {k.key: ("" if i == 0 else k.key) for i, k in enumerate(kinds)}
        self.kinds = {self._key[k.key]: k.shape for k in kinds}
        self._moe = {self._key[k.key]: k.moe for k in kinds}
        # attention depends on the window only: each window's first kind prices it
        self._attn: dict[str, str] = {}
        first: dict[int, str] = {}
        for k in kinds:
            self._attn[self._key[k.key]] = first.setdefault(k.window, self._key[k.key])
        self._window = {self._key[k.key]: k.window for k in kinds}
        self.one = self.kinds[""]
        self.layers = self.shape.layers
        self.context = self.shape.context
        _check_replica(self.shape, tp, pp, ep)
        # the KV-cache techniques (workloads.kvtech): remat changes the cache's bytes per token
        # and adds the K/V projection per cached key to decode attention
        self.kv = kv or KVTechniques()
        self.build.graph(self.one, "decode", 1, None, 1, tp, ep)  # validates tp, ep, formats
        # a replica's devices as a one-node cluster (the design's own link): prices the
        # expert all-to-alls and the pipeline's stage-to-stage sends (arch.collective)
        self.cluster = single_node(acc, tp * pp) if pp > 1 or ep > 1 else None
        self._memo: dict[tuple[Any, ...], Cost] = {}
        self._pow2: dict[int, int] = {}
        # overlap inside one device (mapper.overlap; docs/serving.md): the dense group's ops
        # as a chain of (kind, seconds, role) per evaluated point, the overlapped block times
        self.overlap = overlap = overlap or Overlap()
        self._chains: dict[tuple[Any, ...], tuple[tuple[str, float, str], ...]] = {}
        self._stages: dict[int, list[tuple[str, int]]] = {}
        self._ov_memo: dict[tuple[Any, ...], float] = {}
        self._sms = getattr(getattr(acc.units[0], "spec", None), "sm_count", 0) or 0
        self._overlapping = overlap.active        # read every iteration
        if overlap.active:
            if pp > 1 or ep > 1:
                raise ConfigError(Problem(f"{overlap.label()}: overlap inside one device is "
                                          "modelled for tensor-parallel replicas (pp 1, ep 1)",
                                          "--overlap"))
            self._tp_cluster = single_node(acc, tp)
            # the iteration's batch splits by tokens: any batch of >= K tokens splits
            check_overlap(overlap, self._tp_cluster, ParallelPlan(tp=tp), "decode",
                          overlap.nano_batches, self._sms)
        self._tok = _grid(_GRID, 1 << 17)
        self._ctx = _grid(_CTX_GRID, self.context - 1)
        self._seq = _grid(_CTX_GRID, self.context)
        self.evaluations = 0

    # ---- model facts ---------------------------------------------------------------------
    @property
    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes per token on one device (K and V, every layer, in the KV-cache
        format: ``DeviceBuild.kv_bytes``, 16-bit unless a format is given); with K/V
        rematerialisation, X instead: ``layers / pp x d_model`` values (workloads.kvtech)."""
        if self.kv.remat:
            return float((self.layers // self.pp) * self.shape.d_model * self.build.kv_bytes())
        return kv_bytes_per_token(self.shape, self.build, self.tp, self.pp)

    @property
    def kv_layout(self) -> KVLayout:
        """The KV pool's pages for this model's attention spans (:func:`span_layout`)."""
        return span_layout(self.shape)

    @property
    def devices(self) -> int:
        """Devices of one replica: ``tp x pp``."""
        return self.tp * self.pp

    def weight_bytes(self) -> float:
        """Resident bytes of one device's shard of the weights (plus the largest op's
        activations), from ``Workload.resident_bytes`` (every expert a device holds, reached
        by a token or not) of a one- and a two-block model of each kind of block
        (``workloads.parallel.block_kinds``): the fullest pipeline stage's ``layers / pp``
        blocks with the embedding and the head both counted on it (conservative by the
        smaller of the two when ``pp > 1``)."""
        def resident(one: TransformerShape, n: int) -> float:
            s = one
            if n == 2:      # two blocks of the kind (both dense, or both MoE)
                s = replace(one, layers=2, windows=one.windows * 2)
                if one.is_moe and one.dense_layers:
                    s = replace(s, dense_layers=2)
            return self.build.graph(s, "prefill", 1, 1, None, self.tp, self.ep
                                    ).resident_bytes()

        if len(self.kinds) == 1:
            w1, w2 = resident(self.one, 1), resident(self.one, 2)
            return w1 + (self.layers // self.pp - 1) * (w2 - w1)
        per: dict[str, float] = {}
        base = 0.0
        for kind, one in self.kinds.items():
            w1, w2 = resident(one, 1), resident(one, 2)
            per[kind] = w2 - w1
            base = w1 - per[kind] if kind == "" else base
        return base + max(sum(per[k] * n for k, n in self._stage_blocks(i))
                          for i in range(self.pp))

    def _stage_blocks(self, stage: int) -> list[tuple[str, int]]:
        """(kind, blocks) of pipeline stage ``stage``: its ``layers / pp`` consecutive blocks
        by kind (``workloads.parallel.block_kinds``; keys as ``self.kinds``). Fixed by the
        model and the plan, so worked out once per stage (it is read every iteration)."""
        hit = self._stages.get(stage)
        if hit is None:
            n = self.layers // self.pp
            hit = self._stages[stage] = [
                (self._key[k.key], k.count)
                for k in block_kinds(self.shape, stage * n, stage * n + n)]
        return hit

    def capacity_bytes(self) -> float:
        """Off-chip memory of one device (0 when the design declares none)."""

        wl = self.build.graph(self.one, "prefill", 1, 1, None, self.tp, self.ep)
        mem = memory_check(self.acc, wl)
        return float(mem["capacity_bytes"]) if mem else 0.0

    def peaks(self) -> tuple[float, float]:
        """(peak FLOP/s, peak off-chip bytes/s) of one device, for MFU and MBU: the sum
        over the design's units of ``2 x peak_macs_per_cycle(qkv GEMM) x clock`` and
        ``peak_bytes_per_cycle x clock``."""
        wl = self.build.graph(self.one, "prefill", 1, 512 if self.context >= 512 else 1,
                              None, self.tp)
        rep = next(op for op in wl.ops() if op.role == "qkv")
        f = b = 0.0
        for u in self.acc.units:
            if u.supports(rep) is None:
                f += 2 * u.peak_macs_per_cycle(rep) * u.clock_hz
            b += u.peak_bytes_per_cycle() * u.clock_hz
        return f, b

    # ---- evaluation --------------------------------------------------------------------------
    def _eval(self, group: str, phase: str, batch: int, seq: int | None,
              context: int | None, kind: str = "") -> Cost:
        key: tuple[Any, ...] = (group, phase, batch, seq, context, kind)
        c = self._memo.get(key)
        if c is not None:
            return c
        w = self.build.graph(self.kinds[kind], phase, batch, seq, context, self.tp, self.ep)
        sub = Workload(name=f"{w.name}:{group}", phase=w.phase, batch=w.batch, seq=w.seq,
                       context=w.context, parameters=w.parameters, family=w.family,
                       devices=w.devices)
        if group == "kv_remat":     # K/V rematerialisation's GEMM (workloads.kvtech.remat_op)
            for op in w.ops():
                if isinstance(op, Gemm) and op.role == "qkv" and op.block is not None:
                    sub.add(remat_op(op, self.shape, self.tp, op.m))
            keep = set()
        else:
            keep = {name for name, g in _groups(w).items() if g == group}
        for op in w.ops():
            if op.name in keep:
                sub.add(op, [p for p in w.predecessors(op.name) if p in keep])
        r = evaluate(self.acc, sub, fidelity=self.fidelity,
                             constraints=self.decode_constraints if phase == "decode"
                             else self.constraints)
        self.evaluations += 1
        c = Cost(r.latency_s, r.energy_j, float(r.flops), float(r.dram_bytes))
        if group == "dense" and self.overlap.active:
            self._chains[key] = tuple(
                ("network" if o.role == "collective" else
                 "compute" if o.bound == "compute" else "memory", o.latency_s, o.role)
                for o in r.ops)
        if not all(math.isfinite(v) for v in (c.time_s, c.energy_j)):
            raise ConfigError(Problem(f"the design returned a non-finite cost for {group} "
                                      f"({phase}, batch {batch})", "units"))
        self._memo[key] = c
        return c

    def _tokens(self, group: str, m: int, kind: str = "") -> Cost:
        """``group`` (dense/embed/head) over ``m`` rows, interpolated on the token grid;
        ``kind``: the block kind of a ``dense`` group (``self.kinds``)."""
        key: tuple[Any, ...] = ("tok", group, m) + ((kind,) if kind else ())
        c = self._memo.get(key)
        if c is not None:
            return c
        i = bisect_left(self._tok, m)
        if self._tok[i] == m:
            c = self._rows(group, m, kind)
        else:
            lo, hi = self._tok[i - 1], self._tok[i]
            a, b = self._rows(group, lo, kind), self._rows(group, hi, kind)
            f = (m - lo) / (hi - lo)
            c = a.scale(1 - f) + b.scale(f)
        self._memo[key] = c
        return c

    def _rows(self, group: str, m: int, kind: str = "") -> Cost:
        # head: one LM-head row per sequence (prefill of m sequences of 1 token);
        # dense/embed: m tokens as n sequences of at most the model context each; when m
        # does not split evenly, n x ceil(m / n) >= m tokens scaled back to m (error < 1/ctx).
        if group == "head":
            return self._eval(group, "prefill", m, 1, None)
        n = -(-m // self.context)
        seq = -(-m // n)
        c = self._eval(group, "prefill", n, seq, None, kind)
        if group == "dense" and self.ep > 1 and self._moe[kind]:
            c = c + self._expert_comm(n, seq)
        return c if n * seq == m else c.scale(m / (n * seq))

    def _expert_comm(self, n: int, seq: int) -> Cost:
        """The expert all-to-alls of one MoE block over ``n x seq`` tokens: dispatch and
        combine of ``tokens / tp x top_k x d`` activations over the ``ep`` devices
        (:func:`workloads.parallel.layer_comms`, the plan's collectives), priced on the
        replica's devices by :func:`arch.collective.collective` (MoE blocks only)."""
        assert self.cluster is not None and self.shape.is_moe
        plan = ParallelPlan(tp=self.tp, ep=self.ep)
        out = Cost()
        for cm in layer_comms(self.shape, plan, "prefill", n, seq, True):
            if cm.group != "ep":
                continue
            cc = collective(self.cluster, cm.kind, cm.payload_bytes(), place(self.cluster,
                                                                              self.ep, 1))
            # the group's link energy, once per ep group of the replica's tp devices
            out = out + Cost(cc.time_s, cc.energy_j * self.tp / self.ep)
        return out

    def _stage_send(self, tokens: int) -> Cost:
        """One pipeline hand-off of ``tokens`` activations (``tokens x d / tp`` values per
        device, the scatter/gather optimisation as in :func:`archsim.parallel.evaluate_plan`)
        from one stage to the next, priced as a send/recv between the stages' devices."""
        assert self.cluster is not None
        a = self.build.a_format or self.build.native
        nbytes = tokens * self.shape.d_model * (get_format(a).bytes_per_element if a else 2.0)
        cc = collective(self.cluster, "sendrecv", nbytes / self.tp,
                        place(self.cluster, 2, self.tp))
        return Cost(cc.time_s, cc.energy_j * self.tp)

    @staticmethod
    def _nearest(grid: list[int], x: float) -> int:
        i = bisect_left(grid, x)
        if i == 0:
            return grid[0]
        if i == len(grid):
            return grid[-1]
        lo, hi = grid[i - 1], grid[i]
        return lo if math.log(x / lo) <= math.log(hi / x) else hi

    def decode_attention(self, n: int, keys: int, kind: str = "") -> Cost:
        """Attention of ``n`` decode tokens attending over ``keys`` keys in total (one block
        of ``kind``). A sliding window of ``w`` keys reads ``min(keys, n w)`` of them (exact
        when every request's context is on the same side of the window, an upper bound
        otherwise), scaled from the windowed graph's ``bg min(cg + 1, w)``."""
        if n == 0:
            return Cost()
        kind = self._attn[kind]
        bg = self._pow2.get(n)
        if bg is None:          # the power of two nearest n (in log), once per n
            bg = self._pow2[n] = 1 << max(0, int(round(math.log2(n))))
        cbar = max(1.0, keys / n - 1)
        cg = self._nearest(self._ctx, cbar)
        base = self._eval("attn", "decode", bg, None, cg, kind)
        w = self._window[kind]
        if w:
            return base.scale(min(keys, n * w) / (bg * min(cg + 1, w)))
        return base.scale(keys / (bg * (cg + 1)))

    def remat_projection(self, keys: int) -> Cost:
        """K/V rematerialisation (workloads.kvtech): the K and V projections of ``keys`` cached
        tokens of one block, ``2 x d_model x 2 x kv_heads / tp x head_dim`` FLOPs each: the
        GEMM ``workloads.kvtech.remat_op`` (the one ``archsim run`` and plans add to a decode
        graph) over ``keys`` rows, on the token grid."""
        if keys == 0:
            return Cost()
        hi = self._tok[-1]      # beyond the grid: rows of a GEMM cost linearly
        if keys > hi:
            return self._tokens("kv_remat", hi).scale(keys / hi)
        return self._tokens("kv_remat", keys)

    def chunk_attention(self, c: int, past: int, kind: str = "") -> Cost:
        """Attention of a prefill chunk of ``c`` tokens after ``past`` cached ones (one block
        of ``kind``). A causal fused kernel scales by the chunk's causal (windowed) keys over
        those of the grid prompt (:func:`_window_keys`), dense scores by ``c s / s_g^2``."""
        kind = self._attn[kind]
        s = c + past
        sg = self._nearest(self._seq, s)
        base = self._eval("attn", "prefill", 1, sg, None, kind)
        w = self._window[kind]
        if self.attention == "fused" and not self.shape.is_mla:
            # the causal kernel's (query, key) pairs: c queries after ``past`` keys skip
            # their masked triangle (Attention.pairs); no window: ``w`` beyond every length
            w = w or max(s, sg)
            return base.scale((_window_keys(s, w) - _window_keys(past, w))
                              / _window_keys(sg, w))
        return base.scale(c * s / (sg * sg))

    def _block(self, b: Batch, kind: str = "", tokens: int | None = None) -> Cost:
        """One block of the iteration (of ``kind``, ``self.kinds``): its dense ops over all
        tokens (``tokens``: ``b.tokens``, if known), every request's attention (the kind's
        attention window's); with an overlap, its time is the overlapped schedule's
        (:meth:`_overlapped`), its energy the same. (A zero cost is never added: ``x + 0.0
        == x``, so the sums are those of adding every term.)"""
        tokens = b.tokens if tokens is None else tokens
        dec = self.decode_attention(b.decodes, b.decode_keys, kind)
        if b.select_keys:       # top-k: the selection pass, one min/max pair per block
            dec = dec + self.decode_attention(b.decodes, b.select_keys, kind)
        chunks: Cost | None = None
        for c, p in b.chunks:
            a = self.chunk_attention(c, p, kind)
            chunks = a if chunks is None else chunks + a
        block = self._tokens("dense", tokens, kind)
        if b.decodes:
            block = block + dec
        if chunks is not None:
            block = block + chunks
        remat = (self.remat_projection(b.decode_keys) if self.kv.remat and b.decodes
                 else None)
        if self._overlapping:
            t = self._overlapped(tokens, dec.time_s, chunks.time_s if chunks else 0.0, kind)
            if remat is not None:
                t += remat.time_s
                block = block + remat
            return Cost(t, block.energy_j, block.flops, block.dram_bytes)
        return block + remat if remat is not None else block

    def _dense_chain(self, m: int, kind: str) -> list[tuple[str, float, str]]:
        """The dense group's ops over ``m`` tokens as a chain, interpolated on the token
        grid as :meth:`_tokens` (op by op; the kinds of the nearer grid point)."""
        def at(x: int) -> list[tuple[str, float, str]]:
            n = -(-x // self.context)
            seq = -(-x // n)
            self._rows("dense", x, kind)                  # evaluates (and records) the point
            key: tuple[Any, ...] = ("dense", "prefill", n, seq, None, kind)   # _eval's key
            f = x / (n * seq)
            return [(k_, t * f, r) for k_, t, r in self._chains[key]]
        i = bisect_left(self._tok, m)
        if self._tok[i] == m:
            return at(m)
        lo, hi = self._tok[i - 1], self._tok[i]
        a, b = at(lo), at(hi)
        f = (m - lo) / (hi - lo)
        near = a if f < 0.5 else b
        return [(near[j][0], a[j][1] * (1 - f) + b[j][1] * f, a[j][2]) for j in range(len(a))]

    def _overlapped(self, tokens: int, dec_s: float, chunk_s: float, kind: str) -> float:
        """One block's time under the overlap (docs/serving.md): the iteration's tokens split
        into ``K`` nano-batches (fewer when it has fewer tokens), each a chain of the dense
        ops over ``tokens / K`` rows with ``1/K`` of the attention before the output
        projection (decode attention memory-bound, prefill chunks' compute-bound); the fused
        kernel drops the norms and residual adds and runs each all-reduce at the NVLS rate.
        Per block of ``L``: :func:`mapper.overlap.blocks_makespan` over ``L``."""
        ov = self.overlap
        k = min(ov.nano_batches, tokens)
        key = (kind, tokens, k, dec_s, chunk_s)
        hit = self._ov_memo.get(key)
        if hit is not None:
            return hit
        m = max(1, round(tokens / k))
        f = tokens / k / m
        chain: list[tuple[str, float]] = []
        attention = False
        for kind_, t, role in self._dense_chain(m, kind):
            if ov.fused_ar_norm and role in FUSED_AR_NORM_ROLES:
                continue
            if role == "proj" and not attention:
                chain += [("memory", dec_s / k), ("compute", chunk_s / k)]
                attention = True
            if role == "collective" and ov.fused_ar_norm:
                nbytes = tokens / k * self.shape.d_model * 2.0
                t = multimem_allreduce(self._tp_cluster, nbytes,
                                       place(self._tp_cluster, self.tp, 1)).time_s
                chain.append(("network", t))
            else:
                chain.append((kind_, t * f))
        out = blocks_makespan(chain, replace(ov, nano_batches=k), self._sms,
                              self.layers) / self.layers
        self._ov_memo[key] = out
        return out

    def cost(self, b: Batch) -> Cost:
        """Cost of one iteration (all devices of the replica); with pipeline stages, the
        sum of :meth:`stage_costs` (one batch's latency through the pipeline)."""
        t = b.tokens
        if t == 0:
            return Cost()
        if self.pp > 1:
            out = Cost()
            for c in self.stage_costs(b):
                out = out + c
            return out
        out = self._tokens("embed", t)
        for kind, n in self._stage_blocks(0):
            out = out + self._block(b, kind, t).scale(n)
        if b.emit:
            out = out + self._tokens("head", b.emit)
        return out

    def stage_costs(self, b: Batch) -> list[Cost]:
        """Each pipeline stage's part of one iteration, in order: ``layers / pp`` blocks, the
        embedding on the first stage, the head on the last, and on every stage but the last
        the send of the iteration's activations to the next (:meth:`_stage_send`). One stage
        (``pp = 1``): ``[cost(b)]``."""
        if self.pp == 1 or b.tokens == 0:
            return [self.cost(b)]
        send = self._stage_send(b.tokens)
        out = []
        for i in range(self.pp):
            blocks = Cost()
            for kind, n in self._stage_blocks(i):
                blocks = blocks + self._block(b, kind).scale(n)
            out.append(blocks + send if i < self.pp - 1 else blocks)
        out[0] = self._tokens("embed", b.tokens) + out[0]
        if b.emit:
            out[-1] = out[-1] + self._tokens("head", b.emit)
        return out
