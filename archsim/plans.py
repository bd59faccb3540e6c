"""Parallel-plan search of a model on a cluster (``archsim plan``) and the cluster a design
name stands for.

    from archsim import search_plans
    found = search_plans("dgx_h100", "llama3-70b", devices=16, phase="train", batch=64)
    print(found.table(top=5))

A design is a cluster (``configs/cluster/*.yaml`` or its name; it is grown or shrunk to whole
nodes to hold the devices) or a device design (then one node of that many devices joined by
the device's own link). Plans are proposed by :func:`archsim.mapper.plan.candidate_plans` and
costed by :func:`archsim.parallel.evaluate_plan` (docs/cluster.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from archsim.api import device_build, load
from archsim.arch.cluster import Cluster, find_cluster, load_cluster, single_node
from archsim.mapper.plan import candidate_plans, search
from archsim.parallel import PlanOptions, PlanResult, evaluate_plan, shape_of
from archsim.workloads.errors import ConfigError, Problem, inert

__all__ = ["PlanSearch", "search_plans", "load_cluster_for", "plan_report"]


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
             f"workload {r.model} ({r.phase}), plan {r.plan.label()} on {r.plan.devices} devices",
             f"step     {_t(r.step_s)}   {r.tokens_per_s:,.1f} tokens/s   "
             f"{r.flops_per_device_s / 1e12:.4g} TFLOP/s per device",
             f"energy   {r.energy_j:.4g} J per step ({r.energy_j / r.step_s:.4g} W)",
             f"memory   {mem['total'] / 1e9:.4g} GB per device of {r.capacity_bytes / 1e9:.4g} GB "
             f"({'fits' if r.fits else 'DOES NOT FIT'}): " + ", ".join(
                 f"{k} {v / 1e9:.3g}" for k, v in mem.items() if k != "total" and v),
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

    @property
    def best(self) -> PlanResult | None:
        """The best plan that fits, or None."""
        return self.ranked[0] if self.ranked else None

    def summary(self) -> str:
        """One line: model, phase, batch, devices, plans tried and fitting."""
        grown = (f" (grown from {self.grown} devices to {self.cluster.spec.nodes} nodes of "
                 f"{self.cluster.spec.devices_per_node})" if self.grown else "")
        return (f"{self.model} {self.phase}, batch {self.batch} x {self.seq} tokens, on "
                f"{self.devices} devices of {self.cluster.name}{grown}: {self.tried} plans "
                f"tried, {len(self.ranked)} fit in memory ({self.search_s:.2f} s)")

    def no_fit_text(self) -> str:
        """Why nothing was ranked: the smallest plan's memory need (infeasible searches)."""
        best_inf = min(self.infeasible, key=lambda r: r.memory_bytes["total"])
        return (f"no plan fits; the smallest needs {best_inf.memory_bytes['total'] / 1e9:.4g} "
                f"GB per device ({best_inf.plan.label()}) of "
                f"{best_inf.capacity_bytes / 1e9:.4g} GB")

    def table(self, top: int = 10) -> str:
        """The ``top`` plans: step time, tokens/s, memory, energy, bubble and comm shares."""
        hdr = (f"{'#':>3} {'plan':<40} {'step':>10} {'tokens/s':>12} {'mem GB':>8} "
               f"{'energy J':>10} {'bubble':>7} {'comm':>6}")
        lines = [hdr, "-" * len(hdr)]
        for i, r in enumerate(self.ranked[:top], 1):
            b = r.breakdown_s
            comm = sum(b[k] for k in ("tp_comm", "ep_comm", "cp_comm", "pp_comm", "dp_comm"))
            lines.append(f"{i:>3} {r.plan.label()[:40]:<40} {_t(r.step_s):>10} "
                         f"{r.tokens_per_s:>12,.0f} {r.memory_bytes['total'] / 1e9:>8.3g} "
                         f"{r.energy_j:>10.4g} {b['bubble'] / r.step_s:>7.1%} "
                         f"{comm / r.step_s:>6.1%}")
        return "\n".join(inert(line) for line in lines)

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        """JSON-able summary with the ``top`` plans' rows."""
        return {"model": self.model, "phase": self.phase, "cluster": self.cluster.name,
                "devices": self.devices, "batch": self.batch, "seq": self.seq,
                "tried": self.tried, "feasible": len(self.ranked), "search_s": self.search_s,
                "plans": [r.row() for r in self.ranked[:top]]}

    def to_json(self, top: int = 10) -> str:
        """:meth:`to_dict` as indented JSON."""
        return json.dumps(self.to_dict(top), indent=2)


def search_plans(design: str, model: str, devices: int, *, phase: str = "train",
                 batch: int | None = None, seq: int | None = None, context: int | None = None,
                 objective: str = "time", tp_overlap: bool = False,
                 a_format: str | None = None, w_format: str | None = None,
                 kv_format: str | None = None, tp_allreduce: str = "nccl",
                 attention_kernel: str = "sdpa") -> PlanSearch:
    """Search parallel plans (tp, pp, dp, ep, cp, microbatches, recompute, ZeRO) of ``model``
    on ``devices`` devices of ``design``.

    Args:
        design: a cluster (``dgx_h100``, ``h100_pod64``, a YAML) or a device design.
        model: a zoo transformer or a Hugging Face ``config.json``.
        phase: ``train``, ``prefill`` or ``decode``.
        batch: global batch in sequences (default: ``devices`` for train, 16 otherwise).
        seq: tokens per sequence (prefill/train; default the model's).
        context: KV-cache tokens (decode).
        objective: rank by step ``time`` or ``energy`` per step.
        tp_overlap: TokenWeave-style overlap of tp collectives.
        a_format, w_format, kv_format: number formats of every device's graphs and of the
            memory-fit check (:func:`archsim.api.device_build`; default the design's).
        tp_allreduce: the tp all-reduce's implementation (``PlanOptions.tp_allreduce``).
        attention_kernel: ``sdpa`` (default) or ``paged`` (a serving framework's paged-KV
            attention call; :func:`archsim.api.device_build`).
    Raises:
        ConfigError: fewer than one device, an unknown phase for the model, or no valid plan
            for the batch.
    """
    t0 = time.perf_counter()
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ConfigError(Problem(f"expected an integer >= 1, got {devices!r}", "--devices"))
    s = shape_of(model)
    if phase not in s.phases:
        raise ConfigError(Problem(f"model {s.name!r} has no phase {phase!r}", "--phase"))
    cluster = load_cluster_for(design, devices)
    path = find_cluster(design)
    own = load_cluster(path).devices if path is not None else devices
    build = device_build(cluster.device, a_format, w_format, kv_format=kv_format,
                         attention_kernel=attention_kernel)
    batch = batch or (devices if phase == "train" else 16)
    seq = 1 if phase == "decode" else (seq or s.default_seq)
    plans = candidate_plans(s, devices, phase, batch, seq, cluster.spec.devices_per_node)
    if not plans:
        raise ConfigError(Problem(f"no valid plan of {devices} devices for {s.name} with "
                                  f"batch {batch} (the batch must split over data parallelism)",
                                  "--devices"))
    memo: dict = {}
    opts = PlanOptions(tp_overlap=tp_overlap, tp_allreduce=tp_allreduce)
    res = search(plans, lambda p: evaluate_plan(cluster, s, p, phase, batch, seq, context,
                                                opts, memo, build),
                 key=(lambda r: r.step_s) if objective == "time" else (lambda r: r.energy_j))
    return PlanSearch(s.name, phase, cluster, devices, batch, seq, res.tried,
                      time.perf_counter() - t0, tuple(res.ranked), tuple(res.infeasible),
                      own if own < devices else 0)
