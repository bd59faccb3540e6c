"""One model replica: its queues, paged KV cache and the per-iteration scheduler.

The batching policy (``SchedulerSpec.policy``) is a registered :class:`~archsim.serve.policy.Policy`
(``vllm``, ``orca``, ``sarathi``; see :mod:`archsim.serve.policy`).

Queue order: ``fcfs`` (arrival) or ``priority`` (``Request.priority``, then arrival);
preempted requests go back to the front. When a decode needs a new KV block and none is
free, the most recently admitted running request is preempted (vLLM's rule): ``recompute``
drops its KV (it re-runs a prefill over prompt + generated tokens later) or ``swap`` copies
its blocks to host memory over the host link and back before it resumes (the copy time is
added to the iteration that performs it, as vLLM v0 does it synchronously).

Token accounting per request (``State``): ``g`` tokens generated, ``target`` tokens to
prefill (the prompt; prompt + generated after a recompute preemption), ``done`` of them
prefilled. The cache holds ``done`` tokens during prefill and ``prompt + g - 1`` while
decoding; a decode step attends over ``prompt + g`` keys.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

from archsim.serve.cost import Batch, Cost, IterationCost
from archsim.serve.kv import BlockManager, KVLayout
from archsim.serve.policy import POLICIES, Policy
from archsim.serve.requests import Request
from archsim.workloads.errors import Problem, WorkloadError

__all__ = ["SchedulerSpec", "State", "Replica", "Pipeline", "POLICIES", "ORDERS", "PREEMPTIONS",
           "KV_MANAGERS", "policy_for", "layout_for"]

ORDERS = ("fcfs", "priority")
PREEMPTIONS = ("recompute", "swap")
KV_MANAGERS = ("hybrid", "uniform")


@dataclass(frozen=True)
class SchedulerSpec:
    """Scheduler settings of a replica.

    Attributes:
        policy: a registered policy (:data:`POLICIES`): ``vllm``, ``orca`` or ``sarathi``.
        chunk: Sarathi token budget per iteration (tokens; the paper uses 512 and 2048).
        max_num_seqs: most requests in a batch (vLLM default 256).
        max_batched_tokens: most tokens in a vLLM/Orca iteration (0: max(model context,
            2048), vLLM's default without chunked prefill).
        order: ``fcfs`` or ``priority``.
        preemption: ``recompute`` or ``swap``.
        block_size: KV block (tokens).
        host_gbps: host link for swapping (GB/s per device; 64 = PCIe 5.0 x16 one way,
            NVIDIA H100 SXM datasheet "PCIe Gen5: 128 GB/s" bidirectional).
        overhead_s: serving-engine time per iteration outside the model's ops (CPU
            scheduling, sampling, kernel launches), added to every iteration; 0 by default
            (a hardware model has none). docs/serving.md fits it for DistServe's engine.
        overhead_per_seq_s: engine host time per sequence in the batch (s; decodes and
            prompt chunks), with ``overhead_s`` the iteration's host time
            (:class:`~archsim.serve.engine.EngineHost`).
        overlap_host: True: the host's time overlaps the GPU's (an async engine: the
            iteration takes max(GPU, host)); False: added to it. Pipeline-parallel
            replicas always add it (vLLM turns async scheduling off there).
        kv_manager: ``hybrid`` (default: sliding-window layers keep only their window's KV
            blocks, as vLLM's hybrid KV cache manager, SGLang's and TensorRT-LLM's
            sliding-window pools; :class:`~archsim.serve.kv.KVLayout`) or ``uniform``
            (every layer keeps every token's blocks: vLLM's
            ``--disable-hybrid-kv-cache-manager``). Same result for models with one
            attention span.
    """

    policy: str = "vllm"
    chunk: int = 512
    max_num_seqs: int = 256
    max_batched_tokens: int = 0
    order: str = "fcfs"
    preemption: str = "recompute"
    block_size: int = 16
    host_gbps: float = 64.0
    overhead_s: float = 0.0
    kv_manager: str = "hybrid"
    overhead_per_seq_s: float = 0.0
    overlap_host: bool = False


def layout_for(cost: IterationCost, spec: SchedulerSpec) -> KVLayout:
    """The KV pool's page layout of a replica of ``cost`` scheduled by ``spec``.

    Raises:
        WorkloadError: an unknown ``spec.kv_manager`` (path ``--kv-manager``).
    """
    if spec.kv_manager not in KV_MANAGERS:
        raise WorkloadError(Problem(f"unknown KV cache manager {spec.kv_manager!r}; expected "
                                    f"one of {', '.join(KV_MANAGERS)}", "--kv-manager"))
    return cost.kv_layout if spec.kv_manager == "hybrid" else KVLayout()


def policy_for(name: str) -> Policy:
    """A new instance of the policy registered as ``name``.

    Raises:
        WorkloadError: no policy has that name (the message lists the registered ones).
    """
    cls = POLICIES.get(name)
    if cls is None:
        raise WorkloadError(Problem(f"unknown scheduling policy {name!r}; expected one of "
                                    f"{', '.join(POLICIES)}", "scheduler.policy"))
    return cls()


class State:
    """Mutable per-request state inside the simulator."""

    __slots__ = ("req", "prompt", "output", "g", "target", "done", "blocks", "first_t",
                 "last_t", "finish_t", "preemptions", "replica", "swapped", "key",
                 "decode_replica", "served", "hit", "shared", "group")

    def __init__(self, req: Request) -> None:
        self.req = req
        self.prompt = req.prompt_tokens
        self.output = req.output_tokens
        self.g = 0
        self.target = req.prompt_tokens
        self.done = 0
        self.blocks = 0
        self.first_t = -1.0
        self.last_t = -1.0
        self.finish_t = -1.0
        self.preemptions = 0
        self.replica = -1
        self.swapped = False
        self.key: tuple[int, int, int] = (0, 1, req.rid)
        self.decode_replica = -1
        self.served = 0
        self.hit = 0            # prompt tokens found in the prefix cache (workloads.kvtech)
        self.shared = 0         # their whole KV blocks, shared with the prefix's other users
        self.group = ""         # the prefix group whose blocks it uses on its replica


@dataclass
class IterationRecord:
    """What one iteration did (for the timeline)."""

    replica: int
    start_s: float
    time_s: float
    prefill_tokens: int
    decodes: int
    kv_used: int
    energy_j: float


class Pipeline:
    """The stages of a pipeline-parallel replica, shared by its virtual engines.

    A batch entering at ``t`` passes the stages in order; stage ``k`` starts it when the
    batch has left stage ``k - 1`` and stage ``k`` has finished the batch before it (FIFO),
    so with ``pp`` engines busy the replica completes one batch per (slowest) stage time and
    a batch's latency is the sum of its stage times (vLLM's and TensorRT-LLM's pipeline
    parallelism keep ``pp`` batches in flight).
    """

    def __init__(self, stages: int) -> None:
        self.free = [0.0] * stages

    def run(self, now: float, pre_s: float, stage_s: list[float]) -> float:
        """Reserve the stages for a batch issued at ``now`` that spends ``pre_s`` before the
        first stage (engine overhead, swaps) and ``stage_s[k]`` in stage ``k``; returns its
        latency (s)."""
        t = now + pre_s
        free = self.free
        for k, st in enumerate(stage_s):
            t = max(t, free[k]) + st
            free[k] = t
        return t - now


class Replica:
    """A replica: ``devices`` devices running one model copy, one scheduler.

    ``role``: ``both`` (aggregated), ``prefill`` (hands requests off after their first
    token) or ``decode`` (receives them with their KV). ``pipeline``: the stages this
    replica shares with the other virtual engines of a pipeline-parallel replica (None: it
    has all its devices to itself).
    """

    def __init__(self, index: int, cost: IterationCost, kv_total: int, spec: SchedulerSpec,
                 role: str = "both", pipeline: Pipeline | None = None) -> None:
        self.index = index
        self.cost = cost
        self.spec = spec
        self.role = role
        self.pipeline = pipeline
        self.link_id = index          # whose KV link FIFO this replica's hand-offs join
        self.kv = BlockManager(kv_total, spec.block_size)
        # pages of the pool per token block (serve.kv.KVLayout; one per block unless the
        # model's layers attend over different spans)
        self.layout = layout_for(cost, spec)
        self.hybrid = self.layout.hybrid
        # the device's own blocks; the rest of ``kv_total`` live on the host (KV offload)
        self.device_blocks = kv_total
        # top-k block attention: most keys a decode attends to (workloads.kvtech)
        k = cost.kv.topk_blocks
        self.key_cap = k * spec.block_size if k else 1 << 62
        self.streamed = 1.0     # share of the host blocks a decode reads (top-k: fewer)
        # prefix caching from a trace's groups: group -> [its whole blocks, requests using it]
        self.prefixes: dict[str, list[int]] = {}
        self.waiting: list[tuple[tuple[int, int, int], State]] = []
        self.running: list[State] = []
        self.swapped: list[State] = []
        self.busy = False
        self.ctx = cost.context
        self.policy = policy_for(spec.policy)
        self.max_tokens = self.policy.token_budget(spec, cost.context)
        self.swap_bytes_per_block = (spec.block_size * cost.kv_bytes_per_token
                                     * self.layout.page_fraction)      # bytes per page
        self.preemptions = 0
        self.busy_s = 0.0
        self.energy_j = 0.0
        self.flops = 0.0
        self.dram = 0.0
        self.kv_area = 0.0      # integral of used blocks over time (block-seconds)
        self.iterations = 0
        self.decode_keys = 0
        self.prefilling: list[State] = []

    # ---- queues ------------------------------------------------------------------------------
    def outstanding(self) -> int:
        return len(self.waiting) + len(self.running) + len(self.swapped)

    def enqueue(self, s: State, front: bool = False) -> None:
        pr = s.req.priority if self.spec.order == "priority" else 0
        s.key = (pr, 0 if front else 1, s.req.rid)
        s.replica = self.index
        heapq.heappush(self.waiting, (s.key, s))

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.swapped)

    def pages(self, tokens: int, trimmed: bool = False, shared: int = 0) -> int:
        """Pages of the pool a request with ``tokens`` tokens holds beyond ``shared``
        blocks of a cached prefix (= blocks unless the layout is hybrid; ``trimmed``: the
        sliding layers keep only their window)."""
        return self.layout.pages(self.kv.blocks_for(tokens), self.kv.block_size, trimmed,
                                 shared)

    def demand_blocks(self) -> int:
        """Blocks the waiting requests will need (for the KV-aware router)."""
        return sum(self.pages(s.target) for _, s in self.waiting)

    # ---- preemption --------------------------------------------------------------------------
    def _preempt(self, victim: State) -> float:
        """Preempt ``victim`` (already removed from ``running``); returns swap time (s)."""
        self.preemptions += 1
        victim.preemptions += 1
        if self.spec.preemption == "swap" and victim.done >= victim.target:
            t = victim.blocks * self.swap_bytes_per_block / (self.spec.host_gbps * 1e9)
            self.kv.release(victim.blocks)
            victim.swapped = True
            self.swapped.append(victim)
            return t
        self.kv.release(victim.blocks)
        victim.blocks = 0
        if victim.g > 0:
            victim.target = victim.prompt + victim.g   # recompute prompt + generated
        victim.done = victim.hit          # the prefix stays cached
        self.enqueue(victim, front=True)
        return 0.0

    def _swap_in(self) -> float:
        t = 0.0
        while self.swapped and len(self.running) < self.spec.max_num_seqs:
            s = self.swapped[0]
            if not self.kv.alloc(s.blocks):
                break
            self.swapped.pop(0)
            s.swapped = False
            self.running.append(s)
            t += s.blocks * self.swap_bytes_per_block / (self.spec.host_gbps * 1e9)
        return t

    def admit(self, s: State, reserve_output: bool) -> bool:
        """Allocate ``s``'s blocks (whole target, or target + remaining output); False
        (nothing allocated) when they do not fit."""
        tokens = max(s.target, s.prompt + s.g)
        if reserve_output:
            tokens = min(self.ctx, s.prompt + s.output)
        g = s.req.prefix_group
        if g and not s.group and s.done == 0 and s.g == 0:
            return self._admit_grouped(s, tokens)
        need = self.pages(tokens, False, s.shared) - s.blocks
        if need > 0 and not self.alloc(need):
            return False
        s.blocks += max(0, need)
        return True

    def alloc(self, n: int) -> bool:
        """Take ``n`` blocks, evicting cached prefixes no running request uses (least
        recently used first) when the free ones are too few."""
        if self.kv.alloc(n):
            return True
        idle = [g for g, e in self.prefixes.items() if e[1] == 0]
        for g in idle:
            if self.kv.free >= n:
                break
            self.kv.release(self.prefixes.pop(g)[0])
        return self.kv.alloc(n)

    def _admit_grouped(self, s: State, tokens: int) -> bool:
        """Admit the first prefill of a request whose prompt starts with a trace's prefix
        group: the group's whole blocks (``floor(min(prefix, prompt - 1) / block)``) are
        held once per replica while any request uses them. The first request computes the
        prefix (its blocks become the group's); later ones find it cached (vLLM's automatic
        prefix caching: whole blocks) and skip its prefill. A prefix no running request
        uses stays cached until an allocation needs its blocks (:meth:`alloc`, LRU)."""
        bs = self.kv.block_size
        full = min(s.req.prefix_tokens, s.prompt - 1) // bs
        entry = self.prefixes.get(s.req.prefix_group)
        shared = self.layout.pages(full, bs, False)      # the prefix's own pages
        new = 0 if entry is not None else shared
        need = self.pages(tokens, False, full)
        if need + new > 0 and not self.alloc(need + new):
            return False
        if entry is None:
            self.prefixes[s.req.prefix_group] = [shared, 1]
        else:
            entry[1] += 1
            s.hit = s.done = full * bs
            self.prefixes[s.req.prefix_group] = self.prefixes.pop(s.req.prefix_group)  # LRU
        s.group = s.req.prefix_group
        s.shared = full
        s.blocks = need
        return True

    def leave_prefix(self, s: State) -> None:
        """``s`` leaves this replica (finished or handed off): it stops using its prefix
        group's blocks (kept cached, evictable once no request uses them)."""
        if not s.group:
            return
        self.prefixes[s.group][1] -= 1
        s.group = ""
        s.shared = 0

    # ---- one iteration -------------------------------------------------------------------
    def schedule(self) -> tuple[list[tuple[State, int]], list[State], float]:
        """Form the next batch: (prefill chunks (state, tokens), decodes, swap time s):
        swapped-out requests come back where they fit, then the policy picks the work."""
        swap_t = self._swap_in() if self.swapped else 0.0
        return self.policy.batch(self, swap_t)

    def admit_whole(self, tokens: int, reserve: bool) -> list[tuple[State, int]]:
        """Admit waiting requests with their whole remaining prefill (vLLM, Orca)."""
        chunks: list[tuple[State, int]] = []
        while self.waiting and len(self.running) < self.spec.max_num_seqs:
            s = self.waiting[0][1]
            need = s.target - s.done
            if need > 0 and tokens + need > self.max_tokens and (chunks or tokens):
                break
            if not self.admit(s, reserve_output=reserve):
                break
            need = s.target - s.done              # a prefix group's hit is known now
            heapq.heappop(self.waiting)
            self.running.append(s)
            if need > 0:
                chunks.append((s, need))
                tokens += need
        return chunks

    def decodes(self) -> tuple[list[State], float]:
        """Running requests that decode this iteration, growing their KV by a block where
        needed and preempting from the back when the cache is full. Also sets
        ``self.decode_keys`` (sum of keys attended by the decodes) and ``self.prefilling``
        (the running requests still prefilling, in order: what a chunked policy continues,
        found in the same pass). Hot loop: kept lean."""
        if self.hybrid:
            self.prefilling = []
            return self._decodes_slow(0, [], 0)
        dec: list[State] = []
        pre: list[State] = []
        keys = 0
        bs = self.kv.block_size
        kv = self.kv
        cap = self.key_cap
        append = dec.append
        self.prefilling = pre
        for s in self.running:                    # fast path: no preemption needed
            if s.done < s.target:                 # still prefilling (chunked)
                pre.append(s)
                continue
            need = s.prompt + s.g                 # tokens in the cache after this step
            if need > (s.blocks + s.shared) * bs:
                if not kv.alloc(1):               # (states compare by identity)
                    return self._decodes_slow(self.running.index(s), dec, keys)
                s.blocks += 1
            append(s)
            keys += need if need < cap else cap
        self.decode_keys = keys
        return dec, 0.0

    def _decodes_slow(self, i: int, dec: list[State], keys: int) -> tuple[list[State], float]:
        """:meth:`decodes` from index ``i`` on, preempting from the back of ``running`` (a
        request is preempted only after every one before it was visited, so the
        ``prefilling`` list stays that of the requests left running)."""
        swap_t = 0.0
        bs = self.kv.block_size
        running = self.running
        while i < len(running):
            s = running[i]
            if s.done < s.target:
                self.prefilling.append(s)
                i += 1
                continue
            need = s.prompt + s.g
            preempted_self = False
            if self.hybrid:      # the window's pages only, once the prompt is cached
                want = self.pages(need, True, s.shared)
                if want < s.blocks:
                    self.kv.release(s.blocks - want)
                    s.blocks = want
                grow = want - s.blocks
            else:
                grow = 1 if need > (s.blocks + s.shared) * bs else 0
            while grow:
                if self.alloc(grow):
                    s.blocks += grow
                    grow = 0 if self.hybrid or need <= (s.blocks + s.shared) * bs else 1
                    continue
                victim = running.pop()
                swap_t += self._preempt(victim)
                if victim is s:
                    preempted_self = True
                    break
            if preempted_self:
                break                             # s was the last one
            dec.append(s)
            keys += min(need, self.key_cap)
            i += 1
        self.decode_keys = keys
        return dec, swap_t

    def run(self, chunks: list[tuple[State, int]], dec: list[State]) -> tuple[Batch, Cost]:
        """Price the batch (no state change); call right after :meth:`schedule`."""
        keys = self.decode_keys if dec else 0
        emit = len(dec)
        for s, c in chunks:
            if s.done + c >= s.target:
                emit += 1
        sel = 0
        self.streamed = 1.0
        if self.cost.kv.topk_blocks and dec:      # top-k: score every block of each context
            sel = sum(self.kv.blocks_for(s.prompt + s.g) for s in dec)
            # the share of the cached keys the decodes read (what an offload streams)
            self.streamed = keys / sum(s.prompt + s.g for s in dec)
        b = Batch([(c, s.done) for s, c in chunks], len(dec), keys, emit, sel)
        return b, self.cost.cost(b)

    def offload_bytes(self) -> float:
        """Bytes of one device's KV blocks on the host (KV offload, workloads.kvtech): the used
        blocks beyond the device's own, which a decode iteration streams back (with top-k
        block attention only the selected share, ``self.streamed``, of them)."""
        return (max(0, self.kv.used - self.device_blocks) * self.swap_bytes_per_block
                * self.streamed)

    def account(self, c: Cost, dt: float) -> None:
        self.busy_s += dt
        self.energy_j += c.energy_j
        self.flops += c.flops
        self.dram += c.dram_bytes
        self.kv_area += self.kv.used * dt
        self.iterations += 1

    def info(self) -> dict[str, Any]:
        return {"replica": self.index, "role": self.role, "devices": self.cost.tp,
                "pp": self.cost.pp, "ep": self.cost.ep, "design": self.cost.acc.name,
                "kv_blocks": self.kv.total, "kv_peak_blocks": self.kv.peak,
                "iterations": self.iterations, "preemptions": self.preemptions,
                "busy_s": self.busy_s}
