"""Parallel-plan search of a model on a cluster (``archsim plan``) and the cluster a design
name stands for.

    from archsim import search_plans
    found = search_plans("dgx_h100", "llama3-70b", devices=16, phase="train", batch=64)
    print(found.table(top=5))
    # least energy over power caps and fewer devices; what it costs in time
    found = search_plans("dgx_h100", "llama3-70b", 8, phase="decode", batch=64,
                         objective="energy", power_caps=(1.0, 0.85, 0.7), fewer_devices=True)
    print(found.tradeoff())

A design is a cluster (``configs/cluster/*.yaml`` or its name; it is grown or shrunk to whole
nodes to hold the devices) or a device design (then one node of that many devices joined by
the device's own link). Plans are proposed by :func:`archsim.mapper.plan.candidate_plans` and
costed by :func:`archsim.parallel.evaluate_plan` (docs/cluster.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from archsim.api import device_build, load
from archsim.arch.cluster import Cluster, find_cluster, load_cluster, single_node
from archsim.mapper.overlap import check_overlap, parse_overlap
from archsim.mapper.plan import candidate_plans, divisors, search
from archsim.offload import Offload
from archsim.parallel import PlanOptions, PlanResult, evaluate_plan, power_capped, shape_of
from archsim.varlen import Varlen
from archsim.workloads.errors import ConfigError, Problem, WorkloadError, inert
from archsim.workloads.kvtech import KVTechniques
from archsim.workloads.parallel import check_plan

__all__ = ["PlanSearch", "search_plans", "load_cluster_for", "plan_report", "OBJECTIVES"]

#: What a plan search ranks by: step ``time``; ``energy`` of a step (all devices, busy and
#: waiting, and links); ``cost`` of a step (devices x step time x a price per device-hour);
#: ``goodput``: tokens/s per device of the plans whose step meets an SLO (prefill, decode).
OBJECTIVES = ("time", "energy", "cost", "goodput")

_KEYS = {"time": lambda r: (r.step_s, r.energy_j),
         "energy": lambda r: (r.energy_j, r.step_s),
         "cost": lambda r: (r.device_hours(), r.energy_j)}


def load_cluster_for(design: str, devices: int, overrides: Sequence[str] = (),
                     grow: bool = True) -> Cluster:
    """A cluster of at least ``devices`` devices from a cluster or a device design (one node
    of ``devices``). A cluster is trimmed to the whole nodes the devices need; with ``grow``
    (``archsim plan --devices``: what if there were more) it is grown beyond its nodes, else
    (``archsim run``: one plan on this cluster) a plan bigger than it is refused."""
    path = find_cluster(design)
    if path is not None:
        if overrides:
            raise ConfigError(Problem("--set applies to device designs, not clusters; edit "
                                      "the cluster YAML", "--set"))
        c = load_cluster(path)
        dpn = c.spec.devices_per_node
        nodes = -(-devices // dpn)
        if not grow and devices > c.devices:
            raise ConfigError(Problem(f"the plan needs {devices} devices (tp x pp x dp x cp) "
                                      f"but the cluster {c.name!r} has {c.devices} "
                                      f"({c.spec.nodes} x {dpn}); use fewer or a "
                                      f"bigger cluster", "devices", str(path)))
        if nodes > 1 and c.spec.scale_out is None:
            raise ConfigError(Problem(f"{devices} devices need {nodes} nodes but the cluster "
                                      f"{c.name!r} has no scale_out link", "scale_out",
                                      str(path)))
        return c.with_nodes(max(nodes, 1)) if nodes != c.spec.nodes else c
    return single_node(load(design, overrides), devices)


def plan_report(r: PlanResult, cluster: Cluster) -> str:
    """A text report of one plan: step time, throughput, energy, memory, step breakdown."""
    mem = r.memory_bytes
    lines = [f"cluster  {cluster.name} ({cluster.spec.device}, {cluster.spec.devices_per_node} "
             f"per node)",
             f"workload {r.model} ({r.phase}, batch {r.batch} x {r.seq} tokens), plan "
             f"{r.label()} on {r.plan.devices} devices"
             + (f", overlap {r.overlap}" if r.overlap != "none" else ""),
             f"step     {_t(r.step_s)}   {r.tokens_per_s:,.1f} tokens/s   "
             f"{r.flops_per_device_s / 1e12:.4g} TFLOP/s per device",
             f"energy   {r.energy_j:.4g} J per step ({r.energy_j / r.step_s:.4g} W): devices "
             f"busy {r.plan.devices * r.busy_energy_j:.4g} J, waiting "
             f"{r.plan.devices * r.idle_power_w * max(0.0, r.step_s - r.busy_s):.4g} J "
             f"(static {r.idle_power_w:.4g} W each), links {r.link_energy_j:.4g} J"
             + (f"; power cap {r.power_cap:.0%}" if r.power_cap != 1.0 else ""),
             f"memory   {mem['total'] / 1e9:.4g} GB per device of {r.capacity_bytes / 1e9:.4g} GB "
             f"({'fits' if r.fits else 'DOES NOT FIT'}): " + ", ".join(
                 f"{k} {v / 1e9:.3g}" for k, v in mem.items() if k != "total" and v),
             *([] if r.varlen is None else [
                 f"documents {r.varlen.documents} packed {r.varlen.packing}, cp sharding "
                 f"{r.varlen.cp_sharding}: attention {r.varlen.attention_fraction:.1%} of full "
                 f"causal sequences, padding {r.varlen.padding:.1%}; imbalance: microbatches "
                 f"{r.varlen.pp_imbalance:.3g}x, cp ranks {r.varlen.cp_imbalance:.3g}x, dp "
                 f"replicas {r.varlen.dp_imbalance:.3g}x"]),
             "", "step breakdown"]
    for k, v in r.breakdown_s.items():
        if v:
            lines.append(f"  {k:<12} {_t(v):>10} {v / r.step_s:>6.1%}")
    return "\n".join(inert(line) for line in lines)


def _t(s: float) -> str:
    return f"{s * 1e3:.4g} ms" if s < 1 else f"{s:.4g} s"


@dataclass(frozen=True)
class PlanSearch:
    """The plans tried for a model on a cluster, best first.

    Attributes:
        ranked: the plans that fit in memory, best first (by the search objective).
        infeasible: the plans that do not fit.
        tried: plans evaluated.
        search_s: wall-clock seconds of the search.
        grown: the cluster's own device count when it was grown to hold ``devices`` (0: not).
        objective: what ``ranked`` is sorted by (:data:`OBJECTIVES`).
        price_per_gpu_hour: the price of one device-hour (``cost``), or None.
        slo_s: the step-time SLO of ``goodput`` (decode: time per output token; prefill: the
            batch's time to first token), or None.
        device_counts: the device counts searched (``devices`` alone unless asked for fewer).
        power_caps: the power caps searched (fractions of the board's limit).
    """

    model: str
    phase: str
    cluster: Cluster
    devices: int
    batch: int
    seq: int
    tried: int
    search_s: float
    ranked: tuple[PlanResult, ...]
    infeasible: tuple[PlanResult, ...] = field(default=())
    grown: int = 0
    objective: str = "time"
    price_per_gpu_hour: float | None = None
    slo_s: float | None = None
    device_counts: tuple[int, ...] = ()
    power_caps: tuple[float, ...] = (1.0,)

    @property
    def best(self) -> PlanResult | None:
        """The best plan that fits, or None."""
        return self.ranked[0] if self.ranked else None

    def summary(self) -> str:
        """One line: model, phase, batch, devices, plans tried and fitting."""
        grown = (f" (grown from {self.grown} devices to {self.cluster.spec.nodes} nodes of "
                 f"{self.cluster.spec.devices_per_node})" if self.grown else "")
        counts = self.device_counts or (self.devices,)
        space = []
        if counts != (self.devices,):
            space.append(f"{', '.join(map(str, counts))} devices")
        if self.power_caps != (1.0,):
            space.append("power caps " + ", ".join(f"{c:.0%}" for c in self.power_caps))
        space_s = f" over {'; '.join(space)}" if space else ""
        obj = "" if self.objective == "time" else f", by {self.objective}"
        return (f"{self.model} {self.phase}, batch {self.batch} x {self.seq} tokens, on "
                f"{self.devices} devices of {self.cluster.name}{grown}: {self.tried} plans "
                f"tried{space_s}, {len(self.ranked)} fit in memory{obj} "
                f"({self.search_s:.2f} s)")

    def meets_slo(self, r: PlanResult) -> bool:
        """Does the plan's step meet the SLO (always, without one)?"""
        return self.slo_s is None or r.step_s <= self.slo_s

    def goodput(self, r: PlanResult) -> float:
        """Tokens per second per device of a plan that meets the SLO (0 if it misses it)."""
        return r.tokens_per_s / r.plan.devices if self.meets_slo(r) else 0.0

    @property
    def time_best(self) -> PlanResult | None:
        """The fastest plan that fits (the ``time`` objective's choice)."""
        return min(self.ranked, key=_KEYS["time"], default=None)

    def tradeoff(self) -> str:
        """One line: what the best plan under the objective costs in time (and saves in energy,
        cost, goodput) against the time-optimal plan; empty for ``time`` or an empty search."""
        b, t = self.best, self.time_best
        if self.objective == "time" or b is None or t is None:
            return ""

        if b is t:
            return inert(f"the {self.objective}-optimal plan is the time-optimal one: "
                         f"{b.label()} on {b.plan.devices} devices")

        def d(x: float, y: float) -> str:
            return f"{x / y - 1:+.1%}" if y else "n/a"

        what = {"energy": f"energy {b.energy_j:.4g} J vs {t.energy_j:.4g} J "
                          f"({d(b.energy_j, t.energy_j)})",
                "cost": f"cost {self._cost(b)} vs {self._cost(t)} per step "
                        f"({d(b.device_hours(), t.device_hours())})",
                "goodput": f"goodput {self.goodput(b):,.1f} vs {self.goodput(t):,.1f} tokens/s "
                           f"per device"}[self.objective]
        return inert(f"{self.objective}-optimal {b.label()} on {b.plan.devices} devices vs the "
                     f"time-optimal {t.label()} on {t.plan.devices}: {what}; step "
                     f"{_t(b.step_s)} vs {_t(t.step_s)} ({d(b.step_s, t.step_s)} time)")

    def _cost(self, r: PlanResult) -> str:
        if self.price_per_gpu_hour is None:
            return f"{r.device_hours():.4g} device-h"
        return f"${r.device_hours() * self.price_per_gpu_hour:.4g}"

    def no_fit_text(self) -> str:
        """Why nothing was ranked: the smallest plan's memory need (infeasible searches)."""
        best_inf = min(self.infeasible, key=lambda r: r.memory_bytes["total"])
        return (f"no plan fits; the smallest needs {best_inf.memory_bytes['total'] / 1e9:.4g} "
                f"GB per device ({best_inf.plan.label()}) of "
                f"{best_inf.capacity_bytes / 1e9:.4g} GB")

    def table(self, top: int = 10) -> str:
        """The ``top`` plans: step time, tokens/s, memory, energy, bubble and comm shares."""
        cost = self.price_per_gpu_hour is not None
        hdr = (f"{'#':>3} {'plan':<40} {'dev':>4} {'step':>10} {'tokens/s':>12} {'mem GB':>8} "
               f"{'energy J':>10} {'bubble':>7} {'comm':>6}"
               + (f" {'$ / step':>10}" if cost else "")
               + (f" {'tok/s/dev':>10} {'SLO':>4}" if self.slo_s is not None else ""))
        lines = [hdr, "-" * len(hdr)]
        for i, r in enumerate(self.ranked[:top], 1):
            b = r.breakdown_s
            comm = sum(b[k] for k in ("tp_comm", "ep_comm", "cp_comm", "pp_comm", "dp_comm"))
            line = (f"{i:>3} {r.label()[:40]:<40} {r.plan.devices:>4} {_t(r.step_s):>10} "
                    f"{r.tokens_per_s:>12,.0f} {r.memory_bytes['total'] / 1e9:>8.3g} "
                    f"{r.energy_j:>10.4g} {b['bubble'] / r.step_s:>7.1%} "
                    f"{comm / r.step_s:>6.1%}")
            if cost:
                line += f" {r.device_hours() * (self.price_per_gpu_hour or 0.0):>10.4g}"
            if self.slo_s is not None:
                line += (f" {r.tokens_per_s / r.plan.devices:>10,.1f} "
                         f"{'met' if self.meets_slo(r) else 'miss':>4}")
            lines.append(line)
        return "\n".join(inert(line) for line in lines)

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        """JSON-able summary with the ``top`` plans' rows."""
        return {"model": self.model, "phase": self.phase, "cluster": self.cluster.name,
                "devices": self.devices, "batch": self.batch, "seq": self.seq,
                "tried": self.tried, "feasible": len(self.ranked), "search_s": self.search_s,
                "objective": self.objective, "price_per_gpu_hour": self.price_per_gpu_hour,
                "slo_s": self.slo_s, "device_counts": list(self.device_counts),
                "power_caps": list(self.power_caps),
                "plans": [{**r.row(), **self._extra(r)} for r in self.ranked[:top]],
                "time_optimal": (None if self.time_best is None else
                                 {**self.time_best.row(), **self._extra(self.time_best)})}

    def _extra(self, r: PlanResult) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.price_per_gpu_hour is not None:
            out["cost_per_step"] = r.device_hours() * self.price_per_gpu_hour
        if self.slo_s is not None:
            out["meets_slo"] = self.meets_slo(r)
            out["goodput_tokens_per_s_per_device"] = self.goodput(r)
        return out

    def to_json(self, top: int = 10) -> str:
        """:meth:`to_dict` as indented JSON."""
        return json.dumps(self.to_dict(top), indent=2)


def search_plans(design: str, model: str, devices: int, *, phase: str = "train",
                 batch: int | None = None, seq: int | None = None, context: int | None = None,
                 objective: str = "time", tp_overlap: bool = False,
                 a_format: str | None = None, w_format: str | None = None,
                 kv_format: str | None = None, tp_allreduce: str = "nccl",
                 power_caps: Sequence[float] = (1.0,), fewer_devices: bool = False,
                 price_per_gpu_hour: float | None = None, slo_ms: float | None = None,
                 attention_kernel: str = "sdpa", offload: Offload | None = None,
                 varlen: Varlen | None = None, overlap: str = "none",
                 weight_sparsity: float = 0.0, w_group_size: int = 0,
                 act_order: bool = False, kv: KVTechniques | None = None,
                 kv_block_size: int = 16) -> PlanSearch:
    """Search parallel plans (tp, pp, dp, ep, cp, microbatches, recompute, ZeRO) of ``model``
    on ``devices`` devices of ``design``.

    Args:
        design: a cluster (``dgx_h100``, ``h100_pod64``, a YAML) or a device design.
        model: a zoo transformer or a Hugging Face ``config.json``.
        phase: ``train``, ``prefill`` or ``decode``.
        batch: global batch in sequences (default: ``devices`` for train, 16 otherwise).
        seq: tokens per sequence (prefill/train; default the model's).
        context: KV-cache tokens (decode).
        objective: rank by step ``time``, ``energy`` per step, ``cost`` per step (devices x
            step x ``price_per_gpu_hour``) or ``goodput`` (tokens/s per device of the plans
            that meet ``slo_ms``; prefill and decode): :data:`OBJECTIVES`.
        tp_overlap: TokenWeave-style overlap of tp collectives.
        a_format, w_format, kv_format: number formats of every device's graphs and of the
            memory-fit check (:func:`archsim.api.device_build`; default the design's).
        tp_allreduce: the tp all-reduce's implementation (``PlanOptions.tp_allreduce``).
        power_caps: device power limits to search, fractions of the board's
            (``PlanOptions.power_cap``; the design needs a DVFS model).
        fewer_devices: also search every divisor of ``devices`` as the device count (the
            batch stays the same); the devices a plan leaves out cost nothing.
        price_per_gpu_hour: the price of one device-hour (``cost``; needed for it).
        slo_ms: the step-time SLO of ``goodput`` in ms (decode: time per output token;
            prefill: the batch's time to first token).
        attention_kernel: ``sdpa`` (default) or ``paged`` (a serving framework's paged-KV
            attention call; :func:`archsim.api.device_build`).
        offload: training state offloaded to host DRAM / NVMe in every plan
            (``PlanOptions.offload``, :mod:`archsim.offload`).
        varlen: train on variable-length documents packed into the sequences
            (:mod:`archsim.varlen`; ``PlanOptions.varlen``).
        overlap: overlap inside one device (``--overlap``: ``none``, ``nanobatch:K``,
            ``tokensplit``, ``fused-ar-norm``, a split ``+fused-ar-norm``;
            :func:`mapper.overlap.parse_overlap`) of every plan it applies to
            (:func:`mapper.overlap.check_overlap`; the fused kernel's plans run without
            sequence parallelism); the others are left out.
        weight_sparsity: fraction of zero weights run as sparse loads + dense MMA
            (:func:`archsim.api.check_weight_sparsity`; GPU designs, inference).
        w_group_size, act_order: group-wise weight scales and GPTQ act-order
            (``Workload.with_weight_groups``).
        kv, kv_block_size: the KV-cache techniques of every plan's graphs
            (:mod:`workloads.kvtech`, ``DeviceBuild.kv``; prefix caching in prefill, remat,
            top-k and the KV offload in decode: :func:`archsim.parallel.evaluate_plan`).
    Raises:
        MappingError: weight sparsity on a design that cannot run it.
        ConfigError: fewer than one device, an unknown phase for the model, no valid plan
            for the batch, an objective without its input (``--price-per-gpu-hour``,
            ``--slo-ms``), a power cap the design cannot take, documents (``varlen``)
            outside training, or an overlap no plan can use (every reason, with its plans).
    """
    t0 = time.perf_counter()
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ConfigError(Problem(f"expected an integer >= 1, got {devices!r}", "--devices"))
    s = shape_of(model)
    if phase not in s.phases:
        raise ConfigError(Problem(f"model {s.name!r} has no phase {phase!r}", "--phase"))
    key = _objective_key(objective, phase, price_per_gpu_hour, slo_ms)
    if varlen is not None:
        varlen.check()
        if phase != "train":
            raise ConfigError(Problem(f"documents packed into sequences apply to training "
                                      f"(--phase train), not {phase}", "--doc-lengths"))
    caps = tuple(dict.fromkeys(float(c) for c in power_caps))
    if not caps:
        raise ConfigError(Problem("expected at least one power cap", "--power-caps"))
    cluster = load_cluster_for(design, devices)
    path = find_cluster(design)
    own = load_cluster(path).devices if path is not None else devices
    build = device_build(cluster.device, a_format, w_format, kv_format=kv_format,
                         attention_kernel=attention_kernel,
                         weight_sparsity=weight_sparsity, w_group_size=w_group_size,
                         act_order=act_order, kv=kv, kv_block_size=kv_block_size)
    if weight_sparsity and phase == "train":
        raise ConfigError(Problem("sparse weight loads are an inference kernel (Flash-LLM / "
                                  "SpInfer serve a pruned model); training updates dense "
                                  "weights", "--weight-sparsity"))
    batch = batch or (devices if phase == "train" else 16)
    seq = 1 if phase == "decode" else (seq or s.default_seq)
    counts = tuple(divisors(devices)) if fewer_devices else (devices,)
    plans = [p for n in counts
             for p in candidate_plans(s, n, phase, batch, seq, cluster.spec.devices_per_node)]
    if not plans:
        raise ConfigError(Problem(f"no valid plan of {devices} devices for {s.name} with "
                                  f"batch {batch} (the batch must split over data parallelism)",
                                  "--devices"))
    ov = parse_overlap(overlap)
    if ov.active:
        # the fused kernel is an all-reduce: its plans run without sequence parallelism
        if ov.fused_ar_norm:
            plans = list(dict.fromkeys(replace(p, sequence_parallel=False) for p in plans))
        sms = getattr(getattr(cluster.device.units[0], "spec", None), "sm_count", 0) or 0
        why: dict[str, list[str]] = {}

        def applies(p: Any) -> bool:
            try:
                check_overlap(ov, cluster, p, phase, check_plan(s, p, phase, batch, seq,
                                                                 context or 1), sms)
            except ConfigError as exc:
                for q in exc.problems:
                    why.setdefault(q.message, []).append(p.label())
                return False
            return True
        plans = [p for p in plans if applies(p)]
        if not plans:
            raise ConfigError(Problem(f"no plan of {devices} devices can use it; " + "; ".join(
                f"{m} ({', '.join(ps[:3])}{', ...' if len(ps) > 3 else ''})"
                for m, ps in why.items()), "--overlap"))
    if kv is not None and kv.any:
        # remat pays off only at low tensor parallelism: leave out the plans it cannot use
        refused: dict[Problem, None] = {}

        def kv_fits(p: Any) -> bool:
            try:
                kv.check(s, p.tp, kv_block_size)
            except WorkloadError as exc:
                refused.update(dict.fromkeys(exc.problems))
                return False
            return True
        plans = [p for p in plans if kv_fits(p)]
        if not plans:
            raise WorkloadError(list(refused))
    memo: dict = {}
    for c in caps:      # refuse a cap the design cannot take before searching
        if c != 1.0:
            memo[("power_cap", id(cluster), c)] = (cluster, power_capped(cluster, c))
    points = [(p, PlanOptions(tp_overlap=tp_overlap, tp_allreduce=tp_allreduce, power_cap=c,
                              offload=offload or Offload(), varlen=varlen, overlap=ov))
              for p in plans for c in caps]
    res = search(points, lambda pc: evaluate_plan(cluster, s, pc[0], phase, batch, seq,
                                                  context, pc[1], memo, build), key=key)
    return PlanSearch(s.name, phase, cluster, devices, batch, seq, res.tried,
                      time.perf_counter() - t0, tuple(res.ranked), tuple(res.infeasible),
                      own if own < devices else 0, objective, price_per_gpu_hour,
                      None if slo_ms is None else slo_ms / 1e3, counts, caps)


def _objective_key(objective: str, phase: str, price: float | None,
                   slo_ms: float | None) -> Callable[[PlanResult], tuple[float, ...]]:
    """The sort key of ``objective``; refuses an objective without its input."""
    if objective not in OBJECTIVES:
        raise ConfigError(Problem(f"unknown objective {objective!r}; expected one of: "
                                  f"{', '.join(OBJECTIVES)}", "--objective"))
    for v, flag in ((price, "--price-per-gpu-hour"), (slo_ms, "--slo-ms")):
        if v is not None and not v > 0:
            raise ConfigError(Problem(f"expected a number > 0, got {v!r}", flag))
    if objective == "cost" and price is None:
        raise ConfigError(Problem("the cost objective needs a price: --price-per-gpu-hour "
                                  "(e.g. 2.5)", "--price-per-gpu-hour"))
    if objective == "goodput":
        if phase == "train":
            raise ConfigError(Problem("goodput under an SLO applies to prefill and decode "
                                      "(a step-time SLO: TTFT, TPOT); for training use time, "
                                      "energy or cost", "--objective"))
        if slo_ms is None:
            raise ConfigError(Problem("the goodput objective needs a step-time SLO: --slo-ms "
                                      "(decode: time per output token; prefill: TTFT)",
                                      "--slo-ms"))
        slo_s = slo_ms / 1e3
        return lambda r: ((0.0, -r.tokens_per_s / r.plan.devices, r.energy_j)
                          if r.step_s <= slo_s else (1.0, r.step_s, r.energy_j))
    return _KEYS[objective]
