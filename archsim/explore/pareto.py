"""Pareto fronts, constraint filtering and multi-objective search over a sweep.

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
import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from archsim.explore.spec import MAXIMISED, ConstraintSpec, Point, SweepSpec, axis_values

__all__ = ["pareto_mask", "pareto_mask_bruteforce", "feasible", "designs", "pareto_rows",
           "sweep_front", "front_table", "nsga2", "non_dominated_sort"]

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


def _obj(metric: str, value: Any) -> float:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.inf
    return -float(value) if metric in MAXIMISED else float(value)


def designs(rows: Iterable[Mapping[str, Any]],
            constraints: Mapping[str, ConstraintSpec] | None = None) -> list[dict[str, Any]]:
    """Aggregate rows per design point (see the module doc); adds ``feasible`` and
    ``workloads`` (count)."""
    from archsim.explore.spec import METRICS

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
    v = np.array([[_obj(o, d[o]) for o in objectives] for d in ds])
    mask = pareto_mask(v)
    front = [d for d, m in zip(ds, mask) if m]
    front.sort(key=lambda d: tuple(_obj(o, d[o]) for o in objectives))
    return front


def sweep_front(db: str | Path, objectives: Sequence[str],
                constraints: Mapping[str, ConstraintSpec] | None = None,
                hashes: Iterable[str] | None = None, where: str | None = None) -> list[dict]:
    """The Pareto front of a result store (optionally only the rows in ``hashes``)."""
    from archsim.explore.store import ResultStore

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


# ---- NSGA-II -----------------------------------------------------------------------------------
def non_dominated_sort(v: np.ndarray) -> list[list[int]]:
    """Fronts of indices (front 0 = non-dominated), Deb et al. 2002."""
    n = len(v)
    rest = list(range(n))
    fronts: list[list[int]] = []
    while rest:
        mask = pareto_mask(v[rest])
        f = [i for i, m in zip(rest, mask) if m]
        fronts.append(f)
        rest = [i for i, m in zip(rest, mask) if not m]
    return fronts


def _crowding(v: np.ndarray, idx: list[int]) -> dict[int, float]:
    d = {i: 0.0 for i in idx}
    if len(idx) <= 2:
        return {i: math.inf for i in idx}
    for j in range(v.shape[1]):
        s = sorted(idx, key=lambda i: v[i, j])
        lo, hi = v[s[0], j], v[s[-1], j]
        d[s[0]] = d[s[-1]] = math.inf
        if hi > lo and math.isfinite(hi - lo):
            for a, b, c in zip(s, s[1:], s[2:]):
                d[b] += (v[c, j] - v[a, j]) / (hi - lo)
    return d


def nsga2(spec: SweepSpec, db: str | Path, **run_kw: Any) -> Any:
    """NSGA-II over the spec's discrete axes: population ``search.samples``, for
    ``search.generations`` generations; infeasible designs rank after all feasible ones
    (by total constraint violation). Every evaluation goes through the store, so a
    restarted search replays its generations from the store without re-evaluating."""
    from archsim.explore.run import SweepReport, run_tasks
    from archsim.explore.store import ResultStore

    rng = random.Random(spec.search.seed)
    vals = [axis_values(a) for a in spec.axes]
    pop_n = spec.search.samples
    total = SweepReport()

    def genome_point(g: tuple[int, ...]) -> Point:
        return spec.point_of(g)   # inactive conditional axes drop out

    def score(genomes: list[tuple[int, ...]]) -> np.ndarray:
        pts = [genome_point(g) for g in genomes]
        tasks = spec.tasks(pts)
        rep = run_tasks(tasks, db, **run_kw)
        total.total += rep.total
        total.skipped += rep.skipped
        total.evaluated += rep.evaluated
        total.errors += rep.errors
        total.elapsed_s += rep.elapsed_s
        total.hashes.extend(t.hash for t in tasks)
        with ResultStore(db, readonly=True) as st:
            rows = st.rows(hashes={t.hash for t in tasks})
        by_id = {d["design_id"]: d for d in designs(rows, spec.constraints)}
        out = []
        for p in pts:
            d = by_id.get(p.design_id)
            if d is None or not d["feasible"]:
                viol = 1e30 if d is None or d["latency_s"] is None else 1e20 * (1 + _violation(
                    d, spec.constraints))
                out.append([viol] * len(spec.objectives))
            else:
                out.append([_obj(o, d[o]) for o in spec.objectives])
        return np.array(out)

    space = math.prod(len(v) for v in vals)
    pop = list({tuple(rng.randrange(len(v)) for v in vals) for _ in range(pop_n * 3)})[:pop_n]
    fit = score(pop)
    for _ in range(spec.search.generations):
        rank, crowd = _rank(fit)

        def pick(pop: list = pop, rank: list = rank, crowd: list = crowd) -> int:
            a, b = rng.randrange(len(pop)), rng.randrange(len(pop))
            return a if (rank[a], -crowd[a]) <= (rank[b], -crowd[b]) else b

        children: set[tuple[int, ...]] = set()
        tries = 0
        while len(children) < pop_n and tries < pop_n * 20:
            tries += 1
            p1, p2 = pop[pick()], pop[pick()]
            child = [x if rng.random() < 0.5 else y for x, y in zip(p1, p2)]
            for j, v in enumerate(vals):
                if rng.random() < 1.0 / max(1, len(vals)):
                    child[j] = min(len(v) - 1, max(0, child[j] + rng.choice((-1, 1))))
            children.add(tuple(child))
        children -= set(pop)
        if not children and len(pop) >= space:
            break
        kids = list(children)
        allg = pop + kids
        allf = np.vstack([fit, score(kids)]) if kids else fit
        order: list[int] = []
        for f in non_dominated_sort(allf):
            if len(order) + len(f) <= pop_n:
                order += f
            else:
                cd = _crowding(allf, f)
                order += sorted(f, key=lambda i: -cd[i])[:pop_n - len(order)]
                break
        pop = [allg[i] for i in order]
        fit = allf[order]
    return total


def _violation(d: Mapping[str, Any], cons: Mapping[str, ConstraintSpec]) -> float:
    v = 0.0
    for k, c in cons.items():
        x = d.get(k)
        if x is None:
            return 1.0
        if c.max is not None and x > c.max:
            v += (x - c.max) / (abs(c.max) or 1.0)
        if c.min is not None and x < c.min:
            v += (c.min - x) / (abs(c.min) or 1.0)
    return v


def _rank(fit: np.ndarray) -> tuple[list[int], list[float]]:
    rank = [0] * len(fit)
    crowd = [0.0] * len(fit)
    for r, f in enumerate(non_dominated_sort(fit)):
        cd = _crowding(fit, f)
        for i in f:
            rank[i] = r
            crowd[i] = cd[i]
    return rank, crowd
