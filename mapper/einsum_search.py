"""Vectorised mapping search over loop nests on N-level hierarchies.

The map space of an Einsum on a :class:`dataflow.hierarchy.Hierarchy` is: per dimension, an
ordered factorisation of its bound over the *slots* (each level's temporal loops, each
fan-out's spatial loops; slots fixed by constraints excluded); per level, a permutation of
its temporal loops; per level, which data spaces it keeps. :func:`evaluate_batch` evaluates
thousands of candidates per call in a compiled kernel (:mod:`mapper.nest_kernel`, numba) and
counts exactly what :func:`dataflow.nest.analyse` counts (Timeloop's semantics, pre-2025
stationary rule), so the search's best mapping re-evaluates to the same numbers.

The sliding-window delta of a tile under the loops above it is computed without walking the
2^k visits: with only the loops of bound >= 2 ("active"), the visit sequence is a binary
counter whose innermost loop (kappa) moves between any two other moves, so the reuse state
after any kappa move is one of three (none, stationary, moving like kappa). A 3-entry table per
loop, built from the inside out, gives the total (``mapper.nest_kernel._deltas``).

Pruning: capacity (tile words per level) and fan-out (X/Y mesh, with the constraint's split)
are checked first, and a candidate failing them skips the access analysis;
loops of bound 1 ignored in permutations (symmetric permutations are one candidate), and
constraints (factors, permutations, keep/bypass). Objectives: ``energy``, ``edp``,
``latency`` (cycles, then energy).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from archsim.dataflow.einsum import Einsum
from archsim.dataflow.hierarchy import Hierarchy
from archsim.dataflow.nest import (
    Constraints,
    LevelConstraint,
    LevelMapping,
    NestMapping,
    NestResult,
    analyse,
)
from archsim.mapper.factors import divisors
from archsim.mapper.nest_kernel import evaluate_kernel, fill_factors
from archsim.mapper.objective import OBJECTIVES

__all__ = ["MapSpace", "Batch", "EinsumSearchResult", "make_space", "evaluate_batch", "search",
           "to_mapping", "from_mapping"]


def _ordered_factorisations(n: int, slots: int) -> list[tuple[int, ...]]:
    """All ordered tuples of ``slots`` positive integers whose product is ``n``."""
    if slots == 0:
        return [()] if n == 1 else []
    if slots == 1:
        return [(n,)]
    out = []
    for f in divisors(n):
        out += [(f, *rest) for rest in _ordered_factorisations(n // f, slots - 1)]
    return out


#: Factor tables shared by every problem and layer: (bound, levels, fixed slots) -> table.
_FACT_TABLES: dict[tuple[int, int, tuple[tuple[int, int, int], ...]], np.ndarray] = {}


def _fact_table(n: int, nlev: int, fixed: tuple[tuple[int, int, int], ...]) -> np.ndarray:
    """Every way to spread bound ``n`` over the (temporal, spatial) slots of ``nlev`` levels
    with the ``(level, 0 temporal / 1 spatial, factor)`` slots pinned: [rows, 2 * nlev]
    (t0, s0, t1, s1 ...). Built once per key and shared across layers (read-only)."""
    key = (n, nlev, fixed)
    table = _FACT_TABLES.get(key)
    if table is None:
        pinned = {(i, k): v for i, k, v in fixed}
        free_slots = [(i, k) for i in range(nlev) for k in (0, 1) if (i, k) not in pinned]
        fixed_prod = math.prod(pinned.values())
        rows = []
        if n % fixed_prod == 0:
            for combo in _ordered_factorisations(n // fixed_prod, len(free_slots)):
                row = [1] * (2 * nlev)
                for (i, k), v in pinned.items():
                    row[2 * i + k] = v
                for (i, k), f in zip(free_slots, combo, strict=True):
                    row[2 * i + k] = f
                rows.append(row)
        table = np.array(rows, dtype=np.int64).reshape(-1, 2 * nlev)
        table.setflags(write=False)
        _FACT_TABLES[key] = table
    return table


@dataclass
class MapSpace:
    """The map space of one problem on one hierarchy (static arrays for the batch kernel).

    Attributes:
        dims: dimension names; bounds: their bounds.
        nlev: levels (innermost first). temporal_ok / spatial_ok: [nlev] which slots exist.
        fixed_t, fixed_s: [nlev, ndim] factor fixed by a constraint (0 = free).
        fact: per dim, array [n_factorisations, nlev*2] of slot factors (t0, s0, t1, s1...).
        perm_fixed: per level, dims whose innermost-first order a constraint fixes.
        keep_options: per level, the allowed keep sets.
        split: per level, constraint split (X gets the first ``split`` dims of
            ``split_order``) or None (any X/Y assignment that fits).
    """

    problem: Einsum
    hier: Hierarchy
    dims: list[str]
    bounds: np.ndarray
    nlev: int
    fact: list[np.ndarray]
    perm_fixed: list[tuple[str, ...]]
    keep_options: list[list[frozenset[str]]]
    split: list[int | None]
    split_order: list[tuple[str, ...]]
    _flat: tuple[np.ndarray, np.ndarray] | None = None

    def fact_flat(self) -> tuple[np.ndarray, np.ndarray]:
        """Every dim's ``fact`` table stacked into one array, and each dim's first row."""
        if self._flat is None:
            sizes = [len(f) for f in self.fact]
            self._flat = (np.ascontiguousarray(np.concatenate(self.fact, axis=0)),
                          np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64))
        return self._flat


def make_space(problem: Einsum, hier: Hierarchy, constraints: Constraints | None = None,
               keep: dict[str, frozenset[str]] | None = None) -> MapSpace:
    """Build the map space; ``keep`` pins keep sets by level name (e.g. a reference's)."""
    dims = list(problem.dims)
    nlev = len(hier.levels)
    cons = constraints.levels if constraints else {}
    spaces = [ds.name for ds in problem.data_spaces]
    fixed: dict[tuple[int, int, str], int] = {}
    perm_fixed: list[tuple[str, ...]] = []
    keep_opts: list[list[frozenset[str]]] = []
    split: list[int | None] = []
    split_order: list[tuple[str, ...]] = []
    for i, lv in enumerate(hier.levels):
        c = cons.get(lv.name, LevelConstraint())
        for d in dims:
            if lv.network_only:
                fixed[(i, 0, d)] = 1
            elif d in c.temporal_factors:
                fixed[(i, 0, d)] = c.temporal_factors[d]
            if lv.fanout == 1:
                fixed[(i, 1, d)] = 1
            elif d in c.spatial_factors:
                fixed[(i, 1, d)] = c.spatial_factors[d]
        perm_fixed.append(tuple(d for d in c.temporal_permutation if d in dims))
        split.append(c.spatial_split)
        split_order.append(tuple(d for d in c.spatial_permutation if d in dims))
        if keep and lv.name in keep:
            keep_opts.append([keep[lv.name]])
        elif lv.network_only:
            keep_opts.append([frozenset()])
        elif i == nlev - 1:
            keep_opts.append([frozenset(spaces)])            # the outermost keeps all
        else:
            if c.keep is not None:                           # keep exactly these
                keep_opts.append([frozenset(c.keep) & frozenset(spaces)])
                continue
            must = frozenset(c.must_keep) & frozenset(spaces)
            free = [s for s in spaces if s not in c.bypass and s not in must]
            opts = []
            for r in range(len(free) + 1):
                for sub in itertools.combinations(free, r):
                    opts.append(must | frozenset(sub))
            keep_opts.append(opts)
    fact = [_fact_table(problem.dims[d], nlev,
                        tuple(sorted((i, k, v) for (i, k, dd), v in fixed.items() if dd == d)))
            for d in dims]
    return MapSpace(problem, hier, dims, np.array([problem.dims[d] for d in dims]), nlev, fact,
                    perm_fixed, keep_opts, split, split_order)


@dataclass
class Batch:
    """Candidates: temporal and spatial bounds [B, nlev, ndim], permutations [B, nlev, ndim]
    (dim index at each innermost-first position), keep sets (shared by the batch)."""

    tb: np.ndarray
    sb: np.ndarray
    perm: np.ndarray
    keep: tuple[frozenset[str], ...]


def _sample(space: MapSpace, rng: np.random.Generator, n: int,
            keep: tuple[frozenset[str], ...]) -> Batch:
    ndim, nlev = len(space.dims), space.nlev
    tb = np.empty((n, nlev, ndim), dtype=np.int64)
    sb = np.empty((n, nlev, ndim), dtype=np.int64)
    flat, offsets = space.fact_flat()
    rows = np.empty((ndim, n), dtype=np.int64)
    for j, f in enumerate(space.fact):
        rows[j] = rng.integers(0, len(f), n) + offsets[j]
    fill: Any = fill_factors           # a numba Dispatcher (typed loosely for mypy)
    fill(flat, rows, tb, sb)
    table = _perm_table(ndim)
    perm = table[rng.integers(0, len(table), (n, nlev))]
    for i, fixed in enumerate(space.perm_fixed):
        if fixed:                      # constrained dims innermost, in the given order
            keys = rng.random((n, ndim))
            for pos, d in enumerate(fixed):
                keys[:, space.dims.index(d)] = -1.0 + pos * 1e-3
            perm[:, i, :] = np.argsort(keys, axis=1)
    return Batch(tb, sb, perm, keep)


_PERMS: dict[int, np.ndarray] = {}


def _perm_table(ndim: int) -> np.ndarray:
    """All permutations of ``ndim`` loops (7! = 5,040 rows for a 7-D problem)."""
    if ndim not in _PERMS:
        _PERMS[ndim] = np.array(list(itertools.permutations(range(ndim))), dtype=np.int64)
    return _PERMS[ndim]


def _static(space: MapSpace, keep: tuple[frozenset[str], ...]) -> tuple:  # type: ignore[type-arg]
    """Plain arrays of the hierarchy and problem for :func:`mapper.nest_kernel`."""
    prob, hier = space.problem, space.hier
    ndim, nlev = len(space.dims), space.nlev
    lvs = hier.levels
    rmax = max(len(ds.ranks) for ds in prob.data_spaces)
    coef = np.zeros((len(prob.data_spaces), rmax, ndim), dtype=np.int64)
    for s_, ds in enumerate(prob.data_spaces):
        for r, rank in enumerate(ds.ranks):
            for c, d in rank:
                coef[s_, r, space.dims.index(d)] += c
        for j in range(ndim):
            if np.count_nonzero(coef[s_, :, j]) > 1:
                raise ValueError(f"{ds.name}: dimension {space.dims[j]} feeds two ranks; the "
                                 "vectorised search needs each dimension in one rank")
    xmask = np.zeros((nlev, ndim), dtype=np.bool_)
    has_split = np.zeros(nlev, dtype=np.bool_)
    for lv in range(nlev):
        if space.split[lv] is not None:
            has_split[lv] = True
            ax = _axes(space, lv, np.ones(ndim, dtype=np.int64))
            xmask[lv] = [a == "X" for a in ax]
    f = np.array
    return (f([lv.network_only for lv in lvs]), f([lv.fanout for lv in lvs], dtype=np.int64),
            coef, f([len(ds.ranks) for ds in prob.data_spaces], dtype=np.int64),
            f([ds.read_write for ds in prob.data_spaces]),
            f([[ds.name in keep[lv] for lv in range(nlev)] for ds in prob.data_spaces]),
            f([[1.0 if ds.word_bits is None else ds.word_bits / lvs[lv].word_bits
                for lv in range(nlev)] for ds in prob.data_spaces], dtype=np.float64),
            f([-1 if lv.size_words is None else lv.size_words for lv in lvs], dtype=np.int64),
            f([lv.block_size for lv in lvs], dtype=np.int64),
            f([lv.instances for lv in lvs], dtype=np.int64),
            f([lv.cluster_size for lv in lvs], dtype=np.int64),
            f([lv.energy_pj.get("read", 0.0) for lv in lvs]),
            f([lv.energy_pj.get("write", 0.0) for lv in lvs]),
            f([lv.energy_pj.get("update", 0.0) for lv in lvs]),
            f([lv.energy_pj.get("leak", 0.0) for lv in lvs]),
            f([lv.read_bw or 0.0 for lv in lvs]), f([lv.write_bw or 0.0 for lv in lvs]),
            f([lv.shared_bw for lv in lvs], dtype=np.bool_),
            f([lv.mesh_x for lv in lvs], dtype=np.int64),
            f([lv.mesh_y for lv in lvs], dtype=np.int64), xmask, has_split,
            float(hier.compute.energy_pj.get("compute", 0.0) * prob.macs),
            int(hier.compute.instances))


def evaluate_batch(space: MapSpace, batch: Batch) -> dict[str, np.ndarray]:
    """Cycles, energy (pJ), EDP (J*cycle) and feasibility of every candidate of ``batch``."""
    n = batch.tb.shape[0]
    energy = np.zeros(n)
    cycles = np.zeros(n, dtype=np.int64)
    feasible = np.zeros(n, dtype=np.bool_)
    kernel: Any = evaluate_kernel          # a numba Dispatcher (typed loosely for mypy)
    kernel(np.ascontiguousarray(batch.tb), np.ascontiguousarray(batch.sb),
                    np.ascontiguousarray(batch.perm), *_static(space, batch.keep),
                    energy, cycles, feasible)
    edp = np.where(feasible, np.where(feasible, energy, 0.0) * 1e-12 * cycles, np.inf)
    return {"energy_pj": energy, "cycles": cycles, "feasible": feasible, "edp": edp}


def _axes(space: MapSpace, lv: int, s: np.ndarray) -> list[str]:
    """X/Y of each dim for one candidate (constraint split, else first fit)."""
    slv = space.hier.levels[lv]
    ndim = len(space.dims)
    if space.split[lv] is not None:
        order = list(space.split_order[lv]) + [d for d in space.dims
                                                 if d not in space.split_order[lv]]
        xs = set(order[:space.split[lv] or 0])
        return ["X" if d in xs else "Y" for d in space.dims]
    for mask in range(1 << ndim):
        px = math.prod(int(s[j]) for j in range(ndim) if mask >> j & 1)
        py = math.prod(int(s[j]) for j in range(ndim) if not mask >> j & 1)
        if px <= slv.mesh_x and py <= slv.mesh_y:
            return ["X" if mask >> j & 1 else "Y" for j in range(ndim)]
    return ["X"] * ndim


def _fits_mesh(space: MapSpace, lv: int, s: np.ndarray) -> np.ndarray:
    slv = space.hier.levels[lv]
    ndim = len(space.dims)
    if space.split[lv] is not None:
        ax = _axes(space, lv, np.ones(ndim, dtype=np.int64))
        xm = np.array([a == "X" for a in ax])
        px = np.prod(np.where(xm, s, 1), axis=1)
        py = np.prod(np.where(xm, 1, s), axis=1)
        return (px <= slv.mesh_x) & (py <= slv.mesh_y)
    ok = np.zeros(len(s), dtype=bool)
    for mask in range(1 << ndim):
        xm = np.array([bool(mask >> j & 1) for j in range(ndim)])
        ok |= (np.prod(np.where(xm, s, 1), axis=1) <= slv.mesh_x) & \
            (np.prod(np.where(xm, 1, s), axis=1) <= slv.mesh_y)
    return ok


def from_mapping(space: MapSpace, mappings: list[NestMapping]) -> Batch:
    """Candidates from explicit mappings (all with the same keep sets)."""
    ndim, nlev = len(space.dims), space.nlev
    n = len(mappings)
    tb = np.ones((n, nlev, ndim), dtype=np.int64)
    sb = np.ones((n, nlev, ndim), dtype=np.int64)
    perm = np.zeros((n, nlev, ndim), dtype=np.int64)
    for i, nm in enumerate(mappings):
        for lv, lm in enumerate(nm.levels):
            order = [space.dims.index(d) for d, _ in lm.temporal]
            for d, f in lm.temporal:
                tb[i, lv, space.dims.index(d)] *= f
            for d, f, _ in lm.spatial:
                sb[i, lv, space.dims.index(d)] *= f
            rest = [j for j in range(ndim) if j not in order]
            perm[i, lv] = order + rest
    return Batch(tb, sb, perm, tuple(lm.keep for lm in mappings[0].levels))


def to_mapping(space: MapSpace, batch: Batch, i: int) -> NestMapping:
    """Candidate ``i`` of ``batch`` as a :class:`NestMapping`."""
    levels = []
    for lv in range(space.nlev):
        temporal = tuple((space.dims[j], int(batch.tb[i, lv, j])) for j in batch.perm[i, lv])
        ax = _axes(space, lv, batch.sb[i, lv, :])
        spatial = tuple((space.dims[j], int(batch.sb[i, lv, j]), ax[j])
                        for j in range(len(space.dims)) if batch.sb[i, lv, j] > 1)
        levels.append(LevelMapping(temporal, spatial, batch.keep[lv]))
    return NestMapping(tuple(levels))


def _score(out: dict[str, np.ndarray], objective: str, energy_scale: float = 0.0
           ) -> np.ndarray:
    """Lower is better; infeasible = inf. ``latency`` ranks by cycles, ties by energy
    (``energy_scale`` > any energy of the search, fixed per search so that scores compare
    across batches)."""
    if objective == "energy":
        s = out["energy_pj"].astype(float)
    elif objective == "edp":
        s = out["edp"].astype(float)
    elif objective == "latency":
        e = np.where(out["feasible"], out["energy_pj"], 0.0)
        s = out["cycles"] + 0.5 * np.minimum(e / max(energy_scale, 1e-30), 1.0)
    else:
        raise ValueError(f"objective must be one of {OBJECTIVES}")
    return np.where(out["feasible"], s, np.inf)


#: Candidates kept per keep set as parents of the mutation batches.
_ELITE = 64


def _evaluate_bounded(space: MapSpace, batch: Batch, objective: str, worst: float
                      ) -> dict[str, np.ndarray]:
    """:func:`evaluate_batch` of the candidates whose score's lower bound is <= ``worst``;
    the others are returned infeasible (their score would exceed ``worst``)."""
    temporal = np.prod(batch.tb.reshape(batch.tb.shape[0], -1), axis=1).astype(float)
    if objective == "latency":
        bound = temporal
    elif objective == "edp":
        bound = float(space.hier.compute.energy_pj.get("compute", 0.0) * space.problem.macs) \
            * 1e-12 * temporal
    else:
        return evaluate_batch(space, batch)
    live = bound <= worst
    if live.all():
        return evaluate_batch(space, batch)
    n = len(live)
    out = {"energy_pj": np.zeros(n), "cycles": np.zeros(n, dtype=np.int64),
           "feasible": np.zeros(n, dtype=np.bool_), "edp": np.full(n, np.inf)}
    if live.any():
        sub = evaluate_batch(space, Batch(batch.tb[live], batch.sb[live], batch.perm[live],
                                          batch.keep))
        for k, v in sub.items():
            out[k][live] = v
    return out


@dataclass(frozen=True)
class EinsumSearchResult:
    """Best mapping found, its exact re-evaluation, and the search's speed.

    ``evaluations`` counts every candidate judged (those failing the capacity / fan-out
    pre-check are judged infeasible without the access analysis);
    ``feasible_evaluations`` those that got the full analysis.
    """

    mapping: NestMapping
    result: NestResult
    evaluations: int
    seconds: float
    feasible_evaluations: int = 0

    @property
    def evals_per_s(self) -> float:
        """Candidate evaluations per second (one core)."""
        return self.evaluations / self.seconds if self.seconds > 0 else 0.0


def _mutate(space: MapSpace, rng: np.random.Generator, elite: Batch, n: int) -> Batch:
    """Neighbours of elite candidates: re-draw one dimension's factors or swap two loops."""
    pick = rng.integers(0, elite.tb.shape[0], n)
    tb, sb, perm = elite.tb[pick], elite.sb[pick], elite.perm[pick]      # fancy index: copies
    nlev, ndim = tb.shape[1], tb.shape[2]
    j = rng.integers(0, ndim, n)
    redraw = rng.random(n) < 0.6
    for d, f in enumerate(space.fact):
        sel = redraw & (j == d)
        if sel.any():
            rows = f[rng.integers(0, len(f), int(sel.sum()))]
            tb[sel, :, d] = rows[:, 0::2]
            sb[sel, :, d] = rows[:, 1::2]
    sw = ~redraw
    lv = rng.integers(0, nlev, n)
    a, c = rng.integers(0, ndim, n), rng.integers(0, ndim, n)
    idx = np.nonzero(sw)[0]
    pa, pc = perm[idx, lv[idx], a[idx]].copy(), perm[idx, lv[idx], c[idx]].copy()
    perm[idx, lv[idx], a[idx]] = pc
    perm[idx, lv[idx], c[idx]] = pa
    return Batch(tb, sb, perm, elite.keep)


def search(problem: Einsum, hier: Hierarchy, constraints: Constraints | None = None, *,
           objective: str = "energy", time_budget_s: float = 8.0, batch_size: int = 4096,
           seed: int = 0, keep: dict[str, frozenset[str]] | None = None,
           max_evaluations: int | None = None, prune: bool = True,
           progress: Callable[[int, int], None] | None = None) -> EinsumSearchResult:
    """Random sampling plus elite mutation, vectorised; returns the best feasible mapping.

    Args:
        objective: ``energy`` | ``edp`` | ``latency``.
        time_budget_s: wall-clock budget (one core). max_evaluations: optional cap.
        keep: pin keep sets per level name (otherwise every allowed bypass choice is tried).
        prune: skip the access analysis of candidates whose score's lower bound (cycles >=
            the product of the temporal bounds; energy >= the MAC energy) is already worse
            than the best (when their keep set is not drawn again: a fixed
            ``max_evaluations`` and no time budget) or than their keep set's worst elite:
            they could enter neither the best nor an elite that is mutated later, so the
            search's path and result stay those without pruning.
        progress: called as ``progress(done, total)`` after each batch: whole seconds of a
            finite time budget, else candidates of ``max_evaluations``.

    Raises:
        ValueError: when no feasible mapping was found in the budget.
    """
    space = make_space(problem, hier, constraints, keep)
    rng = np.random.default_rng(seed)
    keep_combos = list(itertools.product(*space.keep_options))
    best: tuple[float, Batch, int] | None = None
    elites: dict[tuple[frozenset[str], ...], tuple[np.ndarray, Batch]] = {}
    evals = 0
    n_feasible = 0
    energy_scale = 0.0
    n_iter = -(-max_evaluations // batch_size) if max_evaluations is not None and \
        math.isinf(time_budget_s) else None
    t0 = time.perf_counter()
    it = 0
    while time.perf_counter() - t0 < time_budget_s and \
            (max_evaluations is None or evals < max_evaluations):
        kc = keep_combos[it % len(keep_combos)]
        el = elites.get(kc)
        if el is not None and it // len(keep_combos) % 2 == 1:
            cand = _mutate(space, rng, el[1], batch_size)
        else:
            cand = _sample(space, rng, batch_size, kc)
        # a pruned candidate may neither become the best nor enter an elite that a later
        # batch mutates: below the best when this keep set is not drawn again, else below
        # its worst elite
        worst = None
        if prune and energy_scale and best is not None:
            if n_iter is not None and it + len(keep_combos) >= n_iter:
                worst = best[0]
            elif el is not None and len(el[0]) == _ELITE:
                worst = float(el[0].max())
        out = evaluate_batch(space, cand) if worst is None else \
            _evaluate_bounded(space, cand, objective, worst)
        if not energy_scale and out["feasible"].any():
            energy_scale = 100.0 * float(out["energy_pj"][out["feasible"]].max())
        sc = _score(out, objective, energy_scale)
        evals += batch_size
        n_feasible += int(out["feasible"].sum())
        it += 1
        top = np.argsort(sc, kind="stable")[:_ELITE]
        top = top[np.isfinite(sc[top])]
        if len(top):
            prev = elites.get(kc)
            tb = np.concatenate([cand.tb[top]] + ([prev[1].tb] if prev else []))
            sb = np.concatenate([cand.sb[top]] + ([prev[1].sb] if prev else []))
            pm = np.concatenate([cand.perm[top]] + ([prev[1].perm] if prev else []))
            scores = np.concatenate([sc[top]] + ([prev[0]] if prev else []))
            keep_idx = np.argsort(scores, kind="stable")[:_ELITE]
            elites[kc] = (scores[keep_idx], Batch(tb[keep_idx], sb[keep_idx], pm[keep_idx], kc))
            if best is None or sc[top[0]] < best[0]:
                best = (float(sc[top[0]]), cand, int(top[0]))
        if progress is not None:
            if math.isfinite(time_budget_s):
                progress(min(int(time.perf_counter() - t0), int(time_budget_s)),
                         int(time_budget_s))
            elif max_evaluations is not None:
                progress(min(evals, max_evaluations), max_evaluations)
    secs = time.perf_counter() - t0
    if best is None:
        raise ValueError("no feasible mapping found")
    mp = to_mapping(space, best[1], best[2])
    return EinsumSearchResult(mp, analyse(problem, hier, mp), evals, secs, n_feasible)
