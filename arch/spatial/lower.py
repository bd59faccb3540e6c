"""Cycle-level lowering of the spatial array (``arch.spatial``) to ``sim.TaskGraph``.

The analytical model of ``arch.spatial`` (SCALE-Sim's fold model + the GLB tiling rule +
a bandwidth roofline) is expressed here as an explicit schedule; overlap and stalls then
emerge in the event engine instead of being assumed.

GEMMs (convolutions as their im2col GEMM, groups as batch). The folds run in the loop
order of ``gemm_traffic`` (``for batch: for c_fold: for r_fold``). For each fold the same
tiling rule gives the off-chip traffic, split into

* ``stationary`` bytes, needed before the fold starts (WS: the weight tile
  ``B[k-tile, n-tile]``; IS: the input tile ``A[k-tile, m-tile]``; OS: none);
* ``stream`` bytes, consumed while the fold runs (WS: ``A[:, k-tile]`` when not resident,
  plus spilled partial sums read back; OS: ``A[m-tile, :]`` / ``B[:, n-tile]`` when not
  resident; IS: ``B[k-tile, :]`` and spilled partial sums);
* ``write`` bytes (partial-sum spills and final outputs).

Resources (graph clock = array clock x ``RESOLUTION`` ticks): ``array`` (the PE array, one
fold at a time), ``dram`` (off-chip memory: a bandwidth server at the sustained bandwidth,
or the command-level DRAM of ``sim.dram`` when the spec says ``model: dram``).
A fold group (see aggregation) is cut into ``CHUNKS`` equal pieces of its temporal loop;
per group ``G`` and global chunk index ``g``:

* ``S_G`` stationary read, after the compute of group ``G-2`` (double-buffered
  stationary tile);
* ``R_g`` stream read, after the same chunk of group ``G-2``
  (``C_{g-2*CHUNKS}``: the GLB stream buffer is double-buffered per group, so group
  ``G+1``'s loads overlap group ``G``'s compute);
* ``C_g`` compute, ``fold cycles / CHUNKS`` on ``array``, after ``R_g``, ``C_{g-1}`` and,
  for the first chunk of a group, ``S_G``;
* ``W_g`` write after ``C_g`` (OS: outputs only leave with the last chunk of a fold).

So the first stationary tile and the first stream chunk are not overlapped (compute starts
when they have arrived); afterwards the next group's loads overlap the current group's
compute, bounded by two buffers. Transfers of 0 bytes become zero-time joins (they keep
the dependency but do not queue behind other transfers).
A compute-bound GEMM takes ``sum(fold cycles)`` plus that prologue and the last write; a
memory-bound one ``total bytes / bandwidth`` plus the last chunk's compute and write.

Aggregation rule (keeps ResNet-18 and LLM layers small): a fold that moves no off-chip
bytes (every operand resident from earlier folds) is merged into the group before it
(identical back-to-back compute with nothing in between: exact). If more than
``MAX_GROUPS`` groups remain, consecutive groups are merged evenly; then the stationary
bytes of all but a group's first fold become stream bytes of that group (they still
overlap its compute), so totals are exact and only the pipeline granularity is coarser.

Vector ops (softmax, norms, element-wise, embedding gathers) are ``VECTOR_PIECES``
pipelined read -> vector unit -> write pieces on ``vector`` and ``dram``.

Loop-nest mappings from the mapper (``mapping.factors``) are lowered the same way as a
vector op: their analysed compute cycles on ``array`` and DRAM bytes, in pipelined pieces.

Action counts: the Estimate's totals are attached to tasks (compute-side actions on the
compute chunks in proportion to their useful MACs, DRAM reads/writes on the memory tasks
by bytes), so the simulator's action totals equal the Estimate's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from archsim.arch.base import Estimate, SimInput, ceil_div
from archsim.arch.spatial.folds import fold_cycles
from archsim.workloads.errors import ConfigError, MappingError, Problem, WorkloadError
from archsim.workloads.ops import Conv2d, Gemm, Op

if TYPE_CHECKING:
    from archsim.arch.spatial.unit import SpatialArray

__all__ = ["lower_op", "fold_table", "FoldTable", "CHUNKS", "MAX_GROUPS", "RESOLUTION",
           "VECTOR_PIECES"]

#: Chunks per fold group (temporal pieces; double buffering works at this granularity).
CHUNKS = 16
#: Upper bound on fold groups of one op (each group is 1 + 3 * CHUNKS tasks).
MAX_GROUPS = 2048
#: Most folds of one GEMM the lowering tabulates (~20 float64/int64 arrays of this length,
#: ~160 bytes per fold: 4 M folds ~ 0.7 GB at peak). Larger ops are refused with a message
#: (the analytical estimate has no such limit).
MAX_FOLDS = 4_000_000
#: Graph ticks per array cycle: the engine rounds each bandwidth transfer up to whole ticks,
#: so at 1 tick/cycle thousands of short transfers would add up; 16 keeps the rounding of a
#: memory-bound op under 1/16 cycle per task. ``Unit.simulate`` converts back.
RESOLUTION = 16
#: Pipelined pieces of a vector op / a loop-nest mapping.
VECTOR_PIECES = 16

# address regions of the operands (bytes) for the command-level DRAM model
_REGION = 1 << 34


@dataclass
class FoldTable:
    """Per-fold schedule data of one GEMM (arrays of length F = batch x folds, loop order).

    Attributes:
        cycles: fold cycles (SCALE-Sim ``2*rows + cols + T - 2``), int64.
        stationary, stream, write: off-chip bytes (float64) as in the module docstring.
        macs: useful MACs of the fold (for apportioning action counts).
        write_at_end: outputs leave with the last chunk (OS) instead of per chunk.
    """

    cycles: np.ndarray
    stationary: np.ndarray
    stream: np.ndarray
    write: np.ndarray
    macs: np.ndarray
    write_at_end: bool


def _tiles(total: int, size: int) -> np.ndarray:
    """Sizes of the ``ceil(total/size)`` tiles of ``total`` (the last one ragged)."""
    n = ceil_div(total, size)
    t = np.full(n, size, np.int64)
    t[-1] = total - size * (n - 1)
    return t


def fold_table(dataflow: str, g: Gemm, rows: int, cols: int, part_elems: float,
               a_b: float, b_b: float, acc_b: float, out_b: float,
               b_scale: float = 1.0) -> FoldTable:
    """Fold-by-fold traffic of ``g`` under the GLB rule of ``arch.spatial.gemm_traffic``.

    Args:
        dataflow: ``ws``, ``os`` or ``is``.
        g: the GEMM (``batch`` independent products).
        rows, cols: array size. part_elems: GLB part per operand (elements).
        a_b, b_b, acc_b, out_b: bytes per element of A, B, partial sums and outputs.
        b_scale: multiplies B bytes (weight sparsity x GQA sharing).

    Summed over folds, the bytes equal ``gemm_traffic``'s element counts times the element
    sizes (the Estimate's DRAM bytes before its compulsory-traffic floor).
    """

    m, n, k = g.m, g.n, g.k
    per, _folds, _t = fold_cycles(dataflow, m, n, k, rows, cols)
    if dataflow == "ws":        # r: k-tiles (inner), c: n-tiles (outer); stream A[:, k-tile]
        tr, tc = _tiles(k, rows), _tiles(n, cols)
    elif dataflow == "os":      # r: m-tiles, c: n-tiles
        tr, tc = _tiles(m, rows), _tiles(n, cols)
    else:                       # is: r: k-tiles, c: m-tiles
        tr, tc = _tiles(k, rows), _tiles(m, cols)
    fr, fc = tr.size, tc.size
    if fr * fc > MAX_FOLDS:     # refuse before ~20 arrays of fr*fc float64 are allocated
        raise WorkloadError(Problem(
            f"the cycle-level lowering of {g.name} ({m}x{n}x{k}) on a {rows}x{cols} array has "
            f"{fr * fc:,} folds (~{fr * fc * 160 / 1e9:,.1f} GB to build); expected at most "
            f"{MAX_FOLDS:,}: use --fidelity analytical or a smaller shape", "--fidelity"))
    r = np.tile(tr, fc).astype(np.float64)        # loop order: c outer, r inner
    c = np.repeat(tc, fr).astype(np.float64)
    i = np.tile(np.arange(fr), fc)
    j = np.repeat(np.arange(fc), fr)
    first_c = (j == 0).astype(np.float64)
    first_r = (i == 0).astype(np.float64)
    last_r = (i == fr - 1).astype(np.float64)
    zero = np.zeros(fr * fc)
    if dataflow == "ws":
        a_fits = m * k <= part_elems
        spill = (m * min(n, cols) > part_elems) and fr > 1
        a = m * r * a_b * (first_c if a_fits else 1.0)
        b = r * c * b_b * b_scale
        stationary = b
        stream = a + (m * c * acc_b * (1 - first_r) if spill else zero)
        write = (m * c * acc_b * (1 - last_r) if spill else zero) + m * c * out_b * last_r
        macs = r * c * m
    elif dataflow == "os":
        a_fits = min(m, rows) * k <= part_elems
        b_fits = k * n <= part_elems
        a = r * k * a_b * (first_c if a_fits else 1.0)
        b = k * c * b_b * b_scale * (first_r if b_fits else 1.0)
        stationary = zero
        stream = a + b
        write = r * c * out_b
        macs = r * c * k
    else:
        b_fits = k * n <= part_elems
        spill = (min(m, cols) * n > part_elems) and fr > 1
        a = r * c * a_b
        b = r * n * b_b * b_scale * (first_c if b_fits else 1.0)
        stationary = a
        stream = b + (c * n * acc_b * (1 - first_r) if spill else zero)
        write = (c * n * acc_b * (1 - last_r) if spill else zero) + c * n * out_b * last_r
        macs = r * c * n
    bt = g.batch
    rep = (lambda x: np.tile(x, bt))  # noqa: E731 - batch entries run one after another
    return FoldTable(np.full(fr * fc * bt, per // (fr * fc), np.int64), rep(stationary),
                     rep(stream), rep(write), rep(macs), dataflow == "os")


def _int_split(total: np.ndarray | float, parts: np.ndarray) -> np.ndarray:
    """Integers proportional to ``parts`` summing to ``round(total)`` (cumulative rounding)."""
    parts = np.asarray(parts, np.float64)
    s = parts.sum()
    if s <= 0:
        return np.zeros(parts.size, np.int64)
    cum = np.floor(np.cumsum(parts) * (float(total) / s) + 0.5).astype(np.int64)
    return np.diff(np.concatenate(([0], cum)))


def _groups(t: FoldTable, max_groups: int) -> np.ndarray:
    """Group id of every fold (aggregation rule of the module docstring)."""
    moves = (t.stationary + t.stream + t.write) > 0
    moves[0] = True
    gid = np.cumsum(moves) - 1
    n = int(gid[-1]) + 1
    if n > max_groups:
        gid = (gid * max_groups) // n
    return gid


class _Cols:
    """Task columns appended as numpy blocks, assembled into a TaskGraph at the end."""

    def __init__(self) -> None:
        self.blocks: list[dict[str, Any]] = []
        self.n = 0

    def add(self, resource: np.ndarray | int, duration: np.ndarray | int,
            kind: np.ndarray | int,
            mem_bytes: np.ndarray | int, mem_addr: np.ndarray | int,
            deps: list[np.ndarray], acts: list[tuple[int, int, np.ndarray]], size: int,
            ) -> np.ndarray:
        """Append ``size`` tasks; ``deps`` are arrays of predecessor ids (-1 = none)."""
        ids = np.arange(self.n, self.n + size, dtype=np.int64)
        if np.any(np.asarray(kind) != 0):
            # a transfer of 0 bytes is a zero-time join: it must not queue behind transfers
            mb = np.broadcast_to(np.asarray(mem_bytes, np.int64), (size,))
            none = mb == 0
            resource = np.where(none, -1, resource)
            kind = np.where(none, 0, kind)

        def col(v: np.ndarray | int, dt: type) -> np.ndarray:
            a: np.ndarray = np.asarray(v, dt)
            return np.broadcast_to(a, (size,)).astype(dt) if a.ndim == 0 else a.astype(dt)

        self.blocks.append({
            "resource": col(resource, np.int32), "duration": col(duration, np.int64),
            "kind": col(kind, np.int8), "mem_bytes": col(mem_bytes, np.int64),
            "mem_addr": col(mem_addr, np.int64),
            "deps": np.stack([col(d, np.int64) for d in deps], 1) if deps
            else np.zeros((size, 0), np.int64),
            "acts": acts,
        })
        self.n += size
        return ids

    def build(self, resources: list[tuple[str, int, int, float, float, int]],
              components: list[str], actions: list[str], op_name: str,
              clock_hz: float) -> Any:
        # deferred: loads numba (only cycle-level runs and nest searches need it)
        from archsim.sim.taskgraph import TaskGraph

        B = self.blocks
        cat = (lambda k: np.concatenate([b[k] for b in B]))  # noqa: E731
        # dependencies: per block a (size, d) matrix with -1 for "none"
        cnt = np.concatenate([(b["deps"] >= 0).sum(1) for b in B]).astype(np.int64)
        dep_ptr = np.zeros(self.n + 1, np.int64)
        np.cumsum(cnt, out=dep_ptr[1:])
        dep_idx = np.concatenate([b["deps"][b["deps"] >= 0] for b in B]).astype(np.int32)
        # actions: per block (component, action, counts[size]) triples, count 0 dropped
        n_act = np.zeros(self.n, np.int64)
        trip: list[tuple[np.ndarray, int, int, np.ndarray]] = []
        off = 0
        for b in B:
            size = b["resource"].size
            for comp, act, cnts in b["acts"]:
                nz = np.flatnonzero(cnts != 0)
                n_act[off + nz] += 1
                trip.append((off + nz, comp, act, cnts[nz]))
            off += size
        act_ptr = np.zeros(self.n + 1, np.int64)
        np.cumsum(n_act, out=act_ptr[1:])
        tot = int(act_ptr[-1])
        act_c = np.zeros(tot, np.int32)
        act_a = np.zeros(tot, np.int32)
        act_n = np.zeros(tot, np.float64)
        fill = act_ptr[:-1].copy()
        for tasks, comp, act, cnts in trip:
            pos = fill[tasks]
            act_c[pos] = comp
            act_a[pos] = act
            act_n[pos] = cnts
            fill[tasks] += 1
        tg = TaskGraph(
            resource=cat("resource"), duration=cat("duration"), kind=cat("kind"),
            mem_bytes=cat("mem_bytes"), mem_addr=cat("mem_addr"),
            op_index=np.zeros(self.n, np.int32), priority=np.zeros(self.n, np.int32),
            dep_ptr=dep_ptr, dep_idx=dep_idx,
            resource_names=tuple(r[0] for r in resources),
            resource_capacity=np.asarray([r[1] for r in resources], np.int32),
            resource_model=np.asarray([r[2] for r in resources], np.int8),
            bytes_per_cycle=np.asarray([r[3] for r in resources], np.float64),
            efficiency=np.asarray([r[4] for r in resources], np.float64),
            dram_index=np.asarray([r[5] for r in resources], np.int32),
            act_ptr=act_ptr, act_component=act_c, act_action=act_a, act_count=act_n,
            component_names=tuple(components), action_names=tuple(actions),
            op_names=(op_name,), clock_hz=clock_hz)
        tg.validate()
        return tg


def _shift(ids: np.ndarray, by: int) -> np.ndarray:
    """``ids[x - by]`` for x >= by, else -1 (no predecessor)."""
    out = np.full(ids.size, -1, np.int64)
    if by < ids.size:
        out[by:] = ids[:ids.size - by]
    return out


class _Lowering:
    """Shared state of one op's lowering: resources, components and action ids."""

    def __init__(self, unit: SpatialArray, op: Op) -> None:
        # deferred: loads numba (only cycle-level runs and nest searches need it)
        from archsim.sim.taskgraph import (
            MODEL_BANDWIDTH,
            MODEL_DRAM,
            MODEL_SERVER,
        )

        self.unit = unit
        self.op = op
        self.q = RESOLUTION
        mem = unit.spec.memory
        self.dram_configs: tuple[Any, ...] = ()
        self.resources: list[tuple[str, int, int, float, float, int]] = [
            ("array", 1, MODEL_SERVER, 0.0, 1.0, -1),
            ("vector", 1, MODEL_SERVER, 0.0, 1.0, -1)]
        if mem.model == "dram":
            # deferred: loads numba (only cycle-level runs and nest searches need it)
            from archsim.sim import (
                DramConfigError,
                dram_preset,
            )

            try:
                spec = dram_preset(mem.preset)
            except DramConfigError as exc:   # unknown preset name
                raise ConfigError(Problem(str(exc), f"units.{unit.name}.memory.preset")) \
                    from None
            self.dram_configs = (spec,)
            self.resources.append(("dram", 8, MODEL_DRAM, 0.0, 1.0, 0))
        else:
            bpc = mem.bytes_per_s / unit.clock_hz / self.q
            self.resources.append(("dram", 1, MODEL_BANDWIDTH, bpc, mem.efficiency, -1))
        self.ARRAY, self.VECTOR, self.DRAM = 0, 1, 2
        self.components: list[str] = []
        self.actions: list[str] = []

    def key(self, comp: str, action: str) -> tuple[int, int]:
        if comp not in self.components:
            self.components.append(comp)
        if action not in self.actions:
            self.actions.append(action)
        return self.components.index(comp), self.actions.index(action)

    def acts(self, est: Estimate, keys: list[tuple[str, str]], weights: np.ndarray,
             share: float = 1.0) -> list[tuple[int, int, np.ndarray]]:
        """Split ``share`` of the Estimate's totals of ``keys`` over tasks in proportion to
        ``weights`` (``share`` < 1 when several task blocks carry the same action)."""
        w = np.asarray(weights, np.float64)
        s = w.sum()
        out = []
        for k in keys:
            tot = float(est.actions.get(k, 0.0)) * share
            if tot and s > 0:
                out.append((*self.key(*k), w * (tot / s)))
        return out

    def build(self, cols: _Cols) -> SimInput:
        tg = cols.build(self.resources, self.components, self.actions, self.op.name,
                        self.unit.clock_hz * self.q)
        return SimInput(tg, self.dram_configs)


def lower_op(unit: SpatialArray, op: Op, mapping: Any = None) -> SimInput:
    """SimInput of ``op`` on ``unit`` (see the module docstring); clock = unit clock x
    ``RESOLUTION``. Raises MappingError for an op the unit cannot run."""

    m = unit.parse_mapping(mapping)
    est = unit.estimate(op, m)
    if not est.feasible:
        raise MappingError(Problem(est.reason, op.name))
    L = _Lowering(unit, op)
    if m.nest is not None or m.einsum is not None:
        cyc = float(est.details.get("compute_cycles", est.cycles))
        return _pipeline(L, est, L.ARRAY, cyc)
    if isinstance(op, (Gemm, Conv2d)):
        g = op.as_gemm() if isinstance(op, Conv2d) else op
        return _gemm(L, est, g, est.dataflow)
    return _pipeline(L, est, L.VECTOR, op.vector_ops() / unit.lanes)


def _pipeline(L: _Lowering, est: Estimate, res: int, compute_cycles: float) -> Any:
    """``VECTOR_PIECES`` read -> compute -> write pieces (reads and computes in order)."""
    # deferred: loads numba (only cycle-level runs and nest searches need it)
    from archsim.sim.taskgraph import (
        KIND_COMPUTE,
        KIND_READ,
        KIND_WRITE,
    )

    P = VECTOR_PIECES
    rd = _int_split(est.dram_read_bytes, np.ones(P))
    wr = _int_split(est.dram_write_bytes, np.ones(P))
    dur = _int_split(compute_cycles * L.q, np.ones(P))
    u = L.unit
    cols = _Cols()
    r_ids = np.arange(P, dtype=np.int64)          # reads 0..P-1, computes P..2P-1, writes
    c_ids = r_ids + P
    compute_keys = [k for k in est.actions if k[0] != u.cname("dram")]
    cols.add(L.DRAM, 0, KIND_READ, rd, np.cumsum(rd) - rd, [_shift(r_ids, 1)],
             L.acts(est, [(u.cname("dram"), "read")], rd), P)
    cols.add(res, dur, KIND_COMPUTE, 0, 0, [r_ids, _shift(c_ids, 1)],
             L.acts(est, compute_keys, np.ones(P)), P)
    cols.add(L.DRAM, 0, KIND_WRITE, wr, _REGION + np.cumsum(wr) - wr, [c_ids],
             L.acts(est, [(u.cname("dram"), "write")], wr), P)
    return L.build(cols)


def _gemm(L: _Lowering, est: Estimate, g: Gemm, df: str) -> Any:
    # deferred: loads numba (only cycle-level runs and nest searches need it)
    from archsim.sim.taskgraph import (
        KIND_COMPUTE,
        KIND_READ,
        KIND_WRITE,
    )

    u = L.unit
    s = u.spec
    a_b = g.a_format.bytes_per_element
    b_b = g.b_format.bytes_per_element
    acc_b = g.acc_format.bytes_per_element
    part = s.global_buffer_kib * 1024 / 3 / max(a_b, b_b, acc_b)
    out_b = L.op.output_bytes() / (g.batch * g.m * g.n)
    wfrac = g.w_sparsity.fraction if g.b_is_weight else 1.0
    b_scale = wfrac * (g.batch // g.b_shared) / g.batch
    t = fold_table(df, g, s.rows, s.cols, part, a_b, b_b, acc_b, out_b, b_scale)
    # Match the Estimate's totals exactly. Its reads are never below the compulsory input + weight bytes (e.g. a
    # strided 1x1 convolution reads its whole input tensor, more than its im2col A): the
    # extra bytes are input reads, added to the stream reads (stationary if none).
    raw_stat, raw_strm = float(t.stationary.sum()), float(t.stream.sum())
    extra = max(0.0, est.dram_read_bytes - raw_stat - raw_strm)
    if raw_strm > 0:
        t.stream = t.stream * ((raw_strm + extra) / raw_strm)
    elif raw_stat > 0:
        t.stationary = t.stationary * ((raw_stat + extra) / raw_stat)
    raw_read = float(t.stationary.sum() + t.stream.sum())
    scale_r = est.dram_read_bytes / raw_read if raw_read > 0 else 0.0
    raw_write = float(t.write.sum())
    scale_w = est.dram_write_bytes / raw_write if raw_write > 0 else 0.0
    gid = _groups(t, MAX_GROUPS)
    G = int(gid[-1]) + 1
    first = np.ones(gid.size, bool)
    first[1:] = gid[1:] != gid[:-1]
    cyc = np.bincount(gid, t.cycles.astype(np.float64), G)
    stat = np.bincount(gid, np.where(first, t.stationary, 0.0), G) * scale_r
    strm = np.bincount(gid, t.stream + np.where(first, 0.0, t.stationary), G) * scale_r
    wrt = np.bincount(gid, t.write, G) * scale_w
    macs = np.bincount(gid, t.macs, G)

    Q = CHUNKS
    N = G * Q
    q = L.q
    # per chunk: durations (ticks) and bytes with totals preserved by cumulative rounding
    dur = _int_split(cyc.sum() * q, np.repeat(cyc / Q, Q))
    st_b = _int_split(stat.sum(), stat)
    rd_b = _int_split(strm.sum(), np.repeat(strm / Q, Q))
    if t.write_at_end:
        wpart = np.zeros((G, Q))
        wpart[:, -1] = wrt
        wr_b = _int_split(wrt.sum(), wpart.ravel())
    else:
        wr_b = _int_split(wrt.sum(), np.repeat(wrt / Q, Q))
    # ids in program order: per group G a read block [S_G, R_{QG}, ..., R_{QG+Q-1}]
    # (G*(Q+1) reads), then the N compute chunks, then the N writes. Reads that become ready
    # in the same cycle are queued in this order (the engine readies by ascending id).
    Q1 = Q + 1
    C = G * Q1 + np.arange(N, dtype=np.int64)
    last_c_of_group = C[Q - 1::Q]
    rb = np.zeros((G, Q1), np.int64)
    rb[:, 0] = st_b
    rb[:, 1:] = rd_b.reshape(G, Q)
    addr = np.zeros((G, Q1), np.int64)
    addr[:, 0] = _REGION + np.cumsum(st_b) - st_b
    addr[:, 1:] = (np.cumsum(rd_b) - rd_b).reshape(G, Q)
    rdep = np.zeros((G, Q1), np.int64)
    rdep[:, 0] = _shift(last_c_of_group, 2)
    rdep[:, 1:] = _shift(C, 2 * Q).reshape(G, Q)
    S = np.arange(G, dtype=np.int64) * Q1
    R = (S[:, None] + 1 + np.arange(Q)[None, :]).ravel()
    dram_r = [(u.cname("dram"), "read")]
    dram_w = [(u.cname("dram"), "write")]
    compute_keys = [k for k in est.actions if k[0] != u.cname("dram")]
    cols = _Cols()
    cols.add(L.DRAM, 0, KIND_READ, rb.ravel(), addr.ravel(), [rdep.ravel()],
             L.acts(est, dram_r, rb.ravel()), G * Q1)
    chunk_first = np.zeros(N, bool)
    chunk_first[::Q] = True
    s_dep = np.where(chunk_first, np.repeat(S, Q), -1)
    cols.add(L.ARRAY, dur, KIND_COMPUTE, 0, 0, [R, _shift(C, 1), s_dep],
             L.acts(est, compute_keys, np.repeat(macs / Q, Q)), N)
    cols.add(L.DRAM, 0, KIND_WRITE, wr_b, 2 * _REGION + np.cumsum(wr_b) - wr_b, [C],
             L.acts(est, dram_w, wr_b), N)
    return L.build(cols)
