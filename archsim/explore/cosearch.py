"""Co-search of neural networks and (heterogeneous) hardware under design specs (NASAIC-style).

A co-search spec names a hardware space (a base config and sweep axes, conditional axes
included, exactly as in a sweep spec), one or more *tasks* (each a space of candidate
networks and an accuracy predictor), and one or more named *design specs* (limits on the
system's latency, energy, area, power, accuracy, or one task's metric)::

    hardware:
      base: hetero.yaml                      # e.g. two spatial arrays, ws + os
      axes:
        - {key: "units[0].rows", values: [8, 16, 32]}
        - {key: "units[1].rows", values: [8, 16]}
    tasks:
      - name: cifar10
        network: {cnn: {image: 32, depth: [1, 2, 3], width: [16, 32], kernel: [3, 5]}}
        accuracy: {python: "accuracy:cifar10"}    # module:function, or {csv: table.csv}
        a_format: int8
        w_format: int8
      - name: text
        network: {transformer: {layers: [2, 4], d_model: [128, 256], heads: 4,
                                ffn: [512, 1024], seq: 128}}
        accuracy: {csv: text_accuracy.csv}
    specs:
      S1: {latency_s: {max: 0.002}, energy_j: {max: 0.002}, area_mm2: {max: 2.0}}
    objectives: [accuracy, energy_j, area_mm2]   # the Pareto set (accuracy is maximised)
    baseline: energy_j        # what the sequential baseline's hardware step minimises

Networks may also be listed as files: ``network: {hf: [a/config.json, ...]}`` (Hugging Face
configs) or ``network: {onnx: [m.onnx, ...]}`` (needs the optional ``onnx`` package).

**Evaluation.** Every (hardware point, task, network) is one task of the sweep machinery
(:func:`archsim.explore.run.run_tasks`): evaluated by :func:`archsim.evaluate` (the mapper
assigns each op to the sub-accelerator that runs it best), stored in the SQLite result
store keyed by its input hash, so a killed co-search resumes, and runs on the local pool
or Dask. The hardware points come from the ``search`` of the hardware section (grid or
random); every network of every task is evaluated on each.

**Solutions.** A solution is one hardware point and one network per task. The tasks run
one after the other on the shared design, so its ``latency_s`` and ``energy_j`` are the
sums over the tasks, ``area_mm2`` is the design's, ``power_w = energy_j / latency_s``, and
``accuracy`` is the task-weighted mean of the predicted accuracies. ``<task>.<metric>``
names one task's value. Every combination is enumerated (vectorised), so the answers are
exact for the space given.

**Outputs.** The Pareto set on ``objectives`` (over every evaluated solution), and for each
design spec: the most accurate solution meeting it (co-search), and the *sequential
baseline* of NASAIC (Yang et al., DAC 2020): first the most accurate network of each task,
chosen with no knowledge of the hardware, then the hardware point that meets the spec for
those networks with the lowest ``baseline`` metric, or, when none meets it, the one with the
smallest total relative violation; its violations are reported.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from archsim.explore.cosearch_spec import (
    SOLUTION_METRICS,
    AccuracySpec,
    CosearchSpec,
    TaskSpec,
    accuracy_predictor,
    load_cosearch,
    parse_cosearch_text,
)
from archsim.explore.nas import network_label
from archsim.explore.pareto import pareto_mask
from archsim.explore.plots import plot_cosearch
from archsim.explore.run import run_tasks
from archsim.explore.spec import ConstraintSpec, Point
from archsim.explore.store import ResultStore
from archsim.outputs import atomic_output, write_text_atomic
from archsim.workloads.errors import Problem, SpecError

__all__ = ["CosearchSpec", "TaskSpec", "AccuracySpec", "CosearchResult", "load_cosearch",
           "parse_cosearch_text", "accuracy_predictor", "run_cosearch", "analyse",
           "write_outputs", "SOLUTION_METRICS"]


# ---- analysis ----------------------------------------------------------------------------------
@dataclass
class CosearchResult:
    """Everything a co-search found.

    Attributes:
        solutions: every evaluated solution (hardware point + one network per task) as a
            dict of metrics, ``point`` (the hardware overrides), ``design_id`` and
            ``networks`` ({task: label}); ``meets`` lists the design specs it meets.
        pareto: the Pareto set on the spec's objectives (a subset of ``solutions``).
        best: spec name -> the most accurate solution meeting it (None if none does).
        baseline: spec name -> the sequential baseline's solution, with ``violations``
            ({metric: (value, limit)}).
        hardware_points, evaluated: counts.
    """

    spec: CosearchSpec
    solutions: list[dict[str, Any]] = field(default_factory=list)
    pareto: list[dict[str, Any]] = field(default_factory=list)
    best: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    baseline: dict[str, dict[str, Any]] = field(default_factory=dict)
    hardware_points: int = 0
    evaluated: int = 0
    failed: int = 0
    elapsed_s: float = 0.0

    def summary(self) -> str:
        """A text report: the Pareto set size, then per spec co-search vs the baseline."""
        sp = self.spec
        lines = [f"co-search: {self.hardware_points} hardware points x "
                 + " x ".join(f"{len(t.networks)} {t.name} networks" for t in sp.tasks)
                 + f" = {len(self.solutions)} solutions; Pareto set on "
                 f"{', '.join(sp.objectives)}: {len(self.pareto)}"]
        if self.failed:
            lines.append(f"{self.failed} (hardware, network) evaluations failed (stored with "
                         "status 'error'; see archsim results DB --where \"status='error'\")")
        for name, lim in sp.specs.items():
            limits = ", ".join(f"{k} {_lim(c)}" for k, c in lim.items())
            lines.append(f"\nspec {name}: {limits}")
            b = self.best.get(name)
            base = self.baseline.get(name)
            lines.append("  co-search : " + (_describe(b) if b else "no solution meets it"))
            if base:
                v = base["violations"]
                tag = ("VIOLATES " + ", ".join(f"{k} ({_fmt(x)} > {_fmt(m)})" if x > m else
                                               f"{k} ({_fmt(x)} < {_fmt(m)})"
                                               for k, (x, m) in v.items())) if v else "meets it"
                lines.append(f"  sequential: {_describe(base)}\n              -> {tag}")
                if b:
                    lines.append("  co-search vs sequential: " + ", ".join(
                        f"{m} {_ratio(base[m], b[m])}" for m in ("latency_s", "energy_j",
                                                                 "area_mm2"))
                        + f", accuracy {100 * (b['accuracy'] - base['accuracy']):+.2f} points")
        return "\n".join(lines)

    def table(self, which: str = "pareto") -> list[dict[str, Any]]:
        """Flat rows (for CSV): ``pareto``, ``best`` (co-search and baseline per spec)."""
        if which == "pareto":
            return [_flat(s) for s in self.pareto]
        out = []
        for name in self.spec.specs:
            for kind, s in (("cosearch", self.best.get(name)),
                            ("sequential", self.baseline.get(name))):
                if s:
                    r = _flat(s)
                    r = {"spec": name, "method": kind,
                         "violations": json.dumps({k: list(v) for k, v in
                                                   s.get("violations", {}).items()}), **r}
                    out.append(r)
        return out


def _lim(c: ConstraintSpec) -> str:
    if c.min is not None and c.max is not None:
        return f"in [{_fmt(c.min)}, {_fmt(c.max)}]"
    if c.max is not None:
        return f"<= {_fmt(c.max)}"
    if c.min is not None:
        return f">= {_fmt(c.min)}"
    raise ValueError("a constraint needs min or max")  # ConstraintSpec.check rejects this


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _ratio(base: float, best: float) -> str:
    if best <= 0 or base <= 0:
        return "n/a"
    r = base / best
    return f"{r:.2f}x lower" if r >= 1 else f"{1 / r:.2f}x higher"


def _describe(s: dict[str, Any]) -> str:
    nets = " ".join(f"{k}={v}" for k, v in s["networks"].items())
    hw = " ".join(f"{k}={v}" for k, v in s["point"].items())
    return (f"accuracy {s['accuracy']:.4f}  latency {s['latency_s'] * 1e3:.4g} ms  energy "
            f"{s['energy_j'] * 1e3:.4g} mJ  area {s['area_mm2']:.4g} mm2\n              "
            f"networks: {nets}\n              hardware: {hw}")


def _flat(s: dict[str, Any]) -> dict[str, Any]:
    r = {k: v for k, v in s.items() if k not in ("point", "networks", "violations", "meets")}
    r.update({f"net.{k}": v for k, v in s["networks"].items()})
    r.update({f"hw.{k}": v for k, v in s["point"].items()})
    r["meets"] = ",".join(s.get("meets", []))
    return r


def analyse(spec: CosearchSpec, rows: Sequence[dict[str, Any]], max_solutions: int = 2_000_000
            ) -> CosearchResult:
    """Combine stored rows into solutions; Pareto set, best per spec, sequential baseline.

    Args:
        spec: the co-search.
        rows: the result store's rows of this co-search (one per hardware point, task and
            network; rows with ``status != 'ok'`` make that network unusable on that point).
        max_solutions: refuse to enumerate more combinations than this (use fewer networks
            or a random hardware search).
    """
    tasks = spec.tasks
    by_key: dict[tuple[str, str], dict[str, Any]] = {(r["design_id"], r["workload"]): r
                                                    for r in rows}
    hw_points: dict[str, Point] = {}
    if spec.hardware is None:  # load_cosearch always sets it; a hand-built spec may not
        raise ValueError("the co-search spec has no hardware section")
    for point in spec.hardware.points():
        hw_points.setdefault(point.design_id, point)
    labels = [[f"{t.name}:{network_label(n)}" for n in t.networks] for t in tasks]
    sizes = [len(t.networks) for t in tasks]
    n_combo = math.prod(sizes)
    if n_combo * len(hw_points) > max_solutions:
        raise SpecError(Problem(f"{n_combo * len(hw_points)} solutions to enumerate (more than "
                                f"{max_solutions}); use fewer networks or hardware points",
                                "tasks"))
    grids = np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij")
    idx = [g.ravel() for g in grids]       # per task: the network index of each combination
    wsum = sum(t.weight for t in tasks)
    zero = np.zeros(n_combo)                # sum start: the combination axis, exact 0.0
    acc_c = sum((t.weight * np.asarray(t.accuracies)[i] for t, i in zip(tasks, idx)), zero) / wsum
    res = CosearchResult(spec, hardware_points=len(hw_points))
    cols: dict[str, list[np.ndarray]] = {m: [] for m in spec.metric_names()}
    hw_of: list[np.ndarray] = []
    net_of: list[np.ndarray] = []
    ids = list(hw_points)
    for h, did in enumerate(ids):
        per = []
        for labs in labels:
            lat = np.full(len(labs), np.nan)
            en = np.full(len(labs), np.nan)
            area = np.nan
            for j, lab in enumerate(labs):
                r = by_key.get((did, lab))
                if r is not None and r.get("status") == "ok":
                    lat[j], en[j], area = r["latency_s"], r["energy_j"], r["area_mm2"]
                    res.evaluated += 1
                elif r is not None:
                    res.failed += 1
            per.append((lat, en, area))
        if any(np.isnan(a) for _, _, a in per):
            continue
        lat_c = sum((p[0][i] for p, i in zip(per, idx)), zero)
        en_c = sum((p[1][i] for p, i in zip(per, idx)), zero)
        keep = np.isfinite(lat_c) & np.isfinite(en_c)
        if not keep.any():
            continue
        area = float(per[0][2])
        cols["accuracy"].append(acc_c[keep])
        cols["latency_s"].append(lat_c[keep])
        cols["energy_j"].append(en_c[keep])
        cols["area_mm2"].append(np.full(keep.sum(), area))
        cols["power_w"].append(en_c[keep] / lat_c[keep])
        cols["edp_js"].append(en_c[keep] * lat_c[keep])
        for t, p, i in zip(tasks, per, idx):
            cols[f"{t.name}.accuracy"].append(np.asarray(t.accuracies)[i][keep])
            cols[f"{t.name}.latency_s"].append(p[0][i][keep])
            cols[f"{t.name}.energy_j"].append(p[1][i][keep])
            cols[f"{t.name}.power_w"].append((p[1][i] / p[0][i])[keep])
        hw_of.append(np.full(keep.sum(), h))
        net_of.append(np.stack([i[keep] for i in idx], axis=1))
    if not hw_of:
        return res
    m = {k: np.concatenate(v) for k, v in cols.items()}
    hw_idx = np.concatenate(hw_of)
    net_idx = np.concatenate(net_of)

    def solution(i: int) -> dict[str, Any]:
        s: dict[str, Any] = {k: float(v[i]) for k, v in m.items()}
        p = hw_points[ids[hw_idx[i]]]
        s.update(design_id=p.design_id, point=p.as_dict(),
                 networks={t.name: network_label(t.networks[net_idx[i, j]])
                           for j, t in enumerate(tasks)})
        s["meets"] = [n for n, lim in spec.specs.items() if _meets(m, lim)[i]]
        return s

    meet = {n: _meets(m, lim) for n, lim in spec.specs.items()}
    # the Pareto set (accuracy maximised: negated)
    obj = np.stack([-m[o] if o == "accuracy" else m[o] for o in spec.objectives], axis=1)
    uniq, inv = np.unique(obj, axis=0, return_inverse=True)
    on = pareto_mask(uniq)[inv.ravel()]
    res.pareto = sorted((solution(int(i)) for i in np.flatnonzero(on)),
                        key=lambda s: tuple(-s[o] if o == "accuracy" else s[o]
                                            for o in spec.objectives))
    res.solutions = [] if len(hw_idx) > 20000 else [solution(i) for i in range(len(hw_idx))]
    for name, lim in spec.specs.items():
        ok = np.flatnonzero(meet[name])
        if len(ok):
            key = np.lexsort((m[spec.baseline][ok], -m["accuracy"][ok]))
            res.best[name] = solution(int(ok[key[0]]))
        else:
            res.best[name] = None
        res.baseline[name] = _sequential(spec, m, hw_idx, net_idx, lim, solution)
    return res


def _meets(m: dict[str, np.ndarray], lim: Any) -> np.ndarray:
    ok = np.ones(len(m["accuracy"]), dtype=bool)
    for k, c in lim.items():
        if c.max is not None:
            ok &= m[k] <= c.max
        if c.min is not None:
            ok &= m[k] >= c.min
    return ok


def _sequential(spec: CosearchSpec, m: dict[str, np.ndarray], hw_idx: np.ndarray,
                net_idx: np.ndarray, lim: Any, solution: Callable[[int], dict[str, Any]]
                ) -> dict[str, Any]:
    """NASAIC's successive baseline: networks first (most accurate, hardware-blind), then
    the hardware that meets the spec with the lowest ``spec.baseline`` metric, or, if none
    does, the one with the smallest total relative violation."""
    first = [int(np.argmax(t.accuracies)) for t in spec.tasks]   # ties: the first listed
    rows = np.flatnonzero(np.all(net_idx == np.asarray(first), axis=1))
    if not len(rows):
        return {}
    viol = np.zeros(len(rows))
    for k, c in lim.items():
        x = m[k][rows]
        if c.max is not None:
            viol += np.maximum(0.0, x - c.max) / (abs(c.max) or 1.0)
        if c.min is not None:
            viol += np.maximum(0.0, c.min - x) / (abs(c.min) or 1.0)
    pick = rows[np.lexsort((m[spec.baseline][rows], viol))[0]]
    s = solution(int(pick))
    v = {}
    for k, c in lim.items():
        x = s[k]
        if c.max is not None and x > c.max:
            v[k] = (x, c.max)
        elif c.min is not None and x < c.min:
            v[k] = (x, c.min)
    s["violations"] = v
    return s


# ---- running -----------------------------------------------------------------------------------
def run_cosearch(spec: CosearchSpec, db: str | Path, **run_kw: Any) -> CosearchResult:
    """Evaluate (or resume) every (hardware point, task, network) into ``db`` and analyse.

    ``run_kw`` go to :func:`archsim.explore.run.run_tasks` (backend, workers, scheduler,
    client, progress, with_json)."""

    hw = spec.hardware
    assert hw is not None
    tasks = spec.store_tasks()
    with ResultStore(db) as st:
        st.set_meta("cosearch", {"file": spec.file, "base": hw.base_path,
                                 "tasks": [t.name for t in spec.tasks],
                                 "axes": [a.key for a in hw.axes]})
    rep = run_tasks(tasks, db, axis_keys=[a.key for a in hw.axes], **run_kw)
    with ResultStore(db, readonly=True) as st:
        rows = st.rows(hashes={t.hash for t in tasks})
    res = analyse(spec, rows)
    res.elapsed_s = rep.elapsed_s
    return res


def write_outputs(res: CosearchResult, out: str | Path) -> list[Path]:
    """``summary.txt``, ``pareto.csv``, ``best.csv`` and ``pareto.png``/``.svg`` in ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "summary.txt"]
    write_text_atomic(files[0], res.summary() + "\n", "--out")
    for which in ("pareto", "best"):
        rows = res.table(which)
        p = out / f"{which}.csv"
        with atomic_output(p, "--out") as tmp, open(tmp, "w", newline="") as fh:
            cols = list(dict.fromkeys(k for r in rows for k in r))
            w = csv.DictWriter(fh, cols, lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        files.append(p)

    for ext in ("png", "svg"):
        files.append(plot_cosearch(res, out / f"cosearch.{ext}"))
    return files
