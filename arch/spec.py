"""Strict conversion of loaded YAML into frozen ``*Spec`` dataclasses.

A spec is a frozen dataclass whose fields are declared with :func:`param`, which records
the documentation, unit and allowed range used both for validation and for
``docs/configs.md``. :func:`build` walks the YAML tree (``LocDict``/``LocList`` from
``workloads.yamlio``) against the dataclass's type hints and collects every problem:
unknown keys (listing the allowed ones), missing keys, wrong types, out-of-range values and
the cross-field rules of a spec's optional ``check(self) -> list[tuple[str, str]]``
(relative key path, message). Nothing is silently defaulted for a misspelled key.

Supported field types: ``int``, ``float``, ``str``, ``bool``, ``NumberFormat`` (by name),
nested spec dataclasses, ``tuple[X, ...]``, ``dict[str, X]`` and ``X | None``.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import MISSING, field
from typing import Any

from workloads.errors import Problem, WorkloadError
from workloads.formats import NumberFormat, get_format
from workloads.yamlio import LocDict, LocList, line_of

__all__ = ["param", "build", "SpecBuilder", "spec_fields", "describe_type"]


def param(default: Any = MISSING, *, doc: str, unit: str = "", min: float | None = None,
          max: float | None = None, choices: tuple[Any, ...] | None = None,
          min_exclusive: bool = False, default_factory: Any = MISSING) -> Any:
    """Declare a spec field with its documentation, unit and allowed values.

    Args:
        default: default value (omit for a required key).
        doc: one-line description for ``docs/configs.md``.
        unit: physical unit (``Hz``, ``bytes``, ``GB/s``) or "".
        min, max: inclusive bounds for numbers (``min_exclusive`` makes ``min`` strict).
        choices: the allowed values.
        default_factory: factory for mutable/nested defaults.
    """
    md = {"doc": doc, "unit": unit, "min": min, "max": max, "choices": choices,
          "min_exclusive": min_exclusive}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=md)
    return field(default=default, metadata=md)


def spec_fields(cls: type) -> list[tuple[dataclasses.Field, Any]]:
    """(field, resolved type) pairs of a spec dataclass, in declaration order."""
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")]


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
                self.check_range(f, value, fpath, data, f.name)
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

    def check_range(self, f: dataclasses.Field, v: Any, path: str, container: Any, key: Any) -> None:
        md = f.metadata
        choices = md.get("choices")
        if choices is not None and v not in choices:
            self.problem(f"expected one of {', '.join(map(str, choices))}, got {_show(v)}",
                         path, container, key)
            return
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            lo, hi = md.get("min"), md.get("max")
            if lo is not None and (v < lo or (md.get("min_exclusive") and v == lo)):
                op = ">" if md.get("min_exclusive") else ">="
                self.problem(f"expected a value {op} {lo:g}, got {v:g}", path, container, key)
            elif hi is not None and v > hi:
                self.problem(f"expected a value <= {hi:g}, got {v:g}", path, container, key)

    def _bad(self, expected: str, v: Any, path: str, container: Any, key: Any) -> Any:
        self.problem(f"expected {expected}, got {_show(v)}", path, container, key)
        return _BAD


_BAD = object()


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


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def build(cls: type, data: Any, file: str | None = None, path: str = "") -> tuple[Any, list[Problem]]:
    """Convert ``data`` into ``cls``; returns (instance or None, problems)."""
    b = SpecBuilder(file)
    obj = b.build(cls, data, path)
    return obj, b.problems
