"""DRAM tests derived from the timing tables and presets (no hard-coded latencies)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.sim import (
    COMMANDS,
    DramConfigError,
    DramState,
    dram_preset,
    encode_address,
    peak_bytes_per_s,
    simulate_requests,
)
from archsim.sim import dram as D
from archsim.sim import dram_kernel as K
from archsim.sim.dram import eval_latency
from archsim.sim.dram_presets import COMMAND_SCOPE, LEVELS, PRESETS

PRESET_NAMES = sorted(PRESETS)
T0 = 3000  # issue cycle of the preceding command; later than every setup constraint


def _path(cmd: str, ch: int, ra: int, bg: int, ba: int) -> tuple[int, ...]:
    """Address of a command truncated at its scope (channel, rank, bankgroup, bank)."""
    return (ch, ra, bg, ba)[: LEVELS.index(COMMAND_SCOPE[cmd]) + 1]


def reference_earliest(spec, history, cmd, target) -> int:
    """Earliest issue of ``cmd`` at ``target`` from the table rows, in plain Python.

    ``history`` is a list of (cmd, cycle, (ch, ra, bg, ba)) issued so far.
    """
    tb = _path(cmd, *target)
    best = 0
    for _c, t, addr in history:  # command bus: one command per cycle per channel
        if addr[0] == target[0]:
            best = max(best, t + 1)
    for row in spec.constraint_rows():
        level, prev, nxt, lat = row[:4]
        if nxt != cmd:
            continue
        L = LEVELS.index(level)
        lat = eval_latency(lat, spec.timing)
        window = row[4] if len(row) == 5 else 1
        times = []
        for c, t, addr in history:
            if c != prev:
                continue
            ta = _path(c, *addr)
            depth = min(L, len(ta) - 1, len(tb) - 1)
            if ta[: depth + 1] == tb[: depth + 1]:
                times.append(t)
        if len(times) >= window:
            best = max(best, sorted(times)[-window] + lat)
    return best


def _target_for_level(spec, level: str) -> tuple[int, int, int, int]:
    """A node sharing exactly the ``level`` ancestor with bank (0, 0, 0, 0) if possible."""
    if level == "bank":
        return (0, 0, 0, 0)
    if level == "bankgroup":
        return (0, 0, 0, 1 if spec.banks > 1 else 0)
    if level == "rank":
        return (0, 0, 1 if spec.bankgroups > 1 else 0, 0)
    return (0, 1, 0, 0) if spec.ranks > 1 else (0, 0, 1 if spec.bankgroups > 1 else 0, 0)


_SETUP = {  # commands that make the preceding command legal on bank (0,0,0,0)
    "RD": ["ACT"], "WR": ["ACT"], "PRE": ["ACT"], "MACAB": ["ACTAB"],
}


def _rows(spec):
    return [r for r in spec.constraint_rows() if len(r) == 4]


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_each_constraint_blocks_until_its_latency(name: str) -> None:
    spec = dram_preset(name, refresh=False)
    for row in _rows(spec):
        level, prev, nxt, _ = row
        state = DramState(spec)
        history = []
        for c in _SETUP.get(prev, []):
            state.issue(c, 0, 0, 0, 0, 0, row=0)
            history.append((c, 0, (0, 0, 0, 0)))
        state.issue(prev, T0, 0, 0, 0, 0, row=0)
        history.append((prev, T0, (0, 0, 0, 0)))
        target = _target_for_level(spec, level)
        t = reference_earliest(spec, history, nxt, target)
        assert t >= T0 + eval_latency(row[3], spec.timing), row
        got = state.earliest_issue(nxt, *target)
        assert got == t, (row, got, t)
        # blocked at t - 1, allowed at t
        assert not state.earliest_issue(nxt, *target) <= t - 1
        assert state.earliest_issue(nxt, *target) <= t


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_four_activate_window(name: str) -> None:
    spec = dram_preset(name, refresh=False)
    state = DramState(spec)
    history = []
    banks = [(0, 0, g % spec.bankgroups, g // spec.bankgroups) for g in range(5)]
    t = T0
    for addr in banks[:4]:
        t = max(t, state.earliest_issue("ACT", *addr))
        state.issue("ACT", t, *addr, row=1)
        history.append(("ACT", t, addr))
    first = history[0][1]
    e = state.earliest_issue("ACT", *banks[4])
    assert e == reference_earliest(spec, history, "ACT", banks[4])
    assert e >= first + spec.timing["nFAW"]


@pytest.mark.nojit
@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["DDR4-2400", "GDDR6"]),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1), st.integers(0, 1),
                          st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=40))
def test_random_command_sequences_match_reference(name, ops) -> None:
    """Issue legal random commands at their earliest cycle; kernel == reference."""
    spec = dram_preset(name, refresh=False)
    state = DramState(spec)
    history = []
    for kind, bg, ba, row, gap in ops:
        addr = (0, 0, bg, ba)
        open_row = state.open_row(*addr)
        if open_row < 0:
            cmd = "ACT"
        elif kind == 0 or (kind == 1 and open_row != row):
            cmd = "PRE"
        else:
            cmd = "RD" if kind in (1, 2) else "WR"
            row = open_row
        e = state.earliest_issue(cmd, *addr)
        assert e == reference_earliest(spec, history, cmd, addr)
        t = e + gap
        state.issue(cmd, t, *addr, row=row)
        history.append((cmd, t, addr))


@pytest.mark.nojit
def test_issue_rejects_violations() -> None:
    spec = dram_preset("GDDR6")
    state = DramState(spec)
    state.issue("ACT", 0, 0, 0, 0, 0, row=3)
    with pytest.raises(DramConfigError, match="violates timing"):
        state.issue("RD", spec.timing["nRCDRD"] - 1, 0, 0, 0, 0, row=3)
    with pytest.raises(DramConfigError, match="open"):
        state.issue("ACT", 10_000, 0, 0, 0, 0, row=4)
    state.issue("RD", spec.timing["nRCDRD"], 0, 0, 0, 0, row=3)
    assert state.command_counts()["RD"] == 1


def test_gddr6_preset_is_the_aim_table() -> None:
    aim = {"tCK_ps": 570, "BL": 8, "nCL": 24, "nRCDRD": 26, "nRCDWR": 16, "nRP": 26,
           "nRAS": 53, "nRC": 79, "nWR": 26, "nRTP": 4, "nCWL": 6, "nCCDS": 4, "nCCDL": 6,
           "nRRDS": 7, "nRRDL": 7, "nWTRS": 9, "nWTRL": 11, "nFAW": 28, "nRFC": 210,
           "nRFCpb": 105, "nREFI": 3333}
    spec = dram_preset("GDDR6")
    assert spec.tck_ps == aim["tCK_ps"]
    for k, v in aim.items():
        if k.startswith("n"):
            assert spec.timing[k] == v, k
    assert (spec.bankgroups, spec.banks, spec.rows, spec.columns) == (4, 4, 16384, 1024)


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_peak_bandwidth_formula(name: str) -> None:
    spec = dram_preset(name)
    spacing = max(spec.timing["nBL"], spec.timing["nCCDS"])
    expect = spec.channels * spec.burst_bytes / (spacing * spec.tck_ps * 1e-12)
    assert peak_bytes_per_s(spec) == pytest.approx(expect)


def test_ddr4_peak_is_19_2_gbps() -> None:
    # 64 B per 4 tCK at 1.2 GHz (tCK 0.833 ns) = 19.2 GB/s (JEDEC DDR4-2400 x64)
    assert peak_bytes_per_s(dram_preset("DDR4-2400")) == pytest.approx(19.2e9, rel=1e-3)


@pytest.mark.nojit
@pytest.mark.parametrize("name", PRESET_NAMES)
def test_unloaded_latencies(name: str) -> None:
    spec = dram_preset(name, refresh=False)
    t = spec.timing
    a0 = encode_address(spec, bank=1, row=5)
    hit = encode_address(spec, bank=1, row=5, column=1)
    conflict = encode_address(spec, bank=1, row=9)
    late = 1000  # bank long idle: only the conflict itself costs time
    res = simulate_requests(spec, [a0, hit, conflict], [False] * 3, [0, late, 2 * late])
    burst = t["nCL"] + t["nBL"]
    assert res.completion_cycles[0] == t["nRCDRD"] + burst  # closed bank (miss)
    assert res.completion_cycles[1] - late == burst  # row hit
    assert res.completion_cycles[2] - 2 * late == t["nRP"] + t["nRCDRD"] + burst  # conflict
    s = res.stats
    assert (s.row_hits, s.row_misses, s.row_conflicts) == (1, 1, 1)


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_streaming_reads_reach_peak_and_random_reads_do_not(name: str) -> None:
    for refresh in (False, True):
        spec = dram_preset(name, refresh=refresh)
        n = 2048 * spec.channels  # long enough that the unloaded latency is < 3 %
        addr = np.arange(n, dtype=np.int64) * spec.burst_bytes
        res = simulate_requests(spec, addr, np.zeros(n, bool), np.zeros(n, np.int64))
        bw = n * spec.burst_bytes / (res.makespan_cycles * spec.tck_ps * 1e-12)
        ratio = bw / peak_bytes_per_s(spec)
        refresh_loss = spec.timing["nRFC"] / spec.timing["nREFI"] if refresh else 0.0
        assert ratio <= 1.0 + 1e-9
        assert ratio >= (1.0 - refresh_loss) * 0.97, (refresh, ratio)
    rng = np.random.default_rng(1)
    spec = dram_preset(name, refresh=False)
    n = 16384
    addr = rng.integers(0, spec.capacity_bytes() // spec.burst_bytes, n) * spec.burst_bytes
    res = simulate_requests(spec, addr, np.zeros(n, bool), np.zeros(n, np.int64))
    bw = n * spec.burst_bytes / (res.makespan_cycles * spec.tck_ps * 1e-12)
    assert bw < 0.75 * peak_bytes_per_s(spec)  # DDR4 random is nFAW-bound: 4 ACT per 26 tCK
    assert res.stats.row_hits < 0.2 * n


@pytest.mark.parametrize("name", ["DDR4-2400", "GDDR6"])
def test_refresh_every_nrefi(name: str) -> None:
    spec = dram_preset(name)
    refi = spec.timing["nREFI"]
    n = 400
    arrival = np.arange(n, dtype=np.int64) * (10 * refi // n)  # light load over 10 x nREFI
    addr = np.arange(n, dtype=np.int64) * spec.burst_bytes * 97
    res = simulate_requests(spec, addr, np.zeros(n, bool), arrival)
    ranks = spec.channels * spec.ranks
    expected = ranks * (res.makespan_cycles // refi)
    assert abs(res.stats.command_counts["REF"] - expected) <= ranks
    off = simulate_requests(dram_preset(name, refresh=False), addr, np.zeros(n, bool), arrival)
    assert off.stats.command_counts["REF"] == 0


def test_closed_row_policy_precharges() -> None:
    spec = dram_preset("DDR4-2400", refresh=False, row_policy="closed")
    a = [encode_address(spec, bank=0, row=1), encode_address(spec, bank=0, row=1, column=1)]
    res = simulate_requests(spec, a, [False, False], [0, 1000])
    # the row was closed after the first read: the second read is a miss, not a hit
    assert res.stats.command_counts["PRE"] >= 1 and res.stats.row_hits == 0
    t = spec.timing
    assert res.completion_cycles[1] - 1000 == t["nRCDRD"] + t["nCL"] + t["nBL"]


@pytest.mark.nojit
def test_spec_errors_name_the_field() -> None:
    with pytest.raises(DramConfigError, match="address_mapping"):
        dram_preset("DDR4-2400", address_mapping="ro-ba-co-ch")
    with pytest.raises(DramConfigError, match="nBogus"):
        dram_preset("DDR4-2400", extra_constraints=(("bank", "ACT", "RD", "nBogus"),))
    with pytest.raises(DramConfigError, match="unknown DRAM preset"):
        dram_preset("DDR9")
    with pytest.raises(DramConfigError, match="unknown DramSpec field"):
        dram_preset("HBM3", colums=3)
    assert COMMANDS[:5] == ("ACT", "PRE", "RD", "WR", "REF")


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_resolve_gives_fresh_state_per_call(name: str) -> None:
    """resolve reuses the tables of a spec object but every call gets its own arrays: a run
    on one instance leaves the next one zeroed, the flat views alias their own 2-D arrays,
    the queue and bank rows stay 64-byte aligned, and a second trace equals the first."""
    spec = dram_preset(name)
    a = D.resolve(spec, ring_capacity=8)
    b = D.resolve(spec, ring_capacity=8)
    for f in a._fields:
        assert not np.shares_memory(getattr(a, f), getattr(b, f)), f
    a.nx[:] = 7
    a.stats[:] = 7
    c = D.resolve(spec, ring_capacity=8)
    assert not c.nx.any() and not c.stats.any()
    assert np.shares_memory(c.nxf, c.nx) and np.shares_memory(c.conf, c.con)
    assert c.q.ctypes.data % 64 == 0
    # the rows of every command: those without a rolling window first (tab T_CWIN)
    for cmd in range(len(COMMANDS)):
        lo, kw, hi = c.con_ptr[cmd], c.tab[K.T_CWIN, cmd], c.con_ptr[cmd + 1]
        assert lo <= kw <= hi
        assert (c.con[K.K_WIN, lo:kw] <= 1).all() and (c.con[K.K_WIN, kw:hi] > 1).all()
    rng = np.random.default_rng(1)
    addr = rng.integers(0, spec.capacity_bytes() // spec.burst_bytes, 500) * spec.burst_bytes
    wr = rng.random(500) < 0.3
    r1 = simulate_requests(spec, addr, wr, np.zeros(500, np.int64), max_outstanding=8)
    r2 = simulate_requests(spec, addr, wr, np.zeros(500, np.int64), max_outstanding=8)
    assert np.array_equal(r1.completion_cycles, r2.completion_cycles)
    assert r1.stats == r2.stats


def test_trace_leaves_the_callers_arrays_unchanged() -> None:
    """Trace mode reads the caller's int64 address array in place: it must not write it."""
    spec = dram_preset("DDR4-2400")
    addr = np.arange(300, dtype=np.int64) * spec.burst_bytes * 7
    wr = np.arange(300) % 3 == 0
    arr = np.arange(300, dtype=np.int64) // 4
    keep = (addr.copy(), wr.copy(), arr.copy())
    res = simulate_requests(spec, addr, wr, arr, max_outstanding=4)
    assert all(np.array_equal(x, y) for x, y in zip((addr, wr, arr), keep))
    assert (res.completion_cycles > arr).all()  # every entry set (the array is np.empty)


@pytest.mark.parametrize("name", PRESET_NAMES)
@pytest.mark.parametrize("mapping", ["ro-ba-ra-co-bg-ch", "ch-ra-bg-ba-ro-co"])
def test_power_of_two_decode_table(name: str, mapping: str) -> None:
    """The controller decodes a power-of-two organisation with one shift and mask per
    field (tab T_DSHIFT / T_DMASK): every field of encode_address comes back, whatever
    the mapping order (byte offsets within the burst ignored)."""
    spec = dram_preset(name, address_mapping=mapping)
    inst = D.resolve(spec)
    assert inst.p[K.P_POW2] == 1  # (every preset's field counts are powers of two)
    tab = inst.tab
    rng = np.random.default_rng(3)
    counts = (spec.channels, spec.ranks, spec.bankgroups, spec.banks, spec.rows,
              spec.bursts_per_row)
    for _ in range(200):
        fields = [int(rng.integers(0, c)) for c in counts]
        addr = encode_address(spec, *fields) + int(rng.integers(0, spec.burst_bytes))
        got = [(addr >> int(tab[K.T_DSHIFT, f])) & int(tab[K.T_DMASK, f]) for f in range(5)]
        assert got == fields[:5]
