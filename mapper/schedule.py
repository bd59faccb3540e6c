"""Op -> unit assignment and the resulting schedule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arch.accelerator import Accelerator
from arch.base import Estimate, Unit
from workloads.errors import MappingError, Problem
from workloads.graph import Workload
from workloads.ops import Op

__all__ = ["OBJECTIVES", "Assignment", "Schedule", "map_workload", "objective_value"]

OBJECTIVES = ("latency", "energy", "edp")


@dataclass(frozen=True)
class Assignment:
    """One op placed on one unit with one mapping, and its estimate."""

    op: Op
    unit: Unit
    mapping: Any
    estimate: Estimate
    energy_j: float


@dataclass(frozen=True)
class Schedule:
    """Ops in execution order with their assignments.

    Attributes:
        assignments: one per op, in topological order.
        start_s, end_s: per-op start/end times (seconds); ops run back to back unless the
            scheduler overlapped independent ops on different units.
    """

    assignments: tuple[Assignment, ...]
    start_s: tuple[float, ...]
    end_s: tuple[float, ...]

    @property
    def latency_s(self) -> float:
        return max(self.end_s) if self.end_s else 0.0


def objective_value(objective: str, latency_s: float, energy_j: float) -> float:
    """Scalar cost of an objective (lower is better)."""
    if objective == "latency":
        return latency_s
    if objective == "energy":
        return energy_j
    if objective == "edp":
        return latency_s * energy_j
    raise MappingError(Problem(f"unknown objective {objective!r}; expected one of "
                               f"{', '.join(OBJECTIVES)}", "objective"))


def map_workload(acc: Accelerator, workload: Workload, objective: str = "latency",
                 op_energy: Callable[[Unit, Estimate], float] | None = None,
                 search: bool = False) -> Schedule:
    """Assign each op to its best unit and schedule sequentially.

    With ``search=False`` every unit uses its default mapping (its configured dataflow);
    with ``search=True`` matrix ops on units that expose ``arch_params`` (spatial arrays)
    get the best loop-nest mapping of ``mapper.search.best_mapping`` for the objective.

    Raises:
        MappingError: an op no unit supports (the message lists each unit's reason).
    """
    objective_value(objective, 0.0, 0.0)  # validates the name
    assignments: list[Assignment] = []
    starts: list[float] = []
    ends: list[float] = []
    t = 0.0
    problems: list[Problem] = []
    for op in workload.ops():
        best: tuple[float, Assignment] | None = None
        reasons = []
        for unit in acc.units:
            why = unit.supports(op)
            if why:
                reasons.append(f"{unit.name}: {why}")
                continue
            mapping = None
            if search:
                from mapper.search import best_mapping

                r = best_mapping(unit, op, objective if objective in ("latency", "energy",
                                                                     "edp") else "latency")
                mapping = r.mapping if r is not None else None
            est = unit.estimate(op, mapping)
            if not est.feasible:
                reasons.append(f"{unit.name}: {est.reason}")
                continue
            e = op_energy(unit, est) if op_energy else 0.0
            cost = objective_value(objective, est.latency_s, e)
            if best is None or cost < best[0]:
                best = (cost, Assignment(op, unit, mapping, est, e))
        if best is None:
            problems.append(Problem("no unit can run this op: " + "; ".join(reasons),
                                    f"{workload.name}:{op.name}"))
            continue
        a = best[1]
        assignments.append(a)
        starts.append(t)
        t += a.estimate.latency_s
        ends.append(t)
    if problems:
        raise MappingError(problems[:5] + ([Problem(f"... and {len(problems) - 5} more ops")]
                                           if len(problems) > 5 else []))
    return Schedule(tuple(assignments), tuple(starts), tuple(ends))
