"""Per-op mapping search over loop-nest mappings (:mod:`dataflow.mapping`).

Candidates: for every dim, the ordered factorisations into the five slots
(rows, cols, RF, GLB, DRAM) that the named dataflow allows, pruned per dim by the array
size and the RF capacity; times the 6 x 6 loop orders of the GLB and DRAM levels.

* small spaces (<= ``exhaustive_limit`` candidates) are enumerated completely;
* larger ones are sampled at random (seeded, deterministic) and the best ``top_k`` samples
  refined by coordinate descent (each round tries every option of one dim, then every loop
  order pair, keeping the others fixed) until no improvement.

Every candidate batch is costed by :func:`evaluate_batch`, a numpy implementation of the
analysis in :mod:`dataflow.mapping` (the scalar ``dataflow.analyse``/``cost`` is the
reference; tests check they agree). No Python loop runs per mapping.

Objectives: ``latency`` (cycles, ties broken by energy), ``energy`` (pJ), ``edp``
(cycles x pJ), or a ``(w_latency, w_energy)`` weighted mix of normalised log costs.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from archsim.dataflow.mapping import (
    DATAFLOW_CONSTRAINTS,
    DRAM,
    GLB,
    RELEVANT,
    RF,
    SCOL,
    SROW,
    ArchParams,
    Cost,
    Mapping,
    Shape,
)
from archsim.mapper.factors import divisors
from archsim.mapper.objective import objective_value

__all__ = ["PERMS", "GemmSearchResult", "arch_params", "best_mapping", "evaluate_batch",
           "search", "dim_options", "clear_cache", "to_arrays", "from_arrays",
           "top_mappings", "refine_with_simulation"]

PERMS = np.array(list(itertools.permutations(range(3))), dtype=np.int64)   # (6, 3)
_PERM_INDEX = {tuple(int(x) for x in p): i for i, p in enumerate(PERMS)}
_REL = np.array(RELEVANT, dtype=bool)                                      # (3 tensors, 3 dims)


@dataclass(frozen=True)
class GemmSearchResult:
    """Best GEMM mapping found for one op shape on one unit, with its analytical cost.

    Not the Einsum search's :class:`~archsim.mapper.einsum_search.EinsumSearchResult` (a
    ``NestMapping`` with its exact ``NestResult`` and the search's speed) nor the plan
    search's :class:`~archsim.mapper.plan.PlanSearchResult` (ranked plans): each holds what
    its search produces; the objectives they rank by are :data:`archsim.mapper.objective.OBJECTIVES`.
    """

    mapping: Mapping
    cost: Cost
    objective: str
    value: float
    evaluated: int
    exhaustive: bool
    space_size: int


# ---- vectorised cost model -------------------------------------------------------------

def to_arrays(mappings: list[Mapping]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(F (B,5,3), glb perm index (B,), dram perm index (B,)) of a list of mappings."""
    F = np.array([m.factors for m in mappings], dtype=np.int64).reshape(-1, 5, 3)
    pg = np.array([_PERM_INDEX[tuple(m.order[0])] for m in mappings], dtype=np.int64)
    pd = np.array([_PERM_INDEX[tuple(m.order[1])] for m in mappings], dtype=np.int64)
    return F, pg, pd


def _int_triple(row: np.ndarray) -> tuple[int, int, int]:
    return int(row[0]), int(row[1]), int(row[2])


def from_arrays(F: np.ndarray, pg: int, pd: int, dataflow: str) -> Mapping:
    """The Mapping of one (5, 3) factor array and its loop-order permutation indices."""
    return Mapping(tuple(_int_triple(row) for row in F),
                   (_int_triple(PERMS[pg]), _int_triple(PERMS[pd])), frozenset(), dataflow)


def _refetch(dims: np.ndarray, facs: np.ndarray, t: int) -> np.ndarray:
    """Vectorised ``dataflow.mapping.refetch``: dims/facs (B, L) outermost first."""
    mask = _REL[t][dims] & (facs > 1)
    L = facs.shape[1]
    cp = np.cumprod(facs, axis=1)
    last = L - 1 - np.argmax(mask[:, ::-1], axis=1)
    r = np.take_along_axis(cp, last[:, None], axis=1)[:, 0]
    return np.where(mask.any(axis=1), r, 1).astype(np.float64)


def evaluate_batch(F: np.ndarray, pg: np.ndarray, pd: np.ndarray, shape: Shape,
                   p: ArchParams) -> dict[str, np.ndarray]:
    """Cost of B mappings at once (no bypass). Returns arrays ``cycles``, ``energy_pj``,
    ``dram_bytes``, ``compute_cycles``, ``feasible`` (capacity and fan-out) and the
    per-level access totals ``rf``, ``glb`` (elements)."""
    F = F.astype(np.float64) if F.dtype != np.float64 else F
    B = F.shape[0]
    ar = np.arange(B)
    Fi = F.astype(np.int64)
    macs1 = float(shape.m * shape.n * shape.k)
    out = float(shape.m * shape.n)
    rf_f = F[:, RF, :]
    glb_cum = F[:, RF, :] * F[:, SROW, :] * F[:, SCOL, :] * F[:, GLB, :]
    sp = F[:, SROW, :] * F[:, SCOL, :]
    rows_used = F[:, SROW, :].prod(axis=1)
    cols_used = F[:, SCOL, :].prod(axis=1)
    pes = rows_used * cols_used
    dd = PERMS[pd]                                   # (B,3) DRAM loop dims, outermost first
    dg = PERMS[pg]
    fd = Fi[ar[:, None], DRAM, dd]                   # (B,3)
    fg = Fi[ar[:, None], GLB, dg]
    d_rf = np.concatenate([dd, dg], axis=1)
    f_rf = np.concatenate([fd, fg], axis=1)
    sizes = (p.a_bytes, p.b_bytes, p.psum_bytes)
    rf_acc = np.zeros(B)
    glb_acc = np.zeros(B)
    dram_bytes = np.zeros(B)
    rf_need = np.zeros(B)
    glb_need = np.zeros(B)
    for t in range(3):                               # 3 tensors: fixed, not per mapping
        rel = _REL[t]
        rf_t = rf_f[:, rel].prod(axis=1)
        glb_t = glb_cum[:, rel].prod(axis=1)
        sp_rel = sp[:, rel].prod(axis=1)
        rf_need += rf_t * sizes[t]
        glb_need += glb_t * sizes[t]
        r_rf = _refetch(d_rf, f_rf, t)
        r_glb = _refetch(dd, fd, t)
        to_pes = rf_t * r_rf * sp_rel
        up = glb_t * r_glb
        if t < 2:
            rf_acc += rf_t * r_rf * pes + macs1          # fills + reads
            glb_acc += to_pes + up                       # reads + fills
            dram_bytes += up * sizes[t]
        else:
            reenter = np.maximum(0.0, to_pes - out)
            dram_re = np.maximum(0.0, up - out)
            rf_acc += 2 * macs1 + reenter                # reads + updates + fills
            glb_acc += to_pes + reenter + up + dram_re   # updates + reads(2 kinds) + fills
            dram_bytes += dram_re * p.psum_bytes + (up - out) * p.psum_bytes + out * p.out_bytes
    bt = float(shape.batch)
    compute = bt * (F[:, RF, :] * F[:, GLB, :] * F[:, DRAM, :]).prod(axis=1)
    dram_bytes *= bt
    rf_acc *= bt
    glb_acc *= bt
    dram_cycles = dram_bytes / p.dram_bytes_per_cycle
    cycles = np.maximum(compute, dram_cycles)
    energy = (shape.macs * p.e_mac_pj + rf_acc * p.e_rf_pj + glb_acc * p.e_glb_pj
              + dram_bytes * p.e_dram_pj_per_byte)
    feas = ((rows_used <= p.rows) & (cols_used <= p.cols) & (rf_need <= p.rf_bytes)
            & (glb_need <= p.glb_bytes))
    return {"cycles": cycles, "energy_pj": energy, "dram_bytes": dram_bytes,
            "compute_cycles": compute, "feasible": feas, "rf": rf_acc, "glb": glb_acc}


def _score(ev: dict[str, np.ndarray], objective: Any) -> np.ndarray:
    c, e = ev["cycles"], ev["energy_pj"]
    if objective == "latency":
        s = c
    elif objective == "energy":
        s = e
    elif objective == "edp":
        s = c * e
    elif isinstance(objective, tuple) and len(objective) == 2:
        s = objective[0] * np.log(c) + objective[1] * np.log(e)
    else:
        raise ValueError(f"unknown objective {objective!r}; expected latency, energy, edp or "
                         "(w_latency, w_energy)")
    return np.where(ev["feasible"], s, np.inf)


def _best(ev: dict[str, np.ndarray], objective: Any) -> tuple[int, float]:
    """Index of the best feasible candidate (ties: lower energy, then lower cycles)."""
    s = _score(ev, objective)
    best = s.min()
    if not np.isfinite(best):
        return -1, math.inf
    tie = s <= best
    tb = ev["energy_pj"] if objective != "energy" else ev["cycles"]
    return int(np.argmin(np.where(tie, tb, np.inf))), float(best)


# ---- candidate generation --------------------------------------------------------------



_OPT_CACHE: dict[tuple, np.ndarray] = {}


def dim_options(size: int, allowed: tuple[bool, bool, bool], rows: int, cols: int,
                rf_max: int) -> np.ndarray:
    """All ordered splits of ``size`` into (rows, cols, RF, GLB, DRAM) factors, (n, 5).

    ``allowed`` says whether the rows / cols / RF slots may hold a factor > 1; rows and
    cols are pruned to the array size and RF to ``rf_max`` elements.
    """
    key = (size, allowed, rows, cols, rf_max)
    hit = _OPT_CACHE.get(key)
    if hit is not None:
        return hit
    out = []
    divs = divisors(size)
    for sr in (divs if allowed[0] else [1]):
        if sr > rows:
            break
        r1 = size // sr
        for sc in (divisors(r1) if allowed[1] else [1]):
            if sc > cols:
                break
            r2 = r1 // sc
            for rf in (divisors(r2) if allowed[2] else [1]):
                if rf > rf_max:
                    break
                r3 = r2 // rf
                for g in divisors(r3):
                    out.append((sr, sc, rf, g, r3 // g))
    arr = np.array(out, dtype=np.int64).reshape(-1, 5)
    _OPT_CACHE[key] = arr
    return arr


def _assemble(opts: list[np.ndarray], idx: np.ndarray) -> np.ndarray:
    """F (B,5,3) from per-dim option indices idx (B,3)."""
    return np.stack([opts[d][idx[:, d]] for d in range(3)], axis=2)


# ---- search ----------------------------------------------------------------------------

_CACHE: dict[tuple, GemmSearchResult | None] = {}


def clear_cache() -> None:
    _CACHE.clear()


def search(shape: Shape, p: ArchParams, objective: Any = "latency",
           dataflows: tuple[str, ...] = ("ws", "os", "is"), *, exhaustive_limit: int = 200_000,
           samples: int = 4096, top_k: int = 4, seed: int = 0, chunk: int = 1 << 16,
           use_cache: bool = True, fixed: tuple[tuple[int, int, int], ...] = (),
           order_glb: tuple[int, int, int] | None = None,
           order_dram: tuple[int, int, int] | None = None) -> GemmSearchResult | None:
    """Best mapping of ``shape`` on ``p`` over the named ``dataflows`` (None: nothing fits).

    User constraints (``mapper.constraints``): ``fixed`` pins loop-nest factors as
    ``(slot, dim, value)``; ``order_glb`` / ``order_dram`` pin a level's loop order. Only
    candidates that satisfy them are generated, so the result (if any) satisfies them.
    """
    fixed = tuple(sorted(fixed))
    key = (shape, p, objective, tuple(dataflows), exhaustive_limit, samples, top_k, seed,
           fixed, order_glb, order_dram)
    if use_cache and key in _CACHE:
        return _CACHE[key]
    best: GemmSearchResult | None = None
    best_v = math.inf
    total_eval = 0
    for df in dataflows:
        r = _search_one(shape, p, objective, df, exhaustive_limit, samples, top_k, seed, chunk,
                        fixed, order_glb, order_dram)
        if r is None:
            continue
        total_eval += r.evaluated
        if r.value < best_v or best is None:
            best, best_v = r, r.value
    if best is not None:
        best = GemmSearchResult(best.mapping, best.cost, best.objective, best.value, total_eval,
                            best.exhaustive, best.space_size)
    if use_cache:
        _CACHE[key] = best
    return best


def _cost_of(ev: dict[str, np.ndarray], i: int, shape: Shape, p: ArchParams) -> Cost:
    c = float(ev["cycles"][i])
    return Cost(c, float(ev["compute_cycles"][i]),
                float(ev["dram_bytes"][i] / p.dram_bytes_per_cycle), float(ev["energy_pj"][i]),
                float(ev["dram_bytes"][i]), shape.macs / (c * p.rows * p.cols) if c else 0.0)


def _pairs(order_glb: tuple[int, int, int] | None,
           order_dram: tuple[int, int, int] | None) -> np.ndarray:
    """Allowed (GLB perm index, DRAM perm index) pairs, (n, 2); all 36 when unconstrained."""
    g = [_PERM_INDEX[tuple(order_glb)]] if order_glb is not None else range(6)
    d = [_PERM_INDEX[tuple(order_dram)]] if order_dram is not None else range(6)
    # pair index = pg + 6 * pd when unconstrained (the order the exhaustive loop always used)
    return np.array([(a, b) for b in d for a in g], dtype=np.int64).reshape(-1, 2)


def _search_one(shape: Shape, p: ArchParams, objective: Any, df: str, limit: int,
                samples: int, top_k: int, seed: int, chunk: int,
                fixed: tuple[tuple[int, int, int], ...] = (),
                order_glb: tuple[int, int, int] | None = None,
                order_dram: tuple[int, int, int] | None = None) -> GemmSearchResult | None:
    rows_c, cols_c, rf_c = DATAFLOW_CONSTRAINTS[df]
    rf_max = max(1, int(p.rf_bytes // max(min(p.a_bytes, p.b_bytes, p.psum_bytes), 1e-9)))
    opts = [dim_options(shape.dims[d], (d in rows_c, d in cols_c, d in rf_c), p.rows, p.cols,
                        rf_max) for d in range(3)]
    for slot, d, v in fixed:                  # user constraints: keep matching splits only
        opts[d] = opts[d][opts[d][:, slot] == v]
    n = [len(o) for o in opts]
    if min(n) == 0:
        return None
    pairs = _pairs(order_glb, order_dram)
    npairs = len(pairs)
    space = n[0] * n[1] * n[2] * npairs
    best_i: tuple | None = None  # (value, F, pg, pd, energy, cycles, idx)
    evaluated = 0

    def consider(idx: np.ndarray, pg: np.ndarray, pd: np.ndarray) -> None:
        nonlocal best_i, evaluated
        F = _assemble(opts, idx)
        ev = evaluate_batch(F, pg, pd, shape, p)
        evaluated += len(pg)
        i, v = _best(ev, objective)
        if i < 0:
            return
        if best_i is None or _better(v, ev, i, best_i, objective):
            best_i = (v, F[i].copy(), int(pg[i]), int(pd[i]), float(ev["energy_pj"][i]),
                      float(ev["cycles"][i]), idx[i].copy())

    if space <= limit:
        for start in range(0, space, chunk):
            lin = np.arange(start, min(space, start + chunk), dtype=np.int64)
            perm, rest = lin % npairs, lin // npairs
            i0, rest = rest % n[0], rest // n[0]
            i1, i2 = rest % n[1], rest // n[1]
            consider(np.stack([i0, i1, i2], axis=1), pairs[perm, 0], pairs[perm, 1])
        exhaustive = True
    else:
        rng = np.random.default_rng(seed)
        idx = np.stack([rng.integers(0, n[d], samples) for d in range(3)], axis=1)
        if npairs == 36:
            pg, pd = rng.integers(0, 6, samples), rng.integers(0, 6, samples)
        else:
            pi = rng.integers(0, npairs, samples)
            pg, pd = pairs[pi, 0], pairs[pi, 1]
        F = _assemble(opts, idx)
        ev = evaluate_batch(F, pg, pd, shape, p)
        evaluated += samples
        s = _score(ev, objective)
        seeds = [j for j in np.argsort(s, kind="stable")[:top_k] if np.isfinite(s[j])]
        for j in seeds:
            _refine(opts, n, idx[j].copy(), int(pg[j]), int(pd[j]), consider, lambda: best_i,
                    pairs=pairs)
        if not seeds:
            # nothing feasible sampled: seed from the option with the smallest on-chip tiles
            # (all-DRAM when unconstrained)
            base = np.array([int(np.argmin(o[:, :4].prod(axis=1))) for o in opts])
            b0, b1 = int(pairs[0, 0]), int(pairs[0, 1])
            consider(base[None, :], np.full(1, b0), np.full(1, b1))
            if best_i is not None:
                _refine(opts, n, base, b0, b1, consider, lambda: best_i, pairs=pairs)
        exhaustive = False
    if best_i is None:
        return None
    v, F, pg, pd = best_i[0], best_i[1], best_i[2], best_i[3]
    m = from_arrays(F, pg, pd, df)
    ev = evaluate_batch(F[None], np.array([pg]), np.array([pd]), shape, p)
    return GemmSearchResult(m, _cost_of(ev, 0, shape, p), str(objective), v, evaluated,
                        exhaustive, space)


def _better(v: float, ev: dict[str, np.ndarray], i: int, cur: tuple, objective: Any) -> bool:
    if v != cur[0]:
        return v < cur[0]
    tb = float(ev["energy_pj"][i]) if objective != "energy" else float(ev["cycles"][i])
    cur_tb = cur[4] if objective != "energy" else cur[5]
    return tb < cur_tb


def _refine(opts: list[np.ndarray], n: list[int], idx: np.ndarray, pg: int, pd: int,
            consider: Any, get_best: Any, rounds: int = 6,
            pairs: np.ndarray | None = None) -> None:
    """Coordinate descent from (idx, pg, pd): each step tries all options of one coordinate
    (and every allowed loop-order pair)."""
    if pairs is None:
        pairs = _pairs(None, None)
    for _ in range(rounds):
        before = get_best()
        for d in range(3):
            cand = np.repeat(idx[None, :], n[d], axis=0)
            cand[:, d] = np.arange(n[d])
            k = n[d]
            consider(cand, np.full(k, pg), np.full(k, pd))
            b = get_best()
            if b is not None:
                idx = b[6].copy()
                pg, pd = b[2], b[3]
        consider(np.repeat(idx[None, :], len(pairs), axis=0), pairs[:, 0], pairs[:, 1])
        b = get_best()
        if b is not None:
            idx, pg, pd = b[6].copy(), b[2], b[3]
        if b is before or (b is not None and before is not None and b[0] == before[0]
                           and b[4] == before[4]):
            break


# ---- units -----------------------------------------------------------------------------

def arch_params(unit: Any, op: Any) -> ArchParams:
    """``ArchParams`` of ``unit``'s loop-nest space for ``op`` (``unit.loop_nest(op)``)."""
    p = unit.loop_nest(op)
    if p is None:
        raise ValueError(f"unit {unit.name!r} has no loop-nest space for {op.name!r}")
    return p  # type: ignore[no-any-return]


def best_mapping(unit: Any, op: Any, objective: Any = "latency",
                 dataflows: tuple[str, ...] | None = None, **kw: Any) -> GemmSearchResult | None:
    """Best loop-nest mapping of a matrix op (``Gemm`` / ``Conv2d``) on a spatial unit.

    Returns None for ops that are not matrix ops, units without a ``rows x cols`` array, or
    when no mapping fits. ``dataflows`` defaults to ``unit.dataflows()`` (so the mapping's
    ``.dataflow`` is one the unit's ``estimate`` accepts). Results are cached by
    (op shape, unit parameters, objective).
    """
    p = unit.loop_nest(op)
    if p is None or unit.supports(op):
        return None
    shape = Shape.of(op)
    dfs = tuple(dataflows) if dataflows else tuple(
        d for d in unit.dataflows() if d in DATAFLOW_CONSTRAINTS) or ("free",)
    return search(shape, p, objective, dfs, **kw)


def top_mappings(unit: Any, op: Any, objective: Any = "latency", k: int = 4,
                 dataflows: tuple[str, ...] | None = None, **kw: Any) -> list[GemmSearchResult]:
    """Up to ``k`` distinct good mappings, best first by the analytical ``objective``.

    Candidates: the best mapping of every allowed dataflow under each of the objectives
    latency, energy and EDP (diverse, each locally optimal), ranked by ``objective``.
    """
    if unit.loop_nest(op) is None:
        return []
    dfs = tuple(dataflows) if dataflows else tuple(
        d for d in unit.dataflows() if d in DATAFLOW_CONSTRAINTS) or ("free",)
    seen: dict[Any, GemmSearchResult] = {}
    for df in dfs:
        for obj in dict.fromkeys((objective, "latency", "energy", "edp")):
            r = best_mapping(unit, op, obj, dataflows=(df,), **kw)
            if r is not None and r.mapping not in seen:
                seen[r.mapping] = r
    if not seen:
        return []
    def analytical(r: GemmSearchResult) -> float:
        est = unit.estimate(op, r.mapping)
        return objective_value(objective if objective in ("latency", "energy", "edp")
                               else "latency", est.latency_s, r.cost.energy_pj * 1e-12)

    return sorted(seen.values(), key=analytical)[:max(1, k)]


def refine_with_simulation(unit: Any, op: Any, objective: Any = "latency", k: int = 4,
                           **kw: Any) -> tuple[GemmSearchResult | None, list[tuple[Any, int, int]]]:
    """Re-rank the ``top_mappings`` by the cycle simulator (``unit.simulate``).

    The objective's latency term is the simulated one (energy stays the analytical access
    count model's). Returns the winner and ``(mapping, estimated cycles, simulated cycles)``
    for every candidate, so callers can report how often the simulator changes the choice.
    """
    cands = top_mappings(unit, op, objective, k, **kw)
    rows: list[tuple[Any, int, int]] = []
    best: tuple[float, GemmSearchResult] | None = None
    obj = objective if objective in ("latency", "energy", "edp") else "latency"
    for r in cands:
        est = unit.estimate(op, r.mapping)
        try:
            cyc = unit.simulate(op, r.mapping)
        except NotImplementedError:
            cyc = est.cycles
        rows.append((r.mapping, est.cycles, cyc))
        v = objective_value(obj, cyc / est.clock_hz, r.cost.energy_pj * 1e-12)
        if best is None or v < best[0]:
            best = (v, r)
    return (best[1] if best else None), rows
