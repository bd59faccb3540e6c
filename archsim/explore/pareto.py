"""Pareto fronts and constraint filtering over a sweep's rows (pure computation; the
NSGA-II search that runs sweeps is :mod:`archsim.explore.nsga2`).

All objectives are minimised; metrics where larger is better (``utilization``,
``throughput_flops``, ``tokens_per_s``, ``samples_per_s``) are negated first.

A *design* is one design point across all the sweep's workloads. Its metrics aggregate its
rows: ``latency_s``, ``energy_j``, ``edp_js``, ``cycles``, ``dram_bytes`` add up over the
workloads; ``area_mm2`` and ``power_w`` take the maximum; rates and utilization the mean.
A design is feasible when every one of its rows evaluated (``status = 'ok'``) and
satisfies every constraint (constraints are checked per workload row, so ``latency_s:
{max: ...}`` is a per-workload latency SLO).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from archsim.explore.spec import MAXIMISED, METRICS, ConstraintSpec
from archsim.explore.store import ResultStore

__all__ = ["pareto_mask", "pareto_mask_bruteforce", "feasible", "objective_value", "designs",
           "pareto_rows", "sweep_front", "front_table"]

_SUM = ("latency_s", "energy_j", "edp_js", "cycles", "dram_bytes")
_MAX = ("area_mm2", "power_w")


def pareto_mask(values: Any) -> np.ndarray:
    """Boolean mask of the non-dominated rows of an (n, k) array (minimise every column).

    A row dominates another when it is <= in every column and < in at least one; equal
    rows do not dominate each other (duplicates on the front are all kept).
    """
    v = np.asarray(values, dtype=float)
    n = len(v)
    if n == 0:
        return np.zeros(0, dtype=bool)
    if v.ndim != 2:
        raise ValueError("expected an (n, k) array")
    # Lexicographic order: a row can only be dominated by rows before it.
    order = np.lexsort(v.T[::-1])
    keep = np.zeros(n, dtype=bool)
    front = np.empty((0, v.shape[1]))
    for i in order:
        x = v[i]
        if len(front):
            dom = np.all(front <= x, axis=1) & np.any(front < x, axis=1)
            if dom.any():
                continue
        keep[i] = True
        front = np.vstack([front, x])
    return keep


def pareto_mask_bruteforce(values: Any) -> np.ndarray:
    """The O(n^2) definition (for tests)."""
    v = [tuple(map(float, r)) for r in values]
    return np.array([not any(all(b <= a for a, b in zip(x, y)) and any(b < a for a, b in zip(x, y))
                             for y in v) for x in v], dtype=bool)


def feasible(row: Mapping[str, Any], constraints: Mapping[str, ConstraintSpec]) -> bool:
    """One row (status ok) meets every constraint."""
    if row.get("status", "ok") != "ok":
        return False
    return all(c.ok(row.get(k)) for k, c in constraints.items())


def objective_value(metric: str, value: Any) -> float:
    """``value`` as a minimised objective: negated for a maximised metric, +inf when
    missing (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.inf
    return -float(value) if metric in MAXIMISED else float(value)


def designs(rows: Iterable[Mapping[str, Any]],
            constraints: Mapping[str, ConstraintSpec] | None = None) -> list[dict[str, Any]]:
    """Aggregate rows per design point (see the module doc); adds ``feasible`` and
    ``workloads`` (count)."""

    constraints = constraints or {}
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["design_id"], []).append(r)
    out = []
    for did, rs in groups.items():
        ok = all(r.get("status") == "ok" for r in rs)
        d: dict[str, Any] = {"design_id": did, "point": rs[0]["point"], "workloads": len(rs),
                             "feasible": ok and all(feasible(r, constraints) for r in rs)}
        for m in METRICS:
            vals = [v for v in (r.get(m) for r in rs) if v is not None]
            if not ok or len(vals) < len(rs):
                d[m] = None
            elif m in _SUM:
                d[m] = float(sum(vals))
            elif m in _MAX:
                d[m] = float(max(vals))
            else:
                d[m] = float(sum(vals)) / len(vals)
        out.append(d)
    out.sort(key=lambda d: d["design_id"])
    return out


def pareto_rows(rows: Iterable[Mapping[str, Any]], objectives: Sequence[str],
                constraints: Mapping[str, ConstraintSpec] | None = None) -> list[dict[str, Any]]:
    """The feasible designs on the Pareto front of ``objectives`` (2 or 3 usual), sorted
    by the first objective."""
    ds = [d for d in designs(rows, constraints) if d["feasible"]]
    if not ds:
        return []
    v = np.array([[objective_value(o, d[o]) for o in objectives] for d in ds])
    mask = pareto_mask(v)
    front = [d for d, m in zip(ds, mask) if m]
    front.sort(key=lambda d: tuple(objective_value(o, d[o]) for o in objectives))
    return front


def sweep_front(db: str | Path, objectives: Sequence[str],
                constraints: Mapping[str, ConstraintSpec] | None = None,
                hashes: Iterable[str] | None = None, where: str | None = None) -> list[dict]:
    """The Pareto front of a result store (optionally only the rows in ``hashes``)."""

    with ResultStore(db, readonly=True) as st:
        rows = st.rows(where, hashes=hashes)
    return pareto_rows(rows, objectives, constraints)


def front_table(front: Sequence[Mapping[str, Any]], objectives: Sequence[str]) -> str:
    """A small text table of a front."""
    if not front:
        return "no feasible design"
    lines = [f"Pareto front ({len(front)} designs) on {', '.join(objectives)}:"]
    for d in front:
        objs = "  ".join(f"{o}={d[o]:.4g}" for o in objectives)
        pt = json.loads(d["point"]) if isinstance(d["point"], str) else d["point"]
        lines.append(f"  {objs}   " + " ".join(f"{k}={v}" for k, v in pt.items()))
    return "\n".join(lines)
