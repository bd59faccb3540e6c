"""Cluster serving: replicas, a router, prefill/decode disaggregation, the event loop.

The simulation is event-driven: a heap of ``(time, kind, seq)`` events (an iteration ends,
a KV transfer lands, a request arrives; at equal times in that order, then FIFO by
``seq``), so equal-time events leave deterministically (the SimPy/gem5 rule). Between
events nothing happens: an idle replica starts its next iteration as soon as it has work.

* **Aggregated** serving: ``replicas`` copies of the model, each ``tp``-way tensor
  parallel (Megatron TP of ``archsim.workload(..., tp=)``), requests routed on arrival.
* **Disaggregated** serving (Splitwise, Patel et al. ISCA'24; DistServe, Zhong et al.
  OSDI'24): prefill replicas run prompts and emit the first token; the request's KV cache
  (``prompt x KV bytes per token``, every layer) then crosses a :class:`KVLink` to a decode
  replica chosen by the router, which continues decoding. The transfer from one prefill
  replica is serialised on its link (FIFO); each of the ``min(tp_prefill, tp_decode)``
  device pairs carries its shard in parallel.

Closed-loop load (``run(..., concurrency=N)``): ``N`` clients; the first ``N`` requests are
sent at t = 0 and each later one at the instant a client's previous request finishes (or is
rejected), so never more than ``N`` requests are in the system (the way vLLM's
``benchmark_serving --max-concurrency``, SGLang's ``bench_serving`` and genai-perf load a
server). A request's ``arrival_s`` becomes its send time.

Routers are registered classes (:mod:`archsim.serve.router`, :data:`ROUTERS`):
``round-robin``; ``least-outstanding`` (fewest queued + running requests); ``kv-aware``
(most free KV blocks after the waiting requests' demand). Ties go to the lowest replica
index.

:class:`KVLink` is the seam for the cluster model: anything with ``transfer_s(nbytes)``
(and a ``name``) can replace it, e.g. a link of the cluster topology.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from archsim import energy
from archsim.arch.accelerator import Accelerator
from archsim.mapper.overlap import Overlap
from archsim.serve.cost import IterationCost, kv_bytes_per_token
from archsim.serve.kv import MEMORY_FRACTION, kv_blocks
from archsim.serve.replica import Pipeline, Replica, SchedulerSpec, State, layout_for
from archsim.serve.requests import Request
from archsim.serve.router import ROUTERS, Router
from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.kvtech import KVTechniques, offload_exposed_s, prefix_hit_tokens
from archsim.workloads.parallel import DeviceBuild

__all__ = ["KVLink", "LINKS", "ROUTERS", "PoolSpec", "ServeSetup", "Simulation",
           "parse_link"]


#: Most engines (replicas x pipeline stages, both pools) one serving run simulates: each is
#: a Python object with its own scheduler and KV state (~6 KB; 100,000 replicas of a small
#: model run in ~7 s), so a mistyped count fails at once instead of exhausting memory.
MAX_ENGINES = 1 << 17

class Link(Protocol):
    """Contract: ``transfer_s(nbytes)`` is the time (s) to move ``nbytes`` over one
    device-to-device link, latency included, monotone in ``nbytes``."""

    name: str

    def transfer_s(self, nbytes: float) -> float: ...


@dataclass(frozen=True)
class KVLink:
    """A point-to-point link for KV transfers: ``latency_s + nbytes / (bandwidth_gbps 1e9)``.

    Attributes:
        name: label.
        bandwidth_gbps: one direction, GB/s per device pair.
        latency_s: per transfer (s).
        source: where the numbers come from.
    """

    name: str
    bandwidth_gbps: float
    latency_s: float
    source: str = ""

    def transfer_s(self, nbytes: float) -> float:
        return self.latency_s + nbytes / (self.bandwidth_gbps * 1e9)


#: Named links. NVLink 4 (H100 SXM): 900 GB/s bidirectional per GPU = 450 GB/s one way
#: (NVIDIA H100 datasheet); NVLink 3 (A100 SXM): 600 GB/s bidirectional = 300 one way
#: (NVIDIA A100 datasheet); InfiniBand NDR 400 Gb/s = 50 GB/s per GPU (ConnectX-7, one NIC
#: per GPU as in DGX H100); HDR 200 Gb/s = 25 GB/s (DGX A100). Latencies: ~5 us for an
#: NVLink copy and ~10 us for an RDMA message, order-of-magnitude figures (NCCL small-
#: message latency), negligible next to the bandwidth term for KV caches of MBs.
LINKS: dict[str, KVLink] = {
    "nvlink4": KVLink("nvlink4", 450.0, 5e-6, "NVIDIA H100 SXM datasheet: NVLink 900 GB/s "
                      "bidirectional"),
    "nvlink3": KVLink("nvlink3", 300.0, 5e-6, "NVIDIA A100 SXM datasheet: NVLink 600 GB/s "
                      "bidirectional"),
    "ib-ndr": KVLink("ib-ndr", 50.0, 10e-6, "NVIDIA ConnectX-7: InfiniBand NDR 400 Gb/s"),
    "ib-hdr": KVLink("ib-hdr", 25.0, 10e-6, "NVIDIA ConnectX-6: InfiniBand HDR 200 Gb/s"),
}


def parse_link(text: str) -> KVLink:
    """``nvlink4`` / ``nvlink3`` / ``ib-ndr`` / ``ib-hdr`` or ``GBPS[:LATENCY_US]``.

    Raises:
        WorkloadError: names ``--kv-link`` and the accepted forms.
    """
    if text in LINKS:
        return LINKS[text]
    parts = text.split(":")
    try:
        bw = float(parts[0])
        lat = float(parts[1]) * 1e-6 if len(parts) == 2 else 5e-6
        if len(parts) <= 2 and bw > 0 and lat >= 0 and math.isfinite(bw + lat):
            return KVLink(f"{bw:g}GB/s", bw, lat, "--kv-link")
    except ValueError:
        pass
    raise WorkloadError(Problem(f"expected one of {', '.join(LINKS)} or GBPS[:LATENCY_US], "
                                f"got {text!r}", "--kv-link"))


@dataclass(frozen=True)
class PoolSpec:
    """``replicas`` replicas of ``tp x pp`` devices each, with one scheduler spec.

    Attributes:
        replicas: data-parallel copies of the model.
        tp: tensor-parallel devices per pipeline stage.
        scheduler: the batching policy and its limits.
        pp: pipeline stages per replica (``layers / pp`` blocks each). A replica of ``pp``
            stages runs ``pp`` virtual engines, each with its own scheduler and ``1 / pp`` of
            the KV blocks, whose batches flow through the shared stages (vLLM's pipeline
            parallelism: ``pp`` batches in flight; docs/serving.md).
        ep: expert-parallel degree of MoE blocks (divides ``tp``): ``experts / ep`` whole
            experts per device, token all-to-alls priced on the replica's devices.
        design: the design this pool runs on (None: the setup's); a disaggregated
            deployment may run its prefill and decode pools on different designs.
        build: the pool's graph choices (formats, attention; None: the setup's ``build``
            when the pool is on the setup's design, else the pool design's own).
    """

    replicas: int = 1
    tp: int = 1
    scheduler: SchedulerSpec = field(default_factory=SchedulerSpec)
    pp: int = 1
    ep: int = 1
    design: Accelerator | None = None
    build: DeviceBuild | None = None

    @property
    def devices(self) -> int:
        """Devices of one replica: ``tp x pp``."""
        return self.tp * self.pp

    def label(self) -> str:
        """``TP4``, ``TP4 PP2 EP4`` (degrees above 1 after TP), with the design when set."""
        par = f"TP{self.tp}" + "".join(f" {k}{v}" for k, v in (("PP", self.pp),
                                                               ("EP", self.ep)) if v > 1)
        return par + (f" on {self.design.name}" if self.design is not None else "")


@dataclass(frozen=True)
class ServeSetup:
    """A serving deployment.

    Attributes:
        model: zoo decoder.
        pool: the aggregated pool, or the prefill pool when ``decode`` is set.
        decode: the decode pool (disaggregated serving), or None.
        router: see :data:`ROUTERS`.
        link: KV link for disaggregation.
        memory_fraction: share of device memory for weights + KV (vLLM default 0.9).
        fidelity: ``analytical`` or ``cycle`` for the iteration costs.
        constraints: mapping constraints (a YAML path or ``Constraints``) for multi-unit
            designs, or None; ``decode_constraints`` replace them for the decode-phase
            evaluations (decode attention), e.g. AttAcc's decode attention on PIM
            (examples/serving/attacc_like.*).
        build: the choices every replica's graphs are built with (attention, formats;
            ``archsim.api.device_build``; None: the design's own).
        kv: the KV-cache techniques of every replica (:mod:`archsim.workloads.kvtech`: prefix
            caching, K/V rematerialisation, top-k block attention, host offload).
        overlap: overlap inside one device of every replica (``mapper.overlap``;
            ``--overlap``; docs/serving.md).
    """

    model: str
    pool: PoolSpec = field(default_factory=PoolSpec)
    decode: PoolSpec | None = None
    router: str = "round-robin"
    link: KVLink = LINKS["nvlink4"]
    memory_fraction: float = MEMORY_FRACTION
    fidelity: str = "analytical"
    constraints: Any = None
    decode_constraints: Any = None
    build: DeviceBuild | None = None
    kv: KVTechniques = field(default_factory=KVTechniques)
    overlap: Overlap = field(default_factory=Overlap)


_END, _XFER, _ARRIVE = 0, 1, 2


def _router(name: str) -> Router:
    """A new instance of the router registered as ``name``."""
    cls = ROUTERS.get(name)
    if cls is None:
        raise WorkloadError(Problem(f"unknown router {name!r}; expected one of "
                                    f"{', '.join(ROUTERS)}", "router"))
    return cls()


class Simulation:
    """One serving run of ``requests`` on ``acc`` under ``setup``.

    Contract: deterministic (same inputs -> same outputs); every request either finishes
    once or is reported as rejected (its prompt + output cannot fit one replica's KV
    cache even when empty); KV use never exceeds a replica's blocks.
    """

    def __init__(self, acc: Accelerator, setup: ServeSetup,
                 costs: dict[Any, IterationCost] | None = None) -> None:
        self.acc = acc
        self.setup = setup
        self.costs: dict[Any, IterationCost] = costs if costs is not None else {}
        self._idle: dict[tuple[int, int], float] = {}   # _idle_power's (devices, design)
        pools = [("both" if setup.decode is None else "prefill", setup.pool)]
        if setup.decode is not None:
            pools.append(("decode", setup.decode))
        engines = sum(pool.replicas * pool.pp for _, pool in pools)
        if engines > MAX_ENGINES:
            role, big = max(pools, key=lambda rp: rp[1].replicas * rp[1].pp)
            raise WorkloadError(Problem(
                f"{big.replicas:,} replicas x {big.pp} pipeline stage(s) make {engines:,} "
                f"engines to simulate; at most {MAX_ENGINES:,} (each engine is simulated "
                "one by one: about 6 KB and 60 us each)",
                "--decode-replicas" if role == "decode" else "--replicas"))
        self.replicas: list[Replica] = []
        for role, pool in pools:
            cost = self.cost_model(pool)
            setup.kv.check(cost.shape, pool.tp, pool.scheduler.block_size)
            cap = cost.capacity_bytes()
            # bytes of one page of the pool (a block of every layer, or of one group of
            # layers under a hybrid layout: serve.kv.KVLayout)
            page_tok = cost.kv_bytes_per_token * layout_for(cost, pool.scheduler).page_fraction
            if cap > 0:
                blocks = kv_blocks(cap, cost.weight_bytes(), page_tok,
                                   pool.scheduler.block_size, setup.memory_fraction,
                                   cost.acc.name, setup.model)
            elif setup.kv.offload_gb:
                raise WorkloadError(Problem(f"{cost.acc.name} declares no memory capacity "
                                            "(an unbounded KV cache): nothing to offload to "
                                            "the host", "--kv-offload-gb"))
            else:          # the design declares no memory capacity: an unbounded cache
                blocks = 1 << 40
            # KV offload: the host's blocks extend the cache beyond the device's
            host = int(setup.kv.offload_gb * 1e9
                       // (pool.scheduler.block_size * page_tok))
            for _ in range(pool.replicas):
                # a pipeline's virtual engines share its stages and split its KV blocks
                pipe = Pipeline(pool.pp) if pool.pp > 1 else None
                first = len(self.replicas)
                for _ in range(pool.pp):
                    own = blocks // pool.pp if pipe else blocks
                    rep = Replica(len(self.replicas), cost,
                                  own + (host // pool.pp if pipe else host), pool.scheduler,
                                  role, pipe)
                    rep.device_blocks = own
                    rep.link_id = first       # the engines of one replica share its links
                    self.replicas.append(rep)
        self.front = [r for r in self.replicas if r.role in ("both", "prefill")]
        self.back = [r for r in self.replicas if r.role == "decode"]
        self._routers = {"front": _router(setup.router), "back": _router(setup.router)}
        self.idle_power_w = sum(self._idle_power(r.cost.tp, r.cost.acc)
                                for r in self.replicas)
        # the KV a hand-off moves: the whole model's, in the prefill pool's KV format
        front = self.cost_model(setup.pool)
        self.kv_bytes_full = kv_bytes_per_token(front.shape, front.build)

    def cost_model(self, pool: PoolSpec | int) -> IterationCost:
        """The iteration-cost model of a pool (memoised in ``costs``: a tensor-parallel pool
        on the setup's design under its ``tp``, as before; others under a tuple key)."""
        if isinstance(pool, int):
            pool = PoolSpec(tp=pool)
        acc = pool.design or self.acc
        same = pool.design is None or pool.design is self.acc
        build = pool.build or (self.setup.build if same else None)
        key: Any = pool.tp if (same and pool.pp == 1 and pool.ep == 1
                               and pool.build is None) else (acc.name, pool.tp, pool.pp,
                                                             pool.ep, build)
        if self.setup.kv.any:
            key = (key, self.setup.kv)
        if key not in self.costs:
            self.costs[key] = IterationCost(acc, self.setup.model, pool.tp,
                                            self.setup.fidelity, self.setup.constraints,
                                            self.setup.decode_constraints, build=build,
                                            pp=pool.pp, ep=pool.ep, kv=self.setup.kv,
                                            overlap=self.setup.overlap)
        return self.costs[key]

    def _idle_power(self, devices: int, acc: Accelerator | None = None) -> float:
        """Leakage power of ``devices`` idle devices of ``acc`` (default the setup's design;
        W): energy of no actions over 1 s."""
        acc = acc or self.acc
        key = (devices, id(acc))    # (replicas repeat their pool's: evaluated once each)
        if key not in self._idle:
            tech = energy.Technology(node_nm=acc.technology.node_nm)
            comps = [c for u in acc.units for c in u.components()]
            self._idle[key] = energy.evaluate(comps, {}, 1.0, tech).total_j * devices
        return self._idle[key]

    # ---- routing -------------------------------------------------------------------------
    def _route(self, pool: list[Replica], which: str) -> Replica:
        if len(pool) == 1:
            return pool[0]
        return self._routers[which].pick(pool)

    # ---- the loop ------------------------------------------------------------------------
    def run(self, requests: list[Request], progress: Callable[[int, int], None] | None = None,
            concurrency: int | None = None) -> dict[str, Any]:
        """Simulate until every request finished; returns the raw records for metrics.

        With ``concurrency`` (closed-loop load, module doc) the requests' ``arrival_s`` are
        ignored: they are sent in list order as clients free up.
        """
        ctx = self.replicas[0].ctx
        hit_rate = self.setup.kv.prefix_hit_rate
        bs = self.setup.pool.scheduler.block_size
        states: list[State] = []
        clipped = 0
        for rq in requests:
            s = State(rq)
            # keep prompt + output within the model's positions (the output wins up to half)
            if s.prompt + s.output > ctx:
                clipped += 1
                s.output = min(s.output, max(1, ctx // 2))
                s.prompt = min(s.prompt, ctx - s.output)
                s.target = s.prompt
            if hit_rate and not rq.prefix_group:   # prefix caching at a given hit rate:
                s.hit = s.done = prefix_hit_tokens(s.prompt, hit_rate)   # not computed,
                s.shared = s.hit // bs                                    # nor owned
            states.append(s)
        heap: list[tuple[float, int, int, int, Any]] = []
        seq = 0
        # closed loop: the first ``concurrency`` requests now, the rest when clients free up
        sent = len(states) if concurrency is None else min(concurrency, len(states))
        for s in states[:sent]:
            if concurrency is not None:
                s.req = replace(s.req, arrival_s=0.0)
            heap.append((s.req.arrival_s, _ARRIVE, seq, 0, s))
            seq += 1
        heapq.heapify(heap)
        peak_sys = 0
        to_start: list[Replica] = []      # closed loop: replicas given same-instant arrivals
        tbt: list[float] = []
        timeline: list[tuple[int, float, float, int, int, int, float]] = []
        n_sys = 0
        area_sys = 0.0
        t_prev = 0.0
        finished = 0
        rejected: list[State] = []
        link_free = [0.0] * len(self.replicas)
        xfer_s = 0.0
        xfer_bytes = 0.0
        kv_tok_full = self.kv_bytes_full if self.back else 0.0
        total = len(states)
        next_report = max(1, total // 20)

        def send_next(now: float) -> None:
            """Closed loop: a client freed up at ``now`` sends the next request."""
            nonlocal seq, sent
            if concurrency is None or sent >= len(states):
                return
            s = states[sent]
            sent += 1
            s.req = replace(s.req, arrival_s=now)
            heapq.heappush(heap, (now, _ARRIVE, seq, 0, s))
            seq += 1

        def start(rep: Replica, now: float) -> None:
            nonlocal seq, n_sys
            while rep.has_work():
                chunks, dec, swap_t = rep.schedule()
                if chunks or dec:
                    b, c = rep.run(chunks, dec)
                    sp = rep.spec
                    host = sp.overhead_s + sp.overhead_per_seq_s * (len(chunks) + len(dec))
                    if rep.pipeline is None:
                        dt = (max(c.time_s, host) + swap_t if sp.overlap_host
                              else c.time_s + swap_t + host)
                    else:      # through the stages, behind the other engines' batches
                        dt = rep.pipeline.run(now, swap_t + host,
                                              [x.time_s for x in rep.cost.stage_costs(b)])
                    if dec and rep.kv.used > rep.device_blocks:   # KV offload: host blocks
                        dt += offload_exposed_s(rep.offload_bytes(), rep.spec.host_gbps,
                                                c.time_s)
                    rep.account(c, dt)
                    timeline.append((rep.index, now, dt, b.tokens - b.decodes, b.decodes,
                                     rep.kv.used, c.energy_j))
                    rep.busy = True
                    heapq.heappush(heap, (now + dt, _END, seq, rep.index, (chunks, dec)))
                    seq += 1
                    return
                # nothing runnable: the head request cannot fit an empty cache -> reject
                if not rep.running and not rep.swapped and rep.waiting:
                    _, s = heapq.heappop(rep.waiting)
                    rejected.append(s)
                    n_sys -= 1
                    send_next(now)
                    continue
                break
            rep.busy = False

        def finish(s: State, now: float) -> None:
            nonlocal n_sys, finished
            s.finish_t = now
            s.served += 1
            n_sys -= 1
            finished += 1
            send_next(now)

        while heap:
            now, kind, _, ri, payload = heapq.heappop(heap)
            area_sys += n_sys * (now - t_prev)
            t_prev = now
            if kind == _ARRIVE:
                s = payload
                n_sys += 1
                peak_sys = max(peak_sys, n_sys)
                rep = self._route(self.front, "front")
                rep.enqueue(s)
                if concurrency is None:
                    if not rep.busy:
                        start(rep, now)
                    continue
                # closed loop: requests sent at the same instant reach the schedulers together
                if rep not in to_start:
                    to_start.append(rep)
                if not (heap and heap[0][0] == now and heap[0][1] == _ARRIVE):
                    for r in to_start:
                        if not r.busy:
                            start(r, now)
                    to_start.clear()
                continue
            if kind == _XFER:
                s = payload
                rep = self.replicas[ri]
                s.blocks = 0
                rep.enqueue(s)
                if not rep.busy:
                    start(rep, now)
                continue
            rep = self.replicas[ri]
            chunks, dec = payload
            for s, c in chunks:
                s.done += c
                if s.done >= s.target:
                    s.g += 1
                    if s.first_t < 0:
                        s.first_t = now
                    else:
                        tbt.append(now - s.last_t)
                    s.last_t = now
            leaving = bool(chunks) and rep.role == "prefill"
            tbt_add = tbt.append
            for s in dec:
                g = s.g + 1
                s.g = g
                tbt_add(now - s.last_t)
                s.last_t = now
                if g >= s.output:
                    leaving = True
            for s, _ in chunks:
                if s.done >= s.target and s.g >= s.output:
                    leaving = True
            if not leaving:             # nobody finished or hands off: running unchanged
                start(rep, now)
                continue
            keep: list[State] = []
            for s in rep.running:
                if s.done >= s.target and s.g >= s.output:
                    rep.kv.release(s.blocks)
                    s.blocks = 0
                    rep.leave_prefix(s)
                    finish(s, now)
                elif rep.role == "prefill" and s.done >= s.target:
                    # hand off: KV crosses the link to a decode replica
                    dst = self._route(self.back, "back")
                    nbytes = (s.prompt + s.g - 1) * kv_tok_full
                    pairs = min(rep.cost.devices, dst.cost.devices)
                    t0 = max(now, link_free[rep.link_id])
                    dt = self.setup.link.transfer_s(nbytes / pairs)
                    link_free[rep.link_id] = t0 + dt
                    xfer_s += dt
                    xfer_bytes += nbytes
                    rep.kv.release(s.blocks)      # freed when the copy is issued (see docs)
                    s.blocks = 0
                    rep.leave_prefix(s)
                    s.decode_replica = dst.index
                    heapq.heappush(heap, (t0 + dt, _XFER, seq, dst.index, s))
                    seq += 1
                else:
                    keep.append(s)
            rep.running = keep
            if progress is not None and finished >= next_report:
                progress(finished, total)
                next_report += max(1, total // 20)
            start(rep, now)
        if progress is not None:
            progress(finished, total)
        return {"states": states, "tbt": tbt, "timeline": timeline, "area_sys": area_sys,
                "end_s": t_prev, "rejected": rejected, "clipped": clipped,
                "xfer_s": xfer_s, "xfer_bytes": xfer_bytes, "peak_in_system": peak_sys}
