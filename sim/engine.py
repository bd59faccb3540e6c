"""Event-driven engine: runs a :class:`sim.taskgraph.TaskGraph` and returns SimStats.

Semantics (the pure-Python reference in ``tests/sim`` implements the same rules):

1. Tasks without predecessors become ready at cycle 0, in task-id order.
2. A ready task with ``resource == -1`` finishes ``duration`` cycles later. Otherwise it
   joins its resource's FIFO queue and starts as soon as a slot is free.
3. A compute task holds its slot ``duration`` cycles; a memory task on a bandwidth
   resource ``ceil(mem_bytes / (bytes_per_cycle * efficiency))`` cycles; a memory task
   on a DRAM resource until the data of its last burst returns (command-level model,
   :mod:`sim.dram_kernel`; bursts are fed in address order to FR-FCFS channel queues).
4. Finish events leave a heap keyed ``(time, priority, sequence)``: same-cycle events
   leave in priority order, then FIFO. A finish frees the slot (the queue head starts),
   then successors whose last predecessor this was become ready (ascending task id).

Two event loops give the same results: :func:`_loop` (binary heap, every graph; compiled
as :func:`_kernel` for graphs with DRAM resources and :func:`_kernel_plain` without, which
never compiles the DRAM controller) and :func:`sim.engine_bucket.kernel_bucket` (calendar
queue; graphs without DRAM whose tasks share one priority and whose durations are below
``MAX_BUCKETS``), chosen by :func:`run`.

DRAM time: the DRAM runs in its own tCK; an engine cycle ``t`` maps to DRAM cycle
``ceil(t * Pe / Pd)`` for arrivals and a completion at DRAM cycle ``c`` to engine cycle
``ceil(c * Pd / Pe)`` (Pe, Pd the clock periods, rounded to femtoseconds so the
conversion is exact integer arithmetic). DRAM wake-ups run after all other events of
the same engine cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from numba import njit, typed

from archsim.sim import dram_kernel as K
from archsim.sim.dram import DramSpec, dram_preset, resolve
from archsim.sim.engine_bucket import bucket_count, kernel_bucket, pack_bucket
from archsim.sim.errors import SimInputError
from archsim.sim.intrinsics import prefetch, prefetch2
from archsim.sim.jitcache import guard as _guard_cache
from archsim.sim.taskgraph import MODEL_BANDWIDTH, MODEL_DRAM, TaskGraph

_PRIO_BIAS = 2**30
INF_T = 2**62
_SEQ_BITS = 32


@dataclass(frozen=True, eq=False)
class SimStats:
    """Result of :func:`run`. Cycles are in the task graph's clock (``clock_hz``).

    Attributes:
        makespan_cycles: finish cycle of the last task.
        busy_cycles: per resource, sum over its tasks of (end - start) (slot-cycles;
            utilisation = busy / (makespan * capacity)).
        task_start, task_end: per task start / finish cycles (None unless recorded).
        op_start_cycles, op_end_cycles: per op, first start / last finish (-1: no task).
        action_totals: [component, action] summed action counts.
        events: heap events processed (task finishes + DRAM wake-ups).
        dram_command_counts: [resource, command] DRAM commands issued (zeros for
            non-DRAM resources); command names in :data:`sim.dram_presets.COMMANDS`.
        dram_row_hits, dram_row_misses, dram_row_conflicts, dram_read_bytes,
        dram_write_bytes: per resource.
        clock_hz: clock of the cycle counts.
    """

    makespan_cycles: int
    busy_cycles: np.ndarray
    task_start: np.ndarray | None
    task_end: np.ndarray | None
    op_start_cycles: np.ndarray
    op_end_cycles: np.ndarray
    action_totals: np.ndarray
    events: int
    dram_command_counts: np.ndarray
    dram_row_hits: np.ndarray
    dram_row_misses: np.ndarray
    dram_row_conflicts: np.ndarray
    dram_read_bytes: np.ndarray
    dram_write_bytes: np.ndarray
    clock_hz: float

    @property
    def makespan_s(self) -> float:
        """Makespan in seconds."""
        return self.makespan_cycles / self.clock_hz

    def utilization(self, capacity: np.ndarray) -> np.ndarray:
        """busy / (makespan * capacity) per resource (0 for an empty run)."""
        if self.makespan_cycles == 0:
            return np.zeros_like(self.busy_cycles, dtype=np.float64)
        return self.busy_cycles / (self.makespan_cycles * np.asarray(capacity, np.float64))


# ----------------------------------------------------------------------------- heap
@njit(cache=True, inline="always")
def _push(ht, hk, hp, hs, n, t, key, pay, s):
    """Push event (time t, key, task pay, start cycle s); returns the new size."""
    i = n
    while i > 0:
        par = (i - 1) >> 1
        if ht[par] < t or (ht[par] == t and hk[par] < key):
            break
        ht[i], hk[i], hp[i], hs[i] = ht[par], hk[par], hp[par], hs[par]
        i = par
    ht[i], hk[i], hp[i], hs[i] = t, key, pay, s
    return n + 1


@njit(cache=True, inline="always")
def _pop(ht, hk, hp, hs, n):
    """Remove the root; returns the new size (read the root before)."""
    n -= 1
    t, key, pay, s = ht[n], hk[n], hp[n], hs[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hk[c + 1] < hk[c])):
            c += 1
        if t < ht[c] or (t == ht[c] and key < hk[c]):
            break
        ht[i], hk[i], hp[i], hs[i] = ht[c], hk[c], hp[c], hs[c]
        i = c
    ht[i], hk[i], hp[i], hs[i] = t, key, pay, s
    return n


@njit(cache=True, inline="always")
def _ceil_scale(x, num, den):
    """ceil(x * num / den) in exact integer arithmetic (x >= 0)."""
    return (x * num + den - 1) // den


# --------------------------------------------------------------------------- kernel
# The loop is memory-bound on big graphs (a task's state is touched when a predecessor
# finishes, when it starts and when it finishes, far apart in time), so the bytes per
# task decide the speed. The hot per-task state is one row of a table of the narrowest
# safe integer type (int32 unless ids, edges or durations need int64):
#   tt[t] = (indeg, resource, duration, succ_lo[, priority, op])
# (priority and op columns only when some task uses them); tt has T + 1 rows so
# succ_hi = tt[t + 1, 3]; duration -1 marks a DRAM stream task. The heap carries each
# running task's start cycle, so there is no per-task start array unless ``record``.
# Measured on benchmarks/bench_sim.py (1M tasks): separate int64 arrays 350 ns/task,
# one 64-byte row 190, this 16-byte row ~140-190 (noisy shared machine); with the
# prefetches below (at a start and at a queue head) ~90 ns with priorities. Graphs without
# DRAM and with one priority run in the calendar-queue loop of sim/engine_bucket.py
# (~42-44 CPU-ns per task on the same graph), which packs its own table of the same
# four fields in one 8-byte word per task (sim.engine_bucket.pack_bucket) from the
# successors the DAG check built.
@njit(cache=True)
def _pack(resource, eff_dur, is_dram, priority, op_index, dep_ptr, dep_idx, wtype, width,
          n_res):
    """Build (tt, succ, rcount): the task table above, successors (ascending) in CSR
    order, and the number of tasks per resource.

    ``wtype`` is a 0-d array of the table dtype; ``width`` 4 or 6 columns. Three
    branch-free passes (edges, tasks, edges): the owner task of edge k is the number of
    tasks whose edge range ends at or before k, a running sum of ``ends`` (3x faster on
    1M tasks than a loop over each task's edges, whose trip count mispredicts).
    """
    T = resource.shape[0]
    E = dep_idx.shape[0]
    tt = np.empty((T + 1, width), wtype.dtype)
    tt[T, :] = 0
    fill = np.zeros(T + 1, np.int64)  # successors per task, then the next free slot
    for k in range(E):
        fill[dep_idx[k]] += 1
    ends = np.zeros(E + 1, np.int64)  # ends[e]: tasks whose edge range ends at e
    rcount = np.zeros(n_res + 1, np.int64)  # tasks per resource + 1 (0: no resource)
    acc = 0
    for t in range(T):
        tt[t, 0] = dep_ptr[t + 1] - dep_ptr[t]
        tt[t, 1] = resource[t]
        tt[t, 2] = -1 if is_dram[t] != 0 else eff_dur[t]
        tt[t, 3] = acc
        if width > 4:
            tt[t, 4] = priority[t]
            tt[t, 5] = op_index[t]
        n = fill[t]
        fill[t] = acc
        acc += n
        ends[dep_ptr[t + 1]] += 1
        rcount[resource[t] + 1] += 1
    tt[T, 3] = acc
    succ = np.zeros(E + 4, np.int32)  # 4 padding entries (read by the loop's prefetches)
    owner = 0
    for k in range(E):
        owner += ends[k]
        p = dep_idx[k]
        succ[fill[p]] = owner
        fill[p] += 1
    return tt, succ, rcount[1:]


@njit(cache=True, inline="always")
def _loop(tt, succ, res_cap, res_inst, n_ops, mem_addr, burst_n, is_write, insts, ni,
          pe_fs, pd_fs, record):
    """Event loop over the task table (semantics in the module docstring). ``insts``: the
    ``ni`` DRAM instances (typed List), or None for a graph without DRAM (then the DRAM
    controller is not compiled: :func:`sim.dram_kernel.core_of`). Inlined into its two
    compiled entry points, :func:`_kernel` and :func:`_kernel_plain`."""
    T = tt.shape[0] - 1
    wide = tt.shape[1] > 4  # priority and op columns exist
    R = res_cap.shape[0]
    # per-resource FIFO queues: each task enters its resource's queue at most once, so
    # resource r owns a segment of count(r) entries of one array (no wrap-around)
    qh = np.zeros(R, np.int64)
    for t in range(T):
        r = tt[t, 1]
        if r >= 0:
            qh[r] += 1
    acc = 0
    for r in range(R):
        n = qh[r]
        qh[r] = acc
        acc += n
    qt = qh.copy()
    # zeros: the prefetches read entries up to 8 past a queue's head (valid task ids)
    qbuf = np.zeros(acc + 8, tt.dtype)
    free = res_cap.astype(np.int64).copy()
    busy = np.zeros(R, np.int64)
    start = np.zeros(T if record else 1, np.int64)
    end = np.zeros(T if record else 1, np.int64)
    op_start = np.full(n_ops, -1, np.int64)
    op_end = np.full(n_ops, -1, np.int64)
    # DRAM streams (indexed by task id) and wake-ups (kept outside the heap)
    ns = T if ni > 0 else 1
    s_addr = np.zeros(ns, np.int64)
    s_left = np.zeros(ns, np.int64)
    s_out = np.zeros(ns, np.int64)
    s_write = np.zeros(ns, np.int64)
    s_end = np.zeros(ns, np.int64)
    s_start = np.zeros(ns, np.int64)
    done_buf = np.zeros(ns, np.int64)
    # K.core's mode and unused operands as typed int64 (one compiled signature of core)
    m_act, m_next, m_adv = np.int64(K.MODE_ACTIVATE), np.int64(K.MODE_NEXT), np.int64(
        K.MODE_ADVANCE)
    zero = np.int64(0)
    no_arrival = s_end[:0]
    wake_t = np.full(max(ni, 1), INF_T, np.int64)
    pending_wake = np.zeros(max(ni, 1), np.int64)
    any_wake = False
    # event heap (time, key = priority << 32 | sequence, task, start): at most one
    # finish event per task
    ht = np.empty(T + 1, np.int64)
    hk = np.empty(T + 1, np.int64)
    hp = np.empty(T + 1, np.int64)
    hs = np.empty(T + 1, np.int64)
    hn = 0
    # zero-duration finishes when every priority is equal: they finish at `now`, after
    # the heap events of `now` (pushed earlier: smaller sequence) and in FIFO order, so a
    # FIFO replaces two heap operations (joins are common in lowered graphs)
    zq = np.empty(T + 1 if not wide else 1, np.int64)
    zh = 0
    zt = 0
    seq = 0
    finished = 0
    events = 0
    now = 0
    makespan = 0
    # ready work of the current event: the resource whose queue head starts (or -1),
    # then successors in ascending id; t0 scans the initial roots in id order
    t0 = 0
    head_r = -1
    k_lo = 0
    k_hi = 0
    pf_lo = 0  # successor range start of the task started last (row prefetches)
    while True:
        # ---- make this event's ready tasks ready at `now` (FIFO per resource)
        while True:
            if head_r >= 0:
                # a finish freed a slot of r (already reserved): its queue head starts;
                # prefetch the row of the entry 8 places behind it and the successor
                # list of the one 4 places behind (its row was prefetched 4 starts ago)
                q = qh[head_r]
                task = qbuf[q]
                prefetch2(tt, qbuf[q + 8], 0)
                prefetch(succ, tt[qbuf[q + 4], 3])
                qh[head_r] += 1
                head_r = -1
                r = -1  # no capacity check below
            elif k_lo < k_hi:
                task = succ[k_lo]
                k_lo += 1
                tt[task, 0] -= 1
                if tt[task, 0] != 0:
                    continue
                r = tt[task, 1]
            elif t0 < T:
                task = t0
                t0 += 1
                if tt[task, 0] != 0:
                    continue
                r = tt[task, 1]
            else:
                break
            if r >= 0:
                if free[r] <= 0 or qh[r] < qt[r]:
                    qbuf[qt[r]] = task
                    qt[r] += 1
                    continue
                free[r] -= 1
            d = tt[task, 2]
            if d < 0:  # DRAM stream: its bursts go to the command-level model
                i = res_inst[tt[task, 1]]
                if burst_n[task] > 0:
                    s_addr[task] = mem_addr[task]
                    s_left[task] = burst_n[task]
                    s_write[task] = is_write[task]
                    a = _ceil_scale(now, pe_fs[i], pd_fs[i])
                    s_end[task] = a
                    s_start[task] = now
                    K.core_of(insts, i, m_act, zero, np.int64(task), a, s_addr, s_left,
                              s_out, s_write, s_end, done_buf, no_arrival)
                    pending_wake[i] = 1
                    any_wake = True
                    continue
                d = 0
            # starts: prefetch this task's successor list (read when it finishes) and
            # the rows of the first four successors of the task started before it
            # (succ is padded; as in sim/engine_bucket.py)
            lo = tt[task, 3]
            prefetch(succ, lo)
            prefetch2(tt, succ[pf_lo], 0)
            prefetch2(tt, succ[pf_lo + 1], 0)
            prefetch2(tt, succ[pf_lo + 2], 0)
            prefetch2(tt, succ[pf_lo + 3], 0)
            pf_lo = lo
            if d == 0 and not wide:
                zq[zt] = task
                zt += 1
                seq += 1
                continue
            hn = _push(ht, hk, hp, hs, hn, now + d,
                       ((np.int64(tt[task, 4] if wide else 0) + _PRIO_BIAS) << _SEQ_BITS)
                       | seq, task, now)
            seq += 1
        # ---- DRAM wake-ups touched since the last event
        if any_wake:
            any_wake = False
            for i in range(ni):
                if pending_wake[i] != 0:
                    pending_wake[i] = 0
                    nt = K.core_of(insts, i, m_next, zero, zero, zero, s_addr, s_left,
                                   s_out, s_write, s_end, done_buf, no_arrival)
                    et = INF_T
                    if nt < K.INF:
                        et = (nt * pd_fs[i]) // pe_fs[i]
                        if et < now:
                            et = now
                    wake_t[i] = et
        if finished == T:
            break
        # ---- next event: heap events of `now`, then zero-duration finishes, then the
        # earliest wake-up strictly before the heap top, else the heap top
        if zh < zt and (hn == 0 or ht[0] > now):
            task = zq[zh]
            zh += 1
            st_ = now
        else:
            wi = -1
            wt = ht[0] if hn > 0 else INF_T
            for i in range(ni):
                if wake_t[i] < wt or (hn == 0 and wake_t[i] < INF_T and wi < 0):
                    wt = wake_t[i]
                    wi = i
            if wi < 0 and hn == 0:
                break
            if wi >= 0:
                # DRAM wake-up: issue every command of engine cycle `now`
                events += 1
                now = wt
                i = wi
                until = _ceil_scale(now + 1, pe_fs[i], pd_fs[i])
                nd = K.core_of(insts, i, m_adv, until, zero, zero, s_addr, s_left, s_out,
                               s_write, s_end, done_buf, no_arrival)
                for j in range(nd):
                    task = done_buf[j]
                    et = _ceil_scale(s_end[task], pd_fs[i], pe_fs[i])
                    if et < now:
                        et = now
                    hn = _push(ht, hk, hp, hs, hn, et,
                               ((np.int64(tt[task, 4] if wide else 0) + _PRIO_BIAS)
                                << _SEQ_BITS) | seq, task, s_start[task])
                    seq += 1
                pending_wake[i] = 1
                any_wake = True
                continue
            now = ht[0]
            task = hp[0]
            st_ = hs[0]
            hn = _pop(ht, hk, hp, hs, hn)
        # ---- task finish
        events += 1
        finished += 1
        if now > makespan:
            makespan = now
        if record:
            start[task] = st_
            end[task] = now
        op = tt[task, 5] if wide else 0
        if op_start[op] < 0 or st_ < op_start[op]:
            op_start[op] = st_
        if now > op_end[op]:
            op_end[op] = now
        r = tt[task, 1]
        if r >= 0:
            busy[r] += now - st_
            free[r] += 1
            if qh[r] < qt[r]:
                free[r] -= 1
                head_r = r
        k_lo = tt[task, 3]
        k_hi = tt[task + 1, 3]
    return makespan, finished, events, busy, start, end, op_start, op_end


@njit(cache=True)
def _graph_facts(kind, priority):
    """(any memory task, all priorities equal) in one pass."""
    any_mem = False
    p0 = priority[0] if priority.shape[0] else 0
    uniform = True
    for t in range(kind.shape[0]):
        any_mem |= kind[t] > 0
        uniform &= priority[t] == p0
    return any_mem, uniform


@njit(cache=True)
def _kernel(tt, succ, res_cap, res_inst, n_ops, mem_addr, burst_n, is_write, insts,
            pe_fs, pd_fs, record):
    """:func:`_loop` with DRAM resources (``insts``: typed List of DramInst)."""
    return _loop(tt, succ, res_cap, res_inst, n_ops, mem_addr, burst_n, is_write, insts,
                 len(insts), pe_fs, pd_fs, record)


@njit(cache=True)
def _kernel_plain(tt, succ, res_cap, n_ops, record):
    """:func:`_loop` for a graph without DRAM: compiles no DRAM controller (a cold first
    run of such a graph, e.g. a PIM layer's channel tasks, skips ~10 CPU-s)."""
    z = np.zeros(1, np.int64)
    return _loop(tt, succ, res_cap, z, n_ops, z, z, z, None, 0, z, z, record)


_EMPTY_INST_TYPE = None


def _inst_list(insts: list) -> typed.List:
    """The DRAM instances as a Numba typed List (:func:`run` passes a non-empty one:
    graphs without DRAM run :func:`_kernel_plain`)."""
    global _EMPTY_INST_TYPE
    if insts:
        lst = typed.List()
        for x in insts:
            lst.append(x)
        return lst
    if _EMPTY_INST_TYPE is None:

        _EMPTY_INST_TYPE = numba.typeof(resolve(dram_preset("DDR4-2400"), 1))
    return typed.List.empty_list(_EMPTY_INST_TYPE)


def _run_heap(tg: TaskGraph, res: np.ndarray, cap: np.ndarray, dep_ptr: np.ndarray,
              res_inst: np.ndarray, insts: list, specs: list, any_mem: bool,
              record: bool) -> tuple:
    """The heap loop of :func:`run` (graphs the calendar loop does not take): effective
    durations, DRAM streams, the packed table, :func:`_kernel_plain` or :func:`_kernel`."""
    T, R = tg.num_tasks, tg.num_resources
    model = tg.resource_model
    pe_fs: list[int] = []
    pd_fs: list[int] = []
    eff = np.ascontiguousarray(tg.duration, np.int64)
    is_dram = np.zeros(T, np.bool_)
    burst_n = addr = is_write = np.zeros(1, np.int64)
    if any_mem:
        # memory tasks: bandwidth durations and DRAM streams (bursts, aligned address)
        mem = tg.kind > 0
        rmodel = np.where(res >= 0, model[np.maximum(res, 0)] if R else -1, -1)
        eff = eff.astype(np.int64)  # copy
        bw = mem & (rmodel == MODEL_BANDWIDTH)
        if np.any(bw):
            rate = (tg.bytes_per_cycle * tg.efficiency)[res[bw]]
            eff[bw] = np.ceil(tg.mem_bytes[bw] / rate - 1e-9).astype(np.int64)
        is_dram = mem & (rmodel == MODEL_DRAM)
        if is_dram.any():
            burst_n = np.zeros(T, np.int64)
            addr = tg.mem_addr.astype(np.int64)
            is_write = (tg.kind == 2).astype(np.int64)
    for r in np.flatnonzero(model == MODEL_DRAM):
        spec = specs[res_inst[r]]
        # clock periods in femtoseconds: exact integer time conversion
        pe_fs.append(max(1, round(1e15 / tg.clock_hz)))
        pd_fs.append(max(1, round(spec.tck_ps * 1000)))
        sel = is_dram & (res == r)
        if not sel.any():
            continue
        bb = spec.burst_bytes
        first = tg.mem_addr[sel] // bb
        last = (tg.mem_addr[sel] + tg.mem_bytes[sel] - 1) // bb
        burst_n[sel] = np.where(tg.mem_bytes[sel] > 0, last - first + 1, 0)
        eff[sel] = 0
        addr[sel] = first * bb  # align the stream start to its first burst
    max_dur = int(eff.max()) if T else 0
    # table type: int32 unless an id, an edge count or a duration needs int64
    big = tg.dep_idx.size >= 2**31 - 1 or T >= 2**31 - 1 or max_dur >= 2**31 - 1
    wtype = np.zeros((), np.int64 if big else np.int32)
    # priority and op columns only when used (fewer bytes per task, see _pack)
    wide = len(tg.op_names) > 1 or bool(np.any(tg.priority != 0))
    tt, succ, rcount = _pack(res, eff, is_dram, np.ascontiguousarray(tg.priority),
                             np.ascontiguousarray(tg.op_index), dep_ptr,
                             np.ascontiguousarray(tg.dep_idx), wtype, 6 if wide else 4, R)
    if not insts:       # no DRAM: the loop without the DRAM controller compiled
        return _kernel_plain(tt, succ, cap, len(tg.op_names), record)
    return _kernel(tt, succ, cap, res_inst, len(tg.op_names), addr, burst_n, is_write,
                   _inst_list(insts), np.asarray(pe_fs + [1], np.int64),
                   np.asarray(pd_fs + [1], np.int64), record)


def run(tg: TaskGraph, dram_configs: Sequence[DramSpec] = (), *,
        record_task_times: bool = True) -> SimStats:
    """Simulate a task graph.

    Args:
        tg: the task graph (validated at build).
        dram_configs: DRAM specs; a DRAM resource uses ``dram_configs[dram_index]``
            (each DRAM resource has its own state).
        record_task_times: keep per-task start/end arrays (2 x 8 bytes per task).

    Returns:
        SimStats in the task graph's clock.

    Raises:
        SimInputError: a DRAM resource refers to a missing config, or a task never
            finishes (cannot happen for a validated DAG).
    """
    T, R = tg.num_tasks, tg.num_resources
    model = tg.resource_model
    res = np.ascontiguousarray(tg.resource, np.int32)
    cap = np.ascontiguousarray(tg.resource_capacity, np.int32)
    dep_ptr = np.ascontiguousarray(tg.dep_ptr, np.int64)
    res_inst = np.full(R, -1, np.int64)
    insts: list[Any] = []
    specs: list[DramSpec] = []
    for r in np.flatnonzero(model == MODEL_DRAM):
        ci = int(tg.dram_index[r])
        if ci >= len(dram_configs):
            raise SimInputError(f"resource {tg.resource_names[r]!r}: dram_index {ci} but only "
                                f"{len(dram_configs)} dram_configs given")
        res_inst[r] = len(insts)
        specs.append(dram_configs[ci])
        insts.append(resolve(dram_configs[ci], ring_capacity=int(tg.resource_capacity[r])))
    kind = np.ascontiguousarray(tg.kind, np.int8)
    any_mem, uniform = _graph_facts(kind, np.ascontiguousarray(tg.priority, np.int32))
    # the calendar loop takes graphs with one priority and no memory task on a DRAM
    # resource whose ids and edge offsets fit its int32 fields
    ok = uniform and tg.dep_idx.size < 2**31 - 1 and T < 2**31 - 1
    if ok and any_mem and insts:
        ok = not np.any((kind > 0) & (res >= 0) & (model[np.maximum(res, 0)] == MODEL_DRAM))
    if ok:
        # the common case: calendar queue (sim/engine_bucket.py), same results; the
        # packing pass gives up at the first effective duration >= MAX_BUCKETS. Big
        # arrays allocated by numpy: huge pages (see taskgraph.successors_csr)
        succ_ptr, succ_idx = tg.successors
        rate = np.where(model == MODEL_BANDWIDTH, tg.bytes_per_cycle * tg.efficiency, 0.0)
        tt = np.empty(T + 1, np.int64)
        aside = np.empty(2 * T, np.int64)  # written only for rare tasks (pack_bucket)
        ok, max_dur, rcount, busy = pack_bucket(
            res, np.ascontiguousarray(tg.duration, np.int64), kind,
            np.ascontiguousarray(tg.mem_bytes, np.int64), np.ascontiguousarray(rate, np.float64),
            dep_ptr, succ_ptr, R, tt, aside)
    if ok:
        start = np.empty(T if record_task_times else 1, np.int64)
        end = np.empty(T if record_task_times else 1, np.int64)
        makespan, finished, op_s, op_e = kernel_bucket(
            tt, aside, succ_idx, np.ascontiguousarray(tg.op_index, np.int32), rcount, cap,
            len(tg.op_names), bucket_count(max_dur), record_task_times,
            np.empty(4 * (T + 8), np.int32), start, end)
        events = finished
    else:
        makespan, finished, events, busy, start, end, op_s, op_e = _run_heap(
            tg, res, cap, dep_ptr, res_inst, insts, specs, any_mem, record_task_times)
    if finished != T:
        raise SimInputError(f"only {finished} of {T} tasks finished (dependency cycle?)")
    # action totals do not depend on timing: one vectorised pass (bincount adds in input
    # order in float64, as np.add.at does: the same sums bit for bit, ~2x faster)
    n_comp, n_act = len(tg.component_names), len(tg.action_names)
    acts: np.ndarray = np.zeros((n_comp, n_act), np.float64)
    if tg.act_count.size:
        flat = tg.act_component.astype(np.int64) * n_act + tg.act_action
        acts = np.bincount(flat, weights=tg.act_count,
                           minlength=n_comp * n_act).reshape(n_comp, n_act)
    ncmd = K.N_CMD
    cmds = np.zeros((R, ncmd), np.int64)
    extra = np.zeros((5, R), np.int64)
    for r in np.flatnonzero(res_inst >= 0):
        st = insts[res_inst[r]].stats
        cmds[r] = st[:ncmd]
        extra[:, r] = st[K.S_HIT:K.S_WBYTES + 1]
    return SimStats(
        makespan_cycles=int(makespan), busy_cycles=busy,
        task_start=start if record_task_times else None,
        task_end=end if record_task_times else None,
        op_start_cycles=op_s, op_end_cycles=op_e, action_totals=acts, events=int(events),
        dram_command_counts=cmds, dram_row_hits=extra[0], dram_row_misses=extra[1],
        dram_row_conflicts=extra[2], dram_read_bytes=extra[3], dram_write_bytes=extra[4],
        clock_hz=tg.clock_hz,
    )


_guard_cache(_kernel_plain)  # stale cross-file cache entries (sim/jitcache.py)
