"""Numba kernel of the nest-mapping search: evaluates a batch of loop-nest mappings.

Counts exactly what :func:`dataflow.nest.analyse` counts (Timeloop semantics, pre-2025
stationary rule), per candidate, in compiled code: the pure-Python analysis is the
reference and ``tests/mapper/test_einsum_search.py`` checks the two agree on random mappings.
Plain arrays in, arrays out; no Python objects (house rule for kernels, docs/architecture.md).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from archsim.sim.jitcache import guard as _guard_cache

__all__ = ["evaluate_kernel", "fill_factors"]

_NONE, _ZERO, _KAPPA, _VEC = 0, 1, 2, 3


@njit(cache=True)
def _partial(full: int, ext: np.ndarray, t: np.ndarray, nr: int) -> int:
    ov = 1
    for r in range(nr):
        a = t[r] if t[r] >= 0 else -t[r]
        e = ext[r] - a
        ov *= e if e > 0 else 0
    return full - ov


@njit(cache=True)
def _deltas(tr: np.ndarray, nb: np.ndarray, k: int, ext: np.ndarray, nr: int,
            work: np.ndarray) -> int:
    """tr[k, R] translations (outermost first), nb[k] bounds; see mapper.einsum_search.

    ``work`` is a scratch int64 array of at least 3*R + 12 entries.
    """
    full = 1
    for r in range(nr):
        full *= ext[r]
    found = False
    inner = work[0:nr]
    ti = work[nr:2 * nr]
    tk = work[2 * nr:3 * nr]
    rd = work[3 * nr:3 * nr + 3]
    ro = work[3 * nr + 3:3 * nr + 6]
    nd = work[3 * nr + 6:3 * nr + 9]
    no = work[3 * nr + 9:3 * nr + 12]
    for r in range(nr):
        inner[r] = 0
    for y in range(3):
        rd[y] = 0
        ro[y] = y
    nk = 1
    pk = 0
    kz = True
    for i in range(k - 1, -1, -1):
        ni = nb[i]
        if ni < 2:
            continue
        for r in range(nr):
            ti[r] = tr[i, r] - inner[r]
            inner[r] += tr[i, r]
        if not found:
            found = True
            kz = True
            for r in range(nr):
                tk[r] = ti[r]
                if ti[r] != 0:
                    kz = False
            nk = ni
            pk = _partial(full, ext, tk, nr)
            continue
        tz = True
        eqk = True
        for r in range(nr):
            if ti[r] != 0:
                tz = False
            if ti[r] != tk[r]:
                eqk = False
        pi = _partial(full, ext, ti, nr)
        w = ni - 1
        wk = nk - 1
        for y in range(3):
            o1 = ro[y]
            if o1 == _NONE:
                dt, zk = (0, _ZERO) if tz else (pi, _VEC)
            elif o1 == _ZERO:
                dt, zk = (0, _ZERO) if tz else (full, _NONE)
            else:                                   # KAPPA (a non-zero vector)
                dt, zk = (pi, _VEC) if (not tz and eqk) else (full, _NONE)
            if zk == _NONE:
                dk, yk = (0, _ZERO) if kz else (pk, _KAPPA)
            elif zk == _ZERO:
                dk, yk = (0, _ZERO) if kz else (full, _NONE)
            else:
                dk, yk = (pk, _KAPPA) if (not kz and eqk) else (full, _NONE)
            nd[y] = rd[y] + w * (dt + dk * wk + rd[yk])
            no[y] = ro[yk]
        for y in range(3):
            rd[y] = nd[y]
            ro[y] = no[y]
    if not found:
        return full
    if kz:
        return full + rd[_ZERO]
    return full + pk * (nk - 1) + rd[_KAPPA]


@njit(cache=True)
def evaluate_kernel(tb: np.ndarray, sb: np.ndarray, perm: np.ndarray, netonly: np.ndarray,
                    fanout: np.ndarray, coef: np.ndarray, nranks: np.ndarray, rw: np.ndarray,
                    keep: np.ndarray, wscale: np.ndarray, size: np.ndarray, block: np.ndarray, hw_inst: np.ndarray,
                    cluster: np.ndarray, e_rd: np.ndarray, e_wr: np.ndarray, e_up: np.ndarray,
                    e_lk: np.ndarray, rbw: np.ndarray, wbw: np.ndarray, shared: np.ndarray,
                    meshx: np.ndarray,
                    meshy: np.ndarray, xmask: np.ndarray, has_split: np.ndarray,
                    compute_e: float, compute_hw: int,
                    energy: np.ndarray, cycles: np.ndarray, feasible: np.ndarray) -> None:
    """Evaluate every candidate; results into ``energy`` (pJ), ``cycles``, ``feasible``.

    Shapes: tb/sb/perm [B, L, D]; coef [S, R, D]; keep [S, L]; wscale [S, L] (level words
    per element of each data space: its element bits / the level's word bits, 1.0 when it
    has no width of its own); per-level arrays [L];
    xmask [L, D] (dims on X when ``has_split``). Bandwidths 0 = unlimited (``shared``: reads
    and writes share the read bandwidth), size -1 = none.
    """
    nb_, nlev, ndim = tb.shape
    nds = coef.shape[0]
    rmax = coef.shape[1]
    pmax = nlev * 2 * ndim
    pdim = np.zeros(pmax, dtype=np.int64)
    pbound = np.zeros(pmax, dtype=np.int64)
    plev = np.zeros(pmax, dtype=np.int64)
    psp = np.zeros(pmax, dtype=np.bool_)
    stride = np.zeros(pmax, dtype=np.int64)
    scale = np.zeros(ndim, dtype=np.int64)
    cum = np.zeros((nlev, ndim), dtype=np.int64)
    tabove = np.zeros((nlev, ndim), dtype=np.int64)
    tr = np.zeros((pmax, rmax), dtype=np.int64)
    nbv = np.zeros(pmax, dtype=np.int64)
    ext = np.zeros(rmax, dtype=np.int64)
    reads = np.zeros(nlev, dtype=np.float64)
    writes = np.zeros(nlev, dtype=np.float64)
    used = np.zeros(nlev, dtype=np.float64)
    util = np.zeros(nlev, dtype=np.int64)
    inst_above = np.zeros(nlev + 1, dtype=np.int64)
    vals = np.zeros(4096, dtype=np.int64)
    work = np.zeros(3 * rmax + 12, dtype=np.int64)
    for c in range(nb_):
        ok = True
        npos = 0
        for lv in range(nlev - 1, -1, -1):
            # loops of bound 1 change nothing (no stride, no move): left out
            if not netonly[lv]:
                for p in range(ndim - 1, -1, -1):
                    d = perm[c, lv, p]
                    if tb[c, lv, d] < 2:
                        continue
                    pdim[npos] = d
                    pbound[npos] = tb[c, lv, d]
                    plev[npos] = lv
                    psp[npos] = False
                    npos += 1
            if fanout[lv] > 1:
                for d in range(ndim):
                    if sb[c, lv, d] < 2:
                        continue
                    pdim[npos] = d
                    pbound[npos] = sb[c, lv, d]
                    plev[npos] = lv
                    psp[npos] = True
                    npos += 1
        for d in range(ndim):
            scale[d] = 1
        for p in range(npos - 1, -1, -1):
            stride[p] = scale[pdim[p]]
            scale[pdim[p]] *= pbound[p]
        for lv in range(nlev):
            for d in range(ndim):
                f = tb[c, lv, d] * sb[c, lv, d]
                cum[lv, d] = f if lv == 0 else cum[lv - 1, d] * f
        temporal = 1
        for lv in range(nlev):
            for d in range(ndim):
                temporal *= tb[c, lv, d]
        inst_above[nlev] = 1
        for lv in range(nlev - 1, -1, -1):
            s = 1
            for d in range(ndim):
                s *= sb[c, lv, d]
            inst_above[lv] = inst_above[lv + 1] * s
        # inst_above[lv] = product of spatial at levels >= lv; instances of lv = [lv + 1]
        for lv in range(nlev):
            reads[lv] = 0
            writes[lv] = 0
            used[lv] = 0
            util[lv] = 1
        # cheap pre-check (capacity, fan-out, MAC count) before the access analysis
        for s_ in range(nds):
            for lv in range(nlev):
                if not keep[s_, lv]:
                    continue
                full = 1
                for r in range(nranks[s_]):
                    ex = 1
                    for d in range(ndim):
                        cf = coef[s_, r, d]
                        if cf != 0:
                            ex += cf * (cum[lv, d] - 1)
                    full *= ex
                used[lv] += full * wscale[s_, lv]
        for lv in range(nlev):
            if size[lv] >= 0 and not netonly[lv] and used[lv] > size[lv]:
                ok = False
            if fanout[lv] > 1 and ok:
                if has_split[lv]:
                    px = 1
                    py = 1
                    for d in range(ndim):
                        if xmask[lv, d]:
                            px *= sb[c, lv, d]
                        else:
                            py *= sb[c, lv, d]
                    if px > meshx[lv] or py > meshy[lv]:
                        ok = False
                else:
                    fit = False
                    for mask in range(1 << ndim):
                        px = 1
                        py = 1
                        for d in range(ndim):
                            if (mask >> d) & 1:
                                px *= sb[c, lv, d]
                            else:
                                py *= sb[c, lv, d]
                        if px <= meshx[lv] and py <= meshy[lv]:
                            fit = True
                            break
                    if not fit:
                        ok = False
        if inst_above[0] > compute_hw:
            ok = False
        if not ok:
            energy[c] = np.inf
            cycles[c] = 0
            feasible[c] = False
            continue
        for d in range(ndim):
            t = 1
            for lv in range(nlev - 1, -1, -1):
                tabove[lv, d] = t
                t *= tb[c, lv, d]
        e = compute_e
        for s_ in range(nds):
            nr = nranks[s_]
            child = -1
            d_child = temporal
            last = -1
            for lv in range(nlev):
                if keep[s_, lv]:
                    last = lv
            for lv in range(nlev):
                if not keep[s_, lv]:
                    continue
                served = d_child
                for x in range(child + 1, lv + 1):
                    if fanout[x] <= 1:
                        continue
                    prod = 1
                    for p in range(npos):
                        if plev[p] == x and psp[p]:
                            prod *= pbound[p]
                    if prod > fanout[x] or prod > vals.shape[0]:
                        ok = False          # exceeds the mesh: infeasible, count unicast
                        served *= prod
                        continue
                    for r in range(nr):
                        nrel = 0
                        single = 1
                        for p in range(npos):
                            if plev[p] == x and psp[p] and pbound[p] >= 2 \
                                    and coef[s_, r, pdim[p]] != 0:
                                nrel += 1
                                single = pbound[p]
                        if nrel == 1:
                            served *= single
                            continue
                        if nrel == 0:
                            continue
                        nv = 1
                        vals[0] = 0
                        for p in range(npos):
                            if plev[p] != x or not psp[p] or pbound[p] < 2:
                                continue
                            cf = coef[s_, r, pdim[p]]
                            if cf == 0:
                                continue
                            step = cf * stride[p]
                            m = nv
                            for i in range(1, pbound[p]):
                                for q in range(m):
                                    vals[nv] = vals[q] + i * step
                                    nv += 1
                        vals[:nv].sort()
                        cnt = 1
                        for q in range(1, nv):
                            if vals[q] != vals[q - 1]:
                                cnt += 1
                        served *= cnt
                # tile extents and deltas
                full = 1
                part = 1
                for r in range(nr):
                    ex = 1
                    pe = 1
                    for d in range(ndim):
                        cf = coef[s_, r, d]
                        if cf != 0:
                            ex += cf * (cum[lv, d] - 1)
                            pe += cf * (cum[lv, d] * tabove[lv, d] - 1)
                    ext[r] = ex
                    full *= ex
                    part *= pe
                k = 0
                for p in range(npos):
                    if plev[p] > lv and not psp[p]:
                        for r in range(nr):
                            tr[k, r] = coef[s_, r, pdim[p]] * stride[p]
                        nbv[k] = pbound[p]
                        k += 1
                d_here = _deltas(tr, nbv, k, ext, nr, work)
                if rw[s_]:
                    up = served
                    rd = served - part
                    fl = 0 if lv == last else d_here - part
                else:
                    up = 0
                    rd = served
                    fl = 0 if lv == last else d_here
                inst = inst_above[lv + 1]
                clusters = hw_inst[lv] // cluster[lv]
                if clusters < 1:
                    clusters = 1
                if clusters > inst:
                    clusters = inst
                cu = inst / clusters
                bs = block[lv]
                ws = wscale[s_, lv]
                if ws == 1.0:
                    per = ((rd + bs - 1) // bs * e_rd[lv] + (fl + bs - 1) // bs * e_wr[lv]
                           + (up + bs - 1) // bs * e_up[lv]) / cu
                else:
                    per = (np.ceil(rd * ws / bs) * e_rd[lv] + np.ceil(fl * ws / bs) * e_wr[lv]
                           + np.ceil(up * ws / bs) * e_up[lv]) / cu
                e += per * inst
                reads[lv] += rd * ws
                writes[lv] += (fl + up) * ws
                if inst > util[lv]:
                    util[lv] = inst
                child = lv
                d_child = d_here
        cyc = float(temporal)
        for lv in range(nlev):
            if shared[lv]:
                if rbw[lv] > 0 and (reads[lv] + writes[lv]) / rbw[lv] > cyc:
                    cyc = (reads[lv] + writes[lv]) / rbw[lv]
                continue
            if rbw[lv] > 0 and reads[lv] / rbw[lv] > cyc:
                cyc = reads[lv] / rbw[lv]
            if wbw[lv] > 0 and writes[lv] / wbw[lv] > cyc:
                cyc = writes[lv] / wbw[lv]
        icyc = int(np.ceil(cyc))
        for lv in range(nlev):
            if not netonly[lv]:
                e += e_lk[lv] * icyc * util[lv]
        energy[c] = e
        cycles[c] = icyc
        feasible[c] = ok


@njit(cache=True)
def fill_factors(flat: np.ndarray, rows: np.ndarray, tb: np.ndarray, sb: np.ndarray) -> None:
    """``tb[c, l, d] = flat[rows[d, c], 2l]`` and ``sb[c, l, d] = flat[rows[d, c], 2l + 1]``:
    the sampled factorisation row of every dimension (``flat``: all dimensions' tables
    stacked, ``rows``: [D, B] row indices into it) spread over the candidates' slots."""
    ndim, nb_ = rows.shape
    nlev = tb.shape[1]
    for c in range(nb_):
        for d in range(ndim):
            r = rows[d, c]
            for lv in range(nlev):
                tb[c, lv, d] = flat[r, 2 * lv]
                sb[c, lv, d] = flat[r, 2 * lv + 1]


_guard_cache(fill_factors)  # stale cross-file cache entries (sim/jitcache.py)
