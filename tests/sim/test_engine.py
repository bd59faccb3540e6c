"""Engine tests: a pure-Python reference engine, closed-form cases and properties."""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.sim import (
    KIND_READ,
    TaskGraph,
    TaskGraphBuilder,
    TaskGraphError,
    dram_preset,
    run,
    write_chrome_trace,
)


# ------------------------------------------------------------------ reference engine
def reference_run(tg: TaskGraph) -> tuple[int, np.ndarray, np.ndarray]:
    """Straightforward heapq engine with the documented semantics (no DRAM).

    Returns (makespan, start, end).
    """
    T = tg.num_tasks
    dur = [int(d) for d in tg.duration]
    for t in range(T):
        r = int(tg.resource[t])
        if tg.kind[t] > 0:
            rate = tg.bytes_per_cycle[r] * tg.efficiency[r]
            dur[t] = math.ceil(int(tg.mem_bytes[t]) / rate - 1e-9)
    indeg = [int(tg.dep_ptr[t + 1] - tg.dep_ptr[t]) for t in range(T)]
    succ: list[list[int]] = [[] for _ in range(T)]
    for t in range(T):
        for p in tg.dep_idx[tg.dep_ptr[t]:tg.dep_ptr[t + 1]]:
            succ[int(p)].append(t)
    running = [0] * tg.num_resources
    queues = [deque() for _ in range(tg.num_resources)]
    heap: list[tuple[int, int, int, int]] = []
    start = [0] * T
    end = [0] * T
    seq = 0

    def begin(t: int, now: int) -> None:
        nonlocal seq
        r = int(tg.resource[t])
        if r >= 0:
            running[r] += 1
        start[t] = now
        heapq.heappush(heap, (now + dur[t], int(tg.priority[t]), seq, t))
        seq += 1

    def ready(t: int, now: int) -> None:
        r = int(tg.resource[t])
        if r < 0 or (running[r] < tg.resource_capacity[r] and not queues[r]):
            begin(t, now)
        else:
            queues[r].append(t)

    for t in range(T):
        if indeg[t] == 0:
            ready(t, 0)
    makespan = 0
    while heap:
        now, _, _, t = heapq.heappop(heap)
        end[t] = now
        makespan = max(makespan, now)
        r = int(tg.resource[t])
        if r >= 0:
            running[r] -= 1
            if queues[r]:
                begin(queues[r].popleft(), now)
        for s in succ[t]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready(s, now)
    return makespan, np.array(start, np.int64), np.array(end, np.int64)


def critical_path(tg: TaskGraph, dur: np.ndarray) -> int:
    """Longest path through the DAG with task durations ``dur`` (cycles)."""
    T = tg.num_tasks
    indeg = np.diff(tg.dep_ptr).copy()
    succ: list[list[int]] = [[] for _ in range(T)]
    for t in range(T):
        for p in tg.dep_idx[tg.dep_ptr[t]:tg.dep_ptr[t + 1]]:
            succ[int(p)].append(t)
    finish = np.zeros(T, np.int64)
    earliest = np.zeros(T, np.int64)
    stack = [t for t in range(T) if indeg[t] == 0]
    while stack:
        t = stack.pop()
        finish[t] = earliest[t] + dur[t]
        for s in succ[t]:
            earliest[s] = max(earliest[s], finish[t])
            indeg[s] -= 1
            if indeg[s] == 0:
                stack.append(s)
    return int(finish.max()) if T else 0


# ------------------------------------------------------------------ random graphs
@st.composite
def random_graphs(draw: st.DrawFn, max_tasks: int = 40, joins: bool = False) -> TaskGraph:
    """Random DAGs; ``joins``: one op, priority 0, mostly zero-duration tasks."""
    n_res = draw(st.integers(1, 3))
    T = draw(st.integers(1, max_tasks))
    b = TaskGraphBuilder()
    res = [b.add_server(f"s{i}", draw(st.integers(1, 3))) for i in range(n_res)]
    mem = b.add_bandwidth_memory("mem", draw(st.sampled_from([1.0, 4.0, 16.0, 3.5])),
                                 draw(st.sampled_from([1.0, 0.5, 0.8])),
                                 draw(st.integers(1, 2)))
    n_ops = 1 if joins else draw(st.integers(1, 3))
    for i in range(n_ops):
        b.add_op(f"op{i}")
    perm = draw(st.permutations(range(T)))  # ids not in topological order
    inv = {p: i for i, p in enumerate(perm)}
    spec = []
    for k in range(T):  # k = topological position
        deps = draw(st.lists(st.integers(0, max(k - 1, 0)), max_size=3, unique=True)) if k else []
        choice = draw(st.integers(-1, n_res))
        spec.append((choice, deps))
    for tid in range(T):
        k = inv[tid]
        choice, deps = spec[k]
        dep_ids = [perm[d] for d in deps]
        prio = 0 if joins else draw(st.integers(0, 2))
        op = draw(st.integers(0, n_ops - 1))
        if choice == n_res:
            b.add_read(mem, draw(st.integers(0, 64)), deps=dep_ids, priority=prio, op=op)
        else:
            r = -1 if choice < 0 else res[choice]
            dur = draw(st.sampled_from([0, 0, 0, 1, 3]) if joins else st.integers(0, 20))
            b.add_task(r, dur, deps=dep_ids, priority=prio, op=op)
    return b.build()


def effective_durations(tg: TaskGraph) -> np.ndarray:
    dur = tg.duration.astype(np.int64).copy()
    for t in np.flatnonzero(tg.kind > 0):
        r = tg.resource[t]
        dur[t] = math.ceil(tg.mem_bytes[t] / (tg.bytes_per_cycle[r] * tg.efficiency[r]) - 1e-9)
    return dur


@pytest.mark.nojit
@settings(max_examples=60, deadline=None)
@given(random_graphs())
def test_engine_matches_reference(tg: TaskGraph) -> None:
    stats = run(tg)
    makespan, start, end = reference_run(tg)
    assert stats.makespan_cycles == makespan
    np.testing.assert_array_equal(stats.task_start, start)
    np.testing.assert_array_equal(stats.task_end, end)


@pytest.mark.nojit
@settings(max_examples=60, deadline=None)
@given(random_graphs(joins=True))
def test_zero_duration_fast_path_matches_reference(tg: TaskGraph) -> None:
    # uniform priority: zero-duration finishes bypass the heap (FIFO after the heap
    # events of the same cycle); the order must equal the reference heap's
    stats = run(tg)
    makespan, start, end = reference_run(tg)
    assert stats.makespan_cycles == makespan
    np.testing.assert_array_equal(stats.task_start, start)
    np.testing.assert_array_equal(stats.task_end, end)
    assert stats.events == tg.num_tasks


@settings(max_examples=60, deadline=None)
@given(random_graphs())
def test_makespan_lower_bounds_and_determinism(tg: TaskGraph) -> None:
    stats = run(tg)
    dur = effective_durations(tg)
    assert stats.makespan_cycles >= critical_path(tg, dur)
    for r in range(tg.num_resources):
        work = int(dur[tg.resource == r].sum())
        assert stats.makespan_cycles >= math.ceil(work / tg.resource_capacity[r])
        assert stats.busy_cycles[r] == work
    again = run(tg)
    assert again.makespan_cycles == stats.makespan_cycles
    np.testing.assert_array_equal(again.task_start, stats.task_start)
    np.testing.assert_array_equal(again.task_end, stats.task_end)
    np.testing.assert_array_equal(again.op_end_cycles, stats.op_end_cycles)


# ------------------------------------------------------------------ closed-form cases
@pytest.mark.nojit
def test_capacity_and_fifo_closed_form() -> None:
    # 5 tasks of 10 cycles on a 2-slot server: slots run (0,1) (2,3) (4) -> 30 cycles
    b = TaskGraphBuilder()
    s = b.add_server("pe", capacity=2)
    for _ in range(5):
        b.add_compute(s, 10)
    stats = run(b.build())
    assert stats.makespan_cycles == 30
    assert stats.task_start.tolist() == [0, 0, 10, 10, 20]
    assert stats.busy_cycles.tolist() == [50]


@pytest.mark.nojit
def test_bandwidth_memory_and_join_closed_form() -> None:
    # 1000 B at 64 B/cycle * 0.5 efficiency = ceil(1000 / 32) = 32 cycles
    b = TaskGraphBuilder()
    m = b.add_bandwidth_memory("sram", 64, 0.5)
    pe = b.add_server("pe")
    op = b.add_op("layer")
    r = b.add_read(m, 1000, op=op)
    c = b.add_compute(pe, 7, deps=[r], op=op)
    j = b.add_join([r, c], op=op)
    b.add_task(-1, 5, deps=[j], op=op)  # pure delay, no resource
    stats = run(b.build())
    assert stats.task_end.tolist() == [32, 39, 39, 44]
    assert stats.op_start_cycles.tolist() == [0]
    assert stats.op_end_cycles.tolist() == [44]


@pytest.mark.nojit
def test_priority_breaks_same_cycle_ties() -> None:
    # two producers finish at cycle 5; the lower priority value's successor runs first
    b = TaskGraphBuilder()
    s = b.add_server("s")
    x = b.add_task(-1, 5, priority=1)
    y = b.add_task(-1, 5, priority=0)
    cx = b.add_compute(s, 3, deps=[x])
    cy = b.add_compute(s, 3, deps=[y])
    st_ = run(b.build())
    assert st_.task_start[cy] == 5 and st_.task_start[cx] == 8


def test_actions_are_aggregated() -> None:
    b = TaskGraphBuilder()
    s = b.add_server("s")
    pe, mac, rd = b.component("pe"), b.action("mac"), b.action("read")
    b.add_compute(s, 1, actions=[(pe, mac, 10.0), (pe, rd, 2.0)])
    b.add_compute(s, 1, actions=[(pe, mac, 5.0)])
    b.add_tasks(np.array([s, s]), 3)
    stats = run(b.build())
    np.testing.assert_array_equal(stats.action_totals, [[15.0, 2.0]])
    assert stats.makespan_cycles == 1 + 1 + 3 + 3


def test_bulk_add_tasks_chain() -> None:
    b = TaskGraphBuilder()
    s = b.add_server("s")
    n = 1000
    dep_ptr = np.concatenate([[0], np.arange(n)]).astype(np.int64)  # task i depends on i-1
    dep_idx = np.arange(n - 1)
    b.add_tasks(np.full(n, s), np.full(n, 2), dep_ptr=dep_ptr, dep_idx=dep_idx)
    stats = run(b.build(), record_task_times=False)
    assert stats.makespan_cycles == 2 * n
    assert stats.task_start is None


@pytest.mark.nojit
def test_validation_errors_name_the_field() -> None:
    b = TaskGraphBuilder()
    s = b.add_server("s")
    b.add_compute(s, -1)
    with pytest.raises(TaskGraphError, match="duration"):
        b.build()
    b = TaskGraphBuilder()
    s = b.add_server("s")
    b.add_compute(s, 1, deps=[1])
    b.add_compute(s, 1, deps=[0])
    with pytest.raises(TaskGraphError, match="cycle"):
        b.build()
    b = TaskGraphBuilder()
    b.add_compute(3, 1)
    with pytest.raises(TaskGraphError, match="resource"):
        b.build()
    b = TaskGraphBuilder()
    s = b.add_server("s")
    b.add_task(s, 0, kind=KIND_READ, mem_bytes=8)
    with pytest.raises(TaskGraphError, match="memory task"):
        b.build()


def test_dram_resource_in_engine() -> None:
    spec = dram_preset("DDR4-2400", refresh=False)
    # engine clock = DRAM clock, so cycles are directly comparable
    b = TaskGraphBuilder(clock_hz=spec.clock_hz)
    d = b.add_dram("ddr", 0, capacity=1)
    pe = b.add_server("pe")
    r = b.add_read(d, 64, addr=0)  # one burst, closed bank: nRCD + nCL + nBL
    c = b.add_compute(pe, 10, deps=[r])
    w = b.add_write(d, 64 * 1024, addr=1 << 20, deps=[c])
    tg = b.build()
    stats = run(tg, [spec])
    t = spec.timing
    assert stats.task_end[r] == t["nRCDRD"] + t["nCL"] + t["nBL"]
    assert stats.task_end[c] == stats.task_end[r] + 10
    assert stats.dram_write_bytes[d] == 64 * 1024 and stats.dram_read_bytes[d] == 64
    assert stats.dram_command_counts[d, 2] == 1 and stats.dram_command_counts[d, 3] == 1024
    # writes stream at (close to) peak: 1024 bursts, nCCDS apart
    assert stats.task_end[w] - stats.task_start[w] < 1024 * t["nCCDS"] * 1.1 + 100
    with pytest.raises(ValueError, match="dram_configs"):
        run(tg)


def test_chrome_trace(tmp_path) -> None:
    import json

    b = TaskGraphBuilder(clock_hz=2e9)
    s = b.add_server("pe")
    b.add_op("gemm")
    a = b.add_compute(s, 4)
    b.add_compute(s, 6, deps=[a])
    tg = b.build()
    stats = run(tg)
    path = tmp_path / "trace.json"
    assert write_chrome_trace(tg, stats, path, clock_hz=2e9) == 2
    ev = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    assert [(e["ts"], e["dur"]) for e in ev] == [(0.0, 0.002), (0.002, 0.003)]
    assert all(e["tid"] == 0 for e in ev)
