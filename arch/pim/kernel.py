"""Numba core of the PIM command-level model: issue one channel's command stream.

The stream of one channel for one matrix-vector op is generated on the fly from a few
integers (no command array is built):

    append phase   (attention ops) ``app_rows`` single-bank row writes, in batches of one
                   per bank: ACT each bank, ``app_bursts`` WR each, PRE each
    for rep in reps:                       (one pass per input vector, m of the GEMM)
      for seg in segments:                 (one global-buffer fill each)
        WRGB x seg_wrgb                    (input-vector chunk -> global buffer)
        for step in seg_steps:             (one neuron per processing unit, lockstep)
          MACAB x seg_mpn                  (PREA + ACTAB when the weight stream crosses a row)
          RDMAC                            (the units' accumulators -> ASIC)

Every command issues at the earliest cycle the resolved timing table allows
(:func:`sim.dram_kernel.earliest_inst`), in program order (the table's one-command-per-
cycle rule keeps the channel's commands ordered). All-bank refresh: when a command would
issue at or after the channel's refresh due time, open rows are closed (PREA), REF is
issued and the interrupted row is re-activated (a row miss).

Speed (issue 30; ``benchmarks/bench_pim.py``, GPT-2 XL token, same cycles: see
docs/pim.md): MACAB's earliest time (rank-wide) needs the largest row of every bank group
and bank of the rank; those maxima are cached per channel (``_bank_maxima``) and
recomputed only after a command wrote rows below rank level; MACAB is timed and issued
inline when its table rows are all at channel or rank level;
``tests/pim/test_stream_cache.py`` replays the same program through ``sim.dram.DramState``.

Per-channel state ``cs[ch, :]``: F_OPEN (all-bank open row or -1), F_REF (refresh due),
F_END (latest data completion), F_SB (single-bank rows open), F_SUBOK / F_SUB (the cached
bank maxima). Counters ``cnt``: see ``N_*`` indices.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from archsim.sim import dram_kernel as K
from archsim.sim import dram_presets as _cmds
from archsim.sim.jitcache import guard as _guard_cache

# command ids: the indices of sim.dram_presets.COMMANDS (their one home)
C_ACT, C_PRE, C_WR, C_REF, C_PREA = _cmds.ACT, _cmds.PRE, _cmds.WR, _cmds.REF, _cmds.PREA
C_ACTAB, C_MACAB, C_WRGB, C_RDMAC = _cmds.ACTAB, _cmds.MACAB, _cmds.WRGB, _cmds.RDMAC
F_OPEN, F_REF, F_END, F_SB = 0, 1, 2, 3
# F_SUBOK 1: cs[ch, F_SUB + c] holds the largest nx[., c] over the bank groups and banks of
# rank 0 of ch, the part of a rank-wide command's earliest time that needs a pass over
# every bank (MACAB, inline in run_channel); cleared when a command writes rows below
# rank level
F_SUBOK, F_SUB = 4, 5
N_FIELDS = F_SUB + _cmds.N_COMMANDS
# counters
N_ROWMISS, N_REFRESH, N_MACAB, N_ACTAB = 0, 1, 2, 3
N_COUNTERS = 4


@njit(cache=True, inline="always")
def _go(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, cmd, ch, bg, ba, row):
    """Issue ``cmd`` at its earliest legal cycle; returns that cycle."""
    Z = np.int64(0)  # typed locals, not literals: one compiled signature of K.issue
    t = K.earliest_at(p, tab, nx, cmd, ch, Z, bg, ba)
    K.issue(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, cmd, ch, Z, bg, ba, row, t)
    return t


@njit(cache=True, inline="always")
def _bank_maxima(p, tab, nx, cs, ch):
    """Fill ``cs[ch, F_SUB + c]`` (every command c) with the largest bank-group and bank
    row of rank 0 of ``ch``; mark it valid."""
    rk = ch * p[K.P_RK]
    G, B = p[K.P_BG], p[K.P_BA]
    lo2 = tab[K.T_LVL, 2] + rk * G
    lo3 = tab[K.T_LVL, 3] + rk * G * B
    for c in range(K.N_CMD):
        m = nx[lo2, c]
        for k in range(lo2 + 1, lo2 + G):
            m = K.imax(m, nx[k, c])
        for k in range(lo3, lo3 + G * B):
            m = K.imax(m, nx[k, c])
        cs[ch, F_SUB + c] = m
    cs[ch, F_SUBOK] = 1


@njit(cache=True)
def _refresh_if_due(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, cs, cnt, ch, t,
                    nrefi):
    """If ``t`` reaches the refresh due time: PREA (if a row is open), REF. True if done."""
    Z = np.int64(0)
    IPREA, IREF = np.int64(C_PREA), np.int64(C_REF)
    if nrefi <= 0 or t < cs[ch, F_REF]:
        return False
    if cs[ch, F_OPEN] >= 0 or cs[ch, F_SB] != 0:
        _go(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, IPREA, ch, Z, Z, Z)
        cs[ch, F_OPEN] = -1
        cs[ch, F_SB] = 0
    _go(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, IREF, ch, Z, Z, Z)
    cs[ch, F_REF] += nrefi
    cs[ch, F_SUBOK] = 0
    cnt[N_REFRESH] += 1
    return True


@njit(cache=True)
def run_channel(inst, cs, cnt, ch, nrefi, rlat, app_rows, app_bursts, reps, seg_wrgb,
                seg_steps, seg_mpn, macs_per_row):
    """Issue one channel's stream (see module docstring); returns the channel's end cycle.

    Args:
        inst: ``sim.dram_kernel.DramInst`` (timing table resolved, PIM rows patched).
        cs: per-channel state (int64[channels, N_FIELDS]); cnt: counters (int64[N_COUNTERS]).
        ch: channel. nrefi: refresh interval in tCK (0 = no refresh). rlat: read latency.
        app_rows, app_bursts: KV-cache append rows and WR bursts per row.
        reps: passes over the weights (input vectors).
        seg_wrgb, seg_steps, seg_mpn: per segment WRGB bursts, lockstep neuron steps,
            MAC commands per neuron.
        macs_per_row: MAC commands per all-bank activation.
    """
    # the arrays of inst, unpacked once (one function: a wrapper that unpacks and calls
    # would compile the stream's machine code a second time)
    p, tab, con_ptr, con, nx, hist, hist_n, bst, stats = (
        inst.p, inst.tab, inst.con_ptr, inst.con, inst.nx, inst.hist, inst.hist_n, inst.bst,
        inst.stats)
    # Commands and constant operands as typed int64 locals: a literal argument would make
    # Numba compile K.issue/K.earliest once per distinct literal (9 signatures, ~20 s cold).
    Z, ONE = np.int64(0), np.int64(1)
    IACT, IPRE, IWR, IPREA = np.int64(C_ACT), np.int64(C_PRE), np.int64(C_WR), np.int64(C_PREA)
    IACTAB, IMACAB = np.int64(C_ACTAB), np.int64(C_MACAB)
    IWRGB, IRDMAC = np.int64(C_WRGB), np.int64(C_RDMAC)
    banks = p[K.P_BG] * p[K.P_BA]
    nba = p[K.P_BA]
    # low[c] 1: a c command writes timing rows below rank level (then the cached bank
    # maxima are stale); MACAB, the bulk of the stream, is timed and issued inline when
    # its rows are all at channel or rank level without a rolling window
    low = np.zeros(K.N_CMD, np.int64)
    mac_fast = tab[K.T_SCOPE, C_MACAB] == 1
    n1 = tab[K.T_LVL, 1] + ch * p[K.P_RK]  # the nx row of rank 0 of ch
    for c in range(K.N_CMD):
        for k in range(con_ptr[c], con_ptr[c + 1]):
            if con[K.K_LEVEL, k] >= 2:
                low[c] = 1
            if c == C_MACAB and (con[K.K_LEVEL, k] >= 2 or con[K.K_WIN, k] > 1):
                mac_fast = False
    # ---- KV-cache append: single-bank row writes, one batch = one row per bank --------
    if app_rows > 0:
        if cs[ch, F_OPEN] >= 0:
            tp = K.earliest_at(p, tab, nx, IPREA, ch, Z, Z, Z)
            K.issue(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, IPREA, ch, Z, Z, Z, Z, tp)
            cs[ch, F_OPEN] = -1
        done = 0
        while done < app_rows:
            nb = min(banks, app_rows - done)
            t = K.earliest_at(p, tab, nx, IACT, ch, Z, Z, Z)
            if _refresh_if_due(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, cs, cnt, ch, t, nrefi):
                continue
            cs[ch, F_SB] = 1
            for b in range(nb):
                bg, ba = b // nba, b % nba
                t = K.earliest_at(p, tab, nx, IACT, ch, Z, bg, ba)
                K.issue(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, IACT, ch, Z, bg, ba, ONE, t)
                cnt[N_ROWMISS] += 1
            for b in range(nb):
                bg, ba = b // nba, b % nba
                for _ in range(app_bursts):
                    t = K.earliest_at(p, tab, nx, IWR, ch, Z, bg, ba)
                    K.issue(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, IWR, ch, Z, bg, ba, ONE, t)
            for b in range(nb):
                bg, ba = b // nba, b % nba
                t = K.earliest_at(p, tab, nx, IPRE, ch, Z, bg, ba)
                K.issue(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, IPRE, ch, Z, bg, ba, Z, t)
            cs[ch, F_SB] = 0
            cs[ch, F_SUBOK] = 0  # the batch wrote bank rows
            done += nb
            end = t + p[K.P_WLAT]
            if end > cs[ch, F_END]:
                cs[ch, F_END] = end
    # ---- matrix-vector passes ----------------------------------------------------------
    nseg = seg_wrgb.shape[0]
    for _rep in range(reps):
        pos = 0  # MAC commands issued into this op's weight rows (row = pos // macs_per_row)
        for s in range(nseg):
            for _ in range(seg_wrgb[s]):
                while True:
                    t = K.earliest_at(p, tab, nx, IWRGB, ch, Z, Z, Z)
                    if not (t >= cs[ch, F_REF] and _refresh_if_due(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, cs, cnt, ch, t, nrefi)):
                        break
                K.issue(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, IWRGB, ch, Z, Z, Z, Z, t)
                if low[IWRGB]:
                    cs[ch, F_SUBOK] = 0
            for _step in range(seg_steps[s]):
                for _m in range(seg_mpn[s]):
                    row = pos // macs_per_row
                    while True:
                        if cs[ch, F_OPEN] != row:
                            if cs[ch, F_OPEN] >= 0:
                                tp = K.earliest_at(p, tab, nx, IPREA, ch, Z, Z, Z)
                                K.issue(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, IPREA, ch, Z, Z, Z, Z, tp)
                                if low[IPREA]:
                                    cs[ch, F_SUBOK] = 0
                                cs[ch, F_OPEN] = -1
                            ta = K.earliest_at(p, tab, nx, IACTAB, ch, Z, Z, Z)
                            if ta >= cs[ch, F_REF] and _refresh_if_due(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, cs, cnt, ch, ta, nrefi):
                                continue
                            K.issue(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, IACTAB, ch, Z, Z, Z, row, ta)
                            if low[IACTAB]:
                                cs[ch, F_SUBOK] = 0
                            cs[ch, F_OPEN] = row
                            cnt[N_ACTAB] += 1
                            cnt[N_ROWMISS] += 1
                        if mac_fast:  # K.earliest of MACAB (rank-wide), bank part cached
                            if cs[ch, F_SUBOK] == 0:
                                _bank_maxima(p, tab, nx, cs, ch)
                            t = K.imax(K.imax(nx[ch, C_MACAB], nx[n1, C_MACAB]),
                                       cs[ch, F_SUB + C_MACAB])
                        else:
                            t = K.earliest_at(p, tab, nx, IMACAB, ch, Z, Z, Z)
                        if t >= cs[ch, F_REF] and _refresh_if_due(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, cs, cnt, ch, t, nrefi):
                            continue
                        break
                    if mac_fast:  # K.issue of a rank-wide command with rank-level rows
                        for k in range(con_ptr[C_MACAB], con_ptr[C_MACAB + 1]):
                            node = ch if con[K.K_LEVEL, k] == 0 else n1
                            nxt = con[K.K_NEXT, k]
                            nx[node, nxt] = K.imax(nx[node, nxt], t + con[K.K_LAT, k])
                        for c in range(K.N_CMD):
                            nx[ch, c] = K.imax(nx[ch, c], t + 1)
                        stats[C_MACAB] += 1
                    else:
                        K.issue(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, IMACAB, ch, Z, Z, Z, row, t)
                        if low[C_MACAB]:
                            cs[ch, F_SUBOK] = 0
                    cnt[N_MACAB] += 1
                    pos += 1
                while True:
                    t = K.earliest_at(p, tab, nx, IRDMAC, ch, Z, Z, Z)
                    if not (t >= cs[ch, F_REF] and _refresh_if_due(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, cs, cnt, ch, t, nrefi)):
                        break
                    # refresh closed the row: results stay in the units' registers
                K.issue(p, tab, con_ptr, con, nx, hist, hist_n, bst, stats, IRDMAC, ch, Z, Z, Z, Z, t)
                if low[IRDMAC]:
                    cs[ch, F_SUBOK] = 0
                end = t + rlat
                if end > cs[ch, F_END]:
                    cs[ch, F_END] = end
    return cs[ch, F_END]


_guard_cache(run_channel)  # stale cross-file cache entries (sim/jitcache.py)
