"""Aggregation: action counts -> joules (``evaluate``), components -> mm² (``area``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from archsim.energy.classes import COMPONENT_CLASSES, ComponentClass
from archsim.energy.component import Component, Technology

__all__ = [
    "DEFAULT_TECHNOLOGY",
    "EnergyReport",
    "AreaReport",
    "evaluate",
    "EnergyPrices",
    "prices",
    "area",
    "validate",
    "allowed_actions",
    "energy_per_action_pj",
    "area_per_instance_mm2",
    "leakage_per_instance_w",
]

_PJ_TO_J = 1e-12
DEFAULT_TECHNOLOGY = Technology()
"""45 nm at its nominal 0.9 V: the node of the base tables."""


@dataclass(frozen=True)
class EnergyReport:
    """Energy of one run.

    Attributes:
        total_j: dynamic_j + leakage_j.
        dynamic_j: sum over (component, action) of count x energy per action.
        leakage_j: sum over components of leakage_w x instances x latency_s.
        breakdown_j: component name -> its dynamic + leakage energy (J), in input order.
        dynamic_breakdown_j: component name -> dynamic energy (J).
        leakage_breakdown_j: component name -> leakage energy (J).
        latency_s: the latency the leakage was charged over.
    """

    total_j: float
    dynamic_j: float
    leakage_j: float
    breakdown_j: dict[str, float] = field(default_factory=dict)
    dynamic_breakdown_j: dict[str, float] = field(default_factory=dict)
    leakage_breakdown_j: dict[str, float] = field(default_factory=dict)
    latency_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return {
            "total_j": self.total_j,
            "dynamic_j": self.dynamic_j,
            "leakage_j": self.leakage_j,
            "latency_s": self.latency_s,
            "breakdown_j": dict(self.breakdown_j),
            "dynamic_breakdown_j": dict(self.dynamic_breakdown_j),
            "leakage_breakdown_j": dict(self.leakage_breakdown_j),
        }


@dataclass(frozen=True)
class AreaReport:
    """Area of a design.

    Attributes:
        total_mm2: sum of the breakdown.
        breakdown_mm2: component name -> instances x area per instance (mm²), in input order.
    """

    total_mm2: float
    breakdown_mm2: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return {"total_mm2": self.total_mm2, "breakdown_mm2": dict(self.breakdown_mm2)}


# ------------------------------------------------------------------ resolution


def _where(c: Component) -> str:
    return f"component {c.name!r} (class {c.cls!r})"


@lru_cache(maxsize=4096)
def _resolve(c: Component) -> tuple[ComponentClass, Mapping[str, Any]]:
    if c.cls not in COMPONENT_CLASSES:
        raise ValueError(
            f"component {c.name!r}: unknown class {c.cls!r}; allowed: {', '.join(sorted(COMPONENT_CLASSES))}"
        )
    k = COMPONENT_CLASSES[c.cls]
    allowed = (*k.required, *k.optional)
    unknown = [a for a in c.attrs if a not in allowed]
    missing = [a for a in k.required if a not in c.attrs]
    if unknown or missing:
        problems = []
        if unknown:
            problems.append(f"unknown attribute(s) {', '.join(map(repr, unknown))}")
        if missing:
            problems.append(f"missing attribute(s) {', '.join(map(repr, missing))}")
        raise ValueError(
            f"{_where(c)}: {'; '.join(problems)}; allowed: {', '.join(allowed)}"
            + (f" (required: {', '.join(k.required)})" if k.optional else "")
        )
    attrs = MappingProxyType({**k.optional, **c.attrs})
    try:
        k.check(attrs)
    except ValueError as exc:
        raise ValueError(f"{_where(c)}: {exc}") from None
    return k, attrs


def _tech(c: Component, technology: Technology) -> Technology:
    return c.technology if c.technology is not None else technology


def validate(component: Component) -> None:
    """Check class, attribute names and values of a component.

    Raises:
        ValueError: message names the component, its class and the allowed names.
    """
    _resolve(component)


def allowed_actions(component: Component) -> tuple[str, ...]:
    """Action names the component's class defines for it."""
    k, attrs = _resolve(component)
    return k.actions(attrs)


@lru_cache(maxsize=16384)
def energy_per_action_pj(component: Component, action: str, technology: Technology = DEFAULT_TECHNOLOGY) -> float:
    """Energy of one ``action`` of ``component`` (pJ) under its (or the given) technology.

    Raises:
        ValueError: bad component, or an action the class does not define.
    """
    k, attrs = _resolve(component)
    actions = k.actions(attrs)
    if action not in actions:
        raise ValueError(
            f"{_where(component)}: unknown action {action!r}; allowed: {', '.join(actions) or '(none)'}"
        )
    return k.energy_pj(attrs, action, _tech(component, technology))


def area_per_instance_mm2(component: Component, technology: Technology = DEFAULT_TECHNOLOGY) -> float:
    """Area of one instance (mm²)."""
    k, attrs = _resolve(component)
    return k.area_mm2(attrs, _tech(component, technology))


def leakage_per_instance_w(component: Component, technology: Technology = DEFAULT_TECHNOLOGY) -> float:
    """Static power of one instance (W)."""
    k, attrs = _resolve(component)
    return k.leakage_w(attrs, _tech(component, technology))


def _index(components: Iterable[Component]) -> dict[str, Component]:
    by_name: dict[str, Component] = {}
    for c in components:
        if not isinstance(c, Component):
            raise ValueError(f"expected energy.Component, got {c!r}")
        if c.name in by_name:
            raise ValueError(f"component {c.name!r}: duplicate component name")
        _resolve(c)
        by_name[c.name] = c
    return by_name


# ------------------------------------------------------------------ public entry points


def evaluate(
    components: Iterable[Component],
    action_counts: Mapping[tuple[str, str], float],
    latency_s: float,
    technology: Technology = DEFAULT_TECHNOLOGY,
) -> EnergyReport:
    """Energy of a run: dynamic from action counts, leakage over the latency.

    dynamic_j = sum count(name, action) x energy_per_action_pj x 1e-12;
    leakage_j = sum leakage_w x component.count x latency_s.

    Args:
        components: the design's components (unique names).
        action_counts: (component name, action name) -> count (>= 0, may be fractional).
        latency_s: run time the leakage is charged over (>= 0).
        technology: process for components whose ``technology`` is None.

    Raises:
        ValueError: unknown class/attribute/action/component name, negative count or latency.
    """
    return prices(components, technology).evaluate(action_counts, latency_s)


@dataclass(frozen=True)
class EnergyPrices:
    """:func:`evaluate` for one fixed set of components and technology: each component
    resolved and its leakage (W, all instances) worked out once, each (component, action)
    energy looked up once. A network evaluation prices many ops' action counts on the
    same unit; the reports are the same bit for bit as :func:`evaluate`'s (which is this).
    Build with :func:`prices`.

    Attributes:
        by_name: component name -> component, in input order.
        leakage_w: component name -> leakage per instance x instances (W).
        technology: the process for components whose ``technology`` is None.
    """

    by_name: Mapping[str, Component]
    leakage_w: Mapping[str, float]
    technology: Technology
    _pj: dict[tuple[str, str], float] = field(default_factory=dict, repr=False, compare=False)

    def evaluate(self, action_counts: Mapping[tuple[str, str], float],
                 latency_s: float) -> EnergyReport:
        """The :class:`EnergyReport` of ``action_counts`` over ``latency_s`` (as
        :func:`evaluate`, with the same errors)."""
        if isinstance(latency_s, bool) or not isinstance(latency_s, (int, float)) or not (latency_s >= 0) or math.isinf(latency_s):
            raise ValueError(f"latency_s: expected a finite number >= 0, got {latency_s!r}")
        by_name = self.by_name
        dyn_pj: dict[str, float] = {name: 0.0 for name in by_name}
        for key, count in action_counts.items():
            e = self._pj.get(key)
            if e is None:   # a key seen before passed these checks
                if not (isinstance(key, tuple) and len(key) == 2):
                    raise ValueError(f"action_counts key {key!r}: expected (component name, action name)")
                if key[0] not in by_name:
                    raise ValueError(
                        f"action_counts: unknown component {key[0]!r} (action {key[1]!r}); known: {', '.join(by_name) or '(none)'}"
                    )
            name, action = key
            if isinstance(count, bool) or not isinstance(count, (int, float)) or not (count >= 0) or math.isinf(count):
                raise ValueError(f"{_where(by_name[name])}: action {action!r} count must be a finite number >= 0, got {count!r}")
            if e is None:
                e = self._pj[key] = energy_per_action_pj(by_name[name], action, self.technology)
            dyn_pj[name] += float(count) * e
        dyn_j = {name: pj * _PJ_TO_J for name, pj in dyn_pj.items()}
        leak_j = {name: w * float(latency_s) for name, w in self.leakage_w.items()}
        breakdown = {name: dyn_j[name] + leak_j[name] for name in by_name}
        dynamic = math.fsum(dyn_j.values())
        leakage = math.fsum(leak_j.values())
        return EnergyReport(
            total_j=dynamic + leakage,
            dynamic_j=dynamic,
            leakage_j=leakage,
            breakdown_j=breakdown,
            dynamic_breakdown_j=dyn_j,
            leakage_breakdown_j=leak_j,
            latency_s=float(latency_s),
        )


def prices(components: Iterable[Component],
           technology: Technology = DEFAULT_TECHNOLOGY) -> EnergyPrices:
    """The :class:`EnergyPrices` of ``components`` under ``technology``.

    Raises:
        ValueError: unknown class/attribute or duplicate name.
    """
    by_name = _index(components)
    leak = {name: leakage_per_instance_w(c, technology) * c.count for name, c in by_name.items()}
    return EnergyPrices(MappingProxyType(by_name), MappingProxyType(leak), technology)


def area(components: Iterable[Component], technology: Technology = DEFAULT_TECHNOLOGY) -> AreaReport:
    """Area of a design: sum of count x area per instance (mm²).

    Raises:
        ValueError: unknown class/attribute or duplicate name.
    """
    by_name = _index(components)
    breakdown = {name: area_per_instance_mm2(c, technology) * c.count for name, c in by_name.items()}
    return AreaReport(total_mm2=math.fsum(breakdown.values()), breakdown_mm2=breakdown)
