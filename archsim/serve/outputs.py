"""Files of a serving run: a Chrome/Perfetto timeline of the iterations and a PNG of the
latency CDFs and KV use (``archsim serve --timeline/--plot``). Both are written atomically
(temporary file + rename).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from archsim.outputs import atomic_output
from archsim.serve.metrics import ServeResult

__all__ = ["write_timeline", "plot_serving"]


def _atomic(path: str, write: Callable[[str], None], flag: str) -> None:
    """Write through ``write(tmp)`` then rename onto ``path`` (no partial file;
    :func:`archsim.outputs.atomic_output`)."""
    with atomic_output(path, flag) as tmp:
        write(str(tmp))


def write_timeline(raw: dict[str, Any], path: str) -> None:
    """Write a Chrome Trace Event JSON of a run's raw records (:attr:`ServingRun.raw`): one
    track per replica (iterations), KV-use counters."""
    ev: list[dict[str, Any]] = []
    for rep, t0, dt, pf, nd, kv, e in raw["timeline"]:
        ev.append({"name": f"{'P' if pf else ''}{'D' if nd else ''} {pf}+{nd}", "ph": "X",
                   "pid": 0, "tid": rep, "ts": t0 * 1e6, "dur": dt * 1e6,
                   "args": {"prefill_tokens": pf, "decodes": nd, "energy_j": e}})
        ev.append({"name": f"kv_blocks_r{rep}", "ph": "C", "pid": 0, "ts": t0 * 1e6,
                   "args": {"used": kv}})

    def w(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"traceEvents": ev, "displayTimeUnit": "ms"}, f)
    _atomic(path, w, "--timeline")


def plot_serving(res: ServeResult, raw: dict[str, Any], path: str) -> None:
    """Write a PNG: TTFT/E2E CDFs, the time-between-tokens CDF and KV use over time."""
    # deferred: matplotlib is slow to import and only plots need it
    import matplotlib

    matplotlib.use("Agg")
    # deferred: matplotlib is slow to import; only plots need it
    import matplotlib.pyplot as plt

    st = [s for s in raw["states"] if s.finish_t >= 0]
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    for name, vals in (("TTFT", [s.first_t - s.req.arrival_s for s in st]),
                       ("E2E", [s.finish_t - s.req.arrival_s for s in st])):
        v = np.sort(np.asarray(vals))
        ax[0].plot(v, np.arange(1, len(v) + 1) / max(1, len(v)), label=name)
    ax[0].set_xscale("log")
    ax[0].set_xlabel("latency (s)")
    ax[0].set_ylabel("CDF")
    ax[0].legend()
    tb = np.sort(np.asarray(raw["tbt"]))
    ax[1].plot(tb * 1e3, np.arange(1, len(tb) + 1) / max(1, len(tb)))
    ax[1].set_xlabel("time between tokens (ms)")
    ax[1].set_title(f"P99 TBT {res.tbt_s['p99'] * 1e3:.1f} ms")
    tl = raw["timeline"]
    reps = sorted({x[0] for x in tl})
    tot = {r["replica"]: r["kv_blocks"] for r in res.replicas}
    for rep in reps[:8]:
        pts = [(x[1], x[5] / max(1, tot[rep])) for x in tl if x[0] == rep]
        ax[2].plot([p[0] for p in pts], [p[1] for p in pts], lw=0.8, label=f"replica {rep}")
    ax[2].set_xlabel("time (s)")
    ax[2].set_ylabel("KV blocks used (fraction)")
    ax[2].legend(fontsize=7)
    fig.suptitle(f"{res.model} on {res.design} ({res.deployment['summary']})")
    fig.tight_layout()

    def w(tmp: str) -> None:
        fig.savefig(tmp, dpi=110, format="png")
    _atomic(path, w, "--plot")
    plt.close(fig)
