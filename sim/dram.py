"""Command-level DRAM model: spec, table resolution, low-level state and trace runs.

A :class:`DramSpec` names an organisation, a timing-constraint table (see
:mod:`sim.dram_presets`) and the JEDEC timing values. :func:`resolve` turns it once into
dense numpy arrays (:class:`sim.dram_kernel.DramInst`) that the Numba core reads.

Public entry points:

* :func:`dram_preset` - a validated spec from a named preset, with overrides.
* :func:`peak_bytes_per_s` - peak data bandwidth derived from the timing table.
* :func:`simulate_requests` - run a burst-request trace through the controller.
* :class:`DramState` - command-level state for a PIM model (earliest/issue).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from archsim.sim import dram_kernel as K
from archsim.sim.dram_presets import (
    COMMAND_SCOPE,
    COMMANDS,
    LEVELS,
    N_COMMANDS,
    PRESETS,
    REQUIRED_TIMINGS,
    TIMING_TABLES,
)
from archsim.sim.errors import DramConfigError

ADDRESS_FIELDS = ("ch", "ra", "bg", "ba", "ro", "co")
ROW_POLICIES = ("open", "closed")
_TOKEN = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*|\d+|[+-])")


def eval_latency(expr: str | int, timing: Mapping[str, int]) -> int:
    """Evaluate a latency expression (``"nCWL + nBL + nWR"``) in tCK.

    Args:
        expr: integer or sum/difference of timing names and integer literals.
        timing: timing values in tCK.

    Returns:
        The latency in tCK.

    Raises:
        DramConfigError: unknown name or malformed expression.
    """
    if isinstance(expr, (int, np.integer)):
        return int(expr)
    pos, total, sign, expect_term = 0, 0, 1, True
    text = expr.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise DramConfigError(f"latency {expr!r}: cannot parse at {text[pos:]!r}")
        tok = m.group(1)
        pos = m.end()
        if expect_term:
            if tok.isdigit():
                total += sign * int(tok)
            elif tok in timing:
                total += sign * int(timing[tok])
            else:
                raise DramConfigError(
                    f"latency {expr!r}: unknown timing {tok!r}; known: {sorted(timing)}")
            expect_term = False
        else:
            if tok not in "+-":
                raise DramConfigError(f"latency {expr!r}: expected + or -, got {tok!r}")
            sign = 1 if tok == "+" else -1
            expect_term = True
    if expect_term:
        raise DramConfigError(f"latency {expr!r}: expression is incomplete")
    return total


@dataclass(frozen=True)
class DramSpec:
    """Validated DRAM configuration (organisation, timing in tCK, controller policy).

    Attributes:
        name: preset or user name.
        channels, ranks, bankgroups, banks: organisation (banks per bank group).
        rows: rows per bank. columns: column addresses per row.
        burst_length: beats (column addresses) per burst.
        burst_bytes: bytes moved by one RD/WR burst on one channel.
        tck_ps: DRAM command clock period in picoseconds.
        timing: JEDEC timing names -> tCK (``nRCDRD``, ``nFAW``, ...).
        timing_table: key of :data:`sim.dram_presets.TIMING_TABLES`.
        extra_constraints: rows appended to the table (e.g. PIM latencies).
        latency_overrides: ``(preceding, following, tCK)`` triples that replace the
            latency of every table row between those two commands (a PIM device's
            MACAB -> MACAB interval is its processing unit's cycle, not nCCDL).
        address_mapping: fields MSB -> LSB joined by ``-`` from ch, ra, bg, ba, ro, co.
        row_policy: ``open`` (keep rows open) or ``closed`` (precharge when no hits queued).
        queue_depth: request-queue entries per channel.
        refresh: issue all-bank REF every nREFI taking nRFC.
    """

    name: str
    channels: int
    ranks: int
    bankgroups: int
    banks: int
    rows: int
    columns: int
    burst_length: int
    burst_bytes: int
    tck_ps: float
    timing: Mapping[str, int]
    timing_table: str = "jedec"
    extra_constraints: tuple = ()
    latency_overrides: tuple[tuple[str, str, int], ...] = ()
    address_mapping: str = "ro-ba-ra-co-bg-ch"
    row_policy: str = "open"
    queue_depth: int = 32
    refresh: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "timing", MappingProxyType(dict(self.timing)))
        errs: list[str] = []
        for f in ("channels", "ranks", "bankgroups", "banks", "rows", "columns",
                  "burst_length", "burst_bytes", "queue_depth"):
            v = getattr(self, f)
            if not isinstance(v, (int, np.integer)) or v < 1:
                errs.append(f"{f}: expected int >= 1, got {v!r}")
        if not self.tck_ps > 0:
            errs.append(f"tck_ps: expected > 0, got {self.tck_ps!r}")
        if not errs and self.columns % self.burst_length:
            errs.append(f"columns ({self.columns}) must be a multiple of burst_length "
                        f"({self.burst_length})")
        fields = self.address_mapping.split("-")
        if sorted(fields) != sorted(ADDRESS_FIELDS):
            errs.append(f"address_mapping {self.address_mapping!r}: expected each of "
                        f"{ADDRESS_FIELDS} once, MSB first, joined by '-'")
        if self.row_policy not in ROW_POLICIES:
            errs.append(f"row_policy: expected one of {ROW_POLICIES}, got {self.row_policy!r}")
        missing = [n for n in REQUIRED_TIMINGS if n not in self.timing]
        if missing:
            errs.append(f"timing: missing {missing}")
        for k, v in self.timing.items():
            if not isinstance(v, (int, np.integer)) or v < 0:
                errs.append(f"timing.{k}: expected int tCK >= 0, got {v!r}")
        if self.timing_table not in TIMING_TABLES:
            errs.append(f"timing_table: expected one of {sorted(TIMING_TABLES)}, "
                        f"got {self.timing_table!r}")
        elif not missing:
            for row in self.constraint_rows():
                try:
                    _check_row(row, self.timing)
                except DramConfigError as e:
                    errs.append(f"constraint {row}: {e}")
        if errs:
            raise DramConfigError(f"DRAM spec {self.name!r}: " + "; ".join(errs))

    def constraint_rows(self) -> tuple[tuple, ...]:
        """The timing table rows of this spec (standard table + extra rows)."""
        return tuple(TIMING_TABLES[self.timing_table]) + tuple(self.extra_constraints)

    def row_latency(self, row: tuple) -> int:
        """Latency (tCK) of a timing-table row: its expression evaluated on ``timing``,
        or the ``latency_overrides`` entry for its (preceding, following) commands."""
        for prev, nxt, lat in self.latency_overrides:
            if row[1] == prev and row[2] == nxt:
                return int(lat)
        return eval_latency(row[3], self.timing)

    @property
    def bursts_per_row(self) -> int:
        """Bursts per row per channel."""
        return self.columns // self.burst_length

    @property
    def read_latency_cycles(self) -> int:
        """RD issue to last data beat: nCL + nBL (tCK)."""
        return int(self.timing["nCL"] + self.timing["nBL"])

    @property
    def write_latency_cycles(self) -> int:
        """WR issue to last data beat: nCWL + nBL (tCK)."""
        return int(self.timing["nCWL"] + self.timing["nBL"])

    @property
    def clock_hz(self) -> float:
        """DRAM command clock frequency in Hz."""
        return 1e12 / self.tck_ps

    def capacity_bytes(self) -> int:
        """Total addressable bytes."""
        return (self.channels * self.ranks * self.bankgroups * self.banks * self.rows
                * self.bursts_per_row * self.burst_bytes)


def _check_row(row: tuple, timing: Mapping[str, int]) -> None:
    if len(row) not in (4, 5):
        raise DramConfigError("expected (level, prev, next, latency[, window])")
    level, prev, nxt = row[:3]
    if level not in LEVELS:
        raise DramConfigError(f"level {level!r} not in {LEVELS}")
    for c in (prev, nxt):
        if c not in COMMANDS:
            raise DramConfigError(f"command {c!r} not in {COMMANDS}")
    eval_latency(row[3], timing)
    if len(row) == 5 and (not isinstance(row[4], int) or row[4] < 1):
        raise DramConfigError(f"window {row[4]!r}: expected int >= 1")


def dram_preset(name: str, **overrides: Any) -> DramSpec:
    """Build a :class:`DramSpec` from :data:`sim.dram_presets.PRESETS`.

    Args:
        name: ``DDR4-2400``, ``HBM2e``, ``HBM3`` or ``GDDR6``.
        **overrides: DramSpec fields; ``timing`` is merged into the preset timing.

    Raises:
        DramConfigError: unknown preset or field, or an invalid result.
    """
    if name not in PRESETS:
        raise DramConfigError(f"unknown DRAM preset {name!r}; known: {sorted(PRESETS)}")
    p = dict(PRESETS[name])
    kw: dict[str, Any] = {
        "name": name, "channels": p["channels"], "ranks": p["ranks"],
        "bankgroups": p["bankgroups"], "banks": p["banks"], "rows": p["rows"],
        "columns": p["columns"], "burst_length": p["BL"], "burst_bytes": p["burst_bytes"],
        "tck_ps": p["tCK_ps"], "timing": dict(p["timing"]),
        "address_mapping": p["address_mapping"],
    }
    allowed = set(DramSpec.__dataclass_fields__)
    bad = sorted(set(overrides) - allowed)
    if bad:
        raise DramConfigError(f"unknown DramSpec field(s) {bad}; allowed: {sorted(allowed)}")
    if "timing" in overrides:
        kw["timing"].update(overrides.pop("timing"))
    kw.update(overrides)
    return DramSpec(**kw)


def peak_bytes_per_s(spec: DramSpec) -> float:
    """Peak read bandwidth in bytes/s derived from the timing table.

    Back-to-back reads spread over bank groups (and ranks) are spaced by the largest
    RD->RD latency at channel and rank level (``max(nBL, nCCDS)`` for JEDEC tables;
    bank-group rows count only when there is a single bank group), so

        peak = channels * burst_bytes / (spacing * tCK).
    """
    levels = {"channel", "rank"} | ({"bankgroup"} if spec.bankgroups == 1 else set())
    spacing = 1
    for row in spec.constraint_rows():
        if row[1] == "RD" and row[2] == "RD" and row[0] in levels and len(row) == 4:
            spacing = max(spacing, spec.row_latency(row))
    return spec.channels * spec.burst_bytes / (spacing * spec.tck_ps * 1e-12)


def encode_address(spec: DramSpec, channel: int = 0, rank: int = 0, bankgroup: int = 0,
                   bank: int = 0, row: int = 0, column: int = 0) -> int:
    """Byte address of a burst, inverse of the address mapping.

    ``column`` counts bursts within the row (0 .. bursts_per_row - 1).
    """
    vals = {"ch": channel, "ra": rank, "bg": bankgroup, "ba": bank, "ro": row, "co": column}
    counts = {"ch": spec.channels, "ra": spec.ranks, "bg": spec.bankgroups, "ba": spec.banks,
              "ro": spec.rows, "co": spec.bursts_per_row}
    idx = 0
    for f in spec.address_mapping.split("-"):  # MSB first
        if not 0 <= vals[f] < counts[f]:
            raise DramConfigError(f"{f}={vals[f]} out of range 0..{counts[f] - 1}")
        idx = idx * counts[f] + vals[f]
    return idx * spec.burst_bytes


#: resolved templates by (id(spec), ring capacity); each entry keeps its spec alive (and
#: checks it is the same object), so an id is never reused while its entry is held
_RESOLVED: dict[tuple[int, int], tuple[DramSpec, K.DramInst]] = {}
_RESOLVED_MAX = 32


def resolve(spec: DramSpec, ring_capacity: int = 64) -> K.DramInst:
    """Resolve a spec into the dense arrays (tables + zeroed state) the kernel reads.

    A fresh copy of every array each call; the tables are resolved once per spec object
    and ring capacity (a spec is frozen): rebuilding them (latency expressions, Python
    loops over the constraint rows) cost ~0.4 ms, ~0.7 % of a 200,000-request trace.

    Args:
        spec: the DRAM spec.
        ring_capacity: maximum number of concurrently active request streams.
    """
    key = (id(spec), ring_capacity)
    hit = _RESOLVED.get(key)
    if hit is None or hit[0] is not spec:
        if len(_RESOLVED) >= _RESOLVED_MAX:
            _RESOLVED.clear()
        hit = _RESOLVED[key] = (spec, _resolve(spec, ring_capacity))
    t = hit[1]
    q = _aligned_zeros(t.q.shape)
    q[...] = t.q
    nx, con = t.nx.copy(), t.con.copy()
    fresh = {f: getattr(t, f).copy() for f in t._fields
             if f not in ("q", "nx", "con", "nxf", "conf")}
    return t._replace(q=q, nx=nx, con=con, nxf=nx.reshape(-1), conf=con.reshape(-1),
                      **fresh)


def _resolve(spec: DramSpec, ring_capacity: int) -> K.DramInst:
    """:func:`resolve` without the template cache."""
    C, RK, G, B = spec.channels, spec.ranks, spec.bankgroups, spec.banks
    n_rank, n_bg, n_bank = C * RK, C * RK * G, C * RK * G * B
    lvl_off = np.array([0, C, C + n_rank, C + n_rank + n_bg, C + n_rank + n_bg + n_bank],
                       np.int64)
    n_nodes = int(lvl_off[4])
    # address mapping, LSB field first
    counts = {"ch": C, "ra": RK, "bg": G, "ba": B, "ro": spec.rows, "co": spec.bursts_per_row}
    order = spec.address_mapping.split("-")[::-1]
    amap_field = np.array([ADDRESS_FIELDS.index(f) for f in order], np.int64)
    amap_count = np.array([counts[f] for f in order], np.int64)
    # constraints grouped by preceding command, those with a rolling window last
    rows = sorted(spec.constraint_rows(),
                  key=lambda r: (COMMANDS.index(r[1]), len(r) == 5 and r[4] > 1))
    ncon = len(rows)
    con_ptr = np.zeros(N_COMMANDS + 1, np.int64)
    con_level = np.zeros(ncon, np.int64)
    con_next = np.zeros(ncon, np.int64)
    con_lat = np.zeros(ncon, np.int64)
    con_win = np.ones(ncon, np.int64)
    con_wslot = np.full(ncon, -1, np.int64)
    nwc, maxw = 0, 1
    for k, r in enumerate(rows):
        con_ptr[COMMANDS.index(r[1]) + 1] += 1
        con_level[k] = LEVELS.index(r[0])
        con_next[k] = COMMANDS.index(r[2])
        con_lat[k] = spec.row_latency(r)
        if len(r) == 5 and r[4] > 1:
            con_win[k] = r[4]
            con_wslot[k] = nwc
            nwc += 1
            maxw = max(maxw, r[4])
    con_ptr = np.cumsum(con_ptr).astype(np.int64)
    cwin = con_ptr[1:].copy()  # per command: its first row with a window (rows sorted)
    for k in range(ncon - 1, -1, -1):
        if con_win[k] > 1:
            cwin[COMMANDS.index(rows[k][1])] = k
    Q = spec.queue_depth
    p = np.zeros(K.N_P, np.int64)
    p[K.P_CH], p[K.P_RK], p[K.P_BG], p[K.P_BA] = C, RK, G, B
    p[K.P_ROW], p[K.P_BPR], p[K.P_BB] = spec.rows, spec.bursts_per_row, spec.burst_bytes
    p[K.P_RLAT], p[K.P_WLAT] = spec.read_latency_cycles, spec.write_latency_cycles
    p[K.P_REFI] = spec.timing["nREFI"]
    p[K.P_REFRESH] = 1 if spec.refresh else 0
    p[K.P_POLICY] = ROW_POLICIES.index(spec.row_policy)
    p[K.P_QDEPTH], p[K.P_RING] = Q, ring_capacity
    p[K.P_NWC], p[K.P_MAXW] = nwc, maxw
    pow2 = all(_is_pow2(int(c)) for c in amap_count) and _is_pow2(spec.burst_bytes)
    p[K.P_POW2] = 1 if pow2 else 0
    p[K.P_BBSHIFT] = spec.burst_bytes.bit_length() - 1 if pow2 else 0
    tab = np.zeros((K.N_TAB, 16), np.int64)
    tab[K.T_AFIELD, :6] = amap_field
    tab[K.T_ACOUNT, :6] = amap_count
    tab[K.T_LVL, :5] = lvl_off
    tab[K.T_FAN, :3] = (RK, G, B)
    tab[K.T_SCOPE, :N_COMMANDS] = [LEVELS.index(COMMAND_SCOPE[c]) for c in COMMANDS]
    tab[K.T_ASHIFT, :6] = [int(c).bit_length() - 1 for c in amap_count] if pow2 else 0
    tab[K.T_CWIN, :N_COMMANDS] = cwin
    if pow2:  # field f of a byte address: (addr >> tab[T_DSHIFT, f]) & tab[T_DMASK, f]
        shift = spec.burst_bytes.bit_length() - 1
        for f, c in zip(amap_field, amap_count):
            if f < 5:
                tab[K.T_DSHIFT, f], tab[K.T_DMASK, f] = shift, c - 1
            shift += int(c).bit_length() - 1
    con = np.zeros((5, max(ncon, 1)), np.int64)
    con[K.K_LEVEL, :ncon] = con_level
    con[K.K_NEXT, :ncon] = con_next
    con[K.K_LAT, :ncon] = con_lat
    con[K.K_WIN, :ncon] = con_win
    con[K.K_WSLOT, :ncon] = con_wslot
    bst = np.zeros((2, n_bank), np.int64)
    bst[K.B_OPEN] = -1
    chs = np.zeros((C, K.N_HF), np.int64)
    chs[:, K.H_T] = K.INF
    chs[:, K.H_CMD] = -1
    chs[:, K.H_SLOT] = -1
    chs[:, K.H_DIRTY] = 1
    chs[:, K.H_NOINC] = 1
    chs[:, K.H_WHEAD] = chs[:, K.H_WTAIL] = -1
    q = _aligned_zeros((C, Q, K.N_QF))  # one cache line per queue slot
    q[:, :, K.Q_NEXT] = np.arange(1, Q + 1)  # free lists: every slot, in order
    q[:, -1, K.Q_NEXT] = -1
    bk = np.zeros((n_bank, K.N_BKF), np.int64)
    bk[:, [K.BK_HEAD, K.BK_TAIL, K.BK_RDH, K.BK_WRH, K.BK_C1, K.BK_C2]] = -1
    bk[:, K.BK_RK] = np.arange(n_bank) // (G * B)
    bk[:, K.BK_N1] = lvl_off[1] + np.arange(n_bank) // (G * B)  # nx rows of rank, group
    bk[:, K.BK_N2] = lvl_off[2] + np.arange(n_bank) // B
    bk[:, K.BK_LG] = (np.arange(n_bank) // B) % (RK * G)
    ncap = max(ring_capacity, 1)
    ring = np.zeros((ncap, K.N_RF), np.int64)
    ring[:, K.R_NEXT] = np.arange(1, ncap + 1)  # free list: every slot, in order
    ring[-1, K.R_NEXT] = -1
    ring[:, K.R_WAIT] = -1
    ring[:, K.R_WNEXT] = -1
    misc = np.zeros(K.N_MISC, np.int64)
    misc[K.M_RHEAD] = misc[K.M_RTAIL] = -1
    misc[K.M_RFREE] = 0
    # every channel starts dirty; tree leaves CP + ch hold ch (-1: padding)
    cp = 1 << max(C - 1, 0).bit_length()
    misc[K.M_NDIRTY], misc[K.M_CP] = C, cp
    sched = np.full(C + 2 * cp, -1, np.int64)
    sched[:C] = np.arange(C)
    sched[C + cp:C + cp + C] = np.arange(C)
    nx = np.zeros((n_nodes, N_COMMANDS), np.int64)
    return K.DramInst(
        p=p, tab=tab, con_ptr=con_ptr, con=con,
        nx=nx,
        hist=np.zeros((n_nodes, max(nwc, 1), maxw), np.int64),
        hist_n=np.zeros((n_nodes, max(nwc, 1)), np.int64),
        bst=bst,
        ref_due=np.full(n_rank, int(spec.timing["nREFI"]), np.int64),
        q=q, chs=chs, ring=ring, misc=misc, stats=np.zeros(K.N_STATS, np.int64), bk=bk,
        chb=np.zeros((C, RK * G * B), np.int64), sched=sched,
        cand=np.zeros((C, K.N_CAF, 2 * RK * G * B), np.int64),
        dbl=np.zeros((C, RK * G * B), np.int64), gf=np.zeros(RK * G * 4, np.int64),
        treet=np.full(2 * cp, K.INF, np.int64),
        nxf=nx.reshape(-1), conf=con.reshape(-1),  # flat views for the controller
    )


def _aligned_zeros(shape: tuple[int, ...]) -> np.ndarray:
    """int64 zeros whose first element is 64-byte aligned (a view into a larger array)."""
    n = int(np.prod(shape))
    buf = np.zeros(n + 8, np.int64)
    off = (-buf.ctypes.data // 8) % 8
    return buf[off:off + n].reshape(shape)


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


@dataclass(frozen=True)
class DramStats:
    """Counters of one DRAM model run.

    Attributes:
        command_counts: command name -> number issued.
        row_hits, row_misses, row_conflicts: requests served by an open row, after an
            ACT to a closed bank, after PRE + ACT of another row.
        read_bytes, write_bytes: bytes transferred.
    """

    command_counts: Mapping[str, int]
    row_hits: int
    row_misses: int
    row_conflicts: int
    read_bytes: int
    write_bytes: int

    @staticmethod
    def from_array(stats: np.ndarray) -> DramStats:
        """Build from the kernel's stats vector."""
        return DramStats(
            command_counts=MappingProxyType(
                {c: int(stats[i]) for i, c in enumerate(COMMANDS)}),
            row_hits=int(stats[K.S_HIT]), row_misses=int(stats[K.S_MISS]),
            row_conflicts=int(stats[K.S_CONFLICT]),
            read_bytes=int(stats[K.S_RBYTES]), write_bytes=int(stats[K.S_WBYTES]),
        )


@dataclass(frozen=True)
class DramTraceResult:
    """Result of :func:`simulate_requests` (cycles are DRAM tCK).

    Attributes:
        completion_cycles: per request, the cycle its last data beat is transferred.
        makespan_cycles: max completion cycle (0 for an empty trace).
        stats: command and row-buffer counters.
    """

    completion_cycles: np.ndarray
    makespan_cycles: int
    stats: DramStats = field(repr=False)


def simulate_requests(
    spec: DramSpec,
    addresses: Sequence[int] | np.ndarray,
    is_write: Sequence[bool] | np.ndarray,
    arrival_cycles: Sequence[int] | np.ndarray,
    *,
    max_outstanding: int = 256,
) -> DramTraceResult:
    """Run burst requests through the FR-FCFS controller of ``spec``.

    Each request moves one burst (``spec.burst_bytes``) at byte address ``addresses[i]``.
    Requests enter their channel queue in order once arrived; a request whose queue is
    full waits (up to ``max_outstanding`` waiting, then the front end stalls).

    Args:
        spec: DRAM configuration.
        addresses: byte addresses (int64).
        is_write: True for a write burst.
        arrival_cycles: arrival cycle of each request, non-decreasing (tCK).
        max_outstanding: requests that may wait for a queue slot at once.

    Returns:
        Completion cycle per request and the command statistics.
    """
    addr = np.ascontiguousarray(addresses, np.int64)
    wr = np.asarray(is_write)  # (run_trace copies it as int64 into its work block)
    arr = np.ascontiguousarray(arrival_cycles, np.int64)
    if not (addr.shape == wr.shape == arr.shape) or addr.ndim != 1:
        raise DramConfigError("addresses, is_write, arrival_cycles: expected equal-length 1-D")
    # (sorted arrivals: the first is the smallest, no second pass for the minimum)
    unsorted = addr.size > 1 and bool(np.any(arr[1:] < arr[:-1]))
    if addr.size and (addr.min() < 0 or (arr.min() if unsorted else arr[0]) < 0):
        raise DramConfigError("addresses and arrival_cycles must be >= 0")
    if unsorted:
        raise DramConfigError("arrival_cycles must be non-decreasing")
    inst = resolve(spec, ring_capacity=max_outstanding)
    end = np.empty(addr.size, np.int64)  # (the controller sets every entry)
    if addr.size:
        K.run_trace(inst, addr, wr, arr, end)
    return DramTraceResult(end, int(end.max()) if end.size else 0,
                           DramStats.from_array(inst.stats))


def _cmd_id(cmd: str | int) -> int:
    if isinstance(cmd, str):
        if cmd not in COMMANDS:
            raise DramConfigError(f"unknown command {cmd!r}; known: {COMMANDS}")
        return COMMANDS.index(cmd)
    if not 0 <= cmd < N_COMMANDS:
        raise DramConfigError(f"command id {cmd} out of range")
    return int(cmd)


class DramState:
    """Command-level timing and bank state of one DRAM, for models that issue commands.

    Contract: :meth:`earliest_issue` is the exact earliest cycle allowed by every row of
    the timing table (plus one command per channel per cycle); :meth:`issue` refuses a
    command before that cycle or in an illegal bank state, and otherwise records it.
    Cycles are DRAM tCK. Arrays live in :attr:`inst` for Numba callers
    (:func:`sim.dram_kernel.earliest_inst` / :func:`sim.dram_kernel.issue_inst`).
    """

    def __init__(self, spec: DramSpec) -> None:
        self.spec = spec
        self.inst = resolve(spec, ring_capacity=1)

    def earliest_issue(self, cmd: str | int, channel: int, rank: int = 0,
                       bankgroup: int = 0, bank: int = 0) -> int:
        """Earliest cycle ``cmd`` may issue to the addressed node (timing only)."""
        return int(K.earliest_inst(self.inst, _cmd_id(cmd), channel, rank, bankgroup, bank))

    def open_row(self, channel: int, rank: int = 0, bankgroup: int = 0,
                 bank: int = 0) -> int:
        """Open row of a bank, or -1 when precharged."""
        s = self.spec
        return int(self.inst.bst[K.B_OPEN, ((channel * s.ranks + rank) * s.bankgroups
                                            + bankgroup) * s.banks + bank])

    def issue(self, cmd: str | int, cycle: int, channel: int, rank: int = 0,
              bankgroup: int = 0, bank: int = 0, row: int = 0) -> None:
        """Issue ``cmd`` at ``cycle``.

        Raises:
            DramConfigError: timing violation or illegal state (ACT to an open bank,
                RD/WR to a closed bank, REF/ACTAB with open banks).
        """
        c = _cmd_id(cmd)
        e = self.earliest_issue(c, channel, rank, bankgroup, bank)
        if cycle < e:
            raise DramConfigError(f"{COMMANDS[c]} at cycle {cycle} violates timing; "
                                  f"earliest is {e}")
        name = COMMANDS[c]
        o = self.open_row(channel, rank, bankgroup, bank)
        s = self.spec
        if name == "ACT" and o >= 0:
            raise DramConfigError(f"ACT to an open bank (row {o} open)")
        if name in ("RD", "WR") and o != row:
            raise DramConfigError(f"{name} to row {row} but open row is {o}")
        if name in ("REF", "ACTAB"):
            lo = (channel * s.ranks + rank) * s.bankgroups * s.banks
            if np.any(self.inst.bst[K.B_OPEN, lo:lo + s.bankgroups * s.banks] >= 0):
                raise DramConfigError(f"{name} needs every bank of the rank precharged")
        K.issue_inst(self.inst, c, channel, rank, bankgroup, bank, row, cycle)

    def command_counts(self) -> dict[str, int]:
        """Commands issued so far, by name."""
        return {n: int(self.inst.stats[i]) for i, n in enumerate(COMMANDS)}


__all__ = [
    "DramSpec", "DramState", "DramStats", "DramTraceResult", "dram_preset", "encode_address",
    "eval_latency", "peak_bytes_per_s", "resolve", "simulate_requests",
]
