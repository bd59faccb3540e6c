"""What a hardware family carries besides its model: reference workloads (pinned as golden
predictions) and validation checks (predictions against published or measured figures).

A family registers both from its own package (``arch/<family>/reference.py``, imported by
the package's ``__init__``), so adding a family edits nothing in ``archsim/``:

* :func:`reference_workloads` ``(kind, {label: workload spec})`` — the golden workloads of
  every reference config whose first unit is of that kind (``archsim/golden.py``);
* :func:`checks` ``(family)`` — a decorator registering a function ``(api) -> (comparisons,
  gaps)`` that ``archsim validation`` runs and ``docs/validation.md`` reports.

A check evaluates designs through the :class:`EvaluationAPI` its runner passes in
(``archsim.validation.run`` passes the ``archsim`` package): ``arch`` never imports
``archsim``, the dependency is handed down as an argument, not reached up for.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import yaml

if TYPE_CHECKING:
    from archsim.arch.accelerator import Accelerator
    from archsim.arch.base import Unit

__all__ = ["Comparison", "Gap", "CheckFn", "checks", "CHECKS", "reference_workloads",
           "REFERENCE_WORKLOADS", "EvaluationAPI", "reference_dir",
           "load_reference", "first_unit"]


@dataclass(frozen=True)
class Comparison:
    """One prediction against one reference figure.

    Attributes:
        family: hardware family or area (``workloads``, ``gpu``, ...).
        figure: what is compared (``A100 fp16 GEMM M=64``).
        source: file and key in ``shared/reference`` (or a paper/table).
        tag: confidence tag (A, B, C, D, M).
        reference: the reference value; ``reference_high`` makes it a range.
        ours: our prediction.
        unit: unit of both values.
        tolerance: allowed relative error (0.10 = 10%).
        reason: why this tolerance.
        design: the config or model it concerns.
    """

    family: str
    figure: str
    source: str
    tag: str
    reference: float
    ours: float
    unit: str
    tolerance: float
    reason: str
    design: str = ""
    reference_high: float | None = None

    @property
    def error(self) -> float:
        """Relative error (0 inside a reference range)."""
        lo = self.reference
        hi = self.reference_high if self.reference_high is not None else lo
        if lo <= self.ours <= hi:
            return 0.0
        ref = lo if self.ours < lo else hi
        return self.ours / ref - 1.0 if ref else math.inf

    @property
    def ok(self) -> bool:
        return abs(self.error) <= self.tolerance + 1e-12

    @property
    def reference_text(self) -> str:
        if self.reference_high is not None:
            return f"{self.reference:.4g}–{self.reference_high:.4g}"
        return f"{self.reference:.4g}"


@dataclass(frozen=True)
class Gap:
    """A reference figure we do not reproduce (or that does not apply), and why."""

    family: str
    figure: str
    reason: str


CheckFn = Callable[["EvaluationAPI"], tuple[list[Comparison], list[Gap]]]
#: family -> its check function (registered by :func:`checks`).
CHECKS: dict[str, CheckFn] = {}
#: unit kind -> {label: workload spec} (registered by :func:`reference_workloads`).
REFERENCE_WORKLOADS: dict[str, Mapping[str, Mapping[str, Any]]] = {}


def checks(family: str) -> Callable[[CheckFn], CheckFn]:
    """Decorator registering a function ``(api) -> (comparisons, gaps)`` for ``family``
    (``api``: the :class:`EvaluationAPI` the runner passes in)."""
    def deco(fn: CheckFn) -> CheckFn:
        CHECKS[family] = fn
        return fn
    return deco


def reference_workloads(kind: str, workloads: Mapping[str, Mapping[str, Any]]) -> None:
    """Register the golden workloads of unit kind ``kind``: label -> a workload spec
    (``{"model": ..., "phase": ..., ...}`` or ``{"gemm": [m, n, k], ...}``, the keys of
    ``archsim.workload_from_dict``)."""
    REFERENCE_WORKLOADS[kind] = MappingProxyType({k: MappingProxyType(dict(v))
                                                  for k, v in workloads.items()})


class EvaluationAPI(Protocol):
    """The part of the top-level ``archsim`` API that validation checks use.

    Contract: the runner of the checks passes an object with these functions (the
    ``archsim`` package itself satisfies it); a check evaluates designs only through it.
    """

    def load(self, config: Any, overrides: Any = ...) -> Any: ...

    def workload(self, model: str, *args: Any, **kw: Any) -> Any: ...

    def gemm_workload(self, m: int, n: int, k: int, *args: Any, **kw: Any) -> Any: ...

    def evaluate(self, acc: Any, wl: Any, *args: Any, **kw: Any) -> Any: ...

    def config_dir(self) -> Path: ...


def reference_dir() -> Path:
    """``shared/reference`` beside the repository (or ``$ARCHSIM_REFERENCE``)."""
    env = os.environ.get("ARCHSIM_REFERENCE")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent.parent / "shared" / "reference"


def load_reference(name: str) -> dict:
    """A YAML file of ``shared/reference``."""
    return yaml.safe_load((reference_dir() / name).read_text())


_U = TypeVar("_U", bound="Unit")


def first_unit(acc: Accelerator, cls: type[_U]) -> _U:
    """``acc.units[0]``, checked to be a ``cls`` (a check calls that family's own methods)."""
    unit = acc.units[0]
    if not isinstance(unit, cls):
        raise TypeError(f"{acc.name}: units[0] is a {type(unit).__name__}, "
                        f"expected a {cls.__name__}")
    return unit
