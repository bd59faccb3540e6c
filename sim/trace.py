"""Chrome Trace Event export (opens in Perfetto / chrome://tracing)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from archsim.sim.engine import SimStats
from archsim.sim.taskgraph import TaskGraph


def write_chrome_trace(tg: TaskGraph, stats: SimStats, path: str | Path,
                       clock_hz: float | None = None, max_events: int = 2_000_000) -> int:
    """Write one complete ("X") event per task, one track (tid) per resource.

    Args:
        tg: the simulated task graph.
        stats: result of :func:`sim.run` with ``record_task_times=True``.
        path: output ``.json`` file.
        clock_hz: clock of the cycle counts; defaults to ``tg.clock_hz``.
        max_events: keep at most this many tasks (the earliest-starting ones).

    Returns:
        Number of task events written. Timestamps and durations are microseconds.
    """
    if stats.task_start is None or stats.task_end is None:
        raise ValueError("stats has no task times: run with record_task_times=True")
    hz = float(clock_hz if clock_hz is not None else tg.clock_hz)
    us_per_cycle = 1e6 / hz
    order = np.argsort(stats.task_start, kind="stable")[:max_events]
    events: list[dict] = [{"ph": "M", "pid": 0, "name": "process_name",
                           "args": {"name": "archsim"}}]
    names = list(tg.resource_names) + ["(no resource)"]
    for tid, name in enumerate(names):
        events.append({"ph": "M", "pid": 0, "tid": tid, "name": "thread_name",
                       "args": {"name": name}})
    R = tg.num_resources
    res = tg.resource
    kinds = ("compute", "read", "write")
    for t in order.tolist():
        r = int(res[t])
        s = int(stats.task_start[t])
        e = int(stats.task_end[t])
        op = tg.op_names[int(tg.op_index[t])]
        events.append({
            "ph": "X", "pid": 0, "tid": r if r >= 0 else R, "name": op,
            "cat": kinds[int(tg.kind[t])], "ts": s * us_per_cycle,
            "dur": (e - s) * us_per_cycle,
            "args": {"task": t, "start_cycle": s, "end_cycle": e},
        })
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)
    return len(order)
