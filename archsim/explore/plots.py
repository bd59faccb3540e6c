"""Plots (matplotlib, Agg backend; the format follows the output's suffix: .png, .svg, .pdf).

* a sweep: the Pareto front of two objectives (:func:`plot_pareto`), heat maps of a metric
  over two axes (:func:`plot_heatmap`);
* one :class:`archsim.result.Result`: latency and energy per op (:func:`plot_op_breakdown`),
  energy and area per component (:func:`plot_component_breakdown`), the roofline of each
  unit with its ops as points (:func:`plot_roofline`);
* a co-search (:func:`plot_cosearch`).

Plots only draw numbers the models produced; nothing is computed here except sums,
minima and the roofline's closed form.
"""

from __future__ import annotations

import json as _json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from archsim.explore.pareto import designs, pareto_rows
from archsim.explore.spec import ConstraintSpec
from archsim.explore.store import ResultStore
from archsim.outputs import PLOT_SUFFIXES, atomic_output, check_output_path
from archsim.workloads.errors import ArchsimError, Problem, SpecError

if TYPE_CHECKING:
    from archsim.result import Result

__all__ = ["plot_pareto", "plot_op_breakdown", "plot_component_breakdown", "plot_roofline",
           "plot_heatmap", "heatmap_table", "plot_cosearch"]


def plot_pareto(db: str | Path, objectives: Sequence[str], out: str | Path,
                constraints: Mapping[str, ConstraintSpec] | None = None,
                hashes: Iterable[str] | None = None) -> Path:
    """Scatter every design on two objectives (infeasible ones grey) and draw the front.
    The format follows ``out``'s suffix (.png, .svg, .pdf)."""
    # deferred: matplotlib is slow to import; only plots need it
    import matplotlib

    matplotlib.use("Agg")
    # deferred: matplotlib is slow to import; only plots need it
    import matplotlib.pyplot as plt


    x, y = objectives[0], objectives[1]
    with ResultStore(db, readonly=True) as st:
        rows = st.rows(hashes=hashes)
    ds = [d for d in designs(rows, constraints) if d[x] is not None and d[y] is not None]
    front = pareto_rows(rows, [x, y], constraints)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    bad = [d for d in ds if not d["feasible"]]
    good = [d for d in ds if d["feasible"]]
    if bad:
        ax.scatter([d[x] for d in bad], [d[y] for d in bad], s=8, c="0.8",
                   label="violates constraints")
    if good:
        ax.scatter([d[x] for d in good], [d[y] for d in good], s=8, c="tab:blue",
                   label="feasible")
    if front:
        ax.plot([d[x] for d in front], [d[y] for d in front], "o-", c="tab:red", ms=4,
                label=f"Pareto front ({len(front)})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    out = _savefig(fig, out)
    plt.close(fig)
    return out


# ---- one Result: per-op and per-component breakdowns, roofline -----------------------------
def _plt() -> Any:
    # deferred: matplotlib is slow to import; only plots need it
    import matplotlib

    matplotlib.use("Agg")
    # deferred: matplotlib is slow to import; only plots need it
    import matplotlib.pyplot as plt

    return plt


def _savefig(fig: Any, out: str | Path, flag: str = "-o") -> Path:
    """Save ``fig`` to ``out`` atomically (temp name, then rename); the format follows the
    suffix, which must be one of :data:`archsim.outputs.PLOT_SUFFIXES` (matplotlib would
    otherwise append ``.png`` and write a file under a different name)."""

    out = check_output_path(out, flag, PLOT_SUFFIXES)
    with atomic_output(out, flag) as tmp:
        fig.savefig(tmp, format=out.suffix[1:].lower())
    return out


def _save(fig: Any, out: str | Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    try:
        return _savefig(fig, out)
    finally:
        _plt().close(fig)


def plot_op_breakdown(result: Result, out: str | Path, top: int = 25) -> Path:
    """Latency and energy of the ``top`` most expensive ops (by latency; the rest summed as
    "other"), coloured by the unit that ran them. Values are ``Result.ops`` as they are."""
    plt = _plt()
    ops = sorted(result.ops, key=lambda o: -o.latency_s)
    shown, rest = ops[:top], ops[top:]
    names = [o.name for o in shown] + ([f"other ({len(rest)} ops)"] if rest else [])
    lat = [o.latency_s * 1e3 for o in shown] + ([sum(o.latency_s for o in rest) * 1e3]
                                                if rest else [])
    en = [o.energy_j * 1e3 for o in shown] + ([sum(o.energy_j for o in rest) * 1e3]
                                              if rest else [])
    units = sorted({o.unit for o in result.ops})
    cmap = {u: f"C{i}" for i, u in enumerate(units)}
    colors = [cmap[o.unit] for o in shown] + (["0.6"] if rest else [])
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.28 * len(names) + 1.6), sharey=True)
    y = list(range(len(names)))[::-1]
    axes[0].barh(y, lat, color=colors)
    axes[0].set_xlabel("latency (ms)")
    axes[0].set_yticks(y, names, fontsize=7)
    axes[1].barh(y, en, color=colors)
    axes[1].set_xlabel("energy (mJ, dynamic per op)")
    for u in units:
        axes[1].barh([], [], color=cmap[u], label=u)
    axes[1].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"{result.workload} on {result.design}: per-op latency and energy "
                 f"(total {result.latency_s * 1e3:.4g} ms, {result.energy_j * 1e3:.4g} mJ)",
                 fontsize=9)
    return _save(fig, out)


def plot_component_breakdown(result: Result, out: str | Path) -> Path:
    """Energy (``Result.energy_breakdown_j``) and area (``area_breakdown_mm2``) per
    component, one bar each."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, data, scale, label in ((axes[0], result.energy_breakdown_j, 1e3, "energy (mJ)"),
                                   (axes[1], result.area_breakdown_mm2, 1.0, "area (mm²)")):
        items = sorted(((k, v * scale) for k, v in data.items() if v > 0), key=lambda kv: -kv[1])
        y = list(range(len(items)))[::-1]
        ax.barh(y, [v for _, v in items], color=[f"C{i % 10}" for i in range(len(items))])
        ax.set_yticks(y, [k for k, _ in items], fontsize=7)
        ax.set_xlabel(label)
    fig.suptitle(f"{result.workload} on {result.design}: energy {result.energy_j * 1e3:.4g} mJ"
                 f", area {result.area_mm2:.4g} mm²", fontsize=9)
    return _save(fig, out)


def plot_roofline(acc: Any, wl: Any, result: Result, out: str | Path) -> Path:
    """Roofline of each unit that ran matrix ops, with one point per matrix op.

    Roof of unit u: ``min(2 * peak_macs_per_cycle * f, I * peak_bytes_per_cycle * f)`` with
    I the arithmetic intensity in FLOP per DRAM byte (the compute roof takes the unit's
    largest ``peak_macs_per_cycle`` over its ops: it depends on the number format). Op
    point: ``I = 2 * macs / dram_bytes``, performance ``2 * macs / latency``. No point can lie
    above its unit's roof (the Unit contract), which makes this a visual check too."""

    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.8))
    by_unit: dict[str, list[Any]] = {}
    for o in result.ops:
        if o.macs > 0 and o.dram_bytes > 0 and o.latency_s > 0:
            by_unit.setdefault(o.unit, []).append(o)
    xs_all = [2 * o.macs / o.dram_bytes for os_ in by_unit.values() for o in os_]
    if not xs_all:
        ax.text(0.5, 0.5, "no matrix ops with DRAM traffic", ha="center", transform=ax.transAxes)
        return _save(fig, out)
    lo, hi = min(xs_all) / 4, max(xs_all) * 4
    grid = np.logspace(np.log10(lo), np.log10(hi), 200)
    for i, (uname, ops) in enumerate(sorted(by_unit.items())):
        u = acc.unit(uname)
        peak = max(2 * u.peak_macs_per_cycle(wl.op(o.name)) * u.clock_hz for o in ops)
        bw = u.peak_bytes_per_cycle() * u.clock_hz
        ax.plot(grid, np.minimum(peak, grid * bw), "-", c=f"C{i}", lw=1.5,
                label=f"{uname}: {peak / 1e12:.3g} TFLOP/s, {bw / 1e9:.3g} GB/s")
        ax.scatter([2 * o.macs / o.dram_bytes for o in ops],
                   [2 * o.macs / o.latency_s for o in ops], s=12, c=f"C{i}", alpha=0.7,
                   edgecolors="none")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / DRAM byte)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.set_title(f"{result.workload} on {result.design}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, out)


# ---- sweeps: heat maps --------------------------------------------------------------------
def heatmap_table(rows: Sequence[Mapping[str, Any]], x: str, y: str, metric: str,
                  constraints: Mapping[str, ConstraintSpec] | None = None,
                  reduce: str = "min") -> tuple[list[Any], list[Any], list[list[float]]]:
    """(x values, y values, table[y][x]): ``metric`` of the feasible designs with each (x, y)
    axis pair, reduced (``min``, ``max`` or ``mean``) over the other axes; NaN where none."""

    cells: dict[tuple[Any, Any], list[float]] = {}
    for d in designs(rows, constraints):
        p = _json.loads(d["point"]) if isinstance(d["point"], str) else d["point"]
        if not d["feasible"] or d[metric] is None or x not in p or y not in p:
            continue
        cells.setdefault((p[x], p[y]), []).append(d[metric])
    xs = sorted({k[0] for k in cells}, key=_sortkey)
    ys = sorted({k[1] for k in cells}, key=_sortkey)
    reducers: dict[str, Callable[[list[float]], float]] = {
        "min": min, "max": max, "mean": lambda v: sum(v) / len(v)}
    fn = reducers[reduce]
    table = [[fn(cells[(a, b)]) if (a, b) in cells else math.nan for a in xs] for b in ys]
    return xs, ys, table


def _check_axes(rows: Sequence[Mapping[str, Any]], axes: Sequence[tuple[str, str]],
                db: str | Path) -> None:
    """Raise (naming the flag and listing the store's axes) if an axis key is in no row."""


    have: dict[str, None] = {}
    for r in rows:
        p = _json.loads(r["point"]) if isinstance(r["point"], str) else r["point"]
        have.update(dict.fromkeys(p))
    problems = [Problem(f"no axis {key!r} in {db}; its axes: {', '.join(have) or '(none)'}",
                        flag) for flag, key in axes if key not in have]
    if problems:
        raise SpecError(problems)


def _sortkey(v: Any) -> tuple[int, Any]:
    return (0, v) if isinstance(v, (int, float)) else (1, str(v))


def plot_heatmap(db: str | Path, x: str, y: str, metric: str, out: str | Path,
                 constraints: Mapping[str, ConstraintSpec] | None = None,
                 reduce: str = "min", hashes: Iterable[str] | None = None) -> Path:
    """Heat map of a sweep: ``metric`` (see :func:`heatmap_table`) over two axes."""


    plt = _plt()
    with ResultStore(db, readonly=True) as st:
        rows = st.rows(hashes=hashes)
    _check_axes(rows, (("--x", x), ("--y", y)), db)
    xs, ys, table = heatmap_table(rows, x, y, metric, constraints, reduce)
    if not xs or not ys:

        raise ArchsimError(Problem(f"no feasible design with a {metric} value to plot over "
                                   f"{x} and {y}", "", str(db)))
    fig, ax = plt.subplots(figsize=(1.0 + 0.8 * max(1, len(xs)), 1.2 + 0.55 * max(1, len(ys))))
    a = np.array(table, dtype=float) if table else np.zeros((0, 0))
    if a.size:
        im = ax.imshow(a, origin="lower", aspect="auto", cmap="viridis_r")
        fig.colorbar(im, ax=ax, label=f"{reduce} {metric}")
        for i in range(a.shape[0]):
            for j in range(a.shape[1]):
                if math.isfinite(a[i, j]):
                    ax.text(j, i, f"{a[i, j]:.3g}", ha="center", va="center", fontsize=7,
                            color="w")
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(f"{reduce} {metric} over the other axes (feasible designs)", fontsize=9)
    return _save(fig, out)


# ---- co-search ----------------------------------------------------------------------------
def plot_cosearch(res: Any, out: str | Path, x: str = "energy_j", y: str = "accuracy") -> Path:
    """A co-search on two metrics: every solution (grey; at most 20,000 stored), the Pareto
    set, and per design spec the co-search choice (star) and the sequential baseline (cross),
    with the spec's limit on ``x`` as a dashed line."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.8))
    if res.solutions:
        ax.scatter([s[x] for s in res.solutions], [s[y] for s in res.solutions], s=3, c="0.8",
                   label="all solutions")
    if res.pareto:
        ax.scatter([s[x] for s in res.pareto], [s[y] for s in res.pareto], s=10, c="tab:blue",
                   label=f"Pareto set ({len(res.pareto)})")
    for i, (name, lim) in enumerate(res.spec.specs.items()):
        c = f"C{(i + 1) % 10}"
        b, base = res.best.get(name), res.baseline.get(name)
        if b:
            ax.scatter([b[x]], [b[y]], marker="*", s=180, c=c, edgecolors="k",
                       label=f"{name}: co-search", zorder=5)
        if base:
            ax.scatter([base[x]], [base[y]], marker="X", s=110, c=c, edgecolors="k",
                       label=f"{name}: sequential" + (" (violates)" if base["violations"]
                                                      else ""), zorder=5)
        if x in lim and lim[x].max is not None:
            ax.axvline(lim[x].max, ls="--", c=c, lw=1)
    ax.set_xscale("log")
    # deferred: matplotlib is slow to import; only plots need it
    from matplotlib.ticker import NullFormatter

    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, out)
