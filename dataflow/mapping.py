"""Loop-nest mappings of GEMM-like ops and their Timeloop-style access-count analysis.

An op is viewed as ``C[M,N] += A[M,K] * B[K,N]`` (``Conv2d.as_gemm()`` gives the im2col view;
``batch`` independent GEMMs, e.g. groups, repeat the nest). A :class:`Mapping` splits every
dimension ``d`` exactly into five factors (their product equals the dimension)::

    slot  0 SROW   spatial, along the array rows
          1 SCOL   spatial, along the array columns
          2 RF     temporal loop inside each PE (register file level)
          3 GLB    temporal loop at the global buffer
          4 DRAM   temporal loop at off-chip memory

The loop nest, outermost first, is ``DRAM loops (order[DRAM]) -> GLB loops (order[GLB]) ->
spatial (rows x cols PEs) -> RF loops``. Storage levels: ``RF`` (per PE), ``GLB`` (shared),
``DRAM``. Tensor relevance: A~{M,K}, B~{K,N}, C~{M,N}.

Access-count model (written for this project; the same rules as Timeloop's uniform-shape
analysis, Parashar et al. ISPASS 2019, restricted to GEMM):

* tile of tensor T at level L = product over T's dims of all factors below L (for the GLB
  this includes the spatial factors).
* refetch(T, L) = product of the factors of the temporal loops above L, from the
  outermost down to the innermost loop that is relevant to T and has a factor > 1
  (irrelevant loops inside it reuse the tile: stationarity); 1 if there is none.
* RF: fills(T) = tile_RF(T) * refetch(T, RF) * PEs used; A, B reads = MACs;
  C updates = MACs and C reads = MACs (read-modify-write of the partial sum).
* spatial fan-out from the GLB is multicast: a GLB read feeds every PE that needs the same
  element, so GLB reads to the PEs = tile_RF(T) * refetch(T, RF) * prod of T's *relevant*
  spatial factors. Partial sums along a spatial reduction (K) are reduced in the array, so
  GLB C updates = tile_RF(C) * refetch(C, RF) * prod of C's relevant spatial factors.
* GLB fills(T) = DRAM reads(T) = tile_GLB(T) * refetch(T, GLB).
* C going up: every eviction of a partial-sum tile is an update of the parent; every
  re-entry (all but the first visit of each of the M*N outputs) is a parent read:
  parent C reads = max(0, child writebacks - M*N).
* bypass: a tensor bypassing the GLB moves directly between DRAM and the PEs; its DRAM
  traffic then uses the RF-level refetch over the DRAM *and* GLB loops.

Latency: ``batch * prod(temporal factors)`` compute cycles (one MAC per PE per cycle) and
``DRAM bytes / bandwidth``; latency is the max of the two (double buffering).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

__all__ = [
    "DIMS", "TENSORS", "LEVELS", "SLOTS", "SROW", "SCOL", "RF", "GLB", "DRAM",
    "RELEVANT", "DATAFLOW_CONSTRAINTS", "Shape", "ArchParams", "Mapping", "AccessCounts",
    "Cost", "analyse", "cost", "feasible", "tile_shape", "iterate", "refetch",
    "ACTIONS", "make", "loops_above",
]

DIMS = ("M", "N", "K")
TENSORS = ("A", "B", "C")
LEVELS = ("RF", "GLB", "DRAM")          # storage levels, inner to outer
ACTIONS = ("reads", "fills", "updates")
SROW, SCOL, RF, GLB, DRAM = range(5)
SLOTS = ("SROW", "SCOL", "RF", "GLB", "DRAM")
#: RELEVANT[t][d] is 1 when tensor t is indexed by dim d.
RELEVANT = ((1, 0, 1), (0, 1, 1), (1, 1, 0))

#: Named dataflows as constraints: which dims may be split onto rows / cols, and which dims
#: may iterate in the RF loop (the stationary tensor is the one indexed by none of them).
#:   ws: rows K, cols N, RF iterates M only  -> B (weights) stationary in the PE
#:   os: rows M, cols N, RF iterates K only  -> C (outputs) stationary
#:   is: rows K, cols M, RF iterates N only  -> A (inputs) stationary
#:   rs: (GEMM view of Eyeriss' row stationary) rows K (filter rows / channels), cols M or N
#:       (output rows); the RF may iterate every dim, so a row of A, B and C all stay local.
#:   free: no constraint.
DATAFLOW_CONSTRAINTS: dict[str, tuple[frozenset[int], frozenset[int], frozenset[int]]] = {
    "ws": (frozenset({2}), frozenset({1}), frozenset({0})),
    "os": (frozenset({0}), frozenset({1}), frozenset({2})),
    "is": (frozenset({2}), frozenset({0}), frozenset({1})),
    "rs": (frozenset({2}), frozenset({0, 1}), frozenset({0, 1, 2})),
    "free": (frozenset({0, 1, 2}), frozenset({0, 1, 2}), frozenset({0, 1, 2})),
}


@dataclass(frozen=True)
class Shape:
    """A GEMM problem: ``batch`` independent ``C[M,N] += A[M,K] B[K,N]``."""

    m: int
    n: int
    k: int
    batch: int = 1

    @property
    def dims(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)

    @property
    def macs(self) -> int:
        return self.batch * self.m * self.n * self.k

    @classmethod
    def of(cls, op: object) -> Shape:
        """Shape of a ``Gemm`` or ``Conv2d`` (via ``as_gemm``)."""
        # duck-typed (dataflow/ does not import workloads/): anything with m, n, k
        g: Any = op.as_gemm() if hasattr(op, "as_gemm") else op
        return cls(int(g.m), int(g.n), int(g.k), int(getattr(g, "batch", 1)))


@dataclass(frozen=True)
class ArchParams:
    """What the analysis needs to know about a spatial unit.

    Energies are per element access (pJ) except ``e_dram_pj_per_byte``; bytes are per
    element of A, B, partial sums (``psum_bytes``) and final outputs (``out_bytes``).
    """

    rows: int
    cols: int
    rf_bytes: float
    glb_bytes: float
    dram_bytes_per_cycle: float
    a_bytes: float = 1.0
    b_bytes: float = 1.0
    psum_bytes: float = 4.0
    out_bytes: float = 1.0
    e_mac_pj: float = 1.0
    e_rf_pj: float = 1.0
    e_glb_pj: float = 6.0
    e_dram_pj_per_byte: float = 100.0


@dataclass(frozen=True)
class Mapping:
    """One loop-nest mapping.

    Attributes:
        factors: ``factors[slot][dim]`` for slots SROW, SCOL, RF, GLB, DRAM and dims M, N, K.
        order: loop order, outermost first, of the GLB and DRAM temporal loops
            (``order[0]`` = GLB, ``order[1]`` = DRAM), each a permutation of (0, 1, 2).
        bypass_glb: tensors (by letter) that bypass the GLB.
        dataflow: the named dataflow this mapping satisfies (``ws``, ``os``, ``is``, ``rs``,
            ``free``); units read it through ``.dataflow``.
    """

    factors: tuple[tuple[int, int, int], ...]
    order: tuple[tuple[int, int, int], tuple[int, int, int]] = ((0, 1, 2), (0, 1, 2))
    bypass_glb: frozenset[str] = field(default_factory=frozenset)
    dataflow: str = "free"

    def factor(self, slot: int, dim: int) -> int:
        return self.factors[slot][dim]

    @property
    def spatial_rows(self) -> int:
        return math.prod(self.factors[SROW])

    @property
    def spatial_cols(self) -> int:
        return math.prod(self.factors[SCOL])

    @property
    def pes_used(self) -> int:
        return self.spatial_rows * self.spatial_cols

    def describe(self) -> str:
        f = self.factors
        def part(slot: int) -> str:
            return "".join(f"{DIMS[d]}{f[slot][d]}" for d in range(3) if f[slot][d] > 1) or "-"
        o = lambda lv: "".join(DIMS[d] for d in self.order[lv])  # noqa: E731
        byp = f" bypass={''.join(sorted(self.bypass_glb))}" if self.bypass_glb else ""
        return (f"{self.dataflow} DRAM[{o(1)}:{part(DRAM)}] GLB[{o(0)}:{part(GLB)}] "
                f"rows[{part(SROW)}] cols[{part(SCOL)}] RF[{part(RF)}]{byp}")


@dataclass(frozen=True)
class AccessCounts:
    """Per tensor (A, B, C) and storage level (RF, GLB, DRAM): reads, fills, updates.

    ``counts[(tensor, level, action)]`` in elements, for the whole op (all batches).
    ``writes(t, l)`` = fills + updates.
    """

    counts: dict[tuple[str, str, str], float]
    macs: int

    def get(self, tensor: str, level: str, action: str) -> float:
        return self.counts[(tensor, level, action)]

    def writes(self, tensor: str, level: str) -> float:
        return self.get(tensor, level, "fills") + self.get(tensor, level, "updates")

    def level_total(self, level: str) -> float:
        return sum(v for (t, lv, a), v in self.counts.items() if lv == level)


@dataclass(frozen=True)
class Cost:
    cycles: float
    compute_cycles: float
    dram_cycles: float
    energy_pj: float
    dram_bytes: float
    utilization: float


def _check_shape(m: Mapping, shape: Shape) -> list[str]:
    out = []
    for d in range(3):
        p = math.prod(m.factors[s][d] for s in range(5))
        if p != shape.dims[d]:
            out.append(f"factors of {DIMS[d]} multiply to {p}, not {shape.dims[d]}")
    return out


def loops_above(m: Mapping, level: int) -> list[tuple[int, int]]:
    """Temporal loops above storage ``level`` (RF or GLB) as (dim, factor), outermost first."""
    loops = [(d, m.factors[DRAM][d]) for d in m.order[1]]
    if level == RF:
        loops += [(d, m.factors[GLB][d]) for d in m.order[0]]
    return loops


def refetch(m: Mapping, tensor: int, level: int) -> int:
    """How many times the level's tile of ``tensor`` is (re)loaded (see module docstring)."""
    loops = loops_above(m, level)
    rel = RELEVANT[tensor]
    last = -1
    for i, (d, f) in enumerate(loops):
        if rel[d] and f > 1:
            last = i
    return math.prod(f for _, f in loops[: last + 1])


def tile_shape(m: Mapping, level: str) -> tuple[int, int, int]:
    """(M, N, K) extent of the tile held at ``level``: RF (per PE), GLB, DRAM (whole op)."""
    below = {"RF": (RF,), "GLB": (RF, SROW, SCOL, GLB), "DRAM": (RF, SROW, SCOL, GLB, DRAM)}
    m_, n_, k_ = (math.prod(m.factors[s][d] for s in below[level]) for d in range(3))
    return m_, n_, k_


def _tensor_tile(tile: tuple[int, int, int], t: int) -> int:
    return math.prod(tile[d] for d in range(3) if RELEVANT[t][d])


def analyse(m: Mapping, shape: Shape) -> AccessCounts:
    """Access counts of ``m`` on ``shape`` (reference scalar implementation).

    Raises nothing for infeasible mappings (use :func:`feasible` first); factors must
    multiply to the dims (else ValueError).
    """
    bad = _check_shape(m, shape)
    if bad:
        raise ValueError("; ".join(bad))
    c: dict[tuple[str, str, str], float] = {
        (t, lv, a): 0.0 for t in TENSORS for lv in LEVELS for a in ACTIONS}
    macs1 = shape.m * shape.n * shape.k
    pes = m.pes_used
    rf_tile, glb_tile = tile_shape(m, "RF"), tile_shape(m, "GLB")
    out_elems = shape.m * shape.n
    for t, name in enumerate(TENSORS):
        spatial_rel = math.prod(m.factors[s][d] for s in (SROW, SCOL) for d in range(3)
                                if RELEVANT[t][d])
        rf_t = _tensor_tile(rf_tile, t)
        glb_t = _tensor_tile(glb_tile, t)
        r_rf = refetch(m, t, RF)
        r_glb = refetch(m, t, GLB)
        bypass = name in m.bypass_glb
        to_pes = rf_t * r_rf * spatial_rel           # parent->PE transfers (multicast once)
        parent = "DRAM" if bypass else "GLB"
        if name in ("A", "B"):
            c[(name, "RF", "fills")] = rf_t * r_rf * pes
            c[(name, "RF", "reads")] = macs1
            c[(name, parent, "reads")] += to_pes
            if not bypass:
                c[(name, "GLB", "fills")] = glb_t * r_glb
                c[(name, "DRAM", "reads")] += glb_t * r_glb
        else:
            c[("C", "RF", "updates")] = macs1
            c[("C", "RF", "reads")] = macs1
            back = to_pes                           # psum tiles leaving the PEs (reduced)
            reenter = max(0, back - out_elems)
            c[("C", "RF", "fills")] = reenter    # a returning psum goes to one PE
            c[("C", parent, "updates")] += back
            c[("C", parent, "reads")] += reenter
            if not bypass:
                up = glb_t * r_glb
                c[("C", "DRAM", "updates")] += up
                c[("C", "DRAM", "reads")] += max(0, up - out_elems)
                c[("C", "GLB", "fills")] = max(0, up - out_elems)
                c[("C", "GLB", "reads")] += up
    if shape.batch != 1:
        c = {k: v * shape.batch for k, v in c.items()}
    return AccessCounts(c, shape.macs)


def cost(m: Mapping, shape: Shape, p: ArchParams, counts: AccessCounts | None = None) -> Cost:
    """Latency (cycles), energy (pJ) and DRAM bytes of ``m`` (scalar reference)."""
    ac = counts or analyse(m, shape)
    g = ac.get
    compute = shape.batch * math.prod(m.factors[s][d] for s in (RF, GLB, DRAM) for d in range(3))
    out_final = shape.batch * shape.m * shape.n
    dram_bytes = (g("A", "DRAM", "reads") * p.a_bytes + g("B", "DRAM", "reads") * p.b_bytes
                  + g("C", "DRAM", "reads") * p.psum_bytes
                  + (g("C", "DRAM", "updates") - out_final) * p.psum_bytes
                  + out_final * p.out_bytes)
    dram_cycles = dram_bytes / p.dram_bytes_per_cycle
    rf = sum(g(t, "RF", a) for t in TENSORS for a in ACTIONS)
    glb = sum(g(t, "GLB", a) for t in TENSORS for a in ACTIONS)
    energy = (shape.macs * p.e_mac_pj + rf * p.e_rf_pj + glb * p.e_glb_pj
              + dram_bytes * p.e_dram_pj_per_byte)
    cycles = max(compute, dram_cycles)
    util = shape.macs / (cycles * p.rows * p.cols) if cycles else 0.0
    return Cost(cycles, compute, dram_cycles, energy, dram_bytes, util)


def feasible(m: Mapping, shape: Shape, p: ArchParams) -> list[str]:
    """Reasons ``m`` cannot run (empty list = feasible). Never raises."""
    reasons: list[str] = []
    try:
        if len(m.factors) != 5 or any(len(r) != 3 for r in m.factors):
            return ["factors must be 5 slots x 3 dims"]
        if any(int(f) < 1 for r in m.factors for f in r):
            return ["factors must be positive integers"]
        for lv in m.order:
            if sorted(lv) != [0, 1, 2]:
                reasons.append(f"loop order {lv} is not a permutation of (M, N, K)")
        reasons += _check_shape(m, shape)
        if m.spatial_rows > p.rows:
            reasons.append(f"spatial fan-out along rows {m.spatial_rows} > {p.rows} rows")
        if m.spatial_cols > p.cols:
            reasons.append(f"spatial fan-out along cols {m.spatial_cols} > {p.cols} cols")
        sizes = (p.a_bytes, p.b_bytes, p.psum_bytes)
        rf_tile, glb_tile = tile_shape(m, "RF"), tile_shape(m, "GLB")
        rf_need = sum(_tensor_tile(rf_tile, t) * sizes[t] for t in range(3))
        if rf_need > p.rf_bytes:
            reasons.append(f"RF tiles need {rf_need:g} B > {p.rf_bytes:g} B per PE")
        glb_need = sum(_tensor_tile(glb_tile, t) * sizes[t] for t in range(3)
                       if TENSORS[t] not in m.bypass_glb)
        if glb_need > p.glb_bytes:
            reasons.append(f"GLB tiles need {glb_need:g} B > {p.glb_bytes:g} B")
        bad_bp = set(m.bypass_glb) - set(TENSORS)
        if bad_bp:
            reasons.append(f"unknown tensors in bypass: {sorted(bad_bp)}")
        cons = DATAFLOW_CONSTRAINTS.get(m.dataflow)
        if cons is None:
            reasons.append(f"unknown dataflow {m.dataflow!r}")
        else:
            for slot, allowed, what in ((SROW, cons[0], "rows"), (SCOL, cons[1], "cols"),
                                        (RF, cons[2], "RF loop")):
                for d in range(3):
                    if m.factors[slot][d] > 1 and d not in allowed:
                        reasons.append(f"dataflow {m.dataflow} does not allow {DIMS[d]} on "
                                       f"the {what}")
    except Exception as e:  # noqa: BLE001 - feasibility never raises
        reasons.append(f"malformed mapping: {e}")
    return reasons


def iterate(m: Mapping) -> Iterator[tuple[int, int, int]]:
    """Every (m, n, k) point the loop nest visits, in nest order (for tests; small ops)."""
    f = m.factors
    dram_o, glb_o = m.order[1], m.order[0]
    rng = lambda slot, d: range(f[slot][d])  # noqa: E731
    for dram_i in itertools.product(*(rng(DRAM, d) for d in dram_o)):
        di = dict(zip(dram_o, dram_i))
        for glb_i in itertools.product(*(rng(GLB, d) for d in glb_o)):
            gi = dict(zip(glb_o, glb_i))
            for sr in itertools.product(*(rng(SROW, d) for d in range(3))):
                for sc in itertools.product(*(rng(SCOL, d) for d in range(3))):
                    for ri in itertools.product(*(rng(RF, d) for d in range(3))):
                        pt = []
                        for d in range(3):
                            idx = di[d]
                            idx = idx * f[GLB][d] + gi[d]
                            idx = idx * f[SCOL][d] + sc[d]
                            idx = idx * f[SROW][d] + sr[d]
                            idx = idx * f[RF][d] + ri[d]
                            pt.append(idx)
                        yield pt[0], pt[1], pt[2]


def make(shape: Shape | Sequence[int], *, srow: Sequence[int] = (1, 1, 1),
         scol: Sequence[int] = (1, 1, 1), rf: Sequence[int] = (1, 1, 1),
         glb: Sequence[int] = (1, 1, 1), order_glb: Sequence[int] = (0, 1, 2),
         order_dram: Sequence[int] = (0, 1, 2), bypass: str = "",
         dataflow: str = "free") -> Mapping:
    """Build a Mapping; DRAM factors are whatever remains of each dim (must divide)."""
    dims = shape.dims if isinstance(shape, Shape) else tuple(shape)
    dram = []
    for d in range(3):
        inner = srow[d] * scol[d] * rf[d] * glb[d]
        if dims[d] % inner:
            raise ValueError(f"{DIMS[d]}: {inner} does not divide {dims[d]}")
        dram.append(dims[d] // inner)
    return Mapping((_triple(srow), _triple(scol), _triple(rf), _triple(glb), _triple(dram)),
                   (_triple(order_glb), _triple(order_dram)), frozenset(bypass), dataflow)


def _triple(values: Sequence[int]) -> tuple[int, int, int]:
    """``tuple(values)``, one entry per dim; a wrong length is kept for :func:`feasible` to
    report ("factors must be 5 slots x 3 dims", "not a permutation"), not raised here."""
    return cast("tuple[int, int, int]", tuple(values))
