"""Numba core of the command-level DRAM model.

Everything here reads plain arrays that :func:`sim.dram.resolve` builds once in Python
(tables resolved, state zeroed) and stores in a :class:`DramInst` named tuple. Entry
points (:func:`advance`, :func:`run_trace`, :func:`earliest_inst`, :func:`issue_inst`,
:func:`activate`, :func:`next_time_inst`) unpack it once; internal helpers take the
arrays explicitly. Times are DRAM clock cycles (tCK), int64.

Node numbering: level 0 = channels ``[0, C)``, level 1 = ranks, level 2 = bank groups,
level 3 = banks, each flattened (``bank = ((ch * RK + ra) * G + bg) * B + ba``) and
offset by ``tab[T_LVL, level]`` in ``nx`` (earliest issue time per node and command).

Controller (per channel, event-driven; the exact equivalent of a one-command-per-cycle
FR-FCFS controller): among all candidate commands the smallest earliest issue time
wins; ties break by class (refresh work 0 < row-hit column 1 < ACT/PRE for a request 2
< closed-page precharge 3), then by age (oldest first). A request proposes RD/WR when
its row is open, ACT when its bank is closed, PRE when another row is open and no
queued request hits it.

Speed (``benchmarks/bench_sim.py``; history in ``sim/STATUS.md``): every queued request
sits in its bank's list (oldest first), and each bank keeps its oldest read and oldest
write hitting the open row, so a decision looks at the banks with queued requests (at
most two candidates each) instead of every request; a tournament tree over the channels
finds the next command in O(log C) and only changed channels are re-decided; the next
burst of each active stream is decoded once (shifts and masks for power-of-two
organisations); a freed queue slot wakes only the first stream (in activation order)
waiting for that channel - the only stream that can move, since after every feed each
waiting stream waits for a full channel. ``tests/sim/test_dram_equivalence.py`` checks
that these choices equal those of the plain rescanning controller
(``tests/sim/sim_legacy_dram.py``) on random traces.

The module is over 600 lines on purpose: the controller's hot path is one function
(``_core``), because in Numba a call that passes several arrays costs more than the work.

:func:`issue` / :func:`issue_inst` update timing and open rows only, not the controller's
queues: use one :class:`DramInst` either for direct command issue (``DramState``, PIM
models) or for the request controller, not both.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

INF = 2**62

# command ids (mirror sim.dram_presets.COMMANDS)
C_ACT, C_PRE, C_RD, C_WR, C_REF, C_PREA, C_ACTAB = 0, 1, 2, 3, 4, 5, 6
N_CMD = 10

# p: scalar parameters
P_CH, P_RK, P_BG, P_BA, P_ROW, P_BPR, P_BB, P_RLAT, P_WLAT, P_REFI = range(10)
P_REFRESH, P_POLICY, P_QDEPTH, P_RING, P_NWC, P_MAXW = range(10, 16)
P_POW2, P_BBSHIFT = 16, 17  # 1 when every address field count is a power of two
N_P = 24
# tab rows (small tables, width 16)
T_AFIELD, T_ACOUNT, T_LVL, T_FAN, T_SCOPE, T_ASHIFT = range(6)
N_TAB = 6
# con rows (one column per constraint, grouped by preceding command via con_ptr)
K_LEVEL, K_NEXT, K_LAT, K_WIN, K_WSLOT = range(5)
# bst rows (per bank): open row (-1: precharged), queued requests hitting the open row
B_OPEN, B_HITS = 0, 1
# q[channel, slot, field]: request queue slots; a queued request is in its bank's list
# (Q_NEXT/Q_PREV, oldest first), a free slot in the channel's free list (Q_NEXT)
Q_BANK, Q_RK, Q_GN, Q_RA, Q_BG, Q_BA, Q_ROW, Q_WRITE, Q_AGE, Q_SRC, Q_FLAGS = range(11)
Q_NEXT, Q_PREV = 11, 12
N_QF = 13
# chs[channel, field]: cached decision, queue size, streams waiting for a slot, free
# slot list head, number of banks with queued requests (listed in chb[channel, :])
H_T, H_CMD, H_SLOT, H_RA, H_BG, H_BA, H_DIRTY, H_COUNT, H_NWAIT, H_FREE, H_NBANK = range(11)
N_HF = 11
# bk[bank, field]: request list head/tail, oldest queued read / write hitting the open
# row (-1: none), position in chb, flat rank and bank-group ids (static)
BK_HEAD, BK_TAIL, BK_RDH, BK_WRH, BK_POS, BK_RK, BK_N1, BK_N2 = range(8)
N_BKF = 8
# sched: channels to re-decide (sched[0:misc[M_NDIRTY]]), then a tournament tree over the
# channels' decided times (node i at sched[SCHED_TREE + i], leaves at + CP + channel),
# so the next command is found in O(log C) instead of a pass over every channel
# ring[slot, field]: active streams as a linked list in activation order; R_CH..R_ROW
# hold the decoded next burst, R_WAIT the channel it waits for (-1: not waiting)
R_SID, R_NEXT, R_PREV, R_WAIT, R_CH, R_RA, R_BG, R_BA, R_ROW = range(9)
N_RF = 9
# misc
M_NOW, M_AGE, M_RHEAD, M_RING_N, M_RTAIL, M_RFREE, M_NDIRTY, M_CP = range(8)
N_MISC = 8
# stats (after the N_CMD command counters)
S_HIT, S_MISS, S_CONFLICT, S_RBYTES, S_WBYTES = range(N_CMD, N_CMD + 5)
N_STATS = N_CMD + 5

DramInst = namedtuple(
    "DramInst",
    ["p", "tab", "con_ptr", "con", "nx", "hist", "hist_n", "bst", "ref_due", "q", "chs",
     "ring", "misc", "stats", "bk", "chb", "sched"],
)


@njit(cache=True, inline="always")
def decode(p, tab, addr):
    """Split a byte address into (channel, rank, bankgroup, bank, row, column-burst)."""
    pow2 = p[P_POW2] != 0
    idx = addr >> p[P_BBSHIFT] if pow2 else addr // p[P_BB]
    ch = ra = bg = ba = row = col = 0
    for k in range(6):  # LSB field first
        if pow2:
            v = idx & (tab[T_ACOUNT, k] - 1)
            idx >>= tab[T_ASHIFT, k]
        else:
            c = tab[T_ACOUNT, k]
            v = idx % c
            idx //= c
        f = tab[T_AFIELD, k]
        if f == 0:
            ch = v
        elif f == 1:
            ra = v
        elif f == 2:
            bg = v
        elif f == 3:
            ba = v
        elif f == 4:
            row = v
        else:
            col = v
    return ch, ra, bg, ba, row, col


@njit(cache=True, inline="always")
def _scope_index(p, scope, ch, ra, bg, ba):
    """Flat index of the addressed node at level ``scope``."""
    if scope == 0:
        return ch
    i = ch * p[P_RK] + ra
    if scope == 1:
        return i
    i = i * p[P_BG] + bg
    if scope == 2:
        return i
    return i * p[P_BA] + ba


@njit(cache=True, inline="always")
def earliest(p, tab, nx, cmd, ch, ra, bg, ba):
    """Earliest cycle at which ``cmd`` may issue to the addressed node (timing only)."""
    rk = ch * p[P_RK] + ra
    gn = rk * p[P_BG] + bg
    t = max(nx[ch, cmd], nx[tab[T_LVL, 1] + rk, cmd])
    t = max(t, nx[tab[T_LVL, 2] + gn, cmd])
    scope = tab[T_SCOPE, cmd]
    if scope == 3:
        return max(t, nx[tab[T_LVL, 3] + gn * p[P_BA] + ba, cmd])
    # wide command: every node of the finer levels under the addressed node counts
    t = nx[ch, cmd]
    sidx = _scope_index(p, scope, ch, ra, bg, ba)
    for lv in range(1, 4):
        if lv <= scope:
            t = max(t, nx[tab[T_LVL, lv] + _scope_index(p, lv, ch, ra, bg, ba), cmd])
        else:
            n = 1
            for l2 in range(scope, lv):
                n *= tab[T_FAN, l2]
            lo = tab[T_LVL, lv] + sidx * n
            for k in range(lo, lo + n):
                t = max(t, nx[k, cmd])
    return t


@njit(cache=True)
def issue(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, cmd, ch, ra, bg, ba, row, t):
    """Issue ``cmd`` at cycle ``t``: update timing, bank state and command counters.

    The caller guarantees ``t >= earliest(...)`` and state legality.
    """
    scope = tab[T_SCOPE, cmd]
    rk = ch * p[P_RK] + ra
    gn = rk * p[P_BG] + bg
    bk = gn * p[P_BA] + ba
    n1 = tab[T_LVL, 1] + rk
    n2 = tab[T_LVL, 2] + gn
    n3 = tab[T_LVL, 3] + bk
    if scope == 3:
        sidx = bk
    else:
        sidx = _scope_index(p, scope, ch, ra, bg, ba)
    # (the row update is written out here, not called: a helper taking several arrays
    # costs ~40 ns of reference counting per call in Numba, more than the update)
    for k in range(con_ptr[cmd], con_ptr[cmd + 1]):
        lv = con[K_LEVEL, k]
        n = 1
        if lv == 0:
            lo = ch
        elif lv <= scope:
            lo = n1 if lv == 1 else (n2 if lv == 2 else n3)
        else:  # a wide command constrains every node of the finer level below it
            for l2 in range(scope, lv):
                n *= tab[T_FAN, l2]
            lo = tab[T_LVL, lv] + sidx * n
        w = con[K_WIN, k]
        nxt = con[K_NEXT, k]
        lat = con[K_LAT, k]
        for node in range(lo, lo + n):
            if w <= 1:
                v = t + lat
            else:  # rolling window: the (w+1)-th waits for the oldest of the last w
                ws = con[K_WSLOT, k]
                m = hist_n[node, ws]
                hist[node, ws, m % w] = t
                hist_n[node, ws] = m + 1
                v = hist[node, ws, (m + 1) % w] + lat if m + 1 >= w else -1
            if v > nx[node, nxt]:
                nx[node, nxt] = v
    # one command per cycle on the channel's command bus
    for c in range(N_CMD):
        if nx[ch, c] < t + 1:
            nx[ch, c] = t + 1
    # bank state
    if cmd == C_ACT:
        bst[B_OPEN, sidx] = row
    elif cmd == C_PRE:
        bst[B_OPEN, sidx] = -1
    elif scope <= 2 and (cmd == C_PREA or cmd == C_REF or cmd == C_ACTAB):
        n = 1
        for l2 in range(scope, 3):
            n *= tab[T_FAN, l2]
        v = row if cmd == C_ACTAB else -1
        for b in range(sidx * n, sidx * n + n):
            bst[B_OPEN, b] = v
    stats[cmd] += 1


# ----------------------------------------------------------------------- controller
# The hot path below is one function on purpose: in Numba, calling a helper (inlined or
# not) that takes several arrays and branches costs ~40 ns of reference counting per
# call (measured: benchmarks/bench_sim.py history in sim/STATUS.md), more than the work
# itself. Helpers are used only off the hot path (refresh, closed-page precharge,
# rank-wide commands).
MODE_NEXT, MODE_ADVANCE, MODE_ACTIVATE, MODE_TRACE = 0, 1, 2, 3


@njit(cache=True)
def _refresh_pick(p, tab, nx, bst, ch, r, now):
    """Refresh work of rank ``r`` (due): PRE of the first open bank with the smallest
    earliest time, else REF; returns (time, cmd, bankgroup, bank)."""
    G, B = p[P_BG], p[P_BA]
    rk = ch * p[P_RK] + r
    bt, bcmd, bg_, ba_ = INF, -1, 0, 0
    any_open = False
    for g in range(G):
        for b in range(B):
            if bst[B_OPEN, (rk * G + g) * B + b] >= 0:
                any_open = True
                e = max(earliest(p, tab, nx, C_PRE, ch, r, g, b), now)
                if e < bt:
                    bt, bcmd, bg_, ba_ = e, C_PRE, g, b
    if not any_open:
        bt, bcmd, bg_, ba_ = max(earliest(p, tab, nx, C_REF, ch, r, 0, 0), now), C_REF, 0, 0
    return bt, bcmd, bg_, ba_


@njit(cache=True)
def _closed_pick(p, tab, nx, bst, ch, now):
    """Closed-page policy: the first open bank without queued hits with the smallest
    earliest PRE time; returns (time, rank, bankgroup, bank), time INF if none."""
    RK, G, B = p[P_RK], p[P_BG], p[P_BA]
    bt, br, bg_, ba_ = INF, 0, 0, 0
    for r in range(RK):
        for g in range(G):
            for b in range(B):
                bank = ((ch * RK + r) * G + g) * B + b
                if bst[B_OPEN, bank] >= 0 and bst[B_HITS, bank] == 0:
                    e = max(earliest(p, tab, nx, C_PRE, ch, r, g, b), now)
                    if e < bt:
                        bt, br, bg_, ba_ = e, r, g, b
    return bt, br, bg_, ba_


@njit(cache=True)
def _core(p, tab, con_ptr, con, nx, hist, hist_n, bst, ref_due, q, chs, ring, misc, stats,
          bk, chb, sched, mode, until, sid_in, now_in, s_addr, s_left, s_out, s_write, s_end,
          done_buf, arrival):
    """The controller. ``mode``:

    * MODE_NEXT: return the earliest pending command time (deciding dirty channels);
    * MODE_ADVANCE: issue every command with time < ``until``; return #streams done
      (their ids in ``done_buf``);
    * MODE_ACTIVATE: append stream ``sid_in`` at ``now_in`` and feed it; return 1, or 0
      when the ring is full;
    * MODE_TRACE: run streams ``0..len(arrival)-1`` (one burst each, ``arrival``
      sorted) to completion; return #streams done.
    """
    C, RK, G, B = p[P_CH], p[P_RK], p[P_BG], p[P_BA]
    Q, BB = p[P_QDEPTH], p[P_BB]
    l1, l2, l3 = tab[T_LVL, 1], tab[T_LVL, 2], tab[T_LVL, 3]
    refresh = p[P_REFRESH] != 0
    closed = p[P_POLICY] == 1
    pow2 = p[P_POW2] != 0
    cap = ring.shape[0]
    ndone = 0
    run_slot = -1  # ring slot whose stream is fed next
    sid_new = -1
    addr = -1
    # trace mode state
    n_tr = arrival.shape[0]
    ptr = 0
    act_batch = False
    act_now = 0
    in_batch = mode != MODE_TRACE
    if mode == MODE_ACTIVATE:
        if misc[M_RING_N] >= cap:
            return 0
        run_slot = misc[M_RFREE]  # linked and decoded below
        sid_new = sid_in
        if now_in > misc[M_NOW]:
            misc[M_NOW] = now_in
    while True:
        # ------------------------------------------------ link a newly activated stream
        if mode == MODE_TRACE and act_batch and run_slot < 0:
            if ptr < n_tr and arrival[ptr] <= act_now and misc[M_RING_N] < cap:
                s_left[ptr] = 1
                s_end[ptr] = act_now
                sid_new = ptr
                run_slot = misc[M_RFREE]
                ptr += 1
            else:
                act_batch = False
        if run_slot >= 0 and (mode == MODE_ACTIVATE or act_batch):
            slot = run_slot
            misc[M_RFREE] = ring[slot, R_NEXT]
            tail = misc[M_RTAIL]
            ring[slot, R_SID] = sid_new
            ring[slot, R_NEXT] = -1
            ring[slot, R_PREV] = tail
            ring[slot, R_WAIT] = -1
            if tail >= 0:
                ring[tail, R_NEXT] = slot
            else:
                misc[M_RHEAD] = slot
            misc[M_RTAIL] = slot
            misc[M_RING_N] += 1
            addr = s_addr[sid_new]
        elif run_slot >= 0:
            addr = -1  # a waiting stream: its next burst is decoded already
        # ------------------------------------------------ feed one stream
        if run_slot >= 0:
            slot = run_slot
            run_slot = -1
            sid = ring[slot, R_SID]
            waiting = False
            while s_left[sid] > 0:
                if addr >= 0:  # decode the burst at addr into the ring slot
                    idx = addr >> p[P_BBSHIFT] if pow2 else addr // BB
                    for k in range(6):  # LSB field first
                        if pow2:
                            v = idx & (tab[T_ACOUNT, k] - 1)
                            idx >>= tab[T_ASHIFT, k]
                        else:
                            cnt = tab[T_ACOUNT, k]
                            v = idx % cnt
                            idx //= cnt
                        f = tab[T_AFIELD, k]
                        if f < 5:
                            ring[slot, R_CH + f] = v
                ch = ring[slot, R_CH]
                if chs[ch, H_COUNT] >= Q:
                    ring[slot, R_WAIT] = ch
                    chs[ch, H_NWAIT] += 1
                    waiting = True
                    break
                ra, bg, ba = ring[slot, R_RA], ring[slot, R_BG], ring[slot, R_BA]
                row = ring[slot, R_ROW]
                rk = ch * RK + ra
                gn = rk * G + bg
                bank = gn * B + ba
                s = chs[ch, H_FREE]
                chs[ch, H_FREE] = q[ch, s, Q_NEXT]
                q[ch, s, Q_BANK] = bank
                q[ch, s, Q_RK] = rk
                q[ch, s, Q_GN] = gn
                q[ch, s, Q_RA] = ra
                q[ch, s, Q_BG] = bg
                q[ch, s, Q_BA] = ba
                q[ch, s, Q_ROW] = row
                q[ch, s, Q_WRITE] = s_write[sid]
                q[ch, s, Q_AGE] = misc[M_AGE]
                q[ch, s, Q_SRC] = sid
                q[ch, s, Q_FLAGS] = 0
                misc[M_AGE] += 1
                chs[ch, H_COUNT] += 1
                if chs[ch, H_DIRTY] == 0:
                    chs[ch, H_DIRTY] = 1
                    sched[misc[M_NDIRTY]] = ch
                    misc[M_NDIRTY] += 1
                # append to the bank's list (ages increase: the list stays oldest first)
                tail = bk[bank, BK_TAIL]
                q[ch, s, Q_NEXT] = -1
                q[ch, s, Q_PREV] = tail
                if tail >= 0:
                    q[ch, tail, Q_NEXT] = s
                else:  # the bank gets its first request
                    bk[bank, BK_HEAD] = s
                    nb = chs[ch, H_NBANK]
                    chb[ch, nb] = bank
                    bk[bank, BK_POS] = nb
                    chs[ch, H_NBANK] = nb + 1
                bk[bank, BK_TAIL] = s
                if bst[B_OPEN, bank] == row:
                    bst[B_HITS, bank] += 1
                    if s_write[sid] != 0:
                        if bk[bank, BK_WRH] < 0:
                            bk[bank, BK_WRH] = s
                    elif bk[bank, BK_RDH] < 0:
                        bk[bank, BK_RDH] = s
                s_left[sid] -= 1
                s_addr[sid] += BB
                s_out[sid] += 1
                addr = s_addr[sid]
            if not waiting:  # all bursts queued: unlink, slot back to the free list
                ring[slot, R_WAIT] = -1
                nxt, prv = ring[slot, R_NEXT], ring[slot, R_PREV]
                if prv >= 0:
                    ring[prv, R_NEXT] = nxt
                else:
                    misc[M_RHEAD] = nxt
                if nxt >= 0:
                    ring[nxt, R_PREV] = prv
                else:
                    misc[M_RTAIL] = prv
                ring[slot, R_NEXT] = misc[M_RFREE]
                misc[M_RFREE] = slot
                misc[M_RING_N] -= 1
            if mode == MODE_ACTIVATE:
                return 1
            continue
        # ------------------------------------------------ next command over all channels
        now0 = misc[M_NOW]
        tree = C  # offset of the tournament tree in sched
        CP = misc[M_CP]
        for kd in range(misc[M_NDIRTY]):
            ch = sched[kd]
            now = now0
            while True:
                # candidates compare by key = time * 4 + class, then age (oldest first);
                # written with selects rather than branches (the data are random)
                bkey, bage = INF, INF
                bcmd, bslot, bra, bbg, bba = -1, -1, 0, 0, 0
                rdue = False
                if refresh:
                    for r in range(RK):
                        if ref_due[ch * RK + r] <= now:
                            rdue = True
                            e, cmd, g, b = _refresh_pick(p, tab, nx, bst, ch, r, now)
                            if e * 4 < bkey:
                                bkey, bage, bcmd, bra, bbg, bba = e * 4, -1, cmd, r, g, b
                # per bank with queued requests: its oldest read hit and oldest write hit
                # (row open), else its oldest request (PRE or ACT) - the minimum of
                # (time, class, age) over every queued request, as FR-FCFS asks
                for i in range(chs[ch, H_NBANK]):
                    bank = chb[ch, i]
                    if rdue and ref_due[bk[bank, BK_RK]] <= now:
                        continue
                    n1, n2, n3 = bk[bank, BK_N1], bk[bank, BK_N2], l3 + bank
                    hit = bst[B_HITS, bank] > 0
                    s1 = bk[bank, BK_RDH] if hit else bk[bank, BK_HEAD]
                    c1 = C_RD if hit else (C_PRE if bst[B_OPEN, bank] >= 0 else C_ACT)
                    s2 = bk[bank, BK_WRH] if hit else -1
                    e = max(max(nx[ch, c1], nx[n1, c1]), max(nx[n2, c1], nx[n3, c1]))
                    key = max(e, now) * 4 + (1 if hit else 2)
                    age = q[ch, s1, Q_AGE]
                    key = INF if s1 < 0 else key
                    age = INF if s1 < 0 else age
                    better = (key < bkey) | ((key == bkey) & (age < bage))
                    bkey = key if better else bkey
                    bage = age if better else bage
                    bcmd = c1 if better else bcmd
                    bslot = s1 if better else bslot
                    e = max(max(nx[ch, C_WR], nx[n1, C_WR]), max(nx[n2, C_WR], nx[n3, C_WR]))
                    key = max(e, now) * 4 + 1
                    age = q[ch, s2, Q_AGE]
                    key = INF if s2 < 0 else key
                    age = INF if s2 < 0 else age
                    better = (key < bkey) | ((key == bkey) & (age < bage))
                    bkey = key if better else bkey
                    bage = age if better else bage
                    bcmd = C_WR if better else bcmd
                    bslot = s2 if better else bslot
                if bslot >= 0:
                    bra, bbg, bba = q[ch, bslot, Q_RA], q[ch, bslot, Q_BG], q[ch, bslot, Q_BA]
                if closed:
                    e, r, g, b = _closed_pick(p, tab, nx, bst, ch, now)
                    if e < INF and e * 4 + 3 < bkey:
                        bkey, bcmd, bslot, bra, bbg, bba = e * 4 + 3, C_PRE, -1, r, g, b
                bt = bkey >> 2 if bkey < INF else INF
                # a refresh falling due before that command preempts it: re-decide
                due = INF
                if refresh:
                    for r in range(RK):
                        d = ref_due[ch * RK + r]
                        if d > now and d < due:
                            due = d
                if due < INF and due <= bt:
                    now = due
                    continue
                break
            chs[ch, H_T] = bt
            chs[ch, H_CMD] = bcmd
            chs[ch, H_SLOT] = bslot
            chs[ch, H_RA] = bra
            chs[ch, H_BG] = bbg
            chs[ch, H_BA] = bba
            chs[ch, H_DIRTY] = 0
            # update the tournament tree from the leaf of ch (ties: lower channel)
            i = (CP + ch) >> 1
            while i >= 1:
                a = sched[tree + 2 * i]
                b = sched[tree + 2 * i + 1]
                if b >= 0 and (a < 0 or chs[b, H_T] < chs[a, H_T]):
                    a = b
                sched[tree + i] = a
                i >>= 1
        misc[M_NDIRTY] = 0
        c = sched[tree + 1]
        t = chs[c, H_T]
        if mode == MODE_NEXT:
            return t
        if not in_batch:  # trace mode between engine cycles
            if ndone >= n_tr:
                return ndone
            if ptr < n_tr and arrival[ptr] <= t and misc[M_RING_N] < cap:
                act_now = max(arrival[ptr], misc[M_NOW])
                misc[M_NOW] = act_now
                act_batch = True
                continue
            until = t + 1
            in_batch = True
        if t >= until:
            if mode != MODE_TRACE:
                return ndone
            in_batch = False
            continue
        # ------------------------------------------------ issue the command of channel c
        misc[M_NOW] = t
        cmd = chs[c, H_CMD]
        s = chs[c, H_SLOT]
        ra, bg, ba = chs[c, H_RA], chs[c, H_BG], chs[c, H_BA]
        row = q[c, s, Q_ROW] if s >= 0 else 0
        rk = c * RK + ra
        gn = rk * G + bg
        bank = gn * B + ba
        chs[c, H_DIRTY] = 1
        sched[misc[M_NDIRTY]] = c
        misc[M_NDIRTY] += 1
        if cmd == C_REF:
            issue(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, cmd, c, ra, bg, ba,
                  row, t)
            ref_due[rk] += p[P_REFI]
            continue
        # bank-scope command: the rows of the timing table, one node per level
        for k in range(con_ptr[cmd], con_ptr[cmd + 1]):
            lv = con[K_LEVEL, k]
            node = c if lv == 0 else (l1 + rk if lv == 1 else (l2 + gn if lv == 2 else l3 + bank))
            w = con[K_WIN, k]
            nxt = con[K_NEXT, k]
            if w <= 1:
                v = t + con[K_LAT, k]
            else:  # rolling window (nFAW): wait for the oldest of the last w
                ws = con[K_WSLOT, k]
                n = hist_n[node, ws]
                hist[node, ws, n % w] = t
                hist_n[node, ws] = n + 1
                v = hist[node, ws, (n + 1) % w] + con[K_LAT, k] if n + 1 >= w else -1
            if v > nx[node, nxt]:
                nx[node, nxt] = v
        for k in range(N_CMD):  # one command per cycle on the channel's command bus
            if nx[c, k] <= t:
                nx[c, k] = t + 1
        stats[cmd] += 1
        if cmd == C_PRE:
            bst[B_OPEN, bank] = -1
            bst[B_HITS, bank] = 0
            bk[bank, BK_RDH] = -1
            bk[bank, BK_WRH] = -1
            if s >= 0:
                q[c, s, Q_FLAGS] |= 2
        elif cmd == C_ACT:
            bst[B_OPEN, bank] = row
            q[c, s, Q_FLAGS] |= 1
            h, rdh, wrh = 0, -1, -1
            j = bk[bank, BK_HEAD]
            while j >= 0:
                if q[c, j, Q_ROW] == row:
                    h += 1
                    if q[c, j, Q_WRITE] != 0:
                        if wrh < 0:
                            wrh = j
                    elif rdh < 0:
                        rdh = j
                j = q[c, j, Q_NEXT]
            bst[B_HITS, bank] = h
            bk[bank, BK_RDH] = rdh
            bk[bank, BK_WRH] = wrh
        else:  # column command: the request is served
            f = q[c, s, Q_FLAGS]
            if f & 2:
                stats[S_CONFLICT] += 1
            elif f & 1:
                stats[S_MISS] += 1
            else:
                stats[S_HIT] += 1
            if cmd == C_WR:
                done_t = t + p[P_WLAT]
                stats[S_WBYTES] += BB
            else:
                done_t = t + p[P_RLAT]
                stats[S_RBYTES] += BB
            src = q[c, s, Q_SRC]
            bst[B_HITS, bank] -= 1
            # the next oldest hit of the same direction (younger entries follow s)
            wr = q[c, s, Q_WRITE]
            j = q[c, s, Q_NEXT]
            while j >= 0 and (q[c, j, Q_ROW] != row or q[c, j, Q_WRITE] != wr):
                j = q[c, j, Q_NEXT]
            bk[bank, BK_WRH if wr != 0 else BK_RDH] = j
            # unlink s from its bank's list; the slot goes back to the free list
            nxt, prv = q[c, s, Q_NEXT], q[c, s, Q_PREV]
            if prv >= 0:
                q[c, prv, Q_NEXT] = nxt
            else:
                bk[bank, BK_HEAD] = nxt
            if nxt >= 0:
                q[c, nxt, Q_PREV] = prv
            else:
                bk[bank, BK_TAIL] = prv
            if bk[bank, BK_HEAD] < 0:  # no request left: drop the bank from chb
                nb = chs[c, H_NBANK] - 1
                pos = bk[bank, BK_POS]
                moved = chb[c, nb]
                chb[c, pos] = moved
                bk[moved, BK_POS] = pos
                chs[c, H_NBANK] = nb
            q[c, s, Q_NEXT] = chs[c, H_FREE]
            chs[c, H_FREE] = s
            chs[c, H_COUNT] -= 1
            s_out[src] -= 1
            if done_t > s_end[src]:
                s_end[src] = done_t
            if s_out[src] == 0 and s_left[src] == 0:
                done_buf[ndone] = src
                ndone += 1
            # the freed slot: the first stream (activation order) waiting for c proceeds
            if chs[c, H_NWAIT] > 0:
                slot = misc[M_RHEAD]
                while ring[slot, R_WAIT] != c:
                    slot = ring[slot, R_NEXT]
                chs[c, H_NWAIT] -= 1
                ring[slot, R_WAIT] = -1
                run_slot = slot


# ----------------------------------------------------------------------- entry points
@njit(cache=True)
def earliest_inst(inst, cmd, ch, ra, bg, ba):
    """:func:`earliest` on a :class:`DramInst`."""
    return earliest(inst.p, inst.tab, inst.nx, cmd, ch, ra, bg, ba)


@njit(cache=True)
def issue_inst(inst, cmd, ch, ra, bg, ba, row, t):
    """:func:`issue` on a :class:`DramInst`."""
    issue(inst.p, inst.tab, inst.con_ptr, inst.con, inst.nx, inst.hist, inst.hist_n,
          inst.bst, inst.stats, cmd, ch, ra, bg, ba, row, t)


@njit(cache=True)
def _core_inst(inst, mode, until, sid, now, s_addr, s_left, s_out, s_write, s_end, done_buf,
               arrival):
    return _core(inst.p, inst.tab, inst.con_ptr, inst.con, inst.nx, inst.hist, inst.hist_n,
                 inst.bst, inst.ref_due, inst.q, inst.chs, inst.ring, inst.misc, inst.stats,
                 inst.bk, inst.chb, inst.sched, mode, until, sid, now, s_addr, s_left, s_out,
                 s_write, s_end, done_buf, arrival)


@njit(cache=True)
def next_time_inst(inst):
    """Earliest pending command time of a :class:`DramInst` (INF when idle)."""
    z = np.zeros(1, np.int64)
    return _core_inst(inst, MODE_NEXT, 0, 0, 0, z, z, z, z, z, z, z[:0])


@njit(cache=True)
def activate(inst, sid, s_addr, s_left, s_out, s_write, now):
    """Append stream ``sid`` to the active streams and feed; returns False if full."""
    z = np.zeros(1, np.int64)
    return _core_inst(inst, MODE_ACTIVATE, 0, sid, now, s_addr, s_left, s_out, s_write, z,
                      z, z[:0]) != 0


@njit(cache=True)
def advance(inst, until, s_addr, s_left, s_out, s_write, s_end, done_buf):
    """Issue every command with issue time < ``until``; returns #streams completed.

    Completed stream ids (all bursts issued; last data at ``s_end[id]``) are written to
    ``done_buf[0:n]``.
    """
    return _core_inst(inst, MODE_ADVANCE, until, 0, 0, s_addr, s_left, s_out, s_write, s_end,
                      done_buf, s_end[:0])


@njit(cache=True)
def run_trace(inst, addr, is_write, arrival, s_end):
    """Run a request trace (one burst each, arrivals sorted); fills ``s_end``."""
    n = addr.shape[0]
    return _core_inst(inst, MODE_TRACE, 0, 0, 0, addr.copy(), np.zeros(n, np.int64),
                      np.zeros(n, np.int64), is_write.astype(np.int64), s_end,
                      np.zeros(max(n, 1), np.int64), arrival)
