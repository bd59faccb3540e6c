"""Running sweeps: local process pool or Dask, resumable, with progress.

    from archsim.explore import load_spec, run_sweep
    report = run_sweep(load_spec("examples/sweep_tpu.yaml"), "results.sqlite", workers=8)

The driver lists the (design point, workload) tasks of the spec, drops those whose input
hash is already in the store (resume), hands the rest to the workers in small chunks, and
writes each finished chunk to the store in its own transaction as it arrives, so a killed
sweep loses at most the chunks in flight. Evaluation errors (an infeasible or invalid
design) are stored as ``status = 'error'`` rows; they are results too and are not retried.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archsim.explore.spec import METRICS, SweepSpec, Task, load_spec
from archsim.explore.store import ResultStore, Row
from workloads.errors import ArchsimError

__all__ = ["SweepReport", "run_sweep", "run_tasks", "evaluate_tasks", "sweep_main",
           "results_main", "BACKENDS"]

BACKENDS = ("local", "dask")


@dataclass
class SweepReport:
    """What one ``run_sweep`` call did."""

    total: int = 0          # tasks in the sweep
    skipped: int = 0        # already in the store (resumed)
    evaluated: int = 0      # evaluated by this call
    errors: int = 0         # of those, stored as status='error'
    elapsed_s: float = 0.0
    hashes: list[str] = field(default_factory=list)   # every task hash of the sweep

    @property
    def points_per_s(self) -> float:
        return self.evaluated / self.elapsed_s if self.elapsed_s > 0 else 0.0


# ---- the worker side ------------------------------------------------------------------------
_BASE_CACHE: dict[str, Any] = {}
_WL_CACHE: dict[str, Any] = {}


def _base_data(path: str) -> Any:
    d = _BASE_CACHE.get(path)
    if d is None:
        from workloads.errors import ConfigError
        from workloads.yamlio import read_yaml

        d, _ = read_yaml(path, ConfigError)
        _BASE_CACHE[path] = d
    return d


def _workload(spec: dict[str, Any]) -> Any:
    key = json.dumps(spec, sort_keys=True)
    w = _WL_CACHE.get(key)
    if w is None:
        from archsim.api import workload_from_dict

        if spec.get("net"):   # a co-search candidate network (archsim.explore.nas)
            from archsim.explore.nas import build_network
            from workloads.formats import get_format

            w = build_network(spec["net"], batch=spec.get("batch", 1))
            if spec.get("a_format") or spec.get("w_format"):
                w = w.with_formats(
                    get_format(spec["a_format"]) if spec.get("a_format") else None,
                    get_format(spec["w_format"]) if spec.get("w_format") else None)
        else:
            w = workload_from_dict(spec)
        _WL_CACHE[key] = w
    return w


def evaluate_task(t: Task, with_json: bool = True) -> Row:
    """Evaluate one task; never raises for user-input problems (they become error rows)."""
    from arch.accelerator import load_data
    from archsim.api import evaluate

    t0 = time.perf_counter()
    row: Row = {"hash": t.hash, "design_id": t.point.design_id, "workload": t.label,
                "point": json.dumps(t.point.as_dict())}
    try:
        acc = load_data(_base_data(t.base_path), t.base_path, t.point.overrides)
        res = evaluate(acc, _workload(t.workload), t.fidelity, t.objective)
    except ArchsimError as exc:
        row.update(status="error", error=str(exc))
    else:
        row.update(status="ok", error=None, latency_s=res.latency_s, energy_j=res.energy_j,
                   area_mm2=res.area_mm2, power_w=res.power_w,
                   edp_js=res.energy_j * res.latency_s, cycles=res.cycles,
                   utilization=res.utilization, dram_bytes=res.dram_bytes,
                   throughput_flops=res.throughput_flops, tokens_per_s=res.tokens_per_s,
                   samples_per_s=res.samples_per_s, input_hash=res.input_hash)
        if with_json:
            row["result_json"] = json.dumps(res.to_dict(), separators=(",", ":"))
    row["elapsed_s"] = time.perf_counter() - t0
    return row


#: Test hook: called with each task before it is evaluated (counting, slowing down).
_EVAL_HOOK: Callable[[Task], None] | None = None


def evaluate_tasks(tasks: list[Task], with_json: bool = True,
                   store_path: str | None = None) -> list[Row]:
    """Evaluate a chunk of tasks (the unit of work sent to a worker). With ``store_path``
    the worker writes its rows itself (one transaction per chunk) and returns them too."""
    rows = []
    for t in tasks:
        if _EVAL_HOOK is not None:
            _EVAL_HOOK(t)
        rows.append(evaluate_task(t, with_json))
    if store_path:
        with ResultStore(store_path) as st:
            st.put_many(rows)
    return rows


# ---- progress ---------------------------------------------------------------------------------
class Progress:
    """A one-line progress report with rate and ETA on stderr."""

    def __init__(self, total: int, enabled: bool, stream: Any = None) -> None:
        self.total, self.enabled = total, enabled
        self.stream = stream or sys.stderr
        self.done = 0
        self.t0 = time.perf_counter()
        self.last = 0.0

    def update(self, n: int, force: bool = False) -> None:
        self.done += n
        now = time.perf_counter()
        if not self.enabled or (not force and now - self.last < 0.5 and self.done < self.total):
            return
        self.last = now
        el = now - self.t0
        rate = self.done / el if el > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else math.inf
        frac = self.done / self.total if self.total else 1.0
        bar = "#" * int(frac * 30)
        self.stream.write(f"\r[{bar:<30}] {self.done}/{self.total} {frac:6.1%} "
                          f"{rate:7.1f} pts/s  ETA {_dur(eta)}   ")
        if self.done >= self.total:
            self.stream.write("\n")
        self.stream.flush()


def _dur(s: float) -> str:
    if not math.isfinite(s):
        return "--"
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


# ---- the driver --------------------------------------------------------------------------------
def _chunks(tasks: list[Task], workers: int, chunk: int | None) -> list[list[Task]]:
    if chunk is None:
        chunk = max(1, min(8, len(tasks) // (workers * 8) or 1))
    return [tasks[i:i + chunk] for i in range(0, len(tasks), chunk)]


def run_tasks(tasks: list[Task], db: str | Path, *, backend: str = "local",
              workers: int | None = None, scheduler: str | None = None, client: Any = None,
              progress: bool | None = None, chunk: int | None = None,
              with_json: bool = True, axis_keys: Iterable[str] = ()) -> SweepReport:
    """Evaluate the tasks not yet in ``db`` and store them; see :func:`run_sweep`."""
    if backend not in BACKENDS:
        raise ArchsimError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    t0 = time.perf_counter()
    workers = workers or os.cpu_count() or 1
    store = ResultStore(db)
    store.add_axes(axis_keys)
    done = store.done_hashes()
    seen: set[str] = set()
    todo = []
    for t in tasks:
        if t.hash not in done and t.hash not in seen:
            todo.append(t)
        seen.add(t.hash)
    rep = SweepReport(total=len(seen), skipped=len(seen & done), hashes=[t.hash for t in tasks])
    prog = Progress(len(todo), sys.stderr.isatty() if progress is None else progress)

    def sink(rows: list[Row]) -> None:
        store.put_many(rows)
        rep.evaluated += len(rows)
        rep.errors += sum(r["status"] != "ok" for r in rows)
        prog.update(len(rows))

    try:
        if todo:
            chunks = _chunks(todo, workers, chunk)
            if backend == "local":
                _run_local(chunks, workers, with_json, sink)
            else:
                _run_dask(chunks, workers, scheduler, client, with_json, sink)
    finally:
        store.close()
    rep.elapsed_s = time.perf_counter() - t0
    return rep


def _run_local(chunks: list[list[Task]], workers: int, with_json: bool,
               sink: Callable[[list[Row]], None]) -> None:
    if workers == 1:
        for c in chunks:
            sink(evaluate_tasks(c, with_json))
        return
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    with ProcessPoolExecutor(max_workers=workers) as ex:
        # keep a bounded number of chunks in flight so memory stays flat on huge sweeps
        it = iter(chunks)
        pending = set()
        for c in it:
            pending.add(ex.submit(evaluate_tasks, c, with_json))
            if len(pending) >= workers * 4:
                break
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                sink(f.result())
                nxt = next(it, None)
                if nxt is not None:
                    pending.add(ex.submit(evaluate_tasks, nxt, with_json))


def _run_dask(chunks: list[list[Task]], workers: int, scheduler: str | None, client: Any,
              with_json: bool, sink: Callable[[list[Row]], None]) -> None:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:  # pragma: no cover - optional extra
        raise ArchsimError("the dask backend needs the optional extra: "
                           "pip install 'archsim[dask]'") from None
    own_cluster = own_client = None
    if client is None:
        if scheduler:
            client = own_client = Client(scheduler)
        else:
            own_cluster = LocalCluster(n_workers=workers, threads_per_worker=1,
                                       host="127.0.0.1", dashboard_address=None)
            client = own_client = Client(own_cluster)
    try:
        futs = [client.submit(evaluate_tasks, c, with_json, pure=False) for c in chunks]
        for f in as_completed(futs):
            sink(f.result())
            f.release()
    finally:
        if own_client is not None:
            own_client.close()
        if own_cluster is not None:
            own_cluster.close()


def run_sweep(spec: SweepSpec, db: str | Path, *, backend: str = "local",
              workers: int | None = None, scheduler: str | None = None, client: Any = None,
              progress: bool | None = None, chunk: int | None = None,
              with_json: bool = True) -> SweepReport:
    """Run (or resume) a sweep into the SQLite file ``db``.

    Args:
        spec: the sweep (:func:`load_spec`).
        db: the result store; points already there are skipped.
        backend: ``local`` (process pool of ``workers``, default os.cpu_count()) or
            ``dask`` (``scheduler`` address, a given ``client``, or a LocalCluster).
        progress: progress line on stderr (default: when stderr is a terminal).
        with_json: also store each full Result as JSON.
    Returns:
        a :class:`SweepReport` (``evaluated`` counts the evaluations this call made).
    """
    kw = dict(backend=backend, workers=workers, scheduler=scheduler, client=client,
              progress=progress, chunk=chunk, with_json=with_json,
              axis_keys=[a.key for a in spec.axes])
    with ResultStore(db) as st:
        st.set_meta("spec", {"file": spec.file, "base": spec.base_path,
                             "objectives": list(spec.objectives),
                             "constraints": {k: {"min": c.min, "max": c.max}
                                             for k, c in spec.constraints.items()},
                             "axes": [a.key for a in spec.axes]})
    if spec.search.method != "nsga2":
        return run_tasks(spec.tasks(), db, **kw)
    from archsim.explore.pareto import nsga2

    return nsga2(spec, db, **kw)


# ---- command line ---------------------------------------------------------------------------
def sweep_main(argv: list[str] | None = None) -> int:
    """``archsim sweep SPEC --db results.sqlite [--backend local|dask] [--scheduler ADDR]
    [--workers N] [--fidelity analytical|cycle] [--no-progress] [--no-json] [--plot FILE]``"""
    ap = argparse.ArgumentParser(prog="archsim sweep", description="Run or resume a "
                                 "design-space sweep into a SQLite result store.")
    ap.add_argument("spec", help="sweep spec YAML")
    ap.add_argument("--db", required=True, help="SQLite result store (created or resumed)")
    ap.add_argument("--backend", choices=BACKENDS, default="local")
    ap.add_argument("--scheduler", help="dask scheduler address (default: a LocalCluster)")
    ap.add_argument("--workers", type=int, default=None, help="default: os.cpu_count()")
    ap.add_argument("--fidelity", choices=("analytical", "cycle"), default=None,
                    help="override the spec's fidelity")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--no-json", action="store_true", help="store metrics only")
    ap.add_argument("--plot", help="write the Pareto front plot (.png or .svg)")
    args = ap.parse_args(argv)
    try:
        spec = load_spec(args.spec)
        if args.fidelity:
            import dataclasses

            spec = dataclasses.replace(spec, fidelity=args.fidelity)
        rep = run_sweep(spec, args.db, backend=args.backend, workers=args.workers,
                        scheduler=args.scheduler, progress=not args.no_progress and None,
                        with_json=not args.no_json)
    except ArchsimError as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    print(f"{rep.total} tasks: {rep.skipped} already stored, {rep.evaluated} evaluated "
          f"({rep.errors} errors) in {rep.elapsed_s:.1f} s ({rep.points_per_s:.1f} /s)")
    from archsim.explore.pareto import front_table, sweep_front

    front = sweep_front(args.db, spec.objectives, spec.constraints, hashes=rep.hashes)
    print(front_table(front, spec.objectives))
    if args.plot:
        from archsim.explore.plots import plot_pareto

        plot_pareto(args.db, spec.objectives[:2], args.plot, spec.constraints, rep.hashes)
        print(f"wrote {args.plot}")
    return 0


def results_main(argv: list[str] | None = None) -> int:
    """``archsim results DB [--where SQL] [--csv|--json] [--full] [--pareto OBJ,OBJ[,OBJ]]
    [-o FILE]``"""
    ap = argparse.ArgumentParser(prog="archsim results", description="Export a sweep's "
                                 "result store.")
    ap.add_argument("db")
    ap.add_argument("--where", help="SQL condition, e.g. \"area_mm2 < 50 AND status = 'ok'\"")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--csv", action="store_true", help="CSV (the default)")
    g.add_argument("--json", action="store_true")
    ap.add_argument("--full", action="store_true", help="include each full result (JSON)")
    ap.add_argument("--pareto", metavar="OBJECTIVES", nargs="?", const="",
                    help="only the Pareto front (per design) on these comma-separated "
                         "objectives (default: the spec's), after the spec's constraints")
    ap.add_argument("-o", "--output", help="write here instead of stdout")
    args = ap.parse_args(argv)
    if not Path(args.db).exists():
        print(f"error: no such result store {args.db!r}", file=sys.stderr)
        return 2
    import sqlite3

    try:
        with ResultStore(args.db, readonly=True) as st:
            rows = st.rows(args.where, with_json=args.full)
            if args.pareto is not None:
                from archsim.explore.pareto import pareto_rows

                meta = st.meta("spec", {}) or {}
                objs = [o for o in args.pareto.split(",") if o] or meta.get("objectives") or \
                    ["latency_s", "energy_j"]
                bad = [o for o in objs if o not in METRICS]
                if bad:
                    print(f"error: unknown objective(s) {', '.join(bad)}; expected "
                          f"{', '.join(METRICS)}", file=sys.stderr)
                    return 2
                from archsim.explore.spec import ConstraintSpec

                cons = {k: ConstraintSpec(**v) for k, v in (meta.get("constraints") or {}).items()}
                keep = {r["design_id"] for r in pareto_rows(rows, objs, cons)}
                rows = [r for r in rows if r["design_id"] in keep]
            text = st.export("json" if args.json else "csv", rows=rows)
    except sqlite3.Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0

