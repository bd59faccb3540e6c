"""Simulate a model at cycle fidelity and write a Chrome Trace Event file (``archsim trace``).

    from archsim import trace
    summary = trace("tpu_like", "resnet18", "trace.json", op_filter="layer1.0.conv1")

Every op (or those whose name contains ``--op``) is lowered by its unit
(``Unit.lower``), simulated by ``sim.run`` with task times recorded and exported with
``sim.trace.write_chrome_trace``; the per-op traces are merged into one file with ops laid
out back to back in schedule order (as ``evaluate`` sums them) and one track per
``<unit>.<resource>``. Open it in https://ui.perfetto.dev (or chrome://tracing).
User mistakes raise ``ArchsimError`` subclasses.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any

from archsim import sim
from archsim.api import load, workload
from archsim.explore.run import Progress
from archsim.mapper import map_workload
from archsim.outputs import atomic_output
from archsim.run_request import warn_unused_lengths
from archsim.workloads.errors import ConfigError, Problem, WorkloadError

__all__ = ["trace", "TraceSummary", "estimate_tasks", "DEFAULT_MAX_EVENTS", "BYTES_PER_EVENT"]

#: Default event budget of a trace: at ~220 bytes of JSON per event (below) 2 M events
#: are ~450 MB, about the most Perfetto's browser UI loads.
DEFAULT_MAX_EVENTS = 2_000_000
#: Bytes of JSON per event, for the size estimate in messages: gpt2-small --seq 64 on
#: tpu_like wrote 170,448 events in 37,992,636 bytes (223 B/event).
BYTES_PER_EVENT = 220


@dataclass(frozen=True)
class TraceSummary:
    """What :func:`trace` wrote.

    Attributes:
        ops: ops traced.
        events: task events written.
        latency_s: simulated time of the traced ops, back to back (s).
        out: the trace file.
    """

    ops: int
    events: int
    latency_s: float
    out: str

    def text(self) -> str:
        """One line: events, ops, simulated time and the file."""
        return (f"wrote {self.events} task events of {self.ops} ops "
                f"({self.latency_s * 1e3:.3f} ms simulated) to {self.out}")


def estimate_tasks(chosen: list[Any]) -> int:
    """Simulator tasks (an upper bound on trace events) of the assignments ``chosen``: each
    distinct (unit, op shape, mapping) is lowered once — layers repeat (Llama-2-7B: 451 ops,
    a few dozen shapes)."""
    memo: dict[Any, int] = {}
    total = 0
    for a in chosen:
        key = (a.unit.name, dataclasses.replace(a.op, name=""), repr(a.mapping))
        if key not in memo:
            try:
                memo[key] = a.unit.lower(a.op, a.mapping).graph.num_tasks
            except NotImplementedError as exc:
                raise ConfigError(Problem(f"{exc}; 'archsim trace' needs cycle fidelity",
                                          f"units.{a.unit.name}")) from None
        total += memo[key]
    return total


def trace(config: str, model: str, out: str, *, phase: str | None = None, batch: int = 1,
          seq: int | None = None, context: int | None = None, tp: int = 1,
          a_format: str | None = None, w_format: str | None = None,
          overrides: list[str] | None = None, op_filter: str | None = None,
          max_events: int | None = None, progress: bool | None = None) -> TraceSummary:
    """Write the trace of ``model`` on ``config`` to ``out``; returns a summary.

    ``progress``: a progress line on stderr (None: when stderr is a terminal; False: off).

    ``max_events`` None: refuse (WorkloadError, with the estimate) a trace estimated above
    :data:`DEFAULT_MAX_EVENTS`; a number: keep that many events and drop the rest."""
    acc = load(config, overrides or [])
    wl = workload(model, phase=phase, batch=batch, seq=seq, context=context, tp=tp,
                          a_format=a_format, w_format=w_format)
    warn_unused_lengths(model, seq, context, wl)
    sched = map_workload(acc, wl)
    chosen = [a for a in sched.assignments if not op_filter or op_filter in a.op.name]
    if not chosen:
        raise WorkloadError(Problem(f"no op of {wl.name} has {op_filter!r} in its name",
                                    "--op"))
    if max_events is None:
        n_est = estimate_tasks(chosen)
        if n_est > DEFAULT_MAX_EVENTS:
            raise WorkloadError(Problem(
                f"tracing {len(chosen)} ops of {wl.name} on {acc.name} would record ~{n_est:,} "
                f"task events (~{n_est * BYTES_PER_EVENT / 1e6:,.0f} MB of JSON); expected at "
                f"most {DEFAULT_MAX_EVENTS:,}: pick ops with --op SUBSTRING, lower --seq or "
                f"--batch, or accept a truncated trace with --max-events N", "--model"))
        max_events = DEFAULT_MAX_EVENTS
    prog = Progress(len(chosen), progress, what="ops")
    events: list[dict[str, Any]] = [{"ph": "M", "pid": 0, "name": "process_name",
                                     "args": {"name": f"archsim {acc.name} / {wl.name}"}}]
    tracks: dict[str, int] = {}
    t0_us = 0.0
    n_events = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp_json = os.path.join(tmp, "op.json")
        for a in chosen:
            try:
                si = a.unit.lower(a.op, a.mapping)
            except NotImplementedError as exc:
                raise ConfigError(Problem(f"{exc}; 'archsim trace' needs cycle fidelity",
                                          f"units.{a.unit.name}")) from None
            tg = si.graph
            stats = si.run(record_task_times=True)
            left = max_events - n_events
            if left <= 0:
                break
            sim.write_chrome_trace(tg, stats, tmp_json, max_events=left)
            with open(tmp_json, encoding="utf-8") as f:
                part = json.load(f)["traceEvents"]
            local = {e["tid"]: e["args"]["name"] for e in part
                     if e.get("ph") == "M" and e.get("name") == "thread_name"}
            for e in part:
                if e.get("ph") != "X":
                    continue
                if e["tid"] not in local or (local[e["tid"]] == "(no resource)"
                                             and e["dur"] == 0):
                    continue            # zero-time joins carry no information
                track = f"{a.unit.name}.{local[e['tid']]}"
                if track not in tracks:
                    tracks[track] = len(tracks)
                e["tid"] = tracks[track]
                e["ts"] += t0_us
                e["args"]["op"] = a.op.name
                events.append(e)
                n_events += 1
            t0_us += stats.makespan_s * 1e6
            prog.update(1)
    for name, tid in tracks.items():
        events.append({"ph": "M", "pid": 0, "tid": tid, "name": "thread_name",
                       "args": {"name": name}})
    with atomic_output(out, "--out") as tmp_out, open(tmp_out, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)
    return TraceSummary(len(chosen), n_events, t0_us * 1e-6, out)

