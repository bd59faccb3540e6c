"""``archsim trace``: simulate a model at cycle fidelity and write a Chrome Trace Event file.

    archsim trace CONFIG --model NAME [--phase P --batch B --seq S --context C
                  --a-format F --w-format F --set KEY=VALUE ...] [--op SUBSTRING]
                  --out trace.json

Every op (or those whose name contains ``--op``) is lowered by its unit
(``Unit.lower``), simulated by ``sim.run`` with task times recorded and exported with
``sim.trace.write_chrome_trace``; the per-op traces are merged into one file with ops laid
out back to back in schedule order (as ``evaluate`` sums them) and one track per
``<unit>.<resource>``. Open it in https://ui.perfetto.dev (or chrome://tracing).
User mistakes raise ``ArchsimError`` subclasses; the CLI prints them and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

from archsim.cli_common import Parser as _Parser
from archsim.cli_common import atomic_output, check_output_path, guarded
from archsim.cli_common import non_empty as _non_empty
from archsim.cli_common import positive_int as _positive_int
from archsim.workloads.errors import ConfigError, Problem, WorkloadError

__all__ = ["main", "build_parser", "trace", "estimate_tasks", "DEFAULT_MAX_EVENTS"]

#: Default event budget of a trace: at ~220 bytes of JSON per event (below) 2 M events
#: are ~450 MB, about the most Perfetto's browser UI loads.
DEFAULT_MAX_EVENTS = 2_000_000
#: Bytes of JSON per event, for the size estimate in messages: gpt2-small --seq 64 on
#: tpu_like wrote 170,448 events in 37,992,636 bytes (223 B/event).
BYTES_PER_EVENT = 220


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="archsim trace", description="Simulate a model at cycle fidelity and "
                "write a Chrome Trace Event JSON (one track per resource; open in Perfetto).")
    p.add_argument("config", help="config YAML or reference-design name")
    p.add_argument("--model", required=True, help="zoo model name or a HF config.json")
    p.add_argument("--phase", choices=("prefill", "decode", "train", "inference"))
    p.add_argument("--batch", type=_positive_int, default=1)
    p.add_argument("--seq", type=_positive_int)
    p.add_argument("--context", type=_positive_int)
    p.add_argument("--tp", type=_positive_int, default=1, help="tensor-parallel devices")
    p.add_argument("--a-format", type=_non_empty, help="activation number format (e.g. fp16, int8)")
    p.add_argument("--w-format", type=_non_empty, help="weight number format (e.g. int4)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="KEY=VALUE", help="override a config value (repeatable)")
    p.add_argument("--op", help="only ops whose name contains this substring")
    p.add_argument("--out", required=True, help="output .json file")
    p.add_argument("--max-events", type=_positive_int, default=None,
                   help=f"keep at most this many task events in total (earliest first); "
                   f"without it a trace estimated above {DEFAULT_MAX_EVENTS:,} events is "
                   f"refused before it starts")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p


def estimate_tasks(chosen: list[Any]) -> int:
    """Simulator tasks (an upper bound on trace events) of the assignments ``chosen``: each
    distinct (unit, op shape, mapping) is lowered once — layers repeat (Llama-2-7B: 451 ops,
    a few dozen shapes)."""
    import dataclasses

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
          max_events: int | None = None, progress: bool | None = None) -> dict[str, Any]:
    """Write the trace; returns a summary (ops, events, total simulated seconds).

    ``max_events`` None: refuse (WorkloadError, with the estimate) a trace estimated above
    :data:`DEFAULT_MAX_EVENTS`; a number: keep that many events and drop the rest."""
    import archsim
    from archsim import sim
    from archsim.mapper import map_workload

    acc = archsim.load(config, overrides or [])
    wl = archsim.workload(model, phase=phase, batch=batch, seq=seq, context=context, tp=tp,
                          a_format=a_format, w_format=w_format)
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
    from archsim.explore.run import Progress

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
    return {"ops": len(chosen), "events": n_events, "latency_s": t0_us * 1e-6, "out": out}


def main(argv: list[str]) -> int:
    """``archsim trace`` entry point; returns the exit code (ArchsimError propagates)."""
    args = build_parser().parse_args(argv)
    check_output_path(args.out, "--out")
    s = trace(args.config, args.model, args.out, phase=args.phase, batch=args.batch,
              seq=args.seq, context=args.context, tp=args.tp, a_format=args.a_format,
              w_format=args.w_format, overrides=args.overrides, op_filter=args.op,
              max_events=args.max_events, progress=False if args.quiet else None)
    print(f"wrote {s['events']} task events of {s['ops']} ops "
          f"({s['latency_s'] * 1e3:.3f} ms simulated) to {s['out']}")
    return 0


if __name__ == "__main__":   # python -m archsim.trace_cmd ...
    sys.exit(guarded(lambda: main(sys.argv[1:])))
