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

import ctypes
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archsim.api import evaluate, native_format, with_native_formats, workload_from_dict
from archsim.arch.accelerator import load_data
from archsim.diagnostics import print_warnings
from archsim.explore.nas import build_network
from archsim.explore.nsga2 import nsga2
from archsim.explore.spec import SweepSpec, Task
from archsim.explore.store import ResultStore, Row, owner_id
from archsim.workloads.errors import ArchsimError, ConfigError
from archsim.workloads.formats import get_format
from archsim.workloads.yamlio import read_yaml

__all__ = ["SweepReport", "run_sweep", "run_tasks", "evaluate_tasks", "first_failure",
           "Progress", "BACKENDS"]

BACKENDS = ("local", "dask")


@dataclass
class SweepReport:
    """What one ``run_sweep`` call did."""

    total: int = 0          # tasks in the sweep
    skipped: int = 0        # already in the store (resumed)
    evaluated: int = 0      # evaluated by this call
    elsewhere: int = 0      # evaluated meanwhile by another driver on the same store
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

        d, _ = read_yaml(path, ConfigError)
        _BASE_CACHE[path] = d
    return d


def _workload(spec: dict[str, Any]) -> Any:
    key = json.dumps(spec, sort_keys=True)
    w = _WL_CACHE.get(key)
    if w is None:

        if spec.get("net"):   # a co-search candidate network (archsim.explore.nas)

            w = build_network(spec["net"], batch=spec.get("batch", 1))
            if spec.get("a_format") or spec.get("w_format"):
                w = w.with_formats(
                    get_format(spec["a_format"]) if spec.get("a_format") else None,
                    get_format(spec["w_format"]) if spec.get("w_format") else None)
        else:
            w = workload_from_dict(spec)
        _WL_CACHE[key] = w
    return w


def _native(acc: Any, spec: dict[str, Any]) -> Any:
    """The workload of ``spec`` as ``archsim run`` would evaluate it on ``acc``: in the
    design's native format unless the spec gives a format (``with_native_formats``; the design
    point may change it, e.g. a swept PE format)."""
    wl = _workload(spec)
    if spec.get("a_format") or spec.get("w_format"):
        return wl

    nat = native_format(acc)
    if nat is None:
        return wl
    key = json.dumps(spec, sort_keys=True) + "|native:" + nat
    w = _WL_CACHE.get(key)
    if w is None:
        w = _WL_CACHE[key] = with_native_formats(acc, wl)[0]
    return w


def evaluate_task(t: Task, with_json: bool = True) -> Row:
    """Evaluate one task; never raises for user-input problems (they become error rows)."""

    t0 = time.perf_counter()
    row: Row = {"hash": t.hash, "design_id": t.point.design_id, "workload": t.label,
                "point": json.dumps(t.point.as_dict())}
    try:
        acc = load_data(_base_data(t.base_path), t.base_path, t.point.overrides)
        res = evaluate(acc, _native(acc, t.workload), t.fidelity, t.objective)
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
    """Progress with rate and ETA on stderr: a redrawn bar on a terminal; off a terminal
    (logs, CI) one plain line every :attr:`LOG_EVERY_S` seconds once the run has taken
    longer than :attr:`QUIET_FOR_S`. ``enabled=False`` (``--no-progress``) silences it,
    ``None`` means "bar on a terminal, lines elsewhere"."""

    QUIET_FOR_S = 5.0
    LOG_EVERY_S = 10.0

    def __init__(self, total: int, enabled: bool | None, stream: Any = None,
                 what: str = "pts") -> None:
        self.total = total
        self.what = what
        self.stream = stream or sys.stderr
        self.enabled = enabled is not False
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(enabled) if enabled is not None else bool(isatty and isatty())
        self.done = 0
        self.t0 = time.perf_counter()
        self.last = 0.0

    def update(self, n: int, force: bool = False) -> None:
        self.done += n
        now = time.perf_counter()
        el = now - self.t0
        if not self.enabled:
            return
        if self.tty:
            if not force and now - self.last < 0.5 and self.done < self.total:
                return
        elif not force and (el < self.QUIET_FOR_S or now - self.last < self.LOG_EVERY_S):
            return
        elif force and el < self.QUIET_FOR_S:
            return
        self.last = now
        rate = self.done / el if el > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else math.inf
        frac = self.done / self.total if self.total else 1.0
        if self.tty:
            bar = "#" * int(frac * 30)
            self.stream.write(f"\r[{bar:<30}] {self.done}/{self.total} {frac:6.1%} "
                              f"{rate:7.1f} {self.what}/s  ETA {_dur(eta)}   ")
            if self.done >= self.total:
                self.stream.write("\n")
        else:
            self.stream.write(f"progress: {self.done}/{self.total} ({frac:.1%}), "
                              f"{rate:.1f} {self.what}/s, ETA {_dur(eta)}\n")
        self.stream.flush()


def _dur(s: float) -> str:
    if not math.isfinite(s):
        return "--"
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


# ---- the driver --------------------------------------------------------------------------------
#: Most tasks in one chunk (one worker call, one store transaction) by backend. The local
#: pool keeps 4 chunks per worker in flight, and a killed sweep loses those, so its chunks
#: stay small (8; 32 saved 2 % of the CPU). Dask has every chunk submitted at once and costs
#: ~8 ms of scheduler CPU per future in the driver (bench_sweep, 1,000 points, 2 workers:
#: 125 futures 1.37 CPU-s, 32 futures 0.63), so its chunks are larger.
MAX_CHUNK = {"local": 8, "dask": 32}


def _chunks(tasks: list[Task], workers: int, chunk: int | None,
            most: int = MAX_CHUNK["local"]) -> list[list[Task]]:
    if chunk is None:
        chunk = max(1, min(most, len(tasks) // (workers * 8) or 1))
    return [tasks[i:i + chunk] for i in range(0, len(tasks), chunk)]


def run_tasks(tasks: list[Task], db: str | Path, *, backend: str = "local",
              workers: int | None = None, scheduler: str | None = None, client: Any = None,
              progress: bool | None = None, chunk: int | None = None,
              with_json: bool = False, axis_keys: Iterable[str] = (),
              poll_s: float = 0.5) -> SweepReport:
    """Evaluate the tasks not yet in ``db`` and store them; see :func:`run_sweep`.

    Each chunk is *claimed* in the store before it is dispatched, so a second driver on the
    same store skips it; points claimed by another live driver are waited for (checked every
    ``poll_s`` seconds) and taken over if that driver dies."""
    if backend not in BACKENDS:
        raise ArchsimError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    if scheduler and backend != "dask":
        raise ArchsimError(f"--scheduler {scheduler} applies only to --backend dask (the "
                           f"{backend} backend has no scheduler); drop it or add --backend dask")
    t0 = time.perf_counter()
    workers = workers or os.cpu_count() or 1
    store = ResultStore(db)
    store.add_axes(axis_keys)
    owner = owner_id()
    done = store.done_hashes()
    seen: set[str] = set()
    todo = []
    for t in tasks:
        if t.hash not in done and t.hash not in seen:
            todo.append(t)
        seen.add(t.hash)
    rep = SweepReport(total=len(seen), skipped=len(seen & done), hashes=[t.hash for t in tasks])
    prog = Progress(len(todo), progress)

    def sink(rows: list[Row]) -> None:
        store.put_many(rows)
        store.refresh_claims(owner)
        rep.evaluated += len(rows)
        rep.errors += sum(r["status"] != "ok" for r in rows)
        prog.update(len(rows))

    def claimed(left: list[Task]) -> Iterator[list[Task]]:
        for c in _chunks(left, workers, chunk, MAX_CHUNK[backend]):
            got = store.claim([t.hash for t in c], owner)
            mine = [t for t in c if t.hash in got]
            if mine:
                yield mine

    try:
        left = todo
        while left:
            n0 = rep.evaluated
            if backend == "local":
                _run_local(claimed(left), workers, with_json, sink)
            else:
                _run_dask(list(claimed(left)), workers, scheduler, client, with_json, sink)
            stored = store.done_hashes()
            left = [t for t in left if t.hash not in stored]
            if left and rep.evaluated == n0:   # all claimed by another live driver: wait
                time.sleep(poll_s)
        rep.elsewhere = len(todo) - rep.evaluated
        if rep.elsewhere:
            prog.update(rep.elsewhere, force=True)
    finally:
        try:
            store.release(owner)
        finally:
            store.close()
    rep.elapsed_s = time.perf_counter() - t0
    return rep


def _worker_init(parent_pid: int) -> None:
    """Pool-worker start-up: Ctrl-C belongs to the driver (which stops the pool), and a
    worker never outlives its driver, even one killed with SIGKILL."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print_warnings()
    try:    # Linux: the kernel sends SIGKILL when the parent dies (prctl PR_SET_PDEATHSIG=1)

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:    # the driver died before this line
        os._exit(1)

    def watch() -> None:              # elsewhere: notice the re-parenting within 0.5 s
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="archsim-parent-watch").start()


def _stop_pool(ex: Any) -> None:
    """Stop a ProcessPoolExecutor now: cancel queued chunks and end running workers."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join(timeout=5)


def _run_local(chunks: Iterable[list[Task]], workers: int, with_json: bool,
               sink: Callable[[list[Row]], None]) -> None:
    if workers == 1:
        for c in chunks:
            sink(evaluate_tasks(c, with_json))
        return

    ex = ProcessPoolExecutor(max_workers=workers, initializer=_worker_init,
                             initargs=(os.getpid(),))
    try:
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
    except BaseException:       # Ctrl-C, a store error: no worker may outlive this call
        _stop_pool(ex)
        raise
    ex.shutdown(wait=True)


def _run_dask(chunks: list[list[Task]], workers: int, scheduler: str | None, client: Any,
              with_json: bool, sink: Callable[[list[Row]], None]) -> None:
    try:
        # deferred: optional dependency (pip install 'archsim[dask]')
        from dask.distributed import (
            Client,
            LocalCluster,
            as_completed,
        )
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
              with_json: bool = False) -> SweepReport:
    """Run (or resume) a sweep into the SQLite file ``db``.

    Args:
        spec: the sweep (:func:`load_spec`).
        db: the result store; points already there are skipped.
        backend: ``local`` (process pool of ``workers``, default os.cpu_count()) or
            ``dask`` (``scheduler`` address, a given ``client``, or a LocalCluster).
        progress: progress line on stderr (default: when stderr is a terminal).
        with_json: also store each full Result (with its per-op table) as JSON — ~50 KB
            per ResNet-50 point, so off unless asked for.
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
    total = SweepReport()

    def evaluate(tasks: list[Task]) -> None:
        rep = run_tasks(tasks, db, **kw)
        total.total += rep.total
        total.skipped += rep.skipped
        total.evaluated += rep.evaluated
        total.errors += rep.errors
        total.elapsed_s += rep.elapsed_s
        total.hashes.extend(t.hash for t in tasks)

    nsga2(spec, db, evaluate)
    return total


def first_failure(db: str, hashes: list[str]) -> str | None:
    """The first error message if every task of ``hashes`` is stored as an error, else
    None (a sweep where nothing could be evaluated is a failed command, not an empty front)."""
    with ResultStore(db, readonly=True) as st:
        rows = st.rows(hashes=hashes)
    if not rows or any(r["status"] == "ok" for r in rows):
        return None
    return str(rows[0]["error"]).splitlines()[0]
