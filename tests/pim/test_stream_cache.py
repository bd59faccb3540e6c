"""The PIM command stream (``arch.pim.kernel.run_channel``: cached rank-wide earliest
times, MACAB issued inline) against a plain replay of the same program through the public
``sim.dram.DramState`` (every command at ``earliest_issue``, which scans every bank of the
rank for a rank-wide command, then ``issue``, which checks timing and bank state).

Both must give the same end cycle per stream and the same command and event counts: on
weight GEMVs and attention ops with KV-cache appends, with and without refresh, one
device state carried from op to op, and with an extra table row through which the
appends' bank-level WRs delay the next WRGB (a cache that missed those writes would
issue that WRGB too early).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import archsim
from archsim.arch.pim import kernel as PK
from archsim.sim.dram import DramState, resolve
from archsim.workloads.formats import FORMATS
from archsim.workloads.ops import Gemm

BF = FORMATS["bf16"]


def _ops() -> list[Gemm]:
    shapes = [(4800, 1600, 1, 1, True, ""), (129, 64, 1, 25, False, "qk"),
              (1024, 1024, 4, 1, True, ""), (64, 1025, 1, 25, False, "av"),
              (3072, 768, 1, 1, True, "")]
    return [Gemm(name=f"g{i}", m=m, n=n, k=k, batch=b, b_is_weight=w, role=role,
                 a_format=BF, w_format=BF)
            for i, (n, k, m, b, w, role) in enumerate(shapes)]


def _reference_stream(d: DramState, c: dict, nrefi: int, rlat: int, st,
                      macs_per_row: int) -> int:
    """The stream of the arch.pim.kernel module docstring on channel 0, command by command."""
    def go(cmd: str, bg: int = 0, ba: int = 0, row: int = 0) -> int:
        t = d.earliest_issue(cmd, 0, 0, bg, ba)
        d.issue(cmd, t, 0, 0, bg, ba, row)
        return t

    def refresh_if_due(t: int) -> bool:
        if nrefi <= 0 or t < c["ref"]:
            return False
        if c["open"] >= 0 or c["sb"]:
            go("PREA")
            c["open"], c["sb"] = -1, 0
        go("REF")
        c["ref"] += nrefi
        c["refreshes"] += 1
        return True

    s = d.spec
    nba, banks = s.banks, s.bankgroups * s.banks
    if st.app_rows > 0:
        if c["open"] >= 0:
            go("PREA")
            c["open"] = -1
        done = 0
        while done < st.app_rows:
            nb = min(banks, st.app_rows - done)
            if refresh_if_due(d.earliest_issue("ACT", 0)):
                continue
            c["sb"] = 1
            for b in range(nb):
                go("ACT", b // nba, b % nba, 1)
            for b in range(nb):
                for _ in range(st.app_bursts):
                    go("WR", b // nba, b % nba, 1)
            for b in range(nb):
                t = go("PRE", b // nba, b % nba)
            c["sb"] = 0
            done += nb
            c["end"] = max(c["end"], t + s.write_latency_cycles)
    for _ in range(st.reps):
        pos = 0
        for wrgb, steps, mpn in zip(st.seg_wrgb, st.seg_steps, st.seg_mpn):
            for _ in range(wrgb):
                while refresh_if_due(d.earliest_issue("WRGB", 0)):
                    pass
                go("WRGB")
            for _ in range(steps):
                for _ in range(mpn):
                    row = pos // macs_per_row
                    while True:
                        if c["open"] != row:
                            if c["open"] >= 0:
                                go("PREA")
                                c["open"] = -1
                            if refresh_if_due(d.earliest_issue("ACTAB", 0)):
                                continue
                            go("ACTAB", row=row)
                            c["open"] = row
                        if refresh_if_due(d.earliest_issue("MACAB", 0)):
                            continue
                        break
                    go("MACAB", row=row)
                    pos += 1
                while refresh_if_due(d.earliest_issue("RDMAC", 0)):
                    pass
                t = go("RDMAC")
                c["end"] = max(c["end"], t + rlat)
    return c["end"]


@pytest.mark.parametrize("name,refresh,extra", [
    ("pim_gpt", True, ()), ("pim_gpt", False, ()), ("aim_like", True, ()),
    ("pim_gpt", True, (("bank", "WR", "WRGB", 500),)),
])
def test_stream_equals_a_plain_replay_through_dram_state(name, refresh, extra) -> None:
    u = archsim.load(name, (f"units[0].refresh={str(refresh).lower()}",)).units[0]
    spec = dataclasses.replace(u.dram, extra_constraints=tuple(u.dram.extra_constraints)
                               + extra)
    nrefi = u.timing("nREFI") if refresh else 0
    rlat = spec.read_latency_cycles
    inst = resolve(spec, ring_capacity=1)
    _, cs = u.new_state()
    cnt = np.zeros(PK.N_COUNTERS, np.int64)
    d = DramState(spec)
    c = {"open": -1, "ref": u.timing("nREFI"), "end": 0, "sb": 0, "refreshes": 0}
    for op in _ops():
        p = u.plan(op)
        st = p.streams[0][0]
        end = PK.run_channel(inst, cs, cnt, 0, nrefi, rlat, st.app_rows, st.app_bursts,
                             st.reps, np.asarray(st.seg_wrgb, np.int64),
                             np.asarray(st.seg_steps, np.int64),
                             np.asarray(st.seg_mpn, np.int64), p.macs_per_row)
        assert int(end) == _reference_stream(d, c, nrefi, rlat, st, p.macs_per_row), op.name
        assert inst.stats.tolist() == d.inst.stats.tolist(), op.name
    assert int(cnt[PK.N_REFRESH]) == c["refreshes"] and (c["refreshes"] > 0) == refresh
    assert any(st.app_rows > 0 for op in _ops() for st, _ in u.plan(op).streams)
