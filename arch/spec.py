"""Strict conversion of loaded YAML into frozen ``*Spec`` dataclasses.

A spec is a frozen dataclass whose fields are declared with :func:`param`, which records
the documentation, unit and allowed range used both for validation and for
``docs/configs.md``. :func:`build` walks the YAML tree (``LocDict``/``LocList`` from
``workloads.yamlio``) against the dataclass's type hints and collects every problem:
unknown keys (listing the allowed ones), missing keys, wrong types, out-of-range values and
the cross-field rules of a spec's optional ``check(self) -> list[tuple[str, str]]``
(relative key path, message). Nothing is silently defaulted for a misspelled key. A spec's
optional ``unused(self)`` names keys its model does not read given the other values; those
written in the file become :class:`UnusedKeyWarning` lines (``SpecBuilder.unused``).

Supported field types: ``int``, ``float``, ``str``, ``bool``, ``NumberFormat`` (by name),
nested spec dataclasses, ``tuple[X, ...]``, ``dict[str, X]`` and ``X | None``.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import math
import re
import types
import typing
from dataclasses import MISSING, field
from typing import Any

from archsim.workloads.errors import Problem, WorkloadError
from archsim.workloads.formats import NumberFormat, get_format
from archsim.workloads.yamlio import LocDict, LocList, line_of

builtins_min = builtins.min   # ``param`` shadows min/max with its keyword names
builtins_max = builtins.max

__all__ = ["param", "build", "SpecBuilder", "spec_fields", "describe_type", "field_bounds",
           "UNIT_BOUNDS", "PlausibilityWarning", "UnusedKeyWarning"]


def param(default: Any = MISSING, *, doc: str, unit: str = "", min: float | None = None,
          max: float | None = None, choices: tuple[Any, ...] | None = None,
          min_exclusive: bool = False, default_factory: Any = MISSING,
          typical: tuple[float, float] | None = None) -> Any:
    """Declare a spec field with its documentation, unit and allowed values.

    Args:
        default: default value (omit for a required key).
        doc: one-line description for ``docs/configs.md``.
        unit: physical unit (``Hz``, ``bytes``, ``GB/s``) or "".
        min, max: inclusive bounds for numbers (``min_exclusive`` makes ``min`` strict).
            Numbers are further limited by the hard bounds of their unit
            (:data:`UNIT_BOUNDS`), whichever is tighter.
        choices: the allowed values.
        default_factory: factory for mutable/nested defaults.
        typical: the range real hardware spans (a value outside it loads with a warning on
            stderr); default: the typical range of the unit in :data:`UNIT_BOUNDS`.
    """
    md = {"doc": doc, "unit": unit, "min": min, "max": max, "choices": choices,
          "min_exclusive": min_exclusive, "typical": typical}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=md)
    return field(default=default, metadata=md)


class PlausibilityWarning(UserWarning):
    """A config value is valid but outside the range real hardware has (e.g. a 1e9-row
    array): the model runs, and the CLI prints the warning on stderr."""


class UnusedKeyWarning(UserWarning):
    """A config key that is valid but that the unit's model never reads, given the other
    values (a DRAM preset of a bandwidth-only memory, the N:M patterns of a design without
    sparse PEs): the design loads, and the CLI prints ``warning: FILE:LINE key.path: ...;
    ignored``. A spec declares these keys in an optional ``unused(self) -> list[tuple[str,
    str]]`` (relative key path, why it is not read), next to ``check``; only keys written in
    the file are reported, never defaults."""


#: Per unit: (hard_lo, hard_hi, typical_lo, typical_hi). Outside the hard bounds a value is
#: an error: no hardware could have it and the arithmetic would leave the float range or
#: the simulator's integer cycle counts (e.g. a 1e-300 MHz clock or 2**70 PEs). Outside the
#: typical range it is a warning. A declared ``min``/``max`` is kept where it is tighter.
#: Zero stays allowed where a field's own ``min`` allows it (0 = off / unchecked).
#: Typical ranges, with the hardware at their ends:
#:  MHz: 10 MHz (microcontroller NPUs, e.g. Arm Ethos-U55 at ~50 MHz) .. 6 GHz (the highest
#:       shipping boost clocks; accelerators <= 2.6 GHz);
#:  GB/s: 0.01 (a single low-power serial link) .. 100,000 (on-chip SRAM/L2 fabrics; H100 L2
#:       ~12 TB/s, HBM3e B200 8 TB/s, NVLink 5 1.8 TB/s);
#:  GB: 0.001 .. 10,000 (MI325X 256 GB HBM; host-pooled memories of a few TB);
#:  bytes, KiB, MiB of on-chip storage: up to 64 GiB (Cerebras WSE-3: 44 GB of SRAM);
#:  bits (datapath widths): up to 65,536; B/clock: up to 65,536;
#:  ns: up to 100 us; us: up to 10 ms; ps (DRAM tCK): 100 (GDDR7) .. 10,000 (SDR-era);
#:  W: up to 2,000 per device (B200 TDP 1,000-1,200 W); pJ/bit: up to 100 (DRAM access
#:       3-20 pJ/bit, off-package SerDes 5-10);
#:  counts (rows, SMs, channels, LUTs...): up to 2**24 = 16.8 M (the largest FPGA, AMD
#:       VU19P, has 8.9 M logic cells; WSE-3 has 900 k cores).
UNIT_BOUNDS: dict[str, tuple[float, float, float, float]] = {
    "MHz": (1e-3, 1e6, 10.0, 6000.0),
    "GB/s": (1e-6, 1e12, 0.01, 1e5),
    "GB/s (1e9 bytes/s)": (1e-6, 1e12, 0.01, 1e5),
    "GB": (1e-9, 1e6, 1e-3, 1e4),
    "bytes": (1.0, 2.0**50, 1.0, 2.0**36),
    "KiB": (2.0**-10, 2.0**40, 2.0**-10, 2.0**26),
    "MiB": (2.0**-20, 2.0**30, 2.0**-20, 2.0**16),
    "bits": (1.0, 2.0**20, 1.0, 2.0**16),
    "B/clock": (1.0, 2.0**30, 1.0, 2.0**16),
    "FMA/clock": (1.0, 2.0**40, 1.0, 2.0**24),
    "ns": (1e-6, 1e9, 1e-3, 1e5),
    "us": (1e-6, 1e9, 1e-3, 1e4),
    "ps": (1e-3, 1e9, 100.0, 1e4),
    "W": (1e-9, 1e6, 1e-6, 2000.0),
    "pJ/bit": (1e-6, 1e6, 1e-3, 100.0),
}
#: Unitless integers with a declared ``min`` (counts: rows, SMs, channels): hard max 2**31
#: (two billion of anything on one device is impossible, and products of two counts stay
#: exact in int64); typical max 2**24.
COUNT_BOUNDS = (None, 2.0**31, None, 2.0**24)
#: Unitless floats with a declared ``min`` (ratios, per-op factors): hard max 1e9 keeps
#: products finite; no typical range.
FACTOR_BOUNDS = (None, 1e9, None, None)


def _tight(a: float | None, b: float | None, pick: Any) -> float | None:
    return b if a is None else a if b is None else pick(a, b)


def field_bounds(f: dataclasses.Field, tp: Any = None) -> tuple[float | None, float | None,
                                                                 float | None, float | None]:
    """(hard_lo, hard_hi, typical_lo, typical_hi) of a numeric field: the declared
    ``min``/``max`` tightened by its unit's :data:`UNIT_BOUNDS` (see there); None = open.
    Unitless fields get :data:`COUNT_BOUNDS` / :data:`FACTOR_BOUNDS` only when they declare
    a ``min`` (seeds, offsets and metric limits are not hardware quantities)."""
    md = f.metadata
    unit = md.get("unit") or ""
    lo, hi = md.get("min"), md.get("max")
    bounds: tuple[float | None, ...]
    if unit in UNIT_BOUNDS:
        bounds = UNIT_BOUNDS[unit]
    elif unit == "" and lo is not None:
        bounds = COUNT_BOUNDS if tp is int else FACTOR_BOUNDS
    else:
        bounds = (None, None, None, None)
    hlo, hhi, tlo, thi = bounds
    hard_lo = _tight(lo, hlo, builtins_max)
    hard_hi = _tight(hi, hhi, builtins_min)
    typ = md.get("typical")
    if typ is not None:
        tlo, thi = typ
    return hard_lo, hard_hi, _tight(tlo, hard_lo, builtins_max), _tight(thi, hard_hi,
                                                                         builtins_min)


def spec_fields(cls: type) -> list[tuple[dataclasses.Field, Any]]:
    """(field, resolved type) pairs of a spec dataclass, in declaration order (resolved
    once per class: every config load, every sweep point, builds its specs)."""
    return list(_spec_fields(cls))


@functools.cache
def _spec_fields(cls: type) -> tuple[tuple[dataclasses.Field, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls)
                 if f.init and not f.name.startswith("_"))


def describe_type(tp: Any) -> str:
    """Human name of a field type (``int``, ``list of float``, ``format name``)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is int:
        return "int"
    if tp is float:
        return "number"
    if tp is str:
        return "string"
    if tp is bool:
        return "bool"
    if tp is NumberFormat:
        return "format name"
    if dataclasses.is_dataclass(tp):
        return "mapping"
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return " or ".join(describe_type(a) for a in inner) + " or null"
    if origin is tuple:
        return f"list of {describe_type(args[0])}"
    if origin is dict:
        return f"mapping of string to {describe_type(args[1])}"
    return getattr(tp, "__name__", str(tp))


class SpecBuilder:
    """Collects problems while converting one input file."""

    def __init__(self, file: str | None) -> None:
        self.file = file
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        #: keys written in the file that the unit's model never reads (a spec's ``unused()``)
        self.unused: list[Problem] = []

    def problem(self, msg: str, path: str, container: Any = None, key: Any = None) -> None:
        self.problems.append(Problem(msg, path, self.file, line_of(container, key)))

    # ---- entry point -------------------------------------------------------------------
    def build(self, cls: type, data: Any, path: str = "", container: Any = None,
              key: Any = None) -> Any:
        """Convert ``data`` (a mapping) into ``cls``; returns None if it had problems."""
        if not isinstance(data, dict):
            self.problem(f"expected a mapping, got {_show(data)}", path, container, key)
            return None
        fields = spec_fields(cls)
        names = {f.name for f, _ in fields}
        n_before = len(self.problems)
        for k in data:
            if k not in names:
                self.problem(f"unknown key {k!r}; allowed keys: {', '.join(sorted(names))}",
                             _join(path, str(k)), data, k)
        kwargs: dict[str, Any] = {}
        for f, tp in fields:
            fpath = _join(path, f.name)
            if f.name not in data:
                if f.default is MISSING and f.default_factory is MISSING:
                    self.problem(f"missing required key ({describe_type(tp)}: "
                                 f"{f.metadata.get('doc', '')})", fpath, data, None)
                continue
            value = self.convert(tp, data[f.name], fpath, data, f.name)
            if value is not _BAD:
                self.check_range(f, value, fpath, data, f.name, tp)
                kwargs[f.name] = value
        if len(self.problems) > n_before:
            return None
        try:
            obj = cls(**kwargs)
        except (TypeError, ValueError) as exc:
            self.problem(str(exc), path, container, key)
            return None
        check = getattr(obj, "check", None)
        if callable(check):
            for rel, msg in check():
                c, k = _locate(data, rel)
                self.problem(msg, _join(path, rel), c, k)
        unused = getattr(obj, "unused", None)
        if callable(unused) and len(self.problems) == n_before:
            for rel, msg in unused():
                c, k = _locate(data, rel)
                if _present(data, rel):      # written in the file, not a default
                    self.unused.append(Problem(f"{msg}; ignored", _join(path, rel), self.file,
                                               line_of(c, k)))
        return obj if len(self.problems) == n_before else None

    # ---- values ------------------------------------------------------------------------
    def convert(self, tp: Any, v: Any, path: str, container: Any, key: Any) -> Any:
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin in (typing.Union, types.UnionType):
            if v is None and type(None) in args:
                return None
            inner = [a for a in args if a is not type(None)]
            return self.convert(inner[0], v, path, container, key)
        if tp is bool:
            if isinstance(v, bool):
                return v
            return self._bad("bool (true/false)", v, path, container, key)
        if tp is int:
            if isinstance(v, int) and not isinstance(v, bool):
                return v
            if isinstance(v, float) and v.is_integer() and math.isfinite(v):
                return int(v)
            return self._bad("int", v, path, container, key)
        if tp is float:
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                return float(v)
            return self._bad("number", v, path, container, key)
        if tp is str:
            if isinstance(v, str):
                return v
            return self._bad("string", v, path, container, key)
        if tp is NumberFormat:
            if not isinstance(v, str):
                return self._bad("format name", v, path, container, key)
            try:
                return get_format(v)
            except WorkloadError as exc:
                self.problem(exc.problems[0].message, path, container, key)
                return _BAD
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            out = self.build(tp, v, path, container, key)
            return _BAD if out is None else out
        if origin is tuple:
            if not isinstance(v, list):
                return self._bad(describe_type(tp), v, path, container, key)
            items = [self.convert(args[0], x, f"{path}[{i}]", v, i) for i, x in enumerate(v)]
            return _BAD if any(x is _BAD for x in items) else tuple(items)
        if origin is dict:
            if not isinstance(v, dict):
                return self._bad(describe_type(tp), v, path, container, key)
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    self.problem(f"keys must be strings, got {_show(k)}", path, v, k)
                    return _BAD
                cx = self.convert(args[1], x, _join(path, k), v, k)
                if cx is _BAD:
                    return _BAD
                out[k] = cx
            return types.MappingProxyType(out)
        raise TypeError(f"unsupported spec field type {tp!r} at {path}")  # a program bug

    def check_range(self, f: dataclasses.Field, v: Any, path: str, container: Any, key: Any,
                    tp: Any = None) -> None:
        md = f.metadata
        choices = md.get("choices")
        if choices is not None and v not in choices:
            self.problem(f"expected one of {', '.join(map(str, choices))}, got {_show(v)}",
                         path, container, key)
            return
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return
        lo, hi = md.get("min"), md.get("max")
        unit = f" {md['unit']}" if md.get("unit") else ""
        if lo is not None and (v < lo or (md.get("min_exclusive") and v == lo)):
            op = ">" if md.get("min_exclusive") else ">="
            self.problem(f"expected a value {op} {lo:g}{unit}, got {v:g}", path, container, key)
            return
        if hi is not None and v > hi:
            self.problem(f"expected a value <= {hi:g}{unit}, got {v:g}", path, container, key)
            return
        if v == 0:          # allowed by the declared min: the field's 'off' / 'unset' value
            return
        hlo, hhi, tlo, thi = field_bounds(f, _scalar_type(tp, v))
        if (hlo is not None and v < hlo) or (hhi is not None and v > hhi):
            self.problem(f"{v:g}{unit} is outside any hardware; expected {_range(hlo, hhi)}"
                         f"{unit}", path, container, key)
        elif (tlo is not None and v < tlo) or (thi is not None and v > thi):
            self.warnings.append(Problem(f"{v:g}{unit} is outside the range of real hardware "
                                         f"({_range(tlo, thi)}{unit}); the result may not be "
                                         f"meaningful", path, self.file,
                                         line_of(container, key)))

    def _bad(self, expected: str, v: Any, path: str, container: Any, key: Any) -> Any:
        self.problem(f"expected {expected}, got {_show(v)}", path, container, key)
        return _BAD


_BAD = object()


def _scalar_type(tp: Any, v: Any) -> Any:
    inner = [a for a in typing.get_args(tp) if a is not type(None)] if tp is not None else []
    t = inner[0] if inner else tp
    return t if t in (int, float) else type(v)


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and 1e4 <= abs(x) < 1e16 else f"{x:g}"


def _range(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"{_num(lo)} to {_num(hi)}"
    return f">= {_num(lo)}" if lo is not None else f"<= {_num(hi)}"  # type: ignore[arg-type]


def _show(v: Any) -> str:
    if isinstance(v, (LocDict, dict)):
        return "a mapping"
    if isinstance(v, (LocList, list)):
        return "a list"
    if v is None:
        return "null"
    return repr(v)


_REL_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _locate(data: Any, rel: str) -> tuple[Any, Any]:
    """(container, key) of the deepest node of ``rel`` (``axes[1].key``) present in
    ``data``, so a cross-field problem is reported on the line of the value at fault."""
    container: Any = data
    key: Any = None
    node: Any = data
    for m in _REL_TOKEN.finditer(rel):
        tok: Any = m.group(1) if m.group(1) is not None else int(m.group(2))
        if isinstance(node, dict) and tok in node or (
                isinstance(node, list) and isinstance(tok, int) and 0 <= tok < len(node)):
            container, key, node = node, tok, node[tok]
        else:
            break
    return container, key


def _present(data: Any, rel: str) -> bool:
    """Whether every token of ``rel`` (``memory.preset``) is a key written in ``data``."""
    node: Any = data
    for m in _REL_TOKEN.finditer(rel):
        tok: Any = m.group(1) if m.group(1) is not None else int(m.group(2))
        if isinstance(node, dict) and tok in node:
            node = node[tok]
        elif isinstance(node, list) and isinstance(tok, int) and 0 <= tok < len(node):
            node = node[tok]
        else:
            return False
    return True


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def build(cls: type, data: Any, file: str | None = None, path: str = "") -> tuple[Any, list[Problem]]:
    """Convert ``data`` into ``cls``; returns (instance or None, problems)."""
    b = SpecBuilder(file)
    obj = b.build(cls, data, path)
    return obj, b.problems
