"""Frozen copy of the first DRAM controller kernel (reference for equivalence tests).

This is the straightforward version of :mod:`sim.dram_kernel` that rescans every
queue slot per decision and re-feeds every active stream per freed slot. The fast
kernel must make exactly the same choices; ``test_dram_equivalence.py`` runs both on
random traces and compares every completion cycle and counter. Do not optimise this
file: its value is that it is the simple reading of the policy.
"""


from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from archsim.sim.dram import ADDRESS_FIELDS, ROW_POLICIES, eval_latency
from archsim.sim.dram_presets import COMMAND_SCOPE, COMMANDS, LEVELS, N_COMMANDS

INF = 2**62

# command ids (mirror sim.dram_presets.COMMANDS)
C_ACT, C_PRE, C_RD, C_WR, C_REF, C_PREA, C_ACTAB = 0, 1, 2, 3, 4, 5, 6
N_CMD = 10

# p: scalar parameters
P_CH, P_RK, P_BG, P_BA, P_ROW, P_BPR, P_BB, P_RLAT, P_WLAT, P_REFI = range(10)
P_REFRESH, P_POLICY, P_QDEPTH, P_RING, P_NWC, P_MAXW = range(10, 16)
# tab rows (small tables, width 16)
T_AFIELD, T_ACOUNT, T_LVL, T_FAN, T_SCOPE = range(5)
# con rows (one column per constraint, grouped by preceding command via con_ptr)
K_LEVEL, K_NEXT, K_LAT, K_WIN, K_WSLOT = range(5)
# bst rows (per bank)
B_OPEN, B_STAMP = 0, 1
# q fields [field, channel, slot]
Q_VALID, Q_BANK, Q_RA, Q_BG, Q_BA, Q_ROW, Q_WRITE, Q_ARR, Q_AGE, Q_SRC, Q_FLAGS = range(11)
N_QF = 11
# chs fields [field, channel]
H_T, H_CMD, H_SLOT, H_RA, H_BG, H_BA, H_DIRTY, H_COUNT = range(8)
N_HF = 8
# misc
M_NOW, M_AGE, M_STAMP, M_RING_N = 0, 1, 2, 3
# stats (after the N_CMD command counters)
S_HIT, S_MISS, S_CONFLICT, S_RBYTES, S_WBYTES = range(N_CMD, N_CMD + 5)
N_STATS = N_CMD + 5

DramInst = namedtuple(
    "DramInst",
    ["p", "tab", "con_ptr", "con", "nx", "hist", "hist_n", "bst", "ref_due", "q", "chs",
     "ring", "misc", "stats"],
)


@njit(cache=True, inline="always")
def decode(p, tab, addr):
    """Split a byte address into (channel, rank, bankgroup, bank, row, column-burst)."""
    idx = addr // p[P_BB]
    ch = ra = bg = ba = row = col = 0
    for k in range(6):  # LSB field first
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


@njit(cache=True, inline="always")
def _apply(con, nx, hist, hist_n, node, k, t):
    w = con[K_WIN, k]
    nxt = con[K_NEXT, k]
    if w <= 1:
        v = t + con[K_LAT, k]
    else:
        ws = con[K_WSLOT, k]
        n = hist_n[node, ws]
        hist[node, ws, n % w] = t
        hist_n[node, ws] = n + 1
        if n + 1 < w:
            return
        v = hist[node, ws, (n + 1) % w] + con[K_LAT, k]
    if v > nx[node, nxt]:
        nx[node, nxt] = v


@njit(cache=True)
def issue(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, cmd, ch, ra, bg, ba, row, t):
    """Issue ``cmd`` at cycle ``t``: update timing, bank state and command counters.

    The caller guarantees ``t >= earliest(...)`` and state legality.
    """
    scope = tab[T_SCOPE, cmd]
    rk = ch * p[P_RK] + ra
    gn = rk * p[P_BG] + bg
    bk = gn * p[P_BA] + ba
    nodes = (ch, tab[T_LVL, 1] + rk, tab[T_LVL, 2] + gn, tab[T_LVL, 3] + bk)
    sidx = nodes[scope] - tab[T_LVL, scope]
    for k in range(con_ptr[cmd], con_ptr[cmd + 1]):
        lv = con[K_LEVEL, k]
        if lv <= scope:
            _apply(con, nx, hist, hist_n, nodes[lv], k, t)
        else:
            n = 1
            for l2 in range(scope, lv):
                n *= tab[T_FAN, l2]
            lo = tab[T_LVL, lv] + sidx * n
            for node in range(lo, lo + n):
                _apply(con, nx, hist, hist_n, node, k, t)
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
@njit(cache=True, inline="always")
def enqueue(p, tab, q, chs, misc, addr, is_write, arrival, src):
    """Put one burst request into its channel queue; returns the channel or -1 if full."""
    ch, ra, bg, ba, row, col = decode(p, tab, addr)
    Q = p[P_QDEPTH]
    if chs[H_COUNT, ch] >= Q:
        return -1
    s = 0
    while q[Q_VALID, ch, s] != 0:
        s += 1
    q[Q_VALID, ch, s] = 1
    q[Q_BANK, ch, s] = ((ch * p[P_RK] + ra) * p[P_BG] + bg) * p[P_BA] + ba
    q[Q_RA, ch, s] = ra
    q[Q_BG, ch, s] = bg
    q[Q_BA, ch, s] = ba
    q[Q_ROW, ch, s] = row
    q[Q_WRITE, ch, s] = is_write
    q[Q_ARR, ch, s] = arrival
    q[Q_AGE, ch, s] = misc[M_AGE]
    misc[M_AGE] += 1
    q[Q_SRC, ch, s] = src
    q[Q_FLAGS, ch, s] = 0
    chs[H_COUNT, ch] += 1
    chs[H_DIRTY, ch] = 1
    return ch


@njit(cache=True)
def _scan(p, tab, nx, bst, ref_due, q, misc, ch, now):
    """One FR-FCFS pass at time ``now``: (time, cmd, slot, ra, bg, ba) of the winner."""
    RK, G, B, Q = p[P_RK], p[P_BG], p[P_BA], p[P_QDEPTH]
    l1, l2, l3 = tab[T_LVL, 1], tab[T_LVL, 2], tab[T_LVL, 3]
    bt, bcls, bage = INF, 99, INF
    bcmd, bslot, bra, bbg, bba = -1, -1, 0, 0, 0
    misc[M_STAMP] += 1
    stamp = misc[M_STAMP]
    refresh = p[P_REFRESH] != 0
    # refresh work for pending ranks: precharge open banks, then REF
    if refresh:
        for r in range(RK):
            rk = ch * RK + r
            if ref_due[rk] > now:
                continue
            any_open = False
            for g in range(G):
                for b in range(B):
                    if bst[B_OPEN, (rk * G + g) * B + b] >= 0:
                        any_open = True
                        e = max(earliest(p, tab, nx, C_PRE, ch, r, g, b), now)
                        if e < bt:
                            bt, bcls, bage, bcmd, bslot, bra, bbg, bba = (
                                e, 0, -1, C_PRE, -1, r, g, b)
            if not any_open:
                e = max(earliest(p, tab, nx, C_REF, ch, r, 0, 0), now)
                if e < bt:
                    bt, bcls, bage, bcmd, bslot, bra, bbg, bba = e, 0, -1, C_REF, -1, r, 0, 0
    # banks with queued row hits
    for s in range(Q):
        if q[Q_VALID, ch, s] != 0:
            bank = q[Q_BANK, ch, s]
            if bst[B_OPEN, bank] == q[Q_ROW, ch, s]:
                bst[B_STAMP, bank] = stamp
    for s in range(Q):
        if q[Q_VALID, ch, s] == 0:
            continue
        ra = q[Q_RA, ch, s]
        rk = ch * RK + ra
        if refresh and ref_due[rk] <= now:
            continue
        bank = q[Q_BANK, ch, s]
        orow = bst[B_OPEN, bank]
        if orow == q[Q_ROW, ch, s]:
            cmd = C_WR if q[Q_WRITE, ch, s] != 0 else C_RD
            cls = 1
        elif orow < 0:
            cmd = C_ACT
            cls = 2
        else:
            if bst[B_STAMP, bank] == stamp:
                continue  # never close a row that still has queued hits
            cmd = C_PRE
            cls = 2
        bg = q[Q_BG, ch, s]
        gn = rk * G + bg
        e = max(nx[ch, cmd], nx[l1 + rk, cmd])
        e = max(e, nx[l2 + gn, cmd])
        e = max(e, nx[l3 + bank, cmd])
        e = max(e, now)
        e = max(e, q[Q_ARR, ch, s])
        if e > bt:
            continue
        age = q[Q_AGE, ch, s]
        if e < bt or cls < bcls or (cls == bcls and age < bage):
            bt, bcls, bage, bcmd, bslot = e, cls, age, cmd, s
            bra, bbg, bba = ra, bg, q[Q_BA, ch, s]
    # closed-page policy: precharge open banks without queued hits
    if p[P_POLICY] == 1:
        for r in range(RK):
            rk = ch * RK + r
            for g in range(G):
                for b in range(B):
                    bank = (rk * G + g) * B + b
                    if bst[B_OPEN, bank] >= 0 and bst[B_STAMP, bank] != stamp:
                        e = max(earliest(p, tab, nx, C_PRE, ch, r, g, b), now)
                        if e < bt or (e == bt and 3 < bcls):
                            bt, bcls, bage, bcmd, bslot, bra, bbg, bba = (
                                e, 3, INF, C_PRE, -1, r, g, b)
    return bt, bcmd, bslot, bra, bbg, bba


@njit(cache=True)
def decide(p, tab, nx, bst, ref_due, q, chs, misc, ch, now):
    """Compute and cache in ``chs`` the next command of channel ``ch`` at/after ``now``."""
    while True:
        bt, bcmd, bslot, bra, bbg, bba = _scan(p, tab, nx, bst, ref_due, q, misc, ch, now)
        # a refresh falling due before that command preempts it: re-decide then
        due = INF
        if p[P_REFRESH] != 0:
            for r in range(p[P_RK]):
                d = ref_due[ch * p[P_RK] + r]
                if d > now and d < due:
                    due = d
        if due < INF and due <= bt:
            now = due
            continue
        break
    chs[H_T, ch] = bt
    chs[H_CMD, ch] = bcmd
    chs[H_SLOT, ch] = bslot
    chs[H_RA, ch] = bra
    chs[H_BG, ch] = bbg
    chs[H_BA, ch] = bba
    chs[H_DIRTY, ch] = 0


@njit(cache=True)
def next_time(p, tab, nx, bst, ref_due, q, chs, misc):
    """Earliest pending decision over all channels (re-deciding dirty channels)."""
    now = misc[M_NOW]
    best = INF
    for c in range(p[P_CH]):
        if chs[H_DIRTY, c] != 0:
            decide(p, tab, nx, bst, ref_due, q, chs, misc, c, now)
        if chs[H_T, c] < best:
            best = chs[H_T, c]
    return best


@njit(cache=True)
def feed(p, tab, q, chs, misc, ring, s_addr, s_left, s_out, s_write, now):
    """Move bursts of active streams (ring order) into channel queues with free slots."""
    bb = p[P_BB]
    n = misc[M_RING_N]
    i = 0
    while i < n:
        sid = ring[i]
        while s_left[sid] > 0:
            if enqueue(p, tab, q, chs, misc, s_addr[sid], s_write[sid], now, sid) < 0:
                break
            s_left[sid] -= 1
            s_addr[sid] += bb
            s_out[sid] += 1
        if s_left[sid] == 0:
            for j in range(i, n - 1):
                ring[j] = ring[j + 1]
            n -= 1
        else:
            i += 1
    misc[M_RING_N] = n


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
def next_time_inst(inst):
    """:func:`next_time` on a :class:`DramInst`."""
    return next_time(inst.p, inst.tab, inst.nx, inst.bst, inst.ref_due, inst.q, inst.chs,
                     inst.misc)


@njit(cache=True)
def activate(inst, sid, s_addr, s_left, s_out, s_write, now):
    """Append stream ``sid`` to the active ring and feed; returns False if ring full."""
    misc, ring = inst.misc, inst.ring
    n = misc[M_RING_N]
    if n >= ring.shape[0]:
        return False
    ring[n] = sid
    misc[M_RING_N] = n + 1
    if now > misc[M_NOW]:
        misc[M_NOW] = now
    feed(inst.p, inst.tab, inst.q, inst.chs, misc, ring, s_addr, s_left, s_out, s_write,
         misc[M_NOW])
    return True


@njit(cache=True)
def advance(inst, until, s_addr, s_left, s_out, s_write, s_end, done_buf):
    """Issue every command with issue time < ``until``; returns #streams completed.

    Completed stream ids (all bursts issued; last data at ``s_end[id]``) are written to
    ``done_buf[0:n]``.
    """
    p, tab, con_ptr, con = inst.p, inst.tab, inst.con_ptr, inst.con
    nx, hist, hist_n, bst = inst.nx, inst.hist, inst.hist_n, inst.bst
    ref_due, q, chs, ring, misc, stats = (inst.ref_due, inst.q, inst.chs, inst.ring,
                                          inst.misc, inst.stats)
    C = p[P_CH]
    ndone = 0
    while True:
        t = next_time(p, tab, nx, bst, ref_due, q, chs, misc)
        if t >= until:
            break
        c = 0
        for k in range(C):
            if chs[H_T, k] == t:
                c = k
                break
        misc[M_NOW] = t
        cmd = chs[H_CMD, c]
        s = chs[H_SLOT, c]
        ra, bg, ba = chs[H_RA, c], chs[H_BG, c], chs[H_BA, c]
        row = q[Q_ROW, c, s] if s >= 0 else 0
        issue(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, cmd, c, ra, bg, ba, row, t)
        chs[H_DIRTY, c] = 1
        if cmd == C_REF:
            ref_due[c * p[P_RK] + ra] += p[P_REFI]
        elif s >= 0:
            if cmd == C_ACT:
                q[Q_FLAGS, c, s] |= 1
            elif cmd == C_PRE:
                q[Q_FLAGS, c, s] |= 2
            else:  # column command: the request is served
                f = q[Q_FLAGS, c, s]
                if f & 2:
                    stats[S_CONFLICT] += 1
                elif f & 1:
                    stats[S_MISS] += 1
                else:
                    stats[S_HIT] += 1
                if cmd == C_WR:
                    done_t = t + p[P_WLAT]
                    stats[S_WBYTES] += p[P_BB]
                else:
                    done_t = t + p[P_RLAT]
                    stats[S_RBYTES] += p[P_BB]
                src = q[Q_SRC, c, s]
                q[Q_VALID, c, s] = 0
                chs[H_COUNT, c] -= 1
                s_out[src] -= 1
                if done_t > s_end[src]:
                    s_end[src] = done_t
                if s_out[src] == 0 and s_left[src] == 0:
                    done_buf[ndone] = src
                    ndone += 1
                if misc[M_RING_N] > 0:
                    feed(p, tab, q, chs, misc, ring, s_addr, s_left, s_out, s_write, t)
    return ndone


@njit(cache=True)
def run_trace(inst, addr, is_write, arrival, s_end):
    """Run a request trace (one burst each, arrivals sorted); fills ``s_end``."""
    n = addr.shape[0]
    s_addr = addr.copy()
    s_left = np.zeros(n, np.int64)
    s_out = np.zeros(n, np.int64)
    s_write = is_write.astype(np.int64)
    done_buf = np.zeros(max(n, 1), np.int64)
    misc, ring = inst.misc, inst.ring
    ptr = 0
    done = 0
    while done < n:
        t = next_time_inst(inst)
        if ptr < n and arrival[ptr] <= t and misc[M_RING_N] < ring.shape[0]:
            now = max(arrival[ptr], misc[M_NOW])
            while ptr < n and arrival[ptr] <= now and misc[M_RING_N] < ring.shape[0]:
                s_left[ptr] = 1
                s_end[ptr] = now
                activate(inst, ptr, s_addr, s_left, s_out, s_write, now)
                ptr += 1
            continue
        done += advance(inst, t + 1, s_addr, s_left, s_out, s_write, s_end, done_buf)
    return done


def resolve(spec, ring_capacity: int = 64):
    """Resolve a spec into the dense arrays (tables + zeroed state) the kernel reads.

    Args:
        spec: the DRAM spec.
        ring_capacity: maximum number of concurrently active request streams.
    """
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
    # constraints grouped by preceding command
    rows = sorted(spec.constraint_rows(), key=lambda r: COMMANDS.index(r[1]))
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
        con_lat[k] = eval_latency(r[3], spec.timing)
        if len(r) == 5 and r[4] > 1:
            con_win[k] = r[4]
            con_wslot[k] = nwc
            nwc += 1
            maxw = max(maxw, r[4])
    con_ptr = np.cumsum(con_ptr).astype(np.int64)
    Q = spec.queue_depth
    p = np.zeros(16, np.int64)
    p[P_CH], p[P_RK], p[P_BG], p[P_BA] = C, RK, G, B
    p[P_ROW], p[P_BPR], p[P_BB] = spec.rows, spec.bursts_per_row, spec.burst_bytes
    p[P_RLAT], p[P_WLAT] = spec.read_latency_cycles, spec.write_latency_cycles
    p[P_REFI] = spec.timing["nREFI"]
    p[P_REFRESH] = 1 if spec.refresh else 0
    p[P_POLICY] = ROW_POLICIES.index(spec.row_policy)
    p[P_QDEPTH], p[P_RING] = Q, ring_capacity
    p[P_NWC], p[P_MAXW] = nwc, maxw
    tab = np.zeros((5, 16), np.int64)
    tab[T_AFIELD, :6] = amap_field
    tab[T_ACOUNT, :6] = amap_count
    tab[T_LVL, :5] = lvl_off
    tab[T_FAN, :3] = (RK, G, B)
    tab[T_SCOPE, :N_COMMANDS] = [LEVELS.index(COMMAND_SCOPE[c]) for c in COMMANDS]
    con = np.zeros((5, max(ncon, 1)), np.int64)
    con[K_LEVEL, :ncon] = con_level
    con[K_NEXT, :ncon] = con_next
    con[K_LAT, :ncon] = con_lat
    con[K_WIN, :ncon] = con_win
    con[K_WSLOT, :ncon] = con_wslot
    bst = np.zeros((2, n_bank), np.int64)
    bst[B_OPEN] = -1
    chs = np.zeros((N_HF, C), np.int64)
    chs[H_T] = INF
    chs[H_CMD] = -1
    chs[H_SLOT] = -1
    chs[H_DIRTY] = 1
    return DramInst(
        p=p, tab=tab, con_ptr=con_ptr, con=con,
        nx=np.zeros((n_nodes, N_COMMANDS), np.int64),
        hist=np.zeros((n_nodes, max(nwc, 1), maxw), np.int64),
        hist_n=np.zeros((n_nodes, max(nwc, 1)), np.int64),
        bst=bst,
        ref_due=np.full(n_rank, int(spec.timing["nREFI"]), np.int64),
        q=np.zeros((N_QF, C, Q), np.int64), chs=chs,
        ring=np.zeros(max(ring_capacity, 1), np.int64),
        misc=np.zeros(8, np.int64),
        stats=np.zeros(N_STATS, np.int64),
    )


def simulate(spec, addr, is_write, arrival, max_outstanding=256):
    """Old ``simulate_requests``: (completion cycles, stats vector)."""
    inst = resolve(spec, ring_capacity=max_outstanding)
    addr = np.ascontiguousarray(addr, np.int64)
    end = np.zeros(addr.size, np.int64)
    if addr.size:
        run_trace(inst, addr, np.ascontiguousarray(is_write, np.int64),
                  np.ascontiguousarray(arrival, np.int64), end)
    return end, inst.stats.copy()
