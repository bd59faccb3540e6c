"""The calendar-queue loop (sim/engine_bucket.py) equals the heap loop, task by task.

``sim.run`` picks the calendar queue for graphs without DRAM and with one priority; the
heap loop (``sim.engine._kernel``) handles every graph. Both are run here on the same
packed task table: random graphs with long durations (the calendar wraps around many
times), zero-time joins, pure delays, several ops, bandwidth memories and a uniform
non-zero priority. The pure-Python reference of test_engine.py covers small graphs.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.sim import TaskGraph, TaskGraphBuilder, run
from archsim.sim.engine import _inst_list, _kernel, _pack
from archsim.sim.engine_bucket import MAX_BUCKETS, bucket_count, kernel_bucket, pack_bucket
from archsim.sim.taskgraph import MODEL_BANDWIDTH

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_engine import reference_run  # noqa: E402


def _graph(seed: int, n: int, max_dur: int, n_ops: int = 1, priority: int = 0) -> TaskGraph:
    rng = np.random.default_rng(seed)
    b = TaskGraphBuilder()
    res = [b.add_server(f"s{i}", int(c)) for i, c in enumerate(rng.integers(1, 4, 4))]
    mem = b.add_bandwidth_memory("m", 3.5, 0.8, 2)
    for i in range(n_ops):
        b.add_op(f"op{i}")
    for t in range(n):
        deps = sorted({int(t - d) for d in rng.integers(1, 50, rng.integers(0, 4)) if t - d >= 0})
        op = int(rng.integers(0, n_ops))
        c = rng.random()
        if c < 0.1:
            b.add_join(deps, op=op, priority=priority)
        elif c < 0.15:
            b.add_task(-1, int(rng.integers(1, max_dur)), deps=deps, op=op, priority=priority)
        elif c < 0.25:
            b.add_read(mem, int(rng.integers(0, 4 * max_dur)), deps=deps, op=op,
                       priority=priority)
        else:
            d = int(rng.integers(0, max_dur)) if rng.random() < 0.9 else 0
            b.add_task(res[int(rng.integers(0, 4))], d, deps=deps, op=op, priority=priority)
    return b.build()


def _both(tg: TaskGraph, record: bool):
    """(bucket result, heap result) of the same graph, both as (makespan, finished,
    events, busy, start, end, op_start, op_end)."""
    T, R = tg.num_tasks, tg.num_resources
    eff = tg.duration.astype(np.int64).copy()
    bw = tg.kind > 0
    rate = (tg.bytes_per_cycle * tg.efficiency)[tg.resource[bw]]
    eff[bw] = np.ceil(tg.mem_bytes[bw] / rate - 1e-9).astype(np.int64)
    succ_ptr, succ_idx = tg.successors
    tt = np.empty(T + 1, np.int64)
    aside = np.empty(2 * T, np.int64)
    rate = np.where(tg.resource_model == MODEL_BANDWIDTH, tg.bytes_per_cycle * tg.efficiency,
                    0.0)
    ok, max_dur, rcount, busy = pack_bucket(tg.resource, tg.duration, tg.kind, tg.mem_bytes,
                                            rate, tg.dep_ptr, succ_ptr, R, tt, aside)
    assert ok and max_dur == eff.max()
    start = np.zeros(T if record else 1, np.int64)
    end = np.zeros(T if record else 1, np.int64)
    makespan, finished, op_s, op_e = kernel_bucket(
        tt, aside, succ_idx, tg.op_index, rcount, tg.resource_capacity, len(tg.op_names),
        bucket_count(int(eff.max())), record, np.empty(4 * (T + 8), np.int32), start, end)
    a = (makespan, finished, finished, busy, start, end, op_s, op_e)
    wide = len(tg.op_names) > 1 or bool(np.any(tg.priority != 0))
    tt, succ, rcount = _pack(tg.resource, eff, np.zeros(T, np.bool_), tg.priority,
                             tg.op_index, tg.dep_ptr, tg.dep_idx, np.zeros((), np.int32),
                             6 if wide else 4, R)
    z = np.zeros(1, np.int64)
    b = _kernel(tt, succ, tg.resource_capacity, np.full(R, -1, np.int64), len(tg.op_names),
                z, z, z, _inst_list([]), np.ones(1, np.int64), np.ones(1, np.int64), record)
    return a, b


@pytest.mark.parametrize("seed,max_dur,n_ops,priority", [
    (0, 5, 1, 0), (1, 100, 1, 0), (2, 3000, 2, 0), (3, 40000, 1, 7), (4, 64, 3, -2),
])
def test_bucket_loop_equals_heap_loop(seed: int, max_dur: int, n_ops: int, priority: int) -> None:
    tg = _graph(seed, 3000, max_dur, n_ops, priority)
    for record in (True, False):
        a, b = _both(tg, record)
        assert a[0] == b[0] and a[1] == b[1] == tg.num_tasks and a[2] == b[2]
        for x, y in zip(a[3:], b[3:]):
            np.testing.assert_array_equal(x, y)


@pytest.mark.nojit
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 300), st.integers(-3, 3))
def test_bucket_loop_matches_reference(seed: int, max_dur: int, priority: int) -> None:
    # uniform (possibly non-zero) priority and durations up to 300: the calendar path
    tg = _graph(seed, 60, max_dur, 2, priority)
    stats = run(tg)
    makespan, start, end = reference_run(tg)
    assert stats.makespan_cycles == makespan
    np.testing.assert_array_equal(stats.task_start, start)
    np.testing.assert_array_equal(stats.task_end, end)


def test_wide_fan_in_and_many_resources_match_the_reference() -> None:
    # a task table word holds in-degrees < 255 and resources < 254; larger ones live in
    # the side array (pack_bucket): joins of 255-700 predecessors, 300 servers
    rng = np.random.default_rng(5)
    b = TaskGraphBuilder()
    res = [b.add_server(f"s{i}", int(c)) for i, c in enumerate(rng.integers(1, 3, 300))]
    ids: list[int] = []
    for t in range(1500):
        if t in (400, 700, 1200):  # fan-in 255, 299, 700 (one from each earlier task)
            deps = list(range(t - {400: 255, 700: 299, 1200: 700}[t], t))
        else:
            deps = sorted({t - int(d) for d in rng.integers(1, 40, 2) if t - d >= 0})
        r = res[int(rng.integers(240, 300))] if t % 3 else res[int(rng.integers(0, 300))]
        ids.append(b.add_task(r, int(rng.integers(0, 30)), deps=deps))
    tg = b.build()
    assert max(np.diff(tg.dep_ptr)) == 700 and tg.num_resources == 300
    makespan, start, end = reference_run(tg)
    stats = run(tg)
    assert stats.makespan_cycles == makespan
    np.testing.assert_array_equal(stats.task_start, start)
    np.testing.assert_array_equal(stats.task_end, end)
    a, h = _both(tg, True)
    for x, y in zip(a, h):
        np.testing.assert_array_equal(x, y)


def test_long_durations_use_the_heap_loop() -> None:
    # a duration >= MAX_BUCKETS: same result through the heap loop
    b = TaskGraphBuilder()
    s = b.add_server("s", 2)
    x = b.add_compute(s, MAX_BUCKETS + 5)
    b.add_compute(s, 3)
    b.add_compute(s, 4, deps=[x])
    stats = run(b.build())
    assert stats.task_end.tolist() == [MAX_BUCKETS + 5, 3, MAX_BUCKETS + 9]


# ----------------------------------------------------------- every output vs the reference
@st.composite
def calendar_graphs(draw: st.DrawFn) -> TaskGraph:
    """Random DAGs that take the calendar path (one priority, no DRAM): several ops,
    capacities 1-3, pure delays and zero-time joins, bandwidth memories, ids not in
    topological order, fan-outs up to 8 (past the 4 prefetched successor slots),
    durations up to 300 (the calendar wraps around) and per-task actions."""
    n_res = draw(st.integers(1, 4))
    T = draw(st.integers(1, 80))
    b = TaskGraphBuilder()
    res = [b.add_server(f"s{i}", draw(st.integers(1, 3))) for i in range(n_res)]
    mem = b.add_bandwidth_memory("mem", draw(st.sampled_from([1.0, 3.5, 16.0])),
                                 draw(st.sampled_from([1.0, 0.8])), draw(st.integers(1, 2)))
    n_ops = draw(st.integers(1, 4))
    for i in range(n_ops):
        b.add_op(f"op{i}")
    comp, acts = b.component("pe"), [b.action("mac"), b.action("rd")]
    prio = draw(st.integers(-3, 3))
    max_dur = draw(st.sampled_from([1, 5, 40, 300]))
    perm = draw(st.permutations(range(T)))  # task id of topological position k
    inv = {p: i for i, p in enumerate(perm)}
    for tid in range(T):
        k = inv[tid]
        deps = [perm[d] for d in draw(st.lists(st.integers(0, max(k - 1, 0)), max_size=8,
                                                 unique=True))] if k else []
        choice = draw(st.integers(-1, n_res))
        op = draw(st.integers(0, n_ops - 1))
        actions = [(comp, a, draw(st.floats(0, 1e6))) for a in
                   draw(st.lists(st.sampled_from(acts), max_size=2))]
        if choice == n_res:
            b.add_read(mem, draw(st.integers(0, 4 * max_dur)), deps=deps, op=op,
                       priority=prio, actions=actions)
        else:
            r = -1 if choice < 0 else res[choice]
            b.add_task(r, draw(st.integers(0, max_dur)), deps=deps, op=op, priority=prio,
                       actions=actions)
    return b.build()


@settings(max_examples=150, deadline=None)
@given(calendar_graphs())
def test_every_output_of_the_calendar_path_matches_the_reference(tg: TaskGraph) -> None:
    # expected values come from the pure-Python reference engine (task times) and plain
    # Python sums over its tasks: busy = sum(end - start) per resource, op window =
    # (min start, max end) per op, actions summed in task order
    makespan, start, end = reference_run(tg)
    T, R = tg.num_tasks, tg.num_resources
    busy = [0] * R
    op_s = [-1] * len(tg.op_names)
    op_e = [-1] * len(tg.op_names)
    for t in range(T):
        r, o = int(tg.resource[t]), int(tg.op_index[t])
        if r >= 0:
            busy[r] += int(end[t] - start[t])
        op_s[o] = int(start[t]) if op_s[o] < 0 else min(op_s[o], int(start[t]))
        op_e[o] = max(op_e[o], int(end[t]))
    totals = np.zeros((len(tg.component_names), len(tg.action_names)))
    for k in range(tg.act_count.size):
        totals[tg.act_component[k], tg.act_action[k]] += tg.act_count[k]
    for record in (True, False):
        stats = run(tg, record_task_times=record)
        assert stats.makespan_cycles == makespan
        assert stats.events == T
        assert stats.busy_cycles.tolist() == busy
        assert stats.op_start_cycles.tolist() == op_s
        assert stats.op_end_cycles.tolist() == op_e
        np.testing.assert_array_equal(stats.action_totals, totals)
        if record:
            np.testing.assert_array_equal(stats.task_start, start)
            np.testing.assert_array_equal(stats.task_end, end)


@settings(max_examples=60, deadline=None)
@given(calendar_graphs())
def test_successors_are_the_transposed_dependencies(tg: TaskGraph) -> None:
    succ_ptr, succ_idx = tg.successors
    T = tg.num_tasks
    expected: list[list[int]] = [[] for _ in range(T)]
    for t in range(T):  # ascending t: each list comes out ascending
        for p in tg.dep_idx[tg.dep_ptr[t]:tg.dep_ptr[t + 1]]:
            expected[int(p)].append(t)
    assert [succ_idx[succ_ptr[t]:succ_ptr[t + 1]].tolist() for t in range(T)] == expected
    assert succ_idx[succ_ptr[T]:].tolist() == [0, 0, 0, 0]  # padding read by prefetches
