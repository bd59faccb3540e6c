"""Calendar-queue event loop: the fast path of :func:`sim.run` for plain task graphs.

Used when the graph has no DRAM resource, every task has the same priority and every
(effective) duration is below :data:`MAX_BUCKETS`. Same semantics as the heap loop in
:mod:`sim.engine` (the module docstring there), and the same results bit for bit:

* With equal priorities, events leave in ``(time, sequence)`` order. Every finish is
  pushed at ``now + d`` with ``0 <= d < W`` (``W``, a power of two above the longest
  duration), so the pending times lie in ``[now, now + W)`` and bucket ``time % W`` holds
  events of one time only. A FIFO list per bucket is then exactly sequence order, and a
  bitmap over the buckets (``ctz``) finds the next non-empty one: O(1) per event, no
  comparisons (the binary heap cost ~28 ns per event of data-dependent branches).
* Work is carried instead of looked up: when a task becomes ready its row of the task
  table is in cache (its in-degree was just decremented), so its duration, successor
  range and op are copied into the resource queue entry and then into the event slot.
  The task table is not read again at start or finish (on a 1M-task graph those reads
  were cache misses, ~3 per task).
* Software prefetches hide the remaining misses: a task's successor list when it
  starts (it is read when it finishes, ~20 events later) and, for a queued task, already
  when it is 4 places from its queue's head (most tasks of a busy resource start from
  the queue); the task-table rows of the successors of the task started 1 start ago
  (their in-degree is decremented when it finishes; the first four successor slots,
  read branch-free); the resource queue 16 entries ahead. Distances tuned on
  ``benchmarks/bench_sim.py`` (1M tasks: ~190 -> ~70 ns per event with the above; the
  queue-ahead successor list let the row prefetch move from 2 starts to 1: +4-5 %).
* With ``record``, a task's start cycle is stored when it starts (tasks start roughly in
  id order, so the store's line is mostly in cache) and its end is ``start + duration``
  after the loop (a task holds its slot exactly its duration). Was: finishes logged to
  three work arrays that Numba allocated on every call (page faults) and scattered to
  start and end after the loop; 1M tasks 15 -> 19 M events/CPU-s.
* One 8-byte word per task (:data:`ROW_FIELDS`: in-degree, resource, duration and first
  successor as bit fields; the rare in-degree >= 255 or resource >= 254 in a side array
  read only for those tasks): eight tasks per cache line and half the bytes of the
  earlier four int32 columns. On 1M tasks the tasks in flight span ~300k ids, so the
  table's working set decides how many successor rows miss L2 (loop 46 -> 42 ns per
  event; a 32-byte row costs 56-59).
* Flat arrays with constant row widths (``ev[8 * slot + c]``) and unsigned indices (``_U``): Numba then emits neither a stride multiply (a 2-D array's
  row width is a run-time value) nor the negative-index wrap-around fix-up on each
  access, and the loop keeps its state in registers (the 2-D version spilled the array
  shapes to the stack): 38 -> 31 ns per event in cache (10k tasks).
* Nothing per event that follows from the durations alone: with no DRAM a task holds
  its slot exactly its duration, so busy cycles are summed while packing
  (:func:`pack_bucket`), and starts / finishes leave in time order, so an op's first
  start is set once and its last finish is a plain store (single-op graphs: the
  makespan, after the loop).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from archsim.sim.intrinsics import ctz, prefetch
from archsim.sim.jitcache import guard as _guard_cache

#: largest bucket count (a graph with a longer duration uses the heap loop)
MAX_BUCKETS = 1 << 16
_PF_LAG = 1  # prefetch successor rows of the task started this many starts ago
_PF_QUEUE = 16  # prefetch the resource queue this many entries ahead
_PF_QSUCC = 4  # prefetch the successor list of the queue entry this many ahead
_RING = 16  # ring of recent successor ranges (power of two > _PF_LAG)
_U = np.uintp  # array index type: unsigned, so Numba adds no wrap-around fix-up
#: task table word (int64): bits 0-7 in-degree, 8-15 resource + 1, 16-31 duration,
#: 32-63 first successor index; an in-degree >= DEG_ASIDE and a resource >= RES_ASIDE
#: are kept in a side array (the field then holds DEG_ASIDE / RES_ASIDE + 1)
ROW_FIELDS = ("in-degree:8", "resource+1:8", "duration:16", "first successor:32")
DEG_ASIDE = 255
RES_ASIDE = 254


def bucket_count(max_duration: int) -> int:
    """Power-of-two bucket count W > ``max_duration`` (at least 64, one bitmap word)."""
    return 1 << max(6, int(max_duration).bit_length())


@njit(cache=True)
def pack_bucket(resource, duration, kind, mem_bytes, rate, dep_ptr, succ_ptr, n_res, tt,
                aside):
    """Fill the task table ``tt`` of :func:`kernel_bucket` if the graph qualifies for it.

    The caller checked one priority and no memory task on a DRAM resource; this pass
    computes the effective durations (a memory task on a bandwidth resource takes
    ``ceil(mem_bytes / rate - 1e-9)`` cycles, the same float64 operations as the heap
    path) and gives up at the first one >= :data:`MAX_BUCKETS` or a memory task without
    a bandwidth rate (``ok`` False; ``tt`` then holds garbage).

    Args:
        resource, duration, kind, mem_bytes: per task, as in
            :class:`sim.taskgraph.TaskGraph`.
        rate: per resource, bytes per cycle x efficiency of a bandwidth memory, 0.0 for
            every other resource.
        dep_ptr: predecessor CSR offsets (in-degree = ``dep_ptr[t + 1] - dep_ptr[t]``).
        succ_ptr: successor CSR offsets (:attr:`sim.taskgraph.TaskGraph.successors`),
            below 2**31.
        n_res: number of resources.
        tt: output, int64, T + 1 words, one per task (8 bytes: see :data:`ROW_FIELDS`);
            word T holds ``succ_ptr[T]``, so the successors of t end at word t + 1's.
        aside: int64 work array of 2 T entries: ``aside[2 t]`` the in-degree of a task
            with >= :data:`DEG_ASIDE` predecessors, ``aside[2 t + 1]`` the resource of a
            task on resource >= :data:`RES_ASIDE` (written only for those tasks).

    Returns:
        ``(ok, max_duration, rcount, busy)``: tasks per resource; per resource the sum of
        its tasks' effective durations (= their busy slot-cycles: no DRAM on this path).
    """
    T = resource.shape[0]
    rcount = np.zeros(n_res + 1, np.int64)  # index r + 1 (0: tasks without a resource)
    busy = np.zeros(n_res + 1, np.int64)
    max_d = 0
    for t in range(T):
        r = resource[t]
        d = duration[t]
        if kind[t] > 0:  # a memory task: on a bandwidth resource (DRAM: the heap loop)
            rt = rate[r]
            if rt <= 0.0:
                return False, max_d, rcount[1:], busy[1:]
            d = np.int64(math.ceil(mem_bytes[t] / rt - 1e-9))
        if d >= MAX_BUCKETS:
            return False, max_d, rcount[1:], busy[1:]
        max_d = max(max_d, d)
        deg = dep_ptr[t + 1] - dep_ptr[t]
        if deg >= DEG_ASIDE:
            aside[2 * t] = deg
            deg = DEG_ASIDE
        rf = r + 1
        if r >= RES_ASIDE:
            aside[2 * t + 1] = r
            rf = RES_ASIDE + 1
        tt[t] = deg | (rf << 8) | (d << 16) | (succ_ptr[t] << 32)
        rcount[r + 1] += 1
        busy[r + 1] += d
    tt[T] = succ_ptr[T] << 32
    return True, max_d, rcount[1:], busy[1:]


@njit(cache=True)
def kernel_bucket(tt, aside, succ, op_index, rcount, res_cap, n_ops, W, record, qbuf, start,
                  end):
    """Event loop over the task table ``tt`` of :func:`pack_bucket`.

    Args:
        tt: task table words of :func:`pack_bucket`; their in-degree fields are consumed.
        aside: the side array of :func:`pack_bucket` (its in-degrees are consumed).
        succ: successors in CSR order (``tt[t] >> 32 : tt[t + 1] >> 32``), followed by at
            least 4 padding entries in ``[0, T]`` (read by the prefetches).
        op_index: op of each task (read only when ``n_ops > 1``).
        rcount: tasks per resource.
        res_cap: slots per resource.
        n_ops: number of ops.
        W: bucket count, a power of two > every duration in the table.
        record: fill per-task start / end cycles.
        qbuf: int32 work array, at least 4 x (tasks with a resource + 1 + ``_PF_QSUCC``)
            entries (the resource queues; the prefetches read past the last one).
        start, end: outputs, T entries each when ``record`` (else unused).

    The big arrays come from the caller: numpy allocates them (huge pages, see
    :func:`sim.taskgraph.successors_csr`).

    Returns:
        ``(makespan, finished, op_start, op_end)`` as in :func:`sim.engine._kernel`.
    """
    T = tt.shape[0] - 1
    wide = n_ops > 1
    R = res_cap.shape[0]
    # per-resource FIFO queues as segments of one array (each task queues at most
    # once); an entry carries (task, duration, succ_lo, succ_hi), its op in qop
    qh = np.empty(R, np.int64)
    acc = 0
    for r in range(R):
        qh[r] = acc
        acc += rcount[r]
    qt = qh.copy()
    qop = np.empty(acc + 1 if wide else 1, np.int64)
    free = res_cap.astype(np.int64)
    op_start = np.full(n_ops, -1, np.int64)
    op_end = np.full(n_ops, -1, np.int64)
    # calendar: bucket b = time & mask holds a FIFO list of event slots (bh head, bt
    # tail, linked through field 3); bit b of bm is set while bucket b is non-empty
    mask = W - 1
    wmask = (W >> 6) - 1
    bh = np.full(W, -1, np.int64)
    bt = np.zeros(W, np.int64)
    bm = np.zeros(W >> 6, np.int64)
    # event slots ev[8 * slot + c]: (resource, succ_lo, succ_hi, next, -, -, op);
    # freed slots are reused first (a free list through field 3), so the live ones stay
    # in cache
    ev = np.empty(8 * (T + 1), np.int64)
    fhead = -1
    nslot = 0
    ring = np.zeros(_RING, np.int64)
    pending = 0
    ri = 0
    finished = 0
    now = 0
    # ready work of the current event: the resource whose queue head starts (or -1),
    # then successors in ascending id; t0 scans the initial roots in id order
    t0 = 0
    head_r = -1
    k_lo = 0
    k_hi = 0
    while True:
        # ---- make this event's ready tasks ready at `now` (FIFO per resource)
        while True:
            op = 0
            if head_r >= 0:
                # a finish freed a slot of r (kept reserved): its queue head starts
                r = head_r
                head_r = -1
                q = qh[_U(r)]
                qh[_U(r)] = q + 1
                prefetch(qbuf, 4 * (q + _PF_QUEUE))
                prefetch(succ, qbuf[_U(4 * (q + _PF_QSUCC) + 2)])  # qbuf is padded
                task = qbuf[_U(4 * q)]
                d = qbuf[_U(4 * q + 1)]
                lo = qbuf[_U(4 * q + 2)]
                hi = qbuf[_U(4 * q + 3)]
                if wide:
                    op = qop[_U(q)]
            else:
                if k_lo < k_hi:
                    task = succ[_U(k_lo)]
                    k_lo += 1
                    w = tt[_U(task)]
                    c = w & 255
                    if c == DEG_ASIDE:  # >= 255 predecessors: counted in the side array
                        c = aside[_U(2 * task)] - 1
                        aside[_U(2 * task)] = c
                    else:
                        tt[_U(task)] = w - 1
                        c -= 1
                    if c != 0:
                        continue
                elif t0 < T:
                    task = t0
                    t0 += 1
                    w = tt[_U(task)]
                    if w & 255 != 0:
                        continue
                else:
                    break
                r = ((w >> 8) & 255) - 1
                if r == RES_ASIDE:
                    r = aside[_U(2 * task + 1)]
                d = (w >> 16) & 0xFFFF
                lo = w >> 32
                hi = tt[_U(task + 1)] >> 32
                if wide:
                    op = op_index[_U(task)]
                if r >= 0:
                    # a free slot implies an empty queue (a freed slot goes to the head)
                    if free[_U(r)] <= 0:
                        q = qt[_U(r)]
                        qt[_U(r)] = q + 1
                        qbuf[_U(4 * q)] = task
                        qbuf[_U(4 * q + 1)] = d
                        qbuf[_U(4 * q + 2)] = lo
                        qbuf[_U(4 * q + 3)] = hi
                        if wide:
                            qop[_U(q)] = op
                        continue
                    free[_U(r)] -= 1
            # ---- start: push the finish event at now + d (0 <= d < W)
            if fhead >= 0:
                slot = fhead
                fhead = ev[_U(8 * slot + 3)]
            else:
                slot = nslot
                nslot += 1
            e = 8 * slot
            ev[_U(e)] = r
            ev[_U(e + 1)] = lo
            ev[_U(e + 2)] = hi
            ev[_U(e + 3)] = -1
            if record:
                start[_U(task)] = now
            if wide:
                ev[_U(e + 6)] = op
                if op_start[_U(op)] < 0:  # starts come in time order: the first is the min
                    op_start[_U(op)] = now
            b = (now + d) & mask
            if bh[_U(b)] < 0:
                bh[_U(b)] = slot
                bm[_U(b >> 6)] |= np.int64(1) << (b & 63)
            else:
                ev[_U(8 * bt[_U(b)] + 3)] = slot
            bt[_U(b)] = slot
            # prefetch this task's successor list, and the rows of the successors of
            # the task started _PF_LAG starts ago (its list has arrived by now)
            pending += 1
            prefetch(succ, lo)
            ring[_U(ri & (_RING - 1))] = lo
            k = ring[_U((ri - _PF_LAG) & (_RING - 1))]
            ri += 1
            # first four successors, branch-free (succ is padded: reading past a
            # short list prefetches the rows of the next task's successors)
            prefetch(tt, succ[_U(k)])
            prefetch(tt, succ[_U(k + 1)])
            prefetch(tt, succ[_U(k + 2)])
            prefetch(tt, succ[_U(k + 3)])
        if pending == 0:
            break  # every task finished (or a dependency cycle left some unreachable)
        # ---- next event: the first non-empty bucket at or after now (circularly)
        cur = now & mask
        w = cur >> 6
        x = bm[_U(w)] & (np.int64(-1) << (cur & 63))
        while x == 0:
            w = (w + 1) & wmask
            x = bm[_U(w)]
        b = (w << 6) | ctz(x)
        now += (b - cur) & mask
        slot = bh[_U(b)]
        e = 8 * slot
        nx = ev[_U(e + 3)]
        bh[_U(b)] = nx
        if nx < 0:
            bm[_U(w)] &= ~(np.int64(1) << (b & 63))
        r = ev[_U(e)]
        k_lo = ev[_U(e + 1)]
        k_hi = ev[_U(e + 2)]
        # ---- task finish
        if wide:
            op_end[_U(ev[_U(e + 6)])] = now  # finishes come in time order: the last is the max
        ev[_U(e + 3)] = fhead
        fhead = slot
        pending -= 1
        finished += 1
        if r >= 0:
            if qh[_U(r)] < qt[_U(r)]:
                head_r = r  # the freed slot goes to the queue head
            else:
                free[_U(r)] += 1
    if not wide and finished > 0:
        # one op: the first root starts at 0 (its resource is free), the last finish is now
        op_start[0] = 0
        op_end[0] = now
    if record:  # a task holds its slot exactly its duration (no DRAM on this path)
        for t in range(T):
            end[t] = start[t] + ((tt[t] >> 16) & 0xFFFF)
    makespan = now if finished > 0 else 0
    return makespan, finished, op_start, op_end


_guard_cache(kernel_bucket)  # stale cross-file cache entries (sim/jitcache.py)
