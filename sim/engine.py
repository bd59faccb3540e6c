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

DRAM time: the DRAM runs in its own tCK; an engine cycle ``t`` maps to DRAM cycle
``ceil(t * Pe / Pd)`` for arrivals and a completion at DRAM cycle ``c`` to engine cycle
``ceil(c * Pd / Pe)`` (Pe, Pd the clock periods, rounded to femtoseconds so the
conversion is exact integer arithmetic). DRAM wake-ups run after all other events of
the same engine cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np
from numba import njit, typed

from sim import dram_kernel as K
from sim.dram import DramSpec, resolve
from sim.errors import SimInputError
from sim.taskgraph import MODEL_BANDWIDTH, MODEL_DRAM, TaskGraph, successors_csr

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
def _push(ht, hk, hp, n, t, key, pay):
    i = n
    while i > 0:
        par = (i - 1) >> 1
        if ht[par] < t or (ht[par] == t and hk[par] < key):
            break
        ht[i], hk[i], hp[i] = ht[par], hk[par], hp[par]
        i = par
    ht[i], hk[i], hp[i] = t, key, pay
    return n + 1


@njit(cache=True, inline="always")
def _pop(ht, hk, hp, n):
    """Remove the root; returns the new size (read the root before)."""
    n -= 1
    t, key, pay = ht[n], hk[n], hp[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hk[c + 1] < hk[c])):
            c += 1
        if t < ht[c] or (t == ht[c] and key < hk[c]):
            break
        ht[i], hk[i], hp[i] = ht[c], hk[c], hp[c]
        i = c
    ht[i], hk[i], hp[i] = t, key, pay
    return n


@njit(cache=True, inline="always")
def _ceil_scale(x, num, den):
    """ceil(x * num / den) in exact integer arithmetic (x >= 0)."""
    return (x * num + den - 1) // den


# --------------------------------------------------------------------------- kernel
@njit(cache=True)
def _kernel(resource, eff_dur, is_dram, priority, op_index, mem_addr, burst_n, is_write,
            dep_ptr, dep_idx, res_cap, res_inst, n_ops, insts, pe_fs, pd_fs, record):
    T = resource.shape[0]
    R = res_cap.shape[0]
    succ_ptr, succ_idx = successors_csr(dep_ptr, dep_idx)
    indeg = np.empty(T, np.int64)
    for t in range(T):
        indeg[t] = dep_ptr[t + 1] - dep_ptr[t]
    # per-resource FIFO queues as linked lists
    q_next = np.full(T, -1, np.int64)
    q_head = np.full(R, -1, np.int64)
    q_tail = np.full(R, -1, np.int64)
    running = np.zeros(R, np.int64)
    busy = np.zeros(R, np.int64)
    start = np.zeros(T if record else 1, np.int64)
    end = np.zeros(T if record else 1, np.int64)
    op_start = np.full(n_ops, -1, np.int64)
    op_end = np.full(n_ops, -1, np.int64)
    tstart = np.zeros(T, np.int64)
    # DRAM streams (indexed by task id) and wake-ups (kept outside the heap)
    ni = len(insts)
    ns = T if ni > 0 else 1
    s_addr = np.zeros(ns, np.int64)
    s_left = np.zeros(ns, np.int64)
    s_out = np.zeros(ns, np.int64)
    s_write = np.zeros(ns, np.int64)
    s_end = np.zeros(ns, np.int64)
    done_buf = np.zeros(ns, np.int64)
    wake_t = np.full(max(ni, 1), INF_T, np.int64)
    pending_wake = np.zeros(max(ni, 1), np.int64)
    # event heap: at most one finish event per task
    ht = np.empty(T + 1, np.int64)
    hk = np.empty(T + 1, np.int64)
    hp = np.empty(T + 1, np.int64)
    hn = 0
    seq = 0
    # tasks to make ready at the current cycle; -1 - r = "start the queue head of r"
    ready = np.empty(T + R + 1, np.int64)
    nready = 0
    for t in range(T):
        if indeg[t] == 0:
            ready[nready] = t
            nready += 1
    finished = 0
    events = 0
    now = 0
    makespan = 0
    while True:
        # ---- make the collected tasks ready at `now` (FIFO per resource)
        for idx in range(nready):
            task = ready[idx]
            if task < 0:
                r = -1 - task
                task = q_head[r]
                q_head[r] = q_next[task]
                if q_head[r] < 0:
                    q_tail[r] = -1
            else:
                r = resource[task]
                if r >= 0 and (running[r] >= res_cap[r] or q_head[r] >= 0):
                    if q_tail[r] < 0:
                        q_head[r] = task
                    else:
                        q_next[q_tail[r]] = task
                    q_tail[r] = task
                    continue
            tstart[task] = now
            if r >= 0:
                running[r] += 1
            if r >= 0 and is_dram[task] != 0 and burst_n[task] > 0:
                i = res_inst[r]
                s_addr[task] = mem_addr[task]
                s_left[task] = burst_n[task]
                s_write[task] = is_write[task]
                a = _ceil_scale(now, pe_fs[i], pd_fs[i])
                s_end[task] = a
                K.activate(insts[i], task, s_addr, s_left, s_out, s_write, a)
                pending_wake[i] = 1
            else:
                hn = _push(ht, hk, hp, hn, now + eff_dur[task],
                           ((priority[task] + _PRIO_BIAS) << _SEQ_BITS) | seq, task)
                seq += 1
        nready = 0
        # ---- DRAM wake-ups touched since the last event
        for i in range(ni):
            if pending_wake[i] != 0:
                pending_wake[i] = 0
                nt = K.next_time_inst(insts[i])
                et = INF_T
                if nt < K.INF:
                    et = (nt * pd_fs[i]) // pe_fs[i]
                    if et < now:
                        et = now
                wake_t[i] = et
        if finished == T:
            break
        # ---- next event: the earliest wake-up strictly before the heap top, else the top
        wi = -1
        wt = ht[0] if hn > 0 else INF_T
        for i in range(ni):
            if wake_t[i] < wt or (hn == 0 and wake_t[i] < INF_T and wi < 0):
                wt = wake_t[i]
                wi = i
        if wi < 0 and hn == 0:
            break
        events += 1
        if wi >= 0:
            # DRAM wake-up: issue every command of engine cycle `now`
            now = wt
            i = wi
            until = _ceil_scale(now + 1, pe_fs[i], pd_fs[i])
            nd = K.advance(insts[i], until, s_addr, s_left, s_out, s_write, s_end, done_buf)
            for j in range(nd):
                task = done_buf[j]
                et = _ceil_scale(s_end[task], pd_fs[i], pe_fs[i])
                if et < now:
                    et = now
                hn = _push(ht, hk, hp, hn, et,
                           ((priority[task] + _PRIO_BIAS) << _SEQ_BITS) | seq, task)
                seq += 1
            pending_wake[i] = 1
            continue
        now = ht[0]
        task = hp[0]
        hn = _pop(ht, hk, hp, hn)
        # ---- task finish
        finished += 1
        if now > makespan:
            makespan = now
        st = tstart[task]
        if record:
            start[task] = st
            end[task] = now
        op = op_index[task]
        if op_start[op] < 0 or st < op_start[op]:
            op_start[op] = st
        if now > op_end[op]:
            op_end[op] = now
        r = resource[task]
        if r >= 0:
            busy[r] += now - st
            running[r] -= 1
            if q_head[r] >= 0:
                ready[nready] = -1 - r
                nready += 1
        for k in range(succ_ptr[task], succ_ptr[task + 1]):
            s = succ_idx[k]
            indeg[s] -= 1
            if indeg[s] == 0:
                ready[nready] = s
                nready += 1
    return makespan, finished, events, busy, start, end, op_start, op_end


_EMPTY_INST_TYPE = None


def _inst_list(insts: list) -> typed.List:
    global _EMPTY_INST_TYPE
    if insts:
        lst = typed.List()
        for x in insts:
            lst.append(x)
        return lst
    if _EMPTY_INST_TYPE is None:
        from sim.dram import dram_preset

        _EMPTY_INST_TYPE = numba.typeof(resolve(dram_preset("DDR4-2400"), 1))
    return typed.List.empty_list(_EMPTY_INST_TYPE)


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
    res = tg.resource.astype(np.int64)
    rmodel = np.where(res >= 0, model[np.maximum(res, 0)] if R else -1, -1)
    mem = tg.kind > 0
    eff = tg.duration.astype(np.int64).copy()
    bw = mem & (rmodel == MODEL_BANDWIDTH)
    if np.any(bw):
        rate = (tg.bytes_per_cycle * tg.efficiency)[res[bw]]
        eff[bw] = np.ceil(tg.mem_bytes[bw] / rate - 1e-9).astype(np.int64)
    is_dram = mem & (rmodel == MODEL_DRAM)
    res_inst = np.full(R, -1, np.int64)
    insts, pe_fs, pd_fs = [], [], []
    burst_n = np.zeros(T, np.int64)
    for r in np.flatnonzero(model == MODEL_DRAM):
        ci = int(tg.dram_index[r])
        if ci >= len(dram_configs):
            raise SimInputError(f"resource {tg.resource_names[r]!r}: dram_index {ci} but only "
                                f"{len(dram_configs)} dram_configs given")
        spec = dram_configs[ci]
        res_inst[r] = len(insts)
        insts.append(resolve(spec, ring_capacity=int(tg.resource_capacity[r])))
        # clock periods in femtoseconds: exact integer time conversion
        pe_fs.append(max(1, round(1e15 / tg.clock_hz)))
        pd_fs.append(max(1, round(spec.tck_ps * 1000)))
        sel = is_dram & (res == r)
        bb = spec.burst_bytes
        first = tg.mem_addr[sel] // bb
        last = (tg.mem_addr[sel] + tg.mem_bytes[sel] - 1) // bb
        burst_n[sel] = np.where(tg.mem_bytes[sel] > 0, last - first + 1, 0)
        eff[sel] = 0
    addr = tg.mem_addr.astype(np.int64)
    if insts:
        # align stream start to its first burst
        for r in np.flatnonzero(model == MODEL_DRAM):
            bb = dram_configs[int(tg.dram_index[r])].burst_bytes
            sel = is_dram & (res == r)
            addr[sel] = (addr[sel] // bb) * bb
    makespan, finished, events, busy, start, end, op_s, op_e = _kernel(
        res, eff, is_dram.astype(np.int64), tg.priority.astype(np.int64),
        tg.op_index.astype(np.int64), addr, burst_n, (tg.kind == 2).astype(np.int64),
        tg.dep_ptr, tg.dep_idx, tg.resource_capacity.astype(np.int64), res_inst,
        len(tg.op_names), _inst_list(insts), np.asarray(pe_fs + [1], np.int64),
        np.asarray(pd_fs + [1], np.int64), record_task_times)
    if finished != T:
        raise SimInputError(f"only {finished} of {T} tasks finished (dependency cycle?)")
    # action totals do not depend on timing: one vectorised pass
    acts = np.zeros((len(tg.component_names), len(tg.action_names)), np.float64)
    if tg.act_count.size:
        np.add.at(acts, (tg.act_component, tg.act_action), tg.act_count)
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
