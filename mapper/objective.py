"""The scalar objectives of mapping and scheduling (lower is better).

:data:`OBJECTIVES` is the one list every search ranks by (the GEMM and the Einsum loop-nest
searches, the scheduler and the command line).
"""

from __future__ import annotations

from archsim.workloads.errors import MappingError, Problem

__all__ = ["OBJECTIVES", "objective_value"]

OBJECTIVES = ("latency", "energy", "edp")


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
