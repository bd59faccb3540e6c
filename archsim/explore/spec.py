"""Sweep specifications: strict YAML -> frozen :class:`SweepSpec`.

A sweep spec names a base design, the parameter axes to vary (``--set`` key paths), the
workloads, the objectives and the constraints::

    base: tpu_like                 # a config path (relative to this file) or a design name
    axes:
      - {key: "units[0].rows", values: [32, 64, 128]}
      - {key: "units[0].cols", range: [32, 128, 32]}            # lo, hi (inclusive), step
      - {key: "units[0].memory.bandwidth_gbps", log_range: [100, 800, 4]}   # lo, hi, n
      - {key: "units[0].dataflow", values: [ws, os]}
      - {key: "units[0].pe_register_bytes", values: [64, 512],          # a conditional axis:
         when: {"units[0].dataflow": os}}       # only swept where an earlier axis has one of
                                                # these values; elsewhere the base value holds
    workloads:
      - {model: resnet50, a_format: int8, w_format: int8}
      - {gemm: [1024, 1024, 1024]}
    objectives: [latency_s, energy_j]
    constraints:
      area_mm2: {max: 100}
    search: {method: grid}          # or {method: random, samples: 200, seed: 1}
    fidelity: analytical

Every problem is reported with ``file:line key.path`` (:class:`SpecError`), through the
same :class:`arch.spec.SpecBuilder` machinery as hardware configs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from archsim.api import VERSION, find_config
from archsim.arch.accelerator import load_data
from archsim.arch.spec import SpecBuilder, param
from archsim.workloads.errors import ArchsimError, ConfigError, Problem, SpecError
from archsim.workloads.yamlio import LocDict, LocList, parse_yaml_text, read_yaml

__all__ = ["METRICS", "AxisSpec", "WorkloadSpec", "ConstraintSpec", "SearchSpec", "SweepSpec",
           "Point", "Task", "load_spec", "parse_spec_text", "axis_values", "column_name"]

#: Metrics stored as columns (all minimised when used as objectives, except where noted).
METRICS = ("latency_s", "energy_j", "area_mm2", "power_w", "edp_js", "cycles", "utilization",
           "dram_bytes", "throughput_flops", "tokens_per_s", "samples_per_s")
#: Metrics where larger is better: as objectives they are negated before minimising.
MAXIMISED = ("utilization", "throughput_flops", "tokens_per_s", "samples_per_s")
SEARCH_METHODS = ("grid", "random", "nsga2")
#: Largest grid sweep (points x workloads) accepted. At the measured ~50 ResNet-50
#: points/s per core of the analytical model (benchmarks/bench_sweep.py) a million tasks
#: are ~6 core-hours and ~50 GB of stored results with per-op JSON: beyond this a user
#: almost certainly mistyped a range; random search or NSGA-II sample such spaces instead.
MAX_GRID_TASKS = 1_000_000
#: Most values one axis may take (a ``range`` with a tiny step is the usual mistake).
MAX_AXIS_VALUES = 100_000


@dataclass(frozen=True)
class AxisSpec:
    """One swept parameter (exactly one of ``values``, ``range``, ``log_range``)."""

    key: str = param(doc="--set key path in the base config, e.g. units[0].rows")
    range: tuple[float, ...] | None = param(None, doc="[lo, hi, step]: lo..hi inclusive")
    log_range: tuple[float, ...] | None = param(None, doc="[lo, hi, n]: n log-spaced values")
    values: tuple[Any, ...] = field(default=(), metadata={"doc": "explicit list of values"})
    when: tuple[tuple[str, tuple[Any, ...]], ...] = field(
        default=(), metadata={"doc": "conditions {earlier axis key: value or [values]}: the "
                              "axis applies only where every one holds"})

    def active(self, chosen: dict[str, Any]) -> bool:
        """Whether this axis applies given the values already chosen for earlier axes (an
        axis named in ``when`` that is itself inactive fails the condition)."""
        return all(k in chosen and chosen[k] in vs for k, vs in self.when)

    def check(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []  # "exactly one of" is checked on the raw mapping
        if self.range is not None:
            if len(self.range) != 3:
                out.append(("range", f"expected [lo, hi, step], got {len(self.range)} numbers"))
            elif self.range[2] <= 0 or self.range[1] < self.range[0]:
                out.append(("range", "expected lo <= hi and step > 0"))
            elif axis_count(self) > MAX_AXIS_VALUES:
                out.append(("range", f"{axis_count(self):.4g} values; expected at most "
                            f"{MAX_AXIS_VALUES:,} (use a larger step or log_range)"))
        if self.log_range is not None:
            if len(self.log_range) != 3:
                out.append(("log_range", f"expected [lo, hi, n], got {len(self.log_range)} numbers"))
            else:
                lo, hi, n = self.log_range
                if lo <= 0 or hi < lo or n < 1 or not float(n).is_integer():
                    out.append(("log_range", "expected 0 < lo <= hi and an integer n >= 1"))
                elif n > MAX_AXIS_VALUES:
                    out.append(("log_range", f"n = {n:.4g}; expected at most "
                                f"{MAX_AXIS_VALUES:,} values"))
        return out


@dataclass(frozen=True)
class WorkloadSpec:
    """A zoo model / HF config.json for one phase, or a single GEMM ``[m, n, k]``."""

    model: str | None = param(None, doc="zoo model name or HF config.json path")
    phase: str | None = param(None, doc="inference/prefill/decode/train")
    batch: int = param(1, doc="batch size", min=1)
    seq: int | None = param(None, doc="sequence length", min=1)
    context: int | None = param(None, doc="decode context length", min=1)
    a_format: str | None = param(None, doc="activation number format")
    w_format: str | None = param(None, doc="weight number format")
    gemm: tuple[int, ...] | None = param(None, doc="[m, n, k] of a single GEMM")

    def check(self) -> list[tuple[str, str]]:
        if (self.model is None) == (self.gemm is None):
            return [("model", "a workload needs exactly one of model or gemm")]
        if self.gemm is not None and (len(self.gemm) != 3 or min(self.gemm) < 1):
            return [("gemm", "expected [m, n, k] with every entry >= 1")]
        if self.gemm is not None:   # keys archsim.workload_from_dict refuses for a gemm
            return [(k, "not used by a gemm workload (only batch, a_format, w_format)")
                    for k in ("phase", "seq", "context") if getattr(self, k) is not None]
        return []

    def as_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("model", "phase", "batch", "seq", "context",
                                           "a_format", "w_format", "gemm")}
        d["gemm"] = list(self.gemm) if self.gemm else None
        return {k: v for k, v in d.items() if v is not None}

    @property
    def label(self) -> str:
        if self.gemm:
            s = "gemm_{}x{}x{}".format(*self.gemm)
        else:
            s = str(self.model)
            if self.phase:
                s += f"/{self.phase}"
        extra = [f"{k}={getattr(self, k)}" for k in ("batch", "seq", "context", "a_format",
                                                    "w_format")
                 if getattr(self, k) is not None and not (k == "batch" and self.batch == 1)]
        return s + (f"[{','.join(extra)}]" if extra else "")


@dataclass(frozen=True)
class ConstraintSpec:
    """Bounds on a metric (per design point and workload)."""

    min: float | None = param(None, doc="smallest allowed value")
    max: float | None = param(None, doc="largest allowed value")

    def check(self) -> list[tuple[str, str]]:
        if self.min is None and self.max is None:
            return [("max", "a constraint needs min or max")]
        if self.min is not None and self.max is not None and self.min > self.max:
            return [("min", "min is larger than max")]
        return []

    def ok(self, v: float | None) -> bool:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return False
        return (self.min is None or v >= self.min) and (self.max is None or v <= self.max)


@dataclass(frozen=True)
class SearchSpec:
    method: str = param("grid", doc="grid, random or nsga2", choices=SEARCH_METHODS)
    samples: int = param(100, doc="random: points drawn; nsga2: population size", min=1)
    generations: int = param(10, doc="nsga2: generations", min=1)
    seed: int = param(0, doc="random seed")


@dataclass(frozen=True)
class SweepSpec:
    """A whole sweep. ``base_path`` is resolved at load time."""

    base: str = param(doc="base config path (relative to the spec file) or design name")
    workloads: tuple[WorkloadSpec, ...] = param(doc="workloads evaluated at every point")
    axes: tuple[AxisSpec, ...] = param((), doc="swept parameters")
    objectives: tuple[str, ...] = param(("latency_s", "energy_j"), doc="metrics to minimise")
    constraints: dict[str, ConstraintSpec] = param(
        default_factory=lambda: MappingProxyType({}), doc="metric -> {min, max}")
    search: SearchSpec = param(default_factory=SearchSpec, doc="grid / random / nsga2")
    fidelity: str = param("analytical", doc="analytical or cycle",
                          choices=("analytical", "cycle"))
    objective: str = param("latency", doc="what the op -> unit mapper minimises")
    base_path: str = field(default="", metadata={"doc": "resolved base config"})
    file: str | None = field(default=None, metadata={"doc": "the spec file"})

    def check(self) -> list[tuple[str, str]]:
        out = []
        if not self.workloads:
            out.append(("workloads", "expected at least one workload"))
        for i, o in enumerate(self.objectives):
            if o not in METRICS:
                out.append((f"objectives[{i}]", f"unknown metric {o!r}; expected one of "
                            f"{', '.join(METRICS)}"))
        if not 1 <= len(self.objectives) <= 3:
            out.append(("objectives", "expected 1 to 3 objectives"))
        for k in self.constraints:
            if k not in METRICS:
                out.append((f"constraints.{k}", f"unknown metric {k!r}; expected one of "
                            f"{', '.join(METRICS)}"))
        keys = [a.key for a in self.axes]
        for i, k in enumerate(keys):
            if k in keys[:i]:
                out.append((f"axes[{i}].key", f"axis {k!r} given twice (first as "
                            f"axes[{keys.index(k)}])"))
        return out

    def size_problem(self) -> str | None:
        """Why a grid search is too large to run (before any point is listed), or None."""
        if self.search.method != "grid":
            return None
        n = math.prod(axis_count(a) for a in self.axes) * len(self.workloads)
        if n <= MAX_GRID_TASKS:
            return None
        return (f"the grid has {n:.3g} tasks (points x workloads); expected at most "
                f"{MAX_GRID_TASKS:,}: use fewer axis values, or search: {{method: random, "
                f"samples: N}} or nsga2")

    def check_when(self, b: SpecBuilder, axes: Any) -> None:
        """Conditions name an earlier axis and values it takes (file:line problems)."""
        for i, a in enumerate(self.axes):
            raw = axes[i] if isinstance(axes, list) and i < len(axes) else None
            when = raw.get("when") if isinstance(raw, dict) else None
            earlier = {x.key: axis_values(x) for x in self.axes[:i]}
            for k, vs in a.when:
                if k not in earlier:
                    what = ("this axis" if k == a.key else "a later axis"
                            if k in (x.key for x in self.axes) else "no axis")
                    b.problem(f"condition on {k!r}, which is {what}; a condition must name "
                              "an axis listed before this one", f"axes[{i}].when.{k}",
                              when, k)
                    continue
                bad = [v for v in vs if v not in earlier[k]]
                if bad:
                    b.problem(f"{', '.join(map(repr, bad))} is not a value of axis {k!r} "
                              f"(values: {', '.join(map(repr, earlier[k]))})",
                              f"axes[{i}].when.{k}", when, k)

    # ---- the design space ------------------------------------------------------------
    @property
    def conditional(self) -> bool:
        return any(a.when for a in self.axes)

    @property
    def space_size(self) -> int:
        if self.conditional:
            return len(self.grid())
        return math.prod(len(axis_values(a)) for a in self.axes)

    def grid(self) -> list[Point]:
        """Every point. A conditional axis branches only where its ``when`` holds; elsewhere
        it is absent from the point (the base config's value stays)."""
        vals = [axis_values(a) for a in self.axes]
        keys = [a.key for a in self.axes]
        if not self.conditional:
            return [Point(tuple(zip(keys, combo))) for combo in itertools.product(*vals)]
        partial: list[dict[str, Any]] = [{}]
        for a, vs in zip(self.axes, vals):
            nxt: list[dict[str, Any]] = []
            for p in partial:
                if a.active(p):
                    nxt.extend({**p, a.key: v} for v in vs)
                else:
                    nxt.append(p)
            partial = nxt
        return [Point(tuple(p.items())) for p in partial]

    def point_of(self, index: tuple[int, ...]) -> Point:
        """The point of one index per axis (inactive conditional axes dropped): the genome
        decoding of random search and NSGA-II."""
        chosen: dict[str, Any] = {}
        for a, i in zip(self.axes, index):
            if a.active(chosen):
                chosen[a.key] = axis_values(a)[i]
        return Point(tuple(chosen.items()))

    def points(self) -> list[Point]:
        """The points the ``search`` method visits up front (nsga2: its first generation)."""
        if self.search.method == "grid":
            too_big = self.size_problem()
            if too_big:        # a spec built in code skips the loader's check
                raise SpecError(Problem(too_big, "axes", self.file))
            return self.grid()
        return random_points(self, self.search.samples, self.search.seed)

    def base_digest(self) -> str:
        return hashlib.sha256(Path(self.base_path).read_bytes()).hexdigest()

    def tasks(self, points: list[Point] | None = None) -> list[Task]:
        pts = self.points() if points is None else points
        digest = self.base_digest()
        out = []
        for p in pts:
            for w in self.workloads:
                out.append(Task.make(self.base_path, digest, p, w, self.fidelity, self.objective))
        return out


def random_points(spec: SweepSpec, n: int, seed: int) -> list[Point]:
    """``n`` distinct points drawn uniformly from the grid (all of it if smaller)."""
    if spec.conditional:
        grid = spec.grid()
        return [grid[i] for i in random.Random(seed).sample(range(len(grid)), min(n, len(grid)))]
    vals = [axis_values(a) for a in spec.axes]
    keys = [a.key for a in spec.axes]
    total = math.prod(len(v) for v in vals)
    rng = random.Random(seed)
    idx = rng.sample(range(total), min(n, total))
    out = []
    for flat in idx:
        combo = []
        for v in reversed(vals):
            flat, r = divmod(flat, len(v))
            combo.append(v[r])
        out.append(Point(tuple(zip(keys, reversed(combo)))))
    return out


@dataclass(frozen=True, order=True)
class Point:
    """A design point: ((key path, value), ...) in axis order."""

    items: tuple[tuple[str, Any], ...]

    @property
    def overrides(self) -> list[str]:
        return [f"{k}={json.dumps(v)}" for k, v in self.items]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.items)

    @property
    def design_id(self) -> str:
        return hashlib.sha256(json.dumps(self.items, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Task:
    """One (design point, workload) evaluation, keyed by its input hash."""

    hash: str
    base_path: str
    point: Point
    workload: dict[str, Any]
    label: str
    fidelity: str
    objective: str

    @staticmethod
    def make(base_path: str, base_digest: str, p: Point, w: WorkloadSpec, fidelity: str,
             objective: str) -> Task:

        blob = json.dumps({"base": base_digest, "overrides": sorted(p.overrides),
                           "workload": w.as_dict(), "fidelity": fidelity,
                           "objective": objective, "version": VERSION},
                          sort_keys=True, default=str)
        h = hashlib.sha256(blob.encode()).hexdigest()[:24]
        return Task(h, base_path, p, w.as_dict(), w.label, fidelity, objective)


def axis_count(a: AxisSpec) -> int:
    """How many values an axis takes, without listing them."""
    if a.values:
        return len(a.values)
    if a.range is not None and len(a.range) == 3 and a.range[2] > 0:
        lo, hi, step = a.range
        return int(math.floor((hi - lo) / step + 1e-9)) + 1
    if a.log_range is not None and len(a.log_range) == 3:
        return max(1, int(a.log_range[2]))
    return 1


def axis_values(a: AxisSpec) -> tuple[Any, ...]:
    """The discrete values of an axis (ranges are inclusive of ``hi``; ints stay ints)."""
    if a.values:
        return a.values
    if a.range is not None:
        lo, hi, step = a.range
        n = int(math.floor((hi - lo) / step + 1e-9)) + 1
        vals = [lo + i * step for i in range(n)]
        if all(float(x).is_integer() for x in (lo, hi, step)):
            return tuple(int(round(v)) for v in vals)
        return tuple(round(v, 12) for v in vals)
    assert a.log_range is not None
    lo, hi, count = a.log_range
    n = int(count)
    if n == 1:
        vals = [lo]
    else:
        vals = [math.exp(math.log(lo) + i * (math.log(hi) - math.log(lo)) / (n - 1))
                for i in range(n)]
    if float(lo).is_integer() and float(hi).is_integer():
        return tuple(dict.fromkeys(int(round(v)) for v in vals))
    return tuple(float(f"{v:.12g}") for v in vals)


def column_name(key: str) -> str:
    """SQL column for an axis key: ``units[0].rows`` -> ``units_0_rows``."""

    return re.sub(r"\W+", "_", key).strip("_")


# ---- loading ---------------------------------------------------------------------------------
def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep spec file. Raises SpecError listing every problem."""
    data, problems = read_yaml(path, SpecError)
    return _build(data, str(path), Path(path).resolve().parent, list(problems))


def parse_spec_text(text: str, filename: str = "<spec>", base_dir: str | Path = ".") -> SweepSpec:
    """Validate a spec given as YAML text (for tests and embedding)."""

    data, problems = parse_yaml_text(text, filename)
    if data is None and problems:
        raise SpecError(problems)
    return _build(data, filename, Path(base_dir), list(problems))


def _build(data: Any, file: str, base_dir: Path, problems: list[Problem]) -> SweepSpec:
    b = SpecBuilder(file)
    b.problems.extend(problems)
    if not isinstance(data, dict):
        raise SpecError(b.problems + [Problem("expected a mapping at the top of the file", "",
                                              file, 1)])
    # ``values`` are free-form scalars: validate them here and hide them from the builder.
    values: dict[int, tuple[Any, ...]] = {}
    whens: dict[int, tuple[tuple[str, tuple[Any, ...]], ...]] = {}
    axes = data.get("axes")
    if isinstance(axes, list):
        clean = LocList()
        if isinstance(axes, LocList):
            clean.line, clean.item_lines = axes.line, list(axes.item_lines)
        for i, ax in enumerate(axes):
            if isinstance(ax, dict):
                given = [k for k in ("values", "range", "log_range") if k in ax]
                if len(given) != 1:
                    b.problem("an axis needs exactly one of values, range, log_range"
                              + (f" (got {', '.join(given)})" if given else ""),
                              f"axes[{i}]", axes, i)
            if isinstance(ax, dict) and "values" in ax:
                v = ax["values"]
                if not isinstance(v, list) or not v or any(
                        isinstance(x, (dict, list)) or x is None for x in v):
                    b.problem("expected a non-empty list of scalars (numbers, strings, bools)",
                              f"axes[{i}].values", ax, "values")
                elif len(set(map(json.dumps, v))) != len(v):
                    b.problem("values repeat", f"axes[{i}].values", ax, "values")
                else:
                    values[i] = tuple(v)
                ax = _without(ax, "values")
            if isinstance(ax, dict) and "when" in ax:
                whens[i] = _parse_when(ax["when"], f"axes[{i}].when", ax, b)
                ax = _without(ax, "when")
            clean.append(ax)
        src = data
        data = LocDict({k: (clean if k == "axes" else v) for k, v in src.items()})
        data.key_lines = dict(getattr(src, "key_lines", {}))
        data.line = getattr(src, "line", 1)
    orig_axes = axes
    for k in ("base_path", "file"):
        if k in data:
            b.problem(f"unknown key {k!r}", k, data, k)
    spec = b.build(SweepSpec, data)
    if b.problems:
        raise SpecError(_dedupe(b.problems))
    assert spec is not None
    spec = dataclasses.replace(spec, axes=tuple(
        dataclasses.replace(a, values=values.get(i, a.values), when=whens.get(i, ()))
        for i, a in enumerate(spec.axes)))
    spec.check_when(b, orig_axes)
    too_big = spec.size_problem()
    if too_big:
        b.problem(too_big, "axes", data, "axes")
    if b.problems:
        raise SpecError(_dedupe(b.problems))
    base = _resolve_base(spec.base, base_dir, b, data)
    spec = dataclasses.replace(spec, base_path=str(base) if base else "", file=file)
    if base is not None:
        _check_axes_against_base(spec, base, b, orig_axes)
    if b.problems:
        raise SpecError(_dedupe(b.problems))
    return spec


def _parse_when(w: Any, path: str, ax: Any, b: SpecBuilder
                ) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """``{axis key: value or [values]}`` -> ((key, values), ...); problems go to ``b``."""
    if not isinstance(w, dict) or not w:
        b.problem("expected a non-empty mapping {earlier axis key: value or [values]}",
                  path, ax, "when")
        return ()
    out = []
    for k, v in w.items():
        vs = v if isinstance(v, list) else [v]
        if not isinstance(k, str) or not vs or any(
                isinstance(x, (dict, list)) or x is None for x in vs):
            b.problem("expected an axis key mapped to a scalar or a non-empty list of scalars",
                      f"{path}.{k}", w, k)
            continue
        out.append((k, tuple(vs)))
    return tuple(out)


def _without(d: Any, key: str) -> LocDict:
    out = LocDict({k: x for k, x in d.items() if k != key})
    out.key_lines = dict(getattr(d, "key_lines", {}))
    out.line = getattr(d, "line", None)
    return out


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        k = (p.message, p.path)
        if k not in seen:
            seen.add(k)
            out.append(p)
    return out


def _resolve_base(base: str, base_dir: Path, b: SpecBuilder, data: Any) -> Path | None:
    cand = base_dir / base
    if cand.exists():
        return cand.resolve()

    try:
        p = find_config(base)
    except ArchsimError as exc:
        b.problem(exc.problems[0].message, "base", data, "base")
        return None
    if not Path(p).exists():
        b.problem(f"base config {base!r} not found (looked in {base_dir} and configs/)",
                  "base", data, "base")
        return None
    return Path(p).resolve()


def _check_axes_against_base(spec: SweepSpec, base: Path, b: SpecBuilder, axes: Any) -> None:
    """Every axis key must name an existing key of the base config, and every value must
    give a valid design on its own."""

    try:
        data, _ = read_yaml(base, ConfigError)
    except ArchsimError as exc:
        b.problem(str(exc.problems[0]), "base", None, None)
        return
    for i, a in enumerate(spec.axes):
        if "=" in a.key:
            b.problem("a key path must not contain '='", f"axes[{i}].key",
                      axes[i] if axes else None, "key")
            continue
        # a conditional axis is checked under the first value that meets its condition
        cond = [f"{k}={json.dumps(vs[0])}" for k, vs in a.when]
        for v in axis_values(a):
            try:
                load_data(data, str(base), cond + [f"{a.key}={json.dumps(v)}"])
            except ArchsimError as exc:
                msg = "; ".join(p.message for p in exc.problems[:2])
                b.problem(f"value {v!r} gives an invalid design: {msg}",
                          f"axes[{i}]." + ("values" if a.values else
                                           "range" if a.range else "log_range"),
                          axes[i] if axes else None,
                          "values" if a.values else "range" if a.range else "log_range")
                break

