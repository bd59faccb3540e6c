"""Co-search specs: strict YAML -> frozen :class:`CosearchSpec` (see
:mod:`archsim.explore.cosearch` for the format and the semantics).

The hardware section is built by the sweep-spec loader (its problems are re-rooted at
``hardware.``); network sections are expanded into candidate networks
(:mod:`archsim.explore.nas`); every candidate's accuracy is computed at load time, so a
missing table row or a broken predictor is reported, with file and line, before anything
runs.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import importlib
import inspect
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from archsim.api import VERSION
from archsim.arch.spec import SpecBuilder, param
from archsim.explore.nas import (
    CNN_PARAMS,
    FAMILIES,
    TRANSFORMER_PARAMS,
    check_network,
    expand_space,
    network_label,
)
from archsim.explore.spec import ConstraintSpec, SweepSpec, Task, _build, _dedupe
from archsim.workloads.errors import ArchsimError, Problem, SpecError
from archsim.workloads.yamlio import LocDict, LocList, parse_yaml_text, read_yaml

__all__ = ["SOLUTION_METRICS", "AccuracySpec", "TaskSpec", "CosearchSpec", "load_cosearch",
           "parse_cosearch_text", "accuracy_predictor"]

#: System metrics of a solution; ``accuracy`` is maximised, the rest minimised.
SOLUTION_METRICS = ("accuracy", "latency_s", "energy_j", "area_mm2", "power_w", "edp_js")
_TASK_METRICS = ("accuracy", "latency_s", "energy_j", "power_w")


@dataclass(frozen=True)
class AccuracySpec:
    """Where accuracies come from: a Python callable or a CSV table (exactly one)."""

    python: str | None = param(None, doc="module:function taking the network dict, "
                               "returning an accuracy; the module is looked up next to the "
                               "spec file first")
    csv: str | None = param(None, doc="CSV table (relative to the spec file): one column per "
                            "network parameter used as a key, plus an 'accuracy' column")

    def check(self) -> list[tuple[str, str]]:
        if (self.python is None) == (self.csv is None):
            return [("python", "expected exactly one of python or csv")]
        if self.python is not None and ":" not in self.python:
            return [("python", f"expected module:function, got {self.python!r}")]
        return []


@dataclass(frozen=True)
class TaskSpec:
    """One task: a network space, an accuracy predictor, number formats, a weight."""

    name: str = param(doc="task name (used in <task>.<metric> spec keys)")
    accuracy: AccuracySpec = param(doc="accuracy predictor")
    batch: int = param(1, doc="samples per inference", min=1)
    a_format: str | None = param(None, doc="activation number format")
    w_format: str | None = param(None, doc="weight number format")
    weight: float = param(1.0, doc="weight of this task in the mean accuracy", min=0,
                          min_exclusive=True)
    networks: tuple[dict[str, Any], ...] = field(default=(), metadata={
        "doc": "the candidate networks (from the network: section)"})
    accuracies: tuple[float, ...] = field(default=(), metadata={"doc": "per network"})


@dataclass(frozen=True)
class CosearchSpec:
    """A whole co-search; ``hardware`` is a :class:`SweepSpec` without workloads."""

    tasks: tuple[TaskSpec, ...] = param(doc="the tasks (one network each per solution)")
    specs: dict[str, dict[str, ConstraintSpec]] = param(
        default_factory=lambda: MappingProxyType({}), doc="named design specs: metric -> "
        "{min, max}")
    objectives: tuple[str, ...] = param(("accuracy", "energy_j", "area_mm2"),
                                        doc="Pareto-set objectives")
    baseline: str = param("energy_j", doc="what the sequential baseline's hardware step "
                          "minimises", choices=SOLUTION_METRICS[1:])
    description: str = param("", doc="free text")
    hardware: SweepSpec | None = field(default=None, metadata={"doc": "hardware space"})
    file: str | None = field(default=None, metadata={"doc": "the spec file"})

    def metric_names(self) -> list[str]:
        return list(SOLUTION_METRICS) + [f"{t.name}.{m}" for t in self.tasks
                                          for m in _TASK_METRICS]

    def check(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        names = [t.name for t in self.tasks]
        if not names:
            out.append(("tasks", "expected at least one task"))
        for i, n in enumerate(names):
            if n in names[:i]:
                out.append((f"tasks[{i}].name", f"task {n!r} given twice"))
        for i, o in enumerate(self.objectives):
            if o not in SOLUTION_METRICS:
                out.append((f"objectives[{i}]", f"unknown metric {o!r}; expected one of "
                            f"{', '.join(SOLUTION_METRICS)}"))
        if not 1 <= len(self.objectives) <= 4:
            out.append(("objectives", "expected 1 to 4 objectives"))
        return out

    def check_specs(self, b: SpecBuilder, raw: Any) -> None:
        """Spec keys name known metrics (problems at the key's own line)."""
        ok = self.metric_names()
        for s, lim in self.specs.items():
            rs = raw.get(s) if isinstance(raw, dict) else None
            for k in lim:
                if k not in ok:
                    b.problem(f"unknown metric {k!r}; expected one of {', '.join(ok)}",
                              f"specs.{s}.{k}", rs if isinstance(rs, dict) else raw,
                              k if isinstance(rs, dict) else s)

    def store_tasks(self) -> list[Task]:
        """Every (hardware point, task, network) evaluation, keyed by its input hash."""

        hw = self.hardware
        assert hw is not None
        digest = hw.base_digest()
        out = []
        for p in hw.points():
            for t in self.tasks:
                for net in t.networks:
                    wl = _workload_dict(t, net)
                    blob = json.dumps({"base": digest, "overrides": sorted(p.overrides),
                                       "workload": wl, "files": _file_digest(net),
                                       "fidelity": hw.fidelity, "objective": hw.objective,
                                       "version": VERSION}, sort_keys=True, default=str)
                    h = hashlib.sha256(blob.encode()).hexdigest()[:24]
                    out.append(Task(h, hw.base_path, p, wl, f"{t.name}:{network_label(net)}",
                                    hw.fidelity, hw.objective))
        return out


def _workload_dict(t: TaskSpec, net: dict[str, Any]) -> dict[str, Any]:
    d: dict[str, Any] = {"net": dict(net), "batch": t.batch}
    if t.a_format:
        d["a_format"] = t.a_format
    if t.w_format:
        d["w_format"] = t.w_format
    return d


def _file_digest(net: dict[str, Any]) -> str | None:
    f = net.get("file")
    if not f:
        return None
    try:
        return hashlib.sha256(Path(f).read_bytes()).hexdigest()
    except OSError:
        return None


# ---- loading ---------------------------------------------------------------------------------
def load_cosearch(path: str | Path) -> CosearchSpec:
    """Read and validate a co-search spec. Raises SpecError listing every problem."""
    data, problems = read_yaml(path, SpecError)
    return _build_cosearch(data, str(path), Path(path).resolve().parent, list(problems))


def parse_cosearch_text(text: str, filename: str = "<cosearch>",
                        base_dir: str | Path = ".") -> CosearchSpec:
    """Validate a co-search spec given as YAML text (tests, embedding)."""

    data, problems = parse_yaml_text(text, filename)
    if data is None and problems:
        raise SpecError(problems)
    return _build_cosearch(data, filename, Path(base_dir), list(problems))


def _build_cosearch(data: Any, file: str, base_dir: Path, problems: list[Problem]
                    ) -> CosearchSpec:
    b = SpecBuilder(file)
    b.problems.extend(problems)
    if not isinstance(data, dict):
        raise SpecError(b.problems + [Problem("expected a mapping at the top of the file", "",
                                              file, 1)])
    # hardware: a sweep spec without workloads (its problems are re-rooted at hardware.)
    hw = None
    hw_raw = data.get("hardware")
    if not isinstance(hw_raw, dict):
        b.problem("expected a mapping with base and axes", "hardware", data, "hardware")
    else:
        bad = [k for k in hw_raw if k not in ("base", "axes", "search", "fidelity",
                                              "objective")]
        for k in bad:
            b.problem(f"unknown key {k!r}; allowed keys: axes, base, fidelity, objective, "
                      "search", f"hardware.{k}", hw_raw, k)
        hd = LocDict({k: v for k, v in hw_raw.items() if k not in bad})
        if isinstance(hw_raw, LocDict):
            hd.key_lines, hd.line = dict(hw_raw.key_lines), hw_raw.line
        hd["workloads"] = LocList([{"gemm": [1, 1, 1]}])
        try:
            hw = _build(hd, file, base_dir, [])
            if hw.search.method == "nsga2":
                sec = hw_raw.get("search")
                b.problem("co-search enumerates its hardware points: expected grid or random",
                          "hardware.search.method", sec if isinstance(sec, dict) else hw_raw,
                          "method" if isinstance(sec, dict) else "search")
        except SpecError as exc:
            b.problems.extend(dataclasses.replace(p, path=f"hardware.{p.path}" if p.path
                                                  else "hardware") for p in exc.problems)
    # tasks: the network sections are free-form; expand them here, build the rest.
    nets: dict[int, list[dict[str, Any]]] = {}
    tasks = data.get("tasks")
    clean = data
    if isinstance(tasks, list):
        tl = LocList()
        tl.line = getattr(tasks, "line", None)
        tl.item_lines = list(getattr(tasks, "item_lines", []))
        for i, t in enumerate(tasks):
            if isinstance(t, dict):
                if "network" not in t:
                    b.problem("a task needs a network: section", f"tasks[{i}]", tasks, i)
                else:
                    nets[i] = _parse_networks(t["network"], f"tasks[{i}].network", t, b,
                                              base_dir)
                t2 = LocDict({k: v for k, v in t.items() if k != "network"})
                t2.key_lines, t2.line = dict(getattr(t, "key_lines", {})), getattr(t, "line",
                                                                                     None)
                t = t2
            tl.append(t)
        clean = LocDict({k: (tl if k == "tasks" else v) for k, v in data.items()
                         if k != "hardware"})
        clean.key_lines = dict(getattr(data, "key_lines", {}))
        clean.line = getattr(data, "line", 1)
    else:
        clean = LocDict({k: v for k, v in data.items() if k != "hardware"})
        clean.key_lines = dict(getattr(data, "key_lines", {}))
    for k in ("file",):
        if k in clean:
            b.problem(f"unknown key {k!r}", k, clean, k)
    spec = b.build(CosearchSpec, clean)
    if spec is not None:
        spec.check_specs(b, clean.get("specs"))
    if b.problems or spec is None:
        raise SpecError(_dedupe(b.problems))
    # accuracies: every candidate must have one (checked now, before anything runs)
    new_tasks = []
    for i, t in enumerate(spec.tasks):
        ns = nets.get(i, [])
        accs = _accuracies(t.accuracy, ns, base_dir, b, f"tasks[{i}].accuracy",
                           tasks[i] if isinstance(tasks, list) else None)
        new_tasks.append(dataclasses.replace(t, networks=tuple(ns), accuracies=tuple(accs)))
    if b.problems:
        raise SpecError(_dedupe(b.problems))
    return dataclasses.replace(spec, tasks=tuple(new_tasks), hardware=hw, file=file)


def _parse_networks(sec: Any, path: str, parent: Any, b: SpecBuilder, base_dir: Path
                    ) -> list[dict[str, Any]]:
    """``{cnn: {...}}`` / ``{transformer: {...}}`` / ``{hf: [...]}`` / ``{onnx: [...]}``."""
    if not isinstance(sec, dict) or len(sec) != 1:
        b.problem(f"expected a mapping with exactly one of {', '.join(FAMILIES)}", path,
                  parent, "network")
        return []
    (fam, body), = sec.items()
    if fam not in FAMILIES:
        b.problem(f"unknown network family {fam!r}; expected one of {', '.join(FAMILIES)}",
                  f"{path}.{fam}", sec, fam)
        return []
    if fam in ("hf", "onnx"):
        files = body if isinstance(body, list) else [body]
        out = []
        for j, f in enumerate(files):
            p = base_dir / str(f)
            if not isinstance(f, str) or not p.exists():
                b.problem(f"no such file {f!r} (relative to {base_dir})", f"{path}.{fam}[{j}]",
                          body if isinstance(body, list) else sec, j if isinstance(body, list)
                          else fam)
                continue
            out.append({"net": fam, "file": str(p.resolve())})
        return out
    table = CNN_PARAMS if fam == "cnn" else TRANSFORMER_PARAMS
    if not isinstance(body, dict):
        b.problem("expected a mapping of parameters to a value or a list of values",
                  f"{path}.{fam}", sec, fam)
        return []
    ok = True
    for k, v in body.items():
        if k not in table:
            b.problem(f"unknown parameter {k!r}; allowed: {', '.join(table)}",
                      f"{path}.{fam}.{k}", body, k)
            ok = False
            continue
        vs = v if isinstance(v, list) else [v]
        _, lo = table[k]
        if not vs or any(not isinstance(x, int) or isinstance(x, bool) or x < lo for x in vs):
            b.problem(f"expected an int >= {lo} or a non-empty list of them, got {v!r}",
                      f"{path}.{fam}.{k}", body, k)
            ok = False
    for k, (default, _) in table.items():
        if default is None and k not in body:
            b.problem(f"missing parameter {k!r}", f"{path}.{fam}", sec, fam)
            ok = False
    if not ok:
        return []
    out = []
    for d in expand_space(fam, dict(body)):
        why = check_network(d)
        if why:
            b.problem(f"network {network_label(d)}: {why}", f"{path}.{fam}", sec, fam)
            return []
        out.append(d)
    return out


def _accuracies(acc: AccuracySpec, nets: list[dict[str, Any]], base_dir: Path, b: SpecBuilder,
                path: str, task: Any) -> list[float]:
    """One accuracy per network from the predictor; problems name the task's accuracy key."""
    if not nets:
        return []
    try:
        fn = accuracy_predictor(acc, base_dir)
    except ArchsimError as exc:
        b.problem(exc.problems[0].message, path, task, "accuracy")
        return []
    out = []
    for d in nets:
        try:
            r = fn(d)
        except ArchsimError as exc:
            b.problem(exc.problems[0].message, path, task, "accuracy")
            return []
        if isinstance(r, bool) or not isinstance(r, (int, float)):
            b.problem(f"the accuracy predictor returned {r!r} for {network_label(d)}; "
                      f"expected a number", path, task, "accuracy")
            return []
        a = float(r)
        if not math.isfinite(a):
            b.problem(f"accuracy of {network_label(d)} is {a}", path, task, "accuracy")
            return []
        out.append(a)
    return out


def accuracy_predictor(acc: AccuracySpec, base_dir: str | Path = "."
                       ) -> Callable[[dict[str, Any]], float]:
    """The predictor of an :class:`AccuracySpec` as a callable ``network dict -> accuracy``.

    Raises:
        SpecError: the module, function or CSV file cannot be found or read.
    """
    base_dir = Path(base_dir)
    if acc.python:
        mod_name, _, fn_name = acc.python.partition(":")
        added = str(base_dir.resolve())
        sys.path.insert(0, added)
        try:
            mod = importlib.import_module(mod_name)
        except ImportError as exc:
            raise SpecError(Problem(f"cannot import {mod_name!r}: {exc}", "python")) from None
        finally:
            if sys.path and sys.path[0] == added:
                sys.path.pop(0)
        fn = getattr(mod, fn_name, None)
        if not callable(fn):
            raise SpecError(Problem(f"{mod_name!r} has no function {fn_name!r}", "python"))
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):   # a builtin without a signature: trust it
            return fn
        try:
            sig.bind({})
        except TypeError:
            raise SpecError(Problem(f"{acc.python} has signature {fn_name}{sig}; expected a "
                                    f"function of one argument (the network's parameter "
                                    f"dict) returning the accuracy", "python")) from None
        return fn
    path = base_dir / str(acc.csv)
    try:
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise SpecError(Problem(f"cannot read {path}: {exc.strerror}", "csv")) from None
    if not rows or "accuracy" not in rows[0]:
        raise SpecError(Problem(f"{path}: expected a header with an 'accuracy' column", "csv"))
    keys = [k for k in rows[0] if k != "accuracy"]

    def same(cell: str, v: Any) -> bool:
        try:
            return float(cell) == float(v)
        except (TypeError, ValueError):
            return cell.strip() == str(v)

    def lookup(d: dict[str, Any]) -> float:
        for r in rows:
            if all(k in d and same(r[k], d[k]) for k in keys if r[k] != ""):
                return float(r["accuracy"])
        raise SpecError(Problem(f"{path.name}: no row for network {network_label(d)} "
                                f"({', '.join(f'{k}={d.get(k)}' for k in keys)})", "csv"))

    return lookup
