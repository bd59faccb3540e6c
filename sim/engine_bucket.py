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
  starts (it is read when it finishes, ~20 events later), the task-table rows of the
  successors of the task started 2 starts ago (their in-degree is decremented when it
  finishes), and the resource queue 16 entries ahead. Distances tuned on
  ``benchmarks/bench_sim.py`` (1M tasks: ~190 -> ~70 ns per event with the above).
* With ``record``, finishes are logged in order and scattered to per-task arrays after
  the loop (sequential stores in the loop instead of two random ones per event).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from archsim.sim.intrinsics import ctz, prefetch, prefetch2

#: largest bucket count (a graph with a longer duration uses the heap loop)
MAX_BUCKETS = 1 << 16
_PF_LAG = 2  # prefetch successor rows of the task started this many starts ago
_PF_QUEUE = 16  # prefetch the resource queue this many entries ahead
_RING = 16  # ring of recent successor ranges (power of two > _PF_LAG)


def bucket_count(max_duration: int) -> int:
    """Power-of-two bucket count W > ``max_duration`` (at least 64, one bitmap word)."""
    return 1 << max(6, int(max_duration).bit_length())


@njit(cache=True)
def kernel_bucket(tt, succ, rcount, res_cap, n_ops, W, record):
    """Event loop over the task table ``tt`` (layout in :func:`sim.engine._pack`).

    Args:
        tt: (T + 1, 4 or 6) task table; column 0 (in-degree) is consumed.
        succ: successors in CSR order (``tt[t, 3]:tt[t + 1, 3]``), followed by at
            least 2 padding entries in ``[0, T]`` (read by the prefetches).
        rcount: tasks per resource.
        res_cap: slots per resource.
        n_ops: number of ops (column 5 of a 6-column table, else op 0).
        W: bucket count, a power of two > every duration in ``tt[:, 2]``.
        record: return per-task start / end cycles.

    Returns:
        (makespan, finished, events, busy, start, end, op_start, op_end) as in
        :func:`sim.engine._kernel`.
    """
    T = tt.shape[0] - 1
    wide = tt.shape[1] > 4  # op column exists
    R = res_cap.shape[0]
    # per-resource FIFO queues as segments of one array (each task queues at most
    # once); an entry carries (task, duration, succ_lo, succ_hi, op)
    qh = np.empty(R, np.int64)
    acc = 0
    for r in range(R):
        qh[r] = acc
        acc += rcount[r]
    qt = qh.copy()
    qbuf = np.empty((max(acc, 1), 5 if wide else 4), tt.dtype)
    free = res_cap.astype(np.int64).copy()
    busy = np.zeros(R, np.int64)
    op_start = np.full(n_ops, -1, np.int64)
    op_end = np.full(n_ops, -1, np.int64)
    lg_task = np.empty(T if record else 1, tt.dtype)
    lg_start = np.empty(T if record else 1, np.int64)
    lg_end = np.empty(T if record else 1, np.int64)
    # calendar: bucket b = time & mask holds a FIFO list of event slots (bh head, bt
    # tail, linked through column 5); bit b of bm is set while bucket b is non-empty
    mask = W - 1
    wmask = (W >> 6) - 1
    bh = np.full(W, -1, np.int64)
    bt = np.zeros(W, np.int64)
    bm = np.zeros(W >> 6, np.int64)
    # event slots (task, start, resource, succ_lo, succ_hi, next, op); freed slots are
    # reused first (a free list through column 5), so the live ones stay in cache
    ev = np.empty((T + 1, 8), np.int64)
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
                # a finish freed a slot of r (already reserved): its queue head starts
                r = head_r
                head_r = -1
                q = qh[r]
                qh[r] = q + 1
                prefetch2(qbuf, q + _PF_QUEUE, 0)
                task = qbuf[q, 0]
                d = qbuf[q, 1]
                lo = qbuf[q, 2]
                hi = qbuf[q, 3]
                if wide:
                    op = qbuf[q, 4]
            else:
                if k_lo < k_hi:
                    task = succ[k_lo]
                    k_lo += 1
                    tt[task, 0] -= 1
                    if tt[task, 0] != 0:
                        continue
                elif t0 < T:
                    task = t0
                    t0 += 1
                    if tt[task, 0] != 0:
                        continue
                else:
                    break
                r = tt[task, 1]
                d = tt[task, 2]
                lo = tt[task, 3]
                hi = tt[task + 1, 3]
                if wide:
                    op = tt[task, 5]
                if r >= 0:
                    if free[r] <= 0 or qh[r] < qt[r]:
                        q = qt[r]
                        qt[r] = q + 1
                        qbuf[q, 0] = task
                        qbuf[q, 1] = d
                        qbuf[q, 2] = lo
                        qbuf[q, 3] = hi
                        if wide:
                            qbuf[q, 4] = op
                        continue
                    free[r] -= 1
            # ---- start: push the finish event at now + d (0 <= d < W)
            if fhead >= 0:
                slot = fhead
                fhead = ev[slot, 5]
            else:
                slot = nslot
                nslot += 1
            ev[slot, 0] = task
            ev[slot, 1] = now
            ev[slot, 2] = r
            ev[slot, 3] = lo
            ev[slot, 4] = hi
            ev[slot, 5] = -1
            ev[slot, 6] = op
            b = (now + d) & mask
            if bh[b] < 0:
                bh[b] = slot
                bm[b >> 6] |= np.int64(1) << (b & 63)
            else:
                ev[bt[b], 5] = slot
            bt[b] = slot
            # prefetch this task's successor list, and the rows of the successors of
            # the task started _PF_LAG starts ago (its list has arrived by now)
            pending += 1
            prefetch(succ, lo)
            ring[ri & (_RING - 1)] = lo
            k = ring[(ri - _PF_LAG) & (_RING - 1)]
            ri += 1
            # first two successors, branch-free (succ is padded: reading past a
            # short list only prefetches an unrelated row)
            prefetch2(tt, succ[k], 0)
            prefetch2(tt, succ[k + 1], 0)
        if pending == 0:
            break  # every task finished (or a dependency cycle left some unreachable)
        # ---- next event: the first non-empty bucket at or after now (circularly)
        cur = now & mask
        w = cur >> 6
        x = bm[w] & (np.int64(-1) << (cur & 63))
        while x == 0:
            w = (w + 1) & wmask
            x = bm[w]
        b = (w << 6) | ctz(x)
        now += (b - cur) & mask
        slot = bh[b]
        nx = ev[slot, 5]
        bh[b] = nx
        if nx < 0:
            bm[w] &= ~(np.int64(1) << (b & 63))
        task = ev[slot, 0]
        st_ = ev[slot, 1]
        r = ev[slot, 2]
        k_lo = ev[slot, 3]
        k_hi = ev[slot, 4]
        op = ev[slot, 6]
        ev[slot, 5] = fhead
        fhead = slot
        pending -= 1
        # ---- task finish
        if record:
            lg_task[finished] = task
            lg_start[finished] = st_
            lg_end[finished] = now
        finished += 1
        if op_start[op] < 0 or st_ < op_start[op]:
            op_start[op] = st_
        if now > op_end[op]:
            op_end[op] = now
        if r >= 0:
            busy[r] += now - st_
            free[r] += 1
            if qh[r] < qt[r]:
                free[r] -= 1
                head_r = r
    start = np.zeros(1, np.int64)
    end = np.zeros(1, np.int64)
    if record:
        start = np.empty(T, np.int64)  # every entry is written (else run() raises)
        end = np.empty(T, np.int64)
        for k in range(T):  # finish order -> per task
            start[lg_task[k]] = lg_start[k]
            end[lg_task[k]] = lg_end[k]
    makespan = now if finished > 0 else 0
    return makespan, finished, finished, busy, start, end, op_start, op_end
