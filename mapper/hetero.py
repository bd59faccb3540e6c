"""Whole-network list scheduling on heterogeneous designs (HEFT-style).

Model (Topcuoglu, Hariri and Wu, "Performance-effective and low-complexity task scheduling
for heterogeneous computing", IEEE TPDS 13(3), 2002, adapted):

* Every op of the workload DAG has, per unit that can run it, a duration (the unit's
  estimate) and an energy. A unit is one resource: it runs one op at a time.
* An edge ``u -> v`` whose ops sit on different units is a *transfer* of the edge's
  ``bytes`` (the producer's output tensor). With a shared memory (``Link.bandwidth_gbps``
  None, the default) a transfer costs only ``latency_s``: every op's estimate already
  writes its outputs to and reads its inputs from off-chip memory, so the bytes are
  counted once, by the ops. With a link (separate memories) the tensor is copied at
  ``bandwidth_gbps``: time ``latency_s + bytes / bandwidth``, energy one DRAM read of the
  bytes on the producer's unit and one DRAM write on the consumer's unit; transfers use
  the link one at a time (it is one resource). Same-unit edges cost nothing.
* Priority: upward rank (mean duration over the candidate units + the largest
  mean-transfer + rank of a successor), highest first; ties by topological index. Only ops
  whose predecessors are placed are eligible, so the order is topological.
* Placement per op, by objective: ``latency`` -> the earliest finish time (EFT);
  ``energy`` -> the lowest op + transfer energy; ``edp`` -> the lowest
  (makespan so far) x (energy so far) after placing it. No insertion into idle gaps.
* The greedy placement is compared with every single-unit schedule (all ops on one unit,
  when that unit can run them all) and the best of them for the objective is returned, so
  a heterogeneous design is never scheduled worse than its best unit alone.
* When every op has one candidate (a one-unit design, or units pinned by constraints) the
  ops are placed in the workload's topological order; on one unit they run back to back:
  latency = the sum of the op latencies, bit for bit what the sequential scheduler gave.

Not modelled (documented gaps): contention of units for a shared DRAM (each unit's
estimate assumes its configured bandwidth; split the bandwidth in the config for a
conservative model), insertion-based gap filling, on-chip forwarding between units.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Link", "Transfer", "Option", "HeteroPlan", "list_schedule", "retime"]


@dataclass(frozen=True)
class Link:
    """How a tensor moves between units.

    Attributes:
        bandwidth_gbps: copy bandwidth (1e9 B/s) of an inter-unit link; None = the units
            share off-chip memory and a tensor is not copied (zero-copy handoff).
        latency_s: fixed cost per cross-unit edge (synchronisation / DMA setup), seconds.
    """

    bandwidth_gbps: float | None = None
    latency_s: float = 0.0

    def seconds(self, nbytes: float) -> float:
        """Time to move ``nbytes`` between two units."""
        if self.bandwidth_gbps is None:
            return self.latency_s
        return self.latency_s + nbytes / (self.bandwidth_gbps * 1e9)

    @property
    def copies(self) -> bool:
        """True when a cross-unit tensor is copied (moves bytes), False for shared memory."""
        return self.bandwidth_gbps is not None


@dataclass(frozen=True)
class Transfer:
    """One cross-unit tensor transfer of the schedule (times in seconds)."""

    src: str
    dst: str
    src_unit: int
    dst_unit: int
    nbytes: float
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Option:
    """One candidate placement of an op: unit index, duration (s), energy (J)."""

    unit: int
    duration_s: float
    energy_j: float


@dataclass(frozen=True)
class HeteroPlan:
    """Result of :func:`list_schedule`: per op (in the input order) the chosen option index,
    start and end times; the transfers; the placement order; and which strategy won."""

    choice: tuple[int, ...]
    start_s: tuple[float, ...]
    end_s: tuple[float, ...]
    transfers: tuple[Transfer, ...]
    order: tuple[int, ...]
    strategy: str

    @property
    def makespan_s(self) -> float:
        return max(self.end_s) if self.end_s else 0.0


def _objective(objective: str, makespan: float, energy: float) -> float:
    if objective == "energy":
        return energy
    if objective == "edp":
        return makespan * energy
    return makespan


def _timing(order: Sequence[int], unit_of: Sequence[int], dur: Sequence[float],
            preds: Sequence[Sequence[tuple[int, float]]], names: Sequence[str],
            link: Link) -> tuple[list[float], list[float], list[Transfer]]:
    """Start/end times of a fixed assignment placed in ``order`` (see module docstring)."""
    n = len(dur)
    start = [0.0] * n
    end = [0.0] * n
    unit_free: dict[int, float] = {}
    link_free = 0.0
    transfers: list[Transfer] = []
    for i in order:
        u = unit_of[i]
        ready = 0.0
        cross = [(end[p], p, b) for p, b in preds[i] if unit_of[p] != u]
        if len(cross) > 1:
            cross.sort()
        for p, _b in preds[i]:
            if unit_of[p] == u:
                ready = max(ready, end[p])
        for t_end_p, p, b in cross:
            t0 = max(t_end_p, link_free) if link.copies else t_end_p
            t1 = t0 + link.seconds(b)
            if link.copies:
                link_free = t1
            transfers.append(Transfer(names[p], names[i], unit_of[p], u, b, t0, t1))
            ready = max(ready, t1)
        s = max(ready, unit_free.get(u, 0.0))
        start[i] = s
        end[i] = s + dur[i]
        unit_free[u] = end[i]
    return start, end, transfers


def _upward_rank(options: Sequence[Sequence[Option]], succs: Sequence[Sequence[tuple[int, float]]],
                 topo: Sequence[int], link: Link, n_units: int) -> list[float]:
    """HEFT upward rank with mean durations and mean transfer times."""
    mean = [float(np.mean([o.duration_s for o in opts])) if opts else 0.0 for opts in options]
    # probability that two ops on independently uniform units differ
    p_cross = 1.0 - 1.0 / n_units if n_units > 1 else 0.0
    rank = [0.0] * len(options)
    for i in reversed(topo):
        best = 0.0
        for j, b in succs[i]:
            best = max(best, p_cross * link.seconds(b) + rank[j])
        rank[i] = mean[i] + best
    return rank


def list_schedule(names: Sequence[str], options: Sequence[Sequence[Option]],
                  edges: Sequence[tuple[int, int, float]], objective: str = "latency",
                  link: Link | None = None, n_units: int = 1,
                  transfer_energy_j_per_byte: Sequence[tuple[float, float]] | None = None,
                  ) -> HeteroPlan:
    """Assign every op to one of its options and schedule the DAG.

    Args:
        names: op names; their index order must be a topological order.
        options: per op, the candidate placements (at least one each).
        edges: ``(producer index, consumer index, bytes)``.
        objective: ``latency``, ``energy`` or ``edp``.
        link: transfer model (default: shared memory, no copy, no latency).
        n_units: number of units of the design.
        transfer_energy_j_per_byte: per unit ``(DRAM read J/B, DRAM write J/B)``, used when
            the link copies (producer reads, consumer writes).

    Returns:
        The best :class:`HeteroPlan` among the greedy list schedule and every single-unit
        schedule (see the module docstring).
    """
    link = link or Link()
    n = len(names)
    preds: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    succs: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for a, b, nb in edges:
        preds[b].append((a, nb))
        succs[a].append((b, nb))
    topo = list(range(n))
    e_rw = transfer_energy_j_per_byte or [(0.0, 0.0)] * n_units

    def energy_of(choice: Sequence[int], transfers: Sequence[Transfer]) -> float:
        e = sum(options[i][c].energy_j for i, c in enumerate(choice))
        if link.copies:
            e += sum(t.nbytes * (e_rw[t.src_unit][0] + e_rw[t.dst_unit][1]) for t in transfers)
        return e

    def plan(choice: list[int], order: list[int], strategy: str) -> tuple[float, HeteroPlan]:
        unit_of = [options[i][c].unit for i, c in enumerate(choice)]
        dur = [options[i][c].duration_s for i, c in enumerate(choice)]
        s, e, tr = _timing(order, unit_of, dur, preds, names, link)
        p = HeteroPlan(tuple(choice), tuple(s), tuple(e), tuple(tr), tuple(order), strategy)
        return _objective(objective, p.makespan_s, energy_of(choice, tr)), p

    # ---- trivial case: one candidate per op -> topological order, back to back ----------
    if all(len(o) == 1 for o in options):
        return plan([0] * n, topo, "single")[1]

    # ---- greedy list scheduling ----------------------------------------------------------
    rank = _upward_rank(options, succs, topo, link, n_units)
    indeg = [len(p) for p in preds]
    heap = [(-rank[i], i) for i in range(n) if indeg[i] == 0]
    heapq.heapify(heap)
    choice = [0] * n
    unit_of = [-1] * n
    end = [0.0] * n
    unit_free: dict[int, float] = {}
    link_free = 0.0
    makespan = 0.0
    energy = 0.0
    order: list[int] = []
    while heap:
        _, i = heapq.heappop(heap)
        best: tuple[float, float, float, int] | None = None
        best_state: tuple[float, float] = (0.0, 0.0)
        for c, o in enumerate(options[i]):
            u = o.unit
            ready = 0.0
            lf = link_free
            e_tr = 0.0
            for t_end_p, q, nb in sorted((end[q], q, nb) for q, nb in preds[i]):
                if unit_of[q] == u:
                    ready = max(ready, t_end_p)
                    continue
                t0 = max(t_end_p, lf) if link.copies else t_end_p
                t1 = t0 + link.seconds(nb)
                if link.copies:
                    lf = t1
                    e_tr += nb * (e_rw[unit_of[q]][0] + e_rw[u][1])
                ready = max(ready, t1)
            fin = max(ready, unit_free.get(u, 0.0)) + o.duration_s
            e_op = o.energy_j + e_tr
            if objective == "latency":
                key = (fin, e_op)
            elif objective == "energy":
                key = (e_op, fin)
            else:
                key = (max(makespan, fin) * (energy + e_op), fin)
            cand = (key[0], key[1], float(c), c)
            if best is None or cand < best:
                best = cand
                best_state = (fin, lf)
        assert best is not None, f"op {names[i]} has no option"
        c = best[3]
        o = options[i][c]
        choice[i] = c
        unit_of[i] = o.unit
        end[i] = best_state[0]
        unit_free[o.unit] = end[i]
        link_free = best_state[1]
        makespan = max(makespan, end[i])
        energy += o.energy_j
        order.append(i)
        for j, _nb in succs[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(heap, (-rank[j], j))
    candidates = [plan(choice, order, "list")]

    # ---- single-unit schedules (safeguard: never worse than the best unit alone) ---------
    for u in range(n_units):
        ch = []
        for opts in options:
            idx = [c for c, o in enumerate(opts) if o.unit == u]
            if not idx:
                break
            ch.append(idx[0])
        else:
            candidates.append(plan(ch, topo, f"unit{u}"))
    best_v = min(v for v, _ in candidates)
    for v, pl in candidates:         # first of the best (deterministic)
        if v <= best_v * (1 + 1e-12) or (math.isinf(best_v) and v == best_v):
            return pl
    return candidates[0][1]


def retime(plan: HeteroPlan, names: Sequence[str], unit_of: Sequence[int],
           durations_s: Sequence[float], edges: Sequence[tuple[int, int, float]],
           link: Link | None = None) -> HeteroPlan:
    """The same assignment and placement order with other durations (e.g. simulated ones)."""
    link = link or Link()
    preds: list[list[tuple[int, float]]] = [[] for _ in range(len(names))]
    for a, b, nb in edges:
        preds[b].append((a, nb))
    s, e, tr = _timing(plan.order, unit_of, durations_s, preds, names, link)
    return HeteroPlan(plan.choice, tuple(s), tuple(e), tuple(tr), plan.order, plan.strategy)
