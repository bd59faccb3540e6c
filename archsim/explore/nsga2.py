"""NSGA-II over a sweep spec's discrete axes (Deb et al. 2002, rank + crowding).

The search proposes design points and reads their rows back from the result store; it
does not evaluate anything itself. The caller passes ``evaluate(tasks)``, which must
evaluate (or find already stored) every task into the store ``db`` before it returns —
:func:`archsim.explore.run.run_sweep` passes its task runner, so every evaluation goes
through the store and a restarted search replays its generations without re-evaluating.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from archsim.explore.pareto import designs, objective_value, pareto_mask
from archsim.explore.spec import ConstraintSpec, Point, SweepSpec, Task, axis_values
from archsim.explore.store import ResultStore

__all__ = ["nsga2", "non_dominated_sort"]


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


def nsga2(spec: SweepSpec, db: str | Path, evaluate: Callable[[list[Task]], object]) -> None:
    """NSGA-II over the spec's discrete axes: population ``search.samples``, for
    ``search.generations`` generations; infeasible designs rank after all feasible ones
    (by total constraint violation).

    Args:
        spec: the sweep (its axes, objectives, constraints and ``search``).
        db: the result store the rows are read from.
        evaluate: stores the rows of a list of tasks in ``db`` (see the module doc).
    """
    rng = random.Random(spec.search.seed)
    vals = [axis_values(a) for a in spec.axes]
    pop_n = spec.search.samples

    def genome_point(g: tuple[int, ...]) -> Point:
        return spec.point_of(g)   # inactive conditional axes drop out

    def score(genomes: list[tuple[int, ...]]) -> np.ndarray:
        pts = [genome_point(g) for g in genomes]
        tasks = spec.tasks(pts)
        evaluate(tasks)
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
                out.append([objective_value(o, d[o]) for o in spec.objectives])
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
