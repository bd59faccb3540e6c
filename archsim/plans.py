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

from archsim.api import load
from archsim.arch.cluster import Cluster, find_cluster, load_cluster, single_node
from archsim.mapper.plan import candidate_plans, search
from archsim.parallel import PlanOptions, PlanResult, evaluate_plan, shape_of
from archsim.workloads.errors import ConfigError, Problem

__all__ = ["PlanSearch", "search_plans", "load_cluster_for", "plan_report"]


def load_cluster_for(design: str, devices: int, overrides: Sequence[str] = ()) -> Cluster:
    """A cluster of at least ``devices`` devices from a cluster or a device design."""
    path = find_cluster(design)
    if path is not None:
        if overrides:
            raise ConfigError(Problem("--set applies to device designs, not clusters; edit "
                                      "the cluster YAML", "--set"))
        c = load_cluster(path)
        dpn = c.spec.devices_per_node
        nodes = -(-devices // dpn)
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
    return "\n".join(lines)


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

    @property
    def best(self) -> PlanResult | None:
        """The best plan that fits, or None."""
        return self.ranked[0] if self.ranked else None

    def summary(self) -> str:
        """One line: model, phase, batch, devices, plans tried and fitting."""
        return (f"{self.model} {self.phase}, batch {self.batch} x {self.seq} tokens, on "
                f"{self.devices} devices of {self.cluster.name}: {self.tried} plans tried, "
                f"{len(self.ranked)} fit in memory ({self.search_s:.2f} s)")

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
        return "\n".join(lines)

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
                 tp_allreduce: str = "nccl") -> PlanSearch:
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
        tp_allreduce: the tp all-reduce's implementation (``PlanOptions.tp_allreduce``).
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
                                                opts, memo),
                 key=(lambda r: r.step_s) if objective == "time" else (lambda r: r.energy_j))
    return PlanSearch(s.name, phase, cluster, devices, batch, seq, res.tried,
                      time.perf_counter() - t0, tuple(res.ranked), tuple(res.infeasible))
