"""Loop-nest mappings on N-level hierarchies and their access-count analysis.

A :class:`NestMapping` gives, per storage level (innermost first), temporal loops (dimension,
bound; innermost first), spatial loops (dimension, bound, mesh axis) and the data spaces the
level keeps. The flat nest (outermost first) is: for each level from the outermost down, its
temporal loops, then its spatial loops (which fan the level's tile out to its children).

:func:`analyse` counts, per data space and kept level, what Timeloop's nest analysis counts
(Parashar et al., ISPASS 2019, Sec. IV; semantics re-derived from timeloop
``src/loop-analysis/nest-analysis.cpp`` and ``tiling.cpp``, written anew here):

* **tile** of a level = the axis-aligned box of the data space spanned by every loop of
  that level and below (strided gaps included);
* **deltas** D = the new elements of the tile each time the loops above move it, summed
  over time, per instance. Consecutive tiles of a sliding window overlap (the halo is
  reused). As in Timeloop, each loop above is evaluated at iteration 0 and at iteration 1,
  the latter weighted by ``bound - 1`` (uniform extrapolation), and a change of the tile's
  direction of motion discards the residual (a full refill), so reuse is kept only while the
  window keeps sliding the same way or stays put;
* **multicast / spatial reduction**: at each fan-out between a child and its parent, the
  children whose tiles differ by a zero translation receive one multicast (and their
  partial sums are reduced on the way up); the parent serves ``D_child * groups``;
* read-only data: ``fills = D``, ``reads = served``; read-write (outputs):
  ``updates = served``, ``reads = served - partition``, ``fills = D - partition`` (the first
  write of each output needs no read; Timeloop's first-read elision), except at the
  outermost level whose fills are 0.

Cycles are the slowest of the compute (MACs per utilised MAC) and each level's bandwidth;
energy is action counts times the per-action energies of :class:`dataflow.hierarchy`.
Counts are in elements; a data space with its own element width (``DataSpace.word_bits``)
is ``word_bits / level word bits`` level words per element in the capacity, bandwidth and
energy of each level (int8 weights in a 16-bit buffer take half a word each).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from archsim.dataflow.einsum import DataSpace, Einsum
from archsim.dataflow.hierarchy import Hierarchy, StorageLevel

__all__ = ["LevelMapping", "NestMapping", "LevelStats", "NestResult", "analyse", "deltas",
           "flat_loops", "LevelConstraint", "Constraints", "lower_bound_cycles"]


@dataclass(frozen=True)
class LevelMapping:
    """Loops and data spaces of one level.

    Attributes:
        temporal: (dim, bound), innermost first; bounds of 1 may be omitted.
        spatial: (dim, bound, axis) with axis ``"X"`` or ``"Y"``, innermost first.
        keep: data spaces stored at this level (the rest bypass it).
    """

    temporal: tuple[tuple[str, int], ...] = ()
    spatial: tuple[tuple[str, int, str], ...] = ()
    keep: frozenset[str] = frozenset()


@dataclass(frozen=True)
class NestMapping:
    """A mapping: one :class:`LevelMapping` per hierarchy level, innermost first."""

    levels: tuple[LevelMapping, ...]

    def describe(self, hier: Hierarchy) -> str:
        """The loop nest as indented text, outermost first (Timeloop's style)."""
        lines: list[str] = []
        depth = 0
        for i in range(len(self.levels) - 1, -1, -1):
            lm = self.levels[i]
            loops = [f"for {d} in [0:{b})" for d, b in reversed(lm.temporal) if b > 1]
            loops += [f"for {d} in [0:{b}) (Spatial-{a})" for d, b, a in reversed(lm.spatial)
                      if b > 1]
            if not loops:
                continue
            keep = ",".join(sorted(lm.keep)) or "-"
            lines.append("  " * depth + f"{hier.levels[i].name} [{keep}]")
            for lp in loops:
                lines.append("  " * depth + "| " + lp)
                depth += 1
        lines.append("  " * depth + "<< compute >>")
        return "\n".join(lines)


@dataclass(frozen=True)
class LevelConstraint:
    """Mapper constraints on one level (Timeloop's ``constraints``: keep/bypass, fixed
    factors, permutation prefix innermost first, spatial X/Y split)."""

    keep: frozenset[str] | None = None
    bypass: frozenset[str] = frozenset()
    #: data spaces the level must keep, the others left to the mapper (a named dataflow's
    #: stationary operand in the PE register); ``keep`` instead fixes the whole set
    must_keep: frozenset[str] = frozenset()
    temporal_factors: dict[str, int] = field(default_factory=dict)
    temporal_permutation: tuple[str, ...] = ()
    spatial_factors: dict[str, int] = field(default_factory=dict)
    spatial_permutation: tuple[str, ...] = ()
    spatial_split: int | None = None


@dataclass(frozen=True)
class Constraints:
    """Per-level mapper constraints, by level name."""

    levels: dict[str, LevelConstraint]


@dataclass(frozen=True)
class Loop:
    """One loop of the flat nest."""

    dim: str
    bound: int
    level: int
    spatial: bool
    stride: int          # index stride of this loop in its dimension


def flat_loops(problem: Einsum, mapping: NestMapping) -> list[Loop]:
    """The nest outermost first, each loop with its stride in its dimension.

    The index of dimension d is ``sum(i_loop * stride_loop)`` over d's loops, inner loops
    having the smaller strides (Timeloop's tiling order).
    """
    raw: list[tuple[str, int, int, bool]] = []
    for lv in range(len(mapping.levels) - 1, -1, -1):
        lm = mapping.levels[lv]
        raw += [(d, b, lv, False) for d, b in reversed(lm.temporal) if b > 1]
        raw += [(d, b, lv, True) for d, b, _ in reversed(lm.spatial) if b > 1]
    scale = dict.fromkeys(problem.dims, 1)
    out: list[Loop] = []
    for d, b, lv, sp in reversed(raw):
        out.append(Loop(d, b, lv, sp, scale[d]))
        scale[d] *= b
    out.reverse()
    return out


def _tile_dims(loops: list[Loop], level: int) -> dict[str, int]:
    """Iterations per dimension inside one tile of ``level`` (its loops and below)."""
    t: dict[str, int] = {}
    for lp in loops:
        if lp.level <= level:
            t[lp.dim] = t.get(lp.dim, 1) * lp.bound
    return t


def _rank_steps(ds: DataSpace, lp: Loop) -> tuple[int, ...]:
    """Translation of ``ds``'s box (per rank) when loop ``lp`` advances by one."""
    return tuple(sum(c * lp.stride for c, d in rank if d == lp.dim) for rank in ds.ranks)


def deltas(ds: DataSpace, loops: list[Loop], level: int, stationary_breaks: bool = True) -> int:
    """New elements of ``ds``'s tile at ``level`` summed over time, per instance.

    Walks the temporal loops above ``level`` (outermost first) at iterations 0 and 1 (the
    latter weighted by ``bound - 1``), tracking the tile's translation: the delta of a move
    is the part of the new box outside the old one while the direction of motion is
    unchanged, zero when the tile stays, and the whole box when the direction changes
    (which also forgets the last direction). Spatial loops above are fixed at 0 (every
    instance sees the same counts, translated).

    ``stationary_breaks`` (default, the behaviour of Timeloop before its January 2025
    "Translation fix", NVlabs/timeloop#297, which produced the published reference outputs):
    a stationary step (zero translation) counts as a direction of its own, so a later move
    discards the residual and a stationary step after a move refills the tile. With
    ``False`` (Timeloop after #297) stationary steps never break a sliding pattern.
    """
    tile = _tile_dims(loops, level)
    extent = [sum(c * (tile.get(d, 1) - 1) for c, d in rank) + 1 for rank in ds.ranks]
    full = math.prod(extent)
    above = [lp for lp in loops if lp.level > level and not lp.spatial]
    steps = [_rank_steps(ds, lp) for lp in above]
    k = len(above)
    nranks = len(extent)
    pos = [0] * nranks
    idx = [0] * k
    total = full                        # first visit: the whole tile
    prev_t: tuple[int, ...] | None = None
    weight_scale = [lp.bound - 1 for lp in above]
    for _ in range((1 << k) - 1):
        # binary counter: innermost loop (last in `above`) is the lowest bit
        j = k - 1
        while idx[j] == 1:
            idx[j] = 0
            j -= 1
        idx[j] = 1
        move = [0] * nranks
        for i in range(j, k):
            s = steps[i]
            sign = 1 if i == j else -1
            for r in range(nranks):
                move[r] += sign * s[r]
        for r in range(nranks):
            pos[r] += move[r]
        w = 1
        for i in range(k):
            if idx[i]:
                w *= weight_scale[i]
        t = tuple(move)
        if not any(t) and (prev_t is None or not stationary_breaks):
            delta = 0           # the tile stays: nothing new
            if stationary_breaks:
                prev_t = t
        elif prev_t is None or prev_t == t:
            overlap = 1
            for r in range(nranks):
                overlap *= max(0, extent[r] - abs(t[r]))
            delta = full - overlap
            prev_t = t
        else:
            delta = full        # direction changed: the residual is discarded
            prev_t = None
        total += w * delta
    return total


def _groups(ds: DataSpace, loops: list[Loop], level: int) -> int:
    """Distinct deliveries at the fan-out of ``level``: children whose tiles coincide
    (zero relative translation) form one multicast (or one reduction) group."""
    sp = [lp for lp in loops if lp.level == level and lp.spatial]
    if not sp:
        return 1
    vecs = {tuple(0 for _ in ds.ranks)}
    for lp in sp:
        step = _rank_steps(ds, lp)
        vecs = {tuple(v[r] + i * step[r] for r in range(len(v))) for v in vecs
                for i in range(lp.bound)}
    return len(vecs)


@dataclass
class LevelStats:
    """Per-instance action counts of one data space at one level (Timeloop's names)."""

    reads: int = 0
    fills: int = 0
    updates: int = 0
    utilized_capacity: int = 0
    partition_size: int = 0
    instances: int = 1
    energy_pj: float = 0.0          # total over instances


@dataclass
class NestResult:
    """Outcome of :func:`analyse`.

    Attributes:
        stats: level name -> data space -> :class:`LevelStats`.
        macs: total multiply-accumulates. compute_instances: utilised MACs.
        cycles: max(compute cycles, each level's bandwidth-bound cycles).
        compute_cycles: MACs per utilised MAC.
        energy_pj: total; energy_by_level_pj: level -> pJ (accesses + leakage), incl.
            the compute level. leak_pj: level -> leakage pJ.
        feasible, reasons: capacity / fan-out checks.
    """

    stats: dict[str, dict[str, LevelStats]]
    macs: int
    compute_instances: int
    compute_cycles: int
    cycles: int
    energy_pj: float
    energy_by_level_pj: dict[str, float]
    leak_pj: dict[str, float]
    utilization: float
    feasible: bool = True
    reasons: list[str] = field(default_factory=list)
    level_cycles: dict[str, int] = field(default_factory=dict)

    @property
    def fj_per_compute(self) -> float:
        """Energy per MAC in fJ."""
        return 1000.0 * self.energy_pj / self.macs

    @property
    def edp(self) -> float:
        """Energy-delay product in J*cycle (Timeloop's EDP)."""
        return self.energy_pj * 1e-12 * self.cycles


def _instances_above(loops: list[Loop], level: int) -> int:
    return math.prod(lp.bound for lp in loops if lp.spatial and lp.level > level)


def analyse(problem: Einsum, hier: Hierarchy, mapping: NestMapping, *,
            stationary_breaks: bool = True) -> NestResult:
    """Access counts, cycles and energy of ``mapping`` (see module docstring).

    Raises:
        ValueError: when the mapping does not match the hierarchy or the problem (a
            program error; user input is validated by the readers).
    """
    nlev = len(hier.levels)
    if len(mapping.levels) != nlev:
        raise ValueError(f"mapping has {len(mapping.levels)} levels, hierarchy {nlev}")
    loops = flat_loops(problem, mapping)
    reasons: list[str] = []
    for d, b in problem.dims.items():
        got = math.prod(lp.bound for lp in loops if lp.dim == d)
        if got != b:
            reasons.append(f"dimension {d}: factors multiply to {got}, expected {b}")
    macs = problem.macs
    compute_instances = _instances_above(loops, -1)
    compute_cycles = math.prod(lp.bound for lp in loops if not lp.spatial)
    stats: dict[str, dict[str, LevelStats]] = {lv.name: {} for lv in hier.levels}
    for ds in problem.data_spaces:
        keepers = [i for i in range(nlev) if ds.name in mapping.levels[i].keep]
        if not keepers:
            reasons.append(f"{ds.name} is kept at no level")
            continue
        child = -1                      # the compute level
        d_child = compute_cycles        # every MAC touches every operand once
        outer = keepers[-1]
        for lv in keepers:
            served = d_child
            for x in range(child + 1, lv + 1):
                served *= _groups(ds, loops, x)
            d_here = deltas(ds, loops, lv, stationary_breaks)
            tile = _tile_dims(loops, lv)
            cap = ds.extent(tile)
            part_dims = dict(tile)
            for lp in loops:
                if lp.level > lv and not lp.spatial:
                    part_dims[lp.dim] = part_dims.get(lp.dim, 1) * lp.bound
            part = ds.extent(part_dims)
            st = LevelStats(utilized_capacity=cap, partition_size=part,
                            instances=_instances_above(loops, lv))
            if ds.read_write:
                st.updates = served
                st.reads = served - part
                st.fills = 0 if lv == outer else d_here - part
            else:
                st.reads = served
                st.fills = 0 if lv == outer else d_here
            stats[hier.levels[lv].name][ds.name] = st
            child, d_child = lv, d_here
    # capacity and fan-out checks (capacity in the level's words)
    for i, slv in enumerate(hier.levels):
        used = sum(s.utilized_capacity * _words(problem, d, slv)
                   for d, s in stats[slv.name].items())
        if slv.size_words is not None and not slv.network_only and used > slv.size_words:
            reasons.append(f"{slv.name}: tile of {used} words exceeds capacity {slv.size_words}")
        sx = math.prod(lp.bound for lp in loops if lp.spatial and lp.level == i
                       and _axis(mapping, i, lp.dim) == "X")
        sy = math.prod(lp.bound for lp in loops if lp.spatial and lp.level == i
                       and _axis(mapping, i, lp.dim) == "Y")
        if sx > slv.mesh_x or sy > slv.mesh_y:
            reasons.append(f"{slv.name}: spatial fan-out {sx}x{sy} exceeds mesh "
                           f"{slv.mesh_x}x{slv.mesh_y}")
    # cycles: compute, and each level's bandwidth (words per instance per cycle)
    level_cycles: dict[str, int] = {}
    for slv in hier.levels:
        rd = sum(s.reads * _words(problem, d, slv) for d, s in stats[slv.name].items())
        wr = sum((s.fills + s.updates) * _words(problem, d, slv)
                 for d, s in stats[slv.name].items())
        c = 0
        if slv.shared_bw and slv.read_bw:
            c = math.ceil((rd + wr) / slv.read_bw)
        elif slv.read_bw:
            c = max(c, math.ceil(rd / slv.read_bw))
        if slv.write_bw and not slv.shared_bw:
            c = max(c, math.ceil(wr / slv.write_bw))
        level_cycles[slv.name] = c
    cycles = max([compute_cycles, *level_cycles.values()])
    # energy
    e_by: dict[str, float] = {}
    leak: dict[str, float] = {}
    comp_e = hier.compute.energy_pj.get("compute", 0.0) * macs
    e_by[hier.compute.name] = comp_e
    for slv in hier.levels:
        if slv.network_only:
            continue
        tot = 0.0
        util_inst = 1
        for d, s in stats[slv.name].items():
            util_inst = max(util_inst, s.instances)
            clusters = min(s.instances, max(1, slv.instances // slv.cluster_size))
            cluster_util = s.instances / clusters
            b = slv.block_size
            w = _words(problem, d, slv)
            per = (math.ceil(s.reads * w / b) * slv.energy_pj.get("read", 0.0)
                   + math.ceil(s.fills * w / b) * slv.energy_pj.get("write", 0.0)
                   + math.ceil(s.updates * w / b) * slv.energy_pj.get("update", 0.0)
                   ) / cluster_util
            s.energy_pj = per * s.instances
            tot += s.energy_pj
        lk = slv.energy_pj.get("leak", 0.0) * cycles * util_inst
        leak[slv.name] = lk
        e_by[slv.name] = tot + lk
    return NestResult(stats=stats, macs=macs, compute_instances=compute_instances,
                      compute_cycles=compute_cycles, cycles=cycles,
                      energy_pj=sum(e_by.values()), energy_by_level_pj=e_by, leak_pj=leak,
                      utilization=compute_instances / hier.compute.instances * compute_cycles
                      / cycles, feasible=not reasons, reasons=reasons,
                      level_cycles=level_cycles)


def lower_bound_cycles(problem: Einsum, hier: Hierarchy) -> int:
    """Cycles no mapping of ``problem`` on ``hier`` can beat: the MACs over the compute
    instances (spatial loops use each MAC at most once per iteration), and the outermost
    level's bandwidth for the compulsory traffic: every element of a read-only data space is
    read from it at least once and every output element updated at least once."""
    top = hier.levels[-1]
    bound = -(-problem.macs // hier.compute.instances)
    rd = sum(ds.extent(problem.dims) * _words(problem, ds.name, top)
             for ds in problem.data_spaces if not ds.read_write)
    wr = sum(ds.extent(problem.dims) * _words(problem, ds.name, top)
             for ds in problem.data_spaces if ds.read_write)
    if top.shared_bw and top.read_bw:
        return max(bound, math.ceil((rd + wr) / top.read_bw))
    if top.read_bw:
        bound = max(bound, math.ceil(rd / top.read_bw))
    if top.write_bw:
        bound = max(bound, math.ceil(wr / top.write_bw))
    return bound


def _words(problem: Einsum, space: str, level: StorageLevel) -> float:
    """Words of ``level`` per element of data space ``space``: its element bits over the
    level's word bits, or 1 when the data space has no width of its own."""
    bits = problem.space(space).word_bits
    return 1.0 if bits is None else bits / level.word_bits


def _axis(mapping: NestMapping, level: int, dim: str) -> str:
    for d, _, a in mapping.levels[level].spatial:
        if d == dim:
            return a
    return "X"
