"""Parallel-plan search: which (tp, pp, dp, ep, cp, microbatches) plan runs a model best on a
cluster -- the job of assigning ops to sub-accelerators, one level up.

This module proposes plans and keeps the best; it does not cost them (propose/report, as
Timeloop's mapper): the caller passes ``cost(plan) -> PlanCost`` (``archsim.parallel``).
It also holds the pipeline schedule's closed forms.

Pipeline schedules (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on
GPU Clusters Using Megatron-LM", Sec. 2.2): with ``p`` stages, ``m`` microbatches, per-
microbatch forward and backward times ``t_f``, ``t_b`` of one stage and ``v`` model chunks
per stage (interleaved 1F1B),

    step = (m + (p - 1) / v) x (t_f + t_b),     bubble fraction = (p - 1) / (v m).

Inference pipelines run forward only: ``(m + p - 1) x t_f``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from archsim.mapper.factors import divisors
from archsim.workloads.errors import WorkloadError
from archsim.workloads.models.transformer import TransformerShape
from archsim.workloads.parallel import ParallelPlan, check_plan

__all__ = ["pipeline_time", "bubble_fraction", "divisors", "candidate_plans", "search",
           "PlanSearchResult"]


def bubble_fraction(p: int, m: int, v: int = 1) -> float:
    """Idle fraction of the ideal time of a 1F1B pipeline: ``(p - 1) / (v m)``."""
    return (p - 1) / (v * m)


def pipeline_time(t_f: float, t_b: float, p: int, m: int, v: int = 1) -> float:
    """Step time of a pipeline (module doc); ``t_b`` 0 for inference."""
    if t_b == 0:
        return (m + p - 1) * t_f
    return (m + (p - 1) / v) * (t_f + t_b)


def candidate_plans(s: TransformerShape, devices: int, phase: str, batch: int, seq: int,
                    devices_per_node: int, max_tp: int | None = None,
                    recompute: Iterable[str] = ("none", "selective", "full"),
                    zero: Iterable[int] = (0, 1), sequence_parallel: bool = True,
                    max_microbatches: int = 64) -> list[ParallelPlan]:
    """Every valid plan of exactly ``devices`` devices (pruned by the usual rules: tp within a
    node, cp only for sequences of 8K tokens or more, microbatches a power of two times the
    pipeline depth or a divisor of the batch).
    """
    out: list[ParallelPlan] = []
    max_tp = max_tp or devices_per_node
    train = phase == "train"
    for tp, cp, pp in itertools.product(divisors(devices), repeat=3):
        if tp > max_tp or tp * cp * pp > devices or devices % (tp * cp * pp):
            continue
        if cp > 1 and (phase == "decode" or seq < 8192):
            continue
        dp = devices // (tp * cp * pp)
        if batch % dp:
            continue
        ep_opts = [e for e in divisors(tp * cp * dp) if s.is_moe and s.experts % e == 0] or [1]
        mbs = [m for m in divisors(batch // dp) if m <= max_microbatches and (m >= pp or m == batch // dp)]
        if not train:
            mbs = [m for m in mbs if m in (1, pp)] or mbs[:1]
        for ep, m in itertools.product(ep_opts, mbs):
            for rc, z in itertools.product(recompute if train else ("none",),
                                           zero if train and dp > 1 else (0,)):
                plan = ParallelPlan(tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, microbatches=m,
                                    zero=z, recompute=rc,
                                    sequence_parallel=sequence_parallel and tp > 1 and
                                    phase != "decode")
                try:
                    check_plan(s, plan, phase, batch, seq)
                except WorkloadError:
                    continue
                out.append(plan)
    return out


@dataclass
class PlanSearchResult:
    """Plans tried, the feasible ones ranked by step time, and the infeasible count."""

    ranked: list[Any] = field(default_factory=list)
    infeasible: list[Any] = field(default_factory=list)
    tried: int = 0


def search(plans: Sequence[Any], cost: Callable[[Any], Any],
           key: Callable[[Any], Any]) -> PlanSearchResult:
    """Cost every point (a plan, or a plan with its device settings such as a power cap);
    rank the feasible ones (``cost(point).fits``) by ``key`` (ascending; stable)."""
    res = PlanSearchResult()
    for p in plans:
        c = cost(p)
        res.tried += 1
        (res.ranked if c.fits else res.infeasible).append(c)
    res.ranked.sort(key=key)
    return res
