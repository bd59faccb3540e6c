"""Numba core of the command-level DRAM model.

Everything here reads plain arrays that :func:`sim.dram.resolve` builds once in Python
(tables resolved, state zeroed) and stores in a :class:`DramInst` named tuple. Entry
points take it and unpack it once: the controller :func:`core` (modes NEXT / ADVANCE /
ACTIVATE / TRACE; the event engine calls it through :func:`core_of`, :func:`run_trace`
is plain Python calling the same compiled signature), :func:`earliest_inst`,
:func:`issue_inst`; internal helpers take the arrays explicitly. Times are DRAM clock
cycles (tCK), int64.

Cold start (issue 30): Numba links a jitted callee's IR into every caller and generates
its machine code again there, so each wrapper level around the ~10 CPU-s controller cost
~1 CPU-s; there are none now (the engine calls ``core`` directly, one signature), and an
engine loop compiled for graphs without DRAM never compiles it (``core_of``).

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
most two candidates each) instead of every request. The candidates are cached per
channel in a compact array (``cand``) with the bank-level part of their earliest time;
a bank's entries are recomputed only when its own state or bank row changes (``dbl``),
and a decision builds the shared part (now, channel, rank and bank-group rows) once per
(bank group, command) in ``gf``, then takes one branch-free minimum over the candidates'
keys packed with their age and index into one integer (the pairwise compare when a field
would overflow). A new
request that changes no candidate changes nothing; one that does only competes with the
channel's cached decision (unless that decision is on its bank or involved a refresh).
A tournament tree over the channels finds the next command in O(log C) and only changed
channels are re-decided; a stream's next burst is decoded from its address when it is
fed (one shift and mask per field for power-of-two organisations, ``tab`` T_DSHIFT /
T_DMASK; a woken stream decodes it again); a freed queue slot wakes only the first
stream (in activation order) waiting for that channel - the only stream that can move,
since after every feed each waiting stream waits for a full channel - taken from a
per-channel waiting list. ``tests/sim/test_dram_equivalence.py`` checks that these
choices equal those of the plain rescanning controller (``tests/sim/sim_legacy_dram.py``)
on random traces.

The module is over 700 lines on purpose: the controller's hot path is one function
(:func:`core`), because in Numba a call that passes several arrays costs more than the work,
and its state layout (the field indices below) is documented next to it.

:func:`issue` / :func:`issue_inst` update timing and open rows only, not the controller's
queues: use one :class:`DramInst` either for direct command issue (``DramState``, PIM
models) or for the request controller, not both.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit, types
from numba.extending import overload

from archsim.sim import dram_presets as _cmds
from archsim.sim.jitcache import guard as _guard_cache

INF = 2**62
_U = np.uintp  # flat array index: unsigned, so Numba adds no wrap-around fix-up

# command ids: the indices of sim.dram_presets.COMMANDS (their one home)
C_ACT, C_PRE, C_RD, C_WR, C_REF = _cmds.ACT, _cmds.PRE, _cmds.RD, _cmds.WR, _cmds.REF
C_PREA, C_ACTAB = _cmds.PREA, _cmds.ACTAB
N_CMD = _cmds.N_COMMANDS

# p: scalar parameters
P_CH, P_RK, P_BG, P_BA, P_ROW, P_BPR, P_BB, P_RLAT, P_WLAT, P_REFI = range(10)
P_REFRESH, P_POLICY, P_QDEPTH, P_RING, P_NWC, P_MAXW = range(10, 16)
P_POW2, P_BBSHIFT = 16, 17  # 1 when every address field count is a power of two
N_P = 24
# tab rows (small tables, width 16)
T_AFIELD, T_ACOUNT, T_LVL, T_FAN, T_SCOPE, T_ASHIFT = range(6)
T_CWIN = 6  # per command: its first rolling-window constraint (its rows without come first)
# per address field (channel, rank, bank group, bank, row) when every field count is a power
# of two: the byte address's shift to that field and the field's mask (count - 1)
T_DSHIFT, T_DMASK = 7, 8
N_TAB = 9
# con rows (one column per constraint, grouped by preceding command via con_ptr; within a
# command the rows without a rolling window first, up to tab[T_CWIN, cmd])
K_LEVEL, K_NEXT, K_LAT, K_WIN, K_WSLOT = range(5)
# bst rows (per bank): open row (-1: precharged), queued requests hitting the open row
B_OPEN, B_HITS = 0, 1
# q[channel, slot, field]: request queue slots; a queued request is in its bank's list
# (Q_NEXT/Q_PREV, oldest first), a free slot in the channel's free list (Q_NEXT).
# Q_LOC = rank << 40 | bankgroup << 20 | bank (within the channel). One 64-byte row per
# slot (the base is 64-byte aligned by sim.dram.resolve): a list walk touches one line
Q_NEXT, Q_PREV, Q_ROW, Q_WRITE, Q_AGE, Q_SRC, Q_FLAGS, Q_LOC = range(8)
N_QF = 8
LOC_MASK = (1 << 20) - 1
# chs[channel, field]: cached decision, queue size, streams waiting for a slot, free
# slot list head, number of banks with queued requests (listed in chb[channel, :])
H_T, H_CMD, H_SLOT, H_RA, H_BG, H_BA, H_DIRTY, H_COUNT, H_NWAIT, H_FREE, H_NBANK = range(11)
H_NDB = 11  # banks whose candidates must be recomputed (listed in dbl[channel, :])
# the decided command's key and age; 1 when the decision involved a refresh (then a new
# request makes the channel re-decide; otherwise it only competes with the decision)
H_KEY, H_AGE, H_NOINC = 12, 13, 14
# streams waiting for a slot of the channel: a list in activation order (ring R_WNEXT)
H_WHEAD, H_WTAIL = 15, 16
H_NCAND = 17  # candidates in cand[channel]
H_REDO = 18  # H_DIRTY 3: decide again at this time (a refresh falls due first)
# the channel's command bus: free from this cycle (the last controller command's time + 1).
# The controller keeps it here instead of raising all N_CMD entries of nx[channel] on
# every command; every read of nx[channel, cmd] in core takes the max with it (a REF,
# issued by `issue`, raises nx[channel] itself: the same max)
H_BUS = 19
N_HF = 20
# bk[bank, field]: request list head/tail, oldest queued read / write hitting the open
# row (-1: none), position in chb, flat rank id and nx rows of its rank and bank group
# (static), bank group within its channel (static), 1 while listed in dbl
BK_HEAD, BK_TAIL, BK_RDH, BK_WRH, BK_POS, BK_RK, BK_N1, BK_N2, BK_LG, BK_DB = range(10)
BK_C1, BK_C2 = 10, 11  # positions of the bank's two candidates in cand (-1: none)
N_BKF = 12
# cand[channel, field, j], j < chs[channel, H_NCAND]: the FR-FCFS candidates of the
# channel's active banks, up to two per bank (its oldest read hit, or its oldest
# request's PRE/ACT; its oldest write hit), in no particular order (ages are unique).
# CA_G = 4 * (bank group within the channel) + command (the entry of the per-decision
# table gf), CA_B = 4 * the bank row's earliest time for that command + class (ACT/PRE 2,
# RD/WR 1), CA_AGE request age, CA_SLOT queue slot, CA_OWN = 2 * bank + which (the
# bank's BK_C1/BK_C2 points back). key = max(gf[CA_G], CA_B) = 4 * time + class.
CA_G, CA_B, CA_AGE, CA_SLOT, CA_OWN = range(5)
N_CAF = 5
# packed decision key (see the candidate scan in core): PK_RELBITS bits of key - 4 * now,
# PK_AGEBITS bits of age offset, PK_JBITS bits of candidate index; PK_NONE exceeds every
# packed value
PK_RELBITS, PK_AGEBITS, PK_JBITS = 32, 24, 6
PK_SHIFT = PK_AGEBITS + PK_JBITS
PK_AGE = 1 << PK_AGEBITS
PK_NONE = 1 << (PK_RELBITS + PK_SHIFT)
BIG = 2**60  # gf entries of a rank waiting for its refresh: BIG * 4 + 3 > INF, never chosen
# sched: channels to re-decide (sched[0:misc[M_NDIRTY]]; chs H_DIRTY 1: decide, 2: the
# decision was updated in place, only the tree; 3: decide at H_REDO), then a tournament tree over the
# channels' decided times (node i's channel at sched[C + i] and time at treet[i], leaves
# at CP + channel), so the next command is found in O(log C) instead of a pass over
# every channel
# ring[slot, field]: streams waiting for a queue slot (M_RING_N of them); free slots form
# a list through R_NEXT from misc[M_RFREE] (a new stream is fed in the first free slot and
# takes it only when it has to wait); R_CH..R_ROW: scratch of the division decode (field
# counts not all powers of two; a waiting stream decodes its next burst again), R_WAIT the
# channel it waits for (-1: not waiting). R_PREV, M_RHEAD, M_RTAIL: unused (the list of
# every active stream in activation order was never read, only kept up to date)
R_SID, R_NEXT, R_PREV, R_WAIT, R_CH, R_RA, R_BG, R_BA, R_ROW = range(9)
R_SEQ, R_WNEXT = 9, 10  # activation number; next stream waiting for the same channel
N_RF = 11
# misc
M_NOW, M_AGE, M_RHEAD, M_RING_N, M_RTAIL, M_RFREE, M_NDIRTY, M_CP = range(8)
M_ASEQ = 8  # activations so far
N_MISC = 9
# stats (after the N_CMD command counters)
S_HIT, S_MISS, S_CONFLICT, S_RBYTES, S_WBYTES = range(N_CMD, N_CMD + 5)
N_STATS = N_CMD + 5

DramInst = namedtuple(
    "DramInst",
    ["p", "tab", "con_ptr", "con", "nx", "hist", "hist_n", "bst", "ref_due", "q", "chs",
     "ring", "misc", "stats", "bk", "chb", "sched", "cand", "dbl", "gf", "treet",
     "nxf", "conf"],
)


@njit(cache=True, inline="always")
def imax(a, b):
    """max of two ints. The builtin ``max`` compiles to an out-of-line call in Numba
    (``ol_max`` is not inlined in a function this large: ~50 calls in the controller,
    measured with perf); this one is inlined at the Numba IR level (the small helpers and
    the PIM stream: with a plain call there, the PIM stream was 3-4 % slower)."""
    return a if a >= b else b


@njit(cache=True)
def cmax(a, b):
    """:func:`imax` for :func:`core`: a plain jitted call, which LLVM inlines (the same
    machine code speed). ``inline="always"`` copies its IR with its blocks into every call
    site, and Numba's front end (liveness and SSA passes, O(blocks x variables)) then
    took ~0.8 CPU-s longer on ``core``."""
    return a if a >= b else b


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
    t = imax(nx[ch, cmd], nx[tab[T_LVL, 1] + rk, cmd])
    t = imax(t, nx[tab[T_LVL, 2] + gn, cmd])
    scope = tab[T_SCOPE, cmd]
    if scope == 3:
        return imax(t, nx[tab[T_LVL, 3] + gn * p[P_BA] + ba, cmd])
    # wide command: every node of the finer levels under the addressed node counts
    t = nx[ch, cmd]
    sidx = _scope_index(p, scope, ch, ra, bg, ba)
    for lv in range(1, 4):
        if lv <= scope:
            t = imax(t, nx[tab[T_LVL, lv] + _scope_index(p, lv, ch, ra, bg, ba), cmd])
        else:
            n = 1
            for l2 in range(scope, lv):
                n *= tab[T_FAN, l2]
            lo = tab[T_LVL, lv] + sidx * n
            for k in range(lo, lo + n):
                t = imax(t, nx[k, cmd])
    return t


@njit(cache=True)
def earliest_at(p, tab, nx, cmd, ch, ra, bg, ba):
    """:func:`earliest` as an out-of-line call. A caller with many call sites (the PIM
    stream) uses this: inlining ``earliest`` at each site multiplies its compile time
    (~1 s per site cold), while a call costs a few ns per command."""
    return earliest(p, tab, nx, cmd, ch, ra, bg, ba)


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


@njit(cache=True, inline="always")
def _bank_earliest(tab, nx, cmd, ch, rk, gn, bank):
    """:func:`earliest` of a bank-scope command (ACT, PRE, RD, WR) on flat rank ``rk``,
    bank group ``gn`` and bank ``bank``: the channel, rank, group and bank rows. (Without
    the wide-command loops of ``earliest``, whose inlined copies dominate the compile
    time of a small helper.)"""
    return imax(imax(nx[ch, cmd], nx[tab[T_LVL, 1] + rk, cmd]),
                imax(nx[tab[T_LVL, 2] + gn, cmd], nx[tab[T_LVL, 3] + bank, cmd]))


@njit(cache=True, inline="always")
def _rank_earliest(tab, nx, cmd, ch, rk, G, B):
    """:func:`earliest` of a rank-scope command (REF) on flat rank ``rk``: the channel and
    rank rows and every bank-group and bank row of the rank."""
    t = imax(nx[ch, cmd], nx[tab[T_LVL, 1] + rk, cmd])
    lo = tab[T_LVL, 2] + rk * G
    for k in range(lo, lo + G):
        t = imax(t, nx[k, cmd])
    lo = tab[T_LVL, 3] + rk * G * B
    for k in range(lo, lo + G * B):
        t = imax(t, nx[k, cmd])
    return t


@njit(cache=True)
def _refresh_pick(p, tab, nx, bst, ch, r, now):
    """Refresh work of rank ``r`` (due): PRE of the first open bank with the smallest
    earliest time, else REF; returns (time, cmd, bankgroup, bank)."""
    G, B = p[P_BG], p[P_BA]
    rk = ch * p[P_RK] + r
    # (earliest's two cases written out: the inlined earliest, with its loops for every
    # scope, would double this helper's compile time)
    bt, bcmd, bg_, ba_ = INF, -1, 0, 0
    any_open = False
    for g in range(G):
        for b in range(B):
            bank = (rk * G + g) * B + b
            if bst[B_OPEN, bank] >= 0:
                any_open = True
                e = imax(_bank_earliest(tab, nx, C_PRE, ch, rk, rk * G + g, bank), now)
                if e < bt:
                    bt, bcmd, bg_, ba_ = e, C_PRE, g, b
    if not any_open:
        bt, bcmd, bg_, ba_ = imax(_rank_earliest(tab, nx, C_REF, ch, rk, G, B), now), C_REF, 0, 0
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
                gn = (ch * RK + r) * G + g
                bank = gn * B + b
                if bst[B_OPEN, bank] >= 0 and bst[B_HITS, bank] == 0:
                    e = imax(_bank_earliest(tab, nx, C_PRE, ch, ch * RK + r, gn, bank), now)
                    if e < bt:
                        bt, br, bg_, ba_ = e, r, g, b
    return bt, br, bg_, ba_


@njit(cache=True, error_model="numpy")  # (no ZeroDivisionError paths: ~0.2 CPU-s compile)
def core(inst, mode, until, sid_in, now_in, s_addr, s_left, s_out, s_write, s_end, done_buf,
         arrival):
    """The controller of :class:`DramInst` ``inst``. ``mode``:

    * MODE_NEXT: return the earliest pending command time (deciding dirty channels);
    * MODE_ADVANCE: issue every command with time < ``until``; return #streams done
      (their ids in ``done_buf``);
    * MODE_ACTIVATE: append stream ``sid_in`` at ``now_in`` and feed it; return 1, or 0
      when the ring is full;
    * MODE_TRACE: run streams ``0..len(arrival)-1`` (one burst each, ``arrival``
      sorted) to completion; return #streams done (``s_end`` set when a request is
      served; ``s_out``, ``done_buf`` and ``s_addr`` untouched).
    """
    p, tab, con_ptr, con, nx, hist, hist_n = (inst.p, inst.tab, inst.con_ptr, inst.con,
                                              inst.nx, inst.hist, inst.hist_n)
    # flat views of nx and con (made by sim.dram.resolve) for the timing-row update,
    # indexed by unsigned ints: no stride multiply, no wrap-around fix-up (the same for
    # gf and the candidate scan was up to 4 % faster but cost ~0.5 CPU-s of compile)
    nxf, conf = inst.nxf, inst.conf
    NCON = con.shape[1]
    bst, ref_due, q, chs, ring, misc, stats = (inst.bst, inst.ref_due, inst.q, inst.chs,
                                               inst.ring, inst.misc, inst.stats)
    bk, chb, sched, cand, dbl, gf, treet = (inst.bk, inst.chb, inst.sched, inst.cand,
                                            inst.dbl, inst.gf, inst.treet)
    C, RK, G, B = p[P_CH], p[P_RK], p[P_BG], p[P_BA]
    Q, BB = p[P_QDEPTH], p[P_BB]
    l1, l2, l3 = tab[T_LVL, 1], tab[T_LVL, 2], tab[T_LVL, 3]
    refresh = p[P_REFRESH] != 0
    closed = p[P_POLICY] == 1
    pow2 = p[P_POW2] != 0
    cap = ring.shape[0]
    ndone = 0
    run_slot = -1  # ring slot whose stream is fed next
    held = False  # that slot is off the free list
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
                s_left[ptr] = 1  # (one burst: s_end is set when it is served)
                sid_new = ptr
                run_slot = misc[M_RFREE]
                ptr += 1
            else:
                act_batch = False
        if run_slot >= 0 and (mode == MODE_ACTIVATE or act_batch):
            # a new stream is fed in the first free slot and takes it (off the free
            # list, counted in M_RING_N) only if it has to wait for a queue slot
            slot = run_slot
            ring[slot, R_SID] = sid_new
            ring[slot, R_SEQ] = misc[M_ASEQ]
            misc[M_ASEQ] += 1
            held = False
            addr = s_addr[sid_new]
        elif run_slot >= 0:  # a woken stream: its next burst
            held = True
            addr = s_addr[ring[run_slot, R_SID]]
        # ------------------------------------------------ feed one stream
        if run_slot >= 0:
            slot = run_slot
            run_slot = -1
            sid = ring[slot, R_SID]
            waiting = False
            while s_left[sid] > 0:
                # decode the burst at addr (the stream's next; a woken stream decodes it
                # again): one shift and mask per field (tab T_DSHIFT / T_DMASK), or by
                # division through the ring slot when the field counts are not all powers
                # of two
                if pow2:
                    ch = (addr >> tab[T_DSHIFT, 0]) & tab[T_DMASK, 0]
                    ra = (addr >> tab[T_DSHIFT, 1]) & tab[T_DMASK, 1]
                    bg = (addr >> tab[T_DSHIFT, 2]) & tab[T_DMASK, 2]
                    ba = (addr >> tab[T_DSHIFT, 3]) & tab[T_DMASK, 3]
                    row = (addr >> tab[T_DSHIFT, 4]) & tab[T_DMASK, 4]
                else:
                    idx = addr // BB
                    for k in range(6):  # LSB field first
                        cnt = tab[T_ACOUNT, k]
                        v = idx % cnt
                        idx //= cnt
                        f = tab[T_AFIELD, k]
                        if f < 5:
                            ring[slot, R_CH + f] = v
                    ch, ra, bg = ring[slot, R_CH], ring[slot, R_RA], ring[slot, R_BG]
                    ba, row = ring[slot, R_BA], ring[slot, R_ROW]
                if chs[ch, H_COUNT] >= Q:
                    if not held:
                        misc[M_RFREE] = ring[slot, R_NEXT]
                        misc[M_RING_N] += 1
                        held = True
                    ring[slot, R_WAIT] = ch
                    chs[ch, H_NWAIT] += 1
                    # into ch's waiting list by activation number (a new stream is the
                    # youngest: the tail; a woken one that blocks again may be older)
                    seq = ring[slot, R_SEQ]
                    prv, nxt = -1, chs[ch, H_WHEAD]
                    if nxt >= 0 and ring[chs[ch, H_WTAIL], R_SEQ] < seq:
                        prv, nxt = chs[ch, H_WTAIL], -1
                    while nxt >= 0 and ring[nxt, R_SEQ] < seq:
                        prv, nxt = nxt, ring[nxt, R_WNEXT]
                    ring[slot, R_WNEXT] = nxt
                    if prv >= 0:
                        ring[prv, R_WNEXT] = slot
                    else:
                        chs[ch, H_WHEAD] = slot
                    if nxt < 0:
                        chs[ch, H_WTAIL] = slot
                    waiting = True
                    break
                rk = ch * RK + ra
                gn = rk * G + bg
                bank = gn * B + ba
                s = chs[ch, H_FREE]
                chs[ch, H_FREE] = q[ch, s, Q_NEXT]
                q[ch, s, Q_LOC] = (ra << 40) | (bg << 20) | ba
                q[ch, s, Q_ROW] = row
                q[ch, s, Q_WRITE] = s_write[sid]
                q[ch, s, Q_AGE] = misc[M_AGE]
                q[ch, s, Q_SRC] = sid
                q[ch, s, Q_FLAGS] = 0
                misc[M_AGE] += 1
                chs[ch, H_COUNT] += 1
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
                # the bank's candidates change only if it had no request or this is its
                # first hit of its direction; else nothing (also no decision) changes
                changed = tail < 0
                if bst[B_OPEN, bank] == row:
                    bst[B_HITS, bank] += 1
                    if s_write[sid] != 0:
                        if bk[bank, BK_WRH] < 0:
                            bk[bank, BK_WRH] = s
                            changed = True
                    elif bk[bank, BK_RDH] < 0:
                        bk[bank, BK_RDH] = s
                        changed = True
                if changed and bk[bank, BK_DB] == 0:
                    bk[bank, BK_DB] = 1
                    dbl[ch, chs[ch, H_NDB]] = bank
                    chs[ch, H_NDB] += 1
                # the channel's decision: a new request only adds candidates of its bank
                # (time only grows the keys of the others), so unless the decided command
                # is on this bank or came from a refresh pass, the new decision is the
                # better of the old one and this bank's candidates (same result as a
                # full re-decision, one bank instead of all)
                dirty = chs[ch, H_DIRTY]
                if changed and dirty != 1:
                    if chs[ch, H_NOINC] != 0 or (chs[ch, H_BA] == ba and chs[ch, H_BG] == bg
                                                 and chs[ch, H_RA] == ra):
                        chs[ch, H_DIRTY] = 1
                    else:
                        now_f = cmax(misc[M_NOW], chs[ch, H_BUS])  # (the bus: nx[ch])
                        hit = bst[B_HITS, bank] > 0
                        n1, n2, n3 = l1 + rk, l2 + gn, l3 + bank
                        sc = bk[bank, BK_RDH] if hit else bk[bank, BK_HEAD]
                        cc = C_RD if hit else (C_PRE if bst[B_OPEN, bank] >= 0 else C_ACT)
                        for two in range(2):
                            if two == 1:
                                if not hit:
                                    break
                                sc = bk[bank, BK_WRH]
                                cc = C_WR
                            if sc < 0:
                                continue
                            e = cmax(cmax(cmax(nx[ch, cc], nx[n1, cc]), cmax(nx[n2, cc], nx[n3, cc])),
                                    now_f)
                            key = e * 4 + (1 if hit else 2)
                            age = q[ch, sc, Q_AGE]
                            if key < chs[ch, H_KEY] or (key == chs[ch, H_KEY]
                                                        and age < chs[ch, H_AGE]):
                                chs[ch, H_KEY] = key
                                chs[ch, H_AGE] = age
                                chs[ch, H_T] = e
                                chs[ch, H_CMD] = cc
                                chs[ch, H_SLOT] = sc
                                chs[ch, H_RA] = ra
                                chs[ch, H_BG] = bg
                                chs[ch, H_BA] = ba
                                chs[ch, H_DIRTY] = 2  # only the tournament tree
                    if dirty == 0 and chs[ch, H_DIRTY] != 0:
                        sched[misc[M_NDIRTY]] = ch
                        misc[M_NDIRTY] += 1
                s_left[sid] -= 1
                if mode != MODE_TRACE:  # (a trace request is one burst: s_addr read-only)
                    s_out[sid] += 1
                    s_addr[sid] += BB
                    addr = s_addr[sid]
            if not waiting and held:  # all bursts queued: the slot goes back
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
        kd = 0
        while kd < misc[M_NDIRTY]:
            # (one pass per decision: a refresh falling due first makes the same channel
            # decide again at that time, H_DIRTY 3, in the next pass with the same kd; a
            # loop around one channel's decision was 1-4 % slower - LLVM hoisted the
            # addresses of ch's rows out of it, ~100 instructions per decision)
            ch = sched[kd]
            now = now0  # (H_DIRTY 2: decision already updated, only the tree below)
            noinc = False
            if chs[ch, H_DIRTY] == 3:
                now = chs[ch, H_REDO]
                noinc = True
                chs[ch, H_DIRTY] = 1
            if chs[ch, H_DIRTY] == 1:
                # candidates compare by key = time * 4 + class, then age (oldest first);
                # written with selects rather than branches (the data are random)
                bkey, bage = INF, INF
                bcmd, bslot, bra, bbg, bba = -1, -1, 0, 0, 0
                rdue = False
                due = INF  # the next refresh due after now (it preempts a later command)
                nowb = cmax(now, chs[ch, H_BUS])  # now, or the bus's free cycle: nx[ch]
                if refresh:
                    for r in range(RK):
                        d = ref_due[ch * RK + r]
                        due = d if (d > now) & (d < due) else due
                        if d <= now:
                            rdue = True
                            noinc = True
                            e, cmd, g, b = _refresh_pick(p, tab, nx, bst, ch, r, nowb)
                            if e * 4 < bkey:
                                bkey, bage, bcmd, bra, bbg, bba = e * 4, -1, cmd, r, g, b
                # FR-FCFS over the queued requests: per active bank its oldest read hit
                # and oldest write hit (row open), else its oldest request's PRE or ACT -
                # the minimum of (time, class, age) over every queued request. A
                # candidate's time is max(gf[its group, command], its bank's own time):
                # gf holds now and the channel, rank and bank-group rows (shared by the
                # group's banks, built here), the candidates cache the bank rows (they
                # change only with the bank's own commands or a REF, see dbl)
                for kdb in range(chs[ch, H_NDB]):
                    bank = dbl[ch, kdb]
                    bk[bank, BK_DB] = 0
                    hit = bst[B_HITS, bank] > 0
                    n3 = l3 + bank
                    lg4 = 4 * bk[bank, BK_LG]
                    for w in range(2):  # its two candidates (none once it has no request)
                        if w == 0:
                            sc = bk[bank, BK_RDH] if hit else bk[bank, BK_HEAD]
                            cc = C_RD if hit else (C_PRE if bst[B_OPEN, bank] >= 0 else C_ACT)
                        else:
                            sc = bk[bank, BK_WRH] if hit else -1
                            cc = C_WR
                        pos = bk[bank, BK_C1 + w]
                        nc = chs[ch, H_NCAND]
                        if sc >= 0:
                            if pos < 0:  # append
                                pos = nc
                                chs[ch, H_NCAND] = nc + 1
                                bk[bank, BK_C1 + w] = pos
                                cand[ch, CA_OWN, pos] = 2 * bank + w
                            cand[ch, CA_G, pos] = lg4 + cc
                            cand[ch, CA_B, pos] = nx[n3, cc] * 4 + (1 if hit else 2)
                            cand[ch, CA_AGE, pos] = q[ch, sc, Q_AGE]
                            cand[ch, CA_SLOT, pos] = sc
                        elif pos >= 0:  # remove: the last entry moves into its place
                            last = nc - 1
                            for f in range(N_CAF):
                                cand[ch, f, pos] = cand[ch, f, last]
                            own = cand[ch, CA_OWN, pos]
                            bk[own >> 1, BK_C1 + (own & 1)] = pos
                            bk[bank, BK_C1 + w] = -1
                            chs[ch, H_NCAND] = last
                chs[ch, H_NDB] = 0
                for r in range(RK):
                    rk = ch * RK + r
                    n1 = l1 + rk
                    # key = time * 4 + class (ACT, PRE: 2; RD, WR: 1)
                    f0 = cmax(cmax(nx[ch, 0], nx[n1, 0]), nowb) * 4 + 2
                    f1 = cmax(cmax(nx[ch, 1], nx[n1, 1]), nowb) * 4 + 2
                    f2 = cmax(cmax(nx[ch, 2], nx[n1, 2]), nowb) * 4 + 1
                    f3 = cmax(cmax(nx[ch, 3], nx[n1, 3]), nowb) * 4 + 1
                    if rdue and ref_due[rk] <= now:  # its banks wait for the refresh
                        f0 = f1 = f2 = f3 = BIG * 4 + 3  # > INF: never chosen
                    for g in range(G):
                        n2 = l2 + rk * G + g
                        o = (r * G + g) * 4
                        gf[o] = cmax(f0, nx[n2, 0] * 4 + 2)
                        gf[o + 1] = cmax(f1, nx[n2, 1] * 4 + 2)
                        gf[o + 2] = cmax(f2, nx[n2, 2] * 4 + 1)
                        gf[o + 3] = cmax(f3, nx[n2, 3] * 4 + 1)
                # the smallest (key, age) as one integer, (key - 4 * now, the age's offset
                # from misc[M_AGE] - PK_AGE, the candidate's index) in bit fields (every gf
                # entry is >= 4 * now, every queued age < misc[M_AGE]; ages are unique, so
                # the index never decides): a plain minimum without a data-dependent branch,
                # exact when every part fits its field (chk == 0), else the pairwise scan
                nc = chs[ch, H_NCAND]
                base4 = now * 4
                abase = misc[M_AGE] - PK_AGE
                best = PK_NONE
                chk = nc >> PK_JBITS
                for j in range(nc):
                    rel = cmax(gf[cand[ch, CA_G, j]], cand[ch, CA_B, j]) - base4
                    off = cand[ch, CA_AGE, j] - abase
                    chk |= (rel >> PK_RELBITS) | (off >> PK_AGEBITS)
                    pk = (rel << PK_SHIFT) | (off << PK_JBITS) | j
                    best = pk if pk < best else best
                bj = -1
                if chk == 0:
                    if nc > 0:
                        key = (best >> PK_SHIFT) + base4
                        age = ((best >> PK_JBITS) & (PK_AGE - 1)) + abase
                        if key < bkey or (key == bkey and age < bage):
                            bkey, bage = key, age
                            bj = best & ((1 << PK_JBITS) - 1)
                else:
                    for j in range(nc):
                        key = cmax(gf[cand[ch, CA_G, j]], cand[ch, CA_B, j])
                        age = cand[ch, CA_AGE, j]
                        better = (key < bkey) | ((key == bkey) & (age < bage))
                        bkey = key if better else bkey
                        bage = age if better else bage
                        bj = j if better else bj
                if bj >= 0:
                    bcmd = cand[ch, CA_G, bj] & 3
                    bslot = cand[ch, CA_SLOT, bj]
                if bslot >= 0:
                    loc = q[ch, bslot, Q_LOC]
                    bra, bbg, bba = loc >> 40, (loc >> 20) & LOC_MASK, loc & LOC_MASK
                if closed:
                    e, r, g, b = _closed_pick(p, tab, nx, bst, ch, nowb)
                    if e < INF and e * 4 + 3 < bkey:
                        bkey, bcmd, bslot, bra, bbg, bba = e * 4 + 3, C_PRE, -1, r, g, b
                bt = bkey >> 2 if bkey < INF else INF
                # a refresh falling due before that command preempts it: re-decide
                if due < INF and due <= bt:
                    chs[ch, H_REDO] = due
                    chs[ch, H_DIRTY] = 3
                    continue
                chs[ch, H_T] = bt
                chs[ch, H_CMD] = bcmd
                chs[ch, H_SLOT] = bslot
                chs[ch, H_RA] = bra
                chs[ch, H_BG] = bbg
                chs[ch, H_BA] = bba
                chs[ch, H_KEY] = bkey
                chs[ch, H_AGE] = bage
                chs[ch, H_NOINC] = 1 if noinc else 0
            chs[ch, H_DIRTY] = 0
            # update the tournament tree from the leaf of ch (ties: lower channel, i.e.
            # the left child); stop where a node's winner and time stay the same
            i = CP + ch
            treet[i] = chs[ch, H_T]
            i >>= 1
            while i >= 1:
                ta, tb = treet[2 * i], treet[2 * i + 1]
                a = sched[tree + 2 * i + 1] if tb < ta else sched[tree + 2 * i]
                ta = tb if tb < ta else ta
                if a == sched[tree + i] and ta == treet[i]:
                    break
                sched[tree + i] = a
                treet[i] = ta
                i >>= 1
            kd += 1
        misc[M_NDIRTY] = 0
        c = sched[tree + 1]
        t = treet[1]
        if mode == MODE_NEXT:
            return t
        if t >= until:
            if mode != MODE_TRACE:
                return ndone
            in_batch = False  # (falls through: nothing changed since the decision)
        if not in_batch:  # trace mode between engine cycles
            if ndone >= n_tr:
                return ndone
            if ptr < n_tr and arrival[ptr] <= t and misc[M_RING_N] < cap:
                act_now = cmax(arrival[ptr], misc[M_NOW])
                misc[M_NOW] = act_now
                act_batch = True
                continue
            until = t + 1
            in_batch = True
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
            for i in range(chs[c, H_NBANK]):  # REF moved the rank's bank rows
                b = chb[c, i]
                if bk[b, BK_RK] == rk and bk[b, BK_DB] == 0:
                    bk[b, BK_DB] = 1
                    dbl[c, chs[c, H_NDB]] = b
                    chs[c, H_NDB] += 1
            continue
        if bk[bank, BK_DB] == 0:  # its bank row and candidates change
            bk[bank, BK_DB] = 1
            dbl[c, chs[c, H_NDB]] = bank
            chs[c, H_NDB] += 1
        # bank-scope command: the rows of the timing table, one node per level; the rows
        # without a rolling window first (no window test per row), then those with one
        kw = tab[T_CWIN, cmd]
        for k in range(con_ptr[cmd], kw):
            ku = _U(k)
            lv = conf[ku]
            node = c if lv == 0 else (l1 + rk if lv == 1 else (l2 + gn if lv == 2 else l3 + bank))
            ni = _U(node * N_CMD + conf[ku + _U(K_NEXT * NCON)])
            nxf[ni] = cmax(t + conf[ku + _U(K_LAT * NCON)], nxf[ni])  # (branch-free)
        for k in range(kw, con_ptr[cmd + 1]):  # rolling window (nFAW): the oldest of w
            lv = con[K_LEVEL, k]
            node = c if lv == 0 else (l1 + rk if lv == 1 else (l2 + gn if lv == 2 else l3 + bank))
            w = con[K_WIN, k]
            ws = con[K_WSLOT, k]
            n = hist_n[node, ws]
            i = n & (w - 1) if w & (w - 1) == 0 else n % w  # (nFAW: w = 4, no division)
            hist[node, ws, i] = t
            hist_n[node, ws] = n + 1
            i = 0 if i + 1 == w else i + 1  # (n + 1) % w without a second division
            if n + 1 >= w:
                ni = _U(node * N_CMD + con[K_NEXT, k])
                nxf[ni] = cmax(hist[node, ws, i] + con[K_LAT, k], nxf[ni])
        chs[c, H_BUS] = t + 1  # one command per cycle on the channel's command bus
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
            if mode == MODE_TRACE:  # one burst: done now (done_t > t >= its activation)
                s_end[src] = done_t
                ndone += 1
            else:
                s_out[src] -= 1
                if done_t > s_end[src]:
                    s_end[src] = done_t
                if s_out[src] == 0 and s_left[src] == 0:
                    done_buf[ndone] = src
                    ndone += 1
            # the freed slot: the first stream (activation order) waiting for c proceeds
            if chs[c, H_NWAIT] > 0:
                slot = chs[c, H_WHEAD]
                chs[c, H_WHEAD] = ring[slot, R_WNEXT]
                chs[c, H_NWAIT] -= 1
                ring[slot, R_WAIT] = -1
                run_slot = slot


# ----------------------------------------------------------------------- entry points
# Every entry point passes the mode and the scalar operands as typed int64 (np.int64(...)),
# never as literals: Numba compiles a callee once per distinct literal argument, and
# ``core`` costs ~8 CPU-s to compile (tests/sim/test_one_signature.py).
@njit(cache=True)
def earliest_inst(inst, cmd, ch, ra, bg, ba):
    """:func:`earliest` on a :class:`DramInst`."""
    return earliest(inst.p, inst.tab, inst.nx, cmd, ch, ra, bg, ba)


@njit(cache=True)
def issue_inst(inst, cmd, ch, ra, bg, ba, row, t):
    """:func:`issue` on a :class:`DramInst`."""
    issue(inst.p, inst.tab, inst.con_ptr, inst.con, inst.nx, inst.hist, inst.hist_n,
          inst.bst, inst.stats, cmd, ch, ra, bg, ba, row, t)


def core_of(insts, i, mode, until, sid_in, now_in, s_addr, s_left, s_out, s_write, s_end,
            done_buf, arrival):
    """:func:`core` on ``insts[i]``; 0 when ``insts`` is None (an engine loop compiled for
    graphs without DRAM). Under JIT the None case compiles to the constant (overload
    below), so such a loop never compiles or links the controller (~10 CPU-s cold)."""
    if insts is None:
        return 0
    return core(insts[i], mode, until, sid_in, now_in, s_addr, s_left, s_out, s_write, s_end,
                done_buf, arrival)


@overload(core_of, inline="always")
def _core_of_typed(insts, i, mode, until, sid_in, now_in, s_addr, s_left, s_out, s_write,
                   s_end, done_buf, arrival):
    if isinstance(insts, types.NoneType):
        def no_dram(insts, i, mode, until, sid_in, now_in, s_addr, s_left, s_out, s_write,
                    s_end, done_buf, arrival):
            return np.int64(0)
        return no_dram

    def with_dram(insts, i, mode, until, sid_in, now_in, s_addr, s_left, s_out, s_write,
                  s_end, done_buf, arrival):
        return core(insts[i], mode, until, sid_in, now_in, s_addr, s_left, s_out, s_write,
                    s_end, done_buf, arrival)
    return with_dram


def run_trace(inst, addr, is_write, arrival, s_end):
    """Run a request trace (one burst each, arrivals sorted) through :func:`core`; fills
    ``s_end``. Plain Python: it calls the engine's own compiled signature of ``core``
    (int64 1-D arrays), so a trace compiles nothing beyond it.

    The per-stream work arrays (bursts left, bursts queued, the write flags, finished ids)
    are the rows of one block: numpy asks Linux for huge pages for an allocation this
    large, where separate arrays of 8 bytes per request were fresh 4 KiB pages on every
    call (~2,000 page faults for 200,000 requests, ~10 % of a sequential trace's CPU
    time). Trace mode reads the addresses in place (never writes them), sets a request's
    bursts left at its activation and its ``s_end`` when its column command issues (one
    burst: done then; no bursts-queued count, no finished ids), so the block is not
    zeroed (no calloc)."""
    n = addr.shape[0]
    zero = np.int64(0)
    w = np.empty((4, max(n, 1)), np.int64)
    w[2, :n] = is_write
    return core(inst, np.int64(MODE_TRACE), zero, zero, zero,
                np.ascontiguousarray(addr, np.int64), w[0], w[1], w[2], s_end, w[3],
                np.ascontiguousarray(arrival, np.int64))


_guard_cache(issue_inst)  # stale cross-file cache entries (sim/jitcache.py)
